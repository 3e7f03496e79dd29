//! Chord increments (Ball 1994 §3.1 and §3.2, Fig. 4).
//!
//! `Increment(f)` of a chord `f` is the signed sum of the events on its fundamental cycle
//! `C(f)`, edges in `f`'s direction counting positively (§3.1). Fig. 4 computes all of them in one
//! depth-first search of the tree: the parameter `events` accumulates the events of the tree path
//! from the root, negated at every change of direction, and each chord receives
//! `Dir(e, f) * events` at both of its endpoints.
//!
//! Here the search is iterative and keeps the accumulated sum in a fixed orientation, the
//! *potential*: `pot(EXIT) = 0` and, for a tree edge `u -> v` carrying `Events(u -> v) =
//! events[v]` (module doc), `pot(v) = pot(u) + events[v]`, whichever end the search reaches
//! first. Fig. 4's `events` at `v` is `pot(v)` when the tree edge that reached `v` was walked
//! forwards and `-pot(v)` when it was walked backwards, so the two contributions a chord
//! `u -> w` receives are `+pot(u)` and `-pot(w)`, and
//!
//! ```text
//! Increment(u -> w) = Events(u -> w) + pot(u) - pot(w) = events[w] + pot(u) - pot(w)
//! ```
//!
//! (Fig. 4 adds `Events(f)` after the search; a tree path shared by both visits cancels exactly as
//! in the paper's proof). The same formula proves Theorem 3.1.1 by telescoping: along a directed
//! cycle the `pot` terms cancel and tree edges have increment 0. It holds for any forest, not
//! only a spanning tree, whatever potential each further component's root gets; the root of a
//! component not holding EXIT gets `events[w]` if it is the target `w` of a `Reentry` edge (that
//! edge's increment is then 0, as if it joined the tree) and 0 otherwise.
//!
//! The tree is the caller's choice (§3.1: any spanning tree works). [`EventPlan::with_weights`]
//! takes a maximum spanning tree under a weighting, e.g.
//! [`heuristic_weights`](crate::heuristic_weights), so that increments sit on rarely executed
//! edges; `e0` is always in it and `EarlyExit` and `Reentry` edges never are.

use super::{edge_amount, node_amount, EdgeAction, EventError};
use crate::cfg::{Cfg, EdgeKind};
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::mst::{max_spanning_tree, SpanningTree, TreeClass, UnionFind};

/// The increments of one function's chords and the query increments of its blocks.
///
/// Invariants: tree edges have increment 0; for every edge `u -> w`,
/// `increment = events[w] + end[u] - end[w]`; `start[v] = end[v] - events[v]`; `end[EXIT] = 0`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct EventPlan {
    /// Events per execution of each vertex (EXIT: 0).
    pub(super) events: IdVec<NodeId, u64>,
    /// Tree membership, as given.
    pub(super) in_tree: IdVec<EdgeId, bool>,
    /// Fig. 4's increment of every edge (0 on tree edges).
    pub(super) increment: IdVec<EdgeId, i64>,
    /// What the program does on each edge.
    pub(super) action: IdVec<EdgeId, EdgeAction>,
    /// `QueryInc(Start(v))`.
    pub(super) start: IdVec<NodeId, i64>,
    /// `QueryInc(End(v))`, the potential.
    pub(super) end: IdVec<NodeId, i64>,
}

impl EventPlan {
    /// The plan for `cfg` with `events[v]` events per execution of each vertex (`events[EXIT]`
    /// must be 0) and the tree edges of `tree` left uninstrumented.
    ///
    /// `tree` must contain `e0` and no undirected cycle; it need not span the graph, and may
    /// contain `EarlyExit` or `Reentry` edges (see the module doc of [`events`](super)).
    pub fn compute(
        cfg: &Cfg,
        events: &IdVec<NodeId, u64>,
        tree: &SpanningTree,
    ) -> Result<EventPlan, EventError> {
        check_events(cfg, events)?;
        check_tree(cfg, tree)?;
        let pot = potentials(cfg, events, &tree.in_tree);

        let mut increment = Vec::with_capacity(cfg.num_edges());
        let mut action = Vec::with_capacity(cfg.num_edges());
        for (e, edge) in cfg.edges() {
            let value = i128::from(events[edge.dst]) + pot[edge.src] - pot[edge.dst];
            let inc = edge_amount(value, e)?;
            increment.push(inc);
            action.push(classify(edge.kind, tree.in_tree[e], inc));
        }
        let mut start = Vec::with_capacity(cfg.num_nodes());
        let mut end = Vec::with_capacity(cfg.num_nodes());
        for v in cfg.nodes() {
            end.push(node_amount(pot[v], v)?);
            start.push(node_amount(pot[v] - i128::from(events[v]), v)?);
        }
        Ok(EventPlan {
            events: events.clone(),
            in_tree: tree.in_tree.clone(),
            increment: IdVec::from_vec(increment),
            action: IdVec::from_vec(action),
            start: IdVec::from_vec(start),
            end: IdVec::from_vec(end),
        })
    }

