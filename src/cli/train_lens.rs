//! `entropy-lens train-lens`: fits a tuned lens to a model on a text and prints the held-out KL
//! per layer, logit lens beside tuned lens.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};

use super::args::TrainLensArgs;
use crate::error::{Error, Result};
use crate::lens::shortcut::{train_shortcut, ShortcutOptions};
use crate::lens::trainer::{
    read_text_from, train_lens_watched as train, Init, TrainOptions, TrainReport,
};
use crate::model::{load, parse_device, LoadOptions};
use crate::watch::Watch;

impl TrainLensArgs {
    /// The training options these flags ask for.
    pub fn options(&self) -> Result<TrainOptions> {
        if self.ridge.is_some() {
            return Err(Error::invalid(
                "--ridge applies to --method shortcut (--init shortcut fits with the default ridge, 1e-6)",
            ));
        }
        let d = TrainOptions::default();
        Ok(TrainOptions {
            tokens: self.tokens.unwrap_or(d.tokens),
            step_tokens: self.step_tokens.unwrap_or(d.step_tokens),
            seq_len: self.seq_len.unwrap_or(d.seq_len),
            holdout_tokens: self.holdout_tokens.unwrap_or(d.holdout_tokens),
            lr_scale: self.lr_scale.unwrap_or(d.lr_scale),
            seed: self.seed,
            checkpoint_every: self.checkpoint_every.unwrap_or(d.checkpoint_every),
            init: Init::parse(&self.init)?,
            ..d
        })
    }

    /// The shortcut fit's options, refusing the flags that only KL training reads.
    pub fn shortcut_options(&self) -> Result<ShortcutOptions> {
        let kl_only = [
            ("--step-tokens", self.step_tokens.is_some()),
            ("--lr-scale", self.lr_scale.is_some()),
            ("--checkpoint-every", self.checkpoint_every.is_some()),
        ];
        if self.init != "zero" {
            return Err(Error::invalid(format!(
                "--init {} applies to --method kl; the shortcut lens is fitted in one closed-form pass",
                self.init
            )));
        }
        if let Some((flag, _)) = kl_only.iter().find(|(_, given)| *given) {
            return Err(Error::invalid(format!(
                "{flag} applies to --method kl; the shortcut lens is fitted in one closed-form pass"
            )));
        }
        let d = ShortcutOptions::default();
        let opts = ShortcutOptions {
            tokens: self.tokens.unwrap_or(d.tokens),
            seq_len: self.seq_len.unwrap_or(d.seq_len),
            holdout_tokens: self.holdout_tokens.unwrap_or(d.holdout_tokens),
            ridge: self.ridge.unwrap_or(d.ridge),
            seed: self.seed,
            ..d
        };
        opts.check()?;
        Ok(opts)
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
    // Options first: a wrong flag is refused before the model loads.
    let (kl_opts, shortcut_opts) = if args.method == "shortcut" {
        (None, Some(args.shortcut_options()?))
    } else {
        (Some(args.options()?), None)
    };
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
    let report = match (&kl_opts, &shortcut_opts) {
        (_, Some(opts)) => fit_shortcut_lens(&mut model, &tokenizer, &text, opts, args, watch)?,
        (Some(opts), _) => train_kl_lens(&mut model, &tokenizer, &text, opts, args, watch)?,
        (None, None) => return Err(Error::invalid("train-lens needs a --method")),
    };
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

/// KL training with a progress bar of steps (or a status line every 10 s without a terminal).
fn train_kl_lens(
    model: &mut crate::model::Model,
    tokenizer: &crate::model::TextTokenizer,
    text: &str,
    opts: &TrainOptions,
    args: &TrainLensArgs,
    watch: Option<&Watch>,
) -> Result<TrainReport> {
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
    let report = train(model, tokenizer, text, opts, &args.out, &mut on_step, watch)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(report)
}

/// The shortcut fit with a progress bar of windows read.
fn fit_shortcut_lens(
    model: &mut crate::model::Model,
    tokenizer: &crate::model::TextTokenizer,
    text: &str,
    opts: &ShortcutOptions,
    args: &TrainLensArgs,
    watch: Option<&Watch>,
) -> Result<TrainReport> {
    let total = opts.tokens / opts.seq_len;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(total as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "train-lens --method shortcut {bar:30} {pos}/{len} windows [{elapsed} < {eta}]",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    });
    if let Some(w) = watch {
        w.set_total(total);
    }
    let mut last_line = std::time::Instant::now();
    let mut on_pass = |p: crate::lens::shortcut::FitProgress| {
        let line = format!(
            "train-lens --method shortcut: {}/{} windows read",
            p.windows, p.total
        );
        if let Some(w) = watch {
            w.set_done(p.windows);
            w.set_status(&line);
        }
        match &bar {
            Some(b) => b.set_position(p.windows as u64),
            None if watch.is_none()
                && (last_line.elapsed().as_secs() >= 10 || p.windows == p.total) =>
            {
                last_line = std::time::Instant::now();
                super::note(&line);
            }
            None => {}
        }
    };
    let report = train_shortcut(model, tokenizer, text, opts, &args.out, &mut on_pass, watch)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(report)
}
