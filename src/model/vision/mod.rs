//! Vision transformers for the lens (the paper's Appendix A.4): ViT and DeiT image classifiers in
//! the Hugging Face layout (`model_type` `vit` or `deit`; `config.json`, `*.safetensors`,
//! `preprocessor_config.json`).
//!
//! The image is cut into patches (the patch `Conv2d` is a linear map over flattened patches),
//! a class token (DeiT: and a distillation token) is put in front, learned positions are added,
//! and pre-norm blocks (LayerNorm, bidirectional attention, LayerNorm, GELU MLP) follow. The lens
//! reads the class token's residual after every block through the model's own final LayerNorm
//! and classification head, the same way the logit lens reads a language model; for
//! `DeiTForImageClassificationWithTeacher` it averages the class-token and distillation-token
//! heads, as the model itself predicts. Norms, linear layers and activations are the decoder's.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use serde::Deserialize;

use super::decoder::Activation;
use super::layers::LayerNorm;
use super::weights::{Linear, WeightDType, Weights};
use super::{hub, load::safetensors_files, LoadOptions, ModelSource};
use crate::error::{Error, Result};

pub mod preprocess;

pub use preprocess::ImageProcessor;

/// The `model_type`s this module reads.
pub const VISION_MODEL_TYPES: [&str; 2] = ["vit", "deit"];