    /// The plan on a maximum spanning tree of `cfg` under `weights` (one per edge), the
    /// `unsplittable` edges forced into the tree as in
    /// [`place_edge_counters`](crate::place_edge_counters). A forced edge that would close a
    /// cycle stays a chord.
    pub fn with_weights(
        cfg: &Cfg,
        events: &IdVec<NodeId, u64>,
        weights: &IdVec<EdgeId, f64>,
        unsplittable: impl Fn(EdgeId) -> bool,
    ) -> Result<EventPlan, EventError> {
        if weights.len() != cfg.num_edges() {
            return Err(EventError::EdgeCountMismatch {
                expected: cfg.num_edges(),
                found: weights.len(),
            });
        }
        let tree = max_spanning_tree(cfg, |e| {
            if unsplittable(e) {
                TreeClass::Forced
            } else {
                TreeClass::Weighted(weights[e])
            }
        });
        Self::compute(cfg, events, &tree)
    }

    /// Events per execution of vertex `v`.
    pub fn events(&self, v: NodeId) -> u64 {
        self.events[v]
    }

    /// True for the tree edges.
    pub fn is_tree_edge(&self, e: EdgeId) -> bool {
        self.in_tree[e]
    }

    /// Fig. 4's `Increment(e)`: 0 for tree edges. For an `EarlyExit` chord `v -> EXIT` it is
    /// `QueryInc(End(v))`, which is never instrumented (see [`EventPlan::action`]).
    pub fn increment(&self, e: EdgeId) -> i64 {
        self.increment[e]
    }

    /// What the program does when `e` is traversed.
    pub fn action(&self, e: EdgeId) -> EdgeAction {
        self.action[e]
    }

    /// The edges that carry code, with their non-zero increments, in id order.
    pub fn instrumented(&self) -> impl Iterator<Item = (EdgeId, i64)> + '_ {
        instrumented(&self.action)
    }

    /// The chords whose increment is 0, which stay uninstrumented, in id order (`EarlyExit`
    /// edges excluded).
    pub fn zero_chords(&self) -> impl Iterator<Item = EdgeId> + '_ {
        zero_chords(&self.action)
    }
}

/// The edges of `action` that carry code.
pub(super) fn instrumented(
    action: &IdVec<EdgeId, EdgeAction>,
) -> impl Iterator<Item = (EdgeId, i64)> + '_ {
    action.iter().filter_map(|(e, a)| match a {
        EdgeAction::Add(x) => Some((e, *x)),
        _ => None,
    })
}

/// The chords of `action` with increment 0.
pub(super) fn zero_chords(action: &IdVec<EdgeId, EdgeAction>) -> impl Iterator<Item = EdgeId> + '_ {
    action
        .iter()
        .filter(|(_, a)| **a == EdgeAction::ZeroChord)
        .map(|(e, _)| e)
}

/// The action of an edge of `kind` with increment `inc`.
pub(super) fn classify(kind: EdgeKind, in_tree: bool, inc: i64) -> EdgeAction {
    if kind == EdgeKind::EarlyExit {
        EdgeAction::Abandon
    } else if in_tree {
        EdgeAction::Tree
    } else if inc == 0 {
        EdgeAction::ZeroChord
    } else {
        EdgeAction::Add(inc)
    }
}

fn check_events(cfg: &Cfg, events: &IdVec<NodeId, u64>) -> Result<(), EventError> {
    if events.len() != cfg.num_nodes() {
        return Err(EventError::EventCountMismatch {
            expected: cfg.num_nodes(),
            found: events.len(),
        });
    }
    let exit = cfg.exit();
    if events[exit] != 0 {
        return Err(EventError::ExitEvents {
            node: exit,
            events: events[exit],
        });
    }
    Ok(())
}

