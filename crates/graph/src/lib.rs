//! # tally-graph
//!
//! The graph algorithms of tally, with no LLVM in them: typed ids, the control-flow graph with
//! its virtual EXIT vertex, and (in modules of their own) depth-first search, loops, the
//! heuristic weighting, spanning trees, counter placement and count reconstruction of
//! Ball & Larus, *Optimally Profiling and Tracing Programs* (TOPLAS 1994; `papers/000`).
//!
//! Everything here works on [`Cfg`] values that a front end (tally-llvm) builds; nothing here
//! knows what a basic block contains.
#![deny(missing_docs)]

pub mod cfg;
pub mod hash;
pub mod ids;

pub use cfg::{Cfg, CfgError, Edge, EdgeKind};
pub use ids::{CounterId, EdgeId, IdVec, NodeId};
