//! Second entries ([`split_entries`]): a traced function called directly in its module gets
//! an internal body for those calls and a public entry for the rest.

use super::callees::interposable;
use super::runtime::{acc_ptr, field_of};
use crate::emit::build as b;
use crate::emit::Emitter;
use crate::ir::{self, Val};
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
    {
        let m = g.module;
        let named = |n: &str| b::named_function(m, n);
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
        let users = |v: LLVMValueRef| Val(v).users();
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
        let order: Vec<LLVMValueRef> = b::functions(m)
            .into_iter()
            .filter(|f| sites.contains_key(f))
            .collect();
        for f in order {
            let calls = &sites[&f];
            let fv = Val(f);
            if !b::is_function(f) || fv.is_declaration() {
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
            let fty = b::global_value_type(f);
            // (A call of a definition another image may interpose must stay a call of its name.)
            if b::is_vararg(fty)
                || (fv.linkage() == LLVMLinkage::LLVMExternalLinkage && interposable(fv))
                || fv.fn_has_attr(ir::attr_kind("optnone"))
                || fv.fn_has_attr(ir::attr_kind("naked"))
                || fv.fn_has_attr(ir::attr_kind("returns_twice"))
                || ENTRY_HOOKS.iter().any(|k| b::has_string_fn_attr(f, k))
                || b::has_prefix_prologue_or_comdat(f)
                || users(f).iter().any(|u| b::is_block_address(u.0))
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
            let db = (direct_body, b::global_value_type(direct_body));
            let em = Emitter::new(g, fv);
            for (d, call) in calls {
                em.at(*call);
                let args = [
                    d.operand(0).0,
                    d.operand(1).0,
                    d.operand(2).0,
                    entry_call.operand(0).0,
                    entry_call.operand(1).0,
                    entry_call.operand(2).0,
                ];
                let nb = em.call_plain(db, &args);
                Val(nb).set_debug_loc(d.debug_loc());
                b::erase(*d);
            }
            drop(em);
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
pub(super) fn set_callee(call: Val, f: LLVMValueRef) {
    b::set_operand(call, call.num_operands() - 1, f);
}

/// Makes `f` the body of a new public function that takes its name, linkage, attributes and
/// every use (`entry_call`, `f`'s inline entry, gives the public entry's arguments; `wrap` is
/// its `.wrap` counterpart).
pub(super) fn public_entry(
    g: &crate::emit::Globals,
    f: LLVMValueRef,
    entry_call: Val,
    wrap: LLVMValueRef,
) {
    let m = g.module;
    let fty = b::global_value_type(f);
    let w = b::add_function(m, fty);
    // Attributes: the function's, its return value's and its parameters'.
    let nparams = b::count_params(f);
    let indices: Vec<u32> = [llvm_sys::LLVMAttributeFunctionIndex, 0]
        .into_iter()
        .chain(1..=nparams)
        .collect();
    for &idx in &indices {
        for a in b::fn_attrs_at(f, idx) {
            b::add_fn_attr_at(w, idx, a);
        }
    }
    b::copy_function_props(f, w);
    crate::shim::copy_dso_local(Val(f), Val(w));
    // Metadata other than the debug information (which stays with the code).
    b::copy_metadata_but_debug(f, w);
    // Every use of `f` is now `w`'s (callers restored by the caller of this function), and
    // the names change places.
    b::replace_all_uses(f, w);
    let name = b::name_bytes(f);
    let body = [name.as_slice(), b".tally.body"].concat();
    b::set_name_bytes(f, &body);
    b::set_name_bytes(w, &name);
    b::set_linkage(f, LLVMLinkage::LLVMInternalLinkage);
    b::set_visibility(f, llvm_sys::LLVMVisibility::LLVMDefaultVisibility);
    b::set_dll_storage_class(f, llvm_sys::LLVMDLLStorageClass::LLVMDefaultStorageClass);
    b::set_unnamed_addr(f, llvm_sys::LLVMUnnamedAddr::LLVMGlobalUnnamedAddr);
    // The public entry: the entry's tests, then the body. The usual case (announced by a
    // traced caller of another module, the module has its slot) is tested here and tail-calls
    // the body on a path of its own, which needs no register saved; the rest is the `.wrap`
    // helper's (its first test again), then the same tail call.
    let em = Emitter::new(g, Val(w));
    let block = |name: &str| b::append_block(g, Val(w), name);
    let (bb, fast, slow) = (block("entry"), block("silent"), block("announced"));
    em.position_at_end(bb);
    let args: Vec<LLVMValueRef> = (0..4).map(|i| entry_call.operand(i).0).collect();
    let a = acc_ptr(&em);
    let flag_p = field_of(&em, a, "direct");
    let flag = em.load(g.ptrt, flag_p);
    let eq = llvm_sys::LLVMIntPredicate::LLVMIntEQ;
    let mine = em.icmp(eq, flag, args[3]);
    // (the module's first field)
    let slot = em.load(g.i32t, args[0]);
    let zero = b::const_int(g.i32t, 0, false);
    let ne = llvm_sys::LLVMIntPredicate::LLVMIntNE;
    let has = em.icmp(ne, slot, zero);
    let ok = em.and(mine, has);
    let br = em.cond_br(ok, fast, slow);
    ir::set_branch_weights(g.ctx, br.0, &[1 << 10, 1]);
    let tail = |em: &Emitter| {
        let params: Vec<LLVMValueRef> = (0..nparams).map(|i| b::param(w, i)).collect();
        let call = em.call_plain((f, fty), &params);
        b::set_call_conv(call, b::call_conv(f));
        for &idx in &indices[1..] {
            for a in b::fn_attrs_at(f, idx) {
                b::add_call_attr_at(call, idx, a);
            }
        }
        b::set_tail_call_kind(call, llvm_sys::LLVMTailCallKind::LLVMTailCallKindMustTail);
        if b::returns_void(fty) {
            em.ret_void();
        } else {
            em.ret(call);
        }
    };
    em.position_at_end(fast);
    em.store(b::const_null(g.ptrt), flag_p);
    tail(&em);
    em.position_at_end(slow);
    em.call_plain((wrap, b::global_value_type(wrap)), &args);
    tail(&em);
}
