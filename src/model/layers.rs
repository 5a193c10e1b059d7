//! Building blocks shared by the model families: RMSNorm and LayerNorm, rotary embeddings (full
//! or partial, with the scalings of Llama 3, Phi-3 and linear interpolation), KV cache, attention
//! masks and scaled dot-product attention (with Gemma 2's logit soft-cap).

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::Result;

/// RMSNorm with the scale already in "multiply by" form (Gemma's `1 + w` folded in at load).
#[derive(Clone, Debug)]
pub struct RmsNorm {
    scale: Tensor,
    eps: f32,
}

impl RmsNorm {
    pub fn new(scale: Tensor, eps: f64) -> Self {
        Self {
            scale,
            eps: eps as f32,
        }
    }

    /// The scale (Gemma's `1 + w` folded in).
    pub fn scale(&self) -> &Tensor {
        &self.scale
    }

    pub fn eps(&self) -> f64 {
        self.eps as f64
    }

    /// Normalises in f32 (residual streams reach |x| ≈ 6e4) and returns the input dtype.
    ///
    /// # Shapes
    /// `x`: [.., d] → [.., d]
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let dtype = x.dtype();
        let x32 = x.to_dtype(DType::F32)?.contiguous()?;
        candle_nn::ops::rms_norm(&x32, &self.scale, self.eps)?.to_dtype(dtype)
    }
}

/// LayerNorm with weight and bias (GPT-2, GPT-NeoX).
#[derive(Clone, Debug)]
pub struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f32,
}

impl LayerNorm {
    pub fn new(weight: Tensor, bias: Tensor, eps: f64) -> Self {
        Self {
            weight,
            bias,
            eps: eps as f32,
        }
    }

    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    pub fn bias(&self) -> &Tensor {
        &self.bias
    }

    pub fn eps(&self) -> f64 {
        self.eps as f64
    }

    /// Normalises in f32 and returns the input dtype.
    ///
    /// # Shapes
    /// `x`: [.., d] → [.., d]
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let dtype = x.dtype();
        let x32 = x.to_dtype(DType::F32)?.contiguous()?;
        candle_nn::ops::layer_norm(&x32, &self.weight, &self.bias, self.eps)?.to_dtype(dtype)
    }
}

/// A norm of either kind.
#[derive(Clone, Debug)]
pub enum Norm {
    Rms(RmsNorm),
    Layer(LayerNorm),
}

impl Norm {
    /// # Shapes
    /// `x`: [.., d] → [.., d]
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Norm::Rms(n) => n.forward(x),
            Norm::Layer(n) => n.forward(x),
        }
    }
}

/// RoPE frequency scaling, as in Hugging Face's `rope_scaling`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub enum RopeScaling {
    #[default]
    None,
    /// Positions divided by `factor` (Gemma 3 global layers of the larger models).
    Linear { factor: f64 },
    /// Llama 3.1/3.2 frequency-dependent scaling.
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_position_embeddings: usize,
    },
    /// Per-frequency divisors (llama.cpp's `rope_freqs.weight`).
    Factors(Vec<f32>),
    /// YaRN: frequencies blended between interpolation (divided by `factor`) and extrapolation
    /// along a ramp between the correction dimensions of `beta_fast` and `beta_slow`; cos and sin
    /// scaled by `attention_factor` (Qwen2.5 long-context configs, DeepSeek).
    Yarn {
        factor: f64,
        original_max_position_embeddings: usize,
        beta_fast: f64,
        beta_slow: f64,
        truncate: bool,
        attention_factor: f64,
    },
    /// Phi-3's "longrope": per-frequency divisors for short and long sequences (the long ones once
    /// a sequence passes `original_max_position_embeddings`) and a factor on cos and sin.
    LongRope {
        short_factor: Vec<f64>,
        long_factor: Vec<f64>,
        original_max_position_embeddings: usize,
        attention_factor: f64,
    },
}

/// Rotary position embedding for one base frequency, over the first `dim` features of each head
/// (all of them, or a fraction: GPT-NeoX's `rotary_pct`, Phi's `partial_rotary_factor`).
#[derive(Clone, Debug)]
pub struct Rotary {
    inv_freq: Vec<f32>,
    /// LongRoPE: the frequencies used once the sequence is longer than `.0` positions.
    long: Option<(usize, Vec<f32>)>,
    /// Multiplies cos and sin (LongRoPE's attention factor; 1 otherwise).
    attention_factor: f32,
    /// Rotate adjacent pairs (x[2i], x[2i+1]) instead of halves: llama.cpp permutes the Q/K rows of
    /// Llama GGUF files so that this "interleaved" form is equivalent to Hugging Face's.
    interleaved: bool,
}

