//! Events mode: exact event counting with on-line queries (paper 001, Ball 1994) applied to IR.
//!
//! Events are counted per thread in one aggregate counter, kept as a countdown `left` (a
//! thread-local `i64`, `__tally_ev_left`; the count is `__tally_ev_limit - left`). The graph
//! crate (`tally_graph::events`) gives the increments of the chords of a maximum spanning tree
//! (Fig. 4), the query increments of every point (§3.3), and the call adjustments that make the
//! counter exact at every call (§4, with footnote 3's folding). Here:
//!
//! - a chord with a non-zero increment becomes `left -= inc` on the edge (a block splitting it,
//!   where it also checks the stop condition: `left <= QueryInc(target)` means the exact count
//!   reached `TALLY_STOP_AT`, and `__tally_events_stop` is called);
//! - every call that may run instrumented code is surrounded by its adjustments; a call to
//!   `tally_events()` is replaced by the exact count at that point, `limit - left + QueryInc`;
//! - per call site, the events of the completed calls (callees included) are added to a counter
//!   (`mark = left` before the call, `cnt += mark - left` after it, both points exact); per
//!   function, the events of its completed activations likewise;
//! - a frame abandoned during a call needs nothing: the counter was exact before the call; a
//!   `longjmp` back into a frame applies the re-entry edge's increment.
//!
//! A tail call at the end of a returning block is adjusted before only (it does not come back):
//! its query point is the end of the block, so the `ret` counts as executed when the callee runs.

use crate::apply::{split_edge, store_tags, Emitter, Globals};
use crate::ir::{self, Val};
use crate::lower::{EdgeIr, Lowered};
use crate::plan::{direct_site, Realize};
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMIntPredicate, LLVMOpcode};
use std::ffi::CString;
use tally_graph::events::{CallPlan, CallSite, EdgeAction, EventPlan};
use tally_graph::{EdgeId, EdgeKind, IdVec, NodeId};

/// What an event is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// Every LLVM IR instruction (of the optimized code, before instrumentation).
    Insns,
    /// Every basic block executed.
    Blocks,
    /// Every call.
    Calls,
    /// Every load, store and atomic memory operation.
    Mem,
}

impl EventKind {
    /// Parses `insns`, `blocks`, `calls`, `mem`.
    pub fn from_name(s: &str) -> Option<EventKind> {
        Some(match s {
            "insns" => EventKind::Insns,
            "blocks" => EventKind::Blocks,
            "calls" => EventKind::Calls,
            "mem" => EventKind::Mem,
            _ => return None,
        })
    }
    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Insns => "insns",
            EventKind::Blocks => "blocks",
            EventKind::Calls => "calls",
            EventKind::Mem => "mem",
        }
    }
    fn of(self, v: Val) -> u64 {
        match self {
            EventKind::Insns => 1,
            EventKind::Blocks => 0,
            EventKind::Calls => u64::from(
                matches!(v.opcode(), LLVMOpcode::LLVMCall | LLVMOpcode::LLVMInvoke)
                    && v.called_function().is_none_or(|f| f.intrinsic_id() == 0),
            ),
            EventKind::Mem => u64::from(matches!(
                v.opcode(),
                LLVMOpcode::LLVMLoad
                    | LLVMOpcode::LLVMStore
                    | LLVMOpcode::LLVMAtomicRMW
                    | LLVMOpcode::LLVMAtomicCmpXchg
            )),
        }
    }
}

/// A call of the function, as events mode sees it.
struct CallIr {
    node: NodeId,
    inst: Val,
    /// Events of the block up to and including the call.
    events_before: u64,
    /// Index among the block's adjusted calls (queries excluded) before it.
    calls_done: usize,
    /// A call to `tally_events()`: replaced by the count.
    query: bool,
    /// A tail call ending a returning block: adjusted before only.
    tail: bool,
}

