//! The paper's validation of the expansion/pruning reading (Section 3.2):
//! C1 — entropy changes ΔH_i track changes of the top-p candidate count (Spearman's ρ, pooled over
//! tokens and layers); C2 — adjacent layers share most of their top-p candidates.

use std::collections::HashSet;

use ndarray::ArrayView2;
use serde::{Deserialize, Serialize};

use super::metrics::{kendall_tau_b, mean_std, spearman};
use super::table::{fmt_opt, Table};
use crate::error::{Error, Result};
use crate::profile::{delta, EntropyProfile};

/// C1 for one model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct C1Result {
    pub model: String,
    /// Spearman's ρ between ΔH_i and Δcount_i (null when a variable is constant).
    pub rho: Option<f64>,
    pub p_value: Option<f64>,
    /// Number of (ΔH, Δcount) pairs pooled.
    pub n_pairs: usize,
}

/// C1 from tokens × layers matrices of entropies and top-p counts.
pub fn c1_from_matrices(
    model: &str,
    entropy: ArrayView2<f64>,
    counts: ArrayView2<f64>,
) -> Result<C1Result> {
    if entropy.dim() != counts.dim() {
        return Err(Error::Data(format!(
            "entropy matrix {:?} and count matrix {:?} differ in shape",
            entropy.dim(),
            counts.dim()
        )));
    }
    let dh: Vec<f64> = delta(entropy).iter().cloned().collect();
    let dc: Vec<f64> = delta(counts).iter().cloned().collect();
    let r = spearman(&dh, &dc)?;
    Ok(C1Result {
        model: model.to_string(),
        rho: r.map(|x| x.0),
        p_value: r.map(|x| x.1),
        n_pairs: dh.len(),
    })
}

/// C1 pooled over every measured token of `profiles` (Shannon entropy, top-p counts).
pub fn c1_spearman(model: &str, profiles: &[EntropyProfile]) -> Result<C1Result> {
    let (mut h, mut c) = (Vec::new(), Vec::new());
    let mut l = None;
    for p in profiles {
        for pos in &p.positions {
            if *l.get_or_insert(pos.shannon.len()) != pos.shannon.len() {
                return Err(Error::Data(
                    "profiles of different depths cannot be pooled".into(),
                ));
            }
            h.extend_from_slice(&pos.shannon);
            c.extend(pos.top_p_count.iter().map(|&x| x as f64));
        }
    }
    let l = l.ok_or_else(|| Error::Data("no measured positions to validate".into()))?;
    if l < 2 {
        return Err(Error::Data(
            "C1 needs profiles of at least two layers".into(),
        ));
    }
    let rows = h.len() / l;
    let h =
        ndarray::Array2::from_shape_vec((rows, l), h).map_err(|e| Error::Data(e.to_string()))?;
    let c =
        ndarray::Array2::from_shape_vec((rows, l), c).map_err(|e| Error::Data(e.to_string()))?;
    c1_from_matrices(model, h.view(), c.view())
}

/// C1 with ties handled. Most top-p counts do not change from one block to the next (Δcount = 0),
/// and Spearman's ρ over average ranks credits a whole block of tied pairs at once; Kendall's τ-b
/// counts a tied pair neither as concordant nor as discordant, and ρ over the pairs whose count
/// changed leaves the ties out. A lens that moves C1's ρ while τ-b and the changed-pair ρ stay put
/// changed the ties, not how entropy tracks the candidate set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct C1Ties {
    /// Kendall's τ-b of (ΔH, Δcount), pooled, and its two-sided p-value.
    pub kendall_tau_b: Option<f64>,
    pub kendall_p_value: Option<f64>,
    /// Share of the pooled pairs whose top-p count did not change.
    pub unchanged_count_share: f64,
    /// Spearman's ρ over the pooled pairs whose count changed, and how many they are.
    pub spearman_changed: Option<f64>,
    pub n_changed: usize,
    /// Per-prompt τ-b: mean and population standard deviation over the prompts where it is defined.
    pub per_prompt_tau_b_mean: Option<f64>,
    pub per_prompt_tau_b_std: Option<f64>,
    pub per_prompt_tau_b_defined: usize,
}

impl C1Ties {
    /// The pooled statistics of (ΔH, Δcount) pairs `dh`, `dc`, with the per-prompt τ-b values
    /// computed by the caller (`per_prompt`).
    pub fn of(dh: &[f64], dc: &[f64], per_prompt: &[f64]) -> Result<Self> {
        let tau = kendall_tau_b(dh, dc)?;
        let (mut h, mut c) = (Vec::new(), Vec::new());
        for (&a, &b) in dh.iter().zip(dc) {
            if b != 0.0 {
                h.push(a);
                c.push(b);
            }
        }
        let spearman_changed = if h.len() >= 3 {
            spearman(&h, &c)?.map(|x| x.0)
        } else {
            None
        };
        let (mean, std) = mean_std(per_prompt);
        let defined = !per_prompt.is_empty();
        Ok(Self {
            kendall_tau_b: tau.map(|x| x.0),
            kendall_p_value: tau.map(|x| x.1),
            unchanged_count_share: (dh.len() - h.len()) as f64 / dh.len().max(1) as f64,
            spearman_changed,
            n_changed: h.len(),
            per_prompt_tau_b_mean: defined.then_some(mean),
            per_prompt_tau_b_std: defined.then_some(std),
            per_prompt_tau_b_defined: per_prompt.len(),
        })
    }
}

