//! The inline fast paths of the entry, return, direct flag and call site ([`inline_fns`]).

use super::runtime::{acc_ptr, field_of, ENTER_PREDICTED};
use crate::emit::cname;
use crate::ir;
use llvm_sys::core as c;
use llvm_sys::prelude::*;
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
pub(super) unsafe fn inline_fns(
    g: &crate::emit::Globals,
    slow: &InlineSlow,
    put: (LLVMValueRef, LLVMTypeRef),
) -> Inline {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let bx = Build {
            g,
            b: c::LLVMCreateBuilderInContext(g.ctx),
            e: cname(""),
        };
        let (i32t, ptrt) = (g.i32t, g.ptrt);
        let enter_ty = fn_ty(ptrt, &mut [ptrt, ptrt, i32t, ptrt]);
        // The `.wrap` entries are those of a public entry whose body is a function of its own
        // ([`split_entries`](super::entries::split_entries)): the same, without the depth, which the body's entry
        // (`tally.wtrace.enter.body`) counts (after the runtime's entry, one off again).
        for (name, again, wrap) in [
            ("tally.wtrace.enter", false, false),
            ("tally.wtrace.enter.again", true, false),
            ("tally.wtrace.enter.wrap", false, true),
            ("tally.wtrace.enter.again.wrap", true, true),
        ] {
            enter_fn(&bx, name, enter_ty, again, wrap, slow, put);
        }
        enter_body_fn(&bx, enter_ty);
        let floor = enter_floor_fn(&bx, enter_ty, slow);
        let ret_ty = fn_ty(g.voidt, &mut [ptrt, ptrt]);
        let ret = ret_fn(&bx, ret_ty);
        let back_ty = fn_ty(g.i64t, &mut [ptrt, ptrt]);
        let back = back_fn(&bx, back_ty);
        let direct_ty = fn_ty(g.voidt, &mut [ptrt, ptrt, i32t]);
        let direct = direct_fn(&bx, direct_ty, slow);
        direct_body_fn(&bx, slow);
        let call_ty = fn_ty(g.voidt, &mut [ptrt, i32t]);
        let call = call_fn(&bx, call_ty, slow);
        c::LLVMDisposeBuilder(bx.b);
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
}

/// The type of a function returning `ret` from `args`.
unsafe fn fn_ty(ret: LLVMTypeRef, args: &mut [LLVMTypeRef]) -> LLVMTypeRef {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe { c::LLVMFunctionType(ret, args.as_mut_ptr(), args.len() as u32, 0) }
}

/// What [`inline_fns`] builds with: the module's declarations, one builder, an empty name.
struct Build<'a> {
    g: &'a crate::emit::Globals,
    b: LLVMBuilderRef,
    e: std::ffi::CString,
}

