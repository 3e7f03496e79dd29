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
//! where unwinding or a `longjmp` landed exactly as there, `crate::frame`), with a path site
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

use super::path::Fallback;
use super::{Counting, EmitCx, Emitted, FnPlan, ModeImpl, PlanCx};
use crate::emit::{cname, Emitter, Globals};
use crate::frame::{frame_alloca, frame_exits, frame_plan, frame_push};
use crate::ir::{self, Val};
use crate::lower::{EdgeIr, Lowered};
use crate::options::{IpathCuts, HOT_RESTARTS};
use crate::sites::{direct_site, Realize};
use crate::surgery::split_edge;
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMIntPredicate, LLVMLinkage, LLVMOpcode, LLVMTailCallKind};
use std::collections::HashMap;
use tally_format::{abi, IpathArray, IpathCall, IpathFunction, IpathMeta, PathMeta, PathStorage};
use tally_graph::ipaths::{
    CallAction, EdgeAction, FnId, FunctionPlan, Heat, IpNumbering, Lin, Mode,
};
use tally_graph::{EdgeId, IdVec, NodeId};

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
            counting: Counting(super::edge::plan(cx)),
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

/// The call instructions of a function that are call sites, in site order.
fn call_insts(l: &Lowered) -> Vec<(NodeId, u32, Val)> {
    let mut out = Vec::new();
    for (i, node) in l.nodes.iter().enumerate() {
        for (pos, &v) in node.instrs.iter().enumerate() {
            let is_call = matches!(v.opcode(), LLVMOpcode::LLVMCall | LLVMOpcode::LLVMInvoke);
            if is_call
                && !v.calls_inline_asm()
                && v.called_function().is_none_or(|f| f.intrinsic_id() == 0)
            {
                out.push((NodeId::new(i), pos as u32, v));
            }
        }
    }
    out
}

/// Why function `l` cannot be in the set, if it cannot.
fn ineligible(l: &Lowered) -> Option<&'static str> {
    for node in &l.nodes {
        for &v in &node.instrs {
            if v.opcode() == LLVMOpcode::LLVMCallBr {
                return Some("it has a callbr");
            }
            if v.opcode() == LLVMOpcode::LLVMCall
                && v.tail_kind() == LLVMTailCallKind::LLVMTailCallKindMustTail
            {
                return Some("it has a musttail call");
            }
        }
    }
    for (e, _) in l.cfg.edges() {
        if let EdgeIr::Succ { .. } = l.edges[e.index()] {
            if direct_site(l, e).is_none() {
                return Some("an edge can be neither split nor placed at one of its ends");
            }
        }
    }
    None
}

fn is_local(f: Val) -> bool {
    matches!(
        f.linkage(),
        LLVMLinkage::LLVMInternalLinkage | LLVMLinkage::LLVMPrivateLinkage
    )
}

fn num_uses(f: Val) -> usize {
    let mut n = 0;
    let mut u = unsafe { c::LLVMGetFirstUse(f.0) };
    while !u.is_null() {
        n += 1;
        u = unsafe { c::LLVMGetNextUse(u) };
    }
    n
}

/// The estimated executions of each edge of `l`'s graph per call of the function, for the
/// cut rule's heat ([`tally_graph::ipaths::Heat`]): measured counts (`--tally-weights`)
/// divided by the function's calls when the profile has the function, else LLVM's static
/// estimate ([`crate::estimate`]). Must run before the function is changed.
fn call_weights(
    fv: Val,
    l: &Lowered,
    measured: Option<&crate::options::Weights>,
) -> IdVec<EdgeId, f64> {
    let counts = measured
        .and_then(|w| w.get(&(fv.name(), l.cfg.shape_hash())))
        .filter(|c| c.len() == l.cfg.num_edges());
    match counts {
        Some(c) => {
            let calls = c[l.cfg.entry_edge().index()];
            IdVec::from_vec(
                c.iter()
                    .map(|&x| {
                        if calls == 0 {
                            0.0
                        } else {
                            x as f64 / calls as f64
                        }
                    })
                    .collect(),
            )
        }
        None => crate::estimate::estimated_weights(fv, l),
    }
}

