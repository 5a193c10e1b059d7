//! Loading a model and its tokenizer from a GGUF file, a Hugging Face folder or a Hub repo id.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use candle_core::Device;

use super::config::GgufMetadata;
use super::decoder::Decoder;
use super::families::{self, Family, HfConfig};
use super::tokenizer::TextTokenizer;
use super::weights::{WeightDType, Weights};
use super::{hub, Architecture, Model, ModelInfo};
use crate::error::{Error, Result};

/// Env var naming the default model (path or repo id).
pub const ENV_MODEL: &str = "ENTROPY_LENS_MODEL";
/// The Hub id used when nothing else is configured.
pub const DEFAULT_HUB_MODEL: &str = "HuggingFaceTB/SmolLM2-135M-Instruct";

/// Where a model comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelSource {
    /// A GGUF file.
    Gguf(PathBuf),
    /// A folder in Hugging Face layout: `config.json`, `*.safetensors`, `tokenizer.json`.
    HfFolder(PathBuf),
    /// A Hugging Face Hub repository (downloaded into the Hub cache, `HF_HOME` honoured).
    HubRepo {
        repo: String,
        revision: Option<String>,
    },
}

impl ModelSource {
    /// Interprets a user's `--model` value: an existing file (GGUF) or folder (Hugging Face
    /// layout); else a name in the models folder ([`crate::cache::models_dir`]): an offline
    /// model's short name (`smollm2`, `gemma3-270m`, see [`super::offline`]) or any file or folder
    /// name there (`SmolLM2-135M-Instruct.Q4_1.gguf`), so the same value works from any folder;
    /// else a registered short name (`gpt2-medium`, see [`super::paper_models`]); else a Hub id
    /// `owner/name[@rev]`.
    ///
    /// An offline model that has not been downloaded yet is an error here (this layer does not
    /// download); [`crate::fetch::model_source`] fetches it first.
    ///
    /// # Errors
    /// [`Error::Config`] for a folder without `config.json`; [`Error::ModelNotFound`] when the
    /// value is none of these.
    pub fn parse(spec: &str) -> Result<Self> {
        let path = Path::new(spec);
        if path.is_file() {
            return Ok(ModelSource::Gguf(path.to_path_buf()));
        }
        if path.is_dir() {
            return Self::folder(path);
        }
        if let Some(found) = Self::in_models_folder(spec)? {
            return Ok(found);
        }
        if let Some(m) = super::offline::lookup(spec) {
            return Err(Error::OfflineModelNotFetched {
                name: spec.to_string(),
                path: crate::cache::models_dir()?.join(m.file_name),
            });
        }
        if let Some(m) = super::paper_models::lookup(spec) {
            return Ok(ModelSource::HubRepo {
                repo: m.hub_id.to_string(),
                revision: None,
            });
        }
        let looks_like_repo = {
            let (id, _) = spec.split_once('@').unwrap_or((spec, ""));
            let parts: Vec<&str> = id.split('/').collect();
            parts.len() == 2
                && parts.iter().all(|p| {
                    !p.is_empty()
                        && p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                })
                && !spec.starts_with('.')
                && !id.ends_with(".gguf")
        };
        if looks_like_repo {
            let (repo, revision) = match spec.split_once('@') {
                Some((r, v)) => (r.to_string(), Some(v.to_string())),
                None => (spec.to_string(), None),
            };
            return Ok(ModelSource::HubRepo { repo, revision });
        }
        Err(Error::ModelNotFound {
            path: path.to_path_buf(),
        })
    }

    fn folder(path: &Path) -> Result<Self> {
        if path.join("config.json").is_file() {
            return Ok(ModelSource::HfFolder(path.to_path_buf()));
        }
        Err(Error::Config(format!(
            "{} is a folder without config.json; expected the Hugging Face layout (config.json, *.safetensors, tokenizer.json)",
            path.display()
        )))
    }

