//! The paper's kNN diagnostic: stratified k-fold cross-validation of a kNN on profile features,
//! one-vs-rest macro ROC-AUC per fold against a stratified dummy baseline, a paired t-test over
//! folds, and macro F1; and repeated random stratified train/test splits (family/size F1).

use ndarray::{Array2, ArrayView2, Axis};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::knn::{argmax_rows, check_finite, KnnClassifier, NeighborSearch, Weighting};
use super::metrics::{f1_macro, mean_std, paired_t_test, roc_auc_ovr_macro};
use super::table::{fmt_pct, Table};
use crate::error::{Error, Result};
use crate::profile::Standardizer;

/// String labels encoded as indices into their sorted unique values (scikit-learn's `classes_`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Labels {
    pub classes: Vec<String>,
    pub encoded: Vec<usize>,
}

impl Labels {
    pub fn encode<S: AsRef<str>>(labels: &[S]) -> Self {
        let mut classes: Vec<String> = labels.iter().map(|s| s.as_ref().to_string()).collect();
        classes.sort();
        classes.dedup();
        let encoded = labels
            .iter()
            .map(|l| {
                classes
                    .binary_search_by(|c| c.as_str().cmp(l.as_ref()))
                    .unwrap_or(0)
            })
            .collect();
        Self { classes, encoded }
    }

    pub fn n_classes(&self) -> usize {
        self.classes.len()
    }

    pub fn counts(&self) -> Vec<usize> {
        let mut c = vec![0; self.classes.len()];
        self.encoded.iter().for_each(|&e| c[e] += 1);
        c
    }
}

/// Test-fold indices of a stratified k-fold split, exactly scikit-learn's
/// `StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)`: classes in order of first
/// appearance, per-fold class counts dealt from the sorted labels, then each class's fold labels
/// shuffled with numpy's legacy `RandomState(seed)` (shared across classes). Each fold's indices
/// are ascending. `seed` must fit numpy's 32 bits.
pub fn stratified_kfold(
    y: &[usize],
    n_classes: usize,
    folds: usize,
    seed: u64,
) -> Result<Vec<Vec<usize>>> {
    if folds < 2 {
        return Err(Error::invalid(format!(
            "need at least 2 folds, got {folds}"
        )));
    }
    let seed = u32::try_from(seed).map_err(|_| {
        Error::invalid(format!(
            "the fold seed must be in 0..=4294967295 (numpy's RandomState), got {seed}"
        ))
    })?;
    let mut counts = vec![0usize; n_classes];
    y.iter().for_each(|&c| counts[c] += 1);
    if let Some((c, n)) = counts.iter().enumerate().find(|(_, &n)| n > 0 && n < folds) {
        return Err(Error::Data(format!(
            "class #{c} has {n} members, fewer than the {folds} folds; use fewer folds or more samples"
        )));
    }
    // Classes numbered by first appearance, as scikit-learn encodes them for the split.
    let mut order: Vec<Option<usize>> = vec![None; n_classes];
    let mut next = 0;
    let encoded: Vec<usize> = y
        .iter()
        .map(|&c| {
            *order[c].get_or_insert_with(|| {
                next += 1;
                next - 1
            })
        })
        .collect();
    let k_classes = next;
    // per_class[k][f]: members of class k in test fold f, from every folds-th sorted label.
    let mut sorted = encoded.clone();
    sorted.sort_unstable();
    let mut per_class = vec![vec![0usize; folds]; k_classes];
    for (i, &c) in sorted.iter().enumerate() {
        per_class[c][i % folds] += 1;
    }
    let mut rng = super::numpy_rng::RandomState::new(seed);
    let mut test_fold = vec![0usize; y.len()];
    for (k, per_fold) in per_class.iter().enumerate() {
        let mut labels: Vec<usize> = per_fold
            .iter()
            .enumerate()
            .flat_map(|(f, &n)| std::iter::repeat_n(f, n))
            .collect();
        rng.shuffle(&mut labels);
        let members = (0..y.len()).filter(|&i| encoded[i] == k);
        for (i, f) in members.zip(labels) {
            test_fold[i] = f;
        }
    }
    let mut out = vec![Vec::new(); folds];
    for (i, &f) in test_fold.iter().enumerate() {
        out[f].push(i);
    }
    Ok(out)
}