impl Build<'_> {
    /// A new block `name` at the end of `f`.
    unsafe fn block(&self, f: LLVMValueRef, name: &str) -> LLVMBasicBlockRef {
        // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
        // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
        unsafe { c::LLVMAppendBasicBlockInContext(self.g.ctx, f, cname(name).as_ptr()) }
    }

    /// A conditional branch with branch weights.
    unsafe fn cold_branch(
        &self,
        cond: LLVMValueRef,
        yes: LLVMBasicBlockRef,
        no: LLVMBasicBlockRef,
        weights: &[u32],
    ) {
        // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
        // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
        unsafe {
            let br = c::LLVMBuildCondBr(self.b, cond, yes, no);
            ir::set_branch_weights(self.g.ctx, br, weights);
        }
    }

    /// The thread's depth of traced activations (in accumulator `a`) plus `by` (1 or -1).
    unsafe fn add_depth(&self, a: LLVMValueRef, by: i64) {
        // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
        // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
        unsafe {
            let (b, i32t, e) = (self.b, self.g.i32t, &self.e);
            let depth_p = field_of(self.g, b, a, "depth");
            let d = c::LLVMBuildLoad2(b, i32t, depth_p, e.as_ptr());
            let d = c::LLVMBuildAdd(b, d, c::LLVMConstInt(i32t, by as u64, 1), e.as_ptr());
            c::LLVMBuildStore(b, d, depth_p);
        }
    }

    /// The call of the runtime's `rt` with `f`'s parameters from the `from`th.
    unsafe fn forward(
        &self,
        f: LLVMValueRef,
        rt: (LLVMValueRef, LLVMTypeRef),
        from: u32,
    ) -> LLVMValueRef {
        // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
        // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
        unsafe {
            let mut args: Vec<LLVMValueRef> = (from..c::LLVMCountParams(f))
                .map(|i| c::LLVMGetParam(f, i))
                .collect();
            let n = args.len() as u32;
            c::LLVMBuildCall2(self.b, rt.1, rt.0, args.as_mut_ptr(), n, self.e.as_ptr())
        }
    }

    /// The `slow` field is nonzero: branch to a new block calling the runtime (returned), else
    /// to `fast`.
    unsafe fn if_slow(
        &self,
        f: LLVMValueRef,
        a: LLVMValueRef,
        fast: LLVMBasicBlockRef,
    ) -> LLVMBasicBlockRef {
        // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
        // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
        unsafe {
            let (b, i32t, e) = (self.b, self.g.i32t, &self.e);
            let slow_p = field_of(self.g, b, a, "slow");
            let s = c::LLVMBuildLoad2(b, i32t, slow_p, e.as_ptr());
            let z = c::LLVMConstInt(i32t, 0, 0);
            let is_slow =
                c::LLVMBuildICmp(b, llvm_sys::LLVMIntPredicate::LLVMIntNE, s, z, e.as_ptr());
            let rt = self.block(f, "slow");
            self.cold_branch(is_slow, rt, fast, &[1, 1 << 10]);
            rt
        }
    }

    /// A silent entry's end: the depth plus one (not in a `.wrap` entry), and `a` returned.
    unsafe fn deeper(&self, a: LLVMValueRef, wrap: bool) {
        // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
        // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
        unsafe {
            if !wrap {
                self.add_depth(a, 1);
            }
            c::LLVMBuildRet(self.b, a);
        }
    }
}

/// `tally.wtrace.enter` and its `.again` and `.wrap` variants (see [`inline_fns`]).
unsafe fn enter_fn(
    bx: &Build,
    name: &str,
    enter_ty: LLVMTypeRef,
    again: bool,
    wrap: bool,
    slow: &InlineSlow,
    put: (LLVMValueRef, LLVMTypeRef),
) {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let (g, b, e) = (bx.g, bx.b, &bx.e);
        let (i32t, ptrt) = (g.i32t, g.ptrt);
        let (enter, entry) = crate::emit::inline_helper(g, name, enter_ty);
        let Some(entry) = entry else { return };
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
        let check_slot = bx.block(enter, "slot");
        let silent = bx.block(enter, "silent");
        let rt = bx.block(enter, "announced");
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
        bx.cold_branch(has, silent, rt, &[1 << 10, 1]);
        c::LLVMPositionBuilderAtEnd(b, silent);
        c::LLVMBuildStore(b, c::LLVMConstNull(ptrt), flag_p);
        bx.deeper(a, wrap);
        c::LLVMPositionBuilderAtEnd(b, rt);
        if again {
            predicted_enter(bx, enter, a, wrap, put);
        }
        // (The thread's first entry points the TLS pointer at the thread's own accumulator.)
        bx.forward(enter, slow.enter, 0);
        let a = acc_ptr(g, b);
        if wrap {
            // (The runtime counted the activation; the body's entry counts it again.)
            bx.add_depth(a, -1);
        }
        c::LLVMBuildRet(b, a);
    }
}

