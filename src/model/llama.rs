//! Llama family (Llama 2/3.x, SmolLM2): pre-norm blocks, grouped-query attention with RoPE,
//! SwiGLU MLP, tied or untied embeddings.

use serde::{Deserialize, Serialize};

use super::config::{EosTokenIds, GgufMetadata, RopeScalingConfig};
use super::decoder::{Activation, AttentionKind, DecoderSpec, NormLayout, NormWeight};
use super::layers::{RopeScaling, Rotary};
use super::weights::Weights;
use crate::error::{Error, Result};

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

    fn validate(&self) -> Result<()> {
        let heads = self.num_attention_heads;
        if heads == 0 || self.num_kv_heads() == 0 || !heads.is_multiple_of(self.num_kv_heads()) {
            return Err(Error::Config(format!(
                "num_attention_heads {heads} must be a positive multiple of num_key_value_heads {}",
                self.num_kv_heads()
            )));
        }
        if !self.head_dim().is_multiple_of(2) {
            return Err(Error::Config(format!(
                "head_dim {} must be even",
                self.head_dim()
            )));
        }
        Ok(())
    }
}

impl Config {
    /// The decoder this configuration describes: pre-norm blocks, SiLU-gated MLP, one rotary table.
    pub(crate) fn spec(&self, w: &Weights) -> Result<DecoderSpec> {
        self.validate()?;
        let mut scaling: RopeScaling = self
            .rope_scaling
            .as_ref()
            .map(|r| r.to_scaling())
            .transpose()?
            .unwrap_or_default();
        let m = w.pp("model");
        if m.contains("rope_freqs.weight") {
            let factors = m.vector("rope_freqs.weight")?.to_vec1::<f32>()?;
            scaling = RopeScaling::Factors(factors);
        }
        // llama.cpp stores Q/K rows permuted for its pairwise rotation.
        let rotary = Rotary::new(self.head_dim(), self.rope_theta, &scaling, w.is_gguf());
        Ok(DecoderSpec {
            n_layers: self.num_hidden_layers,
            n_heads: self.num_attention_heads,
            n_kv_heads: self.num_kv_heads(),
            head_dim: self.head_dim(),
            norm_eps: self.rms_norm_eps,
            norm_weight: NormWeight::Plain,
            norm_layout: NormLayout::Pre,
            qk_norm: false,
            activation: Activation::Silu,
            embed_scale: None,
            attention_scale: 1.0 / (self.head_dim() as f64).sqrt(),
            attention_kinds: vec![AttentionKind {
                rotary,
                window: None,
            }],
            layer_attention: vec![0; self.num_hidden_layers],
            final_logit_softcap: None,
            tie_word_embeddings: self.tie_word_embeddings,
            config_json: serde_json::to_value(self).unwrap_or_default(),
        })
    }
}
