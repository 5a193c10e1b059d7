//! Two-dimensional views of profile features: PCA (linfa-reduction) and exact t-SNE, plus
//! scikit-learn's trustworthiness score to judge an embedding.

use linfa::traits::{Fit, Predict};
use linfa::DatasetBase;
use linfa_reduction::Pca;
use ndarray::{Array1, Array2, ArrayView2, Axis};
use serde::{Deserialize, Serialize};

use super::knn::check_finite;
use crate::error::{Error, Result};

/// Coordinates of a projection, with what judges it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    /// "pca" or "tsne".
    pub method: String,
    /// samples × components.
    pub coords: Array2<f64>,
    /// PCA: share of the total variance along each component (as scikit-learn).
    pub explained_variance_ratio: Option<Vec<f64>>,
    /// t-SNE: final Kullback-Leibler divergence.
    pub kl_divergence: Option<f64>,
}

/// PCA to `components` dimensions (data centred, not whitened).
pub fn pca(x: ArrayView2<f64>, components: usize) -> Result<Projection> {
    check_finite(x, "the features")?;
    if x.nrows() < 2 {
        return Err(Error::Data("PCA needs at least 2 samples".into()));
    }
    if components == 0 || components > x.ncols() {
        return Err(Error::invalid(format!(
            "PCA to {components} components needs 1 ≤ components ≤ {} features",
            x.ncols()
        )));
    }
    let ds = DatasetBase::from(x.to_owned());
    let model = Pca::params(components)
        .fit(&ds)
        .map_err(|e| Error::Data(format!("PCA failed: {e}")))?;
    let coords: Array2<f64> = model.predict(&x.to_owned());
    // Ratio to the total variance of the centred data (linfa reports it relative to the kept
    // components only).
    let mean = x
        .mean_axis(Axis(0))
        .unwrap_or_else(|| Array1::zeros(x.ncols()));
    let total: f64 = (&x - &mean).iter().map(|v| v * v).sum();
    let ratio = model
        .singular_values()
        .iter()
        .map(|s| if total > 0.0 { s * s / total } else { 0.0 })
        .collect();
    Ok(Projection {
        method: "pca".into(),
        coords,
        explained_variance_ratio: Some(ratio),
        kl_divergence: None,
    })
}

/// How t-SNE computes its gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TsneMethod {
    /// Exact O(n²) gradient (this crate): reproducible for a seed; a few thousand samples at most.
    #[default]
    Exact,
    /// Barnes-Hut approximation (linfa-tsne / bhtsne), O(n log n), for large sets. Its threaded
    /// sums make runs differ slightly even with the same seed.
    BarnesHut,
}

/// t-SNE settings (scikit-learn's defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TsneConfig {
    pub method: TsneMethod,
    pub components: usize,
    pub perplexity: f64,
    pub early_exaggeration: f64,
    /// `None`: scikit-learn's "auto", max(n / early_exaggeration / 4, 50).
    pub learning_rate: Option<f64>,
    pub iterations: usize,
    pub seed: u64,
}

impl Default for TsneConfig {
    fn default() -> Self {
        Self {
            method: TsneMethod::Exact,
            components: 2,
            perplexity: 30.0,
            early_exaggeration: 12.0,
            learning_rate: None,
            iterations: 1000,
            seed: 0,
        }
    }
}

const EXPLORATION_ITERATIONS: usize = 250;
const MIN_GAIN: f64 = 0.01;
const MACHINE_EPSILON: f64 = f64::EPSILON;

fn squared_distances(x: ArrayView2<f64>) -> Array2<f64> {
    let norms: Vec<f64> = x.rows().into_iter().map(|r| r.dot(&r)).collect();
    let g = x.dot(&x.t());
    let n = x.nrows();
    Array2::from_shape_fn((n, n), |(i, j)| {
        if i == j {
            0.0
        } else {
            (norms[i] + norms[j] - 2.0 * g[[i, j]]).max(0.0)
        }
    })
}

