//! `ipath`, `ipath-piecewise`: interprocedural paths (paper 004) regenerated from their numbers
//! and block and edge counts derived from them. The numbering is rebuilt from the module's
//! [`IpathMeta`] (each function's graph, call sites, entered-from-outside flag and cuts, the
//! mode and the limit, `IpNumbering::new_limited`) and refused unless its total and fingerprint
//! are the stored ones. Functions outside the set were profiled with edge counters and are
//! solved as in `edge` mode (this module's [`Reconstruct`] for them).
//!
//! Deriving counts: every executed edge is counted by exactly one path. A context path that
//! starts after a back or cut edge (`Entry_Q -> y`) repeats its calling context — the edges
//! from the root to `Q`'s call, counted already by the path that ended at the back edge — so
//! only the edges after its start edge count; a back or cut edge counts at its end edge
//! (`x -> GExit_Q`); `e0` at the `Start` edge. A piecewise path after a restart starts with
//! `Entry_global -> GEntry_Q -> y` and has no context, so the same rule applies.

use super::{ReportSolveError, Solved};
use tally_format::{IpathMeta, Mode, ModuleMeta};
use tally_graph::ipaths::{FnId, IpNumbering, SEdge};
use tally_graph::paths::DagEdgeKind;
use tally_graph::{EdgeId, IdVec};

/// One interprocedural path, spelled out: `(function index in the module, block)` in order,
/// with the calls and returns between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpathRow {
    /// Path number.
    pub number: u128,
    /// Times it ran.
    pub count: u64,
    /// Its steps in order.
    pub steps: Vec<IpathStep>,
}

/// A step of an interprocedural path.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum IpathStep {
    /// Block `block` of function `function` (index in the module's functions).
    Block {
        /// The function.
        function: u32,
        /// The block.
        block: u32,
    },
    /// A call into the next function.
    Call,
    /// A return to the caller.
    Return,
    /// A call left as a summary edge (its callee's paths are separate).
    Summary,
    /// The path starts after a back or cut edge of the next block's function (its calling
    /// context, context mode, comes before).
    Restart,
    /// The path ends at a back or cut edge.
    Cut,
}

/// The module's set, solved: per function of the set (module index) its counts, and the rows.
pub(crate) struct IpSolved {
    pub functions: Vec<(usize, Solved)>,
    pub rows: Vec<IpathRow>,
}

