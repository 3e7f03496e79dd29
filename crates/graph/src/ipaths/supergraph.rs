//! The supergraph `G*_fn` of a set of functions (Melski & Reps 1998 §2.2, §3.2, §6
//! Transformation 0) and its valid-successor walk.
//!
//! # Vertices
//!
//! Each function `P` contributes `Entry_P` (the DAG's START), `Exit_P` (where `Return` edges
//! go), `GExit_P` (Transformation 1: where back edges, cut edges and early exits end a path),
//! `GEntry_P` (Transformation 0, piecewise mode only: where paths that start at a back edge,
//! cut edge or re-entry begin) and, for each live block `b` with call sites `s_1 .. s_m` (in the
//! order of their positions in the block), the *segments* `b.0 .. b.m`: segment `b.(i-1)` is the
//! call vertex of `s_i` and `b.i` its return-site vertex; `b.0` is where control enters the
//! block and `b.m` is the source of the block's own edges. A block without calls is the single
//! segment `b.0`. Plus `Entry_global` and `Exit_global`.
//!
//! # Edges ([`SEdge`])
//!
//! - `Intra`: an edge of the function's path DAG ([`PathDag`], which already applies
//!   Transformation 2 to back edges and the same rewriting to cut edges, early exits and
//!   re-entries), from the last segment of its source block (or from `Entry_P`/`GEntry_P`) to the
//!   first segment of its target block (or to `Exit_P` for `Return` edges, `GExit_P` for the
//!   path-ending dummy edges). A block's early-exit edge (a call in it may not return) thus
//!   leaves after its last call: the frame is taken to be abandoned in the block's last call.
//! - `Call` `c -> Entry_Q` and `Return` `Exit_Q -> r` for a *direct* call site: a call of a
//!   function of the set that is not recursive.
//! - `Summary` `c -> r` for every other call site (Transformation 3): recursive call sites (back
//!   edges of a depth-first search of the call graph, rooted first at the functions entered from
//!   outside, then at the others in index order), calls through pointers (§9.2.3) and calls that
//!   leave the set (§8, strategy 2).
//! - `Abandon` `c -> GExit_P` (§9.2.1-§9.2.2's surrogate edges for abandoned frames) for a
//!   direct call site whose block has an early-exit edge: a frame abandoned inside one of the
//!   block's summary calls (exit, longjmp, an exception from an unknown callee) ends its path
//!   there when a direct call of the block follows that call, the path running through the
//!   summary edges up to the first such direct call (whose callee never ran); with no direct
//!   call after it, the path runs through the remaining summary edges and takes the block's
//!   early-exit DAG edge. Either way which summary call of the run between two direct calls
//!   ended the frame does not change the path (the summary edges are single successors worth
//!   0), so the abandoned path is the prefix that ran, up to the calls nothing observes.
//! - `RootEntry(P)` `Entry_global -> Entry_P` and `RootExit(P)` `Exit_P -> Exit_global` for each
//!   *root*: a function entered from outside the set, or the callee of a recursive call site.
//! - `PieceEntry(P)` `Entry_global -> GEntry_P` (piecewise) and `GExitEnd(P)`
//!   `GExit_P -> Exit_global`.
//!
//! The order of a vertex's successors decides the numbering: `Entry_global`'s are, for each
//! function in index order, `RootEntry` (if a root) then `PieceEntry` (piecewise); a direct
//! call vertex has `Call` then `Abandon` (so the call edge is worth 0, as without early exits);
//! an `Exit_P`
//! with no open call (piecewise) has `RootExit(P)` (if a root) then the `Return` edges of the
//! direct call sites on `P` in (caller, site) order; DAG vertices keep [`PathDag::succs`] order.
//!
//! # Valid successors
//!
//! A [`Walk`] is a path prefix from `Entry_global`: its last vertex and the stack of unmatched
//! left parentheses (`(_i` for a call site, `(_P` for a `RootEntry`). Its valid successors are
//! the successors of the vertex, except at `Exit_P` with an open parenthesis, where the only one
//! is the edge closing it. With no open parenthesis (only possible in piecewise mode, after
//! `Entry_global -> GEntry_P`) every successor of `Exit_P` is valid: the path is unbalanced-right
//! so far. This is the grammar of §2.2 (unbalanced-left) and §6 (unbalanced-right-left).

