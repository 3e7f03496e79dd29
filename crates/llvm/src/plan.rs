//! Counter plans: which edge or block each counter of a function measures, and where in the IR
//! the increment goes.
//!
//! - `edge` mode: Eprof(Ecnt) of paper 000 §3.2 — counters on the chords of a maximum spanning
//!   tree under the heuristic weighting of §5. Early-exit edges are either chords counted by the
//!   runtime through a frame record (the exit counters of Fig. 7) or, when that is predicted to
//!   cost more, tree edges whose counts the flow law derives (no record; gcov's fake edges);
//!   functions with landing pads or setjmp always keep the record. Re-entry edges are always
//!   chords.
//! - `edges-naive`: a counter on every edge but the early-exit edges (derived at report time).
//! - `blocks-naive`: a counter at the start of every block (the "redundant" placement of §6.1).
//! - `vertex`: Vprof(Ecnt) of §3.3 — the edge placement minus the chords whose fundamental
//!   cycle is pipeless (Fig. 11); block counts stay exact, some edge counts become unknown.
//!
//! Where an edge `u -> v` is counted: at the end of `u` if it is `u`'s only terminator edge;
//! else at the start of `v` if it is `v`'s only incoming edge; else on a block splitting it.
//! An edge that allows none of these (an unwind edge into a shared landing pad, an `indirectbr`
//! or `callbr` edge) is kept in the spanning tree; when that is impossible, or in
//! `edges-naive`, its target is counted with predecessor tags: every incoming edge of the target
//! stores its index in a per-target frame slot, and the target increments `counter[base + tag]`.

use crate::lower::{EdgeIr, Lowered};
use crate::EarlyExits;
use tally_format::{Mode, Probe};
use tally_graph::{EdgeId, EdgeKind, IdVec, NodeId};

/// Where one counter's increment goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Realize {
    /// Counted by the runtime when the frame is abandoned (early-exit edge).
    Runtime,
    /// At the end of the vertex.
    NodeEnd(NodeId),
    /// At the start of the vertex.
    NodeStart(NodeId),
    /// On a new block inserted on the edge.
    Split(EdgeId),
    /// After the setjmp call that starts the vertex: `counter += (ret != 0)`.
    Reentry(NodeId),
    /// Incremented at the start of `target` through its tag slot; tag value = position of the
    /// edge among the target's incoming edges.
    Tagged { target: NodeId },
}

/// A vertex counted through predecessor tags.
#[derive(Clone, Debug)]
pub(crate) struct TagTarget {
    /// The vertex.
    pub node: NodeId,
    /// Function-relative index of the counter of its first incoming edge; incoming edge `j`
    /// (in `cfg.preds(node)` order) has counter `first_counter + j`.
    pub first_counter: usize,
}

/// The counter plan of one function.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Counter `i` (function-relative) measures `counters[i].0` and is realized as `.1`.
    pub counters: Vec<(Probe, Realize)>,
    /// Vertices counted through tags.
    pub tag_targets: Vec<TagTarget>,
    /// The function keeps a shadow-stack frame record (edge mode, may end early).
    pub shadow: bool,
    /// `vertex` mode: chords left without a counter (Fig. 11), taken as 0 by Fig. 8.
    pub zero_edges: Vec<EdgeId>,
    /// `vertex` mode: edges whose count is not determined.
    pub unknown_edges: Vec<EdgeId>,
}

/// How an edge can be counted directly, or `None` if it needs tags.
pub(crate) fn direct_site(l: &Lowered, e: EdgeId) -> Option<Realize> {
    let cfg = &l.cfg;
    let edge = cfg.edge(e);
    match l.edges[e.index()] {
        EdgeIr::Entry => Some(Realize::NodeStart(cfg.entry())),
        EdgeIr::Reentry => Some(Realize::Reentry(edge.dst)),
        EdgeIr::EarlyExit => Some(Realize::Runtime),
        EdgeIr::Fallthrough | EdgeIr::Return => Some(Realize::NodeEnd(edge.src)),
        EdgeIr::Succ { splittable, .. } => {
            let term_edges = cfg
                .succs(edge.src)
                .iter()
                .filter(|&&s| cfg.edge(s).kind != EdgeKind::EarlyExit)
                .count();
            if term_edges == 1 {
                Some(Realize::NodeEnd(edge.src))
            } else if cfg.preds(edge.dst).len() == 1 {
                Some(Realize::NodeStart(edge.dst))
            } else if splittable {
                Some(Realize::Split(e))
            } else {
                None
            }
        }
    }
}

/// What a frame record costs, in counter increments: the push and the pop (two thread-local
/// accesses, four stores, a load: about four increments' worth) at the push block, and a store
/// at every other block with a site, each weighted by its block's predicted frequency.
const RECORD_PUSH_POP: f64 = 4.0;
const RECORD_SITE_STORE: f64 = 1.0;

fn record_cost(l: &Lowered, w: &IdVec<EdgeId, f64>) -> f64 {
    let node_w = |n: NodeId| -> f64 { l.cfg.preds(n).iter().map(|&e| w[e]).sum() };
    let (at, _) = crate::apply::frame_plan(l);
    let stores: f64 = l
        .nodes
        .iter()
        .enumerate()
        .filter(|&(i, n)| n.first_site.is_some() && i != at.index())
        .map(|(i, _)| node_w(NodeId::new(i)))
        .sum();
    RECORD_PUSH_POP * node_w(at) + RECORD_SITE_STORE * stores
}

