//! Model families: each file parses its configuration (Hugging Face `config.json`, and the GGUF
//! header where llama.cpp writes the family) into the decoder's `DecoderSpec`, and names its
//! tensors (Hugging Face names, and their llama.cpp GGUF names). The block loop is not here: it
//! exists once, in `model/decoder.rs`.
//!
//! Adding a family: write `families/<name>.rs` with a `pub(crate) const FAMILY: Family`, add a
//! variant to [`Architecture`] and one line to `FAMILIES`. See the README, "Adding a family".

use serde_json::Value;

use super::config::GgufMetadata;
use super::decoder::DecoderSpec;
use super::weights::{GgufNames, Weights};
use super::Architecture;
use crate::error::{Error, Result};

pub mod auto;
mod common;
pub mod gemma;
pub mod gemma2;
pub mod gemma3;
pub mod gpt2;
pub mod gpt_neox;
pub mod llama;
pub mod mistral;
pub mod phi3;
pub mod qwen2;
pub mod qwen3;

/// One model family: how to recognise it and how to read it.
pub(crate) struct Family {
    pub architecture: Architecture,
    /// Hugging Face `model_type`s and `architectures` class names of the family.
    pub model_types: &'static [&'static str],
    /// GGUF `general.architecture`, where llama.cpp writes the family.
    pub gguf_architecture: Option<&'static str>,
    pub gguf_names: Option<&'static GgufNames>,
    pub from_hf: fn(&HfConfig, &Weights) -> Result<DecoderSpec>,
    pub from_gguf: Option<fn(&GgufMetadata, &Weights) -> Result<DecoderSpec>>,
}

/// Every family, in the order they are tried by name.
pub(crate) static FAMILIES: &[Family] = &[
    llama::FAMILY,
    gemma3::FAMILY,
    gemma::FAMILY,
    gemma2::FAMILY,
    qwen2::FAMILY,
    qwen3::FAMILY,
    mistral::FAMILY,
    phi3::FAMILY,
    gpt2::FAMILY,
    gpt_neox::FAMILY,
    auto::FAMILY,
];

pub(crate) fn by_architecture(arch: Architecture) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| f.architecture == arch)
}

/// The family of a Hugging Face `model_type` (or class name); None when unknown.
pub(crate) fn by_model_type(model_type: &str) -> Option<&'static Family> {
    FAMILIES
        .iter()
        .find(|f| f.model_types.contains(&model_type))
}

/// The family of a GGUF `general.architecture`.
pub(crate) fn by_gguf_architecture(name: &str) -> Option<&'static Family> {
    FAMILIES
        .iter()
        .find(|f| f.gguf_architecture == Some(name) && f.from_gguf.is_some())
}

/// The llama.cpp names shared by the Llama-like families (Llama, Mistral, Qwen 2/3, Gemma 1).
pub(crate) static LLAMA_GGUF_NAMES: GgufNames = GgufNames {
    model: &[
        ("model.embed_tokens", "token_embd"),
        ("model.norm", "output_norm"),
        ("lm_head", "output"),
        ("model.rope_freqs", "rope_freqs"),
    ],
    layers: "model.layers",
    block: &[
        ("input_layernorm", "attn_norm"),
        ("self_attn.q_proj", "attn_q"),
        ("self_attn.k_proj", "attn_k"),
        ("self_attn.v_proj", "attn_v"),
        ("self_attn.o_proj", "attn_output"),
        ("self_attn.q_norm", "attn_q_norm"),
        ("self_attn.k_norm", "attn_k_norm"),
        ("post_attention_layernorm", "ffn_norm"),
        ("mlp.gate_proj", "ffn_gate"),
        ("mlp.up_proj", "ffn_up"),
        ("mlp.down_proj", "ffn_down"),
    ],
};

