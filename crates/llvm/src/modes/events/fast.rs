//! Events mode: counted loops without decrements (issue #16 item 3; SESE counters, paper 003,
//! and trip counts, `crate::sese`).
//!
//! A **fast loop** is an innermost loop without calls (so without query points, early exits or
//! re-entries) whose body is one cycle (every member has exactly one successor inside the
//! loop: the path `H = n0 -> n1 -> ... -> latch -> H`, exits branching off it) and that has a
//! SESE counter: a header variable advanced by constants, or a trip count ScalarEvolution
//! knows on entry, giving the back edges `k` taken by an activation when it leaves. Such an
//! activation left from member `u` executes exactly `k * E + E(n0..u)` events (`E`: the events
//! of one turn, `E(n0..u)`: those of the path up to and including `u`).
//!
//! The loop is **versioned** before the plan's code is placed: on its entry edge, a block `V`
//! branches to an uninstrumented copy when `__tally_ev_limit == TALLY_EV_NO_LIMIT` (no
//! `TALLY_STOP_AT` pending in the thread, so no stop check can matter), else to the original
//! loop, which gets the plan's chord decrements and stop checks as before. The copy's exits go
//! through a block of their own that subtracts, from `left`,
//!
//! `D = k * E + E(n0..u) + QueryInc(Start(H)) - QueryInc(Start(x))`
//!
//! (exit `u -> x`). At `V` the count is `limit - left + QueryInc(Start(H))` (V lies on the entry
//! edge after its increment); at `x`'s start it must be `limit - left + QueryInc(Start(x))`; the
//! activation executed `k * E + E(n0..u)` events in between. Exit edges are splittable `Flow`
//! edges, whose increments the plan puts on blocks of their own (never at `x`'s start), so the
//! copy runs none of them. Hence every on-line query, call adjustment, per-call-site and
//! per-function counter (all outside the loop) sees what the original loop would give; with a
//! stop pending the original loop runs, so `TALLY_STOP_AT` stops where it did. A frame cannot
//! be abandoned inside a call-free loop except by a signal: a fatal one there finds `left`
//! without the current activation's events (today, without the events since the last chord).
//!
//! Refused (the plan keeps the loop): several entries, unsplittable edges, exits into blocks
//! counted through predecessor tags, values of the loop used after it other than by phis of
//! the exit blocks (no SSA repair), more than [`MAX_INSTRS`] instructions (code growth), fewer
//! than [`MIN_TURNS`] back edges per entry under the weights (the entry test and the exit
//! arithmetic would cost more than the decrements saved).

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

