//! Entropy profiles: per-position, per-layer lens statistics of a prompt or a generation.
//!
//! An [`EntropyProfile`] holds one [`PositionProfile`] per measured position (tokens × layers).
//! Its JSON form is the CLI's output line; [`EntropyProfile::shannon_matrix`] and friends give the
//! `ndarray` views that the statistics in [`crate::analysis`] consume.

use std::collections::BTreeMap;

use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::lens::{alpha_key, DistStats, StatSpec};

pub mod aggregate;
pub mod provenance;

pub use provenance::Provenance;

pub use aggregate::{
    aggregate, blocks_to_skip, delta, depth_normalize, largest_decrease, largest_increase,
    select_layers, Aggregation, LayerSubset, SkipStrategy, Standardizer,
};

/// Statistics of one layer's distribution (used for the optional embedding layer 0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerStats {
    pub shannon: f64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub renyi: BTreeMap<String, f64>,
    pub top_p_count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p_ids: Option<Vec<u32>>,
    pub top_k: Vec<(u32, f64)>,
}

/// Lens statistics of the distribution predicting token `position + 1`, at every layer
/// (index j is the residual after block j + 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PositionProfile {
    /// Index into `prompt_ids ++ generated_ids`.
    pub position: usize,
    pub shannon: Vec<f64>,
    /// Rényi entropies keyed by order (`"0.5"`, `"2"`, `"inf"`).
    #[serde(default)]
    pub renyi: BTreeMap<String, Vec<f64>>,
    pub top_p_count: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p_ids: Option<Vec<Vec<u32>>>,
    /// Entry j: how many top-p candidates layer j + 1 shares with layer j (L − 1 values; asked for
    /// with [`StatSpec::top_p_overlap`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p_shared: Option<Vec<u32>>,
    /// Per layer, the top-k `[id, probability]` pairs (absent when top-k is 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_k: Vec<Vec<(u32, f64)>>,
    /// Layer 0 (embedding output), when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embed: Option<LayerStats>,
}

impl PositionProfile {
    /// Assembles a position's profile from per-layer stats (`layers[0]` = block 1).
    pub(crate) fn from_stats(
        position: usize,
        spec: &StatSpec,
        embed: Option<&DistStats>,
        layers: &[DistStats],
    ) -> Self {
        let alphas = &spec.alphas;
        let mut renyi: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (k, &a) in alphas.iter().enumerate() {
            renyi.insert(alpha_key(a), layers.iter().map(|s| s.renyi[k]).collect());
        }
        let sets: Option<Vec<&Vec<u32>>> = layers.iter().map(|s| s.top_p_ids.as_ref()).collect();
        let top_p_shared = match (&sets, spec.top_p_overlap) {
            (Some(sets), true) => Some(
                sets.windows(2)
                    .map(|w| {
                        let prev: std::collections::HashSet<u32> = w[0].iter().copied().collect();
                        w[1].iter().filter(|id| prev.contains(id)).count() as u32
                    })
                    .collect(),
            ),
            _ => None,
        };
        let keep_ids = spec.top_p_ids;
        Self {
            position,
            shannon: layers.iter().map(|s| s.shannon).collect(),
            renyi,
            top_p_count: layers.iter().map(|s| s.top_p_count).collect(),
            top_p_ids: sets
                .filter(|_| keep_ids)
                .map(|sets| sets.into_iter().cloned().collect()),
            top_p_shared,
            top_k: if spec.top_k == 0 {
                Vec::new()
            } else {
                layers.iter().map(|s| s.top_k.clone()).collect()
            },
            embed: embed.map(|s| LayerStats {
                shannon: s.shannon,
                renyi: alphas
                    .iter()
                    .enumerate()
                    .map(|(k, &a)| (alpha_key(a), s.renyi[k]))
                    .collect(),
                top_p_count: s.top_p_count,
                top_p_ids: s.top_p_ids.clone().filter(|_| keep_ids),
                top_k: s.top_k.clone(),
            }),
        }
    }
}

/// The entropy profile of a prompt, or of a generation from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EntropyProfile {
    /// Model name (file stem or repo id).
    pub model: String,
    pub prompt: String,
    /// Number of transformer blocks L (length of every per-layer array).
    pub n_layers: usize,
    pub prompt_ids: Vec<u32>,
    pub generated_ids: Vec<u32>,
    /// Text of each token of `prompt_ids ++ generated_ids`.
    #[serde(default)]
    pub tokens: Vec<String>,
    /// The generated text.
    #[serde(default)]
    pub generated_text: String,
    /// Mass of the top-p sets in `top_p_count`.
    #[serde(default)]
    pub top_p: f64,
    pub positions: Vec<PositionProfile>,
    /// How the profile was made: model and weights hash, dtype, device, skipped blocks, statistics,
    /// chat template, sampling, crate version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

impl EntropyProfile {
    /// Number of measured positions (rows of the matrices).
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// All token ids, prompt then generation.
    pub fn all_ids(&self) -> Vec<u32> {
        self.prompt_ids
            .iter()
            .chain(&self.generated_ids)
            .copied()
            .collect()
    }

    fn matrix(&self, row: impl Fn(&PositionProfile) -> Result<Vec<f64>>) -> Result<Array2<f64>> {
        let l = self.n_layers;
        let mut m = Array2::zeros((self.positions.len(), l));
        for (i, p) in self.positions.iter().enumerate() {
            let r = row(p)?;
            if r.len() != l {
                return Err(Error::Data(format!(
                    "position {} has {} layers, expected {l}",
                    p.position,
                    r.len()
                )));
            }
            m.row_mut(i).assign(&ndarray::Array1::from(r));
        }
        Ok(m)
    }

    /// Shannon entropies, positions × layers.
    pub fn shannon_matrix(&self) -> Result<Array2<f64>> {
        self.matrix(|p| Ok(p.shannon.clone()))
    }

    /// Rényi entropies of order `alpha` (α = 1 gives Shannon), positions × layers.
    pub fn renyi_matrix(&self, alpha: f64) -> Result<Array2<f64>> {
        if alpha == 1.0 {
            return self.shannon_matrix();
        }
        let key = alpha_key(alpha);
        self.matrix(|p| {
            p.renyi.get(&key).cloned().ok_or_else(|| {
                Error::Data(format!(
                    "the profile has no Rényi entropy of order {key}; measure it with --alpha {key}"
                ))
            })
        })
    }

    /// Top-p candidate counts, positions × layers.
    pub fn top_p_matrix(&self) -> Result<Array2<f64>> {
        self.matrix(|p| Ok(p.top_p_count.iter().map(|&c| c as f64).collect()))
    }

    /// One JSON line (the CLI contract).
    pub fn to_json_line(&self) -> Result<String> {
        Ok(serde_json::to_string(self)?)
    }

    /// Reads a JSON line written by [`EntropyProfile::to_json_line`] or by the CLI.
    pub fn from_json(s: &str) -> Result<Self> {
        Ok(serde_json::from_str(s)?)
    }
}
