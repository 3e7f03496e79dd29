//! Call sites and callees: how each call of a function is seen (`Direct`, `Extern`, `Opaque`,
//! `Unknown`: [`classify`]), the function's [`FunctionInput`] for the plans, and the module's
//! tables of external callees and own addresses the runtime resolves `Extern` sites with.

use crate::emit::build as b;
use crate::ir::ends::SETJMP_NAMES;
use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::Val;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMLinkage, LLVMOpcode};
use tally_format::WCallee;
use tally_graph::witness::{CallSite, Callee, FuncId, FunctionInput};
use tally_graph::IdVec;

/// Declared-only functions known to write nothing and never call back into the program: the
/// leaves of libc a program calls most. Conservative: anything not listed is `Unknown` (one
/// `Back` record per call). The allocator is not listed (a program may define its own).
pub(super) const OPAQUE_LIBC: &[&str] = &[
    "strlen",
    "strnlen",
    "strcmp",
    "strncmp",
    "strcpy",
    "strncpy",
    "strcat",
    "strncat",
    "strchr",
    "strrchr",
    "strstr",
    "strspn",
    "strcspn",
    "memcpy",
    "memmove",
    "memset",
    "memcmp",
    "memchr",
    "printf",
    "fprintf",
    "sprintf",
    "snprintf",
    "puts",
    "putchar",
    "fputs",
    "fputc",
    "putc",
    "fwrite",
    "fflush",
    "abs",
    "labs",
    "llabs",
    "sqrt",
    "sin",
    "cos",
    "exp",
    "log",
    "pow",
    "floor",
    "ceil",
    "fabs",
    "atoi",
    "atol",
    "strtol",
    "strtoul",
    "strtod",
    "toupper",
    "tolower",
    "__ctype_b_loc",
    "__errno_location",
];

/// One call instruction of a block and how the plan sees it.
pub(super) struct Call {
    pub(super) instr: Val,
    pub(super) callee: WCallee,
}

/// How a call site's callee is seen: `Direct` for a definition of this module the linker
/// cannot replace (internal, private, or external where it cannot be interposed), `Extern`
/// (index filled in at emission, [`extern_index`]) for a direct call the linker resolves (a
/// declaration, a weak or linkonce definition, an external definition of a shared object's
/// code, which another image may interpose), `Opaque` or `Unknown`.
pub(super) fn classify(v: Val) -> WCallee {
    if v.calls_inline_asm() {
        return WCallee::Opaque;
    }
    let Some(f) = v.called_function() else {
        return WCallee::Unknown;
    };
    let name = f.name();
    if f.intrinsic_id() != 0 || SETJMP_NAMES.contains(&name.as_str()) {
        // setjmp's first return is normal; its second is a landing (`__tally_wtrace_reentry`).
        return WCallee::Opaque;
    }
    if name.starts_with("__tally_") {
        return WCallee::Unknown; // (the runtime's wrappers: never traced)
    }
    if !f.is_declaration() {
        use LLVMLinkage::*;
        return match f.linkage() {
            LLVMInternalLinkage | LLVMPrivateLinkage => WCallee::Direct(name),
            LLVMExternalLinkage if !interposable(f) => WCallee::Direct(name),
            _ => WCallee::Extern {
                name,
                index: u32::MAX,
            },
        };
    }
    if OPAQUE_LIBC.contains(&name.as_str()) {
        WCallee::Opaque
    } else {
        WCallee::Extern {
            name,
            index: u32::MAX,
        }
    }
}

/// Whether another image may interpose external definition `f`: the module is position-
/// independent code that is not an executable's (a "PIC Level" flag, no "PIE Level") and `f`
/// has default visibility.
pub(super) fn interposable(f: Val) -> bool {
    let m = b::global_parent(f);
    b::has_module_flag(m, "PIC Level")
        && !b::has_module_flag(m, "PIE Level")
        && b::visibility(f.0) == llvm_sys::LLVMVisibility::LLVMDefaultVisibility
}

/// Names of the module's trace tables ([`module_tables`]).
pub(super) const MODULE_DESC: &str = "__tally_wtrace_module";
pub(super) const EXTERNS: &str = "__tally_wtrace_externs";

/// The address `enter` gets as `self` and the module's function table lists: the function's
/// own address (through a private alias where another image may interpose its name), `None`
/// for a weak or linkonce definition, which the linker may replace by another module's copy
/// (its entries are always announced: `self` null).
pub(super) fn own_address(f: Val) -> Option<LLVMValueRef> {
    use LLVMLinkage::*;
    match f.linkage() {
        LLVMExternalLinkage if interposable(f) => Some(b::private_alias(
            b::global_parent(f),
            &format!("{}.tally.self", f.name()),
            b::global_value_type(f.0),
            f.0,
        )),
        LLVMExternalLinkage | LLVMInternalLinkage | LLVMPrivateLinkage => Some(f.0),
        _ => None,
    }
}

/// Whether `f` is likely to be entered announced: its address is used other than as the callee
/// of a call in its module (so it may be called through a pointer, or back from untraced
/// code). Such a function's entry writes its predicted `Enter` itself
/// (`tally.wtrace.enter.again`: the thread's `again`, then the prediction table); any other
/// keeps the shorter entry, also one visible outside the module (called from
/// untraced code it pays the runtime's `Enter`): the longer entry changes the register
/// allocation of large functions that are nearly always entered silently (zlib's
/// `inflate_fast`: +0.5 M instructions when every external function had it). Only a cost
/// choice: either entry is exact. Must run before any function is instrumented (direct call
/// sites then use callees' addresses as operands).
pub(super) fn may_be_announced(f: Val) -> bool {
    f.users().into_iter().any(|user| {
        // (A call's callee is its last operand; `f` anywhere else is its address.)
        let n = user.num_operands();
        !user.is_call_like() || n == 0 || (0..n - 1).any(|i| user.operand(i) == f)
    })
}

