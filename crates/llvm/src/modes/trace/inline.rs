//! The inline fast paths of the entry, return, direct flag and call site ([`inline_fns`]).

use super::runtime::{acc_ptr, field_of, ENTER_PREDICTED};
use crate::emit::build as b;
use crate::emit::{define_inline_helper, Emitter, Globals};
use crate::ir::{self, Bb};
use llvm_sys::prelude::*;
use llvm_sys::LLVMIntPredicate::{LLVMIntEQ, LLVMIntNE};
use tally_format::abi;

/// The runtime's slow paths of the inline entry, direct flag and call site.
pub(super) struct InlineSlow {
    pub(super) enter: (LLVMValueRef, LLVMTypeRef),
    pub(super) direct: (LLVMValueRef, LLVMTypeRef),
    pub(super) call: (LLVMValueRef, LLVMTypeRef),
}

/// The inline entry, return, direct flag and call site ([`inline_fns`]).
pub(super) struct Inline {
    pub(super) enter: (LLVMValueRef, LLVMTypeRef),
    pub(super) enter_again: (LLVMValueRef, LLVMTypeRef),
    pub(super) enter_floor: (LLVMValueRef, LLVMTypeRef),
    pub(super) ret: (LLVMValueRef, LLVMTypeRef),
    pub(super) back: (LLVMValueRef, LLVMTypeRef),
    pub(super) direct: (LLVMValueRef, LLVMTypeRef),
    pub(super) call: (LLVMValueRef, LLVMTypeRef),
}

/// Defines (once per module, always inlined) the fast paths of the thread's direct flag and
/// depth, kept in its `struct tally_wtrace_acc` (the entries load the TLS pointer, the others
/// take it as `acc`: [`Rec::acc_here`](super::records::Rec::acc_here)):
///
/// - `ptr tally.wtrace.enter(ptr module, ptr counters, i32 index, ptr self)` (`self` not
///   null): when the direct flag equals `self` and the module has its slot, the entry is
///   silent: the flag is cleared and the depth incremented; else `__tally_wtrace_enter` (it
///   writes `Enter`, gives the module its slot, makes the thread's stream, keeps the flight
///   recorder's shadow stack; the flag never equals `self` while `slow` is set: the runtime
///   keeps a flight recorder's flag elsewhere). Returns the thread's accumulator pointer (read
///   again after the runtime's call, which points it at the thread's own at its first entry),
///   so that the function loads it once ([`Rec::acc`](super::records::Rec::acc); the new depth is its `depth`);
/// - `ptr tally.wtrace.enter.again(...)`, the same arguments, for a function likely to be
///   entered announced ([`may_be_announced`](super::callees::may_be_announced)): an announced entry whose key (`slot << 32 |
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
pub(super) fn inline_fns(
    g: &Globals,
    slow: &InlineSlow,
    put: (LLVMValueRef, LLVMTypeRef),
) -> Inline {
    let (i32t, ptrt) = (g.i32t, g.ptrt);
    let enter_ty = b::function_type(ptrt, &[ptrt, ptrt, i32t, ptrt]);
    // The `.wrap` entries are those of a public entry whose body is a function of its own
    // ([`split_entries`](super::entries::split_entries)): the same, without the depth, which the body's entry
    // (`tally.wtrace.enter.body`) counts (after the runtime's entry, one off again).
    let [enter, enter_again, _, _] = [
        ("tally.wtrace.enter", false, false),
        ("tally.wtrace.enter.again", true, false),
        ("tally.wtrace.enter.wrap", false, true),
        ("tally.wtrace.enter.again.wrap", true, true),
    ]
    .map(|(name, again, wrap)| enter_fn(g, name, enter_ty, again, wrap, slow, put));
    enter_body_fn(g, enter_ty);
    let floor = enter_floor_fn(g, enter_ty, slow);
    let ret_ty = b::function_type(g.voidt, &[ptrt, ptrt]);
    let ret = ret_fn(g, ret_ty);
    let back_ty = b::function_type(g.i64t, &[ptrt, ptrt]);
    let back = back_fn(g, back_ty);
    let direct_ty = b::function_type(g.voidt, &[ptrt, ptrt, i32t]);
    let direct = direct_fn(g, direct_ty, slow);
    direct_body_fn(g, slow);
    let call_ty = b::function_type(g.voidt, &[ptrt, i32t]);
    let call = call_fn(g, call_ty, slow);
    Inline {
        enter: (enter, enter_ty),
        enter_again: (enter_again, enter_ty),
        enter_floor: (floor, enter_ty),
        ret: (ret, ret_ty),
        back: (back, back_ty),
        direct: (direct, direct_ty),
        call: (call, call_ty),
    }
}