/// A loop versioned in events mode.
pub(crate) struct FastLoop {
    /// The SESE counter giving the back edges.
    pub cand: Candidate,
    /// The members along the cycle, header first.
    pub path: Vec<NodeId>,
    /// The entry edge.
    pub entry: EdgeId,
    /// Per exit of `cand.counter.add_at`: its source's position on `path`.
    pub exit_at: Vec<usize>,
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

/// The loops of `l` to version (module doc), under `sese` (`Off`: none), and the loops and
/// candidates searched.
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
    if cands.is_empty() {
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
    let mut out = Vec::new();
    for cand in cands {
        let h = cand.counter.header;
        let Ok(lp) = SeseLoop::new(cfg, &loops, &doms, h) else {
            continue;
        };
        if let Some((path, entry)) = shape(l, ep, &lp, cand.counter.measured) {
            if freq[cand.counter.measured] < MIN_TURNS * freq[entry] {
                continue;
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
            out.push(FastLoop {
                cand,
                path,
                entry,
                exit_at,
            });
        }
    }
    (out, searched)
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

/// The cycle of a loop that qualifies (module doc), header first, and its entry edge.
fn shape(
    l: &Lowered,
    ep: &EventsPlan,
    lp: &SeseLoop,
    back: EdgeId,
) -> Option<(Vec<NodeId>, EdgeId)> {
    let cfg = &l.cfg;
    let [entry] = lp.entries[..] else {
        return None;
    };
    if lp.latches != [back] || !lp.early_exits.is_empty() || !splittable_flow(l, entry) {
        return None;
    }
    if !lp.exits.iter().all(|&e| splittable_flow(l, e)) {
        return None;
    }
    if ep.calls.iter().any(|c| lp.contains(c.node)) {
        return None;
    }
    // One cycle: each member has one successor edge inside the loop.
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
        if !matches!(l.edges[e.index()], EdgeIr::Succ { .. }) {
            return None;
        }
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
    if path.len() != lp.members.len() {
        return None;
    }
    // The IR: one vertex per block, branches only, no calls but intrinsics, small.
    let bbs: Vec<Bb> = path
        .iter()
        .map(|&m| l.nodes[m.index()].start.parent())
        .collect();
    let mut size = 0;
    for (&m, &bb) in path.iter().zip(&bbs) {
        let node = &l.nodes[m.index()];
        let term = bb.terminator()?;
        if node.end != term
            || bbs.iter().filter(|&&b| b == bb).count() != 1
            || !matches!(term.opcode(), LLVMOpcode::LLVMBr | LLVMOpcode::LLVMSwitch)
        {
            return None;
        }
        for i in bb.instructions() {
            size += 1;
            if i.is_call_like()
                && !(i.opcode() == LLVMOpcode::LLVMCall
                    && !i.calls_inline_asm()
                    && i.called_function().is_some_and(|f| f.intrinsic_id() != 0))
            {
                return None;
            }
            if !used_only_inside_or_by_exit_phis(i, &bbs) {
                return None;
            }
        }
    }
    if size > MAX_INSTRS || path.iter().map(|&n| ep.events[n]).sum::<u64>() == 0 {
        return None;
    }
    Some((path, entry))
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
            !f.path.iter().any(|&n| skip(n))
                && !f.cand.counter.add_at.iter().any(|&e| skip(cfg.edge(e).dst))
        })
        .collect();
    let mut stats = FastStats::default();
    if used.is_empty() {
        return stats;
    }
    let cands: Vec<&Candidate> = used.iter().map(|f| &f.cand).collect();
    // While the function is still the one ScalarEvolution answered about.
    let trips = sese::expand_trip_counts(em.func, &cands);
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
    for ((f, trips), v) in used.iter().zip(trips).zip(vs) {
        stats.versioned += 1;
        stats.trips += usize::from(f.cand.is_trip_count());
        let bbs: Vec<Bb> = f
            .path
            .iter()
            .map(|&m| l.nodes[m.index()].start.parent())
            .collect();
        let header = bbs[0];
        let map = clone_blocks(em, &bbs, v);
        let copy_header = Bb(unsafe { c::LLVMValueAsBasicBlock(map[&as_value(header)]) });
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
        // The copy's exits.
        let e_turn: u64 = f.path.iter().map(|&n| ep.events[n]).sum();
        let q_header = plan.query_start(f.path[0]);
        let lookup = |x: Val| -> Val { map.get(&x.0).map_or(x, |&y| Val(y)) };
        for (i, &e) in f.cand.counter.add_at.iter().enumerate() {
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
            let k = sese::back_edges_in_copy(em, &f.cand, i, &lookup, trips);
            let before: u64 = f.path[..=f.exit_at[i]].iter().map(|&n| ep.events[n]).sum();
            let dst = cfg.edge(e).dst;
            let konst = (before as i64)
                .wrapping_add(q_header)
                .wrapping_sub(plan.query_start(dst));
            unsafe {
                let mut d = k;
                if e_turn != 1 {
                    d = c::LLVMBuildMul(em.b, d, em.i64c(e_turn), empty.as_ptr());
                }
                if konst != 0 {
                    let kc = c::LLVMConstInt(g.i64t, konst as u64, 1);
                    d = c::LLVMBuildAdd(em.b, d, kc, empty.as_ptr());
                }
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