use super::{FnId, IpathError};
use crate::cfg::{Cfg, EdgeKind};
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::paths::dag::{DagEdgeId, DagEdgeKind, PathDag};
use std::collections::HashSet;

/// Who a call site calls.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Callee {
    /// A function of the set, called directly.
    Internal(FnId),
    /// A function outside the set, or a call through a pointer: a summary edge (§8, §9.2.3).
    Unknown,
}

/// A call in a block.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct CallSite {
    /// The block containing the call.
    pub block: NodeId,
    /// Its position in the block; only the order of the positions of one block's calls matters.
    pub position: u32,
    /// The callee.
    pub callee: Callee,
}

/// One function of the set, as the front end describes it.
#[derive(Clone, Debug)]
pub struct Function {
    /// Its control-flow graph.
    pub cfg: Cfg,
    /// Its call sites; a site's id is its index here.
    pub calls: Vec<CallSite>,
    /// True if the function can be entered other than by a direct call of the set (it is
    /// visible outside the file or its address is taken).
    pub entered_from_outside: bool,
    /// `Flow` edges to cut like back edges (see [`PathDag::with_cuts`]).
    pub cuts: Vec<EdgeId>,
}

/// Which observable paths are numbered.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Mode {
    /// Context paths (§5): unbalanced-left paths; a path cut at a back edge keeps its context.
    Context,
    /// Piecewise paths (§6): unbalanced-right-left paths; the observable paths partition the
    /// execution.
    Piecewise,
}

/// How a call site is represented.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum SiteKind {
    /// A non-recursive call of a function of the set: call and return edges.
    Direct(FnId),
    /// A recursive call site (Transformation 3), or a direct one demoted by
    /// [`Supergraph::with_demoted`] (§8): a summary edge; the callee is a root.
    Recursive(FnId),
    /// A call of an unknown function: a summary edge.
    Unknown,
}

/// A vertex of `G*_fn` (module doc).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Vertex {
    /// `Entry_global`.
    EntryGlobal,
    /// `Exit_global`.
    ExitGlobal,
    /// `Entry_P`.
    Entry(FnId),
    /// `GEntry_P` (piecewise).
    GEntry(FnId),
    /// `Exit_P`.
    Exit(FnId),
    /// `GExit_P`.
    GExit(FnId),
    /// Segment `seg` of a block: the call vertex of its call `seg + 1` and the return site of
    /// its call `seg`.
    Seg {
        /// The function.
        func: FnId,
        /// The block.
        block: NodeId,
        /// The segment index, `0 ..= number of calls in the block`.
        seg: u32,
    },
}

/// An edge of `G*_fn` (module doc).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum SEdge {
    /// `Entry_global -> Entry_P`, labeled `(_P`.
    RootEntry(FnId),
    /// `Entry_global -> GEntry_P` (piecewise).
    PieceEntry(FnId),
    /// `Exit_P -> Exit_global`, labeled `)_P`.
    RootExit(FnId),
    /// `GExit_P -> Exit_global`.
    GExitEnd(FnId),
    /// An edge of the function's path DAG.
    Intra {
        /// The function.
        func: FnId,
        /// The DAG edge.
        dag: DagEdgeId,
    },
    /// `c -> Entry_Q` for a direct call site, labeled `(_i`.
    Call {
        /// The caller.
        func: FnId,
        /// The call site.
        site: u32,
    },
    /// `Exit_Q -> r` for a direct call site, labeled `)_i`.
    Return {
        /// The caller.
        func: FnId,
        /// The call site.
        site: u32,
    },
    /// `c -> r` for a recursive or unknown call site.
    Summary {
        /// The caller.
        func: FnId,
        /// The call site.
        site: u32,
    },
    /// `c -> GExit_P` for a direct call site in a block with an early exit (§9.2, module doc).
    Abandon {
        /// The caller.
        func: FnId,
        /// The direct call site whose call vertex the path ends at.
        site: u32,
    },
}

