//! `trace` mode: witness tracing (Ball & Larus 1994 §4; `tally_graph::witness`). Each function is
//! lowered to a [`FunctionInput`] (its graph, the call sites of each block in order, its
//! unwind edges), given the cheaper of the witness and branch plans (`cheaper_plan`, checked
//! by `check_plan`), and instrumented to write exactly the records of
//! `tally_graph::witness::stream::records_of` through the runtime (`c/wtrace.c`):
//!
//! - every witnessed edge of width > 0: its value appended inline at the top of the thread's
//!   one-word accumulator ([`put_fn`], [`append`]: `acc = acc >> bits | value << (64 - bits)`,
//!   up to 63 bits above a sentinel 1; `__tally_wtrace_spill` when the word's low `bits` bits
//!   are not all zero, i.e. it has no room) at the edge's site (the sites of
//!   [`crate::plan::Plan::for_edges`], predecessor tags where an edge has none); the check of
//!   room shared by the appends up to the next call or loop head ([`Rec::hoist_checks`]); the
//!   word in a register within the function ([`local_fns`]), stored to the thread's after
//!   every append (written through), or with `--tally-trace-registers=on` only before calls
//!   and `ret`;
//! - the entry, inline ([`inline_fns`]: `tally.wtrace.enter`, the runtime's
//!   `__tally_wtrace_enter(&module, counters, index, self)` on its slow path), which writes `Enter`
//!   unless the caller was a traced `Direct` or `Extern` site, which said so by
//!   `__tally_wtrace_direct(callee, site)` just before the call (a per-thread flag naming the
//!   callee's address, so a stale flag can never silence another function's `Enter`; `site`
//!   numbers the function's calls over its blocks in order, as the metadata lists them).
//!   `self` is the function's own address ([`own_address`]: a private alias where another
//!   image may interpose its name), null for a weak or linkonce definition (another module's
//!   copy may replace it: always announced). A function likely to be entered announced
//!   ([`may_be_announced`]: its address is taken) gets
//!   `tally.wtrace.enter.again`, whose announced entry appends the 3-bit predicted `Enter`
//!   inline when it is the function the stream's `Enter` code predicts (`l_alloc` entered
//!   through Lua's `frealloc` pointer over and over, SQLite's `sqlite3Mem*` methods in turn);
//!   a function called directly in its module gets a second entry for those calls, which
//!   counts the depth and nothing else ([`split_entries`]);
//! - `Extern` sites ([`classify`]): a direct call that the linker resolves (a declaration, a
//!   weak or linkonce definition, an external definition of a shared object's code) announces
//!   the callee's address the same way, and writes `Back` after it as an `Unknown` call does
//!   (the caller cannot know whether the callee is traced). `module` (`struct
//!   tally_wtrace_module`, [`module_tables`]) gives the runtime the addresses of the module's
//!   external callees and of its own functions; the runtime resolves each external callee by
//!   address (exactly: interposition and two definitions of one name resolve as the linker
//!   did) and writes the resolution into the trace, where the reader takes a resolved site for
//!   a call of that traced function (`Callee::DirectBack`: no `Enter`, `Back` after it) and
//!   an unresolved one for an `Unknown` call;
//! - before every `Unknown` call: `__tally_wtrace_call(site)`; with `direct`, this keeps the
//!   flight recorder's shadow stack (`c/wring.c`: where each activation is calling);
//! - after every `Unknown` call that returns: a `Back` record (1 bit), inline the same way;
//!   after an `Extern` call, the same `Back` only when the callee was not traced (trace format
//!   4: every traced function's inline `ret` leaves its `self` in the thread's accumulator, and
//!   `tally.wtrace.back` compares it with the callee's address; see [`inline_fns`])
//!   (for an `invoke` at the start of its normal destination, on a block split onto that edge
//!   when the destination is shared);
//! - the second return of `setjmp`: `__tally_wtrace_reentry(ret, depth, block)`, an `Unwind`
//!   record with the number of traced activations the `longjmp` abandoned (the runtime keeps
//!   each thread's depth: `enter` adds one and returns it, `__tally_wtrace_ret()` before each
//!   `ret` takes one off; functions with `setjmp` or landing pads keep their depth in an
//!   alloca);
//! - first thing in a landing pad: `__tally_wtrace_unwind(depth, block)`, the same `Unwind`
//!   record for an exception (how 1: regeneration enters `block` by the unwind edge of the
//!   block whose call was running). A `resume` is an `Unknown` call site of its own block and
//!   its `Return` edge an unwind edge (no `ret` runs: the next landing counts the activation
//!   among the abandoned, and regeneration reports that `Return` edge then);
//! - the entry of a function that cannot be traced: a "lost" record (kind 2, how 2; inline),
//!   which makes the reader stop with "not exact past this point".
//!
//! Not exact with exceptions (not detected): an exception caught by code that is not traced
//! (an uninstrumented library, or a function trace mode could not instrument, which writes
//! "lost" only at its entry) after it unwound traced activations: no landing pad of a traced
//! function runs, so no `Unwind` says they were abandoned, and the runtime's depth stays too
//! high until the next traced landing; regeneration then goes wrong or stops with an error.
//! Exceptions that unwind only untraced frames, or that a traced landing pad catches, are
//! exact, as are `catch (...)`, rethrows and cleanups; `std::terminate` ends the stream.
//!
//! Limits of the resolution of `Extern` sites: it is written when the trace is (the end of
//! the process, a fatal signal, the flight recorder's dumps): a trace without it (a process
//! killed by SIGKILL, a file copied while the program ran) is refused by the reader. Two
//! functions the linker folded to one address (identical code folding) resolve to the first
//! module's. A module unloaded by `dlclose` keeps its tables (copied when it got its slot); one
//! loaded later at the same addresses may then resolve to the old one. Calls of weak or
//! linkonce definitions (C++ inline functions, templates) keep paying `Enter`.
//!
//! The metadata keeps the call sites (callees by name) and the plan ([`WtraceMeta`]), so the
//! reader regenerates with exactly the plan the code was built with.

use super::{EmitCx, Emitted, FnPlan, ModeImpl, PlanCx};
use crate::apply::SiteAction;
use crate::emit::{cname, Emitter};
use crate::ends::SETJMP_NAMES;
use crate::ir::{self, Bb, Val};
use crate::lower::{EdgeIr, Lowered};
use crate::options::TracePlan;
use crate::plan::{Plan as SitePlan, TagTarget};
use crate::sites::{direct_site, Realize};
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMLinkage, LLVMOpcode};
use std::collections::HashMap;
use tally_format::{abi, Probe, WCallee, WtraceMeta};
use tally_graph::paths::Action;
use tally_graph::witness::{self, CallSite, Callee, FuncId, FunctionInput, Plan, PlanKind};
use tally_graph::{EdgeId, IdVec, NodeId};

/// Declared-only functions known to write nothing and never call back into the program: the
/// leaves of libc a program calls most. Conservative: anything not listed is `Unknown` (one
/// `Back` record per call). The allocator is not listed (a program may define its own).
const OPAQUE_LIBC: &[&str] = &[
    "strlen",
    "strnlen",
    "strcmp",
    "strncmp",
    "strcpy",
    "strncpy",
    "strcat",
    "strncat",
    "strchr",
    "strrchr",
    "strstr",
    "strspn",
    "strcspn",
    "memcpy",
    "memmove",
    "memset",
    "memcmp",
    "memchr",
    "printf",
    "fprintf",
    "sprintf",
    "snprintf",
    "puts",
    "putchar",
    "fputs",
    "fputc",
    "putc",
    "fwrite",
    "fflush",
    "abs",
    "labs",
    "llabs",
    "sqrt",
    "sin",
    "cos",
    "exp",
    "log",
    "pow",
    "floor",
    "ceil",
    "fabs",
    "atoi",
    "atol",
    "strtol",
    "strtoul",
    "strtod",
    "toupper",
    "tolower",
    "__ctype_b_loc",
    "__errno_location",
];

pub(crate) struct WTrace;

/// One call instruction of a block and how the plan sees it.
struct Call {
    instr: Val,
    callee: WCallee,
}

/// How a call site's callee is seen: `Direct` for a definition of this module the linker
/// cannot replace (internal, private, or external where it cannot be interposed), `Extern`
/// (index filled in at emission, [`extern_index`]) for a direct call the linker resolves (a
/// declaration, a weak or linkonce definition, an external definition of a shared object's
/// code, which another image may interpose), `Opaque` or `Unknown`.
fn classify(v: Val) -> WCallee {
    if v.calls_inline_asm() {
        return WCallee::Opaque;
    }
    let Some(f) = v.called_function() else {
        return WCallee::Unknown;
    };
    let name = f.name();
    if f.intrinsic_id() != 0 || SETJMP_NAMES.contains(&name.as_str()) {
        // setjmp's first return is normal; its second is a landing (`__tally_wtrace_reentry`).
        return WCallee::Opaque;
    }
    if name.starts_with("__tally_") {
        return WCallee::Unknown; // (the runtime's wrappers: never traced)
    }
    if !f.is_declaration() {
        use LLVMLinkage::*;
        return match f.linkage() {
            LLVMInternalLinkage | LLVMPrivateLinkage => WCallee::Direct(name),
            LLVMExternalLinkage if !interposable(f) => WCallee::Direct(name),
            _ => WCallee::Extern {
                name,
                index: u32::MAX,
            },
        };
    }
    if OPAQUE_LIBC.contains(&name.as_str()) {
        WCallee::Opaque
    } else {
        WCallee::Extern {
            name,
            index: u32::MAX,
        }
    }
}

/// Whether another image may interpose external definition `f`: the module is position-
/// independent code that is not an executable's (a "PIC Level" flag, no "PIE Level") and `f`
/// has default visibility.
fn interposable(f: Val) -> bool {
    unsafe {
        let m = c::LLVMGetGlobalParent(f.0);
        let flag =
            |name: &str| !c::LLVMGetModuleFlag(m, name.as_ptr().cast(), name.len()).is_null();
        flag("PIC Level")
            && !flag("PIE Level")
            && c::LLVMGetVisibility(f.0) == llvm_sys::LLVMVisibility::LLVMDefaultVisibility
    }
}

/// Names of the module's trace tables ([`module_tables`]).
const MODULE_DESC: &str = "__tally_wtrace_module";
const EXTERNS: &str = "__tally_wtrace_externs";

/// The address `enter` gets as `self` and the module's function table lists: the function's
/// own address (through a private alias where another image may interpose its name), `None`
/// for a weak or linkonce definition, which the linker may replace by another module's copy
/// (its entries are always announced: `self` null).
unsafe fn own_address(f: Val) -> Option<LLVMValueRef> {
    use LLVMLinkage::*;
    match f.linkage() {
        LLVMExternalLinkage if interposable(f) => {
            let name = cname(&format!("{}.tally.self", f.name()));
            let m = c::LLVMGetGlobalParent(f.0);
            let mut a = c::LLVMGetNamedGlobalAlias(m, name.as_ptr(), name.as_bytes().len());
            if a.is_null() {
                a = c::LLVMAddAlias2(m, c::LLVMGlobalGetValueType(f.0), 0, f.0, name.as_ptr());
                c::LLVMSetLinkage(a, LLVMPrivateLinkage);
            }
            Some(a)
        }
        LLVMExternalLinkage | LLVMInternalLinkage | LLVMPrivateLinkage => Some(f.0),
        _ => None,
    }
}

/// Whether `f` is likely to be entered announced: its address is used other than as the callee
/// of a call in its module (so it may be called through a pointer, or back from untraced
/// code). Such a function's entry writes its predicted `Enter` itself
/// (`tally.wtrace.enter.again`: the thread's `again`, then the prediction table); any other
/// keeps the shorter entry, also one visible outside the module (called from
/// untraced code it pays the runtime's `Enter`): the longer entry changes the register
/// allocation of large functions that are nearly always entered silently (zlib's
/// `inflate_fast`: +0.5 M instructions when every external function had it). Only a cost
/// choice: either entry is exact. Must run before any function is instrumented (direct call
/// sites then use callees' addresses as operands).
fn may_be_announced(f: Val) -> bool {
    let mut u = unsafe { c::LLVMGetFirstUse(f.0) };
    while !u.is_null() {
        // (A call's callee is its last operand; `f` anywhere else is its address.)
        let user = Val(unsafe { c::LLVMGetUser(u) });
        let n = user.num_operands();
        if !user.is_call_like() || n == 0 || (0..n - 1).any(|i| user.operand(i) == f) {
            return true;
        }
        u = unsafe { c::LLVMGetNextUse(u) };
    }
    false
}

/// Builds the module's trace tables before any function is emitted: its external callees
/// (every `Extern` callee of every function, in order: `EXTERNS`), its functions' own
/// addresses for those other modules may call by name (index = metadata index), and the
/// descriptor `struct tally_wtrace_module` that `enter` gets (`MODULE_DESC`; the runtime
/// assigns its slot and copies the tables, `c/wtrace.c`).
unsafe fn module_tables(funcs: &[(Val, &Lowered)]) {
    let Some(&(first, _)) = funcs.first() else {
        return;
    };
    let m = c::LLVMGetGlobalParent(first.0);
    let ctx = c::LLVMGetModuleContext(m);
    let (i32t, ptrt) = (
        c::LLVMInt32TypeInContext(ctx),
        c::LLVMPointerTypeInContext(ctx, 0),
    );
    let mut externs: Vec<LLVMValueRef> = Vec::new();
    for (_, l) in funcs {
        for call in calls_of(l).iter().flatten() {
            if let (WCallee::Extern { .. }, Some(f)) = (&call.callee, call.instr.called_function())
            {
                if !externs.contains(&f.0) {
                    externs.push(f.0);
                }
            }
        }
    }
    let mut own: Vec<LLVMValueRef> = funcs
        .iter()
        .map(|(f, _)| match f.linkage() {
            LLVMLinkage::LLVMExternalLinkage => own_address(*f),
            _ => None,
        })
        .map(|a| a.unwrap_or_else(|| c::LLVMConstNull(ptrt)))
        .collect();
    let table = |name: &str, vals: &mut Vec<LLVMValueRef>| {
        let arr = c::LLVMConstArray2(ptrt, vals.as_mut_ptr(), vals.len() as u64);
        let n = cname(name);
        let g = c::LLVMAddGlobal(m, c::LLVMTypeOf(arr), n.as_ptr());
        c::LLVMSetLinkage(g, LLVMLinkage::LLVMPrivateLinkage);
        c::LLVMSetInitializer(g, arr);
        c::LLVMSetGlobalConstant(g, 1);
        g
    };
    let externs_g = table(EXTERNS, &mut externs);
    let funcs_g = table("__tally_wtrace_funcs", &mut own);
    let mut fields = [
        c::LLVMConstInt(i32t, 0, 0),
        c::LLVMConstInt(i32t, funcs.len() as u64, 0),
        c::LLVMConstInt(i32t, externs.len() as u64, 0),
        c::LLVMConstInt(i32t, 0, 0),
        funcs_g,
        externs_g,
    ];
    let init = c::LLVMConstStructInContext(ctx, fields.as_mut_ptr(), fields.len() as u32, 0);
    let n = cname(MODULE_DESC);
    let d = c::LLVMAddGlobal(m, c::LLVMTypeOf(init), n.as_ptr());
    c::LLVMSetLinkage(d, LLVMLinkage::LLVMInternalLinkage);
    c::LLVMSetInitializer(d, init);
}

