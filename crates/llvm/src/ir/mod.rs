//! Thin, crate-private wrappers over the LLVM-C calls that inkwell does not offer (successors,
//! call attributes, PHI incoming lists, debug locations, raw positioning).
//!
//! `Val` and `Bb` are plain copies of LLVM handles. They stay valid while the module that owns
//! them lives and the value is not erased; every function in this crate works inside one
//! `instrument` call, during which the module is alive and only this crate edits it.

pub(crate) mod ends;
pub(crate) mod estimate;
pub(crate) mod lines;
pub(crate) mod lower;
pub(crate) mod prepare;
pub(crate) mod probes;

use llvm_sys::core as c;
use llvm_sys::debuginfo as di;
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMContextRef, LLVMMetadataRef, LLVMValueRef};
use llvm_sys::LLVMOpcode;
use std::ffi::CStr;

/// An LLVM value handle (instruction, function, constant ...).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Val(pub LLVMValueRef);

/// An LLVM basic block handle.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Bb(pub LLVMBasicBlockRef);

impl Val {
    pub fn is_null(self) -> bool {
        self.0.is_null()
    }
    fn opt(v: LLVMValueRef) -> Option<Val> {
        (!v.is_null()).then_some(Val(v))
    }
    /// Opcode of an instruction.
    pub fn opcode(self) -> LLVMOpcode {
        // SAFETY: `self` is a live handle of the module (module doc); the call only reads it.
        unsafe { c::LLVMGetInstructionOpcode(self.0) }
    }
    pub fn next(self) -> Option<Val> {
        Val::opt(unsafe { c::LLVMGetNextInstruction(self.0) })
    }
    pub fn prev(self) -> Option<Val> {
        // SAFETY: `self` is a live handle of the module (module doc); the call only reads it.
        Val::opt(unsafe { c::LLVMGetPreviousInstruction(self.0) })
    }
    /// The user of each use of the value, in use-list order (a user that uses it twice is
    /// listed twice).
    pub fn users(self) -> Vec<Val> {
        let mut out = Vec::new();
        // SAFETY: `self` is a live value (module doc); each use handle is read before the
        // next is asked for, and nothing changes the use list meanwhile.
        unsafe {
            let mut u = c::LLVMGetFirstUse(self.0);
            while !u.is_null() {
                out.push(Val(c::LLVMGetUser(u)));
                u = c::LLVMGetNextUse(u);
            }
        }
        out
    }
    /// The incoming `(value, block)` pairs of a phi.
    pub fn incoming(self) -> Vec<(Val, Bb)> {
        // SAFETY: `self` is a live phi (module doc); the indices are below its count.
        unsafe {
            (0..c::LLVMCountIncoming(self.0))
                .map(|i| {
                    (
                        Val(c::LLVMGetIncomingValue(self.0, i)),
                        Bb(c::LLVMGetIncomingBlock(self.0, i)),
                    )
                })
                .collect()
        }
    }
    /// The value is an instruction (not a constant, argument or global).
    pub fn is_instruction(self) -> bool {
        // SAFETY: `self` is a live value (module doc); the cast only reads its kind.
        !unsafe { c::LLVMIsAInstruction(self.0) }.is_null()
    }
    /// The value is a `ConstantInt`.
    pub fn is_constant_int(self) -> bool {
        // SAFETY: as in `is_instruction`.
        !unsafe { c::LLVMIsAConstantInt(self.0) }.is_null()
    }
    /// The value is a `zext`.
    pub fn is_zext(self) -> bool {
        // SAFETY: as in `is_instruction`.
        !unsafe { c::LLVMIsAZExtInst(self.0) }.is_null()
    }
    /// The zero-extended value of a `ConstantInt` ([`Val::is_constant_int`]).
    pub fn const_zext_value(self) -> u64 {
        debug_assert!(self.is_constant_int());
        // SAFETY: as in `is_instruction`; callers check that the value is a `ConstantInt`.
        unsafe { c::LLVMConstIntGetZExtValue(self.0) }
    }
    /// The value is an `icmp`.
    pub fn is_icmp(self) -> bool {
        // SAFETY: as in `is_instruction`.
        !unsafe { c::LLVMIsAICmpInst(self.0) }.is_null()
    }
    /// The block this value stands for (a block used as a value, [`Bb::as_value`]).
    pub fn as_block(self) -> Bb {
        // SAFETY: `self` is a live block value (module doc).
        Bb(unsafe { c::LLVMValueAsBasicBlock(self.0) })
    }
    pub fn parent(self) -> Bb {
        Bb(unsafe { c::LLVMGetInstructionParent(self.0) })
    }
    /// The name of a global value (function, variable); empty if unnamed.
    pub fn name(self) -> String {
        let mut len = 0usize;
        // SAFETY: the handle is live (module doc); `len` is a local LLVM writes the length to.
        let p = unsafe { c::LLVMGetValueName2(self.0, &mut len) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: LLVM returned a pointer to `len` bytes, alive while the value or metadata it
        // names is.
        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
        String::from_utf8_lossy(bytes).into_owned()
    }
    pub fn num_successors(self) -> u32 {
        // SAFETY: `self` is a live handle of the module (module doc); the call only reads it.
        unsafe { c::LLVMGetNumSuccessors(self.0) }
    }
    pub fn successor(self, i: u32) -> Bb {
        Bb(unsafe { c::LLVMGetSuccessor(self.0, i) })
    }
    pub fn set_successor(self, i: u32, bb: Bb) {
        // SAFETY: `self` is a live terminator and `bb` a live block of its function (module doc).
        unsafe { c::LLVMSetSuccessor(self.0, i, bb.0) }
    }
    pub fn is_call_like(self) -> bool {
        matches!(
            self.opcode(),
            LLVMOpcode::LLVMCall | LLVMOpcode::LLVMInvoke | LLVMOpcode::LLVMCallBr
        )
    }
    /// The called operand of a call/invoke/callbr.
    pub fn called_value(self) -> Val {
        // SAFETY: `self` is a live handle of the module (module doc); the call only reads it.
        Val(unsafe { c::LLVMGetCalledValue(self.0) })
    }
    /// The called function if the callee is a function (not a pointer or inline asm).
    pub fn called_function(self) -> Option<Val> {
        let v = self.called_value();
        if v.is_null() {
            return None;
        }
        // SAFETY: the handles passed are live (module doc); the calls only read them.
        Val::opt(unsafe { c::LLVMIsAFunction(v.0) })
    }
    pub fn calls_inline_asm(self) -> bool {
        let v = self.called_value();
        // SAFETY: the handles passed are live (module doc); the calls only read them.
        !v.is_null() && !unsafe { c::LLVMIsAInlineAsm(v.0) }.is_null()
    }
    pub fn intrinsic_id(self) -> u32 {
        // SAFETY: `self` is a live handle of the module (module doc); the call only reads it.
        unsafe { c::LLVMGetIntrinsicID(self.0) }
    }
    /// Tail-call marker of a call instruction.
    pub fn tail_kind(self) -> llvm_sys::LLVMTailCallKind {
        // SAFETY: `self` is a live handle of the module (module doc); the call only reads it.
        unsafe { c::LLVMGetTailCallKind(self.0) }
    }
    /// Whether a call site or its callee carries the function attribute `kind`.
    pub fn call_has_fn_attr(self, kind: u32) -> bool {
        let idx = llvm_sys::LLVMAttributeFunctionIndex;
        // SAFETY: `self` is a live handle of the module (module doc); the call only reads it.
        if !unsafe { c::LLVMGetCallSiteEnumAttribute(self.0, idx, kind) }.is_null() {
            return true;
        }
        match self.called_function() {
            Some(f) => f.fn_has_attr(kind),
            None => false,
        }
    }
    /// Whether a function carries the function attribute `kind`.
    pub fn fn_has_attr(self, kind: u32) -> bool {
        let idx = llvm_sys::LLVMAttributeFunctionIndex;
        // SAFETY: `self` is a live handle of the module (module doc); the call only reads it.
        !unsafe { c::LLVMGetEnumAttributeAtIndex(self.0, idx, kind) }.is_null()
    }
    pub fn is_declaration(self) -> bool {
        unsafe { c::LLVMIsDeclaration(self.0) != 0 }
    }
    pub fn linkage(self) -> llvm_sys::LLVMLinkage {
        // SAFETY: `self` is a live handle of the module (module doc); the call only reads it.
        unsafe { c::LLVMGetLinkage(self.0) }
    }
    pub fn first_block(self) -> Option<Bb> {
        let b = unsafe { c::LLVMGetFirstBasicBlock(self.0) };
        (!b.is_null()).then_some(Bb(b))
    }
    pub fn blocks(self) -> Vec<Bb> {
        let mut out = Vec::new();
        // SAFETY: `self` is a live handle of the module (module doc); the call only reads it.
        let mut b = unsafe { c::LLVMGetFirstBasicBlock(self.0) };
        while !b.is_null() {
            out.push(Bb(b));
            b = unsafe { c::LLVMGetNextBasicBlock(b) };
        }
        out
    }
    /// Debug location attached to an instruction, if any.
    pub fn debug_loc(self) -> Option<LLVMMetadataRef> {
        // SAFETY: the function, instruction or metadata passed is live (module doc); the call only
        // reads it.
        let m = unsafe { di::LLVMInstructionGetDebugLoc(self.0) };
        (!m.is_null()).then_some(m)
    }
    pub fn set_debug_loc(self, loc: Option<LLVMMetadataRef>) {
        // SAFETY: `self` is a live instruction and `loc` a live location or null (module doc).
        unsafe { di::LLVMInstructionSetDebugLoc(self.0, loc.unwrap_or(std::ptr::null_mut())) }
    }
    pub fn num_operands(self) -> u32 {
        unsafe { c::LLVMGetNumOperands(self.0) as u32 }
    }
    pub fn operand(self, i: u32) -> Val {
        // SAFETY: `self` is a live handle of the module (module doc); the call only reads it.
        Val(unsafe { c::LLVMGetOperand(self.0, i) })
    }
}

impl Bb {
    /// The block as a value (an operand of branches and phis).
    pub fn as_value(self) -> Val {
        // SAFETY: `self` is a live block (module doc).
        Val(unsafe { c::LLVMBasicBlockAsValue(self.0) })
    }
    /// The function the block belongs to.
    pub fn function(self) -> Val {
        // SAFETY: `self` is a live block (module doc).
        Val(unsafe { c::LLVMGetBasicBlockParent(self.0) })
    }
    pub fn first(self) -> Option<Val> {
        Val::opt(unsafe { c::LLVMGetFirstInstruction(self.0) })
    }
    pub fn terminator(self) -> Option<Val> {
        // SAFETY: `self` is a live handle of the module (module doc); the call only reads it.
        Val::opt(unsafe { c::LLVMGetBasicBlockTerminator(self.0) })
    }
    pub fn instructions(self) -> Vec<Val> {
        let mut out = Vec::new();
        let mut i = self.first();
        while let Some(v) = i {
            out.push(v);
            i = v.next();
        }
        out
    }
    /// First instruction that is not a PHI and not an EH pad (landingpad): where code
    /// inserted "at the start of the block" goes.
    pub fn insertion_start(self) -> Option<Val> {
        let mut i = self.first();
        while let Some(v) = i {
            match v.opcode() {
                LLVMOpcode::LLVMPHI | LLVMOpcode::LLVMLandingPad => i = v.next(),
                _ => return Some(v),
            }
        }
        None
    }
    pub fn phis(self) -> Vec<Val> {
        self.instructions()
            .into_iter()
            .take_while(|v| v.opcode() == LLVMOpcode::LLVMPHI)
            .collect()
    }
    pub fn is_landing_pad(self) -> bool {
        self.instructions()
            .into_iter()
            .find(|v| v.opcode() != LLVMOpcode::LLVMPHI)
            .is_some_and(|v| v.opcode() == LLVMOpcode::LLVMLandingPad)
    }
}

/// The attribute kind id for an attribute name such as `"nounwind"`.
pub(crate) fn attr_kind(name: &str) -> u32 {
    // SAFETY: the name is passed with its length; the lookup reads no handle.
    unsafe { c::LLVMGetEnumAttributeKindForName(name.as_ptr() as *const _, name.len()) }
}

/// A resolved source position.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SrcPos {
    pub file: Option<String>,
    pub line: u32,
}

