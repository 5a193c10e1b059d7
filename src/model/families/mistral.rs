//! Mistral: the Llama decoder with sliding-window attention on every layer.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::{common, Family, HfConfig, LLAMA_GGUF_NAMES};
use crate::error::Result;
use crate::model::decoder::{DecoderSpec, TensorNames};
use crate::model::weights::Weights;
use crate::model::Architecture;

pub(crate) const FAMILY: Family = Family {
    architecture: Architecture::Mistral,
    name: "mistral",
    description: "mistral (Mistral)",
    model_types: &["mistral", "MistralForCausalLM"],
    // llama.cpp writes Mistral checkpoints as `llama`.
    gguf_architecture: None,
    gguf_names: Some(&LLAMA_GGUF_NAMES),
    from_hf,
    from_gguf: None,
};

fn from_hf(c: &HfConfig, _w: &Weights) -> Result<DecoderSpec> {
    let spec = common::llama_like(c, TensorNames::llama())?;
    Ok(match c.opt_usize("sliding_window")? {
        Some(window) => common::with_sliding_layers(spec, window, |_| true),
        None => spec,
    })
}
