//! Path counts computed from a full control-flow trace (`trace-naive` mode): the independent
//! oracle for path profiles (Ball & Larus 1996). Each activation's edges are cut into acyclic paths at
//! back edges and cut edges, at early exits (an activation that ends without returning, or one that
//! a `longjmp` re-enters), exactly as the path numbering defines them; each path's number is
//! the sum of the `Val` of its DAG edges — no instrumentation placement or increment is used.

use std::collections::{BTreeMap, HashMap};
use tally_format::profile::Profile;
use tally_format::trace::TraceRecord;
use tally_graph::paths::{CfgImage, DagEdgeId, NumberedDag, PathDag};
use tally_graph::{Cfg, EdgeId, EdgeKind, NodeId};

/// A function, as the key both builds share: module source, name, graph hash.
pub type FunctionKey = (String, String, u64);

/// Path counts per function, by path number.
pub type PathCounts = BTreeMap<FunctionKey, BTreeMap<u128, u64>>;

struct Numbering {
    cfg: Cfg,
    paths: NumberedDag,
}

struct Activation<'a> {
    f: &'a Numbering,
    key: FunctionKey,
    path: Vec<DagEdgeId>,
    at: NodeId,
    done: bool,
}

fn image_end(n: &Numbering, at: NodeId) -> Result<DagEdgeId, String> {
    let e = n
        .cfg
        .early_exit(at)
        .ok_or_else(|| format!("a frame ended in block {at}, which has no early exit"))?;
    match n.paths.dag().image(e) {
        CfgImage::EarlyExit(d) => Ok(d),
        other => Err(format!("early exit {e} has image {other:?}")),
    }
}

fn finish(
    n: &Numbering,
    path: &mut Vec<DagEdgeId>,
    out: &mut BTreeMap<u128, u64>,
) -> Result<(), String> {
    let p = n.paths.path_number(path).map_err(|e| e.to_string())?;
    *out.entry(p).or_default() += 1;
    path.clear();
    Ok(())
}

/// Computes path counts from `trace` (written by a trace build described by `trace_profile`),
/// numbering paths like the path build described by `path_profile` (same sources and flags,
/// so the same graphs; its metadata gives the cut edges).
pub fn path_counts_from_trace(
    trace: &[TraceRecord],
    trace_profile: &Profile,
    path_profile: &Profile,
) -> Result<PathCounts, String> {
    // Cuts of every function of the path build.
    let mut cuts: HashMap<FunctionKey, Vec<EdgeId>> = HashMap::new();
    for m in &path_profile.modules {
        for f in &m.meta.functions {
            if let Some(pm) = f.paths() {
                cuts.insert(
                    (m.meta.source.clone(), f.name.clone(), f.cfg_hash),
                    pm.cuts.iter().map(|e| e.edge()).collect(),
                );
            }
        }
    }
    // Numberings of the trace build's functions that the path build profiles.
    let mut numbering: HashMap<(u64, u32), (FunctionKey, Numbering)> = HashMap::new();
    for m in &trace_profile.modules {
        for (i, f) in m.meta.functions.iter().enumerate() {
            let key = (m.meta.source.clone(), f.name.clone(), f.cfg_hash);
            let Some(c) = cuts.get(&key) else { continue };
            let cfg = f.cfg().map_err(|e| e.to_string())?;
            let dag = PathDag::with_cuts(&cfg, c).map_err(|e| e.to_string())?;
            let paths = NumberedDag::new(dag).map_err(|e| e.to_string())?;
            numbering.insert((m.hash, i as u32), (key, Numbering { cfg, paths }));
        }
    }
    let mut out: PathCounts = BTreeMap::new();
    let mut acts: HashMap<u64, Activation> = HashMap::new();
    for r in trace {
        match *r {
            TraceRecord::Enter {
                act,
                module,
                function,
            } => {
                let Some((key, n)) = numbering.get(&(module, function)) else {
                    continue;
                };
                let start = match n.paths.dag().image(EdgeId::new(0)) {
                    CfgImage::Start(d) => d,
                    other => return Err(format!("e0 has image {other:?}")),
                };
                acts.insert(
                    act,
                    Activation {
                        f: n,
                        key: key.clone(),
                        path: vec![start],
                        at: n.cfg.entry(),
                        done: false,
                    },
                );
            }
            TraceRecord::Edge { act, edge } => {
                let Some(a) = acts.get_mut(&act) else {
                    continue;
                };
                let n = a.f;
                let e = EdgeId::new(edge as usize);
                if e.index() >= n.cfg.num_edges() || a.done {
                    return Err(format!(
                        "activation {act} of {}: edge {e} out of place",
                        a.key.1
                    ));
                }
                let ed = n.cfg.edge(e);
                let counts = out.entry(a.key.clone()).or_default();
                if ed.kind == EdgeKind::Reentry {
                    // The frame was left where it was, and longjmp came back.
                    let end = image_end(n, a.at)?;
                    a.path.push(end);
                    finish(n, &mut a.path, counts)?;
                    match n.paths.dag().image(e) {
                        CfgImage::Reentry(d) => a.path.push(d),
                        other => return Err(format!("re-entry {e} has image {other:?}")),
                    }
                    a.at = ed.dst;
                    continue;
                }
                if ed.src != a.at {
                    return Err(format!(
                        "activation {act} of {}: edge {e} leaves {} but the trace is at {}",
                        a.key.1, ed.src, a.at
                    ));
                }
                match n.paths.dag().image(e) {
                    CfgImage::Kept(d) => {
                        a.path.push(d);
                        if ed.kind == EdgeKind::Return {
                            finish(n, &mut a.path, counts)?;
                            a.done = true;
                        }
                    }
                    CfgImage::Back { end, start } | CfgImage::Cut { end, start } => {
                        a.path.push(end);
                        finish(n, &mut a.path, counts)?;
                        a.path.push(start);
                    }
                    other => return Err(format!("edge {e} has image {other:?}")),
                }
                a.at = ed.dst;
            }
        }
    }
    // Activations that never returned were abandoned in the block they were at.
    let mut open: Vec<_> = acts.into_iter().filter(|(_, a)| !a.done).collect();
    open.sort_by_key(|(act, _)| *act);
    for (_, mut a) in open {
        let end = image_end(a.f, a.at)?;
        a.path.push(end);
        let counts = out.entry(a.key.clone()).or_default();
        finish(a.f, &mut a.path, counts)?;
    }
    Ok(out)
}

