//! Applying a [`Plan`] to one function's IR: counter increments, edge splitting, predecessor
//! tags, and the shadow-stack frame record that makes early termination exact (paper 000 §3.2,
//! Fig. 7: "for each procedure X on the activation stack that exits early an edge v -> EXIT
//! with a count of 1 is added", recorded here as the early-exit counter of the block `v` that
//! is executing a call).

use crate::ir::{self, Bb, Val};
use crate::lower::{EdgeIr, Lowered};
use crate::plan::{Plan, Realize};
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMIntPredicate, LLVMTailCallKind};
use std::ffi::CString;
use tally_graph::NodeId;

/// Module-level declarations the instrumentation refers to.
pub(crate) struct Globals {
    pub ctx: LLVMContextRef,
    pub module: LLVMModuleRef,
    pub i64t: LLVMTypeRef,
    pub i32t: LLVMTypeRef,
    pub ptrt: LLVMTypeRef,
    pub voidt: LLVMTypeRef,
    /// `{ ptr prev, ptr site }`
    pub frame_ty: LLVMTypeRef,
    /// The module's counter array.
    pub counters: LLVMValueRef,
    /// `__tally_top`, thread-local.
    pub tls_top: LLVMValueRef,
    pub unwound: (LLVMValueRef, LLVMTypeRef),
    pub longjmp_landed: (LLVMValueRef, LLVMTypeRef),
    /// `__tally_ev_left`: the thread's event countdown (events mode).
    pub ev_left: LLVMValueRef,
    /// `__tally_ev_limit`: the count is `limit - left`.
    pub ev_limit: LLVMValueRef,
    /// `__tally_events_check(where, query_inc)`: stops at TALLY_STOP_AT (see `tally.h`).
    pub ev_check: (LLVMValueRef, LLVMTypeRef),
    /// `__tally_trace_enter(counters, function) -> activation`.
    pub trace_enter: (LLVMValueRef, LLVMTypeRef),
    /// `__tally_trace_edge(activation, edge)`.
    pub trace_edge: (LLVMValueRef, LLVMTypeRef),
    /// `__tally_trace_reentry(activation, edge, ret)`.
    pub trace_reentry: (LLVMValueRef, LLVMTypeRef),
    /// `__tally_path_count(table, path)`.
    pub path_count: (LLVMValueRef, LLVMTypeRef),
    /// `struct tally_path_table`.
    pub table_ty: LLVMTypeRef,
    /// The module's path tables (`[N x table_ty]`), or a null pointer when it has none.
    pub path_tables: LLVMValueRef,
    /// The read-only empty slot empty path tables point at (null without path tables).
    pub empty_slot: LLVMValueRef,
    /// `__tally_path_home`: the home tables of the module's hashed functions, or null.
    pub path_home: LLVMValueRef,
    /// `tally.path.probe(table, path)`: the inline first-slot probe (path tables, not atomic).
    pub path_probe: Option<(LLVMValueRef, LLVMTypeRef)>,
    /// Use atomic increments.
    pub atomic: bool,
}

pub(crate) struct Emitter<'a> {
    pub g: &'a Globals,
    pub b: LLVMBuilderRef,
    /// Debug location for calls in functions with debug info.
    pub fn_scope: Option<LLVMMetadataRef>,
    pub func: Val,
}

fn cname(s: &str) -> CString {
    CString::new(s).expect("no NUL in internal names")
}