    /// `spec` as a name in the models folder: an offline model's short name or file name, or a
    /// bare file or folder name (no separator, so `../x` or `a/b` never reach outside it).
    fn in_models_folder(spec: &str) -> Result<Option<Self>> {
        let file_name = super::offline::lookup(spec).map_or(spec, |m| m.file_name);
        let bare = !file_name.is_empty()
            && file_name != "."
            && file_name != ".."
            && !file_name.contains(['/', '\\']);
        if !bare {
            return Ok(None);
        }
        let Ok(dir) = crate::cache::models_dir() else {
            // No cache folder: a name cannot be looked up there, but a Hub id or a registered
            // name still can (the error about the cache comes if something needs it).
            return Ok(None);
        };
        let candidate = dir.join(file_name);
        if candidate.is_file() {
            return Ok(Some(ModelSource::Gguf(candidate)));
        }
        // A folder there counts only in the Hugging Face layout: another folder of the same name
        // as a registry entry (`gpt2-medium/` holding something else) must not hide the entry.
        if candidate.join("config.json").is_file() {
            return Ok(Some(ModelSource::HfFolder(candidate)));
        }
        Ok(None)
    }

    /// The model used when none is given: `$ENTROPY_LENS_MODEL`, else the cached offline SmolLM2,
    /// else the Hub id `HuggingFaceTB/SmolLM2-135M-Instruct`.
    ///
    /// # Errors
    /// Those of [`ModelSource::parse`] for the value of `$ENTROPY_LENS_MODEL`;
    /// [`Error::Checksum`] when the cached SmolLM2 is not the file that was fetched.
    pub fn default_model() -> Result<Self> {
        if let Ok(spec) = std::env::var(ENV_MODEL) {
            if !spec.is_empty() {
                return Self::parse(&spec);
            }
        }
        let smollm2 = &super::offline::SMOLLM2;
        let cached = crate::cache::models_dir()?.join(smollm2.file_name);
        if cached.is_file() {
            // A cached copy may have been cut short or altered since it was fetched: check it
            // (the digest is remembered by size and modification time, so this hashes once).
            let actual = super::fingerprint::file_sha256(&cached)?;
            if actual != smollm2.sha256 {
                return Err(Error::Checksum {
                    path: cached,
                    expected: smollm2.sha256.into(),
                    actual,
                });
            }
            return Ok(ModelSource::Gguf(cached));
        }
        Ok(ModelSource::HubRepo {
            repo: DEFAULT_HUB_MODEL.to_string(),
            revision: None,
        })
    }

    pub fn describe(&self) -> String {
        match self {
            ModelSource::Gguf(p) | ModelSource::HfFolder(p) => p.display().to_string(),
            ModelSource::HubRepo { repo, revision } => match revision {
                Some(r) => format!("{repo}@{r}"),
                None => repo.clone(),
            },
        }
    }

    /// Short display name (file stem, folder name or repo id).
    pub fn name(&self) -> String {
        match self {
            ModelSource::Gguf(p) => p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            ModelSource::HfFolder(p) => p
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            ModelSource::HubRepo { repo, .. } => repo.clone(),
        }
    }
}

/// How to load.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub device: Device,
    /// `None`: quantized for GGUF, f32 for safetensors.
    pub dtype: Option<WeightDType>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            device: Device::Cpu,
            dtype: None,
        }
    }
}

impl LoadOptions {
    pub fn cpu() -> Self {
        Self::default()
    }

    pub fn with_dtype(mut self, dtype: WeightDType) -> Self {
        self.dtype = Some(dtype);
        self
    }

    pub fn with_device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }
}

/// A model with its tokenizer.
pub struct LoadedModel {
    pub model: Model,
    pub tokenizer: TextTokenizer,
}