/// The events plan of one function.
pub(crate) struct EventsPlan {
    pub events: IdVec<NodeId, u64>,
    calls: Vec<CallIr>,
    plan: CallPlan,
    /// events-naive: the oracle and baseline — each block adds its events itself, in segments
    /// ending at its calls (so the counter is exact at every call), no spanning tree, no query
    /// increments.
    naive: bool,
    /// Counter slots the function needs: its inclusive counter, then one per adjusted call.
    pub num_counters: usize,
}

impl EventsPlan {
    /// Direct callee names of the adjusted calls, with their blocks, in counter order.
    pub fn call_sites(&self) -> Vec<(NodeId, Option<String>)> {
        self.calls
            .iter()
            .filter(|c| !c.query)
            .map(|c| (c.node, c.inst.called_function().map(|f| f.name())))
            .collect()
    }
}

/// Calls that may run instrumented code (or query): everything but intrinsics, inline asm and
/// `setjmp` (which returns a second time from `longjmp`, handled by the re-entry edge).
fn adjusted(v: Val) -> bool {
    matches!(v.opcode(), LLVMOpcode::LLVMCall | LLVMOpcode::LLVMInvoke)
        && !v.calls_inline_asm()
        && !v.called_function().is_some_and(|f| {
            f.intrinsic_id() != 0 || crate::lower::SETJMP_NAMES.contains(&f.name().as_str())
        })
}

fn is_query(v: Val) -> bool {
    v.opcode() == LLVMOpcode::LLVMCall
        && v.called_function()
            .is_some_and(|f| f.name() == "tally_events")
}

/// Plans event counting for one function.
pub(crate) fn plan_events(
    l: &Lowered,
    kind: EventKind,
    weights: Option<&IdVec<EdgeId, f64>>,
    naive: bool,
) -> Result<EventsPlan, String> {
    let cfg = &l.cfg;
    let mut events = IdVec::filled(cfg.num_nodes(), 0u64);
    let mut calls = Vec::new();
    for (i, node) in l.nodes.iter().enumerate() {
        let n = NodeId::new(i);
        let mut k = if kind == EventKind::Blocks { 1 } else { 0 };
        let mut done = 0;
        for &v in &node.instrs {
            k += kind.of(v);
            if is_query(v) {
                calls.push(CallIr {
                    node: n,
                    inst: v,
                    events_before: k,
                    calls_done: done,
                    query: true,
                    tail: false,
                });
            } else if adjusted(v) {
                let tail = node.returns && v == node.end;
                calls.push(CallIr {
                    node: n,
                    inst: v,
                    events_before: k,
                    calls_done: done,
                    query: false,
                    tail,
                });
                done += 1;
            }
        }
        events[n] = k;
    }
    // Tail calls count the block's remaining events (its `ret`) as done.
    for c in calls.iter_mut().filter(|c| c.tail) {
        c.events_before = events[c.node];
    }
    let w = match weights {
        Some(w) => w.clone(),
        None => tally_graph::weight::heuristic_weights(cfg),
    };
    let plan = EventPlan::with_weights(cfg, &events, &w, |e| direct_site(l, e).is_none())
        .map_err(|e| e.to_string())?;
    let sites: Vec<CallSite> = calls
        .iter()
        .filter(|c| !c.query)
        .map(|c| CallSite {
            block: c.node,
            events_before: c.events_before,
        })
        .collect();
    let plan = CallPlan::compute(cfg, &plan, &sites).map_err(|e| e.to_string())?;
    let num_counters = 1 + sites.len();
    Ok(EventsPlan {
        events,
        calls,
        plan,
        naive,
        num_counters,
    })
}

fn cname(s: &str) -> CString {
    CString::new(s).expect("no NUL in internal names")
}

struct Ev<'a, 'b> {
    em: &'a Emitter<'b>,
    func_name: String,
}

