//! The example of Ball 1994, Fig. 1, for the unit tests of this module.
//!
//! The paper's EXIT vertex has events of its own; ours is virtual, so the paper's EXIT is the
//! block `n6` (named "EXIT" in the symbolic strings) with a single return edge to our EXIT `n7`.
//! Chords (black dots in the paper) are marked `*`; every other edge is in the spanning tree.
//!
//! The drawing itself is not in the paper's text; the graph is rebuilt from what the text
//! states: `Increment(w) = +P +EXIT`, `Increment(z) = -C +EXIT`, the path `P Q A R EXIT` is
//! counted by `x` and `z` with `Increment(x) = +P +Q +A +R +C`, after `P -> Q` nothing is
//! counted, after `P -> Q -> A` the counter already holds `R` and `C`, `QueryInc(B) = -R -C`
//! (Fig. 5, chord `B_out -> P_in`), and `Increment(y)` accounts for `R` and `C` (§4).
//!
//! ```text
//!                        n7 (virtual EXIT)
//!             ┌──── e0 ────┘      ▲
//!             ▼                   │ e10
//!          ┌─────┐             ┌──┴───┐
//!   ┌────▶ │ P n0│ ──e2 w*───▶ │EXIT n6│ ◀──────┐
//!   │      └──┬──┘             └──────┘         │
//!   │         │ e1                              │
//!   │      ┌──▼──┐                              │
//!   │      │ Q n1│ ──e4 y*──┐                   │
//!   │      └──┬──┘          │                   │
//!   │         │ e3 x*       ▼                   │
//!   │      ┌──▼──┐       ┌─────┐                │
//!   │      │ A n2│       │ B n3│                │
//!   │      └──┬──┘       └──┬──┘                │
//!   │         │ e5          │ e6                │
//!   │      ┌──▼─────────────▼──┐                │
//!   │      │       R n4        │ ───e8 z*───────┘
//!   │      └─────────┬─────────┘
//!   │                │ e7
//!   │             ┌──▼──┐
//!   └───── e9 ─── │ C n5│
//!                 └─────┘
//! ```

use super::EventPlan;
use crate::cfg::{Cfg, EdgeKind};
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::mst::SpanningTree;

pub const P: NodeId = NodeId::new(0);
pub const Q: NodeId = NodeId::new(1);
pub const A: NodeId = NodeId::new(2);
pub const B: NodeId = NodeId::new(3);
pub const R: NodeId = NodeId::new(4);
pub const C: NodeId = NodeId::new(5);
/// The paper's EXIT vertex, a real block here.
pub const X: NodeId = NodeId::new(6);
/// The four chords of the paper.
pub const W: EdgeId = EdgeId::new(2);
pub const X_EDGE: EdgeId = EdgeId::new(3);
pub const Y: EdgeId = EdgeId::new(4);
pub const Z: EdgeId = EdgeId::new(8);

const NAMES: [(NodeId, &str); 7] = [
    (P, "P"),
    (Q, "Q"),
    (A, "A"),
    (B, "B"),
    (R, "R"),
    (C, "C"),
    (X, "EXIT"),
];

pub fn cfg() -> Cfg {
    use EdgeKind::*;
    let exit = NodeId::new(7);
    let edges = [
        (P, Q, Flow),      // e1
        (P, X, Flow),      // e2 w
        (Q, A, Flow),      // e3 x
        (Q, B, Flow),      // e4 y
        (A, R, Flow),      // e5
        (B, R, Flow),      // e6
        (R, C, Flow),      // e7
        (R, X, Flow),      // e8 z
        (C, P, Flow),      // e9
        (X, exit, Return), // e10
    ];
    match Cfg::new(7, edges) {
        Ok(g) => g,
        Err(err) => panic!("bad Fig. 1 graph: {err}"),
    }
}

/// The paper's spanning tree: every edge but w, x, y, z.
pub fn tree() -> SpanningTree {
    let g = cfg();
    let in_tree = g.edges().map(|(e, _)| ![W, X_EDGE, Y, Z].contains(&e));
    SpanningTree {
        in_tree: IdVec::from_vec(in_tree.collect()),
        failed_forced: Vec::new(),
    }
}

pub fn plan(events: &IdVec<NodeId, u64>) -> EventPlan {
    match EventPlan::compute(&cfg(), events, &tree()) {
        Ok(p) => p,
        Err(err) => panic!("Fig. 1 plan: {err}"),
    }
}

/// Distinct powers of two: P = 1, Q = 2, ..., EXIT = 64.
pub fn powers() -> IdVec<NodeId, u64> {
    let mut events = IdVec::filled(8, 0u64);
    for (i, (v, _)) in NAMES.iter().enumerate() {
        events[*v] = 1 << i;
    }
    events
}

/// `f` (linear in the events) as a formula over the block names, e.g. `"-C +EXIT"`: `f` is
/// evaluated with one event in one block at a time.
pub fn symbolic(f: impl Fn(&IdVec<NodeId, u64>) -> i64) -> String {
    assert_eq!(f(&IdVec::filled(8, 0)), 0, "not linear");
    let mut terms = Vec::new();
    for (v, name) in NAMES {
        let mut events = IdVec::filled(8, 0u64);
        events[v] = 1;
        match f(&events) {
            0 => {}
            1 => terms.push(format!("+{name}")),
            -1 => terms.push(format!("-{name}")),
            k => terms.push(format!("{k:+}{name}")),
        }
    }
    if terms.is_empty() {
        "0".to_string()
    } else {
        terms.join(" ")
    }
}