/// Builds the set, numbers it and plans each member.
fn plan_module(
    funcs: &[(Val, &Lowered)],
    piecewise: bool,
    cuts: IpathCuts,
    weights: Option<&crate::options::Weights>,
) -> ModulePlan {
    let members: Vec<usize> = (0..funcs.len())
        .filter(|&i| ineligible(funcs[i].1).is_none())
        .collect();
    let fn_of: HashMap<LLVMValueRef, usize> = members
        .iter()
        .enumerate()
        .map(|(k, &i)| (funcs[i].0 .0, k))
        .collect();
    // Functions that end with a `tail` call after their return's code: whatever that call
    // does (call back into the set, exit, longjmp) happens after the activation has returned
    // (trace modes log the return first), while its caller would still wait in a direct call.
    // Such functions, and those with landing pads (a `resume` leaves through the caller), are
    // only ever called by summary edges: the caller's path waits at the call, and the callee
    // is a root.
    let tail_ret: Vec<bool> = members
        .iter()
        .map(|&i| {
            let l = funcs[i].1;
            call_insts(l).iter().any(|&(n, _, v)| {
                let node = &l.nodes[n.index()];
                node.returns && node.end == v
            })
        })
        .collect();
    let mut direct_uses = vec![0usize; members.len()];
    let mut sites = Vec::with_capacity(members.len());
    let mut metas = Vec::with_capacity(members.len());
    for &i in &members {
        let (_, l) = funcs[i];
        let insts = call_insts(l);
        let mut calls = Vec::with_capacity(insts.len());
        for &(n, pos, v) in &insts {
            let node = &l.nodes[n.index()];
            let ends_return = node.returns && node.end == v;
            let invoke = v.opcode() == LLVMOpcode::LLVMInvoke;
            let callee = v
                .called_function()
                .filter(|&f| is_local(f) && !ends_return && !invoke)
                .and_then(|f| fn_of.get(&f.0).copied())
                .filter(|&k| !funcs[members[k]].1.has_landing_pads && !tail_ret[k]);
            if let Some(k) = callee {
                direct_uses[k] += 1;
            }
            calls.push(IpathCall {
                block: n.into(),
                position: pos,
                callee: callee.map(|k| k as u32),
                context_cut: None,
            });
        }
        sites.push(insts);
        metas.push(calls);
    }
    let mut ip_functions = Vec::with_capacity(members.len());
    for (k, &i) in members.iter().enumerate() {
        ip_functions.push(IpathFunction {
            function: i as u32,
            from_outside: false,
            calls: std::mem::take(&mut metas[k]),
            cuts: Vec::new(),
            array: None,
        });
    }
    let mut out = ModulePlan {
        plans: Vec::new(),
        failure: None,
        meta: None,
    };
    let Some(&owner) = members.first() else {
        return out;
    };
    let mode = if piecewise {
        Mode::Piecewise
    } else {
        Mode::Context
    };
    // Number the set; then cut the calls that `context_cuts` names and number it again, until
    // it names none (each round only removes direct calls, so this ends).
    let heat_weights: Vec<IdVec<EdgeId, f64>> = match cuts {
        IpathCuts::Hot => members
            .iter()
            .map(|&i| call_weights(funcs[i].0, funcs[i].1, weights))
            .collect(),
        IpathCuts::All | IpathCuts::Off => Vec::new(),
    };
    let num = loop {
        for (k, f) in ip_functions.iter_mut().enumerate() {
            let fv = funcs[members[k]].0;
            f.from_outside = !is_local(fv) || num_uses(fv) != direct_uses[k];
        }
        let functions = ip_functions
            .iter()
            .zip(&members)
            .map(|(f, &i)| f.to_function(funcs[i].1.cfg.clone()))
            .collect();
        let num = match IpNumbering::new_limited(functions, mode, LIMIT) {
            Ok(n) if n.fits_u64() => n,
            Ok(_) => {
                out.failure = Some("the numbering does not fit 64 bits".into());
                return out;
            }
            Err(e) => {
                out.failure = Some(e.to_string());
                return out;
            }
        };
        let found = match cuts {
            IpathCuts::Off => Ok(Vec::new()),
            IpathCuts::All => num.context_cuts(super::path::ARRAY_PATHS, CONTEXT_CUT_PATHS),
            IpathCuts::Hot => num.context_cuts_where(
                super::path::ARRAY_PATHS,
                CONTEXT_CUT_PATHS,
                Some(&Heat {
                    weights: &heat_weights,
                    min_restarts: HOT_RESTARTS,
                }),
            ),
        };
        let cut = match found {
            Ok(c) => c,
            Err(e) => {
                out.failure = Some(e.to_string());
                return out;
            }
        };
        if cut.is_empty() {
            break num;
        }
        for (f, site) in cut {
            let call = &mut ip_functions[f.index()].calls[site as usize];
            let q = call.callee.take().expect("context cuts are direct calls");
            call.context_cut = Some(q);
            direct_uses[q as usize] -= 1;
        }
    };
    let mut plans = Vec::with_capacity(members.len());
    for k in 0..members.len() {
        match num.plan(FnId::new(k)) {
            Ok(p) => plans.push(p),
            Err(e) => {
                out.failure = Some(e.to_string());
                return out;
            }
        }
    }
    let linked = linked(&plans);
    let can_be_root: Vec<bool> = plans.iter().map(|p| p.entry.root_value.is_some()).collect();
    // Functions that may be roots and have few paths of their own (path mode's threshold)
    // count those in the counter array: the range of their own root (and `GEntry`) edges. An
    // isolated function counts no other path; any other one checks the range first (its
    // activations under another root, and its callees under it, count in the table).
    for (k, f) in ip_functions.iter_mut().enumerate() {
        let r = num.own_paths(FnId::new(k));
        let len = r.end - r.start;
        if can_be_root[k] && len > 0 && len <= super::path::ARRAY_PATHS {
            f.array = Some(IpathArray {
                first: r.start as u64,
                len: len as u32,
            });
        }
    }
    // The set's path tables: one per `SET_PER_BANK` functions, a power of two up to
    // `MAX_BANKS` (each has a home table of `PATH_HOME_SLOTS` slots, 16 KiB).
    let banks = (members.len() / SET_PER_BANK)
        .next_power_of_two()
        .clamp(1, MAX_BANKS) as u32;
    for ((k, &i), plan) in members.iter().enumerate().zip(plans) {
        let callees = ip_functions[k]
            .calls
            .iter()
            .map(|c| {
                c.callee
                    .map(|q| (funcs[members[q as usize]].0, can_be_root[q as usize]))
            })
            .collect();
        out.plans.push((
            i,
            Box::new(IpathPlan {
                plan,
                sites: sites[k].iter().map(|s| s.2).collect(),
                site_nodes: sites[k].iter().map(|s| s.0).collect(),
                tail_ret: sites[k]
                    .iter()
                    .map(|&(n, _, v)| {
                        let node = &funcs[i].1.nodes[n.index()];
                        node.returns && node.end == v
                    })
                    .collect(),
                callees,
                owner: owner as u32,
                piecewise,
                path_meta: (i == owner).then(|| PathMeta {
                    cuts: Vec::new(),
                    num_paths: num.total(),
                    storage: PathStorage::Hash { table: 0 },
                    numbering: num.fingerprint(),
                }),
                isolated: !linked[k],
                array: ip_functions[k].array,
                banks,
            }),
        ));
    }
    out.meta = Some(IpathMeta {
        functions: ip_functions,
        limit: LIMIT,
        total: num.total(),
        fingerprint: num.fingerprint(),
        table_owner: owner as u32,
    });
    out
}

