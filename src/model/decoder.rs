//! The one decoder every family runs on: embedding → blocks (with the skip switch and the
//! residual observer) → final norm → unembedding (→ soft-cap). This loop is the lens' contract, so
//! it exists exactly once; a family only says, through a [`DecoderSpec`], which pieces its blocks
//! use (norm form, sandwich norms, q/k norms, activation, rotary bases, sliding windows, caps).
//! Tensor names are Hugging Face's; [`Weights`] maps them to GGUF names.

use candle_core::{DType, Device, Tensor};

use super::layers::{attention, attention_mask, gelu_tanh, soft_cap, KvCache, RmsNorm, Rotary};
use super::weights::{Embedding, Linear, Weights};
use super::Observer;
use crate::error::{Error, Result};

/// How a norm's stored weight `w` scales: by `w` (Llama) or by `1 + w` (Gemma).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NormWeight {
    Plain,
    OnePlus,
}

/// Where the norms of a block sit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NormLayout {
    /// `x + attn(norm(x))`, then `h + mlp(norm(h))` (Llama: `input_layernorm`,
    /// `post_attention_layernorm`).
    Pre,
    /// Pre- and post-norms around both sub-layers (Gemma 2 and 3: `input_layernorm`,
    /// `post_attention_layernorm`, `pre_feedforward_layernorm`, `post_feedforward_layernorm`).
    Sandwich,
}

/// The gate activation of the gated MLP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Activation {
    Silu,
    GeluTanh,
}

impl Activation {
    fn apply(self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Activation::Silu => candle_nn::ops::silu(x),
            Activation::GeluTanh => gelu_tanh(x),
        }
    }
}

/// One kind of attention a layer can use: its rotary table and its sliding window (None: global).
#[derive(Clone, Debug)]
pub(crate) struct AttentionKind {
    pub rotary: Rotary,
    pub window: Option<usize>,
}

/// Everything the decoder needs to know about a family's checkpoint, read from its config.
#[derive(Clone, Debug)]
pub(crate) struct DecoderSpec {
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub norm_eps: f64,
    pub norm_weight: NormWeight,
    pub norm_layout: NormLayout,
    /// RMS-normalise each query and key head (`q_norm`, `k_norm`; Gemma 3).
    pub qk_norm: bool,
    pub activation: Activation,
    /// Multiplies the embedding output (Gemma: √d rounded to the weights' dtype).
    pub embed_scale: Option<f64>,
    /// Scale of the attention scores (usually head_dim^-½).
    pub attention_scale: f64,
    /// The attention kinds of the model, and which one each layer uses.
    pub attention_kinds: Vec<AttentionKind>,
    pub layer_attention: Vec<usize>,
    /// `cap · tanh(logits / cap)` after the unembedding.
    pub final_logit_softcap: Option<f64>,
    pub tie_word_embeddings: bool,
    /// The family's configuration in Hugging Face `config.json` form (export, reports).
    pub config_json: serde_json::Value,
}

impl DecoderSpec {
    fn validate(&self) -> Result<()> {
        let (h, kv) = (self.n_heads, self.n_kv_heads);
        if h == 0 || kv == 0 || !h.is_multiple_of(kv) {
            return Err(Error::Config(format!(
                "num_attention_heads {h} must be a positive multiple of num_key_value_heads {kv}"
            )));
        }
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(2) {
            return Err(Error::Config(format!(
                "head_dim {} must be even and positive",
                self.head_dim
            )));
        }
        if self.layer_attention.len() != self.n_layers {
            return Err(Error::Config(format!(
                "{} attention kinds given for {} layers",
                self.layer_attention.len(),
                self.n_layers
            )));
        }
        if let Some(&k) = self
            .layer_attention
            .iter()
            .find(|&&k| k >= self.attention_kinds.len())
        {
            return Err(Error::Config(format!("unknown attention kind {k}")));
        }
        Ok(())
    }
}

fn norm(spec: &DecoderSpec, w: &Weights, name: &str) -> Result<RmsNorm> {
    let name = format!("{name}.weight");
    let scale = match spec.norm_weight {
        NormWeight::Plain => w.vector(&name)?,
        NormWeight::OnePlus => w.gemma_norm_scale(&name)?,
    };
    Ok(RmsNorm::new(scale, spec.norm_eps))
}

