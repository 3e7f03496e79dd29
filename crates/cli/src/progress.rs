//! Progress lines for commands that can take more than a moment (reading or merging many
//! profiles, writing an HTML site): a bar on standard error when it is a terminal, nothing
//! otherwise (so scripts and CI logs see only the command's own output and messages).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal as _;

/// Work of a known number of steps; shown only on a terminal and only for more than one step.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// `what` names the steps ("profiles", "files").
    pub fn new(verb: &str, total: usize, what: &str) -> Progress {
        if total < 2 || !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = ProgressBar::with_draw_target(
            Some(total as u64),
            // A few redraws a second: drawing must not cost what it reports on.
            ProgressDrawTarget::stderr_with_hz(4),
        );
        let style = ProgressStyle::with_template(&format!(
            "tally: {verb} {{pos}}/{{len}} {what} {{wide_bar}} {{elapsed}} {{msg}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Progress(Some(bar))
    }

    /// One more step done.
    pub fn step(&self) {
        if let Some(b) = &self.0 {
            b.inc(1);
        }
    }

    /// Text after the bar.
    pub fn message(&self, m: String) {
        if let Some(b) = &self.0 {
            b.set_message(m);
        }
    }

    /// Prints a line above the bar (or plainly when there is no bar).
    pub fn println(&self, line: &str) {
        match &self.0 {
            Some(b) => b.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}
