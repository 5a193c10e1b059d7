//! Gemma 3 (text): embeddings scaled by √d, RMSNorm with (1 + w), pre- and post-norms around
//! attention and MLP, q/k norms, interleaved local sliding-window and global layers with their own
//! RoPE bases, GELU-tanh MLP, optional final logit soft-capping.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use serde::{Deserialize, Serialize};

use super::{common, gemma, Family, HfConfig, GEMMA_SANDWICH_GGUF_NAMES};
use crate::error::{Error, Result};
use crate::model::config::{EosTokenIds, GgufMetadata, RopeScalingConfig};
use crate::model::decoder::{AttentionKind, DecoderSpec, TensorNames};
use crate::model::layers::{RopeScaling, Rotary};
use crate::model::weights::Weights;
use crate::model::Architecture;

/// Every `SLIDING_WINDOW_PATTERN`-th layer is global; the others are local (sliding window).
/// Neither llama.cpp's GGUF nor older configs record it: both hard-code 6 for Gemma 3.
const SLIDING_WINDOW_PATTERN: usize = 6;
const LOCAL_ROPE_BASE: f64 = 10000.0;

/// Mirrors a Hugging Face `Gemma3TextConfig` (`config.json` of `Gemma3ForCausalLM`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Config {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    #[serde(default = "default_local_base")]
    pub rope_local_base_freq: f64,
    #[serde(default)]
    pub rope_scaling: Option<RopeScalingConfig>,
    pub query_pre_attn_scalar: f64,
    pub sliding_window: usize,
    /// "sliding_attention" or "full_attention" per layer (newer configs).
    #[serde(default)]
    pub layer_types: Option<Vec<String>>,
    #[serde(default)]
    pub sliding_window_pattern: Option<usize>,
    #[serde(default)]
    pub final_logit_softcapping: Option<f64>,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    #[serde(default = "default_true")]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    #[serde(default)]
    pub eos_token_id: Option<EosTokenIds>,
}

fn default_rope_theta() -> f64 {
    1_000_000.0
}
fn default_local_base() -> f64 {
    LOCAL_ROPE_BASE
}
fn default_true() -> bool {
    true
}

impl Config {
    /// Reads the `gemma3.*` keys of a GGUF header.
    pub fn from_gguf(md: &GgufMetadata) -> Result<Self> {
        let hidden_size = md.usize("gemma3.embedding_length")?;
        let heads = md.usize("gemma3.attention.head_count")?;
        if heads == 0 {
            return Err(Error::Config(
                "GGUF metadata `gemma3.attention.head_count` is 0".into(),
            ));
        }
        let head_dim = md
            .opt_usize("gemma3.attention.key_length")?
            .unwrap_or(hidden_size / heads);
        let layers = md.usize("gemma3.block_count")?;
        // As llama.cpp: the 27B model (62 layers) scales queries by (d / heads)^-½, the others by head_dim^-½.
        let query_pre_attn_scalar = if layers == 62 {
            (hidden_size / heads) as f64
        } else {
            head_dim as f64
        };
        let rope_scaling = match md.opt_str("gemma3.rope.scaling.type")? {
            Some("linear") => Some(RopeScalingConfig::linear(
                md.f64("gemma3.rope.scaling.factor")?,
            )),
            _ => None,
        };
        Ok(Self {
            hidden_size,
            intermediate_size: md.usize("gemma3.feed_forward_length")?,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            num_key_value_heads: md
                .opt_usize("gemma3.attention.head_count_kv")?
                .unwrap_or(heads),
            head_dim,
            rms_norm_eps: md.f64("gemma3.attention.layer_norm_rms_epsilon")?,
            rope_theta: md.opt_f64("gemma3.rope.freq_base")?.unwrap_or(1_000_000.0),
            rope_local_base_freq: LOCAL_ROPE_BASE,
            rope_scaling,
            query_pre_attn_scalar,
            sliding_window: md.usize("gemma3.attention.sliding_window")?,
            layer_types: None,
            sliding_window_pattern: Some(SLIDING_WINDOW_PATTERN),
            final_logit_softcapping: md.opt_f64("gemma3.final_logit_softcapping")?,
            max_position_embeddings: md.usize("gemma3.context_length")?,
            vocab_size: md.vocab_size("gemma3.vocab_size")?,
            tie_word_embeddings: !md.has_tensor("output.weight"),
            bos_token_id: md.opt_u32("tokenizer.ggml.bos_token_id")?,
            eos_token_id: md
                .opt_u32("tokenizer.ggml.eos_token_id")?
                .map(EosTokenIds::One),
        })
    }

