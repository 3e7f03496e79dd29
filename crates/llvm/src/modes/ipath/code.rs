//! The code of one activation: the runtime's thread-locals, the function's slots and the
//! instructions of edge actions.

use super::probe::{ipath_count_fn, table_probe};
use crate::emit::build::{append_block, const_int, move_block_after, remove_from_parent, type_of};
use crate::emit::{Emitter, Globals};
use crate::ir::Val;
use crate::module::runtime_tls;
use llvm_sys::prelude::*;
use llvm_sys::LLVMIntPredicate;
use tally_format::abi;
use tally_graph::ipaths::{EdgeAction, Lin};

/// The runtime's thread-locals and return function.
pub(super) struct Rt {
    pub(super) hand_fn: LLVMValueRef,
    pub(super) hand_nvc: LLVMValueRef,
    pub(super) reg: LLVMValueRef,
    pub(super) open: LLVMValueRef,
}

pub(super) fn runtime(g: &Globals) -> Rt {
    let tls = |name: &str, ty: LLVMTypeRef| runtime_tls(g, name, ty);
    let i64t = g.i64t;
    Rt {
        hand_fn: tls(abi::IPATH_HAND_FN, g.ptrt),
        hand_nvc: tls(abi::IPATH_HAND_NVC, i64t),
        reg: tls(abi::IPATH_REG, i64t),
        open: tls(abi::IPATH_OPEN, i64t),
    }
}

pub(super) struct Slots {
    pub(super) reg: LLVMValueRef,
    pub(super) nvc: LLVMValueRef,
    pub(super) on_entry: LLVMValueRef,
    pub(super) root: LLVMValueRef,
    pub(super) saved_reg: LLVMValueRef,
    pub(super) saved_open: LLVMValueRef,
    /// `open` at the pending summary call (piecewise).
    pub(super) call_open: LLVMValueRef,
    /// An isolated function's own `open` (piecewise).
    pub(super) own_open: LLVMValueRef,
}

/// The frame record (functions that may end early) and its path site (`{table, path}`).
pub(super) struct Record {
    pub(super) rec: LLVMValueRef,
    pub(super) site: LLVMValueRef,
    pub(super) site_ty: LLVMTypeRef,
}

pub(super) struct Ip<'a, 'b> {
    pub(super) em: &'a Emitter<'b>,
    pub(super) s: Slots,
    pub(super) rt: Rt,
    pub(super) table: LLVMValueRef,
    pub(super) home: LLVMValueRef,
    /// Piecewise: added when a root returns with no open call.
    pub(super) root_exit: u128,
    /// The function is a root of the numbering (else every entry takes a handshake).
    pub(super) can_be_root: bool,
    /// No direct call in or out (after demotion): [`super::IpathPlan::isolated`].
    pub(super) isolated: Option<Isolated>,
    /// Array storage of an isolated function ([`super::IpathPlan::array`]): `reg` is biased by the
    /// array's first path (`bias`), so path `p` is counter `(p − first) + offset` of the
    /// module, `offset` the function's counter base.
    pub(super) array_offset: Option<u64>,
    /// Array storage of any other function: `(first, len, address of its first counter)`;
    /// a path in `[first, first + len)` goes there, others to the table.
    pub(super) array_checked: Option<(u64, u64, LLVMValueRef)>,
    pub(super) piecewise: bool,
    /// The set's path tables ([`super::IpathPlan::banks`]).
    pub(super) banks: u32,
    /// Subtracted from every absolute value `reg` takes (an isolated function with an array:
    /// its first path, so that `reg` is the counter index; else 0). Only constants change:
    /// the increments are differences.
    pub(super) bias: u128,
}

/// What an isolated function knows statically: it is always entered as a root.
#[derive(Copy, Clone)]
pub(super) struct Isolated {
    /// `Entry_global -> Entry_P`.
    pub(super) root_value: u128,
    /// Piecewise: its own `open` (1 until a restart), an alloca: it makes no direct call, so
    /// the thread's `open` is nobody's business inside it.
    pub(super) open: LLVMValueRef,
}