/// Loads a model and its tokenizer: the family from the GGUF `general.architecture` or the
/// `config.json` `model_type` (another `model_type` goes through auto-detection). The first load
/// also makes glibc keep freed large buffers for reuse ([`super::allocator`]).
///
/// # Errors
/// - [`Error::ModelNotFound`]: the file, `config.json`, `tokenizer.json` or a safetensors shard is
///   missing;
/// - [`Error::CorruptGguf`]: the GGUF header cannot be read, or a tensor lies past the file's end;
/// - [`Error::UnknownArchitecture`]: a GGUF architecture no family reads;
/// - [`Error::Config`]: a configuration key is missing or of the wrong type, its values are
///   inconsistent (heads, rotary dimension, layer types), or an auto-detected checkpoint does not
///   fit (the message names the first thing that does not);
/// - [`Error::MissingWeight`]: a tensor the configuration implies is absent;
/// - [`Error::Tokenizer`]: the tokenizer cannot be built;
/// - [`Error::Hub`]: a Hub repository cannot be fetched (offline, unknown, gated);
/// - [`Error::InvalidArgument`]: `--dtype q` with safetensors.
pub fn load(source: &ModelSource, opts: &LoadOptions) -> Result<LoadedModel> {
    // Decoding allocates and frees buffers of tens of MB at every step; keep them for reuse.
    super::allocator::keep_large_buffers();
    match source {
        ModelSource::Gguf(path) => load_gguf(path, source, opts),
        ModelSource::HfFolder(folder) => load_hf_folder(folder, source, opts),
        ModelSource::HubRepo { repo, revision } => {
            let folder = hub::snapshot(repo, revision.as_deref())?;
            load_hf_folder(&folder, source, opts)
        }
    }
}

fn load_gguf(path: &Path, source: &ModelSource, opts: &LoadOptions) -> Result<LoadedModel> {
    let (content, file) = Weights::open_gguf(path)?;
    let md = GgufMetadata::new(&content);
    let arch_name = md
        .str("general.architecture")
        .map_err(|_| Error::CorruptGguf {
            path: path.to_path_buf(),
            reason: "no general.architecture key".into(),
        })?
        .to_string();
    let arch_name = arch_name.as_str();
    let family =
        families::by_gguf_architecture(arch_name).ok_or_else(|| Error::UnknownArchitecture {
            architecture: format!("{arch_name} (GGUF)"),
            supported: families::gguf_supported(),
        })?;
    let (Some(from_gguf), Some(names)) = (family.from_gguf, family.gguf_names) else {
        unreachable!("by_gguf_architecture returns families that read GGUF")
    };
    let tokenizer = TextTokenizer::from_gguf(&md)?;
    drop(md);
    let dtype = opts.dtype.unwrap_or(WeightDType::Quantized);
    let weights = Weights::gguf(path, content, file, names, dtype, &opts.device)?;
    let content = weights
        .gguf_content()
        .ok_or_else(|| Error::Config("internal: a GGUF load without a GGUF store".into()))?;
    let spec = from_gguf(&GgufMetadata::new(content), &weights)?;
    let sha256 = super::fingerprint::model_sha256(&[path.to_path_buf()])?;
    assemble(family, spec, &weights, tokenizer, source, opts, sha256)
}

/// The safetensors files of a Hugging Face folder: the shards named by the index, or the single file.
///
/// # Errors
/// [`Error::Config`] for an unreadable index; [`Error::ModelNotFound`] for a missing shard or file.
pub fn safetensors_files(folder: &Path) -> Result<Vec<PathBuf>> {
    let index = folder.join("model.safetensors.index.json");
    if index.is_file() {
        let text = std::fs::read_to_string(&index).map_err(|e| Error::io(&index, e))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::Config(format!("{} is not valid JSON: {e}", index.display())))?;
        let map = v["weight_map"]
            .as_object()
            .ok_or_else(|| Error::Config(format!("{} has no weight_map", index.display())))?;
        let mut files: Vec<String> = map
            .values()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect();
        files.sort();
        files.dedup();
        let files: Vec<PathBuf> = files.into_iter().map(|f| folder.join(f)).collect();
        if let Some(missing) = files.iter().find(|f| !f.is_file()) {
            return Err(Error::ModelNotFound {
                path: missing.clone(),
            });
        }
        return Ok(files);
    }
    let single = folder.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    Err(Error::ModelNotFound { path: single })
}

fn read_config(folder: &Path) -> Result<serde_json::Value> {
    let path = folder.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::ModelNotFound { path: path.clone() },
        _ => Error::io(&path, e),
    })?;
    serde_json::from_str(&text)
        .map_err(|e| Error::Config(format!("{} is not valid JSON: {e}", path.display())))
}

