//! The safe emission layer the modes build on: [`Emitter`] owns its IR builder (created by
//! [`Emitter::new`], disposed on drop) and builds each instruction a mode needs through a
//! method, and the free functions below make the constants, types, globals and blocks, read
//! and set the properties of the module's functions and globals, and edit the instructions,
//! the modes touch. Mode files (`crate::modes`) call only these and the
//! other toolkit layers; the raw LLVM-C calls, and the `unsafe` they need, stay here.
//!
//! Why the calls below are sound, once for all of them: every handle they take (`LLVMValueRef`,
//! `LLVMTypeRef`, [`Val`], [`Bb`]) comes from LLVM for the module being instrumented or its
//! context, both alive for the whole `instrument` call, and only this crate edits the module
//! meanwhile (`crate::ir`'s module doc); an erased value is never used again. The builder
//! `self.b` is created by [`Emitter::new`] in the module's context and disposed only by `Drop`.
//! What LLVM itself requires of the operands (types that agree, a positioned builder) it
//! checks with assertions or the module verifier `instrument` runs; wrong types are bugs that
//! produce an invalid module, not memory unsafety in this process. Names are NUL-free
//! (`cname`), and array arguments are slices that live through the call.

use super::{cname, Emitter, Globals};
use crate::ir::{self, Bb, Val};
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::LLVMIntPredicate;

