//! A classroom on one laptop: simulated students hammer `entropy-lens explore` over loopback HTTP,
//! each sending requests one after another as the page does (all prompt positions measured, the
//! profile streamed back), then the same requests run through `Profiler::run_batch` at batch 8 in
//! the same process — the batched `profile` baseline.
//!
//! ```text
//! cargo bench --bench explorer_load -- [--students 30] [--requests 5] [--prompt-tokens 20]
//!     [--generate 16] [--max-batch 16] [--dtype q|f32] [--model FILE] [--last-only]
//! ```
//!
//! `--last-only` measures the last prompt position only (`"all_positions": false`), the work of the
//! throughput bench's `profile` figures. Prints a Markdown table: requests answered by status, p50/p95/max latency, aggregate generated
//! tokens/s and measured positions/s (each position: the lens at every block), the process's peak
//! resident memory, and the baseline's rates with the ratio.

#[path = "../tests/common/http.rs"]
mod http;

use std::net::SocketAddr;
use std::time::Instant;

use entropy_lens::explore::{stat_spec, ExploreConfig, Explorer, Limits};
use entropy_lens::model::{load, LoadOptions, ModelSource, WeightDType};
use entropy_lens::runner::{prompt_token_ids, ProfileRequest, Profiler};

fn peak_rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// Student `s`'s prompt, cut to exactly `n` tokens of `tok`.
fn prompt(profiler: &Profiler, s: usize, n: usize) -> String {
    const TEXT: &str = "Once upon a time, in a small village by the sea, there lived a curious girl who loved to collect shells and tell stories to her friends about the strange creatures of the deep ocean and the ships that sailed past the lighthouse every night.";
    let words: Vec<&str> = TEXT.split(' ').collect();
    // Each student starts at another word, so the prompts differ.
    let mut text = String::new();
    for w in words.iter().cycle().skip(s % words.len()) {
        let next = if text.is_empty() {
            w.to_string()
        } else {
            format!("{text} {w}")
        };
        let ids =
            prompt_token_ids(&profiler.tokenizer, &ProfileRequest::new(next.clone())).unwrap();
        if ids.len() > n {
            break;
        }
        text = next;
    }
    text
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let students: usize = arg(&args, "--students", 30);
    let per_student: usize = arg(&args, "--requests", 5);
    let prompt_tokens: usize = arg(&args, "--prompt-tokens", 20);
    let generate: usize = arg(&args, "--generate", 16);
    let max_batch: usize = arg(&args, "--max-batch", 16);
    let all_positions = !args.iter().any(|a| a == "--last-only");
    let dtype: Option<WeightDType> = args
        .iter()
        .position(|a| a == "--dtype")
        .and_then(|i| args.get(i + 1))
        .map(|d| d.parse().unwrap());
    let model: String = arg(
        &args,
        "--model",
        entropy_lens::fetch::fetch_model(&entropy_lens::fetch::SMOLLM2)
            .unwrap()
            .display()
            .to_string(),
    );
    let load_opts = LoadOptions {
        dtype,
        ..LoadOptions::cpu()
    };
    let mut baseline = Profiler::new(
        load(&ModelSource::parse(&model).unwrap(), &load_opts).unwrap(),
        stat_spec(),
    )
    .unwrap();
    let prompts: Vec<String> = (0..students)
        .map(|s| prompt(&baseline, s, prompt_tokens))
        .collect();

    // The classroom.
    let explorer = Explorer::start(ExploreConfig {
        models: vec![model.clone()],
        port: 0,
        dtype,
        limits: Limits {
            max_batch,
            ..Limits::default()
        },
        ..Default::default()
    })
    .unwrap();
    let addr: SocketAddr = explorer.addr();
    let t0 = Instant::now();
    let results: Vec<(u16, f64, usize, usize)> = std::thread::scope(|scope| {
        let handles: Vec<_> = prompts
            .iter()
            .map(|p| {
                scope.spawn(move || {
                    let body = serde_json::json!({
                        "prompt": p, "generate": generate, "ignore_eos": true,
                        "all_positions": all_positions
                    })
                    .to_string();
                    (0..per_student)
                        .map(|_| {
                            let t = Instant::now();
                            let (status, stream) = http::http(
                                addr,
                                "POST",
                                "/api/profile",
                                &[("Content-Type", "application/json")],
                                body.as_bytes(),
                            );
                            let latency = t.elapsed().as_secs_f64();
                            let (generated, positions) = stream
                                .split("\n\n")
                                .find_map(|b| b.strip_prefix("event: result\ndata: "))
                                .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                                .map(|r| {
                                    (
                                        r["profile"]["generated_ids"]
                                            .as_array()
                                            .map_or(0, Vec::len),
                                        r["profile"]["positions"].as_array().map_or(0, Vec::len),
                                    )
                                })
                                .unwrap_or((0, 0));
                            let status = if status == 200 && generated == 0 {
                                500
                            } else {
                                status
                            };
                            (status, latency, generated, positions)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let wall = t0.elapsed().as_secs_f64();
    let peak = peak_rss_mib();
    explorer.stop();

    let ok: Vec<&(u16, f64, usize, usize)> = results.iter().filter(|r| r.0 == 200).collect();
    let busy = results.iter().filter(|r| r.0 == 429).count();
    let failed = results.len() - ok.len() - busy;
    let mut lat: Vec<f64> = ok.iter().map(|r| r.1).collect();
    lat.sort_by(f64::total_cmp);
    let gen_tokens: usize = ok.iter().map(|r| r.2).sum();
    let positions: usize = ok.iter().map(|r| r.3).sum();

    // The baseline: the same requests, batch 8, no HTTP (what `profile --batch-size 8` runs).
    baseline.set_batch_size(8).unwrap();
    let reqs: Vec<ProfileRequest> = prompts
        .iter()
        .map(|p| {
            ProfileRequest::new(p.clone())
                .generate(generate)
                .ignore_eos(true)
                .all_positions(all_positions)
        })
        .collect();
    baseline.run_batch(&reqs[..8.min(reqs.len())]).unwrap(); // warm-up
    let t1 = Instant::now();
    let done = baseline.run_batch(&reqs).unwrap();
    let base_wall = t1.elapsed().as_secs_f64();
    let base_gen: usize = done.iter().map(|p| p.generated_ids.len()).sum();
    let base_pos: usize = done.iter().map(|p| p.positions.len()).sum();

    let gen_rate = gen_tokens as f64 / wall;
    let pos_rate = positions as f64 / wall;
    let base_gen_rate = base_gen as f64 / base_wall;
    let base_pos_rate = base_pos as f64 / base_wall;
    println!(
        "{students} students × {per_student} requests ({prompt_tokens}-token prompts, {generate} generated, {}), {}, max batch {max_batch}, {} rayon threads",
        if all_positions {
            "every prompt position measured"
        } else {
            "the last prompt position measured"
        },
        dtype.map_or("quantized as stored".to_string(), |d| format!("{d:?}")),
        rayon::current_num_threads()
    );
    println!();
    println!("| | explorer under load | `profile` batch 8, same requests | explorer ÷ profile |");
    println!("|---|---|---|---|");
    println!(
        "| requests | {} answered 200, {busy} × 429, {failed} other | {} | |",
        ok.len(),
        done.len()
    );
    println!(
        "| latency p50 / p95 / max (s) | {:.2} / {:.2} / {:.2} | | |",
        percentile(&lat, 0.5),
        percentile(&lat, 0.95),
        lat.last().copied().unwrap_or(f64::NAN)
    );
    println!("| wall time (s) | {wall:.1} | {base_wall:.1} | |");
    println!(
        "| generated tokens/s | {gen_rate:.1} | {base_gen_rate:.1} | {:.2} |",
        gen_rate / base_gen_rate
    );
    println!(
        "| measured positions/s (lens at all blocks) | {pos_rate:.1} | {base_pos_rate:.1} | {:.2} |",
        pos_rate / base_pos_rate
    );
    println!("| peak resident memory (MiB, whole process) | {peak:.0} | | |");
    if failed > 0 {
        std::process::exit(1);
    }
}
