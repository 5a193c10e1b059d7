//! Per-row statistics that relate a layer's distribution to something else: the KL divergence from
//! the position's final distribution, KL(P_final ‖ P_layer), and the log-probability and rank of a
//! target token. Computed in the lens' chunked pass, beside [`super::stats`], on the CPU or with
//! tensor operations where the logits live.
//!
//! With `lse(z) = m + ln Σ exp(z − m)`, the layer's log-probabilities are `z − lse(z)`, so
//! `KL = Σ p_f (z_f − z) + (lse(z) − lse(z_f)) Σ p_f` (summed in f64 per block: the two terms are
//! O(ln V) and their difference can be small), `log p(t) = z_t − lse(z)`, and the rank of `t` is
//! 1 + the number of tokens with a larger logit.

use candle_core::{DType, Storage, Tensor, D};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// What to relate a row to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowPlan {
    /// The row (in the same chunk) holding this position's final distribution.
    pub final_row: Option<usize>,
    /// The target token.
    pub target: Option<u32>,
}

/// The statistics that relate a row to its position's final distribution and target token; each
/// is `None` when not asked for (and then absent from JSON).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Extras {
    /// KL(final distribution of the position ‖ this one), nats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_to_final: Option<f64>,
    /// Log-probability of the target token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_logprob: Option<f64>,
    /// 1 + the number of tokens more likely than the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rank: Option<u32>,
}

/// `(max, lse)` of a row, in f64 from f32 logits.
fn max_lse(z: &[f32]) -> (f32, f64) {
    let m = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let s: f64 = z
        .chunks(64)
        .map(|b| b.iter().map(|&v| ((v - m) as f64).exp()).sum::<f64>())
        .sum();
    (m, m as f64 + s.ln())
}

/// The extras of every row of a contiguous f32 CPU tensor [rows, vocab].
pub(super) fn cpu_extras(logits: &Tensor, plan: &[RowPlan]) -> Result<Vec<Extras>> {
    let (rows, vocab) = logits.dims2()?;
    if plan.len() != rows {
        return Err(Error::Data(format!(
            "{} row plans for {rows} rows of logits",
            plan.len()
        )));
    }
    let (storage, layout) = logits.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else {
        return Err(Error::Device("expected logits on the CPU".into()));
    };
    let data = &cpu.as_slice::<f32>()?[layout.start_offset()..];
    let row = |r: usize| &data[r * vocab..(r + 1) * vocab];
    // The final distributions once each: lse and probabilities.
    let mut finals: Vec<usize> = plan.iter().filter_map(|p| p.final_row).collect();
    finals.sort_unstable();
    finals.dedup();
    if let Some(&bad) = finals.iter().find(|&&f| f >= rows) {
        return Err(Error::Data(format!("final row {bad} outside the chunk")));
    }
    let final_dists: Vec<(usize, f64, Vec<f32>)> = finals
        .par_iter()
        .map(|&f| {
            let z = row(f);
            let (_, lse) = max_lse(z);
            let p = z.iter().map(|&v| (v as f64 - lse).exp() as f32).collect();
            (f, lse, p)
        })
        .collect();
    (0..rows)
        .into_par_iter()
        .map(|r| {
            let z = row(r);
            let (_, lse) = max_lse(z);
            let mut out = Extras::default();
            if let Some(f) = plan[r].final_row {
                let (_, lse_f, p_f) = final_dists
                    .iter()
                    .find(|(i, _, _)| *i == f)
                    .ok_or_else(|| Error::Data("final distribution not computed".into()))?;
                let z_f = row(f);
                let (mut cross, mut mass) = (0f64, 0f64);
                for ((pb, zfb), zb) in p_f.chunks(64).zip(z_f.chunks(64)).zip(z.chunks(64)) {
                    let (mut c, mut m) = (0f64, 0f64);
                    for ((&p, &zf), &zv) in pb.iter().zip(zfb).zip(zb) {
                        c += p as f64 * (zf as f64 - zv as f64);
                        m += p as f64;
                    }
                    cross += c;
                    mass += m;
                }
                out.kl_to_final = Some((cross + (lse - lse_f) * mass).max(0.0));
            }
            if let Some(t) = plan[r].target {
                let zt = *z.get(t as usize).ok_or_else(|| {
                    Error::invalid(format!(
                        "target token {t} is outside the model's vocabulary of {vocab}"
                    ))
                })?;
                out.target_logprob = Some(zt as f64 - lse);
                out.target_rank = Some(1 + z.iter().filter(|&&v| v > zt).count() as u32);
            }
            Ok(out)
        })
        .collect()
}

