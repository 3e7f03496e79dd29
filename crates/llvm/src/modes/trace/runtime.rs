//! The runtime's entry points as the instrumented code sees them ([`Runtime`]), and the IR
//! helpers that append to the thread's accumulator word or to a function's own copy of it.

use super::callees::MODULE_DESC;
use super::inline::{inline_fns, InlineSlow};
use crate::emit::build as b;
use crate::emit::{define_inline_helper, Emitter, Globals};
use crate::ir;
use llvm_sys::prelude::*;
use llvm_sys::LLVMIntPredicate;
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
    pub(super) fn declare(g: &Globals) -> Runtime {
        let m = g.module;
        let f = |name: &str, args: &mut [LLVMTypeRef]| {
            crate::module::declare_void_fn(m, g.voidt, name, args)
        };
        let slot = b::named_global(m, MODULE_DESC).expect("trace mode: module tables not built");
        let enter = {
            let ty = b::function_type(g.i32t, &[g.ptrt, g.ptrt, g.i32t, g.ptrt]);
            (b::declare_function(m, "__tally_wtrace_enter", ty), ty)
        };
        let slow = InlineSlow {
            enter,
            direct: f("__tally_wtrace_direct", &mut [g.ptrt, g.i32t]),
            call: f("__tally_wtrace_call", &mut [g.i32t]),
        };
        let put = put_fn(g);
        let inline = inline_fns(g, &slow, put);
        let (put_fast_tls, room_tls) = tls_fns(g);
        Runtime {
            enter,
            enter_inline: inline.enter,
            enter_again: inline.enter_again,
            enter_floor: inline.enter_floor,
            ret: inline.ret,
            back: inline.back,
            put,
            local: local_fns(g),
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
pub(super) fn put_fn(g: &Globals) -> (LLVMValueRef, LLVMTypeRef) {
    let ty = b::function_type(g.voidt, &[g.ptrt, g.i64t, g.i64t]);
    let f = define_inline_helper(g, "tally.wtrace.put", ty, |em| {
        let spill = spill_fn(g);
        let p = |i| b::param(em.func.0, i);
        let (acc, value, bits) = (p(0), p(1), p(2));
        let word_p = field_of(em, acc, "acc");
        let store = |w| {
            em.store(append(em, w, (value, bits)), word_p);
        };
        build_checked(em, word_p, bits, store, |w| {
            let staged = || {
                em.store(fresh(em, (value, bits)), word_p);
            };
            stage_or(em, (acc, w), staged, || {
                em.call_plain(spill, &[value, bits]);
            });
        });
    });
    (f, ty)
}

/// Defines `tally.wtrace.put.fast.tls(ptr acc, i64 value, i64 bits)` (an append to the thread's word
/// without a check of room) and `tally.wtrace.room.tls(ptr acc, i64 k)` (unless the thread's word has
/// room for `k` bits, `__tally_wtrace_spill(0, 0)` empties it), always inlined: the shared
/// checks of [`Rec::hoist_checks`](super::records::Rec::hoist_checks) in a function whose word stays in memory.
pub(super) fn tls_fns(g: &Globals) -> ((LLVMValueRef, LLVMTypeRef), (LLVMValueRef, LLVMTypeRef)) {
    let i64t = g.i64t;
    let ty2 = b::function_type(g.voidt, &[g.ptrt, i64t, i64t]);
    let put = define_inline_helper(g, "tally.wtrace.put.fast.tls", ty2, |em| {
        let p = |i| b::param(em.func.0, i);
        let word_p = field_of(em, p(0), "acc");
        let word = em.load(i64t, word_p);
        em.store(append(em, word, (p(1), p(2))), word_p);
        em.ret_void();
    });
    let ty1 = b::function_type(g.voidt, &[g.ptrt, i64t]);
    let room = define_inline_helper(g, "tally.wtrace.room.tls", ty1, |em| {
        let spill = spill_fn(g);
        let p = |i| b::param(em.func.0, i);
        let acc = p(0);
        let word_p = field_of(em, acc, "acc");
        build_checked(
            em,
            word_p,
            p(1),
            |_| {},
            |w| {
                let empty = || {
                    em.store(b::const_int(i64t, abi::WTRACE_EMPTY, false), word_p);
                };
                stage_or(em, (acc, w), empty, || {
                    let zero = b::const_int(i64t, 0, false);
                    em.call_plain(spill, &[zero, zero]);
                });
            },
        );
    });
    ((put, ty2), (room, ty1))
}

/// The thread's accumulator pointer (`__tally_wtrace_acc`), loaded at `em`'s position.
pub(super) fn acc_ptr(em: &Emitter) -> LLVMValueRef {
    let tls = crate::module::runtime_tls(em.g, abi::WTRACE_ACC, em.g.ptrt);
    em.load(em.g.ptrt, tls)
}

/// The address of field `field` of the `struct tally_wtrace_acc` at `p`.
pub(super) fn field_of(em: &Emitter, p: LLVMValueRef, field: &str) -> LLVMValueRef {
    let k = abi::TALLY_WTRACE_ACC
        .fields
        .iter()
        .find(|f| f.name == field);
    let off = k.expect("struct tally_wtrace_acc field").offset as u64;
    let idx = [b::const_int(em.g.i64t, off, false)];
    em.inbounds_gep(b::i8_type(em.g), p, &idx)
}

/// `__tally_wtrace_spill(value, bits)`, cold.
pub(super) fn spill_fn(g: &Globals) -> (LLVMValueRef, LLVMTypeRef) {
    let spill =
        crate::module::declare_void_fn(g.module, g.voidt, abi::WTRACE_SPILL, &mut [g.i64t, g.i64t]);
    let cold = b::enum_attr(g, "cold");
    b::add_fn_attr_at(spill.0, llvm_sys::LLVMAttributeFunctionIndex, cold);
    spill
}

/// Builds, at `em`'s end, the check that the word at `word_p` ([`abi::TallyWtraceAcc::acc`]:
/// up to 63 bits above a sentinel 1) has room for `room` bits, i.e. that its low `room` bits
/// are zero (a `test` of a constant mask): then `fast(word)`, else `spill(word)` (the
/// cold path); both end the function `em` builds.
pub(super) fn build_checked(
    em: &Emitter,
    word_p: LLVMValueRef,
    room: LLVMValueRef,
    fast: impl FnOnce(LLVMValueRef),
    spill: impl FnOnce(LLVMValueRef),
) {
    let (g, i64t) = (em.g, em.g.i64t);
    let fast_bb = b::append_block(g, em.func, "fast");
    let slow = b::append_block(g, em.func, "spill");
    let word = em.load(i64t, word_p);
    let one = b::const_int(i64t, 1, false);
    let mask = em.sub(em.shl(one, room), one);
    let low = em.and(word, mask);
    let zero = b::const_int(i64t, 0, false);
    let full = em.icmp(LLVMIntPredicate::LLVMIntNE, low, zero);
    let br = em.cond_br(full, slow, fast_bb);
    ir::set_branch_weights(g.ctx, br.0, &[1, 1 << 10]);
    em.position_at_end(fast_bb);
    fast(word);
    em.ret_void();
    em.position_at_end(slow);
    spill(word);
    em.ret_void();
}

/// The cold path of an append or check that found no room in `word`, built at `em`'s end:
/// while the thread's `stage` (of the accumulator at `acc`) is below `stage_end`, `word`
/// is stored there, `stage` advanced and `staged()` builds the emptied word's new value (the
/// function returns); else `call()`, where `em` is left (the runtime's spill; the caller ends
/// the function). A store, an add and two compares instead of a call of
/// `__tally_wtrace_spill` (about 40 instructions).
pub(super) fn stage_or(
    em: &Emitter,
    (acc, word): (LLVMValueRef, LLVMValueRef),
    staged: impl FnOnce(),
    call: impl FnOnce(),
) {
    let (g, ptrt) = (em.g, em.g.ptrt);
    let yes = b::append_block(g, em.func, "stage");
    let no = b::append_block(g, em.func, "call");
    let at_p = field_of(em, acc, "stage");
    let at = em.load(ptrt, at_p);
    let end = em.load(ptrt, field_of(em, acc, "stage_end"));
    let room = em.icmp(LLVMIntPredicate::LLVMIntULT, at, end);
    let br = em.cond_br(room, yes, no);
    ir::set_branch_weights(g.ctx, br.0, &[63, 1]);
    em.position_at_end(yes);
    em.store(word, at);
    let next = em.inbounds_gep(g.i64t, at, &[b::const_int(g.i64t, 1, false)]);
    em.store(next, at_p);
    staged();
    em.ret_void();
    em.position_at_end(no);
    call();
}

/// The empty word with the record `(value, bits)` in it (the word a staged one leaves).
pub(super) fn fresh(em: &Emitter, record: (LLVMValueRef, LLVMValueRef)) -> LLVMValueRef {
    append(
        em,
        b::const_int(em.g.i64t, abi::WTRACE_EMPTY, false),
        record,
    )
}

/// `word` with the record `(value, bits)` (`value` below `2^bits`) put in at its top:
/// `word >> bits | value << (64 - bits)`, a funnel shift (`bits` may be 0: `Back` after a
/// traced callee). One register, no count: the sentinel's position is the count.
pub(super) fn append(
    em: &Emitter,
    word: LLVMValueRef,
    (value, bits): (LLVMValueRef, LLVMValueRef),
) -> LLVMValueRef {
    let fshr = ir::intrinsic_decl(em.g.module, "llvm.fshr", &[em.g.i64t]);
    em.call_plain(fshr, &[value, word, bits])
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
pub(super) fn local_fns(g: &Globals) -> Local {
    let (i64t, ptrt) = (g.i64t, g.ptrt);
    let ty_pp = b::function_type(g.voidt, &[ptrt, ptrt]);
    let copy = |em: &Emitter, from: LLVMValueRef, to: LLVMValueRef| {
        let v = em.load(i64t, from);
        em.store(v, to);
    };
    let save = define_inline_helper(g, "tally.wtrace.save", ty_pp, |em| {
        let to = field_of(em, b::param(em.func.0, 0), "acc");
        copy(em, b::param(em.func.0, 1), to);
        em.ret_void();
    });
    let load = define_inline_helper(g, "tally.wtrace.load", ty_pp, |em| {
        let from = field_of(em, b::param(em.func.0, 0), "acc");
        copy(em, from, b::param(em.func.0, 1));
        em.ret_void();
    });
    // The cold path: the copy saved, the runtime's spill, the copy loaded.
    let spill = spill_fn(g);
    let spill_around = |em: &Emitter, acc, word, args: [LLVMValueRef; 2]| {
        em.call_plain((save, ty_pp), &[acc, word]);
        em.call_plain(spill, &args);
        em.call_plain((load, ty_pp), &[acc, word]);
    };
    let ty4 = b::function_type(g.voidt, &[ptrt, ptrt, i64t, i64t]);
    let put = define_inline_helper(g, "tally.wtrace.put.local", ty4, |em| {
        let p = |i| b::param(em.func.0, i);
        let (acc, word, value, bits) = (p(0), p(1), p(2), p(3));
        let store = |w| {
            em.store(append(em, w, (value, bits)), word);
        };
        build_checked(em, word, bits, store, |w| {
            // (The thread's word too: it never holds bits already staged.)
            let staged = || {
                let new = fresh(em, (value, bits));
                em.store(new, word);
                em.store(new, field_of(em, acc, "acc"));
            };
            stage_or(em, (acc, w), staged, || {
                spill_around(em, acc, word, [value, bits])
            });
        });
    });
    let put_fast = define_inline_helper(g, "tally.wtrace.put.fast", ty4, |em| {
        let p = |i| b::param(em.func.0, i);
        let word = em.load(i64t, p(1));
        let appended = append(em, word, (p(2), p(3)));
        em.store(appended, p(1));
        em.ret_void();
    });
    let ty3 = b::function_type(g.voidt, &[ptrt, ptrt, i64t]);
    let room = define_inline_helper(g, "tally.wtrace.room", ty3, |em| {
        let p = |i| b::param(em.func.0, i);
        let (acc, word, k) = (p(0), p(1), p(2));
        build_checked(
            em,
            word,
            k,
            |_| {},
            |w| {
                let empty = || {
                    let new = b::const_int(i64t, abi::WTRACE_EMPTY, false);
                    em.store(new, word);
                    em.store(new, field_of(em, acc, "acc"));
                };
                stage_or(em, (acc, w), empty, || {
                    let zero = b::const_int(i64t, 0, false);
                    spill_around(em, acc, word, [zero, zero])
                });
            },
        );
    });
    Local {
        put: (put, ty4),
        put_fast: (put_fast, ty4),
        room: (room, ty3),
        save: (save, ty_pp),
        load: (load, ty_pp),
    }
}
