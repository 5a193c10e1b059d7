//! The lens-able transformer runtime.
//!
//! A [`Model`] runs a decoder-only transformer block by block and shows the residual stream after
//! every block (the paper's `resid_post`) to an observer, with a KV cache for generation and a
//! per-block skip switch (`block(x) = x`, the paper's intervention). The block loop lives once, in
//! `decoder`; a family file ([`families`]) parses its config into the decoder's spec;
//! [`load()`] reads GGUF files or the Hugging Face layout.

use std::fmt;
use std::str::FromStr;

use candle_core::{Device, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub mod allocator;
pub mod config;
mod decode_attention;
mod decoder;
pub mod export;
pub mod families;
pub mod fingerprint;
mod gemv;
mod gguf_header;
pub mod hub;
pub mod layers;
pub mod load;
pub mod offline;
pub mod paper_models;
mod qmatmul;
pub mod readout;
pub mod tokenizer;
pub mod vision;
pub mod weights;

use decoder::Decoder;
pub use load::{load, LoadOptions, LoadedModel, ModelSource};
pub use tokenizer::TextTokenizer;
pub use weights::WeightDType;

/// The model families the runtime implements (see [`families`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Architecture {
    Llama,
    Gemma3,
    Gemma,
    Gemma2,
    Qwen2,
    Qwen3,
    Mistral,
    Phi3,
    Gpt2,
    #[serde(rename = "gpt_neox")]
    GptNeoX,
    /// A checkpoint of another `model_type` that fits the decoder's axes (auto-detected).
    Auto,
}

impl Architecture {
    /// The supported families, as error messages list them.
    pub fn supported() -> String {
        families::supported()
    }

    pub fn as_str(self) -> &'static str {
        families::by_architecture(self).map_or("unknown", |f| f.name)
    }
}

impl fmt::Display for Architecture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Architecture {
    type Err = Error;
    /// Accepts GGUF `general.architecture` values, Hugging Face `model_type`s and class names.
    fn from_str(s: &str) -> Result<Self> {
        families::by_gguf_architecture(s)
            .or_else(|| families::by_model_type(s))
            .map(|f| f.architecture)
            .ok_or_else(|| Error::UnknownArchitecture {
                architecture: s.to_string(),
                supported: Architecture::supported(),
            })
    }
}

/// What a user needs to know about a loaded model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// A short name: the file stem or the repo id.
    pub name: String,
    pub architecture: Architecture,
    /// Number of transformer blocks L.
    pub n_layers: usize,
    pub d_model: usize,
    pub vocab_size: usize,
    pub context_length: usize,
    pub dtype: WeightDType,
    /// Where the weights came from (path or repo id).
    pub source: String,
    /// sha256 of the GGUF file, or of a Hugging Face folder's file digests
    /// ([`fingerprint::model_sha256`]).
    #[serde(default)]
    pub sha256: String,
}

/// Where in the stack a residual stream is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tap {
    /// Layer 0 is the embedding output, layer i the residual stream after block i.
    Layer(usize),
    /// The residual stream inside block i (1..=L) after its attention, before its MLP (blocks
    /// with a sequential residual only).
    AfterAttention(usize),
    /// What block i's attention writes to the residual stream (after its output projection and
    /// any post-attention norm); zero for a skipped block.
    AttentionWrite(usize),
    /// What block i's MLP writes (after any post-MLP norm); zero for a skipped block.
    MlpWrite(usize),
}

/// Called with `(tap, residual)` for every residual stream a forward pass makes (`[b, s, d]`).
pub type Observer<'a> = &'a mut (dyn FnMut(Tap, &Tensor) -> Result<()> + Send);

