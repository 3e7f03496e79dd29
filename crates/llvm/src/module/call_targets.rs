//! `--tally-pgo`: where each indirect call goes, counted exactly, for the sample profile's
//! call targets (` id: count name:count ...`), which clang's sample-profile loader turns into
//! value-profile metadata for its indirect-call promotion (docs/pgo.md).
//!
//! clang's IR PGO learns the same by value profiling: every indirect call passes its target to
//! the runtime (`__llvm_profile_instrument_target`), which keeps a list of the targets it saw.
//! Here the candidates are known when the module is instrumented: without LTO the optimizer can
//! promote a call only to a function its module names, so the candidates of a call are the
//! module's functions whose address is taken and whose type is the call's (defined or
//! declared). The calls of a type share a constant array of them ([`Tables`]), and each call
//! has one counter per candidate in the module's counter array, so the counts are merged,
//! summed and subtracted as every other counter is (`tally merge`, snapshots). Before the
//! call, `tally.call_target` (inlined) compares the callee with the candidate that matched last
//! time (a per-site hint) and increments its counter; on a miss, `tally.call_target.scan` (not
//! inlined) asks the runtime (`__tally_call_target_find`, `runtime/c/targets.c`: a hash of the
//! candidates' addresses, built on first use, when there are many). A call to a function that
//! is not a candidate is counted by no target: the block's count less the targets' sum.

use crate::emit::build::{
    self, add_global, const_array, const_int, const_null, const_struct_in, private_constant,
};
use crate::emit::{define_inline_helper, inline_helper, Emitter, Globals};
use crate::ir::{self, Bb, Val};
use llvm_sys::core as c;
use llvm_sys::prelude::{LLVMModuleRef, LLVMTypeRef, LLVMValueRef};
use llvm_sys::{LLVMAtomicOrdering, LLVMIntPredicate, LLVMLinkage};
use std::collections::HashMap;
use std::rc::Rc;
use tally_format::{CallTargets, CounterIdx};

/// At most this many candidates per call (the first, in module order); calls to others are
/// counted by no target.
pub(crate) const MAX_TARGETS: usize = 512;

/// An indirect call and its candidate targets (possibly none).
pub(crate) struct Site {
    pub call: Val,
    pub targets: Rc<[LLVMValueRef]>,
}

/// The module's candidate targets, by function type.
pub(crate) struct Candidates {
    by_type: HashMap<usize, Rc<[LLVMValueRef]>>,
}

impl Candidates {
    /// Every function of `m` whose address is taken (LLVM's intrinsics and tally's own aside).
    pub(crate) fn of(m: LLVMModuleRef) -> Candidates {
        let mut by_type: HashMap<usize, Vec<LLVMValueRef>> = HashMap::new();
        for f in build::functions(m) {
            let v = Val(f);
            let name = v.name();
            if name.is_empty()
                || name.starts_with("llvm.")
                || name.starts_with("__tally_")
                || name.starts_with("tally.")
                || !address_taken(v)
            {
                continue;
            }
            let list = by_type
                .entry(build::global_value_type(f) as usize)
                .or_default();
            if list.len() < MAX_TARGETS {
                list.push(f);
            }
        }
        Candidates {
            by_type: by_type.into_iter().map(|(t, l)| (t, l.into())).collect(),
        }
    }

    /// The sites of `calls` (`crate::ir::lines::indirect_calls`), in their order.
    pub(crate) fn sites(&self, calls: &[(u32, Val, u32)]) -> Vec<Site> {
        calls
            .iter()
            .map(|&(_, call, _)| {
                // SAFETY: `call` is a live call or invoke of the module (`crate::ir`'s module
                // doc); the call only reads it.
                let ty = unsafe { c::LLVMGetCalledFunctionType(call.0) };
                Site {
                    call,
                    targets: self
                        .by_type
                        .get(&(ty as usize))
                        .cloned()
                        .unwrap_or_else(|| Rc::from([])),
                }
            })
            .collect()
    }
}

