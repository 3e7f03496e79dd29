//! Modes `ipath` and `ipath-piecewise`: interprocedural path profiling (Melski &
//! Reps 1998) of the functions of one translation unit, executing the specification of
//! `tally_graph::ipaths::runtime` (§5.5 context paths, §6.3 piecewise paths).
//!
//! # The set of functions
//!
//! [`Ipath::plan_module`] sees every lowered function of the module. A function is in the set
//! when it has no `callbr` or `musttail` call and every edge that may need code can take it
//! (as path mode requires); functions that may end early (`exit`, `longjmp`, exceptions,
//! setjmp) are in it too (Melski & Reps 1998 §9.2, below). Other functions are profiled with edge
//! counters, exactly, and calls to them are summary edges. A call is *direct*
//! (`Callee::Internal`) when it calls a set function with local linkage (which cannot be
//! interposed), is a `call` (an `invoke`'s exception would land in the caller while its path
//! went on in the callee), is not the `tail` call ending a returning block (the return's code
//! precedes it), and the callee has no landing pad (its `resume` leaves through the caller) and
//! no such tail call of its own (what that call does happens after the callee's return, while
//! its caller would still wait in the direct call); every other call is `Unknown`. A set
//! function is *entered from outside* unless every use of it is the callee of a direct call.
//!
//! # Code
//!
//! Per activation: allocas (promoted by mem2reg) for the register `reg`, `nvc`, `on_entry`, the
//! root flag and the interrupted path's register and `open`. Per thread (`c/ipath.c`):
//! the handshake (`__tally_ipath_hand_fn`, `__tally_ipath_hand_nvc`), the register passed
//! across direct calls (`__tally_ipath_reg`) and `open` (`__tally_ipath_open`). Entry: take the
//! handshake if it names this function, else act as a root. Edges: `reg += a*nvc + b`; back and
//! cut edges count and restart. Direct calls: store `reg`, the handshake (`psi_r(nvc)`) and,
//! piecewise, `open += 1`; after the call reload `reg`, clear the handshake and, piecewise,
//! apply the unmatched-return adjustment. Summary calls clear the handshake. Returns pass `reg`
//! back to the caller, or (functions that may be roots) run `__tally_ipath_ret`'s code inline:
//! a root restores its interrupted path and counts its own with the inline probe. Counts go to one hashed path table per
//! module (path mode's home table and `__tally_path_count`), owned by the set's first function,
//! except an isolated function's (below) when it has at most path mode's `ARRAY_PATHS` paths:
//! they are the range `IpNumbering::own_paths` (its own `Entry_global` edges; no other
//! function counts them), counted as `counters[counter_base + p - first] += 1` like path mode's
//! small functions, its abandoned-frame sites pointing at that counter
//! (`tally_format::IpathArray` in the metadata; the reader merges them with the table).
//!
//! Two cheaper cases, same numbers: a function that is never a root (only called directly)
//! takes every handshake without comparing a name, and its callers store none (only `nvc` and
//! the register); an *isolated* function (no direct call in or out after the numbering's
//! demotions) is always a root that leaves the thread-locals alone, so it has path mode's code:
//! constant entry (`reg = root value + start`), context `nvc = 1` folded, piecewise its own
//! `open` in a local, its returns count inline (no `__tally_ipath_ret`), no handshake cleared at
//! its summary calls and no `open` saved around them; only its entry clears the handshake (a
//! stale one, left by a signal between a direct call's stores and the call, is never taken by
//! a function it calls).
//!
//! # Abandoned frames (§9.2)
//!
//! A set function that may end early keeps path mode's frame record (pushed, popped and told
//! where unwinding or a `longjmp` landed exactly as there, `crate::emit::frame`), with a path site
//! `{table, path}` in its frame: the runtime's stack of pending paths. Before a summary call
//! in a block with an early-exit edge, `path = reg + abandon(nvc)` (the path that ends if the
//! frame is abandoned in that call: `tally_graph::ipaths::runtime`, "Abandoned activations")
//! and the record's site points at it; before a direct call in such a block the site is cleared
//! (the callee carries the path on, and counts it if it is abandoned). The runtime counts the
//! sites of abandoned frames (`exit`, `_exit`, unwinding, a `longjmp` past them) and of a frame
//! a `longjmp` lands in (`c/frames.c`), which then restarts its path at the re-entry (context:
//! `reg = on_entry + start(nvc)`; piecewise: `GEntry` values, `open = 0`). A summary call keeps
//! `reg` in the frame; piecewise, `open` is saved before it and restored after it (and at
//! landing pads), since a root abandoned inside never restored what it saved.

