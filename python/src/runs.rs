//! The command line in-process, experiments, lens training and the offline models.
//!
//! Experiments and lens training take the CLI's own flags (the Python wrapper turns keyword
//! arguments into them), so a Python run is the CLI's run: the same plan, the same folder, the
//! same bytes, and resumable from either side.

use std::sync::Arc;

use clap::Parser;
use entropy_lens::cli::args::{Cli, Command};
use entropy_lens::experiments::{self, ProgressMode};
use entropy_lens::watch::Watch;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors::IntoPy;
use crate::watched::run_watched;

/// Parses `argv` (without the program name) as the CLI does; a usage error is a `ValueError`
/// carrying clap's message.
fn parse(argv: Vec<String>) -> PyResult<Command> {
    let args = std::iter::once("entropy-lens".to_string()).chain(argv);
    Cli::try_parse_from(args)
        .map(|c| c.command)
        .map_err(|e| PyValueError::new_err(e.render().to_string().trim_end().to_string()))
}

/// `entropy-lens ARGS...` in this process: the console script of the wheel. Returns the exit
/// status (clap prints its own usage errors and `--help`).
#[pyfunction]
pub fn main(py: Python<'_>, argv: Vec<String>) -> PyResult<i32> {
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // As the binary does: candle's error backtraces would print inside the `error:` line.
        std::env::set_var("RUST_LIB_BACKTRACE", "0");
    }
    crate::logger::to_stderr();
    let code = py.detach(move || {
        std::panic::catch_unwind(move || {
            let args = std::iter::once("entropy-lens".to_string()).chain(argv);
            entropy_lens::cli::run_main(args, false)
        })
    });
    // A panic has printed its message already; 101 is Rust's exit status for one.
    Ok(code.map_or(101, i32::from))
}

/// Runs (or resumes) an experiment from CLI flags (`["tasks", "--model", "smollm2", ...]`);
/// returns the run's folder.
#[pyfunction]
#[pyo3(signature = (argv, progress=None))]
pub fn run_experiment(
    py: Python<'_>,
    argv: Vec<String>,
    progress: Option<Bound<'_, PyAny>>,
) -> PyResult<String> {
    let Command::Experiment(args) = parse([vec!["experiment".to_string()], argv].concat())? else {
        return Err(PyValueError::new_err("not an experiment command line"));
    };
    let (plan, mut opts) = args.to_plan().py()?;
    let watch = Arc::new(Watch::new());
    opts.progress = ProgressMode::Hidden;
    opts.watch = Some(Arc::clone(&watch));
    let summary = run_watched(py, &watch, progress.as_ref(), |_| {
        experiments::run(&plan, &opts)
    })?;
    Ok(summary.dir.display().to_string())
}

/// Trains (or resumes) a tuned lens from CLI flags (`["--model", "smollm2", "--out", DIR, ...]`);
/// returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (argv, progress=None))]
pub fn train_lens(
    py: Python<'_>,
    argv: Vec<String>,
    progress: Option<Bound<'_, PyAny>>,
) -> PyResult<String> {
    let Command::TrainLens(args) = parse(
        [
            vec!["train-lens".to_string()],
            argv,
            vec!["--json".to_string()],
        ]
        .concat(),
    )?
    else {
        return Err(PyValueError::new_err("not a train-lens command line"));
    };
    let watch = Arc::new(Watch::new());
    let out = run_watched(py, &watch, progress.as_ref(), |w| {
        let mut out = Vec::new();
        entropy_lens::cli::train_lens::train_lens_with(&args, &mut out, Some(w))?;
        Ok(out)
    })?;
    Ok(String::from_utf8_lossy(&out).trim_end().to_string())
}

/// Reads a finished experiment folder's `result.json` as the library parses it (checked against
/// its experiment's schema), returned as JSON.
#[pyfunction]
pub fn load_outcome(dir: &str) -> PyResult<String> {
    entropy_lens::experiments::Outcome::load(std::path::Path::new(dir))
        .and_then(|o| o.to_json())
        .py()
}

/// Two finished runs of one experiment that differ only in their lens, compared pair by pair
/// (`entropy-lens compare-runs A B --json`).
#[pyfunction]
pub fn compare_runs(a: &str, b: &str) -> PyResult<String> {
    let c = entropy_lens::experiments::paired::compare_runs(
        std::path::Path::new(a),
        std::path::Path::new(b),
    )
    .py()?;
    serde_json::to_string(&c).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// A finished experiment folder's charts, as the CLI's report draws them.
#[pyfunction]
pub fn outcome_charts(dir: &str) -> PyResult<Vec<crate::profiler::ChartParts>> {
    let outcome = entropy_lens::experiments::Outcome::load(std::path::Path::new(dir)).py()?;
    Ok(outcome
        .charts()
        .py()?
        .iter()
        .map(crate::profiler::chart_parts)
        .collect())
}

/// One table as (title, header, rows, notes): its cells formatted as the report prints them.
type TableParts = (String, Vec<String>, Vec<Vec<String>>, Vec<String>);

/// A finished experiment folder's tables (`comparison`: the tables set beside the paper's).
#[pyfunction]
#[pyo3(signature = (dir, comparison=false))]
pub fn outcome_tables(dir: &str, comparison: bool) -> PyResult<Vec<TableParts>> {
    let outcome = entropy_lens::experiments::Outcome::load(std::path::Path::new(dir)).py()?;
    let tables = if comparison {
        outcome.comparison()
    } else {
        outcome.tables()
    };
    Ok(tables
        .iter()
        .map(|t| {
            (
                t.title().to_string(),
                t.header().to_vec(),
                t.rows().to_vec(),
                t.notes().to_vec(),
            )
        })
        .collect())
}

/// Notebook HTML for a figure: plotly.js the first time in this process (marked, so that a
/// committed notebook can drop it), then a `<div>` with the sketch that plotly.js replaces.
#[pyfunction]
pub fn notebook_html(fig_json: &str, svg: &str, height: usize) -> String {
    entropy_lens::plots::notebook_html(fig_json, svg, height)
}

/// The next figure displayed embeds plotly.js again (after a notebook's outputs were cleared).
#[pyfunction]
pub fn reset_plotly_js() {
    entropy_lens::plots::reset_plotly_js()
}

/// The registered experiments: (name, where it stands in the paper, what it asks).
#[pyfunction]
pub fn experiments_catalog() -> Vec<(String, String, String)> {
    experiments::catalog()
        .into_iter()
        .map(|(k, paper, summary)| (k.name().to_string(), paper.to_string(), summary.to_string()))
        .collect()
}

/// Downloads the offline models (sha256-checked) if needed; returns their paths.
#[pyfunction]
pub fn fetch_models(py: Python<'_>) -> PyResult<Vec<String>> {
    let watch = Arc::new(Watch::new());
    let paths = run_watched(py, &watch, None, |_| entropy_lens::fetch::fetch_all())?;
    Ok(paths.iter().map(|p| p.display().to_string()).collect())
}
