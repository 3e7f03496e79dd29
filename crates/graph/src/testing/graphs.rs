//! Random control-flow graphs (see the parent module for what they contain): drawn from a
//! seeded [`Rng`] ([`random_cfg_with`]) or from proptest ([`arb_cfg`]), which generates a
//! [`GraphSpec`] with the same distribution and shrinks a failure to a small graph.

use super::Rng;
use crate::cfg::{Cfg, EdgeKind};
use crate::ids::NodeId;
use proptest::prelude::*;

/// Shape parameters of [`random_cfg`].
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// The graph has `1 ..= max_blocks` blocks.
    pub max_blocks: usize,
    /// Each block gets `0 ..= max_extra_edges` edges besides the one that guarantees it can
    /// reach a return.
    pub max_extra_edges: usize,
    /// Chance (%) that a block has an early-exit edge.
    pub early_exit_percent: u32,
    /// Chance (%) that a block with an early-exit edge has no other successor.
    pub noreturn_percent: u32,
    /// Chance (%) that a block has a re-entry edge.
    pub reentry_percent: u32,
    /// Chance (%) that an extra edge is a `Return` rather than a `Flow` edge.
    pub return_percent: u32,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            max_blocks: 24,
            max_extra_edges: 2,
            early_exit_percent: 20,
            noreturn_percent: 25,
            reentry_percent: 10,
            return_percent: 10,
        }
    }
}

/// A random graph with the default shape parameters and up to `max_blocks` blocks.
pub fn random_cfg(seed: u64, max_blocks: usize) -> Cfg {
    let config = GenConfig {
        max_blocks,
        ..GenConfig::default()
    };
    random_cfg_with(&mut Rng::new(seed), &config)
}

/// A random graph drawn from `rng` (see the module doc for what it contains).
pub fn random_cfg_with(rng: &mut Rng, config: &GenConfig) -> Cfg {
    use EdgeKind::*;
    let n = 1 + rng.below(config.max_blocks.max(1));
    let exit = NodeId::new(n);
    let block = |i: usize| NodeId::new(i);
    let mut edges: Vec<(NodeId, NodeId, EdgeKind)> = Vec::new();
    for i in 0..n {
        let early = rng.percent(config.early_exit_percent);
        if early {
            edges.push((block(i), exit, EarlyExit));
        }
        let noreturn = early && rng.percent(config.noreturn_percent);
        if noreturn {
            // Like a block ending in `exit(0); unreachable`.
        } else if i + 1 == n || rng.percent(config.return_percent) {
            edges.push((block(i), exit, Return));
        } else {
            // A forward edge: by induction every block can reach a terminating edge.
            let j = i + 1 + rng.below(n - i - 1);
            edges.push((block(i), block(j), Flow));
        }
        if !noreturn {
            for _ in 0..rng.below(config.max_extra_edges + 1) {
                if rng.percent(config.return_percent) {
                    edges.push((block(i), exit, Return));
                } else {
                    // Any target: self loops, back edges, parallel edges all occur.
                    edges.push((block(i), block(rng.below(n)), Flow));
                }
            }
        }
        if rng.percent(config.reentry_percent) {
            edges.push((exit, block(i), Reentry));
        }
    }
    rng.shuffle(&mut edges);
    match Cfg::new(n, edges) {
        Ok(cfg) => cfg,
        // The generator only builds edges of the right shapes, one early exit and one re-entry
        // per block; anything else is a bug here.
        Err(err) => panic!("random_cfg built an invalid graph: {err}"),
    }
}

/// A random graph as proptest generates it: the choices [`random_cfg_with`] makes, block by
/// block, as values proptest can shrink (fewer blocks, fewer edges, no early exit, chains of
/// forward edges, edges in the order they were made). [`GraphSpec::build`] makes the graph;
/// every spec makes a valid one.
#[derive(Clone, Debug)]
pub struct GraphSpec {
    /// Block `i`'s choices; at least one block.
    pub blocks: Vec<BlockSpec>,
    /// The edge order: a Fisher-Yates shuffle where step `k` (of the `i`-th-to-last edge)
    /// swaps edge `i` with edge `i - swaps[k] % (i + 1)`; zeros (or a short list) keep the
    /// order of creation.
    pub swaps: Vec<u16>,
}

