//! Module-level pieces of an instrumented module: the counter array, the runtime declarations,
//! the embedded metadata blob, the `struct tally_module` descriptor and the constructor that
//! registers it (ABI in docs/design/runtime.md, "Runtime ABI").
//!
//! Every constant and struct layout shared with the runtime comes from
//! [`tally_format::abi`]: the LLVM struct types of `struct tally_module`,
//! `struct tally_path_table` and `struct tally_frame` are built from its field lists, and
//! their initializers are filled field by field, by name.

pub(crate) mod call_targets;
pub(crate) mod localize;
pub(crate) mod pre_inline;
pub(crate) mod redirect;
pub(crate) mod reinline;

use crate::emit::{cname, Globals};
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMLinkage, LLVMThreadLocalMode};
use std::ffi::CString;
use tally_format::abi::{self, FieldType, StructLayout};

/// Version of `struct tally_module` / `struct tally_frame` the emitted code follows.
pub use tally_format::abi::ABI_VERSION;
/// log2 of the slots of a hashed function's home table (`TALLY_PATH_HOME_BITS` in tally.h).
pub use tally_format::abi::PATH_HOME_BITS;
use tally_format::abi::{PATH_HASH_MULTIPLIER, PATH_HOME_SLOTS};

/// Byte-wise string equality, usable in constants.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

// What code outside this file assumes of the ABI without naming it (checked here so that a change
// of abi.rs fails the build until they follow): `lib.rs` passes `u32::from(events_mode)` as the
// descriptor's flags; `counters/apply.rs` addresses the frame record's fields as elements 0
// (`prev`) and 1 (`site`); `paths.rs` builds `struct tally_path_site` as `{ptr table, i64 path}`
// and tags its address by adding 1.
const _: () = {
    assert!(abi::MODULE_FLAG_EVENTS == 1);
    assert!(abi::TALLY_FRAME.fields.len() == 2);
    assert!(same(abi::TALLY_FRAME.fields[0].name, "prev"));
    assert!(same(abi::TALLY_FRAME.fields[1].name, "site"));
    assert!(abi::TALLY_PATH_SITE.fields.len() == 2);
    assert!(same(abi::TALLY_PATH_SITE.fields[0].name, "table"));
    assert!(matches!(abi::TALLY_PATH_SITE.fields[0].ty, FieldType::Ptr));
    assert!(same(abi::TALLY_PATH_SITE.fields[1].name, "path"));
    assert!(matches!(abi::TALLY_PATH_SITE.fields[1].ty, FieldType::U64));
    assert!(abi::SITE_PATH_TAG == 1);
};

/// The LLVM type of a shared struct: its fields' types, in order, not packed.
unsafe fn struct_type(ctx: LLVMContextRef, l: &StructLayout) -> LLVMTypeRef {
    // SAFETY: `g` (or `ctx`) is the live module and context being built (`crate::ir`'s module doc),
    // and the values passed in belong to it.
    unsafe {
        let mut tys: Vec<LLVMTypeRef> = l
            .fields
            .iter()
            .map(|f| match f.ty {
                FieldType::U32 => c::LLVMInt32TypeInContext(ctx),
                FieldType::U64 => c::LLVMInt64TypeInContext(ctx),
                FieldType::Ptr => c::LLVMPointerTypeInContext(ctx, 0),
            })
            .collect();
        c::LLVMStructTypeInContext(ctx, tys.as_mut_ptr(), tys.len() as u32, 0)
    }
}

/// A constant of struct type `ty` (built by [`struct_type`] from `l`) whose fields are
/// `value(name)`; fields `value` leaves out (`None`) are zero.
unsafe fn struct_value(
    ty: LLVMTypeRef,
    l: &StructLayout,
    value: impl Fn(&str) -> Option<LLVMValueRef>,
) -> LLVMValueRef {
    // SAFETY: `g` (or `ctx`) is the live module and context being built (`crate::ir`'s module doc),
    // and the values passed in belong to it.
    unsafe {
        let mut vals: Vec<LLVMValueRef> = l
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                value(f.name)
                    .unwrap_or_else(|| c::LLVMConstNull(c::LLVMStructGetTypeAtIndex(ty, i as u32)))
            })
            .collect();
        c::LLVMConstNamedStruct(ty, vals.as_mut_ptr(), vals.len() as u32)
    }
}

pub(crate) fn cs(s: &str) -> CString {
    CString::new(s).expect("no NUL in internal names")
}

/// Declares a function `void name(args...)` unless it exists.
pub(crate) fn declare_void_fn(
    m: LLVMModuleRef,
    voidt: LLVMTypeRef,
    name: &str,
    args: &mut [LLVMTypeRef],
) -> (LLVMValueRef, LLVMTypeRef) {
    let n = cs(name);
    // SAFETY: the edited values belong to the live module, which only this crate changes during
    // `instrument` (`crate::ir`'s module doc); the attribute is made in the module's context and
    // added to a live call or function; arrays passed live through the call with their lengths.
    unsafe {
        let ty = c::LLVMFunctionType(voidt, args.as_mut_ptr(), args.len() as u32, 0);
        let mut f = c::LLVMGetNamedFunction(m, n.as_ptr());
        if f.is_null() {
            f = c::LLVMAddFunction(m, n.as_ptr(), ty);
            let nounwind = crate::ir::attr_kind("nounwind");
            let ctx = c::LLVMGetModuleContext(m);
            let a = c::LLVMCreateEnumAttribute(ctx, nounwind, 0);
            c::LLVMAddAttributeAtIndex(f, llvm_sys::LLVMAttributeFunctionIndex, a);
        }
        (f, ty)
    }
}

