//! The heuristic edge weighting of Ball & Larus 1994 §5 ("A heuristic weighting algorithm"), which
//! estimates edge frequencies from the graph's structure alone so that a maximum spanning tree
//! leaves counters on rarely executed edges.
//!
//! Every loop is assumed to iterate [`LOOP_MULTIPLIER`] times and every branch to be equally
//! likely. The weight of `EXIT -> root` (`e0`) is fixed at 1. In one topological traversal of
//! the back-edge-free graph (reverse postorder of [`Dfs`]), on first visiting a vertex `v`:
//!
//! 1. the weight of `v` is the sum of the weights of its incoming edges that are not back edges
//!    (for the root this includes `e0`);
//! 2. if `v` is a loop entry of weight `W` with `N = |loop-exits(v)|`, each edge of
//!    `loop-exits(v)` gets `W / N`;
//! 3. with `W = weight(v) * LOOP_MULTIPLIER` if `v` is a loop entry, else `W = weight(v)`, and
//!    `W_E` the sum of the weights of `v`'s outgoing loop-exit edges, each of the `N'` outgoing
//!    edges of `v` that are not loop-exit edges gets `(W - W_E) / N'`.
//!
//! An edge (possibly a back edge) keeps the weight of the first rule that assigns it during the
//! traversal: an edge leaving nested loops is weighted by the loop entry visited first.
//!
//! Points the paper leaves open, resolved here:
//! - Only structural edges (`Flow`, `Return`) are weighted by the rules. `EarlyExit` and
//!   `Reentry` edges, which the runtime counts anyway, and every edge whose source is
//!   unreachable from the entry are never assigned and get weight 0.
//! - Rules (1) and (3) read the weights known when `v` is visited. In a reducible graph every
//!   needed weight is known then; in an irreducible graph a loop may contain vertices that
//!   precede its entry in the traversal, and a loop-exit edge of such a loop that has not yet
//!   been weighted by rule (2) counts as 0 at that point.
//! - `W - W_E` can be negative in odd (irreducible, multi-exit) graphs; it is clamped at 0 so
//!   that weights stay non-negative, as a weighting's must (§2).

use crate::cfg::Cfg;
use crate::dfs::Dfs;
use crate::ids::{EdgeId, IdVec};
use crate::loops::Loops;

/// How many times the heuristic assumes each loop iterates (the value of the paper's
/// implementation).
pub const LOOP_MULTIPLIER: f64 = 10.0;

/// The heuristic weighting of `cfg` (Ball & Larus 1994 §5), computing the DFS and loops itself.
pub fn heuristic_weights(cfg: &Cfg) -> IdVec<EdgeId, f64> {
    let dfs = Dfs::compute(cfg);
    let loops = Loops::compute(cfg, &dfs);
    heuristic_weights_with(cfg, &dfs, &loops)
}

/// The heuristic weighting of `cfg` from a precomputed search and its natural loops (both
/// computed on `cfg`). Returns one non-negative weight per edge; `e0` has weight 1.
pub fn heuristic_weights_with(cfg: &Cfg, dfs: &Dfs, loops: &Loops) -> IdVec<EdgeId, f64> {
    let mut weight = IdVec::filled(cfg.num_edges(), 0.0_f64);
    let mut assigned = IdVec::filled(cfg.num_edges(), false);
    weight[cfg.entry_edge()] = 1.0;
    assigned[cfg.entry_edge()] = true;
    // First rule wins: later attempts to weight an assigned edge are ignored.
    let mut assign = |weight: &mut IdVec<EdgeId, f64>, e: EdgeId, w: f64| {
        if !assigned[e] {
            assigned[e] = true;
            weight[e] = w;
        }
    };

    for &v in dfs.topo_order() {
        // Rule (1).
        let vertex_weight: f64 = cfg
            .preds(v)
            .iter()
            .filter(|&&e| !dfs.is_back_edge(e))
            .map(|&e| weight[e])
            .sum();

        // Rule (2).
        let is_entry = loops.is_loop_entry(v);
        if is_entry {
            let exits = loops.loop_exits(v);
            if !exits.is_empty() {
                let share = vertex_weight / exits.len() as f64;
                for &e in exits {
                    assign(&mut weight, e, share);
                }
            }
        }

        // Rule (3).
        let w = if is_entry {
            vertex_weight * LOOP_MULTIPLIER
        } else {
            vertex_weight
        };
        let structural_out = || {
            cfg.succs(v)
                .iter()
                .copied()
                .filter(|&e| cfg.edge(e).kind.is_structural())
        };
        let exit_weight: f64 = structural_out()
            .filter(|&e| loops.is_loop_exit(e))
            .map(|e| weight[e])
            .sum();
        let others = structural_out().filter(|&e| !loops.is_loop_exit(e)).count();
        if others > 0 {
            let share = (w - exit_weight).max(0.0) / others as f64;
            for e in structural_out().filter(|&e| !loops.is_loop_exit(e)) {
                assign(&mut weight, e, share);
            }
        }
    }
    weight
}