impl Ev<'_, '_> {
    fn left(&self) -> LLVMValueRef {
        let e = cname("");
        unsafe { c::LLVMBuildLoad2(self.em.b, self.em.g.i64t, self.em.g.ev_left, e.as_ptr()) }
    }
    /// `left -= amount` at the builder; returns the new value.
    fn sub(&self, amount: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        unsafe {
            let v = c::LLVMBuildSub(self.em.b, self.left(), amount, e.as_ptr());
            c::LLVMBuildStore(self.em.b, v, self.em.g.ev_left);
            v
        }
    }
    fn i64c(&self, v: i64) -> LLVMValueRef {
        unsafe { c::LLVMConstInt(self.em.g.i64t, v as u64, 1) }
    }
    /// A C string naming where a stop happened.
    fn location(&self, l: &Lowered, n: NodeId) -> LLVMValueRef {
        let p = &l.nodes[n.index()].pos;
        let text = match &p.file {
            Some(f) => format!("{} ({}:{}) block n{}", self.func_name, f, p.line, n.index()),
            None => format!("{} block n{}", self.func_name, n.index()),
        };
        unsafe {
            let s = c::LLVMConstStringInContext2(
                self.em.g.ctx,
                text.as_ptr() as *const _,
                text.len(),
                0,
            );
            let name = cname("__tally_ev_where");
            let gv = c::LLVMAddGlobal(self.em.g.module, c::LLVMTypeOf(s), name.as_ptr());
            c::LLVMSetLinkage(gv, llvm_sys::LLVMLinkage::LLVMPrivateLinkage);
            c::LLVMSetInitializer(gv, s);
            c::LLVMSetGlobalConstant(gv, 1);
            gv
        }
    }
}