fn check_tree(cfg: &Cfg, tree: &SpanningTree) -> Result<(), EventError> {
    if tree.in_tree.len() != cfg.num_edges() {
        return Err(EventError::EdgeCountMismatch {
            expected: cfg.num_edges(),
            found: tree.in_tree.len(),
        });
    }
    if !tree.in_tree[cfg.entry_edge()] {
        return Err(EventError::EntryNotInTree);
    }
    let mut sets = UnionFind::new(cfg.num_nodes());
    for e in tree.tree_edges() {
        let edge = cfg.edge(e);
        if !sets.union(edge.src.index(), edge.dst.index()) {
            return Err(EventError::TreeCycle { edge: e });
        }
    }
    Ok(())
}

/// Fig. 4: the potential of every vertex, by an iterative search of each component of the
/// (acyclic) tree edges. Each tree edge is examined from both ends, so this is O(V + E).
fn potentials(
    cfg: &Cfg,
    events: &IdVec<NodeId, u64>,
    in_tree: &IdVec<EdgeId, bool>,
) -> IdVec<NodeId, i128> {
    let mut pot = IdVec::filled(cfg.num_nodes(), 0i128);
    let mut seen = IdVec::filled(cfg.num_nodes(), false);
    let exit = cfg.exit();
    // EXIT first; then components re-entered by a `Reentry` edge, rooted so that the edge
    // needs no increment; then the rest (dead code) at 0.
    let reentered = cfg.succs(exit).iter().filter_map(|&e| {
        let edge = cfg.edge(e);
        (edge.kind == EdgeKind::Reentry).then(|| (edge.dst, i128::from(events[edge.dst])))
    });
    let roots = std::iter::once((exit, 0))
        .chain(reentered)
        .chain(cfg.nodes().map(|v| (v, 0)));
    let mut stack = Vec::new();
    for (root, value) in roots {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        pot[root] = value;
        stack.push(root);
        while let Some(v) = stack.pop() {
            // Forwards along `v -> w`: w's events are added.
            for &f in cfg.succs(v) {
                let w = cfg.edge(f).dst;
                if in_tree[f] && !seen[w] {
                    seen[w] = true;
                    pot[w] = pot[v] + i128::from(events[w]);
                    stack.push(w);
                }
            }
            // Backwards along `w -> v`: v's events are taken off again.
            for &f in cfg.preds(v) {
                let w = cfg.edge(f).src;
                if in_tree[f] && !seen[w] {
                    seen[w] = true;
                    pot[w] = pot[v] - i128::from(events[v]);
                    stack.push(w);
                }
            }
        }
    }
    pot
}

#[cfg(test)]
mod tests {
    use super::super::fig1::{self, A, C, P, Q, R, X};
    use super::*;
    use crate::testing::cfg;

    #[test]
    fn figure_1_increments() {
        // Ball 1994 Fig. 1/3: w = +P +EXIT, x = +P +Q +A +R +C, y = +P +Q +B +R +C,
        // z = -C +EXIT.
        let g = fig1::cfg();
        let inc = |e: EdgeId| fig1::symbolic(|ev| fig1::plan(ev).increment(e));
        assert_eq!(inc(fig1::W), "+P +EXIT");
        assert_eq!(inc(fig1::X_EDGE), "+P +Q +A +R +C");
        assert_eq!(inc(fig1::Y), "+P +Q +B +R +C");
        assert_eq!(inc(fig1::Z), "-C +EXIT");
        for (e, _) in g.edges() {
            if ![fig1::W, fig1::X_EDGE, fig1::Y, fig1::Z].contains(&e) {
                assert_eq!(inc(e), "0", "tree edge {e}");
            }
        }
        // Numerically, with P..EXIT = 1, 2, 4, 8, 16, 32, 64.
        let plan = fig1::plan(&fig1::powers());
        let got: Vec<(EdgeId, i64)> = plan.instrumented().collect();
        assert_eq!(
            got,
            vec![
                (fig1::W, 1 + 64),
                (fig1::X_EDGE, 1 + 2 + 4 + 16 + 32),
                (fig1::Y, 1 + 2 + 8 + 16 + 32),
                (fig1::Z, 64 - 32),
            ]
        );
        // The path P -> Q -> A -> R -> EXIT of §1: Increment(x) + Increment(z).
        let path = [P, Q, A, R, X].map(|v| plan.events(v)).iter().sum::<u64>();
        assert_eq!(
            plan.increment(fig1::X_EDGE) + plan.increment(fig1::Z),
            path as i64
        );
    }

