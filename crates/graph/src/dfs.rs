//! Depth-first search from the entry and back-edge identification (Ball & Larus 1994 §5, first step
//! of the heuristic weighting: "a depth-first search of the CFG from its root vertex identifies
//! back-edges").
//!
//! The search follows *structural* edges only ([`EdgeKind::is_structural`](crate::EdgeKind):
//! `Flow` and `Return`). The `Entry` edge `EXIT -> n0` is not followed, so it is never a back
//! edge (§5: it "is not treated as a backedge even though it is identified as such by
//! depth-first search"); `EarlyExit` and `Reentry` edges model abandoned frames, not loops, and
//! are ignored as well. EXIT is reached through `Return` edges and is a leaf of the search.
//!
//! The search is iterative (functions can have tens of thousands of blocks) and deterministic:
//! the successors of a vertex are tried in [`Cfg::succs`] order.

use crate::cfg::Cfg;
use crate::ids::{EdgeId, IdVec, NodeId};

/// Colour of a vertex during the search.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Colour {
    /// Not discovered yet.
    White,
    /// Discovered, still on the DFS stack.
    Grey,
    /// Finished.
    Black,
}

/// The result of a depth-first search over the structural edges reachable from the entry.
///
/// Invariants: `preorder`, `postorder` and `topo_order` are permutations of the reachable
/// vertices (the entry first in `preorder` and `topo_order`); an edge is a back edge iff it is
/// structural, its source is reachable and its target was on the DFS stack when the edge was
/// examined (self loops included). Removing the back edges leaves the reachable part acyclic and
/// `topo_order` (reverse postorder) is a topological order of it.
#[derive(Clone, Debug)]
pub struct Dfs {
    back_edge: IdVec<EdgeId, bool>,
    preorder: Vec<NodeId>,
    postorder: Vec<NodeId>,
    topo_order: Vec<NodeId>,
    reachable: IdVec<NodeId, bool>,
}

impl Dfs {
    /// Runs the search on `cfg` from its entry block.
    pub fn compute(cfg: &Cfg) -> Dfs {
        let mut colour = IdVec::filled(cfg.num_nodes(), Colour::White);
        let mut back_edge = IdVec::filled(cfg.num_edges(), false);
        let mut preorder = Vec::new();
        let mut postorder = Vec::new();
        // Each stack frame is a vertex and the position of the next successor edge to try.
        let mut stack: Vec<(NodeId, usize)> = Vec::new();

        let entry = cfg.entry();
        colour[entry] = Colour::Grey;
        preorder.push(entry);
        stack.push((entry, 0));
        while let Some(frame) = stack.last_mut() {
            let (v, next) = *frame;
            let Some(&e) = cfg.succs(v).get(next) else {
                // All successors tried: v is finished.
                stack.pop();
                colour[v] = Colour::Black;
                postorder.push(v);
                continue;
            };
            frame.1 += 1;
            let edge = cfg.edge(e);
            if !edge.kind.is_structural() {
                continue;
            }
            let w = edge.dst;
            match colour[w] {
                Colour::White => {
                    colour[w] = Colour::Grey;
                    preorder.push(w);
                    stack.push((w, 0));
                }
                Colour::Grey => back_edge[e] = true,
                Colour::Black => {}
            }
        }

        let reachable = IdVec::from_vec(
            colour
                .values()
                .iter()
                .map(|&c| c != Colour::White)
                .collect(),
        );
        let topo_order = postorder.iter().rev().copied().collect();
        Dfs {
            back_edge,
            preorder,
            postorder,
            topo_order,
            reachable,
        }
    }

    /// True if `e` is a back edge: a structural edge whose target was on the DFS stack when the
    /// edge was examined (its target is then an ancestor of its source, or the source itself).
    pub fn is_back_edge(&self, e: EdgeId) -> bool {
        self.back_edge[e]
    }

    /// The back-edge flags of all edges.
    pub fn back_edges(&self) -> &IdVec<EdgeId, bool> {
        &self.back_edge
    }

    /// True if `n` is reachable from the entry over structural edges.
    pub fn is_reachable(&self, n: NodeId) -> bool {
        self.reachable[n]
    }

    /// The reachability flags of all vertices.
    pub fn reachable(&self) -> &IdVec<NodeId, bool> {
        &self.reachable
    }

    /// Reachable vertices in the order they were discovered (entry first).
    pub fn preorder(&self) -> &[NodeId] {
        &self.preorder
    }

    /// Reachable vertices in the order they were finished (entry last).
    pub fn postorder(&self) -> &[NodeId] {
        &self.postorder
    }

    /// Reverse postorder: a topological order of the reachable vertices in the graph without
    /// its back edges (every non-back structural edge goes from an earlier to a later vertex).
    pub fn topo_order(&self) -> &[NodeId] {
        &self.topo_order
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::{self, *};
    use crate::testing::cfg;

    fn ids(nodes: &[NodeId]) -> Vec<usize> {
        nodes.iter().map(|n| n.index()).collect()
    }

    #[test]
    fn while_loop_back_edge_and_orders() {
        //   n0 -> n1 <-+        e1: n0->n1  e2: n1->n2  e3: n2->n1 (back)
        //         |    |        e4: n1->n3  e5: n3->EXIT
        //         v    |        e6: n2->n2 (self loop, back)
        //         n3   n2
        let g = cfg(
            4,
            &[
                (0, 1, Flow),
                (1, 2, Flow),
                (2, 1, Flow),
                (1, 3, Flow),
                (3, 4, Return),
                (2, 2, Flow),
            ],
        );
        let d = Dfs::compute(&g);
        let back: Vec<usize> = (0..g.num_edges())
            .filter(|&i| d.is_back_edge(EdgeId::new(i)))
            .collect();
        assert_eq!(back, vec![3, 6]);
        assert_eq!(ids(d.preorder()), vec![0, 1, 2, 3, 4]);
        assert_eq!(ids(d.postorder()), vec![2, 4, 3, 1, 0]);
        assert_eq!(ids(d.topo_order()), vec![0, 1, 3, 4, 2]);
    }

    #[test]
    fn entry_early_exit_and_reentry_are_not_followed() {
        // n0 -EarlyExit-> EXIT -Reentry-> n1 ; n1 is reachable only through the re-entry.
        let g = cfg(2, &[(0, 2, EarlyExit), (2, 1, Reentry), (1, 2, Return)]);
        let d = Dfs::compute(&g);
        assert!(!d.is_back_edge(g.entry_edge()));
        assert!(d.is_reachable(NodeId::new(0)));
        assert!(!d.is_reachable(NodeId::new(1)));
        assert!(!d.is_reachable(g.exit()));
        assert_eq!(ids(d.topo_order()), vec![0]);
    }

    #[test]
    fn long_chain_does_not_overflow_the_stack() {
        let n = 100_000;
        let mut edges: Vec<(usize, usize, EdgeKind)> =
            (0..n - 1).map(|i| (i, i + 1, Flow)).collect();
        edges.push((n - 1, 0, Flow));
        edges.push((n - 1, n, Return));
        let g = cfg(n, &edges);
        let d = Dfs::compute(&g);
        assert_eq!(d.preorder().len(), n + 1);
        assert_eq!(d.back_edges().values().iter().filter(|&&b| b).count(), 1);
        assert_eq!(d.topo_order()[0], g.entry());
    }
}
