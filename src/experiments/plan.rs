//! What the user asks for before anything is loaded: a [`Plan`] names an experiment
//! ([`ExperimentKind`]), a model or several, the scale, the protocol and the sizes. Every `None`
//! takes the experiment's default at the chosen scale and protocol.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use super::choice::AnswerMethod;
use super::settings::{Generation, Protocol, Scale, StatSettings};
use crate::analysis::KnnCvConfig;
use crate::data::mmlu_questions::PromptStyle;
use crate::error::{Error, Result};
use crate::model::WeightDType;

/// An experiment, by the name it is registered under (`tasks`, `vit`, …). Parse one from its name
/// (`"tasks".parse()`), or make it from the experiment's type (`ExperimentKind::from(Tasks)`);
/// [`crate::experiments::kinds`] lists them all.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExperimentKind {
    name: &'static str,
}

impl ExperimentKind {
    /// Only the registry and the `From<Experiment>` conversion make kinds.
    pub(crate) const fn named(name: &'static str) -> Self {
        Self { name }
    }

    pub fn name(self) -> &'static str {
        self.name
    }
}

impl std::fmt::Debug for ExperimentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl std::fmt::Display for ExperimentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// The options of a [`Plan`] that only some experiments read. An experiment lists those it reads
/// (`Experiment::OPTIONS`); a plan that sets another is refused before anything is loaded, so a
/// flag never goes silently unused. The model, device, precision, scale, protocol, seed, sizes
/// (`--n`, `--tokens`) and lens settings (`--lens`, `--top-p`, `--support-threshold`) apply to
/// every experiment that measures one language model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlanOption {
    /// `--data`: the prompts' or images' source.
    Data,
    /// `--chat`: wrap prompts in the chat template.
    Chat,
    /// `--temperature`, `--sample-top-p`: sampled generation.
    Sampling,
    /// `--k`: kNN neighbours.
    K,
    /// `--folds`: cross-validation folds.
    Folds,
    /// `--alpha`: Rényi orders.
    Alphas,
    /// `--windows`: windows of the token aggregation.
    Windows,
    /// `--method`: how a multiple-choice answer is read.
    Method,
    /// `--style`: the prompt style of a multiple-choice question.
    Style,
    /// `--models`: several models in one run (such an experiment refuses `--model`).
    Models,
    /// `--classes`: classes taken from an image set.
    Classes,
    /// `--tokens`: tokens generated per prompt.
    Tokens,
    /// `--kl`: KL to the final distribution for every profiled token.
    Kl,
}

impl PlanOption {
    pub const ALL: [PlanOption; 13] = [
        PlanOption::Data,
        PlanOption::Chat,
        PlanOption::Sampling,
        PlanOption::K,
        PlanOption::Folds,
        PlanOption::Alphas,
        PlanOption::Windows,
        PlanOption::Method,
        PlanOption::Style,
        PlanOption::Models,
        PlanOption::Classes,
        PlanOption::Tokens,
        PlanOption::Kl,
    ];

