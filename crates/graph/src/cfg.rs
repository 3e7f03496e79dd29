//! The control-flow graph every profiling mode works on (Ball & Larus 1994 §2, Fig. 1).
//!
//! Vertices are the basic blocks `n0 .. n(k-1)` of one function, `n0` being the entry, plus one
//! virtual EXIT vertex `nk`. Edges are directed and may be parallel: a switch whose two cases
//! branch to the same block contributes two edges, because two counters would be needed to tell
//! them apart. Edge `e0` is always `EXIT -> entry` ([`EdgeKind::Entry`]), the edge that makes
//! Kirchhoff's law hold at the entry and at EXIT; it corresponds to no real control flow and is
//! never instrumented by an edge placement, its count being the number of calls.
//!
//! Besides the edges of the terminators, the graph carries the edges that model early
//! termination (Ball & Larus 1994 §3.2, Fig. 7): an [`EdgeKind::EarlyExit`] edge `v -> EXIT` for
//! every block `v` from which a call may leave the function without returning (exit(), longjmp, an
//! exception unwinding through a frame without a handler), and an [`EdgeKind::Reentry`] edge
//! `EXIT -> v` for a block `v` where control can come back into a frame that was left that way
//! (the code after a `setjmp` call, when `longjmp` returns to it). With these edges the flow law
//! holds at every vertex for every execution, finished or not.

use crate::ids::{EdgeId, IdVec, NodeId};
use thiserror::Error;

/// What an edge stands for.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum EdgeKind {
    /// `EXIT -> entry`: one traversal per call of the function. Always `e0`.
    Entry,
    /// A successor of a block's terminator (branch, switch case, invoke normal or unwind
    /// destination, indirect branch target), or the fall-through from a block that was cut in two.
    Flow,
    /// `block -> EXIT`: the block ends the function normally (return, resume of unwinding).
    Return,
    /// `block -> EXIT`: the frame was abandoned while executing a call in the block (Ball & Larus
    /// 1994 §3.2, the "exit counter" of Fig. 7). Counted at run time when the frame is abandoned.
    EarlyExit,
    /// `EXIT -> block`: control came back into an abandoned frame at the start of the block
    /// (the second return of `setjmp`).
    Reentry,
}

impl EdgeKind {
    /// True for the edges that represent control transfers inside the function body and its
    /// normal returns: the structure the loop analysis and weighting look at.
    pub fn is_structural(self) -> bool {
        matches!(self, EdgeKind::Flow | EdgeKind::Return)
    }
}

/// One directed edge.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Edge {
    /// Source vertex.
    pub src: NodeId,
    /// Target vertex.
    pub dst: NodeId,
    /// What the edge stands for.
    pub kind: EdgeKind,
}

/// A malformed graph description.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CfgError {
    /// A graph needs at least its entry block.
    #[error("a control-flow graph needs at least one block")]
    NoBlocks,
    /// An edge names a vertex that does not exist.
    #[error("edge {edge} names vertex {node}, but the graph has {num_nodes} vertices")]
    NodeOutOfRange {
        /// The offending edge.
        edge: EdgeId,
        /// The vertex it names.
        node: NodeId,
        /// Number of vertices including EXIT.
        num_nodes: usize,
    },
    /// An edge's endpoints do not fit its kind (e.g. a `Return` edge that does not end at EXIT).
    #[error("edge {edge} ({src} -> {dst}) is not a valid {kind:?} edge")]
    BadEndpoints {
        /// The offending edge.
        edge: EdgeId,
        /// Its source.
        src: NodeId,
        /// Its target.
        dst: NodeId,
        /// Its kind.
        kind: EdgeKind,
    },
    /// `e0` must be the only `EXIT -> entry` edge.
    #[error("edge e0 must be the one Entry edge EXIT -> n0")]
    EntryEdge,
    /// At most one early-exit edge and one re-entry edge per block.
    #[error("block {0} has more than one {1:?} edge")]
    Duplicate(NodeId, EdgeKind),
}

/// A function's control-flow graph with the virtual EXIT vertex. Immutable once built.
///
/// Invariants (checked by [`Cfg::new`]): `e0` is `EXIT -> n0` of kind `Entry` and no other edge
/// is; `Flow` edges join two blocks; `Return` and `EarlyExit` edges go from a block to EXIT;
/// `Reentry` edges go from EXIT to a block; a block has at most one `EarlyExit` and at most one
/// `Reentry` edge.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Cfg {
    num_blocks: usize,
    edges: IdVec<EdgeId, Edge>,
    succs: IdVec<NodeId, Vec<EdgeId>>,
    preds: IdVec<NodeId, Vec<EdgeId>>,
}