impl<'a> Emitter<'a> {
    /// An emitter with a builder of its own (disposed on drop) for function `func`, with the
    /// function's debug scope.
    pub(crate) fn new(g: &'a Globals, func: Val) -> Emitter<'a> {
        // SAFETY: `g.ctx` is the module's live context (module doc).
        let b = unsafe { c::LLVMCreateBuilderInContext(g.ctx) };
        Emitter {
            g,
            b,
            fn_scope: ir::subprogram(func),
            func,
        }
    }
    /// Positions the builder at the end of `bb`, keeping its debug location ([`Emitter::at_end`]
    /// clears it).
    pub(crate) fn position_at_end(&self, bb: Bb) {
        // SAFETY: module doc.
        unsafe { c::LLVMPositionBuilderAtEnd(self.b, bb.0) }
    }
    /// The block the builder is positioned in.
    pub(crate) fn insert_block(&self) -> Bb {
        // SAFETY: module doc; the builder has been positioned (null otherwise, which callers
        // of a positioned builder never see).
        Bb(unsafe { c::LLVMGetInsertBlock(self.b) })
    }
    /// `load ty, ptr`.
    pub(crate) fn load(&self, ty: LLVMTypeRef, ptr: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildLoad2(self.b, ty, ptr, e.as_ptr()) }
    }
    /// `store v, ptr`.
    pub(crate) fn store(&self, v: LLVMValueRef, ptr: LLVMValueRef) -> LLVMValueRef {
        // SAFETY: module doc.
        unsafe { c::LLVMBuildStore(self.b, v, ptr) }
    }
    /// `alloca ty`, named `name`, at the builder's position.
    pub(crate) fn alloca(&self, ty: LLVMTypeRef, name: &str) -> LLVMValueRef {
        let n = cname(name);
        // SAFETY: module doc.
        unsafe { c::LLVMBuildAlloca(self.b, ty, n.as_ptr()) }
    }
    /// `a + b`.
    pub(crate) fn add(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildAdd(self.b, a, b, e.as_ptr()) }
    }
    /// `a - b`.
    pub(crate) fn sub(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildSub(self.b, a, b, e.as_ptr()) }
    }
    /// `a * b`.
    pub(crate) fn mul(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildMul(self.b, a, b, e.as_ptr()) }
    }
    /// `a & b`.
    pub(crate) fn and(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildAnd(self.b, a, b, e.as_ptr()) }
    }
    /// `a | b`.
    pub(crate) fn or(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildOr(self.b, a, b, e.as_ptr()) }
    }
    /// `a << b`.
    pub(crate) fn shl(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildShl(self.b, a, b, e.as_ptr()) }
    }
    /// `a >> b` (logical).
    pub(crate) fn lshr(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildLShr(self.b, a, b, e.as_ptr()) }
    }
    /// `~v`.
    pub(crate) fn not(&self, v: LLVMValueRef) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildNot(self.b, v, e.as_ptr()) }
    }
    /// `zext v to ty`.
    pub(crate) fn zext(&self, v: LLVMValueRef, ty: LLVMTypeRef) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildZExt(self.b, v, ty, e.as_ptr()) }
    }
    /// `icmp pred a, b`.
    pub(crate) fn icmp(
        &self,
        pred: LLVMIntPredicate,
        a: LLVMValueRef,
        b: LLVMValueRef,
    ) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildICmp(self.b, pred, a, b, e.as_ptr()) }
    }
    /// `select cond, a, b`.
    pub(crate) fn select(
        &self,
        cond: LLVMValueRef,
        a: LLVMValueRef,
        b: LLVMValueRef,
    ) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildSelect(self.b, cond, a, b, e.as_ptr()) }
    }
    /// `br dst`.
    pub(crate) fn br(&self, dst: Bb) -> Val {
        // SAFETY: module doc.
        Val(unsafe { c::LLVMBuildBr(self.b, dst.0) })
    }
    /// `br cond, then, otherwise`.
    pub(crate) fn cond_br(&self, cond: LLVMValueRef, then: Bb, otherwise: Bb) -> Val {
        // SAFETY: module doc.
        Val(unsafe { c::LLVMBuildCondBr(self.b, cond, then.0, otherwise.0) })
    }
    /// `phi ty` without incoming values ([`add_incoming`]).
    pub(crate) fn phi(&self, ty: LLVMTypeRef) -> Val {
        self.phi_named(ty, "")
    }
    /// [`Emitter::phi`], named `name`.
    pub(crate) fn phi_named(&self, ty: LLVMTypeRef, name: &str) -> Val {
        let n = cname(name);
        // SAFETY: module doc.
        Val(unsafe { c::LLVMBuildPhi(self.b, ty, n.as_ptr()) })
    }
    /// `getelementptr ty, ptr, idx...`.
    pub(crate) fn gep(
        &self,
        ty: LLVMTypeRef,
        ptr: LLVMValueRef,
        idx: &[LLVMValueRef],
    ) -> LLVMValueRef {
        let e = cname("");
        let mut idx = idx.to_vec();
        // SAFETY: module doc; `idx` lives through the call and its length is passed.
        unsafe {
            c::LLVMBuildGEP2(
                self.b,
                ty,
                ptr,
                idx.as_mut_ptr(),
                idx.len() as u32,
                e.as_ptr(),
            )
        }
    }
    /// `getelementptr inbounds ty, ptr, idx...`.
    pub(crate) fn inbounds_gep(
        &self,
        ty: LLVMTypeRef,
        ptr: LLVMValueRef,
        idx: &[LLVMValueRef],
    ) -> LLVMValueRef {
        let e = cname("");
        let mut idx = idx.to_vec();
        // SAFETY: module doc; `idx` lives through the call and its length is passed.
        unsafe {
            c::LLVMBuildInBoundsGEP2(
                self.b,
                ty,
                ptr,
                idx.as_mut_ptr(),
                idx.len() as u32,
                e.as_ptr(),
            )
        }
    }
    /// The address of field `i` of the struct of type `ty` at `ptr`.
    pub(crate) fn struct_gep(&self, ty: LLVMTypeRef, ptr: LLVMValueRef, i: u32) -> LLVMValueRef {
        let e = cname("");
        // SAFETY: module doc.
        unsafe { c::LLVMBuildStructGEP2(self.b, ty, ptr, i, e.as_ptr()) }
    }
    /// A call of `f` (function, type) with `args`, without a debug location
    /// ([`Emitter::call_instr`] sets one).
    pub(crate) fn call_plain(
        &self,
        f: (LLVMValueRef, LLVMTypeRef),
        args: &[LLVMValueRef],
    ) -> LLVMValueRef {
        let e = cname("");
        let mut args = args.to_vec();
        // SAFETY: module doc; `args` lives through the call and its length is passed.
        unsafe {
            c::LLVMBuildCall2(
                self.b,
                f.1,
                f.0,
                args.as_mut_ptr(),
                args.len() as u32,
                e.as_ptr(),
            )
        }
    }
    /// `ret v`.
    pub(crate) fn ret(&self, v: LLVMValueRef) -> Val {
        // SAFETY: module doc.
        Val(unsafe { c::LLVMBuildRet(self.b, v) })
    }
    /// `ret void`.
    pub(crate) fn ret_void(&self) -> Val {
        // SAFETY: module doc.
        Val(unsafe { c::LLVMBuildRetVoid(self.b) })
    }
    /// Inserts `inst`, an instruction in no block (removed by [`remove_from_parent`] or
    /// cloned), at the builder's position.
    pub(crate) fn insert(&self, inst: Val) {
        // SAFETY: module doc; LLVM asserts that `inst` has no parent.
        unsafe { c::LLVMInsertIntoBuilder(self.b, inst.0) }
    }
    /// Positions the builder before `inst` and its debug records, without a debug location.
    pub(crate) fn before_with_records(&self, inst: Val) {
        // SAFETY: module doc.
        unsafe { c::LLVMPositionBuilderBeforeInstrAndDbgRecords(self.b, inst.0) }
    }
}

