//! Versioning the loops: the copies, their counts and their exits.

use super::live_out::merge_live_out;
use super::{debug, Counting, FastLoop, FastStats};
use crate::counters::sese::{self, Candidate};
use crate::emit::build::{
    add_incoming, add_incomings, append_block, clone_instruction, const_int, erase,
    move_block_after, set_operand, type_of,
};
use crate::emit::surgery::split_edge;
use crate::emit::Emitter;
use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::{self, Bb, Val};
use crate::modes::events::EventsPlan;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMIntPredicate, LLVMOpcode};
use std::collections::HashMap;
use tally_graph::NodeId;

/// Versions the loops `fast` (module doc). Runs before any of the plan's code is placed: the
/// copies and their exit blocks are not vertices of the plan, and nothing is placed in them.
/// `skip(n)`: a block counted through predecessor tags (its loops are not versioned).
pub(in crate::modes::events) fn emit(
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
        let copy_of = |bb: Bb| Val(map[&as_value(bb)]).as_block();
        let copy_header = copy_of(header);
        let br = v.terminator().expect("split block has its branch");
        em.at(br);
        let limit = em.load(g.i64t, g.ev_limit);
        let none = const_int(g.i64t, tally_format::abi::EV_NO_LIMIT as u64, true);
        let fast_ok = em.icmp(LLVMIntPredicate::LLVMIntEQ, limit, none);
        let cond = em.cond_br(fast_ok, copy_header, header);
        ir::set_branch_weights(g.ctx, cond.0, &[1 << 20, 1]);
        erase(br);
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
            let landing = append_block(g, em.func, "tally.fast.exit");
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
                    let mut d = k;
                    if e_turn != 1 {
                        d = em.mul(d, em.i64c(e_turn));
                    }
                    if konst != 0 {
                        let kc = const_int(g.i64t, konst as u64, true);
                        d = em.add(d, kc);
                    }
                    d
                }
                Counting::Register => {
                    // The inside edges' increments, then the exit edge's own (placed by the
                    // plan on a block of its own on the original exit, bypassed here).
                    let mut d = acc[&cfg.edge(e).src];
                    let inc = plan.increment(e);
                    if inc != 0 {
                        let kc = const_int(g.i64t, inc as u64, true);
                        d = em.add(d, kc);
                    }
                    d
                }
            };
            let left = em.load(g.i64t, g.ev_left);
            let new = em.sub(left, d);
            em.store(new, g.ev_left);
            em.br(x);
            // The exit block's phis: the copy's value on this entry.
            for phi in x.phis() {
                let (from_u, _) = phi
                    .incoming()
                    .into_iter()
                    .find(|&(_, from)| from == u)
                    .expect("an exit block's phi has an entry for the exit's source");
                let val = lookup(from_u);
                add_incoming(phi, val.0, landing);
            }
        }
    }
    stats
}

/// The register counts of a copy (`Counting::Register`): per member `m`, a phi at the top of
/// `m`'s copy holding the plan's increments of the inside edges taken since the copy was
/// entered from `v` (0 there). An edge's increment is added at the end of its source's copy
/// (parallel edges add the same, [`super::classify::classify`]), so the value is in a register,
/// not `left`.
pub(super) fn register_counts(
    em: &Emitter,
    l: &Lowered,
    ep: &EventsPlan,
    members: &[NodeId],
    copy_of: &dyn Fn(Bb) -> Bb,
    v: Bb,
) -> HashMap<NodeId, LLVMValueRef> {
    let cfg = &l.cfg;
    let g = em.g;
    let bb_of = |m: NodeId| l.nodes[m.index()].start.parent();
    let mut acc = HashMap::new();
    for &m in members {
        let nb = copy_of(bb_of(m));
        let first = nb.first().expect("copied blocks have a terminator");
        em.before_with_records(first);
        acc.insert(m, em.phi_named(g.i64t, "tally.fast.acc").0);
    }
    let phi = acc[&members[0]];
    add_incoming(Val(phi), const_int(g.i64t, 0, false), v);
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
            let val = *sums.entry(inc).or_insert_with(|| {
                if inc == 0 {
                    acc[&m]
                } else {
                    em.at(term);
                    let kc = const_int(g.i64t, inc as u64, true);
                    em.add(acc[&m], kc)
                }
            });
            add_incoming(Val(phi), val, nb);
        }
    }
    acc
}

