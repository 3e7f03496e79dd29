//! `tally check`: the counts of a `--tally-oracle` build against the same-run oracle's.

use super::common::{title, write_out, Format, ProfilesArgs};
use super::read::read_profiles;
use crate::exit::Exit;
use anyhow::Result;

/// `tally check`: 0 when no count differs from the same-run oracle's, 1 when some does.
pub fn run(a: ProfilesArgs) -> Result<Exit> {
    let profile = read_profiles(&a.profiles)?;
    let c = tally_report::check::check(&profile)?;
    let title = title(&a.profiles);
    let out = match a.format {
        Format::Json => tally_report::check::json(&c, &title),
        Format::Text => tally_report::check::text(&c, &title),
    };
    write_out(a.output.as_ref(), out.as_bytes())?;
    Ok(Exit::Differs.when(!c.passed()))
}
