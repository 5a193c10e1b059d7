//! Statistics of one next-token distribution, given its logits, computed in one or two passes
//! without materialising log-probabilities: Shannon and Rényi entropies (nats), the top-p
//! candidate-set size (and ids), and the top-k tokens.
//!
//! With `m = max z`, `e_i = exp(z_i − m)`, `S = Σ e_i`:
//! `H = ln S − Σ e_i (z_i − m) / S`, `H_α = (ln Σ e_i^α − α ln S) / (1 − α)`, `H_∞ = ln S`.
//! Exponentials use a vectorisable f32 Cephes-style `exp` (relative error ≈ 1e-7); sums are
//! accumulated per 64-element block in f32 and across blocks in f64.

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

#[inline(always)]
fn exp_f32(x: f32) -> f32 {
    // Cephes expf: e^x = 2^n · e^r with n = round(x·log2 e), |r| ≤ ln2/2.
    const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23: adding it rounds to an integer in the low bits
    let x = x.clamp(-87.0, 88.0);
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

/// Writes `e_i = exp(scale·(z_i − m))` into `out` (when given) and returns `(Σ e, Σ e·(z − m))`.
///
/// Each block of 64 is exponentiated first (a loop the compiler vectorizes to the widest
/// registers the caller enables), then summed into 8 lanes in index order, so every instruction
/// set gives the same bits.
#[inline(always)]
fn exp_pass_generic(z: &[f32], m: f32, scale: f32, mut out: Option<&mut [f32]>) -> (f64, f64) {
    let mut s = 0f64;
    let mut t = 0f64;
    let mut tmp = [0f32; BLOCK];
    for (bi, block) in z.chunks(BLOCK).enumerate() {
        let mut acc_s = [0f32; LANES];
        let mut acc_t = [0f32; LANES];
        let n = block.len();
        if n == BLOCK {
            for (e, &zi) in tmp.iter_mut().zip(block) {
                *e = exp_f32(scale * (zi - m));
            }
            for (ce, cz) in tmp.chunks_exact(LANES).zip(block.chunks_exact(LANES)) {
                for l in 0..LANES {
                    acc_s[l] += ce[l];
                    acc_t[l] += ce[l] * (cz[l] - m);
                }
            }
        } else {
            for (i, &zi) in block.iter().enumerate() {
                let d = zi - m;
                let e = exp_f32(scale * d);
                tmp[i] = e;
                acc_s[i % LANES] += e;
                acc_t[i % LANES] += e * d;
            }
        }
        if let Some(out) = out.as_deref_mut() {
            out[bi * BLOCK..bi * BLOCK + n].copy_from_slice(&tmp[..n]);
        }
        s += acc_s.iter().map(|&x| x as f64).sum::<f64>();
        t += acc_t.iter().map(|&x| x as f64).sum::<f64>();
    }
    (s, t)
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
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { exp_pass_avx512(z, m, scale, out) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports the features the function was compiled for.
            return unsafe { exp_pass_avx2(z, m, scale, out) };
        }
    }
    exp_pass_generic(z, m, scale, out)
}