/// Per function of the set: it makes or receives a direct call (in its plan: the numbering
/// may have demoted the call sites it was given).
fn linked(plans: &[FunctionPlan]) -> Vec<bool> {
    let mut linked = vec![false; plans.len()];
    for (k, plan) in plans.iter().enumerate() {
        for act in &plan.calls {
            if let CallAction::Direct { callee, .. } = *act {
                linked[k] = true;
                linked[callee.index()] = true;
            }
        }
    }
    linked
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

/// The runtime's thread-locals and return function.
struct Rt {
    hand_fn: LLVMValueRef,
    hand_nvc: LLVMValueRef,
    reg: LLVMValueRef,
    open: LLVMValueRef,
}

fn runtime(g: &Globals) -> Rt {
    let tls = |name: &str, ty: LLVMTypeRef| unsafe {
        let n = cname(name);
        let mut v = c::LLVMGetNamedGlobal(g.module, n.as_ptr());
        if v.is_null() {
            v = c::LLVMAddGlobal(g.module, ty, n.as_ptr());
            c::LLVMSetLinkage(v, LLVMLinkage::LLVMExternalLinkage);
            c::LLVMSetThreadLocalMode(v, crate::module::runtime_tls_model(g.module));
        }
        v
    };
    let i64t = g.i64t;
    Rt {
        hand_fn: tls(abi::IPATH_HAND_FN, g.ptrt),
        hand_nvc: tls(abi::IPATH_HAND_NVC, i64t),
        reg: tls(abi::IPATH_REG, i64t),
        open: tls(abi::IPATH_OPEN, i64t),
    }
}

struct Slots {
    reg: LLVMValueRef,
    nvc: LLVMValueRef,
    on_entry: LLVMValueRef,
    root: LLVMValueRef,
    saved_reg: LLVMValueRef,
    saved_open: LLVMValueRef,
    /// `open` at the pending summary call (piecewise).
    call_open: LLVMValueRef,
    /// An isolated function's own `open` (piecewise).
    own_open: LLVMValueRef,
}

/// The frame record (functions that may end early) and its path site (`{table, path}`).
struct Record {
    rec: LLVMValueRef,
    site: LLVMValueRef,
    site_ty: LLVMTypeRef,
}

struct Ip<'a, 'b> {
    em: &'a Emitter<'b>,
    s: Slots,
    rt: Rt,
    table: LLVMValueRef,
    home: LLVMValueRef,
    /// Piecewise: added when a root returns with no open call.
    root_exit: u128,
    /// The function is a root of the numbering (else every entry takes a handshake).
    can_be_root: bool,
    /// No direct call in or out (after demotion): [`IpathPlan::isolated`].
    isolated: Option<Isolated>,
    /// Array storage of an isolated function ([`IpathPlan::array`]): `reg` is biased by the
    /// array's first path (`bias`), so path `p` is counter `(p − first) + offset` of the
    /// module, `offset` the function's counter base.
    array_offset: Option<u64>,
    /// Array storage of any other function: `(first, len, address of its first counter)`;
    /// a path in `[first, first + len)` goes there, others to the table.
    array_checked: Option<(u64, u64, LLVMValueRef)>,
    piecewise: bool,
    /// The set's path tables ([`IpathPlan::banks`]).
    banks: u32,
    /// Subtracted from every absolute value `reg` takes (an isolated function with an array:
    /// its first path, so that `reg` is the counter index; else 0). Only constants change:
    /// the increments are differences.
    bias: u128,
}

/// What an isolated function knows statically: it is always entered as a root.
#[derive(Copy, Clone)]
struct Isolated {
    /// `Entry_global -> Entry_P`.
    root_value: u128,
    /// Piecewise: its own `open` (1 until a restart), an alloca: it makes no direct call, so
    /// the thread's `open` is nobody's business inside it.
    open: LLVMValueRef,
}

impl Ip<'_, '_> {
    fn k(&self, v: u128) -> LLVMValueRef {
        self.em.i64c(v as u64)
    }
    fn load(&self, p: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        unsafe { c::LLVMBuildLoad2(self.em.b, self.em.g.i64t, p, e.as_ptr()) }
    }
    fn store(&self, v: LLVMValueRef, p: LLVMValueRef) {
        unsafe { c::LLVMBuildStore(self.em.b, v, p) };
    }
    fn add(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        unsafe { c::LLVMBuildAdd(self.em.b, a, b, e.as_ptr()) }
    }
    fn select(&self, c_: LLVMValueRef, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        unsafe { c::LLVMBuildSelect(self.em.b, c_, a, b, e.as_ptr()) }
    }
    /// `l(nvc)` (the values fit 64 bits: `fits_u64`).
    fn lin(&self, l: Lin, nvc: LLVMValueRef) -> LLVMValueRef {
        if l.a == 0 {
            return self.k(l.b);
        }
        let e = cname("");
        let m = unsafe { c::LLVMBuildMul(self.em.b, self.k(l.a), nvc, e.as_ptr()) };
        self.add(m, self.k(l.b))
    }
    /// `nvc`: constant 1 in an isolated function of context mode (a root never changes it).
    fn nvc(&self) -> LLVMValueRef {
        match self.isolated {
            Some(_) if !self.piecewise => self.k(1),
            _ => self.load(self.s.nvc),
        }
    }
    /// `on_entry`: constant in an isolated function.
    fn on_entry(&self) -> LLVMValueRef {
        match self.isolated {
            Some(i) => self.k(i.root_value),
            None => self.load(self.s.on_entry),
        }
    }
    /// Where `open` lives: the thread's, or an isolated function's own.
    fn open(&self) -> LLVMValueRef {
        match self.isolated {
            Some(i) if self.piecewise => i.open,
            _ => self.rt.open,
        }
    }
    /// `reg += l(nvc)`.
    fn reg_add(&self, l: Lin) {
        if l == Lin::ZERO {
            return;
        }
        let nvc = self.nvc();
        let v = self.add(self.load(self.s.reg), self.lin(l, nvc));
        self.store(v, self.s.reg);
    }
    /// The address of path `p`'s counter (array storage).
    fn counter_of(&self, p: LLVMValueRef, offset: u64) -> LLVMValueRef {
        super::path::array_slot(self.em, offset, p)
    }
    fn count(&self, p: LLVMValueRef, near: Val) {
        let em = self.em;
        if let Some(offset) = self.array_offset {
            em.add_to(self.counter_of(p, offset), em.i64c(1));
            return;
        }
        if let Some((first, len, arr)) = self.array_checked {
            let f = ipath_count_fn(em.g, self.banks);
            let mut args = [self.table, self.home, p, arr, em.i64c(first), em.i64c(len)];
            em.call(f, &mut args, near);
            return;
        }
        match table_probe(em.g, self.banks) {
            (f, true) => em.call(f, &mut [self.table, self.home, p], near),
            (f, false) => em.call(f, &mut [self.table, p], near),
        }
    }
    /// Splits the block before `near` (a returning block's end) and counts path `p` on a
    /// branch if `cond` (an `i1`) holds, with the inline home-table probe.
    fn count_if(&self, cond: LLVMValueRef, p: LLVMValueRef, near: Val) {
        let em = self.em;
        let g = em.g;
        unsafe {
            let here = near.parent();
            let n1 = cname("tally.ip.count");
            let n2 = cname("tally.ip.ret");
            let count_bb = c::LLVMAppendBasicBlockInContext(g.ctx, em.func.0, n1.as_ptr());
            let rest = c::LLVMAppendBasicBlockInContext(g.ctx, em.func.0, n2.as_ptr());
            c::LLVMMoveBasicBlockAfter(count_bb, here.0);
            c::LLVMMoveBasicBlockAfter(rest, count_bb);
            // Move `near` and what follows it (the return) to `rest`: a returning block has
            // no successors, so no phi names it.
            let mut moved = Vec::new();
            let mut v = Some(near);
            while let Some(i) = v {
                moved.push(i);
                v = i.next();
            }
            c::LLVMPositionBuilderAtEnd(em.b, rest);
            for i in moved {
                c::LLVMInstructionRemoveFromParent(i.0);
                c::LLVMInsertIntoBuilder(em.b, i.0);
            }
            c::LLVMPositionBuilderAtEnd(em.b, here.0);
            c::LLVMBuildCondBr(em.b, cond, count_bb, rest);
            c::LLVMPositionBuilderAtEnd(em.b, count_bb);
            let br = c::LLVMBuildBr(em.b, rest);
            em.at(Val(br));
            self.count(p, near);
        }
    }

    fn edge(&self, a: EdgeAction, near: Val) {
        match a {
            EdgeAction::None => {}
            EdgeAction::Add(l) => self.reg_add(l),
            EdgeAction::ContextRestart { end, start } => {
                let nvc = self.nvc();
                let p = self.add(self.load(self.s.reg), self.lin(end, nvc));
                self.count(p, near);
                let r = self.add(self.on_entry(), self.lin(start, nvc));
                self.store(r, self.s.reg);
            }
            EdgeAction::PieceRestart { end, nvc: n, reg } => {
                let nvc = self.nvc();
                let p = self.add(self.load(self.s.reg), self.lin(end, nvc));
                self.count(p, near);
                self.store(self.k(0), self.open());
                self.store(self.k(n), self.s.nvc);
                self.store(self.k(reg.wrapping_sub(self.bias)), self.s.reg);
            }
            EdgeAction::Return(l) => {
                self.reg_add(l);
                if let Some(i) = self.isolated {
                    // Always a root that touched no thread-local: count here, nothing to
                    // restore (piecewise: the root exit value when a restart closed `open`).
                    let mut p = self.load(self.s.reg);
                    if self.piecewise && self.root_exit != 0 {
                        let e = cname("");
                        let o = self.load(i.open);
                        let zero = unsafe {
                            c::LLVMBuildICmp(
                                self.em.b,
                                LLVMIntPredicate::LLVMIntEQ,
                                o,
                                self.k(0),
                                e.as_ptr(),
                            )
                        };
                        let x = self.select(zero, self.k(self.root_exit), self.k(0));
                        p = self.add(p, x);
                    }
                    self.count(p, near);
                    return;
                }
                if !self.can_be_root {
                    // Always entered through the handshake: pass `reg` back, no call.
                    self.store(self.load(self.s.reg), self.rt.reg);
                    return;
                }
                // `__tally_ipath_ret` inline: a root counts its path (piecewise: with the root
                // exit value if no call is open) and restores the interrupted path's register
                // and `open`; any other activation passes its register back.
                let e = cname("");
                let b = self.em.b;
                let reg = self.load(self.s.reg);
                let open = self.load(self.rt.open);
                let root = unsafe {
                    let r = self.load(self.s.root);
                    c::LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntNE, r, self.k(0), e.as_ptr())
                };
                let mut p = reg;
                if self.root_exit != 0 {
                    let closed = unsafe {
                        c::LLVMBuildICmp(
                            b,
                            LLVMIntPredicate::LLVMIntEQ,
                            open,
                            self.k(0),
                            e.as_ptr(),
                        )
                    };
                    p = self.add(reg, self.select(closed, self.k(self.root_exit), self.k(0)));
                }
                let saved = self.load(self.s.saved_reg);
                self.store(self.select(root, saved, reg), self.rt.reg);
                let saved = self.load(self.s.saved_open);
                self.store(self.select(root, saved, open), self.rt.open);
                self.count_if(root, p, near);
            }
            // No code on the edge: the site stores before the calls carry its value, and
            // re-entries are emitted by `reentry`.
            EdgeAction::EarlyExit(_) | EdgeAction::Reentry(_) | EdgeAction::PieceReentry { .. } => {
            }
        }
    }

    /// The re-entry after setjmp call `sj` (its result is non-zero when `longjmp` came back):
    /// restart the path as the action says (`__tally_longjmp_landed` has counted the site).
    fn reentry(&self, a: EdgeAction, sj: Val) {
        let b = self.em.b;
        let e = cname("");
        let again = unsafe {
            let zero = c::LLVMConstInt(c::LLVMTypeOf(sj.0), 0, 0);
            c::LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntNE, sj.0, zero, e.as_ptr())
        };
        match a {
            EdgeAction::Reentry(start) => {
                let nvc = self.nvc();
                let r = self.add(self.on_entry(), self.lin(start, nvc));
                let cur = self.load(self.s.reg);
                self.store(self.select(again, r, cur), self.s.reg);
            }
            EdgeAction::PieceReentry { nvc, reg } => {
                let cur = self.load(self.s.reg);
                let reg = self.k(reg.wrapping_sub(self.bias));
                self.store(self.select(again, reg, cur), self.s.reg);
                let cur = self.load(self.s.nvc);
                self.store(self.select(again, self.k(nvc), cur), self.s.nvc);
                let cur = self.load(self.open());
                self.store(self.select(again, self.k(0), cur), self.open());
            }
            _ => {}
        }
    }
}

