//! # tally-report
//!
//! Turns a profile (metadata + counters, see tally-format) into exact block and edge counts:
//! every function's graph is rebuilt from its metadata, each counter value is put on the edge or
//! block it measures, and the rest is derived — by the spanning-tree propagation of Ball & Larus
//! 1994 Fig. 6 for the edge modes, by solving the flow equations for `blocks-naive`. Kirchhoff's
//! law is then checked at every vertex; a violation is an error naming the function, never clamped.
//!
//! The metadata it reads has been validated by tally-format's decoder (every index in range,
//! see `tally_format::validate`); path numberings are checked here, where they are recomputed,
//! against the fingerprint the instrumenter stored (`PathMeta::numbering`).
//!
//! [`analyze`] does the arithmetic; [`render`] prints text and JSON. [`source`] turns the
//! counts into line, branch and function counts, which [`show`] prints as annotated
//! source and a per-line report, and [`lcov`] and [`cobertura`] export; [`html`] renders the static site of `tally html`.
#![deny(missing_docs)]

pub mod check;
pub mod cobertura;
pub mod diff;
pub mod html;
pub mod ipaths;
pub mod lcov;
mod modes;
pub mod names;
pub mod placements;
pub mod render;
pub mod show;
pub mod source;
#[cfg(any(test, feature = "testing"))]
pub mod trace;
pub mod tracepaths;
pub mod wtrace;

use modes::{ReportSolveError, Solved};
use std::collections::{HashMap, HashSet};
use tally_format::profile::{BuildId, Profile, ProfileError};
use tally_format::{Linkage, Loc, Mode, ModuleMeta};
use thiserror::Error;

/// Why a profile cannot be reported.
#[derive(Debug, Error)]
pub enum ReportError {
    /// Counts that violate the flow law or come out negative, or paths that do not pair up.
    #[error("inconsistent counts in function {function} ({source_file}): {error}")]
    Flow {
        /// The function.
        function: String,
        /// The module's source file.
        source_file: String,
        /// What went wrong.
        error: String,
    },
    /// Metadata whose graph cannot be rebuilt.
    #[error("bad metadata for function {function} ({source_file}): {message}")]
    Meta {
        /// The function.
        function: String,
        /// The module's source file.
        source_file: String,
        /// What went wrong.
        message: String,
    },
    /// Several profiles that do not come from the same build.
    #[error("{other} was written by a different build than {first} ({detail}); profiles can only be combined when they come from the same binary")]
    DifferentBuild {
        /// The first profile's name.
        first: String,
        /// The mismatching profile's name.
        other: String,
        /// Which module differs.
        detail: String,
    },
    /// A counter sum that does not fit in 64 bits.
    #[error("counter overflow while adding profiles")]
    Overflow,
}

/// A block of a function, with its count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockCount {
    /// Block id (graph vertex id; stable across modes for the same build inputs).
    pub id: u32,
    /// Times the block was entered; `None` if the profile does not determine it.
    pub count: Option<u64>,
    /// Source file, if known.
    pub file: Option<String>,
    /// Source line, 0 if unknown.
    pub line: u32,
}

/// An edge of a function, with its count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeCount {
    /// Edge id.
    pub id: u32,
    /// Source block, `None` for EXIT.
    pub from: Option<u32>,
    /// Target block, `None` for EXIT.
    pub to: Option<u32>,
    /// Edge kind name: `entry`, `flow`, `return`, `early-exit`, `reentry`.
    pub kind: &'static str,
    /// Times the edge was traversed; `None` if the profile does not determine it.
    pub count: Option<u64>,
}

