//! `trace-naive` mode: no counters; every edge taken is logged, per activation, to a trace file by
//! the runtime (`__tally_trace_*`). The independent oracle of path profiles: the tests cut the
//! trace into paths (`tally_report::trace_naive`) without any of path mode's numbering. It logs at
//! the sites `edges-naive` counts at (predecessor tags where an edge has no site), with the
//! activation record standing for the entry edge `e0`.

use super::naive::every_edge;
use super::{EmitCx, Emitted, FnPlan, ModeImpl, PlanCx};
use crate::counters::apply::SiteAction;
use crate::counters::plan::{Plan, TagTarget};
use crate::emit::{cname, Emitter};
use crate::ir::lower::Lowered;
use crate::ir::Val;
use llvm_sys::core as c;
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
        let empty = cname("");
        unsafe { c::LLVMBuildLoad2(em.b, em.g.i64t, self.act, empty.as_ptr()) }
    }
}

impl SiteAction for Log {
    fn enter(&mut self, em: &Emitter, entry_first: Val) {
        let empty = cname("");
        let n = cname("tally.act");
        let g = em.g;
        unsafe {
            let slot = c::LLVMBuildAlloca(em.b, g.i64t, n.as_ptr());
            let mut args = [g.counters, em.i32c(u64::from(self.function))];
            let call = c::LLVMBuildCall2(
                em.b,
                g.trace_enter.1,
                g.trace_enter.0,
                args.as_mut_ptr(),
                2,
                empty.as_ptr(),
            );
            Val(call).set_debug_loc(em.call_loc(entry_first));
            c::LLVMBuildStore(em.b, call, slot);
            self.act = slot;
        }
        self.entry_first = Some(entry_first);
    }

    fn at_site(&self, em: &Emitter, probe: Probe, _idx: u64) {
        let edge = edge_of(probe);
        if edge == 0 {
            return; // e0 is the entry record itself
        }
        let a = self.activation(em);
        let here = unsafe { Val(c::LLVMGetBasicBlockTerminator(c::LLVMGetInsertBlock(em.b))) };
        let near = if here.is_null() {
            self.entry_first.expect("enter ran first")
        } else {
            here
        };
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
        let empty = cname("");
        let g = em.g;
        let start = l.nodes[t.node.index()].start;
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
            let v = c::LLVMBuildLoad2(em.b, g.i32t, tag, empty.as_ptr());
            let mut idx = [v];
            let p =
                c::LLVMBuildInBoundsGEP2(em.b, g.i32t, table, idx.as_mut_ptr(), 1, empty.as_ptr());
            let edge = c::LLVMBuildLoad2(em.b, g.i32t, p, empty.as_ptr());
            let a = self.activation(em);
            em.call(g.trace_edge, &mut [a, edge], start);
        }
    }
}