/// Index of `callee` in the module's table of external callees ([`module_tables`]).
fn extern_index(m: LLVMModuleRef, callee: Val) -> Option<u32> {
    unsafe {
        let n = cname(EXTERNS);
        let g = c::LLVMGetNamedGlobal(m, n.as_ptr());
        if g.is_null() {
            return None;
        }
        let init = c::LLVMGetInitializer(g);
        let len = c::LLVMGetArrayLength2(c::LLVMTypeOf(init));
        (0..len as u32).find(|&i| c::LLVMGetAggregateElement(init, i) == callee.0)
    }
}

/// The calls of each block in order; a `resume` ends its block with an `Unknown` site of its
/// own (it continues an unwinding: regeneration waits there for the `Unwind` of the next
/// landing, like at a call that does not return, and the plan blocks it like a call).
/// The caller writes `Back` after the call returns normally.
fn writes_back(c: &WCallee) -> bool {
    matches!(c, WCallee::Unknown | WCallee::Extern { .. })
}

fn calls_of(l: &Lowered) -> Vec<Vec<Call>> {
    l.nodes
        .iter()
        .map(|n| {
            n.instrs
                .iter()
                .filter(|v| v.is_call_like() || is_resume(**v))
                .map(|&instr| Call {
                    instr,
                    callee: if is_resume(instr) {
                        WCallee::Unknown
                    } else {
                        classify(instr)
                    },
                })
                .collect()
        })
        .collect()
}

fn is_resume(v: Val) -> bool {
    v.opcode() == LLVMOpcode::LLVMResume
}

fn input_of(l: &Lowered, calls: &[Vec<Call>]) -> FunctionInput {
    let mut per_node: Vec<Vec<CallSite>> = calls
        .iter()
        .map(|cs| {
            cs.iter()
                .map(|call| CallSite {
                    callee: match call.callee {
                        // The plan only asks whether a site is a call vertex.
                        WCallee::Direct(_) => Callee::Direct(FuncId(0)),
                        WCallee::Opaque => Callee::Opaque,
                        WCallee::Unknown | WCallee::Extern { .. } => Callee::Unknown,
                    },
                })
                .collect()
        })
        .collect();
    per_node.push(Vec::new()); // EXIT
                               // The unwind edges: an `invoke`'s unwind destination, and the `Return` edge of a
                               // `resume` (taken when the next landing abandons the activation).
    let unwind = l
        .cfg
        .edges()
        .zip(&l.edges)
        .map(|((_, edge), e)| match *e {
            EdgeIr::Succ { term, index, .. } => {
                term.opcode() == LLVMOpcode::LLVMInvoke && index == 1
            }
            EdgeIr::Return => l.nodes[edge.src.index()]
                .instrs
                .last()
                .is_some_and(|t| is_resume(*t)),
            _ => false,
        })
        .collect();
    FunctionInput {
        cfg: l.cfg.clone(),
        calls: IdVec::from_vec(per_node),
        unwind: IdVec::from_vec(unwind),
    }
}

impl ModeImpl for WTrace {
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        // A function that cannot be traced is still instrumented, to say so where it runs:
        // its callers' plans treat it as any other call.
        Ok(self
            .plan_traced(cx)
            .unwrap_or_else(|why| Box::new(Untraced(why))))
    }

    fn plan_module(
        &self,
        funcs: &[(Val, &Lowered)],
        _opts: &crate::options::Options,
    ) -> Option<super::ModulePlan> {
        unsafe { module_tables(funcs) };
        None
    }

    fn after_emit(&self, g: &crate::emit::Globals) {
        unsafe { split_entries(g) };
    }
}

