//! `entropy-lens`: logit-lens entropy profiles and the paper's experiments from the command line.
//! Parses the arguments and dispatches to [`entropy_lens::cli`].

use std::process::ExitCode;

use clap::Parser;
use entropy_lens::cli::{args::Cli, dispatch};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = std::io::stdout();
    match dispatch(cli, &mut stdout.lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
