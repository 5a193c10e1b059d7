//! `train-lens`: fits a tuned lens to a model on a text, step by step, with checkpoints a killed
//! run resumes from (the same bytes as an uninterrupted run), and a held-out evaluation of the mean
//! KL to the final distribution per layer, logit lens beside tuned lens.
//!
//! Data: the text (a plain file, or JSON Lines of `{"text": …}`) is tokenised as one stream and cut
//! into windows of `seq_len` tokens (BOS first where the tokenizer adds one); the last windows,
//! `holdout_tokens` of them, are held out; the others are visited in a seeded order, `step_tokens`
//! per step.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::data::TrainingData;
use super::heldout::{evaluate, evaluate_logit, HeldOutKl};
use super::train::{sgd_nesterov, zeros_like, FinalDist, Readout};
use super::tuned::{Translator, TunedLens};
use crate::error::{Error, Result};
use crate::model::{Model, Positions, TextTokenizer};
use crate::watch::Watch;

/// How a lens is trained.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainOptions {
    /// Training tokens in all (steps × `step_tokens`).
    pub tokens: usize,
    /// Tokens per optimisation step.
    pub step_tokens: usize,
    /// Tokens per window (a sequence the model reads at once).
    pub seq_len: usize,
    /// Held-out tokens for the evaluation (taken from the end of the text, never trained on).
    pub holdout_tokens: usize,
    /// The package's learning rate (1 for SGD) is multiplied by this.
    pub lr_scale: f64,
    pub momentum: f64,
    pub weight_decay: f64,
    pub seed: u64,
    /// Positions whose vocabulary-sized rows are held at once.
    pub chunk_tokens: usize,
    /// Steps between checkpoints.
    pub checkpoint_every: usize,
    /// Where the translators start (absent from a state written before it existed: zero).
    #[serde(default, skip_serializing_if = "Init::is_zero")]
    pub init: Init,
}

/// Where KL training starts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Init {
    /// Zero translators: the logit lens (the tuned-lens package's start).
    #[default]
    Zero,
    /// The linear-shortcut lens fitted in closed form on the same training windows
    /// ([`crate::lens::shortcut`]).
    Shortcut,
    /// A lens saved in the tuned-lens package's format (e.g. a shortcut lens fitted on more
    /// tokens than the training will visit), by its folder.
    Lens(std::path::PathBuf),
}

impl Init {
    fn is_zero(&self) -> bool {
        *self == Init::Zero
    }

    /// `zero`, `shortcut` or `lens:DIR`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "zero" => Ok(Init::Zero),
            "shortcut" => Ok(Init::Shortcut),
            other => match other.strip_prefix("lens:") {
                Some(dir) if !dir.is_empty() => Ok(Init::Lens(dir.into())),
                _ => Err(Error::invalid(format!(
                    "unknown --init `{other}`: zero (the logit lens, the package's start), shortcut (the closed-form shortcut lens, fitted on the training windows) or lens:DIR (a saved lens)"
                ))),
            },
        }
    }
}

/// How a lens in a report was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Least squares to the last residual, in closed form ([`crate::lens::shortcut`]).
    Shortcut,
    /// KL training started from the shortcut lens.
    KlFromShortcut,
    /// KL training started from a saved lens (`--init lens:DIR`).
    KlFromLens,
}

impl Default for TrainOptions {
    fn default() -> Self {
        Self {
            tokens: 1 << 16,
            step_tokens: 2048,
            seq_len: 128,
            holdout_tokens: 2048,
            lr_scale: 1.0,
            momentum: 0.9,
            weight_decay: 1e-3,
            seed: 42,
            chunk_tokens: 256,
            checkpoint_every: 5,
            init: Init::Zero,
        }
    }
}

