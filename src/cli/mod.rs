//! What the `entropy-lens` binary does, as library functions (so tests and notebooks can call
//! the same code): the arguments shared by commands, one module per command, progress bars.
//!
//! `src/bin/entropy-lens.rs` only parses the command line and dispatches here.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod args;
pub mod classify;
pub mod demo;
pub mod experiment;
pub mod explore;
pub mod profile;
pub mod train_lens;

pub use classify::{classify, parse_search};
pub use demo::{demo, DEMO_PROMPT};
pub use profile::{profile, profile_loaded, read_prompts, render_table, ProfileOptions};

use std::io::Write;

use indicatif::{ProgressBar, ProgressStyle};

use crate::error::{Error, Result};
use args::{Cli, Command};

/// A message for the user on stderr. A stderr that cannot be written (`2>/dev/full`, closed) is
/// no reason to fail the work, nor to panic as `eprintln!` does.
pub fn note(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// `text` safe to print on a terminal: control characters other than newline and tab (a file name
/// may carry escape sequences that recolour or rewrite the screen) are shown escaped, `\u{1b}`.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// Refuses to run when standard output was closed at start (`entropy-lens profile ... >&-`): the
/// Rust runtime reopens a closed descriptor 1 on `/dev/null` before `main`, so the run would exit 0
/// with its results lost. The binary records the descriptor's state in a constructor that runs
/// before the runtime does (see `src/bin/entropy-lens.rs`) and passes it here. A `/dev/null`
/// opened on purpose, write-only (`>/dev/null`) or read-write (Python's `subprocess.DEVNULL`,
/// `daemon(3)`, `1<>/dev/null`), is an open descriptor and is accepted.
///
/// # Errors
/// [`Error::InvalidArgument`] when descriptor 1 was closed.
pub fn check_stdout(closed_at_start: bool) -> Result<()> {
    if closed_at_start {
        return Err(Error::invalid(
            "standard output is closed; redirect it to a file (or to /dev/null to discard the results)",
        ));
    }
    Ok(())
}

fn line(out: &mut impl Write, text: &str) -> Result<()> {
    writeln!(out, "{text}").map_err(|e| Error::io("<stdout>", e))?;
    out.flush().map_err(|e| Error::io("<stdout>", e))
}

/// The whole `entropy-lens` command: parses `args` (the program name first), runs the command
/// with results on stdout and an `error:` line on stderr, and returns the exit status (clap's own
/// for `--help` and usage errors). The binary's `main` and the Python wheel's console script both
/// call it; `stdout_closed_at_start` is what [`check_stdout`] refuses.
pub fn run_main<I, T>(args: I, stdout_closed_at_start: bool) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::Parser;
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and exit 0; usage errors to stderr, exit 2.
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    let result = check_stdout(stdout_closed_at_start).and_then(|()| {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        dispatch(cli, &mut out)
    });
    match result {
        Ok(()) => 0,
        // `entropy-lens profile ... | head`: the reader has what it wanted.
        Err(Error::Io { path, source })
            if path.as_os_str() == "<stdout>"
                && source.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            0
        }
        Err(e) => {
            // A stderr that cannot be written (2>/dev/full) must not turn the exit code into a
            // panic's 101; names and paths are printed with their control characters escaped.
            let _ = writeln!(std::io::stderr(), "error: {}", printable(&e.to_string()));
            1
        }
    }
}

/// Runs a parsed command line, writing results to `out`.
pub fn dispatch(cli: Cli, out: &mut impl Write) -> Result<()> {
    match cli.command {
        Command::Profile(args) => {
            let opts = args.to_options()?;
            profile(&opts, |p| {
                let text = if args.json {
                    p.to_json_line()?
                } else {
                    render_table(p)
                };
                line(out, &text)
            })
        }
        Command::Experiment(args) => experiment::experiment(&args, out).map(|_| ()),
        Command::Merge {
            dirs,
            out: dest,
            json,
        } => experiment::merge(&dirs, &dest, json, out),
        Command::Finish { dir, json } => experiment::finish(&dir, json, out),
        Command::CompareRuns { a, b, json } => experiment::compare_runs(&a, &b, json, out),
        Command::TrainLens(args) => train_lens::train_lens(&args, out),
        Command::Explore(args) => explore::explore(&args, out),
        Command::FetchModels => {
            for path in crate::fetch::fetch_all()? {
                line(out, &path.display().to_string())?;
            }
            Ok(())
        }
        Command::Classify(a) => {
            let cfg = crate::analysis::KnnCvConfig {
                k: a.k,
                folds: a.folds,
                seed: a.seed,
                weighting: a.weights.parse()?,
                standardize: a.standardize,
                search: parse_search(&a.search)?,
            };
            let r = classify(&a.features, &a.labels, &cfg)?;
            let text = if a.json {
                serde_json::to_string(&r)?
            } else {
                r.to_string()
            };
            line(out, &text)
        }
        Command::Demo { prompt, generate } => demo(&prompt, generate, out),
        Command::Models { json } => {
            for m in crate::model::paper_models::PAPER_MODELS {
                let text = if json {
                    serde_json::to_string(m)?
                } else {
                    format!(
                        "{:<24} {:<36} {:<8} {:>6.2}B{}",
                        m.name,
                        m.hub_id,
                        m.architecture.as_str(),
                        m.params_b,
                        if m.gated {
                            "  (gated: set HF_TOKEN)"
                        } else {
                            ""
                        }
                    )
                };
                line(out, &text)?;
            }
            Ok(())
        }
        Command::ExportHf {
            model,
            out: dir,
            shards,
        } => {
            crate::model::export::export_gguf_to_hf(&model, &dir, shards)?;
            line(out, &dir.display().to_string())
        }
    }
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
