//! Counter application: a counter [`Plan`] becomes code in one function — an increment at each
//! counter's site (end or start of a block, a block splitting the edge, the re-entry after a
//! setjmp), predecessor tags where no site exists, and the frame record of functions that may
//! end early (Ball & Larus 1994 §3.2, Fig. 7, [`crate::emit::frame`]). What happens at a site is a
//! [`SiteAction`]: counting (edge, vertex and the naive modes) or logging the edge (trace mode).

use crate::counters::plan::{Plan, TagTarget};
use crate::emit::frame::{frame_alloca, frame_exits, frame_plan, frame_push};
use crate::emit::sites::Realize;
use crate::emit::surgery::{split_edge, store_tags};
use crate::emit::{cname, Emitter, Globals};
use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::Val;
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::LLVMIntPredicate;
use tally_format::Probe;
use tally_graph::NodeId;

/// What happens where a counter's event occurs.
pub(crate) trait SiteAction {
    /// Runs first, at the start of the entry block (`entry_first` is its first instruction).
    fn enter(&mut self, _em: &Emitter, _entry_first: Val) {}
    /// Counter `idx` (module index) measuring `probe` is reached: at the builder's position.
    fn at_site(&self, em: &Emitter, probe: Probe, idx: u64);
    /// The re-entry edge after the setjmp call `sj` (`probe`, counter `idx`): taken when `sj`
    /// returns non-zero. At the builder's position.
    fn at_reentry(&self, em: &Emitter, probe: Probe, idx: u64, sj: Val);
    /// At the start of tag target `t.node` (the builder is there): the incoming edge's position
    /// among the target's predecessors is in the `i32` slot `tag`; its counter is `first + tag`.
    fn at_tag_target(
        &self,
        em: &Emitter,
        l: &Lowered,
        t: &TagTarget,
        tag: LLVMValueRef,
        first: u64,
    );
}

/// Counting: every site increments its counter.
pub(crate) struct Increment;

impl SiteAction for Increment {
    fn at_site(&self, em: &Emitter, _probe: Probe, idx: u64) {
        em.increment(idx);
    }
    fn at_reentry(&self, em: &Emitter, _probe: Probe, idx: u64, sj: Val) {
        let empty = cname("");
        // SAFETY: the builder is positioned in a live function and the operands are values of the
        // module (`crate::ir`'s module doc).
        unsafe {
            let ret = sj.0;
            let zero = c::LLVMConstInt(c::LLVMTypeOf(ret), 0, 0);
            let ne = c::LLVMBuildICmp(em.b, LLVMIntPredicate::LLVMIntNE, ret, zero, empty.as_ptr());
            let d = c::LLVMBuildZExt(em.b, ne, em.g.i64t, empty.as_ptr());
            em.add_to(em.counter_ptr(idx), d);
        }
    }
    fn at_tag_target(
        &self,
        em: &Emitter,
        _l: &Lowered,
        _t: &TagTarget,
        tag: LLVMValueRef,
        first: u64,
    ) {
        let empty = cname("");
        // SAFETY: the builder is positioned in a live function and the operands are values of the
        // module (`crate::ir`'s module doc); arrays passed live through the call with their
        // lengths.
        unsafe {
            let v = c::LLVMBuildLoad2(em.b, em.g.i32t, tag, empty.as_ptr());
            let v = c::LLVMBuildZExt(em.b, v, em.g.i64t, empty.as_ptr());
            let i = c::LLVMBuildAdd(em.b, v, em.i64c(first), empty.as_ptr());
            let mut idx = [i];
            let p = c::LLVMBuildInBoundsGEP2(
                em.b,
                em.g.i64t,
                em.g.counters,
                idx.as_mut_ptr(),
                1,
                empty.as_ptr(),
            );
            em.add_to(p, em.i64c(1));
        }
    }
}

