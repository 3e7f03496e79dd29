//! Count reconstruction from measured counters (Ball & Larus 1994 §3.2, Fig. 6), with exact checks.
//!
//! - [`propagate`]: the unmeasured edges form a forest; Fig. 6 visits it in post-order and
//!   derives each tree edge from the flow equation of the vertex below it. Here the traversal is
//!   iterative, the arithmetic is `i128`, and the signed value of the flow equation is used
//!   instead of `max - min`: a negative or oversized result is an error, not a count. Afterwards
//!   Kirchhoff's law is checked at every vertex, EXIT and the forest roots included (their
//!   equations are the ones propagation does not use).
//! - [`block_counts`]: a block's count is the sum of its incoming edges (the entry's include
//!   `e0`; `Reentry` edges count as entries).
//! - [`solve_from_blocks`] (in `blocks.rs`): the `blocks-naive` mode measures every block; the
//!   edge counts that the flow equations determine are found by repeatedly solving equations
//!   with one unknown.
//!
//! An exact profiler never clamps: every inconsistency is a [`FlowError`] naming the vertex or
//! edge where it shows.

use crate::cfg::Cfg;
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::mst::UnionFind;
use std::fmt;
use thiserror::Error;

mod blocks;
pub use blocks::solve_from_blocks;

/// Which flow equation of a block failed.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Side {
    /// The sum of the block's incoming edges.
    Incoming,
    /// The sum of the block's outgoing edges.
    Outgoing,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Incoming => "incoming",
            Side::Outgoing => "outgoing",
        })
    }
}

/// Measured counts that do not describe a valid flow, or inputs of the wrong shape.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FlowError {
    /// The per-edge input does not have one entry per edge.
    #[error("expected {expected} edge values, got {found}")]
    EdgeCountMismatch {
        /// Number of edges of the graph.
        expected: usize,
        /// Number of values given.
        found: usize,
    },
    /// The per-block input does not have one entry per block.
    #[error("expected {expected} block counts, got {found}")]
    BlockCountMismatch {
        /// Number of blocks of the graph (EXIT excluded).
        expected: usize,
        /// Number of values given.
        found: usize,
    },
    /// The unmeasured edges contain an undirected cycle, so their counts are not determined.
    #[error("unmeasured edge {edge} closes a cycle of unmeasured edges")]
    UnmeasuredCycle {
        /// The edge that closes the cycle.
        edge: EdgeId,
    },
    /// The flow equation of a vertex gives an edge a negative count.
    #[error("edge {edge} derived at vertex {node} has negative count {value}")]
    Negative {
        /// The derived edge.
        edge: EdgeId,
        /// The vertex whose equation was solved.
        node: NodeId,
        /// The value the equation gives.
        value: i128,
    },
    /// The flow equation of a vertex gives an edge a count that does not fit in 64 bits.
    #[error("edge {edge} derived at vertex {node} has count {value}, which exceeds u64")]
    Overflow {
        /// The derived edge.
        edge: EdgeId,
        /// The vertex whose equation was solved.
        node: NodeId,
        /// The value the equation gives.
        value: i128,
    },
    /// Kirchhoff's law fails at a vertex.
    #[error("flow is not conserved at vertex {node}: incoming edges sum to {inflow}, outgoing edges to {outflow}")]
    Unbalanced {
        /// The vertex.
        node: NodeId,
        /// Sum of the counts of its incoming edges.
        inflow: i128,
        /// Sum of the counts of its outgoing edges.
        outflow: i128,
    },
    /// A block's measured count disagrees with the sum of its incoming or outgoing edges.
    #[error("block {node} was entered {count} times but its {side} edges sum to {sum}")]
    BlockMismatch {
        /// The block.
        node: NodeId,
        /// Which of its edges.
        side: Side,
        /// The measured block count.
        count: u64,
        /// The sum of the edge counts.
        sum: i128,
    },
    /// A block count (sum of incoming edge counts) does not fit in 64 bits.
    #[error("the incoming edges of vertex {node} sum to more than u64 can hold")]
    BlockOverflow {
        /// The vertex.
        node: NodeId,
    },
}

/// A checked conversion of a derived count.
fn to_count(value: i128, edge: EdgeId, node: NodeId) -> Result<u64, FlowError> {
    if value < 0 {
        return Err(FlowError::Negative { edge, node, value });
    }
    u64::try_from(value).map_err(|_| FlowError::Overflow { edge, node, value })
}

/// Sum of `count` over the edges of `edges`, skipping `skip`.
fn sum_except(edges: &[EdgeId], count: &IdVec<EdgeId, u64>, skip: Option<EdgeId>) -> i128 {
    edges
        .iter()
        .filter(|&&e| Some(e) != skip)
        .map(|&e| i128::from(count[e]))
        .sum()
}

