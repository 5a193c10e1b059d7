//! GPT-2: LayerNorm, learned absolute positions, `Conv1D` projections stored [in, out] with
//! biases, fused `c_attn`, tanh-GELU MLP, tied head.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::{common, Family, HfConfig};
use crate::error::{Error, Result};
use crate::model::config::GgufMetadata;
use crate::model::decoder::{
    AttentionKind, DecoderSpec, MlpNames, NormKind, QkvNames, TensorNames,
};
use crate::model::weights::{GgufNames, Weights};
use crate::model::Architecture;

pub(crate) const FAMILY: Family = Family {
    architecture: Architecture::Gpt2,
    name: "gpt2",
    description: "gpt2 (GPT-2)",
    model_types: &["gpt2", "GPT2LMHeadModel"],
    gguf_architecture: Some("gpt2"),
    gguf_names: Some(&GGUF_NAMES),
    from_hf,
    from_gguf: Some(from_gguf),
};

static GGUF_NAMES: GgufNames = GgufNames {
    base: None,
    model: &[
        ("transformer.wte", "token_embd"),
        ("transformer.wpe", "position_embd"),
        ("transformer.ln_f", "output_norm"),
        ("lm_head", "output"),
    ],
    layers: "transformer.h",
    block: &[
        ("ln_1", "attn_norm"),
        ("attn.c_attn", "attn_qkv"),
        ("attn.c_proj", "attn_output"),
        ("ln_2", "ffn_norm"),
        ("mlp.c_fc", "ffn_up"),
        ("mlp.c_proj", "ffn_down"),
    ],
};

fn from_hf(c: &HfConfig, w: &Weights) -> Result<DecoderSpec> {
    if c.bool_or("scale_attn_by_inverse_layer_idx", false)? {
        return Err(Error::Config(
            "GPT-2 with scale_attn_by_inverse_layer_idx is not supported".into(),
        ));
    }
    // The Hub's gpt2 checkpoints store the base model's names (`h.0…`, `wte`), checkpoints saved
    // from GPT2LMHeadModel prefix them with `transformer.`.
    let p = if w.contains("wte.weight") && !w.contains("transformer.wte.weight") {
        ""
    } else {
        "transformer."
    };
    let either = |a: &str, b: &str| -> Result<usize> {
        match c.opt_usize(a)? {
            Some(v) => Ok(v),
            None => c.usize(b),
        }
    };
    let d_model = either("n_embd", "hidden_size")?;
    let n_layers = either("n_layer", "num_hidden_layers")?;
    let n_heads = either("n_head", "num_attention_heads")?;
    if n_heads == 0 {
        return Err(Error::Config("n_head must be positive".into()));
    }
    let head_dim = d_model / n_heads;
    let eps = match c.opt_f64("layer_norm_epsilon")? {
        Some(e) => e,
        None => c.opt_f64("layer_norm_eps")?.unwrap_or(1e-5),
    };
    Ok(DecoderSpec {
        d_model,
        vocab_size: c.usize("vocab_size")?,
        context_length: either("n_positions", "max_position_embeddings")?,
        n_layers,
        n_heads,
        n_kv_heads: n_heads,
        head_dim,
        norm: NormKind::Layer,
        norm_eps: eps,
        activation: c.activation("gelu_new")?,
        parallel_residual: false,
        conv1d: true,
        embed_scale: None,
        attention_scale: if c.bool_or("scale_attn_weights", true)? {
            1.0 / (head_dim as f64).sqrt()
        } else {
            1.0
        },
        attention_softcap: None,
        attention_kinds: vec![AttentionKind {
            rotary: None,
            window: None,
        }],
        layer_attention: vec![0; n_layers],
        final_logit_softcap: None,
        tie_word_embeddings: c.bool_or("tie_word_embeddings", true)?,
        names: TensorNames {
            embed: format!("{p}wte"),
            positions: Some(format!("{p}wpe")),
            layers: format!("{p}h"),
            final_norm: format!("{p}ln_f"),
            lm_head: "lm_head".into(),
            attn_norm: "ln_1",
            qkv: QkvNames::Fused("attn.c_attn"),
            o: "attn.c_proj",
            qk_norm: None,
            post_attn_norm: None,
            mlp_norm: "ln_2",
            post_mlp_norm: None,
            mlp: MlpNames::Plain {
                up: "mlp.c_fc",
                down: "mlp.c_proj",
            },
        },
        config_json: c.json().clone(),
    })
}

fn from_gguf(md: &GgufMetadata, w: &Weights) -> Result<DecoderSpec> {
    let mut cfg = common::gguf_to_hf(md, "gpt2")?;
    cfg["activation_function"] = "gelu_new".into();
    from_hf(&HfConfig::new(cfg), w)
}
