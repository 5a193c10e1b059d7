//! Folders written by earlier versions stay readable, byte for byte:
//!
//! * `tests/fixtures/experiments/*`: one small run of every experiment, written by entropy-lens at
//!   commit 2e6f325 (before experiments became plug-ins; `tests/fixtures/experiments/README.md`).
//!   `finish` on their `config.json` + `records.jsonl` reproduces their `result.json` (byte for
//!   byte once the statistics added since are taken out: [`strip_added`]), `profiles.npy` and
//!   `index.json` byte for byte, and the config and records serialise back to their own bytes;
//! * `docs/results/*`: every committed configuration opens (its sha256 checks) and serialises back
//!   to its bytes, and every `result.json` there and in `tests/golden/experiments/` parses and
//!   serialises back to its bytes.

use std::path::{Path, PathBuf};

use entropy_lens::experiments::{self, ExperimentKind, Outcome, OutputDir};

fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
}

fn folders(under: &str) -> Vec<PathBuf> {
    let dir = root().join(under);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("result.json").is_file())
        .collect();
    out.sort();
    out
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The folder's `config.json` as this version writes it back.
fn config_bytes(dir: &Path) -> String {
    let out = OutputDir::open(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    serde_json::to_string_pretty(&out.stored).unwrap() + "\n"
}

/// The configuration part (what is hashed) as this version writes it back, and as it is in the
/// file (folders older than the `batch` field of the run context lack that field only).
fn configuration(dir: &Path) -> (String, String) {
    let out = OutputDir::open(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let ours = serde_json::to_string_pretty(&out.stored.config).unwrap();
    let file: serde_json::Value = serde_json::from_slice(&read(&dir.join("config.json"))).unwrap();
    (ours, serde_json::to_string_pretty(&file["config"]).unwrap())
}

fn text(p: &Path) -> String {
    String::from_utf8(read(p)).unwrap()
}

/// Statistics a later version adds to a result (`validate`'s `c1_ties`: C1 with ties handled,
/// 2026-12-07), removed from `result` (at its top level, or one level down for an outcome's
/// wrapper); the names removed.
fn strip_added(result: &mut serde_json::Value) -> Vec<&'static str> {
    const ADDED: [&str; 1] = ["c1_ties"];
    let mut removed = Vec::new();
    let mut strip = |v: &mut serde_json::Value| {
        if let Some(map) = v.as_object_mut() {
            for key in ADDED {
                if map.remove(key).is_some() {
                    removed.push(key);
                }
            }
        }
    };
    if let Some(map) = result.as_object_mut() {
        for inner in map.values_mut() {
            strip(inner);
        }
    }
    strip(result);
    removed
}

#[test]
fn finish_reproduces_every_fixture_byte_for_byte() {
    let dirs = folders("tests/fixtures/experiments");
    let kinds: std::collections::BTreeSet<String> = dirs
        .iter()
        .map(|d| {
            OutputDir::open(d)
                .unwrap()
                .stored
                .config
                .kind_name()
                .to_string()
        })
        .collect();
    let all: std::collections::BTreeSet<String> = experiments::kinds()
        .iter()
        .map(|k| k.name().to_string())
        .collect();
    assert_eq!(kinds, all, "a fixture for every registered experiment");
    for d in dirs {
        let tmp = tempfile::tempdir().unwrap();
        for f in ["config.json", "records.jsonl"] {
            std::fs::copy(d.join(f), tmp.path().join(f)).unwrap();
        }
        let outcome =
            experiments::finish(tmp.path()).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for f in ["profiles.npy", "index.json"] {
            assert!(
                read(&d.join(f)) == read(&tmp.path().join(f)),
                "{}: {f} differs from the one the earlier version wrote",
                d.display()
            );
        }
        // result.json: every value the earlier version wrote, to the bit, once the statistics
        // added since are taken out (byte for byte where nothing was added).
        let (old_text, new_text) = (
            text(&d.join("result.json")),
            text(&tmp.path().join("result.json")),
        );
        let mut now: serde_json::Value = serde_json::from_str(&new_text).unwrap();
        let added = strip_added(&mut now);
        let then: serde_json::Value = serde_json::from_str(&old_text).unwrap();
        if added.is_empty() {
            assert!(old_text == new_text, "{}: result.json differs", d.display());
        }
        let moved: Vec<&String> = then
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, v)| now.get(k.as_str()) != Some(v))
            .map(|(k, _)| k)
            .collect();
        assert!(
            moved.is_empty() && now.as_object().unwrap().len() == then.as_object().unwrap().len(),
            "{}: result.json differs from the one the earlier version wrote (beyond {added:?}): {moved:?}",
            d.display()
        );
        assert!(tmp.path().join("report.html").is_file());
        assert_eq!(
            config_bytes(&d),
            text(&d.join("config.json")),
            "{}",
            d.display()
        );
        let out = OutputDir::open(tmp.path()).unwrap();
        let records = out.read_records().unwrap();
        out.write_records(&records).unwrap();
        assert!(
            read(&tmp.path().join("records.jsonl")) == read(&d.join("records.jsonl")),
            "{}: records serialise back to other bytes",
            d.display()
        );
        let json = |o: &Outcome| -> serde_json::Value {
            serde_json::from_str(&o.to_json().unwrap()).unwrap()
        };
        let mut finished = json(&outcome);
        strip_added(&mut finished);
        assert_eq!(json(&Outcome::load(&d).unwrap()), finished);
        println!("{}: byte-identical", d.display());
    }
}

#[test]
fn committed_results_and_configs_read_back_to_their_bytes() {
    let mut checked = 0;
    for d in folders("docs/results") {
        let (ours, theirs) = configuration(&d);
        assert_eq!(ours, theirs, "{}", d.display());
        let outcome = Outcome::load(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        assert_eq!(
            outcome.to_json().unwrap(),
            text(&d.join("result.json")),
            "{}",
            d.display()
        );
        assert!(!outcome.comparison().is_empty() && outcome.charts().is_ok());
        checked += 1;
    }
    for d in folders("tests/golden/experiments") {
        let text = String::from_utf8(read(&d.join("result.json"))).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let kind: ExperimentKind = v["experiment"].as_str().unwrap().parse().unwrap();
        let outcome = Outcome::from_json(kind, &text).unwrap();
        assert_eq!(outcome.to_json().unwrap(), text, "{}", d.display());
        checked += 1;
    }
    assert!(checked >= 19, "{checked} folders");
}