/// Joins a DIFile's directory and file name.
pub(crate) fn difile_path(file: LLVMMetadataRef) -> Option<String> {
    if file.is_null() {
        return None;
    }
    let mut len = 0u32;
    // SAFETY: the handle is live (module doc); `len` is a local LLVM writes the length to.
    let name = unsafe { di::LLVMDIFileGetFilename(file, &mut len) };
    if name.is_null() || len == 0 {
        return None;
    }
    // SAFETY: LLVM returned a pointer to `len` bytes, alive while the value or metadata it names
    // is.
    let name = String::from_utf8_lossy(unsafe {
        std::slice::from_raw_parts(name as *const u8, len as usize)
    })
    .into_owned();
    if name.starts_with('/') {
        return Some(remove_dots(&name));
    }
    let mut dlen = 0u32;
    // SAFETY: the handle is live (module doc); `len` is a local LLVM writes the length to.
    let dir = unsafe { di::LLVMDIFileGetDirectory(file, &mut dlen) };
    if dir.is_null() || dlen == 0 {
        return Some(remove_dots(&name));
    }
    // SAFETY: LLVM returned a pointer to `len` bytes, alive while the value or metadata it names
    // is.
    let dir = String::from_utf8_lossy(unsafe {
        std::slice::from_raw_parts(dir as *const u8, dlen as usize)
    })
    .into_owned();
    Some(remove_dots(&format!(
        "{}/{}",
        dir.trim_end_matches('/'),
        name
    )))
}

