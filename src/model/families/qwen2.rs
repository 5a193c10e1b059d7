//! Qwen2 / Qwen2.5: the Llama decoder with q/k/v biases (read from the weights), untied head on
//! the larger sizes, and sliding windows only when `use_sliding_window` asks for them.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::{common, Family, HfConfig, LLAMA_GGUF_NAMES};
use crate::error::Result;
use crate::model::config::GgufMetadata;
use crate::model::decoder::{DecoderSpec, TensorNames};
use crate::model::weights::Weights;
use crate::model::Architecture;

pub(crate) const FAMILY: Family = Family {
    architecture: Architecture::Qwen2,
    name: "qwen2",
    description: "qwen2 (Qwen2, Qwen2.5)",
    model_types: &["qwen2", "Qwen2ForCausalLM"],
    gguf_architecture: Some("qwen2"),
    gguf_names: Some(&LLAMA_GGUF_NAMES),
    from_hf,
    from_gguf: Some(from_gguf),
};

fn from_hf(c: &HfConfig, _w: &Weights) -> Result<DecoderSpec> {
    qwen_sliding(c, common::llama_like(c, TensorNames::llama())?)
}

/// Qwen's sliding windows: on the layers at or past `max_window_layers`, when enabled.
pub(crate) fn qwen_sliding(c: &HfConfig, spec: DecoderSpec) -> Result<DecoderSpec> {
    if !c.bool_or("use_sliding_window", false)? {
        return Ok(spec);
    }
    // transformers' defaults when the keys are absent: a 4096-token window from layer 28 on.
    let Some(window) = c.usize_or_absent("sliding_window", Some(4096))? else {
        return Ok(spec);
    };
    if let Some(types) = common::layer_types(c, spec.n_layers)? {
        return Ok(common::with_sliding_layers(spec, window, |i| types[i]));
    }
    let first = c.opt_usize("max_window_layers")?.unwrap_or(28);
    Ok(common::with_sliding_layers(spec, window, |i| i >= first))
}

fn from_gguf(md: &GgufMetadata, w: &Weights) -> Result<DecoderSpec> {
    from_hf(&HfConfig::new(common::gguf_to_hf(md, "qwen2")?), w)
}
