//! `entropy-lens profile`: per-layer lens statistics of prompts and generations.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::progress_bar;
use crate::error::{Error, Result};
use crate::lens::{LensKind, StatSpec, TargetToken};
use crate::model::{load, parse_device, LoadOptions, ModelSource, WeightDType};
use crate::profile::{EntropyProfile, ReadPoint};
use crate::runner::{ProfileRequest, Profiler, Sampling, TokenObserver};

impl super::args::ProfileArgs {
    /// The options these flags ask for.
    pub fn to_options(&self) -> Result<ProfileOptions> {
        Ok(ProfileOptions {
            model: self.model.model.clone(),
            prompt: self.prompt.clone(),
            prompts_file: self.prompts.clone(),
            images: self.images.clone(),
            generate: self.generate,
            ignore_eos: self.ignore_eos,
            seed: self.sampling.seed,
            temperature: self.sampling.temperature.unwrap_or(0.0),
            sample_top_p: self.sampling.sample_top_p,
            all_positions: self.all_positions,
            alphas: self.stats.alphas()?,
            support_threshold: self
                .stats
                .support_threshold
                .unwrap_or(crate::lens::stats::DEFAULT_SUPPORT_THRESHOLD),
            top_p: self
                .stats
                .top_p
                .unwrap_or(crate::lens::stats::DEFAULT_TOP_P),
            top_p_ids: self.top_p_ids,
            top_k: self.top_k,
            embed: self.embed,
            no_bos: self.no_bos,
            chat: self.sampling.chat,
            device: self.model.device.clone(),
            dtype: self.model.dtype()?,
            skip: self.skip.clone(),
            batch_size: self.batch_size,
            lens: self.stats.lens.clone(),
            kl: self.kl,
            target: self
                .target
                .as_deref()
                .map(TargetToken::parse)
                .transpose()?
                .unwrap_or_default(),
            read_point: ReadPoint::parse(&self.read_point)?,
        })
    }
}

/// Everything `entropy-lens profile` accepts.
#[derive(Clone, Debug, Default)]
pub struct ProfileOptions {
    pub model: Option<String>,
    pub prompt: Option<String>,
    pub prompts_file: Option<PathBuf>,
    /// Image files or folders (a vision model's input instead of prompts).
    pub images: Vec<PathBuf>,
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
    /// Prompts per batch (None: [`crate::runner::default_batch_size`] for the device).
    pub batch_size: Option<usize>,
    /// `logit` or `tuned:<folder or model id>` (None: the logit lens).
    pub lens: Option<String>,
    /// Measure KL(final ‖ layer).
    pub kl: bool,
    /// The token followed through the layers.
    pub target: TargetToken,
    /// Where the residual stream is read.
    pub read_point: ReadPoint,
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
        // Editors on Windows start UTF-8 files with a byte-order mark.
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line.as_str()
        };
        if line.trim().is_empty() {
            continue;
        }
        let malformed = |reason: String| Error::MalformedPrompts {
            path: path.to_path_buf(),
            line: i + 1,
            reason,
        };
        // Only an object: serde would read `["text"]` as a struct in field order.
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| malformed(e.to_string()))?;
        if !value.is_object() {
            return Err(malformed(format!("expected a JSON object, found {value}")));
        }
        let p: PromptLine = serde_json::from_value(value).map_err(|e| malformed(e.to_string()))?;
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

impl ProfileOptions {
    /// The statistics these options ask for (not yet validated).
    pub fn stat_spec(&self) -> StatSpec {
        StatSpec {
            alphas: self.alphas.clone(),
            support_threshold: self.support_threshold,
            top_p: self.top_p,
            top_p_ids: self.top_p_ids,
            top_k: self.top_k,
            top_p_overlap: false,
            kl_to_final: self.kl,
            target: self.target,
        }
    }

    /// One request per prompt, as `profile` runs them.
    pub fn requests(&self, prompts: &[String]) -> Vec<ProfileRequest> {
        prompts
            .iter()
            .map(|prompt| ProfileRequest {
                prompt: prompt.clone(),
                generate: self.generate,
                ignore_eos: self.ignore_eos,
                all_positions: self.all_positions,
                add_bos: !self.no_bos,
                chat: self.chat,
                include_embed: self.embed,
                sampling: Sampling {
                    temperature: self.temperature,
                    sample_top_p: self.sample_top_p,
                    seed: self.seed,
                },
                token_ids: None,
            })
            .collect()
    }
}

