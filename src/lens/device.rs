//! The same statistics as [`super::stats`], computed with tensor operations so that they run
//! where the logits live (a GPU): only a few numbers per row come back to the host.
//!
//! Top-p uses a bisection on the bit pattern of a per-row threshold `t` (the largest `t` whose
//! set `{e ≥ t}` still holds mass ≥ p), then resolves ties at the threshold exactly.

use candle_core::{DType, Tensor, D};

use super::stats::{DistStats, StatSpec};
use crate::error::Result;

/// Statistics of every row of `logits` ([rows, vocab], f32).
pub(super) fn chunk_stats(logits: &Tensor, spec: &StatSpec) -> Result<Vec<DistStats>> {
    let (rows, vocab) = logits.dims2()?;
    let dev = logits.device();
    let logits = logits.to_dtype(DType::F32)?;
    let m = logits.max_keepdim(D::Minus1)?;
    let d = logits.broadcast_sub(&m)?;
    let e = d.exp()?;
    // Reductions over the vocabulary in f64: an f32 running sum of 262,144 terms loses ~1e-5.
    let e64 = e.to_dtype(DType::F64)?;
    let d64 = d.to_dtype(DType::F64)?;
    let s = e64.sum_keepdim(D::Minus1)?;
    let t = (&e64 * &d64)?.sum_keepdim(D::Minus1)?;
    let to_host = |x: &Tensor| -> Result<Vec<f64>> {
        Ok(x.flatten_all()?.to_dtype(DType::F64)?.to_vec1::<f64>()?)
    };
    let s_host = to_host(&s)?;
    let t_host = to_host(&t)?;
    let finite = to_host(&m)?;
    if let Some(r) = finite.iter().position(|v| !v.is_finite()) {
        return Err(crate::error::Error::Data(format!(
            "row {r} of the logits is not finite: the model produced non-finite activations"
        )));
    }
    let shannon: Vec<f64> = s_host
        .iter()
        .zip(&t_host)
        .map(|(&s, &t)| (s.ln() - t / s).max(0.0))
        .collect();

    let mut renyi: Vec<Vec<f64>> = vec![Vec::with_capacity(spec.alphas.len()); rows];
    for &a in &spec.alphas {
        let col: Vec<f64> = if a == 1.0 {
            shannon.clone()
        } else if a.is_infinite() {
            s_host.iter().map(|s| s.ln()).collect()
        } else if a == 0.0 {
            let cut = (&s * spec.support_threshold)?;
            let n = to_host(
                &e64.broadcast_gt(&cut)?
                    .to_dtype(DType::F64)?
                    .sum(D::Minus1)?,
            )?;
            n.iter().map(|&n| n.max(1.0).ln()).collect()
        } else {
            let r = to_host(&(&d * a)?.exp()?.to_dtype(DType::F64)?.sum(D::Minus1)?)?;
            r.iter()
                .zip(&s_host)
                .map(|(&r, &s)| ((r.ln() - a * s.ln()) / (1.0 - a)).max(0.0))
                .collect()
        };
        for (row, h) in renyi.iter_mut().zip(col) {
            row.push(h);
        }
    }

    // Top-p: bisection over threshold bit patterns, all rows at once.
    let target: Vec<f64> = s_host.iter().map(|s| s * spec.top_p).collect();
    let mass_at_least = |thr: &[f32]| -> Result<Vec<f64>> {
        let thr = Tensor::from_slice(thr, (rows, 1), dev)?;
        let keep = e.broadcast_ge(&thr)?;
        to_host(&keep.where_cond(&e64, &e64.zeros_like()?)?.sum(D::Minus1)?)
    };
    let mut lo = vec![0u32; rows]; // t = 0 keeps everything: always enough mass
    let mut hi = vec![1f32.to_bits() + 1; rows]; // t > 1 keeps nothing
    for _ in 0..32 {
        if lo.iter().zip(&hi).all(|(l, h)| h - l <= 1) {
            break;
        }
        let mid: Vec<u32> = lo.iter().zip(&hi).map(|(l, h)| l + (h - l) / 2).collect();
        let thr: Vec<f32> = mid.iter().map(|&b| f32::from_bits(b)).collect();
        let mass = mass_at_least(&thr)?;
        for r in 0..rows {
            if hi[r] - lo[r] <= 1 {
                continue;
            }
            if mass[r] >= target[r] {
                lo[r] = mid[r];
            } else {
                hi[r] = mid[r];
            }
        }
    }
    let thr: Vec<f32> = lo.iter().map(|&b| f32::from_bits(b)).collect();
    let thr_t = Tensor::from_slice(&thr, (rows, 1), dev)?;
    let above = e.broadcast_gt(&thr_t)?;
    let count_above = to_host(&above.to_dtype(DType::F32)?.sum(D::Minus1)?)?;
    let mass_above = to_host(&above.where_cond(&e, &e.zeros_like()?)?.sum(D::Minus1)?)?;
    let count_at = to_host(
        &e.broadcast_eq(&thr_t)?
            .to_dtype(DType::F32)?
            .sum(D::Minus1)?,
    )?;
    let top_p_count: Vec<u32> = (0..rows)
        .map(|r| {
            let t = thr[r] as f64;
            let ties = if t > 0.0 {
                ((target[r] - mass_above[r]) / t)
                    .ceil()
                    .max(1.0)
                    .min(count_at[r].max(1.0))
            } else {
                count_at[r]
            };
            (count_above[r] + ties) as u32
        })
        .collect();
    let top_p_ids: Vec<Option<Vec<u32>>> = if spec.needs_top_p_ids() {
        let e_host = e.to_vec2::<f32>()?;
        (0..rows)
            .map(|r| {
                let mut ids: Vec<(f32, u32)> = e_host[r]
                    .iter()
                    .enumerate()
                    .filter(|(_, &x)| x >= thr[r])
                    .map(|(i, &x)| (x, i as u32))
                    .collect();
                ids.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                ids.truncate(top_p_count[r] as usize);
                Some(ids.into_iter().map(|(_, i)| i).collect())
            })
            .collect()
    } else {
        vec![None; rows]
    };

    // Top-k: repeated argmax, masking each winner.
    let mut top_k: Vec<Vec<(u32, f64)>> = vec![Vec::with_capacity(spec.top_k); rows];
    if spec.top_k > 0 {
        let columns = Tensor::arange(0u32, vocab as u32, dev)?.unsqueeze(0)?;
        let mut work = d.clone();
        let neg_inf = Tensor::full(f32::NEG_INFINITY, (rows, vocab), dev)?;
        for _ in 0..spec.top_k.min(vocab) {
            let idx = work.argmax_keepdim(D::Minus1)?;
            let val = work.gather(&idx, D::Minus1)?;
            let ids = idx.flatten_all()?.to_vec1::<u32>()?;
            let vals = to_host(&val)?;
            for r in 0..rows {
                top_k[r].push((ids[r], vals[r].exp() / s_host[r]));
            }
            let hit = columns.broadcast_eq(&idx)?;
            work = hit.where_cond(&neg_inf, &work)?;
        }
    }

    Ok((0..rows)
        .map(|r| DistStats {
            shannon: shannon[r],
            renyi: std::mem::take(&mut renyi[r]),
            top_p_count: top_p_count[r],
            top_p_ids: top_p_ids[r].clone(),
            top_k: std::mem::take(&mut top_k[r]),
        })
        .collect())
}
