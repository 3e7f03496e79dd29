//! The module's path-counting functions: `tally.ipath.count` and `tally.ipath.probe`.

use crate::emit::build::{append_block, const_int, function_type, i8_type, param};
use crate::emit::{Emitter, Globals};
use crate::ir::{Bb, Val};
use llvm_sys::prelude::*;
use llvm_sys::LLVMIntPredicate;
use tally_format::abi;

/// `internal void tally.ipath.count(ptr table, ptr home, i64 p, ptr arr, i64 first, i64 len)`
/// (always inlined, defined once per module): `arr[p - first] += 1` when `p - first < len`
/// (the function's own paths, array storage), else the table's count (the inline home-table
/// probe, or `__tally_path_count` with `--tally-atomic`).
pub(super) fn ipath_count_fn(g: &Globals, banks: u32) -> (LLVMValueRef, LLVMTypeRef) {
    let (i64t, ptrt) = (g.i64t, g.ptrt);
    let ty = function_type(g.voidt, &[ptrt, ptrt, i64t, ptrt, i64t, i64t]);
    let (f, entry) = crate::emit::inline_helper(g, "tally.ipath.count", ty);
    let Some(entry) = entry else {
        return (f, ty);
    };
    let arg = |i| param(f, i);
    let (table, home, p, arr, first, len) = (arg(0), arg(1), arg(2), arg(3), arg(4), arg(5));
    let (own, other) = (
        append_block(g, Val(f), "own"),
        append_block(g, Val(f), "table"),
    );
    let em = Emitter::new(g, Val(f));
    em.position_at_end(Bb(entry));
    let d = em.sub(p, first);
    let inside = em.icmp(LLVMIntPredicate::LLVMIntULT, d, len);
    em.cond_br(inside, own, other);
    em.position_at_end(own);
    let ptr = em.inbounds_gep(i64t, arr, &[d]);
    let one = const_int(i64t, 1, false);
    em.add_to(ptr, one);
    em.ret_void();
    em.position_at_end(other);
    match table_probe(g, banks) {
        (pf, true) => em.call_plain(pf, &[table, home, p]),
        (pc, false) => em.call_plain(pc, &[table, p]),
    };
    em.ret_void();
    (f, ty)
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
    let (i64t, ptrt) = (g.i64t, g.ptrt);
    let ty = function_type(g.voidt, &[ptrt, ptrt, i64t]);
    let (f, entry) = crate::emit::inline_helper(g, "tally.ipath.probe", ty);
    let Some(entry) = entry else {
        return (f, ty);
    };
    let (table0, home0, p) = (param(f, 0), param(f, 1), param(f, 2));
    let em = Emitter::new(g, Val(f));
    em.position_at_end(Bb(entry));
    let mask = const_int(i64t, u64::from(banks - 1), false);
    let t = em.and(p, mask);
    let table = em.inbounds_gep(g.table_ty, table0, &[t]);
    let shift = const_int(i64t, u64::from(4 + abi::PATH_HOME_BITS), false);
    let off = em.shl(t, shift);
    let home = em.inbounds_gep(i8_type(g), home0, &[off]);
    match g.path_probe {
        Some(pf) => em.call_plain(pf, &[table, home, p]),
        None => em.call_plain(g.path_count, &[table, p]),
    };
    em.ret_void();
    (f, ty)
}
