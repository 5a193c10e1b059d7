//! Gemma 3 (text): embeddings scaled by √d, RMSNorm with (1 + w), pre- and post-norms around
//! attention and MLP, q/k norms, interleaved local sliding-window and global layers with their own
//! RoPE bases, GELU-tanh MLP, optional final logit soft-capping.

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use super::config::{EosTokenIds, GgufMetadata, RopeScalingConfig};
use super::layers::RopeScaling;
use super::layers::{attention, attention_mask, gelu_tanh, soft_cap, KvCache, RmsNorm, Rotary};
use super::weights::{Embedding, Linear, Weights};
use super::{Family, Observer};
use crate::error::{Error, Result};

/// Every `SLIDING_WINDOW_PATTERN`-th layer is global; the others are local (sliding window).
/// Neither llama.cpp's GGUF nor older configs record it: both hard-code 6 for Gemma 3.
const SLIDING_WINDOW_PATTERN: usize = 6;
const LOCAL_ROPE_BASE: f64 = 10000.0;

/// Mirrors a Hugging Face `Gemma3TextConfig` (`config.json` of `Gemma3ForCausalLM`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Config {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    #[serde(default = "default_local_base")]
    pub rope_local_base_freq: f64,
    #[serde(default)]
    pub rope_scaling: Option<RopeScalingConfig>,
    pub query_pre_attn_scalar: f64,
    pub sliding_window: usize,
    /// "sliding_attention" or "full_attention" per layer (newer configs).
    #[serde(default)]
    pub layer_types: Option<Vec<String>>,
    #[serde(default)]
    pub sliding_window_pattern: Option<usize>,
    #[serde(default)]
    pub final_logit_softcapping: Option<f64>,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    #[serde(default = "default_true")]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    #[serde(default)]
    pub eos_token_id: Option<EosTokenIds>,
}

fn default_rope_theta() -> f64 {
    1_000_000.0
}
fn default_local_base() -> f64 {
    LOCAL_ROPE_BASE
}
fn default_true() -> bool {
    true
}

impl Config {
    /// Reads the `gemma3.*` keys of a GGUF header.
    pub fn from_gguf(md: &GgufMetadata) -> Result<Self> {
        let hidden_size = md.usize("gemma3.embedding_length")?;
        let heads = md.usize("gemma3.attention.head_count")?;
        let head_dim = md
            .opt_usize("gemma3.attention.key_length")?
            .unwrap_or(hidden_size / heads);
        let layers = md.usize("gemma3.block_count")?;
        // As llama.cpp: the 27B model (62 layers) scales queries by (d / heads)^-½, the others by head_dim^-½.
        let query_pre_attn_scalar = if layers == 62 {
            (hidden_size / heads) as f64
        } else {
            head_dim as f64
        };
        let rope_scaling = match md.opt_str("gemma3.rope.scaling.type")? {
            Some("linear") => Some(RopeScalingConfig::linear(
                md.f64("gemma3.rope.scaling.factor")?,
            )),
            _ => None,
        };
        Ok(Self {
            hidden_size,
            intermediate_size: md.usize("gemma3.feed_forward_length")?,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            num_key_value_heads: md
                .opt_usize("gemma3.attention.head_count_kv")?
                .unwrap_or(heads),
            head_dim,
            rms_norm_eps: md.f64("gemma3.attention.layer_norm_rms_epsilon")?,
            rope_theta: md.opt_f64("gemma3.rope.freq_base")?.unwrap_or(1_000_000.0),
            rope_local_base_freq: LOCAL_ROPE_BASE,
            rope_scaling,
            query_pre_attn_scalar,
            sliding_window: md.usize("gemma3.attention.sliding_window")?,
            layer_types: None,
            sliding_window_pattern: Some(SLIDING_WINDOW_PATTERN),
            final_logit_softcapping: md.opt_f64("gemma3.final_logit_softcapping")?,
            max_position_embeddings: md.usize("gemma3.context_length")?,
            vocab_size: md.vocab_size("gemma3.vocab_size")?,
            tie_word_embeddings: !md.has_tensor("output.weight"),
            bos_token_id: md.opt_u32("tokenizer.ggml.bos_token_id")?,
            eos_token_id: md
                .opt_u32("tokenizer.ggml.eos_token_id")?
                .map(EosTokenIds::One),
        })
    }