mod code;
mod emit;
mod plan;
mod probe;

use emit::emit;
use plan::{ineligible, plan_module};

use super::path::Fallback;
use super::{Counting, EmitCx, Emitted, FnPlan, ModeImpl, PlanCx};
use crate::counters::place::edge_plan;
use crate::ir::lower::Lowered;
use crate::ir::Val;
use tally_format::{IpathArray, IpathMeta, PathMeta};
use tally_graph::ipaths::FunctionPlan;
use tally_graph::NodeId;

/// Most paths of a module's set (numbers and every value the program computes fit a `u64`).
pub(crate) const LIMIT: u128 = 1 << 62;
/// Context cuts (`tally_graph::ipaths::storage`) are made where a root's range exceeds this.
const CONTEXT_CUT_PATHS: u128 = 1 << 16;
/// Functions of a set per path table ([`IpathPlan::banks`]).
const SET_PER_BANK: usize = 32;
/// Most path tables of a set: 16 home tables of 16 KiB.
const MAX_BANKS: usize = 16;

/// `ipath` (`piecewise: false`) and `ipath-piecewise`.
pub(crate) struct Ipath {
    pub piecewise: bool,
}

impl ModeImpl for Ipath {
    /// Edge counters until [`Ipath::plan_module`] replaces the plans of the set.
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        Ok(Box::new(Fallback {
            counting: Counting(edge_plan(cx.l, cx.weights, cx.opts)),
            reason: ineligible(cx.l)
                .unwrap_or("the interprocedural set could not be numbered")
                .into(),
        }))
    }

    fn plan_module(
        &self,
        funcs: &[(Val, &Lowered)],
        opts: &crate::options::Options,
    ) -> Option<ModulePlan> {
        Some(plan_module(
            funcs,
            self.piecewise,
            opts.ipath_cuts,
            opts.weights.as_deref(),
        ))
    }
}

/// What [`ModeImpl::plan_module`] gives: plans replacing some functions' and the metadata.
pub(crate) struct ModulePlan {
    /// `(index in the module's functions, plan)`.
    pub plans: Vec<(usize, Box<dyn FnPlan>)>,
    /// Why the whole module falls back to edge counters, if it does.
    pub failure: Option<String>,
    /// The numbering's description.
    pub meta: Option<IpathMeta>,
}

/// The plan of one function of the set.
struct IpathPlan {
    plan: FunctionPlan,
    /// Per call site, its instruction.
    sites: Vec<Val>,
    /// Per call site, its node.
    site_nodes: Vec<NodeId>,
    /// Per call site: it is the `tail` call ending a returning block (after the return's
    /// code: the activation has returned when it runs).
    tail_ret: Vec<bool>,
    /// Per call site, the callee when direct, and whether it may be a root (else it takes
    /// every handshake without looking at its name, which is then not stored).
    callees: Vec<Option<(Val, bool)>>,
    /// Module metadata index of the function owning the path table.
    owner: u32,
    piecewise: bool,
    /// The owner's path metadata.
    path_meta: Option<PathMeta>,
    /// No direct call site and no direct caller after the numbering's demotions: always a
    /// root, so its code is path mode's (constant entry, no handshake, no thread-local), with
    /// the same numbers.
    isolated: bool,
    /// An isolated function's paths counted in the counter array (at the function's counter
    /// base) instead of the hash table.
    array: Option<IpathArray>,
    /// The set's path tables (all the owner's, `tally.ipath.probe`): a power of two.
    banks: u32,
}

impl FnPlan for IpathPlan {
    fn num_counters(&self) -> usize {
        self.array.map_or(0, |a| a.len as usize)
    }
    fn num_tables(&self) -> usize {
        if self.path_meta.is_some() {
            self.banks as usize
        } else {
            0
        }
    }
    fn emit(&self, cx: &EmitCx) -> Emitted {
        emit(cx, self);
        Emitted {
            paths: self.path_meta.clone(),
            needs_mem2reg: true,
            ..Emitted::default()
        }
    }
}
