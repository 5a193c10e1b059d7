//! Reading feature matrices and labels for the statistics: CSV without header, NumPy `.npy`, or
//! JSON Lines of arrays; labels one string per line.

// Bytes from a user's file are parsed here (issue 10): no unwrap or expect, no unchecked
// indexing or arithmetic; the exceptions say why they cannot fail.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::path::Path;

use ndarray::Array2;

use crate::error::{Error, Result};

/// Reads a samples × features matrix; the format follows the extension (`.npy`, `.jsonl`/`.json`,
/// anything else is CSV without header).
pub fn read_features(path: &Path) -> Result<Array2<f64>> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if !path.exists() {
        return Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        ));
    }
    let rows: Vec<Vec<f64>> = match ext.as_str() {
        "npy" => return read_npy(path),
        "jsonl" | "json" | "ndjson" => read_lines(path)?
            .into_iter()
            .map(|(i, line)| {
                serde_json::from_str::<Vec<f64>>(&line).map_err(|e| {
                    Error::Data(format!(
                        "{} line {i}: expected a JSON array of numbers: {e}",
                        path.display()
                    ))
                })
            })
            .collect::<Result<_>>()?,
        _ => read_lines(path)?
            .into_iter()
            .map(|(i, line)| {
                line.split(',')
                    .map(|c| {
                        c.trim().parse::<f64>().map_err(|_| {
                            Error::Data(format!(
                                "{} line {i}: `{}` is not a number",
                                path.display(),
                                c.trim()
                            ))
                        })
                    })
                    .collect::<Result<Vec<f64>>>()
            })
            .collect::<Result<_>>()?,
    };
    to_matrix(rows, path)
}

fn read_lines(path: &Path) -> Result<Vec<(usize, String)>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    Ok(text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        // Line numbers count from 1; `i` < the number of lines, so it cannot overflow.
        .map(|(i, l)| (i.saturating_add(1), l.to_string()))
        .collect())
}

fn to_matrix(rows: Vec<Vec<f64>>, path: &Path) -> Result<Array2<f64>> {
    let n = rows.len();
    let Some(d) = rows.first().map(Vec::len) else {
        return Err(Error::Data(format!("{} holds no rows", path.display())));
    };
    if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != d) {
        return Err(Error::Data(format!(
            "{}: ragged rows: row 1 has {d} values, row {} has {}",
            path.display(),
            i.saturating_add(1),
            r.len()
        )));
    }
    if d == 0 {
        return Err(Error::Data(format!(
            "{}: rows have no values",
            path.display()
        )));
    }
    let x = Array2::from_shape_vec((n, d), rows.into_iter().flatten().collect())
        .map_err(|e| Error::Data(format!("{}: {e}", path.display())))?;
    check_finite(&x, path)?;
    Ok(x)
}

