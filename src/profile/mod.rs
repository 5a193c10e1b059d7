//! Entropy profiles: per-position, per-layer lens statistics of a prompt or a generation.
//!
//! An [`EntropyProfile`] holds one [`PositionProfile`] per measured position (tokens × layers).
//! Its JSON form is the CLI's output line; [`EntropyProfile::shannon_matrix`] and friends give the
//! `ndarray` views that the statistics in [`crate::analysis`] consume.

use std::collections::BTreeMap;

use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::lens::{alpha_key, DistStats};

pub mod aggregate;

pub use aggregate::{
    aggregate, delta, depth_normalize, largest_decrease, largest_increase, select_layers,
    Aggregation, LayerSubset, Standardizer,
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
    /// Per layer, the top-k `[id, probability]` pairs.
    #[serde(default)]
    pub top_k: Vec<Vec<(u32, f64)>>,
    /// Layer 0 (embedding output), when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embed: Option<LayerStats>,
}

impl PositionProfile {
    /// Assembles a position's profile from per-layer stats (`layers[0]` = block 1).
    pub(crate) fn from_stats(
        position: usize,
        alphas: &[f64],
        embed: Option<&DistStats>,
        layers: &[DistStats],
    ) -> Self {
        let mut renyi: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (k, &a) in alphas.iter().enumerate() {
            renyi.insert(alpha_key(a), layers.iter().map(|s| s.renyi[k]).collect());
        }
        let has_ids = layers.first().is_some_and(|s| s.top_p_ids.is_some());
        Self {
            position,
            shannon: layers.iter().map(|s| s.shannon).collect(),
            renyi,
            top_p_count: layers.iter().map(|s| s.top_p_count).collect(),
            top_p_ids: has_ids.then(|| {
                layers
                    .iter()
                    .map(|s| s.top_p_ids.clone().unwrap_or_default())
                    .collect()
            }),
            top_k: layers.iter().map(|s| s.top_k.clone()).collect(),
            embed: embed.map(|s| LayerStats {
                shannon: s.shannon,
                renyi: alphas
                    .iter()
                    .enumerate()
                    .map(|(k, &a)| (alpha_key(a), s.renyi[k]))
                    .collect(),
                top_p_count: s.top_p_count,
                top_p_ids: s.top_p_ids.clone(),
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
