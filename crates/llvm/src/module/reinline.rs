//! `--tally-pgo`: the calls pre-inlining inlined that the rebuild's sample-profile loader will
//! not inline again, so that their counts go to the callee's own record
//! ([`tally_format::ScopeMeta::top_level`]) and not to a nested one the loader cannot apply.
//!
//! The two inline in opposite orders. [`pre_inline`](super::pre_inline) runs LLVM's bottom-up
//! inliner: a callee's own calls are inlined into it first. The loader works top-down: it
//! inlines a call to match a nested record while the callee still has its own calls, so it
//! judges the callee's body as written. On x86 the two judgments differ for a caller and callee
//! of different target attributes (`__attribute__((target("bmi2")))`): LLVM then inlines a
//! callee that is not `always_inline` only if none of its calls that pass or return a vector or
//! an aggregate goes through a pointer or to a function (not an intrinsic) whose attributes
//! differ from the caller's (`X86TTIImpl::areInlineCompatible`, whose check of such calls is
//! `areTypesABICompatible`: the same `target-cpu` and `target-features`). zstd's
//! `ZSTD_copy16` calls the SSE2 intrinsics' wrappers `_mm_loadu_si128` and `_mm_storeu_si128`:
//! inlined into it first, they are gone when pre-inlining inlines it into a `_bmi2` decoder; the
//! loader sees them, refuses, and merges the nested record into `ZSTD_copy16`'s own, which its
//! coverage check counts as records not applied (docs/pgo.md).
//!
//! [`Refusals`] is read from the module before pre-inlining (x86 targets only; elsewhere
//! nothing is refused). An inline instance of `g` under root `f` is refused by that rule, `f`
//! being the outermost function of the instance's inline chain (the one the loader inlines
//! into) or, under a refused instance, that instance's callee, whose own record the loader
//! applies when it handles it. Equal attribute strings are equal features; different strings
//! may still be equal features, where LLVM would inline and the instance is written top-level
//! all the same: the loader then inlines by its own rules, as it does everywhere without a
//! nested profile. Not modelled: x86's refusal of equal attributes whose use of 512-bit vector
//! registers differs (AVX-512 code), a callee without debug info (an inline scope has no
//! function to judge), and calls that the loader's early simplification makes direct (judged
//! here as through a pointer, so refused where the loader may inline).

use crate::ir::Val;
use llvm_sys::core as c;
use llvm_sys::prelude::{LLVMModuleRef, LLVMValueRef};
use llvm_sys::LLVMTypeKind::*;
use std::collections::HashMap;

/// An interned pair of a function's `target-cpu` and `target-features` attributes.
type Attrs = u32;

/// What the loader's check needs of one function: its attributes, and those of the callees of
/// its calls that pass or return a vector or aggregate (`None`: through a pointer).
struct Callee {
    attrs: Attrs,
    /// `always_inline`: inlined whatever the attributes.
    always: bool,
    wide_calls: Vec<Option<Attrs>>,
}

/// Each function's attributes and wide calls, by its `DISubprogram` (the scope's function in
/// the inline chain), as the module had them before pre-inlining.
#[derive(Default)]
pub(crate) struct Refusals {
    interned: HashMap<(String, String), Attrs>,
    by_subprogram: HashMap<usize, Callee>,
}

impl Refusals {
    /// Reads every defined function with debug info (call before inlining); nothing outside
    /// x86.
    pub(crate) fn of(m: LLVMModuleRef) -> Refusals {
        let mut r = Refusals::default();
        // SAFETY: `m` is the live module (`crate::ir`'s module doc); the triple is read at once.
        let triple = crate::ir::cstr(unsafe { c::LLVMGetTarget(m) });
        let arch = triple.split('-').next().unwrap_or("");
        if !matches!(arch, "x86_64" | "i386" | "i486" | "i586" | "i686") {
            return r;
        }
        let always = crate::ir::attr_kind("alwaysinline");
        for f in crate::emit::build::functions(m) {
            let fv = Val(f);
            let Some(sp) = crate::ir::subprogram(fv) else {
                continue;
            };
            if fv.is_declaration() {
                continue;
            }
            let attrs = r.attrs(f);
            let mut wide_calls = Vec::new();
            for bb in fv.blocks() {
                for v in bb.instructions() {
                    if !v.is_call_like() || v.calls_inline_asm() || !wide(v) {
                        continue;
                    }
                    // LLVM's `getCalledFunction`: none when the call's type is not the
                    // function's (then judged as a call through a pointer).
                    match v.called_function().filter(|&g| same_type(v, g)) {
                        Some(g) if g.intrinsic_id() != 0 => {}
                        Some(g) => wide_calls.push(Some(r.attrs(g.0))),
                        None => wide_calls.push(None),
                    }
                }
            }
            let always = fv.fn_has_attr(always);
            r.by_subprogram.insert(
                sp as usize,
                Callee {
                    attrs,
                    always,
                    wide_calls,
                },
            );
        }
        r
    }

