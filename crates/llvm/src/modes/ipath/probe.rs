//! The module's path-counting functions: `tally.ipath.count` and `tally.ipath.probe`.

use crate::emit::{cname, Globals};
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::LLVMIntPredicate;
use tally_format::abi;

/// `internal void tally.ipath.count(ptr table, ptr home, i64 p, ptr arr, i64 first, i64 len)`
/// (always inlined, defined once per module): `arr[p - first] += 1` when `p - first < len`
/// (the function's own paths, array storage), else the table's count (the inline home-table
/// probe, or `__tally_path_count` with `--tally-atomic`).
pub(super) fn ipath_count_fn(g: &Globals, banks: u32) -> (LLVMValueRef, LLVMTypeRef) {
    // SAFETY: LLVM-C calls on live objects of the module being instrumented.
    unsafe {
        let ctx = g.ctx;
        let (i64t, ptrt) = (g.i64t, g.ptrt);
        let voidt = c::LLVMVoidTypeInContext(ctx);
        let mut params = [ptrt, ptrt, i64t, ptrt, i64t, i64t];
        let ty = c::LLVMFunctionType(voidt, params.as_mut_ptr(), params.len() as u32, 0);
        let (f, entry) = crate::emit::inline_helper(g, "tally.ipath.count", ty);
        let Some(entry) = entry else {
            return (f, ty);
        };
        let arg = |i| c::LLVMGetParam(f, i);
        let (table, home, p, arr, first, len) = (arg(0), arg(1), arg(2), arg(3), arg(4), arg(5));
        let n = cname("");
        let bb = |s: &str| {
            let s = cname(s);
            c::LLVMAppendBasicBlockInContext(ctx, f, s.as_ptr())
        };
        let (own, other) = (bb("own"), bb("table"));
        let b = c::LLVMCreateBuilderInContext(ctx);
        c::LLVMPositionBuilderAtEnd(b, entry);
        let d = c::LLVMBuildSub(b, p, first, n.as_ptr());
        let inside = c::LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntULT, d, len, n.as_ptr());
        c::LLVMBuildCondBr(b, inside, own, other);
        c::LLVMPositionBuilderAtEnd(b, own);
        let mut idx = [d];
        let ptr = c::LLVMBuildInBoundsGEP2(b, i64t, arr, idx.as_mut_ptr(), 1, n.as_ptr());
        let one = c::LLVMConstInt(i64t, 1, 0);
        if g.atomic {
            c::LLVMBuildAtomicRMW(
                b,
                llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpAdd,
                ptr,
                one,
                llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic,
                0,
            );
        } else {
            let v = c::LLVMBuildLoad2(b, i64t, ptr, n.as_ptr());
            let v = c::LLVMBuildAdd(b, v, one, n.as_ptr());
            c::LLVMBuildStore(b, v, ptr);
        }
        c::LLVMBuildRetVoid(b);
        c::LLVMPositionBuilderAtEnd(b, other);
        match table_probe(g, banks) {
            (pf, true) => {
                let mut a = [table, home, p];
                c::LLVMBuildCall2(b, pf.1, pf.0, a.as_mut_ptr(), 3, n.as_ptr());
            }
            (pc, false) => {
                let mut a = [table, p];
                c::LLVMBuildCall2(b, pc.1, pc.0, a.as_mut_ptr(), 2, n.as_ptr());
            }
        }
        c::LLVMBuildRetVoid(b);
        c::LLVMDisposeBuilder(b);
        (f, ty)
    }
}

/// How a path is counted in the set's tables: `(function, takes the home argument)`: with
/// one table path mode's inline probe (or `__tally_path_count` with `--tally-atomic`), with
/// several `tally.ipath.probe`.
pub(super) fn table_probe(g: &Globals, banks: u32) -> ((LLVMValueRef, LLVMTypeRef), bool) {
    if banks > 1 {
        return (ipath_probe_fn(g, banks), true);
    }
    match g.path_probe {
        Some(f) => (f, true),
        None => (g.path_count, false),
    }
}

/// `internal void tally.ipath.probe(ptr table0, ptr home0, i64 p)` (always inlined, once per
/// module): the set's `banks` tables (a power of two, consecutive, all the owner's) share its
/// paths by their low bits: path `p` is counted in table `p & (banks - 1)`, whose home table
/// follows table 0's at `(p & (banks - 1)) · 2 · PATH_HOME_SLOTS` words, by path mode's inline
/// probe (`__tally_path_count` with `--tally-atomic`). `banks` times the home slots of one
/// table, for sets whose hashed paths would crowd one (SQLite's amalgamation).
fn ipath_probe_fn(g: &Globals, banks: u32) -> (LLVMValueRef, LLVMTypeRef) {
    // SAFETY: LLVM-C calls on live objects of the module being instrumented.
    unsafe {
        let ctx = g.ctx;
        let (i64t, ptrt) = (g.i64t, g.ptrt);
        let voidt = c::LLVMVoidTypeInContext(ctx);
        let mut params = [ptrt, ptrt, i64t];
        let ty = c::LLVMFunctionType(voidt, params.as_mut_ptr(), params.len() as u32, 0);
        let (f, entry) = crate::emit::inline_helper(g, "tally.ipath.probe", ty);
        let Some(entry) = entry else {
            return (f, ty);
        };
        let (table0, home0, p) = (
            c::LLVMGetParam(f, 0),
            c::LLVMGetParam(f, 1),
            c::LLVMGetParam(f, 2),
        );
        let n = cname("");
        let b = c::LLVMCreateBuilderInContext(ctx);
        c::LLVMPositionBuilderAtEnd(b, entry);
        let mask = c::LLVMConstInt(i64t, u64::from(banks - 1), 0);
        let t = c::LLVMBuildAnd(b, p, mask, n.as_ptr());
        let mut idx = [t];
        let table =
            c::LLVMBuildInBoundsGEP2(b, g.table_ty, table0, idx.as_mut_ptr(), 1, n.as_ptr());
        let shift = c::LLVMConstInt(i64t, u64::from(4 + abi::PATH_HOME_BITS), 0);
        let mut off = [c::LLVMBuildShl(b, t, shift, n.as_ptr())];
        let i8t = c::LLVMInt8TypeInContext(ctx);
        let home = c::LLVMBuildInBoundsGEP2(b, i8t, home0, off.as_mut_ptr(), 1, n.as_ptr());
        match g.path_probe {
            Some(pf) => {
                let mut a = [table, home, p];
                c::LLVMBuildCall2(b, pf.1, pf.0, a.as_mut_ptr(), 3, n.as_ptr());
            }
            None => {
                let mut a = [table, p];
                let pc = g.path_count;
                c::LLVMBuildCall2(b, pc.1, pc.0, a.as_mut_ptr(), 2, n.as_ptr());
            }
        }
        c::LLVMBuildRetVoid(b);
        c::LLVMDisposeBuilder(b);
        (f, ty)
    }
}
