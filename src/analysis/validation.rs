//! The paper's validation of the expansion/pruning reading (Section 3.2):
//! C1 — entropy changes ΔH_i track changes of the top-p candidate count (Spearman's ρ, pooled over
//! tokens and layers); C2 — adjacent layers share most of their top-p candidates.

use std::collections::HashSet;

use ndarray::ArrayView2;
use serde::{Deserialize, Serialize};

use super::metrics::spearman;
use super::report::{fmt_opt, Table};
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
    let rows = h.len() / l;
    let h =
        ndarray::Array2::from_shape_vec((rows, l), h).map_err(|e| Error::Data(e.to_string()))?;
    let c =
        ndarray::Array2::from_shape_vec((rows, l), c).map_err(|e| Error::Data(e.to_string()))?;
    c1_from_matrices(model, h.view(), c.view())
}

/// C2 for one model: per adjacent pair of layers, the fraction of layer i's top-p candidates that
/// are also in layer i − 1's set, averaged over tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct C2Result {
    pub model: String,
    /// Entry j compares layer j + 1 with layer j (0-based layers, as in the profiles).
    pub overlap_per_layer: Vec<f64>,
    pub mean: f64,
    pub n_tokens: usize,
}

/// C2 from per-token, per-layer top-p id sets (`sets[token][layer]`).
pub fn c2_from_sets(model: &str, sets: &[Vec<Vec<u32>>]) -> Result<C2Result> {
    let l = sets
        .first()
        .map(Vec::len)
        .ok_or_else(|| Error::Data("no top-p sets to compare".into()))?;
    if l < 2 {
        return Err(Error::Data("C2 needs at least two layers".into()));
    }
    let mut sums = vec![0.0; l - 1];
    for (t, token) in sets.iter().enumerate() {
        if token.len() != l {
            return Err(Error::Data(format!(
                "token {t} has {} layers of top-p sets, expected {l}",
                token.len()
            )));
        }
        for i in 1..l {
            let prev: HashSet<u32> = token[i - 1].iter().copied().collect();
            let cur = &token[i];
            if cur.is_empty() {
                return Err(Error::Data(format!(
                    "empty top-p set at token {t}, layer {i}"
                )));
            }
            sums[i - 1] +=
                cur.iter().filter(|id| prev.contains(id)).count() as f64 / cur.len() as f64;
        }
    }
    let n = sets.len() as f64;
    let overlap_per_layer: Vec<f64> = sums.iter().map(|s| s / n).collect();
    let mean = overlap_per_layer.iter().sum::<f64>() / overlap_per_layer.len() as f64;
    Ok(C2Result {
        model: model.to_string(),
        overlap_per_layer,
        mean,
        n_tokens: sets.len(),
    })
}

/// C2 over every measured token of `profiles` (which must carry top-p ids: `--top-p-ids`).
pub fn c2_overlap(model: &str, profiles: &[EntropyProfile]) -> Result<C2Result> {
    let mut sets = Vec::new();
    for p in profiles {
        for pos in &p.positions {
            let ids = pos.top_p_ids.clone().ok_or_else(|| {
                Error::Data("the profiles carry no top-p ids; measure them with top_p_ids (CLI: --top-p-ids)".into())
            })?;
            sets.push(ids);
        }
    }
    c2_from_sets(model, &sets)
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
    header.extend((1..=l).map(|i| format!("{i}←{}", i - 1)));
    let refs: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(
        "C2: fraction of layer i's top-p candidates already in layer i−1's set",
        &refs,
    );
    for r in results {
        let mut row = vec![r.model.clone(), format!("{:.3}", r.mean)];
        row.extend(r.overlap_per_layer.iter().map(|v| format!("{v:.2}")));
        t.row(row);
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
        let text = r.to_string();
        assert!(text.contains("0.625") && text.contains("1←0"));
    }
}
