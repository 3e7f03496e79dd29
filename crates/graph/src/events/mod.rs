//! Exact event counting with on-line queries, after Ball, *Efficiently Counting Program Events
//! with Support for On-Line Queries* (TOPLAS 16(5), 1994; cited as Ball 1994).
//!
//! One aggregate counter is kept instead of one counter per edge. Every block `v` has a constant
//! number of events `events[v]` per execution (instructions, memory accesses, whatever the front
//! end counts; EXIT has none). The chords of a spanning tree get signed increments so that the
//! sum of the increments of the chords an execution traverses is the number of events it
//! executed; a query increment corrects the counter at any point in between; calls are queries,
//! so the counter is exact whenever another function runs.
//!
//! - [`increments`](EventPlan::compute) (`increments.rs`): §3.1 and §3.2, the increments of the
//!   chords by the O(E) depth-first search of Fig. 4;
//! - [`query`](EventPlan::query_inc) (`query.rs`): §3.3, the query increment of every point, vertex
//!   and edge;
//! - [`calls`](CallPlan) (`calls.rs`): §4 and footnote 3, calls as queries with their
//!   adjustments folded into neighbouring chords where possible, and the inclusive per-call-site
//!   counters `cnt_{P,s}`.
//!
//! # Vertex events on edges (Fig. 2)
//!
//! Fig. 2 turns each vertex `v` into an edge `v_in -> v_out` carrying `Events(v)`. Here instead
//! every edge `u -> v` carries the events of its target, `Events(u -> v) = events[v]` (so `e0`
//! carries `events[n0]`, a `Reentry` edge the events of the block it re-enters, and edges into
//! EXIT nothing). This gives exactly the increments of Fig. 2 with every vertex edge
//! `v_in -> v_out` in the spanning tree (vertex edges are not control transfers and cannot carry
//! code, so they must be tree edges): a fundamental cycle through `v` either enters by an incoming
//! and leaves by an outgoing edge of `v` (the vertex edge lies on the cycle, with or against it,
//! and so does `±events[v]` of the incoming edge), or uses two incoming edges (the vertex edge
//! is not on the cycle, and `+events[v] - events[v]` cancels), or two outgoing ones (neither).
//!
//! # The counter
//!
//! The program keeps one `u64` counter for all functions; increments are `i64` added with
//! wrapping arithmetic, so the counter is exact modulo 2^64 and may be "negative" between query
//! points. Each activation of a function *contributes* the sum of the increments it applied.
//! `counter + QueryInc(point)` is the number of events executed so far when every other live
//! activation's contribution is exact, which calls as queries guarantee (see [`CallPlan`]).
//!
//! # Query points
//!
//! A query point is a place in one activation, named by a [`QueryPoint`]:
//!
//! - `Start(v)`: at the start of block `v`, after the increment of the edge that entered it
//!   has been applied, before any of `v`'s events;
//! - `End(v)`: at the end of block `v`, after all its events, before the increment of the edge
//!   that leaves it;
//! - `Within { block: v, events_before: k }`: inside `v` after exactly `k` of its events
//!   (`0 <= k <= events[v]`; `k = 0` is `Start(v)`, `k = events[v]` is `End(v)`).
//!
//! Increments sit on edges, so the counter does not change inside a block and
//! `QueryInc(Within(v, k)) = QueryInc(Start(v)) + k`. At every query point,
//! `contribution + QueryInc(point)` equals the events this activation has executed since its
//! entry. `Start(EXIT)` (after a return) has query increment 0: the contribution of a finished
//! activation is exact (Theorem 3.1.1).
//!
//! # Early exits and re-entries (footnote 2)
//!
//! An activation is abandoned (`EarlyExit` edge `v -> EXIT`) only during a call in `v`, at a
//! point `Within(v, k)`. The rule is that **the contribution is exact when the frame is
//! abandoned**: either the call was adjusted as a query ([`CallPlan`]: the counter is exact at
//! every call, so nothing is left to do), or, for a call that was not, the runtime adds
//! `QueryInc(Within(v, k))` when it abandons the frame. `EarlyExit` edges therefore never carry
//! code ([`EdgeAction::Abandon`]), whether or not they are tree edges, and no frame records are
//! needed for event counting.
//!
//! A re-entry (`Reentry` edge `EXIT -> w`, the second return of `setjmp`) resumes an abandoned
//! activation, whose contribution is exact, at `Start(w)`. Its chord increment from Fig. 4 is
//! `events[w] - pot(w) = -QueryInc(Start(w))`: the re-entry point is a query point whose
//! correction is subtracted when control comes back (`counter += (ret != 0) * increment`), after
//! which the invariant above holds again. If the re-entry edge is a tree edge, `QueryInc(Start(w))`
//! is 0 and nothing is added.

