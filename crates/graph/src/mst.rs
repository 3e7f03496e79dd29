//! Maximum spanning trees (spanning forests for disconnected graphs) of a [`Cfg`], edges taken
//! as undirected, by Kruskal's algorithm with a small union-find (Ball & Larus 1994 §2 and §3.2:
//! the edges left out of a maximum spanning tree are a minimum-cost set of edge counters).
//!
//! Each edge has a [`TreeClass`]. `Forced` edges are taken first, in id order: `e0` always (the
//! paper seeds the tree with `EXIT -> root` so that it never carries a counter), and edges that
//! cannot carry a counter. `Weighted` edges follow by weight, heaviest first, ties by ascending
//! id, so the result is fully deterministic. `Excluded` edges never enter the tree; the
//! `Reentry` edges are always excluded because the runtime counts them, and so are the
//! `EarlyExit` edges unless [`max_spanning_tree_exits_in_tree`] forces them in. A forced
//! edge that would close a cycle cannot be a tree edge; it is reported in
//! [`SpanningTree::failed_forced`] and stays a chord.

use crate::cfg::{Cfg, EdgeKind};
use crate::ids::{EdgeId, IdVec, NodeId};

/// How an edge takes part in the spanning tree.
#[derive(Copy, Clone, PartialEq, Debug)]
pub enum TreeClass {
    /// Must be in the tree if it closes no cycle with the other forced edges.
    Forced,
    /// A candidate of the given weight; heavier edges are preferred. Weights are compared with
    /// [`f64::total_cmp`].
    Weighted(f64),
    /// Never in the tree.
    Excluded,
}

/// A spanning forest of a graph's edges taken as undirected.
///
/// Invariants: the tree edges contain no (undirected) cycle, and every non-excluded edge joins
/// two vertices connected by tree edges; `failed_forced` lists, in id order, the forced edges
/// that are not tree edges because they would have closed a cycle of forced edges.
#[derive(Clone, PartialEq, Debug)]
pub struct SpanningTree {
    /// `in_tree[e]` is true for the tree edges.
    pub in_tree: IdVec<EdgeId, bool>,
    /// Forced edges that could not be put in the tree.
    pub failed_forced: Vec<EdgeId>,
}

impl SpanningTree {
    /// The tree edges, in id order.
    pub fn tree_edges(&self) -> impl Iterator<Item = EdgeId> + '_ {
        self.in_tree.iter().filter(|(_, &t)| t).map(|(e, _)| e)
    }

    /// The non-tree edges (chords), in id order.
    pub fn chords(&self) -> impl Iterator<Item = EdgeId> + '_ {
        self.in_tree.iter().filter(|(_, &t)| !t).map(|(e, _)| e)
    }
}

/// Disjoint sets over vertex indices, with path halving and union by size.
#[derive(Clone, Debug)]
pub struct UnionFind {
    parent: Vec<usize>,
    size: Vec<usize>,
}

impl UnionFind {
    /// `n` singleton sets `0 .. n`.
    pub fn new(n: usize) -> Self {
        UnionFind {
            parent: (0..n).collect(),
            size: vec![1; n],
        }
    }

    /// The representative of the set holding `x`.
    pub fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    /// Merges the sets of `a` and `b`; false if they were already one set.
    pub fn union(&mut self, a: usize, b: usize) -> bool {
        let (mut a, mut b) = (self.find(a), self.find(b));
        if a == b {
            return false;
        }
        if self.size[a] < self.size[b] {
            std::mem::swap(&mut a, &mut b);
        }
        self.parent[b] = a;
        self.size[a] += self.size[b];
        true
    }
}

/// Kruskal's maximum spanning forest of `cfg` under `class`.
///
/// `class` is asked about the `Flow` and `Return` edges only: `e0` is always forced and the
/// `EarlyExit` and `Reentry` edges are always excluded.
pub fn max_spanning_tree(cfg: &Cfg, class: impl Fn(EdgeId) -> TreeClass) -> SpanningTree {
    spanning_tree(cfg, false, class)
}

/// Like [`max_spanning_tree`], but every `EarlyExit` edge is forced into the tree, ahead of
/// `e0`. The early-exit edges of a function form a star on EXIT, so they always fit; `e0`
/// fails (and becomes a chord, counted at the entry) exactly when the entry has an early-exit
/// edge. Their counts are then derived by the flow law instead of being counted by the runtime:
/// the frame needs no record (the gcov approach of "fake" call-to-exit edges kept on the
/// tree), at the price of the counters the forced edges displace.
pub fn max_spanning_tree_exits_in_tree(
    cfg: &Cfg,
    class: impl Fn(EdgeId) -> TreeClass,
) -> SpanningTree {
    spanning_tree(cfg, true, class)
}

