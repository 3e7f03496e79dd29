//! The path DAG: the acyclic graph whose START-to-END paths are the paths a path profile counts
//! (Ball & Larus 1996 §4 "Path profiling of arbitrary control flow"; Melski & Reps 1998 §2.1).
//!
//! Every cycle of a control-flow graph contains a back edge of a depth-first search. Ball and
//! Larus remove each back edge `b = x -> y` and add two *dummy edges*: `START -> y` (a path that
//! starts where the back edge lands) and `x -> END` (a path that ends by taking the back edge). A
//! self loop is a back edge like any other. tally's graphs also model abandoned frames, and they
//! become path boundaries the same way:
//!
//! | control-flow edge            | DAG edge(s)                                | [`DagEdgeKind`]            |
//! |------------------------------|--------------------------------------------|----------------------------|
//! | `e0 = EXIT -> n0`            | `START -> n0`                              | `Start`                    |
//! | `Flow` / `Return`, not back  | the same edge (`Return` edges go to END)   | `Cfg(e)`                   |
//! | `EarlyExit` `v -> EXIT`      | `v -> END`: the path is cut short there    | `EarlyExit(e)`             |
//! | `Reentry` `EXIT -> v`        | `START -> v`: a path starts where `longjmp` came back | `ReentryStart(e)` |
//! | back edge `b = x -> y`       | `START -> y` and `x -> END`                | `BackStart(b)`, `BackEnd(b)` |
//! | cut edge `c = x -> y`        | `START -> y` and `x -> END`                | `CutStart(c)`, `CutEnd(c)` |
//!
//! Cut edges are `Flow` edges that [`cut`](super::cut) chose to treat like back edges so that the
//! number of paths fits a limit.
//!
//! Back edges come from a depth-first search over the structural edges: [`Dfs`] from `n0`, then
//! the same search continued from each re-entry target it did not reach (blocks entered only
//! through `longjmp` can contain loops too). The blocks reached by either are *live*; every
//! other block is dead code and the edges leaving it have no image ([`CfgImage::Dead`]): they can
//! never execute, so they need no path and their derived count is 0.
//!
//! Vertices reuse [`NodeId`]: blocks `n0 .. n(k-1)`, END `nk` (the index of the graph's EXIT) and
//! START `n(k+1)`. DAG edges get ids `d0, d1, ...` in the order of the control-flow edges they
//! come from (a back edge gives its `BackEnd` then its `BackStart`), so the successors of each
//! vertex are in [`Cfg::succs`] order and those of START are `Start` first, then the other
//! START edges in control-flow edge order. That order decides the numbering.

use super::PathError;
use crate::cfg::{Cfg, EdgeKind};
use crate::dfs::Dfs;
use crate::ids::{EdgeId, IdVec, Idx, NodeId};
use std::fmt;

/// An edge of a [`PathDag`]. Parallel edges have distinct ids.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DagEdgeId(u32);

impl DagEdgeId {
    /// The id with the given dense index.
    pub const fn new(index: usize) -> Self {
        assert!(index < u32::MAX as usize, "DAG edge index overflows u32");
        Self(index as u32)
    }
    /// The dense index of this id.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for DagEdgeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "d{}", self.0)
    }
}

impl fmt::Display for DagEdgeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "d{}", self.0)
    }
}

impl Idx for DagEdgeId {
    fn from_index(index: usize) -> Self {
        DagEdgeId::new(index)
    }
    fn to_index(self) -> usize {
        self.index()
    }
}

/// What a DAG edge stands for. Each variant names the control-flow edge it comes from.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum DagEdgeKind {
    /// `START -> n0`, for `e0`: the path that starts a call.
    Start,
    /// A `Flow` or `Return` edge that is neither a back edge nor cut.
    Cfg(EdgeId),
    /// `v -> END` for the `EarlyExit` edge of `v`: the path ends where the frame was abandoned.
    EarlyExit(EdgeId),
    /// `START -> v` for the `Reentry` edge into `v`: a path starts where `longjmp` came back.
    ReentryStart(EdgeId),
    /// `START -> y` for the back edge `x -> y`: the path that starts by taking it.
    BackStart(EdgeId),
    /// `x -> END` for the back edge `x -> y`: the path that ends by taking it.
    BackEnd(EdgeId),
    /// `START -> y` for the cut edge `x -> y`.
    CutStart(EdgeId),
    /// `x -> END` for the cut edge `x -> y`.
    CutEnd(EdgeId),
}

