//! Events mode: call-free loops without decrements (SESE counters, Frenot & Pereira 2024, and
//! trip counts, `crate::counters::sese`; Ball 1994's events plan, §3-4).
//!
//! A **fast loop** is an innermost loop without calls (so without query points, early exits or
//! re-entries) with one entry. It is **versioned** before the plan's code is placed: on its
//! entry edge, a block `V` branches to an uninstrumented copy when `__tally_ev_limit ==
//! TALLY_EV_NO_LIMIT` (no `TALLY_STOP_AT` pending in the thread, so no stop check can
//! matter), else to the original loop, which gets the plan's chord decrements and stop checks
//! as before. The copy's exit `u -> x` goes through a block of its own that subtracts from
//! `left` what the original loop subtracts between `V` and `x`'s start, `D`, counted in one of
//! two ways (the second, and the live-out repair below, only with `--tally-sese=all`: they do
//! not pay in instructions on every program, docs/log/sese.md "Ninth round"):
//!
//! - **One cycle with a SESE counter** (`Counting::Cycle`): the body is one cycle (every
//!   member has exactly one successor inside the loop: `H = n0 -> n1 -> ... -> latch -> H`,
//!   exits branching off it) and the loop has a header variable advanced by constants, or a
//!   trip count ScalarEvolution knows on entry, giving the back edges `k` taken by the
//!   activation. It executed `k * E + E(n0..u)` events (`E`: one turn's events), so
//!   `D = k * E + E(n0..u) + QueryInc(Start(H)) - QueryInc(Start(x))`: at `V` the count is
//!   `limit - left + QueryInc(Start(H))` (V lies on the entry edge after its increment), at
//!   `x`'s start it must be `limit - left + QueryInc(Start(x))`. Nothing runs per turn.
//! - **Register counts** (`Counting::Register`, every other shape: branches, `continue`,
//!   several back edges, no induction variable): each copied block gets a phi holding the sum
//!   of the plan's increments on the inside edges taken since `V` (0 on entry; an edge's
//!   increment added at the end of its source's copy, in a register), and the exit subtracts
//!   that sum plus the exit edge's own increment: exactly the decrements the original loop
//!   would have made, with no TLS read-modify-write and no stop check per chord.
//!
//! Exit edges are splittable `Flow` edges, whose increments the plan puts on blocks of their
//! own (never at `x`'s start), so the copy runs none of them. Hence every on-line query, call
//! adjustment, per-call-site and per-function counter (all outside the loop) sees what the
//! original loop would give; with a stop pending the original loop runs, so `TALLY_STOP_AT`
//! stops where it did. A frame cannot be abandoned inside a call-free loop except by a
//! signal: a fatal one there finds `left` without the current activation's events (before:
//! without the events since the last chord).
//!
//! **Values used after the loop** other than by phis of its exit blocks (`-O2` IR is not in
//! LCSSA form): when every exit goes to one block `x` that has no other predecessor and the
//! value's block dominates every exit's source, a new phi of `x` merges the original's value
//! and the copy's, and the uses after the loop take it (`x` dominates them all).
//!
//! **Nested loops** (one-cycle loops inside another loop of the function) are entered once
//! per turn of the enclosing loop, so the entry test and the exit arithmetic (about ten
//! instructions against two saved per turn) are paid per outer turn, and LLVM's static
//! estimate gives any loop about 31 turns per entry whatever it does. Such a loop is versioned
//! only when it has one exit, a comparison of values fixed before the enclosing loop runs
//! (constants, values defined outside it, variables of the loop advanced by constants from
//! such a start): every entry then runs the same range (bzip2's passes over its block). A
//! range that moves from entry to entry (a search resuming where the last one stopped, a copy
//! up to a moving end) or an exit on data the loop reads ran few turns per entry and cost
//! more than it saved on xz and zstd (docs/log/sese.md, "Tenth round").
//!
//! Refused (the plan keeps the loop; `TALLY_DEBUG_FAST=1` prints each refusal's reason and
//! each versioned loop with the facts the rules saw):
//! loops holding other loops, calls, several entries, unsplittable edges, exits into blocks
//! counted through predecessor tags, other live-out values, more than [`MAX_INSTRS`]
//! instructions (code growth), fewer than [`MIN_TURNS`] back edges per entry under the weights
//! (the entry test and the exit arithmetic would cost more than the decrements saved), and
//! parallel inside edges with different increments, nested one-cycle loops whose range moves
//! (above), and nested ones with fewer than [`MIN_TURNS_PER_CALL`] back edges per call of the
//! function under the weights (cold paths: the copy saves next to nothing there, while its
//! code changes the register allocation of the function's hot paths, docs/log/sese.md "Eleventh
//! round"); by default (`on`) also every loop that is not one cycle with a SESE counter, and
//! every live-out value (the eighth round's choice).

