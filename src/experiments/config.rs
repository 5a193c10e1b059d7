//! What an experiment run is: a [`Plan`] (what the user asks for, before the model is loaded) is
//! resolved against the loaded model and data into an [`ExperimentConfig`], the serde record that
//! is hashed, stored in `config.json`, and compared on resume and merge.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::analysis::KnnCvConfig;
use crate::error::{Error, Result};
use crate::lens::{alpha_key, parse_alpha, StatSpec};
use crate::model::{ModelInfo, WeightDType};
use crate::profile::provenance::CRATE_VERSION;
use crate::profile::Aggregation;

use super::choice::AnswerMethod;
use super::data::DataIdentity;
use super::{family, formats, mmlu, skip, tasks, validate, vit};
use crate::data::mmlu::PromptStyle;

/// The experiments of the paper this crate runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExperimentKind {
    /// Table 1 and Figure 1: C1 (ΔH vs Δ top-p count) and C2 (top-p overlap of adjacent blocks).
    Validate,
    /// Table 2, Table 5 and Figure 10: TinyStories task types.
    Tasks,
    /// Table 3, Figures 5 and 9: output formats, Rényi entropies.
    Formats,
    /// Table 4: MMLU accuracy and correct-vs-wrong separability per prompt style.
    Mmlu,
    /// Figure 6: MMLU accuracy with the blocks of largest entropy increase or decrease skipped.
    Skip,
    /// Figures 3 and 4, Table 6: model families and sizes from blank-prompt profiles.
    Family,
    /// Appendix A.4, Figure 8: vision transformers (ViT, DeiT) on images.
    Vit,
}

impl ExperimentKind {
    pub const ALL: [ExperimentKind; 7] = [
        ExperimentKind::Validate,
        ExperimentKind::Tasks,
        ExperimentKind::Formats,
        ExperimentKind::Mmlu,
        ExperimentKind::Skip,
        ExperimentKind::Family,
        ExperimentKind::Vit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ExperimentKind::Validate => "validate",
            ExperimentKind::Tasks => "tasks",
            ExperimentKind::Formats => "formats",
            ExperimentKind::Mmlu => "mmlu",
            ExperimentKind::Skip => "skip",
            ExperimentKind::Family => "family",
            ExperimentKind::Vit => "vit",
        }
    }
}

impl FromStr for ExperimentKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        ExperimentKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown experiment `{s}` (expected validate, tasks, formats, mmlu, skip, family or vit)"
                ))
            })
    }
}

/// Preset sizes: `smoke` runs in a minute or two on a laptop CPU; `paper` is the paper's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    Smoke,
    Paper,
}

impl FromStr for Scale {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "smoke" => Ok(Scale::Smoke),
            "paper" => Ok(Scale::Paper),
            o => Err(Error::invalid(format!(
                "unknown scale `{o}` (expected smoke or paper)"
            ))),
        }
    }
}

impl Scale {
    pub fn name(self) -> &'static str {
        match self {
            Scale::Smoke => "smoke",
            Scale::Paper => "paper",
        }
    }
}

/// Whose protocol to follow where the paper's text and the authors' released code differ
/// (`docs/results.md` lists every difference).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The paper's text (default).
    Paper,
    /// The authors' released code.
    Authors,
}

impl FromStr for Protocol {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "paper" => Ok(Protocol::Paper),
            "authors" => Ok(Protocol::Authors),
            o => Err(Error::invalid(format!(
                "unknown protocol `{o}` (expected paper or authors)"
            ))),
        }
    }
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Paper => "paper",
            Protocol::Authors => "authors",
        }
    }
}