struct Attention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    qk_norm: Option<(RmsNorm, RmsNorm)>,
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    scale: f64,
    kind: usize,
    cache: KvCache,
}

impl Attention {
    fn new(spec: &DecoderSpec, w: &Weights, kind: usize) -> Result<Self> {
        let qk_norm = if spec.qk_norm {
            Some((norm(spec, w, "q_norm")?, norm(spec, w, "k_norm")?))
        } else {
            None
        };
        Ok(Self {
            q_proj: w.linear("q_proj")?,
            k_proj: w.linear("k_proj")?,
            v_proj: w.linear("v_proj")?,
            o_proj: w.linear("o_proj")?,
            qk_norm,
            n_heads: spec.n_heads,
            n_kv_heads: spec.n_kv_heads,
            head_dim: spec.head_dim,
            scale: spec.attention_scale,
            kind,
            cache: KvCache::default(),
        })
    }

    /// # Shapes
    /// `x`: [b, s, d] → [b, s, d]
    fn forward(&mut self, x: &Tensor, steps: &[Step]) -> candle_core::Result<Tensor> {
        let (b, s, _) = x.dims3()?;
        let heads = |t: Tensor, n: usize| t.reshape((b, s, n, self.head_dim))?.transpose(1, 2);
        let mut q = heads(self.q_proj.forward(x)?, self.n_heads)?;
        let mut k = heads(self.k_proj.forward(x)?, self.n_kv_heads)?;
        let v = heads(self.v_proj.forward(x)?, self.n_kv_heads)?;
        if let Some((qn, kn)) = &self.qk_norm {
            q = qn.forward(&q)?;
            k = kn.forward(&k)?;
        }
        let step = &steps[self.kind];
        let q = step.rotary.apply(&q, &step.cos, &step.sin)?;
        let k = step.rotary.apply(&k, &step.cos, &step.sin)?;
        let (k, v) = self.cache.append(&k, &v)?;
        let y = attention(&q, &k, &v, step.mask.as_ref(), self.scale)?;
        let y = y
            .transpose(1, 2)?
            .reshape((b, s, self.n_heads * self.head_dim))?;
        self.o_proj.forward(&y)
    }
}

struct Mlp {
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
    activation: Activation,
}

impl Mlp {
    fn new(spec: &DecoderSpec, w: &Weights) -> Result<Self> {
        Ok(Self {
            gate_proj: w.linear("gate_proj")?,
            up_proj: w.linear("up_proj")?,
            down_proj: w.linear("down_proj")?,
            activation: spec.activation,
        })
    }

    /// # Shapes
    /// `x`: [b, s, d] → [b, s, d]
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let gate = self.activation.apply(&self.gate_proj.forward(x)?)?;
        self.down_proj.forward(&(gate * self.up_proj.forward(x)?)?)
    }
}

struct Block {
    attn_norm: RmsNorm,
    self_attn: Attention,
    /// Sandwich layout only: the norm of the attention output.
    post_attn_norm: Option<RmsNorm>,
    mlp_norm: RmsNorm,
    mlp: Mlp,
    /// Sandwich layout only: the norm of the MLP output.
    post_mlp_norm: Option<RmsNorm>,
}

impl Block {
    fn new(spec: &DecoderSpec, w: &Weights, kind: usize) -> Result<Self> {
        let sandwich = spec.norm_layout == NormLayout::Sandwich;
        let optional = |name: &str| -> Result<Option<RmsNorm>> {
            sandwich.then(|| norm(spec, w, name)).transpose()
        };
        Ok(Self {
            attn_norm: norm(spec, w, "input_layernorm")?,
            self_attn: Attention::new(spec, &w.pp("self_attn"), kind)?,
            post_attn_norm: optional("post_attention_layernorm")?,
            mlp_norm: norm(
                spec,
                w,
                if sandwich {
                    "pre_feedforward_layernorm"
                } else {
                    "post_attention_layernorm"
                },
            )?,
            mlp: Mlp::new(spec, &w.pp("mlp"))?,
            post_mlp_norm: optional("post_feedforward_layernorm")?,
        })
    }

