//! The one decoder every family runs on: embedding (+ learned positions) → blocks (with the skip
//! switch and the residual observer) → final norm → unembedding (→ soft-cap). This loop is the
//! lens' contract, so it exists exactly once; a family only says, through a [`DecoderSpec`], which
//! pieces its blocks use and what their tensors are called (see `families/`).
//!
//! Tensor names are Hugging Face's; [`Weights`] maps them to GGUF names.

use candle_core::{DType, Device, Tensor};

use super::layers::{
    attention, attention_mask, padding_mask, soft_cap, Causal, KvCache, LayerNorm, Norm, RmsNorm,
    Rotary,
};
use super::weights::{Embedding, Linear, Weights};
use super::{Observer, Tap};
use crate::error::{Error, Result};
use crate::phases::{timed, Phase};

/// Which norm the model uses everywhere (blocks, q/k norms and the final norm).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum NormKind {
    /// RMSNorm scaling by `w` (Llama).
    Rms,
    /// RMSNorm scaling by `1 + w` (Gemma).
    RmsOnePlus,
    /// LayerNorm with weight and bias (GPT-2, GPT-NeoX).
    Layer,
}

/// The MLP's activation, read from the config's `hidden_act` / `hidden_activation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Activation {
    Silu,
    /// tanh approximation (`gelu_new`, `gelu_pytorch_tanh`).
    GeluTanh,
    /// exact erf form (`gelu`).
    GeluErf,
}

impl Activation {
    /// Parses a Hugging Face activation name.
    pub(crate) fn from_hf(name: &str) -> Result<Self> {
        match name {
            "silu" | "swish" => Ok(Activation::Silu),
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Ok(Activation::GeluTanh),
            "gelu" => Ok(Activation::GeluErf),
            other => Err(Error::Config(format!(
                "unsupported activation `{other}` (supported: silu, gelu, gelu_new, gelu_pytorch_tanh)"
            ))),
        }
    }

    pub(crate) fn apply(self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Activation::Silu => candle_nn::ops::silu(x),
            Activation::GeluTanh => x.gelu(),
            Activation::GeluErf => x.gelu_erf(),
        }
    }
}

/// How queries, keys and values are projected.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum QkvNames {
    /// Three projections (Llama: `self_attn.q_proj`, `k_proj`, `v_proj`).
    Separate {
        q: &'static str,
        k: &'static str,
        v: &'static str,
    },
    /// One projection whose output is all queries, then all keys, then all values (Phi-3
    /// `qkv_proj`, GPT-2 `c_attn`).
    Fused(&'static str),
    /// One projection whose output holds, per head, its query, key and value (GPT-NeoX
    /// `query_key_value`).
    FusedPerHead(&'static str),
}

/// How the MLP is laid out.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum MlpNames {
    /// `down(act(gate(x)) · up(x))`.
    Gated {
        gate: &'static str,
        up: &'static str,
        down: &'static str,
    },
    /// The same with gate and up in one projection, gate first (Phi-3 `gate_up_proj`).
    GatedFused {
        gate_up: &'static str,
        down: &'static str,
    },
    /// `down(act(up(x)))` (GPT-2, GPT-NeoX).
    Plain {
        up: &'static str,
        down: &'static str,
    },
}

/// A family's Hugging Face tensor names (module paths, without `.weight`/`.bias`). Model-level
/// names are full paths; block names are relative to `{layers}.{i}`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TensorNames {
    pub embed: String,
    /// Learned absolute position embeddings (GPT-2's `wpe`); None for rotary models.
    pub positions: Option<String>,
    pub layers: String,
    pub final_norm: String,
    pub lm_head: String,
    pub attn_norm: &'static str,
    pub qkv: QkvNames,
    pub o: &'static str,
    /// Per-head q and k norms (Qwen3, Gemma 3).
    pub qk_norm: Option<(&'static str, &'static str)>,
    /// Norm of the attention output before the residual add (Gemma 2/3 sandwich).
    pub post_attn_norm: Option<&'static str>,
    pub mlp_norm: &'static str,
    /// Norm of the MLP output before the residual add (Gemma 2/3 sandwich).
    pub post_mlp_norm: Option<&'static str>,
    pub mlp: MlpNames,
}