/// Exact counts of one function.
#[derive(Clone, Debug)]
pub struct FunctionReport {
    /// Linkage name.
    pub name: String,
    /// Demangled name (same as `name` for C).
    pub demangled: String,
    /// Source file of the definition.
    pub file: Option<String>,
    /// Line of the definition.
    pub line: u32,
    /// Source file of the module it came from.
    pub module: String,
    /// Instrumentation mode of its module.
    pub mode: Mode,
    /// Graph hash.
    pub cfg_hash: u64,
    /// Number of calls.
    pub entry_count: u64,
    /// Sum of all block counts (a measure of the work done in the function).
    pub block_executions: u64,
    /// Blocks in id order.
    pub blocks: Vec<BlockCount>,
    /// Edges in id order.
    pub edges: Vec<EdgeCount>,
    /// Number of counters the function carried.
    pub counters: usize,
    /// Number of modules whose copies were merged into this entry (linkonce functions).
    pub copies: usize,
    /// Path mode: the function's path profile.
    pub paths: Option<PathProfile>,
    /// Events mode: the function's events.
    pub events: Option<FunctionEvents>,
    /// Why the function's counts could not be recovered (they break the flow law: a
    /// multi-threaded program built without `--tally-atomic`, a thread still running at exit,
    /// or a damaged profile); its counts are then unknown. `None` when they are exact.
    pub inconsistent: Option<String>,
    /// The function's source lines, inline scopes and branches as its metadata records them
    /// (read by [`source::model`]).
    pub source: source::FunctionSource,
}

/// Events of one function (events mode).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionEvents {
    /// Events of its completed activations, callees included.
    pub inclusive: u64,
    /// `inclusive` minus the events of the completed calls it made.
    pub exclusive: u64,
    /// Events one execution of each block contributes.
    pub per_block: Vec<u64>,
    /// Call sites: block, direct callee, events of the completed calls (callees included).
    pub calls: Vec<CallSiteEvents>,
}

/// A call site and the events of its completed calls: (block, direct callee, events).
pub type CallSiteEvents = (u32, Option<String>, u64);

/// The path profile of one function (path mode).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathProfile {
    /// Number of potential paths.
    pub potential: u128,
    /// Executed paths and their counts, by path number.
    pub counts: Vec<(u128, u64)>,
    /// Increments the runtime lost for lack of memory (counts are then a lower bound).
    pub lost: u64,
    /// Cut edges (besides back edges) that end paths.
    pub cuts: Vec<u32>,
    /// Whether the counts came from the runtime's hash table (else the counter array).
    pub hashed: bool,
    /// The executed paths spelled out, in path-number order.
    pub rows: Vec<PathRow>,
}

/// One executed path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRow {
    /// Path number.
    pub number: u128,
    /// Times it ran.
    pub count: u64,
    /// Its blocks, in order.
    pub blocks: Vec<u32>,
    /// How it starts: `entry`, `back-edge`, `reentry`, `cut`.
    pub start: &'static str,
    /// How it ends: `return`, `early-exit`, `back-edge`, `cut`.
    pub end: &'static str,
}

/// A function left uninstrumented.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Linkage name.
    pub name: String,
    /// Module source.
    pub module: String,
    /// Why.
    pub reason: String,
}

/// The analysis of a profile.
#[derive(Clone, Debug)]
pub struct Report {
    /// The program that wrote the profile (unknown for old containers, or when profiles of
    /// several programs were combined).
    pub program: tally_format::profile::Program,
    /// Modes present (usually one).
    pub modes: Vec<Mode>,
    /// Module sources.
    pub modules: Vec<String>,
    /// Functions, hottest first (block executions, then entries, then name).
    pub functions: Vec<FunctionReport>,
    /// Uninstrumented functions.
    pub skipped: Vec<Skipped>,
    /// Total counters in the profile.
    pub counters: usize,
    /// The sum of every counter's value, as stored (what the inline increments and the
    /// runtime's exit-time charges added up to; in events mode counter 0 holds the exiting
    /// thread's total).
    pub counter_sum: u128,
    /// The sum of the counts of every hashed path entry (path mode), lost increments included.
    pub path_entry_sum: u128,
    /// Events mode: what an event is, and the exiting thread's exact total.
    pub events: Option<(String, u64)>,
    /// The profile is an unfinished continuous-mode profile (the program was killed): the
    /// functions whose counts break the flow law are *interrupted* (active at the kill) rather
    /// than inconsistent, and functions active at the kill may also have partial counts that
    /// balance (docs/design/processes.md, "Continuous mode").
    pub unfinished: bool,
    /// Code built without atomic increments ran in a process that went multi-threaded (the
    /// profile's `raced` flag): its counts may have lost updates, balanced or not.
    pub raced: bool,
    /// The profile was written by the fatal-signal handler for this signal: functions active
    /// at that moment, in any thread, may have inexact counts (docs/design/processes.md, "Fatal
    /// signals and threads at exit").
    pub signal: Option<u32>,
    /// Interprocedural paths (modes `ipath`, `ipath-piecewise`), per module in path-number
    /// order.
    pub ipaths: Vec<IpathPath>,
}