/// Runs `entropy-lens profile`: validates everything, loads the model once, and hands each
/// prompt's profile to `sink` as soon as it is ready.
pub fn profile(
    opts: &ProfileOptions,
    mut sink: impl FnMut(&EntropyProfile) -> Result<()>,
) -> Result<()> {
    let spec = opts.stat_spec();
    spec.validate()?;
    if !opts.images.is_empty() {
        if spec.relates_rows() || !opts.read_point.is_block() {
            return Err(Error::invalid(
                "--kl, --target and --read-point read a language model's residual stream; an image classifier is read through its own head at each block (drop them)",
            ));
        }
        if opts.lens.as_deref().is_some_and(|l| l != "logit") {
            return Err(Error::invalid(
                "a tuned lens reads language models' residual streams; image classifiers are read through their own head (drop --lens)",
            ));
        }
        return profile_images(opts, spec, sink);
    }
    let prompts = match (&opts.prompt, &opts.prompts_file) {
        (Some(p), None) => vec![p.clone()],
        (None, Some(f)) => read_prompts(f)?,
        _ => return Err(Error::invalid("give exactly one of --prompt or --prompts")),
    };
    let source = crate::fetch::model_source_or_default(opts.model.as_deref())?;
    let device = parse_device(&opts.device)?;
    let load_opts = LoadOptions {
        device,
        dtype: opts.dtype,
    };
    // A bad lens name fails before the model loads.
    let lens = opts.lens.as_deref().map(LensKind::parse).transpose()?;
    let mut profiler = Profiler::new(load(&source, &load_opts)?, spec)?;
    let bar = progress_bar(
        prompts.len() as u64 * opts.generate.max(1) as u64,
        "profiling",
    );
    profile_loaded(&mut profiler, opts, lens, &prompts, &bar, |p| {
        if opts.generate == 0 {
            bar.inc(1);
        }
        bar.suspend(|| sink(p))
    })?;
    bar.finish_and_clear();
    Ok(())
}

/// `profile` on a model already loaded (the Python module's `Profiler.profile`): sets the
/// statistics, the lens (`lens`, already parsed; `None`: the logit lens), the read point, the
/// skipped blocks and the batch size from `opts` (the model fields are not read), checks that
/// every prompt fits the context, then runs the prompts in batches and hands each profile to
/// `sink`. `observer` sees every generated token and may stop the sequences.
///
/// # Errors
/// Invalid statistics, a lens or read point the model cannot take, a block out of range, a
/// prompt over the context, and the model's own errors.
pub fn profile_loaded(
    profiler: &mut Profiler,
    opts: &ProfileOptions,
    lens: Option<LensKind>,
    prompts: &[String],
    observer: &dyn TokenObserver,
    mut sink: impl FnMut(&EntropyProfile) -> Result<()>,
) -> Result<()> {
    let spec = opts.stat_spec();
    spec.validate()?;
    profiler.set_spec(spec)?;
    // The block read point first: a tuned lens refuses a mid-block one, whichever is set first.
    profiler.set_read_point(ReadPoint::Block)?;
    profiler.set_lens(lens.unwrap_or_default())?;
    profiler.set_read_point(opts.read_point)?;
    profiler.model.set_skipped_blocks(&opts.skip)?;
    let requests = opts.requests(prompts);
    // Fail before any work when a prompt cannot fit the context.
    for r in &requests {
        profiler.checked_prompt_ids(r)?;
    }
    let batch = match opts.batch_size {
        Some(n) => n,
        None => crate::runner::default_batch_size(profiler.model.device()),
    };
    profiler.set_batch_size(batch)?;
    for group in requests.chunks(profiler.batch_size()) {
        for profile in profiler.run_batch_observed(group, observer)? {
            sink(&profile)?;
        }
    }
    Ok(())
}