impl Drop for Emitter<'_> {
    fn drop(&mut self) {
        // SAFETY: `self.b` was created by `Emitter::new` and is disposed once, here.
        unsafe { c::LLVMDisposeBuilder(self.b) }
    }
}

/// The integer constant `v` of type `ty` (`sign_extend`: `v` is a two's complement value
/// wider types extend with its sign).
pub(crate) fn const_int(ty: LLVMTypeRef, v: u64, sign_extend: bool) -> LLVMValueRef {
    // SAFETY: module doc.
    unsafe { c::LLVMConstInt(ty, v, i32::from(sign_extend)) }
}

/// The null (zero) value of `ty`.
pub(crate) fn const_null(ty: LLVMTypeRef) -> LLVMValueRef {
    // SAFETY: module doc.
    unsafe { c::LLVMConstNull(ty) }
}

/// The constant array `[elems]` of element type `ty`.
pub(crate) fn const_array(ty: LLVMTypeRef, elems: &[LLVMValueRef]) -> LLVMValueRef {
    let mut elems = elems.to_vec();
    // SAFETY: module doc; `elems` lives through the call and its length is passed.
    unsafe { c::LLVMConstArray2(ty, elems.as_mut_ptr(), elems.len() as u64) }
}

/// The type of `v`.
pub(crate) fn type_of(v: LLVMValueRef) -> LLVMTypeRef {
    // SAFETY: module doc.
    unsafe { c::LLVMTypeOf(v) }
}

/// `i8` of the module's context.
pub(crate) fn i8_type(g: &Globals) -> LLVMTypeRef {
    // SAFETY: module doc.
    unsafe { c::LLVMInt8TypeInContext(g.ctx) }
}

/// The literal (unnamed, unpacked) struct type `{ fields }`.
pub(crate) fn struct_type(g: &Globals, fields: &[LLVMTypeRef]) -> LLVMTypeRef {
    let mut fields = fields.to_vec();
    // SAFETY: module doc; `fields` lives through the call and its length is passed.
    unsafe { c::LLVMStructTypeInContext(g.ctx, fields.as_mut_ptr(), fields.len() as u32, 0) }
}

/// The function type `ret (params)`.
pub(crate) fn function_type(ret: LLVMTypeRef, params: &[LLVMTypeRef]) -> LLVMTypeRef {
    let mut params = params.to_vec();
    // SAFETY: module doc; `params` lives through the call and its length is passed.
    unsafe { c::LLVMFunctionType(ret, params.as_mut_ptr(), params.len() as u32, 0) }
}

/// A new private constant global `name` holding `init`.
pub(crate) fn private_constant(g: &Globals, name: &str, init: LLVMValueRef) -> LLVMValueRef {
    let n = cname(name);
    // SAFETY: module doc.
    unsafe {
        let v = c::LLVMAddGlobal(g.module, c::LLVMTypeOf(init), n.as_ptr());
        c::LLVMSetLinkage(v, llvm_sys::LLVMLinkage::LLVMPrivateLinkage);
        c::LLVMSetInitializer(v, init);
        c::LLVMSetGlobalConstant(v, 1);
        v
    }
}

/// A new block `name` at the end of function `func`.
pub(crate) fn append_block(g: &Globals, func: Val, name: &str) -> Bb {
    let n = cname(name);
    // SAFETY: module doc.
    Bb(unsafe { c::LLVMAppendBasicBlockInContext(g.ctx, func.0, n.as_ptr()) })
}

