//! Gemma 3 (text): embeddings scaled by √d, RMSNorm with (1 + w), pre- and post-norms around
//! attention and MLP, q/k norms, interleaved local sliding-window and global layers with their own
//! RoPE bases, GELU-tanh MLP, optional final logit soft-capping.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use serde::{Deserialize, Serialize};

use super::{Family, HfConfig, GEMMA_SANDWICH_GGUF_NAMES};
use crate::error::{Error, Result};
use crate::model::config::{EosTokenIds, GgufMetadata, RopeScalingConfig};
use crate::model::decoder::{Activation, AttentionKind, DecoderSpec, NormKind, TensorNames};
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

    fn validate(&self) -> Result<()> {
        if self.sliding_window_pattern == Some(0) {
            return Err(Error::Config(
                "sliding_window_pattern must be at least 1 (every n-th layer is global)".into(),
            ));
        }
        if let Some(types) = &self.layer_types {
            if types.len() != self.num_hidden_layers {
                return Err(Error::Config(format!(
                    "layer_types has {} entries for {} layers",
                    types.len(),
                    self.num_hidden_layers
                )));
            }
        }
        Ok(())
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

fn from_hf(c: &HfConfig, _w: &Weights) -> Result<DecoderSpec> {
    let cfg: Config = serde_json::from_value(c.legacy_json())
        .map_err(|e| Error::Config(format!("config.json: {e}")))?;
    cfg.spec(c)
}

fn from_gguf(md: &GgufMetadata, w: &Weights) -> Result<DecoderSpec> {
    from_hf(
        &HfConfig::new(serde_json::to_value(Config::from_gguf(md)?)?),
        w,
    )
}

impl Config {
    /// The decoder this configuration describes: sandwich norms with (1 + w) scales, q/k norms,
    /// GELU-tanh MLP, √d embedding scale, global layers with their RoPE base and local
    /// sliding-window layers with theirs.
    fn spec(&self, c: &HfConfig) -> Result<DecoderSpec> {
        self.validate()?;
        let scaling: RopeScaling = self
            .rope_scaling
            .as_ref()
            .map(|r| r.to_scaling())
            .transpose()?
            .unwrap_or_default();
        let global = AttentionKind {
            rotary: Some(Rotary::new(self.head_dim, self.rope_theta, &scaling, false)),
            window: None,
        };
        let local = AttentionKind {
            rotary: Some(Rotary::new(
                self.head_dim,
                self.rope_local_base_freq,
                &RopeScaling::None,
                false,
            )),
            window: Some(self.sliding_window),
        };
        let mut names = TensorNames::llama().with_sandwich_norms();
        names.qk_norm = Some(("self_attn.q_norm", "self_attn.k_norm"));
        Ok(DecoderSpec {
            d_model: self.hidden_size,
            vocab_size: self.vocab_size,
            context_length: self.max_position_embeddings,
            n_layers: self.num_hidden_layers,
            n_heads: self.num_attention_heads,
            n_kv_heads: self.num_key_value_heads,
            head_dim: self.head_dim,
            norm: NormKind::RmsOnePlus,
            norm_eps: self.rms_norm_eps,
            activation: Activation::GeluTanh,
            parallel_residual: false,
            conv1d: false,
            // Hugging Face multiplies by √d rounded to the weights' dtype (f32: 25.298222 for d = 640).
            embed_scale: Some((self.hidden_size as f32).sqrt() as f64),
            attention_scale: self.query_pre_attn_scalar.powf(-0.5),
            attention_softcap: None,
            attention_kinds: vec![global, local],
            layer_attention: (0..self.num_hidden_layers)
                .map(|i| if self.is_global(i) { 0 } else { 1 })
                .collect(),
            final_logit_softcap: self.final_logit_softcapping,
            tie_word_embeddings: self.tie_word_embeddings,
            names,
            config_json: c.json().clone(),
        })
    }
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

        let cfg: Config = serde_json::from_value(serde_json::json!({
            "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16,
            "rms_norm_eps": 1e-6, "query_pre_attn_scalar": 16, "sliding_window": 4,
            "sliding_window_pattern": 0, "max_position_embeddings": 64, "vocab_size": 10
        }))
        .unwrap();
        let e = cfg
            .spec(&HfConfig::new(serde_json::json!({})))
            .unwrap_err()
            .to_string();
        assert!(e.contains("sliding_window_pattern"), "{e}");
    }
}