/// Checks Kirchhoff's law (incoming = outgoing) at every vertex of `cfg`.
pub fn check_flow(cfg: &Cfg, count: &IdVec<EdgeId, u64>) -> Result<(), FlowError> {
    if count.len() != cfg.num_edges() {
        return Err(FlowError::EdgeCountMismatch {
            expected: cfg.num_edges(),
            found: count.len(),
        });
    }
    for node in cfg.nodes() {
        let inflow = sum_except(cfg.preds(node), count, None);
        let outflow = sum_except(cfg.succs(node), count, None);
        if inflow != outflow {
            return Err(FlowError::Unbalanced {
                node,
                inflow,
                outflow,
            });
        }
    }
    Ok(())
}

/// Derives every edge count from the measured ones (Fig. 6). `measured[e]` is `None` for the
/// edges to derive; they must form a forest (no undirected cycle, self loops and parallel pairs
/// included). On success every edge has a count, the measured ones unchanged, and Kirchhoff's
/// law holds at every vertex.
pub fn propagate(
    cfg: &Cfg,
    measured: &IdVec<EdgeId, Option<u64>>,
) -> Result<IdVec<EdgeId, u64>, FlowError> {
    let signed = IdVec::from_vec(
        measured
            .values()
            .iter()
            .map(|m| m.map(i128::from))
            .collect(),
    );
    let (values, derived) = propagate_forest(cfg, &signed)?;
    let mut count = IdVec::from_vec(measured.values().iter().map(|m| m.unwrap_or(0)).collect());
    for &(node, e) in &derived {
        count[e] = to_count(values[e], e, node)?;
    }
    check_flow(cfg, &count)?;
    Ok(count)
}

/// Fig. 6 over signed values: like [`propagate`], but derived values may be negative (used by
/// vertex profiling, Fig. 8, where the edges of dropped chords' cycles get vertex-equivalent
/// values that need not be counts). Kirchhoff's law is checked at every vertex.
pub fn propagate_signed(
    cfg: &Cfg,
    measured: &IdVec<EdgeId, Option<i128>>,
) -> Result<IdVec<EdgeId, i128>, FlowError> {
    let (values, _) = propagate_forest(cfg, measured)?;
    for node in cfg.nodes() {
        let inflow: i128 = cfg.preds(node).iter().map(|&e| values[e]).sum();
        let outflow: i128 = cfg.succs(node).iter().map(|&e| values[e]).sum();
        if inflow != outflow {
            return Err(FlowError::Unbalanced {
                node,
                inflow,
                outflow,
            });
        }
    }
    Ok(values)
}

/// Propagated values, and the derived edges in derivation order with the vertex each came from.
type Derived = (IdVec<EdgeId, i128>, Vec<(NodeId, EdgeId)>);

/// The propagation proper: derives the unmeasured edges (a forest) in post-order, each from the
/// flow equation of the vertex below it. Returns the values and the derived edges in the order
/// they were derived, each with that vertex.
fn propagate_forest(
    cfg: &Cfg,
    measured: &IdVec<EdgeId, Option<i128>>,
) -> Result<Derived, FlowError> {
    if measured.len() != cfg.num_edges() {
        return Err(FlowError::EdgeCountMismatch {
            expected: cfg.num_edges(),
            found: measured.len(),
        });
    }
    let unknown = |e: EdgeId| measured[e].is_none();
    let mut sets = UnionFind::new(cfg.num_nodes());
    for (e, edge) in cfg.edges() {
        if unknown(e) && !sets.union(edge.src.index(), edge.dst.index()) {
            return Err(FlowError::UnmeasuredCycle { edge: e });
        }
    }

    // Pre-order of each tree of the unmeasured forest, with the edge to the parent. Reversed,
    // it is a post-order: a vertex comes after all its children.
    let mut seen = IdVec::filled(cfg.num_nodes(), false);
    let mut order: Vec<(NodeId, EdgeId)> = Vec::new();
    let mut stack: Vec<NodeId> = Vec::new();
    for root in cfg.nodes() {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        stack.push(root);
        while let Some(v) = stack.pop() {
            for &e in cfg.preds(v).iter().chain(cfg.succs(v)) {
                if !unknown(e) {
                    continue;
                }
                let edge = cfg.edge(e);
                let w = if edge.src == v { edge.dst } else { edge.src };
                if !seen[w] {
                    seen[w] = true;
                    order.push((w, e));
                    stack.push(w);
                }
            }
        }
    }

    let mut value = IdVec::from_vec(measured.values().iter().map(|m| m.unwrap_or(0)).collect());
    let sum = |edges: &[EdgeId], value: &IdVec<EdgeId, i128>, skip: EdgeId| -> i128 {
        edges
            .iter()
            .filter(|&&x| x != skip)
            .map(|&x| value[x])
            .sum()
    };
    for &(v, e) in order.iter().rev() {
        // Every other edge at v is measured or a child edge, already derived.
        let inflow = sum(cfg.preds(v), &value, e);
        let outflow = sum(cfg.succs(v), &value, e);
        value[e] = if cfg.edge(e).dst == v {
            outflow - inflow
        } else {
            inflow - outflow
        };
    }
    order.reverse();
    Ok((value, order))
}