/// A module counter array of `num_counters` entries named `name` (LLVM renames a second one).
///
/// Page-aligned and a whole number of pages (abi::COUNTER_ALIGN): continuous mode maps pages
/// of the profile file over it (docs/design/processes.md, "Continuous mode"). The entries past
/// `num_counters` are padding nothing uses; zero-initialized, the array stays in .bss, so the
/// padding costs address space, not file size or (untouched) memory.
pub(crate) fn counter_array(m: LLVMModuleRef, name: &str, num_counters: u64) -> LLVMValueRef {
    // SAFETY: `m` is a live module; the type and global are created in its context.
    unsafe {
        let i64t = c::LLVMInt64TypeInContext(c::LLVMGetModuleContext(m));
        let per_page = abi::COUNTER_ALIGN / 8;
        let arr_ty = c::LLVMArrayType2(i64t, num_counters.max(1).next_multiple_of(per_page));
        let name = cs(name);
        let counters = c::LLVMAddGlobal(m, arr_ty, name.as_ptr());
        c::LLVMSetLinkage(counters, LLVMLinkage::LLVMInternalLinkage);
        c::LLVMSetInitializer(counters, c::LLVMConstNull(arr_ty));
        c::LLVMSetAlignment(counters, abi::COUNTER_ALIGN as u32);
        counters
    }
}

/// Creates the declarations and the counter array (of `num_counters` entries).
pub(crate) fn make_globals(
    ctx: LLVMContextRef,
    m: LLVMModuleRef,
    num_counters: u64,
    num_path_tables: u64,
    atomic: bool,
) -> Globals {
    // SAFETY: the edited values belong to the live module, which only this crate changes during
    // `instrument` (`crate::ir`'s module doc); the attribute is made in the module's context and
    // added to a live call or function; arrays passed live through the call with their lengths.
    unsafe {
        let i64t = c::LLVMInt64TypeInContext(ctx);
        let i32t = c::LLVMInt32TypeInContext(ctx);
        let ptrt = c::LLVMPointerTypeInContext(ctx, 0);
        let voidt = c::LLVMVoidTypeInContext(ctx);
        let frame_ty = struct_type(ctx, &abi::TALLY_FRAME);

        let counters = counter_array(m, "__tally_counters", num_counters);

        let name = cs("__tally_top");
        let mut tls_top = c::LLVMGetNamedGlobal(m, name.as_ptr());
        if tls_top.is_null() {
            tls_top = c::LLVMAddGlobal(m, ptrt, name.as_ptr());
            c::LLVMSetLinkage(tls_top, LLVMLinkage::LLVMExternalLinkage);
            c::LLVMSetThreadLocalMode(tls_top, runtime_tls_model(m));
        }
        let unwound = declare_void_fn(m, voidt, "__tally_unwound", &mut [ptrt]);
        let longjmp_landed = declare_void_fn(m, voidt, "__tally_longjmp_landed", &mut [i32t, ptrt]);
        let path_count = declare_void_fn(m, voidt, "__tally_path_count", &mut [ptrt, i64t]);
        let trace_edge = declare_void_fn(m, voidt, "__tally_trace_edge", &mut [i64t, i32t]);
        let trace_reentry =
            declare_void_fn(m, voidt, "__tally_trace_reentry", &mut [i64t, i32t, i32t]);
        let ev_check = declare_void_fn(m, voidt, "__tally_events_check", &mut [ptrt, i64t]);
        {
            // Called only near TALLY_STOP_AT: code placement and register allocation treat the
            // checks' slow blocks as cold.
            let k = crate::ir::attr_kind("cold");
            let attr = c::LLVMCreateEnumAttribute(ctx, k, 0);
            c::LLVMAddAttributeAtIndex(ev_check.0, llvm_sys::LLVMAttributeFunctionIndex, attr);
        }
        let tls = |name: &str| {
            let n = cs(name);
            let mut g = c::LLVMGetNamedGlobal(m, n.as_ptr());
            if g.is_null() {
                g = c::LLVMAddGlobal(m, i64t, n.as_ptr());
                c::LLVMSetLinkage(g, LLVMLinkage::LLVMExternalLinkage);
                c::LLVMSetThreadLocalMode(g, runtime_tls_model(m));
            }
            g
        };
        let ev_left = tls("__tally_ev_left");
        let ev_limit = tls("__tally_ev_limit");
        let trace_enter = {
            let n = cs("__tally_trace_enter");
            let mut args = [ptrt, i32t];
            let ty = c::LLVMFunctionType(i64t, args.as_mut_ptr(), 2, 0);
            let mut f = c::LLVMGetNamedFunction(m, n.as_ptr());
            if f.is_null() {
                f = c::LLVMAddFunction(m, n.as_ptr(), ty);
            }
            (f, ty)
        };
        let table_ty = struct_type(ctx, &abi::TALLY_PATH_TABLE);
        let path_home = if num_path_tables > 0 {
            // Every hashed function's home table: PATH_HOME_SLOTS x {path, count}.
            let ty = c::LLVMArrayType2(i64t, num_path_tables * 2 * PATH_HOME_SLOTS);
            let name = cs("__tally_path_home");
            let g = c::LLVMAddGlobal(m, ty, name.as_ptr());
            c::LLVMSetLinkage(g, LLVMLinkage::LLVMInternalLinkage);
            c::LLVMSetInitializer(g, c::LLVMConstNull(ty));
            c::LLVMSetAlignment(g, 64);
            g
        } else {
            c::LLVMConstNull(ptrt)
        };
        let (path_tables, empty_slot) = if num_path_tables > 0 {
            let arr = c::LLVMArrayType2(table_ty, num_path_tables);
            let name = cs("__tally_path_tables");
            let g = c::LLVMAddGlobal(m, arr, name.as_ptr());
            c::LLVMSetLinkage(g, LLVMLinkage::LLVMInternalLinkage);
            c::LLVMSetInitializer(g, c::LLVMConstNull(arr));
            c::LLVMSetAlignment(g, 8);
            // The slot every table points at while empty: key 0 matches no path.
            let slot_ty = c::LLVMArrayType2(i64t, 2);
            let name = cs("__tally_empty_slot");
            let e = c::LLVMAddGlobal(m, slot_ty, name.as_ptr());
            c::LLVMSetLinkage(e, LLVMLinkage::LLVMInternalLinkage);
            c::LLVMSetInitializer(e, c::LLVMConstNull(slot_ty));
            c::LLVMSetGlobalConstant(e, 1);
            c::LLVMSetAlignment(e, 8);
            (g, e)
        } else {
            (c::LLVMConstNull(ptrt), c::LLVMConstNull(ptrt))
        };
        let path_probe = if num_path_tables > 0 && !atomic {
            Some(path_probe_fn(ctx, m, path_count))
        } else {
            None
        };
        Globals {
            ctx,
            module: m,
            i64t,
            i32t,
            ptrt,
            voidt,
            frame_ty,
            counters,
            tls_top,
            unwound,
            longjmp_landed,
            path_count,
            trace_enter,
            trace_edge,
            ev_left,
            ev_limit,
            ev_check,
            trace_reentry,
            table_ty,
            path_tables,
            path_home,
            empty_slot,
            path_probe,
            atomic,
        }
    }
}