impl Report {
    /// What a function whose counts could not be recovered is called: `"interrupted"` in an
    /// unfinished continuous profile (it was active when the program was killed), else
    /// `"inconsistent"`.
    pub fn unrecovered_word(&self) -> &'static str {
        if self.unfinished {
            "interrupted"
        } else {
            "inconsistent"
        }
    }

    /// The stderr lines (one per cause) that say why counts of this report may be inexact
    /// although they balance: the profile's fatal signal, then its `raced` flag (racing threads
    /// on non-atomic code); empty when neither applies (an unfinished profile has its own
    /// line).
    pub fn caveats(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(sig) = self.signal {
            out.push(format!(
                "the profile was written at a fatal signal ({}): functions active at that moment (in any thread) may have inexact counts, named below as inconsistent when their flow does not balance; every other function is exact",
                signal_name(sig)
            ));
        }
        if self.raced {
            out.push(
                "code built without atomic increments ran in a multi-threaded process: its counts may have lost updates (even where they balance); rebuild with -pthread or --tally-atomic".to_string(),
            );
        }
        out
    }

    /// The functions whose counts could not be recovered.
    pub fn inconsistent(&self) -> impl Iterator<Item = &FunctionReport> {
        self.functions.iter().filter(|f| f.inconsistent.is_some())
    }
}

/// A signal's name (`SIGSEGV`) and number, as Linux numbers them.
pub fn signal_name(sig: u32) -> String {
    const NAMES: [&str; 32] = [
        "",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match NAMES.get(sig as usize) {
        Some(n) if !n.is_empty() => format!("{n}, signal {sig}"),
        _ => format!("signal {sig}"),
    }
}

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
        };
        let all: Vec<usize> = (0..s.profile.modules.len()).collect();
        s.note(name, &all);
        s
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
            Some(at) => {
                self.note(name, &at);
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
                    a.add(b.counters.iter().copied(), &b.paths)
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
        self.profile.unfinished |= p.unfinished;
        self.profile.raced |= p.raced;
        self.profile.signal = self.profile.signal.or(p.signal);
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

fn kind_name(k: tally_graph::EdgeKind) -> &'static str {
    use tally_graph::EdgeKind::*;
    match k {
        Entry => "entry",
        Flow => "flow",
        Return => "return",
        EarlyExit => "early-exit",
        Reentry => "reentry",
    }
}

fn loc_file(meta: &ModuleMeta, l: &Loc) -> Option<String> {
    l.file.and_then(|i| meta.files.get(i.index()).cloned())
}

/// Demangles an Itanium C++ name; returns the input for C names.
pub fn demangle(name: &str) -> String {
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(s) = sym.demangle() {
                return s;
            }
        }
    }
    name.to_string()
}

/// Computes exact counts for every function of a profile.
pub fn analyze(profile: &Profile) -> Result<Report, ReportError> {
    analyze_counted(profile, &HashMap::new())
}

/// Edge and block counts measured outside the profile's counters (a witness trace,
/// [`wtrace::report`]), by `(module index, function index)`: `(edges, blocks)` in id order.
pub type Counted = HashMap<(usize, usize), (Vec<u64>, Vec<u64>)>;

