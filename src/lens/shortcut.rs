//! The linear-shortcut lens (Din et al. 2023, *Jump to Conclusions: Short-Cutting Transformers with
//! Linear Transformations*, arXiv 2303.09435): for every layer ℓ = 0 … L − 1 an affine map
//! `h_ℓ ↦ h_ℓ M_ℓ + c_ℓ` fitted by least squares to the residual after the last block, `h_L`, over
//! the positions of a text; the lens reads `final_norm(h_ℓ M_ℓ + c_ℓ)` through the unembedding.
//!
//! The fit is closed-form: the normal equations are accumulated in f64 over streamed forward
//! passes (centred, so that the large constant directions of a residual stream do not spoil the
//! conditioning), then solved by Cholesky per layer. Its cost is the model's prefill plus two
//! d × d products per layer and token, not the vocabulary-sized product and its backward of KL
//! training — seconds to minutes on a CPU where KL training takes hours.
//!
//! The lens is saved in the tuned-lens package's format (translator `W = (M − I)ᵀ`, `b = c`: the
//! package computes `h + h Wᵀ + b`), so `--lens tuned:DIR` and the package load it unchanged, and
//! KL training can start from it ([`crate::lens::trainer::Init::Shortcut`]).

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::data::TrainingData;
use super::heldout::{evaluate, evaluate_logit};
use super::trainer::{residual_rows, split_windows, TrainReport};
use super::tuned::{Translator, TunedLens};
use crate::error::{Error, Result};
use crate::model::{Model, TextTokenizer};
use crate::watch::Watch;

/// How a shortcut lens is fitted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShortcutOptions {
    /// Training tokens (whole windows of `seq_len`, in the seeded order KL training visits them).
    pub tokens: usize,
    /// Tokens per window (a sequence the model reads at once).
    pub seq_len: usize,
    /// Held-out tokens for the evaluation (from the end of the text, never fitted on).
    pub holdout_tokens: usize,
    /// Ridge added to the diagonal of each layer's input covariance, relative to its mean
    /// diagonal entry (scale-free; 0 is ordinary least squares).
    pub ridge: f64,
    pub seed: u64,
    /// Windows the model reads per forward pass.
    pub windows_per_pass: usize,
    /// Positions whose vocabulary-sized rows are held at once in the evaluation.
    pub chunk_tokens: usize,
}

impl Default for ShortcutOptions {
    fn default() -> Self {
        Self {
            tokens: 1 << 16,
            seq_len: 128,
            holdout_tokens: 2048,
            ridge: DEFAULT_RIDGE,
            seed: 42,
            windows_per_pass: 8,
            chunk_tokens: 256,
        }
    }
}

/// A millionth of the mean variance: invisible in the fit where the covariance has full rank,
/// and enough to keep Cholesky stable where a layer (the embedding output, on a short text) does
/// not span every direction.
pub const DEFAULT_RIDGE: f64 = 1e-6;

impl ShortcutOptions {
    /// Refuses options no fit can run with.
    pub fn check(&self) -> Result<()> {
        if self.seq_len < 2 || self.tokens < self.seq_len {
            return Err(Error::invalid(format!(
                "need --tokens ≥ --seq-len ≥ 2 (got {}, {})",
                self.tokens, self.seq_len
            )));
        }
        if !(self.ridge >= 0.0 && self.ridge.is_finite()) {
            return Err(Error::invalid(format!(
                "--ridge must be a finite number ≥ 0 (got {})",
                self.ridge
            )));
        }
        if self.windows_per_pass == 0 || self.chunk_tokens == 0 {
            return Err(Error::invalid(
                "windows per pass and chunk size must be ≥ 1",
            ));
        }
        Ok(())
    }
}

/// The sums a least-squares fit of `y ≈ x M + c` needs, accumulated in f64: Σx, Σy, Σxᵀx, Σxᵀy
/// and the number of rows.
#[derive(Clone, Debug)]
pub struct NormalEquations {
    sum_x: Tensor,
    sum_y: Tensor,
    /// [d_in, d_in]
    xx: Tensor,
    /// [d_in, d_out]
    xy: Tensor,
    rows: usize,
}

/// A fitted affine map `y = x M + c`, row-major f64.
#[derive(Clone, Debug, PartialEq)]
pub struct AffineFit {
    pub d_in: usize,
    pub d_out: usize,
    /// [d_in, d_out]
    pub m: Vec<f64>,
    /// [d_out]
    pub c: Vec<f64>,
}