impl TensorNames {
    /// The Llama layout that most families share.
    pub(crate) fn llama() -> Self {
        Self {
            embed: "model.embed_tokens".into(),
            positions: None,
            layers: "model.layers".into(),
            final_norm: "model.norm".into(),
            lm_head: "lm_head".into(),
            attn_norm: "input_layernorm",
            qkv: QkvNames::Separate {
                q: "self_attn.q_proj",
                k: "self_attn.k_proj",
                v: "self_attn.v_proj",
            },
            o: "self_attn.o_proj",
            qk_norm: None,
            post_attn_norm: None,
            mlp_norm: "post_attention_layernorm",
            post_mlp_norm: None,
            mlp: MlpNames::Gated {
                gate: "mlp.gate_proj",
                up: "mlp.up_proj",
                down: "mlp.down_proj",
            },
        }
    }

    /// Gemma 2/3: pre- and post-norms around both sub-layers.
    pub(crate) fn with_sandwich_norms(mut self) -> Self {
        self.post_attn_norm = Some("post_attention_layernorm");
        self.mlp_norm = "pre_feedforward_layernorm";
        self.post_mlp_norm = Some("post_feedforward_layernorm");
        self
    }
}

/// One kind of attention a layer can use: its rotary table (None: learned or no positions) and
/// its sliding window (None: global).
#[derive(Clone, Debug)]
pub(crate) struct AttentionKind {
    pub rotary: Option<Rotary>,
    pub window: Option<usize>,
}

/// Everything the decoder needs to know about a family's checkpoint, read from its config.
#[derive(Clone, Debug)]
pub(crate) struct DecoderSpec {
    pub d_model: usize,
    pub vocab_size: usize,
    pub context_length: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub norm: NormKind,
    pub norm_eps: f64,
    pub activation: Activation,
    /// Attention and MLP read the same input and add to the residual together (GPT-NeoX).
    pub parallel_residual: bool,
    /// GPT-2's `Conv1D`: weights stored [in, out].
    pub conv1d: bool,
    /// Multiplies the embedding output (Gemma: √d rounded to the weights' dtype).
    pub embed_scale: Option<f64>,
    /// Scale of the attention scores (usually head_dim^-½).
    pub attention_scale: f64,
    /// `cap · tanh(score / cap)` on attention scores (Gemma 2).
    pub attention_softcap: Option<f64>,
    /// The attention kinds of the model, and which one each layer uses.
    pub attention_kinds: Vec<AttentionKind>,
    pub layer_attention: Vec<usize>,
    /// `cap · tanh(logits / cap)` after the unembedding.
    pub final_logit_softcap: Option<f64>,
    pub tie_word_embeddings: bool,
    pub names: TensorNames,
    /// The family's configuration in Hugging Face `config.json` form (export, reports).
    pub config_json: serde_json::Value,
}