    /// Whether layer `i` (0-based) attends globally.
    pub fn is_global(&self, i: usize) -> bool {
        match &self.layer_types {
            Some(types) => types.get(i).is_some_and(|t| t == "full_attention"),
            None => (i + 1).is_multiple_of(
                self.sliding_window_pattern
                    .unwrap_or(SLIDING_WINDOW_PATTERN),
            ),
        }
    }

    fn validate(&self) -> Result<()> {
        let (h, kv) = (self.num_attention_heads, self.num_key_value_heads);
        if h == 0 || kv == 0 || h % kv != 0 {
            return Err(Error::Config(format!(
                "num_attention_heads {h} must be a positive multiple of num_key_value_heads {kv}"
            )));
        }
        if let Some(types) = &self.layer_types {
            if types.len() != self.num_hidden_layers {
                return Err(Error::Config(format!(
                    "layer_types has {} entries for {} layers",
                    types.len(),
                    self.num_hidden_layers
                )));
            }
        }
        Ok(())
    }
}

struct Attention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    q_norm: RmsNorm,
    k_norm: RmsNorm,
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    scale: f64,
    is_global: bool,
    cache: KvCache,
}

impl Attention {
    fn new(cfg: &Config, w: &Weights, is_global: bool) -> Result<Self> {
        let eps = cfg.rms_norm_eps;
        Ok(Self {
            q_proj: w.linear("q_proj")?,
            k_proj: w.linear("k_proj")?,
            v_proj: w.linear("v_proj")?,
            o_proj: w.linear("o_proj")?,
            q_norm: RmsNorm::new(w.gemma_norm_scale("q_norm.weight")?, eps),
            k_norm: RmsNorm::new(w.gemma_norm_scale("k_norm.weight")?, eps),
            n_heads: cfg.num_attention_heads,
            n_kv_heads: cfg.num_key_value_heads,
            head_dim: cfg.head_dim,
            scale: cfg.query_pre_attn_scalar.powf(-0.5),
            is_global,
            cache: KvCache::default(),
        })
    }

    /// # Shapes
    /// `x`: [b, s, d] → [b, s, d]
    fn forward(&mut self, x: &Tensor, step: &Step) -> candle_core::Result<Tensor> {
        let (b, s, _) = x.dims3()?;
        let heads = |t: Tensor, n: usize| t.reshape((b, s, n, self.head_dim))?.transpose(1, 2);
        let q = self
            .q_norm
            .forward(&heads(self.q_proj.forward(x)?, self.n_heads)?)?;
        let k = self
            .k_norm
            .forward(&heads(self.k_proj.forward(x)?, self.n_kv_heads)?)?;
        let v = heads(self.v_proj.forward(x)?, self.n_kv_heads)?;
        let rope = if self.is_global {
            &step.global
        } else {
            &step.local
        };
        let q = rope.rotary.apply(&q, &rope.cos, &rope.sin)?;
        let k = rope.rotary.apply(&k, &rope.cos, &rope.sin)?;
        let (k, v) = self.cache.append(&k, &v)?;
        let y = attention(&q, &k, &v, rope.mask.as_ref(), self.scale)?;
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
}

impl Mlp {
    fn new(w: &Weights) -> Result<Self> {
        Ok(Self {
            gate_proj: w.linear("gate_proj")?,
            up_proj: w.linear("up_proj")?,
            down_proj: w.linear("down_proj")?,
        })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let gate = gelu_tanh(&self.gate_proj.forward(x)?)?;
        self.down_proj.forward(&(gate * self.up_proj.forward(x)?)?)
    }
}

struct Block {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    pre_feedforward_layernorm: RmsNorm,
    mlp: Mlp,
    post_feedforward_layernorm: RmsNorm,
}

impl Block {
    fn new(cfg: &Config, w: &Weights, is_global: bool) -> Result<Self> {
        let norm = |name: &str| -> Result<RmsNorm> {
            Ok(RmsNorm::new(
                w.gemma_norm_scale(&format!("{name}.weight"))?,
                cfg.rms_norm_eps,
            ))
        };
        Ok(Self {
            input_layernorm: norm("input_layernorm")?,
            self_attn: Attention::new(cfg, &w.pp("self_attn"), is_global)?,
            post_attention_layernorm: norm("post_attention_layernorm")?,
            pre_feedforward_layernorm: norm("pre_feedforward_layernorm")?,
            mlp: Mlp::new(&w.pp("mlp"))?,
            post_feedforward_layernorm: norm("post_feedforward_layernorm")?,
        })
    }