/// The fields of a ViT/DeiT `config.json` the runtime needs.
#[derive(Clone, Debug, Deserialize)]
pub struct VisionConfig {
    pub model_type: String,
    #[serde(default)]
    pub architectures: Vec<String>,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    pub image_size: usize,
    pub patch_size: usize,
    #[serde(default = "default_channels")]
    pub num_channels: usize,
    /// Whether queries, keys and values have biases (every other linear layer has one).
    #[serde(default = "default_qkv_bias")]
    pub qkv_bias: bool,
    /// Class index (as a string key) → class name.
    #[serde(default)]
    pub id2label: std::collections::BTreeMap<String, String>,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_eps() -> f64 {
    1e-12
}
fn default_channels() -> usize {
    3
}
fn default_qkv_bias() -> bool {
    true
}

/// Fails unless `layer` is [out, in] and has a bias exactly when the architecture gives it one
/// (transformers would otherwise initialise the missing tensor at random and warn).
fn check_linear(
    layer: &Linear,
    name: &str,
    (out, inner): (usize, usize),
    bias: bool,
) -> Result<()> {
    let dims = layer.dims()?;
    if dims != (out, inner) {
        return Err(Error::Config(format!(
            "weight `{name}` is {}×{}, but the configuration implies {out}×{inner} (hidden_size, intermediate_size, num_labels)",
            dims.0, dims.1
        )));
    }
    if layer.has_bias() != bias {
        return Err(Error::Config(format!(
            "weight `{name}` {} a bias, but the configuration says it {} (qkv_bias for queries, keys and values)",
            if layer.has_bias() { "has" } else { "lacks" },
            if bias { "has one" } else { "has none" }
        )));
    }
    Ok(())
}

/// What a vision model is, for reports and provenance.
#[derive(Clone, Debug, PartialEq)]
pub struct VisionInfo {
    /// Folder name or repo id.
    pub name: String,
    /// `vit` or `deit`.
    pub model_type: String,
    /// The transformers class (`ViTForImageClassification`, …).
    pub architecture: String,
    /// Number of transformer blocks L.
    pub n_layers: usize,
    pub d_model: usize,
    pub n_classes: usize,
    /// Model input (height, width) in pixels.
    pub image_size: (usize, usize),
    pub dtype: WeightDType,
    pub source: String,
    /// sha256 over the config, preprocessor config and weights.
    pub sha256: String,
}

/// The classification head(s) the lens reads.
enum Head {
    /// `classifier` on the class token.
    Class(Linear),
    /// DeiT with teacher: the mean of `cls_classifier` (class token) and
    /// `distillation_classifier` (distillation token).
    ClassAndDistillation { cls: Linear, distill: Linear },
}

struct Block {
    norm_before: LayerNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    norm_after: LayerNorm,
    up: Linear,
    down: Linear,
}

/// A ViT or DeiT image classifier.
pub struct VisionModel {
    patch: Linear,
    /// Class (and distillation) tokens, [1, k, d].
    prefix: Tensor,
    /// Learned positions, [1, k + patches, d].
    positions: Tensor,
    blocks: Vec<Block>,
    norm: LayerNorm,
    head: Head,
    activation: Activation,
    heads: usize,
    patch_size: usize,
    channels: usize,
    labels: Vec<String>,
    processor: ImageProcessor,
    info: VisionInfo,
    device: Device,
    dtype: DType,
}

/// Whether `source` is an image classifier this module reads (its `config.json` names a vision
/// `model_type`); false for GGUF files, Hub ids and unreadable folders.
pub fn is_vision_source(source: &ModelSource) -> bool {
    let ModelSource::HfFolder(folder) = source else {
        return false;
    };
    std::fs::read_to_string(folder.join("config.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["model_type"].as_str().map(str::to_string))
        .is_some_and(|t| VISION_MODEL_TYPES.contains(&t.as_str()))
}

/// Loads a ViT or DeiT classifier from a folder or a Hub repository.
///
/// # Errors
/// [`Error::ModelNotFound`] for a missing file; [`Error::UnknownArchitecture`] for a GGUF file or
/// another `model_type`; [`Error::Config`] for inconsistent values; [`Error::MissingWeight`];
/// [`Error::Hub`] when a repository cannot be fetched.
pub fn load_vision(source: &ModelSource, opts: &LoadOptions) -> Result<VisionModel> {
    let folder = match source {
        ModelSource::HfFolder(f) => f.clone(),
        ModelSource::HubRepo { repo, revision } => hub::snapshot_files(
            repo,
            revision.as_deref(),
            &["preprocessor_config.json"],
            &[],
        )?,
        ModelSource::Gguf(p) => {
            return Err(Error::UnknownArchitecture {
                architecture: format!("{} (GGUF) as an image classifier", p.display()),
                supported: "ViT and DeiT in the Hugging Face layout (config.json, *.safetensors, preprocessor_config.json)".into(),
            })
        }
    };
    VisionModel::from_folder(&folder, source, opts)
}

impl VisionModel {
    fn from_folder(folder: &Path, source: &ModelSource, opts: &LoadOptions) -> Result<Self> {
        let config_path = folder.join("config.json");
        let text = std::fs::read_to_string(&config_path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::ModelNotFound {
                path: config_path.clone(),
            },
            _ => Error::io(&config_path, e),
        })?;
        let cfg: VisionConfig = serde_json::from_str(&text)
            .map_err(|e| Error::Config(format!("{}: {e}", config_path.display())))?;
        if !VISION_MODEL_TYPES.contains(&cfg.model_type.as_str()) {
            return Err(Error::UnknownArchitecture {
                architecture: format!("{} as an image classifier", cfg.model_type),
                supported: "vit, deit".into(),
            });
        }
        check_config(&cfg)?;
        let preprocessor = folder.join("preprocessor_config.json");
        let processor = ImageProcessor::from_file(&preprocessor)?;
        let dtype = opts.dtype.unwrap_or(WeightDType::F32);
        let files = safetensors_files(folder)?;
        let w = Weights::safetensors(folder, &files, dtype, &opts.device)?;
        let mut fingerprinted = vec![config_path, preprocessor];
        fingerprinted.extend(files);
        let sha256 = super::fingerprint::model_sha256(&fingerprinted)?;
        Self::build(&cfg, &w, processor, source, sha256, opts)
    }

    fn build(
        cfg: &VisionConfig,
        w: &Weights,
        processor: ImageProcessor,
        source: &ModelSource,
        sha256: String,
        opts: &LoadOptions,
    ) -> Result<Self> {
        let base = cfg.model_type.as_str();
        let e = w.pp(format!("{base}.embeddings"));
        let d = cfg.hidden_size;
        let patch = e.patch_linear("patch_embeddings.projection")?;
        check_linear(
            &patch,
            "patch_embeddings.projection",
            (d, cfg.num_channels * cfg.patch_size * cfg.patch_size),
            true,
        )?;
        let head = if w.contains("cls_classifier.weight") {
            Head::ClassAndDistillation {
                cls: w.linear("cls_classifier")?,
                distill: w.linear("distillation_classifier")?,
            }
        } else {
            Head::Class(w.linear("classifier")?)
        };
        let distilled =
            matches!(head, Head::ClassAndDistillation { .. }) || e.contains("distillation_token");
        let act_dtype = w.activation_dtype();
        let token = |name: &str| -> Result<Tensor> {
            let t = e.vector(name)?;
            if t.elem_count() != d {
                return Err(Error::Config(format!(
                    "`{name}` holds {} values, not hidden_size = {d}",
                    t.elem_count()
                )));
            }
            Ok(t.reshape((1, 1, d))?)
        };
        let mut prefix = vec![token("cls_token")?];
        if distilled {
            prefix.push(token("distillation_token")?);
        }
        let prefix = Tensor::cat(&prefix, 1)?.to_dtype(act_dtype)?;
        let patches = (cfg.image_size / cfg.patch_size).pow(2);
        let positions = e.vector("position_embeddings")?;
        let want = prefix.dim(1)? + patches;
        if positions.elem_count() != want * cfg.hidden_size {
            return Err(Error::Config(format!(
                "position_embeddings hold {} values, expected {want} positions × {} (image_size {} / patch_size {})",
                positions.elem_count(),
                cfg.hidden_size,
                cfg.image_size,
                cfg.patch_size
            )));
        }
        let positions = positions
            .reshape((1, want, cfg.hidden_size))?
            .to_dtype(act_dtype)?;
        let eps = cfg.layer_norm_eps;
        let norm = |w: &Weights, name: &str| -> Result<LayerNorm> {
            let (weight, bias) = w.layer_norm(name)?;
            Ok(LayerNorm::new(weight, bias, eps))
        };
        let (di, qkv) = (cfg.intermediate_size, cfg.qkv_bias);
        let blocks = (0..cfg.num_hidden_layers)
            .map(|i| {
                let prefix = format!("{base}.encoder.layer.{i}");
                let b = w.pp(&prefix);
                let linear = |name: &str, shape: (usize, usize), bias: bool| -> Result<Linear> {
                    let l = b.linear(name)?;
                    check_linear(&l, &format!("{prefix}.{name}"), shape, bias)?;
                    Ok(l)
                };
                Ok(Block {
                    norm_before: norm(&b, "layernorm_before")?,
                    q: linear("attention.attention.query", (d, d), qkv)?,
                    k: linear("attention.attention.key", (d, d), qkv)?,
                    v: linear("attention.attention.value", (d, d), qkv)?,
                    o: linear("attention.output.dense", (d, d), true)?,
                    norm_after: norm(&b, "layernorm_after")?,
                    up: linear("intermediate.dense", (di, d), true)?,
                    down: linear("output.dense", (d, di), true)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let n_classes = match &head {
            Head::Class(l) | Head::ClassAndDistillation { cls: l, .. } => l.dims()?.0,
        };
        match &head {
            Head::Class(l) => check_linear(l, "classifier", (n_classes, d), true)?,
            Head::ClassAndDistillation { cls, distill } => {
                check_linear(cls, "cls_classifier", (n_classes, d), true)?;
                check_linear(distill, "distillation_classifier", (n_classes, d), true)?;
            }
        }
        let labels = class_names(&cfg.id2label, n_classes)?;
        let input = processor.output_size(cfg.image_size, cfg.image_size);
        if input != (cfg.image_size, cfg.image_size) {
            return Err(Error::Config(format!(
                "preprocessor_config.json makes {}×{} inputs but the model takes {}×{} (image_size)",
                input.0, input.1, cfg.image_size, cfg.image_size
            )));
        }
        let architecture = cfg.architectures.first().cloned().unwrap_or_else(|| {
            match &head {
                Head::Class(_) if base == "deit" => "DeiTForImageClassification",
                Head::Class(_) => "ViTForImageClassification",
                Head::ClassAndDistillation { .. } => "DeiTForImageClassificationWithTeacher",
            }
            .to_string()
        });
        Ok(Self {
            patch,
            prefix,
            positions,
            blocks,
            norm: norm(&w.pp(base), "layernorm")?,
            head,
            activation: Activation::from_hf(&cfg.hidden_act)?,
            heads: cfg.num_attention_heads,
            patch_size: cfg.patch_size,
            channels: cfg.num_channels,
            labels,
            processor,
            info: VisionInfo {
                name: source.name(),
                model_type: base.to_string(),
                architecture,
                n_layers: cfg.num_hidden_layers,
                d_model: cfg.hidden_size,
                n_classes,
                image_size: (cfg.image_size, cfg.image_size),
                dtype: w.dtype(),
                source: source.describe(),
                sha256,
            },
            device: opts.device.clone(),
            dtype: act_dtype,
        })
    }

    pub fn info(&self) -> &VisionInfo {
        &self.info
    }

    /// Class names, by class index (`id2label`; `LABEL_i` where the config names none).
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// The preprocessing of `preprocessor_config.json`.
    pub fn processor(&self) -> &ImageProcessor {
        &self.processor
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The classifier's logits read at every layer: rows are layer-major (layer 0 = the
    /// embeddings when `include_embed`, then blocks 1..=L), images within a layer.
    ///
    /// # Shapes
    /// `pixels`: [b, channels, H, W] (f32) → [(L (+ 1)) · b, classes] (f32)
    pub fn lens_logits(&self, pixels: &Tensor, include_embed: bool) -> Result<Tensor> {
        let (b, c, h, w) = pixels.dims4()?;
        let p = self.patch_size;
        if c != self.channels || (h, w) != self.info.image_size {
            return Err(Error::invalid(format!(
                "pixel values of shape [{b}, {c}, {h}, {w}], expected [b, {}, {}, {}]",
                self.channels, self.info.image_size.0, self.info.image_size.1
            )));
        }
        let (gh, gw) = (h / p, w / p);
        // [b, c, gh, p, gw, p] → [b, gh, gw, c, p, p]: each patch flattened as the Conv2d's
        // weight is ([c, p, p]), patches in row-major order as `flatten(2)` leaves them.
        let patches = pixels
            .to_device(&self.device)?
            .to_dtype(self.dtype)?
            .reshape((b, c, gh, p, gw, p))?
            .permute((0, 2, 4, 1, 3, 5))?
            .contiguous()?
            .reshape((b, gh * gw, c * p * p))?;
        let x = self.patch.forward(&patches)?;
        let prefix = self
            .prefix
            .broadcast_as((b, self.prefix.dim(1)?, self.info.d_model))?;
        let mut x = Tensor::cat(&[&prefix, &x], 1)?.broadcast_add(&self.positions)?;
        let k = self.prefix.dim(1)?;
        let mut read = Vec::with_capacity(self.blocks.len() + 1);
        if include_embed {
            read.push(x.narrow(1, 0, k)?);
        }
        for block in &self.blocks {
            x = self.block(block, &x)?;
            read.push(x.narrow(1, 0, k)?);
        }
        // [rows, k, d] with rows layer-major.
        let tokens = Tensor::cat(&read, 0)?;
        let normed = self.norm.forward(&tokens)?;
        let logits = match &self.head {
            Head::Class(l) => l.forward(&normed.narrow(1, 0, 1)?.squeeze(1)?)?,
            Head::ClassAndDistillation { cls, distill } => {
                let a = cls.forward(&normed.narrow(1, 0, 1)?.squeeze(1)?)?;
                let d = distill.forward(&normed.narrow(1, 1, 1)?.squeeze(1)?)?;
                ((a + d)? / 2.0)?
            }
        };
        Ok(logits.to_dtype(DType::F32)?)
    }

    /// # Shapes
    /// `x`: [b, s, d] → [b, s, d]
    fn block(&self, block: &Block, x: &Tensor) -> Result<Tensor> {
        let (b, s, d) = x.dims3()?;
        let hd = d / self.heads;
        let h = block.norm_before.forward(x)?;
        let split = |t: Tensor| -> candle_core::Result<Tensor> {
            t.reshape((b, s, self.heads, hd))?
                .transpose(1, 2)?
                .to_dtype(DType::F32)?
                .contiguous()
        };
        let q = (split(block.q.forward(&h)?)? * (hd as f64).powf(-0.5))?;
        let k = split(block.k.forward(&h)?)?;
        let v = split(block.v.forward(&h)?)?;
        // Every token sees every token: no mask.
        let probs = candle_nn::ops::softmax_last_dim(&q.matmul(&k.t()?)?)?;
        let y = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((b, s, d))?
            .to_dtype(self.dtype)?;
        let x = (x + block.o.forward(&y)?)?;
        let m = block.norm_after.forward(&x)?;
        let m = block
            .down
            .forward(&self.activation.apply(&block.up.forward(&m)?)?)?;
        Ok((x + m)?)
    }
}

/// Class names by index from `id2label` (`LABEL_i` when the config has none); the keys must be
/// the indices 0..classes, one per row of the head.
fn class_names(
    id2label: &std::collections::BTreeMap<String, String>,
    n_classes: usize,
) -> Result<Vec<String>> {
    if id2label.is_empty() {
        return Ok((0..n_classes).map(|i| format!("LABEL_{i}")).collect());
    }
    let mut names = vec![None; n_classes];
    for (key, name) in id2label {
        match key.parse::<usize>() {
            Ok(i) if i < n_classes => names[i] = Some(name.clone()),
            _ => {
                return Err(Error::Config(format!(
                    "id2label key {key:?} is not a class index below {n_classes} (the head's rows)"
                )))
            }
        }
    }
    names
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            n.ok_or_else(|| {
                Error::Config(format!(
                    "id2label names {} classes but the head has {n_classes}; class {i} has no name",
                    id2label.len()
                ))
            })
        })
        .collect()
}

fn check_config(cfg: &VisionConfig) -> Result<()> {
    let positive = [
        ("hidden_size", cfg.hidden_size),
        ("num_hidden_layers", cfg.num_hidden_layers),
        ("num_attention_heads", cfg.num_attention_heads),
        ("intermediate_size", cfg.intermediate_size),
        ("image_size", cfg.image_size),
        ("patch_size", cfg.patch_size),
        ("num_channels", cfg.num_channels),
    ];
    if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
        return Err(Error::Config(format!("{name} must be positive")));
    }
    if !cfg.hidden_size.is_multiple_of(cfg.num_attention_heads) {
        return Err(Error::Config(format!(
            "hidden_size {} is not a multiple of num_attention_heads {}",
            cfg.hidden_size, cfg.num_attention_heads
        )));
    }
    if !cfg.image_size.is_multiple_of(cfg.patch_size) {
        return Err(Error::Config(format!(
            "image_size {} is not a multiple of patch_size {}",
            cfg.image_size, cfg.patch_size
        )));
    }
    if cfg.num_channels != 3 {
        return Err(Error::Config(format!(
            "num_channels {} is not supported (RGB models only)",
            cfg.num_channels
        )));
    }
    Ok(())
}
