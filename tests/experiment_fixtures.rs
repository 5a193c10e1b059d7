//! scikit-learn on an experiment's `profiles.npy` + `index.json` gives the AUC of its
//! `result.json`: committed fixtures from the runs of docs/results.md, with scikit-learn's numbers
//! computed by `tests/golden/experiments/sklearn_check.py` (CI needs no Python). The issue asks for
//! 0.02; the folds are scikit-learn's own (numpy's shuffle reproduced), so the AUCs agree to rounding.

use std::path::{Path, PathBuf};

use entropy_lens::analysis::{knn_cross_validate, KnnCvConfig, Labels};
use entropy_lens::data::read_features;
use entropy_lens::experiments::ProfileIndex;
use ndarray::{s, Array2};
use serde_json::Value;

fn fixtures() -> Vec<PathBuf> {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("tests/golden/experiments");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Recomputes the kNN AUC of `x` and checks it against result.json's and scikit-learn's.
fn check(what: &str, x: &Array2<f64>, labels: &Labels, k: usize, stored: &Value, theirs: &Value) {
    let cfg = KnnCvConfig {
        k,
        ..KnnCvConfig::default()
    };
    let mine = knn_cross_validate(x.view(), labels, &cfg).unwrap().auc_mean;
    let (stored, theirs) = (stored.as_f64().unwrap(), theirs.as_f64().unwrap());
    println!("{what}: result {stored:.4}, recomputed {mine:.4}, scikit-learn {theirs:.4}");
    assert!(
        (mine - stored).abs() < 1e-12,
        "{what}: result.json is not from profiles.npy"
    );
    assert!(
        (stored - theirs).abs() < 1e-9,
        "{what}: ours {stored} vs scikit-learn {theirs}"
    );
}

#[test]
fn sklearn_on_profiles_npy_matches_result_json() {
    let dirs = fixtures();
    assert!(dirs.len() >= 3, "expected tasks and formats fixtures");
    let mut checked = 0;
    for d in dirs {
        let x = read_features(&d.join("profiles.npy")).unwrap();
        let index: ProfileIndex = serde_json::from_value(json(&d.join("index.json"))).unwrap();
        let result = json(&d.join("result.json"));
        let sk = json(&d.join("sklearn.json"));
        assert_eq!(x.dim(), (index.n_rows, index.n_features));
        assert_eq!(index.ids.len(), index.n_rows);
        let labels = Labels::encode(&index.labels);
        let name = d.display().to_string();
        match result["experiment"].as_str().unwrap() {
            "tasks" => {
                let k = result["knn"]["k"].as_u64().unwrap() as usize;
                check(&name, &x, &labels, k, &result["auc_mean"], &sk["auc_mean"]);
                checked += 1;
            }
            "formats" => {
                let shape = &index.layout.shape;
                let per = shape[1] * shape[2];
                for (i, a) in index.layout.alphas.iter().enumerate() {
                    let xa = x.slice(s![.., i * per..(i + 1) * per]).to_owned();
                    let r = &result["per_alpha"][a];
                    let k = r["k"].as_u64().unwrap() as usize;
                    let what = format!("{name} α = {a}");
                    check(
                        &what,
                        &xa,
                        &labels,
                        k,
                        &r["auc_mean"],
                        &sk["per_alpha"][a]["auc_mean"],
                    );
                    checked += 1;
                }
            }
            other => panic!("unexpected fixture {other}"),
        }
    }
    assert!(checked >= 4);
}