/// Gemma 2 and 3: the norm after attention is `post_attention_norm`; `ffn_norm` is the norm before
/// the MLP.
pub(crate) static GEMMA_SANDWICH_GGUF_NAMES: GgufNames = GgufNames {
    model: &[
        ("model.embed_tokens", "token_embd"),
        ("model.norm", "output_norm"),
        ("lm_head", "output"),
    ],
    layers: "model.layers",
    block: &[
        ("input_layernorm", "attn_norm"),
        ("self_attn.q_proj", "attn_q"),
        ("self_attn.k_proj", "attn_k"),
        ("self_attn.v_proj", "attn_v"),
        ("self_attn.o_proj", "attn_output"),
        ("self_attn.q_norm", "attn_q_norm"),
        ("self_attn.k_norm", "attn_k_norm"),
        ("post_attention_layernorm", "post_attention_norm"),
        ("pre_feedforward_layernorm", "ffn_norm"),
        ("post_feedforward_layernorm", "post_ffw_norm"),
        ("mlp.gate_proj", "ffn_gate"),
        ("mlp.up_proj", "ffn_up"),
        ("mlp.down_proj", "ffn_down"),
    ],
};

/// A Hugging Face `config.json`, read key by key with errors that name the key.
///
/// Both config generations are understood: the older top-level `rope_theta`, `rope_scaling`,
/// `partial_rotary_factor` (and GPT-NeoX's `rotary_emb_base`, `rotary_pct`), and the
/// `rope_parameters` object that transformers 5 writes.
#[derive(Clone, Debug)]
pub struct HfConfig {
    json: Value,
}

impl HfConfig {
    pub fn new(json: Value) -> Self {
        Self { json }
    }

    pub fn json(&self) -> &Value {
        &self.json
    }

    /// `model_type`, else the first `architectures` class name.
    pub fn model_type(&self) -> Option<&str> {
        self.json["model_type"]
            .as_str()
            .or_else(|| self.json["architectures"][0].as_str())
    }

