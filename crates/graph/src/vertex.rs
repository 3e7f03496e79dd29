//! Vertex profiling with edge counters, Vprof(Ecnt) (Ball & Larus 1994 §3.3).
//!
//! Block counts need fewer counters than edge counts: a set of counted edges determines every
//! block count iff each simple cycle of *uncounted* edges is pipeless (§3.3.1, the Theorem).
//! [`place_vertex_counters`] is the heuristic of Fig. 11: start from the chords of a maximum
//! spanning tree and, in decreasing order of weight, drop the counter of a chord whose
//! fundamental cycle is pipeless and shares no vertex with the cycle of a chord dropped before
//! (so that two pipeless cycles never combine into a piped one). [`propagate_vertex`] is Fig. 8:
//! the dropped chords get count 0, Fig. 6 propagation does the rest, and the resulting edge
//! counts are vertex-frequency equivalent to the true ones: every block count is exact, while
//! the edges on the dropped chords' cycles are not determined and are reported as unknown.
//!
//! Early-exit and re-entry edges are counted at no cost on the fast path (by the runtime and
//! after `setjmp`), so they always keep their counters, as do edges forced into the tree.

use crate::cfg::{Cfg, EdgeKind};
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::mst::{max_spanning_tree, SpanningTree, TreeClass};
use crate::propagate::{propagate_signed, FlowError};
use crate::sese::{place_edge_counters_sese, SeseCounter};
use std::collections::VecDeque;

/// A Vprof(Ecnt) placement.
#[derive(Clone, Debug, PartialEq)]
pub struct VertexPlacement {
    /// The maximum spanning tree the placement started from.
    pub tree: SpanningTree,
    /// The edges that carry a counter, in id order.
    pub counted: Vec<EdgeId>,
    /// Chords whose counter was dropped (Fig. 11's `Remove`), in id order.
    pub dropped: Vec<EdgeId>,
    /// Edges whose count the placement does not determine: the fundamental cycles of the
    /// dropped chords (dropped chords included).
    pub undetermined: IdVec<EdgeId, bool>,
}

/// The edges of the tree path between `a` and `b`, or `None` if they are not connected.
fn tree_path(cfg: &Cfg, tree: &SpanningTree, a: NodeId, b: NodeId) -> Option<Vec<EdgeId>> {
    let mut via: IdVec<NodeId, Option<EdgeId>> = IdVec::filled(cfg.num_nodes(), None);
    let mut seen = IdVec::filled(cfg.num_nodes(), false);
    let mut queue = VecDeque::from([a]);
    seen[a] = true;
    while let Some(v) = queue.pop_front() {
        if v == b {
            break;
        }
        for &e in cfg.succs(v).iter().chain(cfg.preds(v)) {
            if !tree.in_tree[e] {
                continue;
            }
            let edge = cfg.edge(e);
            let w = if edge.src == v { edge.dst } else { edge.src };
            if !seen[w] {
                seen[w] = true;
                via[w] = Some(e);
                queue.push_back(w);
            }
        }
    }
    if !seen[b] {
        return None;
    }
    let mut path = Vec::new();
    let mut v = b;
    while v != a {
        let e = via[v]?;
        path.push(e);
        let edge = cfg.edge(e);
        v = if edge.dst == v { edge.src } else { edge.dst };
    }
    path.reverse();
    Some(path)
}

/// The fundamental cycle of chord `c` as a closed walk of edges starting with `c`, with the
/// vertices in walk order; `None` when `c` is a self loop (never pipeless) or not closable.
fn fundamental_cycle(
    cfg: &Cfg,
    tree: &SpanningTree,
    c: EdgeId,
) -> Option<(Vec<EdgeId>, Vec<NodeId>)> {
    let ce = cfg.edge(c);
    if ce.src == ce.dst {
        return None;
    }
    // Walk: src --c--> dst, then the tree path dst .. src.
    let path = tree_path(cfg, tree, ce.dst, ce.src)?;
    let mut edges = vec![c];
    edges.extend(path);
    let mut nodes = vec![ce.src, ce.dst];
    let mut v = ce.dst;
    for &e in &edges[1..] {
        let edge = cfg.edge(e);
        v = if edge.src == v { edge.dst } else { edge.src };
        nodes.push(v);
    }
    nodes.pop(); // back at ce.src
    Some((edges, nodes))
}