impl Emitter<'_> {
    pub(crate) fn at(&self, before: Val) {
        unsafe {
            c::LLVMPositionBuilderBefore(self.b, before.0);
            c::LLVMSetCurrentDebugLocation2(self.b, std::ptr::null_mut());
        }
    }
    pub(crate) fn at_end(&self, bb: Bb) {
        unsafe {
            c::LLVMPositionBuilderAtEnd(self.b, bb.0);
            c::LLVMSetCurrentDebugLocation2(self.b, std::ptr::null_mut());
        }
    }
    pub(crate) fn i64c(&self, v: u64) -> LLVMValueRef {
        unsafe { c::LLVMConstInt(self.g.i64t, v, 0) }
    }
    pub(crate) fn i32c(&self, v: u64) -> LLVMValueRef {
        unsafe { c::LLVMConstInt(self.g.i32t, v, 0) }
    }
    /// Pointer to counter `idx` (module-relative) as a constant expression.
    pub(crate) fn counter_ptr(&self, idx: u64) -> LLVMValueRef {
        let mut i = [self.i64c(idx)];
        unsafe { c::LLVMConstInBoundsGEP2(self.g.i64t, self.g.counters, i.as_mut_ptr(), 1) }
    }
    /// `*ptr += delta` at the builder position.
    pub(crate) fn add_to(&self, ptr: LLVMValueRef, delta: LLVMValueRef) {
        let empty = cname("");
        unsafe {
            if self.g.atomic {
                c::LLVMBuildAtomicRMW(
                    self.b,
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpAdd,
                    ptr,
                    delta,
                    llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic,
                    0,
                );
            } else {
                let v = c::LLVMBuildLoad2(self.b, self.g.i64t, ptr, empty.as_ptr());
                let v1 = c::LLVMBuildAdd(self.b, v, delta, empty.as_ptr());
                c::LLVMBuildStore(self.b, v1, ptr);
            }
        }
    }
    pub(crate) fn increment(&self, idx: u64) {
        self.add_to(self.counter_ptr(idx), self.i64c(1));
    }
    pub(crate) fn call_loc(&self, near: Val) -> Option<LLVMMetadataRef> {
        let scope = self.fn_scope?;
        Some(
            near.debug_loc()
                .unwrap_or_else(|| ir::artificial_loc(self.g.ctx, scope)),
        )
    }
    pub(crate) fn call(
        &self,
        f: (LLVMValueRef, LLVMTypeRef),
        args: &mut [LLVMValueRef],
        near: Val,
    ) {
        let empty = cname("");
        let call = unsafe {
            c::LLVMBuildCall2(
                self.b,
                f.1,
                f.0,
                args.as_mut_ptr(),
                args.len() as u32,
                empty.as_ptr(),
            )
        };
        Val(call).set_debug_loc(self.call_loc(near));
    }
    pub(crate) fn field(&self, rec: LLVMValueRef, i: u32) -> LLVMValueRef {
        let empty = cname("");
        unsafe { c::LLVMBuildStructGEP2(self.b, self.g.frame_ty, rec, i, empty.as_ptr()) }
    }
}

/// Splits edge `e` (successor `index` of `term`) with a new block; returns the new block.
/// PHIs of the target get the new block in place of exactly one entry for the old source.
pub(crate) fn split_edge(em: &Emitter, term: Val, index: u32) -> Bb {
    let target = term.successor(index);
    let src = term.parent();
    let name = cname("tally.split");
    let nb = Bb(unsafe { c::LLVMAppendBasicBlockInContext(em.g.ctx, em.func.0, name.as_ptr()) });
    unsafe { c::LLVMMoveBasicBlockAfter(nb.0, src.0) };
    em.at_end(nb);
    unsafe { c::LLVMBuildBr(em.b, target.0) };
    term.set_successor(index, nb);
    for phi in target.phis() {
        rebuild_phi_moving_one(em, phi, src, nb);
    }
    nb
}

