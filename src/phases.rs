//! Where a profiling run's time goes: a process-wide clock per phase (the decoder's forward pass,
//! the lens product, the lens statistics), off unless a benchmark turns it on.
//!
//! `cargo bench --bench batch_limits` reads it to split tokens/s into decoder, lens product,
//! statistics and the rest, each against its own bound. The clock is turned on for the calling
//! thread (the one that drives the [`crate::runner::Profiler`]: its parallel work happens inside
//! a phase); off, a phase costs one thread-local read; on, two clock reads per call (a few calls
//! per decoding step, nothing measurable). The sums are the process's: turn the clock on in one
//! thread at a time.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The phases of a profiling step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The model's forward pass (embedding, blocks, the captured residuals).
    Decoder,
    /// The lens product: final norm, translator-free unembedding and soft-cap of every lens row.
    LensProduct,
    /// The lens statistics (entropies, top-p, top-k, KL and target ranks) of those logits.
    LensStats,
    /// Inside the decoder: the attention's core (rotary, the KV cache, scores, softmax and the
    /// weighted values), between the q/k/v projection and the output projection.
    Attention,
    /// Inside the decoder: the blocks' weight products (q/k/v, the output projection, the MLP
    /// with its activation).
    BlockProducts,
}

const PHASES: [Phase; 5] = [
    Phase::Decoder,
    Phase::LensProduct,
    Phase::LensStats,
    Phase::Attention,
    Phase::BlockProducts,
];

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
}
static NANOS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
static CALLS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// Time spent per phase since the clock was last reset.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseTimes {
    pub decoder: Duration,
    pub lens_product: Duration,
    pub lens_stats: Duration,
    /// Part of `decoder`.
    pub attention: Duration,
    /// Part of `decoder`.
    pub block_products: Duration,
    /// Calls per phase, in the order decoder, lens product, statistics, attention, block products.
    pub calls: [u64; 5],
}

/// Turns the clock on or off for the calling thread (the sums are kept either way).
pub fn enable(on: bool) {
    ON.with(|c| c.set(on));
}

/// Whether the clock is on for the calling thread.
pub fn enabled() -> bool {
    ON.with(Cell::get)
}

/// The sums so far, and zeroes them.
pub fn take() -> PhaseTimes {
    let mut nanos = [0u64; 5];
    let mut calls = [0u64; 5];
    for (i, _) in PHASES.iter().enumerate() {
        nanos[i] = NANOS[i].swap(0, Ordering::Relaxed);
        calls[i] = CALLS[i].swap(0, Ordering::Relaxed);
    }
    PhaseTimes {
        decoder: Duration::from_nanos(nanos[0]),
        lens_product: Duration::from_nanos(nanos[1]),
        lens_stats: Duration::from_nanos(nanos[2]),
        attention: Duration::from_nanos(nanos[3]),
        block_products: Duration::from_nanos(nanos[4]),
        calls,
    }
}

/// Runs `f`, adding its wall time to `phase` when the clock is on for this thread.
pub fn timed<T>(phase: Phase, f: impl FnOnce() -> T) -> T {
    if !enabled() {
        return f();
    }
    let t0 = Instant::now();
    let out = f();
    let i = phase as usize;
    NANOS[i].fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    CALLS[i].fetch_add(1, Ordering::Relaxed);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_only_while_on_and_take_resets() {
        // The only test that turns the clock on, so no other test's phases mix in.
        enable(false);
        take();
        timed(Phase::LensStats, || {
            std::thread::sleep(Duration::from_millis(2))
        });
        assert_eq!(take(), PhaseTimes::default());
        enable(true);
        let v = timed(Phase::LensProduct, || {
            std::thread::sleep(Duration::from_millis(3));
            7
        });
        assert_eq!(v, 7);
        timed(Phase::Decoder, || ());
        enable(false);
        let t = take();
        assert!(t.lens_product >= Duration::from_millis(3), "{t:?}");
        assert_eq!(t.lens_stats, Duration::ZERO);
        assert_eq!(t.calls, [1, 1, 0, 0, 0]);
        assert_eq!(take(), PhaseTimes::default());
    }
}