/// A new block `name` at the end of the helper `em` builds.
fn block(em: &Emitter, name: &str) -> Bb {
    b::append_block(em.g, em.func, name)
}

/// A conditional branch with branch weights.
fn cold_branch(em: &Emitter, cond: LLVMValueRef, yes: Bb, no: Bb, weights: &[u32]) {
    let br = em.cond_br(cond, yes, no);
    ir::set_branch_weights(em.g.ctx, br.0, weights);
}

/// The thread's depth of traced activations (in accumulator `a`) plus `by` (1 or -1).
fn add_depth(em: &Emitter, a: LLVMValueRef, by: i64) {
    let i32t = em.g.i32t;
    let depth_p = field_of(em, a, "depth");
    let d = em.load(i32t, depth_p);
    let d = em.add(d, b::const_int(i32t, by as u64, true));
    em.store(d, depth_p);
}

/// The call of the runtime's `rt` with the helper's parameters from the `from`th.
fn forward(em: &Emitter, rt: (LLVMValueRef, LLVMTypeRef), from: u32) -> LLVMValueRef {
    let f = em.func.0;
    let args: Vec<LLVMValueRef> = (from..b::count_params(f)).map(|i| b::param(f, i)).collect();
    em.call_plain(rt, &args)
}

/// The `slow` field is nonzero: branch to a new block calling the runtime (returned), else
/// to `fast`.
fn if_slow(em: &Emitter, a: LLVMValueRef, fast: Bb) -> Bb {
    let i32t = em.g.i32t;
    let slow_p = field_of(em, a, "slow");
    let s = em.load(i32t, slow_p);
    let z = b::const_int(i32t, 0, false);
    let is_slow = em.icmp(LLVMIntNE, s, z);
    let rt = block(em, "slow");
    cold_branch(em, is_slow, rt, fast, &[1, 1 << 10]);
    rt
}

/// A silent entry's end: the depth plus one (not in a `.wrap` entry), and `a` returned.
fn deeper(em: &Emitter, a: LLVMValueRef, wrap: bool) {
    if !wrap {
        add_depth(em, a, 1);
    }
    em.ret(a);
}

/// `tally.wtrace.enter` and its `.again` and `.wrap` variants (see [`inline_fns`]).
fn enter_fn(
    g: &Globals,
    name: &str,
    enter_ty: LLVMTypeRef,
    again: bool,
    wrap: bool,
    slow: &InlineSlow,
    put: (LLVMValueRef, LLVMTypeRef),
) -> LLVMValueRef {
    let (i32t, ptrt) = (g.i32t, g.ptrt);
    define_inline_helper(g, name, enter_ty, |em| {
        let p = |i| b::param(em.func.0, i);
        let a = acc_ptr(em);
        let flag_p = field_of(em, a, "direct");
        let flag = em.load(ptrt, flag_p);
        let mine = em.icmp(LLVMIntEQ, flag, p(3));
        let check_slot = block(em, "slot");
        let silent = block(em, "silent");
        let rt = block(em, "announced");
        em.cond_br(mine, check_slot, rt);
        em.position_at_end(check_slot);
        let slot = em.load(i32t, p(0)); // (the module's first field)
        let z = b::const_int(i32t, 0, false);
        let has = em.icmp(LLVMIntNE, slot, z);
        cold_branch(em, has, silent, rt, &[1 << 10, 1]);
        em.position_at_end(silent);
        em.store(b::const_null(ptrt), flag_p);
        deeper(em, a, wrap);
        em.position_at_end(rt);
        if again {
            predicted_enter(em, a, wrap, put);
        }
        // (The thread's first entry points the TLS pointer at the thread's own accumulator.)
        forward(em, slow.enter, 0);
        let a = acc_ptr(em);
        if wrap {
            // (The runtime counted the activation; the body's entry counts it again.)
            add_depth(em, a, -1);
        }
        em.ret(a);
    })
}