/// [`analyze`], taking the counts of the functions in `counted` from there instead of from
/// their counters.
pub fn analyze_counted(profile: &Profile, counted: &Counted) -> Result<Report, ReportError> {
    analyze_counted_with(profile, counted, &HashMap::new())
}

/// [`analyze_counted`] with the graphs of some functions already built from their metadata
/// (by `(module index, function index)`), which it then does not build again.
pub fn analyze_counted_with(
    profile: &Profile,
    counted: &Counted,
    cfgs: &HashMap<(usize, usize), &tally_graph::Cfg>,
) -> Result<Report, ReportError> {
    let mut functions: Vec<FunctionReport> = Vec::new();
    // (name, cfg hash) -> index in `functions`, for merging linkonce copies.
    let mut linkonce: HashMap<(String, u64), usize> = HashMap::new();
    let mut skipped = Vec::new();
    let mut modes = Vec::new();
    let mut counters_total = 0;
    let mut counter_sum = 0u128;
    let mut path_entry_sum = 0u128;
    let mut events_total: Option<(String, u64)> = None;
    let mut ipaths = Vec::new();
    for (mi, m) in profile.modules.iter().enumerate() {
        let meta = &m.meta;
        let tables = source::Tables::of(meta);
        if let Some(kind) = &meta.event_kind {
            let t = m.counters.first().copied().unwrap_or(0);
            let best = events_total.as_ref().map_or(0, |e| e.1);
            events_total = Some((kind.clone(), t.max(best)));
        }
        if !modes.contains(&meta.mode) {
            modes.push(meta.mode);
        }
        counters_total += m.counters.len();
        counter_sum += m.counters.iter().map(|&c| u128::from(c)).sum::<u128>();
        path_entry_sum += m.paths.iter().map(|p| u128::from(p.count)).sum::<u128>();
        for s in &meta.skipped {
            skipped.push(Skipped {
                name: s.name.clone(),
                module: meta.source.clone(),
                reason: s.reason.clone(),
            });
        }
        // Interprocedural path modes: the set is solved as a whole.
        let mut ip_solved: HashMap<usize, Result<modes::Solved, String>> = HashMap::new();
        if let Some(ip) = &meta.ipath {
            let owner = ip.table_owner as usize;
            let meta_err = |message: String| ReportError::Meta {
                function: "(the interprocedural set)".into(),
                source_file: one_line(&meta.source),
                message,
            };
            let pm = meta
                .functions
                .get(owner)
                .and_then(|f| f.paths.as_ref())
                .ok_or_else(|| meta_err("the path table's owner has no paths".into()))?;
            let mut pp = path_profile(pm, &[], &[], &m.paths, owner);
            // Paths counted in counter arrays; a path may have counts in both: they add up.
            pp.counts
                .extend(ip.array_counts(&meta.functions, &m.counters));
            pp.counts.sort_unstable();
            pp.counts.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    kept.1 = kept.1.saturating_add(later.1);
                }
                same
            });
            match modes::ipath::solve_module(meta, ip, &pp.counts, pp.lost) {
                Ok(solved) => {
                    for (fi, s) in solved.functions {
                        ip_solved.insert(fi, Ok(s));
                    }
                    ipaths.extend(solved.rows.iter().map(|r| ipath_text(meta, ip.total, r)));
                }
                Err(
                    e @ (ReportSolveError::Numbering { .. }
                    | ReportSolveError::Fingerprint { .. }
                    | ReportSolveError::Meta(_)),
                ) => return Err(meta_err(e.to_string())),
                Err(e) => {
                    for f in &ip.functions {
                        ip_solved.insert(f.function as usize, Err(one_line(&e.to_string())));
                    }
                }
            }
        }
        for (fi, f) in meta.functions.iter().enumerate() {
            let cfg = match cfgs.get(&(mi, fi)) {
                Some(&c) => std::borrow::Cow::Borrowed(c),
                None => std::borrow::Cow::Owned(f.cfg().map_err(|e| ReportError::Meta {
                    function: one_line(&f.name),
                    source_file: one_line(&meta.source),
                    message: e.to_string(),
                })?),
            };
            let cfg = cfg.as_ref();
            // In range: validated when the metadata was decoded (and the counters read).
            let base = f.counter_base.index();
            let vals = m
                .counters
                .get(base..base + f.counters.len())
                .ok_or_else(|| ReportError::Meta {
                    function: one_line(&f.name),
                    source_file: one_line(&meta.source),
                    message: "its counters lie outside the module's".into(),
                })?;
            let mut paths = f
                .paths
                .as_ref()
                .map(|pm| path_profile(pm, &f.counters, vals, &m.paths, fi));
            // Counts that break the flow law mark the function inconsistent (its counts unknown,
            // the reason kept); the rest of the profile is still reported.
            let mut inconsistent = None;
            let result = match ip_solved.remove(&fi) {
                Some(Ok(s)) => Ok(s),
                Some(Err(why)) => {
                    inconsistent = Some(why);
                    Ok(modes::Solved::unknown(cfg))
                }
                None => match counted.get(&(mi, fi)) {
                    Some((e, b)) if e.len() == cfg.num_edges() && b.len() == cfg.num_blocks() => {
                        Ok(modes::Solved::exact(
                            tally_graph::IdVec::from_vec(e.clone()),
                            tally_graph::IdVec::from_vec(b.clone()),
                        ))
                    }
                    _ => modes::of(meta.mode).solve(cfg, f, vals, paths.as_ref()),
                },
            };
            let mut solved = match result {
                Ok(s) => s,
                // The metadata's numbering is not ours: a metadata error, not a count.
                Err(
                    error @ (ReportSolveError::Numbering { .. }
                    | ReportSolveError::Fingerprint { .. }),
                ) => {
                    return Err(ReportError::Meta {
                        function: one_line(&demangle(&f.name)),
                        source_file: one_line(&meta.source),
                        message: error.to_string(),
                    })
                }
                Err(error) => {
                    inconsistent = Some(one_line(&error.to_string()));
                    modes::Solved::unknown(cfg)
                }
            };
            let events = f.events.as_ref().map(|em| {
                let at = |i: tally_format::CounterIdx| vals.get(i.index()).copied().unwrap_or(0);
                let calls: Vec<CallSiteEvents> = em
                    .calls
                    .iter()
                    .map(|c| (c.block.0, c.callee.clone(), at(c.counter)))
                    .collect();
                let inclusive = at(em.inclusive);
                let inner = calls.iter().fold(0u64, |a, c| a.saturating_add(c.2));
                FunctionEvents {
                    inclusive,
                    exclusive: inclusive.saturating_sub(inner),
                    per_block: em.per_block.clone(),
                    calls,
                }
            });
            if let (Some(p), Some(rows)) = (&mut paths, solved.rows.take()) {
                p.rows = rows;
            }
            let key = (f.name.clone(), f.cfg_hash);
            if f.linkage == Linkage::Linkonce {
                if let Some(&i) = linkonce.get(&key) {
                    let r = &mut functions[i];
                    if r.mode == meta.mode {
                        // The copies are named after the first module by source path, not
                        // by their order in the profile (ascending hash: another build of
                        // the same sources names another module first).
                        if meta.source < r.module {
                            r.module = meta.source.clone();
                        }
                        add_into(r, &solved);
                        if r.inconsistent.is_none() {
                            r.inconsistent = inconsistent;
                        }
                        if let (Some(mine), Some(theirs)) = (&mut r.paths, &paths) {
                            add_paths(mine, theirs).ok_or(ReportError::Overflow)?;
                        }
                        r.copies += 1;
                        continue;
                    }
                }
            }
            let blocks = cfg
                .blocks()
                .map(|n| {
                    let l = &f.blocks[n.index()];
                    BlockCount {
                        id: n.index() as u32,
                        count: solved.blocks[n],
                        file: loc_file(meta, l),
                        line: l.line,
                    }
                })
                .collect();
            let edges = cfg
                .edges()
                .map(|(id, e)| EdgeCount {
                    id: id.index() as u32,
                    from: (!cfg.is_exit(e.src)).then_some(e.src.index() as u32),
                    to: (!cfg.is_exit(e.dst)).then_some(e.dst.index() as u32),
                    kind: kind_name(e.kind),
                    count: solved.edges[id],
                })
                .collect();
            let mut r = FunctionReport {
                name: f.name.clone(),
                demangled: demangle(&f.name),
                file: loc_file(meta, &f.loc),
                line: f.loc.line,
                module: meta.source.clone(),
                mode: meta.mode,
                cfg_hash: f.cfg_hash,
                entry_count: 0,
                block_executions: 0,
                blocks,
                edges,
                counters: f.counters.len(),
                copies: 1,
                paths,
                events,
                inconsistent,
                source: source::FunctionSource::new(&tables, &f.source),
            };
            finish(&mut r);
            if f.linkage == Linkage::Linkonce {
                linkonce.insert(key, functions.len());
            }
            functions.push(r);
        }
    }
    functions.sort_by(|a, b| {
        b.block_executions
            .cmp(&a.block_executions)
            .then(b.entry_count.cmp(&a.entry_count))
            .then(a.name.cmp(&b.name))
            .then(a.module.cmp(&b.module))
    });
    Ok(Report {
        program: profile.program.clone(),
        modes,
        modules: profile
            .modules
            .iter()
            .map(|m| m.meta.source.clone())
            .collect(),
        functions,
        skipped,
        counters: counters_total,
        counter_sum,
        path_entry_sum,
        events: events_total,
        unfinished: profile.unfinished,
        raced: profile.raced,
        signal: profile.signal,
        ipaths,
    })
}

