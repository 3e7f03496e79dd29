//! Second entries ([`split_entries`]): a traced function called directly in its module gets
//! an internal body for those calls and a public entry for the rest.

use super::callees::interposable;
use super::runtime::{acc_ptr, field_of};
use crate::emit::cname;
use crate::ir::{self, Val};
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMLinkage, LLVMOpcode};
use std::collections::HashMap;

/// Gives a traced function called directly within its module a second entry: its code moves
/// to an internal body (`<name>.tally.body`) that this module's traced direct call sites call,
/// and its symbol becomes a small public entry that does what the entry did (the direct
/// flag's test, `Enter`, the predicted `Enter`) and tail-calls the body. A body is entered
/// only from traced code that knows it: its entry counts the depth and nothing else
/// (`tally.wtrace.enter.body`), and the call site only clears the flag
/// (`tally.wtrace.direct.body`); 8 instructions a call fewer (the flag's store, its load and
/// compare with the function's address, the module's slot, the flag cleared), and a
/// function whose every use is such a call (internal, address not taken) needs no public
/// entry. The records, the trace and the reader are unchanged (the same records at the same
/// points); functions reached from other modules or through pointers pay a jump more.
/// Functions with a variable argument list, at -O0, in a comdat, whose blocks' addresses are
/// taken, that another image may interpose (their calls must stay calls of their name), that
/// return twice or have entry hooks ([`ENTRY_HOOKS`]) keep one entry.
pub(crate) fn split_entries(g: &crate::emit::Globals) {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let m = g.module;
        let named = |n: &str| {
            let f = c::LLVMGetNamedFunction(m, cname(n).as_ptr());
            (!f.is_null()).then_some(f)
        };
        let (Some(body_entry), Some(direct_body)) = (
            named("tally.wtrace.enter.body"),
            named("tally.wtrace.direct.body"),
        ) else {
            return;
        };
        let entries: Vec<(LLVMValueRef, LLVMValueRef)> = [
            ("tally.wtrace.enter", "tally.wtrace.enter.wrap"),
            ("tally.wtrace.enter.again", "tally.wtrace.enter.again.wrap"),
        ]
        .iter()
        .filter_map(|(e, w)| Some((named(e)?, named(w)?)))
        .collect();
        let direct = named("tally.wtrace.direct");
        let users = |v: LLVMValueRef| {
            let mut out = Vec::new();
            let mut u = c::LLVMGetFirstUse(v);
            while !u.is_null() {
                out.push(Val(c::LLVMGetUser(u)));
                u = c::LLVMGetNextUse(u);
            }
            out
        };
        // Each traced direct call site: the `tally.wtrace.direct` helper before it, and the call;
        // by callee, in the order of the module's functions (the public entries are emitted in
        // that order: the same input gives the same object).
        let mut sites: HashMap<LLVMValueRef, Vec<(Val, Val)>> = HashMap::new();
        for d in direct.map(users).unwrap_or_default() {
            if d.opcode() != LLVMOpcode::LLVMCall || d.num_operands() < 3 {
                continue;
            }
            let callee = d.operand(1);
            let mut next = d.next();
            while let Some(v) = next {
                if v.is_call_like() && v.called_value() == callee {
                    sites.entry(callee.0).or_default().push((d, v));
                    break;
                }
                next = v.next();
            }
        }
        let mut order = Vec::new();
        let mut f = c::LLVMGetFirstFunction(m);
        while !f.is_null() {
            if sites.contains_key(&f) {
                order.push(f);
            }
            f = c::LLVMGetNextFunction(f);
        }
        for f in order {
            let calls = &sites[&f];
            let fv = Val(f);
            if c::LLVMIsAFunction(f).is_null() || fv.is_declaration() {
                continue;
            }
            // The inline entry of `f` (first in its first block) and its public counterpart.
            let Some((entry_call, wrap_fn)) = fv.first_block().and_then(|b| {
                b.instructions().into_iter().find_map(|v| {
                    if v.opcode() != LLVMOpcode::LLVMCall {
                        return None;
                    }
                    let callee = v.called_value().0;
                    entries
                        .iter()
                        .find(|(e, _)| *e == callee)
                        .map(|&(_, w)| (v, w))
                })
            }) else {
                continue;
            };
            let fty = c::LLVMGlobalGetValueType(f);
            // (A call of a definition another image may interpose must stay a call of its name.)
            if c::LLVMIsFunctionVarArg(fty) != 0
                || (fv.linkage() == LLVMLinkage::LLVMExternalLinkage && interposable(fv))
                || fv.fn_has_attr(ir::attr_kind("optnone"))
                || fv.fn_has_attr(ir::attr_kind("naked"))
                || fv.fn_has_attr(ir::attr_kind("returns_twice"))
                || ENTRY_HOOKS.iter().any(|k| {
                    !c::LLVMGetStringAttributeAtIndex(
                        f,
                        llvm_sys::LLVMAttributeFunctionIndex,
                        k.as_ptr().cast(),
                        k.len() as u32,
                    )
                    .is_null()
                })
                || c::LLVMHasPrefixData(f) != 0
                || c::LLVMHasPrologueData(f) != 0
                || !llvm_sys::comdat::LLVMGetComdat(f).is_null()
                || users(f)
                    .iter()
                    .any(|u| !c::LLVMIsABlockAddress(u.0).is_null())
            {
                continue;
            }
            // Uses other than these calls, the helpers' arguments: a public entry is needed.
            let site_calls: Vec<LLVMValueRef> = calls.iter().map(|(_, v)| v.0).collect();
            let helper_arg = |u: Val| {
                u.opcode() == LLVMOpcode::LLVMCall
                    && u.called_function()
                        .is_some_and(|h| h.name().starts_with("tally.wtrace."))
                    && (0..u.num_operands() - 1).any(|i| u.operand(i).0 == f)
                    && u.called_value().0 != f
            };
            let internal = matches!(
                fv.linkage(),
                LLVMLinkage::LLVMInternalLinkage | LLVMLinkage::LLVMPrivateLinkage
            );
            // (A site that also passes `f` as an argument takes its address.)
            let site = |u: Val| {
                site_calls.contains(&u.0) && (0..u.num_operands() - 1).all(|i| u.operand(i).0 != f)
            };
            let public = !internal || users(f).into_iter().any(|u| !site(u) && !helper_arg(u));
            if public {
                public_entry(g, f, entry_call, wrap_fn);
                for &call in &site_calls {
                    set_callee(Val(call), f);
                }
            }
            // Each site's flag becomes the body's, right before the call (after any save of the
            // caller's copy of the word: the runtime's entry may be made there).
            let db_ty = c::LLVMGlobalGetValueType(direct_body);
            let b = c::LLVMCreateBuilderInContext(g.ctx);
            for (d, call) in calls {
                c::LLVMPositionBuilderBefore(b, call.0);
                let mut args = [
                    d.operand(0).0,
                    d.operand(1).0,
                    d.operand(2).0,
                    entry_call.operand(0).0,
                    entry_call.operand(1).0,
                    entry_call.operand(2).0,
                ];
                let nb =
                    c::LLVMBuildCall2(b, db_ty, direct_body, args.as_mut_ptr(), 6, c"".as_ptr());
                Val(nb).set_debug_loc(d.debug_loc());
                c::LLVMInstructionEraseFromParent(d.0);
            }
            c::LLVMDisposeBuilder(b);
            set_callee(entry_call, body_entry);
        }
    }
}