    /// # Shapes
    /// `x`: [b, s, d] → [b, s, d]
    fn forward(&mut self, x: &Tensor, steps: &[Step]) -> candle_core::Result<Tensor> {
        let mut a = self.self_attn.forward(&self.attn_norm.forward(x)?, steps)?;
        if let Some(n) = &self.post_attn_norm {
            a = n.forward(&a)?;
        }
        let h = (x + a)?;
        let mut m = self.mlp.forward(&self.mlp_norm.forward(&h)?)?;
        if let Some(n) = &self.post_mlp_norm {
            m = n.forward(&m)?;
        }
        &h + m
    }
}

/// Per-forward tables of one attention kind, shared by the layers that use it.
struct Step {
    rotary: Rotary,
    cos: Tensor,
    sin: Tensor,
    mask: Option<Tensor>,
}

/// A decoder-only transformer built from a [`DecoderSpec`].
pub(crate) struct Decoder {
    embed_tokens: Embedding,
    layers: Vec<Block>,
    norm: RmsNorm,
    lm_head: Linear,
    spec: DecoderSpec,
    device: Device,
    dtype: DType,
}

impl Decoder {
    pub(crate) fn new(spec: DecoderSpec, w: &Weights) -> Result<Self> {
        spec.validate()?;
        let m = w.pp("model");
        let embed_tokens = m.embedding("embed_tokens")?;
        let lm_head = if spec.tie_word_embeddings || !w.contains("lm_head.weight") {
            embed_tokens.as_linear()
        } else {
            w.linear("lm_head")?
        };
        let layers = spec
            .layer_attention
            .iter()
            .enumerate()
            .map(|(i, &kind)| Block::new(&spec, &m.pp(format!("layers.{i}")), kind))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embed_tokens,
            layers,
            norm: norm(&spec, &m, "norm")?,
            lm_head,
            device: w.device().clone(),
            dtype: w.activation_dtype(),
            spec,
        })
    }

    /// Runs the blocks over `ids` ([b, s]) whose first position is `offset` (the KV-cache
    /// length), skipping the blocks flagged in `skip`; shows the embedding output (layer 0) and
    /// the residual after every block (layer i) to `observe`; returns the last residual [b, s, d].
    pub(crate) fn forward(
        &mut self,
        ids: &Tensor,
        offset: usize,
        skip: &[bool],
        observe: Observer<'_>,
    ) -> Result<Tensor> {
        let (_, s) = ids.dims2()?;
        let steps = self
            .spec
            .attention_kinds
            .iter()
            .map(|kind| {
                let (cos, sin) = kind.rotary.tables(offset, s, &self.device)?;
                Ok(Step {
                    rotary: kind.rotary.clone(),
                    cos,
                    sin,
                    mask: attention_mask(offset, s, kind.window, &self.device)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut x = self.embed_tokens.forward(ids, self.dtype)?;
        if let Some(scale) = self.spec.embed_scale {
            x = (x * scale)?;
        }
        observe(0, &x)?;
        for (i, block) in self.layers.iter_mut().enumerate() {
            if !skip[i] {
                x = block.forward(&x, &steps)?;
            }
            observe(i + 1, &x)?;
        }
        Ok(x)
    }

    /// The model's final norm (`ln_final`).
    pub(crate) fn final_norm(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.norm.forward(x)?)
    }

    /// Unembedding of normalised states into logits, soft-capped when the model does so.
    pub(crate) fn unembed(&self, x: &Tensor) -> Result<Tensor> {
        let logits = self.lm_head.forward(x)?;
        Ok(match self.spec.final_logit_softcap {
            Some(cap) => soft_cap(&logits, cap)?,
            None => logits,
        })
    }

    pub(crate) fn clear_cache(&mut self) {
        self.layers
            .iter_mut()
            .for_each(|b| b.self_attn.cache.clear());
    }

    pub(crate) fn config_json(&self) -> serde_json::Value {
        self.spec.config_json.clone()
    }
}
