//! Which loops are versioned, and how their copies count ([`super::plan`]'s rules).

use super::live_out::{only_instruction_users, used_only_inside_or_by_exit_phis};
use super::{Counting, FastLoop, Refusal, MAX_INSTRS, MIN_TURNS, MIN_TURNS_PER_CALL};
use crate::counters::sese::{self, Candidate};
use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::{Bb, Val};
use crate::modes::events::EventsPlan;
use llvm_sys::LLVMOpcode;
use std::collections::HashMap;
use tally_graph::dom::Dominators;
use tally_graph::sese::SeseLoop;
use tally_graph::{EdgeId, EdgeKind, IdVec, Loops, NodeId};

/// The loop of header `h` if it can be versioned (module doc), or why not.
#[allow(clippy::too_many_arguments)]
pub(super) fn classify(
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
pub(super) fn enclosing(loops: &Loops, h: NodeId) -> Option<NodeId> {
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
pub(super) fn range_fixed_outside(
    l: &Lowered,
    e: EdgeId,
    header: Bb,
    bbs: &[Bb],
    outer_bbs: &[Bb],
) -> bool {
    let EdgeIr::Succ { term, .. } = l.edges[e.index()] else {
        return false;
    };
    if term.opcode() != LLVMOpcode::LLVMBr || term.num_operands() != 3 {
        return false;
    }
    let cond = term.operand(0);
    if !cond.is_icmp() {
        return false;
    }
    (0..2).all(|k| in_fixed_range(cond.operand(k), header, bbs, outer_bbs, 4))
}

/// `v` (an operand of a loop's exit test, [`range_fixed_outside`]): fixed outside the
/// enclosing loop, or a variable of the loop advanced by constants from such a start.
pub(super) fn in_fixed_range(v: Val, header: Bb, bbs: &[Bb], outer_bbs: &[Bb], depth: u32) -> bool {
    if !v.is_instruction() {
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
        return v.incoming().into_iter().all(|(x, from)| {
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
pub(super) fn fixed_outside(v: Val, outer_bbs: &[Bb], depth: u32) -> bool {
    if !v.is_instruction() || !outer_bbs.contains(&v.parent()) {
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
pub(super) fn describe(
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

pub(super) fn splittable_flow(l: &Lowered, e: EdgeId) -> bool {
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
pub(super) fn cycle_path(l: &Lowered, lp: &SeseLoop) -> Option<Vec<NodeId>> {
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