impl DagEdgeKind {
    /// The control-flow edge this edge stands for (`e0` for `Start`).
    pub fn cfg_edge(self) -> EdgeId {
        match self {
            DagEdgeKind::Start => EdgeId::new(0),
            DagEdgeKind::Cfg(e)
            | DagEdgeKind::EarlyExit(e)
            | DagEdgeKind::ReentryStart(e)
            | DagEdgeKind::BackStart(e)
            | DagEdgeKind::BackEnd(e)
            | DagEdgeKind::CutStart(e)
            | DagEdgeKind::CutEnd(e) => e,
        }
    }
}

impl fmt::Display for DagEdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DagEdgeKind::Start => write!(f, "start"),
            DagEdgeKind::Cfg(e) => write!(f, "{e}"),
            DagEdgeKind::EarlyExit(e) => write!(f, "early-exit {e}"),
            DagEdgeKind::ReentryStart(e) => write!(f, "reentry {e}"),
            DagEdgeKind::BackStart(e) => write!(f, "back-start {e}"),
            DagEdgeKind::BackEnd(e) => write!(f, "back-end {e}"),
            DagEdgeKind::CutStart(e) => write!(f, "cut-start {e}"),
            DagEdgeKind::CutEnd(e) => write!(f, "cut-end {e}"),
        }
    }
}

/// One directed DAG edge.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct DagEdge {
    /// Source vertex (START or a block).
    pub src: NodeId,
    /// Target vertex (a block or END).
    pub dst: NodeId,
    /// What the edge stands for.
    pub kind: DagEdgeKind,
}

/// What a control-flow edge became in the DAG.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum CfgImage {
    /// `e0`: the `Start` edge.
    Start(DagEdgeId),
    /// A `Flow` or `Return` edge kept as a DAG edge.
    Kept(DagEdgeId),
    /// An `EarlyExit` edge of a live block.
    EarlyExit(DagEdgeId),
    /// A `Reentry` edge.
    Reentry(DagEdgeId),
    /// A back edge: its `x -> END` and `START -> y` dummy edges.
    Back {
        /// `BackEnd`.
        end: DagEdgeId,
        /// `BackStart`.
        start: DagEdgeId,
    },
    /// A cut edge: its `x -> END` and `START -> y` dummy edges.
    Cut {
        /// `CutEnd`.
        end: DagEdgeId,
        /// `CutStart`.
        start: DagEdgeId,
    },
    /// An edge leaving a dead block: no DAG edge.
    Dead,
}

/// The path DAG of one control-flow graph (see the module doc).
///
/// Invariants: the graph is acyclic; START has no incoming and END no outgoing edge; every edge
/// of a live block has exactly the image the module doc's table gives; dead blocks have no
/// edges; `topo_order` is START, the live blocks in a topological order, END.
#[derive(Clone, Debug)]
pub struct PathDag {
    num_blocks: usize,
    cfg_hash: u64,
    edges: IdVec<DagEdgeId, DagEdge>,
    succs: IdVec<NodeId, Vec<DagEdgeId>>,
    preds: IdVec<NodeId, Vec<DagEdgeId>>,
    image: IdVec<EdgeId, CfgImage>,
    back: IdVec<EdgeId, bool>,
    cut: IdVec<EdgeId, bool>,
    live: IdVec<NodeId, bool>,
    topo: Vec<NodeId>,
}

/// Back edges, live vertices and a postorder of the structural edges, searched from `n0` and then
/// from each re-entry target not reached yet.
struct Search {
    back: IdVec<EdgeId, bool>,
    live: IdVec<NodeId, bool>,
    postorder: Vec<NodeId>,
}

