//! An experiment's output folder:
//!
//! ```text
//! config.json     the configuration, its sha256, and the run context (paths, device, shard)
//! records.jsonl   one line per finished work item (appended, fsynced)
//! profiles.npy    float64, items × features, in item order        ┐
//! index.json      ids, labels and the feature layout of each row   │ written by `finish`
//! result.json     the experiment's result (deterministic)          │
//! report.html     tables and charts, offline                       ┘
//! run.log         timings and events (everything not deterministic)
//! ```
//!
//! Crash safety: a record is one `write` of a whole line followed by `fsync`; on resume, anything
//! after the last newline (a torn write, or the zeros a power loss can leave) is cut off and that
//! item is redone. Result files are written to a temporary name and renamed into place.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::choice::Answer;
use super::settings::ExperimentConfig;
use crate::error::{Error, Result};
use crate::profile::EntropyProfile;

pub const CONFIG_FILE: &str = "config.json";
pub const RECORDS_FILE: &str = "records.jsonl";
pub const PROFILES_FILE: &str = "profiles.npy";
pub const INDEX_FILE: &str = "index.json";
pub const RESULT_FILE: &str = "result.json";
pub const REPORT_FILE: &str = "report.html";
pub const LOG_FILE: &str = "run.log";

/// A deterministic slice of the work items. Items are cut into batches of the run's batch size
/// (items 0..b, b..2b, …), and batch k belongs to shard k mod count + 1: a shard measures each of its
/// batches exactly as the unsharded run does (batched profiles depend on a batch's composition in
/// the last bits), so merged shards give the unsharded bytes. Items are class-interleaved, so every
/// shard still gets a mix of classes. With batches of one item, item i belongs to shard
/// i mod count + 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1..=count.
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Whether `item` belongs to this shard of a run measuring `batch` items at a time.
    pub fn contains(&self, item: usize, batch: usize) -> bool {
        (item / batch.max(1)) % self.count == self.index - 1
    }

    /// The shard `item` belongs to.
    pub fn of(item: usize, batch: usize, count: usize) -> Shard {
        Shard {
            index: (item / batch.max(1)) % count.max(1) + 1,
            count: count.max(1),
        }
    }

    pub fn is_whole(&self) -> bool {
        self.count == 1
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(format!(
                "cannot read shard `{s}`: expected i/n with 1 ≤ i ≤ n (e.g. --shard 2/3; with Slurm: --shard $SLURM_ARRAY_TASK_ID/3 and --array=1-3)"
            ))
        };
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// Where a run happened: not part of the configuration hash (paths and GPU numbers differ between
/// the machines of one sharded run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunContext {
    /// The model as given (path or repo id).
    pub model: String,
    /// Where the prompt data came from.
    pub data: String,
    /// The device used (`cpu`, `cuda:1`).
    pub device: String,
    /// The slice of items this folder holds (`None`: all).
    pub shard: Option<Shard>,
    /// Prompts run per batch (`--batch`); a resume must use the same, since profiles at another
    /// batch size differ by rounding and the records would no longer match an uninterrupted run.
    #[serde(default = "one_per_batch")]
    pub batch: usize,
    /// Where a tuned lens was read from (its identity, the parameters' sha256, is in the
    /// configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lens: Option<String>,
}

fn one_per_batch() -> usize {
    1
}

/// `config.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredConfig {
    pub config: ExperimentConfig,
    pub config_sha256: String,
    /// Number of work items of the whole experiment (all shards).
    pub n_items: usize,
    /// sha256 of the item list (ids, labels, prompts): the same configuration built by another
    /// version of the prompt builders is told apart.
    pub items_sha256: String,
    pub run: RunContext,
}

/// sha256 of the work items as JSON.
pub fn items_sha256(items: &[WorkItem]) -> Result<String> {
    let json = serde_json::to_vec(items)?;
    Ok(sha2::Sha256::digest(&json)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// One work item: a prompt with its label.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkItem {
    /// Position in the experiment's item list.
    pub index: usize,
    /// A stable, readable id (`story0007-syntactic`, `topic012-poem`).
    pub id: String,
    pub label: String,
    pub prompt: String,
    /// Experiment-specific details (template, topic, …), in key order.
    #[serde(default)]
    pub meta: BTreeMap<String, serde_json::Value>,
}

impl WorkItem {
    /// A meta value as text (`""` when absent or not a string).
    pub fn meta_str(&self, key: &str) -> &str {
        meta_str(&self.meta, key)
    }
}

fn meta_str<'a>(meta: &'a BTreeMap<String, serde_json::Value>, key: &str) -> &'a str {
    meta.get(key).and_then(|v| v.as_str()).unwrap_or("")
}

