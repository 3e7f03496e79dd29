//! The instrumentation modes, and everything about them that is data rather than code: one
//! table, [`MODES`], gives each mode's name, its help text, the README's table row and the
//! facts other crates ask about it (does it place counters on a spanning tree, can its
//! counters be promoted, does it reserve counters, ...). The command line (`--tally-mode`), the
//! messages that list the modes, the tables of README.md and ARCHITECTURE.md (checked by
//! tests) and the per-mode
//! decisions of the instrumenter and the reader all read this table, so adding a mode is one
//! enum variant and one row here, plus the mode's own code (ARCHITECTURE.md, "Adding a mode").

use serde::{Deserialize, Serialize};

/// How a module was instrumented. Stored in the metadata; the spelling is in [`MODES`].
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Mode {
    /// Counters on the chords of a maximum spanning tree (Ball & Larus 1994 §3.2, Eprof(Ecnt)).
    Edge,
    /// A counter on every edge: the oracle for edge counts.
    EdgesNaive,
    /// A counter in every block: the "redundant" baseline of Ball & Larus 1994 §6.1.
    BlocksNaive,
    /// Block counts with fewer edge counters (Ball & Larus 1994 §3.3, Vprof(Ecnt), Fig. 11); edge
    /// counts only where determined.
    Vertex,
    /// Ball-Larus path profiling (Ball & Larus 1996): how often each acyclic path ran.
    Path,
    /// A full control-flow trace (every edge taken, per activation) written to a trace file:
    /// the independent oracle of path profiles and of witness traces. No counters.
    TraceNaive,
    /// Witness tracing (Ball & Larus 1994 §4): a few bits on a few edges per thread, from which
    /// `tally trace` regenerates the exact block sequence. No counters.
    Trace,
    /// Interprocedural context paths (Melski & Reps 1998 §5): paths across calls within a
    /// translation unit, numbered with their calling context.
    Ipath,
    /// Interprocedural piecewise paths (Melski & Reps 1998 §6): paths across calls and returns that
    /// partition the execution.
    IpathPiecewise,
    /// Exact event counting with on-line queries (Ball 1994): one aggregate per-thread counter
    /// incremented on chords, per-function and per-call-site inclusive counters.
    Events,
    /// The oracle and baseline of `events`: every block adds its own events (in segments ending
    /// at its calls), no spanning tree, no query increments.
    EventsNaive,
}

/// What tally knows about one mode, as data.
#[derive(Copy, Clone, Debug)]
pub struct ModeSpec {
    /// The mode.
    pub mode: Mode,
    /// Its name on the command line, in `TALLY_MODE` and in reports.
    pub name: &'static str,
    /// One line for `--help` and error messages.
    pub help: &'static str,
    /// The README's "counters" column (Markdown).
    pub counters: &'static str,
    /// The README's "use" column (Markdown).
    pub usage: &'static str,
    /// ARCHITECTURE.md's "counters" column: what is instrumented and where it is implemented.
    pub placement: &'static str,
    /// ARCHITECTURE.md's "how counts are recovered" column.
    pub recovery: &'static str,
    /// Counters go on the chords of a maximum spanning tree, so the placement reads edge
    /// weights (measured, estimated or §5's).
    pub weighs: bool,
    /// Edge and block counters of innermost call-free loops may be kept in registers
    /// (`--tally-promote`).
    pub promotes: bool,
    /// Counts events: counter 0 of each module is reserved for the exiting thread's total
    /// (the runtime's `TALLY_MODULE_EVENTS` flag).
    pub events: bool,
    /// An oracle: no spanning tree, no derived counts; the tests compare the other modes with it.
    pub oracle: bool,
    /// Profiles paths: functions may carry path metadata and path-table entries.
    pub paths: bool,
}