impl WTrace {
    fn plan_traced(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
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

/// A function traced by path numbers (`--tally-trace=paths`, `tally_graph::witness::paths`):
/// path mode's register code, with `count[r]++` replaced by appending `r` in `bits` bits.
struct PathsCode {
    /// The actions of each control-flow edge (path mode's placement).
    actions: IdVec<EdgeId, Vec<Action>>,
    /// Call vertices whose paths are known where they start (`NumPaths = 1`): `count[r]` at
    /// the end of the block, after its calls (their START edges set `r`).
    head_counts: Vec<NodeId>,
    /// The width of a path number.
    bits: u8,
    /// The numbering's fingerprint (for the metadata).
    numbering: u64,
}

/// The path-number plan of one function, or why it has none: path mode's placement (Ball &
/// Larus 1996 §3.4) of the numbering `witness::paths::paths_plan` recomputes in the reader, with
/// one change. A path whose number is known where it starts (its `START` edge carries `Count`:
/// the path from there is unique) would write its record before the calls of its first block,
/// which the reader meets first; when that block is a call vertex, the count becomes `r = v`
/// and the record is written by `count[r]` at the end of the block, after its calls (nothing
/// when the block has no normal successor: the path can only end early, in a call).
fn paths_code(
    l: &Lowered,
    input: &FunctionInput,
    weights: &IdVec<EdgeId, f64>,
) -> Result<PathsCode, String> {
    use tally_graph::paths::{chord_increments, dag_weights, CfgImage, PathPlacement};
    let numbered = witness::paths::paths_plan(input).map_err(|e| e.to_string())?;
    let dag = numbered.dag();
    let w = crate::sites::base_weights(l, Some(weights));
    let dw = dag_weights(dag, &w).map_err(|e| e.to_string())?;
    let incs = chord_increments(&numbered, &dw).map_err(|e| e.to_string())?;
    let placement = PathPlacement::new(&numbered, &incs).map_err(|e| e.to_string())?;
    let mut actions = placement.actions.clone();
    let mut head_counts: Vec<NodeId> = Vec::new();
    for (e, _) in l.cfg.edges() {
        let (d, init) = match dag.image(e) {
            CfgImage::Start(d) => (d, Action::Init as fn(i128) -> Action),
            CfgImage::Back { start, .. } | CfgImage::Cut { start, .. } => {
                (start, Action::Reinit as fn(i128) -> Action)
            }
            _ => continue,
        };
        let Some(Action::Count(v)) = placement.code[d] else {
            continue;
        };
        let head = dag.edge(d).dst;
        if !input.is_call_vertex(head) {
            continue; // (nothing is written between the start and the rest of the path)
        }
        // (The START part is the last action of the edge's list.)
        match actions[e].last_mut() {
            Some(last) if *last == Action::Count(v) => *last = init(v),
            _ => {
                return Err(format!(
                    "path start {e}: count not last in {:?}",
                    actions[e]
                ))
            }
        }
        // A call vertex is entered only by path starts (its other in-edges are cut), so the
        // count at its end, after its calls, counts exactly the paths starting there.
        if input.normal_succs(head).next().is_some() && !head_counts.contains(&head) {
            head_counts.push(head);
        }
    }
    for (e, acts) in actions.iter() {
        if acts.is_empty() {
            continue;
        }
        match l.edges[e.index()] {
            EdgeIr::Reentry | EdgeIr::Fallthrough => {
                return Err(format!("path code on edge {e} (a setjmp's)"))
            }
            EdgeIr::Succ { .. } if direct_site(l, e).is_none() => {
                return Err(format!("path code on edge {e}, which has no place for it"))
            }
            _ => {}
        }
        for a in acts {
            let (Action::Init(v)
            | Action::Add(v)
            | Action::CountAt(v)
            | Action::Count(v)
            | Action::Reinit(v)) = *a;
            if i64::try_from(v).is_err() {
                return Err(format!("path increment {v} does not fit 64 bits"));
            }
        }
    }
    Ok(PathsCode {
        actions,
        head_counts,
        bits: witness::paths::path_bits(numbered.total()),
        numbering: numbered.fingerprint(),
    })
}

impl PathsCode {
    /// Emits the path register's code and the path records (after the entry, before the
    /// direct flags and `ret`s are placed).
    fn emit(&self, em: &Emitter, l: &Lowered, rec: &Rec) {
        let b = em.b;
        let empty = cname("");
        let g = em.g;
        let r = unsafe {
            em.at(l.nodes[0].start);
            let n = cname("tally.path");
            c::LLVMBuildAlloca(b, g.i64t, n.as_ptr())
        };
        let i64c = |v: i128| unsafe { c::LLVMConstInt(g.i64t, v as i64 as u64, 1) };
        let r_plus = |d: i128| unsafe {
            let cur = c::LLVMBuildLoad2(b, g.i64t, r, empty.as_ptr());
            if d == 0 {
                cur
            } else {
                c::LLVMBuildAdd(b, cur, i64c(d), empty.as_ptr())
            }
        };
        let bits = u64::from(self.bits);
        let run = |acts: &[Action], near: Val| {
            for a in acts {
                match *a {
                    Action::Init(v) | Action::Reinit(v) => unsafe {
                        c::LLVMBuildStore(b, i64c(v), r);
                    },
                    Action::Add(d) => unsafe {
                        c::LLVMBuildStore(b, r_plus(d), r);
                    },
                    Action::CountAt(d) if bits > 0 => {
                        rec.put(em, r_plus(d), em.i64c(bits), near);
                    }
                    Action::Count(v) if bits > 0 => rec.put_const(em, (v as u64, bits), near),
                    Action::CountAt(_) | Action::Count(_) => {}
                }
            }
        };
        // Actions at block starts first (as in path mode: in a block whose only instruction
        // is its terminator, the edge into it must run before the edge out of it).
        let at_start = |e: EdgeId| matches!(direct_site(l, e), Some(Realize::NodeStart(_)));
        let in_order = self
            .actions
            .iter()
            .filter(|&(e, _)| at_start(e))
            .chain(self.actions.iter().filter(|&(e, _)| !at_start(e)));
        for (e, acts) in in_order {
            if acts.is_empty() {
                continue;
            }
            let at = match l.edges[e.index()] {
                // A frame abandoned inside a call loses its path's record (the reader stops
                // at the call's `End` or `Unwind`); no re-entries (no setjmp).
                EdgeIr::EarlyExit | EdgeIr::Reentry => continue,
                EdgeIr::Entry => l.nodes[0].start,
                // Right before the `ret`, after any `tail` call (whose records come first).
                EdgeIr::Return => {
                    let src = l.cfg.edge(e).src;
                    *l.nodes[src.index()]
                        .instrs
                        .last()
                        .expect("a returning vertex has its terminator")
                }
                EdgeIr::Fallthrough | EdgeIr::Succ { .. } => {
                    match direct_site(l, e).expect("checked by plan_numbered") {
                        Realize::NodeEnd(n) => l.nodes[n.index()].end,
                        Realize::NodeStart(n) => l.nodes[n.index()].start,
                        Realize::Split(_) => {
                            let EdgeIr::Succ { term, index, .. } = l.edges[e.index()] else {
                                unreachable!("only terminator edges are split")
                            };
                            crate::surgery::split_edge(em, term, index)
                                .terminator()
                                .expect("split block has its branch")
                        }
                        other => unreachable!("edge {e} realized as {other:?}"),
                    }
                }
            };
            em.at(at);
            run(acts, at);
        }
        for &h in &self.head_counts {
            let term = *l.nodes[h.index()]
                .instrs
                .last()
                .expect("a block has its terminator");
            em.at(term);
            run(&[Action::CountAt(0)], term);
        }
    }
}

struct WPlan {
    /// The function may be entered announced ([`may_be_announced`]).
    announced: bool,
    /// `--tally-trace=paths`: path numbers instead of the plan's witnesses.
    paths: Option<PathsCode>,
    /// `--tally-trace-registers`: the function may keep its own copy of the accumulator,
    /// saved to the thread's before calls and `ret` only.
    registers: bool,
    /// `--tally-trace-write-through` (without `registers`): the function may keep its own copy,
    /// stored to the thread's after every record.
    through: bool,
    /// `--tally-trace-floor`: the appends alone (measurement only, not regenerable).
    floor: bool,
    /// Unknown `invoke`s whose normal destination is shared: their `Back` goes on a block
    /// split onto the normal edge after the sites are in.
    back_split: Vec<Val>,
    calls: Vec<Vec<Call>>,
    unwind: IdVec<EdgeId, bool>,
    plan: Plan,
    sites: SitePlan,
}

/// `Back` (the prefix code's `1`) and "lost" (`0`, kind 1, how 2: 5 bits), as the runtime's
/// reader (`tally_report::wtrace`) decodes them: `(value, bits)`.
const BACK: (u64, u64) = (1, 1);
const LOST: (u64, u64) = (2 | 2 << 3, 5);
/// The predicted `Enter` (`0`, kind 3: `tally_graph::witness::bits::EnterCode::Predicted`).
const ENTER_PREDICTED: (u64, u64) = (6, 3);

/// The runtime entry points of trace mode.
struct Runtime {
    enter: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.put(ptr acc, i64 value, i64 bits)`, always inlined ([`put_fn`]).
    put: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.put.fast.tls(ptr acc, i64 value, i64 bits)`,
    /// `tally.wtrace.room.tls(ptr acc, i64 k)`: the same as [`Local::put_fast`] and
    /// [`Local::room`] on the thread's word ([`tls_fns`]).
    put_fast_tls: (LLVMValueRef, LLVMTypeRef),
    room_tls: (LLVMValueRef, LLVMTypeRef),
    /// The same on a function's own copy of the accumulator's word, and its helpers
    /// ([`local_fns`]).
    local: Local,
    /// `tally.wtrace.enter` ([`inline_fns`]): the inline entry (its `self` must not be null).
    enter_inline: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.enter.again`: the same, which also appends a predicted `Enter` inline.
    enter_again: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.enter.floor` (`--tally-trace-floor`): the stream made, nothing recorded.
    enter_floor: (LLVMValueRef, LLVMTypeRef),
    direct: (LLVMValueRef, LLVMTypeRef),
    call: (LLVMValueRef, LLVMTypeRef),
    ret: (LLVMValueRef, LLVMTypeRef),
    back: (LLVMValueRef, LLVMTypeRef),
    reentry: (LLVMValueRef, LLVMTypeRef),
    unwind: (LLVMValueRef, LLVMTypeRef),
    /// The module's slot in the trace (`__tally_wtrace_slot`, 0 until the runtime assigns it).
    slot: LLVMValueRef,
}

impl Runtime {
    fn declare(g: &crate::emit::Globals) -> Runtime {
        let m = g.module;
        let f = |name: &str, args: &mut [LLVMTypeRef]| {
            crate::module::declare_void_fn(m, g.voidt, name, args)
        };
        let slot = unsafe {
            let n = cname(MODULE_DESC);
            let s = c::LLVMGetNamedGlobal(m, n.as_ptr());
            assert!(!s.is_null(), "trace mode: module tables not built");
            s
        };
        let enter = unsafe {
            let n = cname("__tally_wtrace_enter");
            let mut args = [g.ptrt, g.ptrt, g.i32t, g.ptrt];
            let ty = c::LLVMFunctionType(g.i32t, args.as_mut_ptr(), 4, 0);
            let mut func = c::LLVMGetNamedFunction(m, n.as_ptr());
            if func.is_null() {
                func = c::LLVMAddFunction(m, n.as_ptr(), ty);
            }
            (func, ty)
        };
        let slow = InlineSlow {
            enter,
            direct: f("__tally_wtrace_direct", &mut [g.ptrt, g.i32t]),
            call: f("__tally_wtrace_call", &mut [g.i32t]),
        };
        let put = unsafe { put_fn(g) };
        let inline = unsafe { inline_fns(g, &slow, put) };
        let (put_fast_tls, room_tls) = unsafe { tls_fns(g) };
        Runtime {
            enter,
            enter_inline: inline.enter,
            enter_again: inline.enter_again,
            enter_floor: inline.enter_floor,
            ret: inline.ret,
            back: inline.back,
            put,
            local: unsafe { local_fns(g) },
            put_fast_tls,
            room_tls,
            direct: inline.direct,
            call: inline.call,
            reentry: f("__tally_wtrace_reentry", &mut [g.i32t, g.i32t, g.i32t]),
            unwind: f("__tally_wtrace_unwind", &mut [g.i32t, g.i32t]),
            slot,
        }
    }
}

/// The runtime's slow paths of the inline entry, direct flag and call site.
struct InlineSlow {
    enter: (LLVMValueRef, LLVMTypeRef),
    direct: (LLVMValueRef, LLVMTypeRef),
    call: (LLVMValueRef, LLVMTypeRef),
}

/// The inline entry, return, direct flag and call site ([`inline_fns`]).
struct Inline {
    enter: (LLVMValueRef, LLVMTypeRef),
    enter_again: (LLVMValueRef, LLVMTypeRef),
    enter_floor: (LLVMValueRef, LLVMTypeRef),
    ret: (LLVMValueRef, LLVMTypeRef),
    back: (LLVMValueRef, LLVMTypeRef),
    direct: (LLVMValueRef, LLVMTypeRef),
    call: (LLVMValueRef, LLVMTypeRef),
}

/// Defines (once per module, always inlined) the fast paths of the thread's direct flag and
/// depth, kept in its `struct tally_wtrace_acc` (the entries load the TLS pointer, the others
/// take it as `acc`: [`Rec::acc_here`]):
///
/// - `ptr tally.wtrace.enter(ptr module, ptr counters, i32 index, ptr self)` (`self` not
///   null): when the direct flag equals `self` and the module has its slot, the entry is
///   silent: the flag is cleared and the depth incremented; else `__tally_wtrace_enter` (it
///   writes `Enter`, gives the module its slot, makes the thread's stream, keeps the flight
///   recorder's shadow stack; the flag never equals `self` while `slow` is set: the runtime
///   keeps a flight recorder's flag elsewhere). Returns the thread's accumulator pointer (read
///   again after the runtime's call, which points it at the thread's own at its first entry),
///   so that the function loads it once ([`Rec::acc`]; the new depth is its `depth`);
/// - `ptr tally.wtrace.enter.again(...)`, the same arguments, for a function likely to be
///   entered announced ([`may_be_announced`]): an announced entry whose key (`slot << 32 |
///   index`) is the one the stream's `Enter` code predicts (`e_next[e_prev * MUL >> SHIFT]`
///   in the thread's accumulator: trace format 7, where a predicted `Enter` changes only
///   `e_prev`) appends the predicted `Enter` ([`ENTER_PREDICTED`], `tally.wtrace.put`), sets
///   `e_prev` and adds one to the depth, without a call (the table holds no key while `slow`
///   is set); first the shortest case, `self` equal to the thread's `again` (the function is
///   `e_prev` and predicts itself: nothing to change), else the table, which then clears
///   `again`;
/// - `void tally.wtrace.ret(ptr acc, ptr self)`: the depth minus one (never the shared no-stream
///   accumulator: the thread's first entry took the slow path, which points it at its own),
///   and `self`, when not null, stored as the function that returned last;
/// - `i64 tally.wtrace.back(ptr acc, ptr callee)`: 1 unless the function that returned last is
///   `callee`: after an `Extern` call, the width of its `Back` (0: a traced function at that
///   address ran, and the reader, which resolves the site to it, expects no `Back`);
/// - `void tally.wtrace.direct(ptr acc, ptr callee, i32 site)`: the flag set to `callee`, or with
///   `slow` set `__tally_wtrace_direct` (the flight recorder's call site);
/// - `void tally.wtrace.call(ptr acc, i32 site)`: nothing, or with `slow` set `__tally_wtrace_call`.
unsafe fn inline_fns(
    g: &crate::emit::Globals,
    slow: &InlineSlow,
    put: (LLVMValueRef, LLVMTypeRef),
) -> Inline {
    let (ctx, i32t, ptrt) = (g.ctx, g.i32t, g.ptrt);
    let e = cname("");
    let b = c::LLVMCreateBuilderInContext(ctx);
    let fn_ty = |ret: LLVMTypeRef, args: &mut [LLVMTypeRef]| {
        c::LLVMFunctionType(ret, args.as_mut_ptr(), args.len() as u32, 0)
    };
    let block = |f, name: &str| c::LLVMAppendBasicBlockInContext(ctx, f, cname(name).as_ptr());
    let cold_branch = |b, cond, yes, no, weights: &[u32]| {
        let br = c::LLVMBuildCondBr(b, cond, yes, no);
        ir::set_branch_weights(ctx, br, weights);
    };
    // The thread's depth of traced activations (in accumulator `a`) plus `by` (1 or -1).
    let add_depth = |b, a, by: i64| {
        let depth_p = field_of(g, b, a, "depth");
        let d = c::LLVMBuildLoad2(b, i32t, depth_p, e.as_ptr());
        let d = c::LLVMBuildAdd(b, d, c::LLVMConstInt(i32t, by as u64, 1), e.as_ptr());
        c::LLVMBuildStore(b, d, depth_p);
    };
    // The call of the runtime's `rt` with `f`'s parameters from the `from`th.
    let forward = |b, f, rt: (LLVMValueRef, LLVMTypeRef), from: u32| {
        let mut args: Vec<LLVMValueRef> = (from..c::LLVMCountParams(f))
            .map(|i| c::LLVMGetParam(f, i))
            .collect();
        let n = args.len() as u32;
        c::LLVMBuildCall2(b, rt.1, rt.0, args.as_mut_ptr(), n, e.as_ptr())
    };
    // The `slow` field is nonzero: branch to a new block calling the runtime, else to `fast`.
    let if_slow = |b, f, a, fast| {
        let slow_p = field_of(g, b, a, "slow");
        let s = c::LLVMBuildLoad2(b, i32t, slow_p, e.as_ptr());
        let z = c::LLVMConstInt(i32t, 0, 0);
        let is_slow = c::LLVMBuildICmp(b, llvm_sys::LLVMIntPredicate::LLVMIntNE, s, z, e.as_ptr());
        let rt = block(f, "slow");
        cold_branch(b, is_slow, rt, fast, &[1, 1 << 10]);
        rt
    };

    let enter_ty = fn_ty(ptrt, &mut [ptrt, ptrt, i32t, ptrt]);
    // The `.wrap` entries are those of a public entry whose body is a function of its own
    // ([`split_entries`]): the same, without the depth, which the body's entry
    // (`tally.wtrace.enter.body`) counts (after the runtime's entry, one off again).
    for (name, again, wrap) in [
        ("tally.wtrace.enter", false, false),
        ("tally.wtrace.enter.again", true, false),
        ("tally.wtrace.enter.wrap", false, true),
        ("tally.wtrace.enter.again.wrap", true, true),
    ] {
        let (enter, entry) = crate::emit::inline_helper(g, name, enter_ty);
        let Some(entry) = entry else { continue };
        c::LLVMPositionBuilderAtEnd(b, entry);
        let p = |i| c::LLVMGetParam(enter, i);
        let a = acc_ptr(g, b);
        let flag_p = field_of(g, b, a, "direct");
        let flag = c::LLVMBuildLoad2(b, ptrt, flag_p, e.as_ptr());
        let mine = c::LLVMBuildICmp(
            b,
            llvm_sys::LLVMIntPredicate::LLVMIntEQ,
            flag,
            p(3),
            e.as_ptr(),
        );
        let check_slot = block(enter, "slot");
        let silent = block(enter, "silent");
        let rt = block(enter, "announced");
        c::LLVMBuildCondBr(b, mine, check_slot, rt);
        c::LLVMPositionBuilderAtEnd(b, check_slot);
        let slot = c::LLVMBuildLoad2(b, i32t, p(0), e.as_ptr()); // (the module's first field)
        let z = c::LLVMConstInt(i32t, 0, 0);
        let has = c::LLVMBuildICmp(
            b,
            llvm_sys::LLVMIntPredicate::LLVMIntNE,
            slot,
            z,
            e.as_ptr(),
        );
        cold_branch(b, has, silent, rt, &[1 << 10, 1]);
        c::LLVMPositionBuilderAtEnd(b, silent);
        c::LLVMBuildStore(b, c::LLVMConstNull(ptrt), flag_p);
        let deeper = |b| {
            if !wrap {
                add_depth(b, a, 1);
            }
            c::LLVMBuildRet(b, a);
        };
        deeper(b);
        c::LLVMPositionBuilderAtEnd(b, rt);
        if again {
            // The key `slot << 32 | index`, and the one the stream predicts after the previous
            // Enter's (`e_next[e_prev * MUL >> SHIFT]`); a slot of 0 (none yet) never matches.
            let (i64t, eq, ne) = (
                g.i64t,
                llvm_sys::LLVMIntPredicate::LLVMIntEQ,
                llvm_sys::LLVMIntPredicate::LLVMIntNE,
            );
            let k = |v| c::LLVMConstInt(i64t, v, 0);
            let put_predicted = |b| {
                let mut args = [a, k(ENTER_PREDICTED.0), k(ENTER_PREDICTED.1)];
                c::LLVMBuildCall2(b, put.1, put.0, args.as_mut_ptr(), 3, e.as_ptr());
            };
            // First the shortest case, the function that is `e_prev` and predicts itself
            // (`again`): nothing to change.
            let itself = block(enter, "again");
            let other = block(enter, "other");
            let again_p = field_of(g, b, a, "again");
            let last = c::LLVMBuildLoad2(b, ptrt, again_p, e.as_ptr());
            let same = c::LLVMBuildICmp(b, eq, last, p(3), e.as_ptr());
            c::LLVMBuildCondBr(b, same, itself, other);
            c::LLVMPositionBuilderAtEnd(b, itself);
            put_predicted(b);
            deeper(b);
            c::LLVMPositionBuilderAtEnd(b, other);
            let predicted = block(enter, "predicted");
            let call = block(enter, "call");
            let slot = c::LLVMBuildLoad2(b, i32t, p(0), e.as_ptr());
            let hi = c::LLVMBuildZExt(b, slot, i64t, e.as_ptr());
            let hi = c::LLVMBuildShl(b, hi, k(32), e.as_ptr());
            let lo = c::LLVMBuildZExt(b, p(2), i64t, e.as_ptr());
            let key = c::LLVMBuildOr(b, hi, lo, e.as_ptr());
            let prev_p = field_of(g, b, a, "e_prev");
            let prev = c::LLVMBuildLoad2(b, i64t, prev_p, e.as_ptr());
            let h = c::LLVMBuildMul(b, prev, k(abi::WTRACE_ENTER_MUL), e.as_ptr());
            let h = c::LLVMBuildLShr(b, h, k(u64::from(abi::WTRACE_ENTER_SHIFT)), e.as_ptr());
            let table = c::LLVMBuildLoad2(b, ptrt, field_of(g, b, a, "e_next"), e.as_ptr());
            let mut idx = [h];
            let at = c::LLVMBuildInBoundsGEP2(b, i64t, table, idx.as_mut_ptr(), 1, e.as_ptr());
            let pred = c::LLVMBuildLoad2(b, i64t, at, e.as_ptr());
            let same = c::LLVMBuildICmp(b, eq, pred, key, e.as_ptr());
            let z = c::LLVMConstInt(i32t, 0, 0);
            let has = c::LLVMBuildICmp(b, ne, slot, z, e.as_ptr());
            let hit = c::LLVMBuildAnd(b, same, has, e.as_ptr());
            c::LLVMBuildCondBr(b, hit, predicted, call);
            c::LLVMPositionBuilderAtEnd(b, predicted);
            put_predicted(b);
            c::LLVMBuildStore(b, key, prev_p);
            c::LLVMBuildStore(b, c::LLVMConstNull(ptrt), again_p);
            deeper(b);
            c::LLVMPositionBuilderAtEnd(b, call);
        }
        // (The thread's first entry points the TLS pointer at the thread's own accumulator.)
        forward(b, enter, slow.enter, 0);
        let a = acc_ptr(g, b);
        if wrap {
            // (The runtime counted the activation; the body's entry counts it again.)
            add_depth(b, a, -1);
        }
        c::LLVMBuildRet(b, a);
    }

    // The entry of a body ([`split_entries`]): entered only from this module's traced direct
    // call sites and from its public entry, which did the rest (the runtime's entry, when
    // `slow` is set, is made before the call: `tally.wtrace.direct.body`, or by the public
    // entry): the depth alone.
    let (_, entry) = crate::emit::inline_helper(g, "tally.wtrace.enter.body", enter_ty);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let a = acc_ptr(g, b);
        add_depth(b, a, 1);
        c::LLVMBuildRet(b, a);
    }

    // `--tally-trace-floor` (measurement only): the thread's stream made at its first entry,
    // nothing else.
    let (floor, entry) = crate::emit::inline_helper(g, "tally.wtrace.enter.floor", enter_ty);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let a = acc_ptr(g, b);
        let fast = block(floor, "fast");
        let rt = if_slow(b, floor, a, fast);
        c::LLVMPositionBuilderAtEnd(b, fast);
        c::LLVMBuildRet(b, a);
        c::LLVMPositionBuilderAtEnd(b, rt);
        forward(b, floor, slow.enter, 0);
        c::LLVMBuildRet(b, acc_ptr(g, b));
    }