/// Gives `v` (a block on the edge `p -> H`) a phi for each phi of `H`, taking `H`'s value
/// from `p`, and makes `H` take it from `v`: the copy's header and, when another versioned
/// loop exits by this edge, that loop's copy (entering `v` from its own exit block, which adds
/// its values to these phis) see one value that dominates both headers. Single-entry phis
/// cost no code.
pub(super) fn carry_phis(em: &Emitter, v: Bb, p: Bb) {
    let br = v.terminator().expect("split block has its branch");
    let h = br.successor(0);
    for phi in h.phis() {
        let incoming = phi.incoming();
        let j = incoming
            .iter()
            .position(|&(_, from)| from == v)
            .expect("the header's phi has an entry from the split block");
        em.at(br);
        let carried = em.phi(type_of(phi.0));
        add_incoming(carried, incoming[j].0 .0, p);
        set_operand(phi, j as u32, carried.0);
    }
}

pub(super) fn as_value(bb: Bb) -> LLVMValueRef {
    bb.as_value().0
}

/// Copies the blocks `bbs` (header first; a loop entered only from `entry`) into new blocks:
/// returns the map from the originals' instructions and blocks (as values) to the copies'.
/// The copy's header phis take their outside values from `entry`; successors outside `bbs`
/// are kept (the caller redirects them). Debug intrinsics are not copied.
pub(super) fn clone_blocks(
    em: &Emitter,
    bbs: &[Bb],
    entry: Bb,
) -> HashMap<LLVMValueRef, LLVMValueRef> {
    let g = em.g;
    let mut map: HashMap<LLVMValueRef, LLVMValueRef> = HashMap::new();
    let mut after = entry;
    let copies: Vec<Bb> = bbs
        .iter()
        .map(|&bb| {
            let nb = append_block(g, em.func, "tally.fast");
            move_block_after(nb, after);
            after = nb;
            map.insert(as_value(bb), as_value(nb));
            nb
        })
        .collect();
    let mut phis = Vec::new();
    let mut others = Vec::new();
    for (&bb, &nb) in bbs.iter().zip(&copies) {
        em.position_at_end(nb);
        for i in bb.instructions() {
            let new = if i.opcode() == LLVMOpcode::LLVMPHI {
                let p = em.phi(type_of(i.0)).0;
                phis.push((i, p));
                p
            } else {
                if i.opcode() == LLVMOpcode::LLVMCall
                    && i.called_function()
                        .is_some_and(|f| f.name().starts_with("llvm.dbg."))
                {
                    continue;
                }
                let p = clone_instruction(i);
                em.insert(p);
                others.push(p);
                p.0
            };
            map.insert(i.0, new);
        }
    }
    for &p in &others {
        for k in 0..p.num_operands() {
            let op = p.operand(k).0;
            if let Some(&new) = map.get(&op) {
                set_operand(p, k, new);
            }
        }
    }
    for (old, new) in phis {
        let (vals, blocks): (Vec<LLVMValueRef>, Vec<Bb>) = old
            .incoming()
            .into_iter()
            .filter_map(|(v, b)| {
                let v = v.0;
                match map.get(&as_value(b)) {
                    Some(&nb) => Some((*map.get(&v).unwrap_or(&v), Val(nb).as_block())),
                    None => (b == entry).then_some((v, entry)),
                }
            })
            .unzip();
        add_incomings(Val(new), &vals, &blocks);
    }
    map
}