impl NormalEquations {
    pub fn new(d_in: usize, d_out: usize) -> Result<Self> {
        let z = |shape: &[usize]| Tensor::zeros(shape, DType::F64, &Device::Cpu);
        Ok(Self {
            sum_x: z(&[d_in])?,
            sum_y: z(&[d_out])?,
            xx: z(&[d_in, d_in])?,
            xy: z(&[d_in, d_out])?,
            rows: 0,
        })
    }

    /// Adds rows `x` [T, d_in] and their targets `y` [T, d_out] (any float dtype, any device).
    pub fn add(&mut self, x: &Tensor, y: &Tensor) -> Result<()> {
        let f64_cpu =
            |t: &Tensor| -> Result<Tensor> { Ok(t.to_device(&Device::Cpu)?.to_dtype(DType::F64)?) };
        self.add_f64(&f64_cpu(x)?, &f64_cpu(y)?)
    }

    fn add_f64(&mut self, x: &Tensor, y: &Tensor) -> Result<()> {
        let (t, d_in) = x.dims2()?;
        let (ty, d_out) = y.dims2()?;
        if t != ty || d_in != self.xx.dim(0)? || d_out != self.xy.dim(1)? {
            return Err(Error::Data(format!(
                "normal equations of {}→{} given rows [{t}, {d_in}] → [{ty}, {d_out}]",
                self.xx.dim(0)?,
                self.xy.dim(1)?
            )));
        }
        let xt = x.t()?;
        self.xx = (&self.xx + xt.matmul(x)?)?;
        self.xy = (&self.xy + xt.matmul(y)?)?;
        self.sum_x = (&self.sum_x + x.sum(0)?)?;
        self.sum_y = (&self.sum_y + y.sum(0)?)?;
        self.rows += t;
        Ok(())
    }

    /// Rows added so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The least-squares `M`, `c` (with an intercept, unpenalised), `ridge` × the mean diagonal
    /// of the input covariance added to its diagonal.
    ///
    /// # Errors
    /// Fewer than two rows, a non-finite sum, or a covariance that is singular at this ridge.
    pub fn solve(&self, ridge: f64) -> Result<AffineFit> {
        let (d_in, d_out) = self.xy.dims2()?;
        let n = self.rows as f64;
        if self.rows < 2 {
            return Err(Error::invalid(
                "a least-squares fit needs at least two rows",
            ));
        }
        let mean_x: Vec<f64> = (&self.sum_x / n)?.to_vec1()?;
        let mean_y: Vec<f64> = (&self.sum_y / n)?.to_vec1()?;
        // Centred sums: Σ (x − x̄)ᵀ(x − x̄) = Σxᵀx − n x̄ᵀx̄, and likewise for x, y.
        let mut cov: Vec<f64> = self.xx.flatten_all()?.to_vec1()?;
        let mut cross: Vec<f64> = self.xy.flatten_all()?.to_vec1()?;
        for i in 0..d_in {
            for j in 0..d_in {
                cov[i * d_in + j] -= n * mean_x[i] * mean_x[j];
            }
            for j in 0..d_out {
                cross[i * d_out + j] -= n * mean_x[i] * mean_y[j];
            }
        }
        if cov.iter().chain(&cross).any(|v| !v.is_finite()) {
            return Err(Error::Data(
                "the residual stream holds NaN or inf: no least-squares fit".into(),
            ));
        }
        let mean_diag = (0..d_in).map(|i| cov[i * d_in + i]).sum::<f64>() / d_in.max(1) as f64;
        let lambda = ridge * mean_diag;
        for i in 0..d_in {
            cov[i * d_in + i] += lambda;
        }
        let chol = cholesky(&mut cov, d_in).ok_or_else(|| {
            Error::invalid(format!(
                "the residuals' covariance is singular at ridge {ridge} over {} rows (they span fewer than {d_in} directions): give more --tokens or a larger --ridge",
                self.rows
            ))
        })?;
        let m = cholesky_solve(chol, d_in, cross, d_out);
        let c = (0..d_out)
            .map(|j| mean_y[j] - (0..d_in).map(|i| mean_x[i] * m[i * d_out + j]).sum::<f64>())
            .collect();
        Ok(AffineFit { d_in, d_out, m, c })
    }
}