/// One line of `records.jsonl`: a work item and its measured profile (with provenance).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The line's layout ([`crate::profile::schema::RECORD_SCHEMA_VERSION`] for records this build
    /// writes; `None` for a line written before the field existed, read as version 1).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::profile::schema::record_version"
    )]
    pub schema_version: Option<u32>,
    pub index: usize,
    pub id: String,
    pub label: String,
    #[serde(default)]
    pub meta: BTreeMap<String, serde_json::Value>,
    /// The model's answer (multiple-choice experiments: `mmlu`, `skip`), its fields inline.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    pub profile: EntropyProfile,
}

impl Record {
    pub fn new(item: &WorkItem, profile: EntropyProfile) -> Self {
        Self {
            schema_version: Some(crate::profile::schema::RECORD_SCHEMA_VERSION),
            index: item.index,
            id: item.id.clone(),
            label: item.label.clone(),
            meta: item.meta.clone(),
            answer: None,
            profile,
        }
    }

    /// A meta value as text (`""` when absent or not a string).
    pub fn meta_str(&self, key: &str) -> &str {
        meta_str(&self.meta, key)
    }

    /// The model's answer, or a clear error for a folder written by something else.
    pub fn answer(&self) -> Result<&Answer> {
        self.answer.as_ref().ok_or_else(|| {
            Error::Data(format!(
                "record {} has no answer (letter_probs, chosen, correct); the folder was not written by a multiple-choice experiment",
                self.id
            ))
        })
    }

    /// A record with the model's answer; labelled `correct` or `wrong`.
    pub fn answered(item: &WorkItem, profile: EntropyProfile, answer: Answer) -> Self {
        Self {
            label: if answer.is_correct() {
                "correct"
            } else {
                "wrong"
            }
            .into(),
            answer: Some(answer),
            ..Self::new(item, profile)
        }
    }
}

/// An experiment's output folder.
#[derive(Clone, Debug)]
pub struct OutputDir {
    pub path: PathBuf,
    pub stored: StoredConfig,
}

