//! Chord increments (Ball & Larus 1996 §3.3 "Efficiently computing sums", by the event-counting
//! algorithm of Ball 1994 §3.1-3.2, Fig. 4).
//!
//! Adding `Val(e)` on every DAG edge computes the path number but costs an addition on every
//! edge. Instead, add the edge `END -> START` (its "event" is 0), take a maximum spanning tree
//! of the DAG under a weighting with `END -> START` forced into it, and put on each chord `c` the
//! increment `Inc(c)`: the sum of `Val` around its fundamental cycle, each edge signed `+` if it
//! runs the same way as `c` in the cycle and `-` otherwise (Ball 1994 §3.1). For every directed
//! cycle the sum of `Inc` over its chords equals the sum of `Val` over its edges (Ball 1994,
//! Theorem 3.1.1 from Knuth's theorem); a START-to-END path closed by the tree edge
//! `END -> START` is such a cycle, so **the sum of `Inc` over the chords of a path is its
//! number**. Increments can be negative.
//!
//! The tree is Kruskal's: `END -> START` first, then the DAG edges by decreasing weight, ties by
//! increasing id (so the result is deterministic). [`dag_weights`] carries a weighting of the
//! control-flow graph (such as [`heuristic_weights`](crate::weight::heuristic_weights)) over to
//! the DAG. The increments are computed by Fig. 4's depth-first search of the tree, which visits
//! each tree edge once and each chord twice (`O(E)`): it carries the signed sum of events along
//! the tree path from the root, negating it where the walk changes direction, adds it to every
//! chord met at a vertex, and finally adds each chord's own event. Here the search is iterative
//! and the arithmetic is checked `i128`.

use super::dag::{DagEdgeId, DagEdgeKind, PathDag};
use super::number::NumberedDag;
use super::PathError;
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::mst::UnionFind;

/// A spanning tree of a path DAG and the increments of its chords.
///
/// Invariants: the tree edges plus `END -> START` form a spanning forest of the DAG taken as
/// undirected (a tree over START, END and the live blocks); `chords` lists the other DAG edges
/// in id order; `inc` is 0 on tree edges; for every START-to-END path the sum of `inc` over its
/// edges is the path's number.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Increments {
    /// `in_tree[d]` is true for the DAG edges of the spanning tree.
    pub in_tree: IdVec<DagEdgeId, bool>,
    /// The chords, in id order.
    pub chords: Vec<DagEdgeId>,
    /// `Inc(d)` for chords, 0 for tree edges.
    pub inc: IdVec<DagEdgeId, i128>,
}

/// A vertex reached by the search of Fig. 4.
struct Visit {
    node: NodeId,
    /// The tree edge (extended index) it was reached by, and whether that edge points into it.
    via: Option<(usize, bool)>,
    /// The signed sum of events along the tree path from the root, with the sign convention of
    /// Fig. 4 (relative to the direction of `via`).
    events: i128,
}

/// Weights of the DAG edges from weights of the control-flow edges: `Cfg(e)` gets `w(e)`, the
/// two dummy edges of a back or cut edge `b` get `w(b)`, `Start` gets `w(e0)`, and `EarlyExit`
/// and `ReentryStart` edges get 0.
pub fn dag_weights(
    dag: &PathDag,
    cfg_weights: &IdVec<EdgeId, f64>,
) -> Result<IdVec<DagEdgeId, f64>, PathError> {
    if cfg_weights.len() != dag.num_cfg_edges() {
        return Err(PathError::LengthMismatch {
            expected: dag.num_cfg_edges(),
            found: cfg_weights.len(),
        });
    }
    Ok(IdVec::from_vec(
        dag.edges()
            .map(|(_, edge)| match edge.kind {
                DagEdgeKind::Start => cfg_weights[EdgeId::new(0)],
                DagEdgeKind::Cfg(e)
                | DagEdgeKind::BackStart(e)
                | DagEdgeKind::BackEnd(e)
                | DagEdgeKind::CutStart(e)
                | DagEdgeKind::CutEnd(e) => cfg_weights[e],
                DagEdgeKind::EarlyExit(_) | DagEdgeKind::ReentryStart(_) => 0.0,
            })
            .collect(),
    ))
}

