//! Executions of one function: random walks and true edge counts (see the parent module).

use super::{arb_cfg, random_cfg_with, GenConfig, Rng};
use crate::cfg::{Cfg, EdgeKind};
use crate::ids::{EdgeId, IdVec, NodeId};
use proptest::prelude::*;
use std::collections::VecDeque;

/// Parameters of [`simulate`].
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Number of calls of the function.
    pub calls: u64,
    /// Steps per call before the walk steers to the nearest exit.
    pub step_budget: usize,
    /// Chance (%) of abandoning the frame at a block that has an early-exit edge.
    pub early_exit_percent: u32,
    /// Chance (%) that control re-enters the frame after an early exit (if the graph has
    /// re-entry edges and the step budget is not spent).
    pub reentry_percent: u32,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            calls: 10,
            step_budget: 200,
            early_exit_percent: 10,
            reentry_percent: 50,
        }
    }
}

/// For each block, the length of a shortest structural path to a block with a `Return` or
/// `EarlyExit` edge (0 for such blocks), `None` if there is none.
pub fn distance_to_exit(cfg: &Cfg) -> IdVec<NodeId, Option<usize>> {
    let mut dist = IdVec::filled(cfg.num_nodes(), None);
    let mut queue = VecDeque::new();
    for v in cfg.blocks() {
        let leaves = cfg
            .succs(v)
            .iter()
            .any(|&e| matches!(cfg.edge(e).kind, EdgeKind::Return | EdgeKind::EarlyExit));
        if leaves {
            dist[v] = Some(0);
            queue.push_back(v);
        }
    }
    while let Some(w) = queue.pop_front() {
        let d = dist[w].map_or(0, |d| d + 1);
        for &e in cfg.preds(w) {
            let edge = cfg.edge(e);
            if edge.kind == EdgeKind::Flow && dist[edge.src].is_none() {
                dist[edge.src] = Some(d);
                queue.push_back(edge.src);
            }
        }
    }
    dist
}

/// A random walk over `calls` calls, as the edge sequence (each call starts with `e0`): random
/// structural successors, early exits taken with some chance (then sometimes a re-entry), and
/// after a step budget a shortest route to a return or early exit.
///
/// # Panics
/// If the walk reaches a block with no way out (graphs from [`random_cfg`] have none).
pub fn random_walk(g: &Cfg, rng: &mut Rng, calls: usize) -> Vec<EdgeId> {
    let dist = distance_to_exit(g);
    let reentries: Vec<EdgeId> = g
        .succs(g.exit())
        .iter()
        .copied()
        .filter(|&r| g.edge(r).kind == EdgeKind::Reentry)
        .collect();
    let mut path = Vec::new();
    for _ in 0..calls {
        path.push(g.entry_edge());
        let mut v = g.entry();
        let mut steps = 0;
        loop {
            steps += 1;
            let outs: Vec<EdgeId> = g
                .succs(v)
                .iter()
                .copied()
                .filter(|&x| g.edge(x).kind.is_structural())
                .collect();
            let early = g.early_exit(v);
            let take = if steps > 150 {
                let ret = outs
                    .iter()
                    .copied()
                    .find(|&x| g.edge(x).kind == EdgeKind::Return);
                ret.or(early).or_else(|| {
                    outs.iter()
                        .copied()
                        .filter_map(|x| dist[g.edge(x).dst].map(|d| (d, x)))
                        .min()
                        .map(|(_, x)| x)
                })
            } else if early.is_some() && (outs.is_empty() || rng.percent(15)) {
                early
            } else {
                rng.pick(&outs)
            };
            let Some(x) = take else {
                panic!("walk stuck at {v}");
            };
            path.push(x);
            match g.edge(x).kind {
                EdgeKind::Return => break,
                EdgeKind::EarlyExit => match rng.pick(&reentries) {
                    Some(r) if steps <= 150 && rng.percent(40) => {
                        path.push(r);
                        v = g.edge(r).dst;
                    }
                    _ => break,
                },
                _ => v = g.edge(x).dst,
            }
        }
    }
    path
}

