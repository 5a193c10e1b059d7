//! Runtime benchmark: generation with lens statistics at every layer, against plain decoding in
//! the same process; the all-position lens on a 128-token prompt; peak memory; quantized vs f32.
//!
//! `cargo bench --bench runtime` (add `-- --quick` for fewer repetitions, `-- --gemma` to include
//! Gemma-3-270M). Prints a Markdown table; docs/benchmarks.md records the figures.

use std::time::Instant;

use candle_core::{Device, Tensor};
use entropy_lens::fetch;
use entropy_lens::lens::StatSpec;
use entropy_lens::model::{load, LoadOptions, ModelSource, WeightDType};
use entropy_lens::runner::{argmax, ProfileRequest, Profiler};

const PROMPT: &str =
    "Once upon a time, there was a little girl named Lily. She loved to play outside.";
const LONG_TEXT: &str = "Spot. Spot saw the shiny car and said, \"Wow, Kitty, your car is so bright and clean!\" \
Kitty smiled and replied, \"Thank you, Spot. I polish it every day.\" After playing with the car, Kitty and Spot \
felt thirsty. They found a small pond with clear water. They drank the water and felt very happy. They played \
together all day and became best friends. One day, a little girl named Lily found a needle in her room. She knew \
it was difficult to play with it because it was sharp. Lily wanted to share the needle with her mom, so she could \
sew a button on her shirt. She went to her mom and said, \"Mom, I found this needle. Can you share it with me and \
sew my shirt?\" Her mom smiled and said, \"Yes, Lily, we can share the needle and fix your shirt.\"";

/// Peak resident memory of this process in MiB (Linux), and a reset of the peak.
fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

struct Row {
    model: String,
    dtype: &'static str,
    load_s: f64,
    lens_tok_s: f64,
    plain_tok_s: f64,
    all_pos_s: f64,
    all_pos_rows_s: f64,
    peak_mib: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn bench(path: &std::path::Path, dtype: WeightDType, reps: usize) -> Row {
    reset_peak_rss();
    let t = Instant::now();
    let loaded = load(
        &ModelSource::Gguf(path.to_path_buf()),
        &LoadOptions::cpu().with_dtype(dtype),
    )
    .unwrap();
    let load_s = t.elapsed().as_secs_f64();
    let mut prof = Profiler::new(loaded, StatSpec::default()).unwrap();
    let l = prof.model.n_layers();
    let gen = 32;

    // Generation with the full lens (Shannon, top-p count, top-5) at every layer, for every token.
    let req = ProfileRequest::new(PROMPT).generate(gen).ignore_eos(true);
    prof.run(&ProfileRequest::new(PROMPT).generate(4).ignore_eos(true))
        .unwrap();
    let lens_tok_s = median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                let p = prof.run(&req).unwrap();
                assert_eq!(p.generated_ids.len(), gen);
                gen as f64 / t.elapsed().as_secs_f64()
            })
            .collect(),
    );

    // Baseline in the same process: the same greedy decoding with no lens at all.
    let ids = prof.tokenizer.encode(PROMPT, true).unwrap();
    let plain_tok_s = median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                prof.model.reset();
                let input = Tensor::new(ids.as_slice(), &Device::Cpu)
                    .unwrap()
                    .unsqueeze(0)
                    .unwrap();
                let logits = prof.model.logits(&input).unwrap();
                let n = ids.len();
                let mut last: Vec<f32> = logits
                    .get(0)
                    .unwrap()
                    .get(n - 1)
                    .unwrap()
                    .to_vec1()
                    .unwrap();
                for _ in 1..gen {
                    let next = argmax(&last);
                    let input = Tensor::new(&[next], &Device::Cpu)
                        .unwrap()
                        .unsqueeze(0)
                        .unwrap();
                    last = prof
                        .model
                        .logits(&input)
                        .unwrap()
                        .flatten_all()
                        .unwrap()
                        .to_vec1()
                        .unwrap();
                }
                gen as f64 / t.elapsed().as_secs_f64()
            })
            .collect(),
    );

    // The lens at every layer and every position of a 128-token prompt.
    let long_ids = prof.tokenizer.encode(LONG_TEXT, true).unwrap();
    assert!(long_ids.len() >= 128, "{} tokens", long_ids.len());
    let text128 = prof.tokenizer.decode(&long_ids[..128]).unwrap();
    let req = ProfileRequest::new(text128).all_positions(true);
    let all_pos_s = median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                let p = prof.run(&req).unwrap();
                assert!(p.positions.len() >= 120);
                t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    Row {
        model: prof.model.info().name.clone(),
        dtype: dtype.as_str(),
        load_s,
        lens_tok_s,
        plain_tok_s,
        all_pos_s,
        all_pos_rows_s: (128 * l) as f64 / all_pos_s,
        peak_mib: peak_rss_mib().unwrap_or(f64::NAN),
    }
}

fn main() {
    // Peak memory is measured per run, reset between runs of one process: freed buffers kept for
    // reuse by an earlier run would count in a later one's peak.
    entropy_lens::model::allocator::leave_allocator_alone();
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let gemma = args.iter().any(|a| a == "--gemma");
    let reps = if quick { 1 } else { 3 };
    let threads = rayon::current_num_threads();
    let mut models = vec![fetch::fetch_model(&fetch::SMOLLM2).unwrap()];
    if gemma {
        models.push(fetch::fetch_model(&fetch::GEMMA3).unwrap());
    }
    let mut rows = Vec::new();
    for path in &models {
        for dtype in [WeightDType::Quantized, WeightDType::F32] {
            rows.push(bench(path, dtype, reps));
        }
    }
    println!("CPU: {} threads, {} repetitions (median)\n", threads, reps);
    println!("| model | weights | load (s) | 32 tokens, lens at every layer (tok/s) | same, no lens (tok/s) | lens cost | 128-token prompt, all positions × layers (s) | lens rows/s | peak RSS (MiB) |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {:.2} | {:.1} | {:.1} | {:.0}% | {:.2} | {:.0} | {:.0} |",
            r.model,
            r.dtype,
            r.load_s,
            r.lens_tok_s,
            r.plain_tok_s,
            100.0 * (r.plain_tok_s / r.lens_tok_s - 1.0),
            r.all_pos_s,
            r.all_pos_rows_s,
            r.peak_mib
        );
    }
    let q = rows.iter().find(|r| r.dtype == "q").unwrap();
    let f = rows.iter().find(|r| r.dtype == "f32").unwrap();
    println!(
        "\nquantized vs f32 (first model): {:.2}× tokens/s with the lens, {:.2}× peak memory",
        q.lens_tok_s / f.lens_tok_s,
        q.peak_mib / f.peak_mib
    );
    println!("reference (issue, same machine class): transformers f32 + hooks on every layer 5.1 tok/s; no lens 10.1 tok/s");
}
