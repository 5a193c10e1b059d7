//! Configuration helpers shared by the families: typed access to GGUF metadata and the pieces
//! of Hugging Face `config.json` that several families have in common.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value};
use serde::{Deserialize, Serialize};

use super::layers::RopeScaling;
use crate::error::{Error, Result};

/// `eos_token_id` is an integer or a list in Hugging Face configs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum EosTokenIds {
    One(u32),
    Many(Vec<u32>),
}

impl EosTokenIds {
    pub fn to_vec(&self) -> Vec<u32> {
        match self {
            EosTokenIds::One(i) => vec![*i],
            EosTokenIds::Many(v) => v.clone(),
        }
    }
}

/// Hugging Face `rope_scaling` (either `type` or `rope_type` names the kind).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RopeScalingConfig {
    #[serde(default, alias = "type")]
    pub rope_type: Option<String>,
    #[serde(default)]
    pub factor: Option<f64>,
    #[serde(default)]
    pub low_freq_factor: Option<f64>,
    #[serde(default)]
    pub high_freq_factor: Option<f64>,
    #[serde(default)]
    pub original_max_position_embeddings: Option<usize>,
}

impl RopeScalingConfig {
    pub fn linear(factor: f64) -> Self {
        Self {
            rope_type: Some("linear".into()),
            factor: Some(factor),
            ..Default::default()
        }
    }

    pub fn to_scaling(&self) -> Result<RopeScaling> {
        let need = |v: Option<f64>, name: &str| {
            v.ok_or_else(|| Error::Config(format!("rope_scaling needs `{name}`")))
        };
        match self.rope_type.as_deref() {
            None | Some("default") => Ok(RopeScaling::None),
            Some("linear") => Ok(RopeScaling::Linear {
                factor: need(self.factor, "factor")?,
            }),
            Some("llama3") => Ok(RopeScaling::Llama3 {
                factor: need(self.factor, "factor")?,
                low_freq_factor: need(self.low_freq_factor, "low_freq_factor")?,
                high_freq_factor: need(self.high_freq_factor, "high_freq_factor")?,
                original_max_position_embeddings: self
                    .original_max_position_embeddings
                    .ok_or_else(|| {
                        Error::Config(
                            "rope_scaling needs `original_max_position_embeddings`".into(),
                        )
                    })?,
            }),
            Some(other) => Err(Error::Config(format!(
                "unsupported rope_scaling type `{other}` (supported: linear, llama3)"
            ))),
        }
    }
}

/// The largest value a size key of a real model takes, with a wide margin: a corrupt or hostile file
/// must get an error, not an allocation of its claimed size. Keys are matched by their last
/// component, so `llama.block_count` and `num_hidden_layers` share a bound.
fn size_bound(key: &str) -> Option<u64> {
    let last = key.rsplit('.').next().unwrap_or(key);
    let bound: u64 = match last {
        "num_hidden_layers" | "n_layer" | "num_layers" | "block_count" => 1 << 10,
        "hidden_size" | "n_embd" | "embedding_length" => 1 << 18,
        "num_attention_heads"
        | "n_head"
        | "num_key_value_heads"
        | "head_count"
        | "head_count_kv" => 1 << 14,
        "head_dim" | "key_length" | "value_length" | "dimension_count" => 1 << 16,
        "intermediate_size" | "n_inner" | "feed_forward_length" => 1 << 22,
        "vocab_size" => 1 << 24,
        _ => return None,
    };
    Some(bound)
}

/// `value` of `key` as usize, refused beyond [`size_bound`].
pub(crate) fn within_bound(what: &str, key: &str, value: u64) -> Result<usize> {
    if let Some(bound) = size_bound(key) {
        if value > bound {
            return Err(Error::Config(format!(
                "{what} `{key}` is {value}, beyond any real model (at most {bound}); the file is corrupt or not a model configuration"
            )));
        }
    }
    usize::try_from(value)
        .map_err(|_| Error::Config(format!("{what} `{key}` is {value}, beyond this machine")))
}

/// Typed, error-reporting access to a GGUF header.
pub struct GgufMetadata<'a> {
    pub metadata: &'a HashMap<String, Value>,
    tensors: Vec<&'a str>,
}

impl<'a> GgufMetadata<'a> {
    pub fn new(content: &'a Content) -> Self {
        Self {
            metadata: &content.metadata,
            tensors: content.tensor_infos.keys().map(|s| s.as_str()).collect(),
        }
    }