/// Function attributes that put code at a function's entry (`-pg`, `-finstrument-functions`,
/// `-fpatchable-function-entry`, `-mfentry`): a function with one keeps one entry, so that the
/// hook runs once a call.
pub(super) const ENTRY_HOOKS: [&str; 5] = [
    "instrument-function-entry",
    "instrument-function-entry-inlined",
    "instrument-function-exit",
    "patchable-function-entry",
    "fentry-call",
];

/// Points call `call` at `f` (a helper of the same type).
pub(super) unsafe fn set_callee(call: Val, f: LLVMValueRef) {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let n = c::LLVMGetNumOperands(call.0);
        c::LLVMSetOperand(call.0, (n - 1) as u32, f);
    }
}

/// Makes `f` the body of a new public function that takes its name, linkage, attributes and
/// every use (`entry_call`, `f`'s inline entry, gives the public entry's arguments; `wrap` is
/// its `.wrap` counterpart).
pub(super) unsafe fn public_entry(
    g: &crate::emit::Globals,
    f: LLVMValueRef,
    entry_call: Val,
    wrap: LLVMValueRef,
) {
    // SAFETY: the handles passed in (module, context, values, builder) are live for the whole
    // `instrument` call (`crate::ir`'s module doc), and callers position the builder.
    unsafe {
        let m = g.module;
        let fty = c::LLVMGlobalGetValueType(f);
        let w = c::LLVMAddFunction(m, c"".as_ptr(), fty);
        // Attributes: the function's, its return value's and its parameters'.
        let nparams = c::LLVMCountParams(f);
        let indices: Vec<u32> = [llvm_sys::LLVMAttributeFunctionIndex, 0]
            .into_iter()
            .chain(1..=nparams)
            .collect();
        let attrs_at = |idx: u32| {
            let n = c::LLVMGetAttributeCountAtIndex(f, idx);
            let mut v: Vec<LLVMAttributeRef> = vec![std::ptr::null_mut(); n as usize];
            if n > 0 {
                c::LLVMGetAttributesAtIndex(f, idx, v.as_mut_ptr());
            }
            v
        };
        for &idx in &indices {
            for a in attrs_at(idx) {
                c::LLVMAddAttributeAtIndex(w, idx, a);
            }
        }
        c::LLVMSetFunctionCallConv(w, c::LLVMGetFunctionCallConv(f));
        c::LLVMSetLinkage(w, c::LLVMGetLinkage(f));
        c::LLVMSetVisibility(w, c::LLVMGetVisibility(f));
        c::LLVMSetDLLStorageClass(w, c::LLVMGetDLLStorageClass(f));
        c::LLVMSetUnnamedAddress(w, c::LLVMGetUnnamedAddress(f));
        let section = c::LLVMGetSection(f);
        if !section.is_null() {
            c::LLVMSetSection(w, section);
        }
        c::LLVMSetAlignment(w, c::LLVMGetAlignment(f));
        crate::shim::copy_dso_local(Val(f), Val(w));
        // Metadata other than the debug information (which stays with the code).
        let mut n = 0usize;
        let md = c::LLVMGlobalCopyAllMetadata(f, &mut n);
        for i in 0..n as u32 {
            let kind = c::LLVMValueMetadataEntriesGetKind(md, i);
            if kind != 0 {
                c::LLVMGlobalSetMetadata(w, kind, c::LLVMValueMetadataEntriesGetMetadata(md, i));
            }
        }
        if !md.is_null() {
            c::LLVMDisposeValueMetadataEntries(md);
        }
        // Every use of `f` is now `w`'s (callers restored by the caller of this function), and
        // the names change places.
        c::LLVMReplaceAllUsesWith(f, w);
        let mut len = 0usize;
        let name = std::ffi::CStr::from_ptr(c::LLVMGetValueName2(f, &mut len))
            .to_bytes()
            .to_vec();
        let body = [name.as_slice(), b".tally.body"].concat();
        c::LLVMSetValueName2(f, body.as_ptr().cast(), body.len());
        c::LLVMSetValueName2(w, name.as_ptr().cast(), name.len());
        c::LLVMSetLinkage(f, LLVMLinkage::LLVMInternalLinkage);
        c::LLVMSetVisibility(f, llvm_sys::LLVMVisibility::LLVMDefaultVisibility);
        c::LLVMSetDLLStorageClass(f, llvm_sys::LLVMDLLStorageClass::LLVMDefaultStorageClass);
        c::LLVMSetUnnamedAddress(f, llvm_sys::LLVMUnnamedAddr::LLVMGlobalUnnamedAddr);
        // The public entry: the entry's tests, then the body. The usual case (announced by a
        // traced caller of another module, the module has its slot) is tested here and tail-calls
        // the body on a path of its own, which needs no register saved; the rest is the `.wrap`
        // helper's (its first test again), then the same tail call.
        let b = c::LLVMCreateBuilderInContext(g.ctx);
        let block =
            |name: &std::ffi::CStr| c::LLVMAppendBasicBlockInContext(g.ctx, w, name.as_ptr());
        let (bb, fast, slow) = (block(c"entry"), block(c"silent"), block(c"announced"));
        c::LLVMPositionBuilderAtEnd(b, bb);
        let mut args: Vec<LLVMValueRef> = (0..4).map(|i| entry_call.operand(i).0).collect();
        let a = acc_ptr(g, b);
        let flag_p = field_of(g, b, a, "direct");
        let flag = c::LLVMBuildLoad2(b, g.ptrt, flag_p, c"".as_ptr());
        let eq = llvm_sys::LLVMIntPredicate::LLVMIntEQ;
        let mine = c::LLVMBuildICmp(b, eq, flag, args[3], c"".as_ptr());
        // (the module's first field)
        let slot = c::LLVMBuildLoad2(b, g.i32t, args[0], c"".as_ptr());
        let zero = c::LLVMConstInt(g.i32t, 0, 0);
        let ne = llvm_sys::LLVMIntPredicate::LLVMIntNE;
        let has = c::LLVMBuildICmp(b, ne, slot, zero, c"".as_ptr());
        let ok = c::LLVMBuildAnd(b, mine, has, c"".as_ptr());
        let br = c::LLVMBuildCondBr(b, ok, fast, slow);
        ir::set_branch_weights(g.ctx, br, &[1 << 10, 1]);
        let tail = |b| {
            let mut params: Vec<LLVMValueRef> =
                (0..nparams).map(|i| c::LLVMGetParam(w, i)).collect();
            let call = c::LLVMBuildCall2(b, fty, f, params.as_mut_ptr(), nparams, c"".as_ptr());
            c::LLVMSetInstructionCallConv(call, c::LLVMGetFunctionCallConv(f));
            for &idx in &indices[1..] {
                for a in attrs_at(idx) {
                    c::LLVMAddCallSiteAttribute(call, idx, a);
                }
            }
            c::LLVMSetTailCallKind(call, llvm_sys::LLVMTailCallKind::LLVMTailCallKindMustTail);
            if c::LLVMGetTypeKind(c::LLVMGetReturnType(fty))
                == llvm_sys::LLVMTypeKind::LLVMVoidTypeKind
            {
                c::LLVMBuildRetVoid(b);
            } else {
                c::LLVMBuildRet(b, call);
            }
        };
        c::LLVMPositionBuilderAtEnd(b, fast);
        c::LLVMBuildStore(b, c::LLVMConstNull(g.ptrt), flag_p);
        tail(b);
        c::LLVMPositionBuilderAtEnd(b, slow);
        let wrap_ty = c::LLVMGlobalGetValueType(wrap);
        c::LLVMBuildCall2(b, wrap_ty, wrap, args.as_mut_ptr(), 4, c"".as_ptr());
        tail(b);
        c::LLVMDisposeBuilder(b);
    }
}
