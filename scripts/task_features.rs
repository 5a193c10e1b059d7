//! Entropy-profile features of the paper's TinyStories task-type prompts, for the statistics
//! fixtures: `cargo run --release --example task_features -- [PER_TASK] [TOKENS]`.
//!
//! Loads the offline SmolLM2, builds PER_TASK prompts per task type (generative / syntactic /
//! semantic; base, reversed and scrambled templates) from `data/tinystories/valid.jsonl`,
//! generates TOKENS greedy tokens through the chat template (EOS ignored so every generation has
//! the same length) and writes the concatenated Shannon profiles (TOKENS × 30 features) and the
//! task labels to `tests/golden/stats/tinystories_smollm2_{features.csv,labels.txt}`.
//! `tests/golden/make_stats.py` then computes scikit-learn's cross-validated AUC on them.
//!
//! The committed CSV was made with the prompt builder of commit 8b498ee (a different story per
//! prompt); `task_prompts` now asks each story all three tasks, so a rerun gives other prompts (and
//! needs make_stats.py rerun with it). For the paper's experiment use `entropy-lens experiment tasks`.

use entropy_lens::cli::progress_bar;
use entropy_lens::data::tinystories::{load_stories, task_prompts};
use entropy_lens::data::write_csv;
use entropy_lens::fetch;
use entropy_lens::lens::StatSpec;
use entropy_lens::model::{load, LoadOptions, ModelSource};
use entropy_lens::profile::{aggregate, Aggregation};
use entropy_lens::runner::{ProfileRequest, Profiler};
use ndarray::Array2;

fn main() -> entropy_lens::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let per_task = args.first().copied().unwrap_or(100);
    let tokens = args.get(1).copied().unwrap_or(8);
    let root = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"),
    );
    let stories = load_stories(&root.join("data/tinystories/valid.jsonl"))?;
    let prompts = task_prompts(&stories, per_task, 42)?;
    let model = fetch::fetch_model(&fetch::SMOLLM2)?;
    let mut prof = Profiler::new(
        load(&ModelSource::Gguf(model), &LoadOptions::cpu())?,
        StatSpec::default(),
    )?;
    let bar = progress_bar(prompts.len() as u64, "task prompts");
    let mut rows = Vec::new();
    let mut labels = Vec::new();
    for p in &prompts {
        let req = ProfileRequest::new(&p.prompt)
            .generate(tokens)
            .ignore_eos(true)
            .chat(true);
        let profile = prof.run(&req)?;
        rows.push(aggregate(
            profile.shannon_matrix()?.view(),
            Aggregation::Concat,
        )?);
        labels.push(p.task.name());
        bar.inc(1);
    }
    bar.finish_and_clear();
    let d = rows[0].len();
    let x = Array2::from_shape_vec((rows.len(), d), rows.into_iter().flatten().collect())
        .map_err(|e| entropy_lens::Error::Data(e.to_string()))?;
    let out = root.join("tests/golden/stats");
    write_csv(&out.join("tinystories_smollm2_features.csv"), &x)?;
    std::fs::write(
        out.join("tinystories_smollm2_labels.txt"),
        labels.join("\n") + "\n",
    )
    .map_err(|e| entropy_lens::Error::io(&out, e))?;
    println!(
        "{} samples × {d} features written to {}",
        x.nrows(),
        out.display()
    );
    Ok(())
}