    fn get(&self, key: &str) -> Result<&'a Value> {
        self.metadata
            .get(key)
            .ok_or_else(|| Error::Config(format!("GGUF metadata lacks `{key}`")))
    }

    fn bad(key: &str, e: candle_core::Error) -> Error {
        Error::Config(format!("GGUF metadata `{key}` has the wrong type: {e}"))
    }

    fn as_u64(key: &str, v: &Value) -> Result<u64> {
        match v {
            Value::U8(x) => Ok(*x as u64),
            Value::U16(x) => Ok(*x as u64),
            Value::U32(x) => Ok(*x as u64),
            Value::U64(x) => Ok(*x),
            Value::I8(x) if *x >= 0 => Ok(*x as u64),
            Value::I16(x) if *x >= 0 => Ok(*x as u64),
            Value::I32(x) if *x >= 0 => Ok(*x as u64),
            Value::I64(x) if *x >= 0 => Ok(*x as u64),
            other => Err(Error::Config(format!(
                "GGUF metadata `{key}` should be a non-negative integer, found {other:?}"
            ))),
        }
    }

    pub fn usize(&self, key: &str) -> Result<usize> {
        let v = Self::as_u64(key, self.get(key)?)?;
        within_bound("GGUF metadata", key, v)
    }

    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        match self.metadata.get(key) {
            None => Ok(None),
            Some(v) => Ok(Some(within_bound(
                "GGUF metadata",
                key,
                Self::as_u64(key, v)?,
            )?)),
        }
    }

    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>> {
        self.opt_usize(key)?
            .map(|v| {
                u32::try_from(v).map_err(|_| {
                    Error::Config(format!(
                        "GGUF metadata `{key}` is {v}, beyond a 32-bit token id"
                    ))
                })
            })
            .transpose()
    }

    pub fn f64(&self, key: &str) -> Result<f64> {
        match self.get(key)? {
            Value::F32(x) => Ok(*x as f64),
            Value::F64(x) => Ok(*x),
            v => Ok(Self::as_u64(key, v)? as f64),
        }
    }

    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        if self.metadata.contains_key(key) {
            self.f64(key).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.metadata.get(key) {
            None => Ok(None),
            Some(v) => v.to_bool().map(Some).map_err(|e| Self::bad(key, e)),
        }
    }

    pub fn str(&self, key: &str) -> Result<&'a str> {
        self.get(key)?
            .to_string()
            .map(|s| s.as_str())
            .map_err(|e| Self::bad(key, e))
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>> {
        if self.metadata.contains_key(key) {
            self.str(key).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn array(&self, key: &str) -> Result<&'a Vec<Value>> {
        self.get(key)?.to_vec().map_err(|e| Self::bad(key, e))
    }

    pub fn has_tensor(&self, name: &str) -> bool {
        self.tensors.contains(&name)
    }

    /// The vocabulary size: the explicit key when present, else the tokenizer's token count.
    pub fn vocab_size(&self, key: &str) -> Result<usize> {
        match self.opt_usize(key)? {
            Some(v) => Ok(v),
            None => Ok(self.array("tokenizer.ggml.tokens")?.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rope_scaling_config_parses_hf_forms() {
        let c: RopeScalingConfig = serde_json::from_str(
            r#"{"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192, "rope_type": "llama3"}"#,
        )
        .unwrap();
        assert!(
            matches!(c.to_scaling().unwrap(), RopeScaling::Llama3 { factor, .. } if factor == 32.0)
        );
        let c: RopeScalingConfig =
            serde_json::from_str(r#"{"type": "linear", "factor": 8.0}"#).unwrap();
        assert_eq!(c.to_scaling().unwrap(), RopeScaling::Linear { factor: 8.0 });
        let c: RopeScalingConfig =
            serde_json::from_str(r#"{"rope_type": "yarn", "factor": 8.0}"#).unwrap();
        assert!(c.to_scaling().unwrap_err().to_string().contains("yarn"));
        let c: RopeScalingConfig =
            serde_json::from_str(r#"{"rope_type": "llama3", "factor": 8.0}"#).unwrap();
        assert!(c
            .to_scaling()
            .unwrap_err()
            .to_string()
            .contains("low_freq_factor"));
    }

    #[test]
    fn eos_ids_accept_int_or_list() {
        let one: EosTokenIds = serde_json::from_str("2").unwrap();
        let many: EosTokenIds = serde_json::from_str("[1, 106]").unwrap();
        assert_eq!(one.to_vec(), vec![2]);
        assert_eq!(many.to_vec(), vec![1, 106]);
    }
}
