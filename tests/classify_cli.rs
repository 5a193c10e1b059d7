//! `entropy-lens classify`: the JSON contract on real profile features, agreement with the
//! scikit-learn fixture, and clear errors for bad inputs.

mod common;

use common::{fails, run};

use std::path::PathBuf;

use serde_json::Value;

fn stats_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"))
        .join("tests/golden/stats")
}

#[test]
fn classify_json_contract_and_scikit_learn_agreement() {
    let dir = stats_dir();
    let feats = dir.join("tinystories_smollm2_features.csv");
    let labels = dir.join("tinystories_smollm2_labels.txt");
    let out = run(&[
        "classify",
        "--features",
        feats.to_str().unwrap(),
        "--labels",
        labels.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "n_samples",
        "n_features",
        "n_classes",
        "k",
        "folds",
        "auc_mean",
        "auc_std",
        "auc_folds",
        "baseline_auc_mean",
        "p_value",
        "f1_macro_mean",
    ] {
        assert!(!r[key].is_null(), "missing {key}: {r}");
    }
    assert_eq!(r["n_samples"], 300);
    assert_eq!(r["n_features"], 240);
    assert_eq!(r["n_classes"], 3);
    assert_eq!(r["k"], 29);
    assert_eq!(r["folds"], 10);
    assert_eq!(r["auc_folds"].as_array().unwrap().len(), 10);
    let fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sklearn.json")).unwrap()).unwrap();
    let sk = fixture["cv"]["auc_mean"].as_f64().unwrap();
    let ours = r["auc_mean"].as_f64().unwrap();
    assert!((ours - sk).abs() <= 0.02, "{ours} vs scikit-learn {sk}");
    // The same data as .npy and JSON Lines gives the same answer.
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&feats).unwrap();
    let jsonl: String = text.lines().map(|l| format!("[{l}]\n")).collect();
    let jf = tmp.path().join("f.jsonl");
    std::fs::write(&jf, jsonl).unwrap();
    let out2 = run(&[
        "classify",
        "--features",
        jf.to_str().unwrap(),
        "--labels",
        labels.to_str().unwrap(),
        "--json",
    ]);
    let r2: Value = serde_json::from_slice(&out2.stdout).unwrap();
    assert_eq!(r["auc_folds"], r2["auc_folds"]);
    // The table form.
    let table = run(&[
        "classify",
        "--features",
        feats.to_str().unwrap(),
        "--labels",
        labels.to_str().unwrap(),
    ]);
    let t = String::from_utf8_lossy(&table.stdout);
    assert!(
        t.contains("ROC-AUC") && t.contains("stratified dummy") && t.contains("p ="),
        "{t}"
    );
}

#[test]
fn classify_rejects_bad_inputs() {
    let tmp = tempfile::tempdir().unwrap();
    let p = |name: &str, body: &str| -> String {
        let path = tmp.path().join(name);
        std::fs::write(&path, body).unwrap();
        path.to_string_lossy().into_owned()
    };
    let rows: String = (0..40)
        .map(|i| format!("{},{}\n", i % 7, (i * 3) % 5))
        .collect();
    let feats = p("f.csv", &rows);
    let labels2: String = (0..40)
        .map(|i| if i % 2 == 0 { "a\n" } else { "b\n" })
        .collect();
    let labels = p("y.txt", &labels2);

    let e = fails(&[
        "classify",
        "--features",
        &feats,
        "--labels",
        &labels,
        "--k",
        "39",
        "--folds",
        "4",
    ]);
    assert!(e.contains("k = 39") && e.contains("training fold"), "{e}");

    let few: String = (0..40)
        .map(|i| if i < 5 { "rare\n" } else { "common\n" })
        .collect();
    let e = fails(&[
        "classify",
        "--features",
        &feats,
        "--labels",
        &p("few.txt", &few),
        "--k",
        "3",
    ]);
    assert!(e.contains("fewer than the 10 folds"), "{e}");

    let nan = rows.replacen("0,0", "nan,0", 1);
    let e = fails(&[
        "classify",
        "--features",
        &p("nan.csv", &nan),
        "--labels",
        &labels,
        "--k",
        "3",
    ]);
    assert!(
        e.contains("non-finite") || e.contains("not a number"),
        "{e}"
    );

    let ragged = format!("1,2,3\n{rows}");
    let e = fails(&[
        "classify",
        "--features",
        &p("ragged.csv", &ragged),
        "--labels",
        &labels,
    ]);
    assert!(e.contains("ragged"), "{e}");

    let one: String = (0..40).map(|_| "only\n").collect();
    let e = fails(&[
        "classify",
        "--features",
        &feats,
        "--labels",
        &p("one.txt", &one),
        "--k",
        "3",
    ]);
    assert!(e.contains("only one class"), "{e}");

    let short: String = (0..39)
        .map(|i| if i % 2 == 0 { "a\n" } else { "b\n" })
        .collect();
    let e = fails(&[
        "classify",
        "--features",
        &feats,
        "--labels",
        &p("short.txt", &short),
        "--k",
        "3",
    ]);
    assert!(e.contains("40 feature rows but 39 labels"), "{e}");

    let e = fails(&[
        "classify",
        "--features",
        &feats,
        "--labels",
        &labels,
        "--weights",
        "cosine",
    ]);
    assert!(e.contains("cosine"), "{e}");
}
