//! `entropy-lens`: logit-lens entropy profiles and the paper's experiments from the command line.
//! Parses the arguments and dispatches to [`entropy_lens::cli`].

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use entropy_lens::cli::run_main;

/// Whether descriptor 1 was closed when the process started, recorded before the Rust runtime
/// reopens closed standard descriptors on `/dev/null` (after which a closed stdout and
/// `>/dev/null` look alike).
static STDOUT_CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

/// Runs from the executable's constructor table, before `main` and the runtime's setup.
#[cfg(any(target_os = "linux", target_os = "macos"))]
#[used]
#[cfg_attr(target_os = "linux", link_section = ".init_array")]
#[cfg_attr(target_os = "macos", link_section = "__DATA,__mod_init_func")]
static RECORD_STDOUT_STATE: extern "C" fn() = record_stdout_state;

#[cfg(any(target_os = "linux", target_os = "macos"))]
extern "C" fn record_stdout_state() {
    // SAFETY: F_GETFD only reads the descriptor's flags; -1 (EBADF) means it is not open.
    let closed = unsafe { libc::fcntl(1, libc::F_GETFD) } == -1;
    STDOUT_CLOSED_AT_START.store(closed, Ordering::Relaxed);
}

fn main() -> ExitCode {
    // candle attaches a backtrace to its errors when RUST_BACKTRACE is set, and it would print
    // inside the `error:` line; panics keep theirs (RUST_LIB_BACKTRACE only governs library
    // captures). Set before any thread starts.
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        std::env::set_var("RUST_LIB_BACKTRACE", "0");
    }
    // The library's messages (a model being loaded, a download being waited for) go to stderr.
    entropy_lens::logging::log_to_stderr();
    ExitCode::from(run_main(
        std::env::args_os(),
        STDOUT_CLOSED_AT_START.load(Ordering::Relaxed),
    ))
}