/// An interprocedural path with its functions named and its blocks located.
fn ipath_text(meta: &ModuleMeta, potential: u128, r: &modes::ipath::IpathRow) -> IpathPath {
    use modes::ipath::IpathStep;
    let name = |f: u32| meta.functions[f as usize].name.clone();
    let at = |function: u32, block: u32, site: u32, callee: Option<u32>| IpathCallStep {
        caller: name(function),
        block,
        site,
        callee: callee.map(name),
    };
    let steps = r
        .steps
        .iter()
        .map(|s| match *s {
            IpathStep::Block { function, block } => {
                let f = &meta.functions[function as usize];
                let l = f.blocks.get(block as usize);
                IpathPathStep::Block {
                    function: f.name.clone(),
                    demangled: demangle(&f.name),
                    block,
                    file: l.and_then(|l| loc_file(meta, l)),
                    line: l.map_or(0, |l| l.line),
                }
            }
            IpathStep::Call {
                function,
                block,
                site,
                callee,
                matched,
            } => IpathPathStep::Call {
                call: at(function, block, site, Some(callee)),
                matched,
            },
            IpathStep::Return {
                function,
                block,
                site,
                callee,
                matched,
            } => IpathPathStep::Return {
                call: at(function, block, site, Some(callee)),
                matched,
            },
            IpathStep::Summary {
                function,
                block,
                site,
                callee,
            } => IpathPathStep::Summary(at(function, block, site, callee)),
            IpathStep::Restart => IpathPathStep::Restart,
            IpathStep::Reentry => IpathPathStep::Reentry,
            IpathStep::Cut => IpathPathStep::Cut,
            IpathStep::EarlyExit => IpathPathStep::EarlyExit,
        })
        .collect();
    IpathPath {
        module: meta.source.clone(),
        mode: meta.mode,
        potential,
        number: r.number,
        count: r.count,
        start: r.start,
        end: r.end,
        context: r.context,
        steps,
    }
}