impl Rotary {
    /// `dim` is the number of rotated features per head (the head size for full rotary).
    pub fn new(dim: usize, base: f64, scaling: &RopeScaling, interleaved: bool) -> Self {
        let half = dim / 2;
        let mut inv_freq: Vec<f64> = (0..half)
            .map(|i| 1.0 / base.powf((2 * i) as f64 / dim as f64))
            .collect();
        let mut long = None;
        let mut attention_factor = 1.0;
        match scaling {
            RopeScaling::None => {}
            RopeScaling::Linear { factor } => inv_freq.iter_mut().for_each(|f| *f /= factor),
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings,
            } => {
                let old = *original_max_position_embeddings as f64;
                let low_wavelen = old / low_freq_factor;
                let high_wavelen = old / high_freq_factor;
                for f in inv_freq.iter_mut() {
                    let wavelen = 2.0 * std::f64::consts::PI / *f;
                    if wavelen > low_wavelen {
                        *f /= factor;
                    } else if wavelen >= high_wavelen {
                        let smooth = (old / wavelen - low_freq_factor)
                            / (high_freq_factor - low_freq_factor);
                        *f = (1.0 - smooth) * *f / factor + smooth * *f;
                    }
                }
            }
            RopeScaling::Factors(factors) => {
                for (f, d) in inv_freq.iter_mut().zip(factors) {
                    *f /= *d as f64;
                }
            }
            RopeScaling::Yarn {
                factor,
                original_max_position_embeddings,
                beta_fast,
                beta_slow,
                truncate,
                attention_factor: a,
            } => {
                let d = dim as f64;
                let orig = *original_max_position_embeddings as f64;
                let correction_dim = |rotations: f64| {
                    d * (orig / (rotations * 2.0 * std::f64::consts::PI)).ln() / (2.0 * base.ln())
                };
                let (mut low, mut high) = (correction_dim(*beta_fast), correction_dim(*beta_slow));
                if *truncate {
                    (low, high) = (low.floor(), high.ceil());
                }
                let (low, mut high) = (low.max(0.0), high.min(d - 1.0));
                if low == high {
                    high += 0.001;
                }
                for (i, f) in inv_freq.iter_mut().enumerate() {
                    let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
                    let extrapolation = 1.0 - ramp;
                    *f = *f / factor * (1.0 - extrapolation) + *f * extrapolation;
                }
                attention_factor = *a as f32;
            }
            RopeScaling::LongRope {
                short_factor,
                long_factor,
                original_max_position_embeddings,
                attention_factor: a,
            } => {
                let divided = |factors: &[f64]| -> Vec<f32> {
                    inv_freq
                        .iter()
                        .zip(factors)
                        .map(|(f, d)| (f / d) as f32)
                        .collect()
                };
                long = Some((
                    *original_max_position_embeddings,
                    divided(long_factor.as_slice()),
                ));
                inv_freq = divided(short_factor.as_slice())
                    .into_iter()
                    .map(f64::from)
                    .collect();
                attention_factor = *a as f32;
            }
        }
        Self {
            inv_freq: inv_freq.into_iter().map(|f| f as f32).collect(),
            long,
            attention_factor,
            interleaved,
        }
    }

    /// Number of rotated features per head.
    pub fn dim(&self) -> usize {
        2 * self.inv_freq.len()
    }

    pub fn inv_freq(&self) -> &[f32] {
        &self.inv_freq
    }

    /// Cosine and sine tables for positions `offset..offset + len`.
    ///
    /// # Shapes
    /// returns two [len, head_dim / 2] tensors
    pub fn tables(&self, offset: usize, len: usize, device: &Device) -> Result<(Tensor, Tensor)> {
        self.tables_within(offset, len, offset + len, device)
    }

    /// As [`Rotary::tables`], for positions that belong to a sequence `seq_len` long (a chunk of
    /// a longer prompt): scalings that depend on the length (LongRoPE) choose by `seq_len`, as one
    /// forward over the whole prompt would.
    pub fn tables_within(
        &self,
        offset: usize,
        len: usize,
        seq_len: usize,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let (cos, sin) = self.table_values(offset, len, seq_len.max(offset + len));
        let half = self.inv_freq.len();
        Ok((
            Tensor::from_vec(cos, (len, half), device)?,
            Tensor::from_vec(sin, (len, half), device)?,
        ))
    }

    /// Tables for a left-padded batch: row r's columns `offset..offset + len` hold positions
    /// `column − pads[r]` (padding columns get position 0; nothing attends to them). Row r's
    /// sequence runs to column `horizon` at least (see [`Rotary::tables_within`]).
    ///
    /// # Shapes
    /// returns two [pads.len(), len, head_dim / 2] tensors
    pub fn padded_tables(
        &self,
        offset: usize,
        len: usize,
        pads: &[usize],
        horizon: usize,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let mut cos = Vec::with_capacity(pads.len() * len * self.inv_freq.len());
        let mut sin = Vec::with_capacity(cos.capacity());
        for &pad in pads {
            // Row r alone would run positions offset − pad ..; its own length (to the horizon)
            // picks LongRoPE's frequencies exactly as it would alone.
            let first = offset.saturating_sub(pad);
            let skipped = pad.saturating_sub(offset).min(len);
            cos.extend(std::iter::repeat_n(
                self.attention_factor,
                skipped * self.inv_freq.len(),
            ));
            sin.extend(std::iter::repeat_n(0.0, skipped * self.inv_freq.len()));
            let seq_len = (first + len - skipped).max(horizon.saturating_sub(pad));
            let (c, s) = self.table_values(first, len - skipped, seq_len);
            cos.extend(c);
            sin.extend(s);
        }
        let half = self.inv_freq.len();
        Ok((
            Tensor::from_vec(cos, (pads.len(), len, half), device)?,
            Tensor::from_vec(sin, (pads.len(), len, half), device)?,
        ))
    }

    /// cos and sin values for positions `offset..offset + len` of a sequence `seq_len` long.
    fn table_values(&self, offset: usize, len: usize, seq_len: usize) -> (Vec<f32>, Vec<f32>) {
        let freqs = match &self.long {
            Some((limit, long)) if seq_len > *limit => long,
            _ => &self.inv_freq,
        };
        let half = freqs.len();
        let a = self.attention_factor;
        let mut cos = Vec::with_capacity(len * half);
        let mut sin = Vec::with_capacity(len * half);
        for p in offset..offset + len {
            for &f in freqs {
                // f32 product, as Hugging Face computes it.
                let angle = p as f32 * f;
                cos.push(angle.cos() * a);
                sin.push(angle.sin() * a);
            }
        }
        (cos, sin)
    }

    /// Rotates the first [`Rotary::dim`] features of every head; the rest pass unchanged.
    ///
    /// # Shapes
    /// `x`: [b, heads, s, head_dim]; `cos`, `sin`: [s, dim / 2]
    pub fn apply(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> candle_core::Result<Tensor> {
        let dtype = x.dtype();
        let head_dim = x.dim(3)?;
        let dim = self.dim();
        let x = x.to_dtype(DType::F32)?;
        let (rot, pass) = if dim < head_dim {
            (
                x.narrow(3, 0, dim)?.contiguous()?,
                Some(x.narrow(3, dim, head_dim - dim)?),
            )
        } else {
            (x.contiguous()?, None)
        };
        let y = if self.interleaved {
            candle_nn::rotary_emb::rope_i(&rot, cos, sin)?
        } else {
            candle_nn::rotary_emb::rope(&rot, cos, sin)?
        };
        let y = match pass {
            Some(p) => Tensor::cat(&[&y, &p], 3)?,
            None => y,
        };
        y.to_dtype(dtype)
    }
}

