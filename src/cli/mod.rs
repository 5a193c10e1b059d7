//! What the `entropy-lens` binary does, as library functions (so tests and notebooks can call
//! the same code): option handling, prompt files, terminal rendering, the demo job.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;

use crate::analysis::{knn_cross_validate, KnnCvConfig, KnnCvResult, Labels, NeighborSearch};
use crate::data::{read_features, read_labels};
use crate::error::{Error, Result};
use crate::fetch;
use crate::lens::StatSpec;
use crate::model::{load, parse_device, LoadOptions, ModelSource, WeightDType};
use crate::profile::EntropyProfile;
use crate::runner::{ProfileRequest, Profiler, Sampling};

/// Runs `entropy-lens classify`: reads features and labels and cross-validates a kNN.
pub fn classify(features: &Path, labels: &Path, cfg: &KnnCvConfig) -> Result<KnnCvResult> {
    let x = read_features(features)?;
    let labels = Labels::encode(&read_labels(labels)?);
    knn_cross_validate(x.view(), &labels, cfg)
}

/// Parses `--search`.
pub fn parse_search(s: &str) -> Result<NeighborSearch> {
    match s {
        "brute" => Ok(NeighborSearch::Brute),
        "kd_tree" | "kdtree" => Ok(NeighborSearch::KdTree),
        "ball_tree" | "balltree" => Ok(NeighborSearch::BallTree),
        o => Err(Error::invalid(format!(
            "unknown neighbour search `{o}` (expected brute, kd_tree or ball_tree)"
        ))),
    }
}

/// The demo's prompt.
pub const DEMO_PROMPT: &str = "The Eiffel Tower is located in the city of";

/// Everything `entropy-lens profile` accepts.
#[derive(Clone, Debug, Default)]
pub struct ProfileOptions {
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub prompts_file: Option<PathBuf>,
    pub generate: usize,
    pub ignore_eos: bool,
    pub seed: u64,
    pub temperature: f64,
    pub sample_top_p: Option<f64>,
    pub all_positions: bool,
    pub alphas: Vec<f64>,
    pub support_threshold: f64,
    pub top_p: f64,
    pub top_p_ids: bool,
    pub top_k: usize,
    pub embed: bool,
    pub no_bos: bool,
    pub chat: bool,
    pub device: String,
    pub dtype: Option<WeightDType>,
    pub skip: Vec<usize>,
}

#[derive(Deserialize)]
struct PromptLine {
    prompt: String,
}

/// Reads a JSON Lines file of `{"prompt": ...}` objects (blank lines are skipped).
pub fn read_prompts(path: &Path) -> Result<Vec<String>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut prompts = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| Error::io(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let p: PromptLine = serde_json::from_str(&line).map_err(|e| Error::MalformedPrompts {
            path: path.to_path_buf(),
            line: i + 1,
            reason: e.to_string(),
        })?;
        prompts.push(p.prompt);
    }
    if prompts.is_empty() {
        return Err(Error::MalformedPrompts {
            path: path.to_path_buf(),
            line: 0,
            reason: "the file holds no prompts".into(),
        });
    }
    Ok(prompts)
}

