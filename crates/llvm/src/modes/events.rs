//! Events mode: exact event counting with on-line queries (Ball 1994) applied to IR.
//!
//! Events are counted per thread in one aggregate counter, kept as a countdown `left` (a
//! thread-local `i64`, `__tally_ev_left`; the count is `__tally_ev_limit - left`). The graph
//! crate (`tally_graph::events`) gives the increments of the chords of a maximum spanning tree
//! (Fig. 4), the query increments of every point (§3.3), and the call adjustments that make the
//! counter exact at every call (§4, with footnote 3's folding). Here:
//!
//! - a chord with a non-zero increment becomes `left -= inc` on the edge (at the end of its
//!   source when that ends in an unconditional branch, else on a block splitting it), where it
//!   also checks the stop condition: the runtime arms the countdown `TALLY_EV_SLACK` events early,
//!   so the check is `left <= 0` (the flags of the subtraction on x86) and
//!   `__tally_events_check` decides exactly whether `limit - left + QueryInc(target)` reached
//!   `TALLY_STOP_AT`;
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
//!
//! With `--tally-sese=on` (the default), counted call-free loops are versioned: a copy without
//! decrements runs while no `TALLY_STOP_AT` is pending, and subtracts the events of its
//! activation at its exits from its SESE counter or trip count ([`fast`]).

mod fast;

use super::{EmitCx, Emitted, FnPlan, ModeImpl, PlanCx};
use crate::emit::build::{
    add_call_type_attr, add_incoming, append_block, const_array, const_c_string, const_int, erase,
    function_type, i8_type, inline_asm, move_block_after, private_constant, replace_all_uses,
    type_of,
};
use crate::emit::sites::{base_weights, direct_site, Realize};
use crate::emit::surgery::{split_edge, store_tags};
use crate::emit::{Emitter, Globals};
use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::{self, Val};
use llvm_sys::prelude::*;
use llvm_sys::{LLVMIntPredicate, LLVMOpcode};
use tally_format::{CallSiteMeta, CounterIdx, EventMeta, Probe};
use tally_graph::events::{CallPlan, CallSite, EdgeAction, EventPlan};
use tally_graph::{EdgeId, EdgeKind, IdVec, NodeId};

pub use crate::options::EventKind;

impl EventKind {
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
/// `events` (`naive: false`) and `events-naive`.
pub(crate) struct Events {
    pub naive: bool,
}

impl ModeImpl for Events {
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        let mut ep = plan_events(cx.l, cx.opts.events, cx.weights, self.naive)?;
        if !self.naive {
            (ep.fast, ep.searched) = fast::plan(cx.l, &ep, cx.weights, cx.opts.sese);
        }
        Ok(Box::new(ep))
    }
}

impl FnPlan for EventsPlan {
    fn num_counters(&self) -> usize {
        self.num_counters
    }
    fn emit(&self, cx: &EmitCx) -> Emitted {
        let fast = apply_events(cx.g, cx.func, cx.l, self, cx.base);
        Emitted {
            sese: crate::counters::sese::SeseStats {
                loops: self.searched.loops,
                candidates: self.searched.candidates,
                replaced: fast.versioned,
                replaced_trips: fast.trips,
                ..Default::default()
            },
            counters: vec![Probe::Events; self.num_counters],
            events: Some(EventMeta {
                per_block: self.events.values()[..cx.l.cfg.num_blocks()].to_vec(),
                inclusive: CounterIdx(0),
                calls: self
                    .call_sites()
                    .into_iter()
                    .enumerate()
                    .map(|(i, (n, callee))| CallSiteMeta {
                        block: n.into(),
                        callee,
                        counter: CounterIdx(1 + i as u32),
                    })
                    .collect(),
            }),
            ..Emitted::default()
        }
    }
}

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
    /// Loops versioned without decrements ([`fast`]).
    fast: Vec<fast::FastLoop>,
    /// Loops and SESE candidates found when planning them.
    searched: fast::FastStats,
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
            f.intrinsic_id() != 0 || crate::ir::ends::SETJMP_NAMES.contains(&f.name().as_str())
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
    let w = base_weights(l, weights);
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
        fast: Vec::new(),
        searched: fast::FastStats::default(),
    })
}

struct Ev<'a, 'b> {
    em: &'a Emitter<'b>,
    func_name: String,
}