/// One function of a [`Supergraph`].
#[derive(Clone, Debug)]
pub(crate) struct FnData {
    pub(crate) cfg: Cfg,
    pub(crate) dag: PathDag,
    pub(crate) cuts: Vec<EdgeId>,
    pub(crate) calls: Vec<CallSite>,
    pub(crate) kind: Vec<SiteKind>,
    /// Per block, its call sites in position order.
    pub(crate) block_sites: IdVec<NodeId, Vec<u32>>,
    /// Per call site, its index in its block's list.
    pub(crate) site_index: Vec<u32>,
    pub(crate) entered_from_outside: bool,
}

/// `G*_fn` of a set of functions (module doc). Immutable once built.
#[derive(Clone, Debug)]
pub struct Supergraph {
    pub(crate) funcs: Vec<FnData>,
    roots: Vec<bool>,
    /// Per function, the direct call sites calling it, in (caller, site) order.
    callers: Vec<Vec<(FnId, u32)>>,
    /// Callees before callers along the non-recursive call edges.
    bottom_up: Vec<FnId>,
    /// Direct call sites made summary edges (§8).
    demoted: HashSet<(FnId, u32)>,
}

impl Supergraph {
    /// Builds `G*_fn` for `functions` (function `i` is `FnId::new(i)`).
    pub fn new(functions: Vec<Function>) -> Result<Supergraph, IpathError> {
        Self::with_demoted(functions, &[])
    }

    /// Like [`Supergraph::new`], with the call sites of `demoted` (caller, site) made summary
    /// edges although they are direct calls (§8: Transformation 3 applied to non-recursive call
    /// sites, which splits the paths through them and reduces their number).
    pub fn with_demoted(
        functions: Vec<Function>,
        demoted: &[(FnId, u32)],
    ) -> Result<Supergraph, IpathError> {
        let mut g = Self::build(functions)?;
        g.demoted.extend(demoted.iter().copied());
        g.classify();
        Ok(g)
    }

    /// Demotes the call sites `sites` (caller, site) too (see [`Supergraph::with_demoted`]).
    pub fn demote(&mut self, sites: impl IntoIterator<Item = (FnId, u32)>) {
        self.demoted.extend(sites);
        self.classify();
    }

    /// Cuts the `Flow` edges `cuts` of `f` too (see [`PathDag::with_cuts`]).
    pub fn cut(&mut self, f: FnId, cuts: &[EdgeId]) -> Result<(), IpathError> {
        let data = &mut self.funcs[f.index()];
        let mut all = data.cuts.clone();
        all.extend_from_slice(cuts);
        all.sort();
        all.dedup();
        data.dag = PathDag::with_cuts(&data.cfg, &all)
            .map_err(|source| IpathError::Dag { func: f, source })?;
        data.cuts = all;
        // Cuts do not change which blocks are live, so the classification stands.
        Ok(())
    }

    /// The functions with their DAGs and call sites, not yet classified.
    fn build(functions: Vec<Function>) -> Result<Supergraph, IpathError> {
        let n = functions.len();
        let mut funcs = Vec::with_capacity(n);
        for (i, f) in functions.into_iter().enumerate() {
            let func = FnId::new(i);
            let dag = PathDag::with_cuts(&f.cfg, &f.cuts)
                .map_err(|source| IpathError::Dag { func, source })?;
            let mut block_sites: Vec<Vec<u32>> = vec![Vec::new(); f.cfg.num_blocks()];
            for (s, site) in f.calls.iter().enumerate() {
                let bad = site.block.index() >= f.cfg.num_blocks()
                    || matches!(site.callee, Callee::Internal(q) if q.index() >= n);
                if bad {
                    return Err(IpathError::BadCallSite {
                        func,
                        site: s,
                        block: site.block,
                        callee: site.callee,
                    });
                }
                block_sites[site.block.index()].push(s as u32);
            }
            let mut site_index = vec![0u32; f.calls.len()];
            for sites in &mut block_sites {
                sites.sort_by_key(|&s| (f.calls[s as usize].position, s));
                for (i, &s) in sites.iter().enumerate() {
                    site_index[s as usize] = i as u32;
                }
            }
            funcs.push(FnData {
                kind: vec![SiteKind::Unknown; f.calls.len()],
                cfg: f.cfg,
                dag,
                cuts: f.cuts,
                calls: f.calls,
                block_sites: IdVec::from_vec(block_sites),
                site_index,
                entered_from_outside: f.entered_from_outside,
            });
        }
        Ok(Supergraph {
            funcs,
            roots: vec![false; n],
            callers: vec![Vec::new(); n],
            bottom_up: Vec::new(),
            demoted: HashSet::new(),
        })
    }

