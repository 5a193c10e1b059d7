//! Llama family (Llama 2/3.x, SmolLM2): pre-norm blocks, grouped-query attention with RoPE,
//! SwiGLU MLP, tied or untied embeddings.

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use super::config::{EosTokenIds, GgufMetadata, RopeScalingConfig};
use super::layers::{attention, attention_mask, KvCache, RmsNorm, RopeScaling, Rotary};
use super::weights::{Embedding, Linear, Weights};
use super::{Family, Observer};
use crate::error::{Error, Result};

/// Mirrors the fields of a Hugging Face `LlamaForCausalLM` `config.json` that the runtime uses.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Config {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    #[serde(default)]
    pub head_dim: Option<usize>,
    pub rms_norm_eps: f64,
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    #[serde(default)]
    pub rope_scaling: Option<RopeScalingConfig>,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    #[serde(default)]
    pub eos_token_id: Option<EosTokenIds>,
}

fn default_rope_theta() -> f64 {
    10000.0
}

impl Config {
    pub fn head_dim(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads)
    }

    pub fn num_kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    /// Reads the `llama.*` keys of a GGUF header.
    pub fn from_gguf(md: &GgufMetadata) -> Result<Self> {
        let hidden_size = md.usize("llama.embedding_length")?;
        let heads = md.usize("llama.attention.head_count")?;
        let rope_scaling = match md.opt_str("llama.rope.scaling.type")? {
            Some("linear") => Some(RopeScalingConfig::linear(
                md.f64("llama.rope.scaling.factor")?,
            )),
            _ => None,
        };
        Ok(Self {
            hidden_size,
            intermediate_size: md.usize("llama.feed_forward_length")?,
            num_hidden_layers: md.usize("llama.block_count")?,
            num_attention_heads: heads,
            num_key_value_heads: md.opt_usize("llama.attention.head_count_kv")?,
            head_dim: md.opt_usize("llama.rope.dimension_count")?,
            rms_norm_eps: md.f64("llama.attention.layer_norm_rms_epsilon")?,
            rope_theta: md.opt_f64("llama.rope.freq_base")?.unwrap_or(10000.0),
            rope_scaling,
            max_position_embeddings: md.usize("llama.context_length")?,
            vocab_size: md.vocab_size("llama.vocab_size")?,
            tie_word_embeddings: !md.has_tensor("output.weight"),
            bos_token_id: md.opt_u32("tokenizer.ggml.bos_token_id")?,
            eos_token_id: md
                .opt_u32("tokenizer.ggml.eos_token_id")?
                .map(EosTokenIds::One),
        })
    }

    fn validate(&self) -> Result<()> {
        let heads = self.num_attention_heads;
        if heads == 0 || self.num_kv_heads() == 0 || !heads.is_multiple_of(self.num_kv_heads()) {
            return Err(Error::Config(format!(
                "num_attention_heads {heads} must be a positive multiple of num_key_value_heads {}",
                self.num_kv_heads()
            )));
        }
        if !self.head_dim().is_multiple_of(2) {
            return Err(Error::Config(format!(
                "head_dim {} must be even",
                self.head_dim()
            )));
        }
        Ok(())
    }
}

struct Attention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    cache: KvCache,
}

impl Attention {
    fn new(cfg: &Config, w: &Weights) -> Result<Self> {
        Ok(Self {
            q_proj: w.linear("q_proj")?,
            k_proj: w.linear("k_proj")?,
            v_proj: w.linear("v_proj")?,
            o_proj: w.linear("o_proj")?,
            n_heads: cfg.num_attention_heads,
            n_kv_heads: cfg.num_kv_heads(),
            head_dim: cfg.head_dim(),
            cache: KvCache::default(),
        })
    }