mod calls;
#[cfg(test)]
mod fig1;
mod increments;
mod query;

pub use calls::{inclusive_events, CallPlan, CallSite, SiteAdjust};
pub use increments::EventPlan;
pub use query::{QueryPoint, QueryTable};

use crate::ids::{EdgeId, NodeId};
use thiserror::Error;

/// What the program does when an edge is traversed.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum EdgeAction {
    /// A spanning-tree edge: no code.
    Tree,
    /// A chord whose increment is 0: no code either ("chords with increment 0 stay
    /// uninstrumented", §3.1).
    ZeroChord,
    /// Add this non-zero amount to the counter. For a `Reentry` edge: on the second return of
    /// `setjmp`.
    Add(i64),
    /// An `EarlyExit` edge: no code; the contribution is exact when the frame is abandoned.
    Abandon,
}

impl EdgeAction {
    /// The amount added to the counter when the edge is traversed (0 if no code).
    pub fn amount(self) -> i64 {
        match self {
            EdgeAction::Add(x) => x,
            EdgeAction::Tree | EdgeAction::ZeroChord | EdgeAction::Abandon => 0,
        }
    }
}

/// Inputs that cannot be turned into an event-counting plan, or a query that names no point.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum EventError {
    /// The per-vertex events do not have one entry per vertex (EXIT included).
    #[error("expected {expected} per-vertex event counts (EXIT included), got {found}")]
    EventCountMismatch {
        /// Number of vertices of the graph.
        expected: usize,
        /// Number of values given.
        found: usize,
    },
    /// EXIT is virtual and executes nothing.
    #[error("the virtual EXIT vertex {node} cannot have events (got {events})")]
    ExitEvents {
        /// The EXIT vertex.
        node: NodeId,
        /// Its events.
        events: u64,
    },
    /// A per-edge input (tree membership, weights) does not have one entry per edge.
    #[error("expected {expected} per-edge values, got {found}")]
    EdgeCountMismatch {
        /// Number of edges of the graph.
        expected: usize,
        /// Number of values given.
        found: usize,
    },
    /// `e0` must be a tree edge: it is the function entry, never instrumented.
    #[error("the entry edge e0 is not in the spanning tree")]
    EntryNotInTree,
    /// The tree edges contain an undirected cycle.
    #[error("tree edge {edge} closes a cycle of tree edges")]
    TreeCycle {
        /// The edge that closes the cycle.
        edge: EdgeId,
    },
    /// An increment does not fit in 64 bits.
    #[error("the increment of edge {edge} is {value}, which does not fit in i64")]
    IncrementOverflow {
        /// The edge.
        edge: EdgeId,
        /// Its exact value.
        value: i128,
    },
    /// A query increment does not fit in 64 bits.
    #[error("the query increment at vertex {node} is {value}, which does not fit in i64")]
    QueryOverflow {
        /// The vertex.
        node: NodeId,
        /// Its exact value.
        value: i128,
    },
    /// A query point or call site names a vertex that does not exist, or EXIT where a block is
    /// needed.
    #[error("{node} is not a block of this graph")]
    NotABlock {
        /// The vertex named.
        node: NodeId,
    },
    /// A query point or call site lies past the end of its block.
    #[error(
        "block {node} has {events} events, so there is no point after {events_before} of them"
    )]
    PastEnd {
        /// The block.
        node: NodeId,
        /// The offset asked for.
        events_before: u64,
        /// The block's events.
        events: u64,
    },
    /// A query point inside a block with calls is not between the calls it claims.
    #[error("no point of block {node} lies after {calls_done} of its {calls} calls and {events_before} events")]
    NotBetweenCalls {
        /// The block.
        node: NodeId,
        /// Events before the point.
        events_before: u64,
        /// Calls completed before the point.
        calls_done: usize,
        /// Number of calls in the block.
        calls: usize,
    },
}

/// A checked conversion of an exact increment.
fn edge_amount(value: i128, edge: EdgeId) -> Result<i64, EventError> {
    i64::try_from(value).map_err(|_| EventError::IncrementOverflow { edge, value })
}

/// A checked conversion of an exact query increment.
fn node_amount(value: i128, node: NodeId) -> Result<i64, EventError> {
    i64::try_from(value).map_err(|_| EventError::QueryOverflow { node, value })
}
