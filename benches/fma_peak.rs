//! The ceiling of f32 arithmetic on this CPU: fused multiply-adds on registers only (no memory
//! traffic), on 1 to N threads at once, so that a lens rate (FLOP per second of its products) can be
//! read against what the FMA units allow on the same machine, the same day.
//!
//! ```text
//! cargo bench --bench fma_peak [-- --reps 5] [--threads N]
//! ```
//!
//! Each thread runs 12 independent chains of vector FMAs (enough to cover the FMA latency on
//! current x86-64 cores) with AVX-512 (16 lanes) where the CPU has it, else AVX2 + FMA (8 lanes);
//! one FMA counts as 2 FLOP per lane. Prints a Markdown table: threads, median GFLOP/s over the
//! repetitions, the lowest and highest. A shared VM's figure moves from run to run: quote the range.

use std::time::Instant;

/// Independent accumulator chains per thread.
const CHAINS: usize = 12;
/// Rounds of `CHAINS` FMAs per thread and repetition.
const ROUNDS: u64 = 100_000_000;

fn arg(args: &[String], name: &str) -> Option<usize> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1)?.parse().ok()
}

/// One thread's repetition: `ROUNDS` × `CHAINS` vector FMAs; returns a value that depends on every
/// chain, so that none is optimised away.
type Kernel = fn() -> f32;

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
fn kernel() -> Option<(Kernel, usize, &'static str)> {
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps = arg(&args, "--reps").unwrap_or(5).max(1);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let max_threads = arg(&args, "--threads").unwrap_or(cpus).max(1);
    let Some((run, lanes, name)) = kernel() else {
        eprintln!("fma_peak: needs an x86-64 CPU with AVX2 and FMA (or AVX-512); nothing measured");
        return;
    };
    let flop_per_thread = ROUNDS as f64 * CHAINS as f64 * lanes as f64 * 2.0;
    println!(
        "f32 FMA on registers only, {name} ({lanes} lanes), {CHAINS} chains per thread, {reps} repetitions, {cpus} CPUs\n"
    );
    println!("| threads | GFLOP/s (median) | lowest | highest |");
    println!("|---|---|---|---|");
    for threads in 1..=max_threads {
        let mut rates = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t0 = Instant::now();
            let sums: Vec<f32> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads).map(|_| s.spawn(run)).collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let seconds = t0.elapsed().as_secs_f64();
            assert!(sums.iter().all(|x| x.is_finite()), "{sums:?}");
            rates.push(threads as f64 * flop_per_thread / seconds / 1e9);
        }
        let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = rates.iter().copied().fold(0.0, f64::max);
        println!("| {threads} | {:.0} | {lo:.0} | {hi:.0} |", median(rates));
    }
}
