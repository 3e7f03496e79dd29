//! Shadow-stack frame records: exact early termination (Ball & Larus 1994 §3.2, Fig. 7: "for each
//! procedure X on the activation stack that exits early an edge v -> EXIT with a count of 1 is
//! added", recorded here as the early-exit counter of the block `v` that is executing a call).
//!
//! Where a function's record is pushed and popped ([`frame_plan`]; in path mode possibly around
//! the calls of each block instead, [`records_at_sites`]), what keeping one costs
//! ([`record_cost`], for edge mode's choice between a record and derived early exits), and the
//! code that pushes it, pops it, and tells the runtime where unwinding or a `longjmp` landed.

use crate::emit::{cname, Emitter};
use crate::ir::lower::Lowered;
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::LLVMTailCallKind;
use tally_graph::{EdgeId, IdVec, NodeId};

/// Allocates the frame record at the start of the entry block (the builder must be there).
pub(crate) fn frame_alloca(em: &Emitter) -> LLVMValueRef {
    let n = cname("tally.frame");
    // SAFETY: the builder is positioned in a live function and the operands are values of the
    // module (`crate::ir`'s module doc).
    unsafe { c::LLVMBuildAlloca(em.b, em.g.frame_ty, n.as_ptr()) }
}

/// Pushes the frame record (at the builder's position): `rec.prev = top; top = &rec`, and
/// `rec.site = entry_site`, or `TALLY_NO_SITE` without one. The site is then set before the
/// first call that may end the frame; no call can end it before that, but a fatal signal or
/// the runtime's stop of a running thread at exit can (c/signals.c, c/threads.c), and the
/// runtime must then find no site rather than what an earlier frame left in that stack slot
/// (a counter of another function).
pub(crate) fn frame_push(em: &Emitter, rec: LLVMValueRef, entry_site: Option<LLVMValueRef>) {
    let empty = cname("");
    // SAFETY: the builder is positioned in a live function and the operands are values of the
    // module (`crate::ir`'s module doc).
    unsafe {
        let top = c::LLVMBuildLoad2(em.b, em.g.ptrt, em.g.tls_top, empty.as_ptr());
        c::LLVMBuildStore(em.b, top, em.field(rec, 0));
        let site = entry_site.unwrap_or_else(|| c::LLVMConstNull(em.g.ptrt));
        c::LLVMBuildStore(em.b, site, em.field(rec, 1));
        c::LLVMBuildStore(em.b, rec, em.g.tls_top);
    }
}

/// Where the frame record is pushed (a block) and which returning blocks pop it: shrink-wrapped
/// to the latest block that dominates every use of the record (a call that may end the frame,
/// a landing pad, a setjmp) and lies on no cycle, when every return reachable from it is
/// dominated by it (`tally_graph::dom::push_plan`); otherwise the entry, popped at every return.
pub(crate) fn frame_plan(l: &Lowered) -> (NodeId, Vec<bool>) {
    let uses: Vec<NodeId> = l
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.first_site.is_some() || n.landing_pad || n.after_setjmp.is_some())
        .map(|(i, _)| NodeId::new(i))
        .collect();
    // A function that calls setjmp keeps its push at the entry: the runtime's longjmp recovery
    // walks records by frame address and must find this one whatever block setjmp sits in.
    let plan = if l.has_setjmp {
        None
    } else {
        tally_graph::dom::push_plan(&l.cfg, &uses)
    };
    match plan {
        Some(p) => {
            let mut pops = vec![false; l.nodes.len()];
            for n in p.pops {
                pops[n.index()] = true;
            }
            (p.at, pops)
        }
        None => (NodeId::new(0), l.nodes.iter().map(|n| n.returns).collect()),
    }
}

/// True when pushing the frame record just before the first site of every block that has
/// one and popping it at that block's end costs less than [`frame_plan`]'s one push per
/// activation: the blocks with sites are, together, predicted to run less often than the
/// push block (an allocator's fast path that calls out only on its slow paths pays nothing).
/// Only without landing pads and setjmp: a frame is then abandoned only inside a call that may
/// end it, which is always inside such a push. Edge weights `w` as in [`record_cost`].
pub(crate) fn records_at_sites(l: &Lowered, w: &IdVec<EdgeId, f64>) -> bool {
    if l.has_landing_pads || l.has_setjmp {
        return false;
    }
    let (at, _) = frame_plan(l);
    site_blocks_weight(l, w, None) < node_weight(l, w, at)
}