/// `path` without `.` components and with each `..` taken with the component before it,
/// lexically, as clang names files in its coverage mapping (`remove_dots(path, true)`):
/// `tally cc ../../src/a.c` run in `/p/build/x` gives `/p/src/a.c`, not
/// `/p/build/x/../../src/a.c`. A `..` with nothing before it stays (`../a.c`, `/..` is `/`).
pub(crate) fn remove_dots(path: &str) -> String {
    let abs = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&p) if p != ".." => {
                    parts.pop();
                }
                _ if abs => {}
                _ => parts.push(".."),
            },
            _ => parts.push(c),
        }
    }
    let joined = parts.join("/");
    match (abs, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

/// Source position of a DILocation (innermost: where the code was written, inlined or not).
pub(crate) fn location_pos(loc: LLVMMetadataRef) -> SrcPos {
    // SAFETY: the function, instruction or metadata passed is live (module doc); the call only
    // reads it.
    let line = unsafe { di::LLVMDILocationGetLine(loc) };
    let scope = unsafe { di::LLVMDILocationGetScope(loc) };
    let file = if scope.is_null() {
        None
    } else {
        // SAFETY: the function, instruction or metadata passed is live (module doc); the call only
        // reads it.
        difile_path(unsafe { di::LLVMDIScopeGetFile(scope) })
    };
    SrcPos { file, line }
}

/// Instructions whose location is not code that runs there: debug intrinsics (a variable's
/// location) and PHIs (promoted memory keeps the location of the store it replaced, so a
/// loop header's PHIs name lines of code that ran once, before the loop).
pub(crate) fn is_not_code(v: Val) -> bool {
    match v.opcode() {
        LLVMOpcode::LLVMPHI => true,
        LLVMOpcode::LLVMCall => v
            .called_function()
            .is_some_and(|f| f.name().starts_with("llvm.dbg.")),
        _ => false,
    }
}

/// Source position of a function's DISubprogram.
pub(crate) fn function_pos(f: Val) -> SrcPos {
    // SAFETY: the function, instruction or metadata passed is live (module doc); the call only
    // reads it.
    let sp = unsafe { di::LLVMGetSubprogram(f.0) };
    if sp.is_null() {
        return SrcPos::default();
    }
    // SAFETY: the function, instruction or metadata passed is live (module doc); the call only
    // reads it.
    let line = unsafe { di::LLVMDISubprogramGetLine(sp) };
    let file = difile_path(unsafe { di::LLVMDIScopeGetFile(sp) });
    SrcPos { file, line }
}

/// The DISubprogram of a function, if it has debug info.
pub(crate) fn subprogram(f: Val) -> Option<LLVMMetadataRef> {
    // SAFETY: the function, instruction or metadata passed is live (module doc); the call only
    // reads it.
    let sp = unsafe { di::LLVMGetSubprogram(f.0) };
    (!sp.is_null()).then_some(sp)
}

/// A line-0 location in `scope`, for instrumentation calls in functions with debug info
/// (the verifier wants every inlinable call there to have one).
pub(crate) fn artificial_loc(ctx: LLVMContextRef, scope: LLVMMetadataRef) -> LLVMMetadataRef {
    // SAFETY: `ctx` is the module's live context and `scope` one of its subprograms.
    unsafe { di::LLVMDIBuilderCreateDebugLocation(ctx, 0, 0, scope, std::ptr::null_mut()) }
}

/// Reads a NUL-terminated C string owned by LLVM.
#[allow(dead_code)]
pub(crate) fn cstr(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: `p` is a NUL-terminated string LLVM returned, alive during this call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Attaches `!prof !{"branch_weights", w...}` to a branch so that code layout keeps the likely
/// successor on the fall-through path.
pub(crate) fn set_branch_weights(ctx: LLVMContextRef, br: LLVMValueRef, weights: &[u32]) {
    // SAFETY: the handles passed are live (module doc); the calls only read them.
    unsafe {
        let tag = "branch_weights";
        let mut ops = vec![c::LLVMMDStringInContext2(
            ctx,
            tag.as_ptr() as *const _,
            tag.len(),
        )];
        let i32t = c::LLVMInt32TypeInContext(ctx);
        for &w in weights {
            ops.push(c::LLVMValueAsMetadata(c::LLVMConstInt(
                i32t,
                u64::from(w),
                0,
            )));
        }
        let node = c::LLVMMDNodeInContext2(ctx, ops.as_mut_ptr(), ops.len());
        let kind = "prof";
        let k = c::LLVMGetMDKindIDInContext(ctx, kind.as_ptr() as *const _, kind.len() as u32);
        c::LLVMSetMetadata(br, k, c::LLVMMetadataAsValue(ctx, node));
    }
}

/// The declaration of the overloaded intrinsic `name` for the types `tys` in module `m`, and
/// its function type.
pub(crate) fn intrinsic_decl(
    m: llvm_sys::prelude::LLVMModuleRef,
    name: &str,
    tys: &[llvm_sys::prelude::LLVMTypeRef],
) -> (LLVMValueRef, llvm_sys::prelude::LLVMTypeRef) {
    let mut tys = tys.to_vec();
    // SAFETY: the handles passed are live (module doc); the calls only read them.
    unsafe {
        let id = c::LLVMLookupIntrinsicID(name.as_ptr().cast(), name.len());
        assert!(id != 0, "unknown intrinsic {name}");
        let f = c::LLVMGetIntrinsicDeclaration(m, id, tys.as_mut_ptr(), tys.len());
        let ty =
            c::LLVMIntrinsicGetType(c::LLVMGetModuleContext(m), id, tys.as_mut_ptr(), tys.len());
        (f, ty)
    }
}

#[cfg(test)]
mod tests {
    use super::remove_dots;

    #[test]
    fn remove_dots_is_lexical() {
        for (path, want) in [
            (
                "/work/main/target/demo/../../testdata/demo/w.c",
                "/work/main/testdata/demo/w.c",
            ),
            ("/a/./b//c.c", "/a/b/c.c"),
            ("/../a.c", "/a.c"),
            ("/a/b/../../../c.c", "/c.c"),
            ("../a.c", "../a.c"),
            ("x/../../a.c", "../a.c"),
            ("./a.c", "a.c"),
            ("a/..", "."),
            ("/", "/"),
            ("/a/b.c", "/a/b.c"),
        ] {
            assert_eq!(remove_dots(path), want, "{path}");
        }
    }
}