    let ret_ty = fn_ty(g.voidt, &mut [ptrt, ptrt]);
    let (ret, entry) = crate::emit::inline_helper(g, "tally.wtrace.ret", ret_ty);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let a = c::LLVMGetParam(ret, 0);
        add_depth(b, a, -1);
        // (`self` is a constant: the test folds once inlined.)
        let own = c::LLVMGetParam(ret, 1);
        let null = c::LLVMConstNull(ptrt);
        let has = c::LLVMBuildICmp(
            b,
            llvm_sys::LLVMIntPredicate::LLVMIntNE,
            own,
            null,
            e.as_ptr(),
        );
        let store = block(ret, "store");
        let done = block(ret, "done");
        c::LLVMBuildCondBr(b, has, store, done);
        c::LLVMPositionBuilderAtEnd(b, store);
        c::LLVMBuildStore(b, own, field_of(g, b, a, "ret"));
        c::LLVMBuildBr(b, done);
        c::LLVMPositionBuilderAtEnd(b, done);
        c::LLVMBuildRetVoid(b);
    }

    let back_ty = fn_ty(g.i64t, &mut [ptrt, ptrt]);
    let (back, entry) = crate::emit::inline_helper(g, "tally.wtrace.back", back_ty);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let a = c::LLVMGetParam(back, 0);
        let last = c::LLVMBuildLoad2(b, ptrt, field_of(g, b, a, "ret"), e.as_ptr());
        let callee = c::LLVMGetParam(back, 1);
        let pred = llvm_sys::LLVMIntPredicate::LLVMIntNE;
        let not_traced = c::LLVMBuildICmp(b, pred, last, callee, e.as_ptr());
        c::LLVMBuildRet(b, c::LLVMBuildZExt(b, not_traced, g.i64t, e.as_ptr()));
    }

    let direct_ty = fn_ty(g.voidt, &mut [ptrt, ptrt, i32t]);
    let (direct, entry) = crate::emit::inline_helper(g, "tally.wtrace.direct", direct_ty);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let a = c::LLVMGetParam(direct, 0);
        let fast = block(direct, "fast");
        let rt = if_slow(b, direct, a, fast);
        c::LLVMPositionBuilderAtEnd(b, fast);
        let flag_p = field_of(g, b, a, "direct");
        c::LLVMBuildStore(b, c::LLVMGetParam(direct, 1), flag_p);
        c::LLVMBuildRetVoid(b);
        c::LLVMPositionBuilderAtEnd(b, rt);
        forward(b, direct, slow.direct, 1);
        c::LLVMBuildRetVoid(b);
    }

    // `void tally.wtrace.direct.body(ptr acc, ptr callee, i32 site, ptr module, ptr counters,
    // i32 index)`, right before a direct call of a body ([`split_entries`]), after any save of
    // the caller's copy of the word: the flag cleared, as the callee's entry would have; with
    // `slow` set, the runtime's direct flag and the callee's entry made here (the flight
    // recorder's call site, shadow stack and synchronization point, the thread's word current),
    // less the depth, which the body's entry counts.
    let direct_body_ty = fn_ty(g.voidt, &mut [ptrt, ptrt, i32t, ptrt, ptrt, i32t]);
    let (direct_body, entry) =
        crate::emit::inline_helper(g, "tally.wtrace.direct.body", direct_body_ty);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let p = |i| c::LLVMGetParam(direct_body, i);
        let a = p(0);
        let fast = block(direct_body, "fast");
        let rt = if_slow(b, direct_body, a, fast);
        c::LLVMPositionBuilderAtEnd(b, fast);
        c::LLVMBuildStore(b, c::LLVMConstNull(ptrt), field_of(g, b, a, "direct"));
        c::LLVMBuildRetVoid(b);
        c::LLVMPositionBuilderAtEnd(b, rt);
        let mut args = [p(1), p(2)];
        c::LLVMBuildCall2(
            b,
            slow.direct.1,
            slow.direct.0,
            args.as_mut_ptr(),
            2,
            e.as_ptr(),
        );
        let mut args = [p(3), p(4), p(5), p(1)];
        c::LLVMBuildCall2(
            b,
            slow.enter.1,
            slow.enter.0,
            args.as_mut_ptr(),
            4,
            e.as_ptr(),
        );
        add_depth(b, acc_ptr(g, b), -1);
        c::LLVMBuildRetVoid(b);
    }

    let call_ty = fn_ty(g.voidt, &mut [ptrt, i32t]);
    let (call, entry) = crate::emit::inline_helper(g, "tally.wtrace.call", call_ty);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let a = c::LLVMGetParam(call, 0);
        let fast = block(call, "fast");
        let rt = if_slow(b, call, a, fast);
        c::LLVMPositionBuilderAtEnd(b, fast);
        c::LLVMBuildRetVoid(b);
        c::LLVMPositionBuilderAtEnd(b, rt);
        forward(b, call, slow.call, 1);
        c::LLVMBuildRetVoid(b);
    }
    c::LLVMDisposeBuilder(b);
    let named = |name: &str| {
        let f = c::LLVMGetNamedFunction(g.module, cname(name).as_ptr());
        (f, enter_ty)
    };
    Inline {
        enter: named("tally.wtrace.enter"),
        enter_again: named("tally.wtrace.enter.again"),
        enter_floor: (floor, enter_ty),
        ret: (ret, ret_ty),
        back: (back, back_ty),
        direct: (direct, direct_ty),
        call: (call, call_ty),
    }
}

/// Defines (once per module) `internal void tally.wtrace.put(ptr acc, i64 value, i64 bits)`,
/// always inlined: appends the low `bits` bits of `value` (already masked) to the thread's
/// accumulator word (the `struct tally_wtrace_acc` at `acc`)
/// when it has room ([`build_checked`], [`append`]), else calls
/// `__tally_wtrace_spill(value, bits)` (cold: the word has no room, or the thread has no
/// stream yet or it has ended, which the runtime marks with a closed word). With constant
/// arguments the inlined body is a load, a `test`, a shift (and an `or`) and a
/// store.
unsafe fn put_fn(g: &crate::emit::Globals) -> (LLVMValueRef, LLVMTypeRef) {
    let mut args = [g.ptrt, g.i64t, g.i64t];
    let ty = c::LLVMFunctionType(g.voidt, args.as_mut_ptr(), 3, 0);
    let (f, entry) = crate::emit::inline_helper(g, "tally.wtrace.put", ty);
    let Some(entry) = entry else { return (f, ty) };
    let spill = spill_fn(g);
    let b = c::LLVMCreateBuilderInContext(g.ctx);
    c::LLVMPositionBuilderAtEnd(b, entry);
    let p = |i| c::LLVMGetParam(f, i);
    let (acc, value, bits) = (p(0), p(1), p(2));
    let word_p = field_of(g, b, acc, "acc");
    let store = |b, w| {
        c::LLVMBuildStore(b, append(g, b, w, (value, bits)), word_p);
    };
    build_checked(g, f, b, word_p, bits, store, |b, w| {
        let staged = |b| {
            c::LLVMBuildStore(b, fresh(g, b, (value, bits)), word_p);
        };
        stage_or(g, f, b, (acc, w), staged, |b| {
            let mut a = [value, bits];
            let e = cname("");
            c::LLVMBuildCall2(b, spill.1, spill.0, a.as_mut_ptr(), 2, e.as_ptr());
        });
    });
    c::LLVMDisposeBuilder(b);
    (f, ty)
}

/// Defines `tally.wtrace.put.fast.tls(ptr acc, i64 value, i64 bits)` (an append to the thread's word
/// without a check of room) and `tally.wtrace.room.tls(ptr acc, i64 k)` (unless the thread's word has
/// room for `k` bits, `__tally_wtrace_spill(0, 0)` empties it), always inlined: the shared
/// checks of [`Rec::hoist_checks`] in a function whose word stays in memory.
unsafe fn tls_fns(
    g: &crate::emit::Globals,
) -> ((LLVMValueRef, LLVMTypeRef), (LLVMValueRef, LLVMTypeRef)) {
    let (i64t, e) = (g.i64t, cname(""));
    let b = c::LLVMCreateBuilderInContext(g.ctx);
    let mut args2 = [g.ptrt, i64t, i64t];
    let ty2 = c::LLVMFunctionType(g.voidt, args2.as_mut_ptr(), 3, 0);
    let (put, entry) = crate::emit::inline_helper(g, "tally.wtrace.put.fast.tls", ty2);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let word_p = field_of(g, b, c::LLVMGetParam(put, 0), "acc");
        let word = c::LLVMBuildLoad2(b, i64t, word_p, e.as_ptr());
        let bits = (c::LLVMGetParam(put, 1), c::LLVMGetParam(put, 2));
        c::LLVMBuildStore(b, append(g, b, word, bits), word_p);
        c::LLVMBuildRetVoid(b);
    }
    let mut args1 = [g.ptrt, i64t];
    let ty1 = c::LLVMFunctionType(g.voidt, args1.as_mut_ptr(), 2, 0);
    let (room, entry) = crate::emit::inline_helper(g, "tally.wtrace.room.tls", ty1);
    if let Some(entry) = entry {
        let spill = spill_fn(g);
        c::LLVMPositionBuilderAtEnd(b, entry);
        let acc = c::LLVMGetParam(room, 0);
        let word_p = field_of(g, b, acc, "acc");
        build_checked(
            g,
            room,
            b,
            word_p,
            c::LLVMGetParam(room, 1),
            |_, _| {},
            |b, w| {
                let empty = |b| {
                    c::LLVMBuildStore(b, c::LLVMConstInt(i64t, abi::WTRACE_EMPTY, 0), word_p);
                };
                stage_or(g, room, b, (acc, w), empty, |b| {
                    let zero = c::LLVMConstInt(i64t, 0, 0);
                    let mut a = [zero, zero];
                    c::LLVMBuildCall2(b, spill.1, spill.0, a.as_mut_ptr(), 2, e.as_ptr());
                });
            },
        );
    }
    c::LLVMDisposeBuilder(b);
    ((put, ty2), (room, ty1))
}

/// The thread's accumulator pointer (`__tally_wtrace_acc`), loaded at `b`'s position.
unsafe fn acc_ptr(g: &crate::emit::Globals, b: LLVMBuilderRef) -> LLVMValueRef {
    let m = g.module;
    let n = cname(abi::WTRACE_ACC);
    let mut tls = c::LLVMGetNamedGlobal(m, n.as_ptr());
    if tls.is_null() {
        tls = c::LLVMAddGlobal(m, g.ptrt, n.as_ptr());
        c::LLVMSetLinkage(tls, LLVMLinkage::LLVMExternalLinkage);
        c::LLVMSetThreadLocalMode(tls, crate::module::runtime_tls_model(m));
    }
    let e = cname("");
    c::LLVMBuildLoad2(b, g.ptrt, tls, e.as_ptr())
}

/// The address of field `field` of the `struct tally_wtrace_acc` at `p`.
unsafe fn field_of(
    g: &crate::emit::Globals,
    b: LLVMBuilderRef,
    p: LLVMValueRef,
    field: &str,
) -> LLVMValueRef {
    let (ctx, i64t) = (g.ctx, g.i64t);
    let e = cname("");
    let k = abi::TALLY_WTRACE_ACC
        .fields
        .iter()
        .find(|f| f.name == field);
    let off = k.expect("struct tally_wtrace_acc field").offset as u64;
    let mut idx = [c::LLVMConstInt(i64t, off, 0)];
    let i8t = c::LLVMInt8TypeInContext(ctx);
    c::LLVMBuildInBoundsGEP2(b, i8t, p, idx.as_mut_ptr(), 1, e.as_ptr())
}

/// `__tally_wtrace_spill(value, bits)`, cold.
unsafe fn spill_fn(g: &crate::emit::Globals) -> (LLVMValueRef, LLVMTypeRef) {
    let spill =
        crate::module::declare_void_fn(g.module, g.voidt, abi::WTRACE_SPILL, &mut [g.i64t, g.i64t]);
    let cold = c::LLVMCreateEnumAttribute(g.ctx, ir::attr_kind("cold"), 0);
    c::LLVMAddAttributeAtIndex(spill.0, llvm_sys::LLVMAttributeFunctionIndex, cold);
    spill
}

/// Builds, at `b`'s end, the check that the word at `word_p` ([`abi::TallyWtraceAcc::acc`]:
/// up to 63 bits above a sentinel 1) has room for `room` bits, i.e. that its low `room` bits
/// are zero (a `test` of a constant mask): then `fast(b, word)`, else `spill(b, word)` (the
/// cold path); both end the function `b` is in.
unsafe fn build_checked(
    g: &crate::emit::Globals,
    f: LLVMValueRef,
    b: LLVMBuilderRef,
    word_p: LLVMValueRef,
    room: LLVMValueRef,
    fast: impl FnOnce(LLVMBuilderRef, LLVMValueRef),
    spill: impl FnOnce(LLVMBuilderRef, LLVMValueRef),
) {
    let (ctx, i64t) = (g.ctx, g.i64t);
    let e = cname("");
    let fast_bb = c::LLVMAppendBasicBlockInContext(ctx, f, cname("fast").as_ptr());
    let slow = c::LLVMAppendBasicBlockInContext(ctx, f, cname("spill").as_ptr());
    let word = c::LLVMBuildLoad2(b, i64t, word_p, e.as_ptr());
    let one = c::LLVMConstInt(i64t, 1, 0);
    let mask = c::LLVMBuildSub(
        b,
        c::LLVMBuildShl(b, one, room, e.as_ptr()),
        one,
        e.as_ptr(),
    );
    let low = c::LLVMBuildAnd(b, word, mask, e.as_ptr());
    let zero = c::LLVMConstInt(i64t, 0, 0);
    let pred = llvm_sys::LLVMIntPredicate::LLVMIntNE;
    let full = c::LLVMBuildICmp(b, pred, low, zero, e.as_ptr());
    let br = c::LLVMBuildCondBr(b, full, slow, fast_bb);
    ir::set_branch_weights(ctx, br, &[1, 1 << 10]);
    c::LLVMPositionBuilderAtEnd(b, fast_bb);
    fast(b, word);
    c::LLVMBuildRetVoid(b);
    c::LLVMPositionBuilderAtEnd(b, slow);
    spill(b, word);
    c::LLVMBuildRetVoid(b);
}

