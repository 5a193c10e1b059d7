//! Statistics of one next-token distribution, given its logits, computed in one or two passes
//! without materialising log-probabilities: Shannon and Rényi entropies (nats), the top-p
//! candidate-set size (and ids), and the top-k tokens.
//!
//! With `m = max z`, `e_i = exp(z_i − m)`, `S = Σ e_i`:
//! `H = ln S − Σ e_i (z_i − m) / S`, `H_α = (ln Σ e_i^α − α ln S) / (1 − α)`, `H_∞ = ln S`.
//! Exponentials use a vectorisable f32 Cephes-style `exp` (relative error ≈ 1e-7); sums are
//! accumulated per 64-element block in f32 and across blocks in f64. One sweep takes the
//! exponentials of every Rényi order, and skips the blocks where they all sit at `exp`'s clamp
//! (at the orders after Shannon's); masked logits (−∞, `f32::MIN`) add nothing to the entropy;
//! [`row_stats_multipass`] (one pass per statistic) is the reference it equals bit for bit.

use serde::{Deserialize, Serialize};

use super::extras::Extras;
use crate::error::{Error, Result};

/// Which statistics to compute for each distribution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatSpec {
    /// Rényi orders: any α ≥ 0, `f64::INFINITY` for min-entropy; α = 1 is Shannon.
    pub alphas: Vec<f64>,
    /// α = 0 counts the tokens whose probability is above this threshold: H₀ = ln #{p > t}.
    pub support_threshold: f64,
    /// Mass of the top-p candidate set, in (0, 1].
    pub top_p: f64,
    /// Also return the ids of the top-p set (ordered by probability, then id).
    pub top_p_ids: bool,
    /// Number of most likely tokens to report (0 for none).
    pub top_k: usize,
    /// Count, per position, the top-p candidates each block shares with the previous one (the
    /// paper's C2); needs the sets, which are dropped afterwards unless `top_p_ids` is set.
    #[serde(default)]
    pub top_p_overlap: bool,
    /// KL(final ‖ layer) at every layer: how far each layer's distribution is from the one the
    /// model outputs at that position (the last block's), in nats.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kl_to_final: bool,
    /// The token whose log-probability and rank every layer gives.
    #[serde(default, skip_serializing_if = "TargetToken::is_none")]
    pub target: TargetToken,
}

/// Which token's probability and rank a lens follows through the layers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetToken {
    /// None.
    #[default]
    None,
    /// The token that actually comes next: the next prompt token, or the generated one.
    Next,
    /// This token id at every position.
    Token(u32),
}

impl TargetToken {
    pub fn is_none(&self) -> bool {
        *self == TargetToken::None
    }

    /// Parses `next` or a token id.
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim() {
            "next" => Ok(TargetToken::Next),
            "none" => Ok(TargetToken::None),
            t => t.parse::<u32>().map(TargetToken::Token).map_err(|_| {
                Error::invalid(format!(
                    "cannot read target `{s}`: give `next` (the token that comes next) or a token id"
                ))
            }),
        }
    }
}

impl Default for StatSpec {
    fn default() -> Self {
        Self {
            alphas: Vec::new(),
            support_threshold: DEFAULT_SUPPORT_THRESHOLD,
            top_p: DEFAULT_TOP_P,
            top_p_ids: false,
            top_k: 5,
            top_p_overlap: false,
            kl_to_final: false,
            target: TargetToken::None,
        }
    }
}

/// The paper's top-p mass.
pub const DEFAULT_TOP_P: f64 = 0.6;
/// Default probability threshold of the α = 0 (support size) entropy: the authors' code counts
/// the tokens with p > 1e-20.
pub const DEFAULT_SUPPORT_THRESHOLD: f64 = 1e-20;

impl StatSpec {
    /// Whether rows must be measured by position groups (KL to the final distribution, or a
    /// target token).
    pub fn relates_rows(&self) -> bool {
        self.kl_to_final || self.target != TargetToken::None
    }

    /// Whether the lens must produce top-p id sets (asked for, or needed for the overlap).
    pub fn needs_top_p_ids(&self) -> bool {
        self.top_p_ids || self.top_p_overlap
    }

    /// Checks the parameters (α ≥ 0, p in (0, 1], threshold in [0, 1)).
    pub fn validate(&self) -> Result<()> {
        for &a in &self.alphas {
            if a.is_nan() || a < 0.0 {
                return Err(Error::invalid(format!(
                    "Rényi order α must be ≥ 0 (or inf), got {a}"
                )));
            }
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(Error::invalid(format!(
                "top-p mass p must be in (0, 1], got {}",
                self.top_p
            )));
        }
        if !(0.0..1.0).contains(&self.support_threshold) {
            return Err(Error::invalid(format!(
                "support threshold must be in [0, 1), got {}",
                self.support_threshold
            )));
        }
        Ok(())
    }
}

/// Formats a Rényi order as a JSON key: `0.5`, `2`, `inf`.
pub fn alpha_key(alpha: f64) -> String {
    if alpha.is_infinite() {
        "inf".to_string()
    } else {
        format!("{alpha}")
    }
}

/// Parses `0.5`, `2`, `inf` (also `infinity`, `∞`).
pub fn parse_alpha(s: &str) -> Result<f64> {
    let a = match s.trim().to_ascii_lowercase().as_str() {
        "inf" | "infinity" | "∞" => f64::INFINITY,
        t => t
            .parse::<f64>()
            .map_err(|_| Error::invalid(format!("cannot read Rényi order `{s}`")))?,
    };
    if a.is_nan() || a < 0.0 {
        return Err(Error::invalid(format!(
            "Rényi order α must be ≥ 0 (or inf), got {s}"
        )));
    }
    Ok(a)
}

/// Statistics of one distribution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DistStats {
    /// Shannon entropy in nats.
    pub shannon: f64,
    /// Rényi entropies, in the order of [`StatSpec::alphas`].
    pub renyi: Vec<f64>,
    /// Size of the smallest set of tokens whose probabilities sum to ≥ p.
    pub top_p_count: u32,
    /// That set's ids, when asked for.
    pub top_p_ids: Option<Vec<u32>>,
    /// The k most likely tokens with their probabilities (ties: smaller id first).
    pub top_k: Vec<(u32, f64)>,
    /// The most likely token (smaller id among equals), whatever `top_k` is: the prediction
    /// depth of a profile follows it.
    #[serde(default)]
    pub top1: u32,
    /// KL to the final distribution and the target's log-probability and rank, when asked.
    #[serde(flatten)]
    pub extras: Extras,
}

