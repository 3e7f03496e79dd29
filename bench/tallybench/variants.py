"""The variants (the table), and what the suite and the report know of them."""
import re


# The variants. Adding one is one line. Columns:
#   name      short name (command line, JSON, table columns)
#   compiler  clang | gcc | tally (`tally cc`, which compiles with clang-19)
#   flags     added to every compile and link command; `{profile:V}` stands for the profile
#             written by variant V's build run once on the measured input (a training run)
#   base      the plain build its overhead is measured against (same compiler)
#   role      plain | anchor (a compiler's own profiler, the targets' yardstick) | tally
#   label     for the report
# A variant named in OPT_IN runs only when asked for with --variants.
# A tally variant whose build fails because tally does not know the mode or option yet is
# skipped with a note (so future modes can be listed before they land).
VARIANTS = [
    ("clang",        "clang", "",                                  "clang", "plain",  "clang-19 -O2 -g"),
    ("clang-pgo-ir", "clang", "-fprofile-generate",                "clang", "anchor", "clang -fprofile-generate (IR PGO)"),
    ("clang-pgo-fe", "clang", "-fprofile-instr-generate",          "clang", "anchor", "clang -fprofile-instr-generate (front-end PGO)"),
    ("gcc",          "gcc",   "",                                  "gcc",   "plain",  "gcc -O2 -g"),
    ("gcc-arcs",     "gcc",   "-fprofile-arcs",                    "gcc",   "anchor", "gcc -fprofile-arcs"),
    ("blocks-naive", "tally", "--tally-mode=blocks-naive",         "clang", "tally",  "tally: a counter in every block"),
    ("edges-naive",  "tally", "--tally-mode=edges-naive",          "clang", "tally",  "tally: a counter on every edge"),
    ("edge",         "tally", "--tally-mode=edge",                 "clang", "tally",
     "tally: chords of the heuristic maximum spanning tree, SESE counters where they pay (the default)"),
    ("edge-nosese",  "tally", "--tally-mode=edge --tally-sese=off", "clang", "tally",
     "tally edge without SESE counters (--tally-sese=off): every chord incremented where it lies"),
    ("edge-estimate", "tally", "--tally-mode=edge --tally-weighting=estimate", "clang", "tally",
     "tally edge, spanning tree under LLVM's static frequency estimate instead of Ball & Larus 1994 §5's weighting"),
    ("edge-nojump",  "tally", "--tally-mode=edge --tally-jump-cost=0", "clang", "tally",
     "tally edge without jump optimization: split edges weigh like others in the spanning tree"),
    ("edge-jump1",   "tally", "--tally-mode=edge --tally-jump-cost=1", "clang", "tally",
     "tally edge, a split edge weighs 2x in the spanning tree (its increment and its jump: two instructions)"),
    ("edge-jump2",   "tally", "--tally-mode=edge --tally-jump-cost=2", "clang", "tally",
     "tally edge, a split edge weighs 3x in the spanning tree"),
    ("edge-nopromote", "tally", "--tally-mode=edge --tally-promote=off", "clang", "tally",
     "tally edge without promotion: every counter incremented in memory, also in innermost call-free loops (--tally-promote=off)"),
    ("edge-chain16", "tally", "--tally-mode=edge --tally-promote-chain=16", "clang", "tally",
     "tally edge promoting only counters on a loop cycle of at most 16 instructions"),
    ("edge-chain32", "tally", "--tally-mode=edge --tally-promote-chain=32", "clang", "tally",
     "tally edge promoting only counters on a loop cycle of at most 32 instructions"),
    ("edge-max2", "tally", "--tally-mode=edge --tally-promote-max=2", "clang", "tally",
     "tally edge promoting only loops with at most 2 counters"),
    ("edge-max4", "tally", "--tally-mode=edge --tally-promote-max=4", "clang", "tally",
     "tally edge promoting only loops with at most 4 counters"),
    ("edge-max8", "tally", "--tally-mode=edge --tally-promote-max=8", "clang", "tally",
     "tally edge promoting only loops with at most 8 counters"),
    ("edge-chain64", "tally", "--tally-mode=edge --tally-promote-chain=64", "clang", "tally",
     "tally edge promoting only counters on a loop cycle of at most 64 instructions"),
    ("edge-exact",   "tally", "--tally-mode=edge --tally-weights={profile:edges-naive}", "clang", "tally",
     "tally edge, spanning tree under the exact weights of a previous run"),
    ("edge-exact-nosese", "tally", "--tally-mode=edge --tally-sese=off --tally-weights={profile:edges-naive}", "clang", "tally",
     "tally edge without SESE counters, spanning tree under the exact weights of a previous run: "
     "chords of a maximum spanning tree, the fewest increments any edge-counter placement can have (Ball & Larus 1994)"),
    ("vertex",       "tally", "--tally-mode=vertex",               "clang", "tally",
     "tally vertex mode (SESE counters where they pay, the default)"),
    ("vertex-nosese", "tally", "--tally-mode=vertex --tally-sese=off", "clang", "tally",
     "tally vertex mode without SESE counters (--tally-sese=off)"),
    ("path",         "tally", "--tally-mode=path",                 "clang", "tally",  "tally path profiling"),
    ("path-cycles",  "tally", "--tally-mode=path --tally-path-cycles=on", "clang", "tally",
     "tally path profiling, single-cycle loops of hashed functions counted at their exits (--tally-path-cycles=on)"),
    ("path-cycles-all", "tally", "--tally-mode=path --tally-path-cycles=all", "clang", "tally",
     "tally path profiling, single-cycle loops counted at their exits in array functions too"),
    ("path-noslices", "tally", "--tally-mode=path --tally-path-slices=off", "clang", "tally",
     "tally path profiling without counter slices: every path end of a hashed function probes the hash table (--tally-path-slices=off)"),
    ("ipath",        "tally", "--tally-mode=ipath",                "clang", "tally",
     "tally interprocedural context paths (Melski & Reps 1998): paths across the calls of each file"),
    ("ipath-piecewise", "tally", "--tally-mode=ipath-piecewise",   "clang", "tally",
     "tally interprocedural piecewise paths (Melski & Reps 1998 section 6)"),
    ("ipath-nocuts", "tally", "--tally-mode=ipath --tally-ipath-cuts=off", "clang", "tally",
     "tally interprocedural context paths without context cuts: every calling context kept"),
    ("ipath-allcuts", "tally", "--tally-mode=ipath --tally-ipath-cuts=all", "clang", "tally",
     "tally interprocedural context paths with every context cut the rule names, hot or not (before the hot rule)"),
    ("sese",         "tally", "--tally-mode=edge --tally-sese=on", "clang", "tally",
     "tally edge with SESE counters (Frenot & Pereira 2024) where the profitability test says they pay: counted loops add (last - init) / step or their trip count at their exits (the same build as edge since they are on by default)"),
    ("sese-all",     "tally", "--tally-mode=edge --tally-sese=all", "clang", "tally",
     "tally edge with SESE counters in every candidate loop (no profitability test; affine variables preferred)"),
    ("sese-exact",   "tally", "--tally-mode=edge --tally-sese=on --tally-weights={profile:edges-naive}", "clang", "tally",
     "tally edge with SESE counters, the spanning tree and the profitability test under the exact frequencies of a previous run (compare with edge-exact)"),
    ("events",       "tally", "--tally-mode=events",               "clang", "tally",  "tally: exact event counting (instructions), countdown on chords"),
    ("events-naive", "tally", "--tally-mode=events-naive",         "clang", "tally",  "tally: every block adds its events"),
    ("events-nosese", "tally", "--tally-mode=events --tally-sese=off", "clang", "tally",
     "tally events without versioned counted loops (every chord decrements, also in call-free counted loops)"),
    ("events-all", "tally", "--tally-mode=events --tally-sese=all", "clang", "tally",
     "tally events also versioning call-free loops of any shape (register counts) and loops with live-out values"),
    ("trace-naive",  "tally", "--tally-mode=trace-naive",          "clang", "tally",  "tally every-edge tracing (the oracle)"),
    ("trace",        "tally", "--tally-mode=trace",                "clang", "tally",  "tally witness tracing (Ball & Larus 1994 section 4)"),
    ("trace-bits",   "tally", "--tally-mode=trace --tally-trace=bits", "clang", "tally",
     "tally bit tracing: every conditional branch writes its direction, a multi-way branch its index "
     "in ceil(log2 n) bits, no witness placement (AE's old scheme, Ball & Larus 1994 section 6.2)"),
    ("trace-bits-rc", "tally", "--tally-mode=trace --tally-trace=bits", "clang", "tally",
     "tally bit tracing, each thread's stream range-coded as it is written (TALLY_TRACE_COMPRESS=1 "
     "at run time, RUN_ENV: trace format 6)"),
    ("trace-regs",   "tally", "--tally-mode=trace --tally-trace-registers=on", "clang", "tally",
     "tally witness tracing, the bit accumulator kept in registers between calls (opt-in)"),
    ("trace-regs-exact", "tally", "--tally-mode=trace --tally-trace-registers=on --tally-weights={profile:edges-naive}", "clang", "tally",
     "tally witness tracing in registers, the plans (witness placement, spanning tree, plan per function) under the "
     "exact frequencies of a previous run (compare with trace-regs: what the static weighting costs)"),
    ("trace-memory", "tally", "--tally-mode=trace --tally-trace-write-through=off", "clang", "tally",
     "tally witness tracing, every record appended to the thread's accumulator in memory (the "
     "default before write-through registers; hidden option, for comparison)"),
    ("trace-floor",  "tally", "--tally-mode=trace --tally-trace-registers=on --tally-trace-floor",
     "clang", "tally",
     "measurement only: trace-regs' witness appends alone (checks of room, staged words, the file), "
     "without entries, returns, Back or direct flags: what recording this plan's witnesses costs at "
     "least (hidden option; the trace cannot be regenerated)"),
    ("trace-floor-exact", "tally", "--tally-mode=trace --tally-trace-registers=on --tally-trace-floor --tally-weights={profile:edges-naive}",
     "clang", "tally",
     "measurement only: trace-floor with the witness plans under the exact frequencies of a previous run "
     "(the fewest appends this placement can give)"),
    ("trace-paths",  "tally", "--tally-mode=trace --tally-trace=paths", "clang", "tally",
     "tally path-number tracing: each Ball-Larus path's number written where it ends, paths cut "
     "before calls (Whole Program Paths; experimental, issue 17)"),
    ("trace-paths-regs", "tally", "--tally-mode=trace --tally-trace=paths --tally-trace-registers=on",
     "clang", "tally",
     "tally path-number tracing with the bit accumulator (and the path register) kept in "
     "registers between calls (experimental, issue 17)"),
]
# trace-naive writes every edge taken to a file (24 bytes per record): gigabytes in a second;
# trace writes a few bits per branch, still a file per run.
OPT_IN = {"edge-max2", "edge-max4", "edge-max8", "edge-chain16", "edge-chain32", "edge-chain64", "path-cycles", "path-cycles-all", "path-noslices", "ipath-nocuts", "ipath-allcuts", "trace-naive", "trace", "trace-bits", "trace-bits-rc", "trace-regs", "trace-regs-exact", "trace-memory", "trace-floor", "trace-floor-exact", "trace-paths", "trace-paths-regs", "sese", "sese-all", "sese-exact", "vertex-nosese", "edge-exact-nosese", "edge-jump1", "edge-jump2", "events-nosese", "events-all"}
# Profiles whose counters are not increments (event totals, or none): no increments column.
NO_INCREMENTS = {"events", "events-naive", "events-nosese", "events-all", "trace-naive", "trace", "trace-bits", "trace-bits-rc", "trace-regs", "trace-regs-exact", "trace-memory", "trace-floor", "trace-floor-exact", "trace-paths", "trace-paths-regs"}
# The tracing variants: the size of the trace each writes on the reduced input (the callgrind
# run) goes into the "Tracing" table, with the blocks and conditional branches that run executed
# (counted by `tally report --trace` on the first of WITNESS_TRACES' traces that regenerates).
TRACES = ["trace", "trace-bits", "trace-bits-rc", "trace-paths", "trace-paths-regs", "trace-naive"]
WITNESS_TRACES = ["trace", "trace-bits", "trace-bits-rc"]
# Timed on the reduced input, against `clang` timed on the reduced input too: trace-naive's
# file on the default input would be tens of gigabytes (lua: ~1e9 edges x 24 bytes).
REDUCED_TIMED = {"trace-naive"}
# Variants whose runs (timed and under callgrind) add to the environment: the same build as
# another variant, with a run-time option.
RUN_ENV = {"trace-bits-rc": {"TALLY_TRACE_COMPRESS": "1"}}
VAR = {v[0]: dict(name=v[0], compiler=v[1], flags=v[2], base=v[3], role=v[4], label=v[5]) for v in VARIANTS}

# What the targets of issue #3 compare (see bench/README.md).
TARGET_MODE, NAIVE, EXACT, ORACLE, PATH = "edge", "blocks-naive", "edge-exact", "edges-naive", "path"
SESE_BASE = "edge-nosese"  # what the SESE section compares `edge` (SESE on by default) with
IPATHS, IPATH_FLAG = ["ipath", "ipath-piecewise", "ipath-nocuts", "ipath-allcuts"], "--tally-mode=ipath"  # render_ipaths
PGO_IR = "clang-pgo-ir"  # "not worse than clang -fprofile-generate on any program"
ANCHORS = [v[0] for v in VARIANTS if v[4] == "anchor"]

# tally's answers when it does not know a mode or an option: skip, do not fail.
UNAVAILABLE = re.compile(r"is not a mode|unknown option --tally|unrecognized.*--tally|invalid value .* --tally")
