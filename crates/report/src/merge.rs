//! Profiles of many programs summed per program (`tally merge --by-program`): [`ByProgram`]
//! takes profile files one at a time, groups them by the program and build that wrote them and
//! adds each group up; [`FileNames`] names the merged profiles. Reading, printing and writing
//! stay with the caller.

use crate::{combine, Parts, ReportError, Sum};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use tally_format::profile::{BuildId, Profile, ProfileError, Program, MAX_PROFILE_BYTES};
use thiserror::Error;

/// Why a profile was left out of a [`ByProgram`] (the rest is still merged). The message does
/// not name the file: the caller does.
#[derive(Debug, Error)]
pub enum MergeError {
    /// The file cannot be read or is not a valid profile.
    #[error("{}", without_name(.name, .error))]
    Unreadable {
        /// The file, as its error message names it.
        name: String,
        /// What the reader said.
        error: Box<ProfileError>,
    },
    /// A profile of a group's program and modules that its sum refuses.
    #[error(transparent)]
    Refused(#[from] ReportError),
}

/// The reader's message without its "cannot read profile NAME: " prefix.
fn without_name(name: &str, e: &ProfileError) -> String {
    let msg = e.to_string();
    msg.strip_prefix("cannot read profile ")
        .map_or(msg.clone(), |m| {
            m.strip_prefix(&format!("{name}: "))
                .unwrap_or(m)
                .to_string()
        })
}

/// Which program a profile is of: its GNU build id when it has one, else its path (build ids
/// made of module hashes differ with the libraries a run loaded).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum ProgramKey {
    Gnu(Vec<u8>),
    Path(Vec<u8>),
}

fn program_key(p: &Program) -> ProgramKey {
    match &p.build_id {
        BuildId::Gnu(id) => ProgramKey::Gnu(id.clone()),
        _ => ProgramKey::Path(p.path.clone()),
    }
}

/// A group: runs of one program with the same modules (program, module hashes).
type Key = (ProgramKey, Program, Vec<u64>);

/// A merged profile and how many input profiles it holds.
pub struct Merged {
    /// The sum.
    pub profile: Profile,
    /// Inputs added into it.
    pub inputs: usize,
    /// The program path it is named after when the sum names none (that of its first set).
    pub path: Vec<u8>,
}

impl Merged {
    /// The program's path for messages: "an unknown program" when there is none.
    pub fn program(&self) -> String {
        let p = self.profile.program.path_lossy();
        if p.is_empty() {
            "an unknown program".to_string()
        } else {
            p
        }
    }
}

/// What [`ByProgram::finish`] gives per program.
pub enum ProgramSum {
    /// All its runs in one profile.
    One(Merged),
    /// Its sets of modules could not be summed (a source file built two ways that no run held
    /// together: a rebuild): one profile per set, and why.
    PerSet {
        /// Why the sum was refused.
        why: ReportError,
        /// One profile per set of modules; the first names the program.
        sets: Vec<Merged>,
    },
}

/// Profiles of many programs, summed per program. Runs of one program with the same modules
/// are summed as they come; the sets of modules of one program when [`finish`](Self::finish)ed.
#[derive(Default)]
pub struct ByProgram {
    /// (merged profile, inputs, first input's name, the parts of processes it holds) per group.
    groups: BTreeMap<Key, (Profile, usize, String, Parts)>,
    /// The group the last profile went to: runs of one program usually come together, and
    /// adding to it needs no metadata decoding (`add_known_modules`).
    last: Option<Key>,
    /// Distinct programs among the groups.
    programs: usize,
}

impl ByProgram {
    /// Nothing merged yet.
    pub fn new() -> ByProgram {
        ByProgram::default()
    }

    /// The number of programs so far.
    pub fn programs(&self) -> usize {
        self.programs
    }

