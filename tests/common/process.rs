//! External processes a test waits on, bounded: every run has a time limit, after which its whole
//! process group is killed (a browser's helpers or a kernel's children hold the output pipes open,
//! so killing the leader alone would leave the test waiting), and the test fails naming what hung.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// Why a bounded run gave no output.
#[derive(Debug)]
pub enum RunError {
    /// It could not be started.
    Spawn(std::io::Error),
    /// It ran past its limit and was killed with its process group.
    TimedOut(Duration),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spawn(e) => write!(f, "could not start: {e}"),
            RunError::TimedOut(d) => write!(
                f,
                "still running after {} s: killed with its process group",
                d.as_secs()
            ),
        }
    }
}

/// Runs `cmd` in a process group of its own, collecting stdout and stderr, for at most `limit`.
pub fn output_within(cmd: &mut Command, limit: Duration) -> Result<Output, RunError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    let pgid = child.id() as i32;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status: ExitStatus = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                // SAFETY: kill(2) on our own child's process group; no memory is touched.
                unsafe {
                    libc::kill(-pgid, libc::SIGKILL);
                }
                let _ = child.wait();
                return Err(RunError::TimedOut(limit));
            }
        }
    };
    // The leader is gone; helpers left in its group would keep the pipes open.
    // SAFETY: as above.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    Ok(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

/// `Command::output` with the time limit of a command-line run ([`CLI_LIMIT`]).
pub trait OutputBounded {
    fn output_bounded(&mut self) -> std::io::Result<Output>;
}

impl OutputBounded for Command {
    fn output_bounded(&mut self) -> std::io::Result<Output> {
        output_within(self, CLI_LIMIT).map_err(|e| match e {
            RunError::Spawn(e) => e,
            e => std::io::Error::new(std::io::ErrorKind::TimedOut, e.to_string()),
        })
    }
}

/// How long one command-line run of entropy-lens may take in a test (the slowest, an experiment
/// on Gemma, takes about a minute on 2 cores).
pub const CLI_LIMIT: Duration = Duration::from_secs(20 * 60);

/// Runs the built entropy-lens binary with `args`.
pub fn run(args: &[&str]) -> Output {
    output_within(Command::new(super::cli()).args(args), CLI_LIMIT)
        .unwrap_or_else(|e| panic!("entropy-lens {args:?}: {e}"))
}

/// Runs a command that must succeed; returns its stdout.
pub fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "entropy-lens {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command that must fail cleanly: exit code 1, one `error: …` message, no panic. Returns
/// its stderr.
pub fn fails(args: &[&str]) -> String {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "expected exit 1 for {args:?}: {err}"
    );
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    err
}

/// As [`fails`], and the message names `needle`.
pub fn fails_with(args: &[&str], needle: &str) -> String {
    let err = fails(args);
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in: {err}"
    );
    err
}