/// C2 for one model: per adjacent pair of layers, the share of top-p candidates the two layers have
/// in common, averaged over tokens. The paper's caption leaves the denominator open, so all three
/// readings are given: |S_i ∩ S_{i−1}| / |S_i| (the share of layer i's candidates already present
/// in layer i − 1, the default), / |S_{i−1}|, and the Jaccard index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct C2Result {
    pub model: String,
    /// Entry j compares layer j + 1 with layer j (0-based layers, as in the profiles):
    /// |S_{j+1} ∩ S_j| / |S_{j+1}|.
    pub overlap_per_layer: Vec<f64>,
    /// |S_{j+1} ∩ S_j| / |S_j|.
    #[serde(default)]
    pub overlap_prev_per_layer: Vec<f64>,
    /// |S_{j+1} ∩ S_j| / |S_{j+1} ∪ S_j|.
    #[serde(default)]
    pub jaccard_per_layer: Vec<f64>,
    /// Means over the layer pairs of the three.
    pub mean: f64,
    #[serde(default)]
    pub mean_prev: f64,
    #[serde(default)]
    pub mean_jaccard: f64,
    pub n_tokens: usize,
}

/// Accumulates C2 fractions token by token from set sizes and shared counts.
#[derive(Clone, Debug, Default)]
pub struct C2Accumulator {
    current: Vec<f64>,
    previous: Vec<f64>,
    jaccard: Vec<f64>,
    n: usize,
}

impl C2Accumulator {
    /// Adds one token: `counts[j]` = |S_j| for every layer, `shared[j]` = |S_{j+1} ∩ S_j|.
    pub fn add(&mut self, counts: &[u32], shared: &[u32]) -> Result<()> {
        let l = counts.len();
        if l < 2 {
            return Err(Error::Data("C2 needs at least two layers".into()));
        }
        if shared.len() + 1 != l {
            return Err(Error::Data(format!(
                "{} shared counts for {l} layers (expected {})",
                shared.len(),
                l - 1
            )));
        }
        if self.n == 0 {
            self.current = vec![0.0; l - 1];
            self.previous = vec![0.0; l - 1];
            self.jaccard = vec![0.0; l - 1];
        } else if self.current.len() != l - 1 {
            return Err(Error::Data(
                "tokens of different depths cannot be pooled".into(),
            ));
        }
        for j in 0..l - 1 {
            let (prev, cur, both) = (counts[j] as f64, counts[j + 1] as f64, shared[j] as f64);
            if prev == 0.0 || cur == 0.0 || both > prev.min(cur) {
                return Err(Error::Data(format!(
                    "inconsistent top-p sets at blocks {} and {} (1-based): sizes {prev} and {cur}, {both} shared",
                    j + 1,
                    j + 2
                )));
            }
            self.current[j] += both / cur;
            self.previous[j] += both / prev;
            self.jaccard[j] += both / (prev + cur - both);
        }
        self.n += 1;
        Ok(())
    }

    pub fn finish(&self, model: &str) -> Result<C2Result> {
        if self.n == 0 {
            return Err(Error::Data("no top-p sets to compare".into()));
        }
        let n = self.n as f64;
        let avg = |v: &[f64]| v.iter().map(|s| s / n).collect::<Vec<f64>>();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (current, previous, jaccard) =
            (avg(&self.current), avg(&self.previous), avg(&self.jaccard));
        Ok(C2Result {
            model: model.to_string(),
            mean: mean(&current),
            mean_prev: mean(&previous),
            mean_jaccard: mean(&jaccard),
            overlap_per_layer: current,
            overlap_prev_per_layer: previous,
            jaccard_per_layer: jaccard,
            n_tokens: self.n,
        })
    }
}

/// C2 from per-token, per-layer top-p id sets (`sets[token][layer]`).
pub fn c2_from_sets(model: &str, sets: &[Vec<Vec<u32>>]) -> Result<C2Result> {
    let mut acc = C2Accumulator::default();
    for (t, token) in sets.iter().enumerate() {
        if let Some(i) = token.iter().position(Vec::is_empty) {
            return Err(Error::Data(format!(
                "empty top-p set at token {t}, layer {i}"
            )));
        }
        let counts: Vec<u32> = token.iter().map(|s| s.len() as u32).collect();
        let shared: Vec<u32> = token
            .windows(2)
            .map(|w| {
                let prev: HashSet<u32> = w[0].iter().copied().collect();
                w[1].iter().filter(|id| prev.contains(id)).count() as u32
            })
            .collect();
        acc.add(&counts, &shared)
            .map_err(|e| Error::Data(format!("token {t}: {e}")))?;
    }
    acc.finish(model)
}

