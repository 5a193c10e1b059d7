//! `entropy-lens train-lens`: fits a tuned lens to a model on a text and prints the held-out KL
//! per layer, logit lens beside tuned lens.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};

use super::args::TrainLensArgs;
use crate::error::{Error, Result};
use crate::lens::trainer::{read_text_from, train_lens_watched as train, TrainOptions};
use crate::model::{load, parse_device, LoadOptions};
use crate::watch::Watch;

impl TrainLensArgs {
    /// The training options these flags ask for.
    pub fn options(&self) -> TrainOptions {
        let d = TrainOptions::default();
        TrainOptions {
            tokens: self.tokens.unwrap_or(d.tokens),
            step_tokens: self.step_tokens.unwrap_or(d.step_tokens),
            seq_len: self.seq_len.unwrap_or(d.seq_len),
            holdout_tokens: self.holdout_tokens.unwrap_or(d.holdout_tokens),
            lr_scale: self.lr_scale.unwrap_or(d.lr_scale),
            seed: self.seed,
            checkpoint_every: self.checkpoint_every.unwrap_or(d.checkpoint_every),
            ..d
        }
    }
}

/// One character per layer, scaled to the largest value.
fn sparkline(v: &[f64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = v.iter().copied().fold(1e-12, f64::max);
    v.iter()
        .map(|x| BARS[((x / max) * 7.0).round().clamp(0.0, 7.0) as usize])
        .collect()
}

/// Runs `entropy-lens train-lens`.
pub fn train_lens(args: &TrainLensArgs, out: &mut impl Write) -> Result<()> {
    train_lens_with(args, out, None)
}

/// `train-lens` reporting to `watch` (steps done, the status line) and stopping when it asks,
/// resumably (the Python module's `train_lens`).
pub fn train_lens_with(
    args: &TrainLensArgs,
    out: &mut impl Write,
    watch: Option<&Watch>,
) -> Result<()> {
    let opts = args.options();
    let source = crate::fetch::model_source_or_default(args.model.model.as_deref())?;
    let text = read_text_from(&args.data, args.skip_records)?;
    let loaded = load(
        &source,
        &LoadOptions {
            device: parse_device(&args.model.device)?,
            dtype: args.model.dtype()?,
        },
    )?;
    let (mut model, tokenizer) = (loaded.model, loaded.tokenizer);
    let steps = opts.steps();
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(steps as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "train-lens {bar:30} {pos}/{len} steps [{elapsed} < {eta}] {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Some(bar)
    } else {
        None
    };
    let mut last_line = std::time::Instant::now();
    if let Some(w) = watch {
        w.set_total(steps);
    }
    let mut on_step = |s: &crate::lens::trainer::StepReport| {
        let mean = s.kl.iter().sum::<f64>() / s.kl.len().max(1) as f64;
        let msg = format!(
            "mean KL {mean:.3} nats, by layer 0…{} {}",
            s.kl.len().saturating_sub(1),
            sparkline(&s.kl)
        );
        if let Some(w) = watch {
            w.set_done(s.step);
            w.set_status(&format!("train-lens: step {}/{}, {msg}", s.step, s.steps));
        }
        match &bar {
            Some(b) => {
                b.set_position(s.step as u64);
                b.set_message(msg);
            }
            None if watch.is_none()
                && (last_line.elapsed().as_secs() >= 10 || s.step == s.steps) =>
            {
                last_line = std::time::Instant::now();
                super::note(&format!("train-lens: step {}/{}, {msg}", s.step, s.steps));
            }
            None => {}
        }
    };
    let report = train(
        &mut model,
        &tokenizer,
        &text,
        &opts,
        &args.out,
        &mut on_step,
        watch,
    )?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let text = if args.json {
        serde_json::to_string(&report)?
    } else {
        format!(
            "{}\nwrote {}: config.json + params.pt (the tuned-lens package's format), train_report.json\nuse it with --lens tuned:{}",
            report.table(),
            args.out.display(),
            args.out.display()
        )
    };
    writeln!(out, "{text}").map_err(|e| Error::io("<stdout>", e))
}
