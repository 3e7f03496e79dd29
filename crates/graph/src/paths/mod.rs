//! Ball–Larus path profiling as pure graph algorithms (Ball & Larus, *Efficient Path
//! Profiling*, MICRO 1996, cited as Ball & Larus 1996; Melski & Reps 1998 §2.1 summarizes the
//! same scheme). A *path* is an acyclic piece of one call's walk through the function; every path
//! gets a number in `0 .. NumPaths(START)`, so that a front end can count paths in a dense array by
//! keeping one register `r` that it adds constants to on a few edges.
//!
//! The pipeline, one file per step:
//!
//! 1. [`dag`]: the acyclic graph whose START-to-END paths are the profiled paths (§4 "Path
//!    profiling of arbitrary control flow": a back edge `x -> y` is replaced by the dummy edges
//!    `START -> y` and `x -> END`; tally adds the same kind of dummy edges for its early exits,
//!    re-entries and cut edges);
//! 2. [`number`](mod@number): `NumPaths(v)` and `Val(e)` (§3.2 "Compactly representing paths
//!    with sums", the "algorithm for assigning values to edges");
//! 3. [`cut`]: too many paths (§5, routines whose path count exceeds the counter range: the
//!    paper truncates paths at the vertex where the count passes a threshold);
//! 4. [`place`]: the chord increments on a maximum spanning tree (§3.3 "Efficiently computing
//!    sums", by the event-counting DFS of Ball 1994 §3.2, Fig. 4) and, in [`actions`], the
//!    optimized instrumentation (§3.4: `r = Inc` on first chords, counts folded into last
//!    chords) as plain data per control-flow edge;
//! 5. [`regen`]: a path from its number (§3.5 "Regenerating a path");
//! 6. [`derive`](mod@derive): edge and block counts from path counts (§1: a path profile
//!    determines the edge and block profiles);
//! 7. [`slices`]: the range of path numbers counted at each path end, and dense counter
//!    slices for the narrow ends of functions whose paths are hashed.
//!
//! Section numbers follow the published paper; each module also names the section's title
//! (docs/papers.md has the citations).
//!
//! Vertices reuse [`NodeId`]: the blocks `n0 .. n(k-1)`, END `nk` (the index of the control-flow
//! graph's EXIT) and START `n(k+1)`. DAG edges have their own id type, [`DagEdgeId`].

use crate::ids::{EdgeId, NodeId};
use crate::propagate::FlowError;
use thiserror::Error;

pub mod actions;
pub mod cut;
pub mod cycles;
pub mod dag;
pub mod derive;
pub mod number;
pub mod place;
pub mod regen;
pub mod slices;

pub use actions::{Action, PathPlacement};
pub use cut::{number_paths_limited, ARRAY_PATHS, MAX_PATHS};
pub use cycles::{cycle_loops, without_cycle_counts, CycleLoop, FirstCount};
pub use dag::{CfgImage, DagEdge, DagEdgeId, DagEdgeKind, PathDag};
pub use derive::{derive_counts, derive_edge_counts, DerivedCounts};
pub use number::{number_paths, NumberedDag};
pub use place::{chord_increments, dag_weights, Increments};
pub use regen::{PathEnd, PathStart, RegeneratedPath};
pub use slices::{path_ranges, Slice, Slices};

/// Everything that can go wrong in path numbering, placement, regeneration and derivation.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PathError {
    /// `NumPaths` of a vertex does not fit in 128 bits.
    #[error("the number of paths from vertex {node} to END exceeds u128")]
    Overflow {
        /// The vertex whose count overflowed.
        node: NodeId,
    },
    /// Even the fewest paths the cutting heuristic can reach are more than the limit.
    #[error("even with every useful edge cut the function has {fewest} paths, more than the limit {limit}")]
    LimitUnreachable {
        /// The requested limit.
        limit: u128,
        /// The path count with every useful cut made (saturated at `u128::MAX`).
        fewest: u128,
    },
    /// Only a live `Flow` edge that is not a back edge can be cut.
    #[error("edge {edge} cannot be cut: it is not a live Flow edge outside the back edges")]
    NotCuttable {
        /// The edge.
        edge: EdgeId,
    },
    /// The DAG was built from another graph than the one given.
    #[error("the path DAG was built from another control-flow graph")]
    WrongGraph,
    /// A per-edge input does not have one entry per edge.
    #[error("expected {expected} per-edge values, got {found}")]
    LengthMismatch {
        /// Number of edges.
        expected: usize,
        /// Number of values given.
        found: usize,
    },
    /// A path number is not below `NumPaths(START)`.
    #[error("path number {number} is out of range: the function has {paths} paths")]
    NumberOutOfRange {
        /// The number.
        number: u128,
        /// `NumPaths(START)`.
        paths: u128,
    },
    /// An edge sequence is not a START-to-END path of the DAG.
    #[error("the edge sequence is not a START-to-END path of the DAG (fails at position {at})")]
    NotAPath {
        /// Index of the first offending edge (the sequence length if it stops short of END).
        at: usize,
    },
    /// During regeneration no edge out of `node` covers the remaining value. Cannot happen for a
    /// [`NumberedDag`] built by this module; reported instead of panicking.
    #[error("no edge out of vertex {node} covers the remaining path value {remaining}")]
    NoEdgeFor {
        /// The vertex.
        node: NodeId,
        /// The part of the path number still to account for.
        remaining: u128,
    },
    /// A path value or a partial sum of the increment computation does not fit in `i128`.
    #[error("the chord increments overflow i128 at vertex {node}")]
    IncrementOverflow {
        /// The vertex where the sum overflowed.
        node: NodeId,
    },
    /// A derived edge count does not fit in `u64`.
    #[error("the derived count of edge {edge} exceeds u64")]
    CountOverflow {
        /// The control-flow edge.
        edge: EdgeId,
    },
    /// The number of paths ending at a back edge or cut edge differs from the number of paths
    /// starting after it; every execution of such an edge ends one path and starts one.
    #[error("edge {edge} ends {ended} paths but starts {started}")]
    Unpaired {
        /// The back edge or cut edge.
        edge: EdgeId,
        /// Count of the paths ending with its `x -> END` dummy edge.
        ended: u64,
        /// Count of the paths starting with its `START -> y` dummy edge.
        started: u64,
    },
    /// The derived edge counts violate the flow law or do not fit.
    #[error(transparent)]
    Flow(#[from] FlowError),
}
