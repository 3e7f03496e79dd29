//! `ipath`, `ipath-piecewise`: interprocedural paths (Melski & Reps 1998) regenerated from their
//! numbers and block and edge counts derived from them. The numbering is rebuilt from the module's
//! [`IpathMeta`] (each function's graph, call sites, entered-from-outside flag and cuts, the
//! mode and the limit, `IpNumbering::new_limited`) and refused unless its total and fingerprint
//! are the stored ones. The set is solved per module ([`Ipath`]'s module hook, from the table
//! owner's path entries and the counter arrays of [`IpathMeta::array_counts`]); functions
//! outside the set were profiled with edge counters and are solved as in `edge` mode.
//!
//! Deriving counts: every executed edge is counted by exactly one path. A context path that
//! starts after a back or cut edge (`Entry_Q -> y`) repeats its calling context — the edges
//! from the root to `Q`'s call, counted already by the path that ended at the back edge — so
//! only the edges after its start edge count; a back or cut edge counts at its end edge
//! (`x -> GExit_Q`); `e0` at the `Start` edge. A piecewise path after a restart starts with
//! `Entry_global -> GEntry_Q -> y` and has no context, so the same rule applies.

mod named;

use super::{ModuleSolved, ReportSolveError, Solved};
use crate::{one_line, PathProfile, ReportError};
use tally_format::profile::ProfileModule;
use tally_format::{FunctionMeta, IpathMeta, Mode, ModuleMeta};
use tally_graph::ipaths::{FnId, IpNumbering, SEdge};
use tally_graph::paths::DagEdgeKind;
use tally_graph::Cfg;
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
    /// How it starts: `entry`, `back-edge`, `cut` or `reentry` (the words of `path` mode).
    pub start: &'static str,
    /// How it ends: `return`, `back-edge`, `cut` or `early-exit`.
    pub end: &'static str,
    /// The number of leading steps that are its calling context (context mode, a path that
    /// starts after a back or cut edge): they ran before, as part of the path that ended
    /// there; the path's own steps begin at its [`IpathStep::Restart`].
    pub context: usize,
}

/// A step of an interprocedural path. Functions are indices in the module's functions; `site`
/// is the call site's index in the caller's [`tally_format::IpathFunction::calls`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum IpathStep {
    /// Block `block` of function `function`.
    Block {
        /// The function.
        function: u32,
        /// The block.
        block: u32,
    },
    /// A call from block `block` of `function` (call site `site`) into `callee`, whose entry
    /// block comes next. `matched`: the path also takes its return (else the call is still
    /// pending where the path ends).
    Call {
        /// The caller.
        function: u32,
        /// The caller's block.
        block: u32,
        /// The call site.
        site: u32,
        /// The callee.
        callee: u32,
        /// The path returns from it.
        matched: bool,
    },
    /// A return from `callee` to call site `site` (in block `block`) of `function`.
    /// `matched`: the path took the call too; an unmatched return (piecewise mode) leaves a
    /// function the path entered after a restart, back into a caller it did not see.
    Return {
        /// The caller returned to.
        function: u32,
        /// The caller's block.
        block: u32,
        /// The call site.
        site: u32,
        /// The function returning.
        callee: u32,
        /// The path took the call.
        matched: bool,
    },
    /// A call left as a summary edge (its callee's paths are separate): a recursive call or a
    /// context cut (`callee` known), a call through a pointer or out of the set (`callee`
    /// `None`).
    Summary {
        /// The caller.
        function: u32,
        /// The caller's block.
        block: u32,
        /// The call site.
        site: u32,
        /// The callee, for a recursive call site or a context cut.
        callee: Option<u32>,
    },
    /// The path starts after a back or cut edge of the next block's function (its calling
    /// context, context mode, comes before).
    Restart,
    /// The path starts where a `longjmp` came back into the next block's function.
    Reentry,
    /// The path ends at a back or cut edge.
    Cut,
    /// The path ends where the frame was abandoned (`exit`, `longjmp`, an exception).
    EarlyExit,
}

pub(crate) struct Ipath;

impl super::Reconstruct for Ipath {
    /// Solves the module's set as a whole: its numbering rebuilt and checked (a mismatch is a
    /// metadata error of the module), its paths regenerated; counts that cannot be derived
    /// mark every function of the set inconsistent.
    fn module(&self, m: &ProfileModule) -> Result<ModuleSolved, ReportError> {
        let meta = &m.meta;
        let mut out = ModuleSolved::default();
        let Some(ip) = meta.ipath() else {
            return Ok(out);
        };
        let owner = ip.table_owner as usize;
        let meta_err = |message: String| ReportError::Meta {
            function: "(the interprocedural set)".into(),
            source_file: one_line(&meta.source),
            message,
        };
        let pm = meta
            .functions
            .get(owner)
            .and_then(|f| f.paths())
            .ok_or_else(|| meta_err("the path table's owner has no paths".into()))?;
        let mut pp = super::path::path_profile(pm, &[], &[], &m.paths, owner);
        // Paths counted in counter arrays; a path may have counts in both: they add up.
        pp.counts
            .extend(ip.array_counts(&meta.functions, &m.counters));
        pp.counts.sort_unstable();
        pp.counts.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 = kept.1.saturating_add(later.1);
            }
            same
        });
        match solve_module(meta, ip, &pp.counts, pp.lost) {
            Ok(solved) => {
                for (fi, s) in solved.functions {
                    out.functions.insert(fi, Ok(s));
                }
                out.ipaths.extend(
                    solved
                        .rows
                        .iter()
                        .map(|r| named::ipath_text(meta, ip.total, r)),
                );
            }
            Err(
                e @ (ReportSolveError::Numbering { .. }
                | ReportSolveError::Fingerprint { .. }
                | ReportSolveError::Meta(_)),
            ) => return Err(meta_err(e.to_string())),
            Err(e) => {
                for f in &ip.functions {
                    out.functions
                        .insert(f.function as usize, Err(one_line(&e.to_string())));
                }
            }
        }
        Ok(out)
    }

    /// A function outside the set: edge counters.
    fn solve(
        &self,
        cfg: &Cfg,
        f: &FunctionMeta,
        counters: &[u64],
        paths: Option<&PathProfile>,
    ) -> Result<Solved, ReportSolveError> {
        super::edge::Edges.solve(cfg, f, counters, paths)
    }
}

