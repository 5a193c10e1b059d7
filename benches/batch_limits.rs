//! Batched profiling against this machine's limits, all measured in the same process: the table
//! that changes to the decoder or the lens product are judged by (issue 45).
//!
//! ```text
//! cargo bench --bench batch_limits -- [--cases b1x32,b8x32,b32x32] [--dtype f32|q]
//!     [--model FILE] [--reps 3]
//! ```
//!
//! First the limits, each the median of five measurements on every thread of the process: the
//! read bandwidth (a sum over 1 GiB), the FMA units' peak (`benches/support/fma.rs`, as
//! `fma_peak`) and the rate of a square f32 GEMM (2048², candle's CPU matmul). Then, per case
//! (`bBxT`: B prompts, one batch, T tokens each, greedily, past the end of sequence, the Shannon
//! entropy and top-p count at every block of every generated token, as `throughput`), tokens/s
//! with the lens and with no lens at all, and the lens run's time per generated token split by
//! [`entropy_lens::phases`] into the decoder (the blocks' forward pass; its attention core and its
//! weight products shown apart), the lens product (final
//! norm and unembedding of every block's row), the statistics, and the rest (sampling, the
//! profile's bookkeeping), each against its bound:
//!
//! - decoder: the larger of reading the blocks' weights once per step at the measured bandwidth
//!   and the blocks' FLOP at the FMA peak, per generated token;
//! - lens product: its FLOP (2 · d · V per row, B · L rows per step) at the FMA peak;
//! - no lens: as the decoder, with the unembedding (read once per step, B rows) added;
//! - the whole run: the larger of the weights once per step and all the FLOP (model and lens)
//!   at the measured GEMM rate (the issue's "same-run limit").
//!
//! Weight bytes come from the model's config (f32: 4 bytes per parameter); with `--dtype q` the
//! GGUF file's size stands in for the quantized weights. Prefill is inside every figure (the
//! prompts are 10-40 tokens), the same in both runs.

#[path = "support/decode.rs"]
mod decode;
#[path = "support/fma.rs"]
mod fma;
#[path = "support/limits.rs"]
mod limits;

use std::time::Instant;

use decode::decode_without_lens;
use entropy_lens::fetch;
use entropy_lens::lens::StatSpec;
use entropy_lens::model::{load, LoadOptions, ModelSource, WeightDType};
use entropy_lens::phases::{self, PhaseTimes};
use entropy_lens::runner::{ProfileRequest, Profiler};
use limits::{arg, cpu_name, fma_peak, gemm_rate, read_bandwidth};

const PROMPTS: &str = include_str!("prompts.txt");

/// The model's shape, from its config.
struct Shape {
    layers: usize,
    d: usize,
    vocab: usize,
    /// Parameters of the blocks' products (q, k, v, o, gate, up, down).
    block_params: f64,
    /// Bytes read per decoding step: the blocks' weights, then the unembedding.
    block_bytes: f64,
    unembed_bytes: f64,
}

fn shape(cfg: &serde_json::Value, dtype: WeightDType, file_bytes: f64) -> Shape {
    let get = |k: &str| -> Option<usize> { cfg.get(k)?.as_u64().map(|v| v as usize) };
    let need = |k: &str| get(k).unwrap_or_else(|| panic!("the model's config has no `{k}`"));
    let d = need("hidden_size");
    let layers = need("num_hidden_layers");
    let heads = need("num_attention_heads");
    let kv_heads = get("num_key_value_heads").unwrap_or(heads);
    let head_dim = get("head_dim").unwrap_or(d / heads);
    let ffn = need("intermediate_size");
    let vocab = need("vocab_size");
    let (q, kv) = (heads * head_dim, kv_heads * head_dim);
    let per_block = d * q + 2 * d * kv + q * d + 3 * d * ffn;
    let block_params = (layers * per_block) as f64;
    let unembed_params = (vocab * d) as f64;
    let (block_bytes, unembed_bytes) = match dtype {
        WeightDType::F32 => (4.0 * block_params, 4.0 * unembed_params),
        // The quantized file: its share of the blocks and of the (tied) embedding by parameters.
        _ => {
            let per_param = file_bytes / (block_params + unembed_params);
            (per_param * block_params, per_param * unembed_params)
        }
    };
    Shape {
        layers,
        d,
        vocab,
        block_params,
        block_bytes,
        unembed_bytes,
    }
}

