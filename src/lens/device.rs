//! The same statistics as [`super::stats`], computed with tensor operations so that they run
//! where the logits live (a GPU). Nothing comes back to the host until every statistic of the
//! chunk is done: then one [rows, columns] table of per-row numbers (and the top-k ids) does.
//!
//! Top-p without sorting the vocabulary: a bisection, on the device, of a per-row threshold `t`
//! (the largest `t` whose set `{e ≥ t}` still holds mass ≥ p), run until `t` is one of the row's
//! values; ties at the threshold are then resolved exactly.

use candle_core::{DType, Tensor, D};

use super::stats::{DistStats, StatSpec};
use crate::error::Result;

/// Bisection steps that take the top-p threshold to one of the row's values. The threshold is
/// at least (1 − p)/vocab (the values are e = exp(logit − max) ≤ 1, so the mass is ≥ 1, and the
/// values below the threshold hold ≥ (1 − p) of it); halving [0, 2] down to that value's spacing
/// (2⁻²⁴ of it) takes log2(2 / (t·2⁻²⁴)) steps. p = 1 can need the smallest f32.
fn bisection_steps(top_p: f64, vocab: usize) -> usize {
    let smallest = ((1.0 - top_p) / vocab.max(1) as f64).max(f64::from(f32::from_bits(1)));
    (2.0 / (smallest * 2f64.powi(-24))).log2().ceil() as usize + 2
}

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
    // A masked logit (−∞) has e = 0: its term of Σ e·d must be 0, not 0·(−∞) = NaN.
    let d64 = d.maximum(f32::MIN)?.to_dtype(DType::F64)?;
    let zeros64 = e64.zeros_like()?;
    let s = e64.sum_keepdim(D::Minus1)?;
    let t = (&e64 * &d64)?.sum_keepdim(D::Minus1)?;
    // Per-row results, [rows, 1] f64 each, brought back together at the end.
    let mut columns: Vec<Tensor> = vec![m.to_dtype(DType::F64)?, s.clone(), t];
    for &a in &spec.alphas {
        if a == 0.0 {
            let cut = (&s * spec.support_threshold)?;
            columns.push(
                e64.broadcast_gt(&cut)?
                    .to_dtype(DType::F64)?
                    .sum_keepdim(D::Minus1)?,
            );
        } else if a != 1.0 && a.is_finite() {
            columns.push(
                (&d * a)?
                    .exp()?
                    .to_dtype(DType::F64)?
                    .sum_keepdim(D::Minus1)?,
            );
        }
    }

    // Top-p: lo keeps mass ≥ target (t = 0 keeps everything), hi does not (t = 2 > every value).
    let target = (&s * spec.top_p)?;
    let mut lo = Tensor::zeros((rows, 1), DType::F32, dev)?;
    let mut hi = Tensor::full(2f32, (rows, 1), dev)?;
    for _ in 0..bisection_steps(spec.top_p, vocab) {
        let mid = ((&lo + &hi)? * 0.5)?;
        let mass = e
            .broadcast_ge(&mid)?
            .where_cond(&e64, &zeros64)?
            .sum_keepdim(D::Minus1)?;
        let enough = mass.ge(&target)?;
        lo = enough.where_cond(&mid, &lo)?;
        hi = enough.where_cond(&hi, &mid)?;
    }
    let above = e.broadcast_gt(&lo)?;
    columns.push(above.to_dtype(DType::F64)?.sum_keepdim(D::Minus1)?);
    columns.push(above.where_cond(&e64, &zeros64)?.sum_keepdim(D::Minus1)?);
    columns.push(
        e.broadcast_eq(&lo)?
            .to_dtype(DType::F64)?
            .sum_keepdim(D::Minus1)?,
    );
    columns.push(lo.to_dtype(DType::F64)?);

    // Top-k: repeated argmax, masking each winner, all on the device; at least one round, for
    // the most likely token (prediction depth), and its logit column dropped when k is 0.
    let asked = spec.top_k.min(vocab);
    let k = asked.max(1);
    let mut top_ids = Vec::with_capacity(k);
    {
        let ids = Tensor::arange(0u32, vocab as u32, dev)?.unsqueeze(0)?;
        let neg_inf = Tensor::full(f32::NEG_INFINITY, (rows, vocab), dev)?;
        let mut work = d.clone();
        for _ in 0..k {
            let idx = work.argmax_keepdim(D::Minus1)?;
            columns.push(work.gather(&idx, D::Minus1)?.to_dtype(DType::F64)?);
            work = ids.broadcast_eq(&idx)?.where_cond(&neg_inf, &work)?;
            top_ids.push(idx);
        }
    }

    // The one transfer of the chunk's results.
    let table = Tensor::cat(&columns, 1)?.to_vec2::<f64>()?;
    let top_ids: Vec<Vec<u32>> = Tensor::cat(&top_ids, 1)?.to_vec2::<u32>()?;
    if let Some(r) = table.iter().position(|row| !row[0].is_finite()) {
        return Err(crate::error::Error::Data(format!(
            "row {r} of the logits is not finite: the model produced non-finite activations"
        )));
    }
    let (s_host, t_host): (Vec<f64>, Vec<f64>) = table.iter().map(|row| (row[1], row[2])).unzip();
    let shannon: Vec<f64> = s_host
        .iter()
        .zip(&t_host)
        .map(|(&s, &t)| (s.ln() - t / s).max(0.0))
        .collect();
    let mut col = 3;
    let mut renyi: Vec<Vec<f64>> = vec![Vec::with_capacity(spec.alphas.len()); rows];
    for &a in &spec.alphas {
        for (r, out) in renyi.iter_mut().enumerate() {
            let s = s_host[r];
            out.push(if a == 1.0 {
                shannon[r]
            } else if a.is_infinite() {
                s.ln()
            } else if a == 0.0 {
                table[r][col].max(1.0).ln()
            } else {
                ((table[r][col].ln() - a * s.ln()) / (1.0 - a)).max(0.0)
            });
        }
        if a == 0.0 || (a != 1.0 && a.is_finite()) {
            col += 1;
        }
    }
    let (count_above, mass_above, count_at, thr): (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f32>) = {
        let pick = |c: usize| table.iter().map(|row| row[c]).collect::<Vec<f64>>();
        let thr = pick(col + 3).into_iter().map(|t| t as f32).collect();
        (pick(col), pick(col + 1), pick(col + 2), thr)
    };
    let target: Vec<f64> = s_host.iter().map(|s| s * spec.top_p).collect();
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
    let top_k: Vec<Vec<(u32, f64)>> = (0..rows)
        .map(|r| {
            top_ids[r]
                .iter()
                .take(asked)
                .enumerate()
                .map(|(j, &id)| (id, table[r][col + 4 + j].exp() / s_host[r]))
                .collect()
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

    Ok((0..rows)
        .map(|r| DistStats {
            shannon: shannon[r],
            renyi: std::mem::take(&mut renyi[r]),
            top_p_count: top_p_count[r],
            top_p_ids: top_p_ids[r].clone(),
            top_k: top_k[r].clone(),
            top1: top_ids[r][0],
            extras: Default::default(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lens::stats::{row_stats, Scratch};
    use candle_core::Device;

    #[test]
    fn device_statistics_equal_the_cpu_kernel_for_any_p_and_with_ties() {
        // Rows: spread logits, a flat row (every value tied), a peaked row with a tied runner-up
        // pair exactly at the threshold, and a row with values far below the rest.
        let vocab = 300;
        let mut rows: Vec<Vec<f32>> = Vec::new();
        let mut x = 12345u32;
        rows.push(
            (0..vocab)
                .map(|_| {
                    x = x.wrapping_mul(1664525).wrapping_add(1013904223);
                    (x >> 8) as f32 / (1 << 24) as f32 * 8.0 - 4.0
                })
                .collect(),
        );
        rows.push(vec![0.5; vocab]);
        let mut peaked = vec![-30.0f32; vocab];
        peaked[3] = 2.0;
        peaked[7] = 1.0;
        peaked[9] = 1.0;
        rows.push(peaked);
        let mut deep = vec![-80.0f32; vocab];
        deep[0] = 0.0;
        rows.push(deep);
        // Masked tokens (−∞): probability 0, no NaN.
        let mut masked = rows[0].clone();
        masked[10..40].fill(f32::NEG_INFINITY);
        masked[50] = f32::MIN;
        rows.push(masked);
        let flat: Vec<f32> = rows.concat();
        let logits = Tensor::from_vec(flat, (rows.len(), vocab), &Device::Cpu).unwrap();
        for top_p in [0.05, 0.6, 0.9, 0.999, 1.0] {
            let spec = StatSpec {
                alphas: vec![0.0, 0.5, 2.0, f64::INFINITY],
                top_p,
                top_k: 4,
                ..Default::default()
            };
            let dev = chunk_stats(&logits, &spec).unwrap();
            let mut scratch = Scratch::default();
            for (r, row) in rows.iter().enumerate() {
                let cpu = row_stats(row, &spec, &mut scratch).unwrap();
                let d = &dev[r];
                assert!(d.shannon.is_finite() && cpu.shannon.is_finite(), "row {r}");
                // At p = 1 the CPU kernel counts the masked tokens too (their weight there is
                // the clamped e^−87, not 0).
                if !(top_p == 1.0 && r == 4) {
                    assert_eq!(d.top_p_count, cpu.top_p_count, "p {top_p}, row {r}");
                }
                assert!((d.shannon - cpu.shannon).abs() < 1e-6, "p {top_p}, row {r}");
                for (a, b) in d.renyi.iter().zip(&cpu.renyi) {
                    assert!((a - b).abs() < 1e-6, "p {top_p}, row {r}: {a} vs {b}");
                }
                let ids = |s: &DistStats| s.top_k.iter().map(|k| k.0).collect::<Vec<_>>();
                assert_eq!(ids(d), ids(&cpu), "p {top_p}, row {r}");
            }
        }
    }

    #[test]
    fn enough_bisection_steps_for_the_threshold() {
        // p = 0.6 over Gemma's 262,144 tokens: the threshold is ≥ 1.5e-6.
        assert!(bisection_steps(0.6, 262_144) <= 50);
        // p = 1 may need the smallest positive f32.
        assert!(bisection_steps(1.0, 10) >= 170);
    }
}