impl TrainOptions {
    fn check(&self) -> Result<()> {
        if self.seq_len < 2 || self.step_tokens < self.seq_len || self.tokens < self.step_tokens {
            return Err(Error::invalid(format!(
                "need --tokens ≥ --step-tokens ≥ --seq-len ≥ 2 (got {}, {}, {})",
                self.tokens, self.step_tokens, self.seq_len
            )));
        }
        let rates_ok = self.lr_scale > 0.0
            && self.lr_scale.is_finite()
            && (0.0..1.0).contains(&self.momentum)
            && self.weight_decay >= 0.0
            && self.weight_decay.is_finite();
        if !rates_ok || self.chunk_tokens == 0 || self.checkpoint_every == 0 {
            return Err(Error::invalid(
                "learning-rate scale must be positive, momentum in [0, 1), weight decay ≥ 0, chunk and checkpoint interval ≥ 1",
            ));
        }
        Ok(())
    }

    /// Optimisation steps.
    pub fn steps(&self) -> usize {
        self.tokens / self.step_tokens
    }
}

/// Where a training run stands (`train_state.json` beside the lens): enough to resume it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    pub options: TrainOptions,
    pub model_sha256: String,
    pub data_sha256: String,
    /// Steps done.
    pub step: usize,
    /// Mean KL (nats) per translator, per step done.
    pub losses: Vec<Vec<f64>>,
}

/// The evaluation on held-out text: mean KL(final ‖ lens) per layer 0 … L − 1. Its table and chart
/// are in [`crate::plots`] (`src/plots/lens_training.rs`): the lens sits below the charts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    pub model: String,
    pub tokens_trained: usize,
    pub holdout_tokens: usize,
    pub kl_logit: Vec<f64>,
    /// The trained lens's KL (the tuned lens, or the shortcut lens: see `method`).
    pub kl_tuned: Vec<f64>,
    /// How the lens was made; absent for KL training from zero (the tuned-lens package's way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<Method>,
    /// Mean KL per layer of every held-out window, logit lens and trained lens ([windows][layers];
    /// absent from reports written before they were kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kl_logit_by_window: Vec<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kl_tuned_by_window: Vec<Vec<f64>>,
    /// 95 % percentile-bootstrap intervals over the windows of `kl_logit` and `kl_tuned`
    /// ([lo, hi] per layer; [`crate::lens::heldout::bootstrap_ci95`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kl_logit_ci95: Vec<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kl_tuned_ci95: Vec<[f64; 2]>,
}

impl TrainReport {
    /// The report of a lens trained on `tokens_trained` tokens, from its held-out evaluation and
    /// the logit lens's on the same windows.
    pub fn new(
        model: &str,
        tokens_trained: usize,
        holdout_tokens: usize,
        logit: HeldOutKl,
        tuned: HeldOutKl,
        method: Option<Method>,
    ) -> Self {
        Self {
            model: model.to_string(),
            tokens_trained,
            holdout_tokens,
            kl_logit: logit.mean(),
            kl_tuned: tuned.mean(),
            method,
            kl_logit_ci95: logit.ci95(),
            kl_tuned_ci95: tuned.ci95(),
            kl_logit_by_window: logit.by_window,
            kl_tuned_by_window: tuned.by_window,
        }
    }

    /// What the `kl_tuned` column is: "tuned lens", "shortcut lens" or "tuned lens (from shortcut)".
    pub fn lens_label(&self) -> &'static str {
        match self.method {
            None => "tuned lens",
            Some(Method::Shortcut) => "shortcut lens",
            Some(Method::KlFromShortcut) => "tuned lens (from shortcut)",
            Some(Method::KlFromLens) => "tuned lens (from a saved lens)",
        }
    }
}

/// Progress of a training run, reported after each step.
#[derive(Clone, Debug)]
pub struct StepReport {
    pub step: usize,
    pub steps: usize,
    /// Mean KL per translator at this step.
    pub kl: Vec<f64>,
}

/// The text of `path`: JSON Lines of `{"text": …}` (joined by blank lines), else the file as is.
pub fn read_text(path: &Path) -> Result<String> {
    read_text_from(path, 0)
}