/// Defines `internal void tally.path.probe(ptr table, ptr home, i64 path)` (always inlined):
/// the inline look-up of a hashed path count in the function's home table (see `struct
/// tally_path_table` in tally.h), calling `__tally_path_count` when the path's home slot holds
/// another path or none. `home` is a constant address, so a path number known at compile time
/// makes the whole look-up a compare and an increment at constant addresses.
unsafe fn path_probe_fn(
    ctx: LLVMContextRef,
    m: LLVMModuleRef,
    path_count: (LLVMValueRef, LLVMTypeRef),
) -> (LLVMValueRef, LLVMTypeRef) {
    // SAFETY: `g` (or `ctx`) is the live module and context being built (`crate::ir`'s module doc),
    // and the values passed in belong to it.
    unsafe {
        let i64t = c::LLVMInt64TypeInContext(ctx);
        let ptrt = c::LLVMPointerTypeInContext(ctx, 0);
        let voidt = c::LLVMVoidTypeInContext(ctx);
        let mut args = [ptrt, ptrt, i64t];
        let ty = c::LLVMFunctionType(voidt, args.as_mut_ptr(), 3, 0);
        let name = cs("tally.path.probe");
        let f = c::LLVMAddFunction(m, name.as_ptr(), ty);
        c::LLVMSetLinkage(f, LLVMLinkage::LLVMInternalLinkage);
        for a in ["alwaysinline", "nounwind"] {
            let k = crate::ir::attr_kind(a);
            let attr = c::LLVMCreateEnumAttribute(ctx, k, 0);
            c::LLVMAddAttributeAtIndex(f, llvm_sys::LLVMAttributeFunctionIndex, attr);
        }
        let t = c::LLVMGetParam(f, 0);
        let home = c::LLVMGetParam(f, 1);
        let p = c::LLVMGetParam(f, 2);
        let n = cs("");
        let entry = c::LLVMAppendBasicBlockInContext(ctx, f, cs("entry").as_ptr());
        let hit = c::LLVMAppendBasicBlockInContext(ctx, f, cs("hit").as_ptr());
        let miss = c::LLVMAppendBasicBlockInContext(ctx, f, cs("miss").as_ptr());
        let b = c::LLVMCreateBuilderInContext(ctx);
        c::LLVMPositionBuilderAtEnd(b, entry);
        let k = c::LLVMConstInt(i64t, PATH_HASH_MULTIPLIER, 0);
        let h = c::LLVMBuildMul(b, p, k, n.as_ptr());
        let shift = c::LLVMConstInt(i64t, u64::from(64 - PATH_HOME_BITS), 0);
        let h = c::LLVMBuildLShr(b, h, shift, n.as_ptr());
        // Byte offset of the slot: key and count addresses share base and index.
        let off = c::LLVMBuildShl(b, h, c::LLVMConstInt(i64t, 4, 0), n.as_ptr());
        let i8t = c::LLVMInt8TypeInContext(ctx);
        let mut idx = [off];
        let key_p = c::LLVMBuildInBoundsGEP2(b, i8t, home, idx.as_mut_ptr(), 1, n.as_ptr());
        let key = c::LLVMBuildLoad2(b, i64t, key_p, n.as_ptr());
        let eq = c::LLVMBuildICmp(b, llvm_sys::LLVMIntPredicate::LLVMIntEQ, key, p, n.as_ptr());
        let br = c::LLVMBuildCondBr(b, eq, hit, miss);
        crate::ir::set_branch_weights(ctx, br, &[1000, 1]);
        c::LLVMPositionBuilderAtEnd(b, hit);
        let mut one = [c::LLVMConstInt(i64t, 1, 0)];
        let cnt_p = c::LLVMBuildInBoundsGEP2(b, i64t, key_p, one.as_mut_ptr(), 1, n.as_ptr());
        let v = c::LLVMBuildLoad2(b, i64t, cnt_p, n.as_ptr());
        let v = c::LLVMBuildAdd(b, v, c::LLVMConstInt(i64t, 1, 0), n.as_ptr());
        c::LLVMBuildStore(b, v, cnt_p);
        c::LLVMBuildRetVoid(b);
        c::LLVMPositionBuilderAtEnd(b, miss);
        let mut a = [t, p];
        c::LLVMBuildCall2(b, path_count.1, path_count.0, a.as_mut_ptr(), 2, n.as_ptr());
        c::LLVMBuildRetVoid(b);
        c::LLVMDisposeBuilder(b);
        (f, ty)
    }
}