/// Moves block `bb` right after `after` (same function).
pub(crate) fn move_block_after(bb: Bb, after: Bb) {
    // SAFETY: module doc.
    unsafe { c::LLVMMoveBasicBlockAfter(bb.0, after.0) }
}

/// Erases instruction `inst` (it must have no uses left); it is not used again.
pub(crate) fn erase(inst: Val) {
    // SAFETY: module doc; callers drop `inst` after this.
    unsafe { c::LLVMInstructionEraseFromParent(inst.0) }
}

/// Takes `inst` out of its block, to be inserted elsewhere ([`Emitter::insert`]).
pub(crate) fn remove_from_parent(inst: Val) {
    // SAFETY: module doc; `inst` stays alive, owned by no block until inserted again.
    unsafe { c::LLVMInstructionRemoveFromParent(inst.0) }
}

/// Replaces every use of `old` with `new`.
pub(crate) fn replace_all_uses(old: LLVMValueRef, new: LLVMValueRef) {
    // SAFETY: module doc.
    unsafe { c::LLVMReplaceAllUsesWith(old, new) }
}

/// Sets operand `i` of `user` to `v`.
pub(crate) fn set_operand(user: Val, i: u32, v: LLVMValueRef) {
    // SAFETY: module doc; callers take `i` below the user's operand count.
    unsafe { c::LLVMSetOperand(user.0, i, v) }
}

/// Adds the incoming value `v` from block `from` to `phi`.
pub(crate) fn add_incoming(phi: Val, v: LLVMValueRef, from: Bb) {
    let mut vals = [v];
    let mut blocks = [from.0];
    // SAFETY: module doc; both one-element arrays live through the call.
    unsafe { c::LLVMAddIncoming(phi.0, vals.as_mut_ptr(), blocks.as_mut_ptr(), 1) }
}

/// Inline assembly `text` with `constraints`, of function type `fty`, with side effects, in
/// AT&T syntax.
pub(crate) fn inline_asm(fty: LLVMTypeRef, text: &str, constraints: &str) -> LLVMValueRef {
    // SAFETY: module doc; both strings are passed with their lengths (no NUL needed) and live
    // through the call.
    unsafe {
        c::LLVMGetInlineAsm(
            fty,
            text.as_ptr() as *const _,
            text.len(),
            constraints.as_ptr() as *const _,
            constraints.len(),
            1,
            0,
            llvm_sys::LLVMInlineAsmDialect::LLVMInlineAsmDialectATT,
            0,
        )
    }
}

/// Adds the type attribute `kind` (e.g. `elementtype`) with type `ty` at index `i` of `call`.
pub(crate) fn add_call_type_attr(
    g: &Globals,
    call: LLVMValueRef,
    i: u32,
    kind: &str,
    ty: LLVMTypeRef,
) {
    // SAFETY: module doc; `attr_kind` gives a known attribute kind.
    unsafe {
        let attr = c::LLVMCreateTypeAttribute(g.ctx, ir::attr_kind(kind), ty);
        c::LLVMAddCallSiteAttribute(call, i, attr);
    }
}

/// The constant C string `text` (NUL-terminated), as an `[N x i8]`.
pub(crate) fn const_c_string(g: &Globals, text: &str) -> LLVMValueRef {
    // SAFETY: module doc; `text` is passed with its length and lives through the call.
    unsafe { c::LLVMConstStringInContext2(g.ctx, text.as_ptr() as *const _, text.len(), 0) }
}

/// Parameter `i` of function `f`.
pub(crate) fn param(f: LLVMValueRef, i: u32) -> LLVMValueRef {
    // SAFETY: module doc; callers take `i` below the function type's parameter count.
    unsafe { c::LLVMGetParam(f, i) }
}

/// Adds the incoming values `vals[i]` from `blocks[i]` to `phi`, in order.
pub(crate) fn add_incomings(phi: Val, vals: &[LLVMValueRef], blocks: &[Bb]) {
    assert_eq!(vals.len(), blocks.len(), "one block per incoming value");
    let mut vals = vals.to_vec();
    let mut blocks: Vec<LLVMBasicBlockRef> = blocks.iter().map(|b| b.0).collect();
    // SAFETY: module doc; both vectors live through the call and have the count passed.
    unsafe {
        c::LLVMAddIncoming(
            phi.0,
            vals.as_mut_ptr(),
            blocks.as_mut_ptr(),
            vals.len() as u32,
        )
    }
}

