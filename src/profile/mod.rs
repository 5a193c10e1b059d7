//! Entropy profiles: per-position, per-layer lens statistics of a prompt or a generation.
//!
//! An [`EntropyProfile`] holds one [`PositionProfile`] per measured position (tokens × layers).
//! Its JSON form is the CLI's output line; [`EntropyProfile::shannon_matrix`] and friends give the
//! `ndarray` views that the statistics in [`crate::analysis`] consume.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::lens::{alpha_key, DistStats, Extras, StatSpec};

pub mod aggregate;
pub mod depth;
pub mod fit;
pub mod provenance;
pub mod schema;

pub use depth::{prediction_depth, DepthSummary};
pub use fit::LensFit;
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
    /// KL(final ‖ layer 0) and the target's log-probability and rank, when measured.
    #[serde(flatten)]
    pub extras: Extras,
}

/// Where a profile reads the residual stream: after every block (the paper's logit lens), inside
/// every block after its attention and before its MLP, or both (interleaved `1.a, 1, 2.a, 2, …`);
/// or what each block *writes* to it, decoded by the same lens: its attention output, its MLP
/// output, or both beside the residual (`components`: `1.attn, 1.mlp, 1, 2.attn, …`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadPoint {
    #[default]
    Block,
    Attention,
    Both,
    /// Each block's attention write (after its output projection and any post-attention norm).
    AttnOut,
    /// Each block's MLP write (after any post-MLP norm).
    MlpOut,
    /// Per block: the attention write, the MLP write, then the residual after the block.
    Components,
}

impl ReadPoint {
    pub fn is_block(&self) -> bool {
        *self == ReadPoint::Block
    }

    /// Whether the points are what the blocks write rather than the residual stream (a tuned
    /// lens's translators are fitted to residuals, not to writes).
    pub fn reads_writes(&self) -> bool {
        matches!(
            self,
            ReadPoint::AttnOut | ReadPoint::MlpOut | ReadPoint::Components
        )
    }

    /// Whether the residual after each block's attention is read.
    pub fn reads_mid_block(&self) -> bool {
        matches!(self, ReadPoint::Attention | ReadPoint::Both)
    }

    /// Parses `block`, `attention`, `both`, `attn-out`, `mlp-out` or `components`.
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim() {
            "block" => Ok(ReadPoint::Block),
            "attention" => Ok(ReadPoint::Attention),
            "both" => Ok(ReadPoint::Both),
            "attn-out" => Ok(ReadPoint::AttnOut),
            "mlp-out" => Ok(ReadPoint::MlpOut),
            "components" => Ok(ReadPoint::Components),
            other => Err(Error::invalid(format!(
                "unknown read point `{other}`: use block (after each block), attention (after each block's attention, before its MLP), both, attn-out (what each block's attention writes), mlp-out (what its MLP writes) or components (attn-out, mlp-out and block, per block)"
            ))),
        }
    }

    /// The name [`ReadPoint::parse`] reads.
    pub fn as_str(&self) -> &'static str {
        match self {
            ReadPoint::Block => "block",
            ReadPoint::Attention => "attention",
            ReadPoint::Both => "both",
            ReadPoint::AttnOut => "attn-out",
            ReadPoint::MlpOut => "mlp-out",
            ReadPoint::Components => "components",
        }
    }

    /// Measured points per block.
    pub fn points_per_block(&self) -> usize {
        match self {
            ReadPoint::Both => 2,
            ReadPoint::Components => 3,
            _ => 1,
        }
    }

    /// Measured points for `n_blocks` blocks.
    pub fn n_points(&self, n_blocks: usize) -> usize {
        self.points_per_block() * n_blocks
    }

    /// Axis labels of the measured points: `1 … L`, `1.a … L.a`, `1.a, 1, …, L.a, L`,
    /// `1.attn … L.attn`, `1.mlp … L.mlp` or `1.attn, 1.mlp, 1, …`.
    pub fn labels(&self, n_blocks: usize) -> Vec<String> {
        (1..=n_blocks)
            .flat_map(|i| match self {
                ReadPoint::Block => vec![format!("{i}")],
                ReadPoint::Attention => vec![format!("{i}.a")],
                ReadPoint::Both => vec![format!("{i}.a"), format!("{i}")],
                ReadPoint::AttnOut => vec![format!("{i}.attn")],
                ReadPoint::MlpOut => vec![format!("{i}.mlp")],
                ReadPoint::Components => {
                    vec![format!("{i}.attn"), format!("{i}.mlp"), format!("{i}")]
                }
            })
            .collect()
    }
}

