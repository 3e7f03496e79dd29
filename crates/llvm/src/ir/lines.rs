//! The source side of a lowered function for the metadata: every line each vertex's
//! instructions belong to, in instruction order, with the inline scope each comes from (the
//! `inlinedAt` chain of its `DILocation`, one [`ScopeMeta`] per inlined call), the module's
//! table of source functions (`DISubprogram`s), and every conditional branch and switch with
//! the line it sits on and the graph edges that are its outcomes.
//!
//! The report turns these into line, branch and function counts (tally-report's `source`
//! module). Nothing here changes the IR.

use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::{self, SrcPos, Val};
use llvm_sys::core as c;
use llvm_sys::debuginfo as di;
use llvm_sys::debuginfo::LLVMMetadataKind;
use llvm_sys::prelude::{LLVMContextRef, LLVMMetadataRef, LLVMValueRef};
use llvm_sys::LLVMOpcode;
use std::collections::HashMap;
use tally_format::{
    BranchMeta, CallTargets, CounterIdx, DirectCall, EdgeIdx, FileIdx, LineRun, Loc, ProbeAt,
    ScopeIdx, ScopeMeta, SourceFn, SourceFnIdx, SourceMeta,
};

/// The module's file and source-function tables, shared by its functions.
#[derive(Default)]
pub(crate) struct Tables {
    pub files: Vec<String>,
    file_index: HashMap<String, u32>,
    pub source_fns: Vec<SourceFn>,
    /// `DISubprogram` (by address) -> index in `source_fns`.
    fn_index: HashMap<usize, u32>,
    /// The module's pseudo-probe descriptors (`crate::ir::probes`).
    pub probes: crate::ir::probes::Descs,
    /// Record the indirect calls whose targets a `--tally-pgo` build counts
    /// ([`SourceMeta::call_targets`], filled in by `module::call_targets`).
    pub indirect_calls: bool,
    /// Record the direct calls with a call-site probe (`--tally-pgo`,
    /// [`SourceMeta::direct_calls`]).
    pub direct_calls: bool,
    /// `--tally-pgo` with pre-inlining: the inline instances the rebuild's loader will not
    /// inline again ([`ScopeMeta::top_level`], `module::reinline`).
    pub refusals: Option<crate::module::reinline::Refusals>,
}

impl Tables {
    /// The metadata location of a resolved position.
    pub(crate) fn loc(&mut self, p: &SrcPos) -> Loc {
        let file = p.file.as_ref().map(|f| match self.file_index.get(f) {
            Some(&i) => i,
            None => {
                let i = self.files.len() as u32;
                self.files.push(f.clone());
                self.file_index.insert(f.clone(), i);
                i
            }
        });
        Loc {
            file: file.map(FileIdx),
            line: p.line,
        }
    }

    /// The index of a `DISubprogram`, added on first sight.
    fn source_fn(&mut self, ctx: LLVMContextRef, sp: LLVMMetadataRef) -> SourceFnIdx {
        if let Some(&i) = self.fn_index.get(&(sp as usize)) {
            return SourceFnIdx(i);
        }
        let name = md_string_operand(ctx, sp, 2).unwrap_or_default();
        let linkage_name = md_string_operand(ctx, sp, 3).unwrap_or_default();
        let pos = SrcPos {
            // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the
            // calls only read them.
            file: ir::difile_path(unsafe { di::LLVMDIScopeGetFile(sp) }),
            line: unsafe { di::LLVMDISubprogramGetLine(sp) },
        };
        let loc = self.loc(&pos);
        let i = self.source_fns.len() as u32;
        self.source_fns.push(SourceFn {
            name,
            linkage_name,
            loc,
        });
        self.fn_index.insert(sp as usize, i);
        SourceFnIdx(i)
    }
}

/// Operand `i` of a metadata node, as a value (`None` when absent or null).
fn md_operand(ctx: LLVMContextRef, md: LLVMMetadataRef, i: u32) -> Option<LLVMValueRef> {
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let v = unsafe { c::LLVMMetadataAsValue(ctx, md) };
    let n = unsafe { c::LLVMGetMDNodeNumOperands(v) };
    if i >= n {
        return None;
    }
    let mut ops = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them; arrays passed live through the call with their lengths.
    unsafe { c::LLVMGetMDNodeOperands(v, ops.as_mut_ptr()) };
    let op = ops[i as usize];
    (!op.is_null()).then_some(op)
}