/// The announced path of `tally.wtrace.enter.again` (`enter`, accumulator `a`) up to the
/// runtime's call: the predicted `Enter` appended inline when the stream predicts this
/// function; the builder is left in the block that calls the runtime.
unsafe fn predicted_enter(
    bx: &Build,
    enter: LLVMValueRef,
    a: LLVMValueRef,
    wrap: bool,
    put: (LLVMValueRef, LLVMTypeRef),
) {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let (g, b, e) = (bx.g, bx.b, &bx.e);
        let (i32t, ptrt) = (g.i32t, g.ptrt);
        let p = |i| c::LLVMGetParam(enter, i);
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
        let itself = bx.block(enter, "again");
        let other = bx.block(enter, "other");
        let again_p = field_of(g, b, a, "again");
        let last = c::LLVMBuildLoad2(b, ptrt, again_p, e.as_ptr());
        let same = c::LLVMBuildICmp(b, eq, last, p(3), e.as_ptr());
        c::LLVMBuildCondBr(b, same, itself, other);
        c::LLVMPositionBuilderAtEnd(b, itself);
        put_predicted(b);
        bx.deeper(a, wrap);
        c::LLVMPositionBuilderAtEnd(b, other);
        let predicted = bx.block(enter, "predicted");
        let call = bx.block(enter, "call");
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
        bx.deeper(a, wrap);
        c::LLVMPositionBuilderAtEnd(b, call);
    }
}

/// The entry of a body ([`split_entries`](super::entries::split_entries)): entered only from this module's traced direct
/// call sites and from its public entry, which did the rest (the runtime's entry, when
/// `slow` is set, is made before the call: `tally.wtrace.direct.body`, or by the public
/// entry): the depth alone.
unsafe fn enter_body_fn(bx: &Build, enter_ty: LLVMTypeRef) {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let (_, entry) = crate::emit::inline_helper(bx.g, "tally.wtrace.enter.body", enter_ty);
        if let Some(entry) = entry {
            c::LLVMPositionBuilderAtEnd(bx.b, entry);
            let a = acc_ptr(bx.g, bx.b);
            bx.add_depth(a, 1);
            c::LLVMBuildRet(bx.b, a);
        }
    }
}

/// `--tally-trace-floor` (measurement only): the thread's stream made at its first entry,
/// nothing else.
unsafe fn enter_floor_fn(bx: &Build, enter_ty: LLVMTypeRef, slow: &InlineSlow) -> LLVMValueRef {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let (g, b) = (bx.g, bx.b);
        let (floor, entry) = crate::emit::inline_helper(g, "tally.wtrace.enter.floor", enter_ty);
        if let Some(entry) = entry {
            c::LLVMPositionBuilderAtEnd(b, entry);
            let a = acc_ptr(g, b);
            let fast = bx.block(floor, "fast");
            let rt = bx.if_slow(floor, a, fast);
            c::LLVMPositionBuilderAtEnd(b, fast);
            c::LLVMBuildRet(b, a);
            c::LLVMPositionBuilderAtEnd(b, rt);
            bx.forward(floor, slow.enter, 0);
            c::LLVMBuildRet(b, acc_ptr(g, b));
        }
        floor
    }
}

/// `tally.wtrace.ret` (see [`inline_fns`]).
unsafe fn ret_fn(bx: &Build, ret_ty: LLVMTypeRef) -> LLVMValueRef {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let (g, b, e) = (bx.g, bx.b, &bx.e);
        let (ret, entry) = crate::emit::inline_helper(g, "tally.wtrace.ret", ret_ty);
        if let Some(entry) = entry {
            c::LLVMPositionBuilderAtEnd(b, entry);
            let a = c::LLVMGetParam(ret, 0);
            bx.add_depth(a, -1);
            // (`self` is a constant: the test folds once inlined.)
            let own = c::LLVMGetParam(ret, 1);
            let null = c::LLVMConstNull(g.ptrt);
            let has = c::LLVMBuildICmp(
                b,
                llvm_sys::LLVMIntPredicate::LLVMIntNE,
                own,
                null,
                e.as_ptr(),
            );
            let store = bx.block(ret, "store");
            let done = bx.block(ret, "done");
            c::LLVMBuildCondBr(b, has, store, done);
            c::LLVMPositionBuilderAtEnd(b, store);
            c::LLVMBuildStore(b, own, field_of(g, b, a, "ret"));
            c::LLVMBuildBr(b, done);
            c::LLVMPositionBuilderAtEnd(b, done);
            c::LLVMBuildRetVoid(b);
        }
        ret
    }
}