/// Keys and values of past positions for one attention layer.
///
/// On the CPU the positions live in buffers with room for more, written in place as the sequence
/// grows (`Tensor::slice_set`), so that a decoding step copies its own keys and values only, not
/// the whole cache; when the room runs out the cached positions move to buffers twice their size.
/// [`KvCache::append`] returns views of the buffers: read them before the next append. Not
/// `Clone`: two caches sharing buffers would write over each other's positions.
#[derive(Debug, Default)]
pub struct KvCache {
    /// Keys and values, [b, kv_heads, capacity, head_dim]; the cached positions are
    /// `start..end` of the third axis.
    buffers: Option<(Tensor, Tensor)>,
    start: usize,
    end: usize,
}

/// The fewest positions a cache's buffers make room for.
const MIN_CACHE_CAPACITY: usize = 64;

impl KvCache {
    /// Appends `k`, `v` ([b, kv_heads, s, head_dim]) and returns the whole cached sequence, as
    /// views of the cache's buffers (rows contiguous, [b, kv_heads, cached, head_dim]).
    pub fn append(&mut self, k: &Tensor, v: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        let s = k.dim(2)?;
        let (k, v) = (k.contiguous()?, v.contiguous()?);
        let capacity = match &self.buffers {
            Some((bk, _)) => bk.dim(2)?,
            None => 0,
        };
        if self.end + s > capacity {
            self.grow(&k, s)?;
        }
        let Some((bk, bv)) = &self.buffers else {
            candle_core::bail!("the cache's buffers were just made")
        };
        bk.slice_set(&k, 2, self.end)?;
        bv.slice_set(&v, 2, self.end)?;
        self.end += s;
        self.cached(bk, bv)
    }

    /// Moves the cached positions to buffers with room for `s` more, and as many again.
    fn grow(&mut self, like: &Tensor, s: usize) -> candle_core::Result<()> {
        let live = self.end - self.start;
        // Room to spare on the CPU only: a GPU's memory is the tighter budget, so there the cache
        // keeps exactly its positions (each append copies them, as concatenation did).
        let capacity = if matches!(like.device(), Device::Cpu) {
            (2 * (live + s)).max(MIN_CACHE_CAPACITY)
        } else {
            live + s
        };
        let (b, heads, _, hd) = like.dims4()?;
        let make = || Tensor::zeros((b, heads, capacity, hd), like.dtype(), like.device());
        let (nk, nv) = (make()?, make()?);
        if let Some((bk, bv)) = &self.buffers {
            if live > 0 {
                nk.slice_set(&bk.narrow(2, self.start, live)?.contiguous()?, 2, 0)?;
                nv.slice_set(&bv.narrow(2, self.start, live)?.contiguous()?, 2, 0)?;
            }
        }
        self.buffers = Some((nk, nv));
        (self.start, self.end) = (0, live);
        Ok(())
    }

    fn cached(&self, bk: &Tensor, bv: &Tensor) -> candle_core::Result<(Tensor, Tensor)> {
        let live = self.end - self.start;
        Ok((
            bk.narrow(2, self.start, live)?,
            bv.narrow(2, self.start, live)?,
        ))
    }

    /// How many positions are cached.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether no position is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps the last `n` cached positions (a sliding-window layer needs no more).
    pub fn keep_last(&mut self, n: usize) -> candle_core::Result<()> {
        if self.len() > n {
            self.start = self.end - n;
        }
        Ok(())
    }

    /// Keeps the batch rows `rows` (a [n] u32 tensor of row indices), in that order.
    pub fn retain_rows(&mut self, rows: &Tensor) -> candle_core::Result<()> {
        if let Some((bk, bv)) = &self.buffers {
            let (k, v) = self.cached(bk, bv)?;
            // index_select needs a packed tensor; the kept rows become the new buffers, full.
            let (k, v) = (
                k.contiguous()?.index_select(rows, 0)?,
                v.contiguous()?.index_select(rows, 0)?,
            );
            let live = self.len();
            self.buffers = Some((k, v));
            (self.start, self.end) = (0, live);
        }
        Ok(())
    }

    pub fn clear(&mut self) {
        self.buffers = None;
        (self.start, self.end) = (0, 0);
    }
}

/// The first key position any of the queries at `offset..` may see: 0 without a window, else the
/// first position in the window of the chunk's first query.
pub fn first_visible_key(offset: usize, window: Option<usize>) -> usize {
    window.map_or(0, |w| (offset + 1).saturating_sub(w))
}

/// Additive causal mask for queries at `offset..offset + len` over the keys they may see,
/// `first_visible_key(offset, window)..offset + len` (see [`Causal::sees`]). Returns `None` when
/// nothing is masked (a single query sees every key from the first visible one on).
///
/// # Shapes
/// returns [len, width], width = offset + len − first_visible_key(offset, window)
pub fn attention_mask(
    offset: usize,
    len: usize,
    window: Option<usize>,
    device: &Device,
) -> Result<Option<Tensor>> {
    if len <= 1 {
        return Ok(None);
    }
    let first = first_visible_key(offset, window);
    let total = offset + len;
    let causal = Causal {
        offset,
        window,
        pads: &[],
    };
    let mut mask = Vec::with_capacity(len * (total - first));
    for i in 0..len {
        let q = offset + i;
        for j in first..total {
            mask.push(if causal.sees(q, j) {
                0f32
            } else {
                f32::NEG_INFINITY
            });
        }
    }
    Ok(Some(Tensor::from_vec(mask, (len, total - first), device)?))
}

