//! Property tests of the whole pipeline on random graphs (irreducible loops, parallel edges,
//! several returns, early exits, re-entries, dead blocks): placements recover the simulated true
//! counts exactly, analyses match their definitions, and corrupted measurements are refused.

use proptest::prelude::*;
use std::collections::VecDeque;
use tally_graph::mst::UnionFind;
use tally_graph::testing::{arb_run, Rng};
use tally_graph::{
    block_counts, check_flow, heuristic_weights, max_spanning_tree, place_edge_counters,
    place_edge_counters_exits_in_tree, propagate, solve_from_blocks, Cfg, Dfs, EdgeId, EdgeKind,
    EdgePlacement, FlowError, IdVec, Loops, NodeId, SpanningTree, TreeClass,
};

const MAX_BLOCKS: usize = 30;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Only the counts of `chords`, as the report sees them.
fn measure(cfg: &Cfg, truth: &IdVec<EdgeId, u64>, chords: &[EdgeId]) -> IdVec<EdgeId, Option<u64>> {
    let mut m = IdVec::filled(cfg.num_edges(), None);
    for &c in chords {
        m[c] = Some(truth[c]);
    }
    m
}

/// Components of the graph on all vertices with the non-excluded edges.
fn components(cfg: &Cfg, excluded: impl Fn(EdgeId) -> bool) -> usize {
    let mut sets = UnionFind::new(cfg.num_nodes());
    let mut n = cfg.num_nodes();
    for (e, edge) in cfg.edges() {
        if !excluded(e) && sets.union(edge.src.index(), edge.dst.index()) {
            n -= 1;
        }
    }
    n
}

fn is_side_edge(cfg: &Cfg, e: EdgeId) -> bool {
    matches!(cfg.edge(e).kind, EdgeKind::EarlyExit | EdgeKind::Reentry)
}