impl Cfg {
    /// Builds a graph with `num_blocks` blocks from its non-`Entry` edges, given as
    /// `(src, dst, kind)` with EXIT written as `NodeId::new(num_blocks)`. The `Entry` edge is
    /// added as `e0`; the given edges get ids `e1, e2, ...` in order.
    pub fn new(
        num_blocks: usize,
        edges: impl IntoIterator<Item = (NodeId, NodeId, EdgeKind)>,
    ) -> Result<Cfg, CfgError> {
        if num_blocks == 0 {
            return Err(CfgError::NoBlocks);
        }
        let exit = NodeId::new(num_blocks);
        let mut all = vec![Edge {
            src: exit,
            dst: NodeId::new(0),
            kind: EdgeKind::Entry,
        }];
        all.extend(
            edges
                .into_iter()
                .map(|(src, dst, kind)| Edge { src, dst, kind }),
        );
        Self::from_edges(num_blocks, all)
    }

    /// Builds a graph from its complete edge list, `e0` included.
    pub fn from_edges(num_blocks: usize, edges: Vec<Edge>) -> Result<Cfg, CfgError> {
        if num_blocks == 0 {
            return Err(CfgError::NoBlocks);
        }
        let num_nodes = num_blocks + 1;
        let exit = NodeId::new(num_blocks);
        let mut succs = IdVec::filled(num_nodes, Vec::new());
        let mut preds = IdVec::filled(num_nodes, Vec::new());
        let mut early = vec![false; num_blocks];
        let mut reentry = vec![false; num_blocks];
        for (i, e) in edges.iter().enumerate() {
            let id = EdgeId::new(i);
            for node in [e.src, e.dst] {
                if node.index() >= num_nodes {
                    return Err(CfgError::NodeOutOfRange {
                        edge: id,
                        node,
                        num_nodes,
                    });
                }
            }
            let is_block = |n: NodeId| n != exit;
            let ok = match e.kind {
                EdgeKind::Entry => {
                    if i != 0 || e.src != exit || e.dst != NodeId::new(0) {
                        return Err(CfgError::EntryEdge);
                    }
                    true
                }
                EdgeKind::Flow => is_block(e.src) && is_block(e.dst),
                EdgeKind::Return => is_block(e.src) && e.dst == exit,
                EdgeKind::EarlyExit => {
                    if is_block(e.src) && e.dst == exit {
                        if std::mem::replace(&mut early[e.src.index()], true) {
                            return Err(CfgError::Duplicate(e.src, e.kind));
                        }
                        true
                    } else {
                        false
                    }
                }
                EdgeKind::Reentry => {
                    if e.src == exit && is_block(e.dst) {
                        if std::mem::replace(&mut reentry[e.dst.index()], true) {
                            return Err(CfgError::Duplicate(e.dst, e.kind));
                        }
                        true
                    } else {
                        false
                    }
                }
            };
            if !ok {
                return Err(CfgError::BadEndpoints {
                    edge: id,
                    src: e.src,
                    dst: e.dst,
                    kind: e.kind,
                });
            }
            succs[e.src].push(id);
            preds[e.dst].push(id);
        }
        if edges.first().map(|e| e.kind) != Some(EdgeKind::Entry) {
            return Err(CfgError::EntryEdge);
        }
        Ok(Cfg {
            num_blocks,
            edges: IdVec::from_vec(edges),
            succs,
            preds,
        })
    }

