//! The library's `log` records in Python's `logging` (logger `entropy_lens`), or on stderr while
//! the wheel's console script runs the CLI.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::prelude::*;

static TO_STDERR: AtomicBool = AtomicBool::new(false);

struct PythonLogging;

impl log::Log for PythonLogging {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.target().starts_with("entropy_lens")
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let text = record.args().to_string();
        if TO_STDERR.load(Ordering::Relaxed) {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "{text}");
            return;
        }
        let level = match record.level() {
            log::Level::Error => 40,
            log::Level::Warn => 30,
            log::Level::Info => 20,
            log::Level::Debug | log::Level::Trace => 10,
        };
        // A failure to log (interpreter shutting down) is no reason to fail the work.
        let _ = Python::attach(|py| -> PyResult<()> {
            py.import("logging")?
                .call_method1("getLogger", ("entropy_lens",))?
                .call_method1("log", (level, text))?;
            Ok(())
        });
    }

    fn flush(&self) {}
}

static LOGGER: PythonLogging = PythonLogging;

/// Installs the logger (once; a logger another extension installed first stays).
pub fn install() {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

/// From now on records go to stderr, as the binary prints them.
pub fn to_stderr() {
    TO_STDERR.store(true, Ordering::Relaxed);
}