/// A loaded decoder-only transformer, ready to be lensed.
pub struct Model {
    decoder: Decoder,
    info: ModelInfo,
    device: Device,
    skip: Vec<bool>,
    /// Number of columns in the KV cache (positions, plus left padding in a batch).
    cached: usize,
    /// Left padding per batch row ([`Model::set_left_padding`]); empty for unpadded input.
    pads: Vec<usize>,
    /// The column the prompt runs to ([`Model::declare_prompt_end`]); 0 when not declared.
    prompt_end: usize,
    /// Longest input run through the blocks at once; longer prompts go through the KV cache in
    /// chunks of this size, so attention scores take chunk × length memory, not length².
    prefill_chunk: usize,
    /// Also capture the mid-block residual ([`Captured::after_attention`]).
    capture_attention: bool,
    /// Also capture what each block's attention and MLP write ([`Captured::attention_writes`],
    /// [`Captured::mlp_writes`]).
    capture_writes: bool,
}

/// Default [`Model::set_prefill_chunk`]: 512 positions.
pub const DEFAULT_PREFILL_CHUNK: usize = 512;

/// Which positions of a forward pass to keep the residual streams of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions {
    /// Only the last position (what generation needs).
    Last,
    /// Every position of the input.
    All,
}

/// Residual streams kept from one forward pass.
#[derive(Clone, Debug)]
pub struct Captured {
    /// The residual stream: `residuals[0]` is the embedding output (layer 0), `residuals[b]` the
    /// stream after block b (layer b, b = 1..=L); each is [b, p, d] with p = 1 for
    /// [`Positions::Last`].
    pub residuals: Vec<Tensor>,
    /// The residual stream of block i + 1 after its attention, before its MLP, at the same
    /// positions; empty unless [`Model::set_capture_attention`] is on.
    pub after_attention: Vec<Tensor>,
    /// What block i + 1's attention writes to the residual stream, at the same positions; empty
    /// unless [`Model::set_capture_writes`] is on.
    pub attention_writes: Vec<Tensor>,
    /// What block i + 1's MLP writes; empty unless [`Model::set_capture_writes`] is on.
    pub mlp_writes: Vec<Tensor>,
}

impl Model {
    pub(crate) fn new(decoder: Decoder, info: ModelInfo, device: Device) -> Self {
        let skip = vec![false; info.n_layers];
        Self {
            decoder,
            info,
            device,
            skip,
            cached: 0,
            pads: Vec::new(),
            prompt_end: 0,
            prefill_chunk: DEFAULT_PREFILL_CHUNK,
            capture_attention: false,
            capture_writes: false,
        }
    }

    /// Whether every block adds its attention to the residual before its MLP reads it, so that a
    /// mid-block read point exists (false for parallel-residual blocks: GPT-NeoX/Pythia, Phi-2,
    /// where attention and MLP read the same input and add together).
    pub fn has_sequential_residual(&self) -> bool {
        !self.decoder.parallel_residual()
    }

    /// Also capture the residual after each block's attention ([`Captured::after_attention`]).
    ///
    /// # Errors
    /// On a parallel-residual model, which has no such point.
    pub fn set_capture_attention(&mut self, on: bool) -> Result<()> {
        if on && !self.has_sequential_residual() {
            return Err(Error::invalid(format!(
                "{} ({}) has a parallel residual: attention and MLP read the same input and add to the stream together, so there is no residual between them to read; use --read-point block",
                self.info.name,
                self.info.architecture.as_str()
            )));
        }
        self.capture_attention = on;
        Ok(())
    }

    /// Whether [`Model::set_capture_attention`] is on.
    pub fn captures_attention(&self) -> bool {
        self.capture_attention
    }

    /// Also capture what every block's attention and MLP write to the residual stream (the
    /// components a lens can decode beside the residual; every family has both, parallel-residual
    /// ones included).
    pub fn set_capture_writes(&mut self, on: bool) {
        self.capture_writes = on;
    }

    /// Whether [`Model::set_capture_writes`] is on.
    pub fn captures_writes(&self) -> bool {
        self.capture_writes
    }

    /// Sets the prefill chunk (at least 1). Chunking changes only the order of floating-point sums:
    /// profiles agree to about 1e-6 nats with any chunk size.
    pub fn set_prefill_chunk(&mut self, chunk: usize) -> Result<()> {
        if chunk == 0 {
            return Err(Error::invalid(
                "the prefill chunk must be at least 1 position",
            ));
        }
        self.prefill_chunk = chunk;
        Ok(())
    }

