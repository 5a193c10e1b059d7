//! A mutation fuzzer on stable Rust (issue 10): real inputs — the GGUF files and Hugging Face
//! folders of the family fixtures, the header of the offline SmolLM2 GGUF, `.npy`/CSV/JSON Lines
//! features, label, prompts, MMLU (JSON Lines and Parquet), TinyStories and topic files, and a
//! measured `EntropyProfile` — are mutated with a seeded generator (bit flips, truncation, integer
//! fields set to 0 / 1 / max / negative, huge lengths, swapped types, deleted or duplicated keys and
//! tensors) and fed in-process to the loader or parser that a user's file reaches. A model that
//! loads is also run on a short prompt.
//!
//! Every case must end in `Ok` or a typed [`entropy_lens::Error`]: a panic fails the test with the
//! case's number, and an allocation over the cap (one request over 1 GiB, or 6 GiB live) is refused
//! by this binary's allocator, which names the case before the process aborts. A case running over
//! 120 s is reported the same way. Replay one case with `ENTROPY_LENS_FUZZ_CASE=<n>`.
//!
//! `cargo test --release --test fuzz` runs a bounded number of cases (`ENTROPY_LENS_FUZZ_CASES`,
//! default 3000); `scripts/fuzz.sh MINUTES` runs for a time (`ENTROPY_LENS_FUZZ_SECONDS`) from
//! another seed (`ENTROPY_LENS_FUZZ_SEED`).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use entropy_lens::model::{load, LoadOptions, ModelSource};
use entropy_lens::prelude::*;
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// An allocator with a cap: a mutated length must never turn into a giant allocation.

const MAX_ONE_ALLOCATION: usize = 1 << 30;
const MAX_LIVE: usize = 6 << 30;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static CASE: AtomicU64 = AtomicU64::new(u64::MAX);

struct CappedAllocator;

fn over_cap(size: usize) -> bool {
    let live = LIVE.load(Ordering::Relaxed);
    if size <= MAX_ONE_ALLOCATION && live.saturating_add(size) <= MAX_LIVE {
        return false;
    }
    // No allocation here: format into the locked stderr directly.
    let _ = writeln!(
        std::io::stderr(),
        "fuzz: case {} asked for {size} bytes with {live} live (cap {MAX_ONE_ALLOCATION} per allocation, {MAX_LIVE} live); replay with ENTROPY_LENS_FUZZ_CASE={}",
        CASE.load(Ordering::Relaxed),
        CASE.load(Ordering::Relaxed)
    );
    true
}

