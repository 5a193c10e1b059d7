//! Keeping large buffers in the process between decoding steps.
//!
//! Every decoding step allocates and frees a few buffers of tens of megabytes: a chunk of logits
//! (up to 64 MiB), `gemm`'s packed operands, the lens rows. glibc serves allocations above its
//! mmap threshold (at most 32 MiB when it adapts it) with a fresh `mmap` and unmaps them on
//! `free`, so each step faulted in and zeroed its buffers page by page again (docs/benchmarks.md:
//! page faults and time of `profile` with and without the setting). Only where the memory comes from
//! changes, never a computed value. (Threads other than the main one keep buffers up to their
//! arena's 64 MiB; larger ones there are still mapped afresh.)

use std::sync::OnceLock;

/// Allocations up to this size come from the heap, whose freed memory is reused (larger ones are
/// rare and long, a one-pass prompt's attention scores: a fresh mapping costs them little).
const MMAP_THRESHOLD: i32 = 256 << 20;
/// Free memory at the top of the heap is returned to the system above this (glibc's own rule of
/// twice the mmap threshold): what the process keeps stays bounded.
const TRIM_THRESHOLD: i32 = 512 << 20;

/// Environment variables through which a user sets glibc's allocator; any of them set means the
/// user's choice stands.
const USER_SETTINGS: [&str; 3] = [
    "GLIBC_TUNABLES",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
];

/// Whether the settings were applied; decided once per process.
static APPLIED: OnceLock<bool> = OnceLock::new();

/// Makes glibc's allocator keep freed buffers of up to 256 MiB for reuse instead of unmapping
/// them, returning free memory at the top of the heap only above 512 MiB. Once per process (the
/// first call, or [`leave_allocator_alone`], decides); [`crate::model::load()`] calls it. The cost:
/// memory freed after a large run may stay with the process. Does nothing where the user set the
/// allocator's thresholds (`GLIBC_TUNABLES`, `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`)
/// or on other C libraries. Returns whether the settings are in effect.
pub fn keep_large_buffers() -> bool {
    *APPLIED.get_or_init(|| !USER_SETTINGS.iter().any(|v| std::env::var_os(v).is_some()) && set())
}

/// Keeps glibc's defaults for this process (e.g. to measure each run's peak memory apart, which
/// buffers kept from an earlier run would inflate). Must come before the first model load;
/// returns false when the settings were already applied.
pub fn leave_allocator_alone() -> bool {
    !*APPLIED.get_or_init(|| false)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set() -> bool {
    // SAFETY: mallopt only changes the allocator's parameters; it is thread-safe in glibc.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set() -> bool {
    let _ = (MMAP_THRESHOLD, TRIM_THRESHOLD);
    false
}

#[cfg(test)]
mod tests {
    /// A freed 48 MiB buffer is reused: allocating it again faults in (almost) no new pages. (Above
    /// glibc's largest adaptive threshold, 32 MiB, so without the setting each one is a fresh
    /// mapping; below 64 MiB, the most a thread's own arena holds: tests run off the main thread.)
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn freed_large_buffers_are_reused() {
        if super::USER_SETTINGS
            .iter()
            .any(|v| std::env::var_os(v).is_some())
        {
            return;
        }
        assert!(super::keep_large_buffers());
        let faults = || {
            // SAFETY: getrusage writes into the struct it is given.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
            usage.ru_minflt
        };
        let touch = || {
            let buf = vec![1u8; 48 << 20];
            std::hint::black_box(&buf);
        };
        touch();
        let before = faults();
        for _ in 0..4 {
            touch();
        }
        // 4 × 12,288 pages if every buffer were mapped afresh.
        let new_faults = faults() - before;
        assert!(
            new_faults < 1_000,
            "{new_faults} page faults for 4 reused buffers"
        );
    }
}