/// C2 over every measured token of `profiles`, which must carry the shared counts
/// (`StatSpec::top_p_overlap`) or the sets themselves (`top_p_ids`, CLI `--top-p-ids`).
pub fn c2_overlap(model: &str, profiles: &[EntropyProfile]) -> Result<C2Result> {
    let mut acc = C2Accumulator::default();
    for p in profiles {
        for pos in &p.positions {
            match (&pos.top_p_shared, &pos.top_p_ids) {
                (Some(shared), _) => acc.add(&pos.top_p_count, shared)?,
                (None, Some(ids)) => {
                    let shared: Vec<u32> = ids
                        .windows(2)
                        .map(|w| {
                            let prev: HashSet<u32> = w[0].iter().copied().collect();
                            w[1].iter().filter(|id| prev.contains(id)).count() as u32
                        })
                        .collect();
                    acc.add(&pos.top_p_count, &shared)?
                }
                (None, None) => return Err(Error::Data(
                    "the profiles carry neither top-p overlaps nor top-p ids; measure them with top_p_overlap or top_p_ids (CLI: --top-p-ids)".into(),
                )),
            }
        }
    }
    acc.finish(model)
}

/// Table of C1 results, one row per model (the paper's Table 1).
pub fn c1_table(results: &[C1Result]) -> Table {
    let mut t = Table::new(
        "C1: Spearman ρ between ΔH and Δ(top-p count)",
        &["model", "ρ", "p-value", "pairs"],
    );
    for r in results {
        t.row(vec![
            r.model.clone(),
            fmt_opt(r.rho, 4),
            r.p_value
                .map(|p| format!("{p:.2e}"))
                .unwrap_or_else(|| "n/a".into()),
            r.n_pairs.to_string(),
        ]);
    }
    t
}

/// Table of C2 results: one row per model, one column per adjacent pair of layers.
pub fn c2_table(results: &[C2Result]) -> Table {
    let l = results
        .iter()
        .map(|r| r.overlap_per_layer.len())
        .max()
        .unwrap_or(0);
    let mut header: Vec<String> = vec!["model".into(), "mean".into()];
    // Blocks are numbered 1..L: the first pair is block 2 against block 1.
    header.extend((2..=l + 1).map(|i| format!("{i}←{}", i - 1)));
    let refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(
        "C2: fraction of block i's top-p candidates already in block i−1's set",
        &refs,
    );
    for r in results {
        let mut row = vec![r.model.clone(), format!("{:.3}", r.mean)];
        row.extend(r.overlap_per_layer.iter().map(|v| format!("{v:.2}")));
        t.row(row);
    }
    if let Some(r) = results
        .iter()
        .find(|r| !r.overlap_prev_per_layer.is_empty())
    {
        t.note(format!(
            "other denominators ({}): |S_i ∩ S_i−1| / |S_i−1| mean {:.3}; Jaccard mean {:.3}",
            r.model, r.mean_prev, r.mean_jaccard
        ));
    }
    t
}

macro_rules! shows_itself {
    ($t:ty, $table:ident) => {
        impl $t {
            pub fn to_html(&self) -> String {
                $table(std::slice::from_ref(self)).to_html()
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", $table(std::slice::from_ref(self)))
            }
        }
    };
}
shows_itself!(C1Result, c1_table);
shows_itself!(C2Result, c2_table);

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn c1_perfectly_monotone() {
        // Δcount = (ΔH)³: monotone, not linear, so ρ = 1 while Pearson's r < 1.
        let h = array![[1.0, 2.0, 1.5, 3.0], [0.5, 0.2, 0.9, 1.0]];
        let c = h.mapv(|v: f64| v.powi(3) * 10.0);
        let r = c1_from_matrices("m", h.view(), c.view()).unwrap();
        assert_eq!(r.n_pairs, 6);
        assert!((r.rho.unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn c2_fractions() {
        let sets = vec![vec![vec![1, 2], vec![2, 3, 4, 5], vec![2]]];
        let r = c2_from_sets("m", &sets).unwrap();
        assert_eq!(r.overlap_per_layer, vec![0.25, 1.0]);
        assert_eq!(r.mean, 0.625);
        assert_eq!(r.overlap_prev_per_layer, vec![0.5, 0.25]);
        assert_eq!(r.jaccard_per_layer, vec![0.2, 0.25]);
        assert_eq!(r.mean_jaccard, 0.225);
        let text = r.to_string();
        assert!(text.contains("0.625") && text.contains("2←1") && text.contains("3←2"));
    }
}
