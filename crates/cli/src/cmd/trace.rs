//! `tally trace`: the executed block sequence of each thread regenerated from a witness trace,
//! cut into paths (`--paths`), or where the trace's bits go (`--stats`).

use super::common::{function_filter, write_out, Format};
use super::read::{read_profile, read_trace};
use crate::exit::Exit;
use anyhow::{Context as _, Result};
use std::io::Write as _;
use std::path::PathBuf;
use tally_format::profile::Profile;

/// `tally trace`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The trace file (TALLY_TRACE, default <program>.trace).
    pub trace: PathBuf,
    /// The profile the same run wrote (default: the trace's path with `.tally` for `.trace`).
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Skip the first N shown blocks.
    #[arg(long, default_value_t = 0)]
    pub from: usize,
    /// Show at most N blocks (0 = all); regeneration stops after the last one shown. With
    /// --paths and --stats, how many rows per ranking (also as --top, as `tally paths` says).
    #[arg(long, alias = "top", default_value_t = 0)]
    pub limit: usize,
    /// Only blocks of functions whose name matches this regular expression.
    #[arg(long)]
    pub function: Option<String>,
    /// Cut the regenerated execution into Ball-Larus paths, numbered as `path` mode numbers
    /// them, and print them as `tally paths` does (--limit: paths per ranking, 0 = all;
    /// --function: only those functions).
    #[arg(long)]
    pub paths: bool,
    /// Instead of the blocks, where the trace's bits go: bits by record kind (witnesses by
    /// width, Enter, Back, Unwind, End, the rest of the file) per executed conditional branch,
    /// and the functions whose witnesses take the most bits (--limit: how many, 0 = all).
    #[arg(long, conflicts_with = "paths")]
    pub stats: bool,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// Runs `tally trace`.
pub fn run(a: Args) -> Result<Exit> {
    let profile_path = a
        .profile
        .clone()
        .unwrap_or_else(|| a.trace.with_extension("tally"));
    let profile = read_profile(&profile_path, None)?;
    let bytes = read_trace(&a.trace)?;
    let filter = function_filter(a.function.as_deref())?;
    if a.paths {
        return trace_paths(&a, &profile_path, &profile, &bytes, filter.as_ref());
    }
    if a.stats {
        let s = tally_report::trace::stats::stats(&bytes, &profile, a.limit)
            .map_err(|e| anyhow::anyhow!("{}: {e}", a.trace.display()))?;
        let out = match a.format {
            Format::Json => tally_report::trace::stats::json(&s),
            Format::Text => tally_report::trace::stats::render(&s),
        };
        write_out(a.output.as_ref(), out.as_bytes())?;
        return Ok(Exit::Differs.when(!s.stopped.is_empty()));
    }
    // Written as regeneration goes: a long trace never sits in memory block by block.
    let file = match a.output.as_ref() {
        Some(p) => Some(
            std::fs::File::create(p).with_context(|| format!("cannot write {}", p.display()))?,
        ),
        None => None,
    };
    let mut w: std::io::BufWriter<Box<dyn std::io::Write>> = std::io::BufWriter::with_capacity(
        1 << 16,
        match file {
            Some(f) => Box::new(f),
            None => Box::new(std::io::stdout().lock()),
        },
    );
    let (stopped, err) = tally_report::trace::render_trace(
        &bytes,
        &profile,
        |name| filter.as_ref().is_none_or(|f| f.is_match(name)),
        a.from,
        a.limit,
        matches!(a.format, Format::Json),
        &mut w,
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", a.trace.display()))?;
    let err = err.map_or_else(|| w.flush().err(), Some);
    match (err, a.output.as_ref()) {
        (None, _) => {}
        (Some(e), None) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        (Some(e), Some(p)) => {
            return Err(e).with_context(|| format!("cannot write {}", p.display()))
        }
        (Some(e), None) => return Err(e).context("cannot write to stdout"),
    }
    Ok(Exit::Differs.when(!stopped.is_empty()))
}

/// `tally trace --paths`: the regenerated execution cut into paths, rendered as `tally paths`
/// renders a path profile; threads that stopped early and uncounted paths are said on stderr
/// (exit status 1).
fn trace_paths(
    a: &Args,
    profile_path: &std::path::Path,
    profile: &Profile,
    bytes: &[u8],
    filter: Option<&regex_lite::Regex>,
) -> Result<Exit> {
    let mut t = tally_report::trace::paths::trace_paths(bytes, profile)
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.trace.display()))?;
    if let Some(f) = filter {
        t.report.functions.retain(|x| f.is_match(&x.name));
    }
    let title = format!("{} (trace {})", profile_path.display(), a.trace.display());
    let out = match a.format {
        Format::Json => tally_report::render::paths_json(&t.report, &title),
        Format::Text => tally_report::render::paths_text(&t.report, &title, a.limit, true),
    };
    write_out(a.output.as_ref(), out.as_bytes())?;
    for (thread, why) in &t.stopped {
        eprintln!("tally: thread {thread}: {why} (its paths are counted up to there)");
    }
    for n in &t.notes {
        eprintln!("tally: {n}");
    }
    Ok(Exit::Differs.when(!t.stopped.is_empty() || !t.notes.is_empty()))
}