/// True when the directions of the cycle's edges alternate (every vertex a fork or a join).
fn is_pipeless(cfg: &Cfg, edges: &[EdgeId], nodes: &[NodeId]) -> bool {
    // Edge i goes from nodes[i] to nodes[i+1] in walk order; it is "forward" when its real
    // direction agrees. A pipe is two consecutive edges with the same orientation.
    let k = edges.len();
    if k % 2 == 1 {
        return false;
    }
    let forward = |i: usize| {
        cfg.edge(edges[i]).src == nodes[i] && cfg.edge(edges[i]).dst == nodes[(i + 1) % k]
    };
    (0..k).all(|i| forward(i) != forward((i + 1) % k))
}

/// Fig. 11: a Vprof(Ecnt) placement for `cfg` under `weights`. `unsplittable` edges are forced
/// into the tree as for [`crate::placement::place_edge_counters`].
pub fn place_vertex_counters(
    cfg: &Cfg,
    weights: &IdVec<EdgeId, f64>,
    unsplittable: impl Fn(EdgeId) -> bool,
) -> VertexPlacement {
    let tree = max_spanning_tree(cfg, |e| {
        if unsplittable(e) {
            TreeClass::Forced
        } else {
            TreeClass::Weighted(weights[e])
        }
    });
    drop_chords(cfg, weights, tree, |_| false)
}

/// Fig. 11's loop over the chords of `tree`: in decreasing weight, drop the counter of a chord
/// whose fundamental cycle is pipeless and vertex-disjoint from the cycles dropped before.
/// Chords for which `keep` holds are never dropped (they are counted some other way).
fn drop_chords(
    cfg: &Cfg,
    weights: &IdVec<EdgeId, f64>,
    tree: SpanningTree,
    keep: impl Fn(EdgeId) -> bool,
) -> VertexPlacement {
    let mut chords: Vec<EdgeId> = tree.chords().collect();
    // Decreasing weight; ties by id for determinism.
    chords.sort_by(|&a, &b| {
        weights[b]
            .partial_cmp(&weights[a])
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.cmp(&b))
    });
    let mut marked = IdVec::filled(cfg.num_nodes(), false);
    let mut undetermined = IdVec::filled(cfg.num_edges(), false);
    let mut dropped = Vec::new();
    for c in chords {
        let kind = cfg.edge(c).kind;
        if matches!(kind, EdgeKind::EarlyExit | EdgeKind::Reentry)
            || tree.failed_forced.contains(&c)
            || keep(c)
        {
            continue;
        }
        let Some((edges, nodes)) = fundamental_cycle(cfg, &tree, c) else {
            continue;
        };
        if !is_pipeless(cfg, &edges, &nodes) || nodes.iter().any(|&v| marked[v]) {
            continue;
        }
        for &v in &nodes {
            marked[v] = true;
        }
        for &e in &edges {
            undetermined[e] = true;
        }
        dropped.push(c);
    }
    dropped.sort();
    let counted = tree
        .chords()
        .filter(|c| dropped.binary_search(c).is_err())
        .collect();
    VertexPlacement {
        tree,
        counted,
        dropped,
        undetermined,
    }
}