/// What [`padding_mask`] adds to a padding key: finite, so that a padding query (all of whose keys
/// are padding) still has a softmax, and far enough below any score that a real query gives the
/// key probability exactly 0.
pub const PADDING_BIAS: f32 = -1e30;

/// Additive mask hiding each batch row's left padding (`pads[r]` columns) from every query, over
/// the same keys as [`attention_mask`]; `None` when no padding column is among them. One row of
/// keys per batch row, broadcast over heads and queries, so it stays small for long sequences.
///
/// # Shapes
/// returns [b, 1, 1, width], width = offset + len − first_visible_key(offset, window)
pub fn padding_mask(
    offset: usize,
    len: usize,
    window: Option<usize>,
    pads: &[usize],
    device: &Device,
) -> Result<Option<Tensor>> {
    let first = first_visible_key(offset, window);
    if !pads.iter().any(|&p| p > first) {
        return Ok(None);
    }
    let total = offset + len;
    let mask: Vec<f32> = pads
        .iter()
        .flat_map(|&pad| (first..total).map(move |j| if j < pad { PADDING_BIAS } else { 0.0 }))
        .collect();
    Ok(Some(Tensor::from_vec(
        mask,
        (pads.len(), 1, 1, total - first),
        device,
    )?))
}

/// Which keys each query sees: queries are columns `offset..offset + s`, keys `0..offset + s`;
/// causal, limited to the last `window` positions (the query's own included) when set, and, in a
/// left-padded batch, never a padding column of its row (`pads[row]` of them; a padding query
/// sees itself only, so that no row of scores is empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Causal<'a> {
    pub offset: usize,
    pub window: Option<usize>,
    /// Left padding per batch row; empty when the batch has none.
    pub pads: &'a [usize],
}

impl Causal<'_> {
    /// Whether query column `q` sees key column `j`, padding aside.
    pub fn sees(&self, q: usize, j: usize) -> bool {
        j <= q && self.window.is_none_or(|w| q - j < w)
    }

    /// The keys query column `q` of batch row `row` sees, as a range of columns.
    pub(crate) fn visible(&self, row: usize, q: usize) -> std::ops::RangeInclusive<usize> {
        let lo = self.window.map_or(0, |w| (q + 1).saturating_sub(w));
        match self.pads.get(row) {
            Some(&pad) if q < pad => q..=q,
            Some(&pad) => lo.max(pad)..=q,
            None => lo..=q,
        }
    }
}

/// Scaled dot-product attention with grouped key/value heads; `softcap` bounds the scores as
/// `cap · tanh(score / cap)` before the mask (Gemma 2). `masks` are the additive form of `causal`
/// ([`attention_mask`] and [`padding_mask`], whose columns start at the first visible key), used
/// off the CPU; on the CPU the scores are masked and normalised in one pass per row instead
/// ([`causal_softmax_cpu`]), which matters for long prompts, whose score matrices are the largest
/// tensors of a forward pass.
///
/// # Shapes
/// `q`: [b, heads, s, hd]; `k`, `v`: [b, kv_heads, t, hd]; `masks`: as [`attention_mask`] and
/// [`padding_mask`] return them → [b, heads, s, hd]
pub fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    causal: Causal,
    masks: &[Tensor],
    scale: f64,
    softcap: Option<f64>,
) -> candle_core::Result<Tensor> {
    attention_up_to(
        q,
        k,
        v,
        causal,
        masks,
        scale,
        softcap,
        super::decode_attention::MAX_QUERIES,
    )
}

/// [`attention`], on the CPU through [`super::decode_attention::attend`] for chunks of at most
/// `fused_queries` queries and through `gemm` for longer ones.
#[allow(clippy::too_many_arguments)]
fn attention_up_to(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    causal: Causal,
    masks: &[Tensor],
    scale: f64,
    softcap: Option<f64>,
    fused_queries: usize,
) -> candle_core::Result<Tensor> {
    // `k` may start after position 0 (a sliding-window cache keeps its last positions only), and
    // with a window the chunk's queries see none of the keys before `first_seen`: both are cut off
    // before the product, so a windowed layer costs window × chunk, not length × chunk.
    let (s, t) = (q.dim(2)?, k.dim(2)?);
    let end = causal.offset + s;
    let Some(first_key) = end.checked_sub(t) else {
        candle_core::bail!("{t} keys for {s} queries at offset {}", causal.offset)
    };
    let first_seen = first_visible_key(causal.offset, causal.window).max(first_key);
    let from = first_seen - first_key;
    let (k, v) = if from > 0 {
        (
            k.narrow(2, from, end - first_seen)?,
            v.narrow(2, from, end - first_seen)?,
        )
    } else {
        (k.clone(), v.clone())
    };
    // The additive masks have a column per key from the first visible one on.
    let masks = masks
        .iter()
        .map(|m| {
            let last = m.rank() - 1;
            let mask_start = end.saturating_sub(m.dim(last)?);
            let Some(skip) = first_seen.checked_sub(mask_start) else {
                candle_core::bail!(
                    "mask starts at key {mask_start}, after the first seen {first_seen}"
                )
            };
            m.narrow(last, skip, end - first_seen)
        })
        .collect::<candle_core::Result<Vec<_>>>()?;
    let (b, heads, _, hd) = q.dims4()?;
    let kv_heads = k.dim(1)?;
    let n_rep = heads / kv_heads;
    let dtype = q.dtype();
    // Scaling the queries ([s, hd]) costs less than scaling the scores ([s, t]).
    let q = (q.to_dtype(DType::F32)? * scale)?.contiguous()?;
    if matches!(q.device(), Device::Cpu) && s <= fused_queries {
        if !causal.pads.is_empty() && causal.pads.len() != b {
            candle_core::bail!("{} padding counts for a batch of {b}", causal.pads.len())
        }
        let (k, v) = (k.to_dtype(DType::F32)?, v.to_dtype(DType::F32)?);
        let visible = |row, column| causal.visible(row, column);
        return super::decode_attention::attend(
            &q,
            &k,
            &v,
            causal.offset,
            first_seen,
            softcap,
            visible,
        )?
        .to_dtype(dtype);
    }
    if matches!(q.device(), Device::Cpu) {
        // Grouped queries: the n_rep query heads of a key/value head are consecutive, so they
        // stack into one [n_rep · s, hd] matrix per key/value head, and the keys and values are
        // multiplied as they are instead of being copied n_rep times.
        let q = q.reshape((b, kv_heads, n_rep * s, hd))?;
        let k = k.to_dtype(DType::F32)?.contiguous()?;
        let scores = q.matmul(&k.t()?)?;
        let probs = causal_softmax_cpu(&scores, s, causal, first_seen, softcap)?;
        return probs
            .matmul(&v.to_dtype(DType::F32)?.contiguous()?)?
            .reshape((b, heads, s, hd))?
            .to_dtype(dtype);
    }
    let k = repeat_kv(k, n_rep)?;
    let v = repeat_kv(v, n_rep)?;
    let k = k.to_dtype(DType::F32)?.contiguous()?;
    let scores = q.matmul(&k.t()?)?;
    let scores = match softcap {
        Some(cap) => soft_cap(&scores, cap)?,
        None => scores,
    };
    let scores = masks
        .iter()
        .try_fold(scores, |scores, m| scores.broadcast_add(m))?;
    candle_nn::ops::softmax_last_dim(&scores)?
        .matmul(&v.to_dtype(DType::F32)?.contiguous()?)?
        .to_dtype(dtype)
}