    /// The longest input run through the blocks at once ([`Model::set_prefill_chunk`]).
    pub fn prefill_chunk(&self) -> usize {
        self.prefill_chunk
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn n_layers(&self) -> usize {
        self.info.n_layers
    }

    /// Number of positions currently held in the KV cache.
    pub fn cached_len(&self) -> usize {
        self.cached
    }

    /// Forget the KV cache and any padding (start new sequences).
    pub fn reset(&mut self) {
        self.decoder.clear_cache();
        self.cached = 0;
        self.pads.clear();
        self.prompt_end = 0;
    }

    /// Declares that the prompt runs to column `end` when it is fed in several calls (a runner
    /// streaming it chunk by chunk): rotary scalings that depend on the sequence length (Phi-3's
    /// LongRoPE) then choose by the whole prompt, as one forward over it does in transformers.
    pub fn declare_prompt_end(&mut self, end: usize) {
        self.prompt_end = end;
    }

    /// Declares the next input a left-padded batch: row r's first `pads[r]` columns are padding
    /// (any token id; nothing attends to them and they take no position). Call after
    /// [`Model::reset`], before the first forward of the batch.
    ///
    /// # Errors
    /// When the cache is not empty.
    pub fn set_left_padding(&mut self, pads: Vec<usize>) -> Result<()> {
        if self.cached != 0 {
            return Err(Error::invalid(
                "left padding is set before the first forward of a batch (reset the model first)",
            ));
        }
        self.pads = pads;
        Ok(())
    }

    /// Left padding per batch row (empty when none was set).
    pub fn left_padding(&self) -> &[usize] {
        &self.pads
    }

    /// Keeps the batch rows `rows` (indices into the current batch, in the new order) of the KV
    /// cache and the padding: rows that finished stop costing anything.
    pub fn retain_rows(&mut self, rows: &[usize]) -> Result<()> {
        if rows.is_empty() {
            // Keeping nothing is starting over (and CUDA's index_select refuses an empty index).
            self.reset();
            return Ok(());
        }
        let idx: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
        let idx = Tensor::new(idx.as_slice(), &self.device)?;
        self.decoder.retain_rows(&idx)?;
        if !self.pads.is_empty() {
            let pads = rows
                .iter()
                .map(|&r| {
                    self.pads
                        .get(r)
                        .copied()
                        .ok_or_else(|| Error::invalid(format!("no batch row {r} to keep")))
                })
                .collect::<Result<Vec<_>>>()?;
            self.pads = pads;
        }
        Ok(())
    }

    /// Fails when a batch of `b` rows does not match the declared padding.
    fn check_padding(&self, b: usize) -> Result<()> {
        if !self.pads.is_empty() && self.pads.len() != b {
            return Err(Error::invalid(format!(
                "a batch of {b} rows was run with padding declared for {}",
                self.pads.len()
            )));
        }
        Ok(())
    }

    /// Fails when `s` more columns would take some row past the context length.
    fn check_context(&self, s: usize) -> Result<()> {
        // Rows count their own positions: the least padded row is the longest.
        let least_pad = self.pads.iter().copied().min().unwrap_or(0);
        let requested = (self.cached + s).saturating_sub(least_pad);
        if requested > self.info.context_length {
            return Err(Error::ContextOverflow {
                requested,
                context_length: self.info.context_length,
                prompt_tokens: self.cached.saturating_sub(least_pad),
                generate: s,
            });
        }
        Ok(())
    }

    /// Skip the given blocks, numbered 1..=L as everywhere in this crate (see the crate docs,
    /// "Layers and blocks"): their write to the residual stream is zeroed, so layer b equals
    /// layer b − 1. Resets the KV cache, since cached keys depend on it.
    pub fn set_skipped_blocks(&mut self, blocks: &[usize]) -> Result<()> {
        let l = self.info.n_layers;
        if let Some(b) = blocks.iter().find(|&&b| b == 0 || b > l) {
            return Err(Error::invalid(format!(
                "cannot skip block {b}: blocks are numbered 1..={l} (layer 0 is the embedding output, which no block writes)"
            )));
        }
        self.skip = vec![false; l];
        blocks.iter().for_each(|&b| self.skip[b - 1] = true);
        self.reset();
        Ok(())
    }

    /// The skipped blocks, numbered 1..=L.
    pub fn skipped_blocks(&self) -> Vec<usize> {
        (0..self.skip.len())
            .filter(|&i| self.skip[i])
            .map(|i| i + 1)
            .collect()
    }

    /// Appends `ids` ([b, s], u32) to the cached sequence and returns the residual streams at the
    /// requested positions, the embedding output included.
    pub fn forward_capture(&mut self, ids: &Tensor, positions: Positions) -> Result<Captured> {
        let (b, s) = ids.dims2()?;
        if s == 0 {
            return Err(Error::invalid("forward needs at least one token"));
        }
        self.check_padding(b)?;
        self.check_context(s)?;
        let horizon = self.prompt_end.max(self.cached + s);
        // Long prompts go through the cache chunk by chunk: peak memory grows linearly with the
        // prompt (the attention scores of one chunk against the keys so far), not with its square.
        let chunk = self.prefill_chunk.max(1);
        let n_chunks = s.div_ceil(chunk);
        let n_layers = self.info.n_layers;
        let mut parts: Vec<Vec<Tensor>> = vec![Vec::with_capacity(n_chunks); n_layers + 1];
        let per_block = |on: bool| -> Vec<Vec<Tensor>> {
            if on {
                vec![Vec::with_capacity(n_chunks); n_layers]
            } else {
                Vec::new()
            }
        };
        let mut mid_parts = per_block(self.capture_attention);
        let mut attn_parts = per_block(self.capture_writes);
        let mut mlp_parts = per_block(self.capture_writes);
        for c in 0..n_chunks {
            let start = c * chunk;
            let len = chunk.min(s - start);
            let last_chunk = c + 1 == n_chunks;
            if positions == Positions::Last && !last_chunk {
                // Only the cache is needed from this chunk.
                let ids_c = ids.narrow(1, start, len)?;
                self.advance(&ids_c, horizon, &mut |_, _| Ok(()))?;
                continue;
            }
            let mut observe = |tap: Tap, x: &Tensor| -> Result<()> {
                let slot = match tap {
                    Tap::Layer(layer) => parts.get_mut(layer),
                    Tap::AfterAttention(block) => {
                        block.checked_sub(1).and_then(|i| mid_parts.get_mut(i))
                    }
                    Tap::AttentionWrite(block) => {
                        block.checked_sub(1).and_then(|i| attn_parts.get_mut(i))
                    }
                    Tap::MlpWrite(block) => block.checked_sub(1).and_then(|i| mlp_parts.get_mut(i)),
                };
                if let Some(p) = slot {
                    p.push(match positions {
                        Positions::Last => x.narrow(1, len - 1, 1)?,
                        Positions::All => x.clone(),
                    });
                }
                Ok(())
            };
            let ids_c = if n_chunks == 1 {
                ids.clone()
            } else {
                ids.narrow(1, start, len)?
            };
            self.advance(&ids_c, horizon, &mut observe)?;
        }
        let join = |parts: Vec<Vec<Tensor>>| {
            parts
                .into_iter()
                .map(|mut p| {
                    if p.len() == 1 {
                        Ok(p.remove(0))
                    } else {
                        Tensor::cat(&p, 1).map_err(Error::from)
                    }
                })
                .collect::<Result<Vec<_>>>()
        };
        Ok(Captured {
            residuals: join(parts)?,
            after_attention: join(mid_parts)?,
            attention_writes: join(attn_parts)?,
            mlp_writes: join(mlp_parts)?,
        })
    }

    /// The model's own next-token logits at every position of `ids` ([b, s] → [b, s, vocab]),
    /// without any lens; appends to the cache like [`Model::forward_capture`].
    pub fn logits(&mut self, ids: &Tensor) -> Result<Tensor> {
        let (b, s) = ids.dims2()?;
        self.check_padding(b)?;
        self.check_context(s)?;
        let horizon = self.prompt_end.max(self.cached + s);
        let x = self.advance(ids, horizon, &mut |_, _| Ok(()))?;
        self.unembed(&self.final_norm(&x)?)
    }

    /// Runs `ids` ([b, s]) through the blocks after the cached columns (with the padding, the
    /// skipped blocks and the rotary horizon) and appends them to the cache.
    fn advance(&mut self, ids: &Tensor, horizon: usize, observe: Observer<'_>) -> Result<Tensor> {
        let s = ids.dim(1)?;
        let mut forward = || {
            crate::phases::timed(crate::phases::Phase::Decoder, || {
                self.decoder
                    .forward(ids, self.cached, &self.pads, horizon, &self.skip, observe)
            })
        };
        // On the CPU the blocks' many small parallel operations run from one of rayon's threads
        // (see crate::threads); a GPU's work stays on the thread that holds its context.
        let x = if matches!(self.device, Device::Cpu) {
            crate::threads::on_pool(forward)?
        } else {
            forward()?
        };
        self.cached += s;
        Ok(x)
    }

    /// What a lens reads through (final norm, dense f32 unembedding, soft-cap), as training
    /// differentiates it.
    pub fn readout(&self) -> Result<readout::Readout> {
        self.decoder.readout()
    }

    /// The dtype residual streams are computed in.
    pub fn dtype(&self) -> candle_core::DType {
        self.info.dtype.activation_dtype()
    }

    /// The model's final norm.
    pub fn final_norm(&self, x: &Tensor) -> Result<Tensor> {
        self.decoder.final_norm(x)
    }

    /// Unembedding (plus soft-cap) of normalised states.
    pub fn unembed(&self, x: &Tensor) -> Result<Tensor> {
        self.decoder.unembed(x)
    }

    /// Hugging Face style `config.json` of the loaded model.
    pub fn config_json(&self) -> serde_json::Value {
        self.decoder.config_json()
    }
}

/// Parse a device name: `cpu`, `cuda` or `cuda:N`.
pub fn parse_device(name: &str) -> Result<Device> {
    match name {
        "cpu" => Ok(Device::Cpu),
        "cuda" => cuda_device(0),
        other => match other.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(i)) => cuda_device(i),
            _ => Err(Error::invalid(format!(
                "unknown device `{other}` (expected cpu, cuda or cuda:N)"
            ))),
        },
    }
}