/// As [`read_text`], leaving out the first `skip` records of a JSON Lines file (e.g. the stories
/// an experiment prompts with).
///
/// # Errors
/// `skip` > 0 on a plain text file (it has no records), or as many records as the file holds.
pub fn read_text_from(path: &Path, skip: usize) -> Result<String> {
    let raw = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let jsonl = path.extension().is_some_and(|x| x == "jsonl");
    if !jsonl {
        if skip > 0 {
            return Err(Error::invalid(format!(
                "--skip-records applies to JSON Lines; {} is plain text",
                path.display()
            )));
        }
        return Ok(raw);
    }
    let mut parts = Vec::new();
    let records = raw
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let total = records.clone().count();
    if skip > 0 && skip >= total {
        return Err(Error::invalid(format!(
            "--skip-records {skip} leaves nothing of the {total} records of {}",
            path.display()
        )));
    }
    for (i, line) in records.skip(skip) {
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| Error::Data(format!("{} line {}: {e}", path.display(), i + 1)))?;
        let text = v.get("text").and_then(|t| t.as_str()).ok_or_else(|| {
            Error::Data(format!(
                "{} line {}: expected {{\"text\": ...}}",
                path.display(),
                i + 1
            ))
        })?;
        parts.push(text.to_string());
    }
    Ok(parts.join("\n\n"))
}

/// A text cut into windows: the training windows in their seeded visiting order, and the
/// held-out windows at the end of the text.
pub(crate) struct WindowSplit {
    all: Vec<Vec<u32>>,
    order: Vec<usize>,
    holdout_from: usize,
}

impl WindowSplit {
    /// The training windows in the order they are visited.
    pub(crate) fn training(&self) -> Vec<&Vec<u32>> {
        self.order.iter().map(|&i| &self.all[i]).collect()
    }

    /// The held-out windows.
    pub(crate) fn holdout(&self) -> Vec<&Vec<u32>> {
        self.all[self.holdout_from..].iter().collect()
    }
}

/// `data` in windows of `seq_len` tokens, the last ⌈`holdout_tokens` / `seq_len`⌉ held out, the
/// others shuffled with `seed`.
pub(crate) fn split_windows(
    tokenizer: &TextTokenizer,
    data: TrainingData<'_>,
    seq_len: usize,
    holdout_tokens: usize,
    seed: u64,
) -> Result<WindowSplit> {
    let all = data.windows(tokenizer, seq_len)?;
    let holdout_windows = holdout_tokens.div_ceil(seq_len);
    if all.len() < holdout_windows + 1 {
        return Err(Error::invalid(format!(
            "the training text gives {} windows of {} tokens, and {} are held out for the evaluation: give a longer text, or lower --seq-len or --holdout-tokens",
            all.len(),
            seq_len,
            holdout_windows
        )));
    }
    let holdout_from = all.len() - holdout_windows;
    let mut order: Vec<usize> = (0..holdout_from).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    Ok(WindowSplit {
        all,
        order,
        holdout_from,
    })
}

/// Trains (or resumes training) a tuned lens for `model` on `text`, writing the lens, its state
/// and the held-out report into `out`. `report` is called after every step.
pub fn train_lens<'a>(
    model: &mut Model,
    tokenizer: &TextTokenizer,
    text: impl Into<TrainingData<'a>>,
    opts: &TrainOptions,
    out: &Path,
    report: &mut dyn FnMut(&StepReport),
) -> Result<TrainReport> {
    train_lens_watched(model, tokenizer, text, opts, out, report, None)
}

