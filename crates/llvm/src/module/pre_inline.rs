//! `--tally-pgo`: inlining before instrumentation, as clang's IR PGO pre-inlines before it
//! instruments.
//!
//! A training build instruments clang's graph before optimization (docs/pgo.md), where every
//! call of a small callee (zstd's `MEM_read32`) enters a graph of its own and is counted there.
//! Inlined first, the callee is part of its caller's graph, where the spanning tree (Ball &
//! Larus 1994 §3) derives most of its counts. The callee's pseudo-probes go along with its
//! blocks, their locations naming the inline instance, so each probe's count is still exact:
//! the sum over its copies (`tally_report::sample_profile`). A probe the inliner left out of a
//! copy (the call's constant arguments made its block unreachable) ran 0 times there.
//!
//! Only the inliner runs, none of the simplification that follows it in clang's pipeline: that
//! would fold blocks, and their probes, away. Every function keeps its own body meanwhile (the
//! inliner deletes a discardable function it inlined everywhere; its linkage is made external
//! for the inliner and restored after), so every probe of every function is in the module and
//! a block that never ran still has its zero count. All but a local function whose one use is
//! a direct call ([`sole_call`]): external, it would lose the inliner's bonus for the last
//! call of a local function, and the rebuild would not inline it either, without a nested
//! record to say it is hot (mimalloc's `phase_*` functions, each called once from `main`:
//! 0.25 of IR PGO's gain with the bonus lost, 0.72 with it; docs/pgo.md). Inlined, it is
//! deleted and its inline copy is its one body: a block the call's constant arguments made
//! unreachable is not in it, and its probe is missing from the profile where the build
//! without pre-inlining writes it with 0 (also a whole function whose one call was in such a
//! block); the loader then infers those blocks' weights.
//!
//! Nothing is inlined into or out of a function tally will not instrument: an
//! `available_externally` copy [`localize`](super::localize) left as it is (its calls that are
//! not inlined run the library's copy) or one the lowering refuses. A probe in such a function
//! is not counted, and a copy of it inlined elsewhere would make its sum a count of some of its
//! executions only; in such a function, an inlined callee's executions would go uncounted.

use crate::ir::ends::AttrKinds;
use crate::ir::{lower, prepare, Val};
use llvm_sys::core as c;
use llvm_sys::prelude::{LLVMAttributeRef, LLVMModuleRef, LLVMValueRef};
use llvm_sys::LLVMLinkage::{self, *};

/// The pipeline: LLVM's inliner alone.
pub(crate) const PRE_INLINE: &str = "cgscc(inline)";

/// Runs [`PRE_INLINE`] over the module (after [`super::add_pseudo_probes`]).
pub(crate) fn pre_inline(module: &inkwell::module::Module) -> Result<(), String> {
    let m = module.as_mut_ptr();
    let kinds = AttrKinds::lookup();
    let safe = crate::ir::ends::analyze(m, &kinds);
    let funcs = crate::emit::build::functions(m);
    let fences = Fences::new(m);
    let mut fenced = Vec::new();
    for &f in &funcs {
        let fv = Val(f);
        if !fv.is_declaration() && uncounted(fv, &kinds, &safe) {
            fenced.push(fences.put(fv));
        }
    }
    let mut kept: Vec<(LLVMValueRef, LLVMLinkage)> = Vec::new();
    for &f in &funcs {
        // SAFETY: `f` is a live function of the module, which only this crate changes during
        // `instrument` (`crate::ir`'s module doc).
        unsafe {
            let l = c::LLVMGetLinkage(f);
            let discardable = matches!(
                l,
                LLVMInternalLinkage
                    | LLVMPrivateLinkage
                    | LLVMLinkOnceAnyLinkage
                    | LLVMLinkOnceODRLinkage
            );
            if c::LLVMIsDeclaration(f) == 0 && discardable && !sole_call(Val(f)) {
                kept.push((f, l));
                c::LLVMSetLinkage(f, LLVMExternalLinkage);
            }
        }
    }
    let done = super::run_passes(module, PRE_INLINE);
    for (f, l) in kept {
        // SAFETY: as above; the inliner deletes no function with external linkage.
        unsafe { c::LLVMSetLinkage(f, l) }
    }
    for f in fenced {
        fences.lift(f);
    }
    done
}

