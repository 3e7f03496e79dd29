//! `--tally-pgo`: a module's copies of functions defined elsewhere made its own.
//!
//! A module can hold the body of a function another object defines (`available_externally`:
//! C's `extern inline` functions of system headers such as glibc's `tolower` and `putchar`,
//! C++'s `extern template` members such as `std::string`'s), only for the optimizer to inline.
//! A training build instruments before optimization (docs/pgo.md), so such a body would carry
//! counters into the calls the optimizer inlines it into, while the calls it leaves go to the
//! library's copy, uncounted: its counts would be neither exact nor flagged. Left out instead,
//! the function was missing from the sample profile, and `-fprofile-sample-accurate` made clang
//! take it as cold (glibc's `tolower`: 3,527 calls in `testdata/demo/wordfreq.c`'s training
//! run, 0 in the profile; clang's IR PGO counted the 3,527).
//!
//! So a copy whose every use is a direct call is made `internal`: every call, inlined or not,
//! runs the module's copy, which tally instruments like any function of the module. Its body is
//! the same function (the language requires it), and no address of it is taken, so no program
//! can tell the copies apart. A copy whose address is used stays as it is, uncounted, as in
//! any build.

use crate::ir::Val;
use llvm_sys::core as c;
use llvm_sys::prelude::LLVMModuleRef;
use llvm_sys::{LLVMLinkage, LLVMVisibility};

/// Makes every `available_externally` function of `m` used only by direct calls `internal`.
/// Returns how many.
pub(crate) fn localize_inline_copies(m: LLVMModuleRef) -> usize {
    let mut n = 0;
    for f in crate::emit::build::functions(m) {
        let fv = Val(f);
        if fv.is_declaration()
            || fv.linkage() != LLVMLinkage::LLVMAvailableExternallyLinkage
            || !only_called(fv)
        {
            continue;
        }
        // SAFETY: `f` is a live function of the module, which only this crate changes during
        // `instrument` (`crate::ir`'s module doc); an internal function has default visibility.
        unsafe {
            c::LLVMSetLinkage(f, LLVMLinkage::LLVMInternalLinkage);
            c::LLVMSetVisibility(f, LLVMVisibility::LLVMDefaultVisibility);
        }
        n += 1;
    }
    n
}

/// Every use of `f` is the callee of a call or invoke (that does not also pass `f` on).
fn only_called(f: Val) -> bool {
    f.users().into_iter().all(|u| {
        u.is_instruction()
            && u.is_call_like()
            && u.called_value() == f
            && (0..u.num_operands()).filter(|&i| u.operand(i) == f).count() == 1
    })
}