/// Every mode, in the order the docs list them.
pub const MODES: &[ModeSpec] = &[
    ModeSpec {
        mode: Mode::Edge,
        name: "edge",
        help: "counters on the chords of a maximum spanning tree; exact edge and block counts (default)",
        counters: "on the chords of a maximum spanning tree (paper §3.2, weighting of §5 or `--tally-weighting`); early exits exact",
        usage: "production profiling",
        placement: "chords of a maximum spanning tree under the weighting of Ball & Larus 1994 §5 (`tally-graph::weight`, `mst`, `placement`; or LLVM's estimate, below); `Reentry` edges are always chords; per function, `EarlyExit` edges are either chords counted by the runtime through a frame record or tree edges derived like the others (below)",
        recovery: "Fig. 6 propagation over the unmeasured forest (`tally-graph::propagate`)",
        weighs: true,
        promotes: true,
        events: false,
        oracle: false,
        paths: false,
    },
    ModeSpec {
        mode: Mode::EdgesNaive,
        name: "edges-naive",
        help: "a counter on every edge: the oracle of edge counts",
        counters: "one on every edge",
        usage: "oracle for tests, baseline for benchmarks",
        placement: "every edge except early exits",
        recovery: "early exits (a star at EXIT) by the same propagation",
        weighs: false,
        promotes: false,
        events: false,
        oracle: true,
        paths: false,
    },
    ModeSpec {
        mode: Mode::BlocksNaive,
        name: "blocks-naive",
        help: "a counter in every block: the oracle of block counts",
        counters: "one in every block (the paper's \"redundant\" baseline, §6.1)",
        usage: "oracle for block counts, baseline",
        placement: "every block",
        recovery: "block counts read directly; edges where the flow equations determine them (`propagate::solve_from_blocks`)",
        weighs: false,
        promotes: false,
        events: false,
        oracle: true,
        paths: false,
    },
    ModeSpec {
        mode: Mode::Vertex,
        name: "vertex",
        help: "fewer counters than edge; exact block counts only",
        counters: "fewer than `edge`: chords whose cycle is pipeless lose their counter (§3.3, Figs. 8 and 11)",
        usage: "exact block counts only",
        placement: "the `edge` chords minus those whose fundamental cycle is pipeless and vertex-disjoint from earlier ones (Ball & Larus 1994 §3.3, Fig. 11, `tally-graph::vertex`)",
        recovery: "Fig. 8: dropped chords at 0, signed propagation; exact block counts, the dropped cycles' edges unknown (listed in the metadata)",
        weighs: true,
        promotes: true,
        events: false,
        oracle: false,
        paths: false,
    },
    ModeSpec {
        mode: Mode::Path,
        name: "path",
        help: "Ball-Larus path profiling: how often each acyclic path ran",
        counters: "Ball-Larus path profiling (MICRO 1996): a path register, increments on chords, one count per acyclic path",
        usage: "`tally paths`: hottest paths with source lines; `tally report`: block and edge counts derived from paths",
        placement: "Ball-Larus path profiling (Ball & Larus 1996, `tally-graph::paths`, `tally-llvm::modes::path`): a path register (an alloca promoted by mem2reg), `r = c`/`r += c` on chords of a maximum spanning tree of the path DAG, `count[r + c]++` where paths end; array (≤ 1024 paths) or a hash table: the function's home table (`__tally_path_home`, 1024 slots `{path, count}` of zero-initialized data), probed inline at a constant address (`tally.path.probe`, always inlined), and the runtime's growable overflow table, used only on a miss (the runtime claims free home slots and gives a slot to a path that has clearly outrun its occupant; a path's home and overflow counts add up)",
        recovery: "paths regenerated from their numbers; block and edge counts derived from path counts (`paths::derive_counts`)",
        weighs: true,
        promotes: true,
        events: false,
        oracle: false,
        paths: true,
    },
    ModeSpec {
        mode: Mode::Ipath,
        name: "ipath",
        help: "interprocedural path profiling (context paths across the calls of a file)",
        counters: "interprocedural path profiling (Melski & Reps 1998, context paths): paths across calls between the functions of a file, counted with their calling context",
        usage: "`tally paths`: interprocedural paths across functions; `tally report`: counts derived from paths",
        placement: "Melski & Reps 1998 §5 (`tally-graph::ipaths`, `tally-llvm::modes::ipath`): per file, the set: every function whose edges can all carry code, those that may end early included (frames abandoned by exit, longjmp or an exception count their path's prefix, §9.2); register and `nvc` as allocas, `reg += a*nvc + b` on edges, a per-thread handshake (`__tally_ipath_*` TLS) at direct calls of static functions, except context cuts (calls from roots with more than 2^16 paths into looping callees that fit an array: summary edges, `tally-graph::ipaths::storage`); hashed path tables per file (1 to 16, chosen by a path's low bits; the own paths of roots with few: counter arrays); other functions get edge counters",
        recovery: "the numbering rebuilt from the stored call sites and checked by fingerprint; paths regenerated, block and edge counts derived from them",
        weighs: false,
        promotes: false,
        events: false,
        oracle: false,
        paths: true,
    },
    ModeSpec {
        mode: Mode::IpathPiecewise,
        name: "ipath-piecewise",
        help: "interprocedural piecewise path profiling (paths across calls and returns)",
        counters: "interprocedural piecewise paths (Melski & Reps 1998 §6): paths across calls and returns that partition the execution",
        usage: "as `ipath`, without the repeated calling context",
        placement: "as `ipath`, with Melski & Reps 1998 §6's `open` count and unmatched-return adjustments",
        recovery: "as `ipath`",
        weighs: false,
        promotes: false,
        events: false,
        oracle: false,
        paths: true,
    },
    ModeSpec {
        mode: Mode::Events,
        name: "events",
        help: "exact event counting with on-line queries (tally_events(), TALLY_STOP_AT)",
        counters: "exact event counting with on-line queries (Ball 1994): one per-thread counter, incremented on chords by precomputed amounts; `tally_events()` exact at any point; `TALLY_STOP_AT=N`",
        usage: "debuggers, simulators, replay; per-function and per-call-site event counts",
        placement: "one per-thread countdown `__tally_ev_left` (TLS): `left -= inc` on chords of a maximum spanning tree (Ball 1994 Fig. 4, `tally-graph::events`), calls surrounded by their query adjustments (§4, footnote-3 folds), `tally_events()` calls replaced by `limit - left + QueryInc`, stop checks on chords (`sub $inc, %fs:left; jle check` in inline assembly: the runtime arms the countdown `TALLY_EV_SLACK` = 2^24 events before `TALLY_STOP_AT`, so the check compares with 0 and the cold `__tally_events_check` decides exactly), inclusive counters per function and per call site (`tally-llvm::modes::events`); with `--tally-sese=on` (default) innermost call-free loops are versioned: a copy without decrements runs while no `TALLY_STOP_AT` is pending and subtracts, at its exits, `k * E + E(header..exit) + QueryInc(header) - QueryInc(target)` (one-cycle loops with a SESE counter or trip count) or, with the hidden `--tally-sese=all`, the chord increments it summed in a register (any other shape) (`modes/events/fast/`)",
        recovery: "total (the exiting thread's count, written to counter 0 of each events module), inclusive/exclusive per function and call site",
        weighs: true,
        promotes: false,
        events: true,
        oracle: false,
        paths: false,
    },
    ModeSpec {
        mode: Mode::EventsNaive,
        name: "events-naive",
        help: "every block adds its own events: the oracle of events",
        counters: "every block adds its own events (in segments ending at its calls)",
        usage: "the oracle of `events` in the tests; the per-block baseline in benchmarks",
        placement: "every block subtracts its own events, in segments that end at its calls",
        recovery: "same report; the oracle of `events`",
        weighs: false,
        promotes: false,
        events: true,
        oracle: true,
        paths: false,
    },
    ModeSpec {
        mode: Mode::TraceNaive,
        name: "trace-naive",
        help: "no counters: every edge taken is logged to a trace file (small runs only)",
        counters: "no counters: every edge taken, per activation, to a trace file (`TALLY_TRACE=path`, default `<program>.trace`)",
        usage: "the independent oracle of path profiles and of `trace` in the tests; only for small runs",
        placement: "none: every edge taken is logged per activation (`__tally_trace_*`)",
        recovery: "`tally-report::trace_naive`: the oracle cutting traces into paths",
        weighs: false,
        promotes: false,
        events: false,
        oracle: true,
        paths: false,
    },
    ModeSpec {
        mode: Mode::Trace,
        name: "trace",
        help: "no counters: witness tracing, a few bits per thread from which `tally trace` regenerates every block executed",
        counters: "no counters: witnesses on a few edges (Ball & Larus 1994 §4), bit-packed per thread into a trace file (`TALLY_TRACE=path`, default `<program>.trace`)",
        usage: "`tally trace FILE --profile PROFILE`: the executed block sequence with source lines",
        placement: "`tally-graph::witness::cheaper_plan` per function, checked by `check_plan`; `__tally_wtrace_*` calls on witnessed edges, at entries, around calls (`tally-llvm::modes::trace`, `c/wtrace/`)",
        recovery: "`tally-report::trace`: regeneration (Fig. 14 with a call stack, `witness::Regenerator`) from the plans stored in the metadata",
        weighs: true,
        promotes: false,
        events: false,
        oracle: false,
        paths: false,
    },
];