/// What an experiment asks for, before the model and the data are loaded. Every `None` takes the
/// experiment's default at the chosen scale and protocol.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub kind: ExperimentKind,
    /// GGUF file, Hugging Face folder or Hub id; `None`: the default model.
    pub model: Option<String>,
    /// `cpu`, `cuda`, `cuda:N`.
    pub device: String,
    pub dtype: Option<WeightDType>,
    pub scale: Scale,
    pub protocol: Protocol,
    pub seed: u64,
    /// Prompts per class (tasks, formats) or topics (validate).
    pub n: Option<usize>,
    /// Tokens generated per prompt.
    pub tokens: Option<usize>,
    /// Stories (tasks) or topics (validate, formats) file; `None`: the embedded sample at smoke
    /// scale, the Hub's TinyStories or the committed topic list at paper scale.
    pub data: Option<PathBuf>,
    /// Wrap prompts in the chat template (the paper does not).
    pub chat: Option<bool>,
    /// Sampling temperature (0: greedy).
    pub temperature: Option<f64>,
    pub sample_top_p: Option<f64>,
    /// kNN neighbours and cross-validation folds.
    pub k: Option<usize>,
    pub folds: Option<usize>,
    /// Rényi orders (formats).
    pub alphas: Option<Vec<f64>>,
    /// Windows of the formats aggregation.
    pub windows: Option<usize>,
    /// Top-p mass of the candidate sets.
    pub top_p: Option<f64>,
    /// Threshold of the α = 0 support count.
    pub support_threshold: Option<f64>,
    /// How the answer is read (mmlu): `letters` (paper) or `generate` (authors).
    pub method: Option<AnswerMethod>,
    /// Prompt style of the skip experiment (default Base).
    pub style: Option<PromptStyle>,
    /// Models of the family experiment (registry names, Hub ids, files, folders; `paper`: the
    /// registry's base models); `None`: the two offline models. For vit: ViT/DeiT folders or Hub
    /// ids (`paper`: the five of Figure 8); `None`: the repository's tiny fixtures.
    pub models: Option<Vec<String>>,
    /// Classes taken from an image set (vit).
    pub classes: Option<usize>,
}

impl Plan {
    pub fn new(kind: ExperimentKind) -> Self {
        Self {
            kind,
            model: None,
            device: "cpu".into(),
            dtype: None,
            scale: Scale::Smoke,
            protocol: Protocol::Paper,
            seed: 42,
            n: None,
            tokens: None,
            data: None,
            chat: None,
            temperature: None,
            sample_top_p: None,
            k: None,
            folds: None,
            alphas: None,
            windows: None,
            top_p: None,
            support_threshold: None,
            method: None,
            style: None,
            models: None,
            classes: None,
        }
    }

    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    pub fn scale(mut self, scale: Scale) -> Self {
        self.scale = scale;
        self
    }

    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    pub fn n(mut self, n: usize) -> Self {
        self.n = Some(n);
        self
    }

    pub fn tokens(mut self, tokens: usize) -> Self {
        self.tokens = Some(tokens);
        self
    }

    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub fn device(mut self, device: impl Into<String>) -> Self {
        self.device = device.into();
        self
    }

    pub fn data(mut self, path: impl Into<PathBuf>) -> Self {
        self.data = Some(path.into());
        self
    }