impl DecoderSpec {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.n_layers == 0 {
            return Err(Error::Config(
                "the model has 0 blocks (num_hidden_layers / block_count)".into(),
            ));
        }
        let (h, kv) = (self.n_heads, self.n_kv_heads);
        if h == 0 || kv == 0 || !h.is_multiple_of(kv) {
            return Err(Error::Config(format!(
                "num_attention_heads {h} must be a positive multiple of num_key_value_heads {kv}"
            )));
        }
        if self.head_dim == 0 {
            return Err(Error::Config("head_dim must be positive".into()));
        }
        for kind in &self.attention_kinds {
            if kind.window == Some(0) {
                return Err(Error::Config(
                    "a sliding window of 0 positions hides every key; use null for no window"
                        .into(),
                ));
            }
            if let Some(r) = &kind.rotary {
                if r.dim() == 0 || r.dim() > self.head_dim {
                    return Err(Error::Config(format!(
                        "{} rotary features do not fit heads of {} (rotary dimensions must be even, at most head_dim)",
                        r.dim(),
                        self.head_dim
                    )));
                }
            }
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

    fn norm(&self, w: &Weights, name: &str) -> Result<Norm> {
        Ok(match self.norm {
            NormKind::Rms => Norm::Rms(RmsNorm::new(
                w.vector(&format!("{name}.weight"))?,
                self.norm_eps,
            )),
            NormKind::RmsOnePlus => Norm::Rms(RmsNorm::new(
                w.gemma_norm_scale(&format!("{name}.weight"))?,
                self.norm_eps,
            )),
            NormKind::Layer => {
                let (weight, bias) = w.layer_norm(name)?;
                Norm::Layer(LayerNorm::new(weight, bias, self.norm_eps))
            }
        })
    }

    fn linear(&self, w: &Weights, name: &str) -> Result<Linear> {
        if self.conv1d {
            w.conv1d(name)
        } else {
            w.linear(name)
        }
    }
}

enum Qkv {
    Separate(Linear, Linear, Linear),
    Fused(Linear),
    FusedPerHead(Linear),
}

struct Attention {
    qkv: Qkv,
    o_proj: Linear,
    qk_norm: Option<(Norm, Norm)>,
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    scale: f64,
    softcap: Option<f64>,
    kind: usize,
    cache: KvCache,
}

impl Attention {
    fn new(spec: &DecoderSpec, w: &Weights, kind: usize) -> Result<Self> {
        let n = &spec.names;
        let qkv = match &n.qkv {
            QkvNames::Separate { q, k, v } => {
                let parts = [spec.linear(w, q)?, spec.linear(w, k)?, spec.linear(w, v)?];
                // Stacked only when each part has the rows the split in `project` expects;
                // otherwise the parts stay apart and a wrong shape fails there, loudly.
                let (h, kv) = (
                    spec.n_heads * spec.head_dim,
                    spec.n_kv_heads * spec.head_dim,
                );
                let rows = [parts[0].dims()?.0, parts[1].dims()?.0, parts[2].dims()?.0];
                let stacked = if rows == [h, kv, kv] {
                    Linear::stack(&parts)?
                } else {
                    None
                };
                match stacked {
                    Some(qkv) => Qkv::Fused(qkv),
                    None => {
                        let [q, k, v] = parts;
                        Qkv::Separate(q, k, v)
                    }
                }
            }
            QkvNames::Fused(name) => Qkv::Fused(spec.linear(w, name)?),
            QkvNames::FusedPerHead(name) => Qkv::FusedPerHead(spec.linear(w, name)?),
        };
        let qk_norm = n
            .qk_norm
            .map(|(q, k)| Ok::<_, Error>((spec.norm(w, q)?, spec.norm(w, k)?)))
            .transpose()?;
        Ok(Self {
            qkv,
            o_proj: spec.linear(w, n.o)?,
            qk_norm,
            n_heads: spec.n_heads,
            n_kv_heads: spec.n_kv_heads,
            head_dim: spec.head_dim,
            scale: spec.attention_scale,
            softcap: spec.attention_softcap,
            kind,
            cache: KvCache::default(),
        })
    }

    /// Queries, keys and values, each [b, s, heads, head_dim].
    fn project(&self, x: &Tensor) -> candle_core::Result<(Tensor, Tensor, Tensor)> {
        let (b, s, _) = x.dims3()?;
        let (h, kv, hd) = (self.n_heads, self.n_kv_heads, self.head_dim);
        let heads = |t: Tensor, n: usize| t.reshape((b, s, n, hd));
        match &self.qkv {
            Qkv::Separate(q, k, v) => Ok((
                heads(q.forward(x)?, h)?,
                heads(k.forward(x)?, kv)?,
                heads(v.forward(x)?, kv)?,
            )),
            Qkv::Fused(qkv) => {
                let y = qkv.forward(x)?;
                Ok((
                    heads(y.narrow(2, 0, h * hd)?, h)?,
                    heads(y.narrow(2, h * hd, kv * hd)?, kv)?,
                    heads(y.narrow(2, (h + kv) * hd, kv * hd)?, kv)?,
                ))
            }
            Qkv::FusedPerHead(qkv) => {
                let y = qkv.forward(x)?.reshape((b, s, h, 3 * hd))?;
                Ok((
                    y.narrow(3, 0, hd)?,
                    y.narrow(3, hd, hd)?,
                    y.narrow(3, 2 * hd, hd)?,
                ))
            }
        }
    }

    /// # Shapes
    /// `x`: [b, s, d] → [b, s, d]
    fn forward(&mut self, x: &Tensor, steps: &[Step]) -> candle_core::Result<Tensor> {
        let (b, s, _) = x.dims3()?;
        let (q, k, v) = timed(Phase::BlockProducts, || self.project(x))?;
        let y = timed(Phase::Attention, || self.core(q, k, v, steps))?;
        let y = y
            .transpose(1, 2)?
            .reshape((b, s, self.n_heads * self.head_dim))?;
        timed(Phase::BlockProducts, || self.o_proj.forward(&y))
    }

