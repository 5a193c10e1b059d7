//! Gemma (1): the Llama decoder with (1 + w) RMSNorm, √d embedding scale, GELU-tanh MLP and a
//! tied head.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::{common, Family, HfConfig, LLAMA_GGUF_NAMES};
use crate::error::Result;
use crate::model::decoder::{Activation, DecoderSpec, NormKind, TensorNames};
use crate::model::weights::Weights;
use crate::model::Architecture;

pub(crate) const FAMILY: Family = Family {
    architecture: Architecture::Gemma,
    name: "gemma",
    description: "gemma (Gemma 1)",
    model_types: &["gemma", "GemmaForCausalLM"],
    gguf_architecture: None,
    gguf_names: Some(&LLAMA_GGUF_NAMES),
    from_hf,
    from_gguf: None,
};

fn from_hf(c: &HfConfig, _w: &Weights) -> Result<DecoderSpec> {
    gemma_base(c, TensorNames::llama())
}

/// What every Gemma generation shares.
pub(crate) fn gemma_base(c: &HfConfig, names: TensorNames) -> Result<DecoderSpec> {
    let mut spec = common::llama_like(c, names)?;
    spec.norm = NormKind::RmsOnePlus;
    // Gemma means the tanh GELU even where its configs say `gelu` (transformers 4 reads
    // `hidden_activation`, transformers 5 maps `hidden_act: gelu` to tanh).
    let name = c
        .opt_str("hidden_activation")?
        .or(c.opt_str("hidden_act")?)
        .unwrap_or("gelu_pytorch_tanh");
    spec.activation = match name {
        "gelu" => Activation::GeluTanh,
        other => Activation::from_hf(other)?,
    };
    // Hugging Face multiplies by √d rounded to the weights' dtype.
    spec.embed_scale = Some((spec.d_model as f32).sqrt() as f64);
    spec.tie_word_embeddings = c.bool_or("tie_word_embeddings", true)?;
    Ok(spec)
}