/// A copy of instruction `inst` in no block (to be inserted, [`Emitter::insert`]), with the
/// same operands.
pub(crate) fn clone_instruction(inst: Val) -> Val {
    // SAFETY: module doc.
    Val(unsafe { c::LLVMInstructionClone(inst.0) })
}

/// The module function or global `v` belongs to.
pub(crate) fn global_parent(v: Val) -> LLVMModuleRef {
    // SAFETY: module doc; `v` is a global value (function, global, alias) of the live module.
    unsafe { c::LLVMGetGlobalParent(v.0) }
}

/// The context of module `m`.
pub(crate) fn module_context(m: LLVMModuleRef) -> LLVMContextRef {
    // SAFETY: module doc; `m` is the live module.
    unsafe { c::LLVMGetModuleContext(m) }
}

/// Whether module `m` has the module flag `name`.
pub(crate) fn has_module_flag(m: LLVMModuleRef, name: &str) -> bool {
    // SAFETY: module doc; `name` is passed with its length (no NUL needed) and lives through
    // the call, which only reads the module.
    !unsafe { c::LLVMGetModuleFlag(m, name.as_ptr().cast(), name.len()) }.is_null()
}

/// The visibility of global value `v`.
pub(crate) fn visibility(v: LLVMValueRef) -> llvm_sys::LLVMVisibility {
    // SAFETY: module doc; a read of a global value of the live module.
    unsafe { c::LLVMGetVisibility(v) }
}

/// The value type of global value `v` (a function's function type).
pub(crate) fn global_value_type(v: LLVMValueRef) -> LLVMTypeRef {
    // SAFETY: module doc; a read of a global value of the live module.
    unsafe { c::LLVMGlobalGetValueType(v) }
}

/// The global variable named `name` in module `m`, if any.
pub(crate) fn named_global(m: LLVMModuleRef, name: &str) -> Option<LLVMValueRef> {
    let n = cname(name);
    // SAFETY: module doc; `n` is NUL-terminated and lives through the call; a null result
    // (no such global) becomes `None`.
    let g = unsafe { c::LLVMGetNamedGlobal(m, n.as_ptr()) };
    (!g.is_null()).then_some(g)
}

/// The private alias `name` of `aliasee` (of value type `ty`) in module `m`: the existing
/// alias of that name, else a new one.
pub(crate) fn private_alias(
    m: LLVMModuleRef,
    name: &str,
    ty: LLVMTypeRef,
    aliasee: LLVMValueRef,
) -> LLVMValueRef {
    let n = cname(name);
    // SAFETY: module doc; `n` is NUL-terminated, passed with its length, and lives through the
    // calls; a null lookup (no such alias) is replaced by the new alias before use.
    unsafe {
        let mut a = c::LLVMGetNamedGlobalAlias(m, n.as_ptr(), n.as_bytes().len());
        if a.is_null() {
            a = c::LLVMAddAlias2(m, ty, 0, aliasee, n.as_ptr());
            c::LLVMSetLinkage(a, llvm_sys::LLVMLinkage::LLVMPrivateLinkage);
        }
        a
    }
}

/// A new global `name` in module `m` holding `init`, with `linkage`, constant if `constant`.
pub(crate) fn add_global(
    m: LLVMModuleRef,
    name: &str,
    init: LLVMValueRef,
    linkage: llvm_sys::LLVMLinkage,
    constant: bool,
) -> LLVMValueRef {
    let n = cname(name);
    // SAFETY: module doc; `n` is NUL-terminated and lives through the call; the new global has
    // the type of its initializer.
    unsafe {
        let g = c::LLVMAddGlobal(m, c::LLVMTypeOf(init), n.as_ptr());
        c::LLVMSetLinkage(g, linkage);
        c::LLVMSetInitializer(g, init);
        if constant {
            c::LLVMSetGlobalConstant(g, 1);
        }
        g
    }
}

/// `i32` of context `ctx`.
pub(crate) fn i32_type_in(ctx: LLVMContextRef) -> LLVMTypeRef {
    // SAFETY: module doc; `ctx` is the module's live context.
    unsafe { c::LLVMInt32TypeInContext(ctx) }
}