    /// Number of blocks (vertices other than EXIT).
    pub fn num_blocks(&self) -> usize {
        self.num_blocks
    }
    /// Number of vertices, EXIT included.
    pub fn num_nodes(&self) -> usize {
        self.num_blocks + 1
    }
    /// Number of edges, `e0` included.
    pub fn num_edges(&self) -> usize {
        self.edges.len()
    }
    /// The entry block, `n0`.
    pub fn entry(&self) -> NodeId {
        NodeId::new(0)
    }
    /// The virtual EXIT vertex.
    pub fn exit(&self) -> NodeId {
        NodeId::new(self.num_blocks)
    }
    /// The `EXIT -> entry` edge, `e0`.
    pub fn entry_edge(&self) -> EdgeId {
        EdgeId::new(0)
    }
    /// True for the EXIT vertex.
    pub fn is_exit(&self, n: NodeId) -> bool {
        n.index() == self.num_blocks
    }
    /// The edge with id `e`.
    pub fn edge(&self, e: EdgeId) -> Edge {
        self.edges[e]
    }
    /// All edges in id order.
    pub fn edges(&self) -> impl ExactSizeIterator<Item = (EdgeId, Edge)> + '_ {
        self.edges.iter().map(|(id, e)| (id, *e))
    }
    /// All vertex ids, EXIT last.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = NodeId> {
        (0..self.num_nodes()).map(NodeId::new)
    }
    /// All block ids (EXIT excluded).
    pub fn blocks(&self) -> impl ExactSizeIterator<Item = NodeId> {
        (0..self.num_blocks).map(NodeId::new)
    }
    /// Outgoing edges of `n`, in the order they were added.
    pub fn succs(&self, n: NodeId) -> &[EdgeId] {
        &self.succs[n]
    }
    /// Incoming edges of `n`, in the order they were added.
    pub fn preds(&self, n: NodeId) -> &[EdgeId] {
        &self.preds[n]
    }
    /// The early-exit edge of block `n`, if it has one.
    pub fn early_exit(&self, n: NodeId) -> Option<EdgeId> {
        self.succs[n]
            .iter()
            .copied()
            .find(|&e| self.edges[e].kind == EdgeKind::EarlyExit)
    }
    /// The re-entry edge into block `n`, if it has one.
    pub fn reentry(&self, n: NodeId) -> Option<EdgeId> {
        self.preds[n]
            .iter()
            .copied()
            .find(|&e| self.edges[e].kind == EdgeKind::Reentry)
    }

    /// A stable 64-bit fingerprint of the graph's shape (FNV-1a over the edge list). Two
    /// builds of the same source with the same flags give the same hash in every mode.
    pub fn shape_hash(&self) -> u64 {
        let mut h = crate::hash::Fnv64::new();
        h.write_u64(self.num_blocks as u64);
        for (_, e) in self.edges() {
            h.write_u64(e.src.index() as u64);
            h.write_u64(e.dst.index() as u64);
            h.write_u64(e.kind as u64);
        }
        h.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(i: usize) -> NodeId {
        NodeId::new(i)
    }

    #[test]
    fn builds_parallel_edges_and_entry_edge() {
        // n0 --(2 parallel)--> n1 --> EXIT
        let g = Cfg::new(
            2,
            [
                (n(0), n(1), EdgeKind::Flow),
                (n(0), n(1), EdgeKind::Flow),
                (n(1), n(2), EdgeKind::Return),
            ],
        )
        .unwrap();
        assert_eq!(g.num_edges(), 4);
        assert_eq!(g.edge(g.entry_edge()).kind, EdgeKind::Entry);
        assert_eq!(g.succs(n(0)).len(), 2);
        assert_eq!(g.preds(n(1)).len(), 2);
        assert_eq!(g.preds(g.entry()), &[EdgeId::new(0)]);
    }

    #[test]
    fn rejects_bad_edges() {
        assert_eq!(Cfg::new(0, []), Err(CfgError::NoBlocks));
        assert!(matches!(
            Cfg::new(1, [(n(0), n(0), EdgeKind::Return)]),
            Err(CfgError::BadEndpoints { .. })
        ));
        assert!(matches!(
            Cfg::new(1, [(n(0), n(5), EdgeKind::Flow)]),
            Err(CfgError::NodeOutOfRange { .. })
        ));
        assert_eq!(
            Cfg::new(1, [(n(1), n(0), EdgeKind::Entry)]),
            Err(CfgError::EntryEdge)
        );
        assert_eq!(
            Cfg::new(
                1,
                [
                    (n(0), n(1), EdgeKind::EarlyExit),
                    (n(0), n(1), EdgeKind::EarlyExit)
                ]
            ),
            Err(CfgError::Duplicate(n(0), EdgeKind::EarlyExit))
        );
    }

    #[test]
    fn shape_hash_sees_kinds_and_order() {
        let a = Cfg::new(1, [(n(0), n(1), EdgeKind::Return)]).unwrap();
        let b = Cfg::new(1, [(n(0), n(1), EdgeKind::EarlyExit)]).unwrap();
        assert_ne!(a.shape_hash(), b.shape_hash());
        assert_eq!(a.shape_hash(), a.clone().shape_hash());
    }
}
