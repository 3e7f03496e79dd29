//! The program a trace was written by: every traced function of the profile, by the trace's
//! `(module slot, function index)` names, with its graph, plan and call sites resolved.

use super::Block;
use std::collections::HashMap;
use tally_format::profile::Profile;
use tally_format::trace::WitnessTrace;
use tally_format::{FunctionMeta, WCallee};
use tally_graph::witness::{paths::paths_plan, CallSite, Callee, FuncId, FunctionInput, Traced};
use tally_graph::IdVec;

pub(super) struct Program<'a> {
    pub(super) funcs: Vec<Traced>,
    /// For each FuncId: its metadata and its module's file table.
    pub(super) meta: Vec<(&'a FunctionMeta, &'a [String])>,
    /// For each FuncId: its module's index in the profile and its index in the module.
    pub(super) at: Vec<(usize, usize)>,
    /// `(module hash, function index)` -> FuncId.
    pub(super) ids: HashMap<(u64, u32), FuncId>,
}

impl Program<'_> {
    /// Block `block` of function `func`, run by `thread`, with its source line.
    pub(super) fn block(&self, thread: u32, func: FuncId, block: tally_graph::NodeId) -> Block {
        let (f, files) = self.meta[func.index()];
        let loc = f.blocks.get(block.index());
        Block {
            thread,
            function: f.name.clone(),
            block: block.index() as u32,
            file: loc
                .and_then(|l| l.file)
                .and_then(|i| files.get(i.0 as usize).cloned()),
            line: loc.map_or(0, |l| l.line),
        }
    }
}

/// The resolution of each module's external callees (`WCallee::Extern`), by module hash, from
/// the trace's resolution chunks: `None` for a module that never ran (no slot: its external
/// calls never ran either).
pub(super) struct Resolved<'t> {
    slot_of: HashMap<u64, u32>,
    hash_of: HashMap<u32, u64>,
    by_slot: HashMap<u32, &'t [Option<(u32, u32)>]>,
}

impl<'t> Resolved<'t> {
    fn new(trace: &'t WitnessTrace) -> Self {
        let mut r = Resolved {
            slot_of: HashMap::new(),
            hash_of: HashMap::new(),
            by_slot: HashMap::new(),
        };
        for &(slot, hash) in &trace.modules {
            r.slot_of.entry(hash).or_insert(slot);
            r.hash_of.insert(slot, hash);
        }
        for (slot, entries) in &trace.resolutions {
            r.by_slot.insert(*slot, entries.as_slice());
        }
        r
    }

    /// The callee of external call `index` of the module hashing to `hash`: `Ok(Some((hash,
    /// function index)))` of the function the runtime found at its address, `Ok(None)` for
    /// none (or a module that never ran).
    fn callee(&self, hash: u64, index: u32) -> Result<Option<(u64, u32)>, String> {
        let Some(slot) = self.slot_of.get(&hash) else {
            return Ok(None);
        };
        let entries = self.by_slot.get(slot).ok_or(
            "the trace does not resolve a module's external calls (the process did not end \
             normally, or the trace was copied while it ran)",
        )?;
        let e = entries
            .get(index as usize)
            .ok_or_else(|| format!("external call {index} out of range of module slot {slot}"))?;
        Ok(e.and_then(|(s, i)| Some((*self.hash_of.get(&s)?, i))))
    }
}