/// Reusable buffers for [`row_stats`].
#[derive(Default)]
pub struct Scratch {
    e: Vec<f32>,
    hist_count: Vec<u32>,
    hist_sum: Vec<f64>,
}

const BLOCK: usize = 64;
const LANES: usize = 8;

/// Bucket of a non-negative f32 by its top 16 bits (exponent + 7 mantissa bits): monotone in value.
#[inline(always)]
fn bucket(x: f32) -> usize {
    (x.to_bits() >> 16) as usize
}
/// Number of buckets for values in [0, 1].
const N_BUCKETS: usize = (0x3F80_0000u32 >> 16) as usize + 1;

/// At or below this, [`exp_f32`] returns `exp_f32(EXP_LOWEST)` (its result stays a normal f32).
const EXP_LOWEST: f32 = -87.0;

#[inline(always)]
fn exp_f32(x: f32) -> f32 {
    // Cephes expf: e^x = 2^n · e^r with n = round(x·log2 e), |r| ≤ ln2/2.
    const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23: adding it rounds to an integer in the low bits
    let x = x.clamp(EXP_LOWEST, 88.0);
    let t = x * std::f32::consts::LOG2_E + MAGIC;
    let n_int = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let n = t - MAGIC;
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    y * f32::from_bits(((n_int + 127) as u32) << 23)
}

/// The sums of one exponential pass: `(Σ e, Σ e·(z − m))` with `e = exp(scale·(z − m))`.
type PassSums = (f64, f64);

/// Below this, `z − m` is a mask (−∞, `f32::MIN`, −1e30), not a logit.
const MASKED: f32 = -1e20;

/// A logit's term of `Σ e·(z − m)`: `e·d`, and 0 for a masked one (probability 0 contributes
/// nothing to the entropy; `e` there is the clamp's e^−87, which times −∞ would make it +∞ and
/// times `f32::MIN` add 5.6 nats). Logits of real models never come near −1e20.
#[inline(always)]
fn t_term(e: f32, d: f32) -> f32 {
    if d < MASKED {
        0.0
    } else {
        e * d
    }
}

/// One block (≤ 64 logits) of an exponential pass at `scale`: writes its `e_i` to `tmp` and adds
/// the block's sums to `sums` (the second only `with_t`). `clamped` is `Some(Σ e)` of a full block
/// whose every `scale·(z − m)` is at or below [`EXP_LOWEST`]: its `e_i` are all `exp_f32(EXP_LOWEST)`
/// and need no exponential.
///
/// A full block is exponentiated first (a loop the compiler vectorizes to the widest registers the
/// caller enables), then summed into 8 lanes in index order, so every instruction set gives the
/// same bits.
#[inline(always)]
fn exp_block(
    block: &[f32],
    m: f32,
    scale: f32,
    tmp: &mut [f32; BLOCK],
    sums: &mut PassSums,
    with_t: bool,
    clamped: Option<f64>,
) {
    let mut acc_s = [0f32; LANES];
    let mut acc_t = [0f32; LANES];
    if block.len() == BLOCK {
        if let Some(block_s) = clamped {
            #[cfg(test)]
            tests::CLAMPED_BLOCKS.with(|c| c.set(c.get() + 1));
            tmp.fill(exp_f32(EXP_LOWEST));
            sums.0 += block_s;
        } else {
            for (e, &zi) in tmp.iter_mut().zip(block) {
                *e = exp_f32(scale * (zi - m));
            }
            for ce in tmp.chunks_exact(LANES) {
                for l in 0..LANES {
                    acc_s[l] += ce[l];
                }
            }
            sums.0 += acc_s.iter().map(|&x| x as f64).sum::<f64>();
        }
        if with_t {
            for (ce, cz) in tmp.chunks_exact(LANES).zip(block.chunks_exact(LANES)) {
                for l in 0..LANES {
                    acc_t[l] += t_term(ce[l], cz[l] - m);
                }
            }
            sums.1 += acc_t.iter().map(|&x| x as f64).sum::<f64>();
        }
    } else {
        for (i, &zi) in block.iter().enumerate() {
            let d = zi - m;
            let e = exp_f32(scale * d);
            tmp[i] = e;
            acc_s[i % LANES] += e;
            acc_t[i % LANES] += t_term(e, d);
        }
        sums.0 += acc_s.iter().map(|&x| x as f64).sum::<f64>();
        if with_t {
            sums.1 += acc_t.iter().map(|&x| x as f64).sum::<f64>();
        }
    }
}

/// Largest value of a block and whether it holds a NaN.
#[inline(always)]
fn block_max(block: &[f32]) -> (f32, bool) {
    let mut max = [f32::NEG_INFINITY; LANES];
    let mut nan = [0u32; LANES];
    for c in block.chunks_exact(LANES) {
        for l in 0..LANES {
            max[l] = if c[l] > max[l] { c[l] } else { max[l] };
            nan[l] |= u32::from(c[l].is_nan());
        }
    }
    let m = max
        .iter()
        .fold(f32::NEG_INFINITY, |a, &v| if v > a { v } else { a });
    (m, nan.iter().any(|&x| x != 0))
}

/// Exponential passes at several scales in one sweep over `z` (`m` is the largest logit):
/// `sums[k].0` gets `Σ e` at `scales[k]`, `sums[0].1` also `Σ e·(z − m)` (the others 0), and
/// `out` (when given) the `e_i` of the first scale.
///
/// Each scale's blocks are summed in the same order as a pass of its own, so the bits are those
/// of separate passes. At the scales after the first, a full block whose largest logit is far
/// enough below `m` for every exponential to sit at the clamp (the tail of a peaked distribution at
/// α = 5, say) adds the clamped block's sum, computed once, without taking 64 exponentials.
#[inline(always)]
fn exp_passes_generic(
    z: &[f32],
    m: f32,
    scales: &[f32],
    mut out: Option<&mut [f32]>,
    sums: &mut [PassSums],
) {
    sums.fill((0.0, 0.0));
    let mut tmp = [0f32; BLOCK];
    // Σ e of a full block at the clamp, by the same arithmetic as any other block.
    let clamped_block_s = {
        let mut s = (0.0, 0.0);
        exp_block(
            &[f32::NEG_INFINITY; BLOCK],
            0.0,
            1.0,
            &mut tmp,
            &mut s,
            false,
            None,
        );
        s.0
    };
    let (first, rest) = (scales[0], &scales[1..]);
    for (bi, block) in z.chunks(BLOCK).enumerate() {
        // The first scale as a pass of its own: Shannon's order, whose blocks rarely clamp.
        exp_block(block, m, first, &mut tmp, &mut sums[0], true, None);
        if let Some(out) = out.as_deref_mut() {
            out[bi * BLOCK..bi * BLOCK + block.len()].copy_from_slice(&tmp[..block.len()]);
        }
        if rest.is_empty() {
            continue;
        }
        let (block_top, nan) = if block.len() == BLOCK {
            block_max(block)
        } else {
            (f32::NAN, true)
        };
        for (&scale, sum) in rest.iter().zip(&mut sums[1..]) {
            // scale·(z − m) grows with z (rounding keeps order): the block's largest decides.
            let clamped =
                (!nan && scale * (block_top - m) <= EXP_LOWEST).then_some(clamped_block_s);
            exp_block(block, m, scale, &mut tmp, sum, false, clamped);
        }
    }
}

