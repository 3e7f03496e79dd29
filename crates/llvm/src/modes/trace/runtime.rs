//! The runtime's entry points as the instrumented code sees them ([`Runtime`]), and the IR
//! helpers that append to the thread's accumulator word or to a function's own copy of it.

use super::callees::MODULE_DESC;
use super::inline::{inline_fns, InlineSlow};
use crate::emit::cname;
use crate::ir::{self};
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::LLVMLinkage;
use tally_format::abi;

/// A code of the witness record code (`tally_format::abi::witness`) as the emitters take it:
/// `(value, bits)`.
const fn code((value, bits): (u64, u8)) -> (u64, u64) {
    (value, bits as u64)
}

/// `Back` (the prefix code's `1`) and "lost" (a landing whose how is lost), as the reader
/// (`tally_graph::witness::code::Decoder`) decodes them: `(value, bits)`.
pub(super) const BACK: (u64, u64) = code((abi::witness::BACK, abi::witness::BACK_BITS));
pub(super) const LOST: (u64, u64) = code(abi::witness::LOST);
/// The predicted `Enter` (`tally_graph::witness::code::EnterCode::Predicted`).
pub(super) const ENTER_PREDICTED: (u64, u64) = code(abi::witness::ENTER_PREDICTED);
// `tally.wtrace.back` returns `Back`'s width, 1, or 0 (`inline.rs`), which records.rs appends
// as its value too: `Back` is the code whose value is its width.
const _: () = assert!(BACK.0 == BACK.1 && BACK.1 == 1);

/// The runtime entry points of trace mode.
pub(super) struct Runtime {
    pub(super) enter: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.put(ptr acc, i64 value, i64 bits)`, always inlined ([`put_fn`]).
    pub(super) put: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.put.fast.tls(ptr acc, i64 value, i64 bits)`,
    /// `tally.wtrace.room.tls(ptr acc, i64 k)`: the same as [`Local::put_fast`] and
    /// [`Local::room`] on the thread's word ([`tls_fns`]).
    pub(super) put_fast_tls: (LLVMValueRef, LLVMTypeRef),
    pub(super) room_tls: (LLVMValueRef, LLVMTypeRef),
    /// The same on a function's own copy of the accumulator's word, and its helpers
    /// ([`local_fns`]).
    pub(super) local: Local,
    /// `tally.wtrace.enter` ([`inline_fns`]): the inline entry (its `self` must not be null).
    pub(super) enter_inline: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.enter.again`: the same, which also appends a predicted `Enter` inline.
    pub(super) enter_again: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.enter.floor` (`--tally-trace-floor`): the stream made, nothing recorded.
    pub(super) enter_floor: (LLVMValueRef, LLVMTypeRef),
    pub(super) direct: (LLVMValueRef, LLVMTypeRef),
    pub(super) call: (LLVMValueRef, LLVMTypeRef),
    pub(super) ret: (LLVMValueRef, LLVMTypeRef),
    pub(super) back: (LLVMValueRef, LLVMTypeRef),
    pub(super) reentry: (LLVMValueRef, LLVMTypeRef),
    pub(super) unwind: (LLVMValueRef, LLVMTypeRef),
    /// The module's slot in the trace (`__tally_wtrace_slot`, 0 until the runtime assigns it).
    pub(super) slot: LLVMValueRef,
}