/// The cold path of an append or check that found no room in `word`, built at `b`'s end in
/// `f`: while the thread's `stage` (of the accumulator at `acc`) is below `stage_end`, `word`
/// is stored there, `stage` advanced and `staged(b)` builds the emptied word's new value (the
/// function returns); else `call(b)`, where `b` is left (the runtime's spill; the caller ends
/// the function). A store, an add and two compares instead of a call of
/// `__tally_wtrace_spill` (about 40 instructions).
unsafe fn stage_or(
    g: &crate::emit::Globals,
    f: LLVMValueRef,
    b: LLVMBuilderRef,
    (acc, word): (LLVMValueRef, LLVMValueRef),
    staged: impl FnOnce(LLVMBuilderRef),
    call: impl FnOnce(LLVMBuilderRef),
) {
    let (ctx, ptrt, e) = (g.ctx, g.ptrt, cname(""));
    let yes = c::LLVMAppendBasicBlockInContext(ctx, f, cname("stage").as_ptr());
    let no = c::LLVMAppendBasicBlockInContext(ctx, f, cname("call").as_ptr());
    let at_p = field_of(g, b, acc, "stage");
    let at = c::LLVMBuildLoad2(b, ptrt, at_p, e.as_ptr());
    let end = c::LLVMBuildLoad2(b, ptrt, field_of(g, b, acc, "stage_end"), e.as_ptr());
    let pred = llvm_sys::LLVMIntPredicate::LLVMIntULT;
    let room = c::LLVMBuildICmp(b, pred, at, end, e.as_ptr());
    let br = c::LLVMBuildCondBr(b, room, yes, no);
    ir::set_branch_weights(ctx, br, &[63, 1]);
    c::LLVMPositionBuilderAtEnd(b, yes);
    c::LLVMBuildStore(b, word, at);
    let mut one = [c::LLVMConstInt(g.i64t, 1, 0)];
    let next = c::LLVMBuildInBoundsGEP2(b, g.i64t, at, one.as_mut_ptr(), 1, e.as_ptr());
    c::LLVMBuildStore(b, next, at_p);
    staged(b);
    c::LLVMBuildRetVoid(b);
    c::LLVMPositionBuilderAtEnd(b, no);
    call(b);
}

/// The empty word with the record `(value, bits)` in it (the word a staged one leaves).
unsafe fn fresh(
    g: &crate::emit::Globals,
    b: LLVMBuilderRef,
    record: (LLVMValueRef, LLVMValueRef),
) -> LLVMValueRef {
    append(g, b, c::LLVMConstInt(g.i64t, abi::WTRACE_EMPTY, 0), record)
}

/// `word` with the record `(value, bits)` (`value` below `2^bits`) put in at its top:
/// `word >> bits | value << (64 - bits)`, a funnel shift (`bits` may be 0: `Back` after a
/// traced callee). One register, no count: the sentinel's position is the count.
unsafe fn append(
    g: &crate::emit::Globals,
    b: LLVMBuilderRef,
    word: LLVMValueRef,
    (value, bits): (LLVMValueRef, LLVMValueRef),
) -> LLVMValueRef {
    let fshr = ir::intrinsic_decl(g.module, "llvm.fshr", &[g.i64t]);
    let mut args = [value, word, bits];
    let e = cname("");
    c::LLVMBuildCall2(b, fshr.1, fshr.0, args.as_mut_ptr(), 3, e.as_ptr())
}