/// One block's choices in a [`GraphSpec`].
#[derive(Clone, Debug)]
pub struct BlockSpec {
    /// The block has an early-exit edge.
    pub early: bool,
    /// With `early`: the block has no other successor (like a call to `exit`).
    pub noreturn: bool,
    /// The edge that guarantees a way out is a `Return` (always, for the last block) ...
    pub ret: bool,
    /// ... or a forward `Flow` edge to block `i + 1 + forward % (n - i - 1)`.
    pub forward: u16,
    /// Extra edges (none if `noreturn`).
    pub extras: Vec<Extra>,
    /// The block has a re-entry edge.
    pub reentry: bool,
}

/// An extra edge of a [`BlockSpec`].
#[derive(Clone, Copy, Debug)]
pub enum Extra {
    /// A `Return` edge.
    Return,
    /// A `Flow` edge to the block `back % n` blocks before (wrapping around): any block, so
    /// self loops (`0`, the simplest), back edges and parallel edges occur.
    Flow(u16),
}

fn chance(percent: u32) -> proptest::bool::Weighted {
    proptest::bool::weighted(f64::from(percent.min(100)) / 100.0)
}

impl GraphSpec {
    /// The graph, `e1, e2, ...` in the order of [`GraphSpec::swaps`].
    pub fn build(&self) -> Cfg {
        use EdgeKind::*;
        let n = self.blocks.len().max(1);
        let exit = NodeId::new(n);
        let block = NodeId::new;
        let mut edges: Vec<(NodeId, NodeId, EdgeKind)> = Vec::new();
        for (i, b) in self.blocks.iter().enumerate() {
            if b.early {
                edges.push((block(i), exit, EarlyExit));
            }
            let noreturn = b.early && b.noreturn;
            if noreturn {
                // Like a block ending in `exit(0); unreachable`.
            } else if i + 1 == n || b.ret {
                edges.push((block(i), exit, Return));
            } else {
                let j = i + 1 + usize::from(b.forward) % (n - i - 1);
                edges.push((block(i), block(j), Flow));
            }
            if !noreturn {
                for extra in &b.extras {
                    match *extra {
                        Extra::Return => edges.push((block(i), exit, Return)),
                        Extra::Flow(back) => {
                            let j = (i + n - usize::from(back) % n) % n;
                            edges.push((block(i), block(j), Flow));
                        }
                    }
                }
            }
            if b.reentry {
                edges.push((exit, block(i), Reentry));
            }
        }
        for (k, i) in (1..edges.len()).rev().enumerate() {
            let s = self.swaps.get(k).map_or(0, |&s| usize::from(s));
            edges.swap(i, i - s % (i + 1));
        }
        match Cfg::new(n, edges) {
            Ok(cfg) => cfg,
            Err(err) => panic!("GraphSpec built an invalid graph: {err}"),
        }
    }
}

/// The choices of one block under `config`, as [`random_cfg_with`] makes them.
fn block_spec(config: &GenConfig) -> impl Strategy<Value = BlockSpec> {
    let extra = (chance(config.return_percent), any::<u16>()).prop_map(|(ret, t)| {
        if ret {
            Extra::Return
        } else {
            Extra::Flow(t)
        }
    });
    (
        chance(config.early_exit_percent),
        chance(config.noreturn_percent),
        chance(config.return_percent),
        any::<u16>(),
        proptest::collection::vec(extra, 0..=config.max_extra_edges),
        chance(config.reentry_percent),
    )
        .prop_map(
            |(early, noreturn, ret, forward, extras, reentry)| BlockSpec {
                early,
                noreturn,
                ret,
                forward,
                extras,
                reentry,
            },
        )
}