    /// Transformation 3: site kinds (back edges of a DFS of the call graph are recursive call
    /// sites; demoted sites are summary edges too), roots, callers and the bottom-up order.
    fn classify(&mut self) {
        let n = self.funcs.len();
        let funcs = &mut self.funcs;
        let mut state = vec![0u8; n]; // 0 new, 1 on stack, 2 done
        let mut bottom_up = Vec::with_capacity(n);
        let order: Vec<usize> = (0..n)
            .filter(|&i| funcs[i].entered_from_outside)
            .chain((0..n).filter(|&i| !funcs[i].entered_from_outside))
            .collect();
        for root in order {
            if state[root] != 0 {
                continue;
            }
            state[root] = 1;
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            while let Some(frame) = stack.last_mut() {
                let (f, next) = *frame;
                if next == funcs[f].calls.len() {
                    stack.pop();
                    state[f] = 2;
                    bottom_up.push(FnId::new(f));
                    continue;
                }
                frame.1 += 1;
                let Callee::Internal(q) = funcs[f].calls[next].callee else {
                    continue;
                };
                let demote = self.demoted.contains(&(FnId::new(f), next as u32));
                funcs[f].kind[next] = match state[q.index()] {
                    1 => SiteKind::Recursive(q),
                    _ if demote => SiteKind::Recursive(q),
                    0 => {
                        state[q.index()] = 1;
                        stack.push((q.index(), 0));
                        SiteKind::Direct(q)
                    }
                    _ => SiteKind::Direct(q),
                };
            }
        }
        let mut roots: Vec<bool> = funcs.iter().map(|f| f.entered_from_outside).collect();
        let mut callers = vec![Vec::new(); n];
        for (i, f) in funcs.iter().enumerate() {
            for (s, k) in f.kind.iter().enumerate() {
                match *k {
                    SiteKind::Recursive(q) => roots[q.index()] = true,
                    // A call in a dead block never returns anywhere: no return edge.
                    SiteKind::Direct(q) if f.dag.is_live(f.calls[s].block) => {
                        callers[q.index()].push((FnId::new(i), s as u32))
                    }
                    SiteKind::Direct(_) => {}
                    SiteKind::Unknown => {}
                }
            }
        }
        self.roots = roots;
        self.callers = callers;
        self.bottom_up = bottom_up;
    }

    /// Number of functions.
    pub fn num_functions(&self) -> usize {
        self.funcs.len()
    }
    /// The functions' ids.
    pub fn functions(&self) -> impl ExactSizeIterator<Item = FnId> {
        (0..self.funcs.len()).map(FnId::new)
    }
    /// The control-flow graph of `f`.
    pub fn cfg(&self, f: FnId) -> &Cfg {
        &self.funcs[f.index()].cfg
    }
    /// The path DAG of `f` (Transformation 2).
    pub fn dag(&self, f: FnId) -> &PathDag {
        &self.funcs[f.index()].dag
    }
    /// The call sites of `f`.
    pub fn calls(&self, f: FnId) -> &[CallSite] {
        &self.funcs[f.index()].calls
    }
    /// How call site `site` of `f` is represented.
    pub fn site_kind(&self, f: FnId, site: u32) -> SiteKind {
        self.funcs[f.index()].kind[site as usize]
    }
    /// The call sites of block `b` of `f`, in position order.
    pub fn block_sites(&self, f: FnId, b: NodeId) -> &[u32] {
        &self.funcs[f.index()].block_sites[b]
    }
    /// The index of call site `site` among its block's calls.
    pub fn site_index(&self, f: FnId, site: u32) -> u32 {
        self.funcs[f.index()].site_index[site as usize]
    }
    /// True if `f` can be entered other than by a direct call of the set.
    pub fn entered_from_outside(&self, f: FnId) -> bool {
        self.funcs[f.index()].entered_from_outside
    }
    /// True if `f` has `Entry_global -> Entry_f` and `Exit_f -> Exit_global`.
    pub fn is_root(&self, f: FnId) -> bool {
        self.roots[f.index()]
    }
    /// The direct call sites on `f` in live blocks, in (caller, site) order.
    pub fn callers(&self, f: FnId) -> &[(FnId, u32)] {
        &self.callers[f.index()]
    }
    /// The functions, callees before callers along direct call sites.
    pub fn bottom_up(&self) -> &[FnId] {
        &self.bottom_up
    }

