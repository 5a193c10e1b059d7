//! Model families: each file parses its configuration (Hugging Face `config.json`, and the GGUF
//! header where llama.cpp writes the family) into the decoder's `DecoderSpec`, and names its
//! tensors (Hugging Face names, and their llama.cpp GGUF names). The block loop is not here: it
//! exists once, in `model/decoder.rs`.
//!
//! Adding a family: write `families/<name>.rs` with a `pub(crate) const FAMILY: Family`, add a
//! variant to [`Architecture`] and one line to `FAMILIES`. See CONTRIBUTING.md, "Adding a family".

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

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
    /// Short name (`Architecture::as_str`, reports, provenance).
    pub name: &'static str,
    /// What it covers, for error messages and listings.
    pub description: &'static str,
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

/// The families, as listed in error messages.
pub(crate) fn supported() -> String {
    FAMILIES
        .iter()
        .map(|f| f.description)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The GGUF architectures that load (llama.cpp's `general.architecture` names).
pub(crate) fn gguf_supported() -> String {
    FAMILIES
        .iter()
        .filter(|f| f.from_gguf.is_some())
        .filter_map(|f| f.gguf_architecture)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The family of a GGUF `general.architecture`.
pub(crate) fn by_gguf_architecture(name: &str) -> Option<&'static Family> {
    FAMILIES
        .iter()
        .find(|f| f.gguf_architecture == Some(name) && f.from_gguf.is_some())
}

/// The llama.cpp names shared by the Llama-like families (Llama, Mistral, Qwen 2/3, Gemma 1).
pub(crate) static LLAMA_GGUF_NAMES: GgufNames = GgufNames {
    base: None,
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

/// Gemma 2 and 3: Llama's names, except that the norm after attention is `post_attention_norm`,
/// `ffn_norm` is the norm before the MLP, and the MLP has a norm after it.
pub(crate) static GEMMA_SANDWICH_GGUF_NAMES: GgufNames = GgufNames {
    base: Some(&LLAMA_GGUF_NAMES),
    model: &[],
    layers: "model.layers",
    block: &[
        ("post_attention_layernorm", "post_attention_norm"),
        ("pre_feedforward_layernorm", "ffn_norm"),
        ("post_feedforward_layernorm", "post_ffw_norm"),
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

    /// Whether the config has `key` at all (null included): transformers applies its own default
    /// only to absent keys, while `null` means "none".
    pub fn present(&self, key: &str) -> bool {
        self.json.get(key).is_some()
    }

    /// `key` as a number when present (null: None), else `default`.
    pub fn f64_or_absent(&self, key: &str, default: Option<f64>) -> Result<Option<f64>> {
        if self.present(key) {
            self.opt_f64(key)
        } else {
            Ok(default)
        }
    }

    /// `key` as an integer when present (null: None), else `default`.
    pub fn usize_or_absent(&self, key: &str, default: Option<usize>) -> Result<Option<usize>> {
        if self.present(key) {
            self.opt_usize(key)
        } else {
            Ok(default)
        }
    }

    fn value(&self, key: &str) -> Option<&Value> {
        self.json.get(key).filter(|v| !v.is_null())
    }

    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        self.value(key)
            .map(|v| {
                let x = v.as_u64().ok_or_else(|| {
                    Error::Config(format!(
                        "config.json: `{key}` should be a non-negative integer, found {v}"
                    ))
                })?;
                crate::model::config::within_bound("config.json:", key, x)
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

    /// The RoPE base of `layer_type` (None: the model's only or global kind). A `rope_parameters`
    /// base that is not a number, or that contradicts a top-level `rope_theta` for the same
    /// (global) attention, is an error: never a silent default.
    pub fn rope_theta(&self, layer_type: Option<&str>, default: f64) -> Result<f64> {
        let top = self.opt_f64("rope_theta")?;
        if let Some(v) = self
            .rope_parameters(layer_type)
            .and_then(|p| p.get("rope_theta"))
        {
            let t = v
                .as_f64()
                .filter(|t| t.is_finite() && *t > 0.0)
                .ok_or_else(|| {
                    Error::Config(format!(
                        "rope_parameters.rope_theta is {v}; a RoPE base must be a positive number"
                    ))
                })?;
            let global = matches!(layer_type, None | Some("full_attention"));
            if let Some(top) = top.filter(|_| global) {
                if (top - t).abs() > 1e-9 * t.abs() {
                    return Err(Error::Config(format!(
                        "the config gives two RoPE bases: rope_theta = {top} and rope_parameters.rope_theta = {t}; remove the stale one"
                    )));
                }
            }
            return Ok(t);
        }
        Ok(top.or(self.opt_f64("rotary_emb_base")?).unwrap_or(default))
    }

    /// The fraction of each head that is rotated (1 for full rotary).
    pub fn partial_rotary_factor(&self) -> Result<f64> {
        Ok(self.opt_partial_rotary_factor()?.unwrap_or(1.0))
    }

    /// The fraction of each head that is rotated, when the config states it.
    pub fn opt_partial_rotary_factor(&self) -> Result<Option<f64>> {
        if let Some(f) = self
            .rope_parameters(None)
            .and_then(|p| p.get("partial_rotary_factor"))
            .and_then(Value::as_f64)
        {
            return Ok(Some(f));
        }
        Ok(self
            .opt_f64("partial_rotary_factor")?
            .or(self.opt_f64("rotary_pct")?))
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
        // Both generations at once: agreeing is fine, contradicting or mistyped is an error.
        let both = HfConfig::new(serde_json::json!({
            "rope_theta": 500000.0, "rope_parameters": {"rope_theta": 500000.0}}));
        assert_eq!(both.rope_theta(None, 1.0).unwrap(), 500000.0);
        let e = HfConfig::new(serde_json::json!({
            "rope_theta": 10000.0, "rope_parameters": {"rope_theta": 500000.0}}))
        .rope_theta(None, 1.0)
        .unwrap_err()
        .to_string();
        assert!(e.contains("two RoPE bases") && e.contains("10000"), "{e}");
        let e = HfConfig::new(serde_json::json!({"rope_parameters": {"rope_theta": "5e5"}}))
            .rope_theta(None, 1.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("positive number"), "{e}");
        // A top-level base with per-kind parameters: the sliding kind's own base is not a contradiction.
        let mixed = HfConfig::new(
            serde_json::json!({"rope_theta": 1000000.0, "rope_parameters": {
            "full_attention": {"rope_theta": 1000000.0},
            "sliding_attention": {"rope_theta": 10000.0}}}),
        );
        assert_eq!(
            mixed.rope_theta(Some("sliding_attention"), 1.0).unwrap(),
            1e4
        );
    }

    #[test]
    fn missing_and_mistyped_keys_are_named() {
        let c = HfConfig::new(serde_json::json!({"hidden_size": "big"}));
        let e = c.usize("hidden_size").unwrap_err().to_string();
        assert!(e.contains("hidden_size") && e.contains("integer"), "{e}");
        let e = c.usize("num_hidden_layers").unwrap_err().to_string();
        assert!(e.contains("lacks `num_hidden_layers`"), "{e}");
    }

    /// A weight store with one unrelated tensor: enough for the families that read only the config.
    fn no_weights() -> (tempfile::TempDir, Weights) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        let t = candle_core::Tensor::zeros(1, candle_core::DType::F32, &candle_core::Device::Cpu)
            .unwrap();
        candle_core::safetensors::save(&std::collections::HashMap::from([("x", t)]), &path)
            .unwrap();
        let w = Weights::safetensors(
            dir.path(),
            &[path],
            crate::model::WeightDType::F32,
            &candle_core::Device::Cpu,
        )
        .unwrap();
        (dir, w)
    }

    fn spec(arch: Architecture, json: Value) -> Result<DecoderSpec> {
        let (_dir, w) = no_weights();
        let mut base = serde_json::json!({"hidden_size": 64, "num_hidden_layers": 30,
            "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 64});
        for (k, v) in json.as_object().unwrap() {
            base[k] = v.clone();
        }
        let spec = (by_architecture(arch).unwrap().from_hf)(&HfConfig::new(base), &w)?;
        spec.validate()?;
        Ok(spec)
    }

    #[test]
    fn absent_keys_take_transformers_defaults_and_null_means_none() {
        use crate::model::decoder::Activation;
        // Gemma 2: caps 50 / 30, query scalar 256, window 4096 on even layers.
        let s = spec(Architecture::Gemma2, serde_json::json!({})).unwrap();
        assert_eq!(
            (s.attention_softcap, s.final_logit_softcap),
            (Some(50.0), Some(30.0))
        );
        assert_eq!(s.attention_scale, 1.0 / 16.0);
        assert_eq!(s.attention_kinds[s.layer_attention[0]].window, Some(4096));
        assert_eq!(s.attention_kinds[s.layer_attention[1]].window, None);
        let s = spec(
            Architecture::Gemma2,
            serde_json::json!({"attn_logit_softcapping": null, "final_logit_softcapping": null}),
        )
        .unwrap();
        assert_eq!((s.attention_softcap, s.final_logit_softcap), (None, None));
        // Qwen2 with use_sliding_window: 4096 from layer 28 on.
        let s = spec(
            Architecture::Qwen2,
            serde_json::json!({"use_sliding_window": true}),
        )
        .unwrap();
        let windows: Vec<Option<usize>> = s
            .layer_attention
            .iter()
            .map(|&k| s.attention_kinds[k].window)
            .collect();
        assert_eq!(windows[27], None);
        assert_eq!(windows[28], Some(4096));
        let s = spec(
            Architecture::Qwen2,
            serde_json::json!({"sliding_window": 4096}),
        )
        .unwrap();
        assert!(s.attention_kinds.iter().all(|k| k.window.is_none()));
        // GPT-NeoX: 25 % of each head rotated unless the config says otherwise.
        let s = spec(Architecture::GptNeoX, serde_json::json!({})).unwrap();
        assert_eq!(s.attention_kinds[0].rotary.as_ref().unwrap().dim(), 4);
        let s = spec(
            Architecture::GptNeoX,
            serde_json::json!({"rotary_pct": 1.0}),
        )
        .unwrap();
        assert_eq!(s.attention_kinds[0].rotary.as_ref().unwrap().dim(), 16);
        // Gemma's `gelu` is the tanh GELU.
        let s = spec(
            Architecture::Gemma,
            serde_json::json!({"hidden_act": "gelu"}),
        )
        .unwrap();
        assert_eq!(s.activation, Activation::GeluTanh);
        // GPT-2 without score scaling.
        let s = spec(
            Architecture::Gpt2,
            serde_json::json!({"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64,
                               "scale_attn_weights": false}),
        )
        .unwrap();
        assert_eq!(s.attention_scale, 1.0);
    }

    #[test]
    fn bad_configs_are_named() {
        let err = |arch, json| spec(arch, json).unwrap_err().to_string();
        let e = err(
            Architecture::Phi3,
            serde_json::json!({"rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
                "long_factor": [1.0, 1.0, 1.0]}, "original_max_position_embeddings": 32}),
        );
        assert!(e.contains("long_factor") && e.contains("needs 8"), "{e}");
        let e = err(
            Architecture::Mistral,
            serde_json::json!({"sliding_window": 0}),
        );
        assert!(e.contains("sliding window of 0"), "{e}");
        let e = err(
            Architecture::Auto,
            serde_json::json!({"logits_scaling": 8.0}),
        );
        assert!(e.contains("logits_scaling"), "{e}");
        let e = err(
            Architecture::Llama,
            serde_json::json!({"partial_rotary_factor": 0.1}),
        );
        assert!(e.contains("rotary dimension"), "{e}");
        let e = err(
            Architecture::Llama,
            serde_json::json!({"hidden_act": "relu2"}),
        );
        assert!(e.contains("relu2"), "{e}");
    }

    #[test]
    fn yarn_configs_load() {
        let s = spec(
            Architecture::Qwen2,
            serde_json::json!({"rope_scaling": {"type": "yarn", "factor": 4.0,
                "original_max_position_embeddings": 32768}}),
        )
        .unwrap();
        assert!(s.attention_kinds[0].rotary.is_some());
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
