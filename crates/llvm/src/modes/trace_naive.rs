//! `trace-naive` mode: no counters; every edge taken is logged, per activation, to a trace file by
//! the runtime (`__tally_trace_*`). The independent oracle of path profiles: the tests cut the
//! trace into paths (`tally_report::trace_naive`) without any of path mode's numbering. It logs at
//! the sites `edges-naive` counts at (predecessor tags where an edge has no site), with the
//! activation record standing for the entry edge `e0`.

use super::naive::every_edge;
use super::{EmitCx, Emitted, FnPlan, ModeImpl, PlanCx};
use crate::counters::apply::SiteAction;
use crate::counters::plan::{Plan, TagTarget};
use crate::emit::build::{const_array, private_constant};
use crate::emit::Emitter;
use crate::ir::lower::Lowered;
use crate::ir::Val;
use llvm_sys::prelude::*;
use tally_format::Probe;

pub(crate) struct TraceNaive;

impl ModeImpl for TraceNaive {
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        Ok(Box::new(NaivePlan(Plan::for_edges(
            cx.l,
            &every_edge(cx.l),
            false,
        ))))
    }
}

struct NaivePlan(Plan);

impl FnPlan for NaivePlan {
    fn num_counters(&self) -> usize {
        0 // a trace build counts nothing
    }
    fn emit(&self, cx: &EmitCx) -> Emitted {
        let mut log = Log {
            function: cx.index,
            act: std::ptr::null_mut(),
            entry_first: None,
        };
        crate::counters::apply::apply(cx.g, cx.func, cx.l, &self.0, cx.base, &mut log);
        Emitted {
            split: self.0.split(),
            tagged: self.0.tagged(),
            ..Emitted::default()
        }
    }
}

/// Logs each edge to the activation `__tally_trace_enter` returned, kept in an alloca.
struct Log {
    /// The function's index in the module metadata.
    function: u32,
    /// The alloca holding the activation.
    act: LLVMValueRef,
    entry_first: Option<Val>,
}

fn edge_of(probe: Probe) -> u32 {
    match probe {
        Probe::Edge(e) => e.0,
        other => unreachable!("trace-naive mode logs edges, not {other:?}"),
    }
}

impl Log {
    fn activation(&self, em: &Emitter) -> LLVMValueRef {
        em.load(em.g.i64t, self.act)
    }
}

impl SiteAction for Log {
    fn enter(&mut self, em: &Emitter, entry_first: Val) {
        let g = em.g;
        let slot = em.alloca(g.i64t, "tally.act");
        let mut args = [g.counters, em.i32c(u64::from(self.function))];
        let call = em.call_instr(g.trace_enter, &mut args, entry_first);
        em.store(call, slot);
        self.act = slot;
        self.entry_first = Some(entry_first);
    }

    fn at_site(&self, em: &Emitter, probe: Probe, _idx: u64) {
        let edge = edge_of(probe);
        if edge == 0 {
            return; // e0 is the entry record itself
        }
        let a = self.activation(em);
        let near = em
            .insert_block()
            .terminator()
            .unwrap_or_else(|| self.entry_first.expect("enter ran first"));
        em.call(em.g.trace_edge, &mut [a, em.i32c(u64::from(edge))], near);
    }

    fn at_reentry(&self, em: &Emitter, probe: Probe, _idx: u64, sj: Val) {
        let a = self.activation(em);
        let ret = em.setjmp_ret(sj);
        em.call(
            em.g.trace_reentry,
            &mut [a, em.i32c(u64::from(edge_of(probe))), ret],
            sj,
        );
    }

    fn at_tag_target(&self, em: &Emitter, l: &Lowered, t: &TagTarget, tag: LLVMValueRef, _: u64) {
        // The edge id of incoming edge `tag`, from a constant table.
        let g = em.g;
        let start = l.nodes[t.node.index()].start;
        let ids: Vec<LLVMValueRef> = l
            .cfg
            .preds(t.node)
            .iter()
            .map(|e| em.i32c(e.index() as u64))
            .collect();
        let arr = const_array(g.i32t, &ids);
        let table = private_constant(g, "__tally_trace_preds", arr);
        let v = em.load(g.i32t, tag);
        let p = em.inbounds_gep(g.i32t, table, &[v]);
        let edge = em.load(g.i32t, p);
        let a = self.activation(em);
        em.call(g.trace_edge, &mut [a, edge], start);
    }
}