impl Ev<'_, '_> {
    fn left(&self) -> LLVMValueRef {
        self.em.load(self.em.g.i64t, self.em.g.ev_left)
    }
    /// `left -= amount` at the builder; returns the new value.
    fn sub(&self, amount: LLVMValueRef) -> LLVMValueRef {
        let v = self.em.sub(self.left(), amount);
        self.em.store(v, self.em.g.ev_left);
        v
    }
    /// `left -= inc`, then whether the new `left` is `<= threshold` (an `i1`). With threshold
    /// 0 this is one `sub $inc, %fs:left` whose flags the branch reads (`jle`), in inline
    /// assembly: LLVM would load, subtract, store and `test` a register instead, as it does not
    /// reuse the flags of a read-modify-write (x86-64 only, as is the runtime).
    fn sub_and_check(&self, inc: i64, threshold: i64) -> LLVMValueRef {
        let em = self.em;
        let g = em.g;
        if threshold != 0 {
            let v = self.sub(self.i64c(inc));
            return em.icmp(LLVMIntPredicate::LLVMIntSLE, v, self.i64c(threshold));
        }
        let i8t = i8_type(g);
        let fty = function_type(i8t, &[g.ptrt, g.i64t, g.ptrt]);
        let asm = inline_asm(
            fty,
            "subq $2, $1",
            "={@ccle},=*m,er,*m,~{dirflag},~{fpsr},~{flags}",
        );
        let call = em.call_plain((asm, fty), &[g.ev_left, self.i64c(inc), g.ev_left]);
        for i in [1, 3] {
            add_call_type_attr(g, call, i, "elementtype", g.i64t);
        }
        let zero = const_int(i8t, 0, false);
        em.icmp(LLVMIntPredicate::LLVMIntNE, call, zero)
    }
    fn i64c(&self, v: i64) -> LLVMValueRef {
        const_int(self.em.g.i64t, v as u64, true)
    }
    /// A C string naming where a stop happened.
    fn location(&self, l: &Lowered, n: NodeId) -> LLVMValueRef {
        let p = &l.nodes[n.index()].pos;
        let text = match &p.file {
            Some(f) => format!("{} ({}:{}) block n{}", self.func_name, f, p.line, n.index()),
            None => format!("{} block n{}", self.func_name, n.index()),
        };
        let s = const_c_string(self.em.g, &text);
        private_constant(self.em.g, "__tally_ev_where", s)
    }
}

/// Instruments one function for event counting. `base` is the module index of its first
/// counter (its inclusive counter; call-site counters follow).
pub(crate) fn apply_events(
    g: &Globals,
    func: Val,
    l: &Lowered,
    ep: &EventsPlan,
    base: u64,
) -> fast::FastStats {
    let em = Emitter::new(g, func);
    let ev = Ev {
        em: &em,
        func_name: func.name(),
    };
    let cfg = &l.cfg;
    let plan = &ep.plan;
    let entry_first = func
        .first_block()
        .and_then(|bb| bb.first())
        .expect("lowered functions have an entry instruction");

    // Locals: the countdown at entry (inclusive events) and a call mark.
    em.at(entry_first);
    let saved = em.alloca(g.i64t, "tally.evstart");
    let mark = em.alloca(g.i64t, "tally.evmark");
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
        .map(|&n| (n, em.alloca(g.i32t, "tally.tag")))
        .collect();
    em.store(ev.left(), saved);

    if ep.naive {
        apply_naive(&ev, l, ep, base, mark);
        finish_inclusive(&ev, l, saved, base);
        return fast::FastStats::default();
    }

    // 0. Counted loops: their uninstrumented copies, before any of the plan's code.
    let stats = fast::emit(&em, l, ep, &ep.fast, &|n| tag_targets.contains(&n));

    // 1. Chord increments (before the call adjustments: at a block's start the incoming
    //    edge's increment comes first).
    // Chords checked at the end of their source, replacing its branch: after everything else.
    let mut at_source_end: Vec<(Val, i64, NodeId)> = Vec::new();
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
                let zero = const_int(type_of(sj.0), 0, false);
                let again = em.icmp(LLVMIntPredicate::LLVMIntNE, sj.0, zero);
                let amount = em.select(again, ev.i64c(inc), ev.i64c(0));
                ev.sub(amount);
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
                // With the stop check: at the end of a source that ends in an unconditional
                // branch (the check replaces that branch, so it is done last, when nothing
                // else will be placed relative to it), else on a block of its own.
                if matches!(direct_site(l, e), Some(Realize::NodeEnd(_))) && is_plain_br(term) {
                    at_source_end.push((term, inc, edge.dst));
                    continue;
                }
                let br = split_edge(&em, term, index)
                    .terminator()
                    .expect("split block has its branch");
                em.at(br);
                let q = plan.query_start(edge.dst);
                let hit = ev.sub_and_check(inc, check_threshold(q));
                add_stop_check(&ev, l, br, hit, q, edge.dst);
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
        let arr = const_array(g.i64t, &incs);
        let table = private_constant(g, "__tally_ev_tag_incs", arr);
        let tag = em.load(g.i32t, slot);
        let p = em.inbounds_gep(g.i64t, table, &[tag]);
        let inc = em.load(g.i64t, p);
        ev.sub(inc);
    }

    // 2. Calls: adjustments, per-call-site counters, queries.
    let mut site = 0usize;
    for call in &ep.calls {
        if call.query {
            let q = plan
                .query_inc(call.node, call.events_before, call.calls_done)
                .expect("query points lie in their block");
            em.at(call.inst);
            let limit = em.load(g.i64t, g.ev_limit);
            let count = em.sub(limit, ev.left());
            let count = em.add(count, ev.i64c(q));
            replace_all_uses(call.inst.0, count);
            erase(call.inst);
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
        em.store(ev.left(), mark);
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
            let before = em.load(g.i64t, mark);
            let spent = em.sub(before, ev.left());
            em.add_to(em.counter_ptr(counter), spent);
            if adj.after != 0 {
                ev.sub(ev.i64c(adj.after));
            }
        }
    }

    // 3. Checked chords at the end of their source. Replacing the branch invalidates it as a
    //    place (a block's end, or its start when the branch is all it has), so no code is
    //    placed relative to it after this.
    for (br, inc, dst) in at_source_end {
        em.at(br);
        let q = plan.query_start(dst);
        let hit = ev.sub_and_check(inc, check_threshold(q));
        add_stop_check(&ev, l, br, hit, q, dst);
    }

    finish_inclusive(&ev, l, saved, base);
    stats
}

