//! Adding up profiles of one program: [`Sum`], one input at a time, modules matched by
//! module hash; [`combine`] for profiles already read.

use crate::ReportError;
use std::collections::{HashMap, HashSet};
use tally_format::profile::{whole_processes, BuildId, Part, Profile, ProfileError};

/// Adds the counters of `others` into a copy of `first`, refusing profiles of another build
/// ([`Sum`] says how they are matched).
pub fn combine(
    first: (&str, &Profile),
    others: &[(&str, &Profile)],
) -> Result<Profile, ReportError> {
    let mut sum = Sum::new(first.0, first.1.clone());
    for (name, p) in others {
        sum.add(name, p)?;
    }
    sum.finish()
}

/// The sum of profiles of one program (docs/design/profile.md, "Profile container"), built one
/// input at a time. Modules are matched by module hash, not position: the sum holds every
/// module any input holds, each one's counters and path entries added over the inputs that
/// have it. Inputs are of one program when [`Program::may_combine`] says so or they hold the
/// same modules. A source file may be the source of several modules (one file built into two
/// images with other flags) only when some input holds two of them (they ran in one
/// process); otherwise its modules are two builds of it and [`Sum::finish`] refuses the sum,
/// whatever the order of the inputs.
///
/// [`Program::may_combine`]: tally_format::profile::Program::may_combine
pub struct Sum {
    profile: Profile,
    first: String,
    inputs: usize,
    /// Per source file: each module hash seen, with the first input that held it.
    sources: HashMap<String, Vec<(u64, String)>>,
    /// Source files some input held two modules of.
    together: HashSet<String>,
    /// The inputs that are parts of processes that took snapshots.
    parts: Parts,
}

/// Which parts of processes that took snapshots a sum holds ([`Profile::part`]), and whether
/// an input had the delta flag without being one part (a sum of parts, whose parts are not
/// known).
#[derive(Clone, Debug, Default)]
pub struct Parts {
    parts: Vec<Part>,
    partial: bool,
}

impl Parts {
    /// Notes one input: `delta`, its flag, and the part it names.
    pub fn note(&mut self, delta: bool, part: Option<Part>) {
        match part {
            Some(p) => self.parts.push(p),
            None => self.partial |= delta,
        }
    }

    /// The parts of one profile read in full.
    pub fn of(p: &Profile) -> Parts {
        let mut parts = Parts::default();
        parts.note(p.delta, p.part());
        parts
    }

    /// Adds the parts of another sum.
    pub fn extend(&mut self, other: &Parts) {
        self.parts.extend(other.parts.iter().cloned());
        self.partial |= other.partial;
    }

    /// The sum of the inputs is the sum of whole processes (`whole_processes`): their
    /// profiles, early exits counts again, not changes.
    pub fn whole(&self) -> bool {
        !self.partial && whole_processes(&self.parts)
    }
}

impl Sum {
    /// A sum of one profile, `name`d in errors.
    pub fn new(name: &str, profile: Profile) -> Sum {
        let mut s = Sum {
            profile,
            first: name.to_string(),
            inputs: 1,
            sources: HashMap::new(),
            together: HashSet::new(),
            parts: Parts::default(),
        };
        s.parts = Parts::of(&s.profile);
        let all: Vec<usize> = (0..s.profile.modules.len()).collect();
        s.note(name, &all);
        s
    }

    /// Takes `parts` as the parts its inputs hold, for a sum of sums whose parts were noted
    /// as they were summed (`tally merge --by-program`, [`crate::merge::ByProgram`]).
    pub fn set_parts(&mut self, parts: Parts) {
        self.parts = parts;
    }

    /// Records that input `name` held the sum's modules `at`.
    fn note(&mut self, name: &str, at: &[usize]) {
        let mut held: HashMap<&str, u64> = HashMap::new();
        for &i in at {
            let m = &self.profile.modules[i];
            let src = m.meta.source.as_str();
            match held.get(src) {
                Some(&h) if h != m.hash => {
                    self.together.insert(src.to_string());
                }
                Some(_) => {}
                None => {
                    held.insert(src, m.hash);
                }
            }
            match self.sources.get_mut(src) {
                Some(seen) => {
                    if !seen.iter().any(|(h, _)| *h == m.hash) {
                        seen.push((m.hash, name.to_string()));
                    }
                }
                None => {
                    self.sources
                        .insert(src.to_string(), vec![(m.hash, name.to_string())]);
                }
            }
        }
    }

