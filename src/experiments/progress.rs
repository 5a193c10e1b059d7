//! Progress of a run: items done / total, items per second and time left — a bar on a terminal,
//! one line updated in place in a notebook cell, periodic lines elsewhere (logs).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ProgressMode {
    /// A bar when stderr is a terminal, otherwise lines through the `log` facade at info level
    /// (the binary prints them on stderr; a program that installs no logger shows none).
    #[default]
    Auto,
    /// One line on stdout rewritten in place (a carriage return before each update, a newline
    /// at the end): Jupyter folds the carriage returns of a cell's output, live and in the saved
    /// notebook, so the cell shows the latest status only.
    Notebook,
    /// Lines on stdout at most every few seconds.
    Lines,
    /// Nothing.
    Hidden,
}

/// Reports progress over `total` items of which `done` were finished before (resume).
pub struct Progress {
    bar: Option<ProgressBar>,
    lines: Option<LineTarget>,
    label: String,
    total: usize,
    done: usize,
    resumed: usize,
    start: Instant,
    last_line: Instant,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LineTarget {
    /// Rewrites one line of stdout.
    InPlace,
    Stdout,
    Stderr,
}

const LINE_EVERY: Duration = Duration::from_secs(5);
const IN_PLACE_EVERY: Duration = Duration::from_secs(1);

impl Progress {
    pub fn new(mode: ProgressMode, label: &str, total: usize, done: usize) -> Self {
        let (bar, lines) = match mode {
            ProgressMode::Hidden => (None, None),
            ProgressMode::Notebook => (None, Some(LineTarget::InPlace)),
            ProgressMode::Lines => (None, Some(LineTarget::Stdout)),
            ProgressMode::Auto if std::io::stderr().is_terminal() => {
                let bar = ProgressBar::new(total as u64);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{msg} {bar:30} {pos}/{len} items [{elapsed} < {eta}, {per_sec}]",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                bar.set_message(label.to_string());
                bar.set_position(done as u64);
                bar.reset_eta();
                (Some(bar), None)
            }
            ProgressMode::Auto => (None, Some(LineTarget::Stderr)),
        };
        let now = Instant::now();
        let p = Self {
            bar,
            lines,
            label: label.to_string(),
            total,
            done,
            resumed: done,
            start: now,
            last_line: now,
        };
        if p.lines.is_some() {
            p.emit(&format!(
                "{}: {} items to run, {} already done",
                p.label,
                total - done,
                done
            ));
        }
        p
    }

    fn emit(&self, line: &str) {
        use std::io::Write;
        match self.lines {
            // A full or closed stream must not panic the run (as println! would).
            Some(LineTarget::InPlace) => {
                let mut out = std::io::stdout();
                let _ = write!(out, "\r{line}");
                let _ = out.flush();
            }
            Some(LineTarget::Stdout) => {
                let _ = writeln!(std::io::stdout(), "{line}");
            }
            // Lines for a log: the program chooses where they go (the binary: stderr).
            Some(LineTarget::Stderr) => log::info!("{line}"),
            None => {}
        }
    }

    /// The status line: `12/36 items (33%), 0.84 items/s, 29 s left`.
    pub fn status(&self) -> String {
        let elapsed = self.start.elapsed().as_secs_f64();
        let new = self.done - self.resumed;
        let rate = if elapsed > 0.0 {
            new as f64 / elapsed
        } else {
            0.0
        };
        let left = self.total - self.done;
        let eta = if rate > 0.0 {
            format_secs(left as f64 / rate)
        } else {
            "?".into()
        };
        format!(
            "{}: {}/{} items ({:.0}%), {rate:.2} items/s, {eta} left",
            self.label,
            self.done,
            self.total,
            100.0 * self.done as f64 / self.total.max(1) as f64
        )
    }

    pub fn inc(&mut self, n: usize) {
        self.done += n;
        if let Some(bar) = &self.bar {
            bar.inc(n as u64);
        }
        let every = match self.lines {
            Some(LineTarget::InPlace) => IN_PLACE_EVERY,
            _ => LINE_EVERY,
        };
        if self.lines.is_some() && (self.last_line.elapsed() >= every || self.done == self.total) {
            self.last_line = Instant::now();
            self.emit(&self.status());
        }
    }

    /// Runs `f` without the bar drawing over its output.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if self.lines == Some(LineTarget::InPlace) {
            use std::io::Write;
            // The final status stays; the next output starts on a line of its own.
            let mut out = std::io::stdout();
            let _ = writeln!(out, "\r{}", self.status());
            let _ = out.flush();
        }
    }
}

/// `42 s`, `3 min 5 s`, `2 h 4 min`.
pub fn format_secs(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{} h {} min", s / 3600, s % 3600 / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_counts_only_new_items_for_the_rate() {
        let mut p = Progress::new(ProgressMode::Hidden, "tasks", 10, 4);
        p.inc(2);
        let s = p.status();
        assert!(s.starts_with("tasks: 6/10 items (60%)"), "{s}");
        assert_eq!(format_secs(3725.0), "1 h 2 min");
        assert_eq!(format_secs(65.0), "1 min 5 s");
    }
}