/// Builds the module's trace tables before any function is emitted: its external callees
/// (every `Extern` callee of every function, in order: `EXTERNS`), its functions' own
/// addresses for those other modules may call by name (index = metadata index), and the
/// descriptor `struct tally_wtrace_module` that `enter` gets (`MODULE_DESC`; the runtime
/// assigns its slot and copies the tables, `c/wtrace/records.c`).
pub(super) fn module_tables(funcs: &[(Val, &Lowered)]) {
    let Some(&(first, _)) = funcs.first() else {
        return;
    };
    let m = b::global_parent(first);
    let ctx = b::module_context(m);
    let (i32t, ptrt) = (b::i32_type_in(ctx), b::ptr_type_in(ctx));
    let mut externs: Vec<LLVMValueRef> = Vec::new();
    for (_, l) in funcs {
        for call in calls_of(l).iter().flatten() {
            if let (WCallee::Extern { .. }, Some(f)) = (&call.callee, call.instr.called_function())
            {
                if !externs.contains(&f.0) {
                    externs.push(f.0);
                }
            }
        }
    }
    let own: Vec<LLVMValueRef> = funcs
        .iter()
        .map(|(f, _)| match f.linkage() {
            LLVMLinkage::LLVMExternalLinkage => own_address(*f),
            _ => None,
        })
        .map(|a| a.unwrap_or_else(|| b::const_null(ptrt)))
        .collect();
    let table = |name: &str, vals: &[LLVMValueRef]| {
        let arr = b::const_array(ptrt, vals);
        b::add_global(m, name, arr, LLVMLinkage::LLVMPrivateLinkage, true)
    };
    let externs_g = table(EXTERNS, &externs);
    let funcs_g = table("__tally_wtrace_funcs", &own);
    let fields = [
        b::const_int(i32t, 0, false),
        b::const_int(i32t, funcs.len() as u64, false),
        b::const_int(i32t, externs.len() as u64, false),
        b::const_int(i32t, 0, false),
        funcs_g,
        externs_g,
    ];
    let init = b::const_struct_in(ctx, &fields);
    b::add_global(
        m,
        MODULE_DESC,
        init,
        LLVMLinkage::LLVMInternalLinkage,
        false,
    );
}

/// Index of `callee` in the module's table of external callees ([`module_tables`]).
pub(super) fn extern_index(m: LLVMModuleRef, callee: Val) -> Option<u32> {
    let g = b::named_global(m, EXTERNS)?;
    b::array_initializer_elements(g)
        .iter()
        .position(|&e| e == callee.0)
        .map(|i| i as u32)
}

/// The calls of each block in order; a `resume` ends its block with an `Unknown` site of its
/// own (it continues an unwinding: regeneration waits there for the `Unwind` of the next
/// landing, like at a call that does not return, and the plan blocks it like a call).
/// The caller writes `Back` after the call returns normally.
pub(super) fn writes_back(c: &WCallee) -> bool {
    matches!(c, WCallee::Unknown | WCallee::Extern { .. })
}

pub(super) fn calls_of(l: &Lowered) -> Vec<Vec<Call>> {
    l.nodes
        .iter()
        .map(|n| {
            n.instrs
                .iter()
                .filter(|v| v.is_call_like() || is_resume(**v))
                .map(|&instr| Call {
                    instr,
                    callee: if is_resume(instr) {
                        WCallee::Unknown
                    } else {
                        classify(instr)
                    },
                })
                .collect()
        })
        .collect()
}

pub(super) fn is_resume(v: Val) -> bool {
    v.opcode() == LLVMOpcode::LLVMResume
}

pub(super) fn input_of(l: &Lowered, calls: &[Vec<Call>]) -> FunctionInput {
    let mut per_node: Vec<Vec<CallSite>> = calls
        .iter()
        .map(|cs| {
            cs.iter()
                .map(|call| CallSite {
                    callee: match call.callee {
                        // The plan only asks whether a site is a call vertex.
                        WCallee::Direct(_) => Callee::Direct(FuncId(0)),
                        WCallee::Opaque => Callee::Opaque,
                        WCallee::Unknown | WCallee::Extern { .. } => Callee::Unknown,
                    },
                })
                .collect()
        })
        .collect();
    per_node.push(Vec::new()); // EXIT
                               // The unwind edges: an `invoke`'s unwind destination, and the `Return` edge of a
                               // `resume` (taken when the next landing abandons the activation).
    let unwind = l
        .cfg
        .edges()
        .zip(&l.edges)
        .map(|((_, edge), e)| match *e {
            EdgeIr::Succ { term, index, .. } => {
                term.opcode() == LLVMOpcode::LLVMInvoke && index == 1
            }
            EdgeIr::Return => l.nodes[edge.src.index()]
                .instrs
                .last()
                .is_some_and(|t| is_resume(*t)),
            _ => false,
        })
        .collect();
    FunctionInput {
        cfg: l.cfg.clone(),
        calls: IdVec::from_vec(per_node),
        unwind: IdVec::from_vec(unwind),
    }
}
