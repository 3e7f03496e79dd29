//! `tally diff A B`: what changed between two profiles.

use super::common::{write_out, Format};
use super::read::read_for_report;
use crate::exit::Exit;
use anyhow::Result;
use std::path::PathBuf;

/// `tally diff`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The first profile (A; or a build of a `tally export` dataset: DIR/runs/build=KEY).
    pub a: PathBuf,
    /// The second profile (B).
    pub b: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Items listed per section in text output (0 = all); JSON lists everything.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Write to this file instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// `tally diff A B`: 0 when every count is the same, 1 when not.
pub fn run(a: Args) -> Result<Exit> {
    let none = tally_report::Inputs::default();
    let ra = tally_report::analyze(&read_for_report(std::slice::from_ref(&a.a))?, &none)?;
    let rb = tally_report::analyze(&read_for_report(std::slice::from_ref(&a.b))?, &none)?;
    let (ma, mb) = (
        tally_report::source::model(&ra),
        tally_report::source::model(&rb),
    );
    let lines = (!ma.files.is_empty() && !mb.files.is_empty()).then_some((&ma, &mb));
    let d = tally_report::diff::diff(&ra, &rb, lines);
    let (na, nb) = (a.a.display().to_string(), a.b.display().to_string());
    let out = match a.format {
        Format::Json => tally_report::diff::json(&d, &na, &nb),
        Format::Text => tally_report::diff::text(&d, &na, &nb, a.top),
    };
    write_out(a.output.as_ref(), out.as_bytes())?;
    Ok(Exit::Differs.when(!d.equal()))
}