/// Writes `e_i = exp(scale·(z_i − m))` into `out` (when given) and returns `(Σ e, Σ e·(z − m))`:
/// every exponential taken, as [`row_stats_multipass`] and the lens trainer do.
#[inline(always)]
fn exp_pass_generic(z: &[f32], m: f32, scale: f32, mut out: Option<&mut [f32]>) -> (f64, f64) {
    let mut sums = (0.0, 0.0);
    let mut tmp = [0f32; BLOCK];
    for (bi, block) in z.chunks(BLOCK).enumerate() {
        exp_block(block, m, scale, &mut tmp, &mut sums, true, None);
        if let Some(out) = out.as_deref_mut() {
            out[bi * BLOCK..bi * BLOCK + block.len()].copy_from_slice(&tmp[..block.len()]);
        }
    }
    sums
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_pass_avx2(z: &[f32], m: f32, scale: f32, out: Option<&mut [f32]>) -> (f64, f64) {
    exp_pass_generic(z, m, scale, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx2,fma")]
unsafe fn exp_pass_avx512(z: &[f32], m: f32, scale: f32, out: Option<&mut [f32]>) -> (f64, f64) {
    exp_pass_generic(z, m, scale, out)
}

pub(crate) fn exp_pass(z: &[f32], m: f32, scale: f32, out: Option<&mut [f32]>) -> (f64, f64) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { exp_pass_avx512(z, m, scale, out) };
        }
        if has_avx2() {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { exp_pass_avx2(z, m, scale, out) };
        }
    }
    exp_pass_generic(z, m, scale, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_passes_avx2(
    z: &[f32],
    m: f32,
    scales: &[f32],
    out: Option<&mut [f32]>,
    sums: &mut [PassSums],
) {
    exp_passes_generic(z, m, scales, out, sums)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx2,fma")]
unsafe fn exp_passes_avx512(
    z: &[f32],
    m: f32,
    scales: &[f32],
    out: Option<&mut [f32]>,
    sums: &mut [PassSums],
) {
    exp_passes_generic(z, m, scales, out, sums)
}

/// [`exp_pass`] at every scale of `scales` in one sweep (the same bits as one pass per scale).
fn exp_passes(z: &[f32], m: f32, scales: &[f32], out: Option<&mut [f32]>, sums: &mut [PassSums]) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { exp_passes_avx512(z, m, scales, out, sums) };
        }
        if has_avx2() {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { exp_passes_avx2(z, m, scales, out, sums) };
        }
    }
    exp_passes_generic(z, m, scales, out, sums)
}

#[cfg(target_arch = "x86_64")]
fn has_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && has_avx2()
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// Index and value of the largest logit (smallest index among equals). NaN logits are an error.
fn argmax(z: &[f32]) -> Result<(usize, f32)> {
    let (max, any_nan) = max_and_nan(z);
    if any_nan {
        let i = z.iter().position(|v| v.is_nan()).unwrap_or(0);
        return Err(nan_logit(i));
    }
    if !max.is_finite() {
        return Err(no_distribution());
    }
    // The first logit equal to the largest: the one a left-to-right scan keeps (and, of −0 and
    // +0, the one it meets first).
    let i = first_equal(z, max);
    let m = *z.get(i).ok_or_else(no_distribution)?;
    Ok((i, m))
}

/// [`argmax`] as one scalar scan: the reference the vectorized form is tested against.
fn argmax_scan(z: &[f32]) -> Result<(usize, f32)> {
    let mut best = (0usize, f32::NEG_INFINITY);
    for (i, &v) in z.iter().enumerate() {
        if v > best.1 {
            best = (i, v);
        } else if v.is_nan() {
            return Err(nan_logit(i));
        }
    }
    if !best.1.is_finite() {
        return Err(no_distribution());
    }
    Ok(best)
}

fn nan_logit(i: usize) -> Error {
    Error::Data(format!(
        "logit {i} is NaN: the model produced non-finite activations"
    ))
}

fn no_distribution() -> Error {
    Error::Data("all logits are -inf or the row is empty: no distribution to measure".into())
}

/// Largest value of `z` ignoring NaNs (−∞ when empty), and whether it holds a NaN.
#[inline(always)]
fn max_and_nan_generic(z: &[f32]) -> (f32, bool) {
    const W: usize = 16;
    let mut max = [f32::NEG_INFINITY; W];
    let mut nan = [0u32; W];
    let chunks = z.chunks_exact(W);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..W {
            max[l] = if c[l] > max[l] { c[l] } else { max[l] };
            nan[l] |= u32::from(c[l].is_nan());
        }
    }
    let mut m = f32::NEG_INFINITY;
    let mut any_nan = nan.iter().any(|&x| x != 0);
    for &v in max.iter().chain(rest) {
        m = if v > m { v } else { m };
        any_nan |= v.is_nan();
    }
    (m, any_nan)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx2,fma")]
unsafe fn max_and_nan_avx512(z: &[f32]) -> (f32, bool) {
    max_and_nan_generic(z)
}

fn max_and_nan(z: &[f32]) -> (f32, bool) {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: the CPU supports the features the function was compiled for.
        return unsafe { max_and_nan_avx512(z) };
    }
    max_and_nan_generic(z)
}