/// Conditional probabilities P(j|i) with a per-point Gaussian bandwidth found by bisection so that
/// each row's perplexity matches the target; returned symmetrised and normalised.
fn joint_probabilities(d2: &Array2<f64>, perplexity: f64) -> Array2<f64> {
    let n = d2.nrows();
    let target = perplexity.ln();
    let mut p = Array2::<f64>::zeros((n, n));
    for i in 0..n {
        let (mut beta, mut lo, mut hi) = (1.0f64, f64::NEG_INFINITY, f64::INFINITY);
        for _ in 0..100 {
            let mut sum = 0.0;
            for j in 0..n {
                let v = if j == i {
                    0.0
                } else {
                    (-d2[[i, j]] * beta).exp()
                };
                p[[i, j]] = v;
                sum += v;
            }
            let sum = if sum == 0.0 { 1e-8 } else { sum };
            let mut h = 0.0;
            for j in 0..n {
                p[[i, j]] /= sum;
                h += d2[[i, j]] * p[[i, j]];
            }
            let entropy = sum.ln() + beta * h;
            let diff = entropy - target;
            if diff.abs() <= 1e-5 {
                break;
            }
            if diff > 0.0 {
                lo = beta;
                beta = if hi.is_infinite() {
                    beta * 2.0
                } else {
                    (beta + hi) / 2.0
                };
            } else {
                hi = beta;
                beta = if lo.is_infinite() {
                    beta / 2.0
                } else {
                    (beta + lo) / 2.0
                };
            }
        }
    }
    let sym = &p + &p.t();
    let total = sym.sum().max(MACHINE_EPSILON);
    sym / total
}

/// t-SNE embedding of the rows of `x` (seeded, deterministic).
pub fn tsne(x: ArrayView2<f64>, cfg: &TsneConfig) -> Result<Projection> {
    check_finite(x, "the features")?;
    let n = x.nrows();
    if n < 4 {
        return Err(Error::Data(format!(
            "t-SNE needs at least 4 samples, got {n}"
        )));
    }
    if cfg.perplexity.is_nan() || cfg.perplexity <= 0.0 || cfg.perplexity >= n as f64 {
        return Err(Error::invalid(format!(
            "perplexity must be in (0, {n}) for {n} samples, got {}",
            cfg.perplexity
        )));
    }
    if cfg.components == 0 || cfg.components > x.ncols() {
        return Err(Error::invalid(format!(
            "t-SNE to {} components needs 1 ≤ components ≤ {} features",
            cfg.components,
            x.ncols()
        )));
    }
    match cfg.method {
        TsneMethod::Exact => tsne_exact(x, cfg),
        TsneMethod::BarnesHut => tsne_barnes_hut(x, cfg),
    }
}

fn tsne_barnes_hut(x: ArrayView2<f64>, cfg: &TsneConfig) -> Result<Projection> {
    use linfa::traits::Transformer;
    use ndarray_rand::rand::SeedableRng as _;
    let n = x.nrows();
    // bhtsne keeps 3 × perplexity neighbours per point.
    if 3.0 * cfg.perplexity > (n - 1) as f64 {
        return Err(Error::invalid(format!(
            "Barnes-Hut t-SNE needs perplexity ≤ (n − 1) / 3 = {:.1} for {n} samples, got {} (or use the exact method)",
            (n - 1) as f64 / 3.0,
            cfg.perplexity
        )));
    }
    let rng = ndarray_rand::rand::rngs::SmallRng::seed_from_u64(cfg.seed);
    let coords = linfa_tsne::TSneParams::embedding_size_with_rng(cfg.components, rng)
        .perplexity(cfg.perplexity)
        .approx_threshold(0.5)
        .max_iter(cfg.iterations)
        .transform(x.to_owned())
        .map_err(|e| Error::Data(format!("t-SNE failed: {e}")))?;
    Ok(Projection {
        method: "tsne".into(),
        coords,
        explained_variance_ratio: None,
        kl_divergence: None,
    })
}