/// Instruments one function for event counting. `base` is the module index of its first
/// counter (its inclusive counter; call-site counters follow).
pub(crate) fn apply_events(g: &Globals, func: Val, l: &Lowered, ep: &EventsPlan, base: u64) {
    let b = unsafe { c::LLVMCreateBuilderInContext(g.ctx) };
    let em = Emitter {
        g,
        b,
        fn_scope: ir::subprogram(func),
        func,
    };
    let ev = Ev {
        em: &em,
        func_name: func.name(),
    };
    let empty = cname("");
    let cfg = &l.cfg;
    let plan = &ep.plan;
    let entry_first = func
        .first_block()
        .and_then(|bb| bb.first())
        .expect("lowered functions have an entry instruction");

    // Locals: the countdown at entry (inclusive events) and a call mark.
    em.at(entry_first);
    let (saved, mark) = unsafe {
        let n1 = cname("tally.evstart");
        let n2 = cname("tally.evmark");
        (
            c::LLVMBuildAlloca(b, g.i64t, n1.as_ptr()),
            c::LLVMBuildAlloca(b, g.i64t, n2.as_ptr()),
        )
    };
    // Chords without a direct site are counted through tags (an increment table per target).
    let mut tag_targets: Vec<NodeId> = cfg
        .edges()
        .filter(|&(e, _)| plan.increment(e) != 0 && direct_site(l, e).is_none())
        .map(|(_, ed)| ed.dst)
        .collect();
    tag_targets.sort();
    tag_targets.dedup();
    let slots: Vec<(NodeId, LLVMValueRef)> = tag_targets
        .iter()
        .map(|&n| {
            let name = cname("tally.tag");
            (n, unsafe { c::LLVMBuildAlloca(b, g.i32t, name.as_ptr()) })
        })
        .collect();
    unsafe { c::LLVMBuildStore(b, ev.left(), saved) };

    if ep.naive {
        apply_naive(&ev, l, ep, base, mark);
        finish_inclusive(&ev, l, saved, base);
        unsafe { c::LLVMDisposeBuilder(b) };
        return;
    }

    // 1. Chord increments (before the call adjustments: at a block's start the incoming
    //    edge's increment comes first).
    for (e, edge) in cfg.edges() {
        let EdgeAction::Add(inc) = plan.action(e) else {
            continue;
        };
        if tag_targets.contains(&edge.dst) && direct_site(l, e).is_none() {
            continue;
        }
        match l.edges[e.index()] {
            EdgeIr::Reentry => {
                let node = &l.nodes[edge.dst.index()];
                let sj = node
                    .after_setjmp
                    .expect("re-entry vertex follows a setjmp call");
                em.at(node.start);
                unsafe {
                    let zero = c::LLVMConstInt(c::LLVMTypeOf(sj.0), 0, 0);
                    let again = c::LLVMBuildICmp(
                        b,
                        LLVMIntPredicate::LLVMIntNE,
                        sj.0,
                        zero,
                        empty.as_ptr(),
                    );
                    let amount =
                        c::LLVMBuildSelect(b, again, ev.i64c(inc), ev.i64c(0), empty.as_ptr());
                    ev.sub(amount);
                }
            }
            EdgeIr::Entry => {
                em.at(l.nodes[0].start);
                ev.sub(ev.i64c(inc));
            }
            EdgeIr::EarlyExit => {}
            EdgeIr::Succ {
                term,
                index,
                splittable: true,
            } if edge.kind == EdgeKind::Flow => {
                // On a block of its own, with the stop check.
                let nb = split_edge(&em, term, index);
                let br = nb.terminator().expect("split block has its branch");
                em.at(br);
                let left = ev.sub(ev.i64c(inc));
                add_stop_check(&ev, l, br, left, plan.query_start(edge.dst), edge.dst);
            }
            _ => {
                let at = match direct_site(l, e) {
                    Some(Realize::NodeEnd(n)) => l.nodes[n.index()].end,
                    Some(Realize::NodeStart(n)) => l.nodes[n.index()].start,
                    other => unreachable!("edge {e} of kind {:?} realized as {other:?}", edge.kind),
                };
                em.at(at);
                ev.sub(ev.i64c(inc));
            }
        }
    }
    for &(t, slot) in &slots {
        store_tags(&em, l, t, slot);
        let incs: Vec<LLVMValueRef> = cfg
            .preds(t)
            .iter()
            .map(|&e| ev.i64c(plan.increment(e)))
            .collect();
        em.at(l.nodes[t.index()].start);
        unsafe {
            let mut incs = incs;
            let arr = c::LLVMConstArray2(g.i64t, incs.as_mut_ptr(), incs.len() as u64);
            let name = cname("__tally_ev_tag_incs");
            let table = c::LLVMAddGlobal(g.module, c::LLVMTypeOf(arr), name.as_ptr());
            c::LLVMSetLinkage(table, llvm_sys::LLVMLinkage::LLVMPrivateLinkage);
            c::LLVMSetInitializer(table, arr);
            c::LLVMSetGlobalConstant(table, 1);
            let tag = c::LLVMBuildLoad2(b, g.i32t, slot, empty.as_ptr());
            let mut idx = [tag];
            let p = c::LLVMBuildInBoundsGEP2(b, g.i64t, table, idx.as_mut_ptr(), 1, empty.as_ptr());
            let inc = c::LLVMBuildLoad2(b, g.i64t, p, empty.as_ptr());
            ev.sub(inc);
        }
    }

    // 2. Calls: adjustments, per-call-site counters, queries.
    let mut site = 0usize;
    for call in &ep.calls {
        if call.query {
            let q = plan
                .query_inc(call.node, call.events_before, call.calls_done)
                .expect("query points lie in their block");
            em.at(call.inst);
            unsafe {
                let limit = c::LLVMBuildLoad2(b, g.i64t, g.ev_limit, empty.as_ptr());
                let count = c::LLVMBuildSub(b, limit, ev.left(), empty.as_ptr());
                let count = c::LLVMBuildAdd(b, count, ev.i64c(q), empty.as_ptr());
                c::LLVMReplaceAllUsesWith(call.inst.0, count);
                c::LLVMInstructionEraseFromParent(call.inst.0);
            }
            continue;
        }
        let adj = plan.sites()[site];
        let counter = base + 1 + site as u64;
        site += 1;
        em.at(call.inst);
        if adj.before != 0 {
            ev.sub(ev.i64c(adj.before));
        }
        if call.tail {
            continue;
        }
        unsafe { c::LLVMBuildStore(b, ev.left(), mark) };
        // After the call, on every way back into the frame.
        let mut after_points = Vec::new();
        if call.inst.opcode() == LLVMOpcode::LLVMInvoke {
            // Both destinations, before anything already placed there (an incoming chord's
            // increment must come after the call's own accounting). The unwind destination is
            // this invoke's own landing pad (prepare.rs).
            for k in [1, 0] {
                let mut dest = call.inst.successor(k);
                if predecessors(func, dest) > 1 {
                    dest = split_edge(&em, call.inst, k);
                }
                after_points.push(
                    dest.insertion_start()
                        .expect("a block has a non-PHI instruction"),
                );
            }
        } else {
            after_points.push(
                call.inst
                    .next()
                    .expect("a call is followed by an instruction"),
            );
        }
        for at in after_points {
            em.at(at);
            unsafe {
                let before = c::LLVMBuildLoad2(b, g.i64t, mark, empty.as_ptr());
                let spent = c::LLVMBuildSub(b, before, ev.left(), empty.as_ptr());
                em.add_to(em.counter_ptr(counter), spent);
            }
            if adj.after != 0 {
                ev.sub(ev.i64c(adj.after));
            }
        }
    }

    finish_inclusive(&ev, l, saved, base);
    unsafe { c::LLVMDisposeBuilder(b) };
}