/// The target token of a position followed through the layers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetTrace {
    /// The token id.
    pub id: u32,
    /// Its log-probability at every point (the cross-entropy to it is the negative).
    pub logprob: Vec<f64>,
    /// Its rank at every point: 1 + the number of tokens with a larger logit.
    pub rank: Vec<u32>,
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
    /// KL(final ‖ point) in nats at every point, when asked for ([`StatSpec::kl_to_final`]); the
    /// final distribution is the model's own, so the last block's entry is 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kl_to_final: Option<Vec<f64>>,
    /// The target token's log-probability and rank at every point, when asked for
    /// ([`StatSpec::target`]) and the position has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetTrace>,
    /// The first point (1-based, along the per-point arrays) from which the lens's most likely
    /// token is the model's own (the final distribution's) and stays so at every later point; at
    /// the default read point, the block where the prediction settles. n_points + 1 when the last
    /// measured point's top-1 differs (read after attention: the token appears only once the last
    /// MLP has run). See [`prediction_depth`]. Absent in profiles written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction_depth: Option<usize>,
}

impl PositionProfile {
    /// Assembles a position's profile from per-layer stats (`layers[0]` = block 1) and the
    /// model's own distribution `last` (the last block's output, which `layers` ends with except
    /// at the attention read point).
    pub(crate) fn from_stats(
        position: usize,
        spec: &StatSpec,
        embed: Option<&DistStats>,
        layers: &[DistStats],
        last: &DistStats,
        target: Option<u32>,
    ) -> Self {
        let top1: Vec<u32> = layers.iter().map(|s| s.top1).collect();
        // The target trace needs every layer's numbers; a layer without them drops it.
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
                extras: s.extras,
            }),
            kl_to_final: layers.iter().map(|s| s.extras.kl_to_final).collect(),
            target: target.and_then(|id| {
                let logprob: Option<Vec<f64>> =
                    layers.iter().map(|s| s.extras.target_logprob).collect();
                let rank: Option<Vec<u32>> = layers.iter().map(|s| s.extras.target_rank).collect();
                Some(TargetTrace {
                    id,
                    logprob: logprob?,
                    rank: rank?,
                })
            }),
            prediction_depth: Some(prediction_depth(&top1, last.top1)),
        }
    }
}