/// `internal void tally.path.slice(ptr table, ptr home, i64 path, i64 min, i64 width, ptr
/// slot0)`: a checked counter slice of a hashed path end (`modes::path`,
/// `tally_graph::paths::slices`): `slot0[path - min]++` when `path - min < width`
/// (unsigned), else the home-table probe (`tally.path.probe`). Defined on first use; always
/// inlined, so that the constants fold into a subtraction, a compare and an increment.
pub(crate) fn path_slice_fn(
    g: &Globals,
    probe: (LLVMValueRef, LLVMTypeRef),
) -> (LLVMValueRef, LLVMTypeRef) {
    // SAFETY: the builder is positioned in a live function and the operands are values of the
    // module (`crate::ir`'s module doc); the edited values belong to the live module, which only
    // this crate changes during `instrument` (`crate::ir`'s module doc); arrays passed live through
    // the call with their lengths; the builder is disposed once, after its last use.
    unsafe {
        let ctx = g.ctx;
        let i64t = g.i64t;
        let ptrt = g.ptrt;
        let voidt = c::LLVMVoidTypeInContext(ctx);
        let mut args = [ptrt, ptrt, i64t, i64t, i64t, ptrt];
        let ty = c::LLVMFunctionType(voidt, args.as_mut_ptr(), 6, 0);
        let (f, entry) = crate::emit::inline_helper(g, "tally.path.slice", ty);
        let Some(entry) = entry else {
            return (f, ty);
        };
        let param = |i| c::LLVMGetParam(f, i);
        let (t, home, p, min, width, slot0) =
            (param(0), param(1), param(2), param(3), param(4), param(5));
        let n = cs("");
        let hit = c::LLVMAppendBasicBlockInContext(ctx, f, cs("hit").as_ptr());
        let miss = c::LLVMAppendBasicBlockInContext(ctx, f, cs("miss").as_ptr());
        let b = c::LLVMCreateBuilderInContext(ctx);
        c::LLVMPositionBuilderAtEnd(b, entry);
        let i = c::LLVMBuildSub(b, p, min, n.as_ptr());
        let inside = c::LLVMBuildICmp(
            b,
            llvm_sys::LLVMIntPredicate::LLVMIntULT,
            i,
            width,
            n.as_ptr(),
        );
        let br = c::LLVMBuildCondBr(b, inside, hit, miss);
        crate::ir::set_branch_weights(ctx, br, &[1000, 1]);
        c::LLVMPositionBuilderAtEnd(b, hit);
        let mut idx = [i];
        let slot = c::LLVMBuildInBoundsGEP2(b, i64t, slot0, idx.as_mut_ptr(), 1, n.as_ptr());
        let v = c::LLVMBuildLoad2(b, i64t, slot, n.as_ptr());
        let v = c::LLVMBuildAdd(b, v, c::LLVMConstInt(i64t, 1, 0), n.as_ptr());
        c::LLVMBuildStore(b, v, slot);
        c::LLVMBuildRetVoid(b);
        c::LLVMPositionBuilderAtEnd(b, miss);
        let mut a = [t, home, p];
        c::LLVMBuildCall2(b, probe.1, probe.0, a.as_mut_ptr(), 3, n.as_ptr());
        c::LLVMBuildRetVoid(b);
        c::LLVMDisposeBuilder(b);
        (f, ty)
    }
}