    /// The typed, experiment-specific part at this plan's scale and protocol.
    pub fn spec(&self) -> Result<ExperimentSpec> {
        match (self.kind, self.protocol) {
            (ExperimentKind::Validate, Protocol::Authors) => {
                return Err(Error::invalid(
                    "validate has no authors' protocol: the authors released no code for C1 and C2; use --protocol paper",
                ))
            }
            (ExperimentKind::Skip, Protocol::Authors) => {
                return Err(Error::invalid(
                    "skip has no authors' protocol: the authors released no code for layer skipping; use --protocol paper",
                ))
            }
            (ExperimentKind::Formats, Protocol::Authors) => {
                return Err(Error::invalid(
                    "formats has no authors' protocol: the authors' generation is the paper's (greedy, 256 tokens, 8 windows), and their released classifier scores accuracy with k = 3/5/7 on unshuffled folds, not Table 3's ROC-AUC (docs/results.md); use --protocol paper",
                ))
            }
            _ => {}
        }
        let spec = match self.kind {
            ExperimentKind::Validate => {
                ExperimentSpec::Validate(validate::ValidateSpec::new(self)?)
            }
            ExperimentKind::Tasks => ExperimentSpec::Tasks(tasks::TasksSpec::new(self)?),
            ExperimentKind::Formats => ExperimentSpec::Formats(formats::FormatsSpec::new(self)?),
            ExperimentKind::Mmlu => ExperimentSpec::Mmlu(mmlu::MmluSpec::new(self)?),
            ExperimentKind::Skip => ExperimentSpec::Skip(skip::SkipSpec::new(self)?),
            ExperimentKind::Family => ExperimentSpec::Family(family::FamilySpec::new(self)?),
            ExperimentKind::Vit => ExperimentSpec::Vit(vit::VitSpec::new(self)?),
        };
        let several = matches!(self.kind, ExperimentKind::Family | ExperimentKind::Vit);
        if self.models.is_some() && !several {
            return Err(Error::invalid(
                "--models applies to the family and vit experiments only; give one model with --model",
            ));
        }
        if self.model.is_some() && several {
            return Err(Error::invalid(format!(
                "{} compares several models: list them with --models a,b,... (not --model)",
                self.kind.name()
            )));
        }
        if self.classes.is_some() && self.kind != ExperimentKind::Vit {
            return Err(Error::invalid(
                "--classes applies to the vit experiment only",
            ));
        }
        if self.method.is_some() && self.kind != ExperimentKind::Mmlu {
            return Err(Error::invalid(
                "--method applies to the mmlu experiment only",
            ));
        }
        if self.style.is_some() && self.kind != ExperimentKind::Skip {
            return Err(Error::invalid("--style applies to the skip experiment only (mmlu asks every question in all three styles)"));
        }
        Ok(spec)
    }

    /// The kNN settings: the paper's k = 29, 10 folds, seed 42 unless overridden.
    pub(crate) fn knn(&self) -> KnnCvConfig {
        KnnCvConfig {
            k: self.k.unwrap_or(29),
            folds: self.folds.unwrap_or(10),
            ..KnnCvConfig::default()
        }
    }

    fn generation(&self) -> Result<Generation> {
        // The authors' TinyStories runner samples at temperature 1 (`run_experiments_ts.py`).
        let default_temperature = match (self.kind, self.protocol) {
            (ExperimentKind::Tasks, Protocol::Authors) => 1.0,
            _ => 0.0,
        };
        let temperature = self.temperature.unwrap_or(default_temperature);
        if !(temperature >= 0.0 && temperature.is_finite()) {
            return Err(Error::invalid(format!(
                "temperature must be a finite number ≥ 0, got {temperature}"
            )));
        }
        if let Some(p) = self.sample_top_p {
            if !(p > 0.0 && p <= 1.0) {
                return Err(Error::invalid(format!(
                    "sampling top-p must be in (0, 1], got {p}"
                )));
            }
        }
        Ok(Generation {
            chat: self.chat.unwrap_or(false),
            add_bos: true,
            ignore_eos: true,
            temperature,
            sample_top_p: self.sample_top_p,
        })
    }

    /// The top-p mass and support threshold asked for (validated).
    fn stat_settings(&self) -> Result<StatSettings> {
        let stats = StatSettings {
            top_p: self.top_p.unwrap_or(crate::lens::stats::DEFAULT_TOP_P),
            support_threshold: self
                .support_threshold
                .unwrap_or(crate::lens::stats::DEFAULT_SUPPORT_THRESHOLD),
        };
        stats.stat_spec(&[])?.validate()?;
        Ok(stats)
    }

    /// `cpu` or `cuda`: what the numbers depend on (not the device index).
    fn device_kind(&self) -> String {
        self.device
            .split(':')
            .next()
            .unwrap_or("cpu")
            .to_ascii_lowercase()
    }