impl Mode {
    /// Every mode, in the order of [`MODES`].
    pub fn all() -> impl Iterator<Item = Mode> {
        MODES.iter().map(|s| s.mode)
    }

    /// The mode's row of [`MODES`].
    pub fn spec(self) -> &'static ModeSpec {
        // Every variant has a row: `every_mode_has_one_row` checks it.
        MODES.iter().find(|s| s.mode == self).unwrap_or(&MODES[0])
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Parses a mode name.
    pub fn from_name(s: &str) -> Option<Mode> {
        MODES.iter().find(|m| m.name == s).map(|m| m.mode)
    }

    /// The accepted names, comma-separated, for messages.
    pub fn names() -> String {
        MODES.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
    }

    /// Does the placement read edge weights (a maximum spanning tree)?
    pub fn weighs(self) -> bool {
        self.spec().weighs
    }

    /// May counters of call-free loops be promoted to registers?
    pub fn promotes(self) -> bool {
        self.spec().promotes
    }

    /// Does the mode count events (counter 0 of each module is the thread's total)?
    pub fn counts_events(self) -> bool {
        self.spec().events
    }

    /// Does the mode profile paths (path metadata, path tables)?
    pub fn profiles_paths(self) -> bool {
        self.spec().paths
    }

    /// May a build of this mode carry the same-run oracle (`tally cc --tally-oracle`: an
    /// `edges-naive` counter on every edge besides the mode's own code)? The modes whose
    /// profiles give edge or block counts: not the oracles themselves, not events mode (it
    /// counts events, not edges; its oracle is `events-naive`), and not the trace modes (their
    /// oracle is the every-edge trace, and trace mode's second entries copy code).
    pub fn takes_oracle(self) -> bool {
        matches!(
            self,
            Mode::Edge | Mode::Vertex | Mode::Path | Mode::Ipath | Mode::IpathPiecewise
        )
    }