    /// Adds the profile file `bytes` without decoding its metadata when every module it
    /// holds is already in the sum ([`Profile::add_known_modules`]); `Ok(false)` when it is
    /// not (nothing added: read it in full and [`Sum::add`] it).
    #[allow(clippy::result_large_err)] // the reader's own error, as `Profile::read` returns it
    pub fn add_bytes(&mut self, name: &str, bytes: &[u8]) -> Result<bool, ProfileError> {
        match self.profile.add_known_modules(bytes, false)? {
            Some(known) => {
                self.parts.note(known.delta, known.part);
                self.note(name, &known.at);
                self.inputs += 1;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Adds the profile `p`, `name`d in errors; refuses one of another program.
    pub fn add(&mut self, name: &str, p: &Profile) -> Result<(), ReportError> {
        let hashes = |p: &Profile| {
            let mut h: Vec<u64> = p.modules.iter().map(|m| m.hash).collect();
            h.sort_unstable();
            h
        };
        if !p.program.may_combine(&self.profile.program) && hashes(p) != hashes(&self.profile) {
            let show = |q: &tally_format::profile::Program| {
                let path = q.path_lossy();
                format!(
                    "{} (build id {})",
                    if path.is_empty() {
                        "an unknown program"
                    } else {
                        &path
                    },
                    if q.build_id.hex().is_empty() {
                        "unknown".to_string()
                    } else {
                        q.build_id.hex()
                    }
                )
            };
            return Err(ReportError::DifferentBuild {
                first: self.first.clone(),
                other: name.to_string(),
                detail: format!(
                    "another program: {}, not {}",
                    show(&p.program),
                    show(&self.profile.program)
                ),
            });
        }
        // The k-th module of a hash in `p` goes to the k-th one of that hash in the sum
        // (a library with hashed path counts opened twice has two records).
        let mut by_hash: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, m) in self.profile.modules.iter().enumerate().rev() {
            by_hash.entry(m.hash).or_default().push(i);
        }
        let mut at = Vec::with_capacity(p.modules.len());
        let mut sums = Vec::with_capacity(p.modules.len());
        for b in &p.modules {
            match by_hash.get_mut(&b.hash).and_then(|v| v.pop()) {
                Some(i) => {
                    let mut a = self.profile.modules[i].clone();
                    a.add(
                        b.counters.iter().copied(),
                        &b.paths,
                        self.profile.delta || p.delta,
                    )
                    .ok_or(ReportError::Overflow)?;
                    at.push(Some(i));
                    sums.push(a);
                }
                None => {
                    at.push(None);
                    sums.push(b.clone());
                }
            }
        }
        // Stored only once every sum fits: an overflow leaves the sum unchanged.
        let mut noted = Vec::with_capacity(at.len());
        for (i, m) in at.into_iter().zip(sums) {
            match i {
                Some(i) => {
                    self.profile.modules[i] = m;
                    noted.push(i);
                }
                None => {
                    self.profile.modules.push(m);
                    noted.push(self.profile.modules.len() - 1);
                }
            }
        }
        self.note(name, &noted);
        self.parts.note(p.delta, p.part());
        self.profile.unfinished |= p.unfinished;
        self.profile.raced |= p.raced;
        self.profile.signal = self.profile.signal.or(p.signal);
        self.profile.delta |= p.delta;
        self.profile.run = None; // a sum of runs
        self.profile.program = self.profile.program.combined(&p.program);
        self.inputs += 1;
        Ok(())
    }

    /// The sum: refused when a source file has modules of two builds (see [`Sum`]); the
    /// modules of a sum of several inputs in ascending hash (as the runtime writes them), a
    /// module-hash build id recomputed from them.
    pub fn finish(mut self) -> Result<Profile, ReportError> {
        let mut conflicts: Vec<(&String, &Vec<(u64, String)>)> = self
            .sources
            .iter()
            .filter(|(src, seen)| seen.len() > 1 && !self.together.contains(*src))
            .collect();
        conflicts.sort();
        if let Some((src, seen)) = conflicts.first() {
            return Err(ReportError::DifferentBuild {
                first: seen[0].1.clone(),
                other: seen[1].1.clone(),
                detail: format!("module {src} differs, and no profile holds both of its builds"),
            });
        }
        // Every part of whole processes: the sum is their profiles, early exits counts again.
        if self.profile.delta && self.parts.whole() {
            self.profile.delta = false;
        }
        if self.inputs > 1 {
            self.profile.modules.sort_by_key(|m| m.hash);
            self.profile.pid = 0;
            if let BuildId::Modules(_) = self.profile.program.build_id {
                self.profile.program.build_id = BuildId::Modules(self.profile.modules_build_id());
            }
        }
        Ok(self.profile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tally_format::profile::{ProfileModule, Program};
    use tally_format::{Mode, ModuleMeta};

    /// A module of `source` with `n` counters; `variant` changes its metadata (another build).
    fn module(source: &str, n: u32, variant: &str, counters: Vec<u64>) -> ProfileModule {
        let meta = ModuleMeta {
            source: source.into(),
            producer: format!("tally test {variant}"),
            mode: Mode::Edge,
            num_counters: n,
            files: vec![source.into()],
            functions: vec![],
            source_fns: vec![],
            skipped: vec![],
            mode_meta: Default::default(),
            oracle_for: None,
            probe_descs: Vec::new(),
            probes_before_optimization: false,
        };
        ProfileModule::new(meta, counters)
    }

    fn profile(path: &str, id: BuildId, modules: Vec<ProfileModule>) -> Profile {
        Profile {
            delta: false,
            pid: 1,
            program: Program {
                path: path.as_bytes().to_vec(),
                build_id: id,
            },
            modules,
            unfinished: false,
            raced: false,
            signal: None,
            run: None,
        }
    }

    fn sum(inputs: &[(&str, &Profile)]) -> Result<Profile, ReportError> {
        let mut s = Sum::new(inputs[0].0, inputs[0].1.clone());
        for (n, p) in &inputs[1..] {
            s.add(n, p)?;
        }
        s.finish()
    }

    fn counts(p: &Profile) -> Vec<(u64, Vec<u64>)> {
        p.modules
            .iter()
            .map(|m| (m.hash, m.counters.clone()))
            .collect()
    }

    #[test]
    fn the_union_of_modules_in_any_order() {
        let gnu = BuildId::Gnu(vec![1, 2]);
        let a = profile(
            "/x",
            gnu.clone(),
            vec![
                module("main.c", 1, "", vec![1]),
                module("p.c", 2, "1", vec![1, 2]),
            ],
        );
        let b = profile(
            "/y",
            gnu.clone(),
            vec![
                module("q.c", 1, "", vec![5]),
                module("main.c", 1, "", vec![3]),
            ],
        );
        let ab = sum(&[("a", &a), ("b", &b)]).unwrap();
        let ba = sum(&[("b", &b), ("a", &a)]).unwrap();
        assert_eq!(ab, ba);
        assert_eq!(ab.modules.len(), 3);
        assert!(ab.modules.windows(2).all(|w| w[0].hash < w[1].hash));
        let main = ab
            .modules
            .iter()
            .find(|m| m.meta.source == "main.c")
            .unwrap();
        assert_eq!(main.counters, vec![4]);
        // Same GNU id, two paths: the id stays, the path goes.
        assert_eq!(ab.program.build_id, gnu);
        assert!(ab.program.path.is_empty());
        assert_eq!(ab.pid, 0);
    }

    #[test]
    fn programs_by_gnu_id_else_path() {
        let m = || vec![module("main.c", 1, "", vec![1])];
        let other = || {
            vec![
                module("main.c", 1, "", vec![1]),
                module("o.c", 1, "", vec![2]),
            ]
        };
        let g1 = profile("/x", BuildId::Gnu(vec![1]), m());
        let g2 = profile("/x", BuildId::Gnu(vec![2]), other());
        let e = sum(&[("g1", &g1), ("g2", &g2)]).unwrap_err().to_string();
        assert!(
            e.contains("different build") && e.contains("another program"),
            "{e}"
        );
        // The same modules: combined whatever the programs say.
        let g3 = profile("/z", BuildId::Gnu(vec![3]), m());
        assert!(sum(&[("g1", &g1), ("g3", &g3)]).is_ok());
        // Without GNU ids: by path; the module-hash id is recomputed for the union.
        let k1 = profile("/x", BuildId::Modules(1), m());
        let k2 = profile("/x", BuildId::Modules(2), other());
        let s = sum(&[("k1", &k1), ("k2", &k2)]).unwrap();
        assert_eq!(s.program.build_id, BuildId::Modules(s.modules_build_id()));
        assert_eq!(s.program.path, b"/x");
        let k3 = profile("/y", BuildId::Modules(2), other());
        assert!(sum(&[("k1", &k1), ("k3", &k3)]).is_err());
    }

    #[test]
    fn two_builds_of_a_file_only_when_one_input_holds_both() {
        let p1 = || module("p.c", 1, "1", vec![1]);
        let p2 = || module("p.c", 1, "2", vec![2]);
        let id = || BuildId::Gnu(vec![9]);
        let only1 = profile("/h", id(), vec![p1()]);
        let only2 = profile("/h", id(), vec![p2()]);
        let both = profile("/h", id(), vec![p2(), p1()]);
        // A rebuild: refused naming the file, in either order.
        for inputs in [
            [("a", &only1), ("b", &only2)],
            [("b", &only2), ("a", &only1)],
        ] {
            let e = sum(&inputs).unwrap_err().to_string();
            assert!(
                e.contains("different build") && e.contains("module p.c differs"),
                "{e}"
            );
        }
        // Held together by one run: two modules, wherever that run comes.
        for order in [
            [("a", &only1), ("b", &only2), ("c", &both)],
            [("c", &both), ("a", &only1), ("b", &only2)],
        ] {
            let s = sum(&order).unwrap();
            assert_eq!(s.modules.len(), 2);
            let mut c: Vec<u64> = counts(&s).into_iter().map(|x| x.1[0]).collect();
            c.sort();
            assert_eq!(c, vec![2, 4]);
        }
    }

    #[test]
    fn an_overflow_leaves_the_sum_unchanged() {
        let a = profile(
            "/h",
            BuildId::None,
            vec![module("a.c", 1, "", vec![u64::MAX])],
        );
        let mut s = Sum::new("a", a.clone());
        assert!(matches!(s.add("b", &a), Err(ReportError::Overflow)));
        assert_eq!(s.finish().unwrap(), a);
    }
}