/// The announced path of `tally.wtrace.enter.again` (the helper `em` builds, accumulator
/// `a`) up to the runtime's call: the predicted `Enter` appended inline when the stream
/// predicts this function; `em` is left in the block that calls the runtime.
fn predicted_enter(em: &Emitter, a: LLVMValueRef, wrap: bool, put: (LLVMValueRef, LLVMTypeRef)) {
    let (i32t, i64t, ptrt) = (em.g.i32t, em.g.i64t, em.g.ptrt);
    let p = |i| b::param(em.func.0, i);
    // The key `slot << 32 | index`, and the one the stream predicts after the previous
    // Enter's (`e_next[e_prev * MUL >> SHIFT]`); a slot of 0 (none yet) never matches.
    let k = |v| b::const_int(i64t, v, false);
    let put_predicted = || {
        em.call_plain(put, &[a, k(ENTER_PREDICTED.0), k(ENTER_PREDICTED.1)]);
    };
    // First the shortest case, the function that is `e_prev` and predicts itself
    // (`again`): nothing to change.
    let itself = block(em, "again");
    let other = block(em, "other");
    let again_p = field_of(em, a, "again");
    let last = em.load(ptrt, again_p);
    let same = em.icmp(LLVMIntEQ, last, p(3));
    em.cond_br(same, itself, other);
    em.position_at_end(itself);
    put_predicted();
    deeper(em, a, wrap);
    em.position_at_end(other);
    let predicted = block(em, "predicted");
    let call = block(em, "call");
    let slot = em.load(i32t, p(0));
    let hi = em.zext(slot, i64t);
    let hi = em.shl(hi, k(32));
    let lo = em.zext(p(2), i64t);
    let key = em.or(hi, lo);
    let prev_p = field_of(em, a, "e_prev");
    let prev = em.load(i64t, prev_p);
    let h = em.mul(prev, k(abi::WTRACE_ENTER_MUL));
    let h = em.lshr(h, k(u64::from(abi::WTRACE_ENTER_SHIFT)));
    let table = em.load(ptrt, field_of(em, a, "e_next"));
    let at = em.inbounds_gep(i64t, table, &[h]);
    let pred = em.load(i64t, at);
    let same = em.icmp(LLVMIntEQ, pred, key);
    let z = b::const_int(i32t, 0, false);
    let has = em.icmp(LLVMIntNE, slot, z);
    let hit = em.and(same, has);
    em.cond_br(hit, predicted, call);
    em.position_at_end(predicted);
    put_predicted();
    em.store(key, prev_p);
    em.store(b::const_null(ptrt), again_p);
    deeper(em, a, wrap);
    em.position_at_end(call);
}

/// The entry of a body ([`split_entries`](super::entries::split_entries)): entered only from this module's traced direct
/// call sites and from its public entry, which did the rest (the runtime's entry, when
/// `slow` is set, is made before the call: `tally.wtrace.direct.body`, or by the public
/// entry): the depth alone.
fn enter_body_fn(g: &Globals, enter_ty: LLVMTypeRef) {
    define_inline_helper(g, "tally.wtrace.enter.body", enter_ty, |em| {
        let a = acc_ptr(em);
        add_depth(em, a, 1);
        em.ret(a);
    });
}

/// `--tally-trace-floor` (measurement only): the thread's stream made at its first entry,
/// nothing else.
fn enter_floor_fn(g: &Globals, enter_ty: LLVMTypeRef, slow: &InlineSlow) -> LLVMValueRef {
    define_inline_helper(g, "tally.wtrace.enter.floor", enter_ty, |em| {
        let a = acc_ptr(em);
        let fast = block(em, "fast");
        let rt = if_slow(em, a, fast);
        em.position_at_end(fast);
        em.ret(a);
        em.position_at_end(rt);
        forward(em, slow.enter, 0);
        em.ret(acc_ptr(em));
    })
}