/// `ptr` (address space 0) of context `ctx`.
pub(crate) fn ptr_type_in(ctx: LLVMContextRef) -> LLVMTypeRef {
    // SAFETY: module doc; `ctx` is the module's live context.
    unsafe { c::LLVMPointerTypeInContext(ctx, 0) }
}

/// The literal (unpacked) constant struct `{ fields }` in context `ctx`.
pub(crate) fn const_struct_in(ctx: LLVMContextRef, fields: &[LLVMValueRef]) -> LLVMValueRef {
    let mut fields = fields.to_vec();
    // SAFETY: module doc; `fields` lives through the call and its length is passed.
    unsafe { c::LLVMConstStructInContext(ctx, fields.as_mut_ptr(), fields.len() as u32, 0) }
}

/// The elements of the constant array initializing global `g`.
pub(crate) fn array_initializer_elements(g: LLVMValueRef) -> Vec<LLVMValueRef> {
    // SAFETY: module doc; `g` is a global with an array initializer, whose elements are read
    // below the array type's length.
    unsafe {
        let init = c::LLVMGetInitializer(g);
        let len = c::LLVMGetArrayLength2(c::LLVMTypeOf(init));
        (0..len as u32)
            .map(|i| c::LLVMGetAggregateElement(init, i))
            .collect()
    }
}

/// The width in bits of integer type `ty`.
pub(crate) fn int_width(ty: LLVMTypeRef) -> u32 {
    // SAFETY: module doc; callers pass an integer type (a read).
    unsafe { c::LLVMGetIntTypeWidth(ty) }
}

/// The enum attribute `kind` (e.g. `noinline`, `cold`), without a value, in the module's
/// context.
pub(crate) fn enum_attr(g: &Globals, kind: &str) -> LLVMAttributeRef {
    // SAFETY: module doc; `attr_kind` gives a known attribute kind.
    unsafe { c::LLVMCreateEnumAttribute(g.ctx, ir::attr_kind(kind), 0) }
}

/// Adds the enum attribute `kind` (e.g. `noinline`, no value) at index `i` of `call`.
pub(crate) fn add_call_enum_attr(g: &Globals, call: LLVMValueRef, i: u32, kind: &str) {
    add_call_attr_at(call, i, enum_attr(g, kind));
}

/// Keeps function `f` out of the inliner: `noinline`, and `alwaysinline` removed.
pub(crate) fn never_inline(g: &Globals, f: LLVMValueRef) {
    let fun = llvm_sys::LLVMAttributeFunctionIndex;
    // SAFETY: module doc; `f` is a function of the module, the attribute of its context.
    unsafe {
        c::LLVMRemoveEnumAttributeAtIndex(f, fun, ir::attr_kind("alwaysinline"));
        c::LLVMAddAttributeAtIndex(f, fun, enum_attr(g, "noinline"));
    }
}

/// The functions of module `m`, in order.
pub(crate) fn functions(m: LLVMModuleRef) -> Vec<LLVMValueRef> {
    let mut out = Vec::new();
    // SAFETY: module doc; each function handle is read before the next is asked for, and
    // nothing changes the function list meanwhile.
    unsafe {
        let mut f = c::LLVMGetFirstFunction(m);
        while !f.is_null() {
            out.push(f);
            f = c::LLVMGetNextFunction(f);
        }
    }
    out
}

/// Whether `v` is a function.
pub(crate) fn is_function(v: LLVMValueRef) -> bool {
    // SAFETY: module doc; a read.
    !unsafe { c::LLVMIsAFunction(v) }.is_null()
}

/// Whether `v` is a `blockaddress` constant.
pub(crate) fn is_block_address(v: LLVMValueRef) -> bool {
    // SAFETY: module doc; a read.
    !unsafe { c::LLVMIsABlockAddress(v) }.is_null()
}

/// Whether function type `fty` takes a variable argument list.
pub(crate) fn is_vararg(fty: LLVMTypeRef) -> bool {
    // SAFETY: module doc; callers pass a function type (a read).
    unsafe { c::LLVMIsFunctionVarArg(fty) != 0 }
}