/// Exact t-SNE (O(n²) per iteration; fine for a few thousand samples), initialised with PCA scaled
/// to a standard deviation of 1e-4 along the first axis, as scikit-learn.
fn tsne_exact(x: ArrayView2<f64>, cfg: &TsneConfig) -> Result<Projection> {
    let n = x.nrows();
    let dims = cfg.components;
    let p = joint_probabilities(&squared_distances(x), cfg.perplexity);
    let init = pca(x, dims)?.coords;
    let sd = init.column(0).std(0.0);
    let mut y = if sd > 0.0 { init / sd * 1e-4 } else { init };
    let lr = cfg
        .learning_rate
        .unwrap_or_else(|| (n as f64 / cfg.early_exaggeration / 4.0).max(50.0));
    let mut update = Array2::<f64>::zeros((n, dims));
    let mut gains = Array2::<f64>::ones((n, dims));
    let mut kl = 0.0;
    for it in 0..cfg.iterations {
        let (exag, momentum) = if it < EXPLORATION_ITERATIONS {
            (cfg.early_exaggeration, 0.5)
        } else {
            (1.0, 0.8)
        };
        // Student-t kernel (one degree of freedom for 2-D embeddings).
        let mut num = Array2::<f64>::zeros((n, n));
        let mut z = 0.0;
        for i in 0..n {
            for j in (i + 1)..n {
                let d: f64 = (0..dims).map(|c| (y[[i, c]] - y[[j, c]]).powi(2)).sum();
                let v = 1.0 / (1.0 + d);
                num[[i, j]] = v;
                num[[j, i]] = v;
                z += 2.0 * v;
            }
        }
        let z = z.max(MACHINE_EPSILON);
        let mut grad = Array2::<f64>::zeros((n, dims));
        kl = 0.0;
        for i in 0..n {
            for j in 0..n {
                if i == j {
                    continue;
                }
                let q = (num[[i, j]] / z).max(MACHINE_EPSILON);
                let pij = exag * p[[i, j]];
                let coef = 4.0 * (pij - q) * num[[i, j]];
                for c in 0..dims {
                    grad[[i, c]] += coef * (y[[i, c]] - y[[j, c]]);
                }
                if it + 1 == cfg.iterations && p[[i, j]] > 0.0 {
                    kl += p[[i, j]] * (p[[i, j]].max(MACHINE_EPSILON) / q).ln();
                }
            }
        }
        for ((g, u), gain) in grad.iter_mut().zip(update.iter_mut()).zip(gains.iter_mut()) {
            if *u * *g < 0.0 {
                *gain += 0.2;
            } else {
                *gain *= 0.8;
            }
            *gain = gain.max(MIN_GAIN);
            *g *= *gain;
            *u = momentum * *u - lr * *g;
        }
        y += &update;
    }
    Ok(Projection {
        method: "tsne".into(),
        coords: y,
        explained_variance_ratio: None,
        kl_divergence: Some(kl),
    })
}

/// How well an embedding keeps each sample's `k` nearest original neighbours (1 = perfectly),
/// as `sklearn.manifold.trustworthiness`.
pub fn trustworthiness(x: ArrayView2<f64>, embedded: ArrayView2<f64>, k: usize) -> Result<f64> {
    let n = x.nrows();
    if embedded.nrows() != n {
        return Err(Error::Data(format!(
            "{n} samples but {} embedded points",
            embedded.nrows()
        )));
    }
    if k == 0 || k >= n / 2 {
        return Err(Error::invalid(format!(
            "trustworthiness needs 1 ≤ k < n/2 = {}, got {k}",
            n / 2
        )));
    }
    let dx = squared_distances(x);
    let de = squared_distances(embedded);
    let mut t = 0.0;
    for i in 0..n {
        let mut order: Vec<usize> = (0..n).filter(|&j| j != i).collect();
        order.sort_by(|&a, &b| dx[[i, a]].total_cmp(&dx[[i, b]]).then(a.cmp(&b)));
        let mut rank = vec![0usize; n];
        for (r, &j) in order.iter().enumerate() {
            rank[j] = r + 1;
        }
        let mut near: Vec<usize> = (0..n).filter(|&j| j != i).collect();
        near.sort_by(|&a, &b| de[[i, a]].total_cmp(&de[[i, b]]).then(a.cmp(&b)));
        for &j in &near[..k] {
            if rank[j] > k {
                t += (rank[j] - k) as f64;
            }
        }
    }
    let (n, k) = (n as f64, k as f64);
    Ok(1.0 - t * (2.0 / (n * k * (2.0 * n - 3.0 * k - 1.0))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_inputs() {
        let x = Array2::<f64>::zeros((3, 2));
        assert!(tsne(x.view(), &TsneConfig::default()).is_err());
        assert!(pca(x.view(), 3)
            .unwrap_err()
            .to_string()
            .contains("components"));
        let y = Array2::<f64>::zeros((10, 2));
        assert!(trustworthiness(y.view(), y.view(), 5).is_err());
    }
}