/// An interprocedural path (modes `ipath`, `ipath-piecewise`) as `tally paths` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpathPath {
    /// The module (source file) whose set it belongs to.
    pub module: String,
    /// `Ipath` (context paths) or `IpathPiecewise`.
    pub mode: Mode,
    /// The number of paths of the module's set.
    pub potential: u128,
    /// Path number.
    pub number: u128,
    /// Times it ran.
    pub count: u64,
    /// How it starts: `entry`, `back-edge`, `cut` or `reentry`.
    pub start: &'static str,
    /// How it ends: `return`, `back-edge`, `cut` or `early-exit`.
    pub end: &'static str,
    /// The number of leading steps that are its calling context (they ran as part of an
    /// earlier path; context mode, after a back or cut edge).
    pub context: usize,
    /// Blocks, calls, returns, restarts and cuts, in order.
    pub steps: Vec<IpathPathStep>,
}

/// A call site in an [`IpathPathStep`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpathCallStep {
    /// The calling function (its symbol).
    pub caller: String,
    /// The caller's block holding the call.
    pub block: u32,
    /// The call site's index in the caller's list of call sites.
    pub site: u32,
    /// The callee, if known (unknown: a call through a pointer or out of the set).
    pub callee: Option<String>,
}

/// A step of an [`IpathPath`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IpathPathStep {
    /// A block.
    Block {
        /// The function's symbol.
        function: String,
        /// Demangled.
        demangled: String,
        /// Block id (as in `tally report`).
        block: u32,
        /// Its source file.
        file: Option<String>,
        /// Its line (0: unknown).
        line: u32,
    },
    /// A call into the callee's entry block; `matched`: the path returns from it too.
    Call {
        /// The site.
        call: IpathCallStep,
        /// The path also takes the return.
        matched: bool,
    },
    /// A return to the caller's site; `matched`: the path took the call too.
    Return {
        /// The site.
        call: IpathCallStep,
        /// The path took the call.
        matched: bool,
    },
    /// A call whose callee's paths are separate (a summary edge).
    Summary(IpathCallStep),
    /// The path starts after a back or cut edge.
    Restart,
    /// The path starts where a `longjmp` came back.
    Reentry,
    /// The path ends at a back or cut edge.
    Cut,
    /// The path ends where its frame was abandoned.
    EarlyExit,
}

