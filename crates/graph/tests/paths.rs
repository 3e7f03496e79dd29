//! Property tests of Ball–Larus path profiling (`tally_graph::paths`) on random graphs
//! (irreducible loops, self loops, parallel edges, several returns, early exits, re-entries,
//! dead blocks) and random executions recorded edge by edge:
//!
//! - (a) on small graphs every START-to-END path is enumerated: the numbers are exactly
//!   `0 .. NumPaths(START)`, each once;
//! - (b) regeneration inverts numbering;
//! - (c) the increments of the chords on a path sum to its number, for the heuristic and for
//!   arbitrary spanning trees, and replaying the placement's actions along each execution counts
//!   exactly its paths' numbers, in order;
//! - (d) edge and block counts derived from the path counts equal the simulated ones, for every
//!   edge including `e0`, early exits and re-entries;
//! - (e) with a small limit, cutting brings `NumPaths(START)` under it (or cutting every `Flow`
//!   edge would not either) and (a)-(d) still hold.

use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use std::collections::BTreeMap;
use tally_graph::paths::{
    chord_increments, dag_weights, derive_counts, number_paths, number_paths_limited, CfgImage,
    DagEdgeId, Increments, NumberedDag, PathDag, PathError, PathPlacement,
};
use tally_graph::testing::{arb_cfg, distance_to_exit, sample, GenConfig, Rng};
use tally_graph::{block_counts, heuristic_weights, Cfg, EdgeId, EdgeKind, IdVec, NodeId};

/// Graphs with at most this many paths are enumerated completely.
const ENUMERATE_UP_TO: u128 = 2_000;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 150,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A random graph with up to `max_blocks` blocks (often fewer, so that enumeration happens)
/// and up to 1 to 3 extra edges per block.
fn arb_graph(max_blocks: usize) -> impl Strategy<Value = Cfg> {
    (1..=max_blocks, 1..=3usize).prop_flat_map(|(max_blocks, max_extra_edges)| {
        arb_cfg(&GenConfig {
            max_blocks,
            max_extra_edges,
            ..GenConfig::default()
        })
    })
}

/// The edges each of `calls` calls executes, in order: `e0`, structural edges, and at a block
/// with an early exit sometimes the early exit, then sometimes a re-entry and more. After
/// `budget` steps the walk steers to the nearest return or early exit (as
/// `testing::simulate` does, but recording the walk).
fn walk_calls(cfg: &Cfg, rng: &mut Rng, calls: usize, budget: usize) -> Vec<Vec<EdgeId>> {
    let dist = distance_to_exit(cfg);
    let reentries: Vec<EdgeId> = cfg
        .succs(cfg.exit())
        .iter()
        .copied()
        .filter(|&e| cfg.edge(e).kind == EdgeKind::Reentry)
        .collect();
    let mut walks = Vec::new();
    for _ in 0..calls {
        let mut walk = vec![cfg.entry_edge()];
        let mut v = cfg.entry();
        let mut steps = 0;
        loop {
            steps += 1;
            let outs: Vec<EdgeId> = cfg
                .succs(v)
                .iter()
                .copied()
                .filter(|&e| cfg.edge(e).kind.is_structural())
                .collect();
            let early = cfg.early_exit(v);
            if steps > budget {
                let ret = outs
                    .iter()
                    .copied()
                    .find(|&e| cfg.edge(e).kind == EdgeKind::Return);
                if let Some(e) = ret.or(early) {
                    walk.push(e);
                    break;
                }
                let next = outs
                    .iter()
                    .filter_map(|&e| dist[cfg.edge(e).dst].map(|d| (d, e)))
                    .min();
                let Some((_, e)) = next else {
                    panic!("block {v} cannot reach a return or early exit");
                };
                walk.push(e);
                v = cfg.edge(e).dst;
                continue;
            }
            if let Some(ee) = early {
                if outs.is_empty() || rng.percent(10) {
                    walk.push(ee);
                    match rng.pick(&reentries) {
                        Some(re) if rng.percent(50) => {
                            walk.push(re);
                            v = cfg.edge(re).dst;
                            continue;
                        }
                        _ => break,
                    }
                }
            }
            let Some(e) = rng.pick(&outs) else {
                panic!("block {v} has no successor and no early exit");
            };
            walk.push(e);
            if cfg.edge(e).kind == EdgeKind::Return {
                break;
            }
            v = cfg.edge(e).dst;
        }
        walks.push(walk);
    }
    walks
}