/// A little-endian NumPy `.npy` file (format 1.0-3.0) of f8/f4/i8/i4 values, C order, 1-D or 2-D.
fn read_npy(path: &Path) -> Result<Array2<f64>> {
    let bad = |why: &str| {
        Error::Data(format!(
            "{} is not a readable .npy file: {why}",
            path.display()
        ))
    };
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if bytes.get(..6) != Some(&b"\x93NUMPY"[..]) {
        return Err(bad("missing the NUMPY magic"));
    }
    let byte = |i: usize| bytes.get(i).copied().ok_or_else(|| bad("truncated header"));
    let (header_len, start) = match byte(6)? {
        1 => (
            usize::from(u16::from_le_bytes([byte(8)?, byte(9)?])),
            10usize,
        ),
        2 | 3 => (
            usize::try_from(u32::from_le_bytes([
                byte(8)?,
                byte(9)?,
                byte(10)?,
                byte(11)?,
            ]))
            .map_err(|_| bad("header too long"))?,
            12,
        ),
        v => return Err(bad(&format!("unsupported format version {v}"))),
    };
    let data_start = start
        .checked_add(header_len)
        .ok_or_else(|| bad("header too long"))?;
    let header = bytes
        .get(start..data_start)
        .map(String::from_utf8_lossy)
        .ok_or_else(|| bad("truncated header"))?;
    let field = |key: &str| -> Option<String> {
        let quoted = format!("'{key}'");
        let i = header.find(&quoted)?;
        let rest = header
            .get(i.checked_add(quoted.len())?..)?
            .trim_start()
            .strip_prefix(':')?
            .trim_start();
        let end = if rest.starts_with('(') {
            rest.find(')')?.checked_add(1)?
        } else {
            rest.find([',', '}'])?
        };
        Some(rest.get(..end)?.trim().trim_matches('\'').to_string())
    };
    if field("fortran_order").as_deref() == Some("True") {
        return Err(bad(
            "Fortran-ordered arrays are not supported; save with order='C'",
        ));
    }
    let descr = field("descr").ok_or_else(|| bad("no descr"))?;
    let shape: Vec<usize> = field("shape")
        .ok_or_else(|| bad("no shape"))?
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().map_err(|_| bad("bad shape")))
        .collect::<Result<_>>()?;
    let (n, d) = match shape.as_slice() {
        [n, d] => (*n, *d),
        [n] => (*n, 1),
        _ => {
            return Err(bad(&format!(
                "expected a 1-D or 2-D array, got shape {shape:?}"
            )))
        }
    };
    let data = bytes.get(data_start..).unwrap_or_default();
    let values: Vec<f64> = match descr.as_str() {
        "<f8" => data
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect(),
        "<f4" => data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap_or([0; 4])) as f64)
            .collect(),
        "<i8" => data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64)
            .collect(),
        "<i4" => data
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap_or([0; 4])) as f64)
            .collect(),
        other => {
            return Err(bad(&format!(
                "unsupported dtype {other} (use float64, float32, int64 or int32)"
            )))
        }
    };
    let count = n
        .checked_mul(d)
        .ok_or_else(|| bad(&format!("shape {shape:?} is too large")))?;
    if count == 0 {
        return Err(bad(&format!("shape {shape:?} holds no values")));
    }
    if values.len() < count {
        return Err(bad(&format!(
            "holds {} values for shape {shape:?}",
            values.len()
        )));
    }
    let mut values = values;
    values.truncate(count);
    let x = Array2::from_shape_vec((n, d), values).map_err(|e| bad(&e.to_string()))?;
    check_finite(&x, path)?;
    Ok(x)
}

/// NaN or infinite features would turn distances, and so every AUC, into NaN without a word.
fn check_finite(x: &Array2<f64>, path: &Path) -> Result<()> {
    match x.indexed_iter().find(|(_, v)| !v.is_finite()) {
        Some(((i, j), v)) => Err(Error::Data(format!(
            "{}: row {} column {} (counting from 1) is non-finite ({v}); remove or impute it",
            path.display(),
            i.saturating_add(1),
            j.saturating_add(1)
        ))),
        None => Ok(()),
    }
}

/// Reads one label per non-empty line.
pub fn read_labels(path: &Path) -> Result<Vec<String>> {
    let labels: Vec<String> = read_lines(path)?
        .into_iter()
        .map(|(_, l)| l.trim().to_string())
        .collect();
    if labels.is_empty() {
        return Err(Error::Data(format!("{} holds no labels", path.display())));
    }
    Ok(labels)
}

/// Writes a matrix as CSV without header (full precision).
pub fn write_csv(path: &Path, x: &Array2<f64>) -> Result<()> {
    let mut s = String::new();
    for r in x.rows() {
        let cells: Vec<String> = r.iter().map(|v| format!("{v:?}")).collect();
        s.push_str(&cells.join(","));
        s.push('\n');
    }
    std::fs::write(path, s).map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_agree_and_errors_are_clear() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("x.csv");
        std::fs::write(&csv, "1,2.5\n3,4\n").unwrap();
        let jsonl = dir.path().join("x.jsonl");
        std::fs::write(&jsonl, "[1, 2.5]\n[3, 4]\n").unwrap();
        let npy = dir.path().join("x.npy");
        candle_core::Tensor::new(&[[1f64, 2.5], [3.0, 4.0]], &candle_core::Device::Cpu)
            .unwrap()
            .write_npy(&npy)
            .unwrap();
        let a = read_features(&csv).unwrap();
        assert_eq!(a, read_features(&jsonl).unwrap());
        assert_eq!(a, read_features(&npy).unwrap());
        assert_eq!(a[[0, 1]], 2.5);

        std::fs::write(&csv, "1,2\n3\n").unwrap();
        assert!(read_features(&csv)
            .unwrap_err()
            .to_string()
            .contains("ragged"));
        std::fs::write(&csv, "1,x\n").unwrap();
        assert!(read_features(&csv)
            .unwrap_err()
            .to_string()
            .contains("not a number"));
        assert!(read_features(&dir.path().join("missing.csv")).is_err());
    }
}