/// `internal void tally.path.add(ptr table, ptr home, i64 path, i64 k)`: adds `k` to a hashed
/// path's count, as `k` calls of `tally.path.probe` would (path mode's single-cycle loops add
/// their iterations at the loop's exits, `modes::path`): nothing for `k = 0`, the home slot's
/// count when the slot holds the path, else one `__tally_path_count` call and the rest again. Defined on first
/// use; always inlined, so that a constant path number makes the hit a compare and an add at
/// constant addresses.
pub(crate) fn path_add_fn(g: &Globals) -> (LLVMValueRef, LLVMTypeRef) {
    // SAFETY: the builder is positioned in a live function and the operands are values of the
    // module (`crate::ir`'s module doc); the edited values belong to the live module, which only
    // this crate changes during `instrument` (`crate::ir`'s module doc); arrays passed live through
    // the call with their lengths; the builder is disposed once, after its last use.
    unsafe {
        let ctx = g.ctx;
        let i64t = g.i64t;
        let ptrt = g.ptrt;
        let voidt = c::LLVMVoidTypeInContext(ctx);
        let mut args = [ptrt, ptrt, i64t, i64t];
        let ty = c::LLVMFunctionType(voidt, args.as_mut_ptr(), 4, 0);
        let (f, entry) = crate::emit::inline_helper(g, "tally.path.add", ty);
        let Some(entry) = entry else {
            return (f, ty);
        };
        let t = c::LLVMGetParam(f, 0);
        let home = c::LLVMGetParam(f, 1);
        let p = c::LLVMGetParam(f, 2);
        let k = c::LLVMGetParam(f, 3);
        let n = cs("");
        let block = |s: &str| c::LLVMAppendBasicBlockInContext(ctx, f, cs(s).as_ptr());
        let probe = block("probe");
        let hit = block("hit");
        let miss = block("miss");
        let done = block("done");
        let b = c::LLVMCreateBuilderInContext(ctx);
        let zero = c::LLVMConstInt(i64t, 0, 0);
        let one = c::LLVMConstInt(i64t, 1, 0);
        c::LLVMPositionBuilderAtEnd(b, entry);
        let none = c::LLVMBuildICmp(
            b,
            llvm_sys::LLVMIntPredicate::LLVMIntEQ,
            k,
            zero,
            n.as_ptr(),
        );
        c::LLVMBuildCondBr(b, none, done, probe);
        c::LLVMPositionBuilderAtEnd(b, probe);
        let kphi = c::LLVMBuildPhi(b, i64t, n.as_ptr());
        let h = c::LLVMBuildMul(
            b,
            p,
            c::LLVMConstInt(i64t, PATH_HASH_MULTIPLIER, 0),
            n.as_ptr(),
        );
        let shift = c::LLVMConstInt(i64t, u64::from(64 - PATH_HOME_BITS), 0);
        let h = c::LLVMBuildLShr(b, h, shift, n.as_ptr());
        let off = c::LLVMBuildShl(b, h, c::LLVMConstInt(i64t, 4, 0), n.as_ptr());
        let i8t = c::LLVMInt8TypeInContext(ctx);
        let mut idx = [off];
        let key_p = c::LLVMBuildInBoundsGEP2(b, i8t, home, idx.as_mut_ptr(), 1, n.as_ptr());
        let key = c::LLVMBuildLoad2(b, i64t, key_p, n.as_ptr());
        let eq = c::LLVMBuildICmp(b, llvm_sys::LLVMIntPredicate::LLVMIntEQ, key, p, n.as_ptr());
        c::LLVMBuildCondBr(b, eq, hit, miss);
        c::LLVMPositionBuilderAtEnd(b, hit);
        let mut o = [one];
        let cnt_p = c::LLVMBuildInBoundsGEP2(b, i64t, key_p, o.as_mut_ptr(), 1, n.as_ptr());
        let v = c::LLVMBuildLoad2(b, i64t, cnt_p, n.as_ptr());
        let v = c::LLVMBuildAdd(b, v, kphi, n.as_ptr());
        c::LLVMBuildStore(b, v, cnt_p);
        c::LLVMBuildBr(b, done);
        // The miss: one runtime count (which may give the path its home slot), then the
        // rest probed again, as the probes of `k` iterations would have done.
        c::LLVMPositionBuilderAtEnd(b, miss);
        let mut a = [t, p];
        c::LLVMBuildCall2(
            b,
            g.path_count.1,
            g.path_count.0,
            a.as_mut_ptr(),
            2,
            n.as_ptr(),
        );
        let k1 = c::LLVMBuildSub(b, kphi, one, n.as_ptr());
        let more = c::LLVMBuildICmp(
            b,
            llvm_sys::LLVMIntPredicate::LLVMIntNE,
            k1,
            zero,
            n.as_ptr(),
        );
        c::LLVMBuildCondBr(b, more, probe, done);
        let mut vals = [k, k1];
        let mut from = [entry, miss];
        c::LLVMAddIncoming(kphi, vals.as_mut_ptr(), from.as_mut_ptr(), 2);
        c::LLVMPositionBuilderAtEnd(b, done);
        c::LLVMBuildRetVoid(b);
        c::LLVMDisposeBuilder(b);
        (f, ty)
    }
}

