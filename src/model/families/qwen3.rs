//! Qwen3: Qwen2 without q/k/v biases and with RMS norms on each query and key head.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::{common, qwen2, Family, HfConfig, LLAMA_GGUF_NAMES};
use crate::error::Result;
use crate::model::config::GgufMetadata;
use crate::model::decoder::{DecoderSpec, TensorNames};
use crate::model::weights::Weights;
use crate::model::Architecture;

pub(crate) const FAMILY: Family = Family {
    architecture: Architecture::Qwen3,
    name: "qwen3",
    description: "qwen3 (Qwen3)",
    model_types: &["qwen3", "Qwen3ForCausalLM"],
    gguf_architecture: Some("qwen3"),
    gguf_names: Some(&LLAMA_GGUF_NAMES),
    from_hf,
    from_gguf: Some(from_gguf),
};

fn from_hf(c: &HfConfig, _w: &Weights) -> Result<DecoderSpec> {
    let mut names = TensorNames::llama();
    names.qk_norm = Some(("self_attn.q_norm", "self_attn.k_norm"));
    qwen2::qwen_sliding(c, common::llama_like(c, names)?)
}

fn from_gguf(md: &GgufMetadata, w: &Weights) -> Result<DecoderSpec> {
    from_hf(&HfConfig::new(common::gguf_to_hf(md, "qwen3")?), w)
}
