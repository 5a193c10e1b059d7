//! Phi-3 / Phi-3.5: the Llama decoder with fused `qkv_proj` and `gate_up_proj`, partial rotary
//! and LongRoPE scaling (short factors, long ones past the original context).

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::{common, Family, HfConfig, LLAMA_GGUF_NAMES};
use crate::error::Result;
use crate::model::config::GgufMetadata;
use crate::model::decoder::{DecoderSpec, MlpNames, QkvNames, TensorNames};
use crate::model::weights::{GgufNames, Weights};
use crate::model::Architecture;

pub(crate) const FAMILY: Family = Family {
    architecture: Architecture::Phi3,
    name: "phi3",
    description: "phi3 (Phi-3, Phi-3.5)",
    model_types: &["phi3", "Phi3ForCausalLM"],
    gguf_architecture: Some("phi3"),
    gguf_names: Some(&GGUF_NAMES),
    from_hf,
    from_gguf: Some(from_gguf),
};

/// Llama's names, and llama.cpp keeps both fusions: `attn_qkv`, and `ffn_up` holding gate and up.
static GGUF_NAMES: GgufNames = GgufNames {
    base: Some(&LLAMA_GGUF_NAMES),
    model: &[
        ("model.rope_factors_long", "rope_factors_long"),
        ("model.rope_factors_short", "rope_factors_short"),
    ],
    layers: "model.layers",
    block: &[
        ("self_attn.qkv_proj", "attn_qkv"),
        ("mlp.gate_up_proj", "ffn_up"),
    ],
};

fn names() -> TensorNames {
    TensorNames {
        qkv: QkvNames::Fused("self_attn.qkv_proj"),
        mlp: MlpNames::GatedFused {
            gate_up: "mlp.gate_up_proj",
            down: "mlp.down_proj",
        },
        ..TensorNames::llama()
    }
}

fn from_hf(c: &HfConfig, _w: &Weights) -> Result<DecoderSpec> {
    let spec = common::llama_like(c, names())?;
    // Hugging Face applies `sliding_window` (2047 in Phi-3-mini-4k) to every layer.
    Ok(match c.opt_usize("sliding_window")? {
        Some(window) => common::with_sliding_layers(spec, window, |_| true),
        None => spec,
    })
}

fn from_gguf(md: &GgufMetadata, w: &Weights) -> Result<DecoderSpec> {
    let mut cfg = common::gguf_to_hf(md, "phi3")?;
    let m = w.pp("model");
    if m.contains("rope_factors_long.weight") {
        let factors = |name: &str| -> Result<Vec<f64>> {
            Ok(m.vector(name)?
                .to_vec1::<f32>()?
                .into_iter()
                .map(f64::from)
                .collect())
        };
        cfg["rope_scaling"] = serde_json::json!({
            "rope_type": "longrope",
            "long_factor": factors("rope_factors_long.weight")?,
            "short_factor": factors("rope_factors_short.weight")?,
            "original_max_position_embeddings":
                md.usize("phi3.rope.scaling.original_context_length")?,
            "attention_factor": md.opt_f64("phi3.rope.scaling.attn_factor")?,
        });
    }
    from_hf(&HfConfig::new(cfg), w)
}
