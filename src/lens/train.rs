//! Training a tuned lens: one affine translator per layer, fitted by gradient descent to minimise
//! KL(final distribution ‖ lens distribution) at every position of a text, as the tuned-lens
//! package does (Belrose et al. 2023): translators start at zero (the untrained lens is the logit
//! lens), SGD with Nesterov momentum 0.9, learning rate 1 × (1 − 0.9), weight decay 1e-3 towards the
//! identity map, a linear decay of the rate to zero without warm-up. The package's budget (250
//! steps of 2¹⁸ tokens) is days of CPU; here the number of tokens is the user's (`--tokens`), in
//! steps of `step_tokens` (default 2,048).
//!
//! The gradients are written out rather than taken from an autograd graph (candle's would also
//! differentiate the vocabulary-sized unembedding, which is fixed): for a chunk of positions with
//! residuals h, translator output u = h + h Wᵀ + b, normalised n = norm(u), logits z = n Eᵀ (soft-capped
//! where the model caps), lens log-probabilities log q = log_softmax(z) and final probabilities
//! P, the loss Σ P (log P − log q) / T has ∂/∂z = (q − P) / T, then ∂/∂n = ∂z E, the norm's own
//! backward gives ∂/∂u, and ∂W = ∂uᵀ h, ∂b = Σ ∂u. `tests/tuned_lens.rs` checks them against
//! finite differences.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use candle_core::{DType, Device, Storage, Tensor, D};
use rayon::prelude::*;

use crate::error::{Error, Result};

pub use crate::model::readout::{NormParams, Readout};

/// The final distributions of a chunk of positions, as the loss compares with them.
#[derive(Clone, Debug)]
pub struct FinalDist {
    /// [c, vocab], rows sum to 1.
    pub p: Tensor,
    /// Σ over rows of Σ p log p (0 log 0 = 0): the part of the KL that no translator changes.
    pub p_log_p: f64,
}

impl FinalDist {
    pub fn new(p: Tensor) -> Result<Self> {
        let p_log_p = (&p * p.clamp(1e-30f32, 1f32)?.log()?)?
            .sum_all()?
            .to_dtype(DType::F64)?
            .to_scalar::<f64>()?;
        Ok(Self { p, p_log_p })
    }
}

/// One translator's gradient accumulated over chunks, and its loss.
#[derive(Clone, Debug)]
pub struct Grad {
    pub weight: Tensor,
    pub bias: Tensor,
    /// Σ over the chunk's positions of KL(P ‖ q), nats.
    pub kl_sum: f64,
}

impl Readout {
    /// Normalised `u` and what the norm's backward needs (1/r or 1/σ per row, and x̂ for LayerNorm).
    fn norm_forward(&self, u: &Tensor) -> Result<(Tensor, Tensor, Option<Tensor>)> {
        let d = u.dim(D::Minus1)? as f64;
        match &self.norm {
            NormParams::Rms { scale, eps } => {
                let inv_r = (u.sqr()?.mean_keepdim(D::Minus1)? + *eps)?
                    .sqrt()?
                    .recip()?;
                let n = u.broadcast_mul(&inv_r)?.broadcast_mul(scale)?;
                Ok((n, inv_r, None))
            }
            NormParams::Layer { weight, bias, eps } => {
                let mu = u.mean_keepdim(D::Minus1)?;
                let c = u.broadcast_sub(&mu)?;
                let var = (c.sqr()?.sum_keepdim(D::Minus1)? / d)?;
                let inv_s = (var + *eps)?.sqrt()?.recip()?;
                let xhat = c.broadcast_mul(&inv_s)?;
                let n = xhat.broadcast_mul(weight)?.broadcast_add(bias)?;
                Ok((n, inv_s, Some(xhat)))
            }
        }
    }