/// Functions by `(module hash, function index)`: name and graph ([`function_cfgs`]).
pub type FunctionCfgs = HashMap<(u64, u32), (String, Cfg)>;

/// Every function of `profile` by the key trace-naive's `Enter` records name it with, `(module
/// hash, function index)`: its name and its graph.
pub fn function_cfgs(profile: &Profile) -> Result<FunctionCfgs, String> {
    let mut cfgs = HashMap::new();
    for m in &profile.modules {
        for (i, f) in m.meta.functions.iter().enumerate() {
            let cfg = f.cfg().map_err(|e| e.to_string())?;
            cfgs.insert((m.hash, i as u32), (f.name.clone(), cfg));
        }
    }
    Ok(cfgs)
}

/// The block sequence of a trace-naive trace (the oracle of witness traces): in the records'
/// global order, each activation's entry block and the target of each edge it took (edges to
/// EXIT enter no block), as `(function name, block)`. Exact for single-threaded runs (the
/// records of concurrent threads interleave).
pub fn block_sequence(
    trace: &[TraceRecord],
    profile: &Profile,
) -> Result<Vec<(String, u32)>, String> {
    let cfgs = function_cfgs(profile)?;
    let mut acts: HashMap<u64, &(String, Cfg)> = HashMap::new();
    let mut out = Vec::new();
    for r in trace {
        match *r {
            TraceRecord::Enter {
                act,
                module,
                function,
            } => {
                let f = cfgs
                    .get(&(module, function))
                    .ok_or_else(|| format!("unknown function {function} of module {module:x}"))?;
                out.push((f.0.clone(), f.1.entry().index() as u32));
                acts.insert(act, f);
            }
            TraceRecord::Edge { act, edge } => {
                let f = acts.get(&act).ok_or("an edge of an unknown activation")?;
                let e = EdgeId::new(edge as usize);
                if e.index() >= f.1.num_edges() {
                    return Err(format!("edge {edge} out of range in {}", f.0));
                }
                let dst = f.1.edge(e).dst;
                if !f.1.is_exit(dst) {
                    out.push((f.0.clone(), dst.index() as u32));
                }
            }
        }
    }
    Ok(out)
}
