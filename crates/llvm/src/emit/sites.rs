//! Where code for an edge can go (Ball & Larus 1994 §3.2's counter placement on IR): at the end of
//! its source if it is the source's only terminator edge, else at the start of its target if it
//! is the target's only incoming edge, else on a block splitting it; edges that allow none of
//! these need predecessor tags ([`crate::emit::surgery::store_tags`]). Also the weights every
//! spanning-tree mode starts from, with Ball & Larus 1994 §6.3's jump optimization.

use crate::ir::lower::{EdgeIr, Lowered};
use tally_graph::{EdgeId, EdgeKind, IdVec, NodeId};

/// Where one counter's increment goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Realize {
    /// Counted by the runtime when the frame is abandoned (early-exit edge).
    Runtime,
    /// At the end of the vertex.
    NodeEnd(NodeId),
    /// At the start of the vertex.
    NodeStart(NodeId),
    /// On a new block inserted on the edge.
    Split(EdgeId),
    /// After the setjmp call that starts the vertex: `counter += (ret != 0)`.
    Reentry(NodeId),
    /// Incremented at the start of `target` through its tag slot; tag value = position of the
    /// edge among the target's incoming edges.
    Tagged { target: NodeId },
}

/// How an edge can be counted directly, or `None` if it needs tags.
pub(crate) fn direct_site(l: &Lowered, e: EdgeId) -> Option<Realize> {
    let cfg = &l.cfg;
    let edge = cfg.edge(e);
    match l.edges[e.index()] {
        EdgeIr::Entry => Some(Realize::NodeStart(cfg.entry())),
        EdgeIr::Reentry => Some(Realize::Reentry(edge.dst)),
        EdgeIr::EarlyExit => Some(Realize::Runtime),
        EdgeIr::Fallthrough | EdgeIr::Return => Some(Realize::NodeEnd(edge.src)),
        EdgeIr::AfterCalls => Some(Realize::NodeStart(edge.dst)),
        EdgeIr::Succ { splittable, .. } => {
            let term_edges = cfg
                .succs(edge.src)
                .iter()
                .filter(|&&s| cfg.edge(s).kind != EdgeKind::EarlyExit)
                .count();
            if term_edges == 1 {
                Some(Realize::NodeEnd(edge.src))
            } else if cfg.preds(edge.dst).len() == 1 {
                Some(Realize::NodeStart(edge.dst))
            } else if splittable {
                Some(Realize::Split(e))
            } else {
                None
            }
        }
    }
}

/// The weights a function's spanning tree is taken under: measured or estimated ones if given,
/// else Ball & Larus 1994 §5's heuristic.
pub(crate) fn base_weights(
    l: &Lowered,
    weights: Option<&IdVec<EdgeId, f64>>,
) -> IdVec<EdgeId, f64> {
    match weights {
        Some(w) => w.clone(),
        None => tally_graph::weight::heuristic_weights(&l.cfg),
    }
}

/// Jump optimization (Ball & Larus 1994 §6.3): a counter on an edge that has to be split costs its
/// increment and the jump out of the new block; other counters sit in an existing block. The
/// weight of every edge realized by splitting is scaled by `1 + jump_cost`, so that the maximum
/// spanning tree keeps such edges and the chords (the counters) fall, where the weighting
/// allows a choice, on edges counted at the end of their source or the start of their target.
/// Fig. 19's case (a block with one incoming and one outgoing edge) needs no special rule here:
/// both of its edges are counted inside it, without a jump.
pub(crate) fn with_jumps(
    l: &Lowered,
    mut w: IdVec<EdgeId, f64>,
    jump_cost: f64,
) -> IdVec<EdgeId, f64> {
    if jump_cost > 0.0 {
        for (e, _) in l.cfg.edges() {
            if matches!(direct_site(l, e), Some(Realize::Split(_))) {
                w[e] *= 1.0 + jump_cost;
            }
        }
    }
    w
}