/// Solves the set of `meta` from the path counts (of the table owner's table).
pub(crate) fn solve_module(
    meta: &ModuleMeta,
    ip: &IpathMeta,
    counts: &[(u128, u64)],
    lost: u64,
) -> Result<IpSolved, ReportSolveError> {
    let mode = match meta.mode {
        Mode::IpathPiecewise => tally_graph::ipaths::Mode::Piecewise,
        _ => tally_graph::ipaths::Mode::Context,
    };
    let mut cfgs = Vec::with_capacity(ip.functions.len());
    for f in &ip.functions {
        let fm = meta
            .functions
            .get(f.function as usize)
            .ok_or_else(|| ReportSolveError::Meta("a set function out of range".into()))?;
        cfgs.push(
            fm.cfg()
                .map_err(|e| ReportSolveError::Meta(e.to_string()))?,
        );
    }
    let functions = ip
        .functions
        .iter()
        .zip(&cfgs)
        .map(|(f, cfg)| f.to_function(cfg.clone()))
        .collect();
    let num = IpNumbering::new_limited(functions, mode, ip.limit)
        .map_err(|e| ReportSolveError::Meta(e.to_string()))?;
    if num.total() != ip.total {
        return Err(ReportSolveError::Numbering {
            stored: ip.total,
            computed: num.total(),
        });
    }
    if num.fingerprint() != ip.fingerprint {
        return Err(ReportSolveError::Fingerprint {
            stored: ip.fingerprint,
            computed: num.fingerprint(),
        });
    }
    if lost > 0 {
        return Err(ReportSolveError::Lost(lost));
    }
    let g = num.graph();
    let mut edges: Vec<IdVec<EdgeId, u64>> = cfgs
        .iter()
        .map(|c| IdVec::filled(c.num_edges(), 0))
        .collect();
    let mut rows = Vec::with_capacity(counts.len());
    let module_index = |f: FnId| ip.functions[f.index()].function;
    for &(number, count) in counts {
        let path = num
            .regenerate(number)
            .map_err(|e| ReportSolveError::Meta(e.to_string()))?;
        let kind = |e: &SEdge| match *e {
            SEdge::Intra { func, dag } => Some((func, g.dag(func).edge(dag).kind)),
            _ => None,
        };
        // The context-prefix (edges before the last restart) was counted with the path that
        // ended there; a re-entry edge itself is new (it has no `x -> GExit` half).
        let first_new = path
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, e)| match kind(e) {
                Some((_, DagEdgeKind::BackStart(_) | DagEdgeKind::CutStart(_))) => Some(i + 1),
                Some((_, DagEdgeKind::ReentryStart(_))) => Some(i),
                _ => None,
            })
            .unwrap_or(0);
        let mut steps = Vec::new();
        for (i, e) in path.iter().enumerate() {
            let counted = i >= first_new;
            match *e {
                SEdge::Intra { func, dag } => {
                    let cfg = &cfgs[func.index()];
                    let block = |e: EdgeId| {
                        let dst = cfg.edge(e).dst;
                        (!cfg.is_exit(dst)).then(|| IpathStep::Block {
                            function: module_index(func),
                            block: dst.index() as u32,
                        })
                    };
                    let kind = g.dag(func).edge(dag).kind;
                    let count_edge = match kind {
                        DagEdgeKind::Start
                        | DagEdgeKind::Cfg(_)
                        | DagEdgeKind::EarlyExit(_)
                        | DagEdgeKind::ReentryStart(_) => {
                            steps.extend(block(kind.cfg_edge()));
                            Some(kind.cfg_edge())
                        }
                        DagEdgeKind::BackEnd(e) | DagEdgeKind::CutEnd(e) => {
                            steps.push(IpathStep::Cut);
                            Some(e)
                        }
                        DagEdgeKind::BackStart(e) | DagEdgeKind::CutStart(e) => {
                            steps.push(IpathStep::Restart);
                            steps.extend(block(e));
                            None
                        }
                    };
                    if let (Some(ce), true) = (count_edge, counted) {
                        let c = &mut edges[func.index()][ce];
                        *c = c.checked_add(count).ok_or(ReportSolveError::Overflow)?;
                    }
                }
                SEdge::Call { .. } => steps.push(IpathStep::Call),
                SEdge::Return { .. } => steps.push(IpathStep::Return),
                SEdge::Summary { .. } => steps.push(IpathStep::Summary),
                _ => {}
            }
        }
        rows.push(IpathRow {
            number,
            count,
            steps,
        });
    }
    // Early exits (paper 004 §9.2): a frame abandoned in a block left it by its early-exit
    // edge. The path that ends there names the innermost frame of its level only (a caller
    // waiting in a direct call, or in piecewise mode one whose call precedes the piece, is not
    // on it), so every early-exit edge is derived by conservation of flow: what entered the
    // block and did not leave it by another edge (every other edge traversal is on exactly one
    // counted path part).
    for (cfg, e) in cfgs.iter().zip(edges.iter_mut()) {
        for v in cfg.blocks() {
            let Some(ee) = cfg.early_exit(v) else {
                continue;
            };
            let sum = |es: &[EdgeId], e: &IdVec<EdgeId, u64>| -> Result<u64, ReportSolveError> {
                es.iter()
                    .filter(|&&x| x != ee)
                    .try_fold(0u64, |acc, &x| acc.checked_add(e[x]))
                    .ok_or(ReportSolveError::Overflow)
            };
            let into = sum(cfg.preds(v), e)?;
            let out = sum(cfg.succs(v), e)?;
            e[ee] = into.checked_sub(out).ok_or(ReportSolveError::Overflow)?;
        }
    }
    let mut out = Vec::with_capacity(cfgs.len());
    for ((f, cfg), e) in ip.functions.iter().zip(&cfgs).zip(edges) {
        let blocks = tally_graph::propagate::block_counts(cfg, &e)?;
        out.push((f.function as usize, Solved::exact(e, blocks)));
    }
    Ok(IpSolved {
        functions: out,
        rows,
    })
}