    /// The command-line flag.
    pub fn flag(self) -> &'static str {
        match self {
            PlanOption::Data => "--data",
            PlanOption::Chat => "--chat",
            PlanOption::Sampling => "--temperature/--sample-top-p",
            PlanOption::K => "--k",
            PlanOption::Folds => "--folds",
            PlanOption::Alphas => "--alpha",
            PlanOption::Windows => "--windows",
            PlanOption::Method => "--method",
            PlanOption::Style => "--style",
            PlanOption::Models => "--models",
            PlanOption::Classes => "--classes",
            PlanOption::Tokens => "--tokens",
            PlanOption::Kl => "--kl",
        }
    }

    /// Whether `plan` sets this option.
    pub fn is_set(self, plan: &Plan) -> bool {
        match self {
            PlanOption::Data => plan.data.is_some(),
            PlanOption::Chat => plan.chat.is_some(),
            PlanOption::Sampling => plan.temperature.is_some() || plan.sample_top_p.is_some(),
            PlanOption::K => plan.k.is_some(),
            PlanOption::Folds => plan.folds.is_some(),
            PlanOption::Alphas => plan.alphas.is_some(),
            PlanOption::Windows => plan.windows.is_some(),
            PlanOption::Method => plan.method.is_some(),
            PlanOption::Style => plan.style.is_some(),
            PlanOption::Models => plan.models.is_some(),
            PlanOption::Classes => plan.classes.is_some(),
            PlanOption::Tokens => plan.tokens.is_some(),
            PlanOption::Kl => plan.kl.is_some(),
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
    /// Prompts per class (tasks, formats), topics (validate), questions (mmlu, skip), samples per
    /// model (family) or images per class (vit).
    pub n: Option<usize>,
    /// Tokens generated per prompt.
    pub tokens: Option<usize>,
    /// Stories, topics, questions or images; `None`: the experiment's default source at this scale.
    pub data: Option<PathBuf>,
    /// Wrap prompts in the chat template (the paper does not).
    pub chat: Option<bool>,
    /// Sampling temperature (0: greedy).
    pub temperature: Option<f64>,
    /// Nucleus mass of sampled generation (not the lens' top-p candidate set, `top_p`).
    pub sample_top_p: Option<f64>,
    /// kNN neighbours and cross-validation folds.
    pub k: Option<usize>,
    pub folds: Option<usize>,
    /// Rényi orders (formats).
    pub alphas: Option<Vec<f64>>,
    /// Windows of the formats aggregation.
    pub windows: Option<usize>,
    /// Probability mass of the lens' top-p candidate sets.
    pub top_p: Option<f64>,
    /// Threshold of the α = 0 support count.
    pub support_threshold: Option<f64>,
    /// How the answer is read (mmlu): `letters` (paper) or `generate` (authors).
    pub method: Option<AnswerMethod>,
    /// Prompt style of the skip experiment (default Base).
    pub style: Option<PromptStyle>,
    /// The models of a several-model experiment (family: registry names, Hub ids, files, folders,
    /// `paper` for the registry's base models; vit: ViT/DeiT folders or Hub ids, `paper` for the
    /// five of Figure 8); `None`: the experiment's default list.
    pub models: Option<Vec<String>>,
    /// Classes taken from an image set (vit).
    pub classes: Option<usize>,
    /// The lens: `logit` (the paper's) or `tuned:<folder or model id>`; `None`: the logit lens.
    pub lens: Option<String>,
    /// Measure KL(final ‖ block) for every profiled token (validate, tasks, formats).
    pub kl: Option<bool>,
}

impl Plan {
    /// A plan for `kind` (an experiment type such as `Tasks`, or a parsed name) with every option
    /// at its default: smoke scale, the paper's protocol, seed 42, the CPU.
    pub fn new(kind: impl Into<ExperimentKind>) -> Self {
        Self {
            kind: kind.into(),
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
            lens: None,
            kl: None,
        }
    }

    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The models of a several-model experiment (family, vit).
    pub fn models<S: Into<String>>(mut self, models: impl IntoIterator<Item = S>) -> Self {
        self.models = Some(models.into_iter().map(Into::into).collect());
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

    /// Reads the residual stream with `lens`: `logit`, or `tuned:<folder or model id>`.
    pub fn lens(mut self, lens: impl Into<String>) -> Self {
        self.lens = Some(lens.into());
        self
    }

    /// Refuses the options the experiment does not read (`accepted`), and `--model` where it
    /// compares several models (or `--models` where it runs on one).
    pub fn check_options(&self, accepted: &[PlanOption]) -> Result<()> {
        let several = accepted.contains(&PlanOption::Models);
        let name = self.kind.name();
        if self.model.is_some() && several {
            return Err(Error::invalid(format!(
                "{name} compares several models: list them with --models a,b,... (not --model)"
            )));
        }
        if self.models.is_some() && !several {
            return Err(Error::invalid(format!(
                "{name} runs on one model: give it with --model (--models is for the experiments over several models)"
            )));
        }
        if let Some(o) = PlanOption::ALL
            .into_iter()
            .find(|o| *o != PlanOption::Models && o.is_set(self) && !accepted.contains(o))
        {
            let own: Vec<&str> = accepted
                .iter()
                .filter(|o| **o != PlanOption::Models)
                .map(|o| o.flag())
                .collect();
            return Err(Error::invalid(format!(
                "{} does not apply to the {name} experiment (its own options: {})",
                o.flag(),
                if own.is_empty() {
                    "none beyond the common ones".to_string()
                } else {
                    own.join(", ")
                }
            )));
        }
        Ok(())
    }

    /// The kNN settings: the paper's k = 29, 10 folds, seed 42 unless overridden.
    pub fn knn(&self) -> KnnCvConfig {
        KnnCvConfig {
            k: self.k.unwrap_or(29),
            folds: self.folds.unwrap_or(10),
            ..KnnCvConfig::default()
        }
    }

    /// How tokens are generated: greedy unless a temperature is given (`default_temperature`
    /// otherwise), the chat template when asked, BOS, EOS ignored (every profile has the same
    /// length).
    pub fn generation(&self, default_temperature: f64) -> Result<Generation> {
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
    pub fn stat_settings(&self) -> Result<StatSettings> {
        let stats = StatSettings {
            top_p: self.top_p.unwrap_or(crate::lens::stats::DEFAULT_TOP_P),
            support_threshold: self
                .support_threshold
                .unwrap_or(crate::lens::stats::DEFAULT_SUPPORT_THRESHOLD),
            kl_to_final: self.kl.unwrap_or(false),
        };
        stats.stat_spec(&[])?.validate()?;
        Ok(stats)
    }

    /// `cpu` or `cuda`: what the numbers depend on (not the device index).
    pub fn device_kind(&self) -> String {
        self.device
            .split(':')
            .next()
            .unwrap_or("cpu")
            .to_ascii_lowercase()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_an_experiment_does_not_read_are_refused() {
        let mut plan = Plan::new(ExperimentKind::named("tasks"));
        plan.style = Some(PromptStyle::Humble);
        let err = plan
            .check_options(&[PlanOption::K, PlanOption::Data])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--style does not apply to the tasks experiment"),
            "{err}"
        );
        assert!(err.contains("--k, --data"), "{err}");
        plan.style = None;
        plan.k = Some(3);
        plan.check_options(&[PlanOption::K]).unwrap();
        plan.models = Some(vec!["a".into()]);
        assert!(plan
            .check_options(&[PlanOption::K])
            .unwrap_err()
            .to_string()
            .contains("runs on one model"));
        plan.models = None;
        plan.model = Some("m".into());
        assert!(plan
            .check_options(&[PlanOption::Models, PlanOption::K])
            .unwrap_err()
            .to_string()
            .contains("--models a,b"));
    }
}