/// The extras with tensor operations, where the logits live (one transfer of per-row numbers).
pub(super) fn device_extras(logits: &Tensor, plan: &[RowPlan]) -> Result<Vec<Extras>> {
    let (rows, vocab) = logits.dims2()?;
    if plan.len() != rows {
        return Err(Error::Data(format!(
            "{} row plans for {rows} rows of logits",
            plan.len()
        )));
    }
    let dev = logits.device();
    let z = logits.to_dtype(DType::F32)?;
    let m = z.max_keepdim(D::Minus1)?;
    let lse = (z
        .broadcast_sub(&m)?
        .exp()?
        .to_dtype(DType::F64)?
        .sum_keepdim(D::Minus1)?
        .log()?
        + m.to_dtype(DType::F64)?)?;
    let mut columns = vec![lse.clone()];
    let kl_rows: Vec<u32> = plan
        .iter()
        .enumerate()
        .map(|(r, p)| p.final_row.unwrap_or(r) as u32)
        .collect();
    let any_kl = plan.iter().any(|p| p.final_row.is_some());
    if any_kl {
        let idx = Tensor::new(kl_rows.as_slice(), dev)?;
        let z_f = z.index_select(&idx, 0)?;
        let lse_f = lse.index_select(&idx, 0)?;
        let p_f = (z_f.to_dtype(DType::F64)?.broadcast_sub(&lse_f)?).exp()?;
        let diff = (z_f.to_dtype(DType::F64)? - z.to_dtype(DType::F64)?)?;
        let cross = (&p_f * diff)?.sum_keepdim(D::Minus1)?;
        let mass = p_f.sum_keepdim(D::Minus1)?;
        let kl = (cross + (&lse - lse_f)?.broadcast_mul(&mass)?)?;
        columns.push(kl);
    }
    let targets: Vec<u32> = plan.iter().map(|p| p.target.unwrap_or(0)).collect();
    if let Some(&bad) = targets.iter().find(|&&t| t as usize >= vocab) {
        return Err(Error::invalid(format!(
            "target token {bad} is outside the model's vocabulary of {vocab}"
        )));
    }
    let any_target = plan.iter().any(|p| p.target.is_some());
    if any_target {
        let idx = Tensor::new(targets.as_slice(), dev)?.unsqueeze(1)?;
        let zt = z.gather(&idx, D::Minus1)?;
        columns.push(zt.to_dtype(DType::F64)?);
        columns.push(
            z.broadcast_gt(&zt)?
                .to_dtype(DType::F64)?
                .sum_keepdim(D::Minus1)?,
        );
    }
    let table = Tensor::cat(&columns, 1)?.to_vec2::<f64>()?;
    Ok(table
        .iter()
        .zip(plan)
        .map(|(row, p)| {
            let mut col = 1;
            let mut out = Extras::default();
            if any_kl {
                out.kl_to_final = p.final_row.map(|_| row[col].max(0.0));
                col += 1;
            }
            if any_target && p.target.is_some() {
                out.target_logprob = Some(row[col] - row[0]);
                out.target_rank = Some(1 + row[col + 1] as u32);
            }
            out
        })
        .collect())
}
