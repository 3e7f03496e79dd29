//! Emission helpers shared by every mode: the module-level declarations the instrumentation
//! refers to ([`Globals`]) and an IR builder with tally's conventions ([`Emitter`]: explicit
//! debug locations, counter addresses, plain or atomic increments, runtime calls).

pub(crate) mod build;
pub(crate) mod frame;
pub(crate) mod sites;
pub(crate) mod surgery;

use crate::ir::{self, Bb, Val};
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use std::ffi::CString;

/// Module-level declarations the instrumentation refers to.
#[derive(Clone)]
pub(crate) struct Globals {
    pub ctx: LLVMContextRef,
    pub module: LLVMModuleRef,
    pub i64t: LLVMTypeRef,
    pub i32t: LLVMTypeRef,
    pub ptrt: LLVMTypeRef,
    pub voidt: LLVMTypeRef,
    /// `{ ptr prev, ptr site }`
    pub frame_ty: LLVMTypeRef,
    /// The module's counter array.
    pub counters: LLVMValueRef,
    /// `__tally_top`, thread-local.
    pub tls_top: LLVMValueRef,
    pub unwound: (LLVMValueRef, LLVMTypeRef),
    pub longjmp_landed: (LLVMValueRef, LLVMTypeRef),
    /// `__tally_ev_left`: the thread's event countdown (events mode).
    pub ev_left: LLVMValueRef,
    /// `__tally_ev_limit`: the count is `limit - left`.
    pub ev_limit: LLVMValueRef,
    /// `__tally_events_check(where, query_inc)`: stops at TALLY_STOP_AT (see `tally.h`).
    pub ev_check: (LLVMValueRef, LLVMTypeRef),
    /// `__tally_trace_enter(counters, function) -> activation`.
    pub trace_enter: (LLVMValueRef, LLVMTypeRef),
    /// `__tally_trace_edge(activation, edge)`.
    pub trace_edge: (LLVMValueRef, LLVMTypeRef),
    /// `__tally_trace_reentry(activation, edge, ret)`.
    pub trace_reentry: (LLVMValueRef, LLVMTypeRef),
    /// `__tally_path_count(table, path)`.
    pub path_count: (LLVMValueRef, LLVMTypeRef),
    /// `struct tally_path_table`.
    pub table_ty: LLVMTypeRef,
    /// The module's path tables (`[N x table_ty]`), or a null pointer when it has none.
    pub path_tables: LLVMValueRef,
    /// The read-only empty slot empty path tables point at (null without path tables).
    pub empty_slot: LLVMValueRef,
    /// `__tally_path_home`: the home tables of the module's hashed functions, or null.
    pub path_home: LLVMValueRef,
    /// `tally.path.probe(table, path)`: the inline first-slot probe (path tables, not atomic).
    pub path_probe: Option<(LLVMValueRef, LLVMTypeRef)>,
    /// Use atomic increments.
    pub atomic: bool,
}

pub(crate) struct Emitter<'a> {
    pub g: &'a Globals,
    pub b: LLVMBuilderRef,
    /// Debug location for calls in functions with debug info.
    pub fn_scope: Option<LLVMMetadataRef>,
    pub func: Val,
}

/// A C string for an LLVM value or global name.
pub(crate) fn cname(s: &str) -> CString {
    CString::new(s).expect("no NUL in internal names")
}