/// Operand `i` of a metadata node when it is a non-empty string.
fn md_string_operand(ctx: LLVMContextRef, md: LLVMMetadataRef, i: u32) -> Option<String> {
    let v = md_operand(ctx, md, i)?;
    let mut len = 0u32;
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let p = unsafe { c::LLVMGetMDString(v, &mut len) };
    if p.is_null() || len == 0 {
        return None;
    }
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them; LLVM returned the pointer with its length.
    let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len as usize) };
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// The `DISubprogram` a local scope belongs to: lexical blocks are walked up through their
/// parent scope (operand 1 of `DILexicalBlock` and `DILexicalBlockFile`).
fn subprogram_of(ctx: LLVMContextRef, mut scope: LLVMMetadataRef) -> Option<LLVMMetadataRef> {
    // Scopes nest as deep as the source's blocks; the bound only guards against a cycle.
    for _ in 0..10_000 {
        if scope.is_null() {
            return None;
        }
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        match unsafe { di::LLVMGetMetadataKind(scope) } {
            LLVMMetadataKind::LLVMDISubprogramMetadataKind => return Some(scope),
            LLVMMetadataKind::LLVMDILexicalBlockMetadataKind
            | LLVMMetadataKind::LLVMDILexicalBlockFileMetadataKind => {
                // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the
                // calls only read them.
                scope = unsafe { c::LLVMValueAsMetadata(md_operand(ctx, scope, 1)?) };
            }
            _ => return None,
        }
    }
    None
}

/// The pseudo-probe id of the call at location `at` (an `inlinedAt` location): the probe pass
/// packs it into the location's discriminator (`crate::shim::call_probe`); 0 when there is none.
fn call_probe(at: LLVMMetadataRef) -> u32 {
    crate::shim::call_probe(at)
}

/// Builds the scopes of one function as its instructions name them.
struct Scopes<'t> {
    ctx: LLVMContextRef,
    tables: &'t mut Tables,
    scopes: Vec<ScopeMeta>,
    /// `inlinedAt` location (by address) -> scope.
    index: HashMap<usize, u32>,
    /// Call location (by address) -> the scope of a callee without debug info inlined there.
    nodebug: HashMap<usize, u32>,
    /// Per scope: the attributes of its root, the function whose record holds it
    /// (`module::reinline`); `None` without [`Tables::refusals`].
    roots: Vec<Option<u32>>,
}

