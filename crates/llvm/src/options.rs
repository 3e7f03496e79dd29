//! What to instrument and how: the options of one `instrument` call and the choices they
//! take. `tally cc` parses its `--tally-*` options into [`Options`] with clap (feature `clap`:
//! the attributes below name each option, its default and its help line).

use std::collections::HashMap;
use tally_format::Mode;

/// What to instrument and how.
///
/// With feature `clap`, `tally cc`'s `--tally-*` options; their defaults are those of
/// [`Options::default`] (a test of the driver checks it).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Options {
    /// Instrumentation mode.
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-mode", value_name = "MODE", env = "TALLY_MODE",
            value_enum, default_value_t = Mode::Edge,
            help = "Instrumentation mode (the flag wins over TALLY_MODE)")
    )]
    pub mode: Mode,
    /// The source file the module was compiled from (recorded in the metadata).
    #[cfg_attr(feature = "clap", arg(skip))]
    pub source: String,
    /// Use atomic counter increments (for multi-threaded programs). The module's descriptor
    /// says so (`abi::MODULE_FLAG_ATOMIC`). `tally cc` turns it on for commands with `-pthread`
    /// unless `--tally-atomic=off` is given.
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-atomic", value_name = "on|off", num_args = 0..=1,
            require_equals = true, default_value = "off", default_missing_value = "on",
            action = clap::ArgAction::Set,
            value_parser = on_off(),
            help = "Atomic counter increments, for multi-threaded programs (default: on with \
                    -pthread, else off)")
    )]
    pub atomic: bool,
    /// Carry the same-run oracle: besides the mode's instrumentation, a counter on every edge
    /// (what `edges-naive` places), in a counter array and module record of their own
    /// ([`tally_format::ModuleMeta::oracle_for`]), so that one run writes both profiles and
    /// `tally check` compares them. For the modes that count edges or paths
    /// ([`tally_format::Mode::takes_oracle`]).
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-oracle", value_name = "on|off", num_args = 0..=1,
            require_equals = true, default_value = "off", default_missing_value = "on",
            env = "TALLY_ORACLE", action = clap::ArgAction::Set,
            value_parser = on_off(),
            help = "Also count every edge in the same binary (the edges-naive oracle), so that \
                    `tally check` compares the two profiles of one run (the flag wins over \
                    TALLY_ORACLE)")
    )]
    pub oracle: bool,
    /// Keep shadow-stack frame records in edge mode (default). Turning them off is only for
    /// measuring their cost: early exits are then not counted and counts of frames that end
    /// early come out wrong.
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-no-shadow", action = clap::ArgAction::SetFalse, hide = true,
            help = "Benchmarks only: no frame records (counts of frames that end early are wrong)")
    )]
    pub shadow: bool,
    /// Measured edge counts from an earlier run, by function name and graph hash: counters are
    /// placed with these as weights (Ball & Larus 1994 §6.4, "Exact-Max") where a function's graph
    /// matches; other functions use the heuristic weighting.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub weights: Option<std::sync::Arc<Weights>>,
    /// The weighting used where no measured weights apply: Ball & Larus 1994 §5's loop-based
    /// heuristic (default) or LLVM's static frequency estimate.
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-weighting", value_name = "W", value_enum,
            default_value_t = Weighting::default(),
            help = "How counters are placed without a profile: loops (Ball & Larus 1994 §5: every \
                    loop iterates 10 times, every branch even) or estimate (LLVM's static \
                    estimate)")
    )]
    pub weighting: Weighting,
    /// Events mode: what an event is.
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-events", value_name = "KIND", value_enum,
            default_value_t = EventKind::Insns,
            help = "Events mode: what an event is (LLVM IR instructions of the optimized code, \
                    blocks, calls, memory operations)")
    )]
    pub events: EventKind,
    /// Edge mode: how early exits are made exact in functions without landing pads or setjmp.
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-early-exits", value_name = "HOW", value_enum,
            default_value_t = EarlyExits::default(),
            help = "Edge mode: how counts stay exact when a call ends its caller's frame \
                    (exit, longjmp, exception): record (a frame record), derive (no record, \
                    counts derived), auto (the cheaper per function)")
    )]
    pub early_exits: EarlyExits,
    /// Keep the counters of innermost call-free loops in registers, stored at the loop exits
    /// ([`promote`](mod@promote)); `edge` and `vertex` modes and path mode's edge-counter
    /// functions, not with `atomic`. The driver turns it on by default
    /// (`--tally-promote=off` turns it off), except in a `--tally-pgo` training build, which is
    /// optimized after it is instrumented (LLVM's LICM promotes counters there).
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-promote", value_name = "on|off", num_args = 0..=1,
            require_equals = true, default_value = "on", default_missing_value = "on",
            action = clap::ArgAction::Set,
            value_parser = on_off(),
            help = "Keep the counters of innermost call-free loops in registers, stored at the \
                    loop exits (not with --tally-atomic; off by default with --tally-pgo)")
    )]
    pub promote: bool,
    /// Counter promotion: only counters incremented on a cycle of the loop of at most this
    /// many instructions are promoted ([`promote`](mod@promote)); a counter only on longer
    /// cycles stays in memory, where its increment is not the loop's critical dependency
    /// chain. 0: no limit.
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-promote-chain", value_name = "N",
            default_value_t = DEFAULT_PROMOTE_CHAIN, hide = true,
            help = "Counter promotion: promote only counters on a loop cycle of at most N \
                    instructions (0: no limit)")
    )]
    pub promote_chain: u32,
    /// Counter promotion: loops touching more counters than this are not promoted.
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-promote-max", value_name = "N",
            default_value_t = DEFAULT_PROMOTE_MAX, hide = true,
            help = "Counter promotion: promote no loop with more than N counters")
    )]
    pub promote_max: u32,
    /// Edge and vertex modes: SESE counters (Frenot & Pereira 2024,
    /// [`sese`](mod@crate::counters::sese)): in counted loops the loop's induction variable or trip
    /// count gives one edge's count at the loop's exits instead of a counter incremented every
    /// iteration, where a profitability test says it pays. In events mode, counted call-free loops
    /// are versioned instead (a copy without decrements, `modes/events/fast/`). On by default
    /// (docs/log/sese.md; `--tally-sese=off` turns it off).
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-sese", value_name = "on|off", num_args = 0..=1,
            require_equals = true, default_value = "on", default_missing_value = "on",
            action = clap::ArgAction::Set,
            value_parser = sese_choice(),
            help = "Edge, vertex and events modes: in counted loops, derive an edge's count (events: \
                    the loop's events) from the induction variable or the trip count at the \
                    loop's exits instead of counting every iteration")
    )]
    pub sese: Sese,
    /// Path mode: loops whose body has a single path from the header back to it count that
    /// path at their exits (`tally_graph::paths::cycles`): in functions whose paths go to a
    /// hash table (`on`), in every function (`all`, hidden: for tests), or nowhere (`off`, the
    /// default: on the benchmark suite it cost more than it saved, docs/log/paths-cost.md).
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-path-cycles", value_name = "on|off", num_args = 0..=1,
            require_equals = true, default_value = "off", default_missing_value = "on",
            action = clap::ArgAction::Set,
            value_parser = path_cycles_choice(),
            help = "Path mode: loops with a single path through their body count it once at \
                    their exits instead of every iteration (in hashed functions)")
    )]
    pub path_cycles: PathCycles,
    /// Path mode: narrow path ends of hashed functions count in slices of the counter array
    /// (`tally_graph::paths::slices`) instead of probing the hash table (`on`, the default);
    /// `off` probes at every hashed path end (for comparison: docs/log/paths-cost.md).
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-path-slices", value_name = "on|off", num_args = 0..=1,
            require_equals = true, default_value = "on", default_missing_value = "on",
            action = clap::ArgAction::Set,
            value_parser = on_off(),
            help = "Path mode: path ends of hashed functions whose path numbers lie in a narrow \
                    range count in a slice of the counter array instead of the hash table")
    )]
    pub path_slices: bool,
    /// Trace mode: `bits` takes the one-bit-per-branch plan (`witness::branch_plan`, §6.2's
    /// bit tracing) in every function instead of the cheaper of it and the witness plan;
    /// `paths` (hidden, experimental: the reader cannot regenerate it yet) writes Ball-Larus
    /// path numbers at path ends instead of witnesses ([`TracePlan::Paths`]).
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-trace", value_name = "witness|bits", num_args = 1,
            require_equals = true, default_value = "witness",
            action = clap::ArgAction::Set,
            value_parser = trace_plan_choice(),
            help = "Trace mode: `bits` writes one witness per conditional branch (bit tracing) \
                    instead of the cheaper of that and the witness plan, per function")
    )]
    pub trace_plan: TracePlan,
    /// Trace mode: functions with no landings keep the bit accumulator in registers between
    /// calls (stored to the thread's before calls that may write records and at returns, not
    /// after every record as by default), which saves about 10% of the instructions and 4% of
    /// the time but leaves the latest records of the function a fatal signal interrupts in its
    /// registers: the flight recorder's tail then ends at that function's last call
    /// (`--tally-trace-registers`, off by default).
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-trace-registers", value_name = "on|off", num_args = 0..=1,
            require_equals = true, default_value = "off", default_missing_value = "on",
            action = clap::ArgAction::Set,
            value_parser = on_off(),
            help = "Trace mode: keep the bit accumulator in registers between calls (faster; \
                    a crash loses the interrupted function's records since its last call)")
    )]
    pub trace_registers: bool,
    /// Trace mode, without `--tally-trace-registers=on`: functions with no landings keep a
    /// copy of the bit accumulator in a register and store it to the thread's after every
    /// record (`on`, the default: the thread's word is always current, so a crash loses
    /// nothing); `off` appends every record to the thread's word in memory (a load, a shift
    /// and a store each, chained through memory; hidden, for comparison: docs/log/trace.md).
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-trace-write-through", value_name = "on|off", num_args = 0..=1,
            require_equals = true, default_value = "on", default_missing_value = "on",
            action = clap::ArgAction::Set,
            value_parser = on_off(),
            hide = true)
    )]
    pub trace_write_through: bool,
    /// Trace mode, for measurement only: the witnesses' appends alone (their checks of room
    /// and the staging of full words), without entries, returns, `Back`, direct flags or
    /// landings: what any tracer recording this plan's witnesses must execute at least. Its
    /// trace cannot be regenerated (hidden; the bench's `trace-floor`, docs/log/trace.md).
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-trace-floor", value_name = "on|off", num_args = 0..=1,
            require_equals = true, default_value = "off", default_missing_value = "on",
            action = clap::ArgAction::Set,
            value_parser = on_off(),
            hide = true)
    )]
    pub trace_floor: bool,
    /// Jump optimization (Ball & Larus 1994 §6.3, generalizing Fig. 19): what an unconditional jump
    /// costs relative to a counter increment. A counter on an edge that must be split also
    /// costs the jump out of the new block, so the spanning tree is taken under weights that
    /// make split edges dearer by this factor (`1 + jump_cost`); 0 ignores jumps.
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-jump-cost", value_name = "X", default_value_t = DEFAULT_JUMP_COST,
            value_parser = jump_cost,
            help = "Jump optimization: how much dearer a counter is on an edge that needs a new \
                    block and a jump; 0 turns it off")
    )]
    pub jump_cost: f64,
    /// `ipath` modes: context cuts ([`IpNumbering::context_cuts`](tally_graph::ipaths::IpNumbering::context_cuts)):
    /// direct calls from functions under roots with more than 2^16 paths into looping callees
    /// whose own paths fit an array become summary edges, so the callee's loop counts in an
    /// array instead of the hashed table, at the price of the caller's context for those
    /// paths (docs/log/ipaths.md). `hot` (the default; `on` says the same) cuts only calls whose
    /// callee is estimated to restart at least [`HOT_RESTARTS`] paths per call, `all` every
    /// such call, `off` none.
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-ipath-cuts", value_name = "hot|all|off", num_args = 0..=1,
            require_equals = true, default_value = "hot", default_missing_value = "hot",
            action = clap::ArgAction::Set,
            value_parser = ipath_cuts(),
            help = "ipath modes: cut the context of calls from functions with very many paths \
                    into looping callees (cheaper): hot (estimated hot loops only), all, or off \
                    (every calling context kept)")
    )]
    pub ipath_cuts: IpathCuts,
    /// Where the program writes its profile when `TALLY_PROFILE` is not set, as clang's
    /// `-fprofile-generate=DIR` and gcc's `-fprofile-dir=DIR`: `DIR/<program>.%m.tally`, the
    /// runs of one build merged into one file (`%m`), and trace modes' `DIR/<program>.trace`.
    /// `%p`, `%m` and `%%` in DIR expand at run time as in `TALLY_PROFILE`; the runtime creates
    /// missing directories. Every module compiled with it carries DIR in an ELF note
    /// ([`tally_format::abi::NOTE_PROFILE_DIR`]); the driver makes a relative DIR absolute
    /// against the directory `tally cc` runs in.
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-profile-dir", value_name = "DIR",
            value_parser = clap::builder::NonEmptyStringValueParser::new(),
            help = "Default profile location baked into the program: DIR/<program>.%m.tally, \
                    runs of one build merged (TALLY_PROFILE still wins); a relative DIR is \
                    taken from where tally cc runs; %p, %m expand at run time")
    )]
    pub profile_dir: Option<String>,
    /// A training build for profile-guided optimization: the module is clang's unoptimized IR
    /// (the driver compiles with `-fpseudo-probe-for-profiling -Xclang -disable-llvm-passes`),
    /// clang's pseudo-probe pass numbers its blocks first, the instrumentation goes into that
    /// graph, and clang optimizes the instrumented module afterwards. Every block then holds
    /// exactly its own probe, so each probe's count is exact (`tally report --export
    /// sample-profile`); probes added after optimization can lose copies (`docs/pgo.md`).
    #[cfg_attr(
        feature = "clap",
        arg(
            long = "tally-pgo",
            help = "Build to train profile-guided optimization: count clang's pseudo-probe \
                    blocks, instrumented before optimization, for `tally report --export \
                    sample-profile` and `tally cc --tally-use`"
        )
    )]
    pub pgo: bool,
    /// `--tally-pgo`: inline small callees into their callers before instrumenting
    /// (`module::pre_inline`), as clang's IR PGO pre-inlines before it instruments, so
    /// the spanning tree derives their counts. `--tally-pgo-inline=off` instruments every
    /// function as written (the profile is the same; tests compare the two).
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-pgo-inline", value_name = "on|off", num_args = 0..=1,
            require_equals = true, default_value = "on", default_missing_value = "on",
            action = clap::ArgAction::Set, value_parser = on_off(), hide = true,
            help = "--tally-pgo: inline small callees before instrumenting")
    )]
    pub pgo_inline: bool,
    /// `--tally-pgo-targets`: count where each indirect call goes, among the functions of its
    /// module it could call (`module::call_targets`), for the sample profile's call targets,
    /// which clang's indirect-call promotion uses. On by default: with the inliner's
    /// cost-benefit analysis (`--tally-use` turns it on) the promotion brings SQLite's rebuild
    /// to IR PGO's; it costs SQLite's training run about 10% more instructions (docs/pgo.md).
    #[cfg_attr(
        feature = "clap",
        arg(long = "tally-pgo-targets", value_name = "on|off", num_args = 0..=1,
            require_equals = true, default_value = "on", default_missing_value = "on",
            action = clap::ArgAction::Set, value_parser = on_off(),
            help = "--tally-pgo: count the targets of indirect calls, for clang's indirect-call \
                    promotion")
    )]
    pub pgo_targets: bool,
}