/// `internal void tally.ipath.count(ptr table, ptr home, i64 p, ptr arr, i64 first, i64 len)`
/// (always inlined, defined once per module): `arr[p - first] += 1` when `p - first < len`
/// (the function's own paths, array storage), else the table's count (the inline home-table
/// probe, or `__tally_path_count` with `--tally-atomic`).
fn ipath_count_fn(g: &Globals, banks: u32) -> (LLVMValueRef, LLVMTypeRef) {
    unsafe {
        let ctx = g.ctx;
        let (i64t, ptrt) = (g.i64t, g.ptrt);
        let voidt = c::LLVMVoidTypeInContext(ctx);
        let mut params = [ptrt, ptrt, i64t, ptrt, i64t, i64t];
        let ty = c::LLVMFunctionType(voidt, params.as_mut_ptr(), params.len() as u32, 0);
        let (f, entry) = crate::emit::inline_helper(g, "tally.ipath.count", ty);
        let Some(entry) = entry else {
            return (f, ty);
        };
        let arg = |i| c::LLVMGetParam(f, i);
        let (table, home, p, arr, first, len) = (arg(0), arg(1), arg(2), arg(3), arg(4), arg(5));
        let n = cname("");
        let bb = |s: &str| {
            let s = cname(s);
            c::LLVMAppendBasicBlockInContext(ctx, f, s.as_ptr())
        };
        let (own, other) = (bb("own"), bb("table"));
        let b = c::LLVMCreateBuilderInContext(ctx);
        c::LLVMPositionBuilderAtEnd(b, entry);
        let d = c::LLVMBuildSub(b, p, first, n.as_ptr());
        let inside = c::LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntULT, d, len, n.as_ptr());
        c::LLVMBuildCondBr(b, inside, own, other);
        c::LLVMPositionBuilderAtEnd(b, own);
        let mut idx = [d];
        let ptr = c::LLVMBuildInBoundsGEP2(b, i64t, arr, idx.as_mut_ptr(), 1, n.as_ptr());
        let one = c::LLVMConstInt(i64t, 1, 0);
        if g.atomic {
            c::LLVMBuildAtomicRMW(
                b,
                llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpAdd,
                ptr,
                one,
                llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic,
                0,
            );
        } else {
            let v = c::LLVMBuildLoad2(b, i64t, ptr, n.as_ptr());
            let v = c::LLVMBuildAdd(b, v, one, n.as_ptr());
            c::LLVMBuildStore(b, v, ptr);
        }
        c::LLVMBuildRetVoid(b);
        c::LLVMPositionBuilderAtEnd(b, other);
        match table_probe(g, banks) {
            (pf, true) => {
                let mut a = [table, home, p];
                c::LLVMBuildCall2(b, pf.1, pf.0, a.as_mut_ptr(), 3, n.as_ptr());
            }
            (pc, false) => {
                let mut a = [table, p];
                c::LLVMBuildCall2(b, pc.1, pc.0, a.as_mut_ptr(), 2, n.as_ptr());
            }
        }
        c::LLVMBuildRetVoid(b);
        c::LLVMDisposeBuilder(b);
        (f, ty)
    }
}