    /// Rotary, the KV cache, and attention over the cached keys.
    ///
    /// # Shapes
    /// `q`: [b, s, heads, hd]; `k`, `v`: [b, s, kv_heads, hd] → [b, heads, s, hd]
    fn core(
        &mut self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        steps: &[Step],
    ) -> candle_core::Result<Tensor> {
        let (mut q, mut k, v) = (q.transpose(1, 2)?, k.transpose(1, 2)?, v.transpose(1, 2)?);
        if let Some((qn, kn)) = &self.qk_norm {
            q = qn.forward(&q)?;
            k = kn.forward(&k)?;
        }
        let step = &steps[self.kind];
        if let Some((rotary, cos, sin)) = &step.rotary {
            q = rotary.apply(&q, cos, sin)?;
            k = rotary.apply(&k, cos, sin)?;
        }
        let (k, v) = self.cache.append(&k, &v.contiguous()?)?;
        // A sliding-window layer never looks further back than its window: the cache keeps only
        // that many positions, so its memory stays bounded however long the sequence.
        if let Some(w) = step.causal.window {
            self.cache.keep_last(w)?;
        }
        attention(
            &q,
            &k,
            &v,
            step.causal,
            &step.masks,
            self.scale,
            self.softcap,
        )
    }
}

enum Mlp {
    Gated {
        gate: Linear,
        up: Linear,
        down: Linear,
    },
    GatedFused {
        gate_up: Linear,
        down: Linear,
    },
    Plain {
        up: Linear,
        down: Linear,
    },
}

struct FeedForward {
    mlp: Mlp,
    activation: Activation,
}

impl FeedForward {
    fn new(spec: &DecoderSpec, w: &Weights) -> Result<Self> {
        let mlp = match &spec.names.mlp {
            MlpNames::Gated { gate, up, down } => {
                let parts = [spec.linear(w, gate)?, spec.linear(w, up)?];
                let down = spec.linear(w, down)?;
                // `GatedFused` splits the output in two halves: gate and up must match.
                let stacked = if parts[0].dims()? == parts[1].dims()? {
                    Linear::stack(&parts)?
                } else {
                    None
                };
                match stacked {
                    Some(gate_up) => Mlp::GatedFused { gate_up, down },
                    None => {
                        let [gate, up] = parts;
                        Mlp::Gated { gate, up, down }
                    }
                }
            }
            MlpNames::GatedFused { gate_up, down } => Mlp::GatedFused {
                gate_up: spec.linear(w, gate_up)?,
                down: spec.linear(w, down)?,
            },
            MlpNames::Plain { up, down } => Mlp::Plain {
                up: spec.linear(w, up)?,
                down: spec.linear(w, down)?,
            },
        };
        Ok(Self {
            mlp,
            activation: spec.activation,
        })
    }

    /// # Shapes
    /// `x`: [b, s, d] → [b, s, d]
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        timed(Phase::BlockProducts, || self.products(x))
    }

    fn products(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let act = |t: &Tensor| self.activation.apply(t);
        match &self.mlp {
            Mlp::Gated { gate, up, down } => {
                down.forward(&(act(&gate.forward(x)?)? * up.forward(x)?)?)
            }
            Mlp::GatedFused { gate_up, down } => {
                let y = gate_up.forward(x)?;
                let half = y.dim(2)? / 2;
                let gate = act(&y.narrow(2, 0, half)?)?;
                down.forward(&(gate * y.narrow(2, half, half)?)?)
            }
            Mlp::Plain { up, down } => down.forward(&act(&up.forward(x)?)?),
        }
    }
}

struct Block {
    attn_norm: Norm,
    attn: Attention,
    post_attn_norm: Option<Norm>,
    mlp_norm: Norm,
    mlp: FeedForward,
    post_mlp_norm: Option<Norm>,
    parallel: bool,
}

impl Block {
    fn new(spec: &DecoderSpec, w: &Weights, kind: usize) -> Result<Self> {
        let n = &spec.names;
        let optional = |name: Option<&str>| name.map(|name| spec.norm(w, name)).transpose();
        Ok(Self {
            attn_norm: spec.norm(w, n.attn_norm)?,
            attn: Attention::new(spec, w, kind)?,
            post_attn_norm: optional(n.post_attn_norm)?,
            mlp_norm: spec.norm(w, n.mlp_norm)?,
            mlp: FeedForward::new(spec, w)?,
            post_mlp_norm: optional(n.post_mlp_norm)?,
            parallel: spec.parallel_residual,
        })
    }

