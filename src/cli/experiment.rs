//! `entropy-lens experiment`, `merge` and `finish`.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};

use super::args::ExperimentArgs;
use crate::error::{Error, Result};
use crate::experiments::{self, Outcome, Plan, RunOptions, RunSummary};

impl ExperimentArgs {
    /// The plan and run options these flags ask for.
    pub fn to_plan(&self) -> Result<(Plan, RunOptions)> {
        let alphas = self.stats.alphas()?;
        let plan = Plan {
            kind: self.experiment.parse()?,
            model: self.model.model.clone(),
            device: self.model.device.clone(),
            dtype: self.model.dtype()?,
            scale: self.scale.parse()?,
            protocol: self.protocol.parse()?,
            seed: self.sampling.seed,
            n: self.n,
            tokens: self.tokens,
            data: self.data.clone(),
            chat: self.sampling.chat.then_some(true),
            temperature: self.sampling.temperature,
            sample_top_p: self.sampling.sample_top_p,
            k: self.k,
            folds: self.folds,
            alphas: (!alphas.is_empty()).then_some(alphas),
            windows: self.windows,
            top_p: self.stats.top_p,
            support_threshold: self.stats.support_threshold,
            method: self.method.as_deref().map(str::parse).transpose()?,
            style: self.style.as_deref().map(str::parse).transpose()?,
            models: (!self.models.is_empty()).then(|| self.models.clone()),
            classes: self.classes,
            lens: self.stats.lens.clone(),
            kl: self.kl.then_some(true),
        };
        let opts = RunOptions {
            out: self.out.clone(),
            shard: self.shard.as_deref().map(str::parse).transpose()?,
            batch: self.batch,
            ..Default::default()
        };
        Ok((plan, opts))
    }
}

fn write(out: &mut impl Write, text: &str) -> Result<()> {
    writeln!(out, "{text}").map_err(|e| Error::io("<stdout>", e))
}

/// Prints an outcome: result.json with `json`, else the tables.
pub fn print_outcome(
    outcome: &Outcome,
    dir: &Path,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    if json {
        write(out, outcome.to_json()?.trim_end())
    } else {
        write(out, &outcome.to_string())?;
        write(
            out,
            &format!(
                "wrote {}: result.json, profiles.npy, index.json, report.html",
                dir.display()
            ),
        )
    }
}

/// Runs `entropy-lens experiment`.
pub fn experiment(args: &ExperimentArgs, out: &mut impl Write) -> Result<RunSummary> {
    let (plan, opts) = args.to_plan()?;
    let summary = experiments::run(&plan, &opts)?;
    match &summary.outcome {
        Some(o) => print_outcome(o, &summary.dir, args.json, out)?,
        None => {
            let shard = opts.shard.map(|s| s.to_string()).unwrap_or_default();
            write(
                out,
                &format!(
                    "shard {shard} done in {} ({} items run, {} already there); join the shards with `entropy-lens merge DIR... --out DIR`",
                    summary.dir.display(),
                    summary.ran,
                    summary.resumed
                ),
            )?
        }
    }
    Ok(summary)
}

/// Runs `entropy-lens merge`.
pub fn merge(dirs: &[PathBuf], dest: &Path, json: bool, out: &mut impl Write) -> Result<()> {
    let outcome = experiments::merge(dirs, dest)?;
    print_outcome(&outcome, dest, json, out)
}

/// Runs `entropy-lens finish`.
/// `entropy-lens compare-runs A B`.
pub fn compare_runs(a: &Path, b: &Path, json: bool, out: &mut impl Write) -> Result<()> {
    // Two lens folders (train-lens outputs): their held-out evaluations, window by window.
    if a.join("train_report.json").is_file() && b.join("train_report.json").is_file() {
        let c = experiments::paired::compare_lenses(a, b)?;
        return if json {
            write(out, &serde_json::to_string_pretty(&c)?)
        } else {
            write(out, &c.table().to_string())
        };
    }
    let comparison = experiments::paired::compare_runs(a, b)?;
    if json {
        write(out, &serde_json::to_string_pretty(&comparison)?)
    } else {
        for t in comparison.tables() {
            write(out, &t.to_string())?;
        }
        Ok(())
    }
}

pub fn finish(dir: &Path, json: bool, out: &mut impl Write) -> Result<()> {
    let outcome = experiments::finish(dir)?;
    print_outcome(&outcome, dir, json, out)
}