impl std::fmt::Display for IpathPathStep {
    /// `function:bN (file:line)` for a block; `call`, `return` (with what is unmatched said),
    /// and the markers in parentheses.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IpathPathStep::Block {
                demangled,
                block,
                file,
                line,
                ..
            } => write!(
                f,
                "{demangled}:b{block} ({}:{line})",
                file.as_deref().unwrap_or_default()
            ),
            IpathPathStep::Call { matched: true, .. } => f.write_str("call"),
            IpathPathStep::Call { matched: false, .. } => f.write_str("call (still pending)"),
            IpathPathStep::Return { matched: true, .. } => f.write_str("return"),
            IpathPathStep::Return {
                matched: false,
                call,
            } => write!(
                f,
                "return (unmatched: to {}:b{})",
                demangle(&call.caller),
                call.block
            ),
            IpathPathStep::Summary(IpathCallStep {
                callee: Some(q), ..
            }) => write!(f, "(summary call of {})", demangle(q)),
            IpathPathStep::Summary(_) => f.write_str("(summary call)"),
            IpathPathStep::Restart => f.write_str("(restart)"),
            IpathPathStep::Reentry => f.write_str("(reentry)"),
            IpathPathStep::Cut => f.write_str("(back/cut edge)"),
            IpathPathStep::EarlyExit => f.write_str("(early exit)"),
        }
    }
}