/// Some use of `f` is not the callee operand of a call or invoke (a store, an argument, a
/// constant's operand, ...).
fn address_taken(f: Val) -> bool {
    f.users().into_iter().any(|u| {
        if !u.is_instruction() || !u.is_call_like() || u.called_value() != f {
            return true;
        }
        // Called, and maybe also passed to itself.
        (0..u.num_operands()).filter(|&i| u.operand(i) == f).count() > 1
    })
}

/// Completes a function's metadata of its indirect calls (`crate::ir::lines::source_meta`
/// recorded one entry per site, in order): the sites with candidates get their counters from
/// module counter `base` on, as [`emit`] places them, and their candidates' names; the others
/// are dropped.
pub(crate) fn record(meta: &mut Vec<CallTargets>, sites: &[Site], base: u64) {
    debug_assert_eq!(meta.len(), sites.len());
    let mut next = base;
    let mut kept = Vec::new();
    for (mut t, s) in std::mem::take(meta).into_iter().zip(sites) {
        if s.targets.is_empty() {
            continue;
        }
        t.counter = CounterIdx(next as u32);
        t.targets = s.targets.iter().map(|&f| Val(f).name()).collect();
        next += s.targets.len() as u64;
        kept.push(t);
    }
    *meta = kept;
}

/// The module's constant arrays of candidates, one per list ([`Candidates`] gives every call of
/// a type the same list): each pointer in one is a relocation the dynamic loader applies at
/// start-up in a position-independent executable (60,000 of them on SQLite with a table per
/// call, 0.9 million instructions of `_dl_relocate_object`).
#[derive(Default)]
pub(crate) struct Tables(HashMap<usize, LLVMValueRef>);

/// Emits the counting of `sites` (those with candidates), their counters from module counter
/// `base` on, in candidate order. The number of counters used.
pub(crate) fn emit(g: &Globals, tables: &mut Tables, func: Val, sites: &[Site], base: u64) -> u64 {
    let mut next = base;
    let mut helper = None;
    for s in sites.iter().filter(|s| !s.targets.is_empty()) {
        let helper = *helper.get_or_insert_with(|| count_fn(g));
        let table = *tables
            .0
            .entry(Rc::as_ptr(&s.targets).cast::<LLVMValueRef>() as usize)
            .or_insert_with(|| {
                private_constant(g, "__tally_call_targets", const_array(g.ptrt, &s.targets))
            });
        // `{ i32 hint, ptr index }`: the hint at the address the inlined code loads, and the
        // runtime's hash of the candidates beside it (one argument fewer at every call).
        let hint = add_global(
            g.module,
            "__tally_call_hint",
            const_struct_in(g.ctx, &[const_int(g.i32t, 0, false), const_null(g.ptrt)]),
            LLVMLinkage::LLVMInternalLinkage,
            false,
        );
        let em = Emitter::new(g, func);
        em.at(s.call);
        let k = em.i32c(s.targets.len() as u64);
        let callee = s.call.called_value().0;
        em.call(
            helper,
            &mut [em.counter_ptr(next), table, k, hint, callee],
            s.call,
        );
        next += s.targets.len() as u64;
    }
    next - base
}

/// `void (ptr counters, ptr candidates, i32 k, ptr hint, ptr callee)`: `hint` points to the
/// call's `{ i32 hint, ptr index }` (`index`: the runtime's hash of its candidates).
fn helper_type(g: &Globals) -> LLVMTypeRef {
    build::function_type(g.voidt, &[g.ptrt, g.ptrt, g.i32t, g.ptrt, g.ptrt])
}

/// The call's `{ i32 hint, ptr index }`.
fn hint_type(g: &Globals) -> LLVMTypeRef {
    build::struct_type(g, &[g.i32t, g.ptrt])
}