/// The entropy profile of a prompt, or of a generation from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EntropyProfile {
    /// The JSON layout's version ([`schema::PROFILE_SCHEMA_VERSION`] for profiles this build
    /// makes; `None` for a file written before the field existed, read as version 1).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "schema::profile_version"
    )]
    pub schema_version: Option<u32>,
    /// Model name (file stem or repo id).
    pub model: String,
    pub prompt: String,
    /// Number of transformer blocks L: the length of every per-layer array (layer 0, the embedding
    /// output, is measured apart, in `embed`) at the default read point; 2L when `read_point` is
    /// `both`. `n_layers` in JSON, as the contract has it.
    #[serde(rename = "n_layers")]
    pub n_blocks: usize,
    /// Where the residual stream was read (absent in JSON: after every block).
    #[serde(default, skip_serializing_if = "ReadPoint::is_block")]
    pub read_point: ReadPoint,
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

    /// Entries of every per-layer array: L, or 2L when read at both points.
    pub fn n_points(&self) -> usize {
        self.read_point.n_points(self.n_blocks)
    }

    /// Axis labels of the measured points (`1 … L`, `1.a … L.a`, or both interleaved).
    pub fn point_labels(&self) -> Vec<String> {
        self.read_point.labels(self.n_blocks)
    }

    /// KL(final ‖ point), positions × points.
    pub fn kl_matrix(&self) -> Result<Array2<f64>> {
        self.matrix(|p| {
            p.kl_to_final.clone().ok_or_else(|| {
                Error::Data(
                    "the profile has no KL to the final distribution; measure it with StatSpec::kl_to_final (CLI: --kl)".into(),
                )
            })
        })
    }

    /// Rank of each position's target token, positions × points (positions without a target are
    /// left out; the second value lists the positions kept).
    pub fn target_rank_matrix(&self) -> Result<(Array2<f64>, Vec<usize>)> {
        let rows: Vec<&PositionProfile> = self
            .positions
            .iter()
            .filter(|p| p.target.is_some())
            .collect();
        if rows.is_empty() {
            return Err(Error::Data(
                "the profile follows no target token; measure it with StatSpec::target (CLI: --target next)".into(),
            ));
        }
        let l = self.n_points();
        let mut m = Array2::zeros((rows.len(), l));
        for (i, p) in rows.iter().enumerate() {
            let ranks = p
                .target
                .as_ref()
                .map(|t| &t.rank)
                .ok_or_else(|| Error::Data("target vanished".into()))?;
            if ranks.len() != l {
                return Err(Error::Data(format!(
                    "position {} has {} target ranks, expected {l}",
                    p.position,
                    ranks.len()
                )));
            }
            m.row_mut(i)
                .assign(&ndarray::Array1::from_iter(ranks.iter().map(|&r| r as f64)));
        }
        Ok((m, rows.iter().map(|p| p.position).collect()))
    }

    fn matrix(&self, row: impl Fn(&PositionProfile) -> Result<Vec<f64>>) -> Result<Array2<f64>> {
        let l = self.n_points();
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

    /// Reads a JSON line written by [`EntropyProfile::to_json_line`] or by the CLI, and checks it
    /// with [`EntropyProfile::validate`]: a file from elsewhere is not trusted to be consistent.
    pub fn from_json(s: &str) -> Result<Self> {
        let profile: Self = serde_json::from_str(s)?;
        profile.validate()?;
        Ok(profile)
    }

    /// Checks what charts and statistics index without looking: every per-layer array has
    /// `n_layers` entries (`top_p_shared` one fewer), positions point into the token ids, entropies
    /// are finite and non-negative, top-k probabilities lie in [0, 1].
    ///
    /// # Errors
    /// [`Error::Data`] naming the first position and field that is inconsistent.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::Data(format!("inconsistent entropy profile: {what}")));
        if self.n_blocks == 0 {
            return bad("n_layers is 0".into());
        }
        let l = self.n_points();
        let n_ids = self
            .prompt_ids
            .len()
            .saturating_add(self.generated_ids.len());
        if !self.tokens.is_empty() && self.tokens.len() != n_ids {
            return bad(format!(
                "{} token texts for {n_ids} token ids",
                self.tokens.len()
            ));
        }
        if !(self.top_p.is_finite() && (0.0..=1.0).contains(&self.top_p)) {
            return bad(format!("top_p {} is not in [0, 1]", self.top_p));
        }
        let entropies = |at: usize, name: &str, v: &[f64], n: usize| -> Result<()> {
            if v.len() != n {
                return bad(format!(
                    "position {at}: {name} has {} values, expected {n}",
                    v.len()
                ));
            }
            match v.iter().position(|h| !(h.is_finite() && *h >= 0.0)) {
                Some(j) => bad(format!(
                    "position {at}: {name}[{j}] = {} is not a finite non-negative entropy",
                    v[j]
                )),
                None => Ok(()),
            }
        };
        let probabilities = |at: usize, pairs: &[(u32, f64)]| -> Result<()> {
            match pairs
                .iter()
                .find(|(_, p)| !(p.is_finite() && (0.0..=1.0).contains(p)))
            {
                Some((id, p)) => bad(format!(
                    "position {at}: top-k probability {p} of token {id} is not in [0, 1]"
                )),
                None => Ok(()),
            }
        };
        for p in &self.positions {
            let at = p.position;
            if at >= n_ids {
                return bad(format!("position {at} is beyond the {n_ids} token ids"));
            }
            entropies(at, "shannon", &p.shannon, l)?;
            for (key, v) in &p.renyi {
                entropies(at, &format!("renyi[{key}]"), v, l)?;
            }
            if p.top_p_count.len() != l {
                return bad(format!(
                    "position {at}: top_p_count has {} values, expected {l}",
                    p.top_p_count.len()
                ));
            }
            if let Some(ids) = &p.top_p_ids {
                if ids.len() != l {
                    return bad(format!(
                        "position {at}: top_p_ids has {} layers, expected {l}",
                        ids.len()
                    ));
                }
            }
            if let Some(shared) = &p.top_p_shared {
                if shared.len() != l - 1 {
                    return bad(format!(
                        "position {at}: top_p_shared has {} values, expected {}",
                        shared.len(),
                        l - 1
                    ));
                }
            }
            if !p.top_k.is_empty() && p.top_k.len() != l {
                return bad(format!(
                    "position {at}: top_k has {} layers, expected {l}",
                    p.top_k.len()
                ));
            }
            for pairs in &p.top_k {
                probabilities(at, pairs)?;
            }
            if let Some(kl) = &p.kl_to_final {
                entropies(at, "kl_to_final", kl, l)?;
            }
            if let Some(t) = &p.target {
                if t.logprob.len() != l || t.rank.len() != l {
                    return bad(format!(
                        "position {at}: target has {} log-probabilities and {} ranks, expected {l}",
                        t.logprob.len(),
                        t.rank.len()
                    ));
                }
                if let Some(j) = t
                    .logprob
                    .iter()
                    .position(|v| !(v.is_finite() || *v == f64::NEG_INFINITY) || *v > 1e-9)
                {
                    return bad(format!(
                        "position {at}: target log-probability [{j}] = {} is not ≤ 0",
                        t.logprob[j]
                    ));
                }
                if t.rank.contains(&0) {
                    return bad(format!(
                        "position {at}: a target rank is 0 (ranks start at 1)"
                    ));
                }
            }
            if let Some(d) = p.prediction_depth {
                if d == 0 || d > l + 1 {
                    return bad(format!(
                        "position {at}: prediction depth {d} is not in 1..={}",
                        l + 1
                    ));
                }
            }
            if let Some(e) = &p.embed {
                entropies(at, "embed.shannon", &[e.shannon], 1)?;
                for (key, h) in &e.renyi {
                    entropies(at, &format!("embed.renyi[{key}]"), &[*h], 1)?;
                }
                probabilities(at, &e.top_k)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A consistent two-position, three-block profile with every optional field.
    fn profile() -> EntropyProfile {
        let position = |at: usize| PositionProfile {
            position: at,
            shannon: vec![3.0, 2.0, 1.0],
            renyi: BTreeMap::from([("0.5".to_string(), vec![3.5, 2.5, 1.5])]),
            top_p_count: vec![9, 4, 1],
            top_p_ids: Some(vec![vec![1, 2], vec![1], vec![1]]),
            top_p_shared: Some(vec![1, 1]),
            top_k: vec![vec![(1, 0.5)], vec![(1, 0.7)], vec![(1, 0.9)]],
            embed: Some(LayerStats {
                shannon: 5.0,
                renyi: BTreeMap::new(),
                top_p_count: 30,
                top_p_ids: None,
                top_k: vec![(4, 0.1)],
                extras: Extras {
                    kl_to_final: Some(4.0),
                    target_logprob: Some(-9.0),
                    target_rank: Some(7),
                },
            }),
            kl_to_final: Some(vec![2.0, 1.0, 0.0]),
            target: Some(TargetTrace {
                id: 2,
                logprob: vec![-3.0, -1.0, -0.1],
                rank: vec![4, 2, 1],
            }),
            prediction_depth: Some(2),
        };
        EntropyProfile {
            schema_version: Some(schema::PROFILE_SCHEMA_VERSION),
            model: "m".into(),
            prompt: "p".into(),
            n_blocks: 3,
            read_point: ReadPoint::Block,
            prompt_ids: vec![1, 2],
            generated_ids: vec![3],
            tokens: vec!["a".into(), "b".into(), "c".into()],
            generated_text: "c".into(),
            top_p: 0.6,
            positions: vec![position(0), position(1)],
            provenance: None,
        }
    }

    fn refused(p: &EntropyProfile, needle: &str) {
        let line = p.to_json_line().unwrap();
        let e = EntropyProfile::from_json(&line).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }

    #[test]
    fn profiles_read_back_are_checked_before_use() {
        let good = profile();
        let back = EntropyProfile::from_json(&good.to_json_line().unwrap()).unwrap();
        assert_eq!(back, good);

        let mut p = profile();
        p.positions[1].shannon.pop();
        refused(&p, "position 1: shannon has 2 values, expected 3");
        let mut p = profile();
        p.n_blocks = 4;
        refused(&p, "shannon has 3 values, expected 4");
        let mut p = profile();
        p.n_blocks = 0;
        refused(&p, "n_layers is 0");
        let mut p = profile();
        p.positions[0].shannon[1] = -0.5;
        refused(&p, "shannon[1] = -0.5");
        let mut p = profile();
        p.positions[0].renyi.insert("2".into(), vec![1.0]);
        refused(&p, "renyi[2] has 1 values");
        let mut p = profile();
        p.positions[1].position = 3;
        refused(&p, "position 3 is beyond the 3 token ids");
        let mut p = profile();
        p.positions[0].top_p_count.push(1);
        refused(&p, "top_p_count has 4 values");
        let mut p = profile();
        p.positions[0].top_p_shared = Some(vec![1, 1, 1]);
        refused(&p, "top_p_shared has 3 values, expected 2");
        let mut p = profile();
        p.positions[0].top_k[2][0].1 = 1.5;
        refused(&p, "top-k probability 1.5");
        let mut p = profile();
        p.tokens.pop();
        refused(&p, "2 token texts for 3 token ids");
        let mut p = profile();
        p.top_p = 2.0;
        refused(&p, "top_p 2 is not in [0, 1]");
        let mut p = profile();
        p.positions[0].kl_to_final = Some(vec![1.0, -2.0, 0.0]);
        refused(&p, "kl_to_final[1] = -2");
        let mut p = profile();
        p.positions[1].target.as_mut().unwrap().rank.pop();
        refused(&p, "target has 3 log-probabilities and 2 ranks, expected 3");
        let mut p = profile();
        p.positions[1].target.as_mut().unwrap().logprob[0] = 0.5;
        refused(&p, "target log-probability [0] = 0.5 is not ≤ 0");
        let mut p = profile();
        p.positions[1].target.as_mut().unwrap().rank[2] = 0;
        refused(&p, "ranks start at 1");
        let mut p = profile();
        p.positions[0].prediction_depth = Some(5);
        refused(&p, "position 0: prediction depth 5 is not in 1..=4");
        let mut p = profile();
        p.positions[1].prediction_depth = Some(0);
        refused(&p, "prediction depth 0");
        // Read at both points, every array has 2L entries.
        let mut p = profile();
        p.read_point = ReadPoint::Both;
        refused(&p, "shannon has 3 values, expected 6");
        assert_eq!(
            ReadPoint::Both.labels(2),
            ["1.a", "1", "2.a", "2"].map(String::from)
        );
        assert!(ReadPoint::parse("mlp")
            .unwrap_err()
            .to_string()
            .contains("unknown read point `mlp`"));
        // JSON cannot carry NaN: serde refuses the null it becomes.
        let mut p = profile();
        p.positions[0].shannon[0] = f64::NAN;
        assert!(EntropyProfile::from_json(&p.to_json_line().unwrap()).is_err());
    }
}