    /// ∂loss/∂u from ∂loss/∂n.
    fn norm_backward(
        &self,
        u: &Tensor,
        dn: &Tensor,
        inv: &Tensor,
        xhat: Option<&Tensor>,
    ) -> Result<Tensor> {
        let d = u.dim(D::Minus1)? as f64;
        match (&self.norm, xhat) {
            (NormParams::Rms { scale, .. }, _) => {
                // n = u·g/r: ∂u = a/r − u (Σ a·u) / (d r³), a = ∂n ⊙ g.
                let a = dn.broadcast_mul(scale)?;
                let au = (&a * u)?.sum_keepdim(D::Minus1)?;
                let inv3 = inv.powf(3.0)?;
                let first = a.broadcast_mul(inv)?;
                let second = u.broadcast_mul(&(au * inv3)?)?;
                Ok((first - (second / d)?)?)
            }
            (NormParams::Layer { weight, .. }, Some(xhat)) => {
                // ∂u = (a − mean(a) − x̂ mean(a ⊙ x̂)) / σ, a = ∂n ⊙ g.
                let a = dn.broadcast_mul(weight)?;
                let ma = a.mean_keepdim(D::Minus1)?;
                let max = (&a * xhat)?.mean_keepdim(D::Minus1)?;
                let inner = a.broadcast_sub(&ma)?.sub(&xhat.broadcast_mul(&max)?)?;
                Ok(inner.broadcast_mul(inv)?)
            }
            (NormParams::Layer { .. }, None) => Err(Error::Data(
                "LayerNorm backward without its normalised input".into(),
            )),
        }
    }

    /// The lens logits of normalised rows (soft-capped), and the cap's derivative factor.
    fn logits(&self, n: &Tensor) -> Result<(Tensor, Option<Tensor>)> {
        let raw = n.matmul(&self.unembedding.t()?)?;
        Ok(match self.softcap {
            Some(cap) => {
                let t = (raw / cap)?.tanh()?;
                let z = (&t * cap)?;
                let dt = (1.0 - t.sqr()?)?;
                (z, Some(dt))
            }
            None => (raw, None),
        })
    }

    /// The lens log-probabilities of residual rows `h` read through translator (`weight`,
    /// `bias`): log_softmax(unembed(norm(h + h Wᵀ + b))).
    ///
    /// # Shapes
    /// `h`: [c, d] → [c, vocab]
    pub fn log_probs(&self, h: &Tensor, weight: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let u = translated(h, weight, bias)?;
        let (n, _, _) = self.norm_forward(&u)?;
        let (z, _) = self.logits(&n)?;
        Ok(candle_nn::ops::log_softmax(&z, D::Minus1)?)
    }

    /// Σ over rows of KL(P ‖ q) for residual rows `h` read through the translator.
    pub fn kl_sum(
        &self,
        h: &Tensor,
        target: &FinalDist,
        weight: &Tensor,
        bias: &Tensor,
    ) -> Result<f64> {
        let u = translated(h, weight, bias)?;
        let (n, _, _) = self.norm_forward(&u)?;
        let (z, _) = self.logits(&n)?;
        let (cross, _) = cross_and_grad(&z, &target.p, None)?;
        Ok(target.p_log_p - cross)
    }

    /// The gradient of Σ_rows KL(P ‖ q) / `total` with respect to (`weight`, `bias`), for residual
    /// rows `h` and final distributions `target`, and Σ_rows KL.
    ///
    /// # Shapes
    /// `h`: [c, d], `target.p`: [c, vocab], `weight`: [d, d], `bias`: [d]
    pub fn kl_grad(
        &self,
        h: &Tensor,
        target: &FinalDist,
        weight: &Tensor,
        bias: &Tensor,
        total: usize,
    ) -> Result<Grad> {
        let u = translated(h, weight, bias)?;
        let (n, inv, xhat) = self.norm_forward(&u)?;
        let (z, cap_dt) = self.logits(&n)?;
        // KL = Σ P log P − Σ P log q: the first term is the target's own.
        let (cross, dz) = cross_and_grad(&z, &target.p, Some(total as f64))?;
        let kl_sum = target.p_log_p - cross;
        let mut dz = dz.ok_or_else(|| Error::Data("no gradient of the logits".into()))?;
        if let Some(dt) = cap_dt {
            dz = (dz * dt)?;
        }
        let dn = dz.matmul(&self.unembedding)?;
        let du = self.norm_backward(&u, &dn, &inv, xhat.as_ref())?;
        Ok(Grad {
            weight: du.t()?.matmul(h)?,
            bias: du.sum(0)?,
            kl_sum,
        })
    }
}