    fn value(&self, key: &str) -> Option<&Value> {
        self.json.get(key).filter(|v| !v.is_null())
    }

    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        self.value(key)
            .map(|v| {
                v.as_u64().map(|x| x as usize).ok_or_else(|| {
                    Error::Config(format!(
                        "config.json: `{key}` should be a non-negative integer, found {v}"
                    ))
                })
            })
            .transpose()
    }

    pub fn usize(&self, key: &str) -> Result<usize> {
        self.opt_usize(key)?
            .ok_or_else(|| Error::Config(format!("config.json lacks `{key}`")))
    }

    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        self.value(key)
            .map(|v| {
                v.as_f64().ok_or_else(|| {
                    Error::Config(format!(
                        "config.json: `{key}` should be a number, found {v}"
                    ))
                })
            })
            .transpose()
    }

    pub fn f64(&self, key: &str) -> Result<f64> {
        self.opt_f64(key)?
            .ok_or_else(|| Error::Config(format!("config.json lacks `{key}`")))
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&str>> {
        self.value(key)
            .map(|v| {
                v.as_str().ok_or_else(|| {
                    Error::Config(format!(
                        "config.json: `{key}` should be a string, found {v}"
                    ))
                })
            })
            .transpose()
    }

    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        match self.value(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| {
                Error::Config(format!(
                    "config.json: `{key}` should be true or false, found {v}"
                ))
            }),
        }
    }

    /// The RoPE parameters: `rope_parameters` (transformers 5; for models with several attention
    /// kinds, the entry of `layer_type`), else the older top-level keys.
    fn rope_parameters(&self, layer_type: Option<&str>) -> Option<&Value> {
        let p = self.value("rope_parameters")?;
        match layer_type {
            Some(t) if p.get(t).is_some() => p.get(t),
            _ if p.get("full_attention").is_some() => p.get("full_attention"),
            _ => Some(p),
        }
    }

    /// The RoPE base of `layer_type` (None: the model's only or global kind).
    pub fn rope_theta(&self, layer_type: Option<&str>, default: f64) -> Result<f64> {
        if let Some(t) = self
            .rope_parameters(layer_type)
            .and_then(|p| p.get("rope_theta"))
            .and_then(Value::as_f64)
        {
            return Ok(t);
        }
        Ok(self
            .opt_f64("rope_theta")?
            .or(self.opt_f64("rotary_emb_base")?)
            .unwrap_or(default))
    }

    /// The fraction of each head that is rotated (1 for full rotary).
    pub fn partial_rotary_factor(&self) -> Result<f64> {
        if let Some(f) = self
            .rope_parameters(None)
            .and_then(|p| p.get("partial_rotary_factor"))
            .and_then(Value::as_f64)
        {
            return Ok(f);
        }
        Ok(self
            .opt_f64("partial_rotary_factor")?
            .or(self.opt_f64("rotary_pct")?)
            .unwrap_or(1.0))
    }

    /// The RoPE scaling object (`rope_scaling`, or `rope_parameters` when its type is not
    /// "default"), if any.
    pub fn rope_scaling(&self, layer_type: Option<&str>) -> Option<&Value> {
        if let Some(p) = self.rope_parameters(layer_type) {
            let kind = p
                .get("rope_type")
                .or_else(|| p.get("type"))
                .and_then(Value::as_str);
            return match kind {
                None | Some("default") => None,
                Some(_) => Some(p),
            };
        }
        self.value("rope_scaling")
    }

    /// The activation named by `hidden_activation` (Gemma) or `hidden_act`, else `default`.
    pub(crate) fn activation(&self, default: &str) -> Result<super::decoder::Activation> {
        let name = self
            .opt_str("hidden_activation")?
            .or(self.opt_str("hidden_act")?)
            .or(self.opt_str("activation_function")?)
            .unwrap_or(default);
        super::decoder::Activation::from_hf(name)
    }

    /// The `config.json` in the older layout that the family's serde configs read: values of
    /// `rope_parameters` copied to their top-level keys.
    pub fn legacy_json(&self) -> Value {
        let mut json = self.json.clone();
        if let Value::Object(map) = &mut json {
            if let Ok(theta) = self.rope_theta(None, f64::NAN) {
                if theta.is_finite() && !map.contains_key("rope_theta") {
                    map.insert("rope_theta".into(), theta.into());
                }
            }
            if let Some(p) = self.rope_parameters(Some("sliding_attention")) {
                if let Some(t) = p.get("rope_theta") {
                    map.entry("rope_local_base_freq").or_insert(t.clone());
                }
            }
            if let Some(s) = self.rope_scaling(None).cloned() {
                map.entry("rope_scaling").or_insert(s);
            }
        }
        json
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_config_generations_give_the_same_rope() {
        let old = HfConfig::new(serde_json::json!({
            "rope_theta": 500000.0, "partial_rotary_factor": 0.5,
            "rope_scaling": {"rope_type": "llama3", "factor": 8.0}
        }));
        let new = HfConfig::new(serde_json::json!({
            "rope_parameters": {"rope_theta": 500000.0, "partial_rotary_factor": 0.5,
                                "rope_type": "llama3", "factor": 8.0}
        }));
        for c in [&old, &new] {
            assert_eq!(c.rope_theta(None, 1.0).unwrap(), 500000.0);
            assert_eq!(c.partial_rotary_factor().unwrap(), 0.5);
            assert_eq!(c.rope_scaling(None).unwrap()["factor"], 8.0);
        }
        let neox = HfConfig::new(serde_json::json!({"rotary_emb_base": 10000, "rotary_pct": 0.25}));
        assert_eq!(neox.rope_theta(None, 1.0).unwrap(), 10000.0);
        assert_eq!(neox.partial_rotary_factor().unwrap(), 0.25);
        let gemma3 = HfConfig::new(serde_json::json!({"rope_parameters": {
            "full_attention": {"rope_theta": 1000000.0, "rope_type": "default"},
            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}}));
        assert_eq!(gemma3.rope_theta(None, 1.0).unwrap(), 1e6);
        assert_eq!(
            gemma3.rope_theta(Some("sliding_attention"), 1.0).unwrap(),
            1e4
        );
        assert!(gemma3.rope_scaling(None).is_none());
        let legacy = gemma3.legacy_json();
        assert_eq!(legacy["rope_theta"], 1e6);
        assert_eq!(legacy["rope_local_base_freq"], 1e4);
    }

    #[test]
    fn missing_and_mistyped_keys_are_named() {
        let c = HfConfig::new(serde_json::json!({"hidden_size": "big"}));
        let e = c.usize("hidden_size").unwrap_err().to_string();
        assert!(e.contains("hidden_size") && e.contains("integer"), "{e}");
        let e = c.usize("num_hidden_layers").unwrap_err().to_string();
        assert!(e.contains("lacks `num_hidden_layers`"), "{e}");
    }

    #[test]
    fn every_architecture_has_one_family() {
        for f in FAMILIES {
            assert_eq!(
                FAMILIES
                    .iter()
                    .filter(|g| g.architecture == f.architecture)
                    .count(),
                1
            );
            for t in f.model_types {
                assert_eq!(by_model_type(t).unwrap().architecture, f.architecture);
            }
        }
    }
}
