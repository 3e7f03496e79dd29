//! Test support, shared with the tests of other crates: [`cfg`] for hand-written graphs (and
//! the common [`diamond`]), a seeded random-number generator, a random control-flow-graph
//! generator and an execution simulator that produces the true count of every edge. Everything
//! is deterministic in its seed.
//!
//! Compiled for this crate's unit tests and, elsewhere, only with the `testing` feature, which
//! test builds enable through dev-dependencies; the `tally` binary never has it.
//!
//! The generated graphs exercise what real functions contain: self loops, back edges that make
//! loops irreducible, parallel edges, several returning blocks, blocks with an early-exit edge
//! (some with nothing else, like a block ending in a call to `exit`), re-entry edges and dead
//! blocks. Every block can reach a `Return` or `EarlyExit` edge, so simulated calls terminate.
//!
//! The simulator walks each call from the entry along random structural edges until it takes a
//! `Return` edge. At a block with an early-exit edge it sometimes abandons the frame; control
//! then sometimes comes back through a random re-entry edge (a `longjmp` to a `setjmp` in the
//! same frame) and the walk goes on. Once a step budget is spent the walk steers along a
//! shortest path to a `Return` or early-exit edge. The resulting counts satisfy Kirchhoff's law
//! at every vertex, `e0` being the number of calls.
//!
//! One file per generator: [`rng`] (the seeded generator), [`graphs`] (random graphs, and
//! [`graphs::arb_cfg`], the same graphs as a proptest strategy whose failures shrink to small
//! graphs), [`simulate`] (executions of one function and their true counts), [`witness`]
//! (random programs and executions for `crate::witness`) and [`programs`] (for
//! `crate::ipaths`). Everything is re-exported here, as before the split.

use crate::cfg::{Cfg, EdgeKind};
use crate::ids::NodeId;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

pub mod graphs;
pub mod programs;
pub mod rng;
pub mod simulate;
pub mod witness;

pub use graphs::{arb_cfg, arb_functions, random_cfg, random_cfg_with, GenConfig, GraphSpec};
pub use rng::Rng;

pub use simulate::{arb_run, distance_to_exit, random_run, random_walk, simulate, SimConfig};
pub use witness::{arb_program, random_program, simulate_program, ExecConfig, ProgramConfig};

/// A graph written by hand for a test: `blocks` blocks `n0 .. n(blocks-1)` (entry `n0`), EXIT
/// written as `blocks`, and `edges` as `(src, dst, kind)` indices that get ids `e1, e2, ...` in
/// order (`e0`, EXIT -> n0, is added as in [`Cfg::new`]).
///
/// ```
/// use tally_graph::testing::cfg;
/// use tally_graph::EdgeKind::*;
/// // n0 -> n1 -> EXIT, with a self loop on n1.
/// let g = cfg(2, &[(0, 1, Flow), (1, 1, Flow), (1, 2, Return)]);
/// assert_eq!(g.num_edges(), 4);
/// ```
///
/// # Panics
///
/// If the edges do not make a valid [`Cfg`] (the test itself is wrong).
pub fn cfg(blocks: usize, edges: &[(usize, usize, EdgeKind)]) -> Cfg {
    let edges = edges
        .iter()
        .map(|&(s, d, k)| (NodeId::new(s), NodeId::new(d), k));
    match Cfg::new(blocks, edges) {
        Ok(g) => g,
        Err(err) => panic!("bad test graph: {err}"),
    }
}

/// Two nested loops with a break out of both and a return inside the outer one:
///
/// ```text
///   n0 -> n1 (outer head) -> n2 (inner head) -> n3 -> n2   (e4 back, inner)
///                                               n3 -> n4   (e5)
///                            n2 -> n5 (e3: break out of both loops)
///                            n4 -> n1 (e6 back, outer), n4 -> EXIT (e7, return in loop)
///                            n5 -> EXIT (e8)
/// ```
///
/// Edges `e1` n0->n1, `e2` n1->n2, `e3` .. `e8` as drawn, `e9` n2->n3.
pub fn nested_loops() -> Cfg {
    use EdgeKind::{Flow, Return};
    cfg(
        6,
        &[
            (0, 1, Flow),   // e1
            (1, 2, Flow),   // e2
            (2, 5, Flow),   // e3
            (3, 2, Flow),   // e4
            (3, 4, Flow),   // e5
            (4, 1, Flow),   // e6
            (4, 6, Return), // e7
            (5, 6, Return), // e8
            (2, 3, Flow),   // e9
        ],
    )
}

/// The diamond `n0 -> {n1, n2} -> n3 -> EXIT`: edges `e1` n0->n1, `e2` n0->n2, `e3` n1->n3,
/// `e4` n2->n3, `e5` n3->EXIT.
pub fn diamond() -> Cfg {
    cfg(
        4,
        &[
            (0, 1, EdgeKind::Flow),
            (0, 2, EdgeKind::Flow),
            (1, 3, EdgeKind::Flow),
            (2, 3, EdgeKind::Flow),
            (3, 4, EdgeKind::Return),
        ],
    )
}

/// One value of `strategy` drawn with `runner` (without shrinking): for tests that check what
/// a strategy generates, with [`TestRunner::deterministic`].
///
/// # Panics
/// If the strategy rejects too many values.
pub fn sample<S: Strategy>(strategy: &S, runner: &mut TestRunner) -> S::Value {
    match strategy.new_tree(runner) {
        Ok(tree) => tree.current(),
        Err(err) => panic!("no sample: {err}"),
    }
}
