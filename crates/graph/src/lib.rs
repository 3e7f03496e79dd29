//! # tally-graph
//!
//! The graph algorithms of tally, with no LLVM in them, after Ball & Larus, *Optimally
//! Profiling and Tracing Programs* (TOPLAS 1994, cited as Ball & Larus 1994; docs/papers.md lists
//! the five papers):
//!
//! - [`ids`]: typed ids and dense side tables;
//! - [`cfg`](mod@cfg): the control-flow graph with its virtual EXIT vertex (§2, §3.2 Fig. 7);
//! - [`events`]: exact event counting with on-line queries (Ball 1994: Fig. 4 increments, §3.3
//!   query increments, §4 calls as queries and per-call-site counters);
//! - [`dfs`]: depth-first search from the entry, back edges, topological order (§5);
//! - [`dom`]: dominators, and where a frame record's push can go (shrink-wrapping);
//! - [`loops`]: natural loops and loop-exit edges from the back edges (§5);
//! - [`weight`]: the heuristic edge weighting (§5);
//! - [`mst`]: maximum spanning forests by Kruskal (§2, §3.2);
//! - [`placement`]: edge counters on the chords of a maximum spanning tree (§3.2);
//! - [`propagate`](mod@propagate): count reconstruction (§3.2 Fig. 6) and flow checks, and edge counts from
//!   block counts;
//! - [`vertex`]: block counts with fewer edge counters, Vprof(Ecnt) (§3.3, Figs. 8 and 11);
//! - [`knuth`]: block counts with block counters, Vprof(Vcnt) by Knuth and Stevenson (the
//!   third placement of §6, Graph 3);
//! - [`paths`]: Ball–Larus path profiling (Ball & Larus 1996): the path DAG, numbering, cutting,
//!   chord increments and placement, regeneration, derived counts;
//! - [`ipaths`]: interprocedural path profiling (Melski & Reps 1998): the supergraph of
//!   a set of functions, context and piecewise path numbering with `ψ`/`ρ` functions,
//!   regeneration, the runtime protocol and a reference cutter;
//! - [`sese`]: SESE counters (Frenot & Pereira 2024): loop variables that replace edge counters,
//!   their placement as free chords and the recovery of every count;
//! - [`witness`]: witness tracing (§4): blocking witnesses, the constrained spanning tree,
//!   witness values (§6.2), the `Trace(Ewit)` and blocking checker, regeneration (Fig. 14)
//!   with a stack of procedures (§4.2), the record stream and its bit-packed encoding;
//! - [`hash`]: FNV-1a fingerprints;
//! - `testing` (with the `testing` feature, or in this crate's unit tests): test support for
//!   this and other crates (random graphs, an execution simulator, a builder for hand-written
//!   graphs).
//!
//! Everything here works on [`Cfg`] values that a front end (tally-llvm) builds; nothing here
//! knows what a basic block contains.
#![deny(missing_docs)]

pub mod cfg;
pub mod dfs;
pub mod dom;
pub mod events;
pub mod hash;
pub mod ids;
pub mod ipaths;
pub mod knuth;
pub mod loops;
pub mod mst;
pub mod paths;
pub mod placement;
pub mod propagate;
pub mod sese;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod vertex;
pub mod weight;
pub mod witness;

pub use cfg::{Cfg, CfgError, Edge, EdgeKind};
pub use dfs::Dfs;
pub use ids::{CounterId, EdgeId, IdVec, NodeId};
pub use loops::Loops;
pub use mst::{max_spanning_tree, max_spanning_tree_exits_in_tree, SpanningTree, TreeClass};
pub use placement::{
    place_edge_counters, place_edge_counters_exits_in_tree, placement_cost, EdgePlacement,
};
pub use propagate::{block_counts, check_flow, propagate, solve_from_blocks, FlowError, Side};
pub use weight::{heuristic_weights, heuristic_weights_with, LOOP_MULTIPLIER};
