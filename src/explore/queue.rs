//! One bounded queue and one worker thread per model: requests wait in the queue, and the worker
//! takes every waiting request that shares the first one's lens and skipped blocks (up to
//! [`Limits::max_batch`]) and runs them as one left-padded batch. A request that arrives while a
//! batch runs joins the **next** batch (a batch's KV cache is laid out for its own rows, so rows do
//! not join at a step boundary). Requests whose page went away are dropped from the queue, and
//! stop generating at the next step when they are already running.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tokio::sync::mpsc;

use super::Limits;
use crate::lens::LensKind;
use crate::profile::EntropyProfile;
use crate::runner::{ProfileRequest, Profiler, TokenObserver};

/// What a waiting page hears about its request.
#[derive(Debug)]
pub enum Event {
    /// The request started, in a batch of `batch` requests.
    Started { batch: usize },
    /// `done` of at most `total` tokens are generated.
    Token { done: usize, total: usize },
    /// The profile.
    Done(Arc<EntropyProfile>),
    /// The run failed (the message says why).
    Failed(String),
}

/// Which lens a request reads with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LensChoice {
    Logit,
    Tuned,
}

/// One request in the queue.
pub struct Job {
    pub request: ProfileRequest,
    pub lens: LensChoice,
    /// Blocks to skip, 1..=L, sorted and without repeats.
    pub skip: Vec<usize>,
    /// Set when the page that asked went away.
    pub cancelled: Arc<AtomicBool>,
    /// Sized for every event the job can send, so the worker never waits on a slow page.
    pub events: mpsc::Sender<Event>,
}

impl Job {
    /// The channel a job's events go through: room for all of them (start, one per token, end),
    /// twice over for a job run again alone after its batch failed.
    pub fn channel(generate: usize) -> (mpsc::Sender<Event>, mpsc::Receiver<Event>) {
        mpsc::channel(2 * generate + 4)
    }

    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    fn send(&self, e: Event) {
        // A full or closed channel means nobody is listening any more.
        let _ = self.events.try_send(e);
    }
}

/// Why a request was not queued.
#[derive(Debug, PartialEq, Eq)]
pub struct QueueFull {
    pub waiting: usize,
}

#[derive(Default)]
struct State {
    pending: VecDeque<Job>,
    /// Requests in the batch now running.
    running: usize,
    stopping: bool,
}

/// The queue of one model, shared by the server's handlers and the model's worker thread.
pub struct ModelQueue {
    state: Mutex<State>,
    ready: Condvar,
    limits: Limits,
    /// Tokens generated since the start, all requests together.
    generated: AtomicUsize,
    /// Set by [`ModelQueue::stop`]: the running batch stops at its next token.
    stopping: AtomicBool,
}

impl ModelQueue {
    pub fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            limits,
            generated: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A worker that panicked mid-update leaves a consistent queue (jobs are moved whole).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `job` unless [`Limits::max_queue`] requests already wait; returns how many wait
    /// before it.
    pub fn submit(&self, job: Job) -> Result<usize, QueueFull> {
        let mut s = self.lock();
        s.pending.retain(|j| !j.is_cancelled());
        if s.pending.len() >= self.limits.max_queue {
            return Err(QueueFull {
                waiting: s.pending.len(),
            });
        }
        s.pending.push_back(job);
        let ahead = s.pending.len() - 1 + s.running;
        drop(s);
        self.ready.notify_one();
        Ok(ahead)
    }

    /// Tokens generated since the server started.
    pub fn generated_tokens(&self) -> usize {
        self.generated.load(Ordering::Relaxed)
    }

    /// Requests waiting and running.
    pub fn load(&self) -> (usize, usize) {
        let s = self.lock();
        let waiting = s.pending.iter().filter(|j| !j.is_cancelled()).count();
        (waiting, s.running)
    }