    #[test]
    fn zero_chords_are_reported_separately() {
        // Only C has events: w's cycle (P, EXIT) misses C, so w needs no code; z's cycle runs
        // against C.
        let mut events = IdVec::filled(fig1::cfg().num_nodes(), 0u64);
        events[C] = 3;
        let plan = fig1::plan(&events);
        assert_eq!(
            plan.instrumented().collect::<Vec<_>>(),
            vec![(fig1::X_EDGE, 3), (fig1::Y, 3), (fig1::Z, -3)]
        );
        assert_eq!(plan.zero_chords().collect::<Vec<_>>(), vec![fig1::W]);
        assert_eq!(plan.action(fig1::W), EdgeAction::ZeroChord);
        assert_eq!(plan.action(EdgeId::new(0)), EdgeAction::Tree);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let g = fig1::cfg();
        let tree = fig1::tree();
        let events = fig1::powers();
        let short = IdVec::from_vec(vec![1u64; 3]);
        assert_eq!(
            EventPlan::compute(&g, &short, &tree),
            Err(EventError::EventCountMismatch {
                expected: 8,
                found: 3
            })
        );
        let mut exit_events = events.clone();
        exit_events[g.exit()] = 1;
        assert_eq!(
            EventPlan::compute(&g, &exit_events, &tree),
            Err(EventError::ExitEvents {
                node: g.exit(),
                events: 1
            })
        );
        let mut no_entry = tree.clone();
        no_entry.in_tree[g.entry_edge()] = false;
        assert_eq!(
            EventPlan::compute(&g, &events, &no_entry),
            Err(EventError::EntryNotInTree)
        );
        let mut cycle = tree.clone();
        cycle.in_tree[fig1::W] = true;
        // w closes EXIT -e0-> P -w-> n6 -e10-> EXIT; in id order e10 is the edge that closes it.
        assert_eq!(
            EventPlan::compute(&g, &events, &cycle),
            Err(EventError::TreeCycle {
                edge: EdgeId::new(10)
            })
        );
        let mut huge = events.clone();
        huge[A] = u64::MAX;
        assert!(matches!(
            EventPlan::compute(&g, &huge, &tree),
            Err(EventError::IncrementOverflow { .. })
        ));
        assert!(matches!(
            EventPlan::with_weights(&g, &events, &IdVec::from_vec(vec![1.0]), |_| false),
            Err(EventError::EdgeCountMismatch { .. })
        ));
    }

    #[test]
    fn forest_components_get_rooted_at_their_reentry() {
        //   EXIT -e0-> n0 -e1-> EXIT (return)
        //   n0 -e2-> EXIT (early exit);  EXIT -e3-> n1 (re-entry);  n1 -e4-> EXIT (early exit)
        //   n1 -e5-> n2;  n2 -e6-> EXIT (early exit)
        use EdgeKind::*;
        let n = NodeId::new;
        let g = cfg(
            3,
            &[
                (0, 3, Return),
                (0, 3, EarlyExit),
                (3, 1, Reentry),
                (1, 3, EarlyExit),
                (1, 2, Flow),
                (2, 3, EarlyExit),
            ],
        );
        let events = IdVec::from_vec(vec![5, 7, 11, 0]);
        let plan =
            match EventPlan::with_weights(&g, &events, &crate::heuristic_weights(&g), |_| false) {
                Ok(p) => p,
                Err(err) => panic!("{err}"),
            };
        // {n1, n2} is a component of its own, rooted at the re-entered n1: the re-entry
        // needs no code and the counter is exact at the start of n1.
        assert_eq!(plan.action(EdgeId::new(3)), EdgeAction::ZeroChord);
        assert_eq!(plan.action(EdgeId::new(4)), EdgeAction::Abandon);
        assert_eq!(plan.start[n(1)], 0);
        assert_eq!(plan.end[n(2)], 18);
    }
}