/// Replaces `phi` by a copy in which the first incoming entry from `from` comes from `to`.
fn rebuild_phi_moving_one(em: &Emitter, phi: Val, from: Bb, to: Bb) {
    unsafe {
        let n = c::LLVMCountIncoming(phi.0);
        let mut vals = Vec::with_capacity(n as usize);
        let mut blocks = Vec::with_capacity(n as usize);
        let mut moved = false;
        for i in 0..n {
            vals.push(c::LLVMGetIncomingValue(phi.0, i));
            let b = c::LLVMGetIncomingBlock(phi.0, i);
            if !moved && b == from.0 {
                blocks.push(to.0);
                moved = true;
            } else {
                blocks.push(b);
            }
        }
        assert!(
            moved,
            "PHI in split target has no entry for the source block"
        );
        c::LLVMPositionBuilderBefore(em.b, phi.0);
        c::LLVMSetCurrentDebugLocation2(em.b, std::ptr::null_mut());
        let mut len = 0usize;
        let nm = c::LLVMGetValueName2(phi.0, &mut len);
        let name = CString::new(std::slice::from_raw_parts(nm as *const u8, len).to_vec())
            .unwrap_or_default();
        let new = c::LLVMBuildPhi(em.b, c::LLVMTypeOf(phi.0), name.as_ptr());
        c::LLVMAddIncoming(new, vals.as_mut_ptr(), blocks.as_mut_ptr(), n);
        ir::Val(new).set_debug_loc(phi.debug_loc());
        // Fast-math flags and other per-instruction state of PHIs are not used by codegen of
        // the integer/pointer PHIs we rebuild; floating-point PHIs keep their flags:
        if c::LLVMCanValueUseFastMathFlags(phi.0) != 0 {
            c::LLVMSetFastMathFlags(new, c::LLVMGetFastMathFlags(phi.0));
        }
        c::LLVMReplaceAllUsesWith(phi.0, new);
        c::LLVMInstructionEraseFromParent(phi.0);
    }
}

/// Allocates the frame record at the start of the entry block (the builder must be there).
pub(crate) fn frame_alloca(em: &Emitter) -> LLVMValueRef {
    let n = cname("tally.frame");
    unsafe { c::LLVMBuildAlloca(em.b, em.g.frame_ty, n.as_ptr()) }
}