pub(super) fn program<'a>(
    profile: &'a Profile,
    trace: &WitnessTrace,
) -> Result<Program<'a>, String> {
    let resolved = Resolved::new(trace);
    let mut p = Program {
        funcs: Vec::new(),
        meta: Vec::new(),
        at: Vec::new(),
        ids: HashMap::new(),
    };
    let mut by_name: HashMap<(u64, &str), FuncId> = HashMap::new();
    // Functions that are instrumented but not traced: calls to them are unknown calls, whose
    // callee writes a "lost" record.
    let mut untraced: HashMap<(u64, &str), ()> = HashMap::new();
    for (mi, m) in profile.modules.iter().enumerate() {
        for (i, f) in m.meta.functions.iter().enumerate() {
            if f.wtrace().is_some_and(|w| w.untraced.is_some()) {
                untraced.insert((m.hash, f.name.as_str()), ());
            } else if f.wtrace().is_some() {
                let id = FuncId(p.meta.len() as u32);
                p.ids.insert((m.hash, i as u32), id);
                by_name.insert((m.hash, f.name.as_str()), id);
                p.meta.push((f, &m.meta.files));
                p.at.push((mi, i));
            }
        }
    }
    if p.meta.is_empty() {
        // (Every function untraced: say why one was, e.g. a `--tally-trace-floor` build.)
        let why = profile
            .modules
            .iter()
            .flat_map(|m| &m.meta.functions)
            .find_map(|f| {
                let w = f.wtrace()?.untraced.as_ref()?;
                Some(format!(" ({}: {w})", f.name))
            });
        return Err(format!(
            "the profile holds no function traced with --tally-mode=trace{}",
            why.unwrap_or_default()
        ));
    }
    for m in &profile.modules {
        for f in &m.meta.functions {
            let Some(w) = f.wtrace().filter(|w| w.untraced.is_none()) else {
                continue;
            };
            let bad = |what: &str| format!("corrupt trace metadata of {}: {what}", f.name);
            let cfg = f.cfg().map_err(|e| bad(&e.to_string()))?;
            if w.calls.len() != cfg.num_blocks()
                || w.witness.len() != cfg.num_edges()
                || w.read_bits.len() != cfg.num_nodes()
            {
                return Err(bad("sizes differ from the graph"));
            }
            let mut calls = Vec::with_capacity(cfg.num_nodes());
            for block in &w.calls {
                let mut sites = Vec::with_capacity(block.len());
                for c in block {
                    let callee = match c {
                        WCallee::Direct(name)
                            if untraced.contains_key(&(m.hash, name.as_str())) =>
                        {
                            Callee::Unknown
                        }
                        WCallee::Direct(name) => Callee::Direct(
                            *by_name.get(&(m.hash, name.as_str())).ok_or_else(|| {
                                let why = m
                                    .meta
                                    .skipped
                                    .iter()
                                    .find(|s| &s.name == name)
                                    .map_or("not in the metadata", |s| s.reason.as_str());
                                bad(&format!(
                                    "direct callee {name} was not instrumented ({why}); \
                                         the trace cannot be regenerated"
                                ))
                            })?,
                        ),
                        WCallee::Opaque => Callee::Opaque,
                        WCallee::Unknown => Callee::Unknown,
                        WCallee::Extern { index, .. } => {
                            // (Since trace format 4 the caller of a traced external callee
                            // writes no `Back`: the callee's `ret` tells it the callee ran.)
                            match resolved.callee(m.hash, *index).map_err(|e| bad(&e))? {
                                Some(at) => p
                                    .ids
                                    .get(&at)
                                    .map_or(Callee::Unknown, |&f| Callee::Direct(f)),
                                None => Callee::Unknown,
                            }
                        }
                    };
                    sites.push(CallSite { callee });
                }
                calls.push(sites);
            }
            calls.push(Vec::new());
            let unwind = w
                .unwind_mask(cfg.num_edges())
                .ok_or_else(|| bad("unwind edge out of range"))?;
            let input = FunctionInput {
                cfg,
                calls: IdVec::from_vec(calls),
                unwind,
            };
            if let Some(fingerprint) = w.paths {
                let numbered = paths_plan(&input).map_err(|e| bad(&e.to_string()))?;
                if numbered.fingerprint() != fingerprint {
                    return Err(bad("the path numbering differs from the instrumented one"));
                }
            }
            // (The plan passed `check_plan` when the metadata was validated, which sees
            // only opaque callees and others, as resolved callees are: the same verdict.)
            let plan = w.plan();
            p.funcs.push(Traced { input, plan });
        }
    }
    Ok(p)
}
