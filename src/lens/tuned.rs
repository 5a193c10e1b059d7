//! The tuned lens (Belrose et al. 2023, *Eliciting Latent Predictions from Transformers with the
//! Tuned Lens*): before the final norm and unembedding, the residual of layer ℓ goes through an
//! affine translator learned for that layer, `h + W_ℓ h + b_ℓ` (the tuned-lens package adds the
//! translator's output to the residual, so a zero translator is the logit lens). Translators exist
//! for layers 0 … L − 1 (layer 0 = the embedding output); the last block's residual is read as
//! the model reads it.
//!
//! Lenses are folders in the tuned-lens package's format — `config.json` (`d_model`,
//! `num_hidden_layers`, `bias`, …) and `params.pt`, a PyTorch state dict `{i}.weight` ([d, d],
//! `nn.Linear` layout: output × input) and `{i}.bias` — read from a local folder or from the Hub
//! where the package publishes its lenses (the space `AlignmentResearch/tuned-lens`,
//! `lens/<model id>/`), and written in the same format ([`TunedLens::save`]), so the package loads
//! lenses trained here.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use serde::{Deserialize, Serialize};

use super::torch_file::{write_state_dict, SavedTensor};
use crate::error::{Error, Result};

/// The Hub repository (a space) where the tuned-lens package publishes its lenses, and the
/// folder inside it (`lens/<model id>`).
pub const HUB_REPO: &str = "AlignmentResearch/tuned-lens";
pub const HUB_SUBFOLDER: &str = "lens";

/// `config.json` of a tuned-lens folder (the package's `TunedLensConfig`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TunedLensConfig {
    /// The model the lens was tuned for.
    pub base_model_name_or_path: String,
    pub d_model: usize,
    /// Number of blocks L (one translator per layer 0 … L − 1).
    pub num_hidden_layers: usize,
    #[serde(default = "yes")]
    pub bias: bool,
    #[serde(default)]
    pub base_model_revision: Option<String>,
    /// The package's hash of the unembedding matrix (kept as read; not checked here).
    #[serde(default)]
    pub unembed_hash: Option<String>,
    #[serde(default = "linear_tuned_lens")]
    pub lens_type: String,
}

fn yes() -> bool {
    true
}

fn linear_tuned_lens() -> String {
    "linear_tuned_lens".into()
}

/// One layer's translator: `h ↦ h + h Wᵀ + b`.
#[derive(Clone, Debug)]
pub struct Translator {
    /// [d, d], `nn.Linear`'s layout (output × input), f32.
    pub weight: Tensor,
    /// [d], f32.
    pub bias: Option<Tensor>,
}

/// A tuned lens: one translator per layer 0 … L − 1.
#[derive(Clone, Debug)]
pub struct TunedLens {
    pub config: TunedLensConfig,
    pub translators: Vec<Translator>,
    /// sha256 of `params.pt` (what profiles and experiment configurations record).
    pub sha256: String,
    /// Where it was read from (a folder, or `hub:<model id>`).
    pub source: String,
}