    /// The attributes of function `f`, interned.
    pub(crate) fn attrs(&mut self, f: LLVMValueRef) -> Attrs {
        let key = (
            string_attr(f, "target-cpu"),
            string_attr(f, "target-features"),
        );
        let next = self.interned.len() as Attrs;
        *self.interned.entry(key).or_insert(next)
    }

    /// Whether the loader refuses to inline the function of `DISubprogram` `sp` into a root of
    /// attributes `root` (module doc): if so, that function's attributes, its instance's new
    /// root's.
    pub(crate) fn refused(&self, root: Attrs, sp: usize) -> Option<Attrs> {
        let g = self.by_subprogram.get(&sp)?;
        let refused = !g.always && g.attrs != root && g.wide_calls.iter().any(|&c| c != Some(root));
        refused.then_some(g.attrs)
    }
}

/// Whether call `v` passes or returns a vector or an aggregate.
fn wide(v: Val) -> bool {
    let is_wide = |t| {
        // SAFETY: `t` is a type of the module's context (`crate::ir`'s module doc); read only.
        matches!(
            unsafe { c::LLVMGetTypeKind(t) },
            LLVMVectorTypeKind
                | LLVMScalableVectorTypeKind
                | LLVMStructTypeKind
                | LLVMArrayTypeKind
        )
    };
    // SAFETY: `v` is a live call of the module (`crate::ir`'s module doc); read only.
    unsafe {
        let args = c::LLVMGetNumArgOperands(v.0);
        is_wide(c::LLVMTypeOf(v.0))
            || (0..args).any(|i| is_wide(c::LLVMTypeOf(c::LLVMGetOperand(v.0, i))))
    }
}

/// Whether call `v` has the type of function `g`.
fn same_type(v: Val, g: Val) -> bool {
    // SAFETY: `v` is a live call and `g` a live function of the module (`crate::ir`'s module
    // doc); read only.
    unsafe { c::LLVMGetCalledFunctionType(v.0) == c::LLVMGlobalGetValueType(g.0) }
}

