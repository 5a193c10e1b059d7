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

#[path = "support/fma.rs"]
mod fma;

use fma::{kernel, CHAINS};

fn arg(args: &[String], name: &str) -> Option<usize> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1)?.parse().ok()
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
    let Some((_, lanes, name)) = kernel() else {
        eprintln!("fma_peak: needs an x86-64 CPU with AVX2 and FMA (or AVX-512); nothing measured");
        return;
    };
    println!(
        "f32 FMA on registers only, {name} ({lanes} lanes), {CHAINS} chains per thread, {reps} repetitions, {cpus} CPUs\n"
    );
    println!("| threads | GFLOP/s (median) | lowest | highest |");
    println!("|---|---|---|---|");
    for threads in 1..=max_threads {
        let rates: Vec<f64> = (0..reps)
            .map(|_| fma::rate(threads).expect("the kernel was found above"))
            .collect();
        let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = rates.iter().copied().fold(0.0, f64::max);
        println!("| {threads} | {:.0} | {lo:.0} | {hi:.0} |", median(rates));
    }
}