/// The true count of every edge.
fn edge_counts(cfg: &Cfg, walks: &[Vec<EdgeId>]) -> IdVec<EdgeId, u64> {
    let mut count = IdVec::filled(cfg.num_edges(), 0u64);
    for &e in walks.iter().flatten() {
        count[e] += 1;
    }
    count
}

/// Cuts a walk into its DAG paths: a path ends at a return, an early exit, or a back or cut
/// edge (whose dummy `START -> y` edge starts the next one); a re-entry starts one.
fn segment(dag: &PathDag, walk: &[EdgeId]) -> Vec<Vec<DagEdgeId>> {
    let mut paths = Vec::new();
    let mut current = Vec::new();
    for &e in walk {
        match dag.image(e) {
            CfgImage::Start(d) | CfgImage::Reentry(d) => {
                assert!(current.is_empty(), "{e} starts a path inside another");
                current.push(d);
            }
            CfgImage::Kept(d) => {
                current.push(d);
                if dag.edge(d).dst == dag.end() {
                    paths.push(std::mem::take(&mut current));
                }
            }
            CfgImage::EarlyExit(d) => {
                current.push(d);
                paths.push(std::mem::take(&mut current));
            }
            CfgImage::Back { end, start } | CfgImage::Cut { end, start } => {
                current.push(end);
                paths.push(std::mem::take(&mut current));
                current.push(start);
            }
            CfgImage::Dead => panic!("the walk took dead edge {e}"),
        }
    }
    assert!(current.is_empty(), "a walk ended inside a path");
    paths
}

