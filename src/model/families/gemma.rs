//! Gemma (1): the Llama decoder with (1 + w) RMSNorm, √d embedding scale, GELU-tanh MLP and a
//! tied head.

use super::{common, Family, HfConfig, LLAMA_GGUF_NAMES};
use crate::error::Result;
use crate::model::decoder::{DecoderSpec, NormKind, TensorNames};
use crate::model::weights::Weights;
use crate::model::Architecture;

pub(crate) const FAMILY: Family = Family {
    architecture: Architecture::Gemma,
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
    // Gemma configs name `hidden_act: gelu` but run `hidden_activation` (tanh GELU when unset).
    spec.activation = match c.opt_str("hidden_activation")? {
        Some(name) => crate::model::decoder::Activation::from_hf(name)?,
        None => crate::model::decoder::Activation::GeluTanh,
    };
    // Hugging Face multiplies by √d rounded to the weights' dtype.
    spec.embed_scale = Some((spec.d_model as f32).sqrt() as f64);
    spec.tie_word_embeddings = c.bool_or("tie_word_embeddings", true)?;
    Ok(spec)
}
