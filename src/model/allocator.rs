//! Keeping large buffers in the process between decoding steps.
//!
//! Every decoding step allocates and frees a few buffers of tens of megabytes: a chunk of logits
//! (up to 64 MiB), `gemm`'s packed operands, the lens rows. glibc serves allocations above its
//! mmap threshold (at most 32 MiB when it adapts it) with a fresh `mmap` and unmaps them on
//! `free`, so each step faulted in and zeroed its buffers page by page again (docs/benchmarks.md:
//! page faults and time of `profile` with and without the setting). Only where the memory comes
//! from changes, never a computed value.
//!
//! Limits: glibc 2.34 and older refuse a threshold above 32 MiB, and then nothing changes (2.36,
//! on the machines the project is tested on, accepts it); on threads other than the main one,
//! glibc's per-thread heaps hold at most 64 MiB each, so buffers near that size may still be
//! mapped afresh there. `tests/allocator.rs` checks the main thread.

use std::sync::OnceLock;

/// Allocations up to this size come from the heap, whose freed memory is reused (larger ones are
/// rare and long, a one-pass prompt's attention scores: a fresh mapping costs them little).
const MMAP_THRESHOLD: i32 = 256 << 20;
/// Free memory at the top of the heap is returned to the system above this (glibc's own rule of
/// twice the mmap threshold); free memory below a live block stays with the process, as always.
const TRIM_THRESHOLD: i32 = 512 << 20;

/// Environment variables through which a user sets these two thresholds; either set means the
/// user's choice stands.
const USER_VARIABLES: [&str; 2] = ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"];
/// The same two as glibc tunables (`GLIBC_TUNABLES=glibc.malloc.trim_threshold=…:…`).
const USER_TUNABLES: [&str; 2] = ["glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold"];

/// Whether the user set either threshold through the environment.
pub fn user_set_thresholds() -> bool {
    USER_VARIABLES.iter().any(|v| std::env::var_os(v).is_some())
        || std::env::var("GLIBC_TUNABLES")
            .is_ok_and(|t| USER_TUNABLES.iter().any(|name| t.contains(name)))
}

/// Whether the settings were applied; decided once per process.
static APPLIED: OnceLock<bool> = OnceLock::new();

/// Makes glibc's allocator keep freed buffers of up to 256 MiB for reuse instead of unmapping
/// them, returning free memory at the top of the heap only above 512 MiB. Once per process (the
/// first call, or [`leave_allocator_alone`], decides); [`crate::model::load()`] calls it. The cost:
/// memory freed after a large run may stay with the process. Does nothing where the user set
/// either threshold ([`user_set_thresholds`]: `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`
/// or the same in `GLIBC_TUNABLES`), where glibc refuses the values (2.34 and older), or on other
/// C libraries. Returns whether the settings are in effect.
pub fn keep_large_buffers() -> bool {
    *APPLIED.get_or_init(|| !user_set_thresholds() && set())
}

/// Keeps glibc's defaults for this process (e.g. to measure each run's peak memory apart, which
/// buffers kept from an earlier run would inflate). Must come before the first model load;
/// returns false when the settings were already applied.
pub fn leave_allocator_alone() -> bool {
    !*APPLIED.get_or_init(|| false)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set() -> bool {
    // SAFETY: mallopt takes plain integers and only changes the allocator's parameters. glibc
    // documents it as not safe against concurrent calls of itself; this is the process's only
    // call, made once (inside `OnceLock::get_or_init`).
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