impl Scopes<'_> {
    /// The scope of code whose own scope is `sp_scope` and which was inlined at `at` (null:
    /// not inlined, `s0`).
    fn of(&mut self, at: LLVMMetadataRef, sp_scope: LLVMMetadataRef) -> ScopeIdx {
        // Walk the inlinedAt chain outwards until a known scope (or s0), then create the
        // missing ones from the outside in, so that every parent comes before its children.
        let mut chain = Vec::new();
        let (mut at, mut scope) = (at, sp_scope);
        let mut parent = 0;
        while !at.is_null() && chain.len() < 10_000 {
            if let Some(&i) = self.index.get(&(at as usize)) {
                parent = i;
                break;
            }
            chain.push((at, scope));
            // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the
            // calls only read them.
            scope = unsafe { di::LLVMDILocationGetScope(at) };
            at = unsafe { di::LLVMDILocationGetInlinedAt(at) };
        }
        for &(at, scope) in chain.iter().rev() {
            let sp = subprogram_of(self.ctx, scope);
            let func = sp.map(|sp| self.tables.source_fn(self.ctx, sp));
            let call = self.tables.loc(&ir::location_pos(at));
            let i = self.scopes.len() as u32;
            // A callee the loader will not inline here roots its own record (`module::reinline`).
            let root = self.roots.get(parent as usize).copied().flatten();
            let refused = match (&self.tables.refusals, root, sp) {
                (Some(r), Some(root), Some(sp)) => r.refused(root, sp as usize),
                _ => None,
            };
            self.roots.push(refused.or(root));
            self.scopes.push(ScopeMeta {
                func,
                parent: ScopeIdx(parent),
                call,
                call_probe: call_probe(at),
                top_level: refused.is_some(),
            });
            self.index.insert(at as usize, i);
            parent = i;
        }
        ScopeIdx(parent)
    }

    /// The scope of a pseudo-probe's location, if it has one. A callee without debug info
    /// (`__attribute__((nodebug))`, as the SSE intrinsics of `<emmintrin.h>`) inlined at a
    /// call gives its probes the call's location, whose discriminator names the call's probe:
    /// they get a scope of their own under the call's (no function, that call probe).
    fn probe_scope(&mut self, v: Val) -> Option<ScopeIdx> {
        let dl = v.debug_loc()?;
        let outer = self.scope_of(v)?;
        let id = call_probe(dl);
        if id == 0 {
            return Some(outer);
        }
        if let Some(&i) = self.nodebug.get(&(dl as usize)) {
            return Some(ScopeIdx(i));
        }
        let i = self.scopes.len() as u32;
        self.roots
            .push(self.roots.get(outer.0 as usize).copied().flatten());
        self.scopes.push(ScopeMeta {
            func: None,
            parent: outer,
            call: self.tables.loc(&ir::location_pos(dl)),
            call_probe: id,
            top_level: false,
        });
        self.nodebug.insert(dl as usize, i);
        Some(ScopeIdx(i))
    }

    /// The scope of an instruction's location, if it has one (lines 0 included).
    fn scope_of(&mut self, v: Val) -> Option<ScopeIdx> {
        let dl = v.debug_loc()?;
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        let at = unsafe { di::LLVMDILocationGetInlinedAt(dl) };
        Some(self.of(at, unsafe { di::LLVMDILocationGetScope(dl) }))
    }

    /// The line and scope of an instruction, if it has a line.
    fn run(&mut self, v: Val) -> Option<LineRun> {
        let dl = v.debug_loc()?;
        let pos = ir::location_pos(dl);
        if pos.line == 0 {
            return None;
        }
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        let at = unsafe { di::LLVMDILocationGetInlinedAt(dl) };
        let scope = self.of(at, unsafe { di::LLVMDILocationGetScope(dl) });
        Some(LineRun {
            loc: self.tables.loc(&pos),
            scope,
        })
    }
}

