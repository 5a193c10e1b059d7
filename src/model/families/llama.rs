//! Llama family (Llama 2/3.x, SmolLM2): pre-norm blocks, grouped-query attention with RoPE,
//! SwiGLU MLP, tied or untied embeddings.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use serde::{Deserialize, Serialize};

use super::{common, Family, HfConfig, LLAMA_GGUF_NAMES};
use crate::error::Result;
use crate::model::config::{EosTokenIds, GgufMetadata, RopeScalingConfig};
use crate::model::decoder::{DecoderSpec, TensorNames};
use crate::model::layers::{RopeScaling, Rotary};
use crate::model::weights::Weights;
use crate::model::Architecture;

/// Mirrors the fields of a Hugging Face `LlamaForCausalLM` `config.json` that the runtime uses.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Config {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    #[serde(default)]
    pub head_dim: Option<usize>,
    pub rms_norm_eps: f64,
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    #[serde(default)]
    pub rope_scaling: Option<RopeScalingConfig>,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    #[serde(default)]
    pub eos_token_id: Option<EosTokenIds>,
}

fn default_rope_theta() -> f64 {
    10000.0
}

impl Config {
    pub fn head_dim(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads)
    }

    pub fn num_kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    /// Reads the `llama.*` keys of a GGUF header.
    pub fn from_gguf(md: &GgufMetadata) -> Result<Self> {
        let hidden_size = md.usize("llama.embedding_length")?;
        let heads = md.usize("llama.attention.head_count")?;
        let rope_scaling = match md.opt_str("llama.rope.scaling.type")? {
            Some("linear") => Some(RopeScalingConfig::linear(
                md.f64("llama.rope.scaling.factor")?,
            )),
            _ => None,
        };
        Ok(Self {
            hidden_size,
            intermediate_size: md.usize("llama.feed_forward_length")?,
            num_hidden_layers: md.usize("llama.block_count")?,
            num_attention_heads: heads,
            num_key_value_heads: md.opt_usize("llama.attention.head_count_kv")?,
            head_dim: md.opt_usize("llama.rope.dimension_count")?,
            rms_norm_eps: md.f64("llama.attention.layer_norm_rms_epsilon")?,
            rope_theta: md.opt_f64("llama.rope.freq_base")?.unwrap_or(10000.0),
            rope_scaling,
            max_position_embeddings: md.usize("llama.context_length")?,
            vocab_size: md.vocab_size("llama.vocab_size")?,
            tie_word_embeddings: !md.has_tensor("output.weight"),
            bos_token_id: md.opt_u32("tokenizer.ggml.bos_token_id")?,
            eos_token_id: md
                .opt_u32("tokenizer.ggml.eos_token_id")?
                .map(EosTokenIds::One),
        })
    }
}

pub(crate) const FAMILY: Family = Family {
    architecture: Architecture::Llama,
    name: "llama",
    description: "llama (Llama 2/3.x, SmolLM2)",
    model_types: &["llama", "LlamaForCausalLM"],
    gguf_architecture: Some("llama"),
    gguf_names: Some(&LLAMA_GGUF_NAMES),
    from_hf,
    from_gguf: Some(from_gguf),
};

/// Pre-norm blocks, SiLU-gated MLP, one rotary table (scaled by llama.cpp's `rope_freqs` when a
/// GGUF file carries them).
fn from_hf(c: &HfConfig, w: &Weights) -> Result<DecoderSpec> {
    let mut spec = common::llama_like(c, TensorNames::llama())?;
    let mut scaling = common::rope_scaling(c, None)?;
    let m = w.pp("model");
    if m.contains("rope_freqs.weight") {
        scaling = RopeScaling::Factors(m.vector("rope_freqs.weight")?.to_vec1::<f32>()?);
    }
    // llama.cpp stores Llama Q/K rows permuted for its pairwise rotation.
    let rotary = Rotary::new(
        spec.head_dim,
        c.rope_theta(None, 10000.0)?,
        &scaling,
        w.is_gguf(),
    );
    spec.attention_kinds[0].rotary = Some(rotary);
    Ok(spec)
}

fn from_gguf(md: &GgufMetadata, w: &Weights) -> Result<DecoderSpec> {
    let cfg = Config::from_gguf(md)?;
    from_hf(&HfConfig::new(serde_json::to_value(cfg)?), w)
}