    /// Shows block `index`'s attention write, its residual after attention (sequential blocks)
    /// and its MLP write to `observe`.
    ///
    /// # Shapes
    /// `x`: [b, s, d] → [b, s, d]
    fn forward(
        &mut self,
        index: usize,
        x: &Tensor,
        steps: &[Step],
        observe: Observer<'_>,
    ) -> Result<Tensor> {
        let mut a = self.attn.forward(&self.attn_norm.forward(x)?, steps)?;
        if let Some(n) = &self.post_attn_norm {
            a = n.forward(&a)?;
        }
        observe(Tap::AttentionWrite(index), &a)?;
        if self.parallel {
            let m = self.mlp.forward(&self.mlp_norm.forward(x)?)?;
            observe(Tap::MlpWrite(index), &m)?;
            return Ok(((m + a)? + x)?);
        }
        let h = (x + a)?;
        observe(Tap::AfterAttention(index), &h)?;
        let mut m = self.mlp.forward(&self.mlp_norm.forward(&h)?)?;
        if let Some(n) = &self.post_mlp_norm {
            m = n.forward(&m)?;
        }
        observe(Tap::MlpWrite(index), &m)?;
        Ok((&h + m)?)
    }
}

/// Per-forward tables of one attention kind, shared by the layers that use it.
struct Step<'a> {
    rotary: Option<(&'a Rotary, Tensor, Tensor)>,
    causal: Causal<'a>,
    /// The additive masks of `causal` (causal and padding), off the CPU only (the CPU masks
    /// inside the softmax).
    masks: Vec<Tensor>,
}

/// A decoder-only transformer built from a [`DecoderSpec`].
pub(crate) struct Decoder {
    embed_tokens: Embedding,
    positions: Option<Embedding>,
    layers: Vec<Block>,
    norm: Norm,
    lm_head: Linear,
    spec: DecoderSpec,
    device: Device,
    dtype: DType,
}

