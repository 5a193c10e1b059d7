//! The statistics against scikit-learn / scipy fixtures (`tests/golden/stats/sklearn.json`,
//! produced by `tests/golden/make_stats.py`).

use entropy_lens::analysis::metrics::{
    corrected_paired_t_test, f1_macro, kendall_tau_b, paired_t_test, roc_auc_binary,
    roc_auc_ovr_macro, spearman,
};
use entropy_lens::analysis::{
    knn_cross_validate, pca, trustworthiness, tsne, KnnClassifier, KnnCvConfig, Labels, TsneConfig,
    TsneMethod, Weighting,
};
use entropy_lens::data::{read_features, read_labels};
use ndarray::Array2;
use serde_json::Value;

fn fixtures() -> Value {
    let p = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"),
    )
    .join("tests/golden/stats/sklearn.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn matrix(v: &Value) -> Array2<f64> {
    let rows: Vec<Vec<f64>> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect();
    let (n, d) = (rows.len(), rows[0].len());
    Array2::from_shape_vec((n, d), rows.into_iter().flatten().collect()).unwrap()
}

fn vecf(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn vecu(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

#[test]
fn knn_probabilities_equal_scikit_learn() {
    let f = fixtures();
    let mut checked = 0;
    for case in f["knn"].as_array().unwrap() {
        let x = matrix(&case["train_x"]);
        let q = matrix(&case["test_x"]);
        let classes = vecu(&case["classes"]);
        // scikit-learn's classes_ are the sorted unique labels; encode as their positions.
        let y: Vec<usize> = vecu(&case["train_y"])
            .iter()
            .map(|l| classes.iter().position(|c| c == l).unwrap())
            .collect();
        let weighting: Weighting = case["weights"].as_str().unwrap().parse().unwrap();
        let k = case["k"].as_u64().unwrap() as usize;
        let knn = KnnClassifier::fit(x.view(), &y, classes.len(), k, weighting).unwrap();
        let ours = knn.predict_proba(q.view()).unwrap();
        let theirs = matrix(&case["proba"]);
        let worst = (&ours - &theirs).iter().fold(0f64, |m, d| m.max(d.abs()));
        assert!(
            worst <= 1e-12,
            "{} k={k} {:?}: max |Δp| = {worst}\nours {ours:?}\ntheirs {theirs:?}",
            case["name"],
            weighting
        );
        checked += 1;
    }
    assert_eq!(checked, 40);
}

#[test]
fn roc_auc_and_f1_equal_scikit_learn() {
    let f = fixtures();
    for case in f["roc_auc"].as_array().unwrap() {
        let expect = case["auc"].as_f64().unwrap();
        let ours = if case["kind"] == "binary" {
            let pos: Vec<bool> = vecu(&case["y"]).iter().map(|&v| v == 1).collect();
            roc_auc_binary(&pos, &vecf(&case["scores"])).unwrap()
        } else {
            roc_auc_ovr_macro(&vecu(&case["y"]), matrix(&case["proba"]).view()).unwrap()
        };
        assert!(
            (ours - expect).abs() <= 1e-12,
            "{}: {ours} vs {expect}",
            case["kind"]
        );
    }
    for case in f["f1"].as_array().unwrap() {
        let ours = f1_macro(&vecu(&case["y"]), &vecu(&case["pred"])).unwrap();
        let expect = case["f1"].as_f64().unwrap();
        assert!((ours - expect).abs() <= 1e-12, "{ours} vs {expect}");
    }
}

#[test]
fn spearman_and_paired_t_test_equal_scipy() {
    let f = fixtures();
    for case in f["spearman"].as_array().unwrap() {
        let (rho, p) = spearman(&vecf(&case["x"]), &vecf(&case["y"]))
            .unwrap()
            .unwrap();
        assert!(
            (rho - case["rho"].as_f64().unwrap()).abs() <= 1e-12,
            "rho {rho}"
        );
        assert!(
            (p - case["p"].as_f64().unwrap()).abs() <= 1e-9,
            "p {p} vs {}",
            case["p"]
        );
    }
    for case in f["ttest_rel"].as_array().unwrap() {
        let (t, p) = paired_t_test(&vecf(&case["a"]), &vecf(&case["b"]))
            .unwrap()
            .unwrap();
        let (et, ep) = (case["t"].as_f64().unwrap(), case["p"].as_f64().unwrap());
        assert!((t - et).abs() <= 1e-9 * et.abs().max(1.0), "t {t} vs {et}");
        assert!((p - ep).abs() <= 1e-9, "p {p} vs {ep}");
    }
}

/// `tests/golden/stats/kendall.json`, written by `tests/golden/make_kendall.py` (scipy).
fn kendall_fixture() -> Value {
    let p = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"),
    )
    .join("tests/golden/stats/kendall.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn kendall_tau_b_equals_scipy_with_and_without_ties() {
    let f = kendall_fixture();
    let cases = f["kendall"].as_array().unwrap();
    assert!(cases.len() >= 6);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let got = kendall_tau_b(&vecf(&case["x"]), &vecf(&case["y"])).unwrap();
        match (got, case["tau_b"].as_f64()) {
            (None, None) => {}
            (Some((tau, p)), Some(want)) => {
                assert!(
                    (tau - want).abs() < 1e-12,
                    "{name}: τ-b {tau} vs scipy {want}"
                );
                let want_p = case["p_value"].as_f64().unwrap();
                // Relative: one p-value is 5e-151.
                assert!(
                    (p - want_p).abs() <= 1e-9 * want_p.max(1e-300) + 1e-14,
                    "{name}: p {p} vs scipy {want_p}"
                );
            }
            (got, want) => panic!("{name}: {got:?} vs scipy {want:?}"),
        }
    }
}

#[test]
fn corrected_paired_t_test_equals_the_formula_and_is_more_cautious_than_the_plain_one() {
    let f = kendall_fixture();
    let c = &f["corrected_t_test"];
    let (a, b) = (vecf(&c["a"]), vecf(&c["b"]));
    let ratio = c["test_over_train"].as_f64().unwrap();
    let (t, p) = corrected_paired_t_test(&a, &b, ratio).unwrap().unwrap();
    assert!((t - c["t"].as_f64().unwrap()).abs() < 1e-12, "{t}");
    assert!((p - c["p_value"].as_f64().unwrap()).abs() < 1e-12, "{p}");
    let (t0, p0) = paired_t_test(&a, &b).unwrap().unwrap();
    assert!((t0 - c["plain_t"].as_f64().unwrap()).abs() < 1e-12);
    assert!((p0 - c["plain_p_value"].as_f64().unwrap()).abs() < 1e-12);
    assert!(p > p0, "the correction widens the interval: {p} vs {p0}");
    assert!(corrected_paired_t_test(&a, &b, 0.0).is_err());
}

#[test]
fn pca_equals_scikit_learn_up_to_sign() {
    let f = fixtures();
    let case = &f["pca"];
    let x = matrix(&case["x"]);
    let ours = pca(x.view(), 2).unwrap();
    let theirs = matrix(&case["coords"]);
    for c in 0..2 {
        let a = ours.coords.column(c);
        let b = theirs.column(c);
        let sign = if a.dot(&b) < 0.0 { -1.0 } else { 1.0 };
        let worst = a
            .iter()
            .zip(b.iter())
            .fold(0f64, |m, (x, y)| m.max((sign * x - y).abs()));
        assert!(worst <= 1e-6, "component {c}: max |Δ| = {worst}");
    }
    let ratio = ours.explained_variance_ratio.unwrap();
    for (r, e) in ratio.iter().zip(vecf(&case["explained_variance_ratio"])) {
        assert!((r - e).abs() <= 1e-9, "{r} vs {e}");
    }
}

#[test]
fn tsne_trustworthiness_close_to_scikit_learn() {
    let f = fixtures();
    let case = &f["tsne"];
    let x = matrix(&case["x"]);
    let k = case["n_neighbors"].as_u64().unwrap() as usize;
    let theirs = case["trustworthiness"].as_f64().unwrap();
    for method in [TsneMethod::BarnesHut, TsneMethod::Exact] {
        let cfg = TsneConfig {
            method,
            perplexity: case["perplexity"].as_f64().unwrap(),
            ..Default::default()
        };
        let emb = tsne(x.view(), &cfg).unwrap();
        assert_eq!(emb.coords.dim(), (x.nrows(), 2));
        let ours = trustworthiness(x.view(), emb.coords.view(), k).unwrap();
        println!("{method:?} trustworthiness: ours {ours:.4}, scikit-learn {theirs:.4}");
        assert!(
            (ours - theirs).abs() <= 0.02,
            "{method:?}: {ours} vs {theirs}"
        );
        if method == TsneMethod::Exact {
            // Seeded and single-threaded: the same call gives the same embedding.
            assert_eq!(tsne(x.view(), &cfg).unwrap().coords, emb.coords);
        }
    }
    // The score itself: the identity embedding is perfectly trustworthy.
    assert!((trustworthiness(x.view(), x.view(), k).unwrap() - 1.0).abs() < 1e-12);
}

#[test]
fn cross_validated_auc_on_real_profiles_close_to_scikit_learn() {
    let f = fixtures();
    let case = &f["cv"];
    assert!(!case.is_null(), "make_stats.py found no features file");
    let dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"),
    )
    .join("tests/golden/stats");
    let x = read_features(&dir.join("tinystories_smollm2_features.csv")).unwrap();
    let labels = Labels::encode(&read_labels(&dir.join("tinystories_smollm2_labels.txt")).unwrap());
    let cfg = KnnCvConfig::default();
    let r = knn_cross_validate(x.view(), &labels, &cfg).unwrap();
    let theirs = case["auc_mean"].as_f64().unwrap();
    println!(
        "{r}\nscikit-learn: AUC {theirs:.4}, baseline {:.4}",
        case["baseline_auc_mean"]
    );
    assert_eq!(r.auc_folds.len(), 10);
    // The same folds as StratifiedKFold(10, shuffle=True, random_state=42) and the same kNN: the
    // same AUC, to rounding.
    assert!(
        (r.auc_mean - theirs).abs() <= 1e-12,
        "{} vs {theirs}",
        r.auc_mean
    );
    assert!((r.auc_std - case["auc_std"].as_f64().unwrap()).abs() <= 1e-12);
    assert!((r.baseline_auc_mean - 0.5).abs() < 0.1);
}