impl Ip<'_, '_> {
    pub(super) fn k(&self, v: u128) -> LLVMValueRef {
        self.em.i64c(v as u64)
    }
    pub(super) fn load(&self, p: LLVMValueRef) -> LLVMValueRef {
        self.em.load(self.em.g.i64t, p)
    }
    pub(super) fn store(&self, v: LLVMValueRef, p: LLVMValueRef) {
        self.em.store(v, p);
    }
    pub(super) fn add(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        self.em.add(a, b)
    }
    pub(super) fn select(
        &self,
        c_: LLVMValueRef,
        a: LLVMValueRef,
        b: LLVMValueRef,
    ) -> LLVMValueRef {
        self.em.select(c_, a, b)
    }
    /// `l(nvc)` (the values fit 64 bits: `fits_u64`).
    pub(super) fn lin(&self, l: Lin, nvc: LLVMValueRef) -> LLVMValueRef {
        if l.a == 0 {
            return self.k(l.b);
        }
        let m = self.em.mul(self.k(l.a), nvc);
        self.add(m, self.k(l.b))
    }
    /// `nvc`: constant 1 in an isolated function of context mode (a root never changes it).
    pub(super) fn nvc(&self) -> LLVMValueRef {
        match self.isolated {
            Some(_) if !self.piecewise => self.k(1),
            _ => self.load(self.s.nvc),
        }
    }
    /// `on_entry`: constant in an isolated function.
    pub(super) fn on_entry(&self) -> LLVMValueRef {
        match self.isolated {
            Some(i) => self.k(i.root_value),
            None => self.load(self.s.on_entry),
        }
    }
    /// Where `open` lives: the thread's, or an isolated function's own.
    pub(super) fn open(&self) -> LLVMValueRef {
        match self.isolated {
            Some(i) if self.piecewise => i.open,
            _ => self.rt.open,
        }
    }
    /// `reg += l(nvc)`.
    pub(super) fn reg_add(&self, l: Lin) {
        if l == Lin::ZERO {
            return;
        }
        let nvc = self.nvc();
        let v = self.add(self.load(self.s.reg), self.lin(l, nvc));
        self.store(v, self.s.reg);
    }
    /// The address of path `p`'s counter (array storage).
    pub(super) fn counter_of(&self, p: LLVMValueRef, offset: u64) -> LLVMValueRef {
        crate::modes::path::array_slot(self.em, offset, p)
    }
    pub(super) fn count(&self, p: LLVMValueRef, near: Val) {
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
    pub(super) fn count_if(&self, cond: LLVMValueRef, p: LLVMValueRef, near: Val) {
        let em = self.em;
        let g = em.g;
        let here = near.parent();
        let count_bb = append_block(g, em.func, "tally.ip.count");
        let rest = append_block(g, em.func, "tally.ip.ret");
        move_block_after(count_bb, here);
        move_block_after(rest, count_bb);
        // Move `near` and what follows it (the return) to `rest`: a returning block has
        // no successors, so no phi names it.
        let mut moved = Vec::new();
        let mut v = Some(near);
        while let Some(i) = v {
            moved.push(i);
            v = i.next();
        }
        em.position_at_end(rest);
        for i in moved {
            remove_from_parent(i);
            em.insert(i);
        }
        em.position_at_end(here);
        em.cond_br(cond, count_bb, rest);
        em.position_at_end(count_bb);
        let br = em.br(rest);
        em.at(br);
        self.count(p, near);
    }

    pub(super) fn edge(&self, a: EdgeAction, near: Val) {
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
                        let o = self.load(i.open);
                        let zero = self.em.icmp(LLVMIntPredicate::LLVMIntEQ, o, self.k(0));
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
                let reg = self.load(self.s.reg);
                let open = self.load(self.rt.open);
                let root = {
                    let r = self.load(self.s.root);
                    self.em.icmp(LLVMIntPredicate::LLVMIntNE, r, self.k(0))
                };
                let mut p = reg;
                if self.root_exit != 0 {
                    let closed = self.em.icmp(LLVMIntPredicate::LLVMIntEQ, open, self.k(0));
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
    pub(super) fn reentry(&self, a: EdgeAction, sj: Val) {
        let zero = const_int(type_of(sj.0), 0, false);
        let again = self.em.icmp(LLVMIntPredicate::LLVMIntNE, sj.0, zero);
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
