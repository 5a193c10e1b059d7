//! A long call's link to whoever waits on it: how far it has come, and a flag that asks it to
//! stop. The Python module (and any program that runs the library on a worker thread) polls the
//! status to draw its own progress line and sets the flag on Ctrl-C; the work checks the flag
//! between batches (experiments: after a batch's records are written, so the run resumes) and
//! between generated tokens (profiles, through the runner's `TokenObserver` for `Watch`), and
//! returns [`Error::Interrupted`].

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};

/// Progress and a stop request, shared between the worker and its watcher.
#[derive(Debug, Default)]
pub struct Watch {
    stop: AtomicBool,
    done: AtomicUsize,
    total: AtomicUsize,
    status: Mutex<String>,
}

impl Watch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the work to stop at its next check.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// [`Error::Interrupted`] once a stop was asked for.
    ///
    /// # Errors
    /// [`Error::Interrupted`] with `what` as the message.
    pub fn check(&self, what: &str) -> Result<()> {
        if self.stop_requested() {
            return Err(Error::Interrupted(what.to_string()));
        }
        Ok(())
    }

    /// Items done so far and the total (0 while unknown).
    pub fn counts(&self) -> (usize, usize) {
        (
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        )
    }

    pub fn set_total(&self, total: usize) {
        self.total.store(total, Ordering::Relaxed);
    }

    pub fn set_done(&self, done: usize) {
        self.done.store(done, Ordering::Relaxed);
    }

    pub fn add_done(&self, n: usize) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }

    /// The latest status line (`tasks SmolLM2: 12/36 items (33%), …`), empty before the first.
    pub fn status(&self) -> String {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    pub fn set_status(&self, line: &str) {
        if let Ok(mut s) = self.status.lock() {
            line.clone_into(&mut s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_request_is_seen_by_check() {
        let w = Watch::new();
        w.set_total(3);
        w.add_done(1);
        assert_eq!(w.counts(), (1, 3));
        assert!(w.check("profile").is_ok());
        w.request_stop();
        let e = w.check("profile").unwrap_err();
        assert!(matches!(e, Error::Interrupted(_)), "{e}");
        assert!(e.to_string().contains("profile"), "{e}");
    }
}