/// The path counts of function `fi` of a module: from its counter slice (array storage) or
/// the module's path entries plus its counters, each a [`Probe::Path`](tally_format::Probe)
/// (hash storage: the counter slices of narrow path ends).
fn path_profile(
    pm: &tally_format::PathMeta,
    probes: &[tally_format::Probe],
    counters: &[u64],
    entries: &[tally_format::profile::PathEntry],
    fi: usize,
) -> PathProfile {
    use tally_format::profile::PathEntryKind;
    let mut counts = Vec::new();
    let mut lost = 0u64;
    match pm.storage {
        tally_format::PathStorage::Array => {
            for (p, &c) in counters.iter().enumerate() {
                if c > 0 {
                    counts.push((p as u128, c));
                }
            }
        }
        tally_format::PathStorage::Hash { .. } => {
            for e in entries.iter().filter(|e| e.function as usize == fi) {
                match e.kind {
                    PathEntryKind::Count => counts.push((u128::from(e.path), e.count)),
                    PathEntryKind::Lost => lost = lost.saturating_add(e.count),
                }
            }
            for (probe, &c) in probes.iter().zip(counters) {
                if let (tally_format::Probe::Path(p), true) = (probe, c > 0) {
                    counts.push((u128::from(*p), c));
                }
            }
            // A path may have entries from the home table, the overflow table and a counter
            // slice: they add up.
            counts.sort_unstable();
            counts.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    kept.1 = kept.1.saturating_add(later.1);
                }
                same
            });
        }
    }
    PathProfile {
        potential: pm.num_paths,
        counts,
        lost,
        cuts: pm.cuts.iter().map(|e| e.0).collect(),
        hashed: pm.storage != tally_format::PathStorage::Array,
        rows: Vec::new(),
    }
}

/// Adds the path counts of another copy of a linkonce function; `None` on overflow.
fn add_paths(mine: &mut PathProfile, theirs: &PathProfile) -> Option<()> {
    use std::collections::BTreeMap;
    let mut all: BTreeMap<u128, u64> = mine.counts.iter().copied().collect();
    for &(p, c) in &theirs.counts {
        let v = all.entry(p).or_default();
        *v = v.checked_add(c)?;
    }
    mine.counts = all.into_iter().collect();
    mine.lost = mine.lost.checked_add(theirs.lost)?;
    let mut rows: BTreeMap<u128, PathRow> = mine.rows.drain(..).map(|r| (r.number, r)).collect();
    for r in &theirs.rows {
        match rows.get_mut(&r.number) {
            Some(m) => m.count = m.count.checked_add(r.count)?,
            None => {
                rows.insert(r.number, r.clone());
            }
        }
    }
    mine.rows = rows.into_values().collect();
    Some(())
}

/// A name from the metadata for an error message: control characters escaped, so that the
/// message stays on one line.
fn one_line(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let e: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            e
        })
        .collect()
}

fn add_into(r: &mut FunctionReport, s: &Solved) {
    for (b, v) in r.blocks.iter_mut().zip(s.blocks.values()) {
        b.count = match (b.count, v) {
            (Some(x), Some(y)) => x.checked_add(*y),
            _ => None,
        };
    }
    for (e, v) in r.edges.iter_mut().zip(s.edges.values()) {
        e.count = match (e.count, v) {
            (Some(x), Some(y)) => x.checked_add(*y),
            _ => None,
        };
    }
    finish(r);
}

fn finish(r: &mut FunctionReport) {
    r.entry_count = r.blocks.first().and_then(|b| b.count).unwrap_or(0);
    // The entry block may also be re-entered by its own loops; calls are e0.
    if let Some(e0) = r.edges.first().and_then(|e| e.count) {
        r.entry_count = e0;
    }
    r.block_executions = r
        .blocks
        .iter()
        .filter_map(|b| b.count)
        .fold(0u64, |a, c| a.saturating_add(c));
}

#[cfg(test)]
mod sum_tests {
    use super::*;
    use tally_format::profile::{ProfileModule, Program};

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
            event_kind: None,
            ipath: None,
            oracle_for: None,
        };
        ProfileModule::new(meta, counters)
    }

    fn profile(path: &str, id: BuildId, modules: Vec<ProfileModule>) -> Profile {
        Profile {
            pid: 1,
            program: Program {
                path: path.as_bytes().to_vec(),
                build_id: id,
            },
            modules,
            unfinished: false,
            raced: false,
            signal: None,
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