/// Parses `witness` or `bits` (`--tally-trace`), and the hidden `paths`.
#[cfg(feature = "clap")]
fn trace_plan_choice() -> impl clap::builder::TypedValueParser<Value = TracePlan> {
    use clap::builder::{PossibleValue, TypedValueParser as _};
    clap::builder::PossibleValuesParser::new([
        PossibleValue::new("witness"),
        PossibleValue::new("bits"),
        PossibleValue::new("paths").hide(true),
    ])
    .map(|v| match v.as_str() {
        "bits" => TracePlan::Bits,
        "paths" => TracePlan::Paths,
        _ => TracePlan::Witness,
    })
}

/// Parses `--tally-sese`: `on`, `off`, and the hidden diagnostics `all` and `trips`.
#[cfg(feature = "clap")]
fn sese_choice() -> impl clap::builder::TypedValueParser<Value = Sese> {
    use clap::builder::{PossibleValue, TypedValueParser as _};
    clap::builder::PossibleValuesParser::new([
        PossibleValue::new("on"),
        PossibleValue::new("off"),
        PossibleValue::new("all").hide(true),
        PossibleValue::new("trips").hide(true),
    ])
    .map(|v| match v.as_str() {
        "on" => Sese::On,
        "all" => Sese::All,
        "trips" => Sese::Trips,
        _ => Sese::Off,
    })
}