/// How a path is counted in the set's tables: `(function, takes the home argument)`: with
/// one table path mode's inline probe (or `__tally_path_count` with `--tally-atomic`), with
/// several `tally.ipath.probe`.
fn table_probe(g: &Globals, banks: u32) -> ((LLVMValueRef, LLVMTypeRef), bool) {
    if banks > 1 {
        return (ipath_probe_fn(g, banks), true);
    }
    match g.path_probe {
        Some(f) => (f, true),
        None => (g.path_count, false),
    }
}

/// `internal void tally.ipath.probe(ptr table0, ptr home0, i64 p)` (always inlined, once per
/// module): the set's `banks` tables (a power of two, consecutive, all the owner's) share its
/// paths by their low bits: path `p` is counted in table `p & (banks - 1)`, whose home table
/// follows table 0's at `(p & (banks - 1)) · 2 · PATH_HOME_SLOTS` words, by path mode's inline
/// probe (`__tally_path_count` with `--tally-atomic`). `banks` times the home slots of one
/// table, for sets whose hashed paths would crowd one (SQLite's amalgamation).
fn ipath_probe_fn(g: &Globals, banks: u32) -> (LLVMValueRef, LLVMTypeRef) {
    unsafe {
        let ctx = g.ctx;
        let (i64t, ptrt) = (g.i64t, g.ptrt);
        let voidt = c::LLVMVoidTypeInContext(ctx);
        let mut params = [ptrt, ptrt, i64t];
        let ty = c::LLVMFunctionType(voidt, params.as_mut_ptr(), params.len() as u32, 0);
        let (f, entry) = crate::emit::inline_helper(g, "tally.ipath.probe", ty);
        let Some(entry) = entry else {
            return (f, ty);
        };
        let (table0, home0, p) = (
            c::LLVMGetParam(f, 0),
            c::LLVMGetParam(f, 1),
            c::LLVMGetParam(f, 2),
        );
        let n = cname("");
        let b = c::LLVMCreateBuilderInContext(ctx);
        c::LLVMPositionBuilderAtEnd(b, entry);
        let mask = c::LLVMConstInt(i64t, u64::from(banks - 1), 0);
        let t = c::LLVMBuildAnd(b, p, mask, n.as_ptr());
        let mut idx = [t];
        let table =
            c::LLVMBuildInBoundsGEP2(b, g.table_ty, table0, idx.as_mut_ptr(), 1, n.as_ptr());
        let shift = c::LLVMConstInt(i64t, u64::from(4 + abi::PATH_HOME_BITS), 0);
        let mut off = [c::LLVMBuildShl(b, t, shift, n.as_ptr())];
        let i8t = c::LLVMInt8TypeInContext(ctx);
        let home = c::LLVMBuildInBoundsGEP2(b, i8t, home0, off.as_mut_ptr(), 1, n.as_ptr());
        match g.path_probe {
            Some(pf) => {
                let mut a = [table, home, p];
                c::LLVMBuildCall2(b, pf.1, pf.0, a.as_mut_ptr(), 3, n.as_ptr());
            }
            None => {
                let mut a = [table, p];
                let pc = g.path_count;
                c::LLVMBuildCall2(b, pc.1, pc.0, a.as_mut_ptr(), 2, n.as_ptr());
            }
        }
        c::LLVMBuildRetVoid(b);
        c::LLVMDisposeBuilder(b);
        (f, ty)
    }
}

