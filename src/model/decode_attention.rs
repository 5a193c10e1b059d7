//! Attention for a few queries on the CPU, in one pass per query head: scores, soft-cap,
//! the causal and padding mask, softmax and the weighted values, without the score matrix ever
//! becoming a tensor.
//!
//! A decoding step has one query per row: there the general path (two `gemm` calls of a few rows,
//! the scaled queries and the scores as tensors, a parallel softmax) is a dozen candle operations
//! per block, each with its own allocation and parallel hand-off, for a few hundred thousand
//! FLOP. Here a step's attention is one parallel loop over (batch row, query head).

use std::ops::RangeInclusive;

use candle_core::{Device, Storage, Tensor};
use rayon::prelude::*;

/// Up to this many queries per row, [`attend`] replaces the `gemm` path: decoding (one query)
/// and the last columns of a short chunk. Larger chunks are products worth `gemm`'s blocking.
pub(crate) const MAX_QUERIES: usize = 8;

/// Scaled dot-product attention of `q` over the keys each query may see — `visible(row, column)`,
/// the key columns query column `column` of batch row `row` sees (`layers::Causal::visible`;
/// taken as a function so that this module needs nothing from `layers`) — the scores soft-capped as `cap · tanh(score / cap)` when `softcap` is set. Grouped heads: query
/// head h reads key/value head h / (heads / kv_heads).
///
/// The same arithmetic as the general path, in another order: each score is one dot product in
/// eight lanes, the softmax is [`super::layers::causal_softmax_cpu`]'s, and each output is a sum
/// over the seen keys in order. Keys a query may not see are skipped, not given weight 0.
///
/// # Shapes
/// `q`: [b, heads, s, hd] f32, already scaled; `k`, `v`: [b, kv_heads, t, hd] f32, their key
/// column 0 being the sequence's column `first_key` → [b, heads, s, hd] f32
pub(crate) fn attend(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    offset: usize,
    first_key: usize,
    softcap: Option<f64>,
    visible: impl Fn(usize, usize) -> RangeInclusive<usize> + Sync,
) -> candle_core::Result<Tensor> {
    let (b, heads, s, hd) = q.dims4()?;
    let (kb, kv_heads, t, khd) = k.dims4()?;
    if v.dims4()? != (kb, kv_heads, t, khd) || (kb, khd) != (b, hd) {
        candle_core::bail!(
            "attention: queries {:?}, keys {:?}, values {:?} do not match",
            q.dims(),
            k.dims(),
            v.dims()
        )
    }
    if kv_heads == 0 || heads % kv_heads != 0 {
        candle_core::bail!("attention: {heads} query heads over {kv_heads} key/value heads")
    }
    if offset + s != first_key + t {
        candle_core::bail!(
            "attention: {t} keys from column {first_key} for {s} queries at offset {offset}"
        )
    }
    let n_rep = heads / kv_heads;
    let (q, k, v) = (q.contiguous()?, rows_contiguous(k)?, rows_contiguous(v)?);
    let (qv, kv, vv) = (Strides::of(&q), Strides::of(&k), Strides::of(&v));
    let (q_storage, _) = q.storage_and_layout();
    let (k_storage, _) = k.storage_and_layout();
    let (v_storage, _) = v.storage_and_layout();
    let qs = f32_elements(&q_storage)?;
    let ks = f32_elements(&k_storage)?;
    let vs = f32_elements(&v_storage)?;
    let cap = softcap.map(|c| c as f32);
    let task_len = s * hd;
    let mut out = vec![0f32; b * heads * s * hd];
    // One task per (batch row, query head): a batch of one with a single key/value head (Gemma's
    // multi-query attention) still has a task per head for every thread.
    out.par_chunks_mut(task_len.max(1))
        .enumerate()
        .for_each(|(task, o)| {
            let (row, h) = (task / heads, task % heads);
            let g = h / n_rep;
            let mut weights = vec![0f32; t];
            for i in 0..s {
                let keys = visible(row, offset + i);
                // The window and padding may start before the cached keys do.
                let lo = keys.start().max(&first_key) - first_key;
                let hi = keys.end() - first_key;
                let query = &qs[qv.at(row, h, i)..][..hd];
                let seen = &mut weights[lo..=hi];
                let mut max = f32::NEG_INFINITY;
                for (j, w) in (lo..=hi).zip(seen.iter_mut()) {
                    let score = dot(query, &ks[kv.at(row, g, j)..][..hd]);
                    *w = match cap {
                        Some(c) => c * (score / c).tanh(),
                        None => score,
                    };
                    max = max.max(*w);
                }
                let mut sum = 0f32;
                for w in seen.iter_mut() {
                    *w = (*w - max).exp();
                    sum += *w;
                }
                let inv = 1.0 / sum;
                let y = &mut o[i * hd..][..hd];
                for (j, &w) in (lo..=hi).zip(seen.iter()) {
                    axpy(w * inv, &vs[vv.at(row, g, j)..][..hd], y);
                }
            }
        });
    drop((q_storage, k_storage, v_storage));
    Tensor::from_vec(out, (b, heads, s, hd), &Device::Cpu)
}

/// Where the rows of a rank-4 tensor start in its storage (the last axis contiguous: a cache
/// narrowed to its last positions is such a view).
struct Strides {
    start: usize,
    stride: [usize; 3],
}

impl Strides {
    fn of(t: &Tensor) -> Self {
        let layout = t.layout();
        let st = layout.stride();
        Self {
            start: layout.start_offset(),
            stride: [st[0], st[1], st[2]],
        }
    }

    /// Where row `i` of head `h` in batch row `b` starts.
    fn at(&self, b: usize, h: usize, i: usize) -> usize {
        self.start + b * self.stride[0] + h * self.stride[1] + i * self.stride[2]
    }
}

/// `t` itself when its rows are contiguous, else a contiguous copy.
fn rows_contiguous(t: &Tensor) -> candle_core::Result<Tensor> {
    if t.stride()[3] == 1 {
        Ok(t.clone())
    } else {
        t.contiguous()
    }
}

/// A CPU f32 storage's elements.
fn f32_elements(storage: &Storage) -> candle_core::Result<&[f32]> {
    match storage {
        Storage::Cpu(cpu) => cpu.as_slice::<f32>(),
        _ => candle_core::bail!("attention's CPU path needs CPU tensors"),
    }
}

/// Dot product in eight lanes, summed pairwise.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7])) + tail
}

/// `y += a · x`.
fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}