    /// True if direct call site `site` of `f` has the surrogate edge `c -> GExit_f`: its block
    /// has an early-exit edge (and is live).
    pub fn has_abandon(&self, f: FnId, site: u32) -> bool {
        let block = self.calls(f)[site as usize].block;
        matches!(self.site_kind(f, site), SiteKind::Direct(_))
            && self.dag(f).is_live(block)
            && self.cfg(f).early_exit(block).is_some()
    }

    /// The call vertex of `site` of `f`.
    pub fn call_vertex(&self, f: FnId, site: u32) -> Vertex {
        let block = self.calls(f)[site as usize].block;
        let seg = self.site_index(f, site);
        Vertex::Seg {
            func: f,
            block,
            seg,
        }
    }
    /// The return-site vertex of `site` of `f`.
    pub fn return_vertex(&self, f: FnId, site: u32) -> Vertex {
        let block = self.calls(f)[site as usize].block;
        let seg = self.site_index(f, site) + 1;
        Vertex::Seg {
            func: f,
            block,
            seg,
        }
    }
    /// The last segment of block `b`: the source of its edges.
    pub fn last_segment(&self, f: FnId, b: NodeId) -> Vertex {
        let seg = self.block_sites(f, b).len() as u32;
        Vertex::Seg {
            func: f,
            block: b,
            seg,
        }
    }

    /// Where a DAG edge of `f` goes.
    pub fn dag_target(&self, f: FnId, d: DagEdgeId) -> Vertex {
        let dag = self.dag(f);
        let edge = dag.edge(d);
        if dag.is_block(edge.dst) {
            Vertex::Seg {
                func: f,
                block: edge.dst,
                seg: 0,
            }
        } else if self.is_return_edge(f, d) {
            Vertex::Exit(f)
        } else {
            Vertex::GExit(f)
        }
    }

    /// True for a DAG edge that stands for a `Return` edge (it goes to `Exit_P`).
    pub fn is_return_edge(&self, f: FnId, d: DagEdgeId) -> bool {
        match self.dag(f).edge(d).kind {
            DagEdgeKind::Cfg(e) => self.cfg(f).edge(e).kind == EdgeKind::Return,
            _ => false,
        }
    }

    /// Where a DAG edge of `f` starts in `mode`.
    pub fn dag_source(&self, f: FnId, d: DagEdgeId, mode: Mode) -> Vertex {
        let dag = self.dag(f);
        let edge = dag.edge(d);
        if edge.src != dag.start() {
            self.last_segment(f, edge.src)
        } else if edge.kind == DagEdgeKind::Start || mode == Mode::Context {
            Vertex::Entry(f)
        } else {
            Vertex::GEntry(f)
        }
    }

    /// The target of an edge.
    pub fn target(&self, e: SEdge) -> Vertex {
        match e {
            SEdge::RootEntry(f) => Vertex::Entry(f),
            SEdge::PieceEntry(f) => Vertex::GEntry(f),
            SEdge::RootExit(_) | SEdge::GExitEnd(_) => Vertex::ExitGlobal,
            SEdge::Abandon { func, .. } => Vertex::GExit(func),
            SEdge::Intra { func, dag } => self.dag_target(func, dag),
            SEdge::Call { func, site } => match self.site_kind(func, site) {
                SiteKind::Direct(q) => Vertex::Entry(q),
                // Not an edge of the graph; the walk never produces it.
                _ => self.return_vertex(func, site),
            },
            SEdge::Return { func, site } | SEdge::Summary { func, site } => {
                self.return_vertex(func, site)
            }
        }
    }