/// `profile --images`: the lens of a ViT/DeiT classifier over each image.
fn profile_images(
    opts: &ProfileOptions,
    spec: StatSpec,
    mut sink: impl FnMut(&EntropyProfile) -> Result<()>,
) -> Result<()> {
    let refuse = |what: &str| {
        Err(Error::invalid(format!(
            "{what} does not apply to images (an image classifier makes one prediction per image)"
        )))
    };
    if opts.generate > 0 {
        return refuse("--generate");
    }
    if !opts.skip.is_empty() {
        return refuse("--skip");
    }
    if opts.chat {
        return refuse("--chat");
    }
    let Some(model) = &opts.model else {
        return Err(Error::invalid(
            "--images needs --model: a ViT or DeiT folder (config.json, *.safetensors, preprocessor_config.json) or Hub id such as google/vit-base-patch16-224",
        ));
    };
    let files = crate::data::images::image_files(&opts.images)?;
    let load_opts = LoadOptions {
        device: parse_device(&opts.device)?,
        dtype: opts.dtype,
    };
    let model = crate::model::vision::load_vision(&ModelSource::parse(model)?, &load_opts)?;
    let mut profiler = crate::runner::ImageProfiler::new(model, spec)?;
    if let Some(n) = opts.batch_size {
        profiler.set_batch_size(n)?;
    }
    // Every file is decoded once before any work, so a bad image stops the run before any
    // output; then the images are profiled in batches, each printed as soon as it is ready.
    for f in &files {
        crate::data::images::read_image(f)?;
    }
    let bar = progress_bar(files.len() as u64, "profiling images");
    for group in files.chunks(profiler.batch_size()) {
        for profile in profiler.profile_files(group, opts.embed, Some(&bar))? {
            bar.suspend(|| sink(&profile))?;
        }
    }
    bar.finish_and_clear();
    Ok(())
}

const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A terminal view of a profile: one line per measured position with its entropy across layers
/// as a sparkline (scaled to ln |vocab| ≈ the largest possible entropy seen).
pub fn render_table(p: &EntropyProfile) -> String {
    let mut s = String::new();
    // The model name comes from a file name, which may hold terminal escape sequences.
    let axis = match p.read_point {
        ReadPoint::Block => "Shannon entropy by layer (block 1 … L)",
        ReadPoint::Attention => "Shannon entropy after attention (1.a … L.a)",
        ReadPoint::Both => "Shannon entropy (1.a, 1, … L.a, L)",
        ReadPoint::AttnOut => "Shannon entropy of each block's attention write (1.attn … L.attn)",
        ReadPoint::MlpOut => "Shannon entropy of each block's MLP write (1.mlp … L.mlp)",
        ReadPoint::Components => "Shannon entropy (1.attn, 1.mlp, 1, … L)",
    };
    let width = p.n_points().max(38);
    let traced = p.positions.iter().any(|x| x.target.is_some());
    s.push_str(&format!(
        "model  {}  ({} layers)\n",
        super::printable(&p.model),
        p.n_blocks
    ));
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
        "{:>5}  {:<16} {:<w$}  {:>6} {:>6}  {:>5}  {:>5}{}\n",
        "pos",
        "→ next token",
        axis,
        "max",
        "last",
        "top-p",
        "depth",
        if traced {
            "  target rank first→last"
        } else {
            ""
        },
        w = width
    ));
    let all = p.all_ids();
    for pos in &p.positions {
        // An image's profile (no prompt tokens) names its predicted class.
        let next_index = if p.prompt_ids.is_empty() {
            pos.position
        } else {
            pos.position + 1
        };
        let next = all
            .get(next_index)
            .and_then(|_| p.tokens.get(next_index))
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
        let rank = match &pos.target {
            Some(t) => format!(
                "  {}→{}",
                t.rank.first().copied().unwrap_or(0),
                t.rank.last().copied().unwrap_or(0)
            ),
            None => String::new(),
        };
        // The point where the lens's top-1 settles on the model's own ("·" in an older file).
        let depth = pos
            .prediction_depth
            .map_or_else(|| "·".to_string(), |d| d.to_string());
        s.push_str(&format!(
            "{:>5}  {:<16} {:<w$}  {:>6.2} {:>6.2}  {:>5}  {:>5}{}\n",
            pos.position,
            format!("{next:?}").chars().take(16).collect::<String>(),
            spark,
            hmax,
            last,
            topp,
            depth,
            rank,
            w = width
        ));
    }
    s
}