    /// The full configuration for `model` and `data`.
    pub fn resolve(&self, model: &ModelInfo, data: DataIdentity) -> Result<ExperimentConfig> {
        let spec = self.spec()?;
        Ok(ExperimentConfig {
            spec,
            protocol: self.protocol,
            scale: self.scale,
            model: ModelIdentity {
                name: model.name.clone(),
                sha256: model.sha256.clone(),
                architecture: model.architecture.as_str().to_string(),
                n_layers: model.n_layers,
                dtype: model.dtype.as_str().to_string(),
            },
            device: self.device_kind(),
            data,
            seed: self.seed,
            generation: self.generation()?,
            stats: self.stat_settings()?,
            crate_version: CRATE_VERSION.to_string(),
        })
    }

    /// The configuration of a run over several models (family, vit): its model identity names
    /// the list (`N-models`, the sha256 of the comma-joined names), not one set of weights.
    pub(crate) fn resolve_several(
        &self,
        spec: ExperimentSpec,
        names: &[&str],
        architecture: &str,
        data: DataIdentity,
        generation: Generation,
    ) -> Result<ExperimentConfig> {
        Ok(ExperimentConfig {
            spec,
            protocol: self.protocol,
            scale: self.scale,
            model: ModelIdentity {
                name: format!("{}-models", names.len()),
                sha256: format!("{:x}", Sha256::digest(names.join(",").as_bytes())),
                architecture: architecture.into(),
                n_layers: 0,
                dtype: self
                    .dtype
                    .map(|d| d.as_str().to_string())
                    .unwrap_or_default(),
            },
            device: self.device_kind(),
            data,
            seed: self.seed,
            generation,
            stats: self.stat_settings()?,
            crate_version: CRATE_VERSION.to_string(),
        })
    }
}

/// The experiment-specific part of a configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ExperimentSpec {
    Validate(validate::ValidateSpec),
    Tasks(tasks::TasksSpec),
    Formats(formats::FormatsSpec),
    Mmlu(mmlu::MmluSpec),
    Skip(skip::SkipSpec),
    Family(family::FamilySpec),
    Vit(vit::VitSpec),
}

impl ExperimentSpec {
    pub fn kind(&self) -> ExperimentKind {
        match self {
            ExperimentSpec::Validate(_) => ExperimentKind::Validate,
            ExperimentSpec::Tasks(_) => ExperimentKind::Tasks,
            ExperimentSpec::Formats(_) => ExperimentKind::Formats,
            ExperimentSpec::Mmlu(_) => ExperimentKind::Mmlu,
            ExperimentSpec::Skip(_) => ExperimentKind::Skip,
            ExperimentSpec::Family(_) => ExperimentKind::Family,
            ExperimentSpec::Vit(_) => ExperimentKind::Vit,
        }
    }

    /// Tokens generated per prompt (skip: none, the answer is read after the prompt).
    pub fn tokens(&self) -> usize {
        match self {
            ExperimentSpec::Validate(s) => s.tokens,
            ExperimentSpec::Tasks(s) => s.tokens,
            ExperimentSpec::Formats(s) => s.tokens,
            ExperimentSpec::Mmlu(s) => s.tokens,
            ExperimentSpec::Skip(_) => 0,
            ExperimentSpec::Family(s) => s.tokens,
            ExperimentSpec::Vit(_) => 0,
        }
    }
}

/// The model as far as the numbers depend on it (its path may differ between machines).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelIdentity {
    pub name: String,
    pub sha256: String,
    pub architecture: String,
    pub n_layers: usize,
    /// `q` (exact quantized), `f32`, `f16`, `bf16`.
    pub dtype: String,
}

/// How tokens are generated. Experiments always generate exactly `tokens` tokens (EOS ignored) so
/// every profile has the same length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    pub chat: bool,
    pub add_bos: bool,
    pub ignore_eos: bool,
    /// 0: greedy. Sampling uses seed + item index, so an item's tokens do not depend on the others.
    pub temperature: f64,
    pub sample_top_p: Option<f64>,
}

/// Lens settings shared by every experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatSettings {
    pub top_p: f64,
    pub support_threshold: f64,
}

