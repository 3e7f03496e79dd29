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
    /// Profiles (several are added; they must come from the same build); a build of a `tally
    /// export` dataset (DIR/runs/build=KEY) reads as the merged profile of its runs.
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
    /// Export the counts in another format instead of the report: an LCOV tracefile or
    /// Cobertura XML (source lines), or LLVM's probe-based sample profile for clang's
    /// `-fprofile-sample-use` (of a `tally cc --tally-pgo` build; docs/pgo.md).
    #[arg(long, value_enum, conflicts_with_all = ["format", "lines"])]
    pub export: Option<Export>,
    /// With `--export sample-profile`: LLVM's extensible binary format instead of text, with a
    /// profile symbol list naming every function of the build, so that the ones that never ran
    /// are known cold without a record (written by `llvm-profdata-19 merge --sample
    /// --extbinary`, or $TALLY_LLVM_PROFDATA).
    #[arg(long)]
    pub extbinary: bool,
    /// With `--export sample-profile`: one flat record per function, its inline instances
    /// summed into it, instead of a nested profile where each inline instance of a
    /// `--tally-pgo` build (a callee its pre-inlining inlined) is a record of its own under its
    /// call site (docs/pgo.md).
    #[arg(long)]
    pub flat: bool,
    /// With `--export sample-profile`: also a line per direct call (` id: count callee:count`,
    /// as LLVM's profile generator writes them); left out by default, as the rebuild measured
    /// worse with them (docs/pgo.md, "Direct calls").
    #[arg(long)]
    pub direct_calls: bool,
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
    SampleProfile,
}

/// Runs `tally report`.
pub fn run(a: Args) -> Result<Exit> {
    let mut title = title(&a.profiles);
    let (r, stopped) = analyze_maybe_traced(&a.profiles, a.trace.as_ref(), &mut title)?;
    if let Some(Export::SampleProfile) = a.export {
        return sample_profile(&a, &r, &stopped);
    }
    if a.extbinary || a.flat {
        anyhow::bail!("--extbinary and --flat go with --export sample-profile");
    }
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

/// `--export sample-profile`: the profile, and what was left out of it on stderr.
fn sample_profile(a: &Args, r: &tally_report::Report, stopped: &[(u32, String)]) -> Result<Exit> {
    let Some(p) = tally_report::sample_profile::sample_profile_with(r, a.direct_calls) else {
        anyhow::bail!(
            "the profile has no pseudo-probes: build the program with \
             `tally cc --tally-pgo`"
        );
    };
    let nested = !a.flat;
    let bytes = match a.extbinary {
        true => crate::pgo::extbinary(&p, nested)?,
        false => p.text(true, nested).into_bytes(),
    };
    write_out(a.output.as_ref(), &bytes)?;
    eprintln!(
        "tally: sample profile of {} functions ({} ran; {} probes left to the loader's \
         inference: optimization removed a copy that ran){}",
        p.functions,
        p.executed,
        p.lost_probes,
        if p.left_out.is_empty() {
            String::new()
        } else {
            format!(
                "; {} left out because their counts cannot be exact:",
                p.left_out.len()
            )
        }
    );
    if nested && p.nested && p.unplaced > 0 {
        eprintln!(
            "tally: {} probe copies in inline instances whose call site has no probe id (merged \
             calls, callees without debug info) are counted in their function's own record",
            p.unplaced
        );
    }
    if p.late_modules > 0 {
        eprintln!(
            "tally: warning: {} modules got their probes after optimization (built without \
             --tally-pgo): a probe that optimization copied and partly dropped has a count that \
             is too low; build with `tally cc --tally-pgo` for exact counts",
            p.late_modules
        );
    }
    if !p.inexact_heads.is_empty() {
        eprintln!(
            "tally: {} functions' head counts are lower bounds (an inlined copy lost its entry \
             probe; the loader infers their entry counts): {}",
            p.inexact_heads.len(),
            p.inexact_heads
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for why in p.left_out.iter().take(20) {
        eprintln!("tally:   {why}");
    }
    if p.left_out.len() > 20 {
        eprintln!("tally:   ... and {} more", p.left_out.len() - 20);
    }
    Ok(warn_stopped(stopped, warn_inconsistent(r)))
}
