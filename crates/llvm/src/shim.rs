//! The C++ shim (`shim/*.cpp`, built by `build.rs`): the pieces of LLVM's C++ API tally uses
//! that the C API lacks, declared here and nowhere else, each behind a safe wrapper.
//!
//! - [`Freq`] (`shim/freq.cpp`): BlockFrequencyInfo x BranchProbabilityInfo, LLVM's static
//!   frequency estimate (`ir::estimate`);
//! - [`Scev`] (`shim/scev.cpp`): ScalarEvolution's trip counts and affine recurrences (SESE
//!   counters, `counters::sese`);
//! - [`copy_dso_local`] (`shim/globals.cpp`): a global's `dso_local` (trace mode's second
//!   entries);
//! - [`call_probe`] (`shim/debuginfo.cpp`): the call-site probe id a debug location's
//!   discriminator holds (the call sites of inline scopes, `ir::lines`).
//!
//! Every handle passed in is a [`Val`] or [`Bb`] of the module being instrumented, alive for
//! the whole `instrument` call (`crate::ir`'s module doc); the analyses' handles are owned by
//! their wrapper and freed on drop.

use crate::ir::{Bb, Val};
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMMetadataRef, LLVMValueRef};
use std::ffi::c_void;

extern "C" {
    fn tally_freq_new(f: LLVMValueRef) -> *mut c_void;
    fn tally_freq_block(h: *mut c_void, bb: LLVMBasicBlockRef) -> f64;
    fn tally_freq_succ_prob(h: *mut c_void, bb: LLVMBasicBlockRef, succ: u32) -> f64;
    fn tally_freq_free(h: *mut c_void);

    fn tally_scev_new(f: LLVMValueRef) -> *mut c_void;
    fn tally_scev_trips(h: *mut c_void, header: LLVMBasicBlockRef) -> i32;
    fn tally_scev_expand(h: *mut c_void, header: LLVMBasicBlockRef) -> LLVMValueRef;
    fn tally_scev_affine(
        h: *mut c_void,
        phi: LLVMValueRef,
        step: *mut i64,
        nsw: *mut i32,
        nuw: *mut i32,
        bounded: *mut i32,
    ) -> i32;
    fn tally_scev_free(h: *mut c_void);

    fn tally_copy_dso_local(from: LLVMValueRef, to: LLVMValueRef);

    fn tally_call_probe(loc: LLVMMetadataRef) -> u32;
}

/// LLVM's frequency analyses of one function (`shim/freq.cpp`), freed on drop.
pub(crate) struct Freq(*mut c_void);

impl Freq {
    /// The analyses of `func`, `None` for a declaration.
    pub(crate) fn new(func: Val) -> Option<Freq> {
        // SAFETY: `func` is a live function of the module (module doc); the shim checks that
        // it has a body and returns null otherwise.
        let h = unsafe { tally_freq_new(func.0) };
        (!h.is_null()).then_some(Freq(h))
    }
    /// The frequency of `bb` relative to the function's entry.
    pub(crate) fn block(&self, bb: Bb) -> f64 {
        // SAFETY: `self.0` is a live handle (freed only on drop), `bb` a live block.
        unsafe { tally_freq_block(self.0, bb.0) }
    }
    /// The probability that `bb` leaves by its terminator's successor `succ`.
    pub(crate) fn succ_prob(&self, bb: Bb, succ: u32) -> f64 {
        // SAFETY: as in `block`; BranchProbabilityInfo answers for any successor index of
        // `bb`'s terminator, which the callers take from it.
        unsafe { tally_freq_succ_prob(self.0, bb.0, succ) }
    }
}

impl Drop for Freq {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from `tally_freq_new` and is freed once, here.
        unsafe { tally_freq_free(self.0) }
    }
}

/// ScalarEvolution on one function (`shim/scev.cpp`), freed on drop.
pub(crate) struct Scev(*mut c_void);

impl Scev {
    /// ScalarEvolution of `func`, `None` for a declaration.
    pub(crate) fn new(func: Val) -> Option<Scev> {
        // SAFETY: `func` is a live function (module doc); the shim returns null for a
        // declaration.
        let h = unsafe { tally_scev_new(func.0) };
        (!h.is_null()).then_some(Scev(h))
    }
    /// Operations computing the trip count of the loop headed by `header`, if known on entry.
    pub(crate) fn trips(&self, header: Bb) -> Option<u32> {
        // SAFETY: `self.0` is live until drop; `header` is a live block (the shim answers -1
        // for a block that heads no loop).
        u32::try_from(unsafe { tally_scev_trips(self.0, header.0) }).ok()
    }
    /// `(step, no_wrap)` if header phi `phi` is an affine add-recurrence of its loop with a
    /// constant step; `no_wrap`: `k * |step| < 2^N` for `k` back edges (an `nsw` recurrence,
    /// an `nuw` one with a positive step, or one whose values lie in a range small enough
    /// that it cannot wrap, `shim/scev.cpp`).
    pub(crate) fn affine(&self, phi: Val) -> Option<(i64, bool)> {
        let (mut step, mut nsw, mut nuw, mut bounded) = (0i64, 0i32, 0i32, 0i32);
        // SAFETY: `self.0` is live until drop, `phi` a live value; the four out-pointers are
        // locals of this frame, written before the call returns.
        let ok = unsafe {
            tally_scev_affine(self.0, phi.0, &mut step, &mut nsw, &mut nuw, &mut bounded)
        };
        let no_wrap = nsw != 0 || (nuw != 0 && step > 0) || bounded != 0;
        (ok != 0).then_some((step, no_wrap))
    }
    /// The trip count (i64) computed before the preheader's terminator.
    pub(crate) fn expand(&self, header: Bb) -> Option<Val> {
        // SAFETY: as in `trips`; the shim returns null when it cannot expand.
        let v = unsafe { tally_scev_expand(self.0, header.0) };
        (!v.is_null()).then_some(Val(v))
    }
}

impl Drop for Scev {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from `tally_scev_new` and is freed once, here.
        unsafe { tally_scev_free(self.0) }
    }
}

/// Makes global `to` dso_local if `from` is (`shim/globals.cpp`).
pub(crate) fn copy_dso_local(from: Val, to: Val) {
    // SAFETY: both are live global values of the module (module doc); the shim only sets a
    // flag on `to`.
    unsafe { tally_copy_dso_local(from.0, to.0) }
}

/// The id of the call-site pseudo-probe whose data the discriminator of `DILocation` `loc`
/// holds; 0 when it holds none (no probe, a block probe's, or not a location),
/// `shim/debuginfo.cpp`.
pub(crate) fn call_probe(loc: LLVMMetadataRef) -> u32 {
    // SAFETY: `loc` is live metadata of the module being instrumented (module doc); the shim
    // only reads it, and checks its kind.
    unsafe { tally_call_probe(loc) }
}