    /// Whether layer `i` (0-based) attends globally.
    pub fn is_global(&self, i: usize) -> bool {
        match &self.layer_types {
            Some(types) => types.get(i).is_some_and(|t| t == "full_attention"),
            None => (i + 1).is_multiple_of(
                self.sliding_window_pattern
                    .unwrap_or(SLIDING_WINDOW_PATTERN),
            ),
        }
    }
}

pub(crate) const FAMILY: Family = Family {
    architecture: Architecture::Gemma3,
    name: "gemma3",
    description: "gemma3 (Gemma 3 text)",
    model_types: &["gemma3_text", "Gemma3ForCausalLM"],
    gguf_architecture: Some("gemma3"),
    gguf_names: Some(&GEMMA_SANDWICH_GGUF_NAMES),
    from_hf,
    from_gguf: Some(from_gguf),
};

/// Gemma 3 from its `config.json` through [`HfConfig`], as every family reads it: both the older
/// keys (`rope_theta`, `rope_local_base_freq`, `rope_scaling`, `sliding_window_pattern`) and
/// transformers 5's (`rope_parameters` per layer type, `layer_types`); absent keys take
/// `Gemma3TextConfig`'s defaults.
fn from_hf(c: &HfConfig, _w: &Weights) -> Result<DecoderSpec> {
    spec_of(c)
}

fn spec_of(c: &HfConfig) -> Result<DecoderSpec> {
    let mut names = TensorNames::llama().with_sandwich_norms();
    names.qk_norm = Some(("self_attn.q_norm", "self_attn.k_norm"));
    let mut spec = gemma::gemma_base(c, names)?;
    let head_dim = spec.head_dim;
    let global = AttentionKind {
        rotary: Some(common::rotary(c, head_dim, None, 1_000_000.0)?),
        window: None,
    };
    let sliding_entry = c
        .json()
        .get("rope_parameters")
        .and_then(|p| p.get("sliding_attention"))
        .is_some();
    let local_theta = match c.opt_f64("rope_local_base_freq")? {
        Some(t) => t,
        None if sliding_entry => c.rope_theta(Some("sliding_attention"), LOCAL_ROPE_BASE)?,
        None => LOCAL_ROPE_BASE,
    };
    let local = AttentionKind {
        // Local layers never scale their RoPE.
        rotary: Some(Rotary::new(
            head_dim,
            local_theta,
            &RopeScaling::None,
            false,
        )),
        window: Some(c.opt_usize("sliding_window")?.unwrap_or(4096)),
    };
    let layers = spec.n_layers;
    let sliding: Vec<bool> = match common::layer_types(c, layers)? {
        Some(types) => types,
        None => {
            let pattern = c
                .opt_usize("sliding_window_pattern")?
                .unwrap_or(SLIDING_WINDOW_PATTERN);
            if pattern == 0 {
                return Err(Error::Config(
                    "sliding_window_pattern must be at least 1 (every n-th layer is global)".into(),
                ));
            }
            (0..layers)
                .map(|i| !(i + 1).is_multiple_of(pattern))
                .collect()
        }
    };
    spec.attention_scale = c
        .opt_f64("query_pre_attn_scalar")?
        .unwrap_or(256.0)
        .powf(-0.5);
    spec.attention_kinds = vec![global, local];
    spec.layer_attention = sliding.iter().map(|&s| usize::from(s)).collect();
    spec.final_logit_softcap = c.opt_f64("final_logit_softcapping")?;
    Ok(spec)
}

fn from_gguf(md: &GgufMetadata, w: &Weights) -> Result<DecoderSpec> {
    from_hf(
        &HfConfig::new(serde_json::to_value(Config::from_gguf(md)?)?),
        w,
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use candle_core::quantized::gguf_file::{Content, Value, VersionedMagic};

    use super::*;

    fn header(pairs: &[(&str, Value)]) -> Content {
        Content {
            magic: VersionedMagic::GgufV3,
            metadata: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<HashMap<_, _>>(),
            tensor_infos: HashMap::new(),
            tensor_data_offset: 0,
        }
    }

    #[test]
    fn zero_heads_and_zero_pattern_are_errors_not_panics() {
        let content = header(&[
            ("gemma3.embedding_length", Value::U32(640)),
            ("gemma3.attention.head_count", Value::U32(0)),
            ("gemma3.block_count", Value::U32(18)),
        ]);
        let e = Config::from_gguf(&GgufMetadata::new(&content))
            .unwrap_err()
            .to_string();
        assert!(e.contains("head_count") && e.contains('0'), "{e}");

        let c = HfConfig::new(serde_json::json!({
            "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16,
            "rms_norm_eps": 1e-6, "query_pre_attn_scalar": 16, "sliding_window": 4,
            "sliding_window_pattern": 0, "max_position_embeddings": 64, "vocab_size": 10
        }));
        let e = spec_of(&c).unwrap_err().to_string();
        assert!(e.contains("sliding_window_pattern"), "{e}");
    }
}
