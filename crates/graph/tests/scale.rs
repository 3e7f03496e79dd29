//! Large functions: the analyses are iterative and near linear, so a 50,000-block function with
//! thousands of (nested) loops is handled in well under a second even in a debug build.

use std::time::Instant;
use tally_graph::testing::{simulate, Rng, SimConfig};
use tally_graph::{
    heuristic_weights, place_edge_counters, propagate, Cfg, EdgeKind, IdVec, NodeId,
};

/// `loops` loops in sequence, each `do { if (p) A else B } while (c)` nested in an outer loop
/// every third time, with a `return` from every tenth body.
fn many_loops(loops: usize) -> Cfg {
    use EdgeKind::*;
    let per = 5;
    let n = loops * per + 1;
    let exit = NodeId::new(n);
    let b = NodeId::new;
    let mut edges = Vec::new();
    for i in 0..loops {
        let h = i * per; // head: if
        edges.push((b(h), b(h + 1), Flow));
        edges.push((b(h), b(h + 2), Flow));
        edges.push((b(h + 1), b(h + 3), Flow));
        edges.push((b(h + 2), b(h + 3), Flow));
        edges.push((b(h + 3), b(h), Flow)); // inner back edge
        edges.push((b(h + 3), b(h + 4), Flow));
        if i % 3 == 2 {
            edges.push((b(h + 4), b(h - 2 * per), Flow)); // outer back edge
        }
        if i % 10 == 0 {
            edges.push((b(h + 1), exit, Return));
        }
        edges.push((b(h + 4), b(h + per), Flow));
    }
    edges.push((b(n - 1), exit, Return));
    match Cfg::new(n, edges) {
        Ok(g) => g,
        Err(err) => panic!("bad graph: {err}"),
    }
}

#[test]
fn fifty_thousand_blocks() {
    let cfg = many_loops(10_000);
    let start = Instant::now();
    let weights = heuristic_weights(&cfg);
    let placement = place_edge_counters(&cfg, &weights, |_| false);
    let elapsed = start.elapsed();
    assert_eq!(
        placement.chords.len(),
        cfg.num_edges() - cfg.num_nodes() + 1
    );
    assert!(elapsed.as_secs_f64() < 5.0, "took {elapsed:?}");

    let truth = simulate(
        &cfg,
        &mut Rng::new(7),
        &SimConfig {
            calls: 3,
            step_budget: 200_000,
            ..SimConfig::default()
        },
    );
    let mut measured = IdVec::filled(cfg.num_edges(), None);
    for &c in &placement.chords {
        measured[c] = Some(truth[c]);
    }
    assert_eq!(propagate(&cfg, &measured), Ok(truth));
}
