//! Values of a loop used after it (module doc of `super`, "Values used after the loop").

use crate::emit::{cname, Emitter};
use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::{Bb, Val};
use llvm_sys::core as c;
use llvm_sys::LLVMOpcode;
use tally_graph::EdgeId;

/// Every user of `v` is an instruction (its uses can be rewritten).
pub(super) fn only_instruction_users(v: Val) -> bool {
    // SAFETY: LLVM-C calls on live objects of the module being instrumented.
    unsafe {
        let mut u = c::LLVMGetFirstUse(v.0);
        while !u.is_null() {
            if c::LLVMIsAInstruction(c::LLVMGetUser(u)).is_null() {
                return false;
            }
            u = c::LLVMGetNextUse(u);
        }
    }
    true
}

/// Makes the uses of the loop's value `v` after the loop (outside `bbs`, but not the exit
/// block's phis on entries from the loop) use a new phi of the exit block `x` instead, taking
/// `v` from each exit edge `exits` (edges of terminators in `bbs`); the copy's exits add the
/// copy's value to it with `x`'s other phis. `v`'s block dominates every exit's source
/// ([`super::classify::classify`]), and `x` is the only way out of the loop, so `x` dominates
/// the uses.
pub(super) fn merge_live_out(
    em: &Emitter,
    l: &Lowered,
    v: Val,
    x: Bb,
    exits: &[EdgeId],
    bbs: &[Bb],
) {
    let empty = cname("");
    // SAFETY: LLVM-C calls on live objects of the module being instrumented.
    unsafe {
        let mut users = Vec::new();
        let mut u = c::LLVMGetFirstUse(v.0);
        while !u.is_null() {
            let user = Val(c::LLVMGetUser(u));
            if !bbs.contains(&user.parent()) && !users.contains(&user) {
                users.push(user);
            }
            u = c::LLVMGetNextUse(u);
        }
        let first = x.first().expect("exit blocks have a terminator");
        // Before the first instruction's debug records: a phi carries none.
        c::LLVMPositionBuilderBeforeInstrAndDbgRecords(em.b, first.0);
        let phi = c::LLVMBuildPhi(em.b, c::LLVMTypeOf(v.0), empty.as_ptr());
        for &e in exits {
            let EdgeIr::Succ { term, .. } = l.edges[e.index()] else {
                unreachable!("exits are splittable terminator edges")
            };
            let mut vals = [v.0];
            let mut blocks = [term.parent().0];
            c::LLVMAddIncoming(phi, vals.as_mut_ptr(), blocks.as_mut_ptr(), 1);
        }
        for user in users {
            let is_phi = user.opcode() == LLVMOpcode::LLVMPHI;
            for k in 0..c::LLVMGetNumOperands(user.0) as u32 {
                if c::LLVMGetOperand(user.0, k) != v.0 {
                    continue;
                }
                if is_phi && bbs.contains(&Bb(c::LLVMGetIncomingBlock(user.0, k))) {
                    continue;
                }
                c::LLVMSetOperand(user.0, k, phi);
            }
        }
    }
}

/// Every use of `v` is in the loop or in a phi of an exit block on an entry from the loop.
pub(super) fn used_only_inside_or_by_exit_phis(v: Val, bbs: &[Bb]) -> bool {
    // SAFETY: LLVM-C calls on live objects of the module being instrumented.
    unsafe {
        let mut u = c::LLVMGetFirstUse(v.0);
        while !u.is_null() {
            let user = Val(c::LLVMGetUser(u));
            if c::LLVMIsAInstruction(user.0).is_null() {
                return false;
            }
            if !bbs.contains(&user.parent()) {
                if user.opcode() != LLVMOpcode::LLVMPHI {
                    return false;
                }
                let n = c::LLVMCountIncoming(user.0);
                for i in 0..n {
                    if c::LLVMGetIncomingValue(user.0, i) == v.0
                        && !bbs.contains(&Bb(c::LLVMGetIncomingBlock(user.0, i)))
                    {
                        return false;
                    }
                }
            }
            u = c::LLVMGetNextUse(u);
        }
    }
    true
}