/// `f` is local and has one use, a direct call: LLVM's inliner gives that call its bonus for
/// the last call of a local function (`LastCallToStaticBonus`), which an external copy would
/// not get. Its linkage stays: when that call is inlined, the inliner deletes `f`, whose one
/// copy is then the inline instance (`tally_report::sample_profile` writes its probes from it).
fn sole_call(f: Val) -> bool {
    if !matches!(f.linkage(), LLVMInternalLinkage | LLVMPrivateLinkage) {
        return false;
    }
    let users = f.users();
    users.len() == 1
        && users[0].is_instruction()
        && users[0].is_call_like()
        && users[0].called_value() == f
        && (0..users[0].num_operands())
            .filter(|&i| users[0].operand(i) == f)
            .count()
            == 1
}

/// `noinline` put on a function and on every call in it, for the inliner only.
struct Fences {
    /// `noinline` and `alwaysinline`: the attributes, and their kinds.
    attrs: [LLVMAttributeRef; 2],
    noinline: u32,
    alwaysinline: u32,
}

/// What [`Fences::put`] added or removed, for [`Fences::lift`].
struct Fenced {
    f: Val,
    noinline: bool,
    alwaysinline: bool,
    calls: Vec<Val>,
}

const FUN: u32 = llvm_sys::LLVMAttributeFunctionIndex;

impl Fences {
    fn new(m: LLVMModuleRef) -> Fences {
        let noinline = crate::ir::attr_kind("noinline");
        let alwaysinline = crate::ir::attr_kind("alwaysinline");
        // SAFETY: `m` is the live module (`crate::ir`'s module doc); the kinds are known.
        let attrs = unsafe {
            let ctx = c::LLVMGetModuleContext(m);
            [noinline, alwaysinline].map(|k| c::LLVMCreateEnumAttribute(ctx, k, 0))
        };
        Fences {
            attrs,
            noinline,
            alwaysinline,
        }
    }

    /// Keeps `f` out of the inliner, as a callee (`noinline`, which `alwaysinline` cannot
    /// accompany) and as a caller (`noinline` on its calls; they are never copied, since `f`
    /// is not inlined).
    fn put(&self, f: Val) -> Fenced {
        let alwaysinline = f.fn_has_attr(self.alwaysinline);
        let noinline = !f.fn_has_attr(self.noinline);
        let mut calls = Vec::new();
        // SAFETY: `f` and its calls are live values of the module (`crate::ir`'s module doc);
        // the attribute is of the module's context.
        unsafe {
            if alwaysinline {
                c::LLVMRemoveEnumAttributeAtIndex(f.0, FUN, self.alwaysinline);
            }
            if noinline {
                c::LLVMAddAttributeAtIndex(f.0, FUN, self.attrs[0]);
            }
            for bb in f.blocks() {
                for v in bb.instructions() {
                    if v.is_call_like()
                        && c::LLVMGetCallSiteEnumAttribute(v.0, FUN, self.noinline).is_null()
                    {
                        c::LLVMAddCallSiteAttribute(v.0, FUN, self.attrs[0]);
                        calls.push(v);
                    }
                }
            }
        }
        Fenced {
            f,
            noinline,
            alwaysinline,
            calls,
        }
    }

    /// Undoes [`Fences::put`].
    fn lift(&self, fenced: Fenced) {
        let f = fenced.f.0;
        // SAFETY: as in `put`: the inliner changed nothing in `f` (it inlined no call of it),
        // and deleted no function with external linkage (`pre_inline`).
        unsafe {
            for v in fenced.calls {
                c::LLVMRemoveCallSiteEnumAttribute(v.0, FUN, self.noinline);
            }
            if fenced.noinline {
                c::LLVMRemoveEnumAttributeAtIndex(f, FUN, self.noinline);
            }
            if fenced.alwaysinline {
                c::LLVMAddAttributeAtIndex(f, FUN, self.attrs[1]);
            }
        }
    }
}

/// A defined function that tally will not instrument: `available_externally` (the ones
/// [`localize`](super::localize) did not make internal), or one the lowering refuses.
fn uncounted(f: Val, kinds: &AttrKinds, safe: &crate::ir::ends::NeverEndsCaller) -> bool {
    if f.linkage() == LLVMAvailableExternallyLinkage {
        return true;
    }
    // The lowering after instrumenting splits them too (`crate::lower_and_plan`).
    prepare::split_shared_landing_pads(f);
    lower::lower(f, kinds, safe).is_err()
}
