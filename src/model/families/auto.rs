//! Auto-detection for a decoder-only checkpoint whose `model_type` no family claims: the Llama
//! module layout (`model.embed_tokens`, `model.layers.{i}.…`, `model.norm`) with the variations
//! the decoder supports, each read from the tensors present (fused or separate projections,
//! gated or plain MLP, q/k norms, sandwich norms, LayerNorm or RMSNorm, biases) and from the
//! config (activation, RoPE, sliding window, soft-caps). Whatever does not fit is named.
//!
//! What neither tensors nor config reveal cannot be detected: a Gemma-style `(1 + w)` norm or an
//! embedding scale looks like a plain RMSNorm here, so such families need a file of their own.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::{common, Family, HfConfig};
use crate::error::{Error, Result};
use crate::model::decoder::{DecoderSpec, MlpNames, NormKind, QkvNames, TensorNames};
use crate::model::weights::Weights;
use crate::model::Architecture;

pub(crate) const FAMILY: Family = Family {
    architecture: Architecture::Auto,
    name: "auto",
    description: "other decoders in the Llama module layout (auto-detected)",
    model_types: &[],
    gguf_architecture: None,
    gguf_names: None,
    from_hf,
    from_gguf: None,
};

/// Config flags of architectures the decoder does not implement.
const UNSUPPORTED_FLAGS: [&str; 5] = [
    "alibi",
    "parallel_attn",
    "use_parallel_residual",
    "is_encoder_decoder",
    "cross_attention_hidden_size",
];

/// Config scalars that change the computation (Granite, MiniCPM, Cohere) unless they are 1.
const UNSUPPORTED_SCALARS: [&str; 7] = [
    "embedding_multiplier",
    "residual_multiplier",
    "attention_multiplier",
    "logits_scaling",
    "scale_emb",
    "scale_depth",
    "logit_scale",
];

fn misfit(what: String) -> Error {
    Error::Config(format!(
        "auto-detected decoder: {what}; supported families: {}",
        Architecture::supported()
    ))
}

fn from_hf(c: &HfConfig, w: &Weights) -> Result<DecoderSpec> {
    for flag in UNSUPPORTED_FLAGS {
        if let Some(v) = c
            .json()
            .get(flag)
            .filter(|v| v.as_bool() == Some(true) || v.is_number())
        {
            return Err(misfit(format!(
                "config.json sets `{flag}: {v}`, which the decoder does not implement"
            )));
        }
    }
    for key in UNSUPPORTED_SCALARS {
        if let Some(v) = c
            .json()
            .get(key)
            .filter(|v| !v.is_null() && v.as_f64() != Some(1.0))
        {
            return Err(misfit(format!(
                "config.json sets `{key}: {v}`, a scale the decoder does not apply; this family needs its own file"
            )));
        }
    }
    if !w.contains("model.embed_tokens.weight") {
        return Err(misfit(
            "no tensor `model.embed_tokens.weight` (only the Llama module layout is auto-detected)"
                .into(),
        ));
    }
    let block = w.pp("model.layers.0");
    let has = |name: &str| block.contains(&format!("{name}.weight"));
    let mut names = TensorNames::llama();
    names.qkv = if has("self_attn.q_proj") {
        names.qkv
    } else if has("self_attn.qkv_proj") {
        QkvNames::Fused("self_attn.qkv_proj")
    } else {
        return Err(misfit(
            "block 0 has neither `self_attn.q_proj` nor `self_attn.qkv_proj`".into(),
        ));
    };
    if !has("self_attn.o_proj") {
        return Err(misfit("block 0 has no `self_attn.o_proj`".into()));
    }
    names.mlp = if has("mlp.gate_proj") && has("mlp.up_proj") {
        names.mlp
    } else if has("mlp.gate_up_proj") {
        MlpNames::GatedFused {
            gate_up: "mlp.gate_up_proj",
            down: "mlp.down_proj",
        }
    } else if has("mlp.up_proj") {
        MlpNames::Plain {
            up: "mlp.up_proj",
            down: "mlp.down_proj",
        }
    } else {
        return Err(misfit(
            "block 0 has no MLP as `mlp.gate_proj`+`mlp.up_proj`, `mlp.gate_up_proj` or `mlp.up_proj`".into(),
        ));
    };
    if has("self_attn.q_norm") {
        names.qk_norm = Some(("self_attn.q_norm", "self_attn.k_norm"));
    }
    if has("pre_feedforward_layernorm") {
        names = names.with_sandwich_norms();
    }
    if !has("input_layernorm") {
        return Err(misfit("block 0 has no `input_layernorm`".into()));
    }
    let mut spec = common::llama_like(c, names)?;
    if block.contains("input_layernorm.bias") {
        spec.norm = NormKind::Layer;
        spec.norm_eps = c.opt_f64("layer_norm_eps")?.unwrap_or(1e-5);
    }
    spec.attention_softcap = c.opt_f64("attn_logit_softcapping")?;
    spec.final_logit_softcap = c.opt_f64("final_logit_softcapping")?;
    if let Some(s) = c.opt_f64("query_pre_attn_scalar")? {
        spec.attention_scale = s.powf(-0.5);
    }
    let windowed = c.bool_or("use_sliding_window", true)?;
    if let Some(window) = c.opt_usize("sliding_window")?.filter(|_| windowed) {
        let types = common::layer_types(c, spec.n_layers)?;
        spec = common::with_sliding_layers(spec, window, |i| types.as_ref().is_none_or(|t| t[i]));
    }
    Ok(spec)
}