/// Ball & Larus's *return heuristic* (Ball & Larus 1993, "Branch prediction for free": a
/// successor that leads to a return without branching again is the unlikely one) applied to a
/// weighting: every `Flow` edge out of a vertex with two or more `Flow` successors into a
/// block from which the function returns through blocks with one `Flow` successor each (at
/// most [`RETURN_CHAIN`] of them, the target included) has its weight divided by `factor`
/// (above 1). Other edges keep theirs; weights stay non-negative; flow is not conserved
/// (the weighting serves a spanning tree and expected record sizes, not counts). Trace mode
/// uses it on static weights (`tally-llvm`'s witness plans): a chain of early returns, such
/// as bzip2's `mainGtU` (`if (c1 != c2) return c1 > c2;` twelve times), is otherwise weighted
/// half-and-half at each test, and its witnesses land on the fall-through edges, one record
/// per test. Returns how many edges it discounted.
pub fn discount_returns(cfg: &Cfg, weights: &mut IdVec<EdgeId, f64>, factor: f64) -> usize {
    use crate::cfg::EdgeKind::{Flow, Return};
    let flows = |n| -> Vec<EdgeId> {
        cfg.succs(n)
            .iter()
            .copied()
            .filter(|&e| cfg.edge(e).kind == Flow)
            .collect()
    };
    let returns = |mut n| {
        for _ in 0..RETURN_CHAIN {
            if cfg.succs(n).iter().any(|&e| cfg.edge(e).kind == Return) {
                return true;
            }
            match flows(n).as_slice() {
                [only] => n = cfg.edge(*only).dst,
                _ => return false,
            }
        }
        false
    };
    let mut discounted = 0;
    for n in cfg.blocks() {
        let out = flows(n);
        if out.len() < 2 {
            continue;
        }
        for e in out {
            let dst = cfg.edge(e).dst;
            if !cfg.is_exit(dst) && returns(dst) {
                weights[e] /= factor;
                discounted += 1;
            }
        }
    }
    discounted
}