/// Jump optimization (paper 000 §6.3): a counter on an edge that has to be split costs its
/// increment and the jump out of the new block; other counters sit in an existing block. The
/// weight of every edge realized by splitting is scaled by `1 + jump_cost`, so that the maximum
/// spanning tree keeps such edges and the chords (the counters) fall, where the weighting
/// allows a choice, on edges counted at the end of their source or the start of their target.
/// Fig. 19's case (a block with one incoming and one outgoing edge) needs no special rule here:
/// both of its edges are counted inside it, without a jump.
pub(crate) fn with_jumps(
    l: &Lowered,
    mut w: IdVec<EdgeId, f64>,
    jump_cost: f64,
) -> IdVec<EdgeId, f64> {
    if jump_cost > 0.0 {
        for (e, _) in l.cfg.edges() {
            if matches!(direct_site(l, e), Some(Realize::Split(_))) {
                w[e] *= 1.0 + jump_cost;
            }
        }
    }
    w
}

/// Builds the plan of one function for `mode`. `weights` are measured edge frequencies from an
/// earlier run (paper 000 §6.4 "Exact-Max"); without them the heuristic weighting of §5 is used.
pub(crate) fn plan(
    l: &Lowered,
    mode: Mode,
    weights: Option<&IdVec<EdgeId, f64>>,
    early: EarlyExits,
    jump_cost: f64,
) -> Plan {
    let cfg = &l.cfg;
    let mut measured: Vec<EdgeId> = Vec::new();
    let mut shadow = false;
    let mut zero_edges = Vec::new();
    let mut unknown_edges = Vec::new();
    let weighting = || {
        let w = match weights {
            Some(w) => w.clone(),
            None => tally_graph::weight::heuristic_weights(cfg),
        };
        with_jumps(l, w, jump_cost)
    };
    let may_end_early = cfg.edges().any(|(_, e)| e.kind == EdgeKind::EarlyExit)
        || l.has_landing_pads
        || l.has_setjmp;
    match mode {
        Mode::BlocksNaive => {
            let counters = cfg
                .blocks()
                .map(|n| (Probe::Block(n.into()), Realize::NodeStart(n)))
                .collect();
            return Plan {
                counters,
                tag_targets: Vec::new(),
                shadow: false,
                zero_edges,
                unknown_edges,
            };
        }
        // Trace mode logs the edges edges-naive would count (the entry record stands for e0).
        Mode::EdgesNaive | Mode::Trace => {
            measured.extend(
                cfg.edges()
                    .filter(|(_, e)| e.kind != EdgeKind::EarlyExit)
                    .map(|(id, _)| id),
            );
        }
        // Path mode plans paths (paths.rs), events mode events (events.rs); functions that
        // cannot have paths get edge counters.
        // Edge mode chooses, per function, between the frame record (exit counters charged by
        // the runtime) and deriving the early exits from the tree (no record), by cost.
        Mode::Edge
            if may_end_early
                && !l.has_landing_pads
                && !l.has_setjmp
                && early != EarlyExits::Record =>
        {
            let w = weighting();
            let unsplittable = |e| direct_site(l, e).is_none();
            let with_record = tally_graph::placement::place_edge_counters(cfg, &w, unsplittable);
            let without =
                tally_graph::placement::place_edge_counters_exits_in_tree(cfg, &w, unsplittable);
            let chord_cost = |chords: &[EdgeId]| -> f64 {
                chords
                    .iter()
                    .filter(|&&e| cfg.edge(e).kind != EdgeKind::EarlyExit)
                    .map(|&e| w[e])
                    .sum()
            };
            if early == EarlyExits::Derive
                || chord_cost(&without.chords)
                    <= chord_cost(&with_record.chords) + record_cost(l, &w)
            {
                measured = without.chords;
            } else {
                measured = with_record.chords;
                shadow = true;
            }
        }
        Mode::Edge | Mode::Path | Mode::Events | Mode::EventsNaive => {
            let placement = tally_graph::placement::place_edge_counters(cfg, &weighting(), |e| {
                direct_site(l, e).is_none()
            });
            measured = placement.chords;
            shadow = may_end_early;
        }
        Mode::Vertex => {
            let w = weighting();
            let unsplittable = |e| direct_site(l, e).is_none();
            let vp = tally_graph::vertex::place_vertex_counters(cfg, &w, unsplittable);
            if vp.counted.iter().any(|&e| unsplittable(e)) {
                // Tags would count the dropped chords' neighbours too; keep the edge placement.
                measured =
                    tally_graph::placement::place_edge_counters(cfg, &w, unsplittable).chords;
            } else {
                measured = vp.counted;
                zero_edges = vp.dropped;
                unknown_edges = vp
                    .undetermined
                    .iter()
                    .filter(|(_, &u)| u)
                    .map(|(e, _)| e)
                    .collect();
            }
            shadow = may_end_early;
        }
    }

    // Targets that need tags: every measured edge without a direct site.
    let mut tag_nodes: Vec<NodeId> = measured
        .iter()
        .filter(|&&e| direct_site(l, e).is_none())
        .map(|&e| cfg.edge(e).dst)
        .collect();
    tag_nodes.sort();
    tag_nodes.dedup();

    let mut counters: Vec<(Probe, Realize)> = Vec::new();
    for &e in &measured {
        if tag_nodes.contains(&cfg.edge(e).dst) {
            continue; // counted with the target's tags below
        }
        let r = direct_site(l, e).expect("edges without a direct site are tagged");
        counters.push((Probe::Edge(e.into()), r));
    }
    let mut tag_targets = Vec::new();
    for &node in &tag_nodes {
        tag_targets.push(TagTarget {
            node,
            first_counter: counters.len(),
        });
        for &e in cfg.preds(node) {
            counters.push((Probe::Edge(e.into()), Realize::Tagged { target: node }));
        }
    }
    Plan {
        counters,
        tag_targets,
        shadow,
        zero_edges,
        unknown_edges,
    }
}
