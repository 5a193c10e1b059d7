//! The FMA units' ceiling, shared by `fma_peak` and `batch_limits`: independent chains of vector
//! fused multiply-adds on registers only (no memory traffic), one repetition per thread.

use std::time::Instant;

/// Independent accumulator chains per thread.
pub const CHAINS: usize = 12;
/// Rounds of `CHAINS` FMAs per thread and repetition.
const ROUNDS: u64 = 100_000_000;

/// One thread's repetition: `ROUNDS` × `CHAINS` vector FMAs; returns a value that depends on every
/// chain, so that none is optimised away.
pub type Kernel = fn() -> f32;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn chains_avx512() -> f32 {
    use std::arch::x86_64::*;
    let mul = _mm512_set1_ps(0.999_999);
    let add = _mm512_set1_ps(1e-7);
    let mut acc = [_mm512_setzero_ps(); CHAINS];
    for (i, a) in acc.iter_mut().enumerate() {
        *a = _mm512_set1_ps(i as f32);
    }
    for _ in 0..ROUNDS {
        for a in acc.iter_mut() {
            *a = _mm512_fmadd_ps(*a, mul, add);
        }
    }
    acc.iter().map(|&a| _mm512_reduce_add_ps(a)).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn chains_avx2() -> f32 {
    use std::arch::x86_64::*;
    let mul = _mm256_set1_ps(0.999_999);
    let add = _mm256_set1_ps(1e-7);
    let mut acc = [_mm256_setzero_ps(); CHAINS];
    for (i, a) in acc.iter_mut().enumerate() {
        *a = _mm256_set1_ps(i as f32);
    }
    for _ in 0..ROUNDS {
        for a in acc.iter_mut() {
            *a = _mm256_fmadd_ps(*a, mul, add);
        }
    }
    let mut lanes = [0f32; 8];
    acc.iter()
        .map(|&a| {
            _mm256_storeu_ps(lanes.as_mut_ptr(), a);
            lanes.iter().sum::<f32>()
        })
        .sum()
}

/// The widest kernel this CPU runs, with its lanes and name.
pub fn kernel() -> Option<(Kernel, usize, &'static str)> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F.
            return Some((|| unsafe { chains_avx512() }, 16, "AVX-512"));
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA.
            return Some((|| unsafe { chains_avx2() }, 8, "AVX2 + FMA"));
        }
    }
    None
}

/// GFLOP/s of `threads` threads each running one repetition at once (None: no AVX2/AVX-512).
pub fn rate(threads: usize) -> Option<f64> {
    let (run, lanes, _) = kernel()?;
    let flop_per_thread = ROUNDS as f64 * CHAINS as f64 * lanes as f64 * 2.0;
    let t0 = Instant::now();
    let sums: Vec<f32> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(run)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let seconds = t0.elapsed().as_secs_f64();
    assert!(sums.iter().all(|x| x.is_finite()), "{sums:?}");
    Some(threads as f64 * flop_per_thread / seconds / 1e9)
}
