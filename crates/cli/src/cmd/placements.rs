//! `tally placements`: counter placements scored on a profile's measured counts.

use super::common::{title, warn_inconsistent, write_out, Format, ProfilesArgs};
use super::read::read_for_report;
use crate::exit::Exit;
use anyhow::Result;

/// Runs `tally placements`.
pub fn run(a: ProfilesArgs) -> Result<Exit> {
    let profile = read_for_report(&a.profiles)?;
    let title = title(&a.profiles);
    let r = tally_report::analyze(&profile, &tally_report::Inputs::default())?;
    let s = tally_report::placements::score(&r);
    if s.functions == 0 {
        anyhow::bail!(
            "{title}: no function has every edge count; use a profile of an edge or edges-naive build"
        );
    }
    let out = match a.format {
        Format::Json => tally_report::placements::json(&s, &title, &r.program),
        Format::Text => tally_report::placements::text(&s, &title, &r.program),
    };
    write_out(a.output.as_ref(), out.as_bytes())?;
    Ok(warn_inconsistent(&r))
}
