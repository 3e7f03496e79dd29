//! Preparing a function before it is lowered, the same way in every mode (so that block ids
//! still agree across modes).
//!
//! A landing pad shared by several `invoke`s makes their unwind edges impossible to split: a
//! landing pad must be entered by unwind edges only and start with its `landingpad`. Such edges
//! could only be counted through tags or kept in the spanning tree. Instead, as LLVM's
//! `SplitLandingPadPredecessors` does, each invoke gets a landing pad of its own (a copy of the
//! `landingpad` instruction that branches to the original block), and the original block's
//! `landingpad` becomes a PHI of the copies. The extra blocks run only when an exception is
//! caught or cleaned up.

use crate::ir::{Bb, Val};
use llvm_sys::core as c;
use llvm_sys::LLVMOpcode;
use std::ffi::CString;

/// Gives every invoke its own landing pad in `f`. Returns the number of landing pads split.
pub(crate) fn split_shared_landing_pads(f: Val) -> usize {
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let ctx = unsafe { c::LLVMGetTypeContext(c::LLVMTypeOf(f.0)) };
    let mut split = 0;
    for pad in f.blocks() {
        if !pad.is_landing_pad() {
            continue;
        }
        // The invokes unwinding to `pad`, in block order (deterministic).
        let invokes: Vec<Val> = f
            .blocks()
            .into_iter()
            .filter_map(|b| b.terminator())
            .filter(|t| {
                t.opcode() == LLVMOpcode::LLVMInvoke
                    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc);
                    // the calls only read them.
                    && unsafe { c::LLVMGetUnwindDest(t.0) } == pad.0
            })
            .collect();
        if invokes.len() < 2 {
            continue;
        }
        let lp = pad
            .instructions()
            .into_iter()
            .find(|v| v.opcode() == LLVMOpcode::LLVMLandingPad)
            .expect("a landing pad block has its landingpad");
        split_one(ctx, f, pad, lp, &invokes);
        split += 1;
    }
    split
}

fn split_one(ctx: llvm_sys::prelude::LLVMContextRef, f: Val, pad: Bb, lp: Val, invokes: &[Val]) {
    // SAFETY: the builder is positioned in a live function and the operands are values of the
    // module (`crate::ir`'s module doc); the edited values belong to the live module, which only
    // this crate changes during `instrument` (`crate::ir`'s module doc); an erased instruction is
    // not used again; arrays passed live through the call with their lengths; the builder is
    // disposed once, after its last use.
    unsafe {
        let b = c::LLVMCreateBuilderInContext(ctx);
        let ty = c::LLVMTypeOf(lp.0);
        let nclauses = c::LLVMGetNumClauses(lp.0);
        let cleanup = c::LLVMIsCleanup(lp.0);
        let pers = c::LLVMGetPersonalityFn(f.0);
        let loc = lp.debug_loc();
        let empty = CString::new("").expect("no NUL");
        let mut copies = Vec::with_capacity(invokes.len());
        let mut blocks = Vec::with_capacity(invokes.len());
        for inv in invokes {
            let name = CString::new("tally.lpad").expect("no NUL");
            let nb = c::LLVMAppendBasicBlockInContext(ctx, f.0, name.as_ptr());
            c::LLVMMoveBasicBlockBefore(nb, pad.0);
            c::LLVMPositionBuilderAtEnd(b, nb);
            c::LLVMSetCurrentDebugLocation2(b, std::ptr::null_mut());
            let copy = c::LLVMBuildLandingPad(b, ty, pers, nclauses, empty.as_ptr());
            for i in 0..nclauses {
                c::LLVMAddClause(copy, c::LLVMGetClause(lp.0, i));
            }
            c::LLVMSetCleanup(copy, cleanup);
            Val(copy).set_debug_loc(loc);
            let br = c::LLVMBuildBr(b, pad.0);
            Val(br).set_debug_loc(loc);
            c::LLVMSetUnwindDest(inv.0, nb);
            copies.push(copy);
            blocks.push(nb);
        }
        // PHIs of `pad`: the entry of each invoke's block now comes from its new pad.
        for phi in pad.phis() {
            let n = c::LLVMCountIncoming(phi.0);
            let mut vals = Vec::new();
            let mut from = Vec::new();
            for i in 0..n {
                let ib = c::LLVMGetIncomingBlock(phi.0, i);
                let k = invokes
                    .iter()
                    .position(|inv| inv.parent().0 == ib)
                    .expect("every predecessor of a landing pad is one of its invokes");
                vals.push(c::LLVMGetIncomingValue(phi.0, i));
                from.push(blocks[k]);
            }
            c::LLVMPositionBuilderBefore(b, phi.0);
            let new = c::LLVMBuildPhi(b, c::LLVMTypeOf(phi.0), empty.as_ptr());
            c::LLVMAddIncoming(new, vals.as_mut_ptr(), from.as_mut_ptr(), n);
            Val(new).set_debug_loc(phi.debug_loc());
            c::LLVMReplaceAllUsesWith(phi.0, new);
            c::LLVMInstructionEraseFromParent(phi.0);
        }
        // The landingpad itself becomes a PHI of the copies.
        c::LLVMPositionBuilderBefore(b, lp.0);
        let phi = c::LLVMBuildPhi(b, ty, empty.as_ptr());
        c::LLVMAddIncoming(
            phi,
            copies.as_mut_ptr(),
            blocks.as_mut_ptr(),
            copies.len() as u32,
        );
        Val(phi).set_debug_loc(loc);
        c::LLVMReplaceAllUsesWith(lp.0, phi);
        c::LLVMInstructionEraseFromParent(lp.0);
        c::LLVMDisposeBuilder(b);
    }
}