/// Whether function type `fty` returns `void`.
pub(crate) fn returns_void(fty: LLVMTypeRef) -> bool {
    // SAFETY: module doc; callers pass a function type (reads).
    unsafe {
        c::LLVMGetTypeKind(c::LLVMGetReturnType(fty)) == llvm_sys::LLVMTypeKind::LLVMVoidTypeKind
    }
}

/// Whether function `f` has the string function attribute `name`.
pub(crate) fn has_string_fn_attr(f: LLVMValueRef, name: &str) -> bool {
    // SAFETY: module doc; `name` is passed with its length and lives through the call, which
    // only reads the function.
    !unsafe {
        c::LLVMGetStringAttributeAtIndex(
            f,
            llvm_sys::LLVMAttributeFunctionIndex,
            name.as_ptr().cast(),
            name.len() as u32,
        )
    }
    .is_null()
}

/// Whether function `f` has prefix data, prologue data or a comdat.
pub(crate) fn has_prefix_prologue_or_comdat(f: LLVMValueRef) -> bool {
    // SAFETY: module doc; callers pass a function (reads).
    unsafe {
        c::LLVMHasPrefixData(f) != 0
            || c::LLVMHasPrologueData(f) != 0
            || !llvm_sys::comdat::LLVMGetComdat(f).is_null()
    }
}

/// The function `name` of module `m`: the one it has, else a new declaration of type `fty`.
pub(crate) fn declare_function(m: LLVMModuleRef, name: &str, fty: LLVMTypeRef) -> LLVMValueRef {
    named_function(m, name).unwrap_or_else(|| {
        let n = cname(name);
        // SAFETY: module doc; `n` is NUL-terminated and lives through the call.
        unsafe { c::LLVMAddFunction(m, n.as_ptr(), fty) }
    })
}

/// A new unnamed function of type `fty` in module `m`.
pub(crate) fn add_function(m: LLVMModuleRef, fty: LLVMTypeRef) -> LLVMValueRef {
    // SAFETY: module doc; the empty name is a NUL-terminated literal.
    unsafe { c::LLVMAddFunction(m, c"".as_ptr(), fty) }
}

/// The number of parameters of function `f`.
pub(crate) fn count_params(f: LLVMValueRef) -> u32 {
    // SAFETY: module doc; callers pass a function (a read).
    unsafe { c::LLVMCountParams(f) }
}

/// The attributes of function `f` at index `idx` (function, return value or parameter).
pub(crate) fn fn_attrs_at(f: LLVMValueRef, idx: u32) -> Vec<LLVMAttributeRef> {
    // SAFETY: module doc; the vector has room for the count LLVM reports, and is filled by it.
    unsafe {
        let n = c::LLVMGetAttributeCountAtIndex(f, idx);
        let mut v: Vec<LLVMAttributeRef> = vec![std::ptr::null_mut(); n as usize];
        if n > 0 {
            c::LLVMGetAttributesAtIndex(f, idx, v.as_mut_ptr());
        }
        v
    }
}

/// Adds attribute `a` at index `idx` of function `f`.
pub(crate) fn add_fn_attr_at(f: LLVMValueRef, idx: u32, a: LLVMAttributeRef) {
    // SAFETY: module doc; `a` is an attribute of the module's context.
    unsafe { c::LLVMAddAttributeAtIndex(f, idx, a) }
}

/// Adds attribute `a` at index `idx` of call `call`.
pub(crate) fn add_call_attr_at(call: LLVMValueRef, idx: u32, a: LLVMAttributeRef) {
    // SAFETY: module doc; `a` is an attribute of the module's context.
    unsafe { c::LLVMAddCallSiteAttribute(call, idx, a) }
}

/// The calling convention of function `f`.
pub(crate) fn call_conv(f: LLVMValueRef) -> u32 {
    // SAFETY: module doc; a read of a function.
    unsafe { c::LLVMGetFunctionCallConv(f) }
}

/// Sets the calling convention of call `call`.
pub(crate) fn set_call_conv(call: LLVMValueRef, cc: u32) {
    // SAFETY: module doc; `call` is a call instruction.
    unsafe { c::LLVMSetInstructionCallConv(call, cc) }
}

/// Sets the tail call kind of call `call`.
pub(crate) fn set_tail_call_kind(call: LLVMValueRef, kind: llvm_sys::LLVMTailCallKind) {
    // SAFETY: module doc; `call` is a call instruction.
    unsafe { c::LLVMSetTailCallKind(call, kind) }
}