/// The helpers of a function's own copy of the accumulator's word (an alloca, which mem2reg
/// makes a register), all always inlined ([`local_fns`]). Each takes the thread's accumulator
/// pointer first (`acc`: [`Rec::acc_here`], loaded once after the entry).
struct Local {
    /// `tally.wtrace.put.local(ptr acc, ptr word, i64 value, i64 bits)`: an append with its
    /// own check.
    put: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.put.fast(ptr acc, ptr word, i64 value, i64 bits)`: an append without a
    /// check (a `room` before it made the room: [`Rec::hoist_checks`]; the same parameters as
    /// `put`, so that one becomes the other by its callee).
    put_fast: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.room(ptr acc, ptr word, i64 k)`: unless the word has room for `k` bits,
    /// its bits go to the thread's buffer (`__tally_wtrace_spill(0, 0)`), leaving it empty.
    room: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.save(ptr acc, ptr word)`, `tally.wtrace.load(ptr acc, ptr word)`: the
    /// copy to and from the thread's.
    save: (LLVMValueRef, LLVMTypeRef),
    load: (LLVMValueRef, LLVMTypeRef),
}

/// Defines the helpers of [`Local`]: a function without `setjmp` or landing pads keeps the
/// accumulator's word in an alloca, which mem2reg makes a register, loaded from the thread's
/// after `enter` and after every call that may write records, and saved to it after every
/// append (written through, [`Rec::put`]) or, with `--tally-trace-registers=on`, before such
/// calls, before `ret`, and around the cold `__tally_wtrace_spill` (so a record costs a
/// shift, and an `or` when its value is not 0, and the check of its room, a `test` of a
/// constant mask, is shared by every record up to the next check: [`Rec::hoist_checks`]).
unsafe fn local_fns(g: &crate::emit::Globals) -> Local {
    let (ctx, i64t, ptrt) = (g.ctx, g.i64t, g.ptrt);
    let e = cname("");
    let mut args_pp = [ptrt, ptrt];
    let ty_pp = c::LLVMFunctionType(g.voidt, args_pp.as_mut_ptr(), 2, 0);
    let b = c::LLVMCreateBuilderInContext(ctx);
    let copy = |b: LLVMBuilderRef, from: LLVMValueRef, to: LLVMValueRef| {
        let v = c::LLVMBuildLoad2(b, i64t, from, e.as_ptr());
        c::LLVMBuildStore(b, v, to);
    };
    let (save, entry) = crate::emit::inline_helper(g, "tally.wtrace.save", ty_pp);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let to = field_of(g, b, c::LLVMGetParam(save, 0), "acc");
        copy(b, c::LLVMGetParam(save, 1), to);
        c::LLVMBuildRetVoid(b);
    }
    let (load, entry) = crate::emit::inline_helper(g, "tally.wtrace.load", ty_pp);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let from = field_of(g, b, c::LLVMGetParam(load, 0), "acc");
        copy(b, from, c::LLVMGetParam(load, 1));
        c::LLVMBuildRetVoid(b);
    }
    // The cold path: the copy saved, the runtime's spill, the copy loaded.
    let spill = spill_fn(g);
    let spill_around = |b: LLVMBuilderRef, acc, word, mut args: [LLVMValueRef; 2]| {
        let mut a = [acc, word];
        c::LLVMBuildCall2(b, ty_pp, save, a.as_mut_ptr(), 2, e.as_ptr());
        c::LLVMBuildCall2(b, spill.1, spill.0, args.as_mut_ptr(), 2, e.as_ptr());
        let mut a = [acc, word];
        c::LLVMBuildCall2(b, ty_pp, load, a.as_mut_ptr(), 2, e.as_ptr());
    };
    let mut args4 = [ptrt, ptrt, i64t, i64t];
    let ty4 = c::LLVMFunctionType(g.voidt, args4.as_mut_ptr(), 4, 0);
    let (put, entry) = crate::emit::inline_helper(g, "tally.wtrace.put.local", ty4);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let p = |i| c::LLVMGetParam(put, i);
        let (acc, word, value, bits) = (p(0), p(1), p(2), p(3));
        let store = |b, w| {
            c::LLVMBuildStore(b, append(g, b, w, (value, bits)), word);
        };
        build_checked(g, put, b, word, bits, store, |b, w| {
            // (The thread's word too: it never holds bits already staged.)
            let staged = |b| {
                let new = fresh(g, b, (value, bits));
                c::LLVMBuildStore(b, new, word);
                c::LLVMBuildStore(b, new, field_of(g, b, acc, "acc"));
            };
            stage_or(g, put, b, (acc, w), staged, |b| {
                spill_around(b, acc, word, [value, bits])
            });
        });
    }
    let (put_fast, entry) = crate::emit::inline_helper(g, "tally.wtrace.put.fast", ty4);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let p = |i| c::LLVMGetParam(put_fast, i);
        let word = c::LLVMBuildLoad2(b, i64t, p(1), e.as_ptr());
        let appended = append(g, b, word, (p(2), p(3)));
        c::LLVMBuildStore(b, appended, p(1));
        c::LLVMBuildRetVoid(b);
    }
    let mut args3 = [ptrt, ptrt, i64t];
    let ty3 = c::LLVMFunctionType(g.voidt, args3.as_mut_ptr(), 3, 0);
    let (room, entry) = crate::emit::inline_helper(g, "tally.wtrace.room", ty3);
    if let Some(entry) = entry {
        c::LLVMPositionBuilderAtEnd(b, entry);
        let p = |i| c::LLVMGetParam(room, i);
        let (acc, word, k) = (p(0), p(1), p(2));
        build_checked(
            g,
            room,
            b,
            word,
            k,
            |_, _| {},
            |b, w| {
                let empty = |b| {
                    let new = c::LLVMConstInt(i64t, abi::WTRACE_EMPTY, 0);
                    c::LLVMBuildStore(b, new, word);
                    c::LLVMBuildStore(b, new, field_of(g, b, acc, "acc"));
                };
                stage_or(g, room, b, (acc, w), empty, |b| {
                    let zero = c::LLVMConstInt(i64t, 0, 0);
                    spill_around(b, acc, word, [zero, zero])
                });
            },
        );
    }
    c::LLVMDisposeBuilder(b);
    Local {
        put: (put, ty4),
        put_fast: (put_fast, ty4),
        room: (room, ty3),
        save: (save, ty_pp),
        load: (load, ty_pp),
    }
}

/// What instruction `v` means for a function's copy of the accumulator's word: whether the
/// copy must be saved to the thread's before it (`ret`, and calls that may write records: any
/// call but intrinsics, inline asm, the libc leaves of [`OPAQUE_LIBC`] and the runtime's
/// `direct`, `ret` and the inline helpers), and whether the thread's word may have changed
/// after it (those calls and `enter`: the copy is loaded again, and an append needs a new
/// check of room).
fn call_role(v: Val) -> (bool, bool) {
    if v.opcode() == LLVMOpcode::LLVMRet {
        (true, false)
    } else if v.opcode() == LLVMOpcode::LLVMCall {
        match v.called_function().map(|f| (f.name(), f.intrinsic_id())) {
            _ if v.calls_inline_asm() => (false, false),
            Some((_, id)) if id != 0 => (false, false),
            Some((name, _)) => match name.as_str() {
                "__tally_wtrace_enter"
                | "tally.wtrace.enter"
                | "tally.wtrace.enter.again"
                | "tally.wtrace.enter.floor"
                | "tally.wtrace.enter.body" => (false, true),
                "__tally_wtrace_direct" | "__tally_wtrace_ret" => (false, false),
                x if x.starts_with("tally.wtrace.") => (false, false),
                x if OPAQUE_LIBC.contains(&x) => (false, false),
                _ => (true, true),
            },
            None => (true, true),
        }
    } else {
        (false, false)
    }
}

/// Where a function's records go: the thread's accumulator, or the function's own copy
/// (`acc`, `n` allocas; see [`local_fns`]).
struct Rec<'a> {
    rt: &'a Runtime,
    local: Option<LLVMValueRef>,
    /// The copy is written through: stored to the thread's word after every append (so the
    /// thread's word is always current, a crash loses nothing, and calls and `ret` need no
    /// save); without `--tally-trace-registers=on`.
    through: bool,
    /// The appends' checks of room are shared ([`Rec::hoist_checks`]): a function control
    /// cannot land in from elsewhere (no `setjmp`, landing pads, `invoke` or `callbr`).
    shared: bool,
    /// With a copy: the thread's accumulator pointer, returned by the inline `enter` (null
    /// before: the thread's first entry may change it; after any entry it stays), which the
    /// helpers take ([`Rec::acc_here`]) instead of loading the TLS pointer at each record,
    /// save, load, call site and `ret`.
    acc: std::cell::Cell<LLVMValueRef>,
    /// The most bits an append whose width is not a constant can write, by its width's value
    /// (a tag target's, loaded from a constant table: [`Log::at_tag_target`]), for
    /// [`Rec::hoist_checks`] (any other counts as the widest record).
    widest: std::cell::RefCell<HashMap<LLVMValueRef, u64>>,
}

impl Rec<'_> {
    /// The thread's accumulator pointer for code at the builder's position: [`Rec::acc`] once
    /// the entry is built, else the TLS pointer loaded there (replaced by [`Rec::acc`] where
    /// that dominates it: [`Rec::share_acc`]).
    fn acc_here(&self, em: &Emitter) -> LLVMValueRef {
        match self.acc.get() {
            acc if acc.is_null() => unsafe { acc_ptr(em.g, em.b) },
            acc => acc,
        }
    }

    /// Run last: the TLS loads of the accumulator pointer built before the entry was (the
    /// `Back`s, placed first) replaced by [`Rec::acc`] where it dominates them, i.e. in every
    /// block the entry's block dominates, and after it in that block. The pointer cannot
    /// change after any entry of the thread (the runtime makes the stream at the thread's
    /// first entry, or gives up for good), so each is the same value.
    fn share_acc(&self, em: &Emitter) {
        let acc = self.acc.get();
        if acc.is_null() {
            return;
        }
        let tls = unsafe { c::LLVMGetNamedGlobal(em.g.module, cname(abi::WTRACE_ACC).as_ptr()) };
        let home = Val(acc).parent();
        let blocks = em.func.blocks();
        let index: HashMap<Bb, usize> = blocks.iter().enumerate().map(|(i, &b)| (b, i)).collect();
        // The blocks reached from the first without passing through `home`: not dominated.
        let mut free = vec![false; blocks.len()];
        let mut work = vec![0usize];
        while let Some(i) = work.pop() {
            if free[i] || blocks[i] == home {
                continue;
            }
            free[i] = true;
            if let Some(t) = blocks[i].terminator() {
                for k in 0..t.num_successors() {
                    if let Some(&j) = index.get(&t.successor(k)) {
                        work.push(j);
                    }
                }
            }
        }
        for (i, bb) in blocks.iter().enumerate() {
            if free[i] {
                continue;
            }
            let mut seen = *bb != home;
            for v in bb.instructions() {
                if v.0 == acc {
                    seen = true;
                } else if seen && v.opcode() == LLVMOpcode::LLVMLoad && v.operand(0).0 == tls {
                    unsafe {
                        c::LLVMReplaceAllUsesWith(v.0, acc);
                        c::LLVMInstructionEraseFromParent(v.0);
                    }
                }
            }
        }
    }

    /// Appends the record `(value, bits)` (`value` below `2^bits`) at the builder's position.
    /// In a function built at -O0 (`optnone`) the append stays a call: inlined, each append's
    /// values would take stack slots of their own there (no register allocation across blocks,
    /// no slot sharing), and `recursion.c`'s 20,000-deep recursion outgrew the 8 MiB stack.
    fn put(&self, em: &Emitter, value: LLVMValueRef, bits: LLVMValueRef, near: Val) {
        let call = match self.local {
            Some(word) => {
                let acc = self.acc_here(em);
                em.call_instr(self.rt.local.put, &mut [acc, word, value, bits], near)
            }
            None => {
                let acc = self.acc_here(em);
                em.call_instr(self.rt.put, &mut [acc, value, bits], near)
            }
        };
        if let (Some(word), true) = (self.local, self.through) {
            let acc = self.acc_here(em);
            em.call(self.rt.local.save, &mut [acc, word], near);
        }
        if em.func.fn_has_attr(ir::attr_kind("optnone")) {
            unsafe {
                let noinline = c::LLVMCreateEnumAttribute(em.g.ctx, ir::attr_kind("noinline"), 0);
                c::LLVMAddCallSiteAttribute(call, llvm_sys::LLVMAttributeFunctionIndex, noinline);
            }
        }
    }

    /// The `Back` after call `call` (an `Unknown` or `Extern` site): 1 bit, except after an
    /// `Extern` call whose callee was traced (`tally.wtrace.back`: the function that returned
    /// last is the callee; then nothing, and the reader resolves the site to that function).
    fn put_back(&self, em: &Emitter, call: &Call) {
        if !matches!(call.callee, WCallee::Extern { .. }) {
            return self.put_const(em, BACK, call.instr);
        }
        let mut args = [self.acc_here(em), call.instr.called_value().0];
        let (f, ty) = self.rt.back;
        let bits = unsafe {
            let e = cname("");
            let v = c::LLVMBuildCall2(em.b, ty, f, args.as_mut_ptr(), 2, e.as_ptr());
            Val(v).set_debug_loc(em.call_loc(call.instr));
            v
        };
        // (Back is the 1-bit code `1`: value = width.)
        self.put(em, bits, bits, call.instr);
    }

    /// [`Rec::put`] of constants.
    fn put_const(&self, em: &Emitter, (value, bits): (u64, u64), near: Val) {
        debug_assert!(bits > 0 && bits <= 32 && value >> bits == 0);
        self.put(em, em.i64c(value), em.i64c(bits), near);
    }

    /// With a local accumulator: saved before every call that may write records (any call but
    /// intrinsics, inline asm, the libc leaves of [`OPAQUE_LIBC`] and the runtime's `direct`
    /// and `ret`) and before every `ret`, loaded after such calls and after `enter`. Run last,
    /// over the whole instrumented function.
    ///
    /// A save is left out where the copy cannot have changed since it was loaded (no record
    /// put on any path from the last load): the thread's accumulator still holds the same
    /// words, since only the calls followed by a load write to it. In a run of calls with no
    /// witness between them (a loop body that only calls, straight-line code after inlining)
    /// each call then costs the load after it, which is dead unless a record or a save uses it.
    fn save_and_load_around_calls(&self, em: &Emitter) {
        let Some(word) = self.local else { return };
        // The sites may have put a new entry block before the allocas' block.
        if let Some(first) = em.func.first_block().and_then(|b| b.first()) {
            for a in [word] {
                if a != first.0 {
                    em.at(first);
                    unsafe {
                        c::LLVMInstructionRemoveFromParent(a);
                        c::LLVMInsertIntoBuilder(em.b, a);
                    }
                }
            }
        }
        let blocks = em.func.blocks();
        let role = call_role;
        // Whether `v` changes the copy: any use of the allocas (the appends; the saves and
        // loads are not inserted yet).
        let writes_copy = |v: Val| (0..v.num_operands()).any(|i| v.operand(i).0 == word);
        // Dirty at a block's end, given dirty at its start (a load clears, a write sets).
        let through = |bb: Bb, mut dirty: bool| {
            for v in bb.instructions() {
                if writes_copy(v) {
                    dirty = true;
                }
                if role(v).1 {
                    dirty = false;
                }
            }
            dirty
        };
        let index: HashMap<Bb, usize> = blocks.iter().enumerate().map(|(i, &b)| (b, i)).collect();
        // Forward may-analysis to a fixpoint: a block starts dirty if any predecessor ends so.
        let mut dirty_in = vec![false; blocks.len()];
        let mut work: Vec<usize> = (0..blocks.len()).collect();
        while let Some(i) = work.pop() {
            let out = through(blocks[i], dirty_in[i]);
            if !out {
                continue;
            }
            let Some(term) = blocks[i].terminator() else {
                continue;
            };
            for s in 0..term.num_successors() {
                if let Some(&j) = index.get(&term.successor(s)) {
                    if !dirty_in[j] {
                        dirty_in[j] = true;
                        work.push(j);
                    }
                }
            }
        }
        for (i, bb) in blocks.into_iter().enumerate() {
            let mut dirty = dirty_in[i];
            for v in bb.instructions() {
                if writes_copy(v) {
                    dirty = true;
                }
                let (save, load) = role(v);
                if save && dirty && !self.through {
                    em.at(v);
                    let acc = self.acc_here(em);
                    em.call(self.rt.local.save, &mut [acc, word], v);
                }
                if load {
                    dirty = false;
                    // (After the entry, its accumulator pointer first.)
                    let next = v.next().and_then(|n| match n.0 == self.acc.get() {
                        true => n.next(),
                        false => Some(n),
                    });
                    if let Some(next) = next {
                        em.at(next);
                        let acc = self.acc_here(em);
                        em.call(self.rt.local.load, &mut [acc, word], v);
                    }
                }
            }
        }
    }

    /// In a function control cannot land in from elsewhere (`shared`), run after
    /// [`Rec::save_and_load_around_calls`]: each append's own check of room moves to a shared
    /// one. A `tally.wtrace.room(word, k)` (`tally.wtrace.room.tls(k)` on the thread's word in
    /// memory) goes right after each load of the copy (after each call that may write records
    /// and after `enter`, in memory: the thread's word may be nearly full then) and at the
    /// start of each loop head (the target of a DFS retreating edge: every cycle has one),
    /// where `k` is the most bits any path from that point appends before the next check
    /// (a backward longest-path pass over the blocks, heads cut), and the appends become
    /// `tally.wtrace.put.fast` (a shift, and an `or` for a value other than 0). Where a path
    /// would need more than [`ROOM_MAX`] bits, another check goes right after the append that
    /// would pass it. A function whose entry reaches an append without such a load or call
    /// (none should) keeps its checked appends. Sound as long as nothing else writes to the
    /// thread's word between a check and the appends it covers: a traced signal handler
    /// would (not exact anyway: its `Enter` lands where a witness is expected), and a libc
    /// leaf of [`OPAQUE_LIBC`] that called back into traced code would (assumed never to, as
    /// for `Back`).
    fn hoist_checks(&self, em: &Emitter) {
        if !self.shared || em.func.fn_has_attr(ir::attr_kind("optnone")) {
            return; // (at -O0 its appends stay calls; one check each is no worse than a call)
        }
        // In a register (the copy loaded after every call that may write records and after
        // `enter`) or in memory (the thread's word may change at those calls themselves).
        let (put, put_fast, bits_at) = match self.local {
            Some(_) => (self.rt.local.put.0, self.rt.local.put_fast.0, 3),
            None => (self.rt.put.0, self.rt.put_fast_tls.0, 2),
        };
        let load = self.rt.local.load.0;
        let calls =
            |v: Val, f: LLVMValueRef| v.opcode() == LLVMOpcode::LLVMCall && v.called_value().0 == f;
        let barrier = |v: Val| match self.local {
            Some(_) => calls(v, load),
            None => call_role(v).1,
        };
        // The most bits an append writes: its width, when constant; `Back` after an external
        // callee (1 or 0 bits: `tally.wtrace.back`, or a zero-extended i1); else the widest
        // record (32 bits).
        let width = |v: Val| -> u64 {
            let bits = v.operand(bits_at);
            unsafe {
                if !c::LLVMIsAConstantInt(bits.0).is_null() {
                    c::LLVMConstIntGetZExtValue(bits.0)
                } else if let Some(&k) = self.widest.borrow().get(&bits.0) {
                    k
                } else if calls(bits, self.rt.back.0)
                    || (!c::LLVMIsAZExtInst(bits.0).is_null()
                        && c::LLVMGetIntTypeWidth(c::LLVMTypeOf(bits.operand(0).0)) == 1)
                {
                    1
                } else {
                    32
                }
            }
        };
        let blocks = em.func.blocks();
        let index: HashMap<Bb, usize> = blocks.iter().enumerate().map(|(i, &b)| (b, i)).collect();
        let succs: Vec<Vec<usize>> = blocks
            .iter()
            .map(|b| match b.terminator() {
                Some(t) => (0..t.num_successors())
                    .filter_map(|i| index.get(&t.successor(i)).copied())
                    .collect(),
                None => Vec::new(),
            })
            .collect();
        // Depth-first from the entry: the postorder, and the heads (retreating edges' targets).
        let n = blocks.len();
        let (mut state, mut head, mut post) = (vec![0u8; n], vec![false; n], Vec::new());
        let mut stack = vec![(0usize, 0usize)];
        state[0] = 1;
        while let Some(&mut (b, ref mut next)) = stack.last_mut() {
            if let Some(&s) = succs[b].get(*next) {
                *next += 1;
                match state[s] {
                    0 => {
                        state[s] = 1;
                        stack.push((s, 0));
                    }
                    1 => head[s] = true,
                    _ => {}
                }
            } else {
                state[b] = 2;
                post.push(b);
                stack.pop();
            }
        }
        // Backward, successors first (a head counts 0 for its predecessors: it checks).
        let mut need = vec![0u64; n];
        let mut checks: Vec<(Val, u64)> = Vec::new();
        let mut fast = Vec::new();
        for &b in &post {
            let mut r = succs[b]
                .iter()
                .map(|&s| if head[s] { 0 } else { need[s] })
                .max()
                .unwrap_or(0);
            for v in blocks[b].instructions().into_iter().rev() {
                if calls(v, put) {
                    let k = width(v);
                    if r + k > ROOM_MAX {
                        checks.push((v.next().expect("an append is not a terminator"), r));
                        r = 0;
                    }
                    r += k;
                    fast.push(v);
                } else if barrier(v) {
                    if r > 0 {
                        checks.push((v.next().expect("a call is not a terminator"), r));
                    }
                    r = 0;
                }
            }
            if head[b] && r > 0 {
                match blocks[b].insertion_start() {
                    Some(at) => checks.push((at, r)),
                    None => return,
                }
                r = 0;
            }
            need[b] = r;
        }
        if need[0] > 0 {
            return; // (an append before any load: keep every check)
        }
        for v in fast {
            unsafe {
                let callee = v.num_operands() - 1;
                c::LLVMSetOperand(v.0, callee, put_fast);
            }
        }
        for (at, k) in checks {
            em.at(at);
            match self.local {
                Some(word) => {
                    let acc = self.acc_here(em);
                    em.call(self.rt.local.room, &mut [acc, word, em.i64c(k)], at)
                }
                None => {
                    let acc = self.acc_here(em);
                    em.call(self.rt.room_tls, &mut [acc, em.i64c(k)], at)
                }
            }
        }
    }
}

/// How much less likely [`tally_graph::weight::discount_returns`] makes an early return in
/// the static weights of the witness plans (8 and 32 measured the same on the bench's four
/// programs; 3 changed nothing).
const RETURN_DISCOUNT: f64 = 8.0;

/// The most bits one shared check of room ([`Rec::hoist_checks`]) covers: the word holds 63,
/// and a check that asks for `k` sends a word with more than `63 - k` to the buffer. 16
/// stages fuller words than 32 for few more checks: callgrind, the bench's reduced inputs,
/// `trace-regs` instructions against 32: Lua -1.1%, SQLite -1.4%, zlib -0.9%, bzip2 -0.3%
/// (8 and 12 did worse on Lua and bzip2; docs/log/trace.md).
const ROOM_MAX: u64 = 16;

impl FnPlan for WPlan {
    fn num_counters(&self) -> usize {
        0 // a trace build counts nothing
    }

    fn emit(&self, cx: &EmitCx) -> Emitted {
        let rt = Runtime::declare(cx.g);
        let em = Emitter {
            g: cx.g,
            b: unsafe { c::LLVMCreateBuilderInContext(cx.g.ctx) },
            fn_scope: ir::subprogram(cx.func),
            func: cx.func,
        };
        // 0. The function's own copy of the accumulator's word (an alloca in the entry block,
        // a register after mem2reg), unless control can land in it from elsewhere (`setjmp`,
        // landing pads, any `invoke` or `callbr`) or it is built at -O0 (`optnone`: no
        // mem2reg); without those, shared checks of room either way. The copy is written
        // through to the thread's word after every append, unless `--tally-trace-registers=on`
        // (then saved only before calls and `ret`: a fatal signal would leave the records since
        // the function's last call in its registers, out of the flight recorder's tail).
        let landings = cx.l.has_setjmp
            || cx.func.blocks().iter().any(|bb| {
                bb.instructions().iter().any(|v| {
                    matches!(
                        v.opcode(),
                        LLVMOpcode::LLVMInvoke
                            | LLVMOpcode::LLVMCallBr
                            | LLVMOpcode::LLVMLandingPad
                            | LLVMOpcode::LLVMResume
                    )
                })
            });
        let local = match cx.func.first_block().and_then(|b| b.first()) {
            Some(first)
                if (self.registers || self.through)
                    && !landings
                    && !cx.func.fn_has_attr(ir::attr_kind("optnone")) =>
            unsafe {
                em.at(first);
                Some(c::LLVMBuildAlloca(
                    em.b,
                    cx.g.i64t,
                    cname("tally.acc").as_ptr(),
                ))
            },
            _ => None,
        };
        let rt = Rec {
            rt: &rt,
            local,
            through: !self.registers,
            shared: !landings,
            acc: std::cell::Cell::new(std::ptr::null_mut()),
            widest: Default::default(),
        };
        // 1. `Back` right after each unknown call, before any code the sites put at the end
        // of its block (the out-edge's witness follows the call's records).
        for call in self.calls.iter().flatten() {
            if self.floor
                || !writes_back(&call.callee)
                || is_resume(call.instr)
                || self.back_split.contains(&call.instr)
            {
                continue;
            }
            let after = if call.instr.opcode() == LLVMOpcode::LLVMCall {
                call.instr.next()
            } else {
                call.instr.successor(0).insertion_start()
            };
            if let Some(after) = after {
                em.at(after);
                rt.put_back(&em, call);
            }
        }
        // 2. Entry and witnesses.
        let mut log = Log {
            rec: &rt,
            function: cx.index,
            announced: self.announced,
            witness: &self.plan.witness,
            depth: (cx.l.has_setjmp || cx.l.has_landing_pads).then(std::ptr::null_mut),
            floor: self.floor,
        };
        crate::apply::apply(cx.g, cx.func, cx.l, &self.sites, cx.base, &mut log);
        if let Some(paths) = &self.paths {
            paths.emit(&em, cx.l, &rt);
        }
        // 2b. `Back` of an unknown invoke with a shared normal destination: on a block of its
        // own between the invoke and whatever the sites put on the edge.
        for &invoke in &self.back_split {
            let nb = crate::surgery::split_edge(&em, invoke, 0);
            if let Some(at) = nb.insertion_start() {
                em.at(at);
                let call = self.calls.iter().flatten().find(|c| c.instr == invoke);
                rt.put_back(&em, call.expect("a split invoke is a call site"));
            }
        }
        // 3. The direct flag immediately before each direct call (after any site code), and
        // the call site (numbered over the blocks' calls in order, as the metadata lists
        // them) before each direct and unknown call, for the flight recorder's call stack.
        for (site, call) in self.calls.iter().flatten().enumerate() {
            if self.floor {
                break;
            }
            let site = em.i32c(site as u64);
            match call.callee {
                WCallee::Direct(_) | WCallee::Extern { .. } => {
                    let callee = call.instr.called_value();
                    em.at(call.instr);
                    let acc = rt.acc_here(&em);
                    em.call(rt.rt.direct, &mut [acc, callee.0, site], call.instr);
                }
                WCallee::Unknown => {
                    em.at(call.instr);
                    let acc = rt.acc_here(&em);
                    em.call(rt.rt.call, &mut [acc, site], call.instr);
                }
                WCallee::Opaque => {}
            }
        }
        // 4. Landings, first thing where control lands: `setjmp`'s second return and landing
        // pads (`Unwind`: the traced activations above this one that the `longjmp` or the
        // exception abandoned, and the block landed at). And the depth of traced activations
        // at each `ret` (not at `resume`: the next landing counts the activation as abandoned).
        let depth_here = |depth: LLVMValueRef| unsafe {
            let empty = cname("");
            c::LLVMBuildLoad2(em.b, cx.g.i32t, depth, empty.as_ptr())
        };
        for (i, n) in cx.l.nodes.iter().enumerate() {
            let Some(depth) = log.depth.filter(|_| !self.floor) else {
                break;
            };
            if let Some(sj) = n.after_setjmp {
                if let Some(next) = sj.next() {
                    em.at(next);
                    let d = depth_here(depth);
                    let ret = em.setjmp_ret(sj);
                    em.call(rt.rt.reentry, &mut [ret, d, em.i32c(i as u64)], sj);
                }
            } else if n.landing_pad {
                let pad = n
                    .instrs
                    .iter()
                    .find(|v| v.opcode() == LLVMOpcode::LLVMLandingPad);
                if let Some(next) = pad.and_then(|p| p.next()) {
                    em.at(next);
                    let d = depth_here(depth);
                    em.call(rt.rt.unwind, &mut [d, em.i32c(i as u64)], next);
                }
            }
        }
        for n in &cx.l.nodes {
            if let Some(term) = n
                .instrs
                .last()
                .filter(|t| t.opcode() == LLVMOpcode::LLVMRet)
            {
                if n.returns && !self.floor {
                    em.at(*term);
                    // Only a function some `Extern` site may call leaves its address: the
                    // linker resolves no other module's name to an internal one, so no
                    // caller's `tally.wtrace.back` looks for it (and one that is not traced
                    // can never find its own address there, whoever stored last).
                    let own = match em.func.linkage() {
                        LLVMLinkage::LLVMInternalLinkage | LLVMLinkage::LLVMPrivateLinkage => None,
                        _ => unsafe { own_address(em.func) },
                    }
                    .unwrap_or_else(|| unsafe { c::LLVMConstNull(cx.g.ptrt) });
                    let acc = rt.acc_here(&em);
                    em.call(rt.rt.ret, &mut [acc, own], *term);
                }
            }
        }
        // 5. The function's fixed-size allocas of its original entry block first in its first
        // block: the inlined entry (`tally.wtrace.enter`) splits the block it is in, which
        // would leave them after it, dynamic (a frame that grows: deep recursion overflows).
        if let Some(orig) = cx.l.nodes.first().map(|n| n.start.parent()) {
            hoist_allocas(&em, orig);
        }
        // 6. The local accumulator is saved and loaded around calls and at `ret`.
        rt.save_and_load_around_calls(&em);
        // 7. And the appends' checks of room shared (which needs the loads in place).
        rt.hoist_checks(&em);
        // 8. One accumulator pointer where the entry's dominates.
        rt.share_acc(&em);
        unsafe { c::LLVMDisposeBuilder(em.b) };
        if self.floor {
            // (Said in the metadata, so that the reader refuses the trace in one line.)
            return Emitted {
                split: self.sites.split(),
                tagged: self.sites.tagged(),
                wtrace: Some(untraced_meta(
                    "built with --tally-trace-floor, a measurement whose trace cannot be \
                     regenerated"
                        .into(),
                )),
                needs_mem2reg: true,
                ..Emitted::default()
            };
        }
        Emitted {
            split: self.sites.split(),
            tagged: self.sites.tagged(),
            wtrace: Some(WtraceMeta {
                calls: self
                    .calls
                    .iter()
                    .map(|cs| {
                        cs.iter()
                            .map(|c| match &c.callee {
                                WCallee::Extern { name, .. } => WCallee::Extern {
                                    name: name.clone(),
                                    index: c
                                        .instr
                                        .called_function()
                                        .and_then(|f| extern_index(cx.g.module, f))
                                        .expect("an external callee in the module's table"),
                                },
                                other => other.clone(),
                            })
                            .collect()
                    })
                    .collect(),
                witness: self
                    .plan
                    .witness
                    .values()
                    .iter()
                    .map(|w| w.map(|w| (w.value, w.bits)))
                    .collect(),
                read_bits: self.plan.read_bits.values().to_vec(),
                unwind: self
                    .unwind
                    .iter()
                    .filter(|(_, &u)| u)
                    .map(|(e, _)| e.into())
                    .collect(),
                branch: self.plan.kind == PlanKind::Branch,
                paths: self.paths.as_ref().map(|p| p.numbering),
                untraced: None,
            }),
            // (always-inline: the records' `tally.wtrace.put`)
            needs_mem2reg: true,
            ..Emitted::default()
        }
    }
}

/// Moves the allocas of constant size in block `orig` and in the function's first block to the
/// start of the first block, in order.
fn hoist_allocas(em: &Emitter, orig: Bb) {
    let Some(first) = em.func.first_block() else {
        return;
    };
    let blocks = if first == orig {
        vec![first]
    } else {
        vec![first, orig]
    };
    let allocas: Vec<Val> = blocks
        .iter()
        .flat_map(|bb| bb.instructions())
        .filter(|v| {
            v.opcode() == LLVMOpcode::LLVMAlloca
                && !unsafe { c::LLVMIsAConstantInt(c::LLVMGetOperand(v.0, 0)) }.is_null()
        })
        .collect();
    let Some(at) = first.first() else { return };
    for a in allocas {
        if a == at {
            continue;
        }
        em.at(at);
        unsafe {
            c::LLVMInstructionRemoveFromParent(a.0);
            c::LLVMInsertIntoBuilder(em.b, a.0);
        }
    }
}

/// A function trace mode cannot trace: it writes a "lost" record at entry, which regeneration
/// reads as "not exact past this point" (its callers treat it as an unknown callee).
struct Untraced(String);

impl FnPlan for Untraced {
    fn num_counters(&self) -> usize {
        0
    }

    fn emit(&self, cx: &EmitCx) -> Emitted {
        let rt = Runtime::declare(cx.g);
        let em = Emitter {
            g: cx.g,
            b: unsafe { c::LLVMCreateBuilderInContext(cx.g.ctx) },
            fn_scope: ir::subprogram(cx.func),
            func: cx.func,
        };
        if let Some(first) = cx.l.nodes.first().map(|n| n.start) {
            em.at(first);
            Rec {
                rt: &rt,
                local: None,
                through: false,
                shared: false,
                acc: std::cell::Cell::new(std::ptr::null_mut()),
                widest: Default::default(),
            }
            .put_const(&em, LOST, first);
        }
        unsafe { c::LLVMDisposeBuilder(em.b) };
        Emitted {
            wtrace: Some(untraced_meta(self.0.clone())),
            needs_mem2reg: true,
            ..Emitted::default()
        }
    }
}

/// Writes the entry record and the witnesses.
struct Log<'a> {
    rec: &'a Rec<'a>,
    function: u32,
    /// Use `tally.wtrace.enter.again` ([`may_be_announced`]).
    announced: bool,
    witness: &'a IdVec<EdgeId, Option<witness::Witness>>,
    /// Functions with `setjmp`: the alloca keeping the activation's depth (set by `enter`).
    depth: Option<LLVMValueRef>,
    /// `--tally-trace-floor`: no entry, only the accumulator pointer.
    floor: bool,
}

impl Log<'_> {
    fn put(&self, em: &Emitter, e: EdgeId, near: Val) {
        if let Some(w) = self.witness[e].filter(|w| w.bits > 0) {
            // The value is masked here, at compile time.
            let bits = u64::from(w.bits);
            let value = u64::from(w.value) & ((1u64 << bits) - 1);
            self.rec.put_const(em, (value, bits), near);
        }
    }
}

impl SiteAction for Log<'_> {
    fn enter(&mut self, em: &Emitter, entry_first: Val) {
        let empty = cname("");
        let own = unsafe { own_address(em.func) };
        // (A null `self`, always announced, goes to the runtime; see `inline_fns`.)
        let enter = match own {
            _ if self.floor => self.rec.rt.enter_floor,
            Some(_) if self.announced => self.rec.rt.enter_again,
            Some(_) => self.rec.rt.enter_inline,
            None => self.rec.rt.enter,
        };
        let mut args = [
            self.rec.rt.slot,
            em.g.counters,
            em.i32c(u64::from(self.function)),
            own.unwrap_or_else(|| unsafe { c::LLVMConstNull(em.g.ptrt) }),
        ];
        unsafe {
            let call =
                c::LLVMBuildCall2(em.b, enter.1, enter.0, args.as_mut_ptr(), 4, empty.as_ptr());
            Val(call).set_debug_loc(em.call_loc(entry_first));
            // The inline entries return the accumulator pointer (no second TLS load after
            // them); the runtime's returns the depth.
            let inline = own.is_some() || self.floor;
            let acc = if inline { call } else { acc_ptr(em.g, em.b) };
            if self.rec.local.is_some() {
                self.rec.acc.set(acc);
            }
            if self.depth.is_some() {
                let depth = if inline {
                    let at = field_of(em.g, em.b, acc, "depth");
                    c::LLVMBuildLoad2(em.b, em.g.i32t, at, empty.as_ptr())
                } else {
                    call
                };
                let n = cname("tally.depth");
                let slot = c::LLVMBuildAlloca(em.b, em.g.i32t, n.as_ptr());
                c::LLVMBuildStore(em.b, depth, slot);
                self.depth = Some(slot);
            }
        }
    }

    fn at_site(&self, em: &Emitter, probe: Probe, _idx: u64) {
        let Probe::Edge(e) = probe else {
            unreachable!("trace mode witnesses edges, not {probe:?}")
        };
        let here = unsafe { Val(c::LLVMGetBasicBlockTerminator(c::LLVMGetInsertBlock(em.b))) };
        let near = if here.is_null() {
            Val(unsafe { c::LLVMGetFirstInstruction(c::LLVMGetInsertBlock(em.b)) })
        } else {
            here
        };
        self.put(em, e.edge(), near);
    }

    fn at_reentry(&self, _em: &Emitter, _probe: Probe, _idx: u64, _sj: Val) {
        // Re-entry edges carry no witness (the landing writes its own record).
    }

    fn at_tag_target(&self, em: &Emitter, l: &Lowered, t: &TagTarget, tag: LLVMValueRef, _: u64) {
        // The witness of incoming edge `tag`, from constant tables (width 0: nothing).
        let empty = cname("");
        let g = em.g;
        let start = l.nodes[t.node.index()].start;
        let preds = l.cfg.preds(t.node);
        let table = |f: &dyn Fn(Option<witness::Witness>) -> u64| unsafe {
            let mut vals: Vec<LLVMValueRef> = preds
                .iter()
                .map(|&e| em.i32c(f(self.witness[e].filter(|w| w.bits > 0))))
                .collect();
            let arr = c::LLVMConstArray2(g.i32t, vals.as_mut_ptr(), vals.len() as u64);
            let n = cname("__tally_wtrace_preds");
            let table = c::LLVMAddGlobal(g.module, c::LLVMTypeOf(arr), n.as_ptr());
            c::LLVMSetLinkage(table, LLVMLinkage::LLVMPrivateLinkage);
            c::LLVMSetInitializer(table, arr);
            c::LLVMSetGlobalConstant(table, 1);
            table
        };
        let values = table(&|w| w.map_or(0, |w| u64::from(w.value)));
        let widths = table(&|w| w.map_or(0, |w| u64::from(w.bits)));
        unsafe {
            let v = c::LLVMBuildLoad2(em.b, g.i32t, tag, empty.as_ptr());
            let load = |table| {
                let mut idx = [v];
                let p = c::LLVMBuildInBoundsGEP2(
                    em.b,
                    g.i32t,
                    table,
                    idx.as_mut_ptr(),
                    1,
                    empty.as_ptr(),
                );
                c::LLVMBuildLoad2(em.b, g.i32t, p, empty.as_ptr())
            };
            // (Table values are below 2^width; width 0 appends nothing.)
            let (value, bits) = (load(values), load(widths));
            let value = c::LLVMBuildZExt(em.b, value, g.i64t, empty.as_ptr());
            let bits = c::LLVMBuildZExt(em.b, bits, g.i64t, empty.as_ptr());
            let widest = preds
                .iter()
                .filter_map(|&e| self.witness[e].map(|w| u64::from(w.bits)))
                .max()
                .unwrap_or(0);
            self.rec.widest.borrow_mut().insert(bits, widest);
            self.rec.put(em, value, bits, start);
        }
    }
}

/// Gives a traced function called directly within its module a second entry: its code moves
/// to an internal body (`<name>.tally.body`) that this module's traced direct call sites call,
/// and its symbol becomes a small public entry that does what the entry did (the direct
/// flag's test, `Enter`, the predicted `Enter`) and tail-calls the body. A body is entered
/// only from traced code that knows it: its entry counts the depth and nothing else
/// (`tally.wtrace.enter.body`), and the call site only clears the flag
/// (`tally.wtrace.direct.body`); 8 instructions a call fewer (the flag's store, its load and
/// compare with the function's address, the module's slot, the flag cleared), and a
/// function whose every use is such a call (internal, address not taken) needs no public
/// entry. The records, the trace and the reader are unchanged (the same records at the same
/// points); functions reached from other modules or through pointers pay a jump more.
/// Functions with a variable argument list, at -O0, in a comdat, whose blocks' addresses are
/// taken, that another image may interpose (their calls must stay calls of their name), that
/// return twice or have entry hooks ([`ENTRY_HOOKS`]) keep one entry.
pub(crate) unsafe fn split_entries(g: &crate::emit::Globals) {
    let m = g.module;
    let named = |n: &str| {
        let f = c::LLVMGetNamedFunction(m, cname(n).as_ptr());
        (!f.is_null()).then_some(f)
    };
    let (Some(body_entry), Some(direct_body)) = (
        named("tally.wtrace.enter.body"),
        named("tally.wtrace.direct.body"),
    ) else {
        return;
    };
    let entries: Vec<(LLVMValueRef, LLVMValueRef)> = [
        ("tally.wtrace.enter", "tally.wtrace.enter.wrap"),
        ("tally.wtrace.enter.again", "tally.wtrace.enter.again.wrap"),
    ]
    .iter()
    .filter_map(|(e, w)| Some((named(e)?, named(w)?)))
    .collect();
    let direct = named("tally.wtrace.direct");
    let users = |v: LLVMValueRef| {
        let mut out = Vec::new();
        let mut u = c::LLVMGetFirstUse(v);
        while !u.is_null() {
            out.push(Val(c::LLVMGetUser(u)));
            u = c::LLVMGetNextUse(u);
        }
        out
    };
    // Each traced direct call site: the `tally.wtrace.direct` helper before it, and the call;
    // by callee, in the order of the module's functions (the public entries are emitted in
    // that order: the same input gives the same object).
    let mut sites: HashMap<LLVMValueRef, Vec<(Val, Val)>> = HashMap::new();
    for d in direct.map(users).unwrap_or_default() {
        if d.opcode() != LLVMOpcode::LLVMCall || d.num_operands() < 3 {
            continue;
        }
        let callee = d.operand(1);
        let mut next = d.next();
        while let Some(v) = next {
            if v.is_call_like() && v.called_value() == callee {
                sites.entry(callee.0).or_default().push((d, v));
                break;
            }
            next = v.next();
        }
    }
    let mut order = Vec::new();
    let mut f = c::LLVMGetFirstFunction(m);
    while !f.is_null() {
        if sites.contains_key(&f) {
            order.push(f);
        }
        f = c::LLVMGetNextFunction(f);
    }
    for f in order {
        let calls = &sites[&f];
        let fv = Val(f);
        if c::LLVMIsAFunction(f).is_null() || fv.is_declaration() {
            continue;
        }
        // The inline entry of `f` (first in its first block) and its public counterpart.
        let Some((entry_call, wrap_fn)) = fv.first_block().and_then(|b| {
            b.instructions().into_iter().find_map(|v| {
                if v.opcode() != LLVMOpcode::LLVMCall {
                    return None;
                }
                let callee = v.called_value().0;
                entries
                    .iter()
                    .find(|(e, _)| *e == callee)
                    .map(|&(_, w)| (v, w))
            })
        }) else {
            continue;
        };
        let fty = c::LLVMGlobalGetValueType(f);
        // (A call of a definition another image may interpose must stay a call of its name.)
        if c::LLVMIsFunctionVarArg(fty) != 0
            || (fv.linkage() == LLVMLinkage::LLVMExternalLinkage && interposable(fv))
            || fv.fn_has_attr(ir::attr_kind("optnone"))
            || fv.fn_has_attr(ir::attr_kind("naked"))
            || fv.fn_has_attr(ir::attr_kind("returns_twice"))
            || ENTRY_HOOKS.iter().any(|k| {
                !c::LLVMGetStringAttributeAtIndex(
                    f,
                    llvm_sys::LLVMAttributeFunctionIndex,
                    k.as_ptr().cast(),
                    k.len() as u32,
                )
                .is_null()
            })
            || c::LLVMHasPrefixData(f) != 0
            || c::LLVMHasPrologueData(f) != 0
            || !llvm_sys::comdat::LLVMGetComdat(f).is_null()
            || users(f)
                .iter()
                .any(|u| !c::LLVMIsABlockAddress(u.0).is_null())
        {
            continue;
        }
        // Uses other than these calls, the helpers' arguments: a public entry is needed.
        let site_calls: Vec<LLVMValueRef> = calls.iter().map(|(_, v)| v.0).collect();
        let helper_arg = |u: Val| {
            u.opcode() == LLVMOpcode::LLVMCall
                && u.called_function()
                    .is_some_and(|h| h.name().starts_with("tally.wtrace."))
                && (0..u.num_operands() - 1).any(|i| u.operand(i).0 == f)
                && u.called_value().0 != f
        };
        let internal = matches!(
            fv.linkage(),
            LLVMLinkage::LLVMInternalLinkage | LLVMLinkage::LLVMPrivateLinkage
        );
        // (A site that also passes `f` as an argument takes its address.)
        let site = |u: Val| {
            site_calls.contains(&u.0) && (0..u.num_operands() - 1).all(|i| u.operand(i).0 != f)
        };
        let public = !internal || users(f).into_iter().any(|u| !site(u) && !helper_arg(u));
        if public {
            public_entry(g, f, entry_call, wrap_fn);
            for &call in &site_calls {
                set_callee(Val(call), f);
            }
        }
        // Each site's flag becomes the body's, right before the call (after any save of the
        // caller's copy of the word: the runtime's entry may be made there).
        let db_ty = c::LLVMGlobalGetValueType(direct_body);
        let b = c::LLVMCreateBuilderInContext(g.ctx);
        for (d, call) in calls {
            c::LLVMPositionBuilderBefore(b, call.0);
            let mut args = [
                d.operand(0).0,
                d.operand(1).0,
                d.operand(2).0,
                entry_call.operand(0).0,
                entry_call.operand(1).0,
                entry_call.operand(2).0,
            ];
            let nb = c::LLVMBuildCall2(b, db_ty, direct_body, args.as_mut_ptr(), 6, c"".as_ptr());
            Val(nb).set_debug_loc(d.debug_loc());
            c::LLVMInstructionEraseFromParent(d.0);
        }
        c::LLVMDisposeBuilder(b);
        set_callee(entry_call, body_entry);
    }
}

extern "C" {
    /// `shim/globals.cpp`: `to` is dso_local if `from` is.
    fn tally_copy_dso_local(from: LLVMValueRef, to: LLVMValueRef);
}

/// Function attributes that put code at a function's entry (`-pg`, `-finstrument-functions`,
/// `-fpatchable-function-entry`, `-mfentry`): a function with one keeps one entry, so that the
/// hook runs once a call.
const ENTRY_HOOKS: [&str; 5] = [
    "instrument-function-entry",
    "instrument-function-entry-inlined",
    "instrument-function-exit",
    "patchable-function-entry",
    "fentry-call",
];

/// The metadata of a function whose trace cannot be regenerated, and why: no plan, no calls.
fn untraced_meta(why: String) -> WtraceMeta {
    WtraceMeta {
        calls: Vec::new(),
        witness: Vec::new(),
        read_bits: Vec::new(),
        unwind: Vec::new(),
        branch: false,
        paths: None,
        untraced: Some(why),
    }
}

/// Points call `call` at `f` (a helper of the same type).
unsafe fn set_callee(call: Val, f: LLVMValueRef) {
    let n = c::LLVMGetNumOperands(call.0);
    c::LLVMSetOperand(call.0, (n - 1) as u32, f);
}

/// Makes `f` the body of a new public function that takes its name, linkage, attributes and
/// every use (`entry_call`, `f`'s inline entry, gives the public entry's arguments; `wrap` is
/// its `.wrap` counterpart).
unsafe fn public_entry(
    g: &crate::emit::Globals,
    f: LLVMValueRef,
    entry_call: Val,
    wrap: LLVMValueRef,
) {
    let m = g.module;
    let fty = c::LLVMGlobalGetValueType(f);
    let w = c::LLVMAddFunction(m, c"".as_ptr(), fty);
    // Attributes: the function's, its return value's and its parameters'.
    let nparams = c::LLVMCountParams(f);
    let indices: Vec<u32> = [llvm_sys::LLVMAttributeFunctionIndex, 0]
        .into_iter()
        .chain(1..=nparams)
        .collect();
    let attrs_at = |idx: u32| {
        let n = c::LLVMGetAttributeCountAtIndex(f, idx);
        let mut v: Vec<LLVMAttributeRef> = vec![std::ptr::null_mut(); n as usize];
        if n > 0 {
            c::LLVMGetAttributesAtIndex(f, idx, v.as_mut_ptr());
        }
        v
    };
    for &idx in &indices {
        for a in attrs_at(idx) {
            c::LLVMAddAttributeAtIndex(w, idx, a);
        }
    }
    c::LLVMSetFunctionCallConv(w, c::LLVMGetFunctionCallConv(f));
    c::LLVMSetLinkage(w, c::LLVMGetLinkage(f));
    c::LLVMSetVisibility(w, c::LLVMGetVisibility(f));
    c::LLVMSetDLLStorageClass(w, c::LLVMGetDLLStorageClass(f));
    c::LLVMSetUnnamedAddress(w, c::LLVMGetUnnamedAddress(f));
    let section = c::LLVMGetSection(f);
    if !section.is_null() {
        c::LLVMSetSection(w, section);
    }
    c::LLVMSetAlignment(w, c::LLVMGetAlignment(f));
    tally_copy_dso_local(f, w);
    // Metadata other than the debug information (which stays with the code).
    let mut n = 0usize;
    let md = c::LLVMGlobalCopyAllMetadata(f, &mut n);
    for i in 0..n as u32 {
        let kind = c::LLVMValueMetadataEntriesGetKind(md, i);
        if kind != 0 {
            c::LLVMGlobalSetMetadata(w, kind, c::LLVMValueMetadataEntriesGetMetadata(md, i));
        }
    }
    if !md.is_null() {
        c::LLVMDisposeValueMetadataEntries(md);
    }
    // Every use of `f` is now `w`'s (callers restored by the caller of this function), and
    // the names change places.
    c::LLVMReplaceAllUsesWith(f, w);
    let mut len = 0usize;
    let name = std::ffi::CStr::from_ptr(c::LLVMGetValueName2(f, &mut len))
        .to_bytes()
        .to_vec();
    let body = [name.as_slice(), b".tally.body"].concat();
    c::LLVMSetValueName2(f, body.as_ptr().cast(), body.len());
    c::LLVMSetValueName2(w, name.as_ptr().cast(), name.len());
    c::LLVMSetLinkage(f, LLVMLinkage::LLVMInternalLinkage);
    c::LLVMSetVisibility(f, llvm_sys::LLVMVisibility::LLVMDefaultVisibility);
    c::LLVMSetDLLStorageClass(f, llvm_sys::LLVMDLLStorageClass::LLVMDefaultStorageClass);
    c::LLVMSetUnnamedAddress(f, llvm_sys::LLVMUnnamedAddr::LLVMGlobalUnnamedAddr);
    // The public entry: the entry's tests, then the body. The usual case (announced by a
    // traced caller of another module, the module has its slot) is tested here and tail-calls
    // the body on a path of its own, which needs no register saved; the rest is the `.wrap`
    // helper's (its first test again), then the same tail call.
    let b = c::LLVMCreateBuilderInContext(g.ctx);
    let block = |name: &std::ffi::CStr| c::LLVMAppendBasicBlockInContext(g.ctx, w, name.as_ptr());
    let (bb, fast, slow) = (block(c"entry"), block(c"silent"), block(c"announced"));
    c::LLVMPositionBuilderAtEnd(b, bb);
    let mut args: Vec<LLVMValueRef> = (0..4).map(|i| entry_call.operand(i).0).collect();
    let a = acc_ptr(g, b);
    let flag_p = field_of(g, b, a, "direct");
    let flag = c::LLVMBuildLoad2(b, g.ptrt, flag_p, c"".as_ptr());
    let eq = llvm_sys::LLVMIntPredicate::LLVMIntEQ;
    let mine = c::LLVMBuildICmp(b, eq, flag, args[3], c"".as_ptr());
    let slot = c::LLVMBuildLoad2(b, g.i32t, args[0], c"".as_ptr()); // (the module's first field)
    let zero = c::LLVMConstInt(g.i32t, 0, 0);
    let ne = llvm_sys::LLVMIntPredicate::LLVMIntNE;
    let has = c::LLVMBuildICmp(b, ne, slot, zero, c"".as_ptr());
    let ok = c::LLVMBuildAnd(b, mine, has, c"".as_ptr());
    let br = c::LLVMBuildCondBr(b, ok, fast, slow);
    ir::set_branch_weights(g.ctx, br, &[1 << 10, 1]);
    let tail = |b| {
        let mut params: Vec<LLVMValueRef> = (0..nparams).map(|i| c::LLVMGetParam(w, i)).collect();
        let call = c::LLVMBuildCall2(b, fty, f, params.as_mut_ptr(), nparams, c"".as_ptr());
        c::LLVMSetInstructionCallConv(call, c::LLVMGetFunctionCallConv(f));
        for &idx in &indices[1..] {
            for a in attrs_at(idx) {
                c::LLVMAddCallSiteAttribute(call, idx, a);
            }
        }
        c::LLVMSetTailCallKind(call, llvm_sys::LLVMTailCallKind::LLVMTailCallKindMustTail);
        if c::LLVMGetTypeKind(c::LLVMGetReturnType(fty)) == llvm_sys::LLVMTypeKind::LLVMVoidTypeKind
        {
            c::LLVMBuildRetVoid(b);
        } else {
            c::LLVMBuildRet(b, call);
        }
    };
    c::LLVMPositionBuilderAtEnd(b, fast);
    c::LLVMBuildStore(b, c::LLVMConstNull(g.ptrt), flag_p);
    tail(b);
    c::LLVMPositionBuilderAtEnd(b, slow);
    let wrap_ty = c::LLVMGlobalGetValueType(wrap);
    c::LLVMBuildCall2(b, wrap_ty, wrap, args.as_mut_ptr(), 4, c"".as_ptr());
    tail(b);
    c::LLVMDisposeBuilder(b);
}