#[test]
fn folds_are_scikit_learns_stratified_kfold_with_numpys_shuffle() {
    use entropy_lens::analysis::crossval::stratified_kfold;
    use entropy_lens::analysis::numpy_rng::RandomState;
    let path = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"),
    )
    .join("tests/golden/stats/folds.json");
    let f: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for case in f["shuffles"].as_array().unwrap() {
        let mut rs = RandomState::new(case["seed"].as_u64().unwrap() as u32);
        let n = case["n"].as_u64().unwrap() as usize;
        let mut a: Vec<u64> = (0..n as u64).collect();
        rs.shuffle(&mut a);
        let want: Vec<u64> = case["first"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(
            a, want,
            "numpy RandomState({}).shuffle(arange({n}))",
            case["seed"]
        );
        let mut b: Vec<u64> = (0..5).collect();
        rs.shuffle(&mut b);
        let want: Vec<u64> = case["then5"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(b, want);
    }
    let cases = f["stratified_kfold"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let y: Vec<String> = case["y"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        let labels = Labels::encode(&y);
        let folds = stratified_kfold(
            &labels.encoded,
            labels.n_classes(),
            case["n_splits"].as_u64().unwrap() as usize,
            case["seed"].as_u64().unwrap(),
        )
        .unwrap();
        let want: Vec<Vec<usize>> = case["test_folds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                f.as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap() as usize)
                    .collect()
            })
            .collect();
        assert_eq!(
            folds,
            want,
            "{} samples, {} splits, seed {}",
            y.len(),
            case["n_splits"],
            case["seed"]
        );
    }
}
