//! The held-out evaluation of a lens: mean KL(final ‖ lens) per layer over held-out windows, kept
//! per window so that a report can say how much its means would move with other text
//! (percentile-bootstrap intervals over windows: tokens of one window are not independent, windows
//! of a long text nearly are).

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::train::Readout;
use super::trainer::for_each_chunk;
use super::tuned::TunedLens;
use crate::error::Result;
use crate::model::Model;

/// Bootstrap resamples behind every interval of a report.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// The seed of those resamples (a report's intervals are reproducible to the bit).
pub const BOOTSTRAP_SEED: u64 = 20_250_226;

/// Mean KL(final ‖ lens) per layer of every held-out window.
///
/// # Shapes
/// `by_window`: [windows][layers]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeldOutKl {
    pub by_window: Vec<Vec<f64>>,
}

impl HeldOutKl {
    /// Mean KL per layer over all held-out tokens (every window holds the same number of tokens,
    /// so this is the mean of the windows' means).
    pub fn mean(&self) -> Vec<f64> {
        let n = self.by_window.len().max(1) as f64;
        let l = self.by_window.first().map_or(0, Vec::len);
        (0..l)
            .map(|j| self.by_window.iter().map(|w| w[j]).sum::<f64>() / n)
            .collect()
    }

    /// 95 % percentile-bootstrap interval of each layer's mean over windows ([lo, hi] per layer;
    /// empty with fewer than two windows).
    pub fn ci95(&self) -> Vec<[f64; 2]> {
        bootstrap_ci95(&self.by_window)
    }
}

/// 95 % percentile-bootstrap intervals of the column means of `rows` (rows resampled with
/// replacement, [`BOOTSTRAP_RESAMPLES`] times, seeded with [`BOOTSTRAP_SEED`]; the same resamples
/// for every column, so paired columns stay paired). Empty with fewer than two rows.
///
/// # Shapes
/// `rows`: [n][columns] → [columns]
pub fn bootstrap_ci95(rows: &[Vec<f64>]) -> Vec<[f64; 2]> {
    let n = rows.len();
    if n < 2 {
        return Vec::new();
    }
    let cols = rows[0].len();
    let mut rng = ChaCha8Rng::seed_from_u64(BOOTSTRAP_SEED);
    let mut means: Vec<Vec<f64>> = vec![Vec::with_capacity(BOOTSTRAP_RESAMPLES); cols];
    let mut sums = vec![0.0; cols];
    for _ in 0..BOOTSTRAP_RESAMPLES {
        sums.iter_mut().for_each(|s| *s = 0.0);
        for _ in 0..n {
            let row = &rows[rng.random_range(0..n)];
            sums.iter_mut().zip(row).for_each(|(s, v)| *s += v);
        }
        means
            .iter_mut()
            .zip(&sums)
            .for_each(|(m, s)| m.push(s / n as f64));
    }
    means
        .into_iter()
        .map(|mut m| {
            m.sort_by(f64::total_cmp);
            [percentile(&m, 0.025), percentile(&m, 0.975)]
        })
        .collect()
}

/// The mean over layers `from..` of each window's KL ([windows]), e.g. the blocks a table reads
/// (from 1: the embedding output left out).
pub fn layer_means(by_window: &[Vec<f64>], from: usize) -> Vec<f64> {
    by_window
        .iter()
        .map(|w| {
            let tail = w.get(from..).unwrap_or(&[]);
            tail.iter().sum::<f64>() / tail.len().max(1) as f64
        })
        .collect()
}

/// The `q` quantile of sorted `v` by linear interpolation between order statistics (numpy's
/// default).
fn percentile(v: &[f64], q: f64) -> f64 {
    let x = q * (v.len() - 1) as f64;
    let (i, f) = (x.floor() as usize, x - x.floor());
    match v.get(i + 1) {
        Some(next) => v[i] + f * (next - v[i]),
        None => v[i],
    }
}