/// Pushes the frame record (at the builder's position): `rec.prev = top; top = &rec`, and
/// `rec.site = entry_site` if given. The site is otherwise set only before the first call that
/// may end the frame: no call can before that, so it need not be initialized.
pub(crate) fn frame_push(em: &Emitter, rec: LLVMValueRef, entry_site: Option<LLVMValueRef>) {
    let empty = cname("");
    unsafe {
        let top = c::LLVMBuildLoad2(em.b, em.g.ptrt, em.g.tls_top, empty.as_ptr());
        c::LLVMBuildStore(em.b, top, em.field(rec, 0));
        if let Some(site) = entry_site {
            c::LLVMBuildStore(em.b, site, em.field(rec, 1));
        }
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

/// Everything else a frame record needs: `tail` markers dropped from calls that stay sites,
/// the pop before the returns in `pops`, `__tally_unwound` at landing pads and
/// `__tally_longjmp_landed` after setjmp calls (each the first call there, as the runtime
/// requires).
pub(crate) fn frame_exits(em: &Emitter, l: &Lowered, rec: LLVMValueRef, pops: &[bool]) {
    let empty = cname("");
    for (i, node) in l.nodes.iter().enumerate() {
        for &t in &node.tail_sites {
            unsafe { c::LLVMSetTailCallKind(t.0, LLVMTailCallKind::LLVMTailCallKindNone) };
        }
        if node.returns && pops[i] {
            em.at(node.end);
            unsafe {
                let prev = c::LLVMBuildLoad2(em.b, em.g.ptrt, em.field(rec, 0), empty.as_ptr());
                c::LLVMBuildStore(em.b, prev, em.g.tls_top);
            }
        }
        if node.landing_pad {
            em.at(node.start);
            em.call(em.g.unwound, &mut [rec], node.start);
        }
        if let Some(sj) = node.after_setjmp {
            em.at(node.start);
            em.call(em.g.longjmp_landed, &mut [sj.0, rec], sj);
        }
    }
}

/// Makes every incoming edge of `target` store its index (in `cfg.preds(target)` order) into
/// `slot` before control reaches `target`: at the end of its source when that is its only
/// terminator edge or it cannot be split, else on a new block splitting it. Parallel
/// unsplittable edges from one source are indistinguishable and all get the first one's index.
pub(crate) fn store_tags(em: &Emitter, l: &Lowered, target: NodeId, slot: LLVMValueRef) {
    for (j, &e) in l.cfg.preds(target).iter().enumerate() {
        let tag = em.i32c(j as u64);
        let src = l.cfg.edge(e).src;
        let src_node = &l.nodes[src.index()];
        match l.edges[e.index()] {
            EdgeIr::Succ {
                term,
                index,
                splittable,
            } => {
                let term_edges = l
                    .cfg
                    .succs(src)
                    .iter()
                    .filter(|&&s| l.cfg.edge(s).kind != tally_graph::EdgeKind::EarlyExit)
                    .count();
                if term_edges == 1 || !splittable {
                    let first_from_src = l.cfg.preds(target)[..j]
                        .iter()
                        .all(|&p| l.cfg.edge(p).src != src);
                    if first_from_src {
                        em.at(src_node.end);
                        unsafe { c::LLVMBuildStore(em.b, tag, slot) };
                    }
                } else {
                    let nb = split_edge(em, term, index);
                    em.at(nb.terminator().expect("split block has its branch"));
                    unsafe { c::LLVMBuildStore(em.b, tag, slot) };
                }
            }
            other => unreachable!("tag target with a non-terminator incoming edge {other:?}"),
        }
    }
}

/// Instruments one function. `base` is the module index of the function's first counter.
pub(crate) fn apply(
    g: &Globals,
    func: Val,
    l: &Lowered,
    plan: &Plan,
    base: u64,
    trace: Option<u32>,
) {
    let b = unsafe { c::LLVMCreateBuilderInContext(g.ctx) };
    let em = Emitter {
        g,
        b,
        fn_scope: ir::subprogram(func),
        func,
    };
    let empty = cname("");
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
            (t.node, unsafe { c::LLVMBuildAlloca(b, g.i32t, n.as_ptr()) })
        })
        .collect();
    // Trace mode: every counter realization logs its edge instead (`trace` is the function's
    // index in the module metadata).
    let act = trace.map(|fn_index| unsafe {
        let n = cname("tally.act");
        let slot = c::LLVMBuildAlloca(b, g.i64t, n.as_ptr());
        let mut args = [g.counters, em.i32c(u64::from(fn_index))];
        let call = c::LLVMBuildCall2(
            b,
            g.trace_enter.1,
            g.trace_enter.0,
            args.as_mut_ptr(),
            2,
            empty.as_ptr(),
        );
        Val(call).set_debug_loc(em.call_loc(entry_first));
        c::LLVMBuildStore(b, call, slot);
        slot
    });
    let edge_of = |i: usize| match plan.counters[i].0 {
        tally_format::Probe::Edge(e) => e.0,
        other => unreachable!("trace mode counts edges, not {other:?}"),
    };
    let count = |i: usize, idx: u64| match act {
        None => em.increment(idx),
        Some(slot) => {
            if edge_of(i) != 0 {
                // e0 is the entry record itself.
                let a = unsafe { c::LLVMBuildLoad2(b, g.i64t, slot, empty.as_ptr()) };
                let here = unsafe { Val(c::LLVMGetBasicBlockTerminator(c::LLVMGetInsertBlock(b))) };
                let near = if here.is_null() { entry_first } else { here };
                em.call(g.trace_edge, &mut [a, em.i32c(u64::from(edge_of(i)))], near);
            }
        }
    };
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
                .position(|(p, _)| *p == tally_format::Probe::Edge(ee.into()))
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
                unsafe { c::LLVMBuildStore(b, site_ptr(NodeId::new(i)), em.field(rec, 1)) };
            }
        }
    }

    // Counters with direct sites, as a closure run in two passes (see below).
    let direct = |i: usize, r: Realize| {
        let idx = base + i as u64;
        match r {
            Realize::Runtime | Realize::Tagged { .. } => {}
            Realize::NodeEnd(n) => {
                em.at(l.nodes[n.index()].end);
                count(i, idx);
            }
            Realize::NodeStart(n) => {
                em.at(l.nodes[n.index()].start);
                count(i, idx);
            }
            Realize::Reentry(n) => {
                let node = &l.nodes[n.index()];
                let sj = node
                    .after_setjmp
                    .expect("re-entry vertex follows a setjmp call");
                em.at(node.start);
                if let Some(slot) = act {
                    let a = unsafe { c::LLVMBuildLoad2(b, g.i64t, slot, empty.as_ptr()) };
                    em.call(
                        g.trace_reentry,
                        &mut [a, em.i32c(u64::from(edge_of(i))), sj.0],
                        sj,
                    );
                    return;
                }
                unsafe {
                    let ret = sj.0;
                    let zero = c::LLVMConstInt(c::LLVMTypeOf(ret), 0, 0);
                    let ne =
                        c::LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntNE, ret, zero, empty.as_ptr());
                    let d = c::LLVMBuildZExt(b, ne, g.i64t, empty.as_ptr());
                    em.add_to(em.counter_ptr(idx), d);
                }
            }
            Realize::Split(e) => {
                let EdgeIr::Succ { term, index, .. } = l.edges[e.index()] else {
                    unreachable!("only terminator edges are split")
                };
                let nb = split_edge(&em, term, index);
                em.at(nb.terminator().expect("split block has its branch"));
                count(i, idx);
            }
        }
    };

    // Actions at the start of a block go first: in a block whose only instruction is its
    // terminator the start and the end are one insertion point, and a trace must log the edge
    // into the block before the edge out of it, whatever their ids.
    let starts = |r: &Realize| matches!(r, Realize::NodeStart(_) | Realize::Reentry(_));
    for (i, &(_, r)) in plan.counters.iter().enumerate() {
        if starts(&r) {
            direct(i, r);
        }
    }
    // Predecessor tags: the reads at the tag targets' starts (the stores come last).
    for t in &plan.tag_targets {
        let slot = slot_of(t.node);
        let node = &l.nodes[t.node.index()];
        em.at(node.start);
        if let Some(aslot) = act {
            // The edge id of incoming edge `tag`, from a constant table.
            unsafe {
                let mut ids: Vec<LLVMValueRef> = l
                    .cfg
                    .preds(t.node)
                    .iter()
                    .map(|e| em.i32c(e.index() as u64))
                    .collect();
                let arr = c::LLVMConstArray2(g.i32t, ids.as_mut_ptr(), ids.len() as u64);
                let n = cname("__tally_trace_preds");
                let table = c::LLVMAddGlobal(g.module, c::LLVMTypeOf(arr), n.as_ptr());
                c::LLVMSetLinkage(table, llvm_sys::LLVMLinkage::LLVMPrivateLinkage);
                c::LLVMSetInitializer(table, arr);
                c::LLVMSetGlobalConstant(table, 1);
                let v = c::LLVMBuildLoad2(b, g.i32t, slot, empty.as_ptr());
                let mut idx = [v];
                let p =
                    c::LLVMBuildInBoundsGEP2(b, g.i32t, table, idx.as_mut_ptr(), 1, empty.as_ptr());
                let edge = c::LLVMBuildLoad2(b, g.i32t, p, empty.as_ptr());
                let a = c::LLVMBuildLoad2(b, g.i64t, aslot, empty.as_ptr());
                em.call(g.trace_edge, &mut [a, edge], node.start);
            }
            continue;
        }
        unsafe {
            let v = c::LLVMBuildLoad2(b, g.i32t, slot, empty.as_ptr());
            let v = c::LLVMBuildZExt(b, v, g.i64t, empty.as_ptr());
            let i = c::LLVMBuildAdd(b, v, em.i64c(base + t.first_counter as u64), empty.as_ptr());
            let mut idx = [i];
            let p = c::LLVMBuildInBoundsGEP2(
                b,
                g.i64t,
                g.counters,
                idx.as_mut_ptr(),
                1,
                empty.as_ptr(),
            );
            em.add_to(p, em.i64c(1));
        }
    }
    for (i, &(_, r)) in plan.counters.iter().enumerate() {
        if !starts(&r) {
            direct(i, r);
        }
    }
    for t in &plan.tag_targets {
        store_tags(&em, l, t.node, slot_of(t.node));
    }
    unsafe { c::LLVMDisposeBuilder(b) };
}