/// One timed repetition: seconds and the phases' sums.
fn timed_run(f: impl FnOnce()) -> (f64, PhaseTimes) {
    phases::take();
    phases::enable(true);
    let t = Instant::now();
    f();
    let seconds = t.elapsed().as_secs_f64();
    phases::enable(false);
    (seconds, phases::take())
}

/// The repetition of median wall time.
fn median_run(mut runs: Vec<(f64, PhaseTimes)>) -> (f64, PhaseTimes) {
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    runs[runs.len() / 2]
}

fn pct(x: f64) -> String {
    format!("{:.0} %", 100.0 * x)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let cases = arg(&args, "--cases").unwrap_or_else(|| "b1x32,b8x32,b32x32".into());
    let reps: usize = arg(&args, "--reps").map_or(3, |r| r.parse().expect("--reps N"));
    let dtype = match arg(&args, "--dtype").as_deref() {
        None | Some("f32") => WeightDType::F32,
        Some("q") => WeightDType::Quantized,
        Some(other) => panic!("--dtype f32 or q, not {other}"),
    };
    let model_path = arg(&args, "--model").map_or_else(
        || {
            fetch::cached_path(&fetch::SMOLLM2)
                .unwrap_or_else(|| fetch::fetch_model(&fetch::SMOLLM2).unwrap())
        },
        std::path::PathBuf::from,
    );
    let threads = rayon::current_num_threads();
    let cpu = cpu_name();
    let isa = fma::kernel().map_or("no AVX2/AVX-512", |(_, _, name)| name);

    eprintln!("measuring the limits ...");
    let bandwidth = read_bandwidth();
    let fma_peak = fma_peak(threads);
    let gemm = gemm_rate();

    let loaded = load(
        &ModelSource::parse(&model_path.to_string_lossy()).unwrap(),
        &LoadOptions::cpu().with_dtype(dtype),
    )
    .unwrap();
    let file_bytes = std::fs::metadata(&model_path).map_or(0.0, |m| m.len() as f64);
    let spec = StatSpec {
        top_k: 0,
        ..StatSpec::default()
    };
    let mut prof = Profiler::new(loaded, spec).unwrap();
    let s = shape(&prof.model.config_json(), dtype, file_bytes);
    let name = prof.model.info().name.clone();

    println!(
        "{name}, {} weights, on {cpu} ({isa}), {threads} threads, {} UTC",
        dtype.as_str(),
        chrono_now()
    );
    println!(
        "limits measured in this run: read bandwidth {bandwidth:.1} GB/s, FMA peak {fma_peak:.0} GFLOP/s, f32 GEMM 2048² {gemm:.0} GFLOP/s"
    );
    println!(
        "per decoding step: blocks' weights {:.0} MB, unembedding {:.0} MB; per token: blocks {:.2} GFLOP, lens {:.2} GFLOP ({} blocks × {} × {} × 2)\n",
        s.block_bytes / 1e6,
        s.unembed_bytes / 1e6,
        2.0 * s.block_params / 1e9,
        lens_flop(&s) / 1e9,
        s.layers,
        s.d,
        s.vocab
    );

    let mut rows = Vec::new();
    for case in cases.split(',') {
        let (b, tokens) = parse_case(case);
        let prompts: Vec<String> = PROMPTS
            .lines()
            .cycle()
            .take(b)
            .map(str::to_string)
            .collect();
        prof.set_batch_size(b).unwrap();
        let reqs: Vec<ProfileRequest> = prompts
            .iter()
            .map(|p| {
                ProfileRequest::new(p.clone())
                    .generate(tokens)
                    .ignore_eos(true)
            })
            .collect();
        eprintln!("{case} ...");
        let warm: Vec<ProfileRequest> = reqs.iter().map(|r| r.clone().generate(4)).collect();
        prof.run_batch(&warm).unwrap();
        let lens_runs: Vec<(f64, PhaseTimes)> = (0..reps)
            .map(|_| {
                timed_run(|| {
                    let profiles = prof.run_batch(&reqs).unwrap();
                    let n: usize = profiles.iter().map(|p| p.generated_ids.len()).sum();
                    assert_eq!(n, b * tokens);
                })
            })
            .collect();
        let plain_runs: Vec<(f64, PhaseTimes)> = (0..reps)
            .map(|_| {
                timed_run(|| {
                    decode_without_lens(&mut prof, &reqs, tokens);
                })
            })
            .collect();
        rows.push((
            case.to_string(),
            b,
            tokens,
            median_run(lens_runs),
            median_run(plain_runs),
        ));
    }

    println!("| case | with the lens (tok/s) | no lens (tok/s) | same-run limit (tok/s), bound by | % of the limit |");
    println!("|---|---|---|---|---|");
    for (case, b, tokens, (wall, _), (plain, _)) in &rows {
        let n = (b * tokens) as f64;
        let per_step_mem = (s.block_bytes + s.unembed_bytes) / (bandwidth * 1e9);
        let per_token_compute = (2.0 * s.block_params + lens_flop(&s)) / (gemm * 1e9);
        let mem_token = per_step_mem / *b as f64;
        let limit = 1.0 / mem_token.max(per_token_compute);
        let by = if mem_token > per_token_compute {
            "memory"
        } else {
            "compute"
        };
        println!(
            "| {case} | {:.1} | {:.1} | {limit:.0}, {by} | {} |",
            n / wall,
            n / plain,
            pct(n / wall / limit)
        );
    }
    println!();
    println!(
        "Time per generated token (ms), the lens run split by phase, each against its bound:\n"
    );
    println!("| case | total | decoder | of which attention | products | its bound | % | lens product | its bound | % (GFLOP/s) | statistics | other | no lens: total | its bound | % |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (case, b, tokens, (wall, t), (plain, _)) in &rows {
        let n = (b * tokens) as f64;
        let ms = |secs: f64| 1e3 * secs / n;
        let total = ms(*wall);
        let dec = ms(t.decoder.as_secs_f64());
        let attn = ms(t.attention.as_secs_f64());
        let products = ms(t.block_products.as_secs_f64());
        let prod = ms(t.lens_product.as_secs_f64());
        let stats = ms(t.lens_stats.as_secs_f64());
        let other = total - dec - prod - stats;
        let bf = *b as f64;
        let dec_bound = 1e3
            * (s.block_bytes / (bandwidth * 1e9) / bf).max(2.0 * s.block_params / (fma_peak * 1e9));
        let prod_bound = 1e3 * lens_flop(&s) / (fma_peak * 1e9);
        let prod_rate = lens_flop(&s) / (prod / 1e3) / 1e9;
        let plain_total = ms(*plain);
        let plain_bound = 1e3
            * ((s.block_bytes + s.unembed_bytes) / (bandwidth * 1e9) / bf)
                .max((2.0 * s.block_params + 2.0 * (s.d * s.vocab) as f64) / (fma_peak * 1e9));
        println!(
            "| {case} | {total:.2} | {dec:.2} | {attn:.2} | {products:.2} | {dec_bound:.2} | {} | {prod:.2} | {prod_bound:.2} | {} ({prod_rate:.0}) | {stats:.2} | {other:.2} | {plain_total:.2} | {plain_bound:.2} | {} |",
            pct(dec_bound / dec),
            pct(prod_bound / prod),
            pct(plain_bound / plain_total),
        );
    }
    println!("\nmedian of {reps} repetitions (the repetition of median wall time; its phases)");
}

/// The lens product's FLOP per generated token: every block's row through the unembedding.
fn lens_flop(s: &Shape) -> f64 {
    2.0 * (s.layers * s.d * s.vocab) as f64
}

fn parse_case(case: &str) -> (usize, usize) {
    let parsed = case.strip_prefix('b').and_then(|rest| {
        let (b, t) = rest.split_once('x')?;
        Some((b.parse().ok()?, t.parse().ok()?))
    });
    parsed.unwrap_or_else(|| panic!("a case is bBxT (b8x32), not {case}"))
}

/// Now, as `YYYY-MM-DD HH:MM`, without a date crate.
fn chrono_now() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "?".into(), |s| s.trim().to_string())
}