/// The TLS model of the runtime's thread-locals (`__tally_top`, `__tally_ev_left`,
/// `__tally_ev_limit`) as instrumented code reaches them. Every linked image (executable or
/// shared object) carries its own hidden copy of the runtime, so the definition is always in
/// the same image as the code. Code built for an executable (PIE or not PIC) uses local-exec:
/// one %fs-relative access. Position-independent code that is not PIE may end up in a shared
/// object, possibly `dlopen`ed, where local-exec cannot link and initial-exec needs static TLS
/// that a `dlopen`ed object may not get: it uses general-dynamic.
pub(crate) fn runtime_tls_model(m: LLVMModuleRef) -> LLVMThreadLocalMode {
    if crate::ir::ends::module_is_executable(m) {
        LLVMThreadLocalMode::LLVMLocalExecTLSModel
    } else {
        LLVMThreadLocalMode::LLVMGeneralDynamicTLSModel
    }
}

/// The runtime's thread-local `name` of type `ty`, declared (external, with
/// [`runtime_tls_model`]) unless the module has it already.
pub(crate) fn runtime_tls(g: &Globals, name: &str, ty: LLVMTypeRef) -> LLVMValueRef {
    let n = cname(name);
    // SAFETY: `g.module` is the live module being instrumented (`crate::ir`'s module doc); a
    // global of that name is looked up before one is added, so the name stays unique.
    unsafe {
        let mut v = c::LLVMGetNamedGlobal(g.module, n.as_ptr());
        if v.is_null() {
            v = c::LLVMAddGlobal(g.module, ty, n.as_ptr());
            c::LLVMSetLinkage(v, LLVMLinkage::LLVMExternalLinkage);
            c::LLVMSetThreadLocalMode(v, runtime_tls_model(g.module));
        }
        v
    }
}

/// Emits the metadata blob, the descriptor and the registering constructor.
pub(crate) fn emit_registration(
    g: &Globals,
    meta: &[u8],
    hash: u64,
    num_counters: u64,
    num_path_tables: u64,
    flags: u32,
) {
    // SAFETY: the builder is positioned in a live function and the operands are values of the
    // module (`crate::ir`'s module doc); the edited values belong to the live module, which only
    // this crate changes during `instrument` (`crate::ir`'s module doc); arrays passed live through
    // the call with their lengths; the builder is disposed once, after its last use.
    unsafe {
        let ctx = g.ctx;
        let m = g.module;
        let i8t = c::LLVMInt8TypeInContext(ctx);
        let blob = c::LLVMConstStringInContext2(ctx, meta.as_ptr() as *const _, meta.len(), 1);
        let blob_ty = c::LLVMArrayType2(i8t, meta.len() as u64);
        let name = cs("__tally_meta");
        let gmeta = c::LLVMAddGlobal(m, blob_ty, name.as_ptr());
        c::LLVMSetLinkage(gmeta, LLVMLinkage::LLVMPrivateLinkage);
        c::LLVMSetInitializer(gmeta, blob);
        c::LLVMSetGlobalConstant(gmeta, 1);

        let desc_ty = struct_type(ctx, &abi::TALLY_MODULE);
        let init = struct_value(desc_ty, &abi::TALLY_MODULE, |field| {
            Some(match field {
                "abi_version" => c::LLVMConstInt(g.i32t, u64::from(ABI_VERSION), 0),
                // Every array make_globals creates is paged.
                "flags" => c::LLVMConstInt(g.i32t, u64::from(flags | abi::MODULE_FLAG_PAGED), 0),
                "hash" => c::LLVMConstInt(g.i64t, hash, 0),
                "meta" => gmeta,
                "meta_len" => c::LLVMConstInt(g.i64t, meta.len() as u64, 0),
                "counters" => g.counters,
                "num_counters" => c::LLVMConstInt(g.i64t, num_counters, 0),
                "path_tables" => g.path_tables,
                "num_path_tables" => c::LLVMConstInt(g.i64t, num_path_tables, 0),
                "next" => return None, // the runtime's
                other => unreachable!("struct tally_module field {other} has no value"),
            })
        });
        let name = cs("__tally_module");
        let desc = c::LLVMAddGlobal(m, desc_ty, name.as_ptr());
        c::LLVMSetLinkage(desc, LLVMLinkage::LLVMInternalLinkage);
        c::LLVMSetInitializer(desc, init);
        c::LLVMSetAlignment(desc, 8);

        // void __tally_ctor(void) { __tally_register(&__tally_module); }
        let register = declare_void_fn(m, g.voidt, "__tally_register", &mut [g.ptrt]);
        let ctor_ty = c::LLVMFunctionType(g.voidt, std::ptr::null_mut(), 0, 0);
        let name = cs("__tally_ctor");
        let ctor = c::LLVMAddFunction(m, name.as_ptr(), ctor_ty);
        c::LLVMSetLinkage(ctor, LLVMLinkage::LLVMInternalLinkage);
        let entry = cs("entry");
        let bb = c::LLVMAppendBasicBlockInContext(ctx, ctor, entry.as_ptr());
        let b = c::LLVMCreateBuilderInContext(ctx);
        c::LLVMPositionBuilderAtEnd(b, bb);
        let mut args = [desc];
        let empty = cs("");
        c::LLVMBuildCall2(
            b,
            register.1,
            register.0,
            args.as_mut_ptr(),
            1,
            empty.as_ptr(),
        );
        c::LLVMBuildRetVoid(b);
        c::LLVMDisposeBuilder(b);

        append_to_global_array(g, "llvm.global_ctors", ctor, 0);

        // void __tally_dtor(void) { __tally_unregister(&__tally_module); } -- so that a
        // dlclose'd object never leaves a dangling module behind. In executables destructors
        // run after the exit handler has written the profile.
        let unregister = declare_void_fn(m, g.voidt, "__tally_unregister", &mut [g.ptrt]);
        let name = cs("__tally_dtor");
        let dtor = c::LLVMAddFunction(m, name.as_ptr(), ctor_ty);
        c::LLVMSetLinkage(dtor, LLVMLinkage::LLVMInternalLinkage);
        let bb = c::LLVMAppendBasicBlockInContext(ctx, dtor, entry.as_ptr());
        let b = c::LLVMCreateBuilderInContext(ctx);
        c::LLVMPositionBuilderAtEnd(b, bb);
        let mut args = [desc];
        c::LLVMBuildCall2(
            b,
            unregister.1,
            unregister.0,
            args.as_mut_ptr(),
            1,
            empty.as_ptr(),
        );
        c::LLVMBuildRetVoid(b);
        c::LLVMDisposeBuilder(b);
        append_to_global_array(g, "llvm.global_dtors", dtor, 0);
    }
}

