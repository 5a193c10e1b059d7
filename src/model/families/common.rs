//! What most families share: dimensions, heads and the rotary table read from a config, and the
//! Llama-shaped decoder that other families adjust.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use super::HfConfig;
use crate::error::{Error, Result};
use crate::model::config::GgufMetadata;
use crate::model::config::RopeScalingConfig;
use crate::model::decoder::{AttentionKind, DecoderSpec, NormKind, TensorNames};
use crate::model::layers::{RopeScaling, Rotary};

/// The RoPE scaling of a config: `linear`, `llama3`, `longrope` (Phi-3; `su` in older configs).
pub(crate) fn rope_scaling(c: &HfConfig, layer_type: Option<&str>) -> Result<RopeScaling> {
    let Some(v) = c.rope_scaling(layer_type) else {
        return Ok(RopeScaling::None);
    };
    let kind = v
        .get("rope_type")
        .or_else(|| v.get("type"))
        .and_then(|k| k.as_str());
    // transformers gives the top-level `original_max_position_embeddings` priority, and falls
    // back to `max_position_embeddings`.
    let original = || -> Result<usize> {
        match c.opt_usize("original_max_position_embeddings")? {
            Some(o) => Ok(o),
            None => match v
                .get("original_max_position_embeddings")
                .and_then(|x| x.as_u64())
            {
                Some(o) => Ok(o as usize),
                None => c.usize("max_position_embeddings"),
            },
        }
    };
    let num = |key: &str| v.get(key).and_then(|x| x.as_f64());
    if kind == Some("yarn") {
        let original = original()?;
        let factor = match num("factor") {
            Some(f) => f,
            None => c.usize("max_position_embeddings")? as f64 / original as f64,
        };
        let mscale = |scale: f64, m: f64| {
            if scale <= 1.0 {
                1.0
            } else {
                0.1 * m * scale.ln() + 1.0
            }
        };
        let attention_factor = match (
            num("attention_factor"),
            num("mscale"),
            num("mscale_all_dim"),
        ) {
            (Some(a), _, _) => a,
            (None, Some(m), Some(all)) if m != 0.0 && all != 0.0 => {
                mscale(factor, m) / mscale(factor, all)
            }
            _ => mscale(factor, 1.0),
        };
        return Ok(RopeScaling::Yarn {
            factor,
            original_max_position_embeddings: original,
            beta_fast: num("beta_fast").filter(|b| *b != 0.0).unwrap_or(32.0),
            beta_slow: num("beta_slow").filter(|b| *b != 0.0).unwrap_or(1.0),
            truncate: v.get("truncate").and_then(|t| t.as_bool()).unwrap_or(true),
            attention_factor,
        });
    }
    if matches!(kind, Some("longrope" | "su")) {
        let factors = |key: &str| -> Result<Vec<f64>> {
            v.get(key)
                .and_then(|f| f.as_array())
                .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
                .ok_or_else(|| Error::Config(format!("rope_scaling `longrope` needs `{key}`")))
        };
        let original = original()?;
        let factor = match v.get("factor").and_then(|x| x.as_f64()) {
            Some(f) => f,
            None => c.usize("max_position_embeddings")? as f64 / original as f64,
        };
        let attention_factor = match v.get("attention_factor").and_then(|x| x.as_f64()) {
            Some(a) => a,
            None if factor <= 1.0 => 1.0,
            None => (1.0 + factor.ln() / (original as f64).ln()).sqrt(),
        };
        return Ok(RopeScaling::LongRope {
            short_factor: factors("short_factor")?,
            long_factor: factors("long_factor")?,
            original_max_position_embeddings: original,
            attention_factor,
        });
    }
    let cfg: RopeScalingConfig = serde_json::from_value(v.clone())
        .map_err(|e| Error::Config(format!("config.json: rope scaling: {e}")))?;
    cfg.to_scaling()
}

/// The rotary table of a config for heads of `head_dim` (partial rotary included).
pub(crate) fn rotary(
    c: &HfConfig,
    head_dim: usize,
    layer_type: Option<&str>,
    default_theta: f64,
) -> Result<Rotary> {
    rotary_with_fraction(
        c,
        head_dim,
        layer_type,
        default_theta,
        c.partial_rotary_factor()?,
    )
}

/// [`rotary`] over `fraction` of each head.
pub(crate) fn rotary_with_fraction(
    c: &HfConfig,
    head_dim: usize,
    layer_type: Option<&str>,
    default_theta: f64,
    fraction: f64,
) -> Result<Rotary> {
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(Error::Config(format!(
            "partial rotary factor {fraction} must be in (0, 1]"
        )));
    }
    // Python's int(): truncation.
    let dim = (head_dim as f64 * fraction) as usize;
    if dim == 0 || !dim.is_multiple_of(2) {
        return Err(Error::Config(format!(
            "the rotary dimension ({head_dim} × {fraction} = {dim}) must be even and positive"
        )));
    }
    let scaling = rope_scaling(c, layer_type)?;
    if let RopeScaling::LongRope {
        short_factor,
        long_factor,
        ..
    } = &scaling
    {
        for (name, factors) in [("short_factor", short_factor), ("long_factor", long_factor)] {
            if factors.len() != dim / 2 {
                return Err(Error::Config(format!(
                    "longrope {name} has {} entries; the rotary dimension {dim} needs {}",
                    factors.len(),
                    dim / 2
                )));
            }
        }
    }
    Ok(Rotary::new(
        dim,
        c.rope_theta(layer_type, default_theta)?,
        &scaling,
        false,
    ))
}

