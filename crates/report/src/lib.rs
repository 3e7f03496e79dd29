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
//! This root holds the data model ([`Report`], [`FunctionReport`], [`BlockCount`],
//! [`EdgeCount`], [`ReportError`], ...); [`analyze()`] does the arithmetic, [`Sum`] adds profiles
//! of one program and [`merge`] those of many per program; [`render`] prints text and JSON. [`source`] turns the
//! counts into line, branch and function counts, which [`show`] prints as annotated
//! source and a per-line report, and [`lcov`] and [`cobertura`] export; [`html`] renders the static site of `tally html`; [`dataset`] writes
//! the Parquet dataset of `tally export`.
#![deny(missing_docs)]

mod analyze;
pub mod check;
pub mod cobertura;
pub mod dataset;
pub mod diff;
pub mod html;
pub mod ipaths;
pub mod lcov;
pub mod merge;
mod modes;
pub mod names;
pub mod placements;
pub mod render;
pub mod sample_profile;
pub mod show;
pub mod source;
mod sum;
pub mod trace;
#[cfg(any(test, feature = "testing"))]
pub mod trace_naive;

pub use analyze::{analyze, Counted, Inputs};
pub use sum::{combine, Parts, Sum};
use tally_format::Mode;
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
    /// `--tally-pgo`: per indirect call of its metadata (`SourceMeta::call_targets`), how
    /// often it called each of its candidate targets.
    pub call_targets: Vec<Vec<u64>>,
}

impl FunctionReport {
    /// Are all its block counts known, so that `block_executions` is their sum? (`trace-naive`
    /// counts nothing in its profile: its trace holds the blocks; a function whose counts
    /// could not be recovered at all says so with `inconsistent` instead.)
    pub fn blocks_known(&self) -> bool {
        self.inconsistent.is_some() || self.blocks.iter().all(|b| b.count.is_some())
    }

    /// Is its entry count known (`entry_count` is 0 otherwise)?
    pub fn entries_known(&self) -> bool {
        self.inconsistent.is_some() || self.blocks.first().is_some_and(|b| b.count.is_some())
    }
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
    /// The counts since a snapshot of a process that goes on (the profile's `delta` flag,
    /// docs/design/processes.md, "Snapshots"): exact, but its early exits are changes in the
    /// number of waiting frames, reported unknown (`analyze::delta`).
    pub delta: bool,
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

/// The file of a location, by name.
pub(crate) fn loc_file(meta: &tally_format::ModuleMeta, l: &tally_format::Loc) -> Option<String> {
    l.file.and_then(|i| meta.files.get(i.index()).cloned())
}

/// A name from the metadata for an error message: control characters escaped, so that the
/// message stays on one line.
pub(crate) fn one_line(s: &str) -> String {
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

/// `program: PATH (build id HEX)` and a newline, or nothing when the program is unknown.
pub fn program_line(p: &tally_format::profile::Program) -> String {
    use tally_format::profile::BuildId;
    if p.is_unknown() {
        return String::new();
    }
    let path = if p.path.is_empty() {
        "(path unknown)".to_string()
    } else {
        p.path_lossy()
    };
    match &p.build_id {
        BuildId::None => format!("program: {path}\n"),
        BuildId::Gnu(_) => format!("program: {path} (build id {})\n", p.build_id.hex()),
        BuildId::Modules(_) => format!(
            "program: {path} (build id {}, from the module hashes)\n",
            p.build_id.hex()
        ),
    }
}