/// Index of the first element equal to `v` (`z.len()` if none): blocks are tested whole (a
/// branch-free comparison), then the block that holds it is searched.
fn first_equal(z: &[f32], v: f32) -> usize {
    for (bi, block) in z.chunks(BLOCK).enumerate() {
        if block.iter().fold(false, |hit, &x| hit | (x == v)) {
            return bi * BLOCK + block.iter().position(|&x| x == v).unwrap_or(0);
        }
    }
    z.len()
}

/// The `k` largest logits, descending, smaller ids first among equals.
fn top_k(z: &[f32], k: usize) -> Vec<(u32, f32)> {
    // More than the vocabulary is the whole vocabulary (and must not reserve k slots).
    let k = k.min(z.len());
    if k == 0 {
        return Vec::new();
    }
    let by_value_then_id = |a: &(u32, f32), b: &(u32, f32)| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.0.cmp(&b.0))
    };
    if k > 64 {
        // Many tokens: select, then sort (the insertion below is O(vocabulary × k)).
        let mut all: Vec<(u32, f32)> = z.iter().enumerate().map(|(i, &v)| (i as u32, v)).collect();
        if k < all.len() {
            all.select_nth_unstable_by(k - 1, by_value_then_id);
            all.truncate(k);
        }
        all.sort_unstable_by(by_value_then_id);
        return all;
    }
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    let mut floor = f32::NEG_INFINITY;
    for (bi, block) in z.chunks(BLOCK).enumerate() {
        // Most blocks hold nothing above the k-th largest so far: one branch-free test skips them.
        if best.len() == k && block.iter().fold(true, |below, &v| below & (v <= floor)) {
            continue;
        }
        for (j, &v) in block.iter().enumerate() {
            let i = bi * BLOCK + j;
            if best.len() == k && v <= floor {
                continue;
            }
            // Insert after every element ≥ v: earlier (smaller) ids win ties.
            let pos = best.iter().position(|&(_, b)| b < v).unwrap_or(best.len());
            best.insert(pos, (i as u32, v));
            if best.len() > k {
                best.pop();
            }
            if best.len() == k {
                floor = best[k - 1].1;
            }
        }
    }
    best
}

/// [`top_k`] (k ≤ 64) as one scalar scan: the reference of [`row_stats_multipass`].
fn top_k_scan(z: &[f32], k: usize) -> Vec<(u32, f32)> {
    let k = k.min(z.len());
    if k == 0 || k > 64 {
        return top_k(z, k);
    }
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    for (i, &v) in z.iter().enumerate() {
        if best.len() == k && v <= best[k - 1].1 {
            continue;
        }
        let pos = best.iter().position(|&(_, b)| b < v).unwrap_or(best.len());
        best.insert(pos, (i as u32, v));
        best.truncate(k);
    }
    best
}

/// Fills the histogram of `e` over [`bucket`]s: counts and sums, one scatter per value.
fn histogram(e: &[f32], count: &mut Vec<u32>, sum: &mut Vec<f64>) {
    count.clear();
    count.resize(N_BUCKETS, 0);
    sum.clear();
    sum.resize(N_BUCKETS, 0.0);
    for &x in e {
        let b = bucket(x);
        count[b] += 1;
        sum[b] += x as f64;
    }
}

/// Size (and optionally ids) of the smallest set of most likely tokens with mass ≥ p, from the
/// unnormalised weights `e` (max 1) and their histogram (`count`, `sum` per [`bucket`]): the
/// bucket where the cumulative mass crosses p is found, then that bucket alone is sorted.
fn top_p_set(
    e: &[f32],
    p: f64,
    want_ids: bool,
    count: &[u32],
    sum: &[f64],
) -> (u32, Option<Vec<u32>>) {
    let (scratch_count, scratch_sum) = (count, sum);
    let total: f64 = scratch_sum.iter().sum();
    let target = p * total;
    let mut cum = 0f64;
    let mut above = 0u32;
    let mut crossing = None;
    for b in (0..N_BUCKETS).rev() {
        if scratch_count[b] == 0 {
            continue;
        }
        if cum + scratch_sum[b] >= target {
            crossing = Some(b);
            break;
        }
        cum += scratch_sum[b];
        above += scratch_count[b];
    }
    let Some(b) = crossing else {
        // Rounding left the whole mass a hair below p·total (p = 1): every token is needed.
        let n = e.iter().filter(|&&x| x > 0.0).count() as u32;
        let ids = want_ids.then(|| sorted_ids(e, |x| x > 0.0));
        return (n, ids);
    };
    let mut inside: Vec<(f32, u32)> = e
        .iter()
        .enumerate()
        .filter(|(_, &x)| bucket(x) == b)
        .map(|(i, &x)| (x, i as u32))
        .collect();
    inside.sort_by(|a, c| c.0.total_cmp(&a.0).then(a.1.cmp(&c.1)));
    let mut needed = 0u32;
    for &(x, _) in &inside {
        needed += 1;
        cum += x as f64;
        if cum >= target {
            break;
        }
    }
    let ids = want_ids.then(|| {
        let mut ids: Vec<(f32, u32)> = e
            .iter()
            .enumerate()
            .filter(|(_, &x)| bucket(x) > b)
            .map(|(i, &x)| (x, i as u32))
            .collect();
        ids.extend_from_slice(&inside[..needed as usize]);
        ids.sort_by(|a, c| c.0.total_cmp(&a.0).then(a.1.cmp(&c.1)));
        ids.into_iter().map(|(_, i)| i).collect()
    });
    (above + needed, ids)
}

fn sorted_ids(e: &[f32], keep: impl Fn(f32) -> bool) -> Vec<u32> {
    let mut ids: Vec<(f32, u32)> = e
        .iter()
        .enumerate()
        .filter(|(_, &x)| keep(x))
        .map(|(i, &x)| (x, i as u32))
        .collect();
    ids.sort_by(|a, c| c.0.total_cmp(&a.0).then(a.1.cmp(&c.1)));
    ids.into_iter().map(|(_, i)| i).collect()
}