/// A block's predicted frequency: the weights of its in-edges.
fn node_weight(l: &Lowered, w: &IdVec<EdgeId, f64>, n: NodeId) -> f64 {
    l.cfg.preds(n).iter().map(|&e| w[e]).sum()
}

/// The predicted frequencies of the blocks with sites, summed (but `except`'s).
fn site_blocks_weight(l: &Lowered, w: &IdVec<EdgeId, f64>, except: Option<NodeId>) -> f64 {
    l.nodes
        .iter()
        .enumerate()
        .filter(|&(i, n)| n.first_site.is_some() && Some(NodeId::new(i)) != except)
        .map(|(i, _)| node_weight(l, w, NodeId::new(i)))
        .sum()
}

/// The record pushed around the calls of each block with sites ([`records_at_sites`]): pushed
/// before the block's first site (before the site store the caller emits there afterwards),
/// popped at the block's end; plus `frame_exits`' dropped `tail` markers.
pub(crate) fn frame_at_sites(em: &Emitter, l: &Lowered, rec: LLVMValueRef) {
    for node in &l.nodes {
        let Some(site) = node.first_site else {
            continue;
        };
        em.at(site);
        frame_push(em, rec, None);
        em.at(node.end);
        frame_pop(em, rec);
    }
    frame_exits(em, l, rec, &vec![false; l.nodes.len()]);
}

/// Pops the record `rec` at the builder's position: the thread's top becomes its `prev`.
fn frame_pop(em: &Emitter, rec: LLVMValueRef) {
    let empty = cname("");
    // SAFETY: the builder is positioned in a live function and the operands are values of the
    // module (`crate::ir`'s module doc).
    unsafe {
        let prev = c::LLVMBuildLoad2(em.b, em.g.ptrt, em.field(rec, 0), empty.as_ptr());
        c::LLVMBuildStore(em.b, prev, em.g.tls_top);
    }
}

/// Everything else a frame record needs: `tail` markers dropped from calls that stay sites,
/// the pop before the returns in `pops`, `__tally_unwound` at landing pads and
/// `__tally_longjmp_landed` after setjmp calls (each the first call there, as the runtime
/// requires).
pub(crate) fn frame_exits(em: &Emitter, l: &Lowered, rec: LLVMValueRef, pops: &[bool]) {
    for (i, node) in l.nodes.iter().enumerate() {
        for &t in &node.tail_sites {
            // SAFETY: the edited values belong to the live module, which only this crate changes
            // during `instrument` (`crate::ir`'s module doc).
            unsafe { c::LLVMSetTailCallKind(t.0, LLVMTailCallKind::LLVMTailCallKindNone) };
        }
        if node.returns && pops[i] {
            em.at(node.end);
            frame_pop(em, rec);
        }
        if node.landing_pad {
            em.at(node.start);
            em.call(em.g.unwound, &mut [rec], node.start);
        }
        if let Some(sj) = node.after_setjmp {
            em.at(node.start);
            let ret = em.setjmp_ret(sj);
            em.call(em.g.longjmp_landed, &mut [ret, rec], sj);
        }
    }
}

/// What a frame record costs, in counter increments: the push and the pop (two thread-local
/// accesses, four stores, a load: about four increments' worth) at the push block, and a store
/// at every other block with a site, each weighted by its block's predicted frequency.
const RECORD_PUSH_POP: f64 = 4.0;
const RECORD_SITE_STORE: f64 = 1.0;

pub(crate) fn record_cost(l: &Lowered, w: &IdVec<EdgeId, f64>) -> f64 {
    let (at, _) = frame_plan(l);
    RECORD_PUSH_POP * node_weight(l, w, at) + RECORD_SITE_STORE * site_blocks_weight(l, w, Some(at))
}
