//! Values of a loop used after it (module doc of `super`, "Values used after the loop").

use crate::emit::build::{add_incoming, set_operand, type_of};
use crate::emit::Emitter;
use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::{Bb, Val};
use llvm_sys::LLVMOpcode;
use tally_graph::EdgeId;

/// Every user of `v` is an instruction (its uses can be rewritten).
pub(super) fn only_instruction_users(v: Val) -> bool {
    v.users().into_iter().all(Val::is_instruction)
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
    let mut users = Vec::new();
    for user in v.users() {
        if !bbs.contains(&user.parent()) && !users.contains(&user) {
            users.push(user);
        }
    }
    let first = x.first().expect("exit blocks have a terminator");
    // Before the first instruction's debug records: a phi carries none.
    em.before_with_records(first);
    let phi = em.phi(type_of(v.0));
    for &e in exits {
        let EdgeIr::Succ { term, .. } = l.edges[e.index()] else {
            unreachable!("exits are splittable terminator edges")
        };
        add_incoming(phi, v.0, term.parent());
    }
    for user in users {
        let incoming = if user.opcode() == LLVMOpcode::LLVMPHI {
            user.incoming()
        } else {
            Vec::new()
        };
        for k in 0..user.num_operands() {
            if user.operand(k) != v {
                continue;
            }
            if incoming
                .get(k as usize)
                .is_some_and(|&(_, from)| bbs.contains(&from))
            {
                continue;
            }
            set_operand(user, k, phi.0);
        }
    }
}

/// Every use of `v` is in the loop or in a phi of an exit block on an entry from the loop.
pub(super) fn used_only_inside_or_by_exit_phis(v: Val, bbs: &[Bb]) -> bool {
    for user in v.users() {
        if !user.is_instruction() {
            return false;
        }
        if !bbs.contains(&user.parent()) {
            if user.opcode() != LLVMOpcode::LLVMPHI {
                return false;
            }
            if user
                .incoming()
                .into_iter()
                .any(|(x, from)| x == v && !bbs.contains(&from))
            {
                return false;
            }
        }
    }
    true
}
