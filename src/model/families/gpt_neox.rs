//! GPT-NeoX / Pythia: LayerNorm, attention and MLP in parallel on the same input (unless
//! `use_parallel_residual` is false), partial rotary, per-head fused `query_key_value`, exact-GELU
//! MLP, untied `embed_out` head.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::{common, Family, HfConfig};
use crate::error::Result;
use crate::model::decoder::{DecoderSpec, MlpNames, NormKind, QkvNames, TensorNames};
use crate::model::weights::Weights;
use crate::model::Architecture;

pub(crate) const FAMILY: Family = Family {
    architecture: Architecture::GptNeoX,
    name: "gpt_neox",
    description: "gpt_neox (GPT-NeoX, Pythia)",
    model_types: &["gpt_neox", "GPTNeoXForCausalLM"],
    gguf_architecture: None,
    gguf_names: None,
    from_hf,
    from_gguf: None,
};

fn from_hf(c: &HfConfig, _w: &Weights) -> Result<DecoderSpec> {
    let names = TensorNames {
        embed: "gpt_neox.embed_in".into(),
        positions: None,
        layers: "gpt_neox.layers".into(),
        final_norm: "gpt_neox.final_layer_norm".into(),
        lm_head: "embed_out".into(),
        attn_norm: "input_layernorm",
        qkv: QkvNames::FusedPerHead("attention.query_key_value"),
        o: "attention.dense",
        qk_norm: None,
        post_attn_norm: None,
        mlp_norm: "post_attention_layernorm",
        post_mlp_norm: None,
        mlp: MlpNames::Plain {
            up: "mlp.dense_h_to_4h",
            down: "mlp.dense_4h_to_h",
        },
    };
    let mut spec = common::llama_like(c, names)?;
    // transformers' GPTNeoXConfig defaults: 25 % of each head rotated, base 10000.
    let fraction = c.opt_partial_rotary_factor()?.unwrap_or(0.25);
    spec.attention_kinds[0].rotary = Some(common::rotary_with_fraction(
        c,
        spec.head_dim,
        None,
        10000.0,
        fraction,
    )?);
    spec.norm = NormKind::Layer;
    spec.norm_eps = c.opt_f64("layer_norm_eps")?.unwrap_or(1e-5);
    spec.activation = c.activation("gelu")?;
    spec.parallel_residual = c.bool_or("use_parallel_residual", true)?;
    Ok(spec)
}