/// Index and value of the largest logit (smallest index among equals). NaN logits are an error.
fn argmax(z: &[f32]) -> Result<(usize, f32)> {
    let mut best = (0usize, f32::NEG_INFINITY);
    for (i, &v) in z.iter().enumerate() {
        if v > best.1 {
            best = (i, v);
        } else if v.is_nan() {
            return Err(Error::Data(format!(
                "logit {i} is NaN: the model produced non-finite activations"
            )));
        }
    }
    if !best.1.is_finite() {
        return Err(Error::Data(
            "all logits are -inf or the row is empty: no distribution to measure".into(),
        ));
    }
    Ok(best)
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
    for (i, &v) in z.iter().enumerate() {
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
    best
}

/// Size (and optionally ids) of the smallest set of most likely tokens with mass ≥ p, from the
/// unnormalised weights `e` (max 1). Two passes: a histogram over the top bits of `e` finds the
/// bucket where the cumulative mass crosses p, then that bucket alone is sorted.
fn top_p_set(
    e: &[f32],
    p: f64,
    want_ids: bool,
    scratch_count: &mut Vec<u32>,
    scratch_sum: &mut Vec<f64>,
) -> (u32, Option<Vec<u32>>) {
    scratch_count.clear();
    scratch_count.resize(N_BUCKETS, 0);
    scratch_sum.clear();
    scratch_sum.resize(N_BUCKETS, 0.0);
    for &x in e {
        let b = bucket(x);
        scratch_count[b] += 1;
        scratch_sum[b] += x as f64;
    }
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
pub fn row_stats(z: &[f32], spec: &StatSpec, scratch: &mut Scratch) -> Result<DistStats> {
    let (imax, m) = argmax(z)?;
    scratch.e.resize(z.len(), 0.0);
    let (s, t) = exp_pass(z, m, 1.0, Some(&mut scratch.e));
    let ln_s = s.ln();
    let shannon = (ln_s - t / s).max(0.0);
    let mut renyi = Vec::with_capacity(spec.alphas.len());
    for &a in &spec.alphas {
        let h = if a == 1.0 {
            shannon
        } else if a.is_infinite() {
            ln_s
        } else if a == 0.0 {
            let cut = (spec.support_threshold * s) as f32;
            let n = scratch.e.iter().filter(|&&x| x > cut).count();
            (n.max(1) as f64).ln()
        } else if (a as f32).is_finite() {
            let (r, _) = exp_pass(z, m, a as f32, None);
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
        top_p_set(
            &scratch.e,
            spec.top_p,
            spec.needs_top_p_ids(),
            &mut scratch.hist_count,
            &mut scratch.hist_sum,
        )
    };
    let top_k = top_k(z, spec.top_k)
        .into_iter()
        .map(|(i, v)| (i, ((v - m) as f64).exp() / s))
        .collect();
    Ok(DistStats {
        shannon,
        renyi,
        top_p_count,
        top_p_ids,
        top_k,
        extras: Extras::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
                acc_t[i % LANES] += e * d;
            }
            s += acc_s.iter().map(|&x| x as f64).sum::<f64>();
            t += acc_t.iter().map(|&x| x as f64).sum::<f64>();
        }
        (s, t)
    }

    #[test]
    fn exp_pass_gives_the_same_bits_on_every_instruction_set() {
        for (n, seed) in [(49_152 + 37, 1), (1000, 2), (63, 3)] {
            let z = logits(n, seed, 8.0);
            let m = z.iter().copied().fold(f32::MIN, f32::max);
            for scale in [1.0f32, 0.5, 5.0] {
                let mut e_generic = vec![0f32; n];
                let generic = exp_pass_generic(&z, m, scale, Some(&mut e_generic));
                let before = exp_pass_before(&z, m, scale);
                assert_eq!(
                    generic.0.to_bits(),
                    before.0.to_bits(),
                    "n {n} scale {scale}"
                );
                assert_eq!(
                    generic.1.to_bits(),
                    before.1.to_bits(),
                    "n {n} scale {scale}"
                );
                let mut e_best = vec![0f32; n];
                let best = exp_pass(&z, m, scale, Some(&mut e_best));
                assert_eq!(generic.0.to_bits(), best.0.to_bits(), "n {n} scale {scale}");
                assert_eq!(generic.1.to_bits(), best.1.to_bits(), "n {n} scale {scale}");
                assert!(e_generic
                    .iter()
                    .zip(&e_best)
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU supports the features checked just above.
                    let mut e_avx2 = vec![0f32; n];
                    let avx2 = unsafe { exp_pass_avx2(&z, m, scale, Some(&mut e_avx2)) };
                    assert_eq!(e_avx2, e_generic);
                    assert_eq!(
                        (generic.0.to_bits(), generic.1.to_bits()),
                        (avx2.0.to_bits(), avx2.1.to_bits())
                    );
                }
            }
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