/// In place: the lower Cholesky factor L of the symmetric matrix `a` [n, n] (row-major; the upper
/// triangle is left as it was), or None where `a` is not positive definite.
fn cholesky(a: &mut [f64], n: usize) -> Option<&[f64]> {
    for j in 0..n {
        let (done, rest) = a.split_at_mut(j * n);
        let row_j = &mut rest[..n];
        // Row j of L, left of the diagonal.
        for k in 0..j {
            let row_k = &done[k * n..k * n + k];
            let dot: f64 = row_k.iter().zip(&row_j[..k]).map(|(x, y)| x * y).sum();
            row_j[k] = (row_j[k] - dot) / done[k * n + k];
        }
        let sq: f64 = row_j[..j].iter().map(|x| x * x).sum();
        let pivot = row_j[j] - sq;
        if !(pivot > 0.0 && pivot.is_finite()) {
            return None;
        }
        row_j[j] = pivot.sqrt();
    }
    Some(a)
}

/// Solves L Lᵀ X = B for X [n, m] (B row-major [n, m], consumed).
fn cholesky_solve(l: &[f64], n: usize, mut b: Vec<f64>, m: usize) -> Vec<f64> {
    // Forward: L Z = B, row by row (each row of Z an axpy of the rows above).
    for i in 0..n {
        let (above, rest) = b.split_at_mut(i * m);
        let row = &mut rest[..m];
        for k in 0..i {
            let f = l[i * n + k];
            if f != 0.0 {
                for (r, z) in row.iter_mut().zip(&above[k * m..(k + 1) * m]) {
                    *r -= f * z;
                }
            }
        }
        let d = l[i * n + i];
        row.iter_mut().for_each(|r| *r /= d);
    }
    // Backward: Lᵀ X = Z, from the last row up.
    for i in (0..n).rev() {
        let (head, below) = b.split_at_mut((i + 1) * m);
        let row = &mut head[i * m..];
        for k in i + 1..n {
            let f = l[k * n + i];
            if f != 0.0 {
                for (r, x) in row.iter_mut().zip(&below[(k - i - 1) * m..(k - i) * m]) {
                    *r -= f * x;
                }
            }
        }
        let d = l[i * n + i];
        row.iter_mut().for_each(|r| *r /= d);
    }
    b
}

impl AffineFit {
    /// As a tuned-lens translator (`h + h Wᵀ + b`): W = (M − I)ᵀ, b = c, in f32.
    pub fn translator(&self) -> Result<Translator> {
        if self.d_in != self.d_out {
            return Err(Error::Data(format!(
                "a translator maps d to d; this fit maps {} to {}",
                self.d_in, self.d_out
            )));
        }
        let d = self.d_in;
        let w: Vec<f32> = (0..d * d)
            .map(|k| {
                let (o, i) = (k / d, k % d);
                (self.m[i * d + o] - if i == o { 1.0 } else { 0.0 }) as f32
            })
            .collect();
        let b: Vec<f32> = self.c.iter().map(|&v| v as f32).collect();
        Ok(Translator {
            weight: Tensor::from_vec(w, (d, d), &Device::Cpu)?,
            bias: Some(Tensor::from_vec(b, d, &Device::Cpu)?),
        })
    }
}

/// Progress of a fit: windows read so far out of all.
#[derive(Clone, Copy, Debug)]
pub struct FitProgress {
    pub windows: usize,
    pub total: usize,
}

/// Fits the shortcut lens of `model` on `windows` (token ids, all of one length): the normal
/// equations of every layer 0 … L − 1 against the last layer's residual, streamed over forward
/// passes of `per_pass` windows, then solved. Stops with [`Error::Interrupted`] when `watch`
/// asks (nothing is kept: the fit is a single pass).
pub fn fit_shortcut(
    model: &mut Model,
    windows: &[&Vec<u32>],
    per_pass: usize,
    ridge: f64,
    progress: &mut dyn FnMut(FitProgress),
    watch: Option<&Watch>,
) -> Result<TunedLens> {
    let info = model.info().clone();
    let (l, d) = (info.n_layers, info.d_model);
    let mut sums = (0..l)
        .map(|_| NormalEquations::new(d, d))
        .collect::<Result<Vec<_>>>()?;
    let mut done = 0;
    for pass in windows.chunks(per_pass.max(1)) {
        if watch.is_some_and(Watch::stop_requested) {
            return Err(Error::Interrupted(format!(
                "the shortcut fit stopped after {done} of {} windows; nothing was saved (run it again to start over)",
                windows.len()
            )));
        }
        let rows = residual_rows(model, pass)?;
        let to_f64 = |t: &Tensor| -> Result<Tensor> { Ok(t.to_dtype(DType::F64)?) };
        let last = to_f64(&rows[l])?;
        for (layer, eq) in sums.iter_mut().enumerate() {
            eq.add_f64(&to_f64(&rows[layer])?, &last)?;
        }
        done += pass.len();
        progress(FitProgress {
            windows: done,
            total: windows.len(),
        });
    }
    let translators = sums
        .par_iter()
        .map(|eq| eq.solve(ridge)?.translator())
        .collect::<Result<Vec<_>>>()?;
    let mut lens = TunedLens::zeros(&info.name, d, l)?;
    lens.translators = translators;
    lens.source = "shortcut".into();
    Ok(lens)
}

