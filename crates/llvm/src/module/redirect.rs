//! Redirected libc calls: every use, in the module, of a libc function listed in
//! `tally_format::abi::REDIRECTS` (`_exit`, the `exec` family, ...) is pointed at the runtime's
//! wrapper, which does the runtime's part and then calls the real function, as gcc's
//! `-fprofile-arcs` points `execve` at `__gcov_execve`. Only declarations are redirected: a
//! module that defines a function of that name keeps its own. Calls made by code tally did not
//! build (libc itself, plain libraries) are not seen; docs/design/runtime.md ("Redirected calls")
//! says what that leaves out.
//!
//! Redirection runs before lowering, so a call to a wrapper is what the graph and the frame
//! records see: the wrapper keeps the real function's type and attributes (`noreturn`
//! included), so a call that may end the frame is still one.

use crate::module::cs;
use llvm_sys::core as c;
use llvm_sys::prelude::LLVMModuleRef;
use llvm_sys::LLVMVisibility;

/// Points every use of a declared libc function of `REDIRECTS` at its wrapper. Returns how
/// many functions were redirected.
pub(crate) fn redirect_libc_calls(m: LLVMModuleRef) -> usize {
    let mut n = 0;
    for r in tally_format::abi::REDIRECTS {
        let real_name = cs(r.real);
        // SAFETY: the edited values belong to the live module, which only this crate changes during
        // `instrument` (`crate::ir`'s module doc); an erased instruction is not used again.
        unsafe {
            let real = c::LLVMGetNamedFunction(m, real_name.as_ptr());
            if real.is_null()
                || c::LLVMIsDeclaration(real) == 0
                || c::LLVMGetFirstUse(real).is_null()
            {
                continue;
            }
            let ty = c::LLVMGlobalGetValueType(real);
            let wrapper_name = cs(r.wrapper);
            let mut wrapper = c::LLVMGetNamedFunction(m, wrapper_name.as_ptr());
            if wrapper.is_null() {
                wrapper = c::LLVMAddFunction(m, wrapper_name.as_ptr(), ty);
                copy_attributes(real, wrapper);
                // Every image links its own (hidden) copy of the runtime.
                c::LLVMSetVisibility(wrapper, LLVMVisibility::LLVMHiddenVisibility);
            } else if c::LLVMGlobalGetValueType(wrapper) != ty {
                continue; // declared with another type: leave the module alone
            }
            c::LLVMReplaceAllUsesWith(real, wrapper);
            c::LLVMDeleteFunction(real);
            n += 1;
        }
    }
    n
}

/// Copies the function, return and parameter attributes of `from` to `to`.
unsafe fn copy_attributes(
    from: llvm_sys::prelude::LLVMValueRef,
    to: llvm_sys::prelude::LLVMValueRef,
) {
    // SAFETY: `g` (or `ctx`) is the live module and context being built (`crate::ir`'s module doc),
    // and the values passed in belong to it.
    unsafe {
        let params = c::LLVMCountParams(from);
        let indices = [
            llvm_sys::LLVMAttributeFunctionIndex,
            llvm_sys::LLVMAttributeReturnIndex,
        ]
        .into_iter()
        .chain(1..=params);
        for idx in indices {
            let k = c::LLVMGetAttributeCountAtIndex(from, idx);
            if k == 0 {
                continue;
            }
            let mut attrs = vec![std::ptr::null_mut(); k as usize];
            c::LLVMGetAttributesAtIndex(from, idx, attrs.as_mut_ptr());
            for a in attrs {
                c::LLVMAddAttributeAtIndex(to, idx, a);
            }
        }
        c::LLVMSetFunctionCallConv(to, c::LLVMGetFunctionCallConv(from));
    }
}