fn load_hf_folder(folder: &Path, source: &ModelSource, opts: &LoadOptions) -> Result<LoadedModel> {
    let cfg_json = read_config(folder)?;
    let model_type = cfg_json["model_type"]
        .as_str()
        .or_else(|| cfg_json["architectures"][0].as_str())
        .ok_or_else(|| Error::Config("config.json names no model_type".into()))?
        .to_string();
    let model_type = model_type.as_str();
    if super::vision::VISION_MODEL_TYPES.contains(&model_type) {
        return Err(Error::UnknownArchitecture {
            architecture: format!("{model_type} (an image classifier)"),
            supported: "language models here; profile images with `entropy-lens profile --model DIR --images FILES` or entropy_lens::runner::ImageProfiler".into(),
        });
    }
    if model_type == "gemma3" {
        return Err(Error::UnknownArchitecture {
            architecture: "gemma3 (multimodal checkpoint)".into(),
            supported: "text-only checkpoints (`gemma3_text`, e.g. google/gemma-3-270m, google/gemma-3-1b-it) and the other families of `entropy-lens models`".into(),
        });
    }
    // A model_type no family claims goes through auto-detection, which names what does not fit.
    let family = families::by_model_type(model_type)
        .or_else(|| families::by_architecture(Architecture::Auto))
        .ok_or_else(|| Error::UnknownArchitecture {
            architecture: model_type.to_string(),
            supported: families::supported(),
        })?;
    let tokenizer = TextTokenizer::from_hf_folder(folder)?;
    let dtype = opts.dtype.unwrap_or(WeightDType::F32);
    let files = safetensors_files(folder)?;
    let w = Weights::safetensors(folder, &files, dtype, &opts.device)?;
    let spec = (family.from_hf)(&HfConfig::new(cfg_json), &w).map_err(|e| match e {
        Error::Config(msg) if family.architecture == Architecture::Auto => Error::Config(format!(
            "model_type `{model_type}` is not a known family; {msg}"
        )),
        other => other,
    })?;
    let mut fingerprinted = vec![folder.join("config.json"), folder.join("tokenizer.json")];
    fingerprinted.extend(files);
    let sha256 = super::fingerprint::model_sha256(&fingerprinted)?;
    assemble(family, spec, &w, tokenizer, source, opts, sha256)
}

/// Builds the decoder from `spec` and `weights` and wraps it with the model's description.
fn assemble(
    family: &Family,
    spec: super::decoder::DecoderSpec,
    weights: &Weights,
    tokenizer: TextTokenizer,
    source: &ModelSource,
    opts: &LoadOptions,
    sha256: String,
) -> Result<LoadedModel> {
    let info = ModelInfo {
        name: source.name(),
        architecture: family.architecture,
        n_layers: spec.n_layers,
        d_model: spec.d_model,
        vocab_size: spec.vocab_size,
        context_length: spec.context_length,
        dtype: weights.dtype(),
        source: source.describe(),
        sha256,
    };
    let decoder = Decoder::new(spec, weights)?;
    Ok(LoadedModel {
        model: Model::new(decoder, info, opts.device.clone()),
        tokenizer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_sources() {
        assert_eq!(
            ModelSource::parse("HuggingFaceTB/SmolLM2-135M-Instruct").unwrap(),
            ModelSource::HubRepo {
                repo: "HuggingFaceTB/SmolLM2-135M-Instruct".into(),
                revision: None
            }
        );
        assert_eq!(
            ModelSource::parse("google/gemma-3-270m@main").unwrap(),
            ModelSource::HubRepo {
                repo: "google/gemma-3-270m".into(),
                revision: Some("main".into())
            }
        );
        let e = ModelSource::parse("/no/such/model.gguf").unwrap_err();
        assert!(matches!(e, Error::ModelNotFound { .. }), "{e}");
        let e = ModelSource::parse("missing.gguf").unwrap_err();
        assert!(matches!(e, Error::ModelNotFound { .. }), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = ModelSource::parse(dir.path().to_str().unwrap()).unwrap_err();
        assert!(e.to_string().contains("config.json"), "{e}");
    }
}