fn file_in(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

pub use crate::cache::write_atomic;

impl OutputDir {
    /// Opens `path` for a run of `config` over `n_items` items: creates it and writes
    /// `config.json`, or checks that the folder holds a run of the same configuration and slice.
    pub fn prepare(
        path: &Path,
        config: &ExperimentConfig,
        items: &[WorkItem],
        run: RunContext,
    ) -> Result<Self> {
        Self::prepare_with(path, config, items.len(), items_sha256(items)?, run)
    }

    /// As [`OutputDir::prepare`], from the item count and digest.
    pub fn prepare_with(
        path: &Path,
        config: &ExperimentConfig,
        n_items: usize,
        items_sha256: String,
        run: RunContext,
    ) -> Result<Self> {
        std::fs::create_dir_all(path).map_err(|e| Error::io(path, e))?;
        let stored = StoredConfig {
            config: config.clone(),
            config_sha256: config.sha256()?,
            n_items,
            items_sha256,
            run,
        };
        let cfg_path = file_in(path, CONFIG_FILE);
        if cfg_path.exists() {
            let existing = Self::open(path)?;
            if existing.stored.config_sha256 != stored.config_sha256 {
                let diffs = stored.config.differences(&existing.stored.config);
                return Err(Error::invalid(format!(
                    "{} holds a run with a different configuration ({}); resume it with its own arguments, or choose another --out",
                    path.display(),
                    diffs.into_iter().take(6).collect::<Vec<_>>().join("; ").replace(" ≠ ", " asked, the folder has ")
                )));
            }
            if existing.stored.n_items != stored.n_items
                || existing.stored.items_sha256 != stored.items_sha256
            {
                return Err(Error::invalid(format!(
                    "{} holds a run of the same configuration over other prompts ({} items there, {} now): it was written by another version of the prompt builders; choose another --out",
                    path.display(),
                    existing.stored.n_items,
                    stored.n_items
                )));
            }
            if existing.stored.run.shard != stored.run.shard {
                let name = |s: Option<Shard>| {
                    s.map(|s| format!("shard {s}"))
                        .unwrap_or_else(|| "all items".into())
                };
                return Err(Error::invalid(format!(
                    "{} holds {} of this experiment, not {}; use one folder per shard",
                    path.display(),
                    name(existing.stored.run.shard),
                    name(stored.run.shard)
                )));
            }
            if existing.stored.run.batch != stored.run.batch {
                return Err(Error::invalid(format!(
                    "{} holds a run made with --batch {}; resume it with --batch {} (profiles at another batch size differ by rounding, so the records would not match an uninterrupted run)",
                    path.display(),
                    existing.stored.run.batch,
                    existing.stored.run.batch
                )));
            }
            return Ok(existing);
        }
        if file_in(path, RECORDS_FILE).exists() {
            return Err(Error::invalid(format!(
                "{} has records but no {CONFIG_FILE}; it is not an entropy-lens experiment folder this version can resume",
                path.display()
            )));
        }
        let text = serde_json::to_string_pretty(&stored)? + "\n";
        write_atomic(&cfg_path, text.as_bytes())?;
        Ok(Self {
            path: path.to_path_buf(),
            stored,
        })
    }

    /// Opens an existing experiment folder.
    pub fn open(path: &Path) -> Result<Self> {
        let cfg_path = file_in(path, CONFIG_FILE);
        let text = std::fs::read_to_string(&cfg_path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::invalid(format!(
                "{} is not an experiment folder (no {CONFIG_FILE})",
                path.display()
            )),
            _ => Error::io(&cfg_path, e),
        })?;
        let stored: StoredConfig = serde_json::from_str(&text).map_err(|e| {
            Error::Data(format!(
                "{} is not a valid experiment configuration: {e}",
                cfg_path.display()
            ))
        })?;
        if stored.config.sha256()? != stored.config_sha256 {
            return Err(Error::Data(format!(
                "{}: the configuration does not match its stored sha256 (edited by hand?)",
                cfg_path.display()
            )));
        }
        if let Some(s) = stored.run.shard {
            if s.count == 0 || s.index == 0 || s.index > s.count {
                return Err(Error::Data(format!(
                    "{}: invalid shard {}/{} (edited by hand?)",
                    cfg_path.display(),
                    s.index,
                    s.count
                )));
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
            stored,
        })
    }

    pub fn file(&self, name: &str) -> PathBuf {
        file_in(&self.path, name)
    }

    /// The records, after cutting off a torn last line (what a kill or a power loss leaves).
    pub fn recover_records(&self) -> Result<Vec<Record>> {
        let path = self.file(RECORDS_FILE);
        let mut bytes = Vec::new();
        match File::open(&path) {
            Ok(mut f) => {
                f.read_to_end(&mut bytes).map_err(|e| Error::io(&path, e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(&path, e)),
        }
        let complete = bytes
            .iter()
            .rposition(|&b| b == b'\n')
            .map(|i| i + 1)
            .unwrap_or(0);
        if complete < bytes.len() {
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| Error::io(&path, e))?;
            f.set_len(complete as u64)
                .map_err(|e| Error::io(&path, e))?;
            f.sync_all().map_err(|e| Error::io(&path, e))?;
            self.log(&format!(
                "cut a torn last record of {} bytes; its item is redone",
                bytes.len() - complete
            ))?;
        }
        self.parse_records(&bytes[..complete])
    }

    /// The records as they are; a torn last line is an error (nothing is modified).
    pub fn read_records(&self) -> Result<Vec<Record>> {
        let path = self.file(RECORDS_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::io(&path, e)),
        };
        if bytes.last().is_some_and(|&b| b != b'\n') {
            return Err(Error::Data(format!(
                "{} ends with a torn record (the run was interrupted); rerun it with the same arguments to finish it",
                path.display()
            )));
        }
        self.parse_records(&bytes)
    }

    fn parse_records(&self, bytes: &[u8]) -> Result<Vec<Record>> {
        let path = self.file(RECORDS_FILE);
        let text = std::str::from_utf8(bytes)
            .map_err(|e| Error::Data(format!("{} is not UTF-8: {e}", path.display())))?;
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let r: Record = serde_json::from_str(line).map_err(|e| {
                Error::Data(format!(
                    "{} line {} is corrupt ({e}); delete that line to redo its item",
                    path.display(),
                    i + 1
                ))
            })?;
            r.profile.validate().map_err(|e| {
                Error::Data(format!(
                    "{} line {}: {e}; delete that line to redo its item",
                    path.display(),
                    i + 1
                ))
            })?;
            if r.index >= self.stored.n_items {
                return Err(Error::Data(format!(
                    "{} line {}: item {} is outside this experiment's {} items",
                    path.display(),
                    i + 1,
                    r.index,
                    self.stored.n_items
                )));
            }
            if let Some(shard) = self.stored.run.shard {
                if !shard.contains(r.index, self.stored.run.batch) {
                    return Err(Error::Data(format!(
                        "{} line {}: item {} does not belong to shard {shard}",
                        path.display(),
                        i + 1,
                        r.index
                    )));
                }
            }
            if !seen.insert(r.index) {
                return Err(Error::Data(format!(
                    "{} line {}: item {} ({}) is recorded twice",
                    path.display(),
                    i + 1,
                    r.index,
                    r.id
                )));
            }
            out.push(r);
        }
        Ok(out)
    }

    /// Appends finished records, each as one line, and makes them durable.
    pub fn append(&self, records: &[Record]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let path = self.file(RECORDS_FILE);
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let mut buf = Vec::new();
        for r in records {
            serde_json::to_writer(&mut buf, r)?;
            buf.push(b'\n');
        }
        f.write_all(&buf).map_err(|e| Error::io(&path, e))?;
        f.sync_data().map_err(|e| Error::io(&path, e))
    }

    /// Replaces the records with `records` (sorted by item), atomically.
    pub fn write_records(&self, records: &[Record]) -> Result<()> {
        let mut buf = Vec::new();
        for r in records {
            serde_json::to_writer(&mut buf, r)?;
            buf.push(b'\n');
        }
        write_atomic(&self.file(RECORDS_FILE), &buf)
    }

    /// Takes the folder for this process: a second run (or merge) into the same folder fails
    /// instead of interleaving records. Released when the guard drops (or the process dies).
    pub fn lock(&self) -> Result<File> {
        let path = self.file(".lock");
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        match f.try_lock() {
            Ok(()) => Ok(f),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::invalid(format!(
                "another process is running an experiment in {}; wait for it or use another --out",
                self.path.display()
            ))),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io(&path, e)),
        }
    }

    /// Appends a timestamped line to `run.log`.
    pub fn log(&self, line: &str) -> Result<()> {
        let path = self.file(LOG_FILE);
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        writeln!(f, "{} {line}", utc_now()).map_err(|e| Error::io(&path, e))
    }
}

