//! `tally paths`: the hottest acyclic paths of a path profile, or the interprocedural paths of
//! an ipath one.

use super::common::{function_filter, title, warn_inconsistent, write_out, Format};
use super::read::read_for_report;
use crate::exit::Exit;
use anyhow::Result;
use std::path::PathBuf;

/// `tally paths`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Profiles (several are added; they must come from the same build); a build of a `tally
    /// export` dataset (DIR/runs/build=KEY) reads as the merged profile of its runs.
    #[arg(required = true)]
    pub profiles: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Paths listed per ranking (0 = all; default 10 in text; the JSON lists every path, or
    /// with --top the hottest interprocedural paths).
    #[arg(long)]
    pub top: Option<usize>,
    /// Only functions (path mode) or interprocedural paths through functions (ipath modes)
    /// whose name matches this regular expression (symbol or demangled).
    #[arg(long, value_name = "REGEX")]
    pub function: Option<String>,
    /// Do not quote source lines.
    #[arg(long)]
    pub no_source: bool,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// Runs `tally paths`.
pub fn run(a: Args) -> Result<Exit> {
    let profile = read_for_report(&a.profiles)?;
    let title = title(&a.profiles);
    let mut r = tally_report::analyze(&profile, &tally_report::Inputs::default())?;
    let filter = function_filter(a.function.as_deref())?;
    let matches = |name: &str, demangled: &str| {
        filter
            .as_ref()
            .is_none_or(|f| f.is_match(name) || f.is_match(demangled))
    };
    if filter.is_some() {
        r.functions.retain(|f| matches(&f.name, &f.demangled));
    }
    let sel = tally_report::ipaths::Select {
        top: a.top.filter(|&n| n > 0),
        function: filter
            .is_some()
            .then_some(&matches as &dyn Fn(&str, &str) -> bool),
    };
    let out = match a.format {
        Format::Json => tally_report::render::paths_json_with(&r, &title, &sel),
        Format::Text => {
            let top = a.top.unwrap_or(10);
            let sel = tally_report::ipaths::Select {
                top: (top > 0).then_some(top),
                ..sel
            };
            tally_report::render::paths_text_with(&r, &title, top, !a.no_source, &sel)
        }
    };
    write_out(a.output.as_ref(), out.as_bytes())?;
    Ok(warn_inconsistent(&r))
}