/// The ELF note of `--tally-profile-dir=DIR` (docs/design/processes.md, "Where the profile goes"):
/// name `"tally"`, type [`abi::NOTE_PROFILE_DIR`], descriptor DIR with its NUL, as module-level
/// assembly in an allocated `SHT_NOTE` section, so that it reaches the image's `PT_NOTE` as the
/// runtime's own `.note.tally` does (no IR global an optimization or LTO could drop).
pub(crate) fn note_asm(dir: &str) -> String {
    let name = abi::NOTE_NAME;
    let bytes: Vec<String> = dir
        .bytes()
        .chain(std::iter::once(0))
        .map(|b| b.to_string())
        .collect();
    format!(
        ".pushsection .note.tally.profile_dir,\"a\",@note\n\
         .balign 4\n\
         .long {}\n\
         .long {}\n\
         .long {}\n\
         .asciz \"{name}\"\n\
         .balign 4\n\
         .byte {}\n\
         .balign 4\n\
         .popsection\n",
        name.len() + 1,
        dir.len() + 1,
        abi::NOTE_PROFILE_DIR,
        bytes.join(","),
    )
}

/// Appends [`note_asm`]`(dir)` to the module's assembly.
pub(crate) fn emit_profile_dir(m: LLVMModuleRef, dir: &str) {
    let asm = note_asm(dir);
    // SAFETY: `m` is a live module; the pointer and length describe `asm`, which LLVM copies.
    unsafe { c::LLVMAppendModuleInlineAsm(m, asm.as_ptr().cast(), asm.len()) }
}

/// Appends `{ priority, f, null }` to `@llvm.global_ctors` / `@llvm.global_dtors`, rebuilding
/// the array.
unsafe fn append_to_global_array(g: &Globals, array: &str, f: LLVMValueRef, priority: u64) {
    // SAFETY: `g` (or `ctx`) is the live module and context being built (`crate::ir`'s module doc),
    // and the values passed in belong to it.
    unsafe {
        let ctx = g.ctx;
        let m = g.module;
        let mut etys = [g.i32t, g.ptrt, g.ptrt];
        let elem_ty = c::LLVMStructTypeInContext(ctx, etys.as_mut_ptr(), 3, 0);
        let name = cs(array);
        let old = c::LLVMGetNamedGlobal(m, name.as_ptr());
        let mut elems: Vec<LLVMValueRef> = Vec::new();
        let mut elem_ty_used = elem_ty;
        if !old.is_null() {
            let init = c::LLVMGetInitializer(old);
            if !init.is_null() {
                let n = c::LLVMGetNumOperands(init);
                for i in 0..n {
                    elems.push(c::LLVMGetOperand(init, i as u32));
                }
                if let Some(&first) = elems.first() {
                    elem_ty_used = c::LLVMTypeOf(first);
                }
            }
        }
        let mut fields = [
            c::LLVMConstInt(g.i32t, priority, 0),
            f,
            c::LLVMConstNull(g.ptrt),
        ];
        let ours = if elem_ty_used == elem_ty {
            c::LLVMConstStructInContext(ctx, fields.as_mut_ptr(), 3, 0)
        } else {
            c::LLVMConstNamedStruct(elem_ty_used, fields.as_mut_ptr(), 3)
        };
        elems.push(ours);
        let arr = c::LLVMConstArray2(elem_ty_used, elems.as_mut_ptr(), elems.len() as u64);
        if !old.is_null() {
            let tmp = cs(&format!("{array}.old"));
            c::LLVMSetValueName2(old, tmp.as_ptr(), tmp.as_bytes().len());
        }
        let newg = c::LLVMAddGlobal(m, c::LLVMTypeOf(arr), name.as_ptr());
        c::LLVMSetLinkage(newg, LLVMLinkage::LLVMAppendingLinkage);
        c::LLVMSetInitializer(newg, arr);
        if !old.is_null() {
            c::LLVMDeleteGlobal(old);
        }
    }
}

