//! The static weighting from LLVM's own frequency estimate: for each edge of a function's
//! graph, the estimated executions per call, BlockFrequencyInfo's block frequency times
//! BranchProbabilityInfo's probability of the edge (`shim/freq.cpp`).
//!
//! Ball & Larus 1994 §5 weights edges from loop structure alone and splits every branch equally;
//! its §6.4 shows that the better the weighting predicts the real frequencies, the fewer increments
//! the maximum spanning tree's chords execute. BranchProbabilityInfo predicts branches with the
//! heuristics of Ball & Larus, *Branch prediction for free* (PLDI 1993), as Wu & Larus
//! (MICRO 1994) combine them into frequencies: loop branches, pointer and zero comparisons,
//! calls to `noreturn` or `cold` functions and paths to `unreachable` (error handling),
//! floating-point comparisons, and the program's own `__builtin_expect` hints.
//!
//! It is not the default (`Weighting::Loops`, §5's, is): on the eight benchmark programs it
//! executes 3% fewer increments (geomean; Lua 15% fewer) but more instructions (bzip2 +10%
//! against +6% under callgrind, geomean +5% against +4%), because counters that execute as
//! often land where they cost more code (`docs/benchmarks.md`, variants `edge` and
//! `edge-estimate`). `--tally-weighting=estimate` selects it.
//!
//! Edges that do not come from a terminator: `EXIT -> entry` weighs 1, `ret` / `resume` and the
//! fall-through after a setjmp call weigh their block's frequency, early exits and re-entries
//! weigh 0 (the runtime counts them, as with §5's weighting). A small share of §5's weight is
//! added as a tie-breaker, so that edges LLVM deems equally frequent still follow the loop
//! structure.

use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::Val;
use crate::shim::Freq;
use tally_graph::{EdgeId, IdVec};

/// How much of §5's weight is mixed in to break ties.
const TIE_BREAK: f64 = 1e-6;

/// Estimated executions per call of every edge of `l`'s graph. Must run before the function
/// is changed (it reads the IR that `l` was lowered from).
pub(crate) fn estimated_weights(func: Val, l: &Lowered) -> IdVec<EdgeId, f64> {
    let loops = tally_graph::weight::heuristic_weights(&l.cfg);
    let Some(freq) = Freq::new(func) else {
        return loops;
    };
    let block_of = |e: EdgeId| {
        let src = l.cfg.edge(e).src;
        l.nodes[src.index()].start.parent()
    };
    let mut w = IdVec::filled(l.cfg.num_edges(), 0.0_f64);
    for (e, _) in l.cfg.edges() {
        let est = match &l.edges[e.index()] {
            EdgeIr::EarlyExit | EdgeIr::Reentry => 0.0,
            EdgeIr::Entry => 1.0,
            EdgeIr::Succ { term, index, .. } => {
                let bb = term.parent();
                freq.block(bb) * freq.succ_prob(bb, *index)
            }
            EdgeIr::Fallthrough | EdgeIr::AfterCalls | EdgeIr::Return => freq.block(block_of(e)),
        };
        let est = if est.is_finite() && est >= 0.0 {
            est
        } else {
            0.0
        };
        w[e] = est + TIE_BREAK * loops[e];
    }
    w
}