/// The module's set, solved: per function of the set (module index) its counts, and the rows.
pub(crate) struct IpSolved {
    pub functions: Vec<(usize, Solved)>,
    pub rows: Vec<IpathRow>,
}

/// Solves the set of `meta` from the path counts (of the table owner's table).
fn solve_module(
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
        let (mut start, mut end) = ("entry", "return");
        let mut context = 0;
        let site = |func: FnId, site: u32| {
            let f = module_index(func);
            let c = &ip.functions[func.index()].calls[site as usize];
            (f, c.block.0, c.callee)
        };
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
                        DagEdgeKind::Start | DagEdgeKind::Cfg(_) => {
                            steps.extend(block(kind.cfg_edge()));
                            Some(kind.cfg_edge())
                        }
                        DagEdgeKind::EarlyExit(e) => {
                            steps.push(IpathStep::EarlyExit);
                            end = "early-exit";
                            Some(e)
                        }
                        DagEdgeKind::ReentryStart(e) => {
                            context = steps.len();
                            steps.push(IpathStep::Reentry);
                            steps.extend(block(e));
                            start = "reentry";
                            Some(e)
                        }
                        DagEdgeKind::BackEnd(e) | DagEdgeKind::CutEnd(e) => {
                            steps.push(IpathStep::Cut);
                            end = if matches!(kind, DagEdgeKind::BackEnd(_)) {
                                "back-edge"
                            } else {
                                "cut"
                            };
                            Some(e)
                        }
                        DagEdgeKind::BackStart(e) | DagEdgeKind::CutStart(e) => {
                            context = steps.len();
                            steps.push(IpathStep::Restart);
                            steps.extend(block(e));
                            start = if matches!(kind, DagEdgeKind::BackStart(_)) {
                                "back-edge"
                            } else {
                                "cut"
                            };
                            None
                        }
                    };
                    if let (Some(ce), true) = (count_edge, counted) {
                        let c = &mut edges[func.index()][ce];
                        *c = c.checked_add(count).ok_or(ReportSolveError::Overflow)?;
                    }
                }
                SEdge::Call { func, site: s } | SEdge::Return { func, site: s } => {
                    let (function, block, callee) = site(func, s);
                    let callee = callee
                        .and_then(|q| ip.functions.get(q as usize))
                        .ok_or_else(|| ReportSolveError::Meta("a call site's callee".into()))?
                        .function;
                    steps.push(if matches!(e, SEdge::Call { .. }) {
                        IpathStep::Call {
                            function,
                            block,
                            site: s,
                            callee,
                            matched: false,
                        }
                    } else {
                        IpathStep::Return {
                            function,
                            block,
                            site: s,
                            callee,
                            matched: false,
                        }
                    });
                }
                SEdge::Abandon { .. } => {
                    // The frame was abandoned (§9.2's surrogate edge `c -> GExit`) before the
                    // block's next direct call: the path ends early there.
                    steps.push(IpathStep::EarlyExit);
                    end = "early-exit";
                }
                SEdge::Summary { func, site: s } => {
                    let (function, block, _) = site(func, s);
                    let callee = match g.site_kind(func, s) {
                        tally_graph::ipaths::supergraph::SiteKind::Recursive(q) => {
                            Some(module_index(q))
                        }
                        // A context cut (the instrumenter's, for array storage).
                        _ => ip.functions[func.index()].calls[s as usize]
                            .context_cut
                            .and_then(|q| ip.functions.get(q as usize))
                            .map(|q| q.function),
                    };
                    steps.push(IpathStep::Summary {
                        function,
                        block,
                        site: s,
                        callee,
                    });
                }
                _ => {}
            }
        }
        match_calls(&mut steps);
        rows.push(IpathRow {
            number,
            count,
            steps,
            start,
            end,
            context,
        });
    }
    // Early exits (Melski & Reps 1998 §9.2): a frame abandoned in a block left it by its early-exit
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

/// Marks the calls and returns of `steps` that match each other (a return matches the
/// innermost pending call, which is at the same site: the walk of the supergraph only allows
/// that); the others stay unmatched.
fn match_calls(steps: &mut [IpathStep]) {
    let mut pending = Vec::new();
    for i in 0..steps.len() {
        match steps[i] {
            IpathStep::Call { .. } => pending.push(i),
            IpathStep::Return { .. } => {
                if let Some(c) = pending.pop() {
                    for j in [c, i] {
                        if let IpathStep::Call { matched, .. } | IpathStep::Return { matched, .. } =
                            &mut steps[j]
                        {
                            *matched = true;
                        }
                    }
                }
            }
            _ => {}
        }
    }
}
