//! Which functions of a module can end their caller's frame early (Ball & Larus 1994 §3.2).
//!
//! A call needs a frame record in its caller only if control may leave the caller through it
//! without returning: `exit`, `longjmp`, an exception, or a call that reaches one of those.
//! Attributes decide for declarations (`nounwind` + `willreturn`). For functions defined in the
//! module whose definition is the one that runs (local, ODR, or not interposable), the module's
//! call graph decides: such a function ends its caller's frame early only if one of its own calls
//! may. This is a least fixpoint over the call graph, so recursion alone never makes a function
//! unsafe. A function stuck in an infinite loop never ends its caller early either; signals that
//! escape asynchronously are outside what records can make exact anyway (README, Limits).

use crate::ir::{self, Bb, Val};
use llvm_sys::core as c;
use llvm_sys::prelude::LLVMModuleRef;
use llvm_sys::{LLVMLinkage, LLVMOpcode, LLVMVisibility};
use std::collections::{HashMap, HashSet};

/// Names of the functions whose second return re-enters a frame: `longjmp` targets, and
/// `vfork`, whose child runs in the parent's memory (its counts and frame records are the
/// parent's) until it calls `exec` or `_exit`, where it abandons the frame; the parent's return
/// is then the re-entry, and `__tally_longjmp_landed` charges what the child abandoned. A
/// `vfork` that fails (-1, no child) is counted as a re-entry as well: the frame is seen to leave
/// at the call and come back, which keeps every block count exact.
pub(crate) const SETJMP_NAMES: &[&str] = &[
    "setjmp",
    "_setjmp",
    "__setjmp",
    "sigsetjmp",
    "__sigsetjmp",
    "vfork",
    "__vfork",
];

/// Attribute kind ids looked up once per module.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttrKinds {
    pub nounwind: u32,
    pub willreturn: u32,
    pub naked: u32,
}

impl AttrKinds {
    pub fn lookup() -> AttrKinds {
        AttrKinds {
            nounwind: ir::attr_kind("nounwind"),
            willreturn: ir::attr_kind("willreturn"),
            naked: ir::attr_kind("naked"),
        }
    }
}

/// True when, judging by the call alone, it may leave the calling frame without returning
/// to it (exit, longjmp, unwinding, a signal handler's escape): everything but intrinsics, inline
/// asm, setjmp itself, and calls known `nounwind` and `willreturn`.
pub(crate) fn may_end_frame_by_attrs(call: Val, kinds: &AttrKinds) -> bool {
    if !matches!(call.opcode(), LLVMOpcode::LLVMCall | LLVMOpcode::LLVMInvoke) {
        return false;
    }
    if call.calls_inline_asm() {
        return false;
    }
    if let Some(f) = call.called_function() {
        if f.intrinsic_id() != 0 || SETJMP_NAMES.contains(&f.name().as_str()) {
            return false;
        }
    }
    !(call.call_has_fn_attr(kinds.nounwind) && call.call_has_fn_attr(kinds.willreturn))
}

/// True when the call may leave the calling frame without returning: by its attributes, unless
/// the callee is a function of this module known never to end its caller's frame early.
pub(crate) fn may_end_frame(call: Val, kinds: &AttrKinds, safe: &NeverEndsCaller) -> bool {
    may_end_frame_by_attrs(call, kinds) && !call.called_function().is_some_and(|f| safe.contains(f))
}

/// Functions defined in the module whose calls never end the caller's frame early.
#[derive(Default, Debug)]
pub(crate) struct NeverEndsCaller(HashSet<Val>);

impl NeverEndsCaller {
    pub fn contains(&self, f: Val) -> bool {
        self.0.contains(&f)
    }
}

/// True when the module is built for an executable (PIE or not PIC): its external definitions
/// cannot be interposed.
pub(crate) fn module_is_executable(m: LLVMModuleRef) -> bool {
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let has = |name: &str| unsafe {
        !c::LLVMGetModuleFlag(m, name.as_ptr() as *const _, name.len()).is_null()
    };
    has("PIE Level") || !has("PIC Level")
}

/// True when calls to `f` run `f`'s body as defined in this module (or an ODR-equivalent one).
fn binds_locally(f: Val, executable: bool) -> bool {
    use LLVMLinkage::*;
    if f.is_declaration() {
        return false;
    }
    match f.linkage() {
        LLVMInternalLinkage | LLVMPrivateLinkage | LLVMLinkOnceODRLinkage | LLVMWeakODRLinkage => {
            true
        }
        LLVMExternalLinkage => {
            executable
                || matches!(
                    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc);
                    // the calls only read them.
                    unsafe { c::LLVMGetVisibility(f.0) },
                    LLVMVisibility::LLVMHiddenVisibility | LLVMVisibility::LLVMProtectedVisibility
                )
        }
        _ => false,
    }
}

/// Computes the functions of `m` that never end their caller's frame early.
pub(crate) fn analyze(m: LLVMModuleRef, kinds: &AttrKinds) -> NeverEndsCaller {
    let executable = module_is_executable(m);
    let mut funcs = Vec::new();
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let mut f = unsafe { c::LLVMGetFirstFunction(m) };
    while !f.is_null() {
        let v = Val(f);
        if binds_locally(v, executable) {
            funcs.push(v);
        }
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        f = unsafe { c::LLVMGetNextFunction(f) };
    }
    let candidate: HashSet<Val> = funcs.iter().copied().collect();
    let mut unsafe_set: HashSet<Val> = HashSet::new();
    let mut callers: HashMap<Val, Vec<Val>> = HashMap::new();
    let mut work = Vec::new();
    for &func in &funcs {
        let mut hard = false;
        for bb in func.blocks() {
            for inst in Bb::instructions(bb) {
                if !inst.is_call_like() || !may_end_frame_by_attrs(inst, kinds) {
                    continue;
                }
                match inst.called_function() {
                    Some(callee) if candidate.contains(&callee) => {
                        callers.entry(callee).or_default().push(func);
                    }
                    _ => hard = true,
                }
            }
        }
        if hard && unsafe_set.insert(func) {
            work.push(func);
        }
    }
    while let Some(g) = work.pop() {
        for &caller in callers.get(&g).map(Vec::as_slice).unwrap_or(&[]) {
            if unsafe_set.insert(caller) {
                work.push(caller);
            }
        }
    }
    NeverEndsCaller(
        funcs
            .into_iter()
            .filter(|f| !unsafe_set.contains(f))
            .collect(),
    )
}
