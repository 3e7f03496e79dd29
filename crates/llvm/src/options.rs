//! What to instrument and how: the options of one `instrument` call and the choices they
//! take. `tally cc` parses its `--tally-*` options into [`Options`].

use std::collections::HashMap;
use tally_format::Mode;

/// What to instrument and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// Instrumentation mode.
    pub mode: Mode,
    /// The source file the module was compiled from (recorded in the metadata).
    pub source: String,
    /// Use atomic counter increments (for multi-threaded programs).
    pub atomic: bool,
    /// Keep shadow-stack frame records in edge mode (default). Turning them off is only for
    /// measuring their cost: early exits are then not counted and counts of frames that end
    /// early come out wrong.
    pub shadow: bool,
    /// Measured edge counts from an earlier run, by function name and graph hash: counters are
    /// placed with these as weights (paper 000 §6.4, "Exact-Max") where a function's graph
    /// matches; other functions use the heuristic weighting.
    pub weights: Option<std::sync::Arc<Weights>>,
    /// The weighting used where no measured weights apply: paper 000 §5's loop-based
    /// heuristic (default) or LLVM's static frequency estimate.
    pub weighting: Weighting,
    /// Events mode: what an event is.
    pub events: EventKind,
    /// Edge mode: how early exits are made exact in functions without landing pads or setjmp.
    pub early_exits: EarlyExits,
    /// Keep the counters of innermost call-free loops in registers, stored at the loop exits
    /// ([`promote`](mod@promote)); `edge` and `vertex` modes and path mode's edge-counter
    /// functions, not with `atomic`. The driver turns it on by default
    /// (`--tally-promote=off` turns it off).
    pub promote: bool,
    /// Jump optimization (paper 000 §6.3, generalizing Fig. 19): what an unconditional jump
    /// costs relative to a counter increment. A counter on an edge that must be split also
    /// costs the jump out of the new block, so the spanning tree is taken under weights that
    /// make split edges dearer by this factor (`1 + jump_cost`); 0 ignores jumps.
    pub jump_cost: f64,
}

impl Default for Options {
    /// What `tally cc` does without `--tally-*` options.
    fn default() -> Self {
        Options {
            mode: Mode::Edge,
            source: String::new(),
            atomic: false,
            shadow: true,
            weights: None,
            weighting: Weighting::default(),
            events: EventKind::Insns,
            early_exits: EarlyExits::default(),
            promote: true,
            jump_cost: DEFAULT_JUMP_COST,
        }
    }
}

/// The default [`Options::jump_cost`]: on x86-64 a counter increment is one instruction
/// (`incq counter(%rip)`) and so is the jump, but the increment is a read-modify-write.
pub const DEFAULT_JUMP_COST: f64 = 0.5;

/// How edge mode makes the counts of frames that end early exact (paper 000 §3.2, Fig. 7).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum EarlyExits {
    /// Per function, whichever of the two below the weighting predicts to be cheaper.
    #[default]
    Auto,
    /// A frame record; the runtime charges the exit counter of the site the frame ends at.
    Record,
    /// The early-exit edges are spanning-tree edges: their counts are derived, no record.
    Derive,
}

impl EarlyExits {
    /// Every choice.
    pub const ALL: [EarlyExits; 3] = [EarlyExits::Auto, EarlyExits::Record, EarlyExits::Derive];

    /// The option names, for messages.
    pub const NAMES: &'static str = "auto, record, derive";

    /// The option name.
    pub fn name(self) -> &'static str {
        match self {
            EarlyExits::Auto => "auto",
            EarlyExits::Record => "record",
            EarlyExits::Derive => "derive",
        }
    }

    /// Parses an option value.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(EarlyExits::Auto),
            "record" => Some(EarlyExits::Record),
            "derive" => Some(EarlyExits::Derive),
            _ => None,
        }
    }
}

/// Edge frequencies of an earlier run: (function name, graph hash) -> count of each edge.
pub type Weights = HashMap<(String, u64), Vec<u64>>;

/// How the spanning tree's edges are weighted when no measured profile is given.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Weighting {
    /// LLVM's static frequency estimate (branch-prediction heuristics, loop scaling).
    Estimate,
    /// Paper 000 §5: loops iterate 10 times, branches are equally likely.
    #[default]
    Loops,
}

impl Weighting {
    /// Every choice.
    pub const ALL: [Weighting; 2] = [Weighting::Estimate, Weighting::Loops];

    /// The option name.
    pub fn name(self) -> &'static str {
        match self {
            Weighting::Estimate => "estimate",
            Weighting::Loops => "loops",
        }
    }

    /// The option names, for messages.
    pub const NAMES: &'static str = "estimate, loops";

    /// Parses an option value.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "estimate" => Some(Weighting::Estimate),
            "loops" => Some(Weighting::Loops),
            _ => None,
        }
    }
}

/// What an event is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// Every LLVM IR instruction (of the optimized code, before instrumentation).
    Insns,
    /// Every basic block executed.
    Blocks,
    /// Every call.
    Calls,
    /// Every load, store and atomic memory operation.
    Mem,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 4] = [
        EventKind::Insns,
        EventKind::Blocks,
        EventKind::Calls,
        EventKind::Mem,
    ];

    /// The names, for messages.
    pub const NAMES: &'static str = "insns, blocks, calls, mem";

    /// Parses `insns`, `blocks`, `calls`, `mem`.
    pub fn from_name(s: &str) -> Option<EventKind> {
        Some(match s {
            "insns" => EventKind::Insns,
            "blocks" => EventKind::Blocks,
            "calls" => EventKind::Calls,
            "mem" => EventKind::Mem,
            _ => return None,
        })
    }
    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Insns => "insns",
            EventKind::Blocks => "blocks",
            EventKind::Calls => "calls",
            EventKind::Mem => "mem",
        }
    }
}