    /// Adds the profile file `path` to its program's group; on error nothing is added.
    pub fn add_file(&mut self, path: &Path) -> Result<(), MergeError> {
        let name = path.display().to_string();
        let unreadable = |error| MergeError::Unreadable {
            name: name.clone(),
            error: Box::new(error),
        };
        let bytes = Profile::file_bytes(path, MAX_PROFILE_BYTES).map_err(unreadable)?;
        if let Some((sum, n, _, parts)) = self.last.as_ref().and_then(|k| self.groups.get_mut(k)) {
            // Same program record; its modules all in the group's (matched by hash).
            if let Some(known) = sum.add_known_modules(&bytes, true).map_err(unreadable)? {
                parts.note(known.delta, known.part);
                *n += 1;
                return Ok(());
            }
        }
        let dir = tally_format::profile::meta_dir(path);
        let p = Profile::read_at(&bytes, Some(dir)).map_err(unreadable)?;
        let mut hashes: Vec<u64> = p.modules.iter().map(|m| m.hash).collect();
        hashes.sort_unstable();
        let key = (program_key(&p.program), p.program.clone(), hashes);
        self.last = Some(key.clone());
        match self.groups.get_mut(&key) {
            None => {
                if !self.groups.keys().any(|k| k.0 == key.0) {
                    self.programs += 1;
                }
                let parts = Parts::of(&p);
                let mut p = p;
                p.pid = 0;
                self.groups.insert(key, (p, 1, name, parts));
            }
            Some((sum, n, _, parts)) => {
                *sum = combine(("merged", sum), &[(&name, &p)])?;
                parts.note(p.delta, p.part());
                *n += 1;
            }
        }
        Ok(())
    }

    /// Per program (in the order of their keys): the sum of its sets of modules, or one
    /// profile per set when that sum is refused. Each is summed as the iterator comes to it.
    pub fn finish(self) -> impl Iterator<Item = ProgramSum> {
        let mut programs: BTreeMap<ProgramKey, Vec<(Profile, usize, String, Parts)>> =
            BTreeMap::new();
        for ((k, _, _), g) in self.groups {
            programs.entry(k).or_default().push(g);
        }
        programs.into_values().map(|sets| {
            let total: usize = sets.iter().map(|s| s.1).sum();
            let mut sum = Sum::new(&sets[0].2, sets[0].0.clone());
            let mut res = Ok(());
            let mut parts = sets[0].3.clone();
            for (p, _, name, more) in &sets[1..] {
                res = sum.add(name, p);
                if res.is_err() {
                    break;
                }
                parts.extend(more);
            }
            // The groups noted the parts of processes as they summed them: every part of whole
            // processes makes the sum their profiles (a group's sum alone names no part).
            sum.set_parts(parts);
            let path = sets[0].0.program.path.clone();
            match res.and_then(|()| sum.finish()) {
                Ok(profile) => ProgramSum::One(Merged {
                    profile,
                    inputs: total,
                    path,
                }),
                Err(why) => ProgramSum::PerSet {
                    why,
                    sets: sets
                        .into_iter()
                        .map(|(mut profile, inputs, _, parts)| {
                            profile.delta &= !parts.whole();
                            Merged {
                                path: profile.program.path.clone(),
                                profile,
                                inputs,
                            }
                        })
                        .collect(),
                },
            }
        })
    }
}

/// File names for merged profiles, distinct among those given out.
#[derive(Default)]
pub struct FileNames {
    taken: HashSet<String>,
}

impl FileNames {
    /// No name given out yet.
    pub fn new() -> FileNames {
        FileNames::default()
    }

    /// `<program>-<build id prefix>[-k].tally`, the program named by the profile's path, else
    /// by [`Merged::path`].
    pub fn name(&mut self, m: &Merged) -> String {
        let program = &m.profile.program;
        let path = if program.path.is_empty() {
            &m.path
        } else {
            &program.path
        };
        let base = Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path))
            .file_name()
            .map(|b| b.to_string_lossy().into_owned())
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| "unknown".into());
        let id = match &program.build_id {
            BuildId::None => format!("{:016x}", m.profile.modules_build_id()),
            b => b.hex(),
        };
        let stem = format!("{base}-{}", &id[..id.len().min(12)]);
        let mut name = format!("{stem}.tally");
        let mut k = 2;
        while !self.taken.insert(name.clone()) {
            name = format!("{stem}-{k}.tally");
            k += 1;
        }
        name
    }
}