/// A Vprof(Ecnt) placement in which some chords are free: their counts come from SESE counters
/// (Frenot & Pereira 2024) whose values are added at their loops' exits.
///
/// Exactness: Fig. 8 only asks the counts of the non-dropped chords to be known when counts are
/// read; how a chord's count is obtained does not matter. A free chord is a chord of the same
/// tree, never on another chord's fundamental cycle (those hold one chord and tree edges), and
/// is never dropped itself, so the dropped cycles are exactly those of
/// [`place_vertex_counters`] run on that tree, and every block count is exact once each SESE
/// value has been added (when the loop is left, or when the frame is abandoned inside it, under
/// the rules of [`crate::sese`]). Dropping a free chord would be exact too (Fig. 11 does not
/// care how a chord is counted), but its SESE value would then be computed for nothing and its
/// cycle's vertices blocked for other drops; keeping it is the simple choice.
#[derive(Clone, Debug, PartialEq)]
pub struct VertexSesePlacement {
    /// The placement; `counted` includes the free chords.
    pub vertex: VertexPlacement,
    /// `(edge, counter)`: the free chords and the index of the counter giving each one's count.
    pub free: Vec<(EdgeId, usize)>,
    /// Indices of counters not used (see [`crate::sese::SesePlacement::unused`]).
    pub unused: Vec<usize>,
}

impl VertexSesePlacement {
    /// The counted chords that carry an increment (or are counted by the runtime), in id order.
    pub fn incremented(&self) -> impl Iterator<Item = EdgeId> + '_ {
        self.vertex
            .counted
            .iter()
            .copied()
            .filter(|e| !self.free.iter().any(|&(f, _)| f == *e))
    }
}

/// [`place_vertex_counters`] with the measured edges of `counters` made free chords: the tree of
/// [`crate::sese::place_edge_counters_sese`], then Fig. 11 over its chords, free ones kept.
pub fn place_vertex_counters_sese(
    cfg: &Cfg,
    weights: &IdVec<EdgeId, f64>,
    unsplittable: impl Fn(EdgeId) -> bool,
    counters: &[SeseCounter],
) -> VertexSesePlacement {
    let p = place_edge_counters_sese(cfg, weights, unsplittable, counters);
    let free = p.free;
    let vertex = drop_chords(cfg, weights, p.placement.tree, |e| {
        free.iter().any(|&(f, _)| f == e)
    });
    VertexSesePlacement {
        vertex,
        free,
        unused: p.unused,
    }
}

/// Counts recovered from a Vprof(Ecnt) placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VertexCounts {
    /// Every block count (exact), EXIT included.
    pub blocks: IdVec<NodeId, u64>,
    /// Edge counts, `None` for the edges the placement does not determine.
    pub edges: IdVec<EdgeId, Option<u64>>,
}