impl TunedLens {
    /// A lens of zero translators (the logit lens in tuned-lens form): where training starts.
    pub fn zeros(base_model: &str, d_model: usize, n_layers: usize) -> Result<Self> {
        let translators = (0..n_layers)
            .map(|_| {
                Ok(Translator {
                    weight: Tensor::zeros((d_model, d_model), DType::F32, &Device::Cpu)?,
                    bias: Some(Tensor::zeros(d_model, DType::F32, &Device::Cpu)?),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            config: TunedLensConfig {
                base_model_name_or_path: base_model.into(),
                d_model,
                num_hidden_layers: n_layers,
                bias: true,
                base_model_revision: None,
                unembed_hash: None,
                lens_type: linear_tuned_lens(),
            },
            translators,
            sha256: String::new(),
            source: "untrained".into(),
        })
    }

    /// Reads `tuned:<spec>`'s spec: a folder with `config.json` and `params.pt`, else a model id
    /// whose lens the package publishes on the Hub (`lens/<id>/` of [`HUB_REPO`]).
    pub fn load(spec: &str) -> Result<Self> {
        let folder = Path::new(spec);
        if folder.is_dir() || spec.starts_with('.') || spec.starts_with('/') {
            return Self::from_folder(folder);
        }
        let dir = crate::model::hub::space_folder(HUB_REPO, &format!("{HUB_SUBFOLDER}/{spec}"), &[
            "config.json",
            "params.pt",
        ])
        .map_err(|e| {
            Error::invalid(format!(
                "`{spec}` is not a tuned-lens folder here (config.json + params.pt), and its lens could not be read from the Hub ({HUB_REPO}, {HUB_SUBFOLDER}/{spec}): {e}"
            ))
        })?;
        let mut lens = Self::from_folder(&dir)?;
        lens.source = format!("hub:{spec}");
        Ok(lens)
    }

    /// Reads a tuned-lens folder.
    pub fn from_folder(dir: &Path) -> Result<Self> {
        let cfg_path = dir.join("config.json");
        let text = std::fs::read_to_string(&cfg_path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::invalid(format!(
                "{} is not a tuned-lens folder: it has no config.json (a lens is config.json + params.pt, as the tuned-lens package saves it)",
                dir.display()
            )),
            _ => Error::io(&cfg_path, e),
        })?;
        let config: TunedLensConfig = serde_json::from_str(&text).map_err(|e| {
            Error::Data(format!(
                "{}: not a tuned-lens configuration: {e}",
                cfg_path.display()
            ))
        })?;
        if config.lens_type != "linear_tuned_lens" {
            return Err(Error::invalid(format!(
                "{}: lens type `{}` is not supported (only the package's linear_tuned_lens)",
                cfg_path.display(),
                config.lens_type
            )));
        }
        let params = dir.join("params.pt");
        let bytes = std::fs::read(&params).map_err(|e| Error::io(&params, e))?;
        let sha256 = crate::model::fingerprint::bytes_sha256(&bytes);
        let tensors = candle_core::pickle::read_all(&params).map_err(|e| {
            Error::Data(format!(
                "{}: cannot read the translators ({e}); the file may be truncated or not a PyTorch checkpoint",
                params.display()
            ))
        })?;
        let (d, n) = (config.d_model, config.num_hidden_layers);
        let mut translators = Vec::with_capacity(n);
        for i in 0..n {
            let get = |name: &str| {
                tensors
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, t)| t.to_dtype(DType::F32))
                    .transpose()
                    .map_err(Error::from)
            };
            let weight = get(&format!("{i}.weight"))?.ok_or_else(|| {
                Error::Data(format!(
                    "{}: no `{i}.weight`: the lens has fewer translators than config.json's {n} layers",
                    params.display()
                ))
            })?;
            if weight.dims() != [d, d] {
                return Err(Error::Data(format!(
                    "{}: `{i}.weight` is {:?}, expected [{d}, {d}] (d_model in config.json)",
                    params.display(),
                    weight.dims()
                )));
            }
            let bias = get(&format!("{i}.bias"))?;
            if let Some(b) = &bias {
                if b.dims() != [d] {
                    return Err(Error::Data(format!(
                        "{}: `{i}.bias` is {:?}, expected [{d}]",
                        params.display(),
                        b.dims()
                    )));
                }
            } else if config.bias {
                return Err(Error::Data(format!(
                    "{}: no `{i}.bias`, though config.json says the translators have one",
                    params.display()
                )));
            }
            translators.push(Translator { weight, bias });
        }
        if tensors
            .iter()
            .any(|(k, _)| k.split('.').next().and_then(|i| i.parse::<usize>().ok()) >= Some(n))
        {
            return Err(Error::Data(format!(
                "{}: more translators than config.json's {n} layers",
                params.display()
            )));
        }
        Ok(Self {
            config,
            translators,
            sha256,
            source: dir.display().to_string(),
        })
    }

    /// Fails unless the lens fits a model of `d_model` and `n_layers` blocks.
    pub fn check_fits(&self, model: &str, d_model: usize, n_layers: usize) -> Result<()> {
        if self.config.d_model != d_model || self.config.num_hidden_layers != n_layers {
            return Err(Error::invalid(format!(
                "the tuned lens {} was made for a model of {} blocks of width {} ({}); {model} has {n_layers} blocks of width {d_model}",
                self.source,
                self.config.num_hidden_layers,
                self.config.d_model,
                self.config.base_model_name_or_path
            )));
        }
        Ok(())
    }

    /// The residual `h` of layer `layer` (0 … L − 1) as the lens reads it: `h + h Wᵀ + b`, in
    /// `h`'s dtype and on its device. Layer L (and above) is returned unchanged.
    ///
    /// # Shapes
    /// `h`: [.., d] → [.., d]
    pub fn translate(&self, layer: usize, h: &Tensor) -> Result<Tensor> {
        let Some(t) = self.translators.get(layer) else {
            return Ok(h.clone());
        };
        let dims = h.dims().to_vec();
        let d = *dims.last().unwrap_or(&0);
        let rows = h.elem_count() / d.max(1);
        let x = h.reshape((rows, d))?.to_dtype(DType::F32)?;
        let w = t.weight.to_device(x.device())?;
        let mut y = x.matmul(&w.t()?)?;
        if let Some(b) = &t.bias {
            y = y.broadcast_add(&b.to_device(x.device())?)?;
        }
        Ok((x + y)?.to_dtype(h.dtype())?.reshape(dims)?)
    }

    /// Writes the lens as the tuned-lens package saves it (`config.json` + `params.pt`).
    pub fn save(&self, dir: &Path) -> Result<PathBuf> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut values: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
        for (i, t) in self.translators.iter().enumerate() {
            values.push((
                format!("{i}.weight"),
                t.weight.dims().to_vec(),
                t.weight.flatten_all()?.to_vec1::<f32>()?,
            ));
            if let Some(b) = &t.bias {
                values.push((format!("{i}.bias"), b.dims().to_vec(), b.to_vec1::<f32>()?));
            }
        }
        let saved: Vec<SavedTensor<'_>> = values
            .iter()
            .map(|(name, shape, v)| SavedTensor {
                name,
                shape,
                values: v,
            })
            .collect();
        let params = dir.join("params.pt");
        write_state_dict(&params, &saved)?;
        let config = serde_json::to_string(&self.config)?;
        crate::cache::write_atomic(&dir.join("config.json"), config.as_bytes())?;
        Ok(params)
    }
}

