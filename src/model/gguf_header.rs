//! A walk over a GGUF file's metadata before candle parses it, for the values candle uses without
//! checking: `general.alignment` (candle divides by it, so 0 would panic inside its reader).
//!
//! Layout (GGUF v2/v3, little-endian): magic `GGUF`, version u32, tensor count u64, metadata count
//! u64, then `count` × (key: u64 length + bytes, value type u32, value). Version 1 used u32 lengths.

// Bytes from a user's file are parsed here (issue 10): no unwrap or expect, no unchecked
// indexing or arithmetic; the exceptions say why they cannot fail.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::{Error, Result};

struct Walker<R> {
    reader: R,
    /// Bytes left in the file from the current position.
    left: u64,
    /// Lengths are u32 in GGUF v1, u64 later.
    wide: bool,
}

impl<R: Read + Seek> Walker<R> {
    fn bytes<const N: usize>(&mut self) -> std::io::Result<[u8; N]> {
        let mut b = [0u8; N];
        self.reader.read_exact(&mut b)?;
        self.left = self.left.saturating_sub(N as u64);
        Ok(b)
    }

    fn u32(&mut self) -> std::io::Result<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn length(&mut self) -> std::io::Result<u64> {
        if self.wide {
            Ok(u64::from_le_bytes(self.bytes()?))
        } else {
            Ok(u64::from(self.u32()?))
        }
    }

    /// Skips `n` bytes, refusing to go past the end of the file.
    fn skip(&mut self, n: u64) -> std::result::Result<(), String> {
        if n > self.left {
            return Err(format!(
                "a metadata value claims {n} bytes but only {} remain",
                self.left
            ));
        }
        self.reader
            .seek(SeekFrom::Current(
                i64::try_from(n).map_err(|_| format!("a length of {n} bytes"))?,
            ))
            .map_err(|e| e.to_string())?;
        // n ≤ left was checked above.
        self.left = self.left.saturating_sub(n);
        Ok(())
    }

    fn string(&mut self) -> std::result::Result<Vec<u8>, String> {
        let n = self.length().map_err(|e| e.to_string())?;
        if n > self.left {
            return Err(format!(
                "a string claims {n} bytes but only {} remain",
                self.left
            ));
        }
        let mut s = vec![0u8; usize::try_from(n).map_err(|_| format!("a string of {n} bytes"))?];
        self.reader.read_exact(&mut s).map_err(|e| e.to_string())?;
        // n ≤ left was checked above.
        self.left = self.left.saturating_sub(n);
        Ok(s)
    }

    /// Skips one value of type `t` (depth guards nested arrays).
    fn skip_value(&mut self, t: u32, depth: usize) -> std::result::Result<(), String> {
        match t {
            0 | 1 | 7 => self.skip(1),
            2 | 3 => self.skip(2),
            4..=6 => self.skip(4),
            10..=12 => self.skip(8),
            8 => {
                let n = self.length().map_err(|e| e.to_string())?;
                self.skip(n)
            }
            9 => {
                if depth > 4 {
                    return Err("metadata arrays nested more than 4 deep".into());
                }
                let inner = self.u32().map_err(|e| e.to_string())?;
                let n = self.length().map_err(|e| e.to_string())?;
                let fixed = match inner {
                    0 | 1 | 7 => Some(1),
                    2 | 3 => Some(2),
                    4..=6 => Some(4),
                    10..=12 => Some(8),
                    _ => None,
                };
                match fixed {
                    Some(size) => self.skip(n.saturating_mul(size)),
                    None => {
                        // Each element takes at least one byte: a count beyond the file is corrupt.
                        if n > self.left {
                            return Err(format!(
                                "an array claims {n} elements but only {} bytes remain",
                                self.left
                            ));
                        }
                        (0..n).try_for_each(|_| self.skip_value(inner, depth.saturating_add(1)))
                    }
                }
            }
            other => Err(format!("unknown metadata value type {other}")),
        }
    }
}

/// Checks what candle's GGUF reader would trust: a readable metadata section and a usable
/// `general.alignment` (a positive multiple of 8, as the GGUF specification requires).
pub(crate) fn check(path: &Path) -> Result<()> {
    let corrupt = |reason: String| Error::CorruptGguf {
        path: path.to_path_buf(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::ModelNotFound {
            path: path.to_path_buf(),
        },
        _ => Error::io(path, e),
    })?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let mut w = Walker {
        reader: BufReader::new(file),
        left: len,
        wide: true,
    };
    let io = |e: std::io::Error| corrupt(format!("header cut short: {e}"));
    let magic = w.bytes::<4>().map_err(io)?;
    if &magic != b"GGUF" {
        // candle names the wrong magic itself.
        return Ok(());
    }
    let version = w.u32().map_err(io)?;
    w.wide = version >= 2;
    let _tensors = w.length().map_err(io)?;
    let kvs = w.length().map_err(io)?;
    for _ in 0..kvs {
        let key = w.string().map_err(corrupt)?;
        let t = w.u32().map_err(io)?;
        if key == b"general.alignment" {
            let value: Option<i64> = match t {
                0 => Some(i64::from(w.bytes::<1>().map_err(io)?[0])),
                1 => Some(i64::from(i8::from_le_bytes(w.bytes().map_err(io)?))),
                2 => Some(i64::from(u16::from_le_bytes(w.bytes().map_err(io)?))),
                3 => Some(i64::from(i16::from_le_bytes(w.bytes().map_err(io)?))),
                4 => Some(i64::from(w.u32().map_err(io)?)),
                5 => Some(i64::from(i32::from_le_bytes(w.bytes().map_err(io)?))),
                _ => None,
            };
            // Other types: candle ignores the key and uses its default of 32.
            if let Some(a) = value {
                if a <= 0 || a % 8 != 0 {
                    return Err(corrupt(format!(
                        "general.alignment is {a}; the GGUF specification requires a positive multiple of 8 (usually 32)"
                    )));
                }
            }
            return Ok(());
        }
        w.skip_value(t, 0).map_err(corrupt)?;
    }
    Ok(())
}