/// Pointers to path table `index` and to its home table, setting the table's `function` field
/// to `function` (the function's index in the module metadata) and its `home` field.
pub(crate) fn path_table(g: &Globals, index: u32, function: u32) -> (LLVMValueRef, LLVMValueRef) {
    // SAFETY: the edited values belong to the live module, which only this crate changes during
    // `instrument` (`crate::ir`'s module doc); arrays passed live through the call with their
    // lengths.
    unsafe {
        let arr = c::LLVMGlobalGetValueType(g.path_tables);
        let n = c::LLVMGetArrayLength2(arr);
        // Rebuild the initializer with this table's function index set.
        let mut elems: Vec<LLVMValueRef> = (0..n)
            .map(|i| {
                let init = c::LLVMGetInitializer(g.path_tables);
                let e = c::LLVMGetAggregateElement(init, i as u32);
                if e.is_null() {
                    c::LLVMConstNull(g.table_ty)
                } else {
                    e
                }
            })
            .collect();
        let home = {
            let mut idx = [c::LLVMConstInt(
                g.i64t,
                u64::from(index) * 2 * PATH_HOME_SLOTS,
                0,
            )];
            c::LLVMConstInBoundsGEP2(g.i64t, g.path_home, idx.as_mut_ptr(), 1)
        };
        // Everything else starts at zero (capacity 0: no overflow table yet).
        elems[index as usize] =
            struct_value(g.table_ty, &abi::TALLY_PATH_TABLE, |field| match field {
                "slots" => Some(g.empty_slot),
                "function" => Some(c::LLVMConstInt(g.i32t, u64::from(function), 0)),
                "home" => Some(home),
                _ => None,
            });
        let init = c::LLVMConstArray2(g.table_ty, elems.as_mut_ptr(), n);
        c::LLVMSetInitializer(g.path_tables, init);
        let mut idx = [
            c::LLVMConstInt(g.i64t, 0, 0),
            c::LLVMConstInt(g.i64t, u64::from(index), 0),
        ];
        (
            c::LLVMConstInBoundsGEP2(arr, g.path_tables, idx.as_mut_ptr(), 2),
            home,
        )
    }
}

/// Loop peeling only (no unrolling), run after mem2reg in path mode. A loop whose body is one
/// path from its header back to it (at -O2 many `for` loops, their `if`s turned into selects)
/// ends the same path on every back edge: the path register's phi at the header takes the
/// entry's value once and a constant from the back edge after that. LLVM's peeling for phis
/// that become invariant (`calculateIterationsToInvariance`) moves the first iteration out of
/// the loop, so the loop itself counts that constant path at a constant address: no path
/// arithmetic, no reset and no slice check per iteration (zlib's `fill_window` slide loop: six
/// instructions per iteration to two). A semantics-preserving transformation of the
/// instrumented code, so every count is unchanged; functions at -O0 are `optnone` and keep
/// their loops.
pub(crate) const PEEL: &str = "loop-unroll<O2;peeling;no-partial;no-runtime;no-upperbound;no-profile-peeling;full-unroll-max=0>";

/// Inlines the `tally.path.probe` helper and runs mem2reg over the module so that path
/// registers and promoted counters live in registers (functions built at -O0 are `optnone` and
/// keep them in memory); with `peel`, then [`PEEL`].
pub(crate) fn promote_allocas(module: &inkwell::module::Module, peel: bool) -> Result<(), String> {
    let passes = if peel {
        format!("always-inline,function(mem2reg,{PEEL})")
    } else {
        "always-inline,function(mem2reg)".to_string()
    };
    run_passes(module, &passes)
}

/// The passes clang's -O1/-O2/-Os pipeline runs on a module before its sample-profile loader
/// (`buildModuleSimplificationPipeline` in LLVM 19: the pseudo-probe pass of
/// `-fpseudo-probe-for-profiling` first, then the early function simplification). A
/// `--tally-pgo` build instruments the module as they leave it, so its graph, probe ids and
/// checksums are the ones the loader of a `--tally-use` build sees: every probe the profile
/// names is in a block the loader weighs (at -O3, call-site splitting runs there too).
pub(crate) const BEFORE_SAMPLE_LOADER: &str = "pseudo-probe,inferattrs,coro-early,\
    function(ee-instrument,lower-expect,simplifycfg,sroa<modify-cfg>,early-cse)";

/// Runs [`BEFORE_SAMPLE_LOADER`] over the module (`--tally-pgo`).
pub(crate) fn add_pseudo_probes(module: &inkwell::module::Module) -> Result<(), String> {
    run_passes(module, BEFORE_SAMPLE_LOADER)
}

/// Runs an LLVM pass pipeline (`opt -passes=` syntax) over the module.
pub(super) fn run_passes(module: &inkwell::module::Module, passes: &str) -> Result<(), String> {
    use inkwell::passes::PassBuilderOptions;
    use inkwell::targets::{
        CodeModel, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
    };
    use inkwell::OptimizationLevel;
    Target::initialize_x86(&InitializationConfig::default());
    let triple = module.get_triple();
    let triple = if triple.as_str().to_bytes().is_empty() {
        TargetMachine::get_default_triple()
    } else {
        TargetTriple::create(&triple.as_str().to_string_lossy())
    };
    let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
    let tm = target
        .create_target_machine(
            &triple,
            "generic",
            "",
            OptimizationLevel::Default,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or("cannot create a target machine for mem2reg")?;
    module
        .run_passes(passes, &tm, PassBuilderOptions::create())
        .map_err(|e| e.to_string())
}
