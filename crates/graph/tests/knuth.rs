//! Knuth–Stevenson Vprof(Vcnt) placements on random graphs and executions: the counted blocks
//! determine every block count (reconstruction equals the simulated truth), and, checked by
//! linear algebra independent of the derived-graph construction, every counter is necessary.

use proptest::prelude::*;
use tally_graph::knuth::place_vertex_counters_ks;
use tally_graph::testing::{arb_run, Rng};
use tally_graph::{block_counts, Cfg, IdVec, NodeId};

const P: u64 = (1 << 61) - 1;

fn mulmod(a: u64, b: u64) -> u64 {
    ((a as u128 * b as u128) % P as u128) as u64
}

fn inv(a: u64) -> u64 {
    // Fermat: a^(P-2).
    let (mut r, mut b, mut e) = (1u64, a, P - 2);
    while e > 0 {
        if e & 1 == 1 {
            r = mulmod(r, b);
        }
        b = mulmod(b, b);
        e >>= 1;
    }
    r
}

/// Rank over GF(P) (equal to the rational rank for these small 0/±1 systems).
fn rank(mut rows: Vec<Vec<u64>>) -> usize {
    let cols = rows.first().map_or(0, Vec::len);
    let mut r = 0;
    for c in 0..cols {
        let Some(p) = (r..rows.len()).find(|&i| rows[i][c] != 0) else {
            continue;
        };
        rows.swap(r, p);
        let iv = inv(rows[r][c]);
        for x in rows[r].iter_mut() {
            *x = mulmod(*x, iv);
        }
        let pivot = rows[r].clone();
        for (i, row) in rows.iter_mut().enumerate() {
            if i != r && row[c] != 0 {
                let f = row[c];
                for (x, &p) in row.iter_mut().zip(&pivot) {
                    *x = (*x + P - mulmod(f, p)) % P;
                }
            }
        }
        r += 1;
    }
    r
}

/// The linear functional "count of v" over the edge counts: the sum of its outgoing edges.
fn out_row(cfg: &Cfg, v: NodeId) -> Vec<u64> {
    let mut row = vec![0; cfg.num_edges()];
    for &e in cfg.succs(v) {
        row[e.index()] = (row[e.index()] + 1) % P;
    }
    row
}

/// Kirchhoff's law at every vertex: in minus out.
fn flow_rows(cfg: &Cfg) -> Vec<Vec<u64>> {
    cfg.nodes()
        .map(|v| {
            let mut row = vec![0u64; cfg.num_edges()];
            for &e in cfg.preds(v) {
                row[e.index()] = (row[e.index()] + 1) % P;
            }
            for &e in cfg.succs(v) {
                row[e.index()] = (row[e.index()] + P - 1) % P;
            }
            row
        })
        .collect()
}

/// Whether the counts of `known` vertices determine the count of `v` for every flow.
fn determines(cfg: &Cfg, known: &[NodeId], v: NodeId) -> bool {
    let mut rows = flow_rows(cfg);
    rows.extend(known.iter().map(|&u| out_row(cfg, u)));
    let base = rank(rows.clone());
    rows.push(out_row(cfg, v));
    rank(rows) == base
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 192,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn counted_blocks_recover_every_block_count((cfg, truth) in arb_run(30), seed in any::<u64>()) {
        let blocks = block_counts(&cfg, &truth).unwrap();
        let blocks = IdVec::<NodeId, u64>::from_vec(blocks.values()[..cfg.num_blocks()].to_vec());
        let mut rng = Rng::new(seed ^ 0xabcd);
        let w: Vec<f64> = (0..cfg.num_nodes()).map(|_| rng.below(5) as f64).collect();
        let p = place_vertex_counters_ks(&cfg, |v| w[v.index()]);
        prop_assert!(!p.counted.contains(&cfg.exit()));
        let measured: Vec<u64> = p.counted.iter().map(|&v| blocks[v]).collect();
        let got = p.reconstruct(&measured);
        prop_assert_eq!(got.as_ref(), Ok(&blocks));
    }

    #[test]
    fn every_counter_is_needed_and_the_rest_are_determined((cfg, _) in arb_run(14)) {
        let p = place_vertex_counters_ks(&cfg, |v| (v.index() % 3) as f64);
        for v in cfg.blocks() {
            prop_assert!(determines(&cfg, &p.counted, v), "{} not determined", v);
        }
        for (i, &u) in p.counted.iter().enumerate() {
            let mut others = p.counted.clone();
            others.remove(i);
            prop_assert!(!determines(&cfg, &others, u), "counter on {} is redundant", u);
        }
    }

    #[test]
    fn inconsistent_counts_are_refused_or_reconstructed_consistently((cfg, truth) in arb_run(30), seed in any::<u64>()) {
        let blocks = block_counts(&cfg, &truth).unwrap();
        let blocks = IdVec::<NodeId, u64>::from_vec(blocks.values()[..cfg.num_blocks()].to_vec());
        let p = place_vertex_counters_ks(&cfg, |_| 1.0);
        let mut measured: Vec<u64> = p.counted.iter().map(|&v| blocks[v]).collect();
        if measured.is_empty() {
            return Ok(());
        }
        let i = (seed as usize) % measured.len();
        measured[i] += 1;
        // Either refused, or a different but flow-consistent answer: never the truth.
        if let Ok(got) = p.reconstruct(&measured) {
            let got: IdVec<NodeId, u64> = got;
            prop_assert_ne!(got, blocks);
        }
    }
}