/// Parses `--tally-path-cycles`: `on`, `off`, and the hidden `all`.
#[cfg(feature = "clap")]
fn path_cycles_choice() -> impl clap::builder::TypedValueParser<Value = PathCycles> {
    use clap::builder::{PossibleValue, TypedValueParser as _};
    clap::builder::PossibleValuesParser::new([
        PossibleValue::new("on"),
        PossibleValue::new("off"),
        PossibleValue::new("all").hide(true),
    ])
    .map(|v| match v.as_str() {
        "on" => PathCycles::Hashed,
        "all" => PathCycles::All,
        _ => PathCycles::Off,
    })
}

/// Parses `on` or `off` (`--tally-promote`, `--tally-trace-registers`, `--tally-path-slices`);
/// errors list both.
#[cfg(feature = "clap")]
fn on_off() -> impl clap::builder::TypedValueParser<Value = bool> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(["on", "off"]).map(|v| v == "on")
}

/// Parses `--tally-ipath-cuts`: `hot` (or `on`), `all`, `off`.
#[cfg(feature = "clap")]
fn ipath_cuts() -> impl clap::builder::TypedValueParser<Value = IpathCuts> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(["hot", "on", "all", "off"]).map(|v| {
        match v.as_str() {
            "all" => IpathCuts::All,
            "off" => IpathCuts::Off,
            _ => IpathCuts::Hot,
        }
    })
}