impl Runtime {
    pub(super) fn declare(g: &crate::emit::Globals) -> Runtime {
        let m = g.module;
        let f = |name: &str, args: &mut [LLVMTypeRef]| {
            crate::module::declare_void_fn(m, g.voidt, name, args)
        };
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        let slot = unsafe {
            let n = cname(MODULE_DESC);
            let s = c::LLVMGetNamedGlobal(m, n.as_ptr());
            assert!(!s.is_null(), "trace mode: module tables not built");
            s
        };
        // SAFETY: the edited values belong to the live module, which only this crate changes during
        // `instrument` (`crate::ir`'s module doc); arrays passed live through the call with their
        // lengths.
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
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
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
            // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the
            // calls only read them.
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

/// Defines (once per module) `internal void tally.wtrace.put(ptr acc, i64 value, i64 bits)`,
/// always inlined: appends the low `bits` bits of `value` (already masked) to the thread's
/// accumulator word (the `struct tally_wtrace_acc` at `acc`)
/// when it has room ([`build_checked`], [`append`]), else calls
/// `__tally_wtrace_spill(value, bits)` (cold: the word has no room, or the thread has no
/// stream yet or it has ended, which the runtime marks with a closed word). With constant
/// arguments the inlined body is a load, a `test`, a shift (and an `or`) and a
/// store.
pub(super) unsafe fn put_fn(g: &crate::emit::Globals) -> (LLVMValueRef, LLVMTypeRef) {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
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
}

/// Defines `tally.wtrace.put.fast.tls(ptr acc, i64 value, i64 bits)` (an append to the thread's word
/// without a check of room) and `tally.wtrace.room.tls(ptr acc, i64 k)` (unless the thread's word has
/// room for `k` bits, `__tally_wtrace_spill(0, 0)` empties it), always inlined: the shared
/// checks of [`Rec::hoist_checks`](super::records::Rec::hoist_checks) in a function whose word stays in memory.
pub(super) unsafe fn tls_fns(
    g: &crate::emit::Globals,
) -> ((LLVMValueRef, LLVMTypeRef), (LLVMValueRef, LLVMTypeRef)) {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
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
}

/// The thread's accumulator pointer (`__tally_wtrace_acc`), loaded at `b`'s position.
pub(super) fn acc_ptr(g: &crate::emit::Globals, b: LLVMBuilderRef) -> LLVMValueRef {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
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
}

/// The address of field `field` of the `struct tally_wtrace_acc` at `p`.
pub(super) fn field_of(
    g: &crate::emit::Globals,
    b: LLVMBuilderRef,
    p: LLVMValueRef,
    field: &str,
) -> LLVMValueRef {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
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
}

/// `__tally_wtrace_spill(value, bits)`, cold.
pub(super) unsafe fn spill_fn(g: &crate::emit::Globals) -> (LLVMValueRef, LLVMTypeRef) {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let spill = crate::module::declare_void_fn(
            g.module,
            g.voidt,
            abi::WTRACE_SPILL,
            &mut [g.i64t, g.i64t],
        );
        let cold = c::LLVMCreateEnumAttribute(g.ctx, ir::attr_kind("cold"), 0);
        c::LLVMAddAttributeAtIndex(spill.0, llvm_sys::LLVMAttributeFunctionIndex, cold);
        spill
    }
}

/// Builds, at `b`'s end, the check that the word at `word_p` ([`abi::TallyWtraceAcc::acc`]:
/// up to 63 bits above a sentinel 1) has room for `room` bits, i.e. that its low `room` bits
/// are zero (a `test` of a constant mask): then `fast(b, word)`, else `spill(b, word)` (the
/// cold path); both end the function `b` is in.
pub(super) unsafe fn build_checked(
    g: &crate::emit::Globals,
    f: LLVMValueRef,
    b: LLVMBuilderRef,
    word_p: LLVMValueRef,
    room: LLVMValueRef,
    fast: impl FnOnce(LLVMBuilderRef, LLVMValueRef),
    spill: impl FnOnce(LLVMBuilderRef, LLVMValueRef),
) {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
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
}

/// The cold path of an append or check that found no room in `word`, built at `b`'s end in
/// `f`: while the thread's `stage` (of the accumulator at `acc`) is below `stage_end`, `word`
/// is stored there, `stage` advanced and `staged(b)` builds the emptied word's new value (the
/// function returns); else `call(b)`, where `b` is left (the runtime's spill; the caller ends
/// the function). A store, an add and two compares instead of a call of
/// `__tally_wtrace_spill` (about 40 instructions).
pub(super) unsafe fn stage_or(
    g: &crate::emit::Globals,
    f: LLVMValueRef,
    b: LLVMBuilderRef,
    (acc, word): (LLVMValueRef, LLVMValueRef),
    staged: impl FnOnce(LLVMBuilderRef),
    call: impl FnOnce(LLVMBuilderRef),
) {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
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
}

/// The empty word with the record `(value, bits)` in it (the word a staged one leaves).
pub(super) unsafe fn fresh(
    g: &crate::emit::Globals,
    b: LLVMBuilderRef,
    record: (LLVMValueRef, LLVMValueRef),
) -> LLVMValueRef {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe { append(g, b, c::LLVMConstInt(g.i64t, abi::WTRACE_EMPTY, 0), record) }
}

/// `word` with the record `(value, bits)` (`value` below `2^bits`) put in at its top:
/// `word >> bits | value << (64 - bits)`, a funnel shift (`bits` may be 0: `Back` after a
/// traced callee). One register, no count: the sentinel's position is the count.
pub(super) unsafe fn append(
    g: &crate::emit::Globals,
    b: LLVMBuilderRef,
    word: LLVMValueRef,
    (value, bits): (LLVMValueRef, LLVMValueRef),
) -> LLVMValueRef {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let fshr = ir::intrinsic_decl(g.module, "llvm.fshr", &[g.i64t]);
        let mut args = [value, word, bits];
        let e = cname("");
        c::LLVMBuildCall2(b, fshr.1, fshr.0, args.as_mut_ptr(), 3, e.as_ptr())
    }
}

/// The helpers of a function's own copy of the accumulator's word (an alloca, which mem2reg
/// makes a register), all always inlined ([`local_fns`]). Each takes the thread's accumulator
/// pointer first (`acc`: [`Rec::acc_here`](super::records::Rec::acc_here), loaded once after the entry).
pub(super) struct Local {
    /// `tally.wtrace.put.local(ptr acc, ptr word, i64 value, i64 bits)`: an append with its
    /// own check.
    pub(super) put: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.put.fast(ptr acc, ptr word, i64 value, i64 bits)`: an append without a
    /// check (a `room` before it made the room: [`Rec::hoist_checks`](super::records::Rec::hoist_checks); the same parameters as
    /// `put`, so that one becomes the other by its callee).
    pub(super) put_fast: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.room(ptr acc, ptr word, i64 k)`: unless the word has room for `k` bits,
    /// its bits go to the thread's buffer (`__tally_wtrace_spill(0, 0)`), leaving it empty.
    pub(super) room: (LLVMValueRef, LLVMTypeRef),
    /// `tally.wtrace.save(ptr acc, ptr word)`, `tally.wtrace.load(ptr acc, ptr word)`: the
    /// copy to and from the thread's.
    pub(super) save: (LLVMValueRef, LLVMTypeRef),
    pub(super) load: (LLVMValueRef, LLVMTypeRef),
}

/// Defines the helpers of [`Local`]: a function without `setjmp` or landing pads keeps the
/// accumulator's word in an alloca, which mem2reg makes a register, loaded from the thread's
/// after `enter` and after every call that may write records, and saved to it after every
/// append (written through, [`Rec::put`](super::records::Rec::put)) or, with `--tally-trace-registers=on`, before such
/// calls, before `ret`, and around the cold `__tally_wtrace_spill` (so a record costs a
/// shift, and an `or` when its value is not 0, and the check of its room, a `test` of a
/// constant mask, is shared by every record up to the next check: [`Rec::hoist_checks`](super::records::Rec::hoist_checks)).
pub(super) unsafe fn local_fns(g: &crate::emit::Globals) -> Local {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
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
}