    /// The successors of `v` in `mode`, in numbering order, ignoring the parenthesis
    /// constraint (for `Exit_P`: all its return edges).
    pub fn succs(&self, v: Vertex, mode: Mode) -> Vec<SEdge> {
        match v {
            Vertex::EntryGlobal => {
                let mut out = Vec::new();
                for f in self.functions() {
                    if self.is_root(f) {
                        out.push(SEdge::RootEntry(f));
                    }
                    if mode == Mode::Piecewise {
                        out.push(SEdge::PieceEntry(f));
                    }
                }
                out
            }
            Vertex::ExitGlobal => Vec::new(),
            Vertex::Entry(f) | Vertex::GEntry(f) => {
                let dag = self.dag(f);
                dag.succs(dag.start())
                    .iter()
                    .copied()
                    .filter(|&d| self.dag_source(f, d, mode) == v)
                    .map(|d| SEdge::Intra { func: f, dag: d })
                    .collect()
            }
            Vertex::Exit(f) => {
                let mut out = Vec::new();
                if self.is_root(f) {
                    out.push(SEdge::RootExit(f));
                }
                out.extend(
                    self.callers(f)
                        .iter()
                        .map(|&(func, site)| SEdge::Return { func, site }),
                );
                out
            }
            Vertex::GExit(f) => vec![SEdge::GExitEnd(f)],
            Vertex::Seg { func, block, seg } => {
                let sites = self.block_sites(func, block);
                if let Some(&site) = sites.get(seg as usize) {
                    match self.site_kind(func, site) {
                        SiteKind::Direct(_) if self.has_abandon(func, site) => {
                            vec![SEdge::Call { func, site }, SEdge::Abandon { func, site }]
                        }
                        SiteKind::Direct(_) => vec![SEdge::Call { func, site }],
                        _ => vec![SEdge::Summary { func, site }],
                    }
                } else {
                    self.dag(func)
                        .succs(block)
                        .iter()
                        .map(|&d| SEdge::Intra { func, dag: d })
                        .collect()
                }
            }
        }
    }
}

/// An unmatched left parenthesis of a path prefix.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Paren {
    /// `(_P` of `Entry_global -> Entry_P`.
    Root(FnId),
    /// `(_i` of the call edge of direct call site `site` of `func`.
    Site(FnId, u32),
}

/// A path prefix from `Entry_global` (module doc): its last vertex and its unmatched left
/// parentheses.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Walk {
    /// The last vertex.
    pub at: Vertex,
    /// The unmatched left parentheses, innermost last.
    pub open: Vec<Paren>,
}

impl Default for Walk {
    fn default() -> Self {
        Walk {
            at: Vertex::EntryGlobal,
            open: Vec::new(),
        }
    }
}

impl Walk {
    /// The empty path `[ε : Entry_global]`.
    pub fn new() -> Walk {
        Walk::default()
    }

    /// The valid successors of the prefix (module doc), in numbering order.
    pub fn valid_succs(&self, g: &Supergraph, mode: Mode) -> Vec<SEdge> {
        match (self.at, self.open.last()) {
            (Vertex::Exit(_), Some(Paren::Root(f))) => vec![SEdge::RootExit(*f)],
            (Vertex::Exit(_), Some(&Paren::Site(func, site))) => {
                vec![SEdge::Return { func, site }]
            }
            (Vertex::Exit(_), None) if mode == Mode::Context => Vec::new(),
            (v, _) => g.succs(v, mode),
        }
    }

    /// Extends the prefix by `e`, which must be one of [`Walk::valid_succs`].
    pub fn step(&mut self, g: &Supergraph, e: SEdge) {
        match e {
            SEdge::RootEntry(f) => self.open.push(Paren::Root(f)),
            SEdge::Call { func, site } => self.open.push(Paren::Site(func, site)),
            SEdge::Return { .. } | SEdge::RootExit(_) => {
                self.open.pop();
            }
            _ => {}
        }
        self.at = g.target(e);
    }
}