    /// Makes the worker return: the batch it runs stops at its next token, waiting requests are
    /// dropped (their pages are told the server is stopping).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        let mut s = self.lock();
        s.stopping = true;
        s.pending.clear();
        drop(s);
        self.ready.notify_all();
    }

    /// The next batch: the first live job and every later live job with the same lens and
    /// skipped blocks, at most `max_batch`, in arrival order. Blocks until there is one; `None`
    /// when stopping.
    fn next_batch(&self) -> Option<Vec<Job>> {
        let mut s = self.lock();
        loop {
            if s.stopping {
                return None;
            }
            s.pending.retain(|j| !j.is_cancelled());
            if let Some(first) = s.pending.pop_front() {
                let mut batch = vec![first];
                let mut rest = VecDeque::with_capacity(s.pending.len());
                while let Some(j) = s.pending.pop_front() {
                    if batch.len() < self.limits.max_batch
                        && j.lens == batch[0].lens
                        && j.skip == batch[0].skip
                    {
                        batch.push(j);
                    } else {
                        rest.push_back(j);
                    }
                }
                s.pending = rest;
                s.running = batch.len();
                return Some(batch);
            }
            s = self.ready.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn finished(&self) {
        self.lock().running = 0;
    }
}

/// Tells each job of its tokens, and stops the rows whose page went away.
struct JobObserver<'a> {
    jobs: &'a [Job],
    done: Vec<AtomicUsize>,
    queue: &'a ModelQueue,
}

impl TokenObserver for JobObserver<'_> {
    fn token(&self, request: usize) -> bool {
        let Some(job) = self.jobs.get(request) else {
            return true;
        };
        self.queue.generated.fetch_add(1, Ordering::Relaxed);
        let done = self.done[request].fetch_add(1, Ordering::Relaxed) + 1;
        job.send(Event::Token {
            done,
            total: job.request.generate,
        });
        !job.is_cancelled() && !self.queue.stopping.load(Ordering::Relaxed)
    }
}

/// Runs batches from `queue` on `profiler` until the queue stops. `tuned` is the model's tuned
/// lens, when the server has one. A failing or panicking batch fails its own requests only.
pub fn work(queue: &ModelQueue, mut profiler: Profiler, tuned: Option<LensKind>) {
    while let Some(jobs) = queue.next_batch() {
        for j in &jobs {
            j.send(Event::Started { batch: jobs.len() });
        }
        let outcome = attempt(&mut profiler, tuned.as_ref(), &jobs, queue);
        if outcome.is_err() && jobs.len() > 1 {
            // One request can fail a batch (a sampler that breaks on its settings): run each alone,
            // so that only that one fails.
            for job in &jobs {
                deliver(
                    std::slice::from_ref(job),
                    attempt(
                        &mut profiler,
                        tuned.as_ref(),
                        std::slice::from_ref(job),
                        queue,
                    ),
                );
            }
        } else {
            deliver(&jobs, outcome);
        }
        queue.finished();
    }
}

/// Runs `jobs` as one batch; a panic becomes an error.
fn attempt(
    profiler: &mut Profiler,
    tuned: Option<&LensKind>,
    jobs: &[Job],
    queue: &ModelQueue,
) -> Result<Vec<EntropyProfile>, String> {
    match catch_unwind(AssertUnwindSafe(|| run_batch(profiler, tuned, jobs, queue))) {
        Ok(Ok(profiles)) => Ok(profiles),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(
            "the model's worker failed on this request (a bug: please report it with the request)"
                .to_string(),
        ),
    }
}

/// Sends each job its profile, or the failure.
fn deliver(jobs: &[Job], outcome: Result<Vec<EntropyProfile>, String>) {
    match outcome {
        Ok(profiles) => {
            for (j, p) in jobs.iter().zip(profiles) {
                j.send(Event::Done(Arc::new(p)));
            }
        }
        Err(message) => {
            for j in jobs {
                j.send(Event::Failed(message.clone()));
            }
        }
    }
}

fn run_batch(
    profiler: &mut Profiler,
    tuned: Option<&LensKind>,
    jobs: &[Job],
    queue: &ModelQueue,
) -> crate::error::Result<Vec<EntropyProfile>> {
    let lens = match (jobs[0].lens, tuned) {
        (LensChoice::Tuned, Some(t)) => t.clone(),
        (LensChoice::Tuned, None) => {
            return Err(crate::error::Error::invalid(
                "this model has no tuned lens on this server",
            ))
        }
        (LensChoice::Logit, _) => LensKind::Logit,
    };
    profiler.set_lens(lens)?;
    profiler.model.set_skipped_blocks(&jobs[0].skip)?;
    profiler.set_batch_size(jobs.len())?;
    let requests: Vec<ProfileRequest> = jobs.iter().map(|j| j.request.clone()).collect();
    let observer = JobObserver {
        jobs,
        done: jobs.iter().map(|_| AtomicUsize::new(0)).collect(),
        queue,
    };
    profiler.run_batch_observed(&requests, &observer)
}