/// `train-lens --method shortcut`: fits the lens on `text`'s training windows, writes it into
/// `out` (the tuned-lens package's format) with `train_report.json` (held-out mean KL per layer,
/// logit lens beside the shortcut).
pub fn train_shortcut<'a>(
    model: &mut Model,
    tokenizer: &TextTokenizer,
    text: impl Into<TrainingData<'a>>,
    opts: &ShortcutOptions,
    out: &Path,
    progress: &mut dyn FnMut(FitProgress),
    watch: Option<&Watch>,
) -> Result<TrainReport> {
    opts.check()?;
    let split = split_windows(
        tokenizer,
        text.into(),
        opts.seq_len,
        opts.holdout_tokens,
        opts.seed,
    )?;
    let wanted = opts.tokens / opts.seq_len;
    let train = split.training();
    if train.len() < wanted {
        return Err(Error::invalid(format!(
            "the text gives {} training windows of {} tokens ({} tokens) and --tokens asks for {}: give a longer text or fewer --tokens",
            train.len(),
            opts.seq_len,
            train.len() * opts.seq_len,
            opts.tokens
        )));
    }
    let train = &train[..wanted];
    let lens = fit_shortcut(
        model,
        train,
        opts.windows_per_pass,
        opts.ridge,
        progress,
        watch,
    )?;
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    lens.save(out)?;
    let info = model.info().clone();
    let readout = model.readout()?;
    let holdout = split.holdout();
    let kl_logit = evaluate_logit(model, &readout, &holdout, opts.chunk_tokens)?;
    let kl_tuned = evaluate(model, &readout, &lens, &holdout, opts.chunk_tokens)?;
    let report = TrainReport::new(
        &info.name,
        train.len() * opts.seq_len,
        holdout.len() * opts.seq_len,
        kl_logit,
        kl_tuned,
        Some(crate::lens::trainer::Method::Shortcut),
    );
    let json = serde_json::to_string_pretty(&report)? + "\n";
    crate::cache::write_atomic(&out.join("train_report.json"), json.as_bytes())?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cholesky_solves_a_small_system() {
        // A = [[4, 2], [2, 3]], B = [[2], [1]]: X = A⁻¹ B = [[0.5], [0]].
        let mut a = vec![4.0, 2.0, 2.0, 3.0];
        let l = cholesky(&mut a, 2).map(<[f64]>::to_vec);
        let l = l.unwrap_or_default();
        let x = cholesky_solve(&l, 2, vec![2.0, 1.0], 1);
        assert!((x[0] - 0.5).abs() < 1e-15 && x[1].abs() < 1e-15, "{x:?}");
        let mut singular = vec![1.0, 1.0, 1.0, 1.0];
        assert!(cholesky(&mut singular, 2).is_none());
    }

    #[test]
    fn translator_adds_back_the_identity() {
        // y = x M + c with M = [[2, 0], [1, 1]]: W = (M − I)ᵀ = [[1, 1], [0, 0]].
        let fit = AffineFit {
            d_in: 2,
            d_out: 2,
            m: vec![2.0, 0.0, 1.0, 1.0],
            c: vec![0.5, -1.0],
        };
        let t = fit.translator().unwrap_or_else(|e| panic!("{e}"));
        let w: Vec<Vec<f32>> = t.weight.to_vec2().unwrap_or_default();
        assert_eq!(w, vec![vec![1.0, 1.0], vec![0.0, 0.0]]);
        // h = [1, 2]: x M + c = [4.5, 1]; h + h Wᵀ + b = [1 + 3 + 0.5, 2 + 0 − 1].
        let h = Tensor::new(&[[1f32, 2.0]], &Device::Cpu).unwrap_or_else(|e| panic!("{e}"));
        let mut lens = TunedLens::zeros("m", 2, 1).unwrap_or_else(|e| panic!("{e}"));
        lens.translators = vec![t];
        let u: Vec<Vec<f32>> = lens
            .translate(0, &h)
            .and_then(|u| Ok(u.to_vec2()?))
            .unwrap_or_default();
        assert_eq!(u, vec![vec![4.5, 1.0]]);
    }
}
