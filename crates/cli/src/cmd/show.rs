//! `tally show`: annotated source, every line with how many times it ran.

use super::common::{warn_inconsistent, write_out};
use super::read::read_for_report;
use crate::exit::Exit;
use anyhow::{Context as _, Result};
use std::path::PathBuf;

/// `tally show`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The profile (or a build of a `tally export` dataset: DIR/runs/build=KEY).
    #[arg(required = true)]
    pub profile: PathBuf,
    /// Source files to show (a path, or its last components); when none are given, every file
    /// but the system headers (under /usr/include and /usr/lib), which a closing note names.
    pub files: Vec<String>,
    /// Only the lines of source functions whose name (source, linkage or demangled) matches
    /// this regular expression.
    #[arg(long)]
    pub function: Option<String>,
    /// Show the counts of every branch outcome under its line.
    #[arg(long)]
    pub branches: bool,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// Runs `tally show`.
pub fn run(a: Args) -> Result<Exit> {
    let profile = read_for_report(std::slice::from_ref(&a.profile))?;
    let r = tally_report::analyze(&profile, &tally_report::Inputs::default())?;
    let m = tally_report::source::model(&r);
    let re = a
        .function
        .as_deref()
        .map(regex_lite::Regex::new)
        .transpose()
        .context("bad --function regular expression")?;
    let pred = |f: &tally_report::source::SourceFunction| {
        re.as_ref().is_some_and(|re| {
            re.is_match(&f.name) || re.is_match(&f.linkage_name) || re.is_match(&f.demangled)
        })
    };
    let o = tally_report::show::ShowOptions {
        function: re.as_ref().map(|_| &pred as &dyn Fn(&_) -> bool),
        files: a.files.clone(),
        branches: a.branches,
    };
    let out = tally_report::show::show(&m, &o);
    if out.is_empty() {
        anyhow::bail!(
            "{}: no source lines to show (build with -g; check the file names and --function)",
            a.profile.display()
        );
    }
    write_out(a.output.as_ref(), out.as_bytes())?;
    Ok(warn_inconsistent(&r))
}