impl Decoder {
    pub(crate) fn new(spec: DecoderSpec, w: &Weights) -> Result<Self> {
        spec.validate()?;
        let n = &spec.names;
        let embed_tokens = w.embedding(&n.embed)?;
        let positions = n.positions.as_ref().map(|p| w.embedding(p)).transpose()?;
        // An untied head must be in the checkpoint: running the embedding in its place would give
        // plausible but wrong distributions.
        let lm_head = if spec.tie_word_embeddings {
            embed_tokens.as_linear()
        } else {
            w.linear(&n.lm_head)?
        };
        // An empty unembedding (a corrupt header) would give distributions over nothing.
        let (vocab, hidden) = lm_head.dims()?;
        if vocab == 0 || hidden == 0 {
            return Err(Error::Config(format!(
                "the unembedding `{}` has shape [{vocab}, {hidden}]; the file is corrupt",
                if spec.tie_word_embeddings {
                    &n.embed
                } else {
                    &n.lm_head
                }
            )));
        }
        let layers = spec
            .layer_attention
            .iter()
            .enumerate()
            .map(|(i, &kind)| Block::new(&spec, &w.pp(format!("{}.{i}", n.layers)), kind))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embed_tokens,
            positions,
            layers,
            norm: spec.norm(w, &n.final_norm)?,
            lm_head,
            device: w.device().clone(),
            dtype: w.activation_dtype(),
            spec,
        })
    }

    /// Runs the blocks over `ids` ([b, s]) whose first column is `offset` (the KV-cache length),
    /// skipping the blocks flagged in `skip`; shows the embedding output (layer 0) and the residual
    /// after every block (layer i) to `observe`; returns the last residual [b, s, d].
    ///
    /// `pads` (empty, or one per row) left-pads a batch: row r's first `pads[r]` columns are
    /// padding, its tokens sit at positions `column − pads[r]`, and no query attends to padding.
    /// `horizon`: the column the input runs to when this call is one chunk of it (rotary scalings
    /// that depend on the length choose by it; at most `offset + s` when the call is all of it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn forward(
        &mut self,
        ids: &Tensor,
        offset: usize,
        pads: &[usize],
        horizon: usize,
        skip: &[bool],
        observe: Observer<'_>,
    ) -> Result<Tensor> {
        let (b, s) = ids.dims2()?;
        if !pads.is_empty() && pads.len() != b {
            return Err(Error::invalid(format!(
                "{} padding counts for a batch of {b} rows",
                pads.len()
            )));
        }
        // An unpadded batch takes the shared tables (and exactly the single-sequence arithmetic).
        let pads = if pads.iter().all(|&p| p == 0) {
            &[][..]
        } else {
            pads
        };
        let steps = self
            .spec
            .attention_kinds
            .iter()
            .map(|kind| {
                let rotary = kind
                    .rotary
                    .as_ref()
                    .map(|r| {
                        let (cos, sin) = if pads.is_empty() {
                            r.tables_within(offset, s, horizon, &self.device)?
                        } else {
                            r.padded_tables(offset, s, pads, horizon, &self.device)?
                        };
                        Ok::<_, Error>((r, cos, sin))
                    })
                    .transpose()?;
                Ok(Step {
                    rotary,
                    causal: Causal {
                        offset,
                        window: kind.window,
                        pads,
                    },
                    masks: if matches!(self.device, Device::Cpu) {
                        Vec::new()
                    } else {
                        let causal = attention_mask(offset, s, kind.window, &self.device)?;
                        let padding = padding_mask(offset, s, kind.window, pads, &self.device)?;
                        causal.into_iter().chain(padding).collect()
                    },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut x = self.embed_tokens.forward(ids, self.dtype)?;
        if let Some(scale) = self.spec.embed_scale {
            x = (x * scale)?;
        }
        if let Some(pos) = &self.positions {
            let idx = if pads.is_empty() {
                Tensor::arange(offset as u32, (offset + s) as u32, &self.device)?.unsqueeze(0)?
            } else {
                let idx: Vec<u32> = pads
                    .iter()
                    .flat_map(|&pad| {
                        (offset..offset + s).map(move |c| c.saturating_sub(pad) as u32)
                    })
                    .collect();
                Tensor::from_vec(idx, (b, s), &self.device)?
            };
            x = x.broadcast_add(&pos.forward(&idx, self.dtype)?)?;
        }
        observe(Tap::Layer(0), &x)?;
        for (i, block) in self.layers.iter_mut().enumerate() {
            if skip[i] {
                // A skipped block is the identity: it writes nothing, its mid point is its input.
                let nothing = x.zeros_like()?;
                observe(Tap::AttentionWrite(i + 1), &nothing)?;
                if !block.parallel {
                    observe(Tap::AfterAttention(i + 1), &x)?;
                }
                observe(Tap::MlpWrite(i + 1), &nothing)?;
            } else {
                x = block.forward(i + 1, &x, &steps, observe)?;
            }
            observe(Tap::Layer(i + 1), &x)?;
        }
        Ok(x)
    }

    /// Whether attention and MLP read the same input (no mid-block residual).
    pub(crate) fn parallel_residual(&self) -> bool {
        self.spec.parallel_residual
    }

    /// Keeps the batch rows `rows` of every KV cache (a [n] u32 tensor of row indices).
    pub(crate) fn retain_rows(&mut self, rows: &Tensor) -> Result<()> {
        for block in &mut self.layers {
            block.attn.cache.retain_rows(rows)?;
        }
        Ok(())
    }

    /// What a lens reads through, in the form training differentiates: the final norm's
    /// parameters, the unembedding as a dense f32 [vocab, d] matrix, the final soft-cap.
    pub(crate) fn readout(&self) -> Result<super::readout::Readout> {
        use super::readout::NormParams;
        let norm = match &self.norm {
            Norm::Rms(n) => NormParams::Rms {
                scale: n.scale().to_dtype(DType::F32)?,
                eps: n.eps(),
            },
            Norm::Layer(n) => NormParams::Layer {
                weight: n.weight().to_dtype(DType::F32)?,
                bias: n.bias().to_dtype(DType::F32)?,
                eps: n.eps(),
            },
        };
        Ok(super::readout::Readout {
            norm,
            unembedding: self.lm_head.dense_weight()?.to_device(&Device::Cpu)?,
            softcap: self.spec.final_logit_softcap,
        })
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
        self.layers.iter_mut().for_each(|b| b.attn.cache.clear());
    }

    pub(crate) fn config_json(&self) -> serde_json::Value {
        self.spec.config_json.clone()
    }
}