/// The first instruction of `bb` that is neither a phi nor a landingpad.
fn first_non_phi(bb: ir::Bb) -> Val {
    let mut v = bb.first().expect("blocks have a terminator");
    while matches!(v.opcode(), LLVMOpcode::LLVMPHI | LLVMOpcode::LLVMLandingPad) {
        v = v.next().expect("blocks end with a terminator");
    }
    v
}

/// Piecewise, outside isolated functions: `open` saved before summary call `call` and restored
/// after it (a root abandoned inside never restored it).
fn save_open_around(p: &IpathPlan, ip: &Ip, em: &Emitter, call: Val, isolated: bool) {
    if !p.piecewise || isolated {
        return;
    }
    ip.store(ip.load(ip.rt.open), ip.s.call_open);
    let after = match call.next() {
        Some(next) => next,
        None => split_edge(em, call, 0)
            .terminator()
            .expect("split block has its branch"),
    };
    em.at(after);
    ip.store(ip.load(ip.s.call_open), ip.rt.open);
}

/// Instruments one function of the set.
fn emit(cx: &EmitCx, p: &IpathPlan) {
    let (g, l, func) = (cx.g, cx.l, cx.func);
    let em = super::path::emitter_at_entry(g, func);
    let b = em.b;
    let empty = cname("");
    let alloca = |name: &str| unsafe {
        let n = cname(name);
        c::LLVMBuildAlloca(b, g.i64t, n.as_ptr())
    };
    let s = Slots {
        reg: alloca("tally.ip.reg"),
        nvc: alloca("tally.ip.nvc"),
        on_entry: alloca("tally.ip.on_entry"),
        root: alloca("tally.ip.root"),
        saved_reg: alloca("tally.ip.saved_reg"),
        saved_open: alloca("tally.ip.saved_open"),
        call_open: alloca("tally.ip.call_open"),
        own_open: alloca("tally.ip.open"),
    };
    let record = l.may_end_early().then(|| unsafe {
        let rec = frame_alloca(&em);
        let mut f = [g.ptrt, g.i64t];
        let site_ty = c::LLVMStructTypeInContext(g.ctx, f.as_mut_ptr(), 2, 0);
        let n = cname("tally.ip.site");
        let site = c::LLVMBuildAlloca(b, site_ty, n.as_ptr());
        Record { rec, site, site_ty }
    });
    // An isolated function with an array keeps `reg` relative to the array's first path:
    // every value it holds is then a small number (the counter index), as in path mode.
    let bias = match (p.isolated, p.array) {
        (true, Some(a)) => u128::from(a.first),
        _ => 0,
    };
    let isolated = match (p.isolated, p.plan.entry.root_value) {
        (true, Some(root_value)) => Some(Isolated {
            root_value: root_value.wrapping_sub(bias),
            open: s.own_open,
        }),
        _ => None,
    };
    let last_alloca = Val(record.as_ref().map_or(s.own_open, |r| r.site));
    let (table, home) = crate::module::path_table(g, 0, p.owner);
    if p.path_meta.is_some() {
        for bank in 1..p.banks {
            crate::module::path_table(g, bank, p.owner);
        }
    }
    let ip = Ip {
        em: &em,
        s,
        rt: runtime(g),
        table,
        home,
        root_exit: p.plan.entry.root_exit_value,
        can_be_root: p.plan.entry.root_value.is_some(),
        isolated,
        array_offset: p.array.filter(|_| isolated.is_some()).map(|_| cx.base),
        array_checked: p
            .array
            .filter(|_| isolated.is_none())
            .map(|a| (a.first, u64::from(a.len), em.counter_ptr(cx.base))),
        piecewise: p.piecewise,
        banks: p.banks,
        bias,
    };

    // The frame record first (§9.2: the stack of pending paths): pushed where path mode pushes
    // it, popped at returns, told where an exception or a longjmp landed. Then what must
    // precede every call site's code at a block's start: piecewise, `open` restored at landing
    // pads (the exception left it as the abandoned activations had it), and the restart at
    // re-entries.
    if let Some(r) = &record {
        let (at, pops) = frame_plan(l);
        em.at(l.nodes[at.index()].start);
        frame_push(&em, r.rec, None);
        unsafe {
            let f0 = c::LLVMBuildStructGEP2(b, r.site_ty, r.site, 0, empty.as_ptr());
            c::LLVMBuildStore(b, ip.table, f0);
        }
        frame_exits(&em, l, r.rec, &pops);
        for node in &l.nodes {
            if node.landing_pad && p.piecewise && isolated.is_none() {
                em.at(node.start);
                ip.store(ip.load(ip.s.call_open), ip.rt.open);
            }
        }
        for (e, &act) in p.plan.edges.iter() {
            if l.edges[e.index()] == EdgeIr::Reentry {
                let node = &l.nodes[l.cfg.edge(e).dst.index()];
                let sj = node.after_setjmp.expect("a re-entry follows a setjmp call");
                em.at(node.start);
                ip.reentry(act, sj);
            }
        }
    }

    // Call sites: their code sits right before and right after the call, so code placed
    // later at a block's start or end stays outside it.
    // The node and value of the path site the last summary call stored: the following summary
    // calls of the node up to a direct call store the same (`reg` does not change inside a
    // node, and `abandon` is that of the whole run), so only the first of a run stores.
    let mut stored: Option<(NodeId, Lin)> = None;
    for (site, (&call, act)) in p.sites.iter().zip(&p.plan.calls).enumerate() {
        em.at(call);
        let node = p.site_nodes[site];
        if stored.is_some_and(|(n, _)| n != node) {
            stored = None;
        }
        match *act {
            CallAction::Summary { abandon } => unsafe {
                // An isolated function cleared the handshake at its entry and sets none.
                if isolated.is_none() {
                    c::LLVMBuildStore(b, c::LLVMConstNull(g.ptrt), ip.rt.hand_fn);
                }
                if p.tail_ret[site] {
                    continue; // the activation has returned
                }
                if let (Some(l), Some(r)) = (abandon, &record) {
                    if stored == Some((node, l)) {
                        save_open_around(p, &ip, &em, call, isolated.is_some());
                        continue;
                    }
                    stored = Some((node, l));
                    // The path that ends if the activation is abandoned in this call.
                    let nvc = ip.nvc();
                    let v = ip.add(ip.load(ip.s.reg), ip.lin(l, nvc));
                    if let Some(offset) = ip.array_offset {
                        // Its counter, as path mode's array sites.
                        c::LLVMBuildStore(b, ip.counter_of(v, offset), em.field(r.rec, 1));
                        save_open_around(p, &ip, &em, call, isolated.is_some());
                        continue;
                    }
                    let f1 = c::LLVMBuildStructGEP2(b, r.site_ty, r.site, 1, empty.as_ptr());
                    ip.store(v, f1);
                    let one = em.i64c(1);
                    let mut idx = [one];
                    let i8t = c::LLVMInt8TypeInContext(g.ctx);
                    let tagged =
                        c::LLVMBuildGEP2(b, i8t, r.site, idx.as_mut_ptr(), 1, empty.as_ptr());
                    c::LLVMBuildStore(b, tagged, em.field(r.rec, 1));
                }
                save_open_around(p, &ip, &em, call, isolated.is_some());
            },
            CallAction::Direct {
                psi_r,
                unmatched_value,
                unmatched_nvc,
                clears_site,
                ..
            } => {
                stored = None;
                if let (true, Some(r)) = (clears_site, &record) {
                    unsafe { c::LLVMBuildStore(b, c::LLVMConstNull(g.ptrt), em.field(r.rec, 1)) };
                }
                let (callee, named) = p.callees[site].expect("direct sites name their callee");
                ip.store(ip.load(ip.s.reg), ip.rt.reg);
                if named {
                    ip.store(callee.0, ip.rt.hand_fn);
                }
                let nvc = ip.load(ip.s.nvc);
                ip.store(ip.lin(psi_r, nvc), ip.rt.hand_nvc);
                if p.piecewise {
                    let o = ip.add(ip.load(ip.rt.open), ip.k(1));
                    ip.store(o, ip.rt.open);
                }
                em.at(call.next().expect("a call is not a terminator"));
                ip.store(ip.load(ip.rt.reg), ip.s.reg);
                if named {
                    unsafe { c::LLVMBuildStore(b, c::LLVMConstNull(g.ptrt), ip.rt.hand_fn) };
                }
                if p.piecewise {
                    let o = ip.load(ip.rt.open);
                    let zero = unsafe {
                        c::LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, o, ip.k(0), empty.as_ptr())
                    };
                    let r = ip.load(ip.s.reg);
                    let r2 = ip.add(r, ip.k(unmatched_value));
                    ip.store(ip.select(zero, r2, r), ip.s.reg);
                    let n = ip.select(zero, ip.k(unmatched_nvc), ip.load(ip.s.nvc));
                    ip.store(n, ip.s.nvc);
                    let o1 = unsafe { c::LLVMBuildSub(b, o, ip.k(1), empty.as_ptr()) };
                    ip.store(ip.select(zero, ip.k(0), o1), ip.rt.open);
                }
            }
        }
    }

    // Edge actions. Those at the start of a block first, as path mode does: in a block whose
    // only instruction is its terminator the start and the end are the same point.
    let at_start = |e: EdgeId| matches!(direct_site(l, e), Some(Realize::NodeStart(_)));
    let edges = || p.plan.edges.iter().map(|(e, &a)| (e, a));
    let in_order = edges()
        .filter(|&(e, _)| at_start(e))
        .chain(edges().filter(|&(e, _)| !at_start(e)));
    for (e, act) in in_order {
        let runtime = matches!(l.edges[e.index()], EdgeIr::EarlyExit | EdgeIr::Reentry);
        if act == EdgeAction::None || runtime {
            continue;
        }
        let at = match direct_site(l, e).expect("checked by ineligible") {
            Realize::NodeEnd(n) => l.nodes[n.index()].end,
            Realize::NodeStart(n) => first_non_phi(l.nodes[n.index()].start.parent()),
            Realize::Split(_) => {
                let EdgeIr::Succ { term, index, .. } = l.edges[e.index()] else {
                    unreachable!("only terminator edges are split")
                };
                split_edge(&em, term, index)
                    .terminator()
                    .expect("split block has its branch")
            }
            other => unreachable!("edge {e} realized as {other:?}"),
        };
        em.at(at);
        ip.edge(act, at);
    }

    // The entry, right after the allocas: take the handshake or start a root path.
    em.at(last_alloca
        .next()
        .expect("the allocas precede the entry code"));
    let act = p.plan.entry;
    if let Some(i) = isolated {
        // Always a root, and it leaves the thread's register and `open` alone: no handshake
        // to take, nothing to save. The handshake is cleared (as a summary call would), so
        // that a stale one (a signal between a direct call's store and its entry) is not
        // taken by a function this one calls.
        unsafe { c::LLVMBuildStore(b, c::LLVMConstNull(g.ptrt), ip.rt.hand_fn) };
        if p.piecewise {
            ip.store(ip.k(1), ip.s.nvc);
            ip.store(ip.k(1), i.open);
        }
        let r = ip.add(ip.k(i.root_value), ip.lin(act.start, ip.k(1)));
        ip.store(r, ip.s.reg);
        unsafe { c::LLVMDisposeBuilder(b) };
        return;
    }
    if !ip.can_be_root {
        // Only ever entered by direct calls, which leave the handshake unnamed: take it.
        let nvc = ip.load(ip.rt.hand_nvc);
        let reg = ip.load(ip.rt.reg);
        ip.store(nvc, ip.s.nvc);
        ip.store(reg, ip.s.on_entry);
        let r = ip.add(reg, ip.lin(act.start, nvc));
        ip.store(r, ip.s.reg);
        unsafe { c::LLVMDisposeBuilder(b) };
        return;
    }
    unsafe {
        let hf = c::LLVMBuildLoad2(b, g.ptrt, ip.rt.hand_fn, empty.as_ptr());
        let taken = c::LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, hf, func.0, empty.as_ptr());
        let hn = ip.load(ip.rt.hand_nvc);
        let treg = ip.load(ip.rt.reg);
        let topen = ip.load(ip.rt.open);
        let nvc = ip.select(taken, hn, ip.k(1));
        let reg = ip.select(taken, treg, ip.k(act.root_value.unwrap_or(0)));
        let notaken = c::LLVMBuildNot(b, taken, empty.as_ptr());
        let root = c::LLVMBuildZExt(b, notaken, g.i64t, empty.as_ptr());
        ip.store(root, ip.s.root);
        ip.store(treg, ip.s.saved_reg);
        ip.store(topen, ip.s.saved_open);
        let hf2 = ip.select(taken, c::LLVMConstNull(g.ptrt), hf);
        c::LLVMBuildStore(b, hf2, ip.rt.hand_fn);
        ip.store(ip.select(taken, topen, ip.k(1)), ip.rt.open);
        ip.store(nvc, ip.s.nvc);
        ip.store(reg, ip.s.on_entry);
        let r = ip.add(reg, ip.lin(act.start, nvc));
        ip.store(r, ip.s.reg);
    }
    unsafe { c::LLVMDisposeBuilder(b) };
}