/// [`evaluate`] through the logit lens (zero translators), kept in the cache folder
/// (`heldout/<key>.json`, the key a digest of the model's sha256 and the windows' token ids): every
/// lens trained on one text is compared with the same logit-lens reading, and reading it again costs
/// as much as reading the trained lens (a vocabulary-sized product per layer and token). A cache that
/// cannot be read or written is skipped, not an error.
pub(crate) fn evaluate_logit(
    model: &mut Model,
    readout: &Readout,
    windows: &[&Vec<u32>],
    chunk: usize,
) -> Result<HeldOutKl> {
    let info = model.info().clone();
    let key = {
        let mut bytes = format!("{}|{}|", info.sha256, info.n_layers).into_bytes();
        for w in windows {
            bytes.extend(w.iter().flat_map(|t| t.to_le_bytes()));
            bytes.push(b'|');
        }
        crate::model::fingerprint::bytes_sha256(&bytes)
    };
    let path = crate::cache::cache_dir()
        .ok()
        .filter(|_| !info.sha256.is_empty())
        .map(|d| d.join("heldout").join(format!("{key}.json")));
    if let Some(text) = path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
        if let Ok(kl) = serde_json::from_str::<HeldOutKl>(&text) {
            if kl.by_window.len() == windows.len() {
                return Ok(kl);
            }
        }
    }
    let zero = TunedLens::zeros(&info.name, info.d_model, info.n_layers)?;
    let kl = evaluate(model, readout, &zero, windows, chunk)?;
    if let Some(p) = path {
        let written = p
            .parent()
            .map(std::fs::create_dir_all)
            .transpose()
            .ok()
            .and_then(|_| serde_json::to_vec(&kl).ok())
            .map(|bytes| crate::cache::write_atomic(&p, &bytes));
        if let Some(Err(e)) = written {
            log::debug!("held-out logit-lens KL not cached: {e}");
        }
    }
    Ok(kl)
}

/// KL(final ‖ lens) per layer 0 … L − 1 of every window of `windows`, read through `lens`.
pub(crate) fn evaluate(
    model: &mut Model,
    readout: &Readout,
    lens: &TunedLens,
    windows: &[&Vec<u32>],
    chunk: usize,
) -> Result<HeldOutKl> {
    let l = lens.translators.len();
    let mut by_window = Vec::with_capacity(windows.len());
    // Windows run through the model 8 at a time, and are read one by one.
    for group in windows.chunks(8) {
        let rows = super::trainer::residual_rows(model, group)?;
        let mut start = 0;
        for w in group {
            let n = w.len();
            let own = rows
                .iter()
                .map(|r| r.narrow(0, start, n))
                .collect::<candle_core::Result<Vec<_>>>()?;
            let mut sums = vec![0f64; l];
            for_each_chunk(model, lens, &own, chunk, |i, h, target, weight, bias| {
                sums[i] += readout.kl_sum(h, target, weight, bias)?;
                Ok(())
            })?;
            by_window.push(sums.iter().map(|s| s / n.max(1) as f64).collect());
            start += n;
        }
    }
    Ok(HeldOutKl { by_window })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_interpolates_as_numpy_does() {
        let v = [1.0, 2.0, 4.0, 8.0];
        // numpy.percentile([1, 2, 4, 8], [2.5, 50, 97.5]) = 1.075, 3.0, 7.7
        assert!((percentile(&v, 0.025) - 1.075).abs() < 1e-12);
        assert!((percentile(&v, 0.5) - 3.0).abs() < 1e-12);
        assert!((percentile(&v, 0.975) - 7.7).abs() < 1e-12);
    }

    #[test]
    fn bootstrap_interval_brackets_the_mean_and_shrinks_with_more_windows() {
        let rows =
            |n: usize| -> Vec<Vec<f64>> { (0..n).map(|i| vec![(i % 7) as f64, 5.0]).collect() };
        let few = bootstrap_ci95(&rows(14));
        let many = bootstrap_ci95(&rows(140));
        let mean = 3.0; // mean of 0..7 repeated
        for ci in [&few, &many] {
            assert!(ci[0][0] < mean && mean < ci[0][1], "{ci:?}");
            // A constant column has a zero-width interval.
            assert_eq!(ci[1], [5.0, 5.0]);
        }
        let width = |c: &[[f64; 2]]| c[0][1] - c[0][0];
        // The width falls as 1/√n: ten times the windows, about a third of the width.
        let ratio = width(&many) / width(&few);
        assert!((0.2..0.45).contains(&ratio), "{ratio}");
        assert!(bootstrap_ci95(&rows(1)).is_empty());
    }

    #[test]
    fn mean_is_the_mean_of_equal_windows() {
        let kl = HeldOutKl {
            by_window: vec![vec![1.0, 4.0], vec![3.0, 0.0]],
        };
        assert_eq!(kl.mean(), vec![2.0, 2.0]);
    }
}