    /// Counters at the start of each module's array that belong to no function.
    pub fn reserved_counters(self) -> usize {
        usize::from(self.counts_events())
    }
}

/// `--tally-mode`'s values: names and help lines from [`MODES`], in its order.
#[cfg(feature = "clap")]
impl clap::ValueEnum for Mode {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [Mode; MODES.len()] = {
            let mut all = [Mode::Edge; MODES.len()];
            let mut i = 0;
            while i < MODES.len() {
                all[i] = MODES[i].mode;
                i += 1;
            }
            all
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let s = self.spec();
        Some(clap::builder::PossibleValue::new(s.name).help(s.help))
    }
}

/// The README's table of modes (Markdown), generated from [`MODES`].
pub fn markdown_table() -> String {
    let mut s = String::from("| mode | counters | use |\n|---|---|---|\n");
    for m in MODES {
        let name = if m.mode == Mode::Edge {
            format!("`{}` (default)", m.name)
        } else {
            format!("`{}`", m.name)
        };
        s.push_str(&format!("| {name} | {} | {} |\n", m.counters, m.usage));
    }
    s
}

/// ARCHITECTURE.md's table of modes (Markdown), generated from [`MODES`].
pub fn architecture_table() -> String {
    let mut s = String::from(
        "| mode | counters | how counts are recovered (`tally-report`) |\n|---|---|---|\n",
    );
    for m in MODES {
        let name = if m.mode == Mode::Edge {
            format!("`{}` (default)", m.name)
        } else {
            format!("`{}`", m.name)
        };
        s.push_str(&format!("| {name} | {} | {} |\n", m.placement, m.recovery));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_has_one_row() {
        // A match without a wildcard: a new variant fails to compile here until it is listed.
        let listed = |m: Mode| match m {
            Mode::Edge
            | Mode::EdgesNaive
            | Mode::BlocksNaive
            | Mode::Vertex
            | Mode::Path
            | Mode::TraceNaive
            | Mode::Trace
            | Mode::Ipath
            | Mode::IpathPiecewise
            | Mode::Events
            | Mode::EventsNaive => MODES.iter().filter(|s| s.mode == m).count(),
        };
        for s in MODES {
            assert_eq!(listed(s.mode), 1, "{}", s.name);
            assert_eq!(Mode::from_name(s.name), Some(s.mode));
        }
        assert_eq!(MODES.len(), 11);
        let mut names: Vec<_> = MODES.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), MODES.len());
    }
}

#[cfg(test)]
mod readme {
    /// The README's table of modes is the one [`super::markdown_table`] generates.
    #[test]
    fn readme_lists_the_modes_of_the_table() {
        let readme = include_str!("../../../README.md");
        let table = super::markdown_table();
        assert!(
            readme.contains(&table),
            "README.md's table of modes differs from tally_format::mode::MODES; it should read:\n{table}"
        );
    }

    /// So is ARCHITECTURE.md's.
    #[test]
    fn architecture_lists_the_modes_of_the_table() {
        let doc = include_str!("../../../ARCHITECTURE.md");
        let table = super::architecture_table();
        assert!(
            doc.contains(&table),
            "ARCHITECTURE.md's table of modes differs from tally_format::mode::MODES; it should read:\n{table}"
        );
    }
}
