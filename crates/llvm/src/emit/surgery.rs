//! CFG surgery on the IR: splitting an edge with a new block (PHIs of the target keep exactly
//! one entry per incoming edge) and predecessor tags, which identify the incoming edge of a
//! block when none of its incoming edges can carry code of its own (Ball & Larus 1994 §3.2's edge
//! counters on edges that cannot be split: unwind edges into shared landing pads,
//! `indirectbr` and `callbr` edges).

use crate::emit::{cname, Emitter};
use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::{self, Bb, Val};
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use std::ffi::CString;
use tally_graph::NodeId;

/// Splits edge `e` (successor `index` of `term`) with a new block; returns the new block.
/// PHIs of the target get the new block in place of exactly one entry for the old source.
pub(crate) fn split_edge(em: &Emitter, term: Val, index: u32) -> Bb {
    let target = term.successor(index);
    let src = term.parent();
    let name = cname("tally.split");
    // SAFETY: the edited values belong to the live module, which only this crate changes during
    // `instrument` (`crate::ir`'s module doc).
    let nb = Bb(unsafe { c::LLVMAppendBasicBlockInContext(em.g.ctx, em.func.0, name.as_ptr()) });
    unsafe { c::LLVMMoveBasicBlockAfter(nb.0, src.0) };
    em.at_end(nb);
    // SAFETY: the builder is positioned in a live function and the operands are values of the
    // module (`crate::ir`'s module doc).
    unsafe { c::LLVMBuildBr(em.b, target.0) };
    term.set_successor(index, nb);
    for phi in target.phis() {
        rebuild_phi_moving_one(em, phi, src, nb);
    }
    nb
}

/// Replaces `phi` by a copy in which the first incoming entry from `from` comes from `to`.
fn rebuild_phi_moving_one(em: &Emitter, phi: Val, from: Bb, to: Bb) {
    // SAFETY: the builder is positioned in a live function and the operands are values of the
    // module (`crate::ir`'s module doc); the edited values belong to the live module, which only
    // this crate changes during `instrument` (`crate::ir`'s module doc); an erased instruction is
    // not used again; LLVM returned the pointer with its length; arrays passed live through the
    // call with their lengths.
    unsafe {
        let n = c::LLVMCountIncoming(phi.0);
        let mut vals = Vec::with_capacity(n as usize);
        let mut blocks = Vec::with_capacity(n as usize);
        let mut moved = false;
        for i in 0..n {
            vals.push(c::LLVMGetIncomingValue(phi.0, i));
            let b = c::LLVMGetIncomingBlock(phi.0, i);
            if !moved && b == from.0 {
                blocks.push(to.0);
                moved = true;
            } else {
                blocks.push(b);
            }
        }
        assert!(
            moved,
            "PHI in split target has no entry for the source block"
        );
        c::LLVMPositionBuilderBefore(em.b, phi.0);
        c::LLVMSetCurrentDebugLocation2(em.b, std::ptr::null_mut());
        let mut len = 0usize;
        let nm = c::LLVMGetValueName2(phi.0, &mut len);
        let name = CString::new(std::slice::from_raw_parts(nm as *const u8, len).to_vec())
            .unwrap_or_default();
        let new = c::LLVMBuildPhi(em.b, c::LLVMTypeOf(phi.0), name.as_ptr());
        c::LLVMAddIncoming(new, vals.as_mut_ptr(), blocks.as_mut_ptr(), n);
        ir::Val(new).set_debug_loc(phi.debug_loc());
        // Fast-math flags and other per-instruction state of PHIs are not used by codegen of
        // the integer/pointer PHIs we rebuild; floating-point PHIs keep their flags:
        if c::LLVMCanValueUseFastMathFlags(phi.0) != 0 {
            c::LLVMSetFastMathFlags(new, c::LLVMGetFastMathFlags(phi.0));
        }
        c::LLVMReplaceAllUsesWith(phi.0, new);
        c::LLVMInstructionEraseFromParent(phi.0);
    }
}

/// Makes every incoming edge of `target` store its index (in `cfg.preds(target)` order) into
/// `slot` before control reaches `target`: at the end of its source when that is its only
/// terminator edge or it cannot be split, else on a new block splitting it. Parallel
/// unsplittable edges from one source are indistinguishable and all get the first one's index.
pub(crate) fn store_tags(em: &Emitter, l: &Lowered, target: NodeId, slot: LLVMValueRef) {
    for (j, &e) in l.cfg.preds(target).iter().enumerate() {
        let tag = em.i32c(j as u64);
        let src = l.cfg.edge(e).src;
        let src_node = &l.nodes[src.index()];
        match l.edges[e.index()] {
            EdgeIr::Succ {
                term,
                index,
                splittable,
            } => {
                let term_edges = l
                    .cfg
                    .succs(src)
                    .iter()
                    .filter(|&&s| l.cfg.edge(s).kind != tally_graph::EdgeKind::EarlyExit)
                    .count();
                if term_edges == 1 || !splittable {
                    let first_from_src = l.cfg.preds(target)[..j]
                        .iter()
                        .all(|&p| l.cfg.edge(p).src != src);
                    if first_from_src {
                        em.at(src_node.end);
                        // SAFETY: the builder is positioned in a live function and the operands are
                        // values of the module (`crate::ir`'s module doc).
                        unsafe { c::LLVMBuildStore(em.b, tag, slot) };
                    }
                } else {
                    let nb = split_edge(em, term, index);
                    em.at(nb.terminator().expect("split block has its branch"));
                    // SAFETY: the builder is positioned in a live function and the operands are
                    // values of the module (`crate::ir`'s module doc).
                    unsafe { c::LLVMBuildStore(em.b, tag, slot) };
                }
            }
            other => unreachable!("tag target with a non-terminator incoming edge {other:?}"),
        }
    }
}
