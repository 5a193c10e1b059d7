//! Where a profile comes from: enough to tell two profiles apart that must not be compared, and to
//! rerun one.

use serde::{Deserialize, Serialize};

/// The settings a profile was measured with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// Model name (file stem or repo id).
    pub model: String,
    /// sha256 of the weights ([`crate::model::fingerprint::model_sha256`]).
    pub model_sha256: String,
    /// Architecture (`llama`, `gemma3`).
    pub architecture: String,
    /// Weight precision (`q` for exact quantized, `f32`, `f16`, `bf16`).
    pub dtype: String,
    /// `cpu`, `cuda:0`, …
    pub device: String,
    /// Skipped blocks, numbered 1..=L (as [`crate::model::Model::set_skipped_blocks`] takes them).
    pub skipped_blocks: Vec<usize>,
    /// Rényi orders measured (keys as in the profile: `0.5`, `inf`).
    pub alphas: Vec<String>,
    pub top_p: f64,
    /// Threshold of the α = 0 support count.
    pub support_threshold: f64,
    /// Whether the prompt was wrapped in the model's chat template.
    pub chat_template: bool,
    /// Whether the tokenizer's BOS rule was applied.
    pub add_bos: bool,
    /// Whether generation went on past end-of-sequence.
    pub ignore_eos: bool,
    /// Sampling temperature (0: greedy), nucleus mass, seed.
    pub temperature: f64,
    pub sample_top_p: Option<f64>,
    pub seed: u64,
    /// Version of entropy-lens that measured it.
    pub crate_version: String,
    /// The lens, when not the logit lens (absent for the logit lens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lens: Option<crate::lens::LensRecord>,
}

/// This crate's version.
pub const CRATE_VERSION: &str = env!("CARGO_PKG_VERSION");
