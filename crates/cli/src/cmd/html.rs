//! `tally html`: a static HTML site of the counts.

use super::common::{title, warn_inconsistent, warn_stopped};
use super::read::analyze_maybe_traced;
use crate::exit::Exit;
use crate::progress;
use anyhow::Result;
use std::path::PathBuf;

/// `tally html`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Output directory (created if missing; pages already there are replaced).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Profiles (several are added; they must come from the same build); a build of a `tally
    /// export` dataset (DIR/runs/build=KEY) reads as the merged profile of its runs.
    #[arg(required = true)]
    pub profiles: Vec<PathBuf>,
    /// A witness trace (`--tally-mode=trace`) of the run that wrote the profile: the site
    /// shows the counts of its regenerated execution.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
}

/// `tally html -o DIR PROFILE...`: the site of `tally_report::html`.
pub fn run(a: Args) -> Result<Exit> {
    let mut title = title(&a.profiles);
    let (r, stopped) = analyze_maybe_traced(&a.profiles, a.trace.as_ref(), &mut title)?;
    let model = tally_report::source::model(&r);
    let pages = {
        let progress = progress::Progress::new(
            "making",
            tally_report::html::page_count(&r, &model),
            "pages",
        );
        tally_report::html::site_with_progress(&r, &model, &title, &|| progress.step())
    };
    tally_report::html::write_site(&a.output, &pages)?;
    println!(
        "{}: {} pages",
        a.output.join("index.html").display(),
        pages.len()
    );
    Ok(warn_stopped(&stopped, warn_inconsistent(&r)))
}