/// Σ over rows of Σ P log q, q = softmax(z), and (when `total` is given) ∂/∂z of
/// Σ KL(P ‖ q) / total = (q − P) / total. On the CPU one parallel pass per row (the vocabulary-sized
/// part of training: a dozen tensor passes otherwise); elsewhere tensor operations.
///
/// # Shapes
/// `z`, `p`: [c, vocab]
fn cross_and_grad(z: &Tensor, p: &Tensor, total: Option<f64>) -> Result<(f64, Option<Tensor>)> {
    let on_cpu = matches!(z.device(), Device::Cpu) && matches!(p.device(), Device::Cpu);
    if !on_cpu || z.dtype() != DType::F32 || p.dtype() != DType::F32 {
        let log_q = candle_nn::ops::log_softmax(z, D::Minus1)?;
        let cross = (p * &log_q)?
            .sum_all()?
            .to_dtype(DType::F64)?
            .to_scalar::<f64>()?;
        let dz = match total {
            Some(t) => Some(((log_q.exp()? - p)? / t)?),
            None => None,
        };
        return Ok((cross, dz));
    }
    let (rows, vocab) = z.dims2()?;
    if p.dims2()? != (rows, vocab) {
        return Err(Error::Data(format!(
            "final distributions {:?} for lens logits [{rows}, {vocab}]",
            p.dims()
        )));
    }
    let (z, p) = (z.contiguous()?, p.contiguous()?);
    let (z_storage, z_layout) = z.storage_and_layout();
    let (p_storage, p_layout) = p.storage_and_layout();
    let (Storage::Cpu(z_cpu), Storage::Cpu(p_cpu)) = (&*z_storage, &*p_storage) else {
        return Err(Error::Device("expected CPU tensors".into()));
    };
    let n = rows * vocab;
    let zs = &z_cpu.as_slice::<f32>()?[z_layout.start_offset()..][..n];
    let ps = &p_cpu.as_slice::<f32>()?[p_layout.start_offset()..][..n];
    // Per row: Σ p log q = Σ p (z − m) − (lse − m) Σ p; with a buffer, also (q − p) / total.
    let row = |zr: &[f32], pr: &[f32], buf: Option<&mut [f32]>| -> f64 {
        let m = zr.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut buf = buf;
        let (s, _) = crate::lens::stats::exp_pass(zr, m, 1.0, buf.as_deref_mut());
        let (mut pz, mut mass) = (0f64, 0f64);
        for (zb, pb) in zr.chunks(64).zip(pr.chunks(64)) {
            let (mut a, mut b) = (0f32, 0f32);
            for (&zi, &pi) in zb.iter().zip(pb) {
                a += pi * (zi - m);
                b += pi;
            }
            pz += a as f64;
            mass += b as f64;
        }
        if let (Some(e), Some(t)) = (buf, total) {
            let (inv_s, inv_t) = ((1.0 / s) as f32, (1.0 / t) as f32);
            for (ei, &pi) in e.iter_mut().zip(pr) {
                *ei = (*ei * inv_s - pi) * inv_t;
            }
        }
        pz - s.ln() * mass
    };
    if total.is_none() {
        let cross = zs
            .par_chunks(vocab)
            .zip(ps.par_chunks(vocab))
            .map(|(zr, pr)| row(zr, pr, None))
            .sum();
        return Ok((cross, None));
    }
    let mut out = vec![0f32; n];
    let cross = out
        .par_chunks_mut(vocab)
        .zip(zs.par_chunks(vocab).zip(ps.par_chunks(vocab)))
        .map(|(o, (zr, pr))| row(zr, pr, Some(o)))
        .sum();
    Ok((
        cross,
        Some(Tensor::from_vec(out, (rows, vocab), &Device::Cpu)?),
    ))
}

/// `h + h Wᵀ + b`.
fn translated(h: &Tensor, weight: &Tensor, bias: &Tensor) -> Result<Tensor> {
    Ok((h + h.matmul(&weight.t()?)?.broadcast_add(bias)?)?)
}

/// SGD with Nesterov momentum and weight decay, as `torch.optim.SGD(nesterov=True)` updates:
/// `g ← g + λw; v ← μv + g; w ← w − lr (g + μv)`.
pub fn sgd_nesterov(
    param: &Tensor,
    grad: &Tensor,
    velocity: &Tensor,
    lr: f64,
    momentum: f64,
    weight_decay: f64,
) -> Result<(Tensor, Tensor)> {
    let g = (grad + (param * weight_decay)?)?;
    let v = ((velocity * momentum)? + &g)?;
    let step = (g + (&v * momentum)?)?;
    let p = (param - (step * lr)?)?;
    Ok((p, v))
}

