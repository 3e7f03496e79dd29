//! Where a function's records go ([`Rec`]): the appends, their shared checks of room, and the
//! saves and loads of a function's own copy of the accumulator's word.

use super::callees::{Call, OPAQUE_LIBC};
use super::runtime::{acc_ptr, Runtime, BACK};
use crate::emit::build as b;
use crate::emit::Emitter;
use crate::ir::{self, Bb, Val};
use llvm_sys::prelude::*;
use llvm_sys::LLVMOpcode;
use std::collections::HashMap;
use tally_format::{abi, WCallee};

/// What instruction `v` means for a function's copy of the accumulator's word: whether the
/// copy must be saved to the thread's before it (`ret`, and calls that may write records: any
/// call but intrinsics, inline asm, the libc leaves of [`OPAQUE_LIBC`] and the runtime's
/// `direct`, `ret` and the inline helpers), and whether the thread's word may have changed
/// after it (those calls and `enter`: the copy is loaded again, and an append needs a new
/// check of room).
pub(super) fn call_role(v: Val) -> (bool, bool) {
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
/// (`acc`, `n` allocas; see [`local_fns`](super::runtime::local_fns)).
pub(super) struct Rec<'a> {
    pub(super) rt: &'a Runtime,
    pub(super) local: Option<LLVMValueRef>,
    /// The copy is written through: stored to the thread's word after every append (so the
    /// thread's word is always current, a crash loses nothing, and calls and `ret` need no
    /// save); without `--tally-trace-registers=on`.
    pub(super) through: bool,
    /// The appends' checks of room are shared ([`Rec::hoist_checks`]): a function control
    /// cannot land in from elsewhere (no `setjmp`, landing pads, `invoke` or `callbr`).
    pub(super) shared: bool,
    /// With a copy: the thread's accumulator pointer, returned by the inline `enter` (null
    /// before: the thread's first entry may change it; after any entry it stays), which the
    /// helpers take ([`Rec::acc_here`]) instead of loading the TLS pointer at each record,
    /// save, load, call site and `ret`.
    pub(super) acc: std::cell::Cell<LLVMValueRef>,
    /// The most bits an append whose width is not a constant can write, by its width's value (a tag
    /// target's, loaded from a constant table:
    /// [`Log::at_tag_target`](crate::counters::apply::SiteAction::at_tag_target)), for
    /// [`Rec::hoist_checks`] (any other counts as the widest record).
    pub(super) widest: std::cell::RefCell<HashMap<LLVMValueRef, u64>>,
}

impl Rec<'_> {
    /// The thread's accumulator pointer for code at the builder's position: [`Rec::acc`] once
    /// the entry is built, else the TLS pointer loaded there (replaced by [`Rec::acc`] where
    /// that dominates it: [`Rec::share_acc`]).
    pub(super) fn acc_here(&self, em: &Emitter) -> LLVMValueRef {
        match self.acc.get() {
            acc if acc.is_null() => acc_ptr(em),
            acc => acc,
        }
    }

    /// Run last: the TLS loads of the accumulator pointer built before the entry was (the
    /// `Back`s, placed first) replaced by [`Rec::acc`] where it dominates them, i.e. in every
    /// block the entry's block dominates, and after it in that block. The pointer cannot
    /// change after any entry of the thread (the runtime makes the stream at the thread's
    /// first entry, or gives up for good), so each is the same value.
    pub(super) fn share_acc(&self, em: &Emitter) {
        let acc = self.acc.get();
        if acc.is_null() {
            return;
        }
        let tls = b::named_global(em.g.module, abi::WTRACE_ACC).unwrap_or(std::ptr::null_mut());
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
                    b::replace_all_uses(v.0, acc);
                    b::erase(v);
                }
            }
        }
    }

    /// Appends the record `(value, bits)` (`value` below `2^bits`) at the builder's position.
    /// In a function built at -O0 (`optnone`) the append stays a call: inlined, each append's
    /// values would take stack slots of their own there (no register allocation across blocks,
    /// no slot sharing), and `recursion.c`'s 20,000-deep recursion outgrew the 8 MiB stack.
    pub(super) fn put(&self, em: &Emitter, value: LLVMValueRef, bits: LLVMValueRef, near: Val) {
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
            b::add_call_enum_attr(em.g, call, llvm_sys::LLVMAttributeFunctionIndex, "noinline");
        }
    }

    /// The `Back` after call `call` (an `Unknown` or `Extern` site): 1 bit, except after an
    /// `Extern` call whose callee was traced (`tally.wtrace.back`: the function that returned
    /// last is the callee; then nothing, and the reader resolves the site to that function).
    pub(super) fn put_back(&self, em: &Emitter, call: &Call) {
        if !matches!(call.callee, WCallee::Extern { .. }) {
            return self.put_const(em, BACK, call.instr);
        }
        let args = [self.acc_here(em), call.instr.called_value().0];
        let bits = em.call_plain(self.rt.back, &args);
        Val(bits).set_debug_loc(em.call_loc(call.instr));
        // (Back is the 1-bit code `1`: value = width, runtime.rs.)
        self.put(em, bits, bits, call.instr);
    }

    /// [`Rec::put`] of constants.
    pub(super) fn put_const(&self, em: &Emitter, (value, bits): (u64, u64), near: Val) {
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
    pub(super) fn save_and_load_around_calls(&self, em: &Emitter) {
        let Some(word) = self.local else { return };
        // The sites may have put a new entry block before the allocas' block.
        if let Some(first) = em.func.first_block().and_then(|b| b.first()) {
            for a in [word] {
                if a != first.0 {
                    em.at(first);
                    b::remove_from_parent(Val(a));
                    em.insert(Val(a));
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
    pub(super) fn hoist_checks(&self, em: &Emitter) {
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
            if bits.is_constant_int() {
                bits.const_zext_value()
            } else if let Some(&k) = self.widest.borrow().get(&bits.0) {
                k
            } else if calls(bits, self.rt.back.0)
                || (bits.is_zext() && b::int_width(b::type_of(bits.operand(0).0)) == 1)
            {
                1
            } else {
                32
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
            b::set_operand(v, v.num_operands() - 1, put_fast);
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

/// The most bits one shared check of room ([`Rec::hoist_checks`]) covers: the word holds 63,
/// and a check that asks for `k` sends a word with more than `63 - k` to the buffer. 16
/// stages fuller words than 32 for few more checks: callgrind, the bench's reduced inputs,
/// `trace-regs` instructions against 32: Lua -1.1%, SQLite -1.4%, zlib -0.9%, bzip2 -0.3%
/// (8 and 12 did worse on Lua and bzip2; docs/log/trace.md).
pub(super) const ROOM_MAX: u64 = 16;