mod classify;
mod emit;
mod live_out;

use classify::{classify, describe};
pub(super) use emit::emit;

use super::EventsPlan;
use crate::counters::sese::{self, Candidate};
use crate::ir::lower::Lowered;
use crate::ir::Bb;
use crate::options::Sese;
use std::collections::HashMap;
use tally_graph::dom::Dominators;
use tally_graph::{Dfs, EdgeId, IdVec, Loops, NodeId};

/// Largest loop copied (instructions of its blocks).
pub(super) const MAX_INSTRS: usize = 96;
/// Fewest back edges per entry (under the weights) for a loop to be versioned.
pub(super) const MIN_TURNS: f64 = 3.0;
/// Fewest back edges per call of the function (under the weights) for a loop to be versioned:
/// below it the decrements saved are less than the copy costs the function's other paths
/// (register allocation of the whole function changes; docs/log/sese.md "Eleventh round").
pub(super) const MIN_TURNS_PER_CALL: f64 = 1.0;

/// How a versioned loop's copy knows the events its activation ran.
pub(crate) enum Counting {
    /// One cycle with a SESE counter: `k * E + E(n0..u)` from the back edges `k`.
    Cycle {
        /// The SESE counter giving the back edges.
        cand: Box<Candidate>,
        /// Per exit of `cand.counter.add_at`: its source's position on the path.
        exit_at: Vec<usize>,
    },
    /// Any shape: the plan's chord increments added to a register in the copy.
    Register,
}

/// A loop versioned in events mode.
pub(crate) struct FastLoop {
    pub counting: Counting,
    /// The members, header first (for `Cycle`: along the cycle).
    pub path: Vec<NodeId>,
    /// The entry edge.
    pub entry: EdgeId,
    /// The exit edges (for `Cycle`: `cand.counter.add_at`).
    pub exits: Vec<EdgeId>,
    /// Values of the loop used after it other than by phis of its exit blocks (then every
    /// exit goes to one block, which has no other predecessor), by block and position: edge
    /// splitting rebuilds the header's phis in place.
    pub live_out: Vec<(Bb, usize)>,
}

/// Why a loop is not versioned (counted under `TALLY_DEBUG_FAST`, module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    NotInnermost,
    Calls,
    Shape,
    Entries,
    Unsplittable,
    Ir,
    Big,
    LiveOut,
    Branches,
    NoCandidate,
    FewTurns,
    Resumes,
    Cold,
}

/// What the fast loops of a function were.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FastStats {
    /// Natural loops of the function (when searched: `--tally-sese` not `off`).
    pub loops: usize,
    /// Loops with a SESE candidate.
    pub candidates: usize,
    /// Loops versioned.
    pub versioned: usize,
    /// Of those, counted by a trip count.
    pub trips: usize,
}

fn debug(what: &str) {
    if std::env::var_os("TALLY_DEBUG_FAST").is_some() {
        eprintln!("tally-fast: {what}");
    }
}

/// The loops of `l` to version (module doc), under `sese` (`Off`: none; `All`: also
/// register counts and live-out repair), and the loops and candidates searched.
pub(super) fn plan(
    l: &Lowered,
    ep: &EventsPlan,
    weights: Option<&IdVec<EdgeId, f64>>,
    choice: Sese,
) -> (Vec<FastLoop>, FastStats) {
    if choice == Sese::Off {
        return (Vec::new(), FastStats::default());
    }
    let cfg = &l.cfg;
    let register = choice == Sese::All;
    let choice = if choice == Sese::Trips {
        Sese::Trips
    } else {
        Sese::All
    };
    let (cands, st) = sese::candidates(l, weights, choice, false);
    let searched = FastStats {
        loops: st.loops,
        candidates: st.candidates,
        ..FastStats::default()
    };
    if st.loops == 0 {
        return (Vec::new(), searched);
    }
    let func = l.nodes[0].start.parent().function();
    let estimate;
    let freq = match weights {
        Some(w) => w,
        None => {
            estimate = crate::ir::estimate::estimated_weights(func, l);
            &estimate
        }
    };
    let dfs = Dfs::compute(cfg);
    let loops = Loops::compute(cfg, &dfs);
    let doms = Dominators::compute(cfg, &dfs);
    let mut by_header: HashMap<NodeId, Candidate> =
        cands.into_iter().map(|c| (c.counter.header, c)).collect();
    let mut out = Vec::new();
    for &h in loops.entries() {
        let cand = by_header.remove(&h);
        match classify(l, ep, &loops, &doms, h, cand, freq, register) {
            Ok(f) => {
                if std::env::var_os("TALLY_DEBUG_FAST").is_some() {
                    debug(&describe(l, &loops, &f, freq, func));
                }
                out.push(f)
            }
            Err(why) => debug(&format!("refused {why:?}")),
        }
    }
    (out, searched)
}