/// Random graphs with the distribution of [`random_cfg_with`] under `config`, as a proptest
/// strategy for [`GraphSpec`]s: a failing case shrinks to a small graph.
pub fn graph_spec(config: &GenConfig) -> impl Strategy<Value = GraphSpec> {
    let max = config.max_blocks.max(1);
    // Enough swaps for a full shuffle of the most edges a graph can have.
    let most_edges = max * (config.max_extra_edges + 3);
    (
        proptest::collection::vec(block_spec(config), 1..=max),
        proptest::collection::vec(any::<u16>(), most_edges),
    )
        .prop_map(|(blocks, swaps)| GraphSpec { blocks, swaps })
}

/// [`graph_spec`], built: random graphs under `config` that shrink.
pub fn arb_cfg(config: &GenConfig) -> impl Strategy<Value = Cfg> {
    graph_spec(config).prop_map(|spec| spec.build())
}

/// Programs of `1 ..= max_functions` functions, their graphs from [`arb_cfg`] under `shape` (so
/// a failure shrinks to fewer, smaller functions), function `i` of `n` made from its graph by
/// `make(i, n, graph, rng)` with a generator seeded by proptest.
pub fn arb_functions<F: std::fmt::Debug>(
    shape: &GenConfig,
    max_functions: usize,
    make: impl Fn(usize, usize, Cfg, &mut Rng) -> F,
) -> impl Strategy<Value = Vec<F>> {
    (
        proptest::collection::vec(arb_cfg(shape), 1..=max_functions.max(1)),
        any::<u64>(),
    )
        .prop_map(move |(graphs, seed)| {
            let mut rng = Rng::new(seed);
            let n = graphs.len();
            graphs
                .into_iter()
                .enumerate()
                .map(|(i, g)| make(i, n, g, &mut rng))
                .collect()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::IdVec;

    #[test]
    fn generator_covers_the_interesting_shapes() {
        covers_the_interesting_shapes((0..300).map(|seed| random_cfg(seed, 30)));
    }

    #[test]
    fn strategy_covers_the_interesting_shapes() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let config = GenConfig {
            max_blocks: 30,
            ..GenConfig::default()
        };
        let strategy = arb_cfg(&config);
        covers_the_interesting_shapes(
            (0..300).map(|_| super::super::sample(&strategy, &mut runner)),
        );
    }

    fn covers_the_interesting_shapes(graphs: impl Iterator<Item = Cfg>) {
        let (mut early, mut reentry, mut self_loop, mut parallel) = (0, 0, 0, 0);
        let (mut dead, mut irreducible) = (0, 0);
        for cfg in graphs {
            let dfs = crate::dfs::Dfs::compute(&cfg);
            let mut seen = std::collections::HashSet::new();
            for (_, e) in cfg.edges() {
                early += usize::from(e.kind == EdgeKind::EarlyExit);
                reentry += usize::from(e.kind == EdgeKind::Reentry);
                self_loop += usize::from(e.src == e.dst);
                parallel += usize::from(e.kind == EdgeKind::Flow && !seen.insert((e.src, e.dst)));
            }
            dead += usize::from(cfg.blocks().any(|b| !dfs.is_reachable(b)));
            // A loop member before its entry in topological order: the entry does not dominate
            // the loop, so the graph is irreducible.
            let loops = crate::loops::Loops::compute(&cfg, &dfs);
            let mut pos = IdVec::filled(cfg.num_nodes(), 0);
            for (i, &v) in dfs.topo_order().iter().enumerate() {
                pos[v] = i;
            }
            irreducible += usize::from(
                loops
                    .entries()
                    .iter()
                    .any(|&y| loops.nat_loop(y).iter().any(|&w| pos[w] < pos[y])),
            );
        }
        for (what, n) in [
            ("early exits", early),
            ("re-entries", reentry),
            ("self loops", self_loop),
            ("parallel edges", parallel),
            ("graphs with dead blocks", dead),
            ("irreducible graphs", irreducible),
        ] {
            assert!(n >= 10, "only {n} {what} in 300 graphs");
        }
    }
}
