//! Path-number tracing: a function writes the Ball-Larus number of each acyclic path it
//! executes (Ball & Larus 1996 §3.2, "Compactly representing paths with sums", and §4 for back
//! edges) where the path ends, instead of witnesses on edges (Ball & Larus 1994 §4). Larus's *Whole
//! Program Paths* (PLDI 1999) records exactly this stream.
//!
//! The paths are those of `path` mode with one more kind of cut (Ball & Larus 1996 §5's dummy
//! `x -> END`, `START -> y` edges): every `Flow` edge into a *call vertex* (a block with a
//! call that may write records, [`FunctionInput::is_call_vertex`]) is cut. So a path holds at
//! most one call vertex, as its first block, and its number is written on its last edge, after
//! that block's calls: between the first record a path's calls write and its own record, no
//! other record of the activation enters the thread's stream, and the reader, which meets the
//! calls first, reads the number at the path's first predicate (or at its end when it has
//! none) and decodes the rest of the path from it.
//!
//! A number is written in `w = ceil(log2 N)` bits for the function's `N` paths; only functions
//! with `N <= 2^32` ([`MAX_TRACE_PATHS`]: the stream's records are at most 32 bits wide) can
//! use the plan.

use super::place::{Plan, PlanKind};
use super::FunctionInput;
use crate::cfg::EdgeKind;
use crate::ids::{EdgeId, IdVec};
use crate::paths::{CfgImage, NumberedDag, PathDag, PathError};

/// Most paths a function may have to be traced by path numbers (a record is at most 32 bits).
pub const MAX_TRACE_PATHS: u128 = 1 << 32;

/// The `Flow` edges into call vertices that are neither back edges nor dead: the cuts that end
/// a path before every call vertex. In id order.
pub fn call_cuts(f: &FunctionInput) -> Vec<EdgeId> {
    let dag = PathDag::new(&f.cfg);
    f.cfg
        .edges()
        .filter(|&(e, edge)| {
            edge.kind == EdgeKind::Flow
                && matches!(dag.image(e), CfgImage::Kept(_))
                && f.is_call_vertex(edge.dst)
        })
        .map(|(e, _)| e)
        .collect()
}

/// Why a function cannot be traced by path numbers.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathsPlanError {
    /// Numbering failed.
    #[error(transparent)]
    Path(#[from] PathError),
    /// More than [`MAX_TRACE_PATHS`] paths.
    #[error("{0} paths, more than 2^32")]
    TooMany(u128),
    /// Landings (unwind edges, `setjmp` re-entries) are not handled: the function keeps the
    /// witness plan.
    #[error("a landing (unwind or re-entry edge)")]
    Landing,
}

/// The numbered path DAG of `f` with [`call_cuts`], if it has at most [`MAX_TRACE_PATHS`]
/// paths and no landings (unwind or `Reentry` edges). Deterministic: the reader recomputes it
/// from the graph and the call sites.
pub fn paths_plan(f: &FunctionInput) -> Result<NumberedDag, PathsPlanError> {
    let landing = f.unwind.values().iter().any(|&u| u)
        || f.cfg.edges().any(|(_, e)| e.kind == EdgeKind::Reentry);
    if landing {
        return Err(PathsPlanError::Landing);
    }
    let dag = PathDag::with_cuts(&f.cfg, &call_cuts(f))?;
    let numbered = NumberedDag::new(dag)?;
    if numbered.total() > MAX_TRACE_PATHS {
        return Err(PathsPlanError::TooMany(numbered.total()));
    }
    Ok(numbered)
}

/// The width of a path number for `total` paths: `ceil(log2 total)`.
pub fn path_bits(total: u128) -> u8 {
    if total <= 1 {
        0
    } else {
        (u128::BITS - (total - 1).leading_zeros()) as u8
    }
}

/// The [`Plan`] of a function traced by path numbers: kind [`PlanKind::Paths`], no witness on
/// any edge (the numbering, recomputed by [`paths_plan`], is the plan).
pub fn paths_trace_plan(f: &FunctionInput) -> Result<Plan, PathsPlanError> {
    paths_plan(f)?;
    Ok(Plan {
        kind: PlanKind::Paths,
        witness: IdVec::filled(f.cfg.num_edges(), None),
        read_bits: IdVec::filled(f.cfg.num_nodes(), 0),
    })
}
