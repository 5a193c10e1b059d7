//! Limits of this machine measured in the bench's own process, shared by `batch_limits` and
//! `products`: the read bandwidth, the FMA peak (through `support/fma.rs`, which both declare as
//! `fma`) and candle's f32 GEMM rate; with the CPU's name and the benches' argument lookup.

use std::time::Instant;

use candle_core::{Device, Tensor};
use rayon::prelude::*;

/// The median; NaN for no values (e.g. no FMA kernel on this CPU), which the tables print as such.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// GB/s of summing 1 GiB of f32 on every rayon thread (median of 5, after a first touch).
pub fn read_bandwidth() -> f64 {
    let data = vec![1.0f32; 1 << 28];
    let bytes = (data.len() * 4) as f64;
    let sum = || -> f32 {
        data.par_chunks(1 << 16)
            .map(|c| {
                // Sixteen independent lanes, so that the sum is not latency-bound.
                let mut acc = [0f32; 16];
                for v in c.chunks_exact(16) {
                    for (a, x) in acc.iter_mut().zip(v) {
                        *a += x;
                    }
                }
                acc.iter().sum::<f32>()
            })
            .sum()
    };
    assert!(sum() > 0.0);
    median(
        (0..5)
            .map(|_| {
                let t = Instant::now();
                let s = std::hint::black_box(sum());
                assert!(s > 0.0);
                bytes / t.elapsed().as_secs_f64() / 1e9
            })
            .collect(),
    )
}

/// GFLOP/s of candle's f32 CPU matmul at 2048² (median of 5, after a warm-up).
pub fn gemm_rate() -> f64 {
    let n = 2048;
    let a = Tensor::randn(0f32, 1.0, (n, n), &Device::Cpu).unwrap();
    let b = Tensor::randn(0f32, 1.0, (n, n), &Device::Cpu).unwrap();
    a.matmul(&b).unwrap();
    median(
        (0..5)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(a.matmul(&b).unwrap());
                2.0 * (n * n * n) as f64 / t.elapsed().as_secs_f64() / 1e9
            })
            .collect(),
    )
}

/// GFLOP/s of the FMA units on `threads` threads: the median of five runs of `fma_peak`'s kernel
/// (NaN without AVX2 or AVX-512).
pub fn fma_peak(threads: usize) -> f64 {
    median((0..5).filter_map(|_| super::fma::rate(threads)).collect())
}

/// The CPU's model name from /proc/cpuinfo ("unknown CPU" elsewhere).
pub fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The value after `name` on the command line.
pub fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}
