//! `tally export`: profiles (files, or directories of `*.tally` files) into the Parquet
//! dataset of docs/dataset.md (`tally_report::dataset`); this file finds the inputs, shows
//! progress and says what was done. An input that cannot be exported is named on stderr and
//! makes the exit status 2; the others are still exported.

use super::common::profile_files;
use crate::exit::Exit;
use crate::progress;
use anyhow::Result;
use std::path::PathBuf;
use tally_report::dataset::Exporter;

/// `tally export`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The dataset's directory (created if missing; an existing dataset is added to).
    #[arg(short, long)]
    pub output: PathBuf,
    /// A label of every run exported (`runs.labels`), as KEY=VALUE; repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Profiles, and directories whose *.tally files are exported.
    #[arg(required = true)]
    pub profiles: Vec<PathBuf>,
}

/// `KEY=VALUE` with a non-empty key.
fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not KEY=VALUE")),
    }
}

/// Runs `tally export`.
pub fn run(a: Args) -> Result<Exit> {
    let mut labels = a.labels;
    labels.sort();
    labels.dedup_by(|x, y| x.0 == y.0);
    if a.output.exists() && !a.output.is_dir() {
        anyhow::bail!("{}: not a directory", a.output.display());
    }
    let files = profile_files(&a.profiles)?;
    let progress = progress::Progress::new("exporting", files.len(), "profiles");
    let mut export = Exporter::new(&a.output, labels)?;
    let mut failed = 0usize;
    for f in &files {
        progress.step();
        if let Err(why) = export.add_file(f) {
            if let tally_report::dataset::DatasetError::Write(_) = why {
                drop(progress);
                return Err(why.into());
            }
            progress.println(&format!("tally: skipping {}: {why}", f.display()));
            failed += 1;
        }
    }
    drop(progress);
    let s = export.finish()?;
    println!(
        "{}: {} run(s) exported, {} already there; {} new build(s), {} part(s) written",
        a.output.display(),
        s.runs,
        s.present,
        s.new_builds,
        s.parts
    );
    if failed > 0 {
        eprintln!(
            "tally: {failed} of {} profile(s) could not be exported (listed above); the rest is exported",
            files.len()
        );
        return Ok(Exit::Error);
    }
    Ok(Exit::Ok)
}
