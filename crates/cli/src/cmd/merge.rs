//! `tally merge`: profiles of one build added into one, or (`--by-program`) a directory of
//! profiles of many programs into one profile per program (`tally_report::merge`); this file
//! finds the inputs, shows progress, writes the outputs and says what was done.

use super::common::{profile_files, write_out};
use super::read::read_profiles;
use crate::exit::Exit;
use crate::progress;
use anyhow::{Context as _, Result};
use std::path::{Path, PathBuf};
use tally_report::merge::{ByProgram, FileNames, Merged, ProgramSum};

/// `tally merge`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Output file (with --by-program: output directory, created if missing).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Group the inputs by the build that wrote them (program path, build id and module
    /// hashes) and write DIR/<program>-<build id>.tally per group; unreadable inputs are
    /// listed and make the exit status 2, the rest is still merged.
    #[arg(long)]
    pub by_program: bool,
    /// Profiles to add (with --by-program also directories: their *.tally files); a build of a
    /// `tally export` dataset (DIR/runs/build=KEY) adds the runs it holds.
    #[arg(required = true)]
    pub profiles: Vec<PathBuf>,
}

/// Runs `tally merge`.
pub fn run(a: Args) -> Result<Exit> {
    if a.by_program {
        return by_program(&a.output, &a.profiles);
    }
    let p = read_profiles(&a.profiles)?;
    if p.program.is_unknown() && a.profiles.len() > 1 {
        eprintln!(
            "tally: note: the inputs do not all name the same program; the merged profile names none"
        );
    }
    write_out(Some(&a.output), &p.write())?;
    Ok(Exit::Ok)
}

/// `tally merge --by-program -o DIR INPUTS...`: one merged profile per program.
fn by_program(dir: &Path, inputs: &[PathBuf]) -> Result<Exit> {
    let files = profile_files(inputs)?;
    let progress = progress::Progress::new("merging", files.len(), "profiles");
    let mut merge = ByProgram::new();
    let mut programs = 0;
    let mut failed = 0usize;
    for f in &files {
        progress.step();
        if let Err(why) = merge.add_file(f) {
            progress.println(&format!("tally: skipping {}: {why}", f.display()));
            failed += 1;
        } else if merge.programs() != programs {
            programs = merge.programs();
            progress.message(format!("{programs} programs"));
        }
    }
    drop(progress);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut names = FileNames::new();
    let mut write = |m: &Merged| -> Result<()> {
        let out = dir.join(names.name(m));
        m.profile
            .write_file(&out)
            .with_context(|| format!("cannot write {}", out.display()))?;
        println!(
            "{}: {} profile(s) of {}",
            out.display(),
            m.inputs,
            m.program()
        );
        Ok(())
    };
    for program in merge.finish() {
        match program {
            ProgramSum::One(m) => write(&m)?,
            ProgramSum::PerSet { why, sets } => {
                eprintln!(
                    "tally: not merging the runs of {} into one profile: {why}; one profile per set of modules",
                    sets[0].program()
                );
                for m in &sets {
                    write(m)?;
                }
            }
        }
    }
    if failed > 0 {
        eprintln!(
            "tally: {failed} of {} profile(s) could not be merged (listed above); the rest is merged",
            files.len()
        );
        return Ok(Exit::Error);
    }
    Ok(Exit::Ok)
}