/// The value of string function attribute `name` of `f`, empty without it.
fn string_attr(f: LLVMValueRef, name: &str) -> String {
    // SAFETY: `f` is a live function of the module (`crate::ir`'s module doc); `name` is passed
    // with its length; LLVM returns the value with its length, read before anything changes.
    unsafe {
        let a = c::LLVMGetStringAttributeAtIndex(
            f,
            llvm_sys::LLVMAttributeFunctionIndex,
            name.as_ptr().cast(),
            name.len() as u32,
        );
        if a.is_null() {
            return String::new();
        }
        let mut len = 0u32;
        let p = c::LLVMGetStringAttributeValue(a, &mut len);
        if p.is_null() {
            return String::new();
        }
        String::from_utf8_lossy(std::slice::from_raw_parts(p.cast::<u8>(), len as usize))
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;

    /// `copy16` passes vectors to the intrinsics' wrappers (`load`, `store`), and so does
    /// `forced`, `always_inline`; `count` calls only an intrinsic; `via_bmi2` passes a vector
    /// to a function of `bmi2`'s attributes; `indirect` passes one through a pointer. `bmi2`
    /// and `plain` are roots.
    const IR: &str = r#"
define <2 x i64> @load(ptr %p) #2 !dbg !10 {
  %v = load <2 x i64>, ptr %p
  ret <2 x i64> %v
}
define void @store(ptr %p, <2 x i64> %v) #2 !dbg !11 {
  store <2 x i64> %v, ptr %p
  ret void
}
define void @copy16(ptr %d, ptr %s) #0 !dbg !12 {
  %v = call <2 x i64> @load(ptr %s), !dbg !20
  call void @store(ptr %d, <2 x i64> %v), !dbg !20
  ret void
}
define i64 @count(i64 %x) #0 !dbg !13 {
  %c = call i64 @llvm.ctpop.i64(i64 %x)
  ret i64 %c
}
define <2 x i64> @wide_bmi2(<2 x i64> %v) #1 !dbg !14 {
  ret <2 x i64> %v
}
define <2 x i64> @via_bmi2(<2 x i64> %v) #0 !dbg !15 {
  %w = call <2 x i64> @wide_bmi2(<2 x i64> %v), !dbg !21
  ret <2 x i64> %w
}
define void @indirect(ptr %f, <2 x i64> %v) #0 !dbg !16 {
  call void %f(<2 x i64> %v), !dbg !22
  ret void
}
define void @forced(ptr %d, ptr %s) #3 !dbg !19 {
  %v = call <2 x i64> @load(ptr %s), !dbg !23
  call void @store(ptr %d, <2 x i64> %v), !dbg !23
  ret void
}
define void @bmi2() #1 !dbg !17 {
  ret void
}
define void @plain() #0 !dbg !18 {
  ret void
}
declare i64 @llvm.ctpop.i64(i64)
attributes #0 = { "target-cpu"="x86-64" "target-features"="+sse2" }
attributes #1 = { "target-cpu"="x86-64" "target-features"="+sse2,+bmi2" }
attributes #2 = { "target-cpu"="x86-64" "target-features"="+sse2" "min-legal-vector-width"="128" }
attributes #3 = { alwaysinline "target-cpu"="x86-64" "target-features"="+sse2" }
!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2}
!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, isOptimized: true, runtimeVersion: 0, emissionKind: FullDebug)
!1 = !DIFile(filename: "t.c", directory: "/tmp")
!2 = !{i32 2, !"Debug Info Version", i32 3}
!3 = !DISubroutineType(types: !{})
!10 = distinct !DISubprogram(name: "load", scope: !1, file: !1, line: 1, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!11 = distinct !DISubprogram(name: "store", scope: !1, file: !1, line: 2, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!12 = distinct !DISubprogram(name: "copy16", scope: !1, file: !1, line: 3, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!13 = distinct !DISubprogram(name: "count", scope: !1, file: !1, line: 4, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!14 = distinct !DISubprogram(name: "wide_bmi2", scope: !1, file: !1, line: 5, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!15 = distinct !DISubprogram(name: "via_bmi2", scope: !1, file: !1, line: 6, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!16 = distinct !DISubprogram(name: "indirect", scope: !1, file: !1, line: 7, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!17 = distinct !DISubprogram(name: "bmi2", scope: !1, file: !1, line: 8, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!18 = distinct !DISubprogram(name: "plain", scope: !1, file: !1, line: 9, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!19 = distinct !DISubprogram(name: "forced", scope: !1, file: !1, line: 10, type: !3, spFlags: DISPFlagDefinition, unit: !0)
!20 = !DILocation(line: 3, scope: !12)
!21 = !DILocation(line: 6, scope: !15)
!22 = !DILocation(line: 7, scope: !16)
!23 = !DILocation(line: 10, scope: !19)
"#;

    /// The test IR for `triple`, parsed, and a lookup of its functions by name, handed to
    /// `check`.
    fn with_module(triple: &str, check: impl FnOnce(LLVMModuleRef, &dyn Fn(&str) -> LLVMValueRef)) {
        let context = Context::create();
        let ir = format!("target triple = \"{triple}\"\n{IR}");
        let buf = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "t");
        let module = context
            .create_module_from_ir(buf)
            .expect("the test IR parses");
        let f = |name: &str| {
            inkwell::values::AsValueRef::as_value_ref(&module.get_function(name).expect(name))
        };
        check(module.as_mut_ptr(), &f);
    }

    /// The `DISubprogram` of function `f`, as [`Refusals`] keys it.
    fn sp(f: LLVMValueRef) -> usize {
        crate::ir::subprogram(Val(f)).expect("a subprogram") as usize
    }

    #[test]
    fn a_callee_passing_vectors_to_other_attributes_is_refused() {
        with_module("x86_64-unknown-linux-gnu", |m, f| {
            let mut r = Refusals::of(m);
            let (bmi2, plain) = (r.attrs(f("bmi2")), r.attrs(f("plain")));
            assert_ne!(bmi2, plain);
            // Refused under a root of other attributes; its own become the new root's.
            assert_eq!(r.refused(bmi2, sp(f("copy16"))), Some(plain));
            assert_eq!(r.refused(bmi2, sp(f("indirect"))), Some(plain));
            // Not refused: the same attributes as the root's, only an intrinsic, the wide
            // call's callee has the root's attributes, or `always_inline`.
            assert_eq!(r.refused(plain, sp(f("copy16"))), None);
            assert_eq!(r.refused(bmi2, sp(f("count"))), None);
            assert_eq!(r.refused(bmi2, sp(f("via_bmi2"))), None);
            assert_eq!(r.refused(plain, sp(f("via_bmi2"))), None);
            assert_eq!(r.refused(bmi2, sp(f("forced"))), None);
        });
    }

    #[test]
    fn nothing_is_refused_outside_x86() {
        with_module("aarch64-unknown-linux-gnu", |m, f| {
            let mut r = Refusals::of(m);
            let bmi2 = r.attrs(f("bmi2"));
            assert_eq!(r.refused(bmi2, sp(f("copy16"))), None);
        });
    }
}