/// [`train_lens`] that stops when `watch` asks it to: after the step under way, with a
/// checkpoint written, so that running it again resumes there ([`Error::Interrupted`]).
pub fn train_lens_watched<'a>(
    model: &mut Model,
    tokenizer: &TextTokenizer,
    text: impl Into<TrainingData<'a>>,
    opts: &TrainOptions,
    out: &Path,
    report: &mut dyn FnMut(&StepReport),
    watch: Option<&Watch>,
) -> Result<TrainReport> {
    opts.check()?;
    let data = text.into();
    let info = model.info().clone();
    let l = info.n_layers;
    let split = split_windows(
        tokenizer,
        data,
        opts.seq_len,
        opts.holdout_tokens,
        opts.seed,
    )?;
    let train = split.training();
    let holdout = split.holdout();
    let data_sha256 = data.sha256();
    let readout = model.readout()?;

    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let state_path = out.join("train_state.json");
    let momentum_path = out.join("momentum.safetensors");
    let (mut lens, mut velocity, mut state) = match resume(out, &state_path, &momentum_path)? {
        Some((lens, velocity, state)) => {
            if state.options != *opts
                || state.model_sha256 != info.sha256
                || state.data_sha256 != data_sha256
            {
                return Err(Error::invalid(format!(
                    "{} holds a lens being trained with other options, model or text; resume it with its own, or choose another --out",
                    out.display()
                )));
            }
            lens.check_fits(&info.name, info.d_model, l)?;
            (lens, velocity, state)
        }
        None => {
            let lens = match &opts.init {
                Init::Zero => TunedLens::zeros(&info.name, info.d_model, l)?,
                Init::Lens(dir) => {
                    let lens = TunedLens::from_folder(dir)?;
                    lens.check_fits(&info.name, info.d_model, l)?;
                    lens
                }
                Init::Shortcut => {
                    // The windows the steps will visit, each once.
                    let visited =
                        (opts.steps() * (opts.step_tokens / opts.seq_len).max(1)).min(train.len());
                    super::shortcut::fit_shortcut(
                        model,
                        &train[..visited],
                        8,
                        super::shortcut::DEFAULT_RIDGE,
                        &mut |_| {},
                        watch,
                    )?
                }
            };
            let velocity = lens
                .translators
                .iter()
                .map(|t| {
                    Ok((
                        zeros_like(&t.weight)?,
                        zeros_like(t.bias.as_ref().unwrap_or(&t.weight))?,
                    ))
                })
                .collect::<Result<Vec<_>>>()?;
            let state = TrainState {
                options: opts.clone(),
                model_sha256: info.sha256.clone(),
                data_sha256: data_sha256.clone(),
                step: 0,
                losses: Vec::new(),
            };
            (lens, velocity, state)
        }
    };

    let steps = opts.steps();
    let per_step = (opts.step_tokens / opts.seq_len).max(1);
    while state.step < steps {
        let k = state.step;
        let batch: Vec<&Vec<u32>> = (0..per_step)
            .map(|i| train[(k * per_step + i) % train.len()])
            .collect();
        let (grads, kl) = step_grads(model, &readout, &lens, &batch, opts.chunk_tokens)?;
        let grads = clip_grad_norm(grads, MAX_GRAD_NORM)?;
        let lr = opts.lr_scale * (1.0 - opts.momentum) * (1.0 - k as f64 / steps as f64);
        for (i, (gw, gb)) in grads.into_iter().enumerate() {
            let t = &mut lens.translators[i];
            let (w, vw) = sgd_nesterov(
                &t.weight,
                &gw,
                &velocity[i].0,
                lr,
                opts.momentum,
                opts.weight_decay,
            )?;
            let bias = t
                .bias
                .as_ref()
                .ok_or_else(|| Error::Data("translator without bias".into()))?;
            let (b, vb) = sgd_nesterov(
                bias,
                &gb,
                &velocity[i].1,
                lr,
                opts.momentum,
                opts.weight_decay,
            )?;
            *t = Translator {
                weight: w,
                bias: Some(b),
            };
            velocity[i] = (vw, vb);
        }
        state.step += 1;
        state.losses.push(kl.clone());
        report(&StepReport {
            step: state.step,
            steps,
            kl,
        });
        let stop = watch.is_some_and(Watch::stop_requested) && state.step < steps;
        if state.step % opts.checkpoint_every == 0 || state.step == steps || stop {
            checkpoint(&lens, &velocity, &state, out, &state_path, &momentum_path)?;
        }
        if stop {
            return Err(Error::Interrupted(format!(
                "lens training stopped after step {} of {steps}; run it again with the same arguments to resume",
                state.step
            )));
        }
    }
    let kl_logit = evaluate_logit(model, &readout, &holdout, opts.chunk_tokens)?;
    let kl_tuned = evaluate(model, &readout, &lens, &holdout, opts.chunk_tokens)?;
    let result = TrainReport::new(
        &info.name,
        steps * per_step * opts.seq_len,
        holdout.len() * opts.seq_len,
        kl_logit,
        kl_tuned,
        match opts.init {
            Init::Zero => None,
            Init::Shortcut => Some(Method::KlFromShortcut),
            Init::Lens(_) => Some(Method::KlFromLens),
        },
    );
    let text = serde_json::to_string_pretty(&result)? + "\n";
    crate::cache::write_atomic(&out.join("train_report.json"), text.as_bytes())?;
    Ok(result)
}

