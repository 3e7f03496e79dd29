//! Events mode: call-free loops without decrements (SESE counters, Frenot & Pereira 2024, and
//! trip counts, `crate::sese`; Ball 1994's events plan, §3-4).
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

use super::EventsPlan;
use crate::emit::{cname, Emitter};
use crate::ir::{self, Bb, Val};
use crate::lower::{EdgeIr, Lowered};
use crate::options::Sese;
use crate::sese::{self, Candidate};
use crate::surgery::split_edge;
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMIntPredicate, LLVMOpcode};
use std::collections::HashMap;
use tally_graph::dom::Dominators;
use tally_graph::sese::SeseLoop;
use tally_graph::{Dfs, EdgeId, EdgeKind, IdVec, Loops, NodeId};

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
    let func = Val(unsafe { c::LLVMGetBasicBlockParent(l.nodes[0].start.parent().0) });
    let estimate;
    let freq = match weights {
        Some(w) => w,
        None => {
            estimate = crate::estimate::estimated_weights(func, l);
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

/// The loop of header `h` if it can be versioned (module doc), or why not.
#[allow(clippy::too_many_arguments)]
fn classify(
    l: &Lowered,
    ep: &EventsPlan,
    loops: &Loops,
    doms: &Dominators,
    h: NodeId,
    cand: Option<Candidate>,
    freq: &IdVec<EdgeId, f64>,
    register: bool,
) -> Result<FastLoop, Refusal> {
    let cfg = &l.cfg;
    let members = loops.nat_loop(h);
    if members.iter().any(|&m| m != h && loops.is_loop_entry(m)) {
        return Err(Refusal::NotInnermost);
    }
    let lp = SeseLoop::new(cfg, loops, doms, h).map_err(|_| Refusal::Shape)?;
    if ep.calls.iter().any(|c| lp.contains(c.node)) || !lp.early_exits.is_empty() {
        return Err(Refusal::Calls);
    }
    let [entry] = lp.entries[..] else {
        return Err(Refusal::Entries);
    };
    if !splittable_flow(l, entry) || !lp.exits.iter().all(|&e| splittable_flow(l, e)) {
        return Err(Refusal::Unsplittable);
    }
    // Inside edges: terminator successors (no setjmp re-entries, no calls).
    for &m in &lp.members {
        for &e in cfg.succs(m) {
            if lp.contains(cfg.edge(e).dst) && !matches!(l.edges[e.index()], EdgeIr::Succ { .. }) {
                return Err(Refusal::Ir);
            }
        }
    }
    // The IR: one vertex per block, branches only, no calls but intrinsics, small.
    let bbs: Vec<Bb> = lp
        .members
        .iter()
        .map(|&m| l.nodes[m.index()].start.parent())
        .collect();
    let mut size = 0;
    for (&m, &bb) in lp.members.iter().zip(&bbs) {
        let node = &l.nodes[m.index()];
        let term = bb.terminator().ok_or(Refusal::Ir)?;
        if node.end != term
            || bbs.iter().filter(|&&b| b == bb).count() != 1
            || !matches!(term.opcode(), LLVMOpcode::LLVMBr | LLVMOpcode::LLVMSwitch)
        {
            return Err(Refusal::Ir);
        }
        for i in bb.instructions() {
            size += 1;
            if i.is_call_like()
                && !(i.opcode() == LLVMOpcode::LLVMCall
                    && !i.calls_inline_asm()
                    && i.called_function().is_some_and(|f| f.intrinsic_id() != 0))
            {
                return Err(Refusal::Calls);
            }
        }
    }
    if size > MAX_INSTRS {
        return Err(Refusal::Big);
    }
    // Values used after the loop other than by its exit blocks' phis: merged by a phi of the
    // one exit block (`emit`), which needs every exit to go there, that block to have no
    // other predecessor, and the value to be defined on every exit's way.
    let mut live_out = Vec::new();
    for (&m, &bb) in lp.members.iter().zip(&bbs) {
        for (k, i) in bb.instructions().into_iter().enumerate() {
            if !used_only_inside_or_by_exit_phis(i, &bbs) {
                live_out.push((m, i, (bb, k)));
            }
        }
    }
    if !live_out.is_empty() {
        let x = cfg.edge(lp.exits[0]).dst;
        let repairable = register
            && lp.exits.iter().all(|&e| cfg.edge(e).dst == x)
            && cfg.preds(x).iter().all(|&e| lp.contains(cfg.edge(e).src))
            && live_out.iter().all(|&(m, i, _)| {
                only_instruction_users(i)
                    && lp.exits.iter().all(|&e| doms.dominates(m, cfg.edge(e).src))
            });
        if !repairable {
            return Err(Refusal::LiveOut);
        }
    }
    let live_out: Vec<(Bb, usize)> = live_out.into_iter().map(|(_, _, at)| at).collect();
    if lp.members.iter().map(|&n| ep.events[n]).sum::<u64>() == 0 {
        return Err(Refusal::Ir);
    }
    // Today's one-cycle loops with a SESE counter: nothing per turn.
    let cycle = cycle_path(l, &lp);
    if let (Some(path), Some(cand)) = (&cycle, cand) {
        if lp.latches == [cand.counter.measured] {
            if freq[cand.counter.measured] < MIN_TURNS * freq[entry] {
                return Err(Refusal::FewTurns);
            }
            // Nested in another loop: entered once per outer turn, so the entry test and the
            // exit arithmetic are paid per outer turn, and the static estimate (about 31 turns
            // per entry for any loop) says nothing of how far each entry runs. Kept only
            // loops with one exit whose range is fixed before the enclosing loop runs (bzip2's
            // `fallbackSort` passes over the block); refused loops whose range moves from
            // entry to entry (a search resuming where the last one stopped, a copy up to a
            // moving end: xz's `while (len_end < offset)`, zstd's `ZSTD_wildcopy`) or that
            // leave early on data (match catch-up loops), docs/log/sese.md "Tenth round".
            if let Some(outer) = enclosing(loops, h) {
                let header_bb = l.nodes[h.index()].start.parent();
                let outer_bbs: Vec<Bb> = loops
                    .nat_loop(outer)
                    .iter()
                    .map(|&m| l.nodes[m.index()].start.parent())
                    .collect();
                if !(lp.exits.len() == 1
                    && range_fixed_outside(l, lp.exits[0], header_bb, &bbs, &outer_bbs))
                {
                    return Err(Refusal::Resumes);
                }
                // Cold: on a path the weights say runs rarely per call (zlib's window copy
                // after `op = wnext` in `inflate_fast`, 0.3 estimated turns per call), the
                // copy saves next to nothing, yet its code changes the register allocation of
                // the whole function: +0.36M instructions on zlib's hot decoding loop (spills,
                // copies) with the copy never entered, docs/log/sese.md "Eleventh round".
                if freq[cand.counter.measured] < MIN_TURNS_PER_CALL * freq[cfg.entry_edge()] {
                    return Err(Refusal::Cold);
                }
            }
            let exit_at = cand
                .counter
                .add_at
                .iter()
                .map(|&e| {
                    let u = cfg.edge(e).src;
                    path.iter()
                        .position(|&n| n == u)
                        .expect("exits leave members")
                })
                .collect();
            return Ok(FastLoop {
                live_out,
                exits: cand.counter.add_at.clone(),
                counting: Counting::Cycle {
                    cand: Box::new(cand),
                    exit_at,
                },
                path: path.clone(),
                entry,
            });
        }
    }
    if !register {
        return Err(if cycle.is_some() {
            Refusal::NoCandidate
        } else {
            Refusal::Branches
        });
    }
    let turns: f64 = lp.latches.iter().map(|&e| freq[e]).sum();
    if turns < MIN_TURNS * freq[entry] {
        return Err(Refusal::FewTurns);
    }
    // Parallel inside edges (switch cases to one block) share the copy's phi entry: they
    // must add the same.
    let mut seen: HashMap<(NodeId, NodeId), i64> = HashMap::new();
    for &m in &lp.members {
        for &e in cfg.succs(m) {
            let d = cfg.edge(e).dst;
            if lp.contains(d) {
                let inc = ep.plan.increment(e);
                if *seen.entry((m, d)).or_insert(inc) != inc {
                    return Err(Refusal::Ir);
                }
            }
        }
    }
    let mut path = vec![h];
    path.extend(lp.members.iter().copied().filter(|&m| m != h));
    Ok(FastLoop {
        live_out,
        counting: Counting::Register,
        path,
        entry,
        exits: lp.exits.clone(),
    })
}

/// The innermost loop holding the loop of header `h`, other than itself.
fn enclosing(loops: &Loops, h: NodeId) -> Option<NodeId> {
    loops
        .entries()
        .iter()
        .copied()
        .filter(|&y| y != h && loops.contains(y, h))
        .min_by_key(|&y| loops.nat_loop(y).len())
}

/// Whether the exit `e` of a loop (blocks `bbs`) is a comparison of values fixed before the
/// enclosing loop (blocks `outer_bbs`) runs: constants, values defined outside it, and
/// variables of the loop advanced by constants from such a start. Then every entry runs the
/// same range; otherwise the range moves with the enclosing loop's turns, or the exit tests
/// data the loop reads (module doc, the nesting rule).
fn range_fixed_outside(l: &Lowered, e: EdgeId, header: Bb, bbs: &[Bb], outer_bbs: &[Bb]) -> bool {
    let EdgeIr::Succ { term, .. } = l.edges[e.index()] else {
        return false;
    };
    if term.opcode() != LLVMOpcode::LLVMBr || term.num_operands() != 3 {
        return false;
    }
    let cond = term.operand(0);
    if unsafe { c::LLVMIsAICmpInst(cond.0) }.is_null() {
        return false;
    }
    (0..2).all(|k| in_fixed_range(cond.operand(k), header, bbs, outer_bbs, 4))
}

/// `v` (an operand of a loop's exit test, [`range_fixed_outside`]): fixed outside the
/// enclosing loop, or a variable of the loop advanced by constants from such a start.
fn in_fixed_range(v: Val, header: Bb, bbs: &[Bb], outer_bbs: &[Bb], depth: u32) -> bool {
    if unsafe { c::LLVMIsAInstruction(v.0) }.is_null() {
        return true; // constants, arguments, globals
    }
    let bb = v.parent();
    if !bbs.contains(&bb) {
        return fixed_outside(v, outer_bbs, depth);
    }
    if depth == 0 {
        return false;
    }
    if v.opcode() == LLVMOpcode::LLVMPHI && bb == header {
        // A header phi: advanced by a constant on the back edges, from a fixed start.
        let n = unsafe { c::LLVMCountIncoming(v.0) };
        return (0..n).all(|i| {
            let from = Bb(unsafe { c::LLVMGetIncomingBlock(v.0, i) });
            let x = Val(unsafe { c::LLVMGetIncomingValue(v.0, i) });
            if bbs.contains(&from) {
                sese::affine_step(x).is_some_and(|(u, _)| u == v)
            } else {
                fixed_outside(x, outer_bbs, depth - 1)
            }
        });
    }
    match v.opcode() {
        LLVMOpcode::LLVMZExt | LLVMOpcode::LLVMSExt | LLVMOpcode::LLVMTrunc => {
            in_fixed_range(v.operand(0), header, bbs, outer_bbs, depth - 1)
        }
        _ => sese::affine_step(v)
            .is_some_and(|(u, _)| in_fixed_range(u, header, bbs, outer_bbs, depth - 1)),
    }
}

/// `v` (defined outside the loop) is fixed before the enclosing loop (blocks `outer_bbs`)
/// runs: defined outside it, or computed there by arithmetic from such values.
fn fixed_outside(v: Val, outer_bbs: &[Bb], depth: u32) -> bool {
    if unsafe { c::LLVMIsAInstruction(v.0) }.is_null() || !outer_bbs.contains(&v.parent()) {
        return true;
    }
    if depth == 0 {
        return false;
    }
    use LLVMOpcode::*;
    matches!(
        v.opcode(),
        LLVMZExt
            | LLVMSExt
            | LLVMTrunc
            | LLVMAdd
            | LLVMSub
            | LLVMMul
            | LLVMShl
            | LLVMLShr
            | LLVMAShr
            | LLVMAnd
            | LLVMOr
            | LLVMXor
            | LLVMPtrToInt
            | LLVMGetElementPtr
    ) && (0..v.num_operands()).all(|k| fixed_outside(v.operand(k), outer_bbs, depth - 1))
}

/// A versioned loop for `TALLY_DEBUG_FAST`: function, header line, kind and the static
/// facts the turn rule sees.
fn describe(
    l: &Lowered,
    loops: &Loops,
    f: &FastLoop,
    freq: &IdVec<EdgeId, f64>,
    func: Val,
) -> String {
    let h = f.path[0];
    let depth = loops
        .entries()
        .iter()
        .filter(|&&y| y != h && loops.contains(y, h))
        .count();
    let per_call = freq[f.entry] / freq[l.cfg.entry_edge()].max(f64::MIN_POSITIVE);
    let bb = l.nodes[f.path[0].index()].start.parent();
    let line = bb
        .instructions()
        .into_iter()
        .find_map(|i| i.debug_loc())
        .map_or(0, |loc| crate::ir::location_pos(loc).line);
    let size: usize = f
        .path
        .iter()
        .map(|&m| l.nodes[m.index()].start.parent().instructions().len())
        .sum();
    let (kind, trip) = match &f.counting {
        Counting::Cycle { cand, .. } => ("cycle", cand.is_trip_count()),
        Counting::Register => ("register", false),
    };
    let turns: f64 = l
        .cfg
        .preds(f.path[0])
        .iter()
        .filter(|&&e| e != f.entry)
        .map(|&e| freq[e])
        .sum::<f64>()
        / freq[f.entry].max(f64::MIN_POSITIVE);
    format!(
        "versioned {} line {line} {kind} trip={trip} blocks={} size={size} exits={} turns={turns:.1} depth={depth} entries/call={per_call:.2}",
        func.name(),
        f.path.len(),
        f.exits.len()
    )
}

fn splittable_flow(l: &Lowered, e: EdgeId) -> bool {
    matches!(
        l.edges[e.index()],
        EdgeIr::Succ {
            splittable: true,
            ..
        }
    ) && l.cfg.edge(e).kind == EdgeKind::Flow
}

/// The members along the loop's cycle, header first, if its body is one cycle (each member
/// has one successor edge inside the loop).
fn cycle_path(l: &Lowered, lp: &SeseLoop) -> Option<Vec<NodeId>> {
    let cfg = &l.cfg;
    let [back] = lp.latches[..] else {
        return None;
    };
    let mut path = vec![lp.header];
    let mut n = lp.header;
    loop {
        let inside: Vec<EdgeId> = cfg
            .succs(n)
            .iter()
            .copied()
            .filter(|&e| lp.contains(cfg.edge(e).dst))
            .collect();
        let [e] = inside[..] else {
            return None;
        };
        let d = cfg.edge(e).dst;
        if d == lp.header {
            if e != back {
                return None;
            }
            break;
        }
        if path.contains(&d) || path.len() > lp.members.len() {
            return None;
        }
        path.push(d);
        n = d;
    }
    (path.len() == lp.members.len()).then_some(path)
}

/// Every user of `v` is an instruction (its uses can be rewritten).
fn only_instruction_users(v: Val) -> bool {
    unsafe {
        let mut u = c::LLVMGetFirstUse(v.0);
        while !u.is_null() {
            if c::LLVMIsAInstruction(c::LLVMGetUser(u)).is_null() {
                return false;
            }
            u = c::LLVMGetNextUse(u);
        }
    }
    true
}

/// Makes the uses of the loop's value `v` after the loop (outside `bbs`, but not the exit
/// block's phis on entries from the loop) use a new phi of the exit block `x` instead, taking
/// `v` from each exit edge `exits` (edges of terminators in `bbs`); the copy's exits add the
/// copy's value to it with `x`'s other phis. `v`'s block dominates every exit's source
/// ([`classify`]), and `x` is the only way out of the loop, so `x` dominates the uses.
fn merge_live_out(em: &Emitter, l: &Lowered, v: Val, x: Bb, exits: &[EdgeId], bbs: &[Bb]) {
    let empty = cname("");
    unsafe {
        let mut users = Vec::new();
        let mut u = c::LLVMGetFirstUse(v.0);
        while !u.is_null() {
            let user = Val(c::LLVMGetUser(u));
            if !bbs.contains(&user.parent()) && !users.contains(&user) {
                users.push(user);
            }
            u = c::LLVMGetNextUse(u);
        }
        let first = x.first().expect("exit blocks have a terminator");
        // Before the first instruction's debug records: a phi carries none.
        c::LLVMPositionBuilderBeforeInstrAndDbgRecords(em.b, first.0);
        let phi = c::LLVMBuildPhi(em.b, c::LLVMTypeOf(v.0), empty.as_ptr());
        for &e in exits {
            let EdgeIr::Succ { term, .. } = l.edges[e.index()] else {
                unreachable!("exits are splittable terminator edges")
            };
            let mut vals = [v.0];
            let mut blocks = [term.parent().0];
            c::LLVMAddIncoming(phi, vals.as_mut_ptr(), blocks.as_mut_ptr(), 1);
        }
        for user in users {
            let is_phi = user.opcode() == LLVMOpcode::LLVMPHI;
            for k in 0..c::LLVMGetNumOperands(user.0) as u32 {
                if c::LLVMGetOperand(user.0, k) != v.0 {
                    continue;
                }
                if is_phi && bbs.contains(&Bb(c::LLVMGetIncomingBlock(user.0, k))) {
                    continue;
                }
                c::LLVMSetOperand(user.0, k, phi);
            }
        }
    }
}

/// Every use of `v` is in the loop or in a phi of an exit block on an entry from the loop.
fn used_only_inside_or_by_exit_phis(v: Val, bbs: &[Bb]) -> bool {
    unsafe {
        let mut u = c::LLVMGetFirstUse(v.0);
        while !u.is_null() {
            let user = Val(c::LLVMGetUser(u));
            if c::LLVMIsAInstruction(user.0).is_null() {
                return false;
            }
            if !bbs.contains(&user.parent()) {
                if user.opcode() != LLVMOpcode::LLVMPHI {
                    return false;
                }
                let n = c::LLVMCountIncoming(user.0);
                for i in 0..n {
                    if c::LLVMGetIncomingValue(user.0, i) == v.0
                        && !bbs.contains(&Bb(c::LLVMGetIncomingBlock(user.0, i)))
                    {
                        return false;
                    }
                }
            }
            u = c::LLVMGetNextUse(u);
        }
    }
    true
}

/// Versions the loops `fast` (module doc). Runs before any of the plan's code is placed: the
/// copies and their exit blocks are not vertices of the plan, and nothing is placed in them.
/// `skip(n)`: a block counted through predecessor tags (its loops are not versioned).
pub(super) fn emit(
    em: &Emitter,
    l: &Lowered,
    ep: &EventsPlan,
    fast: &[FastLoop],
    skip: &dyn Fn(NodeId) -> bool,
) -> FastStats {
    let cfg = &l.cfg;
    let plan = &ep.plan;
    let used: Vec<&FastLoop> = fast
        .iter()
        .filter(|f| {
            let ok =
                !f.path.iter().any(|&n| skip(n)) && !f.exits.iter().any(|&e| skip(cfg.edge(e).dst));
            if !ok {
                debug("refused Tagged");
            }
            ok
        })
        .collect();
    let mut stats = FastStats::default();
    if used.is_empty() {
        return stats;
    }
    let cands: Vec<&Candidate> = used
        .iter()
        .filter_map(|f| match &f.counting {
            Counting::Cycle { cand, .. } => Some(&**cand),
            Counting::Register => None,
        })
        .collect();
    // While the function is still the one ScalarEvolution answered about.
    let mut trips = sese::expand_trip_counts(em.func, &cands).into_iter();
    let empty = cname("");
    let g = em.g;
    // Every V first: a loop's exit may be another's entry, whose V the copy's exit then
    // enters (the exit's successor is V once split).
    let vs: Vec<Bb> = used
        .iter()
        .map(|f| {
            let EdgeIr::Succ { term, index, .. } = l.edges[f.entry.index()] else {
                unreachable!("entries are splittable terminator edges")
            };
            let v = split_edge(em, term, index);
            carry_phis(em, v, term.parent());
            v
        })
        .collect();
    for (f, v) in used.iter().zip(vs) {
        stats.versioned += 1;
        let bbs: Vec<Bb> = f
            .path
            .iter()
            .map(|&m| l.nodes[m.index()].start.parent())
            .collect();
        let header = bbs[0];
        let map = clone_blocks(em, &bbs, v);
        let copy_of = |bb: Bb| Bb(unsafe { c::LLVMValueAsBasicBlock(map[&as_value(bb)]) });
        let copy_header = copy_of(header);
        unsafe {
            let br = v.terminator().expect("split block has its branch");
            em.at(br);
            let limit = c::LLVMBuildLoad2(em.b, g.i64t, g.ev_limit, empty.as_ptr());
            let none = c::LLVMConstInt(g.i64t, tally_format::abi::EV_NO_LIMIT as u64, 1);
            let fast_ok = c::LLVMBuildICmp(
                em.b,
                LLVMIntPredicate::LLVMIntEQ,
                limit,
                none,
                empty.as_ptr(),
            );
            let cond = c::LLVMBuildCondBr(em.b, fast_ok, copy_header.0, header.0);
            ir::set_branch_weights(g.ctx, cond, &[1 << 20, 1]);
            c::LLVMInstructionEraseFromParent(br.0);
        }
        let lookup = |x: Val| -> Val { map.get(&x.0).map_or(x, |&y| Val(y)) };
        if !f.live_out.is_empty() {
            let EdgeIr::Succ { term, index, .. } = l.edges[f.exits[0].index()] else {
                unreachable!("exits are splittable terminator edges")
            };
            let x = term.successor(index);
            for &(bb, k) in &f.live_out {
                let v = bb.instructions()[k];
                merge_live_out(em, l, v, x, &f.exits, &bbs);
            }
        }
        // Register counting: per copied block, the plan's increments of the inside edges
        // taken since the copy's entry (a phi; the edge's increment added at its source).
        let acc: HashMap<NodeId, LLVMValueRef> = match &f.counting {
            Counting::Cycle { cand, .. } => {
                stats.trips += usize::from(cand.is_trip_count());
                HashMap::new()
            }
            Counting::Register => register_counts(em, l, ep, &f.path, &copy_of, v),
        };
        let trips = match &f.counting {
            Counting::Cycle { .. } => trips.next().expect("one per cycle loop"),
            Counting::Register => None,
        };
        let e_turn: u64 = f.path.iter().map(|&n| ep.events[n]).sum();
        let q_header = plan.query_start(f.path[0]);
        for (i, &e) in f.exits.iter().enumerate() {
            let EdgeIr::Succ { term, index, .. } = l.edges[e.index()] else {
                unreachable!("exits are splittable terminator edges")
            };
            let x = term.successor(index);
            let copy_term = lookup(term);
            let u = term.parent();
            let landing = Bb(unsafe {
                let name = cname("tally.fast.exit");
                c::LLVMAppendBasicBlockInContext(g.ctx, em.func.0, name.as_ptr())
            });
            copy_term.set_successor(index, landing);
            em.at_end(landing);
            // `d`: what the original loop subtracts from `left` between V and x's start.
            let d = match &f.counting {
                Counting::Cycle { cand, exit_at } => {
                    let k = sese::back_edges_in_copy(em, cand, i, &lookup, trips);
                    let before: u64 = f.path[..=exit_at[i]].iter().map(|&n| ep.events[n]).sum();
                    let konst = (before as i64)
                        .wrapping_add(q_header)
                        .wrapping_sub(plan.query_start(cfg.edge(e).dst));
                    unsafe {
                        let mut d = k;
                        if e_turn != 1 {
                            d = c::LLVMBuildMul(em.b, d, em.i64c(e_turn), empty.as_ptr());
                        }
                        if konst != 0 {
                            let kc = c::LLVMConstInt(g.i64t, konst as u64, 1);
                            d = c::LLVMBuildAdd(em.b, d, kc, empty.as_ptr());
                        }
                        d
                    }
                }
                Counting::Register => unsafe {
                    // The inside edges' increments, then the exit edge's own (placed by the
                    // plan on a block of its own on the original exit, bypassed here).
                    let mut d = acc[&cfg.edge(e).src];
                    let inc = plan.increment(e);
                    if inc != 0 {
                        let kc = c::LLVMConstInt(g.i64t, inc as u64, 1);
                        d = c::LLVMBuildAdd(em.b, d, kc, empty.as_ptr());
                    }
                    d
                },
            };
            unsafe {
                let left = c::LLVMBuildLoad2(em.b, g.i64t, g.ev_left, empty.as_ptr());
                let new = c::LLVMBuildSub(em.b, left, d, empty.as_ptr());
                c::LLVMBuildStore(em.b, new, g.ev_left);
                c::LLVMBuildBr(em.b, x.0);
                // The exit block's phis: the copy's value on this entry.
                for phi in x.phis() {
                    let n = c::LLVMCountIncoming(phi.0);
                    let from_u = (0..n)
                        .find(|&j| c::LLVMGetIncomingBlock(phi.0, j) == u.0)
                        .expect("an exit block's phi has an entry for the exit's source");
                    let val = lookup(Val(c::LLVMGetIncomingValue(phi.0, from_u)));
                    let mut vals = [val.0];
                    let mut blocks = [landing.0];
                    c::LLVMAddIncoming(phi.0, vals.as_mut_ptr(), blocks.as_mut_ptr(), 1);
                }
            }
        }
    }
    stats
}

/// The register counts of a copy (`Counting::Register`): per member `m`, a phi at the top of
/// `m`'s copy holding the plan's increments of the inside edges taken since the copy was
/// entered from `v` (0 there). An edge's increment is added at the end of its source's copy
/// (parallel edges add the same, [`classify`]), so the value is in a register, not `left`.
fn register_counts(
    em: &Emitter,
    l: &Lowered,
    ep: &EventsPlan,
    members: &[NodeId],
    copy_of: &dyn Fn(Bb) -> Bb,
    v: Bb,
) -> HashMap<NodeId, LLVMValueRef> {
    let cfg = &l.cfg;
    let g = em.g;
    let empty = cname("");
    let bb_of = |m: NodeId| l.nodes[m.index()].start.parent();
    let mut acc = HashMap::new();
    for &m in members {
        let nb = copy_of(bb_of(m));
        unsafe {
            let first = nb.first().expect("copied blocks have a terminator");
            c::LLVMPositionBuilderBeforeInstrAndDbgRecords(em.b, first.0);
            let name = cname("tally.fast.acc");
            acc.insert(m, c::LLVMBuildPhi(em.b, g.i64t, name.as_ptr()));
        }
    }
    unsafe {
        let phi = acc[&members[0]];
        let mut vals = [c::LLVMConstInt(g.i64t, 0, 0)];
        let mut blocks = [v.0];
        c::LLVMAddIncoming(phi, vals.as_mut_ptr(), blocks.as_mut_ptr(), 1);
    }
    for &m in members {
        let nb = copy_of(bb_of(m));
        let term = nb.terminator().expect("copied blocks have a terminator");
        let mut sums: HashMap<i64, LLVMValueRef> = HashMap::new();
        for &e in cfg.succs(m) {
            let d = cfg.edge(e).dst;
            let Some(&phi) = acc.get(&d) else {
                continue;
            };
            let inc = ep.plan.increment(e);
            let val = *sums.entry(inc).or_insert_with(|| unsafe {
                if inc == 0 {
                    acc[&m]
                } else {
                    em.at(term);
                    let kc = c::LLVMConstInt(g.i64t, inc as u64, 1);
                    c::LLVMBuildAdd(em.b, acc[&m], kc, empty.as_ptr())
                }
            });
            unsafe {
                let mut vals = [val];
                let mut blocks = [nb.0];
                c::LLVMAddIncoming(phi, vals.as_mut_ptr(), blocks.as_mut_ptr(), 1);
            }
        }
    }
    acc
}

/// Gives `v` (a block on the edge `p -> H`) a phi for each phi of `H`, taking `H`'s value
/// from `p`, and makes `H` take it from `v`: the copy's header and, when another versioned
/// loop exits by this edge, that loop's copy (entering `v` from its own exit block, which adds
/// its values to these phis) see one value that dominates both headers. Single-entry phis
/// cost no code.
fn carry_phis(em: &Emitter, v: Bb, p: Bb) {
    let empty = cname("");
    let br = v.terminator().expect("split block has its branch");
    let h = br.successor(0);
    for phi in h.phis() {
        unsafe {
            let n = c::LLVMCountIncoming(phi.0);
            let j = (0..n)
                .find(|&j| c::LLVMGetIncomingBlock(phi.0, j) == v.0)
                .expect("the header's phi has an entry from the split block");
            em.at(br);
            let carried = c::LLVMBuildPhi(em.b, c::LLVMTypeOf(phi.0), empty.as_ptr());
            let mut vals = [c::LLVMGetIncomingValue(phi.0, j)];
            let mut blocks = [p.0];
            c::LLVMAddIncoming(carried, vals.as_mut_ptr(), blocks.as_mut_ptr(), 1);
            c::LLVMSetOperand(phi.0, j, carried);
        }
    }
}

fn as_value(bb: Bb) -> LLVMValueRef {
    unsafe { c::LLVMBasicBlockAsValue(bb.0) }
}

/// Copies the blocks `bbs` (header first; a loop entered only from `entry`) into new blocks:
/// returns the map from the originals' instructions and blocks (as values) to the copies'.
/// The copy's header phis take their outside values from `entry`; successors outside `bbs`
/// are kept (the caller redirects them). Debug intrinsics are not copied.
fn clone_blocks(em: &Emitter, bbs: &[Bb], entry: Bb) -> HashMap<LLVMValueRef, LLVMValueRef> {
    let g = em.g;
    let empty = cname("");
    let mut map: HashMap<LLVMValueRef, LLVMValueRef> = HashMap::new();
    let mut after = entry;
    let copies: Vec<Bb> = bbs
        .iter()
        .map(|&bb| {
            let name = cname("tally.fast");
            let nb =
                Bb(unsafe { c::LLVMAppendBasicBlockInContext(g.ctx, em.func.0, name.as_ptr()) });
            unsafe { c::LLVMMoveBasicBlockAfter(nb.0, after.0) };
            after = nb;
            map.insert(as_value(bb), as_value(nb));
            nb
        })
        .collect();
    let mut phis = Vec::new();
    let mut others = Vec::new();
    for (&bb, &nb) in bbs.iter().zip(&copies) {
        unsafe { c::LLVMPositionBuilderAtEnd(em.b, nb.0) };
        for i in bb.instructions() {
            let new = unsafe {
                if i.opcode() == LLVMOpcode::LLVMPHI {
                    let p = c::LLVMBuildPhi(em.b, c::LLVMTypeOf(i.0), empty.as_ptr());
                    phis.push((i, p));
                    p
                } else {
                    if i.opcode() == LLVMOpcode::LLVMCall
                        && i.called_function()
                            .is_some_and(|f| f.name().starts_with("llvm.dbg."))
                    {
                        continue;
                    }
                    let p = c::LLVMInstructionClone(i.0);
                    c::LLVMInsertIntoBuilder(em.b, p);
                    others.push(p);
                    p
                }
            };
            map.insert(i.0, new);
        }
    }
    unsafe {
        for &p in &others {
            for k in 0..c::LLVMGetNumOperands(p) as u32 {
                let op = c::LLVMGetOperand(p, k);
                if let Some(&new) = map.get(&op) {
                    c::LLVMSetOperand(p, k, new);
                }
            }
        }
        for (old, new) in phis {
            let n = c::LLVMCountIncoming(old.0);
            let (mut vals, mut blocks): (Vec<_>, Vec<_>) = (0..n)
                .filter_map(|j| {
                    let v = c::LLVMGetIncomingValue(old.0, j);
                    let b = c::LLVMGetIncomingBlock(old.0, j);
                    match map.get(&as_value(Bb(b))) {
                        Some(&nb) => {
                            Some((*map.get(&v).unwrap_or(&v), c::LLVMValueAsBasicBlock(nb)))
                        }
                        None => (b == entry.0).then_some((v, entry.0)),
                    }
                })
                .unzip();
            c::LLVMAddIncoming(
                new,
                vals.as_mut_ptr(),
                blocks.as_mut_ptr(),
                vals.len() as u32,
            );
        }
    }
    map
}
