//! Running a step's work on rayon's own threads.
//!
//! A parallel operation called from a thread outside rayon's pool (the program's main thread, a
//! server's job thread) is handed to the pool and the caller sleeps until it is done: a decoding
//! step of a small model is several hundred such operations, each paying for the hand-off and two
//! wake-ups. Called from one of the pool's threads, the same operation splits its work in place
//! and the other threads steal from it. [`on_pool`] moves a whole step there.

/// Runs `f` on one of rayon's threads (on this one if it is one), the caller waiting for it; the
/// [`crate::phases`] clock follows `f` there when it is on for the caller.
pub fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        return f();
    }
    let timing = crate::phases::enabled();
    rayon::scope(|_| {
        let _clock = PhaseClock::set(timing);
        f()
    })
}

/// The calling thread's phase clock set for a while, and put back when dropped (a panic in
/// between included: the pool thread goes on serving others).
struct PhaseClock {
    before: bool,
}

impl PhaseClock {
    fn set(on: bool) -> Self {
        let before = crate::phases::enabled();
        crate::phases::enable(on);
        Self { before }
    }
}

impl Drop for PhaseClock {
    fn drop(&mut self) {
        crate::phases::enable(self.before);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_on_a_pool_thread_and_returns_what_f_returns() {
        assert!(rayon::current_thread_index().is_none());
        let caller = std::thread::current().id();
        let (index, thread, sum) = on_pool(|| {
            let sum: u64 = {
                use rayon::prelude::*;
                (1..=100u64).into_par_iter().sum()
            };
            (
                rayon::current_thread_index(),
                std::thread::current().id(),
                sum,
            )
        });
        assert!(index.is_some());
        assert_ne!(thread, caller);
        assert_eq!(sum, 5050);
        // Already on the pool: runs in place.
        let nested = on_pool(|| {
            let outer = std::thread::current().id();
            on_pool(|| std::thread::current().id() == outer)
        });
        assert!(nested);
    }
}
