//! The paper's statistics on arrays and profiles: the kNN diagnostic (the CLI's `classify`) and
//! the C1/C2 validation, computed by the library (results as JSON for the Python wrapper).

use entropy_lens::analysis::{c1_spearman, c2_overlap, knn_cross_validate, KnnCvConfig, Labels};
use numpy::PyReadonlyArray2;
use pyo3::prelude::*;

use crate::errors::IntoPy;
use crate::profiler::PyProfile;

/// k-fold cross-validated kNN ROC-AUC (one-vs-rest, macro) against the stratified baseline.
#[pyfunction]
#[pyo3(signature = (features, labels, k, folds, seed, weights, standardize, search))]
#[allow(clippy::too_many_arguments)]
pub fn knn_auc(
    py: Python<'_>,
    features: PyReadonlyArray2<'_, f64>,
    labels: Vec<String>,
    k: usize,
    folds: usize,
    seed: u64,
    weights: &str,
    standardize: bool,
    search: &str,
) -> PyResult<String> {
    let cfg = KnnCvConfig {
        k,
        folds,
        seed,
        weighting: weights.parse().py()?,
        standardize,
        search: entropy_lens::cli::parse_search(search).py()?,
    };
    let x = features.as_array().to_owned();
    let labels = Labels::encode(&labels);
    let result = py
        .detach(|| knn_cross_validate(x.view(), &labels, &cfg))
        .py()?;
    serde_json::to_string(&result)
        .map_err(entropy_lens::Error::from)
        .py()
}

fn inner(profiles: &[PyRef<'_, PyProfile>]) -> Vec<entropy_lens::profile::EntropyProfile> {
    profiles.iter().map(|p| p.inner.clone()).collect()
}

/// C1: Spearman's ρ between each block's entropy change and its top-p count change.
#[pyfunction]
pub fn c1(model: &str, profiles: Vec<PyRef<'_, PyProfile>>) -> PyResult<String> {
    let r = c1_spearman(model, &inner(&profiles)).py()?;
    serde_json::to_string(&r)
        .map_err(entropy_lens::Error::from)
        .py()
}

/// C2: how much of each top-p set the next block keeps (needs `top_p_ids=True`).
#[pyfunction]
pub fn c2(model: &str, profiles: Vec<PyRef<'_, PyProfile>>) -> PyResult<String> {
    let r = c2_overlap(model, &inner(&profiles)).py()?;
    serde_json::to_string(&r)
        .map_err(entropy_lens::Error::from)
        .py()
}
