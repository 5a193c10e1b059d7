//! Long calls from Python: the work runs on a worker thread with the GIL released while the
//! calling thread waits, checks for Ctrl-C every few milliseconds and reports progress.
//!
//! On `KeyboardInterrupt` the worker is asked to stop through its [`Watch`] (it stops between
//! tokens or after a batch's records are written) and the call raises once it has; a panic in the
//! worker becomes a `RuntimeError`, never an abort of the interpreter.

use std::sync::Arc;
use std::time::{Duration, Instant};

use entropy_lens::watch::Watch;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::to_py_err;

const POLL: Duration = Duration::from_millis(20);
const REPORT_EVERY: Duration = Duration::from_millis(500);

/// Runs `work` on a worker thread, returning its result; `progress(done, total, status)` (a Python
/// callable, optional) is called from this thread about twice a second and once at the end.
pub fn run_watched<T: Send>(
    py: Python<'_>,
    watch: &Arc<Watch>,
    progress: Option<&Bound<'_, PyAny>>,
    work: impl FnOnce(&Watch) -> entropy_lens::Result<T> + Send,
) -> PyResult<T> {
    let mut interrupted: Option<PyErr> = None;
    let mut last_report = Instant::now();
    let outcome = std::thread::scope(|scope| {
        let w = Arc::clone(watch);
        let worker = scope.spawn(move || work(&w));
        while !worker.is_finished() {
            py.detach(|| std::thread::sleep(POLL));
            if interrupted.is_some() {
                continue;
            }
            // Ctrl-C, or an exception raised by the progress callback: the worker stops at its
            // next check and the call raises that exception once it has.
            let mut failed = py.check_signals().err();
            if let (Some(cb), None) = (progress, &failed) {
                if last_report.elapsed() >= REPORT_EVERY {
                    last_report = Instant::now();
                    failed = report(cb, watch).err();
                }
            }
            if let Some(e) = failed {
                watch.request_stop();
                interrupted = Some(e);
            }
        }
        worker.join()
    });
    match outcome {
        Err(panic) => Err(PyRuntimeError::new_err(format!(
            "internal error in entropy-lens (please report it): {}",
            panic_text(&panic)
        ))),
        // Python's own exception (KeyboardInterrupt on Ctrl-C), whatever the worker returned.
        Ok(_) if interrupted.is_some() => Err(interrupted
            .take()
            .unwrap_or_else(|| PyRuntimeError::new_err("interrupted"))),
        Ok(Ok(value)) => {
            if let Some(cb) = progress {
                report(cb, watch)?;
            }
            Ok(value)
        }
        Ok(Err(e)) => Err(to_py_err(e)),
    }
}

fn report(cb: &Bound<'_, PyAny>, watch: &Watch) -> PyResult<()> {
    let (done, total) = watch.counts();
    cb.call1((done, total, watch.status()))?;
    Ok(())
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}