/// Parses `--tally-jump-cost`: a non-negative finite number.
#[cfg(feature = "clap")]
fn jump_cost(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|c| c.is_finite() && *c >= 0.0)
        .ok_or_else(|| "not a non-negative number".to_string())
}

/// `clap::ValueEnum` for a choice with `ALL` and `name()`: the option values are the names.
macro_rules! value_enum {
    ($($t:ty),*) => {$(
        #[cfg(feature = "clap")]
        impl clap::ValueEnum for $t {
            fn value_variants<'a>() -> &'a [Self] {
                &Self::ALL
            }

            fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
                Some(clap::builder::PossibleValue::new(self.name()))
            }
        }
    )*};
}

value_enum!(EarlyExits, Weighting, EventKind);

impl Default for Options {
    /// What `tally cc` does without `--tally-*` options.
    fn default() -> Self {
        Options {
            mode: Mode::Edge,
            source: String::new(),
            atomic: false,
            oracle: false,
            shadow: true,
            weights: None,
            weighting: Weighting::default(),
            events: EventKind::Insns,
            early_exits: EarlyExits::default(),
            promote: true,
            promote_chain: DEFAULT_PROMOTE_CHAIN,
            promote_max: DEFAULT_PROMOTE_MAX,
            sese: Sese::default(),
            path_cycles: PathCycles::default(),
            path_slices: true,
            trace_plan: TracePlan::Witness,
            trace_registers: false,
            trace_write_through: true,
            trace_floor: false,
            jump_cost: DEFAULT_JUMP_COST,
            ipath_cuts: IpathCuts::Hot,
            profile_dir: None,
            pgo: false,
            pgo_inline: true,
            pgo_targets: true,
        }
    }
}

