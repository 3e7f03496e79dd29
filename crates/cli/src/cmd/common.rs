//! What the report commands share: the output format, the arguments of `placements` and
//! `check`, how a report is titled and written, and the stderr lines (and exit status) for
//! counts that are not exact.

use crate::exit::Exit;
use anyhow::{Context as _, Result};
use clap::ValueEnum;
use std::io::Write as _;
use std::path::PathBuf;

/// `--format`.
#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// The arguments of `placements` and `check`: profiles, a format, an output file.
#[derive(clap::Args)]
pub struct ProfilesArgs {
    /// Profiles (several are added; they must come from the same build); a build of a `tally
    /// export` dataset (DIR/runs/build=KEY) reads as the merged profile of its runs.
    #[arg(required = true)]
    pub profiles: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// How a report names its inputs: `a.tally + b.tally`.
pub fn title(profiles: &[PathBuf]) -> String {
    profiles
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Writes `bytes` to `path`, or to stdout (a closed pipe is no error).
pub fn write_out(path: Option<&PathBuf>, bytes: &[u8]) -> Result<()> {
    match path {
        Some(p) => {
            std::fs::write(p, bytes).with_context(|| format!("cannot write {}", p.display()))
        }
        None => {
            let mut o = std::io::stdout().lock();
            match o.write_all(bytes) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("cannot write to stdout"),
            }
        }
    }
}

/// Names every function whose counts could not be recovered, one stderr line each, then says
/// what usually causes it; returns the exit status.
pub fn warn_inconsistent(r: &tally_report::Report) -> Exit {
    let word = r.unrecovered_word();
    if r.unfinished {
        eprintln!(
            "tally: unfinished continuous-mode profile (the program was killed): functions that were not active at the kill are exact; those active at the kill have partial counts, named below as interrupted when their flow does not balance"
        );
    }
    for line in r.caveats() {
        eprintln!("tally: {line}");
    }
    let mut n = 0;
    for f in r.inconsistent() {
        n += 1;
        eprintln!(
            "tally: {word} counts in function {} ({}), shown as unknown: {}",
            f.demangled,
            f.module,
            f.inconsistent.as_deref().unwrap_or_default()
        );
    }
    if r.unfinished {
        return Exit::Unfinished;
    }
    if r.signal.is_some() {
        return Exit::Signaled;
    }
    if r.raced {
        return Exit::Raced;
    }
    if n == 0 {
        return Exit::Ok;
    }
    eprintln!(
        "tally: {n} function(s) with inconsistent counts; the rest is exact. Threads that run instrumented code need a build with --tally-atomic, and a process that ends in the middle of a function (a fault, a signal or another thread stopped between calls) leaves that function inconsistent"
    );
    Exit::Inconsistent
}

/// Says which threads' regeneration stopped early; the exit status.
pub fn warn_stopped(stopped: &[(u32, String)], status: Exit) -> Exit {
    for (thread, why) in stopped {
        eprintln!("tally: thread {thread}: regeneration stopped early: {why}");
    }
    if stopped.is_empty() {
        return status;
    }
    eprintln!(
        "tally: the counts cover the regenerated part of {} thread(s) only",
        stopped.len()
    );
    Exit::Inconsistent
}

/// The `--function REGEX` of `paths` and `trace`, compiled.
pub fn function_filter(function: Option<&str>) -> Result<Option<regex_lite::Regex>> {
    function
        .map(|re| regex_lite::Regex::new(re).with_context(|| format!("--function {re}")))
        .transpose()
}

/// The files `inputs` name: each file, and the `*.tally` files of each directory (sorted).
pub fn profile_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for i in inputs {
        if std::fs::metadata(i).is_ok_and(|m| m.is_dir()) {
            let mut found: Vec<PathBuf> = std::fs::read_dir(i)
                .with_context(|| format!("cannot read directory {}", i.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "tally"))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(i.clone());
        }
    }
    Ok(files)
}
