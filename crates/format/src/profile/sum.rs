//! Adding profiles: the counts and path entries of runs of the same build (or of the modules
//! two runs share), and taking out the same-run oracle.

use super::read::{decode_path_entries, le_words, parse};
use super::*;

/// Adds two lists of path entries (the hashed path counts and losses of one module): entries
/// for the same path of the same function, and the losses of one function, become one.
pub fn add_path_entries(a: &[PathEntry], b: &[PathEntry]) -> Option<Vec<PathEntry>> {
    let mut sum: std::collections::BTreeMap<(u32, bool, u64), u64> = Default::default();
    for e in a.iter().chain(b) {
        let k = (e.function, e.kind == PathEntryKind::Lost, e.path);
        let v = sum.entry(k).or_default();
        *v = v.checked_add(e.count)?;
    }
    Some(
        sum.into_iter()
            .map(|((function, lost, path), count)| PathEntry {
                function,
                kind: if lost {
                    PathEntryKind::Lost
                } else {
                    PathEntryKind::Count
                },
                path,
                count,
            })
            .collect(),
    )
}

impl ProfileModule {
    /// Adds another run's counters and path entries of the same module to this one's; `None`
    /// (and `self` unchanged) if a sum overflows 64 bits. With `wrap` (either is a part of a
    /// process that took snapshots, [`Profile::delta`]) counters add modulo 2^64: early-exit
    /// counters of parts hold signed changes in two's complement.
    pub fn add(
        &mut self,
        counters: impl IntoIterator<Item = u64>,
        paths: &[PathEntry],
        wrap: bool,
    ) -> Option<()> {
        let sum = self.summed(counters, paths, wrap)?;
        self.set_sum(sum);
        Some(())
    }

    /// The sums [`ProfileModule::add`] stores.
    fn summed(
        &self,
        counters: impl IntoIterator<Item = u64>,
        paths: &[PathEntry],
        wrap: bool,
    ) -> Option<(Vec<u64>, Option<Vec<PathEntry>>)> {
        let sums = self
            .counters
            .iter()
            .zip(counters)
            .map(|(a, b)| match wrap {
                true => Some(a.wrapping_add(b)),
                false => a.checked_add(b),
            })
            .collect::<Option<Vec<u64>>>()?;
        let paths = if paths.is_empty() && self.paths.is_empty() {
            None
        } else {
            Some(add_path_entries(&self.paths, paths)?)
        };
        Some((sums, paths))
    }

    fn set_sum(&mut self, (counters, paths): (Vec<u64>, Option<Vec<PathEntry>>)) {
        self.counters = counters;
        if let Some(p) = paths {
            self.paths = p;
        }
    }
}

/// What [`Profile::add_known_modules`] added.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Known {
    /// The index (in the sum's modules) of each module record of the added profile.
    pub at: Vec<usize>,
    /// The added profile was a part of a process that took snapshots ([`Profile::delta`]).
    pub delta: bool,
    /// Which part, when it names one ([`Profile::part`]).
    pub part: Option<super::Part>,
}

/// What [`Profile::add_same_build`] did.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Added {
    /// The other profile's counts were added.
    Added,
    /// The other profile holds a module this one does not have (or another module's metadata
    /// under its hash), or names another program: nothing was added.
    OtherBuild,
}

impl Profile {
    /// Adds the counts of the profile `bytes` to this one if every module it holds is one of
    /// this profile's (matched by module hash, metadata byte for byte the same), without
    /// decoding its metadata: what merging many runs of one program costs per run is reading
    /// and checking its bytes. The other profile is checked as [`Profile::read`] checks it (a
    /// corrupt one is an error, and nothing is added); on [`Added::OtherBuild`] (a module this
    /// profile does not have, or programs that do not [`Program::may_combine`]) the caller
    /// reads it in full. With `same_program`, a profile that names another program (or none)
    /// counts as another build.
    pub fn add_same_build(
        &mut self,
        bytes: &[u8],
        same_program: bool,
    ) -> Result<Added, ProfileError> {
        Ok(match self.add_known_modules(bytes, same_program)? {
            Some(_) => Added::Added,
            None => Added::OtherBuild,
        })
    }