/// Which lens reads the residual stream.
#[derive(Clone, Debug, Default)]
pub enum LensKind {
    /// The model's own final norm and unembedding (the paper's lens).
    #[default]
    Logit,
    /// A tuned lens's translator first, then the final norm and unembedding.
    Tuned(Arc<TunedLens>),
}

impl LensKind {
    /// `logit`, or `tuned:<folder or model id>`.
    pub fn parse(spec: &str) -> Result<Self> {
        match spec.split_once(':') {
            _ if spec == "logit" => Ok(LensKind::Logit),
            Some(("tuned", rest)) if !rest.is_empty() => {
                Ok(LensKind::Tuned(Arc::new(TunedLens::load(rest)?)))
            }
            _ => Err(Error::invalid(format!(
                "unknown lens `{spec}` (expected logit, or tuned:<folder or model id>)"
            ))),
        }
    }

    /// What a profile's provenance and an experiment's configuration record (`None` for the logit
    /// lens, so that its records keep their bytes).
    pub fn record(&self) -> Option<LensRecord> {
        match self {
            LensKind::Logit => None,
            LensKind::Tuned(t) => Some(LensRecord {
                kind: "tuned".into(),
                sha256: t.sha256.clone(),
                source: t.source.clone(),
            }),
        }
    }

    pub fn tuned(&self) -> Option<&TunedLens> {
        match self {
            LensKind::Logit => None,
            LensKind::Tuned(t) => Some(t),
        }
    }
}

/// A lens other than the logit lens, as records keep it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LensRecord {
    /// `tuned`.
    pub kind: String,
    /// sha256 of the lens parameters (`params.pt`).
    pub sha256: String,
    /// Where it was read from (not part of an experiment's identity: see `sha256`).
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub source: String,
}
