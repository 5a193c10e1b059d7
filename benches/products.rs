//! The products of decoding and of the lens, alone, against this machine's limits measured in
//! the same process: where `batch_limits` says how far a whole run is from its limit, this says
//! how far each kind of product is, without the rest of the step around it.
//!
//! ```text
//! cargo bench --bench products -- [--reps 7] [--json FILE]
//! scripts/bench-products-vs-torch.sh     # the same shapes through PyTorch, in the same sitting
//! ```
//!
//! Shapes are SmolLM2-135M's (d = 576, 30 blocks), random f32 weights, every product through
//! `Linear::forward`, the call the decoder and the lens make:
//!
//! - `decoder mM`: one decoding step's weight products for M rows (a batch of M): per block
//!   q/k/v stacked (960 × 576), o (576 × 576), gate/up stacked (3,072 × 576), down (576 × 1,536),
//!   425 MB of distinct weights. Bound: the weights read once at the measured bandwidth, or
//!   their FLOP at the FMA peak, whichever is larger.
//! - `lens mM`: the unembedding (49,152 × 576) of M rows (batch × 30 blocks). Bound: the
//!   unembedding read once at the measured bandwidth, or its FLOP at the FMA peak, whichever is
//!   larger.
//!
//! Limits, each the median of five on every thread: read bandwidth, FMA peak (as `fma_peak`), and
//! candle's f32 GEMM at 2048².
//! Each case: the median of `--reps` repetitions after a warm-up. `--json FILE` also writes one
//! JSON object per case for the comparison script.

#[path = "support/fma.rs"]
mod fma;
#[path = "support/limits.rs"]
mod limits;

use std::io::Write;
use std::time::Instant;

use candle_core::{Device, Tensor};
use entropy_lens::model::weights::Linear;
use limits::{arg, cpu_name, fma_peak, gemm_rate, median, read_bandwidth};

const D: usize = 576;
const LAYERS: usize = 30;
const VOCAB: usize = 49_152;
/// (out, in) of each block's products, as the decoder stacks them.
const BLOCK_SHAPES: [(usize, usize); 4] = [(960, D), (D, D), (3072, D), (D, 1536)];

fn layer(out: usize, inner: usize) -> Linear {
    let w = Tensor::randn(0f32, 0.05, (out, inner), &Device::Cpu).expect("weights");
    Linear::dense(w, None)
}

/// Median seconds of `reps` runs of `f` after one warm-up.
fn time(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize = arg(&args, "--reps").map_or(7, |r| r.parse().expect("--reps N"));
    let json = arg(&args, "--json");
    let threads = rayon::current_num_threads();
    let cpu = cpu_name();

    eprintln!("measuring the limits ...");
    let bandwidth = read_bandwidth();
    let fma_peak = fma_peak(threads);
    let gemm = gemm_rate();

    eprintln!("building the weights ...");
    let blocks: Vec<Vec<Linear>> = (0..LAYERS)
        .map(|_| BLOCK_SHAPES.iter().map(|&(o, i)| layer(o, i)).collect())
        .collect();
    let unembedding = layer(VOCAB, D);
    let block_params: usize = LAYERS * BLOCK_SHAPES.iter().map(|&(o, i)| o * i).sum::<usize>();
    let block_bytes = 4.0 * block_params as f64;

    let mut rows = Vec::new();
    for m in [1usize, 8, 32] {
        let x576 = Tensor::randn(0f32, 1.0, (m, D), &Device::Cpu).expect("x");
        let x1536 = Tensor::randn(0f32, 1.0, (m, 1536), &Device::Cpu).expect("x");
        let secs = time(reps, || {
            for block in &blocks {
                for (l, &(_, inner)) in block.iter().zip(&BLOCK_SHAPES) {
                    let x = if inner == D { &x576 } else { &x1536 };
                    std::hint::black_box(l.forward(x).expect("product"));
                }
            }
        });
        let flop = 2.0 * (m * block_params) as f64;
        let bound = (block_bytes / (bandwidth * 1e9)).max(flop / (fma_peak * 1e9));
        rows.push((format!("decoder m{m}"), secs, flop, block_bytes, bound));
    }
    for m in [30usize, 240, 960] {
        let x = Tensor::randn(0f32, 1.0, (m, D), &Device::Cpu).expect("x");
        let secs = time(reps, || {
            std::hint::black_box(unembedding.forward(&x).expect("product"));
        });
        let flop = 2.0 * (m * D * VOCAB) as f64;
        let bytes = 4.0 * (VOCAB * D) as f64;
        let bound = (bytes / (bandwidth * 1e9)).max(flop / (fma_peak * 1e9));
        rows.push((format!("lens m{m}"), secs, flop, bytes, bound));
    }

    println!(
        "{cpu}, {threads} threads; read bandwidth {bandwidth:.1} GB/s, FMA peak {fma_peak:.0} GFLOP/s, \
         candle's f32 GEMM at 2048² {gemm:.0} GFLOP/s\n"
    );
    println!("| case | ms | GB/s of weights | GFLOP/s | bound (ms) | % of the bound |");
    println!("|---|---|---|---|---|---|");
    for (case, secs, flop, bytes, bound) in &rows {
        println!(
            "| {case} | {:.2} | {:.1} | {:.0} | {:.2} | {:.0} % |",
            secs * 1e3,
            bytes / secs / 1e9,
            flop / secs / 1e9,
            bound * 1e3,
            100.0 * bound / secs
        );
    }
    if let Some(path) = json {
        let mut f = std::fs::File::create(&path).expect("--json FILE");
        for (case, secs, flop, bytes, bound) in &rows {
            let line = serde_json::json!({
                "case": case, "ms": secs * 1e3, "flop": flop, "bytes": bytes,
                "bound_ms": bound * 1e3, "bandwidth_gbs": bandwidth, "fma_peak_gflops": fma_peak, "gemm_gflops": gemm,
                "threads": threads, "cpu": cpu,
            });
            writeln!(f, "{line}").expect("write");
        }
    }
}
