//! Where the library's messages go. Library modules log through the [`log`] facade (`log::info!`
//! for what a user running a command wants to see: a model being loaded, a download being waited
//! for; `log::warn!` for what went wrong but was recovered). The library never chooses where lines
//! go: the binary calls [`log_to_stderr`] at start, a notebook may call it too, and a program
//! that embeds the library installs any `log` backend it likes (`env_logger`, `tracing-log`, …).

use std::io::Write;

/// Writes each record's message, as is, on one line of stderr (the binary's messages have no
/// prefix: they are sentences for the user, not a log file).
struct StderrLines;

impl log::Log for StderrLines {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        // Only this crate's records: dependencies' lines (TLS alerts, tokenizer warnings, HTTP) are
        // not meant for the user of a command, and the command never printed them; their errors
        // reach the user as this crate's typed errors.
        metadata.target().starts_with("entropy_lens")
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            // A stderr that cannot be written (`2>/dev/full`, closed) is no reason to fail the
            // work, nor to panic as `eprintln!` does.
            let _ = writeln!(std::io::stderr(), "{}", record.args());
        }
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

static STDERR_LINES: StderrLines = StderrLines;

/// Sends the library's messages (info and above) to stderr, one line each. Returns `false` when
/// another logger was installed first (that one stays; nothing else changes).
pub fn log_to_stderr() -> bool {
    let installed = log::set_logger(&STDERR_LINES).is_ok();
    if installed {
        log::set_max_level(log::LevelFilter::Info);
    }
    installed
}