/// Runs `entropy-lens profile`: validates everything, loads the model once, and hands each
/// prompt's profile to `sink` as soon as it is ready.
pub fn profile(
    opts: &ProfileOptions,
    mut sink: impl FnMut(&EntropyProfile) -> Result<()>,
) -> Result<()> {
    let spec = StatSpec {
        alphas: opts.alphas.clone(),
        support_threshold: opts.support_threshold,
        top_p: opts.top_p,
        top_p_ids: opts.top_p_ids,
        top_k: opts.top_k,
    };
    spec.validate()?;
    let prompts = match (&opts.prompt, &opts.prompts_file) {
        (Some(p), None) => vec![p.clone()],
        (None, Some(f)) => read_prompts(f)?,
        _ => return Err(Error::invalid("give exactly one of --prompt or --prompts")),
    };
    let source = match &opts.model {
        Some(m) => ModelSource::parse(m)?,
        None => ModelSource::default_model()?,
    };
    let device = parse_device(&opts.device)?;
    let load_opts = LoadOptions {
        device,
        dtype: opts.dtype,
    };
    let mut profiler = Profiler::new(load(&source, &load_opts)?, spec)?;
    if !opts.skip.is_empty() {
        profiler.model.set_skipped_blocks(&opts.skip)?;
    }
    let requests: Vec<ProfileRequest> = prompts
        .into_iter()
        .map(|prompt| ProfileRequest {
            prompt,
            generate: opts.generate,
            ignore_eos: opts.ignore_eos,
            all_positions: opts.all_positions,
            add_bos: !opts.no_bos,
            chat: opts.chat,
            include_embed: opts.embed,
            sampling: Sampling {
                temperature: opts.temperature,
                top_p: opts.sample_top_p,
                seed: opts.seed,
            },
        })
        .collect();
    // Fail before any work when a prompt cannot fit the context.
    for r in &requests {
        profiler.checked_prompt_ids(r)?;
    }
    let bar = progress_bar(
        requests.len() as u64 * opts.generate.max(1) as u64,
        "profiling",
    );
    for r in &requests {
        let profile = profiler.run_with_progress(r, Some(&bar))?;
        if opts.generate == 0 {
            bar.inc(1);
        }
        bar.suspend(|| sink(&profile))?;
    }
    bar.finish_and_clear();
    Ok(())
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub fn progress_bar(len: u64, msg: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} [{elapsed} < {eta}, {per_sec}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(msg.to_string());
    bar
}

const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A terminal view of a profile: one line per measured position with its entropy across layers
/// as a sparkline (scaled to ln |vocab| ≈ the largest possible entropy seen).
pub fn render_table(p: &EntropyProfile) -> String {
    let mut s = String::new();
    s.push_str(&format!("model  {}  ({} layers)\n", p.model, p.n_layers));
    s.push_str(&format!("prompt {:?}\n", p.prompt));
    if !p.generated_ids.is_empty() {
        s.push_str(&format!("output {:?}\n", p.generated_text));
    }
    let max = p
        .positions
        .iter()
        .flat_map(|x| x.shannon.iter().cloned())
        .fold(1e-9f64, f64::max);
    s.push_str(&format!(
        "{:>5}  {:<16} {:<w$}  {:>6} {:>6}  {:>5}\n",
        "pos",
        "→ next token",
        "Shannon entropy by layer (block 1 … L)",
        "max",
        "last",
        "top-p",
        w = p.n_layers.max(38)
    ));
    let all = p.all_ids();
    for pos in &p.positions {
        let next = all
            .get(pos.position + 1)
            .and_then(|_| p.tokens.get(pos.position + 1))
            .cloned()
            .unwrap_or_else(|| "·".into());
        let spark: String = pos
            .shannon
            .iter()
            .map(|&h| SPARK[((h / max) * 7.0).round().clamp(0.0, 7.0) as usize])
            .collect();
        let hmax = pos.shannon.iter().cloned().fold(0.0, f64::max);
        let last = pos.shannon.last().copied().unwrap_or(0.0);
        let topp = pos.top_p_count.last().copied().unwrap_or(0);
        s.push_str(&format!(
            "{:>5}  {:<16} {:<w$}  {:>6.2} {:>6.2}  {:>5}\n",
            pos.position,
            format!("{next:?}").chars().take(16).collect::<String>(),
            spark,
            hmax,
            last,
            topp,
            w = p.n_layers.max(38)
        ));
    }
    s
}

/// The main job on a fresh machine: fetch both offline models, then profile a prompt and a greedy
/// generation on each, printing the tables and the timings.
pub fn demo(prompt: &str, generate: usize, out: &mut impl Write) -> Result<()> {
    let w = |out: &mut dyn Write, s: String| -> Result<()> {
        writeln!(out, "{s}").map_err(|e| Error::io("<stdout>", e))
    };
    for model in fetch::OFFLINE_MODELS {
        let t0 = Instant::now();
        let path = fetch::fetch_model(&model)?;
        let mut profiler = Profiler::new(
            load(&ModelSource::Gguf(path.clone()), &LoadOptions::cpu())?,
            StatSpec {
                alphas: vec![0.5, 2.0, f64::INFINITY],
                ..Default::default()
            },
        )?;
        let loaded = t0.elapsed();
        let bar = progress_bar(generate as u64, profiler.model.info().name.as_str());
        let t1 = Instant::now();
        let req = ProfileRequest::new(prompt).generate(generate);
        let profile = profiler.run_with_progress(&req, Some(&bar))?;
        bar.finish_and_clear();
        let ran = t1.elapsed();
        w(out, render_table(&profile))?;
        w(
            out,
            format!(
                "{}: load {:.1} s, {} tokens with lens statistics at all {} layers in {:.2} s ({:.1} tokens/s)\n",
                path.display(),
                loaded.as_secs_f64(),
                profile.generated_ids.len(),
                profile.n_layers,
                ran.as_secs_f64(),
                profile.generated_ids.len() as f64 / ran.as_secs_f64().max(1e-9)
            ),
        )?;
    }
    Ok(())
}