/// Zeros of `t`'s shape on the CPU, f32.
pub fn zeros_like(t: &Tensor) -> Result<Tensor> {
    Ok(Tensor::zeros(t.dims(), DType::F32, &Device::Cpu)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readout(layer_norm: bool, softcap: Option<f64>) -> Readout {
        let dev = Device::Cpu;
        let e = Tensor::new(
            &[
                [0.3f32, -0.2, 0.5],
                [-0.4, 0.1, 0.2],
                [0.2, 0.6, -0.3],
                [0.0, -0.5, 0.4],
                [0.7, 0.1, 0.1],
            ],
            &dev,
        )
        .unwrap();
        let g = Tensor::new(&[1.2f32, 0.8, 1.1], &dev).unwrap();
        let norm = if layer_norm {
            NormParams::Layer {
                weight: g,
                bias: Tensor::new(&[0.1f32, -0.2, 0.05], &dev).unwrap(),
                eps: 1e-5,
            }
        } else {
            NormParams::Rms {
                scale: g,
                eps: 1e-6,
            }
        };
        Readout {
            norm,
            unembedding: (e * 4.0).unwrap(),
            softcap,
        }
    }

    /// The written-out gradient equals central finite differences of the loss.
    #[test]
    fn gradients_match_finite_differences() {
        let dev = Device::Cpu;
        let h = Tensor::new(&[[0.5f32, -1.0, 2.0], [1.5, 0.3, -0.7]], &dev).unwrap();
        let p = candle_nn::ops::softmax(
            &Tensor::new(
                &[[1.0f32, 0.2, -0.5, 0.3, 0.0], [0.1, 2.0, 0.3, -1.0, 0.5]],
                &dev,
            )
            .unwrap(),
            1,
        )
        .unwrap();
        let target = FinalDist::new(p.clone()).unwrap();
        let w0: Vec<f32> = vec![0.1, -0.2, 0.05, 0.3, 0.0, -0.1, 0.2, 0.15, -0.05];
        let b0 = vec![0.05f32, -0.1, 0.2];
        for (ln, cap) in [(false, None), (true, None), (false, Some(1.5))] {
            let r = readout(ln, cap);
            let loss = |w: &[f32], b: &[f32]| -> f64 {
                let w = Tensor::from_slice(w, (3, 3), &dev).unwrap();
                let b = Tensor::from_slice(b, 3, &dev).unwrap();
                r.kl_grad(&h, &target, &w, &b, 2).unwrap().kl_sum / 2.0
            };
            let g = r
                .kl_grad(
                    &h,
                    &target,
                    &Tensor::from_slice(&w0, (3, 3), &dev).unwrap(),
                    &Tensor::from_slice(&b0, 3, &dev).unwrap(),
                    2,
                )
                .unwrap();
            let gw: Vec<f32> = g.weight.flatten_all().unwrap().to_vec1().unwrap();
            let gb: Vec<f32> = g.bias.to_vec1().unwrap();
            let eps = 1e-2f32;
            for i in 0..9 {
                let (mut a, mut b) = (w0.clone(), w0.clone());
                a[i] += eps;
                b[i] -= eps;
                let fd = (loss(&a, &b0) - loss(&b, &b0)) / (2.0 * eps as f64);
                assert!(
                    (fd - gw[i] as f64).abs() < 2e-3,
                    "{ln} {cap:?} w{i}: {fd} vs {}",
                    gw[i]
                );
            }
            for i in 0..3 {
                let (mut a, mut b) = (b0.clone(), b0.clone());
                a[i] += eps;
                b[i] -= eps;
                let fd = (loss(&w0, &a) - loss(&w0, &b)) / (2.0 * eps as f64);
                assert!(
                    (fd - gb[i] as f64).abs() < 2e-3,
                    "{ln} {cap:?} b{i}: {fd} vs {}",
                    gb[i]
                );
            }
        }
    }

    #[test]
    fn the_update_is_torchs_nesterov_sgd() {
        let dev = Device::Cpu;
        let w = Tensor::new(&[1.0f32, -2.0], &dev).unwrap();
        let g = Tensor::new(&[0.5f32, 0.25], &dev).unwrap();
        let v = Tensor::new(&[0.1f32, 0.0], &dev).unwrap();
        let (w2, v2) = sgd_nesterov(&w, &g, &v, 0.1, 0.9, 0.01).unwrap();
        // g' = g + 0.01 w = [0.51, 0.23]; v' = 0.9 v + g' = [0.6, 0.23];
        // w' = w − 0.1 (g' + 0.9 v') = [1 − 0.1·1.05, −2 − 0.1·0.437].
        let w2: Vec<f32> = w2.to_vec1().unwrap();
        let v2: Vec<f32> = v2.to_vec1().unwrap();
        assert!((v2[0] - 0.6).abs() < 1e-6 && (v2[1] - 0.23).abs() < 1e-6);
        assert!((w2[0] - 0.895).abs() < 1e-6 && (w2[1] + 2.0437).abs() < 1e-6);
    }
}