/// Which records trace mode writes in each function (`--tally-trace`,
/// [`Options::trace_plan`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum TracePlan {
    /// The cheaper of the witness plan (Ball & Larus 1994 §4.2) and the branch plan, per function.
    #[default]
    Witness,
    /// The branch plan in every function (§6.2 bit tracing).
    Bits,
    /// Ball-Larus path numbers (Ball & Larus 1996), written at path ends with paths cut at every
    /// block with a call that may write records (Larus's Whole Program Paths records the
    /// same); functions with more than 2^32 paths, `setjmp` or landing pads keep the witness
    /// plan. Experimental (tried for a faster trace mode): the reader does not regenerate it yet.
    Paths,
}

/// Which calls the `ipath` modes cut (`--tally-ipath-cuts`, [`Options::ipath_cuts`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum IpathCuts {
    /// Only calls whose callee is hot: estimated restarts per call at least [`HOT_RESTARTS`]
    /// ([`tally_graph::ipaths::Heat`]), under measured weights (`--tally-weights`) where the
    /// profile has the function, else LLVM's static estimate.
    #[default]
    Hot,
    /// Every call the rule names, however cold.
    All,
    /// None: every calling context kept.
    Off,
}

/// [`IpathCuts::Hot`]'s threshold: the least estimated restarts per call (back and cut edges
/// taken in the callee and the functions it calls directly, per call) for which a call is
/// cut. Chosen by measurement (docs/log/ipaths.md, "Hot context cuts"): on the benchmark programs
/// LLVM's estimate gives the loops whose cuts pay (zlib's `longest_match`, 37) more and the
/// ones whose cuts save nothing (bzip2's `add_pair_to_block`, 9.7; `mainGtU`, 0.01) less.
pub const HOT_RESTARTS: f64 = 16.0;

