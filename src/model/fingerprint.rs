//! What identifies a model's weights in provenance records: the sha256 of the GGUF file, or of the
//! list of `file sha256` lines of a Hugging Face folder (config, tokenizer, weights).
//!
//! Hashing gigabytes takes time, so digests are remembered in
//! `~/.cache/entropy-lens/hashes.json` by path, size and modification time; files in the Hub cache
//! are named by their sha256 already (LFS blobs), which is used as is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// `hashes.json` in the cache folder; `None` without one (digests are then not remembered).
fn cache_file() -> Option<PathBuf> {
    crate::cache::cache_dir()
        .ok()
        .map(|d| d.join("hashes.json"))
}

/// `path|size|mtime-ns` — changes whenever the file does.
fn cache_key(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    Ok(format!("{}|{}|{mtime}", canonical.display(), meta.len()))
}

fn read_cache() -> BTreeMap<String, String> {
    cache_file()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default()
}

/// Entries kept at most; files that no longer exist are dropped first (tests and the fuzzer hash
/// many temporary files).
const MAX_CACHED_DIGESTS: usize = 256;

fn remember(key: String, digest: &str) {
    let Some(path) = cache_file() else { return };
    let mut map = read_cache();
    map.retain(|k, _| {
        k.rsplitn(3, '|')
            .nth(2)
            .is_some_and(|p| Path::new(p).exists())
    });
    while map.len() >= MAX_CACHED_DIGESTS {
        map.pop_first();
    }
    map.insert(key, digest.to_string());
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    if let Ok(text) = serde_json::to_string_pretty(&map) {
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
    }
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// sha256 of one file (hex), from the Hub cache's blob name or the hash cache when possible.
pub fn file_sha256(path: &Path) -> Result<String> {
    if let Ok(target) = std::fs::read_link(path) {
        if let Some(name) = target.file_name().and_then(|n| n.to_str()) {
            if is_sha256_hex(name) {
                return Ok(name.to_ascii_lowercase());
            }
        }
    }
    let key = cache_key(path)?;
    if let Some(d) = read_cache().get(&key) {
        return Ok(d.clone());
    }
    let digest = crate::cache::sha256_file(path)?;
    remember(key, &digest);
    Ok(digest)
}

/// The fingerprint of a model made of `files`: the file's own sha256 for a single file, else the
/// sha256 of the `name sha256` lines of every file, in the given order.
pub fn model_sha256(files: &[PathBuf]) -> Result<String> {
    match files {
        [] => Err(Error::invalid("no model files to fingerprint")),
        [one] => file_sha256(one),
        many => {
            let mut h = Sha256::new();
            for f in many {
                let name = f
                    .file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default();
                h.update(format!("{name} {}\n", file_sha256(f)?).as_bytes());
            }
            Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
        }
    }
}

/// sha256 of bytes in memory (hex).
pub fn bytes_sha256(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_files_and_folders() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("config.json");
        std::fs::write(&a, "abc").unwrap();
        // sha256("abc")
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(model_sha256(std::slice::from_ref(&a)).unwrap(), abc);
        let b = dir.path().join("model.safetensors");
        std::fs::write(&b, "").unwrap();
        let two = model_sha256(&[a.clone(), b.clone()]).unwrap();
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let want: String =
            Sha256::digest(format!("config.json {abc}\nmodel.safetensors {empty}\n"))
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
        assert_eq!(two, want);
        // A changed file is hashed again (size and mtime are in the cache key).
        std::fs::write(&a, "abcd").unwrap();
        assert_ne!(model_sha256(std::slice::from_ref(&a)).unwrap(), abc);
        // Hub-cache layout: a symlink to a blob named by its sha256.
        #[cfg(unix)]
        {
            let blob = dir.path().join(abc);
            std::fs::write(&blob, "not really abc").unwrap();
            let link = dir.path().join("linked.safetensors");
            std::os::unix::fs::symlink(&blob, &link).unwrap();
            assert_eq!(file_sha256(&link).unwrap(), abc);
        }
    }
}