/// Inclusive events of the function's completed activations, after everything else at the
/// returns (the counter is exact after the return edge).
fn finish_inclusive(ev: &Ev, l: &Lowered, saved: LLVMValueRef, base: u64) {
    let em = ev.em;
    let empty = cname("");
    for node in l.nodes.iter().filter(|n| n.returns) {
        em.at(node.end);
        unsafe {
            let start = c::LLVMBuildLoad2(em.b, em.g.i64t, saved, empty.as_ptr());
            let spent = c::LLVMBuildSub(em.b, start, ev.left(), empty.as_ptr());
            em.add_to(em.counter_ptr(base), spent);
        }
    }
}

/// events-naive: every block adds its own events, in segments that end at its calls (a
/// segment's events are added when it starts, up to and including the call that ends it), so
/// the counter is exact at every call and query with nothing but block-local arithmetic.
fn apply_naive(ev: &Ev, l: &Lowered, ep: &EventsPlan, base: u64, mark: LLVMValueRef) {
    let em = ev.em;
    let g = em.g;
    let empty = cname("");
    let mut site = 0usize;
    for (i, node) in l.nodes.iter().enumerate() {
        let n = NodeId::new(i);
        let calls: Vec<&CallIr> = ep.calls.iter().filter(|c| c.node == n).collect();
        // Segment boundaries: block start, then after each call or query.
        let first = calls.first().map_or(ep.events[n], |c| c.events_before);
        em.at(node.start);
        if first > 0 {
            ev.sub(ev.i64c(first as i64));
        }
        for (j, call) in calls.iter().enumerate() {
            let next = calls.get(j + 1).map_or(ep.events[n], |c| c.events_before);
            if call.query {
                em.at(call.inst);
                unsafe {
                    let limit = c::LLVMBuildLoad2(em.b, g.i64t, g.ev_limit, empty.as_ptr());
                    let count = c::LLVMBuildSub(em.b, limit, ev.left(), empty.as_ptr());
                    if next > call.events_before {
                        ev.sub(ev.i64c((next - call.events_before) as i64));
                    }
                    c::LLVMReplaceAllUsesWith(call.inst.0, count);
                    c::LLVMInstructionEraseFromParent(call.inst.0);
                }
            } else {
                let counter = base + 1 + site as u64;
                site += 1;
                if call.tail {
                    continue;
                }
                em.at(call.inst);
                unsafe { c::LLVMBuildStore(em.b, ev.left(), mark) };
                let mut afters = Vec::new();
                if call.inst.opcode() == LLVMOpcode::LLVMInvoke {
                    for k in [1, 0] {
                        let mut dest = call.inst.successor(k);
                        if predecessors(em.func, dest) > 1 {
                            dest = split_edge(em, call.inst, k);
                        }
                        afters.push(
                            dest.insertion_start()
                                .expect("a block has a non-PHI instruction"),
                        );
                    }
                } else {
                    afters.push(
                        call.inst
                            .next()
                            .expect("a call is followed by an instruction"),
                    );
                }
                for at in afters {
                    em.at(at);
                    unsafe {
                        let before = c::LLVMBuildLoad2(em.b, g.i64t, mark, empty.as_ptr());
                        let spent = c::LLVMBuildSub(em.b, before, ev.left(), empty.as_ptr());
                        em.add_to(em.counter_ptr(counter), spent);
                    }
                    // The invoke's destinations run their own block's events; only a call in
                    // the middle of a block continues this block's segments.
                    if call.inst.opcode() != LLVMOpcode::LLVMInvoke && next > call.events_before {
                        ev.sub(ev.i64c((next - call.events_before) as i64));
                    }
                }
            }
        }
    }
}