/// The default [`Options::promote_chain`].
pub const DEFAULT_PROMOTE_CHAIN: u32 = 0;

/// The default [`Options::promote_max`] (LLVM's `max-counter-promotions-per-loop`).
pub const DEFAULT_PROMOTE_MAX: u32 = 20;

/// The default [`Options::jump_cost`]: on x86-64 a counter increment is one instruction
/// (`incq counter(%rip)`) and so is the jump, but the increment is a read-modify-write.
pub const DEFAULT_JUMP_COST: f64 = 0.5;

/// Edge and vertex modes' SESE counters (`--tally-sese`, [`sese`](mod@crate::counters::sese)).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Sese {
    /// None (`off`).
    Off,
    /// In the loops where the profitability test says they pay (`on`, the default).
    #[default]
    On,
    /// In every loop with a candidate, an affine variable preferred to a trip count, no
    /// profitability test (`all`, hidden: a benchmark and test diagnostic). In events mode:
    /// also the call-free loops of other shapes, with register counts, and loops whose values
    /// are used after them (bench variant `events-all`; off by default: it does not pay on
    /// every program).
    All,
    /// In every loop with a candidate, a trip count preferred to an affine variable, no
    /// profitability test (`trips`, hidden: the tests of trip-count counters).
    Trips,
}

/// How edge mode makes the counts of frames that end early exact (Ball & Larus 1994 §3.2, Fig. 7).
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

    /// The option name.
    pub fn name(self) -> &'static str {
        match self {
            EarlyExits::Auto => "auto",
            EarlyExits::Record => "record",
            EarlyExits::Derive => "derive",
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
    /// Ball & Larus 1994 §5: loops iterate 10 times, branches are equally likely.
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

/// Path mode's single-cycle loops counted at their exits (`--tally-path-cycles`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum PathCycles {
    /// Nowhere (`off`, the default).
    #[default]
    Off,
    /// In functions whose paths are counted in a hash table, where a probe per iteration
    /// costs several instructions (`on`).
    Hashed,
    /// In every function, counter arrays too (`all`, hidden: tests and benchmarks).
    All,
}