/// `tally.wtrace.back` (see [`inline_fns`]).
unsafe fn back_fn(bx: &Build, back_ty: LLVMTypeRef) -> LLVMValueRef {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let (g, b, e) = (bx.g, bx.b, &bx.e);
        let (back, entry) = crate::emit::inline_helper(g, "tally.wtrace.back", back_ty);
        if let Some(entry) = entry {
            c::LLVMPositionBuilderAtEnd(b, entry);
            let a = c::LLVMGetParam(back, 0);
            let last = c::LLVMBuildLoad2(b, g.ptrt, field_of(g, b, a, "ret"), e.as_ptr());
            let callee = c::LLVMGetParam(back, 1);
            let pred = llvm_sys::LLVMIntPredicate::LLVMIntNE;
            let not_traced = c::LLVMBuildICmp(b, pred, last, callee, e.as_ptr());
            c::LLVMBuildRet(b, c::LLVMBuildZExt(b, not_traced, g.i64t, e.as_ptr()));
        }
        back
    }
}

/// `tally.wtrace.direct` (see [`inline_fns`]).
unsafe fn direct_fn(bx: &Build, direct_ty: LLVMTypeRef, slow: &InlineSlow) -> LLVMValueRef {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let (g, b) = (bx.g, bx.b);
        let (direct, entry) = crate::emit::inline_helper(g, "tally.wtrace.direct", direct_ty);
        if let Some(entry) = entry {
            c::LLVMPositionBuilderAtEnd(b, entry);
            let a = c::LLVMGetParam(direct, 0);
            let fast = bx.block(direct, "fast");
            let rt = bx.if_slow(direct, a, fast);
            c::LLVMPositionBuilderAtEnd(b, fast);
            let flag_p = field_of(g, b, a, "direct");
            c::LLVMBuildStore(b, c::LLVMGetParam(direct, 1), flag_p);
            c::LLVMBuildRetVoid(b);
            c::LLVMPositionBuilderAtEnd(b, rt);
            bx.forward(direct, slow.direct, 1);
            c::LLVMBuildRetVoid(b);
        }
        direct
    }
}

/// `void tally.wtrace.direct.body(ptr acc, ptr callee, i32 site, ptr module, ptr counters,
/// i32 index)`, right before a direct call of a body ([`split_entries`](super::entries::split_entries)), after any save of
/// the caller's copy of the word: the flag cleared, as the callee's entry would have; with
/// `slow` set, the runtime's direct flag and the callee's entry made here (the flight
/// recorder's call site, shadow stack and synchronization point, the thread's word current),
/// less the depth, which the body's entry counts.
unsafe fn direct_body_fn(bx: &Build, slow: &InlineSlow) {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let (g, b, e) = (bx.g, bx.b, &bx.e);
        let (i32t, ptrt) = (g.i32t, g.ptrt);
        let direct_body_ty = fn_ty(g.voidt, &mut [ptrt, ptrt, i32t, ptrt, ptrt, i32t]);
        let (direct_body, entry) =
            crate::emit::inline_helper(g, "tally.wtrace.direct.body", direct_body_ty);
        if let Some(entry) = entry {
            c::LLVMPositionBuilderAtEnd(b, entry);
            let p = |i| c::LLVMGetParam(direct_body, i);
            let a = p(0);
            let fast = bx.block(direct_body, "fast");
            let rt = bx.if_slow(direct_body, a, fast);
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
            bx.add_depth(acc_ptr(g, b), -1);
            c::LLVMBuildRetVoid(b);
        }
    }
}

/// `tally.wtrace.call` (see [`inline_fns`]).
unsafe fn call_fn(bx: &Build, call_ty: LLVMTypeRef, slow: &InlineSlow) -> LLVMValueRef {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let b = bx.b;
        let (call, entry) = crate::emit::inline_helper(bx.g, "tally.wtrace.call", call_ty);
        if let Some(entry) = entry {
            c::LLVMPositionBuilderAtEnd(b, entry);
            let a = c::LLVMGetParam(call, 0);
            let fast = bx.block(call, "fast");
            let rt = bx.if_slow(call, a, fast);
            c::LLVMPositionBuilderAtEnd(b, fast);
            c::LLVMBuildRetVoid(b);
            c::LLVMPositionBuilderAtEnd(b, rt);
            bx.forward(call, slow.call, 1);
            c::LLVMBuildRetVoid(b);
        }
        call
    }
}