/// Statistics of the distribution `softmax(z)`.
///
/// One sweep over the logits finds the largest, a second takes the exponentials of every Rényi
/// order at once (and keeps `e_i = exp(z_i − m)` for the top-p set); the bits are those of
/// [`row_stats_multipass`], which takes one pass per statistic.
pub fn row_stats(z: &[f32], spec: &StatSpec, scratch: &mut Scratch) -> Result<DistStats> {
    let (imax, m) = argmax(z)?;
    scratch.e.resize(z.len(), 0.0);
    // Scale 1 first (its exponentials are kept), then each order that needs a pass of its own.
    let mut scales = vec![1.0f32];
    let mut pass_of = Vec::with_capacity(spec.alphas.len());
    for &a in &spec.alphas {
        if renyi_needs_pass(a) {
            pass_of.push(Some(scales.len()));
            scales.push(a as f32);
        } else {
            pass_of.push(None);
        }
    }
    let mut sums = vec![(0.0, 0.0); scales.len()];
    exp_passes(z, m, &scales, Some(&mut scratch.e), &mut sums);
    let (s, t) = sums[0];
    let renyi_sum = |k: usize| pass_of[k].map(|j| sums[j].0);
    let top = top_k(z, spec.top_k);
    finish_row(z, spec, scratch, imax, m, s, t, renyi_sum, top)
}

/// Whether the Rényi entropy of order `a` needs an exponential pass at scale `a` (the others are
/// Shannon, min-entropy, the support count, or a closed form beyond f32).
fn renyi_needs_pass(a: f64) -> bool {
    a != 1.0 && !a.is_infinite() && a != 0.0 && (a as f32).is_finite()
}

/// [`row_stats`] with one pass over the logits per statistic (a scalar scan for the largest, an
/// exponential pass per Rényi order, a scalar scan for the top k): the straightforward form, kept as the reference the fused
/// one is tested against bit for bit, and as the baseline of `cargo bench --bench row_stats`.
#[doc(hidden)]
pub fn row_stats_multipass(z: &[f32], spec: &StatSpec, scratch: &mut Scratch) -> Result<DistStats> {
    let (imax, m) = argmax_scan(z)?;
    scratch.e.resize(z.len(), 0.0);
    let (s, t) = exp_pass(z, m, 1.0, Some(&mut scratch.e));
    let renyi_sum = |k: usize| {
        let a = spec.alphas[k];
        renyi_needs_pass(a).then(|| exp_pass(z, m, a as f32, None).0)
    };
    let top = top_k_scan(z, spec.top_k);
    finish_row(z, spec, scratch, imax, m, s, t, renyi_sum, top)
}