impl StatSettings {
    /// A lens spec with these settings and the given Rényi orders (no top-k).
    pub fn stat_spec(&self, alphas: &[f64]) -> Result<StatSpec> {
        let spec = StatSpec {
            alphas: alphas.to_vec(),
            support_threshold: self.support_threshold,
            top_p: self.top_p,
            top_p_ids: false,
            top_k: 0,
            top_p_overlap: false,
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// Everything the numbers of a run depend on. Stored in `config.json` with its sha256; a resume
/// or a merge with a different configuration is refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExperimentConfig {
    pub spec: ExperimentSpec,
    pub protocol: Protocol,
    pub scale: Scale,
    pub model: ModelIdentity,
    /// Device kind (`cpu`, `cuda`): numbers differ slightly between kinds, not between GPUs.
    pub device: String,
    pub data: DataIdentity,
    pub seed: u64,
    pub generation: Generation,
    pub stats: StatSettings,
    pub crate_version: String,
}

impl ExperimentConfig {
    pub fn kind(&self) -> ExperimentKind {
        self.spec.kind()
    }

    /// sha256 of the canonical JSON form.
    pub fn sha256(&self) -> Result<String> {
        let json = serde_json::to_string(self)?;
        Ok(Sha256::digest(json.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect())
    }

    /// The first differences from `other`, as `path: ours ≠ theirs` lines (for error messages).
    pub fn differences(&self, other: &ExperimentConfig) -> Vec<String> {
        let (a, b) = match (serde_json::to_value(self), serde_json::to_value(other)) {
            (Ok(a), Ok(b)) => (a, b),
            _ => return vec!["(configurations cannot be compared)".into()],
        };
        let mut out = Vec::new();
        diff_values("", &a, &b, &mut out);
        out
    }
}

fn diff_values(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => diff_values(&p, u, v, out),
                    (u, v) => out.push(format!(
                        "{p}: {} ≠ {}",
                        u.map(|u| u.to_string()).unwrap_or_else(|| "absent".into()),
                        v.map(|v| v.to_string()).unwrap_or_else(|| "absent".into())
                    )),
                }
            }
        }
        _ if a != b => out.push(format!("{path}: {a} ≠ {b}")),
        _ => {}
    }
}

/// Rényi orders as the string keys stored in configs (JSON has no infinity).
pub(crate) fn alpha_keys(alphas: &[f64]) -> Vec<String> {
    alphas.iter().map(|&a| alpha_key(a)).collect()
}

/// The orders back from their keys.
pub(crate) fn parse_alpha_keys(keys: &[String]) -> Result<Vec<f64>> {
    keys.iter().map(|k| parse_alpha(k)).collect()
}

/// `Concat` (the paper's text) or `Mean` over tokens (the authors' code for Tables 2 and 4).
pub(crate) fn token_aggregation(protocol: Protocol) -> Aggregation {
    match protocol {
        Protocol::Paper => Aggregation::Concat,
        Protocol::Authors => Aggregation::Mean,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for k in ExperimentKind::ALL {
            assert_eq!(k.name().parse::<ExperimentKind>().unwrap(), k);
        }
        assert!("families"
            .parse::<ExperimentKind>()
            .unwrap_err()
            .to_string()
            .contains("validate, tasks, formats, mmlu, skip, family or vit"));
        assert_eq!("authors".parse::<Protocol>().unwrap(), Protocol::Authors);
        assert!("large".parse::<Scale>().is_err());
    }

    #[test]
    fn differences_name_the_changed_fields() {
        let a = serde_json::json!({"spec": {"kind": "tasks", "per_task": 12}, "seed": 42});
        let b = serde_json::json!({"spec": {"kind": "tasks", "per_task": 30}, "seed": 42});
        let mut out = Vec::new();
        diff_values("", &a, &b, &mut out);
        assert_eq!(out, vec!["spec.per_task: 12 ≠ 30"]);
    }
}