/// Settings of the kNN diagnostic (defaults: the paper's k = 29, 10 folds, seed 42).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KnnCvConfig {
    pub k: usize,
    pub folds: usize,
    pub seed: u64,
    pub weighting: Weighting,
    /// Standardise features, fitted on the training folds only.
    pub standardize: bool,
    pub search: NeighborSearch,
}

impl Default for KnnCvConfig {
    fn default() -> Self {
        Self {
            k: 29,
            folds: 10,
            seed: 42,
            weighting: Weighting::Uniform,
            standardize: false,
            search: NeighborSearch::Brute,
        }
    }
}

/// Outcome of [`knn_cross_validate`]. Means and standard deviations are over folds
/// (population std, as `numpy.std`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KnnCvResult {
    pub n_samples: usize,
    pub n_features: usize,
    pub n_classes: usize,
    pub classes: Vec<String>,
    pub k: usize,
    pub folds: usize,
    pub seed: u64,
    pub weights: Weighting,
    pub standardize: bool,
    pub auc_mean: f64,
    pub auc_std: f64,
    pub auc_folds: Vec<f64>,
    pub baseline_auc_mean: f64,
    pub baseline_auc_std: f64,
    pub baseline_auc_folds: Vec<f64>,
    /// Paired t-test of fold AUCs against the baseline's (null when undefined).
    pub t_statistic: Option<f64>,
    pub p_value: Option<f64>,
    pub f1_macro_mean: f64,
    pub f1_macro_std: f64,
    pub f1_folds: Vec<f64>,
}

fn check_inputs(x: ArrayView2<f64>, labels: &Labels) -> Result<()> {
    if x.nrows() != labels.encoded.len() {
        return Err(Error::Data(format!(
            "{} feature rows but {} labels",
            x.nrows(),
            labels.encoded.len()
        )));
    }
    if labels.n_classes() < 2 {
        return Err(Error::Data(format!(
            "only one class ({:?}) in the labels: classification needs at least two",
            labels.classes.first().map(String::as_str).unwrap_or("")
        )));
    }
    if x.ncols() == 0 {
        return Err(Error::Data("features have zero columns".into()));
    }
    check_finite(x, "the features")
}

fn take(x: ArrayView2<f64>, rows: &[usize]) -> Array2<f64> {
    x.select(Axis(0), rows)
}

/// Probabilities of the stratified dummy: each test row is a one-hot draw from the training
/// class frequencies (`DummyClassifier(strategy="stratified")`).
fn dummy_proba(
    train_y: &[usize],
    n_classes: usize,
    n_test: usize,
    rng: &mut ChaCha8Rng,
) -> Array2<f64> {
    let mut counts = vec![0usize; n_classes];
    train_y.iter().for_each(|&c| counts[c] += 1);
    let total = train_y.len() as f64;
    let mut p = Array2::zeros((n_test, n_classes));
    for i in 0..n_test {
        let u: f64 = rng.random::<f64>() * total;
        let mut acc = 0.0;
        let mut pick = n_classes - 1;
        for (c, &n) in counts.iter().enumerate() {
            acc += n as f64;
            if u < acc {
                pick = c;
                break;
            }
        }
        p[[i, pick]] = 1.0;
    }
    p
}

