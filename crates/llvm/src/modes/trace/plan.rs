//! Planning one function: the cheaper of the witness and branch plans (checked), or path
//! numbers with `--tally-trace=paths`, and the sites that write them ([`WPlan`]).

use super::callees::{calls_of, input_of, is_resume, may_be_announced, writes_back, Call};
use super::path_code::{paths_code, PathsCode};
use super::Trace;
use crate::counters::plan::Plan as SitePlan;
use crate::ir::Val;
use crate::modes::{FnPlan, PlanCx};
use crate::options::TracePlan;
use llvm_sys::LLVMOpcode;
use tally_graph::witness::{self, Plan};
use tally_graph::{EdgeId, IdVec, NodeId};

impl Trace {
    pub(super) fn plan_traced(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        let l = cx.l;
        let calls = calls_of(l);
        let input = input_of(l, &calls);
        let weights = match cx.weights {
            Some(w) => w.clone(),
            None => tally_graph::weight::heuristic_weights(&l.cfg),
        };
        // A static weighting takes an early return for as likely as going on; Ball & Larus's
        // return heuristic makes it the rare side, so a chain of them is witnessed at its
        // returns, not at every test (bzip2: -7% of `trace-regs`' instructions, a quarter off
        // its trace; docs/log/trace.md). Measured weights stay as they are, and so do the path
        // numbers' (`--tally-trace=paths`, whose placement this was not measured for).
        let mut plan_weights = weights.clone();
        if !cx.measured {
            tally_graph::weight::discount_returns(&l.cfg, &mut plan_weights, RETURN_DISCOUNT);
        }
        // The branch plan leaves cycles without a predicate (`for (;;) pause();`) unwitnessed,
        // which `check_plan` rejects (`E - Ewit` must be acyclic); `cheaper_plan` does not
        // know that, so the witness plan is the fallback.
        let first = if cx.opts.trace_plan == TracePlan::Bits {
            witness::branch_plan(&input)
        } else {
            witness::cheaper_plan(&input, &plan_weights)
        };
        let plan = match witness::check_plan(&input, &first) {
            Ok(()) => first,
            Err(e) => {
                let second = witness::witness_plan(&input, &plan_weights);
                witness::check_plan(&input, &second)
                    .map_err(|_| format!("trace plan fails its check: {e}"))?;
                second
            }
        };
        // `Back` goes at the start of an unknown `invoke`'s normal destination, which must be
        // entered from this call only: when it is shared, on a block of its own
        // (`back_split`, made after the sites so that `Back` precedes the edge's witness).
        let mut back_split = Vec::new();
        for (i, _) in l.nodes.iter().enumerate() {
            for call in &calls[i] {
                if call.instr.opcode() == LLVMOpcode::LLVMCall
                    || is_resume(call.instr)
                    || !writes_back(&call.callee)
                {
                    continue;
                }
                if call.instr.opcode() != LLVMOpcode::LLVMInvoke {
                    return Err("trace mode: an unknown callbr".into());
                }
                let normal = call.instr.successor(0);
                let shared = l
                    .nodes
                    .iter()
                    .position(|n| n.after_setjmp.is_none() && n.start.parent() == normal)
                    .is_none_or(|d| l.cfg.preds(NodeId::new(d)).len() != 1);
                if shared {
                    back_split.push(call.instr);
                }
            }
        }
        let musttail = calls.iter().flatten().any(|c| {
            c.instr.opcode() == LLVMOpcode::LLVMCall
                && c.instr.tail_kind() == llvm_sys::LLVMTailCallKind::LLVMTailCallKindMustTail
        });
        if musttail {
            return Err("trace mode: a musttail call (the return would need code after it)".into());
        }
        // Return edges are written by hand right before the `ret` (after a `tail` call the
        // sites would put them before the call, whose records come first).
        let witnessed: Vec<EdgeId> = plan
            .witness
            .iter()
            .filter(|(e, w)| {
                w.is_some_and(|w| w.bits > 0)
                    && l.cfg.edge(*e).kind != tally_graph::EdgeKind::Return
            })
            .map(|(e, _)| e)
            .collect();
        // `--tally-trace=paths`: path numbers instead of witnesses where the function allows
        // it (no setjmp, no landing pads, at most 2^32 paths with cuts before call vertices,
        // path code placeable on every edge); else the witness plan above.
        let paths =
            (cx.opts.trace_plan == TracePlan::Paths && !l.has_setjmp && !l.has_landing_pads)
                .then(|| paths_code(l, &input, &weights))
                .and_then(Result::ok);
        let (plan, witnessed) = match &paths {
            Some(_) => match witness::paths::paths_trace_plan(&input) {
                Ok(p) => (p, Vec::new()),
                Err(e) => return Err(format!("trace mode: path numbering: {e}")),
            },
            None => (plan, witnessed),
        };
        let sites = SitePlan::for_edges(l, &witnessed, false);
        Ok(Box::new(WPlan {
            announced: may_be_announced(cx.func),
            paths,
            registers: cx.opts.trace_registers,
            through: cx.opts.trace_write_through,
            floor: cx.opts.trace_floor,
            back_split,
            calls,
            unwind: input.unwind,
            plan,
            sites,
        }))
    }
}

pub(super) struct WPlan {
    /// The function may be entered announced ([`may_be_announced`]).
    pub(super) announced: bool,
    /// `--tally-trace=paths`: path numbers instead of the plan's witnesses.
    pub(super) paths: Option<PathsCode>,
    /// `--tally-trace-registers`: the function may keep its own copy of the accumulator,
    /// saved to the thread's before calls and `ret` only.
    pub(super) registers: bool,
    /// `--tally-trace-write-through` (without `registers`): the function may keep its own copy,
    /// stored to the thread's after every record.
    pub(super) through: bool,
    /// `--tally-trace-floor`: the appends alone (measurement only, not regenerable).
    pub(super) floor: bool,
    /// Unknown `invoke`s whose normal destination is shared: their `Back` goes on a block
    /// split onto the normal edge after the sites are in.
    pub(super) back_split: Vec<Val>,
    pub(super) calls: Vec<Vec<Call>>,
    pub(super) unwind: IdVec<EdgeId, bool>,
    pub(super) plan: Plan,
    pub(super) sites: SitePlan,
}

/// How much less likely [`tally_graph::weight::discount_returns`] makes an early return in
/// the static weights of the witness plans (8 and 32 measured the same on the bench's four
/// programs; 3 changed nothing).
pub(super) const RETURN_DISCOUNT: f64 = 8.0;
