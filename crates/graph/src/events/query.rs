//! Query increments (Ball 1994 §3.3): what to add to the counter at a point of an execution to
//! get the exact number of events executed so far by the activation.
//!
//! The paper adds, for each edge `g`, a chord `g' = tgt(g) -> root` without events and takes its
//! Fig. 4 increment. In the potential form of `increments.rs` that increment is the potential
//! of `tgt(g)` less that of the root, so no extra chords are needed: with vertices split as in
//! Fig. 2 (potential `pot(v) - events[v]` at `v_in`, `pot(v)` at `v_out`, 0 at the root's
//! `v_in` and at EXIT),
//!
//! - `QueryInc(Start(v)) = pot(v) - events[v]` (the chord `v_in -> root`; this is also
//!   `QueryInc(g)` of every edge `g` into `v`, the paper's query after executing `g`),
//! - `QueryInc(End(v)) = pot(v)` (the chord `v_out -> root`; the paper's `QueryInc(v)`),
//! - `QueryInc(Within(v, k)) = pot(v) - events[v] + k`: increments sit on edges, so the counter
//!   does not move inside a block.
//!
//! The proof is the paper's: an incomplete execution from the entry to the point, closed by
//! `g'`, is a directed cycle, and Theorem 3.1.1 applies to it. [`QueryTable`] lists the values
//! for every vertex and edge in O(V + E).

use super::{EventError, EventPlan};
use crate::cfg::Cfg;
use crate::ids::{EdgeId, IdVec, NodeId};

/// A point of an activation where the event count can be queried (module doc of
/// [`events`](super)).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum QueryPoint {
    /// At the start of the block, after the increment of the edge that entered it, before any
    /// of its events. `Start(EXIT)` is after the activation returned.
    Start(NodeId),
    /// At the end of the block, after all its events, before the increment of the edge that
    /// leaves it.
    End(NodeId),
    /// Inside the block after `events_before` of its events.
    Within {
        /// The block.
        block: NodeId,
        /// How many of its events have been executed, at most all of them.
        events_before: u64,
    },
}

impl QueryPoint {
    /// The vertex the point lies in.
    pub fn block(self) -> NodeId {
        match self {
            QueryPoint::Start(v) | QueryPoint::End(v) => v,
            QueryPoint::Within { block, .. } => block,
        }
    }
}

/// The query increments of every vertex and edge of one function.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct QueryTable {
    /// `QueryInc(Start(v))` for every vertex (0 for EXIT).
    pub start: IdVec<NodeId, i64>,
    /// `QueryInc(End(v))` for every vertex (0 for EXIT).
    pub end: IdVec<NodeId, i64>,
    /// The paper's `QueryInc(g)`: just after edge `g` (and its increment), before the events of
    /// its target. Equal to `start` of the target.
    pub after_edge: IdVec<EdgeId, i64>,
}

impl EventPlan {
    /// `QueryInc(point)`: `counter + QueryInc(point)` is the number of events the activation has
    /// executed when it reaches `point` (its contribution being `counter`).
    pub fn query_inc(&self, point: QueryPoint) -> Result<i64, EventError> {
        let v = point.block();
        let (Some(&start), Some(&events)) = (
            self.start.values().get(v.index()),
            self.events.values().get(v.index()),
        ) else {
            return Err(EventError::NotABlock { node: v });
        };
        let k = match point {
            QueryPoint::Start(_) => 0,
            QueryPoint::End(_) => events,
            QueryPoint::Within { events_before, .. } => events_before,
        };
        if k > events {
            return Err(EventError::PastEnd {
                node: v,
                events_before: k,
                events,
            });
        }
        // Between start[v] and end[v], both of which fit in i64.
        super::node_amount(i128::from(start) + i128::from(k), v)
    }

    /// `QueryInc(Start(v))`.
    ///
    /// # Panics
    /// If `v` is not a vertex of the plan's graph.
    pub fn query_start(&self, v: NodeId) -> i64 {
        self.start[v]
    }

    /// `QueryInc(End(v))`.
    ///
    /// # Panics
    /// If `v` is not a vertex of the plan's graph.
    pub fn query_end(&self, v: NodeId) -> i64 {
        self.end[v]
    }

    /// The query increments of every vertex and edge of `cfg`, the graph the plan was computed
    /// for.
    pub fn query_table(&self, cfg: &Cfg) -> QueryTable {
        QueryTable {
            start: self.start.clone(),
            end: self.end.clone(),
            after_edge: IdVec::from_vec(
                cfg.edges().map(|(_, edge)| self.start[edge.dst]).collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fig1::{self, A, B, C, P, Q, R, X};
    use super::*;

    #[test]
    fn figure_1_query_increments() {
        // After P -> Q nothing has been counted (QueryInc = +P +Q); after P -> Q -> A the
        // counter holds R and C too early (QueryInc(A) = -R -C); Fig. 5: QueryInc(B) = -R -C.
        let q = |v: NodeId| fig1::symbolic(|ev| fig1::plan(ev).query_end(v));
        let expected = [
            (P, "+P"),
            (Q, "+P +Q"),
            (A, "-R -C"),
            (B, "-R -C"),
            (R, "-C"),
            (C, "0"),
            (X, "0"),
        ];
        for (v, formula) in expected {
            assert_eq!(q(v), formula, "QueryInc({v})");
        }
        // Before B's events: the edge query of y = Q -> B.
        let y = fig1::symbolic(|ev| fig1::plan(ev).query_table(&fig1::cfg()).after_edge[fig1::Y]);
        assert_eq!(y, "-B -R -C");
    }

    #[test]
    fn figure_1_queries_along_a_path() {
        // P -> Q -> A -> R -> EXIT with events 1, 2, 4, 16, 64: counter + QueryInc is the
        // running total at the start and end of every block.
        let g = fig1::cfg();
        let plan = fig1::plan(&fig1::powers());
        let path = [
            EdgeId::new(0),
            EdgeId::new(1),
            fig1::X_EDGE,
            EdgeId::new(5),
            fig1::Z,
            EdgeId::new(10),
        ];
        let (mut counter, mut truth) = (0i64, 0i64);
        for e in path {
            counter += plan.action(e).amount();
            let v = g.edge(e).dst;
            assert_eq!(counter + plan.query_start(v), truth, "start of {v}");
            for k in 0..=plan.events(v) {
                let within = plan.query_inc(QueryPoint::Within {
                    block: v,
                    events_before: k,
                });
                assert_eq!(within.map(|q| counter + q), Ok(truth + k as i64));
            }
            truth += plan.events(v) as i64;
            assert_eq!(counter + plan.query_end(v), truth, "end of {v}");
        }
        // Back at EXIT the counter alone is exact.
        assert_eq!(counter, 1 + 2 + 4 + 16 + 64);
    }

    #[test]
    fn points_outside_the_graph_are_errors() {
        let plan = fig1::plan(&fig1::powers());
        assert_eq!(
            plan.query_inc(QueryPoint::Start(NodeId::new(99))),
            Err(EventError::NotABlock {
                node: NodeId::new(99)
            })
        );
        assert_eq!(
            plan.query_inc(QueryPoint::Within {
                block: C,
                events_before: 33
            }),
            Err(EventError::PastEnd {
                node: C,
                events_before: 33,
                events: 32
            })
        );
        assert_eq!(plan.query_inc(QueryPoint::End(C)), Ok(0));
    }
}