/// The maximum spanning tree of `paths`' DAG under `weights` (with `END -> START` forced) and
/// the increments of its chords (module doc).
pub fn chord_increments(
    paths: &NumberedDag,
    weights: &IdVec<DagEdgeId, f64>,
) -> Result<Increments, PathError> {
    let dag = paths.dag();
    let m = dag.num_edges();
    if weights.len() != m {
        return Err(PathError::LengthMismatch {
            expected: m,
            found: weights.len(),
        });
    }
    // Extended edge indices: the DAG edges, then `m` for END -> START.
    let closing = m;
    let ends = |x: usize| -> (NodeId, NodeId) {
        if x == closing {
            (dag.end(), dag.start())
        } else {
            let e = dag.edge(DagEdgeId::new(x));
            (e.src, e.dst)
        }
    };

    let mut sets = UnionFind::new(dag.num_nodes());
    sets.union(dag.end().index(), dag.start().index());
    let mut order: Vec<DagEdgeId> = (0..m).map(DagEdgeId::new).collect();
    order.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]).then(a.cmp(&b)));
    let mut tree = vec![false; m + 1];
    tree[closing] = true;
    for d in order {
        let (s, t) = ends(d.index());
        tree[d.index()] = sets.union(s.index(), t.index());
    }

    let overflow = |node: NodeId| PathError::IncrementOverflow { node };
    // Events: Val on DAG edges, 0 on END -> START.
    let events = |x: usize| -> Result<i128, PathError> {
        if x == closing {
            return Ok(0);
        }
        let d = DagEdgeId::new(x);
        i128::try_from(paths.val(d)).map_err(|_| overflow(dag.edge(d).src))
    };

    let mut incident: IdVec<NodeId, Vec<usize>> = IdVec::filled(dag.num_nodes(), Vec::new());
    for x in 0..=m {
        let (s, t) = ends(x);
        incident[s].push(x);
        incident[t].push(x);
    }

    // Fig. 4, iteratively.
    let mut inc = vec![0i128; m + 1];
    let mut seen = IdVec::filled(dag.num_nodes(), false);
    let mut stack: Vec<Visit> = Vec::new();
    let roots = std::iter::once(dag.start()).chain((0..dag.num_nodes()).map(NodeId::new));
    for root in roots {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        stack.push(Visit {
            node: root,
            via: None,
            events: 0,
        });
        while let Some(Visit {
            node: v,
            via,
            events: ev,
        }) = stack.pop()
        {
            for &x in &incident[v] {
                if via.is_some_and(|(e, _)| e == x) {
                    continue;
                }
                let (s, t) = ends(x);
                let out_forward = s == v;
                // Dir(e, f): +1 if the walk keeps its direction through v, -1 if it turns.
                let same = via.is_none_or(|(_, in_forward)| in_forward == out_forward);
                let signed = if same {
                    ev
                } else {
                    ev.checked_neg().ok_or_else(|| overflow(v))?
                };
                if tree[x] {
                    let w = if out_forward { t } else { s };
                    if !seen[w] {
                        seen[w] = true;
                        let child = signed.checked_add(events(x)?).ok_or_else(|| overflow(w))?;
                        stack.push(Visit {
                            node: w,
                            via: Some((x, out_forward)),
                            events: child,
                        });
                    }
                } else {
                    inc[x] = inc[x].checked_add(signed).ok_or_else(|| overflow(v))?;
                }
            }
        }
    }

    let mut chords = Vec::new();
    for (x, slot) in inc.iter_mut().enumerate().take(m) {
        if !tree[x] {
            *slot = slot
                .checked_add(events(x)?)
                .ok_or_else(|| overflow(ends(x).0))?;
            chords.push(DagEdgeId::new(x));
        }
    }
    inc.truncate(m);
    tree.truncate(m);
    Ok(Increments {
        in_tree: IdVec::from_vec(tree),
        chords,
        inc: IdVec::from_vec(inc),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::paths::number::number_paths;
    use crate::paths::number::tests::abcdef;
    use crate::testing::cfg;

    /// Weights that make the paper's tree for [`abcdef`]: `Start`, A->C, C->D, D->F, B->C and
    /// E->F are heavy, so the chords are A->B, B->D, D->E and F->EXIT.
    pub(crate) fn abcdef_weights() -> IdVec<DagEdgeId, f64> {
        //                 start A>C A>B B>C B>D C>D D>F D>E E>F F>END
        IdVec::from_vec(vec![10., 10., 1., 5., 1., 10., 10., 1., 5., 1.])
    }

    /// `"n0->n1 (e2)=2, ..."`: the chords and their increments.
    pub(crate) fn show(p: &NumberedDag, incs: &Increments) -> String {
        incs.chords
            .iter()
            .map(|&d| format!("{}={}", p.dag().describe(d), incs.inc[d]))
            .collect::<Vec<_>>()
            .join(", ")
    }

    #[test]
    fn paper_example_increments() {
        // Fundamental cycles: A->B, B->C, back along A->C: 2 + 0 - 0; B->D, back along C->D
        // and B->C: 2 - 0 - 0; D->E, E->F, back along D->F: 1 + 0 - 0; F->END, END->START,
        // START->A, A->C, C->D, D->F: all 0.
        let p = number_paths(&abcdef()).unwrap();
        let incs = chord_increments(&p, &abcdef_weights()).unwrap();
        assert_eq!(
            show(&p, &incs),
            "n0->n1 (e2)=2, n1->n3 (e4)=2, n3->n4 (e7)=1, n5->END (e9)=0"
        );
    }

    #[test]
    fn increments_can_be_negative() {
        // Same graph, but A->B and B->C in the tree and A->C a chord: its cycle runs A->C
        // then back along B->C and A->B, so Inc(A->C) = 0 - 0 - 2 = -2, and B->D keeps 2.
        let p = number_paths(&abcdef()).unwrap();
        let w = IdVec::from_vec(vec![10., 1., 10., 10., 1., 10., 10., 1., 5., 1.]);
        let incs = chord_increments(&p, &w).unwrap();
        assert_eq!(
            show(&p, &incs),
            "n0->n2 (e1)=-2, n1->n3 (e4)=2, n3->n4 (e7)=1, n5->END (e9)=2"
        );
    }

    #[test]
    fn weights_map_to_dummy_edges() {
        use crate::cfg::EdgeKind::*;
        // n0 -> n1, n1 -> n1 (self loop), n1 -> EXIT, n1 early exit, re-entry into n1.
        let g = cfg(
            2,
            &[
                (0, 1, Flow),
                (1, 1, Flow),
                (1, 2, Return),
                (1, 2, EarlyExit),
                (2, 1, Reentry),
            ],
        );
        let p = number_paths(&g).unwrap();
        let w = IdVec::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let dw = dag_weights(p.dag(), &w).unwrap();
        // start, e1, back-end e2, back-start e2, e3, early exit, reentry
        assert_eq!(dw.values(), &[1.0, 2.0, 3.0, 3.0, 4.0, 0.0, 0.0]);
        assert_eq!(
            dag_weights(p.dag(), &IdVec::from_vec(vec![1.0])),
            Err(PathError::LengthMismatch {
                expected: 6,
                found: 1
            })
        );
    }
}