unsafe impl GlobalAlloc for CappedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if over_cap(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.alloc(layout);
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if over_cap(layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() && over_cap(new_size - layout.size()) {
            return std::ptr::null_mut();
        }
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: CappedAllocator = CappedAllocator;

// ---------------------------------------------------------------------------------------------
// A small seeded generator (SplitMix64): the cases must replay exactly.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Integers a careless or hostile file holds: 0, 1, all ones, negative, sign bits, powers of two.
const INTERESTING: [u64; 12] = [
    0,
    1,
    2,
    7,
    0xFF,
    0x7FFF_FFFF,
    0x8000_0000,
    0xFFFF_FFFF,
    1 << 40,
    0x7FFF_FFFF_FFFF_FFFF,
    0x8000_0000_0000_0000,
    u64::MAX,
];

// ---------------------------------------------------------------------------------------------
// Byte mutations.

fn mutate_bytes(bytes: &mut Vec<u8>, region: usize, rng: &mut Rng) -> String {
    let region = region.clamp(1, bytes.len().max(1));
    if bytes.is_empty() {
        bytes.push(rng.next() as u8);
        return "grow an empty file".into();
    }
    match rng.below(7) {
        0 => {
            let n = 1 + rng.below(8);
            for _ in 0..n {
                let i = rng.below(region);
                bytes[i] ^= 1 << rng.below(8);
            }
            format!("flip {n} bits")
        }
        1 => {
            let at = rng.below(bytes.len());
            bytes.truncate(at);
            format!("truncate at {at}")
        }
        2 => {
            let i = rng.below(region);
            let v = *rng.pick(&[0u8, 0xFF, 0x7F, 0x80, b'"', b'{', b'\n', 0]);
            bytes[i] = v;
            format!("byte {i} = {v:#x}")
        }
        3 => {
            let i = rng.below(region.saturating_sub(8).max(1));
            let v = *rng.pick(&INTERESTING);
            let end = (i + 8).min(bytes.len());
            let le = v.to_le_bytes();
            bytes[i..end].copy_from_slice(&le[..end - i]);
            format!("8 bytes at {i} = {v:#x}")
        }
        4 => {
            let i = rng.below(region);
            let n = 1 + rng.below(64);
            let chunk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            bytes.splice(i..i, chunk);
            format!("insert {n} random bytes at {i}")
        }
        5 => {
            let i = rng.below(region);
            let n = (1 + rng.below(256)).min(bytes.len() - i);
            bytes.drain(i..i + n);
            format!("delete {n} bytes at {i}")
        }
        _ => {
            let i = rng.below(region);
            let n = (1 + rng.below(128)).min(bytes.len() - i);
            let chunk = bytes[i..i + n].to_vec();
            let at = rng.below(region);
            bytes.splice(at..at, chunk);
            format!("duplicate {n} bytes from {i} at {at}")
        }
    }
}

// ---------------------------------------------------------------------------------------------
// JSON mutations: a node of the document is deleted, replaced, retyped or duplicated.

fn interesting_json(rng: &mut Rng) -> Value {
    match rng.below(16) {
        0 => Value::from(0),
        1 => Value::from(1),
        2 => Value::from(-1),
        3 => Value::from(u64::MAX),
        4 => Value::from(i64::MIN),
        5 => Value::from(1u64 << 40),
        6 => serde_json::json!(1e308),
        7 => serde_json::json!(-1e308),
        8 => serde_json::json!(0.5),
        9 => Value::from(""),
        10 => Value::from("x".repeat(1 + rng.below(3000))),
        11 => Value::Null,
        12 => Value::Bool(true),
        13 => serde_json::json!([]),
        14 => serde_json::json!({}),
        _ => Value::from(0xFFFF_FFFFu64),
    }
}

/// Paths to the nodes of `v` (at most a few thousand).
fn json_paths(v: &Value, path: &mut Vec<JsonStep>, out: &mut Vec<Vec<JsonStep>>) {
    if out.len() > 4000 {
        return;
    }
    out.push(path.clone());
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                path.push(JsonStep::Key(k.clone()));
                json_paths(child, path, out);
                path.pop();
            }
        }
        Value::Array(a) => {
            // Long arrays (vocabularies, merges, rows): a sample of their elements.
            let step = (a.len() / 16).max(1);
            for (i, child) in a.iter().enumerate().step_by(step) {
                path.push(JsonStep::Index(i));
                json_paths(child, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum JsonStep {
    Key(String),
    Index(usize),
}

fn node_mut<'a>(v: &'a mut Value, path: &[JsonStep]) -> Option<&'a mut Value> {
    let mut v = v;
    for step in path {
        v = match step {
            JsonStep::Key(k) => v.get_mut(k)?,
            JsonStep::Index(i) => v.get_mut(*i)?,
        };
    }
    Some(v)
}

fn mutate_json_value(doc: &mut Value, rng: &mut Rng) -> String {
    let mut paths = Vec::new();
    json_paths(doc, &mut Vec::new(), &mut paths);
    let path = rng.pick(&paths).clone();
    let what = format!("{path:?}");
    let op = rng.below(6);
    if let (Some((last, parent_path)), true) = (path.split_last(), op < 2) {
        let Some(parent) = node_mut(doc, parent_path) else {
            return "no-op".into();
        };
        match (parent, last) {
            (Value::Object(m), JsonStep::Key(k)) if op == 0 => {
                m.remove(k);
                return format!("delete {what}");
            }
            (Value::Object(m), JsonStep::Key(k)) => {
                if let Some(v) = m.remove(k) {
                    let mut renamed = k.clone();
                    renamed.push('_');
                    m.insert(renamed, v);
                }
                return format!("rename {what}");
            }
            (Value::Array(a), JsonStep::Index(i)) if op == 0 => {
                a.remove(*i);
                return format!("delete {what}");
            }
            (Value::Array(a), JsonStep::Index(i)) => {
                let v = a[*i].clone();
                a.insert(*i, v);
                return format!("duplicate {what}");
            }
            _ => return "no-op".into(),
        }
    }
    let Some(node) = node_mut(doc, &path) else {
        return "no-op".into();
    };
    match op {
        2 | 3 => {
            *node = interesting_json(rng);
            format!("{what} = {}", short(node))
        }
        4 => {
            // Same meaning, other type: 3 → "3", "x" → ["x"].
            *node = match node.take() {
                Value::Number(n) => Value::String(n.to_string()),
                Value::String(s) => Value::Array(vec![Value::String(s)]),
                Value::Bool(b) => Value::from(u8::from(b)),
                Value::Array(a) => a.into_iter().next().unwrap_or(Value::Null),
                Value::Object(m) => Value::Array(m.into_iter().map(|(_, v)| v).collect()),
                Value::Null => Value::from(0),
            };
            format!("retype {what} -> {}", short(node))
        }
        _ => match node {
            Value::Number(n) => {
                let scaled = n.as_f64().unwrap_or(1.0) * *rng.pick(&[-1.0, 2.0, 1e6, 0.0]);
                *node = serde_json::json!(scaled);
                format!("scale {what} -> {}", short(node))
            }
            Value::String(s) => {
                let tails = ["\u{0}", "\u{1b}[2J", "é", "\u{feff}", "{{"];
                let tail = tails[rng.below(tails.len())];
                s.push_str(tail);
                format!("extend string {what}")
            }
            Value::Array(a) => {
                a.clear();
                format!("empty {what}")
            }
            other => {
                *other = interesting_json(rng);
                format!("{what} = {}", short(other))
            }
        },
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(40).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s
    }
}

/// Mutates a JSON text: structurally when it parses, else (or sometimes) as bytes.
fn mutate_json_text(text: &[u8], rng: &mut Rng) -> (Vec<u8>, String) {
    if let (Ok(mut doc), false) = (serde_json::from_slice::<Value>(text), rng.chance(4)) {
        let mut what = Vec::new();
        for _ in 0..1 + rng.below(2) {
            what.push(mutate_json_value(&mut doc, rng));
        }
        return (doc.to_string().into_bytes(), what.join("; "));
    }
    let mut bytes = text.to_vec();
    let what = mutate_bytes(&mut bytes, text.len(), rng);
    (bytes, what)
}

/// Mutates a JSON Lines text: one line structurally, or the bytes.
fn mutate_jsonl_text(text: &[u8], rng: &mut Rng) -> (Vec<u8>, String) {
    let s = String::from_utf8_lossy(text);
    let mut lines: Vec<String> = s.lines().map(str::to_string).collect();
    if lines.is_empty() || rng.chance(3) {
        let mut bytes = text.to_vec();
        let what = mutate_bytes(&mut bytes, text.len(), rng);
        return (bytes, what);
    }
    let i = rng.below(lines.len());
    let (line, what) = mutate_json_text(lines[i].as_bytes(), rng);
    lines[i] = String::from_utf8_lossy(&line).into_owned();
    if rng.chance(4) {
        lines.truncate(i + 1);
    }
    (
        lines.join("\n").into_bytes(),
        format!("line {}: {what}", i + 1),
    )
}

// ---------------------------------------------------------------------------------------------
// GGUF, parsed into its fields so that mutations hit meaningful places.

struct Kv {
    key: Vec<u8>,
    ty: u32,
    value: Vec<u8>,
}

struct TensorInfo {
    name: Vec<u8>,
    dims: Vec<u64>,
    n_dims: u32,
    dtype: u32,
    offset: u64,
}

struct Gguf {
    version: u32,
    kvs: Vec<Kv>,
    tensors: Vec<TensorInfo>,
    /// Header counts written (they may lie).
    kv_count: Option<u64>,
    tensor_count: Option<u64>,
    alignment: usize,
    /// Tensor data (the file's bytes after the aligned header).
    data: Vec<u8>,
    /// Length of the data when it is not held (the real GGUF: zeros are written sparsely).
    data_len: u64,
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn string(&mut self) -> Option<Vec<u8>> {
        let n = usize::try_from(self.u64()?).ok()?;
        Some(self.take(n)?.to_vec())
    }
    fn skip_value(&mut self, ty: u32) -> Option<()> {
        match ty {
            0 | 1 | 7 => self.take(1).map(|_| ()),
            2 | 3 => self.take(2).map(|_| ()),
            4..=6 => self.take(4).map(|_| ()),
            10..=12 => self.take(8).map(|_| ()),
            8 => self.string().map(|_| ()),
            9 => {
                let inner = self.u32()?;
                let n = self.u64()?;
                for _ in 0..n {
                    self.skip_value(inner)?;
                }
                Some(())
            }
            _ => None,
        }
    }
}

impl Gguf {
    /// Parses a GGUF v3 file whose header ends within `bytes` (the data may be absent).
    fn parse(bytes: &[u8], file_len: u64, keep_data: bool) -> Gguf {
        let mut c = Cursor { b: bytes, at: 0 };
        assert_eq!(c.take(4), Some(&b"GGUF"[..]));
        let version = c.u32().unwrap();
        assert_eq!(version, 3, "the fixtures are GGUF v3");
        let n_tensors = c.u64().unwrap();
        let n_kvs = c.u64().unwrap();
        let mut kvs = Vec::new();
        let mut alignment = 32;
        for _ in 0..n_kvs {
            let key = c.string().unwrap();
            let ty = c.u32().unwrap();
            let start = c.at;
            c.skip_value(ty).unwrap();
            let value = bytes[start..c.at].to_vec();
            if key == b"general.alignment" && ty == 4 {
                alignment = u32::from_le_bytes(value[..4].try_into().unwrap()) as usize;
            }
            kvs.push(Kv { key, ty, value });
        }
        let mut tensors = Vec::new();
        for _ in 0..n_tensors {
            let name = c.string().unwrap();
            let n_dims = c.u32().unwrap();
            let dims = (0..n_dims).map(|_| c.u64().unwrap()).collect();
            let dtype = c.u32().unwrap();
            let offset = c.u64().unwrap();
            tensors.push(TensorInfo {
                name,
                dims,
                n_dims,
                dtype,
                offset,
            });
        }
        let data_start = c.at.div_ceil(alignment) * alignment;
        let data = if keep_data {
            bytes[data_start..].to_vec()
        } else {
            Vec::new()
        };
        Gguf {
            version,
            kvs,
            tensors,
            kv_count: None,
            tensor_count: None,
            alignment,
            data,
            data_len: file_len - data_start as u64,
        }
    }

    /// Writes the (mutated) file; tensor data not held is left as zeros (a sparse file).
    fn write(&self, path: &Path) {
        let mut h = Vec::new();
        h.extend_from_slice(b"GGUF");
        h.extend_from_slice(&self.version.to_le_bytes());
        h.extend_from_slice(
            &self
                .tensor_count
                .unwrap_or(self.tensors.len() as u64)
                .to_le_bytes(),
        );
        h.extend_from_slice(&self.kv_count.unwrap_or(self.kvs.len() as u64).to_le_bytes());
        for kv in &self.kvs {
            h.extend_from_slice(&(kv.key.len() as u64).to_le_bytes());
            h.extend_from_slice(&kv.key);
            h.extend_from_slice(&kv.ty.to_le_bytes());
            h.extend_from_slice(&kv.value);
        }
        for t in &self.tensors {
            h.extend_from_slice(&(t.name.len() as u64).to_le_bytes());
            h.extend_from_slice(&t.name);
            h.extend_from_slice(&t.n_dims.to_le_bytes());
            for d in &t.dims {
                h.extend_from_slice(&d.to_le_bytes());
            }
            h.extend_from_slice(&t.dtype.to_le_bytes());
            h.extend_from_slice(&t.offset.to_le_bytes());
        }
        let aligned = h.len().div_ceil(self.alignment) * self.alignment;
        h.resize(aligned, 0);
        h.extend_from_slice(&self.data);
        let f = std::fs::File::create(path).unwrap();
        (&f).write_all(&h).unwrap();
        if self.data.is_empty() {
            f.set_len(aligned as u64 + self.data_len).unwrap();
        }
    }

    fn mutate(&mut self, rng: &mut Rng) -> String {
        let n_kv = self.kvs.len();
        let n_t = self.tensors.len();
        match rng.below(14) {
            0 | 1 => {
                // An integer-valued key (counts, lengths, ids) set to an interesting value.
                let ints: Vec<usize> = (0..n_kv)
                    .filter(|&i| matches!(self.kvs[i].ty, 0..=5 | 10 | 11))
                    .collect();
                if ints.is_empty() {
                    return "no-op".into();
                }
                let kv = &mut self.kvs[*rng.pick(&ints)];
                let v = *rng.pick(&INTERESTING);
                // An earlier mutation may have retyped the key: write what fits.
                let w = kv.value.len().min(8);
                kv.value[..w].copy_from_slice(&v.to_le_bytes()[..w]);
                format!("{} = {v:#x}", String::from_utf8_lossy(&kv.key))
            }
            2 => {
                let floats: Vec<usize> = (0..n_kv)
                    .filter(|&i| matches!(self.kvs[i].ty, 6 | 12))
                    .collect();
                if floats.is_empty() {
                    return "no-op".into();
                }
                let kv = &mut self.kvs[*rng.pick(&floats)];
                let v = *rng.pick(&[f64::NAN, f64::INFINITY, -1.0, 0.0, 1e30, -1e-30]);
                if kv.ty == 6 && kv.value.len() >= 4 {
                    kv.value[..4].copy_from_slice(&(v as f32).to_le_bytes());
                } else if kv.value.len() >= 8 {
                    kv.value[..8].copy_from_slice(&v.to_le_bytes());
                }
                format!("{} = {v}", String::from_utf8_lossy(&kv.key))
            }
            3 => {
                let i = rng.below(n_kv);
                let kv = self.kvs.remove(i);
                format!("delete key {}", String::from_utf8_lossy(&kv.key))
            }
            4 => {
                let i = rng.below(n_kv);
                let ty = *rng.pick(&[0u32, 4, 5, 6, 7, 8, 9, 10, 12, 13, 0xFFFF_FFFF]);
                self.kvs[i].ty = ty;
                format!(
                    "retype key {} to {ty}",
                    String::from_utf8_lossy(&self.kvs[i].key)
                )
            }
            5 => {
                // A string's or an array's length field.
                let lens: Vec<usize> = (0..n_kv)
                    .filter(|&i| matches!(self.kvs[i].ty, 8 | 9))
                    .collect();
                if lens.is_empty() {
                    return "no-op".into();
                }
                let kv = &mut self.kvs[*rng.pick(&lens)];
                let at = if kv.ty == 8 { 0 } else { 4 };
                if kv.value.len() < at + 8 {
                    // Retyped by an earlier mutation: no length field here.
                    return "no-op".into();
                }
                let old = u64::from_le_bytes(kv.value[at..at + 8].try_into().unwrap());
                let v = *rng.pick(&[
                    0,
                    1,
                    old.saturating_sub(1),
                    old + 1,
                    old * 2,
                    1 << 32,
                    u64::MAX,
                ]);
                kv.value[at..at + 8].copy_from_slice(&v.to_le_bytes());
                format!(
                    "length of {} {old} -> {v}",
                    String::from_utf8_lossy(&kv.key)
                )
            }
            6 => {
                // An array's element type.
                let arrays: Vec<usize> = (0..n_kv).filter(|&i| self.kvs[i].ty == 9).collect();
                if arrays.is_empty() {
                    return "no-op".into();
                }
                let kv = &mut self.kvs[*rng.pick(&arrays)];
                if kv.value.len() < 4 {
                    return "no-op".into();
                }
                let ty = *rng.pick(&[0u32, 4, 5, 6, 8, 9, 12, 99]);
                kv.value[..4].copy_from_slice(&ty.to_le_bytes());
                format!(
                    "element type of {} -> {ty}",
                    String::from_utf8_lossy(&kv.key)
                )
            }
            7 => {
                let i = rng.below(n_kv);
                let kv = Kv {
                    key: self.kvs[i].key.clone(),
                    ty: 4,
                    value: (rng.next() as u32).to_le_bytes().to_vec(),
                };
                let what = format!("duplicate key {} as u32", String::from_utf8_lossy(&kv.key));
                self.kvs.push(kv);
                what
            }
            8 => {
                let t = &mut self.tensors[rng.below(n_t)];
                if t.dims.is_empty() {
                    return "no-op".into();
                }
                let d = rng.below(t.dims.len());
                let v = *rng.pick(&[0, 1, t.dims[d] * 2, t.dims[d] + 1, 1 << 32, u64::MAX]);
                t.dims[d] = v;
                format!("{} dim {d} = {v}", String::from_utf8_lossy(&t.name))
            }
            9 => {
                let t = &mut self.tensors[rng.below(n_t)];
                let v = *rng.pick(&[0u32, 1, 3, 5, 0xFFFF_FFFF]);
                t.n_dims = v;
                format!("{} n_dims = {v}", String::from_utf8_lossy(&t.name))
            }
            10 => {
                let t = &mut self.tensors[rng.below(n_t)];
                let v = rng.below(45) as u32;
                t.dtype = v;
                format!("{} dtype = {v}", String::from_utf8_lossy(&t.name))
            }
            11 => {
                let t = &mut self.tensors[rng.below(n_t)];
                let v = *rng.pick(&[1, t.offset + 1, t.offset + 32, 1 << 40, u64::MAX]);
                t.offset = v;
                format!("{} offset = {v}", String::from_utf8_lossy(&t.name))
            }
            12 => {
                let i = rng.below(n_t);
                if rng.chance(2) {
                    let t = self.tensors.remove(i);
                    format!("delete tensor {}", String::from_utf8_lossy(&t.name))
                } else {
                    let j = rng.below(n_t);
                    let name = std::mem::take(&mut self.tensors[i].name);
                    self.tensors[i].name = std::mem::replace(&mut self.tensors[j].name, name);
                    format!("swap tensor names {i} and {j}")
                }
            }
            _ => {
                let v = *rng.pick(&INTERESTING);
                if rng.chance(2) {
                    self.kv_count = Some(v);
                    format!("metadata count = {v:#x}")
                } else {
                    self.tensor_count = Some(v);
                    format!("tensor count = {v:#x}")
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Targets: an input, how it is mutated, and the function a user's file reaches.

fn fixtures() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("tests/fixtures")
}

/// Loads a model and, when that works, profiles a short prompt with every statistic.
fn load_and_run(source: ModelSource) -> entropy_lens::Result<()> {
    let loaded = load(&source, &LoadOptions::cpu())?;
    let spec = StatSpec {
        alphas: vec![0.5, 2.0, f64::INFINITY],
        top_p_ids: true,
        top_p_overlap: true,
        ..StatSpec::default()
    };
    let mut profiler = Profiler::new(loaded, spec)?;
    let req = ProfileRequest::new("Once upon a time")
        .generate(2)
        .all_positions(true)
        .include_embed(true);
    let p = profiler.run(&req)?;
    p.validate()?;
    Ok(())
}

/// A parser a user's data file reaches.
type Parser = fn(&Path) -> entropy_lens::Result<()>;

enum Input {
    /// A GGUF file mutated through its fields or bytes, then loaded and run.
    Gguf {
        original: Vec<u8>,
        file_len: u64,
        /// Only the header is held; the data is written as zeros (the 100 MB real model).
        header_only: bool,
    },
    /// One file of a Hugging Face folder (a private copy), mutated; then the folder is loaded and
    /// run, and the file restored.
    HfFile {
        folder: PathBuf,
        file: &'static str,
        original: Vec<u8>,
    },
    /// A data file given to a parser.
    Data {
        original: Vec<u8>,
        file: &'static str,
        parse: Parser,
        kind: DataKind,
    },
}

#[derive(Clone, Copy)]
enum DataKind {
    Binary,
    Text,
    Json,
    JsonLines,
}

struct Target {
    name: String,
    input: Input,
    /// Share of the bounded run's cases (the real GGUF costs a full load).
    weight: usize,
}

fn gguf_targets(out: &mut Vec<Target>) {
    for family in ["qwen2", "qwen3", "gemma2", "phi3", "gpt2"] {
        let path = fixtures().join(format!("families/{family}.gguf"));
        let original = std::fs::read(&path).unwrap();
        out.push(Target {
            name: format!("gguf {family} (tiny)"),
            input: Input::Gguf {
                file_len: original.len() as u64,
                original,
                header_only: false,
            },
            weight: 40,
        });
    }
    // The real SmolLM2 GGUF: its header (vocabulary, merges, hyper-parameters) is mutated; the
    // 100 MB of weights are written as zeros, sparsely.
    let real = common::smollm2();
    let file_len = std::fs::metadata(&real).unwrap().len();
    let mut head = vec![0u8; 16 << 20];
    let mut f = std::fs::File::open(&real).unwrap();
    std::io::Read::read_exact(&mut f, &mut head).unwrap();
    out.push(Target {
        name: "gguf SmolLM2-135M (real header)".into(),
        input: Input::Gguf {
            original: head,
            file_len,
            header_only: true,
        },
        weight: 1,
    });
}

fn hf_targets(scratch: &Path, out: &mut Vec<Target>) {
    let files: &[(&str, &[&'static str])] = &[
        (
            "qwen2",
            &[
                "config.json",
                "tokenizer.json",
                "model.safetensors",
                "tokenizer_config.json",
            ],
        ),
        (
            "gemma2",
            &[
                "config.json",
                "model.safetensors.index.json",
                "model-00002-of-00003.safetensors",
                "generation_config.json",
            ],
        ),
        ("phi3", &["config.json", "model.safetensors"]),
        (
            "gpt2",
            &["config.json", "tokenizer.json", "model.safetensors"],
        ),
    ];
    for (family, names) in files {
        let src = fixtures().join("families").join(family);
        let folder = scratch.join(family);
        std::fs::create_dir_all(&folder).unwrap();
        for e in std::fs::read_dir(&src).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), folder.join(e.file_name())).unwrap();
        }
        for &file in *names {
            out.push(Target {
                name: format!("hf {family} {file}"),
                input: Input::HfFile {
                    folder: folder.clone(),
                    file,
                    original: std::fs::read(folder.join(file)).unwrap(),
                },
                weight: 25,
            });
        }
    }
}

fn npy(rows: usize, cols: usize, values: &[f64]) -> Vec<u8> {
    let mut header =
        format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(header.len() as u16).to_le_bytes());
    b.extend_from_slice(header.as_bytes());
    for v in values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

fn data_targets(profile_json: &str, out: &mut Vec<Target>) {
    let p = EntropyProfile::from_json(profile_json).unwrap();
    let x = p.shannon_matrix().unwrap();
    let (n, l) = x.dim();
    let values: Vec<f64> = x.iter().copied().collect();
    let csv: String = x
        .rows()
        .into_iter()
        .map(|r| {
            r.iter()
                .map(|v| format!("{v}"))
                .collect::<Vec<_>>()
                .join(",")
                + "\n"
        })
        .collect();
    let jsonl: String = x
        .rows()
        .into_iter()
        .map(|r| serde_json::to_string(&r.to_vec()).unwrap() + "\n")
        .collect();
    let labels: String = (0..n).map(|i| format!("class{}\n", i % 3)).collect();
    let prompts: String = [
        "Once upon a time",
        "The capital of France is",
        "",
        "1, 2, 3, 4,",
        "Écrire un poème",
    ]
    .iter()
    .map(|t| serde_json::json!({ "prompt": t }).to_string() + "\n")
    .collect();
    let repo = fixtures().join("..").join("..");
    let mmlu: String = std::fs::read_to_string(repo.join("data/mmlu_test_sample.jsonl"))
        .unwrap()
        .lines()
        .take(12)
        .map(|l| format!("{l}\n"))
        .collect();
    let stories: String = std::fs::read_to_string(repo.join("data/tinystories_valid_sample.jsonl"))
        .unwrap()
        .lines()
        .take(6)
        .map(|l| format!("{l}\n"))
        .collect();
    let topics = std::fs::read(repo.join("data/topics.txt")).unwrap();
    let parquet = std::fs::read(fixtures().join("mmlu/dev-00000-of-00001.parquet")).unwrap();
    assert!(
        n > 1 && l > 1,
        "a profile with several positions and blocks"
    );

    fn parse_features(path: &Path) -> entropy_lens::Result<()> {
        let x = entropy_lens::data::read_features(path)?;
        // What classify does next with a matrix that was read without complaint.
        let labels: Vec<String> = (0..x.nrows()).map(|i| format!("c{}", i % 2)).collect();
        let labels = entropy_lens::analysis::Labels::encode(&labels);
        let cfg = entropy_lens::analysis::KnnCvConfig {
            k: 1,
            folds: 2,
            ..Default::default()
        };
        entropy_lens::analysis::knn_cross_validate(x.view(), &labels, &cfg).map(|_| ())
    }
    fn parse_labels(path: &Path) -> entropy_lens::Result<()> {
        entropy_lens::data::read_labels(path).map(|_| ())
    }
    fn parse_prompts(path: &Path) -> entropy_lens::Result<()> {
        entropy_lens::cli::read_prompts(path).map(|_| ())
    }
    fn parse_mmlu(path: &Path) -> entropy_lens::Result<()> {
        let q = entropy_lens::data::mmlu_questions::load(path)?;
        for style in entropy_lens::data::mmlu_questions::PromptStyle::ALL {
            for question in &q {
                let _ = style.prompt(question);
            }
        }
        entropy_lens::data::mmlu_questions::stratified_sample(&q, 4, 42).map(|_| ())
    }
    fn parse_stories(path: &Path) -> entropy_lens::Result<()> {
        let s = entropy_lens::data::tinystories::load_stories(path)?;
        entropy_lens::data::tinystories::task_prompts(&s, 2, 42).map(|_| ())
    }
    fn parse_topics(path: &Path) -> entropy_lens::Result<()> {
        let t = entropy_lens::data::topics::load_topics(path)?;
        entropy_lens::data::topics::format_prompts(&t, 2).map(|_| ())
    }
    fn parse_profile(path: &Path) -> entropy_lens::Result<()> {
        let text = std::fs::read_to_string(path).map_err(|e| entropy_lens::Error::io(path, e))?;
        let p = EntropyProfile::from_json(&text)?;
        // Everything that indexes a profile read back.
        let x = p.shannon_matrix()?;
        let _ = p.top_p_matrix()?;
        for alpha in [0.5, 2.0, f64::INFINITY] {
            let _ = p.renyi_matrix(alpha);
        }
        let _ = entropy_lens::cli::render_table(&p);
        if !p.is_empty() {
            use entropy_lens::profile::Aggregation;
            for how in [
                Aggregation::Concat,
                Aggregation::Mean,
                Aggregation::Windows(2),
            ] {
                let _ = entropy_lens::profile::aggregate(x.view(), how);
            }
            use entropy_lens::plots::HeatMetric;
            for metric in [
                HeatMetric::Shannon,
                HeatMetric::Renyi(0.5),
                HeatMetric::TopPCount,
            ] {
                let _ = entropy_lens::plots::entropy_heatmap(&p, None, metric);
                let _ = entropy_lens::plots::profile_lines(&p, None, metric);
            }
            let _ = entropy_lens::plots::renyi_lines(&p, 0);
            let _ = entropy_lens::plots::delta_bars(&p, p.len() - 1);
        }
        Ok(())
    }

    let data: Vec<(&str, &'static str, Vec<u8>, Parser, DataKind)> = vec![
        (
            "features .npy",
            "x.npy",
            npy(n, l, &values),
            parse_features,
            DataKind::Binary,
        ),
        (
            "features .csv",
            "x.csv",
            csv.into_bytes(),
            parse_features,
            DataKind::Text,
        ),
        (
            "features .jsonl",
            "x.jsonl",
            jsonl.into_bytes(),
            parse_features,
            DataKind::JsonLines,
        ),
        (
            "labels",
            "y.txt",
            labels.into_bytes(),
            parse_labels,
            DataKind::Text,
        ),
        (
            "prompts .jsonl",
            "p.jsonl",
            prompts.into_bytes(),
            parse_prompts,
            DataKind::JsonLines,
        ),
        (
            "mmlu .jsonl",
            "m.jsonl",
            mmlu.into_bytes(),
            parse_mmlu,
            DataKind::JsonLines,
        ),
        (
            "mmlu .parquet",
            "m.parquet",
            parquet,
            parse_mmlu,
            DataKind::Binary,
        ),
        (
            "tinystories .jsonl",
            "s.jsonl",
            stories.into_bytes(),
            parse_stories,
            DataKind::JsonLines,
        ),
        ("topics .txt", "t.txt", topics, parse_topics, DataKind::Text),
        (
            "profile .json",
            "profile.json",
            profile_json.as_bytes().to_vec(),
            parse_profile,
            DataKind::Json,
        ),
    ];
    for (name, file, original, parse, kind) in data {
        out.push(Target {
            name: name.into(),
            input: Input::Data {
                original,
                file,
                parse,
                kind,
            },
            weight: 60,
        });
    }
}

/// A measured profile of the tiny GPT-2 with every optional field, as the CLI writes it.
fn real_profile() -> String {
    let folder = fixtures().join("families/gpt2");
    let loaded = load(&ModelSource::HfFolder(folder), &LoadOptions::cpu()).unwrap();
    let spec = StatSpec {
        alphas: vec![0.5, 2.0, f64::INFINITY],
        top_p_ids: true,
        top_p_overlap: true,
        ..StatSpec::default()
    };
    let mut profiler = Profiler::new(loaded, spec).unwrap();
    let req = ProfileRequest::new("Once upon a time there was")
        .generate(3)
        .all_positions(true)
        .include_embed(true);
    profiler.run(&req).unwrap().to_json_line().unwrap()
}

// ---------------------------------------------------------------------------------------------
// One case.

/// How a case ended.
enum Outcome {
    Ok,
    Error(String),
}

fn mutate_safetensors(original: &[u8], rng: &mut Rng) -> (Vec<u8>, String) {
    let n = u64::from_le_bytes(original[..8].try_into().unwrap()) as usize;
    let header = &original[8..8 + n];
    let data = &original[8 + n..];
    match rng.below(5) {
        0..=2 => {
            let (h, what) = mutate_json_text(header, rng);
            let mut b = (h.len() as u64).to_le_bytes().to_vec();
            b.extend_from_slice(&h);
            b.extend_from_slice(data);
            (b, format!("header: {what}"))
        }
        3 => {
            let mut b = original.to_vec();
            let v = *rng.pick(&[0u64, 1, n as u64 - 1, n as u64 + 1, 1 << 40, u64::MAX]);
            b[..8].copy_from_slice(&v.to_le_bytes());
            (b, format!("header length = {v}"))
        }
        _ => {
            let mut b = original.to_vec();
            let what = mutate_bytes(&mut b, 8 + n, rng);
            (b, what)
        }
    }
}

fn run_case(target: &Target, seed: u64, scratch: &Path) -> (String, Outcome) {
    let mut rng = Rng(seed);
    let mutations = 1 + rng.below(3);
    let mut what = Vec::new();
    let result = match &target.input {
        Input::Gguf {
            original,
            file_len,
            header_only,
        } => {
            let path = scratch.join("case.gguf");
            if rng.chance(4) && !header_only {
                // Raw bytes, mostly in the header.
                let mut b = original.clone();
                let header = Gguf::parse(original, *file_len, true);
                let region = original.len() - header.data.len();
                for _ in 0..mutations {
                    what.push(mutate_bytes(&mut b, region, &mut rng));
                }
                std::fs::write(&path, &b).unwrap();
            } else {
                let mut g = Gguf::parse(original, *file_len, !header_only);
                for _ in 0..mutations {
                    what.push(g.mutate(&mut rng));
                }
                g.write(&path);
            }
            noting(&what);
            load_and_run(ModelSource::Gguf(path))
        }
        Input::HfFile {
            folder,
            file,
            original,
        } => {
            let (bytes, w) = if file.ends_with(".safetensors") {
                mutate_safetensors(original, &mut rng)
            } else {
                mutate_json_text(original, &mut rng)
            };
            what.push(w);
            let path = folder.join(file);
            std::fs::write(&path, bytes).unwrap();
            noting(&what);
            let r = load_and_run(ModelSource::HfFolder(folder.clone()));
            std::fs::write(&path, original).unwrap();
            r
        }
        Input::Data {
            original,
            file,
            parse,
            kind,
        } => {
            let mut bytes = original.clone();
            for _ in 0..mutations {
                let (b, w) = match kind {
                    DataKind::Json => mutate_json_text(&bytes, &mut rng),
                    DataKind::JsonLines => mutate_jsonl_text(&bytes, &mut rng),
                    DataKind::Text | DataKind::Binary => {
                        let mut b = bytes.clone();
                        // .npy: its header is where the meaning is.
                        let region = if file.ends_with(".npy") && rng.chance(2) {
                            128
                        } else {
                            b.len()
                        };
                        let w = mutate_bytes(&mut b, region, &mut rng);
                        (b, w)
                    }
                };
                bytes = b;
                what.push(w);
            }
            let path = scratch.join(file);
            std::fs::write(&path, &bytes).unwrap();
            noting(&what);
            parse(&path)
        }
    };
    let outcome = match result {
        Ok(()) => Outcome::Ok,
        Err(e) => Outcome::Error(e.to_string()),
    };
    (what.join("; "), outcome)
}

// ---------------------------------------------------------------------------------------------
// The run.

static LAST_PANIC: Mutex<String> = Mutex::new(String::new());
/// The mutations of the case being run (for the report of a panic).
static LAST_MUTATION: Mutex<String> = Mutex::new(String::new());

fn noting(what: &[String]) {
    *LAST_MUTATION.lock().unwrap_or_else(|e| e.into_inner()) = what.join("; ");
}

#[derive(Default)]
struct Tally {
    cases: usize,
    ok: usize,
    errors: usize,
    messages: BTreeMap<String, usize>,
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn mutated_inputs_end_in_a_result_or_a_typed_error() {
    let seed = env_u64("ENTROPY_LENS_FUZZ_SEED").unwrap_or(0x5EED);
    let seconds = env_u64("ENTROPY_LENS_FUZZ_SECONDS");
    let max_cases = env_u64("ENTROPY_LENS_FUZZ_CASES").unwrap_or(3000) as usize;
    let only = env_u64("ENTROPY_LENS_FUZZ_CASE");

    let scratch = tempfile::tempdir().unwrap();
    // Digests of the thousands of temporary models go to a scratch cache, not the user's.
    std::env::set_var("ENTROPY_LENS_CACHE", scratch.path().join("cache"));
    let profile_json = real_profile();
    let mut targets = Vec::new();
    gguf_targets(&mut targets);
    hf_targets(scratch.path(), &mut targets);
    data_targets(&profile_json, &mut targets);
    // Case n goes to target schedule[n % len]: each target as often as its weight says.
    let schedule: Vec<usize> = targets
        .iter()
        .enumerate()
        .flat_map(|(i, t)| std::iter::repeat_n(i, t.weight))
        .collect();

    std::panic::set_hook(Box::new(|info| {
        let mut last = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner());
        *last = info.to_string();
    }));
    // A watchdog: a case that hangs is a finding too.
    let started_case = std::sync::Arc::new(AtomicU64::new(0));
    let clock = Instant::now();
    {
        let started_case = started_case.clone();
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_secs(5));
            let since = clock.elapsed().as_secs() - started_case.load(Ordering::Relaxed);
            if since > 120 {
                let _ = writeln!(
                    std::io::stderr(),
                    "fuzz: case {} has run for {since} s; replay with ENTROPY_LENS_FUZZ_CASE={}",
                    CASE.load(Ordering::Relaxed),
                    CASE.load(Ordering::Relaxed)
                );
                std::process::abort();
            }
        });
    }

    let mut tallies: Vec<Tally> = targets.iter().map(|_| Tally::default()).collect();
    let mut failures = Vec::new();
    let cases: Box<dyn Iterator<Item = u64>> = match only {
        Some(n) => Box::new(std::iter::once(n)),
        None => Box::new(0..),
    };
    for n in cases {
        let done = match seconds {
            Some(s) => clock.elapsed().as_secs() >= s,
            None => n as usize >= max_cases,
        };
        if done && only.is_none() {
            break;
        }
        let t = schedule[n as usize % schedule.len()];
        CASE.store(n, Ordering::Relaxed);
        started_case.store(clock.elapsed().as_secs(), Ordering::Relaxed);
        let case_seed = seed ^ n.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let tally = &mut tallies[t];
        tally.cases += 1;
        match catch_unwind(AssertUnwindSafe(|| {
            run_case(&targets[t], case_seed, scratch.path())
        })) {
            Ok((what, Outcome::Ok)) => {
                tally.ok += 1;
                if only.is_some() {
                    println!("case {n} ({}, {what}): loaded", targets[t].name);
                }
            }
            Ok((what, Outcome::Error(msg))) => {
                if only.is_some() {
                    println!("case {n} ({}, {what}): error: {msg}", targets[t].name);
                }
                tally.errors += 1;
                // Messages by their first words, to see what was caught.
                let head: String = msg.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
                *tally.messages.entry(head).or_default() += 1;
                if msg.trim().is_empty() {
                    failures.push(format!(
                        "case {n} ({}): an empty error message",
                        targets[t].name
                    ));
                }
            }
            Err(_) => {
                // The panic may have left a mutated file in a model folder.
                for target in &targets {
                    if let Input::HfFile {
                        folder,
                        file,
                        original,
                    } = &target.input
                    {
                        std::fs::write(folder.join(file), original).unwrap();
                    }
                }
                let msg = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let what = LAST_MUTATION
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                failures.push(format!(
                    "case {n} ({}, {what}): panic: {msg}; replay with ENTROPY_LENS_FUZZ_CASE={n}",
                    targets[t].name
                ));
            }
        }
        if only.is_some() {
            break;
        }
    }
    let _ = std::panic::take_hook();

    let mut report = format!(
        "{:<36} {:>6} {:>6} {:>7}  most frequent errors\n",
        "input", "cases", "loaded", "errors"
    );
    for (t, tally) in targets.iter().zip(&tallies) {
        let mut top: Vec<(&String, &usize)> = tally.messages.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1));
        let top: Vec<String> = top
            .iter()
            .take(2)
            .map(|(m, c)| format!("{c}× {m}…"))
            .collect();
        report.push_str(&format!(
            "{:<36} {:>6} {:>6} {:>7}  {}\n",
            t.name,
            tally.cases,
            tally.ok,
            tally.errors,
            top.join(" | ")
        ));
    }
    let total: usize = tallies.iter().map(|t| t.cases).sum();
    report.push_str(&format!(
        "{total} cases in {:.1} s (seed {seed:#x}), {} failures\n",
        clock.elapsed().as_secs_f64(),
        failures.len()
    ));
    println!("{report}");
    if let Ok(path) = std::env::var("ENTROPY_LENS_FUZZ_REPORT") {
        std::fs::write(path, &report).unwrap();
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The mutations must reach past the parsers: some mutated models still load and run.
    let loaded: usize = targets
        .iter()
        .zip(&tallies)
        .filter(|(t, _)| !matches!(t.input, Input::Data { .. }))
        .map(|(_, tally)| tally.ok)
        .sum();
    assert!(
        only.is_some() || loaded > 0,
        "no mutated model loaded: the mutations are too blunt"
    );
}