/// Simulates `config.calls` calls of the function and returns the true count of every edge.
///
/// # Panics
/// If the walk reaches a block that cannot reach a `Return` or `EarlyExit` edge (graphs from
/// [`random_cfg`] have none).
pub fn simulate(cfg: &Cfg, rng: &mut Rng, config: &SimConfig) -> IdVec<EdgeId, u64> {
    let dist = distance_to_exit(cfg);
    let structural: IdVec<NodeId, Vec<EdgeId>> = IdVec::from_vec(
        cfg.nodes()
            .map(|v| {
                cfg.succs(v)
                    .iter()
                    .copied()
                    .filter(|&e| cfg.edge(e).kind.is_structural())
                    .collect()
            })
            .collect(),
    );
    let reentries: Vec<EdgeId> = cfg
        .succs(cfg.exit())
        .iter()
        .copied()
        .filter(|&e| cfg.edge(e).kind == EdgeKind::Reentry)
        .collect();

    let mut count = IdVec::filled(cfg.num_edges(), 0u64);
    count[cfg.entry_edge()] = config.calls;
    for _ in 0..config.calls {
        let mut v = cfg.entry();
        let mut steps = 0usize;
        loop {
            steps += 1;
            let steering = steps > config.step_budget;
            let outs = &structural[v];
            let early = cfg.early_exit(v);
            if steering {
                let ret = outs
                    .iter()
                    .copied()
                    .find(|&e| cfg.edge(e).kind == EdgeKind::Return);
                if let Some(e) = ret.or(early) {
                    count[e] += 1;
                    break;
                }
                let next = outs
                    .iter()
                    .copied()
                    .filter_map(|e| dist[cfg.edge(e).dst].map(|d| (d, e)))
                    .min();
                let Some((_, e)) = next else {
                    panic!("block {v} cannot reach a return or early exit");
                };
                count[e] += 1;
                v = cfg.edge(e).dst;
                continue;
            }
            if let Some(ee) = early {
                if outs.is_empty() || rng.percent(config.early_exit_percent) {
                    count[ee] += 1;
                    match rng.pick(&reentries) {
                        Some(re) if rng.percent(config.reentry_percent) => {
                            count[re] += 1;
                            v = cfg.edge(re).dst;
                            continue;
                        }
                        _ => break,
                    }
                }
            }
            let Some(e) = rng.pick(outs) else {
                panic!("block {v} has no successor and no early exit");
            };
            count[e] += 1;
            let edge = cfg.edge(e);
            if edge.kind == EdgeKind::Return {
                break;
            }
            v = edge.dst;
        }
    }
    count
}

/// True counts of one random execution: `random_cfg` with `seed`, simulated with a number of
/// calls drawn from the same seed. A convenience for property tests.
pub fn random_run(seed: u64, max_blocks: usize) -> (Cfg, IdVec<EdgeId, u64>) {
    let mut rng = Rng::new(seed);
    let cfg = random_cfg_with(
        &mut rng,
        &GenConfig {
            max_blocks,
            ..GenConfig::default()
        },
    );
    let sim = SimConfig {
        calls: 1 + rng.below(20) as u64,
        ..SimConfig::default()
    };
    let count = simulate(&cfg, &mut rng, &sim);
    (cfg, count)
}

/// [`random_run`] as a proptest strategy: a graph from [`arb_cfg`] (which shrinks), a number
/// of calls in `1 ..= 20` and the seed of the simulation.
pub fn arb_run(max_blocks: usize) -> impl Strategy<Value = (Cfg, IdVec<EdgeId, u64>)> {
    let config = GenConfig {
        max_blocks,
        ..GenConfig::default()
    };
    (arb_cfg(&config), 1..=20u64, any::<u64>()).prop_map(|(cfg, calls, seed)| {
        let sim = SimConfig {
            calls,
            ..SimConfig::default()
        };
        let count = simulate(&cfg, &mut Rng::new(seed), &sim);
        (cfg, count)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::propagate::check_flow;

    #[test]
    fn simulated_counts_conserve_flow() {
        for seed in 0..300 {
            let (cfg, count) = random_run(seed, 30);
            assert_eq!(check_flow(&cfg, &count), Ok(()), "seed {seed}");
            assert!(count[cfg.entry_edge()] >= 1, "seed {seed}");
        }
    }
}
