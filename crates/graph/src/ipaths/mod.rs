//! Interprocedural path profiling after Melski & Reps, *Interprocedural Path Profiling*
//! (CC 1999 / UW TR 1382, 1998; cited as Melski & Reps 1998): Ball–Larus numbering generalized from
//! one function's DAG to the supergraph of a set of functions, so that an observable path can cross
//! calls and returns and is numbered according to its calling context.
//!
//! One file per step:
//!
//! 1. [`supergraph`]: the supergraph `G*` of a set of functions (§2.2: call and return-site
//!    vertices, call and return edges) and the transformations of §3.2 that make `G*_fn`:
//!    Transformation 1 (`GExit_P`), Transformation 2 (back edges become `Entry_P -> v` and
//!    `w -> GExit_P`, done by the intraprocedural [`PathDag`](crate::paths::PathDag), which also
//!    treats tally's early exits, re-entries and cut edges the same way), Transformation 3
//!    (recursive call sites, found as back edges of a depth-first search of the call graph,
//!    become summary edges `c -> r`, their callees get `Entry_global -> Entry_R` and
//!    `Exit_R -> Exit_global`), applied also to calls through pointers (§9.2.3) and calls that
//!    leave the set (§8, strategy 2), and Transformation 0 of §6 (`GEntry_P`) for piecewise
//!    profiling. It also walks the graph: the *valid successors* of a path prefix under the
//!    grammar of unbalanced-left (§2.2) or unbalanced-right-left (§6) paths.
//! 2. [`number`](mod@number): the linear functions `ψ_v` (§5.2, equations (19)-(22)) and `ρ_e`
//!    (§5.2.3, equation (24)), `numUnbalRLPaths` (§6.1.1, equations (33)-(34)), the values of the
//!    interprocedural edges (§5.3 equation (27), §6.1.2 equation (35)), the number of a path
//!    computed from the definition (§4 equations (6)-(7), which Algorithms 5.1 and 6.1 compute),
//!    regeneration of a path from its number (§5.6 Algorithm 5.2 and its §6 analogue, which the
//!    paper leaves "as an exercise"), and the checks that numbers fit 64 bits.
//! 3. [`runtime`]: what the instrumented program does at an intraprocedural edge, at a call, at a
//!    callee's entry and at a return (§5.5 and §6.3, with §5.5's per-edge increments), written as
//!    the plain-data actions the instrumenter emits and a machine that executes them: the
//!    specification the LLVM and C runtime side implements.
//! 4. [`storage`]: context cuts, the direct calls an instrumenter makes summary edges so that a
//!    callee's loops count their paths in an array rather than under the caller's context.
//! 5. [`cutter`]: the reference: an execution of the whole program, cut into observable paths
//!    by the paper's definitions (§3.4 context paths, §6 piecewise paths), without any of the
//!    numbering's linear functions.
//!
//! # Scope
//!
//! The set of functions is one translation unit: tally instruments each file after
//! optimization, so it never sees the whole program. Calls that leave the set (external and
//! indirect calls) are summary edges (§8, strategy 2, the hybrid technique): the caller's path
//! goes on across the call, and any function of the set that the outside calls back starts a
//! new path at `Entry_global -> Entry_P`. Every function that can be entered from outside (not
//! static, or address taken) therefore gets that edge, and so does every callee of a recursive
//! call site (Transformation 3). See docs/design/ipaths.md, "Interprocedural paths (Melski & Reps
//! 1998)".
//!
//! Early exits and re-entries (`exit`, `longjmp`, exceptions; §9.2): a frame abandoned in a
//! call ends its level's path there, through the surrogate edges `c -> GExit_P` (`Abandon`, at
//! a direct call that never ran) or the block's early-exit edge `v -> GExit_P`, and a `longjmp`
//! back into a frame starts a new path with `Entry_P -> v` (`GEntry_P -> v`), as §9.2.2
//! describes. The paper's stack of pending path prefixes is tally's frame records: each
//! abandoned frame counts the path its record names ([`runtime`] module doc, "Abandoned
//! activations"), and the [`cutter`] cuts executions with abandoned frames the same way.

use crate::cfg::CfgError;
use crate::ids::NodeId;
use crate::paths::PathError;
use std::fmt;
use thiserror::Error;

pub mod cutter;
pub mod number;
pub mod runtime;
pub mod storage;
pub mod supergraph;
#[cfg(test)]
mod tests;

pub use cutter::{cut_execution, CutPaths, Event};
pub use number::{IpNumbering, Lin};
pub use runtime::{CallAction, EdgeAction, EntryAction, FunctionPlan, Machine};
pub use storage::Heat;
pub use supergraph::{CallSite, Callee, Function, Mode, SEdge, Supergraph, Vertex};

/// A function of the set: index into [`Supergraph::functions`].
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FnId(u32);

impl FnId {
    /// The id with the given dense index.
    pub const fn new(index: usize) -> Self {
        assert!(index < u32::MAX as usize, "function index overflows u32");
        Self(index as u32)
    }
    /// The dense index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for FnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "f{}", self.0)
    }
}

impl fmt::Display for FnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "f{}", self.0)
    }
}

/// Everything that can go wrong building, numbering or walking a supergraph.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum IpathError {
    /// A function's graph is malformed.
    #[error("function {func}: {source}")]
    Cfg {
        /// The function.
        func: FnId,
        /// The problem.
        source: CfgError,
    },
    /// The intraprocedural path DAG could not be built (a bad cut edge).
    #[error("function {func}: {source}")]
    Dag {
        /// The function.
        func: FnId,
        /// The problem.
        source: PathError,
    },
    /// A call site names a block or a callee that does not exist.
    #[error(
        "function {func}: call site {site} names block {block} or callee {callee:?} out of range"
    )]
    BadCallSite {
        /// The caller.
        func: FnId,
        /// Index of the call site in the caller's list.
        site: usize,
        /// Its block.
        block: NodeId,
        /// Its callee.
        callee: Callee,
    },
    /// Edge weights given for the cut rule do not match the set's functions or a function's
    /// edges.
    #[error("function {func}: the weights do not match its graph")]
    Weights {
        /// The first function whose weights are missing or of the wrong length.
        func: FnId,
    },
    /// A coefficient of a `ψ` or `ρ` function, or a path count, does not fit in `u128`.
    #[error("the path numbering overflows u128 in function {func}")]
    Overflow {
        /// The function being numbered when the sum overflowed.
        func: FnId,
    },
    /// A path number is not below the number of paths.
    #[error("path number {number} is out of range: the set has {paths} paths")]
    NumberOutOfRange {
        /// The number.
        number: u128,
        /// The number of observable paths.
        paths: u128,
    },
    /// An edge sequence is not an observable path (not valid under the grammar, or not from
    /// `Entry_global` to `Exit_global`).
    #[error("not an observable path: edge {at} is not a valid successor")]
    NotAPath {
        /// Index of the first offending edge (the length if the path stops short).
        at: usize,
    },
    /// An execution does not follow the program (a step the graphs do not allow).
    #[error("bad execution at event {at}: {what}")]
    BadExecution {
        /// Index of the offending event.
        at: usize,
        /// What is wrong.
        what: String,
    },
    /// Even with every call site demoted to a summary edge the numbers do not fit the limit.
    #[error(
        "even with every call site a summary edge the set has {fewest} paths, more than {limit}"
    )]
    LimitUnreachable {
        /// The limit.
        limit: u128,
        /// The fewest paths reached (saturated).
        fewest: u128,
    },
}