/// Fig. 8: recovers block counts from the counted edges. `measured[e]` holds the count of each
/// counted edge (others `None`); `undetermined` marks the edges on the dropped chords' cycles
/// (from [`VertexPlacement::undetermined`]). Dropped chords are set to 0 and Fig. 6 propagation
/// fills in the rest; the flow law is checked at every vertex.
pub fn propagate_vertex(
    cfg: &Cfg,
    measured: &IdVec<EdgeId, Option<u64>>,
    dropped: &[EdgeId],
    undetermined: &IdVec<EdgeId, bool>,
) -> Result<VertexCounts, FlowError> {
    let mut m: IdVec<EdgeId, Option<i128>> = IdVec::from_vec(
        measured
            .values()
            .iter()
            .map(|v| v.map(i128::from))
            .collect(),
    );
    for &e in dropped {
        m[e] = Some(0);
    }
    let values = propagate_signed(cfg, &m)?;
    // Vertex counts are exact (Fig. 8's values are vertex-frequency equivalent): each must be a
    // count.
    let mut all = IdVec::filled(cfg.num_nodes(), 0u64);
    for node in cfg.nodes() {
        let inflow: i128 = cfg.preds(node).iter().map(|&e| values[e]).sum();
        all[node] = u64::try_from(inflow).map_err(|_| FlowError::BlockOverflow { node })?;
    }
    let mut edges = IdVec::filled(cfg.num_edges(), None);
    for (e, &v) in values.iter() {
        if !undetermined[e] {
            let node = cfg.edge(e).dst;
            edges[e] = Some(u64::try_from(v).map_err(|_| FlowError::Negative {
                edge: e,
                node,
                value: v,
            })?);
        }
    }
    Ok(VertexCounts { blocks: all, edges })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::testing::{cfg, random_cfg_with, simulate, GenConfig, Rng, SimConfig};
    use crate::weight::heuristic_weights;

    /// The pipeless square of Fig. 4(c): a -> b, e -> b, e -> f, a -> f (a and e forks, b and f
    /// joins), with b -> e closing a loop and f returning.
    ///
    /// ```text
    ///      a ------> b
    ///      |       ^ |
    ///      |      /  v
    ///      |     e <-+      (b -> e)
    ///      v    /
    ///      f <-+            (e -> f), f -> EXIT
    /// ```
    /// With a -> f the lightest edge, the tree holds a -> b, e -> b, e -> f; chord a -> f closes
    /// the pipeless cycle and loses its counter, as in the figure.
    #[test]
    fn pipeless_square_drops_a_counter() {
        // n0 = a, n1 = b, n2 = e, n3 = f.
        let g = cfg(
            4,
            &[
                (0, 1, Flow),
                (0, 3, Flow),
                (2, 1, Flow),
                (2, 3, Flow),
                (1, 2, Flow),
                (3, 4, Return),
            ],
        );
        let w = IdVec::from_vec(vec![1.0, 10.0, 0.1, 10.0, 10.0, 10.0, 10.0]);
        let edge = crate::placement::place_edge_counters(&g, &w, |_| false);
        let vp = place_vertex_counters(&g, &w, |_| false);
        assert_eq!(edge.chords.len(), 3);
        assert_eq!(vp.dropped, vec![EdgeId::new(2)], "{vp:?}");
        assert_eq!(vp.counted.len(), 2);
        // The square's four edges are undetermined; the others are not.
        let und: Vec<usize> = vp
            .undetermined
            .iter()
            .filter(|(_, &u)| u)
            .map(|(e, _)| e.index())
            .collect();
        assert_eq!(und, vec![1, 2, 3, 4]);
        // a -> b -> e -> f -> EXIT twice, a -> f once.
        let truth = IdVec::from_vec(vec![3, 2, 1, 0, 2, 2, 3]);
        let mut measured = IdVec::filled(g.num_edges(), None);
        for &e in &vp.counted {
            measured[e] = Some(truth[e]);
        }
        let got = propagate_vertex(&g, &measured, &vp.dropped, &vp.undetermined).unwrap();
        assert_eq!(got.blocks.values(), &[3, 2, 2, 3, 3]);
    }

    #[test]
    fn vertex_counts_are_exact_on_random_runs() {
        for seed in 0..300u64 {
            let mut rng = Rng::new(seed);
            let g = random_cfg_with(&mut rng, &GenConfig::default());
            let truth = simulate(&g, &mut rng, &SimConfig::default());
            let w = heuristic_weights(&g);
            let vp = place_vertex_counters(&g, &w, |_| false);
            let mut measured = IdVec::filled(g.num_edges(), None);
            for &e in &vp.counted {
                measured[e] = Some(truth[e]);
            }
            let got = propagate_vertex(&g, &measured, &vp.dropped, &vp.undetermined)
                .unwrap_or_else(|err| panic!("seed {seed}: {err}"));
            let want = crate::propagate::block_counts(&g, &truth).unwrap();
            for b in g.blocks() {
                assert_eq!(got.blocks[b], want[b], "seed {seed} block {b}");
            }
            for (e, c) in got.edges.iter() {
                if let Some(c) = c {
                    assert_eq!(*c, truth[e], "seed {seed} edge {e} claimed determined");
                }
            }
        }
    }
}