/// Writes a float64 matrix as NumPy `.npy` (version 1.0, little-endian, C order).
pub fn write_npy(path: &Path, rows: usize, cols: usize, data: &[f64]) -> Result<()> {
    if data.len() != rows * cols {
        return Err(Error::Data(format!(
            "{} values for a {rows} × {cols} matrix",
            data.len()
        )));
    }
    let mut header =
        format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Magic (6) + version (2) + header length (2) + header + newline, padded to 64 bytes.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut bytes = Vec::with_capacity(10 + header.len() + data.len() * 8);
    bytes.extend_from_slice(b"\x93NUMPY\x01\x00");
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for v in data {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    write_atomic(path, &bytes)
}

/// Now as `YYYY-MM-DDThh:mm:ssZ` (for logs only; results carry no time).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_partition() {
        let s: Shard = "2/3".parse().unwrap();
        assert_eq!(s, Shard { index: 2, count: 3 });
        assert_eq!(
            (0..9).filter(|&i| s.contains(i, 1)).collect::<Vec<_>>(),
            vec![1, 4, 7]
        );
        // Whole batches go to one shard.
        assert_eq!(
            (0..20).filter(|&i| s.contains(i, 4)).collect::<Vec<_>>(),
            vec![4, 5, 6, 7, 16, 17, 18, 19]
        );
        assert_eq!(Shard::of(17, 4, 3), s);
        for bad in ["0/3", "4/3", "1/0", "x", "1-3"] {
            assert!(bad
                .parse::<Shard>()
                .unwrap_err()
                .to_string()
                .contains("i/n"));
        }
    }

    #[test]
    fn npy_header_is_aligned_and_readable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.npy");
        write_npy(&p, 2, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.5]).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let x = crate::data::read_features(&p).unwrap();
        assert_eq!(x.dim(), (2, 3));
        assert_eq!(x[[1, 2]], 6.5);
    }

    #[test]
    fn utc_dates() {
        let now = utc_now();
        assert_eq!(now.len(), 20);
        assert!(now.starts_with("20"));
    }
}