/// Number of control-flow edges into `bb` (a switch with two cases to it counts twice).
fn predecessors(func: Val, bb: crate::ir::Bb) -> usize {
    func.blocks()
        .into_iter()
        .filter_map(|b| b.terminator())
        .map(|t| {
            (0..t.num_successors())
                .filter(|&i| t.successor(i) == bb)
                .count()
        })
        .sum()
}

/// Replaces `br` (an unconditional branch ending a block made for a chord) by a branch to a
/// stop block when `left <= q`: the exact count (limit - left + q) reached the limit.
fn add_stop_check(ev: &Ev, l: &Lowered, br: Val, left: LLVMValueRef, q: i64, target: NodeId) {
    let em = ev.em;
    let g = em.g;
    let empty = cname("");
    unsafe {
        let here = br.parent();
        let dest = br.successor(0);
        let name = cname("tally.stop");
        let slow = c::LLVMAppendBasicBlockInContext(g.ctx, em.func.0, name.as_ptr());
        c::LLVMMoveBasicBlockAfter(slow, here.0);
        em.at(br);
        let hit = c::LLVMBuildICmp(
            em.b,
            LLVMIntPredicate::LLVMIntSLE,
            left,
            ev.i64c(q),
            empty.as_ptr(),
        );
        let cond = c::LLVMBuildCondBr(em.b, hit, slow, dest.0);
        let _ = cond;
        c::LLVMInstructionEraseFromParent(br.0);
        c::LLVMPositionBuilderAtEnd(em.b, slow);
        c::LLVMSetCurrentDebugLocation2(em.b, std::ptr::null_mut());
        let where_ = ev.location(l, target);
        let mut args = [where_, ev.i64c(q)];
        let call = c::LLVMBuildCall2(
            em.b,
            g.ev_stop.1,
            g.ev_stop.0,
            args.as_mut_ptr(),
            2,
            empty.as_ptr(),
        );
        if let Some(scope) = em.fn_scope {
            Val(call).set_debug_loc(Some(ir::artificial_loc(g.ctx, scope)));
        }
        c::LLVMBuildBr(em.b, dest.0);
        // The target's PHIs get the same value from the stop block as from the chord block.
        for phi in dest.phis() {
            let n = c::LLVMCountIncoming(phi.0);
            for i in 0..n {
                if c::LLVMGetIncomingBlock(phi.0, i) == here.0 {
                    let mut v = [c::LLVMGetIncomingValue(phi.0, i)];
                    let mut bb = [slow];
                    c::LLVMAddIncoming(phi.0, v.as_mut_ptr(), bb.as_mut_ptr(), 1);
                    break;
                }
            }
        }
    }
}