    fn forward(&mut self, x: &Tensor, step: &Step) -> candle_core::Result<Tensor> {
        let a = self
            .self_attn
            .forward(&self.input_layernorm.forward(x)?, step)?;
        let h = (x + self.post_attention_layernorm.forward(&a)?)?;
        let m = self
            .mlp
            .forward(&self.pre_feedforward_layernorm.forward(&h)?)?;
        &h + self.post_feedforward_layernorm.forward(&m)?
    }
}

struct RopeStep {
    rotary: Rotary,
    cos: Tensor,
    sin: Tensor,
    mask: Option<Tensor>,
}

/// Per-forward tables: one set for global layers, one for local (sliding-window) layers.
struct Step {
    global: RopeStep,
    local: RopeStep,
}

pub struct Gemma3 {
    embed_tokens: Embedding,
    embed_scale: f64,
    layers: Vec<Block>,
    norm: RmsNorm,
    lm_head: Linear,
    global_rotary: Rotary,
    local_rotary: Rotary,
    device: Device,
    dtype: DType,
    cfg: Config,
}

impl Gemma3 {
    pub fn new(cfg: &Config, w: &Weights) -> Result<Self> {
        cfg.validate()?;
        let m = w.pp("model");
        let embed_tokens = m.embedding("embed_tokens")?;
        let lm_head = if cfg.tie_word_embeddings || !w.contains("lm_head.weight") {
            embed_tokens.as_linear()
        } else {
            w.linear("lm_head")?
        };
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| Block::new(cfg, &m.pp(format!("layers.{i}")), cfg.is_global(i)))
            .collect::<Result<Vec<_>>>()?;
        let scaling: RopeScaling = cfg
            .rope_scaling
            .as_ref()
            .map(|r| r.to_scaling())
            .transpose()?
            .unwrap_or_default();
        Ok(Self {
            embed_tokens,
            // Hugging Face multiplies by √d rounded to the weights' dtype (f32: 25.298222 for d = 640).
            embed_scale: (cfg.hidden_size as f32).sqrt() as f64,
            layers,
            norm: RmsNorm::new(m.gemma_norm_scale("norm.weight")?, cfg.rms_norm_eps),
            lm_head,
            global_rotary: Rotary::new(cfg.head_dim, cfg.rope_theta, &scaling, false),
            local_rotary: Rotary::new(
                cfg.head_dim,
                cfg.rope_local_base_freq,
                &RopeScaling::None,
                false,
            ),
            device: w.device().clone(),
            dtype: w.activation_dtype(),
            cfg: cfg.clone(),
        })
    }

    fn rope_step(
        &self,
        rotary: &Rotary,
        offset: usize,
        len: usize,
        window: Option<usize>,
    ) -> Result<RopeStep> {
        let (cos, sin) = rotary.tables(offset, len, &self.device)?;
        Ok(RopeStep {
            rotary: rotary.clone(),
            cos,
            sin,
            mask: attention_mask(offset, len, window, &self.device)?,
        })
    }
}

impl Family for Gemma3 {
    fn forward(
        &mut self,
        ids: &Tensor,
        offset: usize,
        skip: &[bool],
        observe: Observer<'_>,
    ) -> Result<Tensor> {
        let (_, s) = ids.dims2()?;
        let step = Step {
            global: self.rope_step(&self.global_rotary, offset, s, None)?,
            local: self.rope_step(&self.local_rotary, offset, s, Some(self.cfg.sliding_window))?,
        };
        let mut x = (self.embed_tokens.forward(ids, self.dtype)? * self.embed_scale)?;
        observe(0, &x)?;
        for (i, block) in self.layers.iter_mut().enumerate() {
            if !skip[i] {
                x = block.forward(&x, &step)?;
            }
            observe(i + 1, &x)?;
        }
        Ok(x)
    }

    fn final_norm(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.norm.forward(x)?)
    }

    fn unembed(&self, x: &Tensor) -> Result<Tensor> {
        let logits = self.lm_head.forward(x)?;
        Ok(match self.cfg.final_logit_softcapping {
            Some(cap) => soft_cap(&logits, cap)?,
            None => logits,
        })
    }

    fn clear_cache(&mut self) {
        self.layers
            .iter_mut()
            .for_each(|b| b.self_attn.cache.clear());
    }

    fn config_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.cfg).unwrap_or_default()
    }
}