/// The package clips the gradient of all translators together to this L2 norm before each step
/// (residual streams are large, so raw gradients are too).
const MAX_GRAD_NORM: f64 = 1.0;

/// Scales `grads` so that their joint L2 norm is at most `max_norm`, as
/// `torch.nn.utils.clip_grad_norm_` does (`max_norm / (norm + 1e-6)`, when below 1).
fn clip_grad_norm(grads: Vec<(Tensor, Tensor)>, max_norm: f64) -> Result<Vec<(Tensor, Tensor)>> {
    let mut sq = 0f64;
    for (w, b) in &grads {
        for t in [w, b] {
            sq += t
                .sqr()?
                .sum_all()?
                .to_dtype(DType::F64)?
                .to_scalar::<f64>()?;
        }
    }
    let coef = max_norm / (sq.sqrt() + 1e-6);
    if !coef.is_finite() {
        return Err(Error::Data(
            "the lens gradient is not finite (the model's residual stream holds NaN or inf)".into(),
        ));
    }
    if coef >= 1.0 {
        return Ok(grads);
    }
    grads
        .into_iter()
        .map(|(w, b)| Ok(((w * coef)?, (b * coef)?)))
        .collect()
}

/// Momentum buffers per translator: (weight, bias).
type Velocity = Vec<(Tensor, Tensor)>;

