//! Reading the inputs of the report commands: profiles (several of one program added up,
//! [`tally_report::Sum`]; a build of a `tally export` dataset reads as the merged profile of
//! its runs), trace files, and the report of a profile or of a witness trace.

use crate::progress;
use anyhow::{Context as _, Result};
use std::path::PathBuf;
use tally_format::profile::{Profile, ProfileError};

/// Reads a trace file (a regular file only).
pub fn read_trace(t: &std::path::Path) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(t).with_context(|| format!("{}", t.display()))?;
    if !meta.is_file() {
        anyhow::bail!("{}: not a regular file", t.display());
    }
    std::fs::read(t).with_context(|| format!("{}", t.display()))
}

/// The merged profile of a build of a `tally export` dataset, when `p` names one (the
/// dataset's directory when it holds one build, or `DIR/TABLE/build=KEY`).
fn read_dataset(p: &std::path::Path) -> Result<Option<Profile>> {
    let name = || p.display().to_string();
    let Some((dir, key)) = tally_report::dataset::locate(p).with_context(name)? else {
        return Ok(None);
    };
    Ok(Some(
        tally_report::dataset::build_profile(&dir, &key).with_context(name)?,
    ))
}

/// Reads one profile; errors name the file.
pub fn read_profile(p: &std::path::Path, bytes: Option<&[u8]>) -> Result<Profile> {
    let read = match bytes {
        Some(b) => Profile::read_at(b, Some(tally_format::profile::meta_dir(p))),
        None => Profile::read_file(p),
    };
    match read {
        Ok(prof) => Ok(prof),
        // That message names the file already.
        Err(
            e @ (ProfileError::Io { .. }
            | ProfileError::NotRegular { .. }
            | ProfileError::TooLarge { .. }),
        ) => Err(e.into()),
        Err(e) => Err(anyhow::Error::new(e).context(p.display().to_string())),
    }
}

/// [`read_profiles`] for the commands that show counts: without the same-run oracle's modules
/// (`--tally-oracle`, which only `tally check` and `tally merge` read).
pub fn read_for_report(paths: &[PathBuf]) -> Result<Profile> {
    let mut p = read_profiles(paths)?;
    p.take_oracles();
    Ok(p)
}

/// Reads profiles of one program and adds them up, one at a time (memory: the sum and one
/// file), modules matched by hash (`tally_report::Sum`). A profile whose modules are all in
/// the sum already is added without decoding its metadata.
pub fn read_profiles(paths: &[PathBuf]) -> Result<Profile> {
    let (first, rest) = paths.split_first().expect("clap requires one profile");
    let first_name = first.display().to_string();
    let progress = progress::Progress::new("reading", paths.len(), "profiles");
    let first_profile = match read_dataset(first)? {
        Some(p) => p,
        None => read_profile(first, None)?,
    };
    let mut sum = tally_report::Sum::new(&first_name, first_profile);
    progress.step();
    for p in rest {
        let name = p.display().to_string();
        if let Some(other) = read_dataset(p)? {
            sum.add(&name, &other)?;
            progress.step();
            continue;
        }
        let bytes = Profile::file_bytes(p, tally_format::profile::MAX_PROFILE_BYTES)?;
        let added = sum
            .add_bytes(&name, &bytes)
            .map_err(|e| anyhow::Error::new(e).context(name.clone()))?;
        if !added {
            let other = read_profile(p, Some(&bytes))?;
            sum.add(&name, &other)?;
        }
        progress.step();
    }
    Ok(sum.finish()?)
}

/// The report of `profiles`, or with `trace` the counts of the witness trace its one profile's
/// run wrote (`title` then names the trace too), and the threads whose regeneration stopped.
pub fn analyze_maybe_traced(
    profiles: &[PathBuf],
    trace: Option<&PathBuf>,
    title: &mut String,
) -> Result<(tally_report::Report, Vec<(u32, String)>)> {
    let profile = read_for_report(profiles)?;
    match trace {
        None => {
            let r = tally_report::analyze(&profile, &tally_report::Inputs::default())?;
            if r.modes.contains(&tally_format::Mode::TraceNaive) {
                eprintln!("tally: a trace-naive build counts nothing in its profile; its trace lists every block executed: tally trace PROG.trace");
            }
            if r.modes.contains(&tally_format::Mode::Trace) {
                eprintln!("tally: a trace build counts nothing in its profile; pass the trace its run wrote: --trace PROG.trace {}", title);
            }
            Ok((r, Vec::new()))
        }
        Some(t) => {
            if profiles.len() != 1 {
                anyhow::bail!("--trace takes the one profile its run wrote");
            }
            let bytes = read_trace(t)?;
            let (r, s) = tally_report::trace::report(&bytes, &profile)
                .map_err(|e| anyhow::anyhow!("{}: {e}", t.display()))?;
            *title = format!("{} (trace {})", title, t.display());
            Ok((r, s))
        }
    }
}
