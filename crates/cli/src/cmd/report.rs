//! `tally report`: exact block and edge counts (text or JSON), source lines (`--lines`), or
//! the LCOV and Cobertura exports.

use super::common::{title, warn_inconsistent, warn_stopped, write_out, Format};
use super::read::analyze_maybe_traced;
use crate::exit::Exit;
use anyhow::Result;
use clap::ValueEnum;
use std::path::PathBuf;

/// `tally report`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Profiles (several are added; they must come from the same build).
    #[arg(required = true)]
    pub profiles: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Functions in the summary table (0 = all).
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Functions shown with their blocks and edges (0 = all).
    #[arg(long, default_value_t = 5)]
    pub detail: usize,
    /// Blocks and edges shown per detailed function (0 = all).
    #[arg(long, default_value_t = 10)]
    pub blocks: usize,
    /// Show everything: all functions, all blocks, functions that never ran.
    #[arg(long)]
    pub all: bool,
    /// Do not quote source lines next to blocks.
    #[arg(long)]
    pub no_source: bool,
    /// Source lines instead of blocks: line, branch and function coverage per file, the
    /// hottest lines, the source functions (inlined ones included). With --format json: adds
    /// `files` and `source_functions` to the report.
    #[arg(long)]
    pub lines: bool,
    /// Export the source-level counts in another format instead of the report: an LCOV
    /// tracefile or Cobertura XML.
    #[arg(long, value_enum, conflicts_with_all = ["format", "lines"])]
    pub export: Option<Export>,
    /// A witness trace (`--tally-mode=trace`) of the run that wrote the profile: the counts are
    /// those of its regenerated execution, as an `edge` profile would give them.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// `--export`.
#[derive(Clone, Copy, ValueEnum)]
pub enum Export {
    Lcov,
    Cobertura,
}

/// Runs `tally report`.
pub fn run(a: Args) -> Result<Exit> {
    let mut title = title(&a.profiles);
    let (r, stopped) = analyze_maybe_traced(&a.profiles, a.trace.as_ref(), &mut title)?;
    let model = (a.lines || a.export.is_some()).then(|| tally_report::source::model(&r));
    let out = match (a.export, a.format, &model) {
        (Some(Export::Lcov), _, Some(m)) => tally_report::lcov::lcov(m, &title),
        (Some(Export::Cobertura), _, Some(m)) => tally_report::cobertura::cobertura(m),
        (_, Format::Json, Some(m)) => tally_report::render::json_with_lines(&r, &title, m),
        (_, Format::Text, Some(m)) => {
            let top = if a.all { 0 } else { a.top };
            tally_report::show::lines_text(m, &title, top, !a.no_source)
        }
        (_, Format::Json, None) => tally_report::render::json(&r, &title),
        (_, Format::Text, None) => {
            let mut o = tally_report::render::TextOptions {
                top: a.top,
                detail: a.detail,
                blocks: a.blocks,
                show_unexecuted: false,
                source: !a.no_source,
            };
            if a.all {
                o.top = 0;
                o.detail = 0;
                o.blocks = 0;
                o.show_unexecuted = true;
            }
            tally_report::render::text(&r, &title, &o)
        }
    };
    write_out(a.output.as_ref(), out.as_bytes())?;
    Ok(warn_stopped(&stopped, warn_inconsistent(&r)))
}