/// The lens, momentum and state of an interrupted run in `out`, if any.
fn resume(
    out: &Path,
    state_path: &Path,
    momentum_path: &Path,
) -> Result<Option<(TunedLens, Velocity, TrainState)>> {
    if !state_path.exists() {
        return Ok(None);
    }
    let state: TrainState = serde_json::from_str(
        &std::fs::read_to_string(state_path).map_err(|e| Error::io(state_path, e))?,
    )
    .map_err(|e| Error::Data(format!("{}: {e}", state_path.display())))?;
    let lens = TunedLens::from_folder(out)?;
    let saved = candle_core::safetensors::load(momentum_path, &Device::Cpu)
        .map_err(|e| Error::Data(format!("{}: {e}", momentum_path.display())))?;
    let velocity = (0..lens.translators.len())
        .map(|i| {
            let get = |k: String| {
                saved
                    .get(&k)
                    .cloned()
                    .ok_or_else(|| Error::Data(format!("{} has no {k}", momentum_path.display())))
            };
            Ok((get(format!("{i}.weight"))?, get(format!("{i}.bias"))?))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some((lens, velocity, state)))
}

/// Writes the lens, then the momentum, then the state (the state names a finished step only
/// once both are on disk).
fn checkpoint(
    lens: &TunedLens,
    velocity: &[(Tensor, Tensor)],
    state: &TrainState,
    out: &Path,
    state_path: &Path,
    momentum_path: &Path,
) -> Result<()> {
    lens.save(out)?;
    let named: std::collections::HashMap<String, Tensor> = velocity
        .iter()
        .enumerate()
        .flat_map(|(i, (w, b))| {
            [
                (format!("{i}.weight"), w.clone()),
                (format!("{i}.bias"), b.clone()),
            ]
        })
        .collect();
    let tmp = momentum_path.with_extension("tmp");
    candle_core::safetensors::save(&named, &tmp)
        .map_err(|e| Error::Data(format!("{}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, momentum_path).map_err(|e| Error::io(momentum_path, e))?;
    let text = serde_json::to_string_pretty(state)? + "\n";
    crate::cache::write_atomic(state_path, text.as_bytes())
}

/// Residual rows [T, d] (f32, CPU) of every layer 0 … L for `batch`, and the final-distribution
/// rows are computed from layer L.
pub(crate) fn residual_rows(model: &mut Model, batch: &[&Vec<u32>]) -> Result<Vec<Tensor>> {
    let s = batch.first().map(|w| w.len()).unwrap_or(0);
    let flat: Vec<u32> = batch.iter().flat_map(|w| w.iter().copied()).collect();
    let ids = Tensor::from_vec(flat, (batch.len(), s), model.device())?;
    model.reset();
    model.declare_prompt_end(s);
    let captured = model.forward_capture(&ids, Positions::All)?;
    captured
        .residuals
        .iter()
        .map(|r| {
            let (b, s, d) = r.dims3()?;
            Ok(r.reshape((b * s, d))?
                .to_dtype(DType::F32)?
                .to_device(&Device::Cpu)?)
        })
        .collect()
}

/// The final distribution of residual rows of the last layer.
fn final_probs(model: &Model, last: &Tensor) -> Result<Tensor> {
    let dev = model.device().clone();
    let z = model
        .unembed(&model.final_norm(&last.to_device(&dev)?.to_dtype(model.dtype())?)?)?
        .to_dtype(DType::F32)?
        .to_device(&Device::Cpu)?;
    Ok(candle_nn::ops::softmax_last_dim(&z)?)
}

/// Calls `visit(layer, rows, final, weight, bias)` for every chunk of at most `chunk` positions
/// and every translator, and returns the number of positions. The final distribution of a chunk is
/// computed once for all translators; the zero bias of a bias-free translator once for all chunks.
pub(crate) fn for_each_chunk(
    model: &Model,
    lens: &TunedLens,
    rows: &[Tensor],
    chunk: usize,
    mut visit: impl FnMut(usize, &Tensor, &FinalDist, &Tensor, &Tensor) -> Result<()>,
) -> Result<usize> {
    let l = lens.translators.len();
    let biases = lens
        .translators
        .iter()
        .map(|t| {
            t.bias
                .clone()
                .map_or_else(|| zeros_like(&t.weight.get(0)?), Ok)
        })
        .collect::<Result<Vec<_>>>()?;
    let total = rows[0].dim(0)?;
    let mut start = 0;
    while start < total {
        let n = chunk.min(total - start);
        let target = FinalDist::new(final_probs(model, &rows[l].narrow(0, start, n)?)?)?;
        for (i, (t, bias)) in lens.translators.iter().zip(&biases).enumerate() {
            visit(i, &rows[i].narrow(0, start, n)?, &target, &t.weight, bias)?;
        }
        start += n;
    }
    Ok(total)
}

/// Gradients (per translator: weight, bias) of the mean KL over the batch's positions, and the
/// mean KL per translator.
#[allow(clippy::type_complexity)]
fn step_grads(
    model: &mut Model,
    readout: &Readout,
    lens: &TunedLens,
    batch: &[&Vec<u32>],
    chunk: usize,
) -> Result<(Vec<(Tensor, Tensor)>, Vec<f64>)> {
    let rows = residual_rows(model, batch)?;
    let l = lens.translators.len();
    let total = rows[0].dim(0)?;
    let mut grads: Vec<Option<(Tensor, Tensor)>> = vec![None; l];
    let mut kl = vec![0f64; l];
    for_each_chunk(model, lens, &rows, chunk, |i, h, target, weight, bias| {
        let g = readout.kl_grad(h, target, weight, bias, total)?;
        kl[i] += g.kl_sum;
        grads[i] = Some(match grads[i].take() {
            None => (g.weight, g.bias),
            Some((w, b)) => ((w + g.weight)?, (b + g.bias)?),
        });
        Ok(())
    })?;
    let grads = grads
        .into_iter()
        .map(|g| g.ok_or_else(|| Error::Data("no positions in the batch".into())))
        .collect::<Result<Vec<_>>>()?;
    Ok((grads, kl.iter().map(|s| s / total as f64).collect()))
}