/// Instruments one function with `plan`. `base` is the module index of the function's first
/// counter.
pub(crate) fn apply(
    g: &Globals,
    func: Val,
    l: &Lowered,
    plan: &Plan,
    base: u64,
    action: &mut dyn SiteAction,
) {
    let em = Emitter::new(g, func);
    let b = em.b;
    let entry_first = func
        .first_block()
        .and_then(|bb| bb.first())
        .expect("lowered functions have an entry instruction");

    // Frame record and tag slots live in the entry block.
    em.at(entry_first);
    let rec = plan.shadow.then(|| frame_alloca(&em));
    let slots: Vec<(NodeId, LLVMValueRef)> = plan
        .tag_targets
        .iter()
        .map(|t| {
            let n = cname("tally.tag");
            // SAFETY: the builder is positioned in a live function and the operands are values of
            // the module (`crate::ir`'s module doc).
            (t.node, unsafe { c::LLVMBuildAlloca(b, g.i32t, n.as_ptr()) })
        })
        .collect();
    action.enter(&em, entry_first);
    let action = &*action;
    let slot_of = |n: NodeId| {
        slots
            .iter()
            .find(|(m, _)| *m == n)
            .map(|(_, s)| *s)
            .expect("tag target has a slot")
    };

    if let Some(rec) = rec {
        let site_ptr = |n: NodeId| {
            let ee = l
                .cfg
                .early_exit(n)
                .expect("a vertex with a site has an early-exit edge");
            let idx = plan
                .counters
                .iter()
                .position(|(p, _)| *p == Probe::Edge(ee.into()))
                .expect("early-exit edges are chords");
            em.counter_ptr(base + idx as u64)
        };
        // The push block's site, if it has one, is stored by the push, once.
        let (at, pops) = frame_plan(l);
        let push_site = l.nodes[at.index()].first_site.map(|_| site_ptr(at));
        em.at(l.nodes[at.index()].start);
        frame_push(&em, rec, push_site);
        // Landing-pad and setjmp calls first: after a longjmp the runtime must see the site the
        // frame was left from, not the one of the block it re-enters.
        frame_exits(&em, l, rec, &pops);
        for (i, node) in l.nodes.iter().enumerate() {
            if let (Some(site), false) = (node.first_site, i == at.index()) {
                em.at(site);
                // SAFETY: the builder is positioned in a live function and the operands are values
                // of the module (`crate::ir`'s module doc).
                unsafe { c::LLVMBuildStore(b, site_ptr(NodeId::new(i)), em.field(rec, 1)) };
            }
        }
    }

    // Counters with direct sites, as a closure run in two passes (see below).
    let direct = |i: usize, (probe, r): (Probe, Realize)| {
        let idx = base + i as u64;
        match r {
            Realize::Runtime | Realize::Tagged { .. } => {}
            Realize::NodeEnd(n) => {
                em.at(l.nodes[n.index()].end);
                action.at_site(&em, probe, idx);
            }
            Realize::NodeStart(n) => {
                em.at(l.nodes[n.index()].start);
                action.at_site(&em, probe, idx);
            }
            Realize::Reentry(n) => {
                let node = &l.nodes[n.index()];
                let sj = node
                    .after_setjmp
                    .expect("re-entry vertex follows a setjmp call");
                em.at(node.start);
                action.at_reentry(&em, probe, idx, sj);
            }
            Realize::Split(e) => {
                let EdgeIr::Succ { term, index, .. } = l.edges[e.index()] else {
                    unreachable!("only terminator edges are split")
                };
                let nb = split_edge(&em, term, index);
                em.at(nb.terminator().expect("split block has its branch"));
                action.at_site(&em, probe, idx);
            }
        }
    };

    // Actions at the start of a block go first: in a block whose only instruction is its
    // terminator the start and the end are one insertion point, and a trace must log the edge
    // into the block before the edge out of it, whatever their ids.
    let starts = |r: &Realize| matches!(r, Realize::NodeStart(_) | Realize::Reentry(_));
    for (i, &pr) in plan.counters.iter().enumerate() {
        if starts(&pr.1) {
            direct(i, pr);
        }
    }
    // Predecessor tags: the reads at the tag targets' starts (the stores come last).
    for t in &plan.tag_targets {
        em.at(l.nodes[t.node.index()].start);
        action.at_tag_target(&em, l, t, slot_of(t.node), base + t.first_counter as u64);
    }
    for (i, &pr) in plan.counters.iter().enumerate() {
        if !starts(&pr.1) {
            direct(i, pr);
        }
    }
    for t in &plan.tag_targets {
        store_tags(&em, l, t.node, slot_of(t.node));
    }
}
