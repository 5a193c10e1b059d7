//! Throughput of generation with the lens at every block: one case per process, so that its peak
//! memory is its own. `scripts/compare-pipelines.py` runs it beside the two Python pipelines and
//! writes the comparison table of docs/benchmarks.md.
//!
//! ```text
//! cargo bench --bench throughput -- --case b8x256 [--model FILE] [--dtype f32|q] [--reps 3]
//!     [--prompts FILE.jsonl] [--batch-size B]
//! ```
//!
//! Cases: `b1x32` (one prompt, 32 tokens), `b8x32` and `b8x256` (8 prompts × 32 or 256 tokens),
//! `b32x32` (32 prompts × 32 tokens: the eight prompts four times over), each run as one batch
//! unless `--batch-size` says otherwise. Every case computes the Shannon entropy (and
//! the top-p count, which the lens always computes) at every block for every generated token,
//! greedily, past the end-of-sequence token. Prints one JSON line: median tokens/s over the
//! repetitions (after a warm-up), each repetition, the same batch decoded with no lens at all (the
//! model's share of the time), and the process's peak resident memory.

#[path = "support/decode.rs"]
mod decode;

use std::time::Instant;

use decode::decode_without_lens;
use entropy_lens::fetch;
use entropy_lens::lens::StatSpec;
use entropy_lens::model::{load, LoadOptions, ModelSource, WeightDType};
use entropy_lens::runner::{ProfileRequest, Profiler};

/// Eight prompts of different lengths (the batch is left-padded to the longest), one per line;
/// `scripts/compare-pipelines.py` reads the same file.
const PROMPTS: &str = include_str!("prompts.txt");

fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let case = arg(&args, "--case").unwrap_or_else(|| "b1x32".into());
    let (n_prompts, tokens) = match case.as_str() {
        "b1x32" => (1, 32),
        "b8x32" => (8, 32),
        "b8x256" => (8, 256),
        "b32x32" => (32, 32),
        other => panic!("unknown case {other} (b1x32, b8x32, b8x256, b32x32)"),
    };
    let reps: usize = arg(&args, "--reps").map_or(3, |r| r.parse().expect("--reps N"));
    let dtype = match arg(&args, "--dtype").as_deref() {
        None | Some("f32") => WeightDType::F32,
        Some("q") => WeightDType::Quantized,
        Some(other) => panic!("--dtype f32 or q, not {other}"),
    };
    let model = arg(&args, "--model").map_or_else(
        || {
            fetch::cached_path(&fetch::SMOLLM2)
                .unwrap_or_else(|| fetch::fetch_model(&fetch::SMOLLM2).unwrap())
        },
        std::path::PathBuf::from,
    );
    let prompts: Vec<String> = match arg(&args, "--prompts") {
        Some(file) => {
            entropy_lens::cli::profile::read_prompts(std::path::Path::new(&file)).unwrap()
        }
        None => PROMPTS.lines().map(str::to_string).collect(),
    };
    // More prompts than the file holds: the file again from its start.
    let prompts: Vec<String> = prompts.iter().cycle().take(n_prompts).cloned().collect();
    let prompts = &prompts[..];

    let loaded = load(
        &ModelSource::parse(&model.to_string_lossy()).unwrap(),
        &LoadOptions::cpu().with_dtype(dtype),
    )
    .unwrap();
    let spec = StatSpec {
        top_k: 0,
        ..StatSpec::default()
    };
    let mut prof = Profiler::new(loaded, spec).unwrap();
    let batch =
        arg(&args, "--batch-size").map_or(prompts.len(), |b| b.parse().expect("--batch-size B"));
    prof.set_batch_size(batch).unwrap();
    let reqs: Vec<ProfileRequest> = prompts
        .iter()
        .map(|p| {
            ProfileRequest::new(p.clone())
                .generate(tokens)
                .ignore_eos(true)
        })
        .collect();
    // Warm-up: a short run of the same batch.
    let warm: Vec<ProfileRequest> = reqs.iter().map(|r| r.clone().generate(4)).collect();
    prof.run_batch(&warm).unwrap();
    let runs: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            let profiles = prof.run_batch(&reqs).unwrap();
            let generated: usize = profiles.iter().map(|p| p.generated_ids.len()).sum();
            assert_eq!(generated, tokens * reqs.len());
            generated as f64 / t.elapsed().as_secs_f64()
        })
        .collect();
    // The same batch with no lens: the model's own logits only, greedy, one forward per step.
    let plain: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            let n = decode_without_lens(&mut prof, &reqs, tokens);
            n as f64 / t.elapsed().as_secs_f64()
        })
        .collect();
    let line = serde_json::json!({
        "pipeline": "entropy-lens",
        "case": case,
        "model": prof.model.info().name,
        "dtype": dtype.as_str(),
        "prompts": reqs.len(),
        "tokens": tokens,
        "batch_size": batch,
        "tokens_per_s": median(runs.clone()),
        "runs": runs,
        "no_lens_tokens_per_s": median(plain),
        "peak_rss_mib": peak_rss_mib(),
        "threads": rayon::current_num_threads(),
    });
    println!("{line}");
}