/// Gives function `to` the calling convention, linkage, visibility, DLL storage class,
/// unnamed address, section and alignment of function `from`.
pub(crate) fn copy_function_props(from: LLVMValueRef, to: LLVMValueRef) {
    // SAFETY: module doc; `from` and `to` are functions; the section name LLVM returns is
    // NUL-terminated, owned by `from`, and copied by `LLVMSetSection` while `from` lives.
    unsafe {
        c::LLVMSetFunctionCallConv(to, c::LLVMGetFunctionCallConv(from));
        c::LLVMSetLinkage(to, c::LLVMGetLinkage(from));
        c::LLVMSetVisibility(to, c::LLVMGetVisibility(from));
        c::LLVMSetDLLStorageClass(to, c::LLVMGetDLLStorageClass(from));
        c::LLVMSetUnnamedAddress(to, c::LLVMGetUnnamedAddress(from));
        let section = c::LLVMGetSection(from);
        if !section.is_null() {
            c::LLVMSetSection(to, section);
        }
        c::LLVMSetAlignment(to, c::LLVMGetAlignment(from));
    }
}

/// Attaches to global `to` the metadata of global `from`, except the debug information (kind
/// 0, `dbg`).
pub(crate) fn copy_metadata_but_debug(from: LLVMValueRef, to: LLVMValueRef) {
    // SAFETY: module doc; the entries LLVM returns are read below the count it reports and
    // disposed once, after the last read.
    unsafe {
        let mut n = 0usize;
        let md = c::LLVMGlobalCopyAllMetadata(from, &mut n);
        for i in 0..n as u32 {
            let kind = c::LLVMValueMetadataEntriesGetKind(md, i);
            if kind != 0 {
                c::LLVMGlobalSetMetadata(to, kind, c::LLVMValueMetadataEntriesGetMetadata(md, i));
            }
        }
        if !md.is_null() {
            c::LLVMDisposeValueMetadataEntries(md);
        }
    }
}

/// The name of `v`, as bytes.
pub(crate) fn name_bytes(v: LLVMValueRef) -> Vec<u8> {
    let mut len = 0usize;
    // SAFETY: module doc; LLVM returns a pointer to `len` bytes owned by `v`, copied before
    // anything can change the name.
    unsafe {
        let p = c::LLVMGetValueName2(v, &mut len);
        std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec()
    }
}

/// Renames `v` to `name`.
pub(crate) fn set_name_bytes(v: LLVMValueRef, name: &[u8]) {
    // SAFETY: module doc; `name` is passed with its length and lives through the call.
    unsafe { c::LLVMSetValueName2(v, name.as_ptr().cast(), name.len()) }
}

/// Sets the linkage of global value `v`.
pub(crate) fn set_linkage(v: LLVMValueRef, l: llvm_sys::LLVMLinkage) {
    // SAFETY: module doc.
    unsafe { c::LLVMSetLinkage(v, l) }
}

/// Sets the visibility of global value `v`.
pub(crate) fn set_visibility(v: LLVMValueRef, vis: llvm_sys::LLVMVisibility) {
    // SAFETY: module doc.
    unsafe { c::LLVMSetVisibility(v, vis) }
}

/// Sets the DLL storage class of global value `v`.
pub(crate) fn set_dll_storage_class(v: LLVMValueRef, s: llvm_sys::LLVMDLLStorageClass) {
    // SAFETY: module doc.
    unsafe { c::LLVMSetDLLStorageClass(v, s) }
}

/// Sets the unnamed-address kind of global value `v`.
pub(crate) fn set_unnamed_addr(v: LLVMValueRef, u: llvm_sys::LLVMUnnamedAddr) {
    // SAFETY: module doc.
    unsafe { c::LLVMSetUnnamedAddress(v, u) }
}

/// The function named `name` in module `m`, if any.
pub(crate) fn named_function(m: LLVMModuleRef, name: &str) -> Option<LLVMValueRef> {
    let n = cname(name);
    // SAFETY: module doc; `n` is NUL-terminated and lives through the call; a null result
    // (no such function) becomes `None`.
    let f = unsafe { c::LLVMGetNamedFunction(m, n.as_ptr()) };
    (!f.is_null()).then_some(f)
}