/// Inclusive events of the function's completed activations, after everything else at the
/// returns (the counter is exact after the return edge).
fn finish_inclusive(ev: &Ev, l: &Lowered, saved: LLVMValueRef, base: u64) {
    let em = ev.em;
    for node in l.nodes.iter().filter(|n| n.returns) {
        em.at(node.end);
        let start = em.load(em.g.i64t, saved);
        let spent = em.sub(start, ev.left());
        em.add_to(em.counter_ptr(base), spent);
    }
}

/// events-naive: every block adds its own events, in segments that end at its calls (a
/// segment's events are added when it starts, up to and including the call that ends it), so
/// the counter is exact at every call and query with nothing but block-local arithmetic.
fn apply_naive(ev: &Ev, l: &Lowered, ep: &EventsPlan, base: u64, mark: LLVMValueRef) {
    let em = ev.em;
    let g = em.g;
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
                let limit = em.load(g.i64t, g.ev_limit);
                let count = em.sub(limit, ev.left());
                if next > call.events_before {
                    ev.sub(ev.i64c((next - call.events_before) as i64));
                }
                replace_all_uses(call.inst.0, count);
                erase(call.inst);
            } else {
                let counter = base + 1 + site as u64;
                site += 1;
                if call.tail {
                    continue;
                }
                em.at(call.inst);
                em.store(ev.left(), mark);
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
                    let before = em.load(g.i64t, mark);
                    let spent = em.sub(before, ev.left());
                    em.add_to(em.counter_ptr(counter), spent);
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

/// An unconditional `br`.
fn is_plain_br(v: Val) -> bool {
    v.opcode() == LLVMOpcode::LLVMBr && v.num_successors() == 1
}

/// `TALLY_EV_SLACK` of `tally.h`: the runtime arms its countdown that many events before
/// `TALLY_STOP_AT`, so that a check can compare the new countdown with 0.
pub use tally_format::abi::EV_SLACK;

/// The constant a checked point compares the new countdown with: 0 (read off the flags of the
/// subtraction on x86) unless the point's query increment `q` exceeds [`EV_SLACK`]. A point
/// whose exact count (`count + q`) reached the target `N` has `left = N - EV_SLACK - count <=
/// q - EV_SLACK`, so it always calls the runtime, which decides exactly.
fn check_threshold(q: i64) -> i64 {
    q.saturating_sub(EV_SLACK).max(0)
}

/// Replaces `br` (an unconditional branch ending the chord's block) by a branch to a check
/// block when `hit` (`left <= check_threshold(q)`): the exact count (limit - left + q) may have
/// reached `TALLY_STOP_AT`, and `__tally_events_check` decides.
fn add_stop_check(ev: &Ev, l: &Lowered, br: Val, hit: LLVMValueRef, q: i64, target: NodeId) {
    let em = ev.em;
    let g = em.g;
    let here = br.parent();
    let dest = br.successor(0);
    let slow = append_block(g, em.func, "tally.stop");
    move_block_after(slow, here);
    em.at(br);
    let cond = em.cond_br(hit, slow, dest);
    // The check block is cold: registers stay live across it in the hot code and are
    // saved around the call only there.
    ir::set_branch_weights(g.ctx, cond.0, &[1, 1 << 20]);
    erase(br);
    em.at_end(slow);
    let where_ = ev.location(l, target);
    let call = em.call_plain(g.ev_check, &[where_, ev.i64c(q)]);
    if let Some(scope) = em.fn_scope {
        Val(call).set_debug_loc(Some(ir::artificial_loc(g.ctx, scope)));
    }
    em.br(dest);
    // The target's PHIs get the same value from the stop block as from the chord block.
    for phi in dest.phis() {
        if let Some((v, _)) = phi.incoming().into_iter().find(|&(_, from)| from == here) {
            add_incoming(phi, v.0, slow);
        }
    }
}
