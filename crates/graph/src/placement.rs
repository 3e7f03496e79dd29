//! Edge-counter placement for edge profiling, `Eprof(Ecnt)` of Ball & Larus 1994 §3.2: counters go
//! on the chords of a maximum spanning tree, the edges whose counts the flow law cannot derive from
//! the others (Knuth: a set of counted edges determines every edge count iff the uncounted edges
//! contain no undirected cycle).
//!
//! The tree is seeded with `e0` (`EXIT -> entry`, never counted; its derived count is the number
//! of calls) and with the edges that cannot carry a counter (`unsplittable`); the `EarlyExit` and
//! `Reentry` edges, counted by the runtime, are kept out of it (§3.2, Fig. 7). Every other edge
//! competes by its weight, so that counters land where the weighting predicts few executions.
//!
//! [`place_edge_counters_exits_in_tree`] is the alternative for early exits: the `EarlyExit`
//! edges go into the tree and their counts are derived like any tree edge's, so the runtime
//! needs no record of the frame; the caller compares the two placements' costs.

use crate::cfg::Cfg;
use crate::ids::{EdgeId, IdVec};
use crate::mst::{max_spanning_tree, max_spanning_tree_exits_in_tree, SpanningTree, TreeClass};

/// Where the edge counters of one function go.
///
/// Invariant: `chords` lists, in id order, exactly the edges not in `tree`; they include every
/// `Reentry` edge, every entry of `tree.failed_forced` and, unless the placement was made by
/// [`place_edge_counters_exits_in_tree`], every `EarlyExit` edge.
#[derive(Clone, PartialEq, Debug)]
pub struct EdgePlacement {
    /// The spanning forest of uncounted edges.
    pub tree: SpanningTree,
    /// The edges that need a count: all non-tree edges, in id order.
    pub chords: Vec<EdgeId>,
}

/// Places edge counters on the chords of a maximum spanning tree of `cfg` under `weights`.
/// `unsplittable` edges are forced into the tree (if they would close a cycle they are listed in
/// `tree.failed_forced` and remain chords).
pub fn place_edge_counters(
    cfg: &Cfg,
    weights: &IdVec<EdgeId, f64>,
    unsplittable: impl Fn(EdgeId) -> bool,
) -> EdgePlacement {
    place(cfg, weights, unsplittable, false)
}

/// Places edge counters like [`place_edge_counters`], with every `EarlyExit` edge in the tree
/// (see [`max_spanning_tree_exits_in_tree`]): no early-exit edge is a chord, and `e0` is one
/// when the entry has an early exit.
pub fn place_edge_counters_exits_in_tree(
    cfg: &Cfg,
    weights: &IdVec<EdgeId, f64>,
    unsplittable: impl Fn(EdgeId) -> bool,
) -> EdgePlacement {
    place(cfg, weights, unsplittable, true)
}

fn place(
    cfg: &Cfg,
    weights: &IdVec<EdgeId, f64>,
    unsplittable: impl Fn(EdgeId) -> bool,
    exits_in_tree: bool,
) -> EdgePlacement {
    assert_eq!(
        weights.len(),
        cfg.num_edges(),
        "weighting has {} entries for a graph with {} edges",
        weights.len(),
        cfg.num_edges()
    );
    let class = |e| {
        if unsplittable(e) {
            TreeClass::Forced
        } else {
            TreeClass::Weighted(weights[e])
        }
    };
    let tree = if exits_in_tree {
        max_spanning_tree_exits_in_tree(cfg, class)
    } else {
        max_spanning_tree(cfg, class)
    };
    let chords = tree.chords().collect();
    EdgePlacement { tree, chords }
}

