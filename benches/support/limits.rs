//! Limits of this machine measured in the bench's own process, shared by `batch_limits` and
//! `products`: the read bandwidth and candle's f32 GEMM rate.

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
