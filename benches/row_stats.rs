//! Per-row cost of the lens statistics on real logits: the fused pass (`row_stats`: one sweep for
//! the largest logit, one for the exponentials of every Rényi order) against one pass per statistic
//! (`row_stats_multipass`), in the same process, on the same rows, checked to give the same bits.
//!
//! ```text
//! cargo bench --bench row_stats [-- --reps 5] [--model FILE]...
//! ```
//!
//! The rows are the logit lens at every block of the two offline models (fetched if missing) at
//! the last token of the eight bench prompts: 8 × 30 rows of 49,152 logits (SmolLM2) and
//! 8 × 18 rows of 262,144 (Gemma). The specs: `formats` (Shannon and Rényi 0.5 and 5, top-p count,
//! as the experiment runs them), `profile` (the same and the top 5 tokens, as `profile --alpha 0.5 1
//! 5` does) and `validate` (the `formats` spec with the top-p sets for C2). One thread,
//! so that the figure is CPU work per row; the lens runs rows on every core. Prints a Markdown
//! table: the share of 64-logit blocks whose α = 5 exponentials all sit at the clamp (skipped by
//! the sweep), median µs per row over the repetitions, and the ratio.

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{Device, Tensor};
use entropy_lens::fetch;
use entropy_lens::lens::stats::row_stats_multipass;
use entropy_lens::lens::{row_stats, Lens, Scratch, StatSpec};
use entropy_lens::model::{load, LoadOptions, ModelSource, Positions};
use entropy_lens::runner::{ProfileRequest, Profiler};

const PROMPTS: &str = include_str!("prompts.txt");

fn arg_values(args: &[String], name: &str) -> Vec<String> {
    args.windows(2)
        .filter(|w| w[0] == name)
        .map(|w| w[1].clone())
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The logits of the logit lens at every block, at the last token of each bench prompt.
fn lens_rows(model: &Path) -> (String, Vec<Vec<f32>>) {
    let loaded = load(
        &ModelSource::parse(&model.to_string_lossy()).expect("model path"),
        &LoadOptions::cpu(),
    )
    .expect("load the model");
    let name = loaded.model.info().name.clone();
    let mut prof = Profiler::new(loaded, StatSpec::default()).expect("profiler");
    let lens = Lens::new(StatSpec::default()).expect("lens");
    let mut rows = Vec::new();
    for prompt in PROMPTS.lines() {
        let ids = prof
            .prompt_ids(&ProfileRequest::new(prompt))
            .expect("tokenize");
        let n = ids.len();
        let ids = Tensor::from_vec(ids, (1, n), &Device::Cpu).expect("ids");
        prof.model.reset();
        let captured = prof
            .model
            .forward_capture(&ids, Positions::Last)
            .expect("forward");
        let blocks: Vec<Tensor> = captured.residuals[1..]
            .iter()
            .map(|r| r.squeeze(0).expect("[1, d]"))
            .collect();
        let resid = Tensor::cat(&blocks, 0).expect("[blocks, d]");
        let keep: Vec<usize> = (0..blocks.len()).collect();
        let (_, kept) = lens
            .apply_keep_rows(&prof.model, &resid, &keep)
            .expect("lens");
        rows.extend(kept);
    }
    (name, rows)
}

/// Share of the rows' full 64-logit blocks whose exponentials at `alpha` all sit at the clamp
/// (e^−87), which the fused sweep adds without computing them.
fn clamped_share(rows: &[Vec<f32>], alpha: f32) -> f64 {
    let (mut clamped, mut blocks) = (0usize, 0usize);
    for row in rows {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for block in row.chunks_exact(64) {
            let top = block.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            blocks += 1;
            clamped += usize::from(alpha * (top - m) <= -87.0);
        }
    }
    clamped as f64 / blocks.max(1) as f64
}

type RowFn =
    fn(&[f32], &StatSpec, &mut Scratch) -> entropy_lens::Result<entropy_lens::lens::DistStats>;

/// Microseconds per row of `f` over `rows`.
fn time_rows(f: RowFn, rows: &[Vec<f32>], spec: &StatSpec, scratch: &mut Scratch) -> f64 {
    let start = Instant::now();
    for row in rows {
        std::hint::black_box(f(row, spec, scratch).expect("row statistics"));
    }
    start.elapsed().as_secs_f64() * 1e6 / rows.len() as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize = arg_values(&args, "--reps")
        .first()
        .map_or(5, |r| r.parse().expect("--reps N"));
    let mut models: Vec<PathBuf> = arg_values(&args, "--model")
        .into_iter()
        .map(PathBuf::from)
        .collect();
    if models.is_empty() {
        for m in fetch::OFFLINE_MODELS {
            models.push(fetch::cached_path(&m).unwrap_or_else(|| fetch::fetch_model(&m).unwrap()));
        }
    }
    let specs = [
        (
            "formats",
            StatSpec {
                alphas: vec![0.5, 1.0, 5.0],
                top_k: 0,
                ..StatSpec::default()
            },
        ),
        (
            "profile",
            StatSpec {
                alphas: vec![0.5, 1.0, 5.0],
                ..StatSpec::default()
            },
        ),
        (
            "validate",
            StatSpec {
                alphas: vec![0.5, 1.0, 5.0],
                top_k: 0,
                top_p_overlap: true,
                ..StatSpec::default()
            },
        ),
    ];
    println!("| model | spec | rows × vocab | blocks at the clamp (α = 5) | one pass per statistic (µs/row) | fused (µs/row) | speed-up |");
    println!("|---|---|---|---|---|---|---|");
    for model in &models {
        let (name, rows) = lens_rows(model);
        let vocab = rows.first().map_or(0, Vec::len);
        let clamped = clamped_share(&rows, 5.0);
        for (label, spec) in &specs {
            let mut scratch = Scratch::default();
            // Same bits, row by row.
            for (i, row) in rows.iter().enumerate() {
                let a = row_stats(row, spec, &mut scratch).expect("fused");
                let b = row_stats_multipass(row, spec, &mut scratch).expect("multipass");
                assert_eq!(format!("{a:?}"), format!("{b:?}"), "row {i} of {name}");
                assert_eq!(
                    a.shannon.to_bits(),
                    b.shannon.to_bits(),
                    "row {i} of {name}"
                );
            }
            let (mut before, mut after) = (Vec::new(), Vec::new());
            // One warm-up of each, then the repetitions interleaved.
            time_rows(row_stats_multipass, &rows, spec, &mut scratch);
            time_rows(row_stats, &rows, spec, &mut scratch);
            for _ in 0..reps {
                before.push(time_rows(row_stats_multipass, &rows, spec, &mut scratch));
                after.push(time_rows(row_stats, &rows, spec, &mut scratch));
            }
            let (b, a) = (median(before), median(after));
            println!(
                "| {name} | {label} | {} × {vocab} | {:.0} % | {b:.0} | {a:.0} | {:.2}× |",
                rows.len(),
                100.0 * clamped,
                b / a
            );
        }
    }
}
