//! The cache folder and the models folder, file digests and atomic writes: the lowest layer of
//! the crate's storage, used by the model loader (fingerprints, bare model names), the lenses,
//! the experiments' store and [`crate::fetch`].

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Env var overriding the models folder.
pub const ENV_MODELS_DIR: &str = "ENTROPY_LENS_MODELS";
/// Env var overriding the cache folder (default `~/.cache/entropy-lens`).
pub const ENV_CACHE_DIR: &str = "ENTROPY_LENS_CACHE";

/// The cache folder: `$ENTROPY_LENS_CACHE`, else `$XDG_CACHE_HOME/entropy-lens`, else
/// `$HOME/.cache/entropy-lens`, and on Windows (where `HOME` is usually unset) the platform's
/// local cache folder, `%LOCALAPPDATA%\entropy-lens`.
///
/// # Errors
/// [`Error::InvalidArgument`] when none of these is set: a shared folder such as `/tmp` would
/// let other users replace the models.
pub fn cache_dir() -> Result<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = var(ENV_CACHE_DIR) {
        return Ok(dir);
    }
    if let Some(xdg) = var("XDG_CACHE_HOME") {
        return Ok(xdg.join("entropy-lens"));
    }
    if let Some(home) = var("HOME") {
        return Ok(home.join(".cache").join("entropy-lens"));
    }
    #[cfg(windows)]
    if let Some(local) = var("LOCALAPPDATA") {
        return Ok(local.join("entropy-lens"));
    }
    let names = if cfg!(windows) {
        format!("{ENV_CACHE_DIR}, XDG_CACHE_HOME, HOME or LOCALAPPDATA")
    } else {
        format!("{ENV_CACHE_DIR}, XDG_CACHE_HOME or HOME")
    };
    Err(Error::invalid(format!(
        "no cache folder: none of {names} is set; set one of them (or {ENV_MODELS_DIR} for the models alone)"
    )))
}

/// Where the offline models are kept: `$ENTROPY_LENS_MODELS`, else `models/` in [`cache_dir`].
///
/// # Errors
/// Those of [`cache_dir`].
pub fn models_dir() -> Result<PathBuf> {
    match std::env::var_os(ENV_MODELS_DIR) {
        Some(d) if !d.is_empty() => Ok(PathBuf::from(d)),
        _ => Ok(cache_dir()?.join("models")),
    }
}

/// sha256 of a file, hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `bytes` to `path` through a temporary file and a rename (never a half-written file).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_file_name(format!(
        ".{}.{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    {
        let mut f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.write_all(bytes).map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    // Make the rename itself durable (best effort: not every platform opens directories).
    if let Some(dir) = path.parent() {
        if let Ok(d) = File::open(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        }) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}
