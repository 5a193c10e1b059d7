//! Gemma 2: Gemma with sandwich norms, attention and final logit soft-caps, `query_pre_attn_scalar`
//! and alternating sliding-window (even layers) and global layers.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::{common, gemma, Family, HfConfig, GEMMA_SANDWICH_GGUF_NAMES};
use crate::error::Result;
use crate::model::config::GgufMetadata;
use crate::model::decoder::{DecoderSpec, TensorNames};
use crate::model::weights::Weights;
use crate::model::Architecture;

pub(crate) const FAMILY: Family = Family {
    architecture: Architecture::Gemma2,
    name: "gemma2",
    description: "gemma2 (Gemma 2)",
    model_types: &["gemma2", "Gemma2ForCausalLM"],
    gguf_architecture: Some("gemma2"),
    gguf_names: Some(&GEMMA_SANDWICH_GGUF_NAMES),
    from_hf,
    from_gguf: Some(from_gguf),
};

fn from_hf(c: &HfConfig, _w: &Weights) -> Result<DecoderSpec> {
    let mut spec = gemma::gemma_base(c, TensorNames::llama().with_sandwich_norms())?;
    // transformers' Gemma2Config defaults apply to absent keys; `null` turns a cap off.
    let scalar = c.opt_f64("query_pre_attn_scalar")?.unwrap_or(256.0);
    spec.attention_scale = scalar.powf(-0.5);
    spec.attention_softcap = c.f64_or_absent("attn_logit_softcapping", Some(50.0))?;
    spec.final_logit_softcap = c.f64_or_absent("final_logit_softcapping", Some(30.0))?;
    let Some(window) = c.usize_or_absent("sliding_window", Some(4096))? else {
        return Ok(spec);
    };
    let types = common::layer_types(c, spec.n_layers)?;
    Ok(common::with_sliding_layers(
        spec,
        window,
        |i| match &types {
            Some(t) => t[i],
            None => i % 2 == 0,
        },
    ))
}

fn from_gguf(md: &GgufMetadata, w: &Weights) -> Result<DecoderSpec> {
    let mut cfg = common::gguf_to_hf(md, "gemma2")?;
    // llama.cpp does not store query_pre_attn_scalar: it scales by head_dim^-½, except for the
    // 27B model (46 layers), which uses (d / heads)^-½.
    let layers = md.usize("gemma2.block_count")?;
    cfg["query_pre_attn_scalar"] = if layers == 46 {
        let heads = md.usize("gemma2.attention.head_count")?;
        if heads == 0 {
            return Err(crate::error::Error::Config(
                "GGUF metadata `gemma2.attention.head_count` is 0".into(),
            ));
        }
        (md.usize("gemma2.embedding_length")? / heads).into()
    } else {
        cfg["head_dim"].clone()
    };
    from_hf(&HfConfig::new(cfg), w)
}