/// `tally.wtrace.ret` (see [`inline_fns`]).
fn ret_fn(g: &Globals, ret_ty: LLVMTypeRef) -> LLVMValueRef {
    define_inline_helper(g, "tally.wtrace.ret", ret_ty, |em| {
        let a = b::param(em.func.0, 0);
        add_depth(em, a, -1);
        // (`self` is a constant: the test folds once inlined.)
        let own = b::param(em.func.0, 1);
        let null = b::const_null(g.ptrt);
        let has = em.icmp(LLVMIntNE, own, null);
        let store = block(em, "store");
        let done = block(em, "done");
        em.cond_br(has, store, done);
        em.position_at_end(store);
        em.store(own, field_of(em, a, "ret"));
        em.br(done);
        em.position_at_end(done);
        em.ret_void();
    })
}

/// `tally.wtrace.back` (see [`inline_fns`]).
fn back_fn(g: &Globals, back_ty: LLVMTypeRef) -> LLVMValueRef {
    define_inline_helper(g, "tally.wtrace.back", back_ty, |em| {
        let a = b::param(em.func.0, 0);
        let last = em.load(g.ptrt, field_of(em, a, "ret"));
        let callee = b::param(em.func.0, 1);
        let not_traced = em.icmp(LLVMIntNE, last, callee);
        em.ret(em.zext(not_traced, g.i64t));
    })
}

/// `tally.wtrace.direct` (see [`inline_fns`]).
fn direct_fn(g: &Globals, direct_ty: LLVMTypeRef, slow: &InlineSlow) -> LLVMValueRef {
    define_inline_helper(g, "tally.wtrace.direct", direct_ty, |em| {
        fast_or_runtime(em, slow.direct, |a| {
            let flag_p = field_of(em, a, "direct");
            em.store(b::param(em.func.0, 1), flag_p);
        })
    })
}

/// `void tally.wtrace.direct.body(ptr acc, ptr callee, i32 site, ptr module, ptr counters,
/// i32 index)`, right before a direct call of a body ([`split_entries`](super::entries::split_entries)), after any save of
/// the caller's copy of the word: the flag cleared, as the callee's entry would have; with
/// `slow` set, the runtime's direct flag and the callee's entry made here (the flight
/// recorder's call site, shadow stack and synchronization point, the thread's word current),
/// less the depth, which the body's entry counts.
fn direct_body_fn(g: &Globals, slow: &InlineSlow) {
    let (i32t, ptrt) = (g.i32t, g.ptrt);
    let direct_body_ty = b::function_type(g.voidt, &[ptrt, ptrt, i32t, ptrt, ptrt, i32t]);
    define_inline_helper(g, "tally.wtrace.direct.body", direct_body_ty, |em| {
        let p = |i| b::param(em.func.0, i);
        let a = p(0);
        let fast = block(em, "fast");
        let rt = if_slow(em, a, fast);
        em.position_at_end(fast);
        em.store(b::const_null(ptrt), field_of(em, a, "direct"));
        em.ret_void();
        em.position_at_end(rt);
        em.call_plain(slow.direct, &[p(1), p(2)]);
        em.call_plain(slow.enter, &[p(3), p(4), p(5), p(1)]);
        add_depth(em, acc_ptr(em), -1);
        em.ret_void();
    });
}

/// `tally.wtrace.call` (see [`inline_fns`]).
fn call_fn(g: &Globals, call_ty: LLVMTypeRef, slow: &InlineSlow) -> LLVMValueRef {
    define_inline_helper(g, "tally.wtrace.call", call_ty, |em| {
        fast_or_runtime(em, slow.call, |_| {})
    })
}

/// The body of `tally.wtrace.direct` and `tally.wtrace.call` (`em`'s helper, the accumulator
/// its first parameter `a`): `fast(a)` unless `slow` is set ([`if_slow`]), else the call of the
/// runtime's `rt` with the other parameters; either way, then the return.
fn fast_or_runtime(em: &Emitter, rt: (LLVMValueRef, LLVMTypeRef), fast: impl FnOnce(LLVMValueRef)) {
    let a = b::param(em.func.0, 0);
    let fast_bb = block(em, "fast");
    let slow = if_slow(em, a, fast_bb);
    em.position_at_end(fast_bb);
    fast(a);
    em.ret_void();
    em.position_at_end(slow);
    forward(em, rt, 1);
    em.ret_void();
}