/// Softmax over the keys each query may see (see [`Causal`]), after the optional soft-cap; keys it
/// may not see get probability 0. The scores' first key is column `first_key`; their rows cycle
/// through the `queries` query columns (several query heads may share a matrix). One read and one
/// write of the scores, row by row in parallel.
///
/// # Shapes
/// `scores`: [b, heads, r · queries, t] (f32, CPU), t = offset + queries − first_key → same
pub fn causal_softmax_cpu(
    scores: &Tensor,
    queries: usize,
    causal: Causal,
    first_key: usize,
    softcap: Option<f64>,
) -> candle_core::Result<Tensor> {
    use rayon::prelude::*;
    let dims = scores.dims().to_vec();
    let s = queries;
    let (b, t) = match dims.as_slice() {
        [b, _, rows, t] if s > 0 && rows % s == 0 => (*b, *t),
        _ => candle_core::bail!(
            "attention scores must be [batch, heads, rows, keys] with rows a multiple of {s} queries"
        ),
    };
    if causal.offset + s != first_key + t {
        candle_core::bail!(
            "attention scores over {t} keys from column {first_key} for {s} queries at offset {}",
            causal.offset
        )
    }
    if !causal.pads.is_empty() && causal.pads.len() != b {
        candle_core::bail!("{} padding counts for a batch of {b}", causal.pads.len())
    }
    let scores = scores.contiguous()?;
    let (storage, layout) = scores.storage_and_layout();
    let candle_core::Storage::Cpu(cpu) = &*storage else {
        candle_core::bail!("causal_softmax_cpu needs a CPU tensor")
    };
    let n = scores.elem_count();
    let rows_per_batch = n / (t * b).max(1);
    let src = &cpu.as_slice::<f32>()?[layout.start_offset()..layout.start_offset() + n];
    let cap = softcap.map(|c| c as f32);
    let mut out = vec![0f32; n];
    out.par_chunks_mut(t)
        .zip(src.par_chunks(t))
        .enumerate()
        .for_each(|(row, (o, x))| {
            let q = causal.offset + row % s;
            let keys = causal.visible(row / rows_per_batch, q);
            // The window and padding may start before the scores do (keys already cut off).
            let (lo, hi) = (
                keys.start().max(&first_key) - first_key,
                keys.end() - first_key,
            );
            let seen = &x[lo..=hi];
            let capped = |v: f32| match cap {
                Some(c) => c * (v / c).tanh(),
                None => v,
            };
            let max = seen
                .iter()
                .map(|&v| capped(v))
                .fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for (oj, &v) in o[lo..=hi].iter_mut().zip(seen) {
                let e = (capped(v) - max).exp();
                *oj = e;
                sum += e;
            }
            let inv = 1.0 / sum;
            o[lo..=hi].iter_mut().for_each(|p| *p *= inv);
        });
    drop(storage);
    Tensor::from_vec(out, dims, &Device::Cpu)
}

/// Gemma's tanh-approximated GELU.
pub fn gelu_tanh(x: &Tensor) -> candle_core::Result<Tensor> {
    x.gelu()
}

/// `cap · tanh(x / cap)`, Gemma 2's final logit soft-capping.
pub fn soft_cap(x: &Tensor, cap: f64) -> candle_core::Result<Tensor> {
    (x / cap)?.tanh()? * cap
}