/// How many blocks [`discount_returns`] follows from an edge's target to a return.
pub const RETURN_CHAIN: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::testing::{cfg, nested_loops};

    #[test]
    fn while_loop_around_if_then_else() {
        // The shape of Ball & Larus 1994 Fig. 17(a): `while (c) { if (p) A else B }`.
        //
        //          EXIT ──e0──▶ ┌────┐
        //           ▲           │ n0 │
        //           │           └─┬──┘
        //           │             │e1
        //           │     ┌──────▶┌────┐ head
        //           │     │       │ n1 │──────e3─────┐
        //           │     │       └─┬──┘             ▼
        //           │     │         │e2            ┌────┐
        //           │     │       ┌─▼──┐           │ n6 │
        //           │     │       │ n2 │ if        └─┬──┘
        //           │     │       └┬──┬┘             │e9
        //           │     │      e4│  │e5            │
        //           │     │    ┌───▼┐┌▼───┐          │
        //           │     │    │ n3 ││ n4 │          │
        //           │     │    └──┬─┘└─┬──┘          │
        //           │     │     e6│    │e7           │
        //           │     │      ┌▼────▼┐            │
        //           │     └──e8──│  n5  │ latch      │
        //           │            └──────┘            │
        //           └────────────────────────────────┘
        let g = cfg(
            7,
            &[
                (0, 1, Flow),   // e1
                (1, 2, Flow),   // e2
                (1, 6, Flow),   // e3
                (2, 3, Flow),   // e4
                (2, 4, Flow),   // e5
                (3, 5, Flow),   // e6
                (4, 5, Flow),   // e7
                (5, 1, Flow),   // e8 (back edge)
                (6, 7, Return), // e9
            ],
        );
        let w = heuristic_weights(&g);
        // One call enters the loop; the loop exit gets the head's weight 1, the body the
        // remaining 10 - 1 = 9, split evenly by the if.
        assert_eq!(
            w.values(),
            &[1.0, 1.0, 9.0, 1.0, 4.5, 4.5, 4.5, 4.5, 9.0, 1.0]
        );
    }

    #[test]
    fn nested_loops_first_rule_wins() {
        let g = nested_loops();
        let w = heuristic_weights(&g);
        // n1: weight 1, exits {e3, e7} get 1/2 each, e2 = 10.
        // n2: weight 10, exits {e3, e5}: e3 keeps 0.5 (outer loop first), e5 = 5;
        //     e9 = 100 - 0.5.  n3: e4 = 99.5 - 5.  n4: e6 = 5 - 0.5.  n5: e8 = 0.5.
        assert_eq!(
            w.values(),
            &[1.0, 1.0, 10.0, 0.5, 94.5, 5.0, 4.5, 0.5, 0.5, 99.5]
        );
    }

    #[test]
    fn negative_remainder_is_clamped_and_side_edges_are_zero() {
        // A loop head n1 with a 12-way branch (11 parallel edges to n2, one to n3); the only
        // loop exit leaves from n3, whose weight 10/12 is less than the exit's weight 1.
        //
        //   n0 ─e1─▶ n1 ═e2..e12═▶ n2 ─e14─▶ n1 (back)
        //            n1 ──e13────▶ n3 ─e15─▶ n1 (back)
        //                          n3 ─e16─▶ EXIT (loop exit)
        //   n0 ─e17 (EarlyExit)─▶ EXIT ─e18 (Reentry)─▶ n4 ─e19─▶ EXIT   (n4 unreachable)
        let mut edges = vec![(0, 1, Flow)];
        edges.extend(std::iter::repeat_n((1, 2, Flow), 11));
        edges.extend([
            (1, 3, Flow),      // e13
            (2, 1, Flow),      // e14
            (3, 1, Flow),      // e15
            (3, 5, Return),    // e16
            (0, 5, EarlyExit), // e17
            (5, 4, Reentry),   // e18
            (4, 5, Return),    // e19
        ]);
        let g = cfg(5, &edges);
        let w = heuristic_weights(&g);
        let case = 10.0 / 12.0;
        let mut expected = vec![1.0, 1.0];
        expected.extend(std::iter::repeat_n(case, 12));
        let n2: f64 = std::iter::repeat_n(case, 11).sum();
        // e14 carries n2's weight; e15 would get 10/12 - 1 < 0 and is clamped to 0.
        expected.extend([n2, 0.0, 1.0, 0.0, 0.0, 0.0]);
        assert_eq!(w.values(), expected.as_slice());
    }

    #[test]
    fn return_heuristic_discounts_the_early_returns_only() {
        // `if (a) return; if (b) { x; return; } loop: while (c) ...; return;`
        //
        //   n0 -e1-> n1 (return)        n0 -e2-> n2
        //   n2 -e3-> n3 -e4-> n4 (return) n2 -e5-> n5
        //   n5 -e6-> n5 (loop)          n5 -e7-> n6 (return)
        let g = cfg(
            7,
            &[
                (0, 1, Flow),   // e1
                (0, 2, Flow),   // e2
                (2, 3, Flow),   // e3
                (3, 4, Flow),   // e4
                (2, 5, Flow),   // e5
                (5, 5, Flow),   // e6
                (5, 6, Flow),   // e7
                (1, 7, Return), // e8
                (4, 7, Return), // e9
                (6, 7, Return), // e10
            ],
        );
        let mut w = heuristic_weights(&g);
        let before = w.clone();
        assert_eq!(discount_returns(&g, &mut w, 8.0), 3);
        for (e, _) in g.edges() {
            let i = e.index();
            let expect = match i {
                1 | 3 | 7 => before[e] / 8.0, // into n1, n3 (then n4 returns), n6
                _ => before[e],
            };
            assert_eq!(w[e], expect, "e{i}");
        }
    }

    #[test]
    fn return_heuristic_keeps_weights_non_negative_and_moves_only_predicate_edges() {
        for seed in 0..300 {
            let g = crate::testing::random_cfg(seed, 24);
            let mut w = heuristic_weights(&g);
            let before = w.clone();
            discount_returns(&g, &mut w, 8.0);
            for (e, edge) in g.edges() {
                assert!(
                    w[e] >= 0.0 && w[e] <= before[e],
                    "seed {seed} e{}",
                    e.index()
                );
                if w[e] != before[e] {
                    let flows = g
                        .succs(edge.src)
                        .iter()
                        .filter(|&&x| g.edge(x).kind == Flow)
                        .count();
                    assert!(
                        edge.kind == Flow && flows >= 2,
                        "seed {seed} e{}",
                        e.index()
                    );
                }
            }
        }
    }
}