/// Cross-validated kNN separability of `x` (samples × features) by `labels`.
pub fn knn_cross_validate(
    x: ArrayView2<f64>,
    labels: &Labels,
    cfg: &KnnCvConfig,
) -> Result<KnnCvResult> {
    check_inputs(x, labels)?;
    if cfg.k == 0 {
        return Err(Error::invalid("k must be at least 1 neighbour"));
    }
    let y = &labels.encoded;
    let c = labels.n_classes();
    let folds = stratified_kfold(y, c, cfg.folds, cfg.seed)?;
    let smallest_train = x.nrows() - folds.iter().map(Vec::len).max().unwrap_or(0);
    if cfg.k > smallest_train {
        return Err(Error::invalid(format!(
            "k = {} neighbours but a training fold has only {smallest_train} samples; lower --k or --folds",
            cfg.k
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed.wrapping_add(1));
    let (mut aucs, mut base, mut f1s) = (Vec::new(), Vec::new(), Vec::new());
    for test in &folds {
        let mut in_test = vec![false; x.nrows()];
        test.iter().for_each(|&i| in_test[i] = true);
        let train: Vec<usize> = (0..x.nrows()).filter(|&i| !in_test[i]).collect();
        let (mut xtr, mut xte) = (take(x, &train), take(x, test));
        if cfg.standardize {
            let s = Standardizer::fit(xtr.view())?;
            xtr = s.transform(xtr.view());
            xte = s.transform(xte.view());
        }
        let ytr: Vec<usize> = train.iter().map(|&i| y[i]).collect();
        let yte: Vec<usize> = test.iter().map(|&i| y[i]).collect();
        // Inputs were validated once above (finite values, k ≤ every training fold).
        let knn = KnnClassifier::from_checked(xtr, &ytr, c, cfg.k, cfg.weighting, cfg.search);
        let proba = knn.predict_proba(xte.view())?;
        aucs.push(roc_auc_ovr_macro(&yte, proba.view())?);
        f1s.push(f1_macro(&yte, &argmax_rows(proba.view()))?);
        let dummy = dummy_proba(&ytr, c, test.len(), &mut rng);
        base.push(roc_auc_ovr_macro(&yte, dummy.view())?);
    }
    let (auc_mean, auc_std) = mean_std(&aucs);
    let (baseline_auc_mean, baseline_auc_std) = mean_std(&base);
    let (f1_macro_mean, f1_macro_std) = mean_std(&f1s);
    let test = paired_t_test(&aucs, &base)?;
    Ok(KnnCvResult {
        n_samples: x.nrows(),
        n_features: x.ncols(),
        n_classes: c,
        classes: labels.classes.clone(),
        k: cfg.k,
        folds: cfg.folds,
        seed: cfg.seed,
        weights: cfg.weighting,
        standardize: cfg.standardize,
        auc_mean,
        auc_std,
        auc_folds: aucs,
        baseline_auc_mean,
        baseline_auc_std,
        baseline_auc_folds: base,
        t_statistic: test.map(|t| t.0),
        p_value: test.map(|t| t.1),
        f1_macro_mean,
        f1_macro_std,
        f1_folds: f1s,
    })
}

/// Outcome of [`repeated_split_f1`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SplitF1Result {
    pub k: usize,
    pub splits: usize,
    pub test_fraction: f64,
    pub f1_splits: Vec<f64>,
    pub f1_mean: f64,
    pub f1_std: f64,
}

/// Macro F1 of a kNN over repeated random stratified train/test splits (the paper's model
/// family / size classification: k = 3, 50/50, 10 splits, standardised features).
pub fn repeated_split_f1(
    x: ArrayView2<f64>,
    labels: &Labels,
    k: usize,
    splits: usize,
    test_fraction: f64,
    seed: u64,
    standardize: bool,
) -> Result<SplitF1Result> {
    check_inputs(x, labels)?;
    if k == 0 {
        return Err(Error::invalid("k must be at least 1 neighbour"));
    }
    if !(test_fraction > 0.0 && test_fraction < 1.0) {
        return Err(Error::invalid(format!(
            "test fraction must be in (0, 1), got {test_fraction}"
        )));
    }
    let c = labels.n_classes();
    let mut by_class: Vec<Vec<usize>> = vec![Vec::new(); c];
    labels
        .encoded
        .iter()
        .enumerate()
        .for_each(|(i, &l)| by_class[l].push(i));
    if let Some((ci, _)) = by_class.iter().enumerate().find(|(_, m)| m.len() < 2) {
        return Err(Error::Data(format!(
            "class {:?} has fewer than 2 members: it cannot appear on both sides of a split",
            labels.classes[ci]
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut f1s = Vec::with_capacity(splits);
    for _ in 0..splits {
        let (mut train, mut test) = (Vec::new(), Vec::new());
        for members in &by_class {
            let mut m = members.clone();
            m.shuffle(&mut rng);
            let n_test = ((m.len() as f64 * test_fraction).round() as usize).clamp(1, m.len() - 1);
            test.extend_from_slice(&m[..n_test]);
            train.extend_from_slice(&m[n_test..]);
        }
        train.sort_unstable();
        test.sort_unstable();
        if k > train.len() {
            return Err(Error::invalid(format!(
                "k = {k} neighbours but the training split has only {} samples",
                train.len()
            )));
        }
        let (mut xtr, mut xte) = (take(x, &train), take(x, &test));
        if standardize {
            let s = Standardizer::fit(xtr.view())?;
            xtr = s.transform(xtr.view());
            xte = s.transform(xte.view());
        }
        let ytr: Vec<usize> = train.iter().map(|&i| labels.encoded[i]).collect();
        let yte: Vec<usize> = test.iter().map(|&i| labels.encoded[i]).collect();
        let knn =
            KnnClassifier::fit_owned(xtr, &ytr, c, k, Weighting::Uniform, NeighborSearch::Brute)?;
        f1s.push(f1_macro(&yte, &knn.predict(xte.view())?)?);
    }
    let (f1_mean, f1_std) = mean_std(&f1s);
    Ok(SplitF1Result {
        k,
        splits,
        test_fraction,
        f1_splits: f1s,
        f1_mean,
        f1_std,
    })
}

impl KnnCvResult {
    /// The result as a table (what `Display` and the notebook show).
    pub fn table(&self) -> Table {
        let mut t = Table::new(
            format!(
                "kNN diagnostic: {} samples × {} features, {} classes, k = {}, {}-fold CV (seed {}){}",
                self.n_samples,
                self.n_features,
                self.n_classes,
                self.k,
                self.folds,
                self.seed,
                if self.standardize { ", standardised" } else { "" }
            ),
            &["", "ROC-AUC (%)", "macro F1 (%)"],
        );
        t.row(vec![
            "kNN".into(),
            format!("{} ± {}", fmt_pct(self.auc_mean), fmt_pct(self.auc_std)),
            format!(
                "{} ± {}",
                fmt_pct(self.f1_macro_mean),
                fmt_pct(self.f1_macro_std)
            ),
        ]);
        t.row(vec![
            "stratified dummy".into(),
            format!(
                "{} ± {}",
                fmt_pct(self.baseline_auc_mean),
                fmt_pct(self.baseline_auc_std)
            ),
            String::new(),
        ]);
        t.note(match self.p_value {
            Some(p) => format!("paired t-test over folds, kNN vs dummy AUC: p = {p:.3e}"),
            None => "paired t-test undefined (identical fold differences)".into(),
        });
        t
    }

    /// An HTML table for notebooks.
    pub fn to_html(&self) -> String {
        self.table().to_html()
    }
}

impl std::fmt::Display for KnnCvResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.table())
    }
}

impl SplitF1Result {
    fn table(&self) -> Table {
        let mut t = Table::new(
            format!(
                "kNN (k = {}) macro F1 over {} random stratified splits ({:.0}% test)",
                self.k,
                self.splits,
                100.0 * self.test_fraction
            ),
            &["macro F1 (%)"],
        );
        t.row(vec![format!(
            "{} ± {}",
            fmt_pct(self.f1_mean),
            fmt_pct(self.f1_std)
        )]);
        t
    }

    pub fn to_html(&self) -> String {
        self.table().to_html()
    }
}

impl std::fmt::Display for SplitF1Result {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.table())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_are_stratified_and_balanced() {
        let y: Vec<usize> = (0..103)
            .map(|i| {
                if i < 70 {
                    0
                } else if i < 95 {
                    1
                } else {
                    2
                }
            })
            .collect();
        let folds = stratified_kfold(&y, 3, 5, 42).unwrap();
        let mut all: Vec<usize> = folds.concat();
        all.sort();
        assert_eq!(all, (0..103).collect::<Vec<_>>());
        for f in &folds {
            let c0 = f.iter().filter(|&&i| y[i] == 0).count();
            assert_eq!(c0, 14);
            assert!((20..=21).contains(&f.len()));
        }
        let err = stratified_kfold(&y, 3, 10, 42).unwrap_err();
        assert!(err.to_string().contains("fewer than the 10 folds"), "{err}");
        // Deterministic per seed.
        assert_eq!(folds, stratified_kfold(&y, 3, 5, 42).unwrap());
        assert_ne!(folds, stratified_kfold(&y, 3, 5, 43).unwrap());
    }

    #[test]
    fn repeated_splits_are_stratified_and_score_separable_data() {
        // Two well-separated clusters: every split classifies perfectly.
        let x = Array2::from_shape_fn(
            (40, 2),
            |(i, j)| if i < 20 { j as f64 } else { 10.0 + j as f64 } + (i % 5) as f64 * 0.01,
        );
        let labels = Labels::encode(
            &(0..40)
                .map(|i| if i < 20 { "a" } else { "b" })
                .collect::<Vec<_>>(),
        );
        let r = repeated_split_f1(x.view(), &labels, 3, 10, 0.5, 1, true).unwrap();
        assert_eq!(r.f1_splits.len(), 10);
        assert!(r.f1_splits.iter().all(|&f| f == 1.0));
        assert_eq!((r.f1_mean, r.f1_std), (1.0, 0.0));
        // Random labels: chance level on average.
        let noisy = Labels::encode(
            &(0..40)
                .map(|i| if (i * 7) % 3 == 0 { "a" } else { "b" })
                .collect::<Vec<_>>(),
        );
        let r = repeated_split_f1(x.view(), &noisy, 3, 10, 0.5, 1, false).unwrap();
        assert!(r.f1_mean < 0.8, "{}", r.f1_mean);
        assert!(repeated_split_f1(x.view(), &labels, 3, 10, 1.5, 1, false).is_err());
        assert!(r.to_string().contains("macro F1"));
    }

    #[test]
    fn input_errors() {
        let x = Array2::<f64>::zeros((20, 3));
        let one = Labels::encode(&vec!["a"; 20]);
        let e = knn_cross_validate(x.view(), &one, &KnnCvConfig::default()).unwrap_err();
        assert!(e.to_string().contains("only one class"), "{e}");
        let two = Labels::encode(
            &(0..19)
                .map(|i| if i % 2 == 0 { "a" } else { "b" })
                .collect::<Vec<_>>(),
        );
        let e = knn_cross_validate(x.view(), &two, &KnnCvConfig::default()).unwrap_err();
        assert!(
            e.to_string().contains("20 feature rows but 19 labels"),
            "{e}"
        );
        let two = Labels::encode(
            &(0..20)
                .map(|i| if i % 2 == 0 { "a" } else { "b" })
                .collect::<Vec<_>>(),
        );
        let cfg = KnnCvConfig {
            k: 19,
            folds: 2,
            ..Default::default()
        };
        let e = knn_cross_validate(x.view(), &two, &cfg).unwrap_err();
        assert!(e.to_string().contains("k = 19"), "{e}");
    }
}