/// The Llama-shaped decoder of a config: pre-norm RMSNorm blocks, SiLU-gated MLP (or the
/// config's activation), grouped-query attention with one global rotary table.
pub(crate) fn llama_like(c: &HfConfig, names: TensorNames) -> Result<DecoderSpec> {
    let d_model = c.usize("hidden_size")?;
    let n_layers = c.usize("num_hidden_layers")?;
    let n_heads = c.usize("num_attention_heads")?;
    if n_heads == 0 {
        return Err(Error::Config("num_attention_heads must be positive".into()));
    }
    let n_kv_heads = c.opt_usize("num_key_value_heads")?.unwrap_or(n_heads);
    let head_dim = c.opt_usize("head_dim")?.unwrap_or(d_model / n_heads);
    let rotary = rotary(c, head_dim, None, 10000.0)?;
    Ok(DecoderSpec {
        d_model,
        vocab_size: c.usize("vocab_size")?,
        context_length: c.usize("max_position_embeddings")?,
        n_layers,
        n_heads,
        n_kv_heads,
        head_dim,
        norm: NormKind::Rms,
        norm_eps: c.opt_f64("rms_norm_eps")?.unwrap_or(1e-6),
        activation: c.activation("silu")?,
        parallel_residual: false,
        conv1d: false,
        embed_scale: None,
        attention_scale: 1.0 / (head_dim as f64).sqrt(),
        attention_softcap: None,
        attention_kinds: vec![AttentionKind {
            rotary: Some(rotary),
            window: None,
        }],
        layer_attention: vec![0; n_layers],
        final_logit_softcap: None,
        tie_word_embeddings: c.bool_or("tie_word_embeddings", false)?,
        names,
        config_json: c.json().clone(),
    })
}

/// Adds a sliding-window attention kind (same rotary table) used by the layers `sliding(i)` picks.
pub(crate) fn with_sliding_layers(
    mut spec: DecoderSpec,
    window: usize,
    sliding: impl Fn(usize) -> bool,
) -> DecoderSpec {
    let rotary = spec.attention_kinds[0].rotary.clone();
    spec.attention_kinds.push(AttentionKind {
        rotary,
        window: Some(window),
    });
    spec.layer_attention = (0..spec.n_layers)
        .map(|i| if sliding(i) { 1 } else { 0 })
        .collect();
    spec
}

/// `layer_types` of a config ("sliding_attention" / "full_attention"), checked against the depth.
pub(crate) fn layer_types(c: &HfConfig, n_layers: usize) -> Result<Option<Vec<bool>>> {
    let Some(v) = c.json().get("layer_types").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let types: Vec<bool> = v
        .as_array()
        .ok_or_else(|| Error::Config("config.json: `layer_types` should be a list".into()))?
        .iter()
        .map(|t| t.as_str() == Some("sliding_attention"))
        .collect();
    if types.len() != n_layers {
        return Err(Error::Config(format!(
            "layer_types has {} entries for {n_layers} layers",
            types.len()
        )));
    }
    Ok(Some(types))
}

/// A GGUF header's `{arch}.*` keys as the Hugging Face `config.json` keys the families read, so
/// that a family reads both formats through one parser.
pub(crate) fn gguf_to_hf(md: &GgufMetadata, arch: &str) -> Result<serde_json::Value> {
    let k = |key: &str| format!("{arch}.{key}");
    let hidden = md.usize(&k("embedding_length"))?;
    let heads = md.usize(&k("attention.head_count"))?;
    let head_dim = md.opt_usize(&k("attention.key_length"))?;
    let mut cfg = serde_json::json!({
        "hidden_size": hidden,
        "intermediate_size": md.usize(&k("feed_forward_length"))?,
        "num_hidden_layers": md.usize(&k("block_count"))?,
        "num_attention_heads": heads,
        "num_key_value_heads": md.opt_usize(&k("attention.head_count_kv"))?,
        "head_dim": head_dim,
        "rms_norm_eps": md.opt_f64(&k("attention.layer_norm_rms_epsilon"))?,
        "layer_norm_eps": md.opt_f64(&k("attention.layer_norm_epsilon"))?,
        "rope_theta": md.opt_f64(&k("rope.freq_base"))?,
        "max_position_embeddings": md.usize(&k("context_length"))?,
        "vocab_size": md.vocab_size(&k("vocab_size"))?,
        "tie_word_embeddings": !md.has_tensor("output.weight"),
        // llama.cpp writes 0 for "no window" (Phi-4 as `phi3`).
        "sliding_window": md.opt_usize(&k("attention.sliding_window"))?.filter(|&w| w > 0),
        "attn_logit_softcapping": md.opt_f64(&k("attn_logit_softcapping"))?,
        "final_logit_softcapping": md.opt_f64(&k("final_logit_softcapping"))?,
        "bos_token_id": md.opt_u32("tokenizer.ggml.bos_token_id")?,
        "eos_token_id": md.opt_u32("tokenizer.ggml.eos_token_id")?,
    });
    if let Some(dim) = md.opt_usize(&k("rope.dimension_count"))? {
        let head_dim = head_dim.unwrap_or(hidden / heads.max(1));
        cfg["partial_rotary_factor"] = (dim as f64 / head_dim as f64).into();
    }
    Ok(cfg)
}
