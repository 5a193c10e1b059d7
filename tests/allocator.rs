//! `model::allocator` on the main thread (glibc's main heap, where a decoding loop allocates):
//! under glibc's defaults a 48 MiB buffer is a fresh mapping (above the 32 MiB its adaptive
//! threshold reaches), after `keep_large_buffers` it comes from the heap and, freed and asked for
//! again, faults in almost no new pages. Its own `main` (no test harness), so the process has
//! one thread and one heap.

#[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
fn main() {
    use entropy_lens::model::allocator;

    const SIZE: usize = 48 << 20;
    if allocator::user_set_thresholds() {
        println!("skipped: the environment sets glibc's malloc thresholds");
        return;
    }
    // SAFETY: both read the allocator's or the process's counters into plain structs.
    let mapped_bytes = || unsafe { libc::mallinfo2() }.hblkhd;
    let faults = || {
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        usage.ru_minflt
    };
    // Allocates and writes a buffer; returns the bytes glibc had mapped directly meanwhile.
    let touch = || {
        let buf = std::hint::black_box(vec![1u8; SIZE]);
        let mapped = mapped_bytes();
        drop(buf);
        mapped
    };

    // The control: glibc's defaults map it afresh (else this test could not tell).
    assert!(
        touch() >= SIZE,
        "under glibc's defaults a 48 MiB buffer should be mmapped"
    );

    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) }
        .to_string_lossy()
        .into_owned();
    if !allocator::keep_large_buffers() {
        let minor: u32 = version
            .split('.')
            .nth(1)
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        assert!(
            minor < 36,
            "glibc {version} refused the thresholds (it accepts them from 2.36 at least)"
        );
        println!("skipped: glibc {version} refuses a 256 MiB mmap threshold");
        return;
    }
    assert!(
        !allocator::leave_allocator_alone(),
        "once applied, the settings stay"
    );
    assert!(
        touch() < SIZE,
        "glibc {version}: still mmapped after the setting"
    );
    let before = faults();
    for _ in 0..4 {
        assert!(touch() < SIZE);
    }
    // 4 × 12,288 pages if each buffer were mapped afresh.
    let new_faults = faults() - before;
    assert!(
        new_faults < 1_000,
        "{new_faults} page faults for 4 reused 48 MiB buffers"
    );
    println!("ok: glibc {version}, 4 reused 48 MiB buffers, {new_faults} page faults");
}

#[cfg(not(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64")))]
fn main() {
    println!("skipped: glibc on 64-bit Linux only");
}