/// The statistics of a row from its largest logit `(imax, m)`, the sums `s = Σ e`,
/// `t = Σ e·(z − m)`, the exponentials in `scratch.e`, `renyi_sum(k)`: `Σ e^α` for the k-th
/// order when it needs a pass, and the top k logits.
#[allow(clippy::too_many_arguments)]
fn finish_row(
    z: &[f32],
    spec: &StatSpec,
    scratch: &mut Scratch,
    imax: usize,
    m: f32,
    s: f64,
    t: f64,
    renyi_sum: impl Fn(usize) -> Option<f64>,
    top: Vec<(u32, f32)>,
) -> Result<DistStats> {
    let ln_s = s.ln();
    let shannon = (ln_s - t / s).max(0.0);
    let mut renyi = Vec::with_capacity(spec.alphas.len());
    for (k, &a) in spec.alphas.iter().enumerate() {
        let h = if a == 1.0 {
            shannon
        } else if a.is_infinite() {
            ln_s
        } else if a == 0.0 {
            let cut = (spec.support_threshold * s) as f32;
            let n = scratch.e.iter().filter(|&&x| x > cut).count();
            (n.max(1) as f64).ln()
        } else if let Some(r) = renyi_sum(k) {
            ((r.ln() - a * ln_s) / (1.0 - a)).max(0.0)
        } else {
            // α beyond f32: Σ p_i^α = S^-α · #{z_i = m} to double precision, written so that
            // nothing overflows; it tends to H_∞ = ln S.
            let ties = z.iter().filter(|&&v| v == m).count().max(1) as f64;
            (ln_s * (a / (a - 1.0)) - ties.ln() / (a - 1.0)).max(0.0)
        };
        renyi.push(h);
    }
    let (top_p_count, top_p_ids) = if 1.0 / s >= spec.top_p {
        // The most likely token alone carries mass ≥ p.
        (1, spec.needs_top_p_ids().then(|| vec![imax as u32]))
    } else {
        let Scratch {
            e,
            hist_count,
            hist_sum,
        } = scratch;
        histogram(e, hist_count, hist_sum);
        top_p_set(e, spec.top_p, spec.needs_top_p_ids(), hist_count, hist_sum)
    };
    let top_k = top
        .into_iter()
        .map(|(i, v)| (i, ((v - m) as f64).exp() / s))
        .collect();
    Ok(DistStats {
        shannon,
        renyi,
        top_p_count,
        top_p_ids,
        top_k,
        top1: imax as u32,
        extras: Extras::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Full blocks the exponential sweep has taken at the clamp on this thread (each test
        /// has its own), without exponentials.
        pub(super) static CLAMPED_BLOCKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn clamped_blocks() -> usize {
        CLAMPED_BLOCKS.with(|c| c.get())
    }

    /// Straightforward f64 reference.
    fn reference(z: &[f32], alpha: f64) -> f64 {
        let m = z.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
        let lse = m + z.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
        let logp: Vec<f64> = z.iter().map(|&v| v as f64 - lse).collect();
        if alpha == 1.0 {
            -logp.iter().map(|&l| l.exp() * l).sum::<f64>()
        } else if alpha.is_infinite() {
            -logp.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
        } else {
            let mx = logp.iter().cloned().fold(f64::NEG_INFINITY, f64::max) * alpha;
            (mx + logp
                .iter()
                .map(|&l| (alpha * l - mx).exp())
                .sum::<f64>()
                .ln())
                / (1.0 - alpha)
        }
    }

    fn logits(n: usize, seed: u64, spread: f32) -> Vec<f32> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 33) as f32 / (1u64 << 31) as f32 - 0.5) * spread
            })
            .collect()
    }

    /// Logits about `depth` below one spike (token n/3, logit 0), as in a confident layer's tail.
    fn peaked(n: usize, seed: u64, depth: f32) -> Vec<f32> {
        let mut z: Vec<f32> = logits(n, seed, 4.0).iter().map(|v| v - depth).collect();
        z[n / 3] = 0.0;
        let clamped_blocks = z
            .chunks_exact(BLOCK)
            .filter(|b| b.iter().all(|&v| 5.0 * v <= EXP_LOWEST))
            .count();
        assert!(
            clamped_blocks * BLOCK * 2 > n,
            "the row exercises the clamped blocks"
        );
        z
    }

    #[test]
    fn fast_exp_is_accurate() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x < 5.0 {
            let rel = ((exp_f32(x) as f64) - (x as f64).exp()).abs() / (x as f64).exp();
            worst = worst.max(rel);
            x += 0.0137;
        }
        assert!(worst < 3e-7, "{worst}");
        assert_eq!(exp_f32(0.0), 1.0);
        assert!(exp_f32(-1000.0) < 1e-37);
    }

    /// The exponential pass as it was written before its 16-lane form: the same bits are required.
    fn exp_pass_before(z: &[f32], m: f32, scale: f32) -> (f64, f64) {
        let (mut s, mut t) = (0f64, 0f64);
        for block in z.chunks(BLOCK) {
            let mut acc_s = [0f32; LANES];
            let mut acc_t = [0f32; LANES];
            for (i, &zi) in block.iter().enumerate() {
                let d = zi - m;
                let e = exp_f32(scale * d);
                acc_s[i % LANES] += e;
                // Masked logits: 0 (−∞ made the sum −∞ as first written).
                acc_t[i % LANES] += if d < MASKED { 0.0 } else { e * d };
            }
            s += acc_s.iter().map(|&x| x as f64).sum::<f64>();
            t += acc_t.iter().map(|&x| x as f64).sum::<f64>();
        }
        (s, t)
    }

    /// The rows the exponential passes are checked on: spread, peaked (whole blocks at the clamp
    /// for α = 5, and for α = 1 at depth 100), with −∞ logits inside full and partial blocks.
    fn pass_rows() -> Vec<Vec<f32>> {
        let mut rows = vec![
            logits(49_152 + 37, 1, 8.0),
            logits(1000, 2, 8.0),
            logits(63, 3, 8.0),
            peaked(49_152, 4, 100.0),
            peaked(4096 + 5, 5, 30.0),
        ];
        for z in &mut rows {
            let n = z.len();
            z[n / 2] = f32::NEG_INFINITY;
            z[n - 1] = f32::NEG_INFINITY;
            if n > 704 {
                z[640..704].fill(f32::NEG_INFINITY); // a whole block of them
                z[700] = f32::MIN; // another mask
            }
        }
        rows
    }

    /// Bits of a pass's sums and exponentials.
    fn bits(sums: (f64, f64), e: &[f32]) -> (u64, u64, Vec<u32>) {
        let e = e.iter().map(|x| x.to_bits()).collect();
        (sums.0.to_bits(), sums.1.to_bits(), e)
    }

    #[test]
    fn exp_pass_gives_the_same_bits_on_every_instruction_set() {
        let clamped_before = clamped_blocks();
        for z in pass_rows() {
            let n = z.len();
            let m = z.iter().copied().fold(f32::MIN, f32::max);
            for scale in [1.0f32, 0.5, 5.0] {
                let before = exp_pass_before(&z, m, scale);
                let mut e = vec![0f32; n];
                let generic = bits(exp_pass_generic(&z, m, scale, Some(&mut e)), &e);
                assert_eq!(
                    (generic.0, generic.1),
                    (before.0.to_bits(), before.1.to_bits())
                );
                assert!(before.1.is_finite(), "−∞ logits leave Σ e·(z − m) finite");
                let mut e = vec![0f32; n];
                let best = bits(exp_pass(&z, m, scale, Some(&mut e)), &e);
                assert_eq!(best, generic, "n {n} scale {scale}");
                // The sweep, alone and with a second scale, through each instruction set.
                type Sweep = unsafe fn(&[f32], f32, &[f32], Option<&mut [f32]>, &mut [PassSums]);
                let mut sweeps: Vec<(&str, Sweep)> =
                    vec![("dispatch", |z, m, sc, o, s| exp_passes(z, m, sc, o, s))];
                sweeps.push(("generic", |z, m, sc, o, s| {
                    exp_passes_generic(z, m, sc, o, s)
                }));
                #[cfg(target_arch = "x86_64")]
                if has_avx2() {
                    sweeps.push(("avx2", exp_passes_avx2));
                }
                #[cfg(target_arch = "x86_64")]
                if has_avx512() {
                    sweeps.push(("avx512", exp_passes_avx512));
                }
                for (name, sweep) in sweeps {
                    let mut alone = [(0.0, 0.0)];
                    let mut e = vec![0f32; n];
                    // SAFETY: each variant is listed only where the CPU has its features.
                    unsafe { sweep(&z, m, &[scale], Some(&mut e), &mut alone) };
                    assert_eq!(bits(alone[0], &e), generic, "{name}: n {n} scale {scale}");
                    let mut sums = [(0.0, 0.0); 2];
                    let mut e = vec![0f32; n];
                    // SAFETY: as above.
                    unsafe { sweep(&z, m, &[scale, 1.0], Some(&mut e), &mut sums) };
                    assert_eq!(bits(sums[0], &e), generic, "{name}: n {n} scale {scale}");
                    assert_eq!(
                        sums[1].0.to_bits(),
                        exp_pass_before(&z, m, 1.0).0.to_bits(),
                        "{name}"
                    );
                }
                #[cfg(target_arch = "x86_64")]
                if has_avx2() {
                    let mut e = vec![0f32; n];
                    // SAFETY: the CPU supports the features checked just above.
                    let avx2 = unsafe { exp_pass_avx2(&z, m, scale, Some(&mut e)) };
                    assert_eq!(bits(avx2, &e), generic);
                }
            }
        }
        assert!(
            clamped_blocks() > clamped_before + 1000,
            "the rows take the clamped-block path"
        );
    }

    #[test]
    fn the_clamp_test_is_exact_at_its_threshold() {
        // Blocks whose top sits at the last f32 with 5·top ≤ −87 and at the next one above.
        let mut top = -17.0f32;
        while 5.0 * top > EXP_LOWEST {
            top = f32::from_bits(top.to_bits() + 1); // towards −∞
        }
        let above = f32::from_bits(top.to_bits() - 1);
        assert!(5.0 * top <= EXP_LOWEST && 5.0 * above > EXP_LOWEST);
        for t in [top, above] {
            let mut z: Vec<f32> = logits(BLOCK, 31, 2.0).iter().map(|v| v - 40.0).collect();
            z[17] = t;
            // m = 0 without a logit at 0, so that the block's sum is not rounded away.
            let before = exp_pass_before(&z, 0.0, 5.0);
            let mut sums = [(0.0, 0.0); 2];
            let clamped_before = clamped_blocks();
            exp_passes(&z, 0.0, &[1.0, 5.0], None, &mut sums);
            assert_eq!(sums[1].0.to_bits(), before.0.to_bits(), "top {t}");
            assert_eq!(
                clamped_blocks() > clamped_before,
                t == top,
                "the clamp is taken exactly at 5·top ≤ −87 (top {t})"
            );
        }
    }

    /// Every field, to the bit.
    fn same_bits(a: &DistStats, b: &DistStats) -> bool {
        a.shannon.to_bits() == b.shannon.to_bits()
            && a.renyi.len() == b.renyi.len()
            && a.renyi
                .iter()
                .zip(&b.renyi)
                .all(|(x, y)| x.to_bits() == y.to_bits())
            && a.top_p_count == b.top_p_count
            && a.top_p_ids == b.top_p_ids
            && a.top_k.len() == b.top_k.len()
            && a.top_k
                .iter()
                .zip(&b.top_k)
                .all(|(x, y)| x.0 == y.0 && x.1.to_bits() == y.1.to_bits())
    }

    #[test]
    fn fused_row_stats_give_the_bits_of_one_pass_per_statistic() {
        let spec = StatSpec {
            alphas: vec![0.5, 1.0, 5.0, 0.0, f64::INFINITY, 2.0, 1e60],
            top_p_ids: true,
            top_k: 7,
            ..Default::default()
        };
        let mut rows: Vec<Vec<f32>> = Vec::new();
        for (n, spread) in [
            (262_144, 12.0),
            (49_152 + 37, 30.0),
            (1000, 2.0),
            (63, 8.0),
            (1, 1.0),
        ] {
            rows.push(logits(n, n as u64 + 7, spread));
        }
        rows.push(peaked(262_144, 3, 30.0));
        rows.push(peaked(49_152 + 17, 5, 100.0));
        // Ties for the largest (−0 before +0, +0 before −0), −∞ entries, a spike in the tail.
        let mut ties = logits(5000, 9, 4.0);
        ties[100] = 10.0;
        ties[4000] = 10.0;
        rows.push(ties);
        rows.push(vec![-0.0, 0.0, -1.0, f32::NEG_INFINITY]);
        rows.push(vec![0.0, -0.0, f32::NEG_INFINITY, -3.0]);
        // The same ties in different lanes and blocks of a longer row.
        for (first, second) in [(-0.0f32, 0.0f32), (0.0, -0.0)] {
            let mut z = vec![-1.0f32; 300];
            z[70] = first;
            z[200] = second;
            assert_eq!(argmax(&z).unwrap().1.to_bits(), first.to_bits());
            rows.push(z);
        }
        let mut tail = logits(4099, 11, 6.0);
        tail[4098] = 50.0;
        rows.push(tail);
        // Exponentials down to the clamp at −87.
        rows.push(logits(20_000, 13, 180.0));
        let (mut a, mut b) = (Scratch::default(), Scratch::default());
        for p in [0.6, 0.999, 1.0] {
            let spec = StatSpec {
                top_p: p,
                ..spec.clone()
            };
            for (r, z) in rows.iter().enumerate() {
                let fused = row_stats(z, &spec, &mut a).unwrap();
                let multi = row_stats_multipass(z, &spec, &mut b).unwrap();
                assert!(
                    same_bits(&fused, &multi),
                    "p {p} row {r}: {fused:?} vs {multi:?}"
                );
                let (fast, scan) = (argmax(z).unwrap(), argmax_scan(z).unwrap());
                assert_eq!(
                    (fast.0, fast.1.to_bits()),
                    (scan.0, scan.1.to_bits()),
                    "row {r}"
                );
            }
        }
        // −∞ logits (probability 0) leave the entropies those of the other logits.
        let z = logits(5000, 17, 6.0);
        let mut masked = z.clone();
        masked[100..200].fill(f32::NEG_INFINITY);
        masked[4990] = f32::NEG_INFINITY;
        masked[3000] = f32::MIN; // the other usual mask
        let kept: Vec<f32> = masked.iter().copied().filter(|&v| v > -1e30).collect();
        let with = row_stats(&masked, &spec, &mut a).unwrap();
        let without = row_stats(&kept, &spec, &mut b).unwrap();
        assert!(with.shannon.is_finite());
        assert!((with.shannon - without.shannon).abs() < 1e-6);
        assert!((with.shannon - reference(&kept, 1.0)).abs() < 2e-5);
        for (x, y) in with.renyi.iter().zip(&without.renyi) {
            assert!((x - y).abs() < 1e-6, "{x} vs {y}");
        }
        assert_eq!(with.top_p_count, without.top_p_count);
        // The same errors, naming the same logit.
        for z in [
            vec![0.0, 1.0, f32::NAN, 2.0, f32::NAN],
            vec![f32::NEG_INFINITY; 40],
            vec![],
            {
                let mut v = logits(3000, 4, 5.0);
                v[2049] = f32::NAN;
                v
            },
        ] {
            let fused = row_stats(&z, &spec, &mut a).unwrap_err().to_string();
            let multi = row_stats_multipass(&z, &spec, &mut b)
                .unwrap_err()
                .to_string();
            assert_eq!(fused, multi);
        }
        assert!(row_stats(&[0.0, f32::NAN], &spec, &mut a)
            .unwrap_err()
            .to_string()
            .contains("logit 1 is NaN"));
    }

    #[test]
    fn a_block_at_the_clamp_sums_as_if_exponentiated() {
        // Alone in a pass, so that its tiny sum is not rounded away by a larger one; the clamp is
        // tested at the scales after the first.
        let block: Vec<f32> = logits(BLOCK, 9, 4.0).iter().map(|v| v - 100.0).collect();
        for scale in [1.0f32, 5.0] {
            let (mut direct, mut tmp) = ((0.0, 0.0), [0f32; BLOCK]);
            exp_block(&block, 0.0, scale, &mut tmp, &mut direct, true, None);
            assert!(tmp.iter().all(|&x| x == exp_f32(EXP_LOWEST)));
            let mut sums = [(0.0, 0.0); 2];
            let clamped_before = clamped_blocks();
            exp_passes(&block, 0.0, &[0.5, scale], None, &mut sums);
            assert!(clamped_blocks() > clamped_before, "taken at the clamp");
            assert_eq!(sums[1].0.to_bits(), direct.0.to_bits(), "scale {scale}");
        }
    }

    #[test]
    fn entropies_match_f64_reference() {
        let spec = StatSpec {
            alphas: vec![0.5, 2.0, 5.0, f64::INFINITY, 1.0],
            ..Default::default()
        };
        let mut scratch = Scratch::default();
        for (n, spread) in [(49_152, 30.0), (1000, 2.0), (262_144, 60.0), (77, 0.0)] {
            let z = logits(n, n as u64, spread);
            let st = row_stats(&z, &spec, &mut scratch).unwrap();
            assert!(
                (st.shannon - reference(&z, 1.0)).abs() < 2e-5,
                "{n}: {}",
                st.shannon
            );
            for (k, &a) in spec.alphas.iter().enumerate() {
                let r = reference(&z, a);
                assert!(
                    (st.renyi[k] - r).abs() < 2e-5,
                    "n={n} α={a}: {} vs {r}",
                    st.renyi[k]
                );
            }
        }
        // Uniform: every entropy is ln n.
        let st = row_stats(&vec![0.5; 1000], &spec, &mut scratch).unwrap();
        for h in std::iter::once(st.shannon).chain(st.renyi.iter().cloned()) {
            assert!((h - 1000f64.ln()).abs() < 1e-5, "{h}");
        }
    }

    #[test]
    fn top_p_matches_sorting() {
        let mut scratch = Scratch::default();
        for (seed, spread, p) in [
            (1, 8.0, 0.6),
            (2, 20.0, 0.6),
            (3, 3.0, 0.9),
            (4, 8.0, 1.0),
            (5, 0.0, 0.6),
        ] {
            let z = logits(5000, seed, spread);
            let spec = StatSpec {
                top_p: p,
                top_p_ids: true,
                ..Default::default()
            };
            let st = row_stats(&z, &spec, &mut scratch).unwrap();
            let m = z.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
            let mut probs: Vec<(f64, u32)> = z
                .iter()
                .enumerate()
                .map(|(i, &v)| ((v as f64 - m).exp(), i as u32))
                .collect();
            let total: f64 = probs.iter().map(|x| x.0).sum();
            probs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut cum = 0.0;
            let mut k = 0;
            for (x, _) in &probs {
                cum += x / total;
                k += 1;
                if cum >= p - 1e-12 {
                    break;
                }
            }
            assert_eq!(st.top_p_count as usize, k, "seed {seed} p {p}");
            let ids = st.top_p_ids.unwrap();
            assert_eq!(ids.len(), k);
            let expect: Vec<u32> = probs[..k].iter().map(|x| x.1).collect();
            assert_eq!(ids, expect);
        }
        // A sharp distribution: one token.
        let mut z = vec![0.0f32; 100];
        z[42] = 50.0;
        let st = row_stats(
            &z,
            &StatSpec {
                top_p_ids: true,
                ..Default::default()
            },
            &mut scratch,
        )
        .unwrap();
        assert_eq!((st.top_p_count, st.top_p_ids.unwrap()), (1, vec![42]));
    }

    #[test]
    fn top_k_skipping_blocks_keeps_the_scan_order() {
        let mut tied = logits(10_000, 21, 3.0);
        for i in (0..10_000).step_by(97) {
            tied[i] = 2.0; // many equal values above most of the row
        }
        for z in [
            logits(262_144, 20, 12.0),
            peaked(49_152, 22, 30.0),
            tied,
            (0..5000).map(|i| i as f32 * 1e-3).collect(), // rising: every block holds a new top
            logits(70, 23, 1.0),
        ] {
            for k in [1, 5, 17, 64] {
                assert_eq!(top_k(&z, k), top_k_scan(&z, k), "k {k}");
            }
        }
    }

    #[test]
    fn top_k_breaks_ties_by_id() {
        let z = vec![1.0, 3.0, 3.0, 2.0, 3.0, -1.0];
        let st = row_stats(
            &z,
            &StatSpec {
                top_k: 4,
                ..Default::default()
            },
            &mut Scratch::default(),
        )
        .unwrap();
        let ids: Vec<u32> = st.top_k.iter().map(|x| x.0).collect();
        assert_eq!(ids, vec![1, 2, 4, 3]);
        let total: f64 = z.iter().map(|&v| (v as f64 - 3.0).exp()).sum();
        assert!((st.top_k[0].1 - 1.0 / total).abs() < 1e-7);
    }

    #[test]
    fn support_entropy_counts_tokens_above_threshold() {
        // p = [0.5, 0.25, 0.25, 2e-18, 4e-23]: three tokens above 1e-6, four above the authors'
        // (and our default) 1e-20.
        let z = vec![2f32.ln(), 0.0, 0.0, -40.0, -50.0];
        let spec = StatSpec {
            alphas: vec![0.0],
            support_threshold: 1e-6,
            ..Default::default()
        };
        let st = row_stats(&z, &spec, &mut Scratch::default()).unwrap();
        assert!((st.renyi[0] - 3f64.ln()).abs() < 1e-12);
        let default = StatSpec {
            alphas: vec![0.0],
            ..Default::default()
        };
        assert_eq!(default.support_threshold, 1e-20);
        let st = row_stats(&z, &default, &mut Scratch::default()).unwrap();
        assert!((st.renyi[0] - 4f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let bad_alpha = StatSpec {
            alphas: vec![-0.5],
            ..Default::default()
        };
        assert!(bad_alpha
            .validate()
            .unwrap_err()
            .to_string()
            .contains("≥ 0"));
        for p in [0.0, 1.5, f64::NAN] {
            let s = StatSpec {
                top_p: p,
                ..Default::default()
            };
            assert!(
                s.validate().unwrap_err().to_string().contains("(0, 1]"),
                "{p}"
            );
        }
        assert!(parse_alpha("-1").is_err());
        assert!(parse_alpha("abc").is_err());
        assert_eq!(parse_alpha("inf").unwrap(), f64::INFINITY);
        assert_eq!(alpha_key(2.0), "2");
        assert_eq!(alpha_key(0.5), "0.5");
        assert_eq!(alpha_key(f64::INFINITY), "inf");
        // The selection path (k > 64) orders like the insertion path, ties by id.
        let z: Vec<f32> = (0..500).map(|i| ((i * 37) % 23) as f32 * 0.5).collect();
        let small = top_k(&z, 64);
        let large = top_k(&z, 10_000);
        assert_eq!(large.len(), 500);
        assert_eq!(&large[..64], &small[..]);
        assert!(large
            .windows(2)
            .all(|w| w[0].1 > w[1].1 || (w[0].1 == w[1].1 && w[0].0 < w[1].0)));
        let nan_row = vec![0.0, f32::NAN];
        assert!(row_stats(&nan_row, &StatSpec::default(), &mut Scratch::default()).is_err());
    }
}
