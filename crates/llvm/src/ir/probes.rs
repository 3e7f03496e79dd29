//! clang's pseudo-probes as the optimized IR holds them (`-fpseudo-probe-for-profiling`): the
//! module's descriptors (`!llvm.pseudo_probe_desc`: GUID, checksum of the pre-optimization
//! graph, name) and the `llvm.pseudoprobe(GUID, id, type, factor)` calls of each block, which
//! the metadata records (`tally_format::meta::probes`) so that a profile can be written as a
//! probe-based sample profile. Nothing here changes the IR.

use crate::ir::Val;
use llvm_sys::core as c;
use llvm_sys::prelude::{LLVMModuleRef, LLVMValueRef};
use llvm_sys::LLVMOpcode;
use std::collections::HashMap;
use tally_format::{ProbeAt, ProbeDesc, ScopeIdx};

/// The module's probe descriptors, and each GUID's index among them.
#[derive(Default)]
pub(crate) struct Descs {
    pub descs: Vec<ProbeDesc>,
    index: HashMap<u64, u32>,
}

impl Descs {
    /// The descriptors of `!llvm.pseudo_probe_desc` (none without probes).
    pub(crate) fn of(m: LLVMModuleRef) -> Descs {
        let mut d = Descs::default();
        let name = c"llvm.pseudo_probe_desc";
        // SAFETY: the module is live (`crate::ir`'s module doc); the calls only read it, and
        // `ops` has room for the count LLVM reported.
        let ops = unsafe {
            let n = c::LLVMGetNamedMetadataNumOperands(m, name.as_ptr());
            let mut ops: Vec<LLVMValueRef> = vec![std::ptr::null_mut(); n as usize];
            if n > 0 {
                c::LLVMGetNamedMetadataOperands(m, name.as_ptr(), ops.as_mut_ptr());
            }
            ops
        };
        for node in ops {
            let fields = node_operands(node);
            let (Some(guid), Some(checksum)) = (
                fields.first().and_then(|&v| const_u64(v)),
                fields.get(1).and_then(|&v| const_u64(v)),
            ) else {
                continue;
            };
            let name = fields
                .get(2)
                .and_then(|&v| md_string(v))
                .unwrap_or_default();
            if !d.index.contains_key(&guid) {
                d.index.insert(guid, d.descs.len() as u32);
                d.descs.push(ProbeDesc {
                    guid,
                    checksum,
                    name,
                });
            }
        }
        d
    }

    /// The probe `v` is, when it is an `llvm.pseudoprobe` call: its owner's descriptor (a
    /// nameless one is added for a GUID without a descriptor) and its id, in scope `s0` (the
    /// caller sets the scope).
    pub(crate) fn probe(&mut self, v: Val) -> Option<ProbeAt> {
        if !is_probe(v) {
            return None;
        }
        let guid = const_u64(v.operand(0).0)?;
        let id = u32::try_from(const_u64(v.operand(1).0)?).ok()?;
        if id == 0 {
            return None;
        }
        let next = self.descs.len() as u32;
        let desc = *self.index.entry(guid).or_insert_with(|| {
            self.descs.push(ProbeDesc {
                guid,
                checksum: 0,
                name: String::new(),
            });
            next
        });
        Some(ProbeAt {
            desc,
            id,
            scope: ScopeIdx(0),
        })
    }
}

/// The operands of a metadata node (as values).
fn node_operands(node: LLVMValueRef) -> Vec<LLVMValueRef> {
    // SAFETY: `node` is a live metadata-as-value of the module (`crate::ir`'s module doc); the
    // calls only read it, and `ops` has room for the count LLVM reported.
    unsafe {
        if c::LLVMIsAMDNode(node).is_null() {
            return Vec::new();
        }
        let n = c::LLVMGetMDNodeNumOperands(node);
        let mut ops = vec![std::ptr::null_mut(); n as usize];
        c::LLVMGetMDNodeOperands(node, ops.as_mut_ptr());
        ops
    }
}

/// The value of an integer constant (`None` for anything else).
fn const_u64(v: LLVMValueRef) -> Option<u64> {
    // SAFETY: `v` is null or a live value of the module (`crate::ir`'s module doc); the calls
    // only read it.
    unsafe {
        if v.is_null() || c::LLVMIsAConstantInt(v).is_null() {
            return None;
        }
        Some(c::LLVMConstIntGetZExtValue(v))
    }
}

/// The text of a metadata string.
fn md_string(v: LLVMValueRef) -> Option<String> {
    // SAFETY: `v` is null or a live value of the module (`crate::ir`'s module doc); the calls
    // only read it; LLVM returns `len` bytes alive with the string.
    unsafe {
        if v.is_null() || c::LLVMIsAMDString(v).is_null() {
            return None;
        }
        let mut len = 0u32;
        let p = c::LLVMGetMDString(v, &mut len);
        if p.is_null() {
            return None;
        }
        let bytes = std::slice::from_raw_parts(p as *const u8, len as usize);
        Some(String::from_utf8_lossy(bytes).into_owned())
    }
}

/// `v` is a call of `llvm.pseudoprobe`.
pub(crate) fn is_probe(v: Val) -> bool {
    v.opcode() == LLVMOpcode::LLVMCall
        && v.called_function()
            .is_some_and(|f| f.name() == "llvm.pseudoprobe")
}

/// `v` is a call (or invoke) with a call-site probe id, in a build with pseudo-probes (elsewhere
/// the discriminator it reads is a line discriminator). Intrinsics have none, but can carry
/// the location of a call they were made at (the inliner's `llvm.experimental.noalias.scope.decl`).
pub(crate) fn has_call_probe(v: Val) -> bool {
    v.is_call_like()
        && !v.calls_inline_asm()
        && v.called_function().is_none_or(|f| f.intrinsic_id() == 0)
        && v.debug_loc()
            .is_some_and(|l| crate::shim::call_probe(l) != 0)
}

/// `v` is a call or invoke through a pointer: its callee is neither a function, nor inline
/// assembly, nor any other constant (an alias).
pub(crate) fn is_indirect_call(v: Val) -> bool {
    if !matches!(v.opcode(), LLVMOpcode::LLVMCall | LLVMOpcode::LLVMInvoke) {
        return false;
    }
    let callee = v.called_value();
    // SAFETY: `callee` is null or a live value of the module (`crate::ir`'s module doc); the
    // call only reads it.
    !callee.is_null() && !v.calls_inline_asm() && unsafe { c::LLVMIsAConstant(callee.0) }.is_null()
}