/// The tree path from `from` to `to` as (edge, +1 if traversed forwards else -1), or `None` if
/// the tree does not connect them.
fn tree_path(
    cfg: &Cfg,
    tree: &SpanningTree,
    from: NodeId,
    to: NodeId,
) -> Option<Vec<(EdgeId, i128)>> {
    let mut via: IdVec<NodeId, Option<EdgeId>> = IdVec::filled(cfg.num_nodes(), None);
    let mut seen = IdVec::filled(cfg.num_nodes(), false);
    let mut queue = VecDeque::from([from]);
    seen[from] = true;
    while let Some(v) = queue.pop_front() {
        for &e in cfg.preds(v).iter().chain(cfg.succs(v)) {
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
    if !seen[to] {
        return None;
    }
    let mut path = Vec::new();
    let mut v = to;
    while v != from {
        let e = via[v]?;
        let edge = cfg.edge(e);
        // Walking backwards from `to`: the edge is traversed forwards if it ends at v.
        let (prev, sign) = if edge.dst == v {
            (edge.src, 1)
        } else {
            (edge.dst, -1)
        };
        path.push((e, sign));
        v = prev;
    }
    path.reverse();
    Some(path)
}

/// Structural checks every spanning tree must pass, plus the cycle property of a maximum tree.
fn check_tree(cfg: &Cfg, p: &EdgePlacement, class: &IdVec<EdgeId, TreeClass>) {
    // Tree edges are acyclic: every cycle contains a chord.
    let mut sets = UnionFind::new(cfg.num_nodes());
    for e in p.tree.tree_edges() {
        let edge = cfg.edge(e);
        assert!(
            sets.union(edge.src.index(), edge.dst.index()),
            "tree edge {e} closes a cycle"
        );
    }
    assert!(p.tree.in_tree[cfg.entry_edge()], "e0 is not in the tree");
    // |chords| = |E| - |V| + components (of the graph without excluded edges).
    let c = components(cfg, |e| class[e] == TreeClass::Excluded);
    assert_eq!(p.chords.len(), cfg.num_edges() - cfg.num_nodes() + c);
    assert_eq!(p.chords, p.tree.chords().collect::<Vec<_>>());
    for &ch in &p.chords {
        let edge = cfg.edge(ch);
        match class[ch] {
            TreeClass::Excluded => {}
            TreeClass::Forced => {
                assert!(p.tree.failed_forced.contains(&ch), "forced {ch} left out")
            }
            TreeClass::Weighted(w) => {
                // Cycle property: no weighted tree edge on the chord's cycle is lighter.
                let path = tree_path(cfg, &p.tree, edge.dst, edge.src);
                let Some(path) = path else {
                    panic!("chord {ch} joins two tree components");
                };
                for (t, _) in path {
                    if let TreeClass::Weighted(wt) = class[t] {
                        assert!(
                            wt >= w,
                            "tree edge {t} ({wt}) lighter than chord {ch} ({w})"
                        );
                    }
                }
            }
        }
    }
}

fn classes(cfg: &Cfg, weights: &IdVec<EdgeId, f64>, forced: &[bool]) -> IdVec<EdgeId, TreeClass> {
    IdVec::from_vec(
        cfg.edges()
            .map(|(e, edge)| match edge.kind {
                EdgeKind::Entry => TreeClass::Forced,
                EdgeKind::EarlyExit | EdgeKind::Reentry => TreeClass::Excluded,
                _ if forced[e.index()] => TreeClass::Forced,
                _ => TreeClass::Weighted(weights[e]),
            })
            .collect(),
    )
}

/// A random acyclic graph in which every block has a structural successor.
fn random_dag(seed: u64) -> Cfg {
    let mut rng = Rng::new(seed);
    let n = 1 + rng.below(MAX_BLOCKS);
    let exit = NodeId::new(n);
    let mut edges = Vec::new();
    for i in 0..n {
        let b = NodeId::new(i);
        for k in 0..1 + rng.below(3) {
            if i + 1 == n || (k > 0 && rng.percent(15)) {
                edges.push((b, exit, EdgeKind::Return));
            } else {
                let j = i + 1 + rng.below(n - i - 1);
                edges.push((b, NodeId::new(j), EdgeKind::Flow));
            }
        }
        if rng.percent(20) {
            edges.push((b, exit, EdgeKind::EarlyExit));
        }
        if rng.percent(10) {
            edges.push((exit, b, EdgeKind::Reentry));
        }
    }
    rng.shuffle(&mut edges);
    match Cfg::new(n, edges) {
        Ok(g) => g,
        Err(err) => panic!("bad DAG: {err}"),
    }
}

/// True if a structural path from `w` to `x` avoids `y` (brute force).
fn reaches_avoiding(cfg: &Cfg, w: NodeId, x: NodeId, y: Option<NodeId>) -> bool {
    if Some(w) == y {
        return false;
    }
    let mut seen = IdVec::filled(cfg.num_nodes(), false);
    let mut stack = vec![w];
    seen[w] = true;
    while let Some(v) = stack.pop() {
        if v == x {
            return true;
        }
        for &e in cfg.succs(v) {
            let edge = cfg.edge(e);
            if edge.kind.is_structural() && Some(edge.dst) != y && !seen[edge.dst] {
                seen[edge.dst] = true;
                stack.push(edge.dst);
            }
        }
    }
    false
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn heuristic_placement_recovers_every_count((cfg, truth) in arb_run(MAX_BLOCKS)) {
        let weights = heuristic_weights(&cfg);
        let p = place_edge_counters(&cfg, &weights, |_| false);
        check_tree(&cfg, &p, &classes(&cfg, &weights, &vec![false; cfg.num_edges()]));
        let counts = propagate(&cfg, &measure(&cfg, &truth, &p.chords));
        prop_assert_eq!(counts.as_ref(), Ok(&truth));
        prop_assert_eq!(block_counts(&cfg, &truth), counts.and_then(|c| block_counts(&cfg, &c)));
    }

    #[test]
    fn arbitrary_spanning_trees_recover_every_count((cfg, truth) in arb_run(MAX_BLOCKS), seed in any::<u64>()) {
        let mut rng = Rng::new(seed ^ 0x5eed);
        // Few distinct weights: many ties.
        let weights = IdVec::from_vec((0..cfg.num_edges()).map(|_| rng.below(4) as f64).collect());
        let forced: Vec<bool> = (0..cfg.num_edges()).map(|_| rng.percent(20)).collect();
        let p = place_edge_counters(&cfg, &weights, |e| forced[e.index()]);
        check_tree(&cfg, &p, &classes(&cfg, &weights, &forced));
        let counts = propagate(&cfg, &measure(&cfg, &truth, &p.chords));
        prop_assert_eq!(counts.as_ref(), Ok(&truth));
    }

    #[test]
    fn early_exits_in_the_tree_recover_every_count((cfg, truth) in arb_run(MAX_BLOCKS)) {
        // The record-free placement: early-exit edges are derived, never measured.
        let weights = heuristic_weights(&cfg);
        let p = place_edge_counters_exits_in_tree(&cfg, &weights, |_| false);
        for (e, edge) in cfg.edges() {
            if edge.kind == EdgeKind::EarlyExit {
                prop_assert!(p.tree.in_tree[e], "early exit {} is a chord", e);
            }
        }
        let entry_exits = cfg.early_exit(cfg.entry()).is_some();
        prop_assert_eq!(p.tree.failed_forced.first() == Some(&EdgeId::new(0)), entry_exits);
        let counts = propagate(&cfg, &measure(&cfg, &truth, &p.chords));
        prop_assert_eq!(counts.as_ref(), Ok(&truth));
    }

    #[test]
    fn edges_naive_recovers_early_exits((cfg, truth) in arb_run(MAX_BLOCKS)) {
        let measured: Vec<EdgeId> = cfg
            .edges()
            .filter(|(_, e)| e.kind != EdgeKind::EarlyExit)
            .map(|(id, _)| id)
            .collect();
        let counts = propagate(&cfg, &measure(&cfg, &truth, &measured));
        prop_assert_eq!(counts.as_ref(), Ok(&truth));
    }

    #[test]
    fn blocks_naive_is_sound((cfg, truth) in arb_run(MAX_BLOCKS)) {
        let Ok(all) = block_counts(&cfg, &truth) else {
            return Err(TestCaseError::fail("block counts overflow"));
        };
        let blocks = IdVec::from_vec(all.values()[..cfg.num_blocks()].to_vec());
        let solved = solve_from_blocks(&cfg, &blocks);
        let Ok(solved) = solved else {
            return Err(TestCaseError::fail(format!("{solved:?}")));
        };
        for (e, v) in solved.iter() {
            if let Some(v) = v {
                prop_assert_eq!(*v, truth[e], "edge {}", e);
            }
        }
        // The result is a fixpoint: no equation is left with exactly one unknown.
        let open = |edges: &[EdgeId]| edges.iter().filter(|&&e| solved[e].is_none()).count();
        for b in cfg.blocks() {
            prop_assert_ne!(open(cfg.preds(b)), 1, "in-equation of {}", b);
            prop_assert_ne!(open(cfg.succs(b)), 1, "out-equation of {}", b);
        }
        let exit = cfg.exit();
        prop_assert_ne!(open(cfg.preds(exit)) + open(cfg.succs(exit)), 1);
        // A block with a single incoming edge always determines it.
        for b in cfg.blocks() {
            if let [e] = cfg.preds(b) {
                prop_assert_eq!(solved[*e], Some(truth[*e]), "edge {}", e);
            }
        }
    }

    #[test]
    fn heuristic_weights_are_a_weighting((cfg, _) in arb_run(MAX_BLOCKS)) {
        let w = heuristic_weights(&cfg);
        prop_assert_eq!(w[cfg.entry_edge()], 1.0);
        for (e, &x) in w.iter() {
            prop_assert!(x.is_finite() && x >= 0.0, "edge {} has weight {}", e, x);
            if is_side_edge(&cfg, e) {
                prop_assert_eq!(x, 0.0);
            }
        }
    }

    #[test]
    fn heuristic_weights_conserve_flow_without_loops(seed in any::<u64>()) {
        let cfg = random_dag(seed);
        let w = heuristic_weights(&cfg);
        for v in cfg.nodes() {
            let inflow: f64 = cfg.preds(v).iter().map(|&e| w[e]).sum();
            let outflow: f64 = cfg.succs(v).iter().map(|&e| w[e]).sum();
            prop_assert!((inflow - outflow).abs() <= 1e-9 * inflow.max(1.0), "vertex {}: {} != {}", v, inflow, outflow);
        }
    }

    #[test]
    fn corrupted_chord_gives_the_shifted_flow_or_an_error((cfg, truth) in arb_run(MAX_BLOCKS), seed in any::<u64>()) {
        let p = place_edge_counters(&cfg, &heuristic_weights(&cfg), |_| false);
        let mut rng = Rng::new(seed ^ 0xbad);
        let Some(c) = rng.pick(&p.chords) else { return Ok(()) };
        let delta: i128 = match rng.below(3) {
            0 => 1 << 40,
            1 => 1,
            _ if truth[c] > 0 => -1,
            _ => 1,
        };
        let mut m = measure(&cfg, &truth, &p.chords);
        m[c] = Some(u64::try_from(i128::from(truth[c]) + delta).unwrap_or(0));
        // The only flow agreeing with the corrupted chords moves `delta` around the chord's
        // fundamental cycle; it is the answer if it is non-negative.
        let edge = cfg.edge(c);
        let expected = tree_path(&cfg, &p.tree, edge.dst, edge.src).and_then(|path| {
            let mut x: Vec<i128> = truth.values().iter().map(|&t| i128::from(t)).collect();
            x[c.index()] += delta;
            for (t, sign) in path {
                x[t.index()] += sign * delta;
            }
            x.iter()
                .map(|&v| u64::try_from(v).ok())
                .collect::<Option<Vec<u64>>>()
        });
        let got = propagate(&cfg, &m);
        match expected {
            Some(x) => prop_assert_eq!(got, Ok(IdVec::from_vec(x))),
            None => prop_assert!(got.is_err(), "accepted {:?}", got),
        }
    }

    #[test]
    fn corrupted_measurements_are_never_silently_wrong((cfg, truth) in arb_run(MAX_BLOCKS), seed in any::<u64>()) {
        // Edges-naive: everything but the early exits is measured.
        let measured: Vec<EdgeId> = cfg
            .edges()
            .filter(|(_, e)| e.kind != EdgeKind::EarlyExit)
            .map(|(id, _)| id)
            .collect();
        let mut rng = Rng::new(seed ^ 0xf00d);
        let Some(c) = rng.pick(&measured) else { return Ok(()) };
        let mut m = measure(&cfg, &truth, &measured);
        let bumped = truth[c].wrapping_add(1 + rng.below(3) as u64);
        m[c] = Some(bumped);
        let got = propagate(&cfg, &m);
        if let Ok(x) = &got {
            prop_assert_eq!(check_flow(&cfg, x), Ok(()));
            for (e, v) in m.iter() {
                if let Some(v) = v {
                    prop_assert_eq!(x[e], *v);
                }
            }
        }
        // The unmeasured early exits join EXIT and their sources only: a changed edge with an
        // endpoint outside that star and not a self loop must be refused.
        let edge = cfg.edge(c);
        let in_star = |n: NodeId| cfg.is_exit(n) || cfg.early_exit(n).is_some();
        if edge.src != edge.dst && !(in_star(edge.src) && in_star(edge.dst)) {
            prop_assert!(
                matches!(got, Err(FlowError::Unbalanced { .. } | FlowError::Negative { .. })),
                "{:?}",
                got
            );
        }
    }

    #[test]
    fn dfs_and_loops_match_their_definitions((cfg, _) in arb_run(MAX_BLOCKS)) {
        let dfs = Dfs::compute(&cfg);
        let loops = Loops::compute(&cfg, &dfs);
        // Reachability, and the orders are permutations of the reachable vertices.
        let reachable: Vec<NodeId> = cfg
            .nodes()
            .filter(|&v| reaches_avoiding(&cfg, cfg.entry(), v, None))
            .collect();
        for v in cfg.nodes() {
            prop_assert_eq!(dfs.is_reachable(v), reachable.contains(&v), "vertex {}", v);
        }
        for order in [dfs.preorder(), dfs.postorder(), dfs.topo_order()] {
            let mut sorted = order.to_vec();
            sorted.sort();
            prop_assert_eq!(&sorted, &reachable);
        }
        // Topological order respects non-back edges; back edges point backwards (or at self).
        let mut pos = IdVec::filled(cfg.num_nodes(), usize::MAX);
        for (i, &v) in dfs.topo_order().iter().enumerate() {
            pos[v] = i;
        }
        for (e, edge) in cfg.edges() {
            if !edge.kind.is_structural() || !dfs.is_reachable(edge.src) {
                prop_assert!(!dfs.is_back_edge(e));
                continue;
            }
            if dfs.is_back_edge(e) {
                prop_assert!(pos[edge.dst] <= pos[edge.src], "back edge {}", e);
            } else {
                prop_assert!(pos[edge.src] < pos[edge.dst], "edge {}", e);
            }
        }
        // Natural loops and loop exits, by brute force from the definitions.
        for y in cfg.nodes() {
            let back: Vec<NodeId> = cfg.preds(y).iter()
                .filter(|&&e| dfs.is_back_edge(e))
                .map(|&e| cfg.edge(e).src)
                .collect();
            prop_assert_eq!(loops.is_loop_entry(y), !back.is_empty());
            if back.is_empty() {
                continue;
            }
            let body: Vec<NodeId> = cfg.nodes()
                .filter(|&w| dfs.is_reachable(w))
                .filter(|&w| w == y || back.iter().any(|&x| reaches_avoiding(&cfg, w, x, Some(y))))
                .collect();
            prop_assert_eq!(loops.nat_loop(y), &body[..], "loop of {}", y);
            let exits: Vec<EdgeId> = cfg.edges()
                .filter(|(_, e)| e.kind.is_structural() && body.contains(&e.src) && !body.contains(&e.dst))
                .map(|(id, _)| id)
                .collect();
            prop_assert_eq!(loops.loop_exits(y), &exits[..], "exits of {}", y);
        }
        for (e, _) in cfg.edges() {
            let any = loops.entries().iter().any(|&y| loops.loop_exits(y).contains(&e));
            prop_assert_eq!(loops.is_loop_exit(e), any);
        }
    }

    #[test]
    fn forced_cycles_become_chords((cfg, truth) in arb_run(MAX_BLOCKS)) {
        // Forcing every structural edge: the failed ones are exactly the chords that are not
        // side edges, and counts are still recovered.
        let t = max_spanning_tree(&cfg, |_| TreeClass::Forced);
        let chords: Vec<EdgeId> = t.chords().collect();
        let failed: Vec<EdgeId> = chords.iter().copied().filter(|&e| !is_side_edge(&cfg, e)).collect();
        prop_assert_eq!(&t.failed_forced, &failed);
        prop_assert_eq!(propagate(&cfg, &measure(&cfg, &truth, &chords)), Ok(truth));
    }
}