/// Each of the `n_kv` key/value heads repeated `n_rep` times, for grouped-query attention.
///
/// # Shapes
/// - `xs`: [batch, n_kv, seq, head_dim] → [batch, n_kv · n_rep, seq, head_dim], head h reading
///   kv head h / n_rep. Concatenated along the sequence axis and reshaped (one contiguous copy,
///   faster than a strided broadcast; candle-transformers does the same).
fn repeat_kv(xs: Tensor, n_rep: usize) -> candle_core::Result<Tensor> {
    if n_rep == 1 {
        return Ok(xs);
    }
    let (b, n_kv, seq, head_dim) = xs.dims4()?;
    Tensor::cat(&vec![&xs; n_rep], 2)?.reshape((b, n_kv * n_rep, seq, head_dim))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest |a − b| over all elements (same shapes).
    fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
        assert_eq!(a.dims(), b.dims());
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }

    #[test]
    fn fused_causal_softmax_equals_mask_then_softmax() {
        // The CPU path (one pass per row) against the device path (additive mask, softmax).
        // Batches of two rows, unpadded and left-padded (a row padded into its chunk's queries).
        for (offset, s, window, cap, pads) in [
            (0, 5, None, None, vec![]),
            (7, 4, None, None, vec![]),
            (7, 4, Some(3), None, vec![]),
            (0, 6, Some(2), Some(3.0), vec![]),
            (9, 1, Some(4), Some(0.5), vec![]),
            (0, 5, None, None, vec![0, 3]),
            (7, 4, None, Some(2.0), vec![9, 0]),
            (7, 4, Some(3), None, vec![2, 8]),
            (9, 1, Some(4), None, vec![7, 0]),
        ] {
            let t = offset + s;
            let scores = Tensor::randn(0f32, 4.0, (2, 3, s, t), &Device::Cpu).unwrap();
            let causal = Causal {
                offset,
                window,
                pads: &pads,
            };
            let fused = causal_softmax_cpu(&scores, s, causal, 0, cap).unwrap();
            let capped = match cap {
                Some(c) => soft_cap(&scores, c).unwrap(),
                None => scores.clone(),
            };
            // The mask covers the visible keys only; the fused softmax gives the others 0.
            let first = first_visible_key(offset, window);
            let capped = capped
                .narrow(3, first, t - first)
                .unwrap()
                .contiguous()
                .unwrap();
            let masked = match attention_mask(offset, s, window, &Device::Cpu).unwrap() {
                Some(m) => capped.broadcast_add(&m).unwrap(),
                None => capped,
            };
            let masked = match padding_mask(offset, s, window, &pads, &Device::Cpu).unwrap() {
                Some(m) => masked.broadcast_add(&m).unwrap(),
                None => masked,
            };
            let reference = candle_nn::ops::softmax_last_dim(&masked).unwrap();
            if first > 0 {
                let hidden = fused.narrow(3, 0, first).unwrap().abs().unwrap();
                let hidden = hidden.flatten_all().unwrap().max(0).unwrap();
                assert_eq!(hidden.to_scalar::<f32>().unwrap(), 0.0);
            }
            // Padding queries (a column before their row's padding ends) are never measured or
            // attended to: the two paths may differ there, but both must stay finite.
            assert!(reference
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
                .iter()
                .all(|p| p.is_finite()));
            let real_query = |row: usize, i: usize| pads.get(row).is_none_or(|&p| offset + i >= p);
            let keep: Vec<f32> = (0..2)
                .flat_map(|row| {
                    (0..3).flat_map(move |_| {
                        (0..s).map(move |i| if real_query(row, i) { 1f32 } else { 0f32 })
                    })
                })
                .collect();
            let keep = Tensor::from_vec(keep, (2, 3, s, 1), &Device::Cpu).unwrap();
            let fused = fused.narrow(3, first, t - first).unwrap();
            let (fused, reference) = (
                fused.broadcast_mul(&keep).unwrap(),
                reference.broadcast_mul(&keep).unwrap(),
            );
            let diff = max_abs_diff(&fused, &reference);
            assert!(
                diff < 1e-6,
                "offset {offset}, s {s}, window {window:?}, pads {pads:?}: {diff}"
            );
        }
    }

    /// A cache beside the concatenation of everything appended to it.
    struct CacheAndReference {
        cache: KvCache,
        keys: Option<Tensor>,
        values: Option<Tensor>,
        appended: f64,
    }

    impl CacheAndReference {
        /// Appends `s` new positions of `b` rows to both and checks that they hold the same.
        fn append(&mut self, b: usize, s: usize) {
            let (heads, hd) = (2, 4);
            self.appended += 1.0;
            let new = |shift: f64| {
                (Tensor::randn(0f32, 1.0, (b, heads, s, hd), &Device::Cpu).unwrap() + shift)
                    .unwrap()
            };
            let (k, v) = (new(self.appended), new(-self.appended));
            let (ck, cv) = self.cache.append(&k, &v).unwrap();
            let cat = |all: &Option<Tensor>, new: &Tensor| match all {
                Some(a) => Tensor::cat(&[a, new], 2).unwrap(),
                None => new.clone(),
            };
            self.keys = Some(cat(&self.keys, &k));
            self.values = Some(cat(&self.values, &v));
            self.check(&ck, &cv);
        }

        fn check(&self, ck: &Tensor, cv: &Tensor) {
            let same = |a: &Tensor, b: &Tensor| {
                assert_eq!(a.dims(), b.dims());
                let a: Vec<f32> = a.flatten_all().unwrap().to_vec1().unwrap();
                let b: Vec<f32> = b.flatten_all().unwrap().to_vec1().unwrap();
                assert_eq!(a, b);
            };
            same(ck, self.keys.as_ref().unwrap());
            same(cv, self.values.as_ref().unwrap());
            assert_eq!(self.cache.len(), ck.dim(2).unwrap());
        }

        fn map(&mut self, f: impl Fn(&Tensor) -> Tensor) {
            self.keys = self.keys.as_ref().map(&f);
            self.values = self.values.as_ref().map(&f);
        }
    }

    #[test]
    fn the_cache_holds_what_concatenation_gives() {
        // Appends of 1 to 120 positions across the buffers' growth, a window cut, rows retained:
        // after each, the cached keys and values equal the concatenation of what went in.
        let mut c = CacheAndReference {
            cache: KvCache::default(),
            keys: None,
            values: None,
            appended: 0.0,
        };
        for s in [40, 1, 1, 30, 1, 7, 60, 1] {
            c.append(3, s);
        }
        // A window keeps the last 50 positions; what follows is appended after them.
        c.cache.keep_last(50).unwrap();
        c.map(|t| t.narrow(2, t.dim(2).unwrap() - 50, 50).unwrap());
        for s in [1, 3, 120] {
            c.append(3, s);
        }
        // Rows 2 and 0 stay, in that order; the next appends have two rows.
        let rows = Tensor::new(&[2u32, 0], &Device::Cpu).unwrap();
        c.cache.retain_rows(&rows).unwrap();
        c.map(|t| t.contiguous().unwrap().index_select(&rows, 0).unwrap());
        for s in [1, 1, 200] {
            c.append(2, s);
        }
        // Views handed out before an append keep what they held.
        let (k_before, _) = c
            .cache
            .append(
                &Tensor::ones((2, 2, 1, 4), DType::F32, &Device::Cpu).unwrap(),
                &Tensor::ones((2, 2, 1, 4), DType::F32, &Device::Cpu).unwrap(),
            )
            .unwrap();
        let held: Vec<f32> = k_before.flatten_all().unwrap().to_vec1().unwrap();
        c.cache
            .append(
                &Tensor::zeros((2, 2, 1, 4), DType::F32, &Device::Cpu).unwrap(),
                &Tensor::zeros((2, 2, 1, 4), DType::F32, &Device::Cpu).unwrap(),
            )
            .unwrap();
        assert_eq!(
            held,
            k_before.flatten_all().unwrap().to_vec1::<f32>().unwrap()
        );
        c.cache.clear();
        assert!(c.cache.is_empty());
    }

    #[test]
    fn few_query_attention_equals_the_gemm_path() {
        // The fused CPU path against the general one (scores by gemm, the masked softmax, the
        // values by gemm): grouped heads, windows, left padding, soft-caps, keys starting after
        // column 0 as a windowed cache keeps them, head sizes with and without a tail of 8 lanes.
        for (offset, s, window, cap, pads, hd, first_key) in [
            (0, 1, None, None, vec![], 64, 0),
            (9, 1, None, None, vec![], 64, 0),
            (9, 1, None, Some(2.0), vec![3, 0], 12, 0),
            (9, 3, Some(4), None, vec![], 64, 5),
            (9, 1, Some(4), Some(0.5), vec![7, 0], 20, 6),
            (6, 4, None, None, vec![8, 1], 64, 0),
            (11, 2, Some(5), None, vec![0, 9], 8, 3),
        ] {
            let (b, kv_heads, heads) = (2, 2, 6);
            let t = offset + s - first_key;
            let q = Tensor::randn(0f32, 1.0, (b, heads, s, hd), &Device::Cpu).unwrap();
            // Keys and values as a strided view, as a cache narrowed to its last positions is.
            let whole = |seed: f32| {
                (Tensor::randn(0f32, 1.0, (b, kv_heads, t + 2, hd), &Device::Cpu).unwrap()
                    * seed as f64)
                    .unwrap()
                    .narrow(2, 2, t)
                    .unwrap()
            };
            let (k, v) = (whole(1.5), whole(1.0));
            assert!(!k.is_contiguous());
            let causal = Causal {
                offset,
                window,
                pads: &pads,
            };
            let masks: Vec<Tensor> = [
                attention_mask(offset, s, window, &Device::Cpu).unwrap(),
                padding_mask(offset, s, window, &pads, &Device::Cpu).unwrap(),
            ]
            .into_iter()
            .flatten()
            .collect();
            let scale = 1.0 / (hd as f64).sqrt();
            let fused = attention_up_to(&q, &k, &v, causal, &masks, scale, cap, usize::MAX);
            let general = attention_up_to(&q, &k, &v, causal, &masks, scale, cap, 0).unwrap();
            let fused = fused.unwrap();
            let diff = max_abs_diff(&fused, &general);
            assert!(
                diff < 2e-6,
                "offset {offset}, s {s}, window {window:?}, pads {pads:?}, hd {hd}: {diff}"
            );
        }
    }

    #[test]
    fn mask_is_causal_and_windowed() {
        let m = attention_mask(0, 4, Some(2), &Device::Cpu)
            .unwrap()
            .unwrap();
        let v: Vec<Vec<f32>> = m.to_vec2().unwrap();
        let visible: Vec<Vec<bool>> = v
            .iter()
            .map(|r| r.iter().map(|x| x.is_finite()).collect())
            .collect();
        assert_eq!(
            visible,
            vec![
                vec![true, false, false, false],
                vec![true, true, false, false],
                vec![false, true, true, false],
                vec![false, false, true, true],
            ]
        );
        // A single decode step sees every key from its window's start: no mask, short or long.
        for window in [Some(8), Some(2), None] {
            assert!(attention_mask(3, 1, window, &Device::Cpu)
                .unwrap()
                .is_none());
        }
        // A later chunk's mask starts at its first query's window: keys 4..8 for queries 5..8.
        let m = attention_mask(5, 3, Some(2), &Device::Cpu)
            .unwrap()
            .unwrap();
        let v: Vec<Vec<f32>> = m.to_vec2().unwrap();
        let visible: Vec<Vec<bool>> = v
            .iter()
            .map(|r| r.iter().map(|x| x.is_finite()).collect())
            .collect();
        assert_eq!(
            visible,
            vec![
                vec![true, true, false, false],
                vec![false, true, true, false],
                vec![false, false, true, true],
            ]
        );
        // A padded batch needs a padding mask even for one query: row 0's two padding columns.
        let m = padding_mask(3, 1, None, &[2, 0], &Device::Cpu)
            .unwrap()
            .unwrap();
        assert_eq!(m.dims(), &[2, 1, 1, 4]);
        let v: Vec<f32> = m.flatten_all().unwrap().to_vec1().unwrap();
        let hidden: Vec<bool> = v.iter().map(|&x| x == PADDING_BIAS).collect();
        assert_eq!(
            hidden,
            vec![true, true, false, false, false, false, false, false]
        );
        // Padding entirely before the window's first key needs no mask.
        assert!(padding_mask(9, 1, Some(3), &[2, 0], &Device::Cpu)
            .unwrap()
            .is_none());
    }

    #[test]
    fn padded_rotary_tables_give_each_row_its_own_positions() {
        let r = Rotary::new(8, 10000.0, &RopeScaling::None, false);
        let (cos, sin) = r.padded_tables(2, 3, &[0, 3], 0, &Device::Cpu).unwrap();
        assert_eq!(cos.dims(), &[2, 3, 4]);
        // Row 0 (no padding) runs positions 2..5, row 1 positions 0..2 from column 3 on.
        let (c0, s0) = r.tables(2, 3, &Device::Cpu).unwrap();
        let (c1, s1) = r.tables(0, 2, &Device::Cpu).unwrap();
        let row = |t: &Tensor, i: usize| -> Vec<Vec<f32>> { t.get(i).unwrap().to_vec2().unwrap() };
        assert_eq!(row(&cos, 0), c0.to_vec2::<f32>().unwrap());
        assert_eq!(row(&sin, 0), s0.to_vec2::<f32>().unwrap());
        assert_eq!(row(&cos, 1)[1..], c1.to_vec2::<f32>().unwrap()[..]);
        assert_eq!(row(&sin, 1)[1..], s1.to_vec2::<f32>().unwrap()[..]);
    }

    #[test]
    fn llama3_scaling_matches_hand_computed_frequencies() {
        // Llama 3.1 settings: factor 8, low 1, high 4, original context 8192, base 500000.
        let s = RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192,
        };
        let plain = Rotary::new(128, 500000.0, &RopeScaling::None, false);
        let scaled = Rotary::new(128, 500000.0, &s, false);
        let f = plain.inv_freq();
        let g = scaled.inv_freq();
        // High frequencies (wavelength < 8192/4 = 2048) are untouched.
        assert_eq!(f[0], g[0]);
        // The lowest frequency (wavelength ≫ 8192) is divided by 8.
        assert!((g[63] - f[63] / 8.0).abs() < 1e-12);
        // A middle frequency with wavelength in [2048, 8192] is interpolated.
        let i = (0..64)
            .find(|&i| {
                let w = 2.0 * std::f64::consts::PI / f[i] as f64;
                (2048.0..=8192.0).contains(&w)
            })
            .unwrap();
        let w = 2.0 * std::f64::consts::PI / f[i] as f64;
        let smooth = (8192.0 / w - 1.0) / 3.0;
        let expect = (1.0 - smooth) * f[i] as f64 / 8.0 + smooth * f[i] as f64;
        assert!((g[i] as f64 - expect).abs() < 1e-9 * expect.abs().max(1.0));
        assert!(g[i] < f[i] && g[i] > f[i] / 8.0);
    }

    #[test]
    fn yarn_matches_transformers() {
        // transformers 5.24.0 `_compute_yarn_parameters` for head_dim 64, base 1e6, factor 4,
        // original context 32768 (a Qwen2.5 long-context setting), float32 there.
        const HF: [f64; 32] = [
            1.0,
            0.6493816375732422,
            0.4216965138912201,
            0.2738419771194458,
            0.17782793939113617,
            0.11547820270061493,
            0.07498941570520401,
            0.04869675263762474,
            0.03162277862429619,
            0.02053525112569332,
            0.01333521492779255,
            0.00865964312106371,
            0.005154795479029417,
            0.0030431177001446486,
            0.0017785303061828017,
            0.001026617712341249,
            0.0005833333707414567,
            0.00032469083089381456,
            0.0001757068675942719,
            9.128064994001761e-05,
            4.4456985051510856e-05,
            2.8869548259535804e-05,
            1.8747356079984456e-05,
            1.2174188668723218e-05,
            7.905693564680405e-06,
            5.133812464919174e-06,
            3.3338035336782923e-06,
            2.1649109385180054e-06,
            1.405853367941745e-06,
            9.129353202297352e-07,
            5.928434347879374e-07,
            3.8498163235090033e-07,
        ];
        let r = Rotary::new(
            64,
            1e6,
            &RopeScaling::Yarn {
                factor: 4.0,
                original_max_position_embeddings: 32768,
                beta_fast: 32.0,
                beta_slow: 1.0,
                truncate: true,
                attention_factor: 0.1 * 4f64.ln() + 1.0,
            },
            false,
        );
        for (ours, theirs) in r.inv_freq().iter().zip(HF) {
            assert!(
                (*ours as f64 - theirs).abs() <= 2e-7 * theirs,
                "{ours} vs {theirs}"
            );
        }
        assert!((r.attention_factor as f64 - 1.138629436111989).abs() < 1e-7);
    }

    #[test]
    fn interleaved_and_half_rotations_agree_after_permutation() {
        // rope_i on rows permuted as llama.cpp does equals rope (halves) on the original rows.
        let hd = 8;
        let rot_i = Rotary::new(hd, 10000.0, &RopeScaling::None, true);
        let rot_h = Rotary::new(hd, 10000.0, &RopeScaling::None, false);
        let x: Vec<f32> = (0..hd * 3).map(|i| (i as f32 * 0.37).sin()).collect();
        let x = Tensor::from_vec(x, (1, 1, 3, hd), &Device::Cpu).unwrap();
        // permutation: interleaved position 2i <- half i, 2i+1 <- half i + hd/2
        let idx: Vec<u32> = (0..hd / 2)
            .flat_map(|i| [i as u32, (i + hd / 2) as u32])
            .collect();
        let idx = Tensor::new(idx.as_slice(), &Device::Cpu).unwrap();
        let xp = x.index_select(&idx, 3).unwrap();
        let (c, s) = rot_h.tables(5, 3, &Device::Cpu).unwrap();
        let yh = rot_h
            .apply(&x, &c, &s)
            .unwrap()
            .index_select(&idx, 3)
            .unwrap();
        let yi = rot_i.apply(&xp, &c, &s).unwrap();
        let diff = (yh - yi)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(diff < 1e-6, "{diff}");
    }
}