/// `internal void tally.call_target(counters, candidates, k, hint, callee)`, always inlined:
/// `counters[*hint]++` when `candidates[*hint]` is the callee, else `tally.call_target.scan`.
fn count_fn(g: &Globals) -> (LLVMValueRef, LLVMTypeRef) {
    let ty = helper_type(g);
    let scan = scan_fn(g);
    let f = define_inline_helper(g, "tally.call_target", ty, |em| {
        let f = em.func.0;
        let p = |i| build::param(f, i);
        let (counters, table, hint, callee) = (p(0), p(1), p(3), p(4));
        let h = atomic_load(em, g.i32t, hint);
        let hx = em.zext(h, g.i64t);
        let cand = em.load(g.ptrt, em.inbounds_gep(g.ptrt, table, &[hx]));
        let same = em.icmp(LLVMIntPredicate::LLVMIntEQ, cand, callee);
        let hit = build::append_block(g, em.func, "hit");
        let miss = build::append_block(g, em.func, "miss");
        let br = em.cond_br(same, hit, miss);
        ir::set_branch_weights(g.ctx, br.0, &[1000, 1]);
        em.position_at_end(hit);
        em.add_to(em.inbounds_gep(g.i64t, counters, &[hx]), em.i64c(1));
        em.ret_void();
        em.position_at_end(miss);
        let args: Vec<LLVMValueRef> = (0..5).map(p).collect();
        em.call_plain(scan, &args);
        em.ret_void();
    });
    (f, ty)
}

/// `internal void tally.call_target.scan(counters, candidates, k, hint, callee)`, never
/// inlined: `i = __tally_call_target_find(candidates, k, callee, &hint.index)`, the callee's place
/// among the candidates; unless it is none (-1), `i` becomes the hint and `counters[i]++`.
fn scan_fn(g: &Globals) -> (LLVMValueRef, LLVMTypeRef) {
    let ty = helper_type(g);
    let (f, entry) = inline_helper(g, "tally.call_target.scan", ty);
    build::never_inline(g, f);
    let Some(entry) = entry else {
        return (f, ty);
    };
    let find_ty = build::function_type(g.i32t, &[g.ptrt, g.i32t, g.ptrt, g.ptrt]);
    let find = build::declare_function(g.module, "__tally_call_target_find", find_ty);
    let fv = Val(f);
    let p = |i| build::param(f, i);
    let (counters, table, k, hint, callee) = (p(0), p(1), p(2), p(3), p(4));
    let em = Emitter::new(g, fv);
    let (found, done) = (
        build::append_block(g, fv, "found"),
        build::append_block(g, fv, "done"),
    );
    em.position_at_end(Bb(entry));
    let index = em.struct_gep(hint_type(g), hint, 1);
    let i = em.call_plain((find, find_ty), &[table, k, callee, index]);
    let none = em.icmp(LLVMIntPredicate::LLVMIntSLT, i, em.i32c(0));
    em.cond_br(none, done, found);
    em.position_at_end(found);
    atomic_store(&em, i, hint);
    let ix = em.zext(i, g.i64t);
    em.add_to(em.inbounds_gep(g.i64t, counters, &[ix]), em.i64c(1));
    em.ret_void();
    em.position_at_end(done);
    em.ret_void();
    (f, ty)
}

/// A relaxed atomic load: threads share the hint, and any value one of them stored is a valid
/// index.
fn atomic_load(em: &Emitter, ty: LLVMTypeRef, ptr: LLVMValueRef) -> LLVMValueRef {
    let v = em.load(ty, ptr);
    // SAFETY: `v` is the load just built (`crate::ir`'s module doc).
    unsafe {
        c::LLVMSetOrdering(v, LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic);
        c::LLVMSetAlignment(v, 4);
    }
    v
}

/// A relaxed atomic store (see [`atomic_load`]).
fn atomic_store(em: &Emitter, v: LLVMValueRef, ptr: LLVMValueRef) {
    let s = em.store(v, ptr);
    // SAFETY: `s` is the store just built (`crate::ir`'s module doc).
    unsafe {
        c::LLVMSetOrdering(s, LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic);
        c::LLVMSetAlignment(s, 4);
    }
}
