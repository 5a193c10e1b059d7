//! Long prompts (issue 10): time and peak memory of the last-position profile of a prompt near the
//! model's context, and of the all-position lens as the prompt grows (its memory must stay flat).
//! The baseline, in the same process: the same prompt in one pass (no prefill chunks), at a length
//! where one pass still fits in memory.
//!
//! `cargo bench --bench long_prompt` (SmolLM2: 7,000 tokens; `-- --gemma` adds Gemma-3-270M at
//! 32,000 tokens; `-- --quick` shortens every length fourfold). Prints a Markdown table;
//! docs/benchmarks.md records the figures.

use std::time::Instant;

use entropy_lens::fetch;
use entropy_lens::lens::StatSpec;
use entropy_lens::model::{load, LoadOptions, ModelSource};
use entropy_lens::runner::{ProfileRequest, Profiler};

const TEXT: &str = "Once upon a time, there was a little girl named Lily. She loved to play outside in \
the park with her friends. One day, she found a shiny red ball under a big tree. \"Look!\" she said to her \
friend Tom. \"Can we play with it?\" Tom smiled and nodded. They played all afternoon until the sun went \
down, and then they walked home together, talking about the birds, the clouds and the little dog that had \
followed them across the bridge. ";

/// Peak resident memory of this process in MiB since the last reset (Linux).
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_string();
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// `n` token ids of repeated story text, BOS first.
fn prompt_ids(p: &Profiler, n: usize) -> Vec<u32> {
    let mut ids = p.tokenizer.encode(TEXT, true).unwrap();
    let more = p.tokenizer.encode(TEXT, false).unwrap();
    while ids.len() < n {
        ids.extend(&more);
    }
    ids.truncate(n);
    ids
}

struct Row {
    model: String,
    what: String,
    tokens: usize,
    seconds: f64,
    peak_mib: f64,
}

fn measure(p: &mut Profiler, what: &str, n: usize, all_positions: bool, chunk: usize) -> Row {
    p.model.set_prefill_chunk(chunk).unwrap();
    let mut req = ProfileRequest::new("long prompt").all_positions(all_positions);
    req.token_ids = Some(prompt_ids(p, n));
    reset_peak_rss();
    let t = Instant::now();
    let profile = p.run(&req).unwrap();
    let seconds = t.elapsed().as_secs_f64();
    assert_eq!(profile.len(), if all_positions { n } else { 1 });
    let row = Row {
        model: p.model.info().name.clone(),
        what: what.into(),
        tokens: n,
        seconds,
        peak_mib: peak_rss_mib(),
    };
    eprintln!(
        "{} {what} {n}: {seconds:.1} s, {:.0} MiB",
        row.model, row.peak_mib
    );
    row
}

fn main() {
    // Peak memory is measured per run, reset between runs of one process: freed buffers kept for
    // reuse by an earlier run would count in a later one's peak.
    entropy_lens::model::allocator::leave_allocator_alone();
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let gemma = args.iter().any(|a| a == "--gemma");
    let scale = |n: usize| if quick { n / 4 } else { n };
    let spec = StatSpec::default();
    let mut rows = Vec::new();

    let smol = fetch::fetch_model(&fetch::SMOLLM2).unwrap();
    let mut p = Profiler::new(
        load(&ModelSource::Gguf(smol), &LoadOptions::cpu()).unwrap(),
        spec.clone(),
    )
    .unwrap();
    let chunk = entropy_lens::model::DEFAULT_PREFILL_CHUNK;
    // Baseline and chunked at a length one pass can still hold, then the long prompt.
    rows.push(measure(
        &mut p,
        "last position, one pass",
        scale(2000),
        false,
        usize::MAX,
    ));
    rows.push(measure(
        &mut p,
        "last position, chunked",
        scale(2000),
        false,
        chunk,
    ));
    rows.push(measure(
        &mut p,
        "last position, chunked",
        scale(7000),
        false,
        chunk,
    ));
    // The all-position lens streams chunk by chunk: memory flat as the prompt grows.
    rows.push(measure(
        &mut p,
        "all positions, chunked",
        scale(1000),
        true,
        chunk,
    ));
    rows.push(measure(
        &mut p,
        "all positions, chunked",
        scale(4000),
        true,
        chunk,
    ));
    drop(p);

    if gemma {
        let path = fetch::fetch_model(&fetch::GEMMA3).unwrap();
        let mut p = Profiler::new(
            load(&ModelSource::Gguf(path), &LoadOptions::cpu()).unwrap(),
            spec,
        )
        .unwrap();
        rows.push(measure(
            &mut p,
            "last position, chunked",
            scale(32000),
            false,
            chunk,
        ));
    }

    println!("| model | run | prompt tokens | time (s) | peak RSS (MiB) |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.1} | {:.0} |",
            r.model, r.what, r.tokens, r.seconds, r.peak_mib
        );
    }
    let (one, chunked) = (&rows[0], &rows[1]);
    println!(
        "\nchunked / one pass at {} tokens: time {:.2}×, peak memory {:.2}×",
        one.tokens,
        chunked.seconds / one.seconds,
        chunked.peak_mib / one.peak_mib
    );
    println!(
        "all positions, {} → {} tokens: peak memory {:.2}×",
        rows[3].tokens,
        rows[4].tokens,
        rows[4].peak_mib / rows[3].peak_mib
    );
}