/// The source lines, scopes and branches of a lowered function (empty without debug info),
/// and its pseudo-probes (with or without).
pub(crate) fn source_meta(func: Val, l: &Lowered, tables: &mut Tables) -> SourceMeta {
    let Some(sp) = ir::subprogram(func) else {
        // Without debug info, probes have no scope: all are s0's.
        let probes = l
            .nodes
            .iter()
            .map(|n| {
                n.instrs
                    .iter()
                    .filter_map(|&v| tables.probes.probe(v))
                    .collect()
            })
            .collect();
        return SourceMeta {
            probes: nonempty(probes),
            ..SourceMeta::default()
        };
    };
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let ctx = unsafe { c::LLVMGetTypeContext(c::LLVMTypeOf(func.0)) };
    let own = tables.source_fn(ctx, sp);
    let root = tables.refusals.as_mut().map(|r| r.attrs(func.0));
    let mut s = Scopes {
        ctx,
        tables,
        scopes: vec![ScopeMeta {
            func: Some(own),
            parent: ScopeIdx(0),
            call: Loc::default(),
            call_probe: 0,
            top_level: false,
        }],
        index: HashMap::new(),
        nodebug: HashMap::new(),
        roots: vec![root],
    };
    let mut call_targets = Vec::new();
    if s.tables.indirect_calls {
        for (block, call, probe) in indirect_calls(l) {
            call_targets.push(CallTargets {
                block,
                probe,
                scope: s.scope_of(call).unwrap_or_default(),
                counter: CounterIdx(0),
                targets: Vec::new(),
            });
        }
    }
    let mut direct_calls = Vec::new();
    if s.tables.direct_calls {
        for (block, call, probe, callee) in probed_direct_calls(l) {
            direct_calls.push(DirectCall {
                block,
                probe,
                scope: s.scope_of(call).unwrap_or_default(),
                callee,
            });
        }
    }
    let mut lines = Vec::with_capacity(l.nodes.len());
    let mut probes = Vec::with_capacity(l.nodes.len());
    for n in &l.nodes {
        let mut runs: Vec<LineRun> = Vec::new();
        let mut block_probes = Vec::new();
        for &v in &n.instrs {
            if let Some(mut p) = s.tables.probes.probe(v) {
                // The probe's inline instance: the scope of its location (s0 without one).
                p.scope = s.probe_scope(v).unwrap_or_default();
                block_probes.push(p);
            }
            if ir::is_not_code(v) {
                continue;
            }
            if let Some(r) = s.run(v) {
                if runs.last() != Some(&r) {
                    runs.push(r);
                }
            }
        }
        lines.push(runs);
        probes.push(block_probes);
    }
    // Conditional branches and switches: terminators with two or more successor edges. The
    // branch sits on the terminator's line, else on the last line of its block.
    let mut by_term: Vec<(Val, Vec<EdgeIdx>)> = Vec::new();
    for (i, e) in l.edges.iter().enumerate() {
        if let EdgeIr::Succ { term, .. } = *e {
            match by_term.iter_mut().find(|(t, _)| *t == term) {
                Some((_, edges)) => edges.push(EdgeIdx(i as u32)),
                None => by_term.push((term, vec![EdgeIdx(i as u32)])),
            }
        }
    }
    let mut branches = Vec::new();
    for (term, edges) in by_term {
        if edges.len() < 2 || !matches!(term.opcode(), LLVMOpcode::LLVMBr | LLVMOpcode::LLVMSwitch)
        {
            continue;
        }
        let src = l.cfg.edge(tally_graph::EdgeId::new(edges[0].index())).src;
        let at = s.run(term).or_else(|| lines[src.index()].last().copied());
        if let Some(r) = at {
            branches.push(BranchMeta {
                loc: r.loc,
                scope: r.scope,
                edges,
            });
        }
    }
    SourceMeta {
        scopes: s.scopes,
        lines,
        branches,
        probes: nonempty(probes),
        call_targets,
        direct_calls,
    }
}

/// The indirect calls of a lowered function that carry a call-site probe (a build with
/// `-fpseudo-probe-for-profiling` and debug info), in block and instruction order: (block, the
/// call, its probe id).
pub(crate) fn indirect_calls(l: &Lowered) -> Vec<(u32, Val, u32)> {
    let mut out = Vec::new();
    for (b, n) in l.nodes.iter().enumerate() {
        for &v in &n.instrs {
            if !crate::ir::probes::is_indirect_call(v) {
                continue;
            }
            let probe = v.debug_loc().map_or(0, call_probe);
            if probe != 0 {
                out.push((b as u32, v, probe));
            }
        }
    }
    out
}

/// The direct calls of a function with a call-site probe: (block, call, probe id, callee's
/// name) (`probes::has_call_probe`); a call of a runtime wrapper
/// (`module::redirect`) is named by the libc function the program calls.
fn probed_direct_calls(l: &Lowered) -> Vec<(u32, Val, u32, String)> {
    let mut out = Vec::new();
    for (b, n) in l.nodes.iter().enumerate() {
        for &v in &n.instrs {
            if !crate::ir::probes::has_call_probe(v) {
                continue;
            }
            let Some(callee) = v.called_function() else {
                continue;
            };
            let probe = v.debug_loc().map_or(0, call_probe);
            let mut name = callee.name();
            if let Some(r) = tally_format::abi::REDIRECTS
                .iter()
                .find(|r| r.wrapper == name)
            {
                name = r.real.to_string();
            }
            if probe != 0 && !name.is_empty() {
                out.push((b as u32, v, probe, name));
            }
        }
    }
    out
}

/// Per-block probe lists, or none at all when no block holds a probe.
fn nonempty(probes: Vec<Vec<ProbeAt>>) -> Vec<Vec<ProbeAt>> {
    if probes.iter().all(Vec::is_empty) {
        Vec::new()
    } else {
        probes
    }
}