/// The cost of a placement under a weighting: the sum of its chords' weights (§2: "the cost of
/// a set of edges is the sum of the weights of the edges in the set").
pub fn placement_cost(placement: &EdgePlacement, weights: &IdVec<EdgeId, f64>) -> f64 {
    placement.chords.iter().map(|&e| weights[e]).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::testing::cfg;
    use crate::weight::heuristic_weights;

    #[test]
    fn while_loop_counts_the_rare_edges() {
        // The Fig. 17(a) shape (see weight.rs): `while (c) { if (p) A else B }`.
        //   e1 n0->n1  e2 n1->n2  e3 n1->n6  e4 n2->n3  e5 n2->n4
        //   e6 n3->n5  e7 n4->n5  e8 n5->n1  e9 n6->EXIT
        let g = cfg(
            7,
            &[
                (0, 1, Flow),
                (1, 2, Flow),
                (1, 6, Flow),
                (2, 3, Flow),
                (2, 4, Flow),
                (3, 5, Flow),
                (4, 5, Flow),
                (5, 1, Flow),
                (6, 7, Return),
            ],
        );
        let w = heuristic_weights(&g);
        let p = place_edge_counters(&g, &w, |_| false);
        // |E| - |V| + 1 = 10 - 8 + 1 = 3 counters: both arms of the if (weight 4.5 each, the
        // heavier loop edges stay in the tree) and one of the weight-1 edges e1, e3, e9 outside
        // the loop, the one with the highest id losing the tie.
        let chords: Vec<usize> = p.chords.iter().map(|e| e.index()).collect();
        assert_eq!(chords, vec![6, 7, 9]);
        assert_eq!(placement_cost(&p, &w), 4.5 + 4.5 + 1.0);
    }

    /// Ball & Larus 1994 §3.2 (after Knuth and Stevenson): under the exact counts of a run, the
    /// chords of a maximum spanning tree execute the fewest increments of all spanning-tree
    /// placements. Checked against every spanning tree of small random graphs (e0 in the
    /// tree, early-exit and re-entry edges chords in both): the bound docs/log/sese.md's seventh
    /// round measures with `edge-exact-nosese` and `tally placements`' `eprof-exact`.
    #[test]
    fn exact_weights_give_the_fewest_increments_of_all_spanning_trees() {
        use crate::mst::UnionFind;
        use crate::testing::random_run;
        let mut checked = 0;
        for seed in 0..400 {
            let (g, counts) = random_run(seed, 6);
            let w: IdVec<EdgeId, f64> =
                IdVec::from_vec(counts.iter().map(|(_, &c)| c as f64).collect());
            let p = place_edge_counters(&g, &w, |_| false);
            let cost = |chords: &mut dyn Iterator<Item = EdgeId>| -> u64 {
                chords.map(|e| counts[e]).sum()
            };
            let placed = cost(&mut p.chords.iter().copied());
            // The edges a tree may hold (e0 is always in it, the others' kinds never are).
            let free: Vec<EdgeId> = g
                .edges()
                .filter(|(e, x)| *e != g.entry_edge() && matches!(x.kind, Flow | Return))
                .map(|(e, _)| e)
                .collect();
            if free.len() > 16 {
                continue;
            }
            let mut best = u64::MAX;
            for mask in 0u32..(1 << free.len()) {
                let mut uf = UnionFind::new(g.num_nodes());
                let e0 = g.edge(g.entry_edge());
                uf.union(e0.src.index(), e0.dst.index());
                let mut tree = vec![false; g.num_edges()];
                tree[0] = true;
                let mut acyclic = true;
                for (i, &e) in free.iter().enumerate() {
                    if mask & (1 << i) != 0 {
                        let x = g.edge(e);
                        acyclic &= uf.union(x.src.index(), x.dst.index());
                        tree[e.index()] = true;
                    }
                }
                // An acyclic set as large as Kruskal's maximal forest spans every component.
                if acyclic && tree.iter().filter(|&&t| t).count() == p.tree.tree_edges().count() {
                    let mut chords = g.edges().map(|(e, _)| e).filter(|e| !tree[e.index()]);
                    best = best.min(cost(&mut chords));
                }
            }
            assert_eq!(
                placed, best,
                "seed {seed}: max spanning tree chords {placed}, best tree {best}"
            );
            checked += 1;
        }
        assert!(
            checked > 100,
            "only {checked} graphs small enough to enumerate"
        );
    }

    #[test]
    fn unsplittable_edge_stays_uncounted() {
        let g = cfg(2, &[(0, 1, Flow), (0, 1, Flow), (1, 2, Return)]);
        let w = IdVec::from_vec(vec![1.0, 0.5, 0.25, 1.0]);
        let p = place_edge_counters(&g, &w, |e| e == EdgeId::new(2));
        assert_eq!(p.chords, vec![EdgeId::new(1), EdgeId::new(3)]);
        assert!(p.tree.failed_forced.is_empty());
    }
}