/// Every START-to-END path of the DAG (only called when there are few).
fn enumerate(dag: &PathDag) -> Vec<Vec<DagEdgeId>> {
    fn go(dag: &PathDag, v: NodeId, path: &mut Vec<DagEdgeId>, out: &mut Vec<Vec<DagEdgeId>>) {
        if v == dag.end() {
            out.push(path.clone());
            return;
        }
        for &d in dag.succs(v) {
            path.push(d);
            go(dag, dag.edge(d).dst, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    go(dag, dag.start(), &mut Vec::new(), &mut out);
    out
}

/// The structural invariants of the DAG: acyclic in `topo_order`, START a source, END a sink,
/// each live edge's image of the right shape.
fn check_dag(cfg: &Cfg, dag: &PathDag) -> Result<(), TestCaseError> {
    let mut pos = IdVec::filled(dag.num_nodes(), usize::MAX);
    for (i, &v) in dag.topo_order().iter().enumerate() {
        pos[v] = i;
    }
    for (d, edge) in dag.edges() {
        prop_assert!(
            pos[edge.src] < pos[edge.dst],
            "{} goes backwards",
            dag.describe(d)
        );
    }
    prop_assert!(dag.preds(dag.start()).is_empty());
    prop_assert!(dag.succs(dag.end()).is_empty());
    for (e, edge) in cfg.edges() {
        let image = dag.image(e);
        let live = dag.is_live(edge.src) || edge.kind == EdgeKind::Reentry;
        let ok = match (edge.kind, image) {
            (_, CfgImage::Dead) => !live,
            (EdgeKind::Entry, CfgImage::Start(_)) => true,
            (EdgeKind::Flow | EdgeKind::Return, CfgImage::Kept(_)) => {
                !dag.is_back_edge(e) && !dag.is_cut(e)
            }
            (EdgeKind::Flow, CfgImage::Back { .. }) => dag.is_back_edge(e),
            (EdgeKind::Flow, CfgImage::Cut { .. }) => dag.is_cut(e),
            (EdgeKind::EarlyExit, CfgImage::EarlyExit(_)) => true,
            (EdgeKind::Reentry, CfgImage::Reentry(_)) => true,
            _ => false,
        };
        prop_assert!(ok && (live || image == CfgImage::Dead), "{e}: {image:?}");
    }
    Ok(())
}

/// Sum of the increments along a path (tree edges have 0).
fn inc_sum(incs: &Increments, path: &[DagEdgeId]) -> i128 {
    path.iter().map(|&d| incs.inc[d]).sum()
}

/// Checks (a)-(d) for one numbered DAG and a set of recorded calls.
fn check_everything(
    cfg: &Cfg,
    p: &NumberedDag,
    walks: &[Vec<EdgeId>],
    rng: &mut Rng,
) -> Result<(), TestCaseError> {
    let dag = p.dag();
    check_dag(cfg, dag)?;
    let heuristic = dag_weights(dag, &heuristic_weights(cfg)).unwrap();
    let random: IdVec<DagEdgeId, f64> =
        IdVec::from_vec((0..dag.num_edges()).map(|_| rng.below(4) as f64).collect());
    let trees = [
        chord_increments(p, &heuristic).unwrap(),
        chord_increments(p, &random).unwrap(),
    ];

    // (a), (b), (c) on every path of small graphs.
    if p.total() <= ENUMERATE_UP_TO {
        let all = enumerate(dag);
        let mut numbers: Vec<u128> = Vec::new();
        for path in &all {
            let n = p.path_number(path).unwrap();
            numbers.push(n);
            prop_assert_eq!(&p.regenerate(n).unwrap().edges, path);
            for incs in &trees {
                prop_assert_eq!(inc_sum(incs, path), n as i128);
            }
        }
        numbers.sort_unstable();
        prop_assert_eq!(numbers, (0..p.total()).collect::<Vec<_>>());
    }

    // (b), (c) on the executed paths; the placement replayed along each call.
    let placements: Vec<PathPlacement> = trees
        .iter()
        .map(|incs| PathPlacement::new(p, incs).unwrap())
        .collect();
    let mut path_counts: BTreeMap<u128, u64> = BTreeMap::new();
    for walk in walks {
        let mut numbers = Vec::new();
        for path in segment(dag, walk) {
            let n = p.path_number(&path).unwrap();
            let regen = p.regenerate(n).unwrap();
            prop_assert_eq!(&regen.edges, &path);
            for incs in &trees {
                prop_assert_eq!(inc_sum(incs, &path), n as i128);
            }
            numbers.push(n as i128);
            *path_counts.entry(n).or_default() += 1;
        }
        for pl in &placements {
            // r starts with garbage: reading it before an Init would show.
            let counted = pl.replay(walk.iter().copied(), -7_777_777_777);
            prop_assert_eq!(&counted, &numbers, "{}", pl.summary());
        }
    }

    // (d) derived counts equal the simulated ones.
    let truth = edge_counts(cfg, walks);
    let derived = derive_counts(cfg, p, path_counts).unwrap();
    prop_assert_eq!(&derived.edges, &truth);
    prop_assert_eq!(Ok(derived.blocks), block_counts(cfg, &truth));
    Ok(())
}

/// The `Flow` edges that can be cut.
fn cuttable(cfg: &Cfg, dag: &PathDag) -> Vec<EdgeId> {
    cfg.edges()
        .filter(|&(e, edge)| {
            edge.kind == EdgeKind::Flow && dag.is_live(edge.src) && !dag.is_back_edge(e)
        })
        .map(|(e, _)| e)
        .collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn numbering_placement_regeneration_and_derivation_are_exact(cfg in arb_graph(24), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let p = number_paths(&cfg).unwrap();
        let calls = 1 + rng.below(8);
        let walks = walk_calls(&cfg, &mut rng, calls, 60);
        check_everything(&cfg, &p, &walks, &mut rng)?;
    }

    #[test]
    fn cutting_respects_the_limit_and_stays_exact(cfg in arb_dense_graph(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let p = limited(&cfg, &mut rng)?;
        let calls = 1 + rng.below(8);
        let walks = walk_calls(&cfg, &mut rng, calls, 60);
        check_everything(&cfg, &p, &walks, &mut rng)?;
    }
}

/// A graph with many paths: up to 40 blocks, up to 3 extra edges each, few returns.
fn arb_dense_graph() -> impl Strategy<Value = Cfg> {
    (1..=40usize).prop_flat_map(|max_blocks| {
        arb_cfg(&GenConfig {
            max_blocks,
            max_extra_edges: 3,
            return_percent: 5,
            ..GenConfig::default()
        })
    })
}

/// Numbers `cfg` under a random limit, mostly below its plain path count: first a limit drawn
/// below the count, then (if that is unreachable) one between the fewest paths the heuristic
/// reached and the count, then the count with every `Flow` edge cut, which must fit. Checks the
/// limit, the guarantee, and that a limit the plain count fits makes no cut.
fn limited(cfg: &Cfg, rng: &mut Rng) -> Result<NumberedDag, TestCaseError> {
    let plain = PathDag::new(cfg);
    let plain_total = NumberedDag::new(plain.clone()).unwrap().total();
    let everything = cuttable(cfg, &plain);
    let all_cut = NumberedDag::new(PathDag::with_cuts(cfg, &everything).unwrap())
        .unwrap()
        .total();
    let below = |rng: &mut Rng, lo: u128, hi: u128| -> u128 {
        lo + rng.below(usize::try_from(hi - lo).unwrap_or(usize::MAX)) as u128
    };
    let mut limit = if plain_total > 1 && rng.percent(90) {
        below(rng, 1, plain_total)
    } else {
        plain_total
    };
    for attempt in 0..3 {
        match number_paths_limited(cfg, limit) {
            Ok(p) => {
                prop_assert!(p.total() <= limit, "{} paths > limit {limit}", p.total());
                if plain_total <= limit {
                    prop_assert_eq!(p.dag().cuts().count(), 0);
                }
                return Ok(p);
            }
            Err(PathError::LimitUnreachable { limit: l, fewest }) => {
                prop_assert_eq!(l, limit);
                prop_assert!(fewest > limit);
                // The guarantee: only when cutting every Flow edge would not fit either.
                prop_assert!(
                    all_cut > limit,
                    "{all_cut} paths with every edge cut fit {limit}"
                );
                limit = if attempt == 0 && fewest < plain_total {
                    below(rng, fewest, plain_total)
                } else {
                    all_cut
                };
            }
            Err(err) => return Err(TestCaseError::fail(err.to_string())),
        }
    }
    Err(TestCaseError::fail(format!(
        "{all_cut} paths with every edge cut do not fit"
    )))
}

#[test]
fn limited_numbering_is_plain_when_it_fits_and_cuts_often() {
    let (mut cut, mut cases) = (0, 0);
    let mut runner = TestRunner::deterministic();
    for seed in 0..150 {
        let cfg = sample(&arb_dense_graph(), &mut runner);
        let mut rng = Rng::new(seed);
        let plain = number_paths(&cfg).unwrap();
        let unlimited = number_paths_limited(&cfg, u128::MAX).unwrap();
        assert_eq!(unlimited.total(), plain.total(), "seed {seed}");
        assert_eq!(unlimited.dag().cuts().count(), 0, "seed {seed}");
        match limited(&cfg, &mut rng) {
            Ok(p) => cut += usize::from(p.dag().cuts().count() > 0),
            Err(err) => panic!("seed {seed}: {err}"),
        }
        cases += 1;
    }
    assert!(
        cut * 3 >= cases,
        "only {cut} of {cases} limited numberings cut anything"
    );
}

#[test]
fn simulated_walks_cover_every_kind_of_path_end() {
    // The generator and the walker together exercise each way a path starts and ends.
    let (mut back, mut early, mut reentry, mut ret) = (0, 0, 0, 0);
    let mut runner = TestRunner::deterministic();
    for seed in 0..200 {
        let cfg = sample(&arb_graph(24), &mut runner);
        let mut rng = Rng::new(seed);
        let dag = PathDag::new(&cfg);
        for walk in walk_calls(&cfg, &mut rng, 4, 60) {
            for e in walk {
                match dag.image(e) {
                    CfgImage::Back { .. } => back += 1,
                    CfgImage::EarlyExit(_) => early += 1,
                    CfgImage::Reentry(_) => reentry += 1,
                    CfgImage::Kept(d) if dag.edge(d).dst == dag.end() => ret += 1,
                    _ => {}
                }
            }
        }
    }
    for (what, n) in [
        ("back edges", back),
        ("early exits", early),
        ("re-entries", reentry),
        ("returns", ret),
    ] {
        assert!(n >= 20, "only {n} {what} taken");
    }
}