    /// # Shapes
    /// `x`: [b, s, d] → [b, s, d]
    fn forward(&mut self, x: &Tensor, step: &Step) -> candle_core::Result<Tensor> {
        let (b, s, _) = x.dims3()?;
        let heads = |t: Tensor, n: usize| t.reshape((b, s, n, self.head_dim))?.transpose(1, 2);
        let q = heads(self.q_proj.forward(x)?, self.n_heads)?;
        let k = heads(self.k_proj.forward(x)?, self.n_kv_heads)?;
        let v = heads(self.v_proj.forward(x)?, self.n_kv_heads)?;
        let q = step.rotary.apply(&q, &step.cos, &step.sin)?;
        let k = step.rotary.apply(&k, &step.cos, &step.sin)?;
        let (k, v) = self.cache.append(&k, &v)?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let y = attention(&q, &k, &v, step.mask.as_ref(), scale)?;
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
        let gate = candle_nn::ops::silu(&self.gate_proj.forward(x)?)?;
        self.down_proj.forward(&(gate * self.up_proj.forward(x)?)?)
    }
}

struct Block {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
}

impl Block {
    fn new(cfg: &Config, w: &Weights) -> Result<Self> {
        let eps = cfg.rms_norm_eps;
        Ok(Self {
            input_layernorm: RmsNorm::new(w.vector("input_layernorm.weight")?, eps),
            self_attn: Attention::new(cfg, &w.pp("self_attn"))?,
            post_attention_layernorm: RmsNorm::new(
                w.vector("post_attention_layernorm.weight")?,
                eps,
            ),
            mlp: Mlp::new(&w.pp("mlp"))?,
        })
    }

    fn forward(&mut self, x: &Tensor, step: &Step) -> candle_core::Result<Tensor> {
        let h = (x + self
            .self_attn
            .forward(&self.input_layernorm.forward(x)?, step)?)?;
        &h + self
            .mlp
            .forward(&self.post_attention_layernorm.forward(&h)?)?
    }
}

/// Per-forward tables shared by every block.
struct Step {
    rotary: Rotary,
    cos: Tensor,
    sin: Tensor,
    mask: Option<Tensor>,
}

pub struct Llama {
    embed_tokens: Embedding,
    layers: Vec<Block>,
    norm: RmsNorm,
    lm_head: Linear,
    rotary: Rotary,
    device: Device,
    dtype: DType,
    cfg: Config,
}

impl Llama {
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
            .map(|i| Block::new(cfg, &m.pp(format!("layers.{i}"))))
            .collect::<Result<Vec<_>>>()?;
        let mut scaling: RopeScaling = cfg
            .rope_scaling
            .as_ref()
            .map(|r| r.to_scaling())
            .transpose()?
            .unwrap_or_default();
        if m.contains("rope_freqs.weight") {
            let factors = m.vector("rope_freqs.weight")?.to_vec1::<f32>()?;
            scaling = RopeScaling::Factors(factors);
        }
        // llama.cpp stores Q/K rows permuted for its pairwise rotation.
        let rotary = Rotary::new(cfg.head_dim(), cfg.rope_theta, &scaling, w.is_gguf());
        Ok(Self {
            embed_tokens,
            layers,
            norm: RmsNorm::new(m.vector("norm.weight")?, cfg.rms_norm_eps),
            lm_head,
            rotary,
            device: w.device().clone(),
            dtype: w.activation_dtype(),
            cfg: cfg.clone(),
        })
    }
}

impl Family for Llama {
    fn forward(
        &mut self,
        ids: &Tensor,
        offset: usize,
        skip: &[bool],
        observe: Observer<'_>,
    ) -> Result<Tensor> {
        let (_, s) = ids.dims2()?;
        let (cos, sin) = self.rotary.tables(offset, s, &self.device)?;
        let step = Step {
            rotary: self.rotary.clone(),
            cos,
            sin,
            mask: attention_mask(offset, s, None, &self.device)?,
        };
        let mut x = self.embed_tokens.forward(ids, self.dtype)?;
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
        Ok(self.lm_head.forward(x)?)
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