    /// [`Profile::add_same_build`], returning what it added ([`Known`]), or `None` for
    /// [`Added::OtherBuild`]. The k-th record of a module hash in `bytes` is added to the k-th
    /// record of that hash here.
    pub fn add_known_modules(
        &mut self,
        bytes: &[u8],
        same_program: bool,
    ) -> Result<Option<Known>, ProfileError> {
        let raw = parse(bytes)?;
        if (same_program && raw.program != self.program)
            || !raw.program.may_combine(&self.program)
            || raw.modules.len() > self.modules.len()
        {
            return Ok(None);
        }
        let Some(at) = self.module_indices(&raw) else {
            return Ok(None);
        };
        let paths = self.checked_paths(&raw, &at)?;
        // Every sum is checked before any is stored: an overflow leaves `self` unchanged.
        let mut sums = Vec::with_capacity(paths.len());
        for ((r, p), &i) in raw.modules.iter().zip(&paths).zip(&at) {
            sums.push(
                self.modules[i]
                    .summed(le_words(&r.counters), p, self.delta || raw.delta)
                    .ok_or(ProfileError::Overflow { index: r.index })?,
            );
        }
        for (&i, sum) in at.iter().zip(sums) {
            self.modules[i].set_sum(sum);
        }
        self.unfinished |= raw.unfinished;
        self.raced |= raw.raced;
        self.signal = self.signal.or(raw.signal);
        self.delta |= raw.delta;
        self.program = self.program.combined(&raw.program);
        self.run = None; // a sum of runs
        Ok(Some(Known {
            at,
            delta: raw.delta,
            part: super::parts::part_of_raw(&raw),
        }))
    }

    /// The index here of each module record of `raw`, matched by hash and metadata byte for
    /// byte (the k-th record of a hash in `raw` to the k-th module of that hash here); `None`
    /// when one has no match.
    fn module_indices(&self, raw: &super::read::RawProfile<'_>) -> Option<Vec<usize>> {
        let mut by_hash: std::collections::HashMap<u64, Vec<usize>> =
            std::collections::HashMap::with_capacity(self.modules.len());
        for (i, m) in self.modules.iter().enumerate().rev() {
            by_hash.entry(m.hash).or_default().push(i);
        }
        let mut at = Vec::with_capacity(raw.modules.len());
        for r in &raw.modules {
            match by_hash.get_mut(&r.hash).and_then(|v| v.pop()) {
                Some(i) if r.same_meta(&self.modules[i].meta_blob) => at.push(i),
                _ => return None,
            }
        }
        Some(at)
    }

    /// Checks each module record of `raw` against the metadata of its module here (`at`, from
    /// [`Profile::module_indices`]) and decodes its path entries.
    fn checked_paths(
        &self,
        raw: &super::read::RawProfile<'_>,
        at: &[usize],
    ) -> Result<Vec<Vec<PathEntry>>, ProfileError> {
        let mut paths = Vec::with_capacity(raw.modules.len());
        for (r, &i) in raw.modules.iter().zip(at) {
            let m = &self.modules[i];
            r.check_sum(&m.meta)?;
            paths.push(decode_path_entries(r.index, r.paths, &m.meta)?);
        }
        Ok(paths)
    }

    /// Replaces this profile's run (counters, path entries, pid, program, flags and run record) with the
    /// profile `bytes` when that one holds exactly this profile's modules (the same number of
    /// module records, each matched by hash and metadata byte for byte), without decoding its
    /// metadata: what `tally export` pays per run of a build it has met. `Ok(false)` (and
    /// `self` unchanged) when the modules differ; a corrupt profile is an error, as
    /// [`Profile::read`] finds it, and leaves `self` unchanged too.
    pub fn load_same_build(&mut self, bytes: &[u8]) -> Result<bool, ProfileError> {
        let raw = parse(bytes)?;
        if raw.modules.len() != self.modules.len() {
            return Ok(false);
        }
        let Some(at) = self.module_indices(&raw) else {
            return Ok(false);
        };
        let paths = self.checked_paths(&raw, &at)?;
        for ((r, p), &i) in raw.modules.iter().zip(paths).zip(&at) {
            let m = &mut self.modules[i];
            m.counters.clear();
            m.counters.extend(le_words(&r.counters));
            m.paths = p;
        }
        self.pid = raw.pid;
        self.program = raw.program;
        self.unfinished = raw.unfinished;
        self.raced = raw.raced;
        self.signal = raw.signal;
        self.delta = raw.delta;
        self.run = raw.run;
        Ok(true)
    }

    /// Takes the same-run oracle modules (`--tally-oracle`, [`ModuleMeta::oracle_for`]) out
    /// of the profile and returns them: what every report reads is the rest.
    pub fn take_oracles(&mut self) -> Vec<ProfileModule> {
        let (oracles, rest) = std::mem::take(&mut self.modules)
            .into_iter()
            .partition(|m| m.meta.oracle_for.is_some());
        self.modules = rest;
        oracles
    }
}