/// The count of every vertex: the sum of its incoming edge counts. For the entry this includes
/// `e0` (the number of calls), for a `setjmp` successor its `Reentry` edge, and for EXIT every
/// return and early exit.
pub fn block_counts(
    cfg: &Cfg,
    edge_counts: &IdVec<EdgeId, u64>,
) -> Result<IdVec<NodeId, u64>, FlowError> {
    if edge_counts.len() != cfg.num_edges() {
        return Err(FlowError::EdgeCountMismatch {
            expected: cfg.num_edges(),
            found: edge_counts.len(),
        });
    }
    let mut out = Vec::with_capacity(cfg.num_nodes());
    for node in cfg.nodes() {
        let mut sum = 0u64;
        for &e in cfg.preds(node) {
            sum = sum
                .checked_add(edge_counts[e])
                .ok_or(FlowError::BlockOverflow { node })?;
        }
        out.push(sum);
    }
    Ok(IdVec::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::placement::place_edge_counters;
    use crate::testing::{cfg, diamond};
    use crate::weight::heuristic_weights;

    fn measure(values: &[Option<u64>]) -> IdVec<EdgeId, Option<u64>> {
        IdVec::from_vec(values.to_vec())
    }

    /// `while (c) { if (p) A else B }` (see weight.rs for the picture).
    fn while_if() -> Cfg {
        cfg(
            7,
            &[
                (0, 1, Flow),   // e1
                (1, 2, Flow),   // e2
                (1, 6, Flow),   // e3
                (2, 3, Flow),   // e4
                (2, 4, Flow),   // e5
                (3, 5, Flow),   // e6
                (4, 5, Flow),   // e7
                (5, 1, Flow),   // e8
                (6, 7, Return), // e9
            ],
        )
    }

    #[test]
    fn chords_determine_the_while_loop() {
        // One call, three iterations: then-arm twice, else-arm once.
        let g = while_if();
        let truth = [1, 1, 3, 1, 2, 1, 2, 1, 3, 1];
        let p = place_edge_counters(&g, &heuristic_weights(&g), |_| false);
        let mut m = IdVec::filled(g.num_edges(), None);
        for &c in &p.chords {
            m[c] = Some(truth[c.index()]);
        }
        let counts = propagate(&g, &m);
        assert_eq!(counts.as_ref().map(|c| c.values()), Ok(&truth[..]));
        let blocks = counts.and_then(|c| block_counts(&g, &c));
        assert_eq!(
            blocks.as_ref().map(|b| b.values()),
            Ok(&[1, 4, 3, 2, 1, 3, 1, 1][..])
        );
    }

    #[test]
    fn negative_derived_count_is_an_error() {
        // e1 = 5 but only 3 returns: n3's equation gives e4 = 3 - 5.
        let g = diamond();
        let m = measure(&[None, Some(5), None, None, None, Some(3)]);
        assert_eq!(
            propagate(&g, &m),
            Err(FlowError::Negative {
                edge: EdgeId::new(4),
                node: NodeId::new(3),
                value: -2
            })
        );
    }

    #[test]
    fn oversized_derived_count_is_an_error() {
        let g = cfg(2, &[(0, 1, Flow), (0, 1, Flow), (1, 2, Return)]);
        let m = measure(&[None, Some(u64::MAX), Some(u64::MAX), None]);
        assert_eq!(
            propagate(&g, &m),
            Err(FlowError::Overflow {
                edge: EdgeId::new(3),
                node: NodeId::new(1),
                value: 2 * i128::from(u64::MAX)
            })
        );
    }

    #[test]
    fn unmeasured_cycle_and_bad_lengths_are_errors() {
        let g = diamond();
        let m = measure(&[None, None, None, None, None, Some(1)]);
        assert_eq!(
            propagate(&g, &m),
            Err(FlowError::UnmeasuredCycle {
                edge: EdgeId::new(4)
            })
        );
        assert!(matches!(
            propagate(&g, &measure(&[None])),
            Err(FlowError::EdgeCountMismatch { .. })
        ));
    }

    #[test]
    fn violation_at_a_forest_root_is_caught() {
        // Everything measured: only the final check can see that n0 sends out 3 of its 2.
        let g = diamond();
        let m = measure(&[Some(2), Some(1), Some(2), Some(1), Some(2), Some(2)]);
        assert_eq!(
            propagate(&g, &m),
            Err(FlowError::Unbalanced {
                node: NodeId::new(0),
                inflow: 2,
                outflow: 3
            })
        );
    }

    #[test]
    fn block_count_overflow_is_an_error() {
        let g = cfg(2, &[(0, 1, Flow), (0, 1, Flow), (1, 2, Return)]);
        let c = IdVec::from_vec(vec![1, u64::MAX, 1, 0]);
        assert_eq!(
            block_counts(&g, &c),
            Err(FlowError::BlockOverflow {
                node: NodeId::new(1)
            })
        );
    }
}
