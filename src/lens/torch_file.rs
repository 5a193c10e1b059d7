//! PyTorch's checkpoint format (`torch.save` of a state dict), written so that `torch.load` —
//! with its default `weights_only=True` — and the tuned-lens package read it: a zip archive
//! (entries stored, not compressed) holding `<name>/data.pkl`, a protocol-2 pickle of an
//! `OrderedDict` from parameter names to `torch._utils._rebuild_tensor_v2(...)` calls whose
//! storages are persistent ids, each storage's little-endian bytes at `<name>/data/<key>`, and the
//! `version` and `byteorder` records. Reading goes through candle's reader of the same format.

use std::io::Write;
use std::path::Path;

use zip::write::SimpleFileOptions;

use crate::error::{Error, Result};

/// A float32 tensor to save: its name, shape and values (row-major).
pub struct SavedTensor<'a> {
    pub name: &'a str,
    pub shape: &'a [usize],
    pub values: &'a [f32],
}

/// Pickle opcodes (protocol 2) used here.
mod op {
    pub const PROTO: u8 = 0x80;
    pub const GLOBAL: u8 = b'c';
    pub const EMPTY_TUPLE: u8 = b')';
    pub const REDUCE: u8 = b'R';
    pub const MARK: u8 = b'(';
    pub const SETITEMS: u8 = b'u';
    pub const BINUNICODE: u8 = b'X';
    pub const BININT: u8 = b'J';
    pub const NEWFALSE: u8 = 0x89;
    pub const TUPLE: u8 = b't';
    pub const BINPERSID: u8 = b'Q';
    pub const STOP: u8 = b'.';
}

struct Pickle(Vec<u8>);

impl Pickle {
    fn global(&mut self, module: &str, name: &str) {
        self.0.push(op::GLOBAL);
        self.0.extend_from_slice(module.as_bytes());
        self.0.push(b'\n');
        self.0.extend_from_slice(name.as_bytes());
        self.0.push(b'\n');
    }

    fn unicode(&mut self, s: &str) {
        self.0.push(op::BINUNICODE);
        self.0.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
    }

    fn int(&mut self, v: usize) -> Result<()> {
        let v = i32::try_from(v)
            .map_err(|_| Error::invalid(format!("{v} does not fit a 32-bit pickle integer")))?;
        self.0.push(op::BININT);
        self.0.extend_from_slice(&v.to_le_bytes());
        Ok(())
    }

    fn int_tuple(&mut self, values: &[usize]) -> Result<()> {
        self.0.push(op::MARK);
        for &v in values {
            self.int(v)?;
        }
        self.0.push(op::TUPLE);
        Ok(())
    }

    /// An empty `collections.OrderedDict`.
    fn ordered_dict(&mut self) {
        self.global("collections", "OrderedDict");
        self.0.push(op::EMPTY_TUPLE);
        self.0.push(op::REDUCE);
    }
}

/// Writes `tensors` as a state dict to `path` (`torch.save(state_dict, path)`).
pub fn write_state_dict(path: &Path, tensors: &[SavedTensor<'_>]) -> Result<()> {
    for t in tensors {
        if t.shape.iter().product::<usize>() != t.values.len() {
            return Err(Error::invalid(format!(
                "tensor {} has {} values for shape {:?}",
                t.name,
                t.values.len(),
                t.shape
            )));
        }
    }
    // The archive's top folder: torch names it after the file; any name loads.
    let archive = path
        .file_stem()
        .map(|s| {
            s.to_string_lossy()
                .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "archive".into());
    let mut p = Pickle(vec![op::PROTO, 2]);
    p.ordered_dict();
    p.0.push(op::MARK);
    for (key, t) in tensors.iter().enumerate() {
        p.unicode(t.name);
        // _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks)
        p.global("torch._utils", "_rebuild_tensor_v2");
        p.0.push(op::MARK);
        // The storage: persistent id ('storage', torch.FloatStorage, key, 'cpu', numel).
        p.0.push(op::MARK);
        p.unicode("storage");
        p.global("torch", "FloatStorage");
        p.unicode(&key.to_string());
        p.unicode("cpu");
        p.int(t.values.len())?;
        p.0.push(op::TUPLE);
        p.0.push(op::BINPERSID);
        p.int(0)?;
        p.int_tuple(t.shape)?;
        let mut stride = vec![1usize; t.shape.len()];
        for i in (0..t.shape.len().saturating_sub(1)).rev() {
            stride[i] = stride[i + 1] * t.shape[i + 1];
        }
        p.int_tuple(&stride)?;
        p.0.push(op::NEWFALSE);
        p.ordered_dict();
        p.0.push(op::TUPLE);
        p.0.push(op::REDUCE);
    }
    p.0.push(op::SETITEMS);
    p.0.push(op::STOP);

    let tmp = path.with_extension("pt.tmp");
    let file = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let mut zip = zip::ZipWriter::new(file);
    let stored = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .last_modified_time(zip::DateTime::default());
    let mut add = |name: String, bytes: &[u8]| -> Result<()> {
        zip.start_file(name, stored)
            .map_err(|e| Error::Data(format!("writing {}: {e}", path.display())))?;
        zip.write_all(bytes).map_err(|e| Error::io(path, e))
    };
    add(format!("{archive}/data.pkl"), &p.0)?;
    add(format!("{archive}/byteorder"), b"little")?;
    for (key, t) in tensors.iter().enumerate() {
        let bytes: Vec<u8> = t.values.iter().flat_map(|v| v.to_le_bytes()).collect();
        add(format!("{archive}/data/{key}"), &bytes)?;
    }
    add(format!("{archive}/version"), b"3\n")?;
    zip.finish()
        .map_err(|e| Error::Data(format!("writing {}: {e}", path.display())))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candle_reads_back_what_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("params.pt");
        let w: Vec<f32> = (0..6).map(|i| i as f32 * 0.5 - 1.0).collect();
        let b = [3.0f32, -4.0];
        write_state_dict(
            &path,
            &[
                SavedTensor {
                    name: "0.weight",
                    shape: &[2, 3],
                    values: &w,
                },
                SavedTensor {
                    name: "0.bias",
                    shape: &[2],
                    values: &b,
                },
            ],
        )
        .unwrap();
        let read = candle_core::pickle::read_all(&path).unwrap();
        let get = |n: &str| read.iter().find(|(k, _)| k == n).unwrap().1.clone();
        assert_eq!(get("0.weight").dims(), [2, 3]);
        assert_eq!(
            get("0.weight").to_vec2::<f32>().unwrap()[1],
            [0.5, 1.0, 1.5]
        );
        assert_eq!(get("0.bias").to_vec1::<f32>().unwrap(), b);
        assert!(write_state_dict(
            &path,
            &[SavedTensor {
                name: "x",
                shape: &[3],
                values: &b
            }]
        )
        .is_err());
    }
}