fn search(cfg: &Cfg) -> Search {
    let dfs = Dfs::compute(cfg);
    let mut back = dfs.back_edges().clone();
    // Vertices reached by `dfs` are finished: an edge into them is never a back edge.
    let mut seen = dfs.reachable().clone();
    let mut postorder = dfs.postorder().to_vec();
    let mut on_stack = IdVec::filled(cfg.num_nodes(), false);
    let mut stack: Vec<(NodeId, usize)> = Vec::new();
    for &r in cfg.succs(cfg.exit()) {
        let root = cfg.edge(r).dst;
        if seen[root] {
            continue;
        }
        seen[root] = true;
        on_stack[root] = true;
        stack.push((root, 0));
        while let Some(frame) = stack.last_mut() {
            let (v, next) = *frame;
            let Some(&e) = cfg.succs(v).get(next) else {
                stack.pop();
                on_stack[v] = false;
                postorder.push(v);
                continue;
            };
            frame.1 += 1;
            let edge = cfg.edge(e);
            if !edge.kind.is_structural() {
                continue;
            }
            let w = edge.dst;
            if on_stack[w] {
                back[e] = true;
            } else if !seen[w] {
                seen[w] = true;
                on_stack[w] = true;
                stack.push((w, 0));
            }
        }
    }
    Search {
        back,
        live: seen,
        postorder,
    }
}

/// Edge lists under construction.
struct Builder {
    edges: Vec<DagEdge>,
    succs: IdVec<NodeId, Vec<DagEdgeId>>,
    preds: IdVec<NodeId, Vec<DagEdgeId>>,
}

impl Builder {
    fn push(&mut self, src: NodeId, dst: NodeId, kind: DagEdgeKind) -> DagEdgeId {
        let id = DagEdgeId::new(self.edges.len());
        self.edges.push(DagEdge { src, dst, kind });
        self.succs[src].push(id);
        self.preds[dst].push(id);
        id
    }
}

impl PathDag {
    /// The path DAG of `cfg` with no cut edges.
    pub fn new(cfg: &Cfg) -> PathDag {
        let s = search(cfg);
        let no_cuts = IdVec::filled(cfg.num_edges(), false);
        Self::build(cfg, s, no_cuts)
    }

    /// The path DAG of `cfg` where the edges of `cuts` are cut (treated like back edges). Each
    /// must be a `Flow` edge leaving a live block that is not a back edge; repeats are ignored.
    pub fn with_cuts(cfg: &Cfg, cuts: &[EdgeId]) -> Result<PathDag, PathError> {
        let s = search(cfg);
        let mut cut = IdVec::filled(cfg.num_edges(), false);
        for &e in cuts {
            if e.index() >= cfg.num_edges() {
                return Err(PathError::NotCuttable { edge: e });
            }
            let edge = cfg.edge(e);
            if edge.kind != EdgeKind::Flow || s.back[e] || !s.live[edge.src] {
                return Err(PathError::NotCuttable { edge: e });
            }
            cut[e] = true;
        }
        Ok(Self::build(cfg, s, cut))
    }

    fn build(cfg: &Cfg, s: Search, cut: IdVec<EdgeId, bool>) -> PathDag {
        let k = cfg.num_blocks();
        let (end, start) = (NodeId::new(k), NodeId::new(k + 1));
        let mut live = IdVec::filled(k + 2, false);
        for v in cfg.blocks() {
            live[v] = s.live[v];
        }
        live[start] = true;
        live[end] = true;
        let mut topo = Vec::with_capacity(k + 2);
        topo.push(start);
        topo.extend(s.postorder.iter().rev().filter(|&&v| v.index() < k));
        topo.push(end);

        let mut b = Builder {
            edges: Vec::new(),
            succs: IdVec::filled(k + 2, Vec::new()),
            preds: IdVec::filled(k + 2, Vec::new()),
        };
        let mut image = IdVec::filled(cfg.num_edges(), CfgImage::Dead);
        for (e, edge) in cfg.edges() {
            use DagEdgeKind as K;
            let reached = live[edge.src] || edge.kind == EdgeKind::Reentry;
            image[e] = match edge.kind {
                EdgeKind::Entry => CfgImage::Start(b.push(start, edge.dst, K::Start)),
                _ if !reached => CfgImage::Dead,
                EdgeKind::Flow if s.back[e] => CfgImage::Back {
                    end: b.push(edge.src, end, K::BackEnd(e)),
                    start: b.push(start, edge.dst, K::BackStart(e)),
                },
                EdgeKind::Flow if cut[e] => CfgImage::Cut {
                    end: b.push(edge.src, end, K::CutEnd(e)),
                    start: b.push(start, edge.dst, K::CutStart(e)),
                },
                EdgeKind::Flow | EdgeKind::Return => {
                    CfgImage::Kept(b.push(edge.src, edge.dst, K::Cfg(e)))
                }
                EdgeKind::EarlyExit => CfgImage::EarlyExit(b.push(edge.src, end, K::EarlyExit(e))),
                EdgeKind::Reentry => CfgImage::Reentry(b.push(start, edge.dst, K::ReentryStart(e))),
            };
        }
        PathDag {
            num_blocks: k,
            cfg_hash: cfg.shape_hash(),
            edges: IdVec::from_vec(b.edges),
            succs: b.succs,
            preds: b.preds,
            image,
            back: s.back,
            cut,
            live,
            topo,
        }
    }