impl Emitter<'_> {
    pub(crate) fn at(&self, before: Val) {
        // SAFETY: the builder is positioned in a live function and the operands are values of the
        // module (`crate::ir`'s module doc); the edited values belong to the live module, which
        // only this crate changes during `instrument` (`crate::ir`'s module doc).
        unsafe {
            c::LLVMPositionBuilderBefore(self.b, before.0);
            c::LLVMSetCurrentDebugLocation2(self.b, std::ptr::null_mut());
        }
    }
    pub(crate) fn at_end(&self, bb: Bb) {
        // SAFETY: the builder is positioned in a live function and the operands are values of the
        // module (`crate::ir`'s module doc); the edited values belong to the live module, which
        // only this crate changes during `instrument` (`crate::ir`'s module doc).
        unsafe {
            c::LLVMPositionBuilderAtEnd(self.b, bb.0);
            c::LLVMSetCurrentDebugLocation2(self.b, std::ptr::null_mut());
        }
    }
    pub(crate) fn i64c(&self, v: u64) -> LLVMValueRef {
        // SAFETY: constants and types are made in the live module's context from its values
        // (`crate::ir`'s module doc).
        unsafe { c::LLVMConstInt(self.g.i64t, v, 0) }
    }
    pub(crate) fn i32c(&self, v: u64) -> LLVMValueRef {
        // SAFETY: constants and types are made in the live module's context from its values
        // (`crate::ir`'s module doc).
        unsafe { c::LLVMConstInt(self.g.i32t, v, 0) }
    }
    /// Pointer to counter `idx` (module-relative) as a constant expression.
    pub(crate) fn counter_ptr(&self, idx: u64) -> LLVMValueRef {
        let mut i = [self.i64c(idx)];
        // SAFETY: constants and types are made in the live module's context from its values
        // (`crate::ir`'s module doc); arrays passed live through the call with their lengths.
        unsafe { c::LLVMConstInBoundsGEP2(self.g.i64t, self.g.counters, i.as_mut_ptr(), 1) }
    }
    /// `*ptr += delta` at the builder position.
    pub(crate) fn add_to(&self, ptr: LLVMValueRef, delta: LLVMValueRef) {
        let empty = cname("");
        // SAFETY: the builder is positioned in a live function and the operands are values of the
        // module (`crate::ir`'s module doc).
        unsafe {
            if self.g.atomic {
                c::LLVMBuildAtomicRMW(
                    self.b,
                    llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpAdd,
                    ptr,
                    delta,
                    llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic,
                    0,
                );
            } else {
                let v = c::LLVMBuildLoad2(self.b, self.g.i64t, ptr, empty.as_ptr());
                let v1 = c::LLVMBuildAdd(self.b, v, delta, empty.as_ptr());
                c::LLVMBuildStore(self.b, v1, ptr);
            }
        }
    }
    pub(crate) fn increment(&self, idx: u64) {
        self.add_to(self.counter_ptr(idx), self.i64c(1));
    }
    pub(crate) fn call_loc(&self, near: Val) -> Option<LLVMMetadataRef> {
        let scope = self.fn_scope?;
        Some(
            near.debug_loc()
                .unwrap_or_else(|| ir::artificial_loc(self.g.ctx, scope)),
        )
    }
    pub(crate) fn call(
        &self,
        f: (LLVMValueRef, LLVMTypeRef),
        args: &mut [LLVMValueRef],
        near: Val,
    ) {
        self.call_instr(f, args, near);
    }
    /// The value a setjmp-like call `sj` returned, as the `int32_t` the runtime's re-entry
    /// functions take: the value itself when the call returns `i32` (every real declaration),
    /// else `ret != 0` (autoconf's link tests declare `char vfork ();`). At the builder's
    /// position.
    pub(crate) fn setjmp_ret(&self, sj: Val) -> LLVMValueRef {
        let empty = cname("");
        // SAFETY: `sj` is a live call returning an integer (`lower::is_setjmp` checks it); the
        // instructions are built at the builder's position, after it.
        unsafe {
            let ty = c::LLVMTypeOf(sj.0);
            if ty == self.g.i32t {
                return sj.0;
            }
            let zero = c::LLVMConstInt(ty, 0, 0);
            let ne = c::LLVMBuildICmp(
                self.b,
                llvm_sys::LLVMIntPredicate::LLVMIntNE,
                sj.0,
                zero,
                empty.as_ptr(),
            );
            c::LLVMBuildZExt(self.b, ne, self.g.i32t, empty.as_ptr())
        }
    }
    /// [`Emitter::call`], returning the call instruction.
    pub(crate) fn call_instr(
        &self,
        f: (LLVMValueRef, LLVMTypeRef),
        args: &mut [LLVMValueRef],
        near: Val,
    ) -> LLVMValueRef {
        let empty = cname("");
        // SAFETY: the builder is positioned in a live function and the operands are values of the
        // module (`crate::ir`'s module doc); arrays passed live through the call with their
        // lengths.
        let call = unsafe {
            c::LLVMBuildCall2(
                self.b,
                f.1,
                f.0,
                args.as_mut_ptr(),
                args.len() as u32,
                empty.as_ptr(),
            )
        };
        Val(call).set_debug_loc(self.call_loc(near));
        call
    }
    pub(crate) fn field(&self, rec: LLVMValueRef, i: u32) -> LLVMValueRef {
        let empty = cname("");
        // SAFETY: the builder is positioned in a live function and the operands are values of the
        // module (`crate::ir`'s module doc).
        unsafe { c::LLVMBuildStructGEP2(self.b, self.g.frame_ty, rec, i, empty.as_ptr()) }
    }
}

/// An internal, always-inlined, nounwind function `name` of type `ty` and its entry block
/// (`None` if the module has it already).
pub(crate) fn inline_helper(
    g: &Globals,
    name: &str,
    ty: LLVMTypeRef,
) -> (LLVMValueRef, Option<LLVMBasicBlockRef>) {
    let n = CString::new(name).expect("no NUL in a helper name");
    // SAFETY: `g.module` and `g.ctx` are the live module and its context (`crate::ir`'s
    // module doc), `ty` a function type of that context; the function is looked up before it
    // is added, so one name gives one helper.
    unsafe {
        let f = c::LLVMGetNamedFunction(g.module, n.as_ptr());
        if !f.is_null() {
            return (f, None);
        }
        let f = c::LLVMAddFunction(g.module, n.as_ptr(), ty);
        c::LLVMSetLinkage(f, llvm_sys::LLVMLinkage::LLVMInternalLinkage);
        for a in ["alwaysinline", "nounwind"] {
            let attr = c::LLVMCreateEnumAttribute(g.ctx, ir::attr_kind(a), 0);
            c::LLVMAddAttributeAtIndex(f, llvm_sys::LLVMAttributeFunctionIndex, attr);
        }
        let entry = c::LLVMAppendBasicBlockInContext(g.ctx, f, c"entry".as_ptr());
        (f, Some(entry))
    }
}

/// Defines the helper `name` of [`inline_helper`] (unless the module has it already): `body`
/// builds it with an emitter of its own positioned at the end of its entry block (no debug
/// location: a helper has no subprogram). The function.
pub(crate) fn define_inline_helper(
    g: &Globals,
    name: &str,
    ty: LLVMTypeRef,
    body: impl FnOnce(&Emitter),
) -> LLVMValueRef {
    let (f, entry) = inline_helper(g, name, ty);
    if let Some(entry) = entry {
        let em = Emitter::new(g, Val(f));
        em.position_at_end(Bb(entry));
        body(&em);
    }
    f
}