fn spanning_tree(
    cfg: &Cfg,
    exits_in_tree: bool,
    class: impl Fn(EdgeId) -> TreeClass,
) -> SpanningTree {
    let mut forced = Vec::new();
    let mut weighted = Vec::new();
    if exits_in_tree {
        forced.extend(
            cfg.edges()
                .filter(|(_, edge)| edge.kind == EdgeKind::EarlyExit)
                .map(|(e, _)| e),
        );
    }
    for (e, edge) in cfg.edges() {
        let c = match edge.kind {
            EdgeKind::Entry => TreeClass::Forced,
            EdgeKind::EarlyExit | EdgeKind::Reentry => TreeClass::Excluded,
            EdgeKind::Flow | EdgeKind::Return => class(e),
        };
        match c {
            TreeClass::Forced => forced.push(e),
            TreeClass::Weighted(w) => weighted.push((w, e)),
            TreeClass::Excluded => {}
        }
    }
    weighted.sort_by(|(wa, ea), (wb, eb)| wb.total_cmp(wa).then(ea.cmp(eb)));

    let mut sets = UnionFind::new(cfg.num_nodes());
    let mut in_tree = IdVec::filled(cfg.num_edges(), false);
    let mut failed_forced = Vec::new();
    let mut join = |e: EdgeId| {
        let edge = cfg.edge(e);
        sets.union(edge.src.index(), edge.dst.index())
    };
    for e in forced {
        if join(e) {
            in_tree[e] = true;
        } else {
            failed_forced.push(e);
        }
    }
    for (_, e) in weighted {
        if join(e) {
            in_tree[e] = true;
        }
    }
    SpanningTree {
        in_tree,
        failed_forced,
    }
}

/// True if `a` and `b` are joined by tree edges of `tree` (a helper for checks and tests).
pub fn tree_connects(cfg: &Cfg, tree: &SpanningTree, a: NodeId, b: NodeId) -> bool {
    let mut sets = UnionFind::new(cfg.num_nodes());
    for e in tree.tree_edges() {
        let edge = cfg.edge(e);
        sets.union(edge.src.index(), edge.dst.index());
    }
    sets.find(a.index()) == sets.find(b.index())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::testing::cfg;

    fn tree_ids(t: &SpanningTree) -> Vec<usize> {
        t.tree_edges().map(EdgeId::index).collect()
    }

    #[test]
    fn heaviest_edges_win_ties_by_id() {
        //   EXIT -e0-> n0 -e1-> n1 -e3-> EXIT
        //              n0 -e2-> n1 (parallel)
        //              n0 -e4-> EXIT (early exit: never in the tree)
        let g = cfg(
            2,
            &[
                (0, 1, Flow),
                (0, 1, Flow),
                (1, 2, Return),
                (0, 2, EarlyExit),
            ],
        );
        let weights = [0.0, 5.0, 5.0, 1.0, 100.0];
        let t = max_spanning_tree(&g, |e| TreeClass::Weighted(weights[e.index()]));
        // e0 forced, then e1 (5, lower id than e2); e2 would close a cycle; e3 closes e0-e1-e3.
        assert_eq!(tree_ids(&t), vec![0, 1]);
        assert!(t.failed_forced.is_empty());
        assert_eq!(
            t.chords().map(EdgeId::index).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
    }

    #[test]
    fn forced_cycle_is_reported() {
        // n0 -e1-> n1, n0 -e2-> n1 both forced: the second closes a cycle.
        let g = cfg(2, &[(0, 1, Flow), (0, 1, Flow), (1, 2, Return)]);
        let t = max_spanning_tree(&g, |e| {
            if e.index() <= 2 {
                TreeClass::Forced
            } else {
                TreeClass::Weighted(1.0)
            }
        });
        assert_eq!(tree_ids(&t), vec![0, 1]);
        assert_eq!(t.failed_forced, vec![EdgeId::new(2)]);
        assert!(tree_connects(&g, &t, NodeId::new(1), g.exit()));
    }

    #[test]
    fn disconnected_graph_gives_a_forest() {
        // n1 (dead, with a self loop) is a component of its own; n0 -> EXIT closes a cycle
        // with e0.
        let g = cfg(2, &[(0, 2, Return), (1, 1, Flow)]);
        let t = max_spanning_tree(&g, |_| TreeClass::Weighted(1.0));
        assert_eq!(tree_ids(&t), vec![0]);
        assert!(tree_connects(&g, &t, NodeId::new(0), g.exit()));
        assert!(!tree_connects(&g, &t, NodeId::new(0), NodeId::new(1)));
    }
}