    /// Number of blocks of the control-flow graph.
    pub fn num_blocks(&self) -> usize {
        self.num_blocks
    }
    /// Number of vertices: the blocks, END and START.
    pub fn num_nodes(&self) -> usize {
        self.num_blocks + 2
    }
    /// Number of DAG edges.
    pub fn num_edges(&self) -> usize {
        self.edges.len()
    }
    /// Number of edges of the control-flow graph the DAG was built from.
    pub fn num_cfg_edges(&self) -> usize {
        self.image.len()
    }
    /// The virtual START vertex, `n(k+1)`.
    pub fn start(&self) -> NodeId {
        NodeId::new(self.num_blocks + 1)
    }
    /// The virtual END vertex, `nk` (the index of the control-flow graph's EXIT).
    pub fn end(&self) -> NodeId {
        NodeId::new(self.num_blocks)
    }
    /// True for the vertices that are blocks.
    pub fn is_block(&self, v: NodeId) -> bool {
        v.index() < self.num_blocks
    }
    /// True for START, END and the blocks reached from `n0` or a re-entry target.
    pub fn is_live(&self, v: NodeId) -> bool {
        self.live[v]
    }
    /// The edge with id `d`.
    pub fn edge(&self, d: DagEdgeId) -> DagEdge {
        self.edges[d]
    }
    /// All edges in id order.
    pub fn edges(&self) -> impl ExactSizeIterator<Item = (DagEdgeId, DagEdge)> + '_ {
        self.edges.iter().map(|(id, e)| (id, *e))
    }
    /// Outgoing edges of `v`, in numbering order.
    pub fn succs(&self, v: NodeId) -> &[DagEdgeId] {
        &self.succs[v]
    }
    /// Incoming edges of `v`.
    pub fn preds(&self, v: NodeId) -> &[DagEdgeId] {
        &self.preds[v]
    }
    /// What control-flow edge `e` became.
    pub fn image(&self, e: EdgeId) -> CfgImage {
        self.image[e]
    }
    /// True if `e` is a back edge of the search described in the module doc.
    pub fn is_back_edge(&self, e: EdgeId) -> bool {
        self.back[e]
    }
    /// True if `e` is cut.
    pub fn is_cut(&self, e: EdgeId) -> bool {
        self.cut[e]
    }
    /// The back edges, in id order.
    pub fn back_edges(&self) -> impl Iterator<Item = EdgeId> + '_ {
        self.back.iter().filter(|(_, &b)| b).map(|(e, _)| e)
    }
    /// The cut edges, in id order.
    pub fn cuts(&self) -> impl Iterator<Item = EdgeId> + '_ {
        self.cut.iter().filter(|(_, &c)| c).map(|(e, _)| e)
    }
    /// START, the live blocks in a topological order of the DAG, END.
    pub fn topo_order(&self) -> &[NodeId] {
        &self.topo
    }

    /// A vertex name for messages and tests: `START`, `END` or the block id.
    pub fn node_name(&self, v: NodeId) -> String {
        if v == self.start() {
            "START".to_string()
        } else if v == self.end() {
            "END".to_string()
        } else {
            v.to_string()
        }
    }

    /// `"n1->END (back-end e3)"`: an edge for messages and tests.
    pub fn describe(&self, d: DagEdgeId) -> String {
        let e = self.edges[d];
        format!(
            "{}->{} ({})",
            self.node_name(e.src),
            self.node_name(e.dst),
            e.kind
        )
    }

    /// `Err(WrongGraph)` unless the DAG was built from a graph of `cfg`'s shape.
    pub fn check_graph(&self, cfg: &Cfg) -> Result<(), PathError> {
        if cfg.num_blocks() == self.num_blocks
            && cfg.num_edges() == self.image.len()
            && cfg.shape_hash() == self.cfg_hash
        {
            Ok(())
        } else {
            Err(PathError::WrongGraph)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::testing::cfg;

    fn all(dag: &PathDag) -> Vec<String> {
        dag.edges().map(|(d, _)| dag.describe(d)).collect()
    }

    #[test]
    fn loops_early_exits_and_reentries_become_dummy_edges() {
        //   EXIT ─e0─▶ n0 ─e1─▶ n1 ─e2─▶ n2 ─e5─▶ EXIT (return)
        //                       ▲ │╲      │
        //                    e3 │ │ ╲e4   │ e6 (early exit)
        //                       └─┘  ▼    ▼
        //               (back, self)  EXIT
        //   e7: n1 -> n1 self loop; e8: EXIT -> n2 re-entry
        let g = cfg(
            3,
            &[
                (0, 1, Flow),      // e1
                (1, 2, Flow),      // e2
                (1, 1, Flow),      // e3 self loop
                (1, 3, EarlyExit), // e4
                (2, 3, Return),    // e5
                (2, 3, EarlyExit), // e6
                (3, 2, Reentry),   // e7
            ],
        );
        let dag = PathDag::new(&g);
        assert_eq!(
            all(&dag),
            [
                "START->n0 (start)",
                "n0->n1 (e1)",
                "n1->n2 (e2)",
                "n1->END (back-end e3)",
                "START->n1 (back-start e3)",
                "n1->END (early-exit e4)",
                "n2->END (e5)",
                "n2->END (early-exit e6)",
                "START->n2 (reentry e7)",
            ]
        );
        assert_eq!(dag.back_edges().collect::<Vec<_>>(), [EdgeId::new(3)]);
        assert_eq!(
            dag.image(EdgeId::new(3)),
            CfgImage::Back {
                end: DagEdgeId::new(3),
                start: DagEdgeId::new(4)
            }
        );
        let names: Vec<String> = dag.topo_order().iter().map(|&v| dag.node_name(v)).collect();
        assert_eq!(names, ["START", "n0", "n1", "n2", "END"]);
    }

    #[test]
    fn loops_entered_only_through_reentry_have_back_edges() {
        // n0 returns at once; n1 <-> n2 is a loop reached only by re-entering n1; n3 is dead.
        let g = cfg(
            4,
            &[
                (0, 4, Return),  // e1
                (4, 1, Reentry), // e2
                (1, 2, Flow),    // e3
                (2, 1, Flow),    // e4: back edge found by the continued search
                (2, 4, Return),  // e5
                (3, 3, Flow),    // e6: dead self loop
                (3, 4, Return),  // e7: dead
            ],
        );
        let dag = PathDag::new(&g);
        assert_eq!(dag.back_edges().collect::<Vec<_>>(), [EdgeId::new(4)]);
        assert!(dag.is_live(NodeId::new(2)));
        assert!(!dag.is_live(NodeId::new(3)));
        assert_eq!(dag.image(EdgeId::new(6)), CfgImage::Dead);
        assert_eq!(dag.image(EdgeId::new(7)), CfgImage::Dead);
        // Reverse postorder of the whole search: the re-entry region, finished last, first.
        let names: Vec<String> = dag.topo_order().iter().map(|&v| dag.node_name(v)).collect();
        assert_eq!(names, ["START", "n1", "n2", "n0", "END"]);
    }

    #[test]
    fn cuts_are_checked_and_become_dummy_edges() {
        let g = cfg(
            2,
            &[
                (0, 1, Flow),
                (1, 0, Flow),
                (1, 2, Return),
                (1, 2, EarlyExit),
            ],
        );
        let dag = PathDag::with_cuts(&g, &[EdgeId::new(1)]).unwrap();
        assert_eq!(
            all(&dag),
            [
                "START->n0 (start)",
                "n0->END (cut-end e1)",
                "START->n1 (cut-start e1)",
                "n1->END (back-end e2)",
                "START->n0 (back-start e2)",
                "n1->END (e3)",
                "n1->END (early-exit e4)",
            ]
        );
        for bad in [0, 2, 3, 4, 9] {
            let e = EdgeId::new(bad);
            assert_eq!(
                PathDag::with_cuts(&g, &[e]).err(),
                Some(PathError::NotCuttable { edge: e })
            );
        }
        let other = cfg(2, &[(0, 1, Flow), (1, 2, Return)]);
        assert_eq!(dag.check_graph(&g), Ok(()));
        assert_eq!(dag.check_graph(&other), Err(PathError::WrongGraph));
    }
}