fn cuda_device(ordinal: usize) -> Result<Device> {
    if !candle_core::utils::cuda_is_available() {
        return Err(Error::Device(
            "this build has no CUDA support; rebuild with `--features cuda` on a machine with the CUDA toolkit".into(),
        ));
    }
    Device::new_cuda(ordinal).map_err(|e| Error::Device(format!("cannot open cuda:{ordinal}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architecture_names() {
        assert_eq!(
            "gemma3_text".parse::<Architecture>().unwrap(),
            Architecture::Gemma3
        );
        assert_eq!(
            "llama".parse::<Architecture>().unwrap(),
            Architecture::Llama
        );
        let e = "mamba".parse::<Architecture>().unwrap_err().to_string();
        assert!(e.contains("mamba") && e.contains("gemma3"), "{e}");
    }

    #[test]
    fn names_agree_with_serde() {
        for f in families::FAMILIES {
            assert_eq!(
                serde_json::to_value(f.architecture).unwrap(),
                serde_json::json!(f.name)
            );
            if f.architecture != Architecture::Auto {
                assert_eq!(f.name.parse::<Architecture>().unwrap(), f.architecture);
            }
            assert_eq!(f.architecture.as_str(), f.name);
        }
    }

    #[test]
    fn device_names() {
        assert!(matches!(parse_device("cpu").unwrap(), Device::Cpu));
        assert!(parse_device("tpu").unwrap_err().to_string().contains("tpu"));
        if !candle_core::utils::cuda_is_available() {
            assert!(parse_device("cuda")
                .unwrap_err()
                .to_string()
                .contains("CUDA"));
        }
    }
}
