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

use crate::cfg::{Cfg, EdgeKind};
use crate::ids::{EdgeId, IdVec, NodeId};
use std::collections::VecDeque;

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

/// SplitMix64: a tiny, good-enough pseudo-random generator for tests.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0 .. n` (`0` if `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u32) -> bool {
        self.below(100) < percent as usize
    }

    /// A random element of `items`, `None` if it is empty.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            None
        } else {
            Some(items[self.below(items.len())])
        }
    }

    /// Shuffles `items` in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

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

    #[test]
    fn generator_covers_the_interesting_shapes() {
        let (mut early, mut reentry, mut self_loop, mut parallel) = (0, 0, 0, 0);
        let (mut dead, mut irreducible) = (0, 0);
        for seed in 0..300 {
            let cfg = random_cfg(seed, 30);
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

// ------------------------------------------------------------------------------------------
// Witness tracing (Ball & Larus 1994 §4): random programs of several functions with calls, and
// their executions as `witness::Event`s. Additions for `crate::witness`; nothing above depends on
// them.
// ------------------------------------------------------------------------------------------

use crate::witness::{CallSite, Callee, Event, FuncId, FunctionInput, Landing};

/// Shape parameters of [`random_program`].
#[derive(Clone, Debug)]
pub struct ProgramConfig {
    /// The program has `1 ..= max_functions` functions.
    pub max_functions: usize,
    /// The shape of each function's graph.
    pub graph: GenConfig,
    /// Chance (%) that a block has call sites.
    pub call_percent: u32,
    /// A block with calls has `1 ..= max_sites` of them.
    pub max_sites: usize,
    /// Chance (%) that a call site is [`Callee::Unknown`] (else direct if possible, or opaque).
    pub unknown_percent: u32,
    /// Chance (%) that a call site is [`Callee::Opaque`].
    pub opaque_percent: u32,
    /// Chance (%) that a block with calls gets an unwind edge (an `invoke`).
    pub unwind_percent: u32,
}

impl Default for ProgramConfig {
    fn default() -> Self {
        ProgramConfig {
            max_functions: 5,
            graph: GenConfig {
                max_blocks: 16,
                max_extra_edges: 3,
                ..GenConfig::default()
            },
            call_percent: 30,
            max_sites: 2,
            unknown_percent: 40,
            opaque_percent: 20,
            unwind_percent: 30,
        }
    }
}

/// A random program: function `i` calls functions `j > i` directly (so direct calls always
/// end), any function through [`Callee::Unknown`] sites (recursion included). Like tally's
/// lowering, every block with a call that is not opaque has an `EarlyExit` edge, and every
/// block with an `EarlyExit` edge has an unknown call (the one that may not return: in a block
/// with no other successor, like a call to `exit`, it is the last call). Some blocks with calls
/// get an unwind edge to a random block. Graphs come from [`random_cfg_with`]: multi-way
/// branches, self loops, irreducible loops, re-entry edges, dead blocks.
pub fn random_program(rng: &mut Rng, config: &ProgramConfig) -> Vec<FunctionInput> {
    let n = 1 + rng.below(config.max_functions.max(1));
    (0..n)
        .map(|i| {
            let g = random_cfg_with(rng, &config.graph);
            let mut calls: IdVec<NodeId, Vec<CallSite>> = IdVec::filled(g.num_nodes(), Vec::new());
            let mut edges: Vec<crate::cfg::Edge> = g.edges().map(|(_, e)| e).collect();
            let mut unwind = vec![false; edges.len()];
            for v in g.blocks() {
                if rng.percent(config.call_percent) {
                    for _ in 0..1 + rng.below(config.max_sites.max(1)) {
                        let callee = if rng.percent(config.unknown_percent) {
                            Callee::Unknown
                        } else if i + 1 < n && !rng.percent(config.opaque_percent) {
                            let g = FuncId((i + 1 + rng.below(n - i - 1)) as u32);
                            if rng.percent(30) {
                                Callee::DirectBack(g)
                            } else {
                                Callee::Direct(g)
                            }
                        } else {
                            Callee::Opaque
                        };
                        calls[v].push(CallSite { callee });
                    }
                }
                let early = g.early_exit(v).is_some();
                if early {
                    calls[v].push(CallSite {
                        callee: Callee::Unknown,
                    });
                }
                let calling = calls[v].iter().any(|c| c.callee != Callee::Opaque);
                if calling && !early {
                    edges.push(crate::cfg::Edge {
                        src: v,
                        dst: g.exit(),
                        kind: EdgeKind::EarlyExit,
                    });
                    unwind.push(false);
                }
                if calling && rng.percent(config.unwind_percent) {
                    edges.push(crate::cfg::Edge {
                        src: v,
                        dst: NodeId::new(rng.below(g.num_blocks())),
                        kind: EdgeKind::Flow,
                    });
                    unwind.push(true);
                }
            }
            let cfg = match Cfg::from_edges(g.num_blocks(), edges) {
                Ok(cfg) => cfg,
                Err(err) => panic!("random_program built an invalid graph: {err}"),
            };
            FunctionInput {
                cfg,
                calls,
                unwind: IdVec::from_vec(unwind),
            }
        })
        .collect()
}

/// Parameters of [`simulate_program`].
#[derive(Clone, Debug)]
pub struct ExecConfig {
    /// Top-level activations (the first of function 0, then random functions).
    pub top_calls: usize,
    /// Steps (blocks and calls) before every activation steers to its nearest end.
    pub step_budget: usize,
    /// Chance (%) that an unknown call calls back (again) into a random function.
    pub callback_percent: u32,
    /// Chance (%) that an unknown call abandons its frame (longjmp, throw, exit).
    pub abandon_percent: u32,
    /// Chance (%) that an abandonment ends the thread rather than landing.
    pub end_percent: u32,
    /// No callbacks beyond this many activations.
    pub max_depth: usize,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            top_calls: 3,
            step_budget: 400,
            callback_percent: 25,
            abandon_percent: 8,
            end_percent: 20,
            max_depth: 8,
        }
    }
}

struct SimFrame {
    func: FuncId,
    block: NodeId,
    site: usize,
    in_unknown: bool,
    /// In a [`Callee::DirectBack`] call: `Back` follows its return.
    back: bool,
}

/// For each vertex, the length of a shortest path of normal edges to a block that returns or
/// has no normal successor (where the walk ends), `None` if there is none.
fn distance_to_end(f: &FunctionInput) -> IdVec<NodeId, Option<usize>> {
    let cfg = &f.cfg;
    let mut dist = IdVec::filled(cfg.num_nodes(), None);
    let mut queue = VecDeque::new();
    for v in cfg.blocks() {
        let mut outs = f.normal_succs(v).peekable();
        let ends = outs.peek().is_none()
            || f.normal_succs(v)
                .any(|e| cfg.edge(e).kind == EdgeKind::Return);
        if ends {
            dist[v] = Some(0);
            queue.push_back(v);
        }
    }
    while let Some(w) = queue.pop_front() {
        let d = dist[w].map_or(0, |d| d + 1);
        for &e in cfg.preds(w) {
            let src = cfg.edge(e).src;
            if f.is_normal(e) && !cfg.is_exit(src) && dist[src].is_none() {
                dist[src] = Some(d);
                queue.push_back(src);
            }
        }
    }
    dist
}

/// One random execution of a program from [`random_program`], as the events the
/// instrumentation sees (see [`crate::witness::Event`]): calls in block order before the
/// terminator, callbacks and normal returns of unknown calls, abandonments that land at a
/// `Reentry` target or an unwind edge of any activation on the stack or end the thread.
pub fn simulate_program(funcs: &[FunctionInput], rng: &mut Rng, config: &ExecConfig) -> Vec<Event> {
    let dist: Vec<IdVec<NodeId, Option<usize>>> = funcs.iter().map(distance_to_end).collect();
    let mut events = Vec::new();
    let mut steps = 0usize;
    let mut stack: Vec<SimFrame> = Vec::new();
    let enter = |stack: &mut Vec<SimFrame>, events: &mut Vec<Event>, func: FuncId, announced| {
        events.push(Event::Enter { func, announced });
        stack.push(SimFrame {
            func,
            block: funcs[func.index()].cfg.entry(),
            site: 0,
            in_unknown: false,
            back: false,
        });
    };
    for t in 0..config.top_calls {
        let f = if t == 0 { 0 } else { rng.below(funcs.len()) };
        enter(&mut stack, &mut events, FuncId(f as u32), true);
        while let Some(top) = stack.last() {
            steps += 1;
            let steering = steps > config.step_budget;
            let ti = stack.len() - 1;
            let (func, block, site, in_unknown) = (top.func, top.block, top.site, top.in_unknown);
            let fi = &funcs[func.index()];
            let sites = &fi.calls[block];
            let noreturn = fi.normal_succs(block).next().is_none();
            if in_unknown {
                let must = noreturn && site + 1 == sites.len();
                if !steering
                    && !must
                    && stack.len() < config.max_depth
                    && rng.percent(config.callback_percent)
                {
                    let g = FuncId(rng.below(funcs.len()) as u32);
                    enter(&mut stack, &mut events, g, true);
                } else if must || (!steering && rng.percent(config.abandon_percent)) {
                    // Landing options: an unwind edge of the block an activation is calling
                    // from, or a re-entry point of its function.
                    let mut options = Vec::new();
                    for (j, fr) in stack.iter().enumerate() {
                        let g = &funcs[fr.func.index()];
                        for &e in g.cfg.succs(fr.block) {
                            if g.unwind[e] {
                                options.push((j, g.cfg.edge(e).dst, Landing::Unwind));
                            }
                        }
                        for &e in g.cfg.succs(g.cfg.exit()) {
                            if g.cfg.edge(e).kind == EdgeKind::Reentry {
                                options.push((j, g.cfg.edge(e).dst, Landing::Reentry));
                            }
                        }
                    }
                    if steering || options.is_empty() || rng.percent(config.end_percent) {
                        events.push(Event::End);
                        return events;
                    }
                    let (j, to, how) = options[rng.below(options.len())];
                    events.push(Event::Unwind {
                        abandoned: (stack.len() - 1 - j) as u32,
                        to,
                        how,
                    });
                    stack.truncate(j + 1);
                    let fr = &mut stack[j];
                    fr.block = to;
                    fr.site = 0;
                    fr.in_unknown = false;
                    fr.back = false;
                } else {
                    events.push(Event::Back);
                    stack[ti].in_unknown = false;
                    stack[ti].site += 1;
                }
                continue;
            }
            if site < sites.len() {
                match sites[site].callee {
                    Callee::Opaque => stack[ti].site += 1,
                    Callee::Unknown => stack[ti].in_unknown = true,
                    Callee::Direct(g) => {
                        stack[ti].site += 1;
                        enter(&mut stack, &mut events, g, false);
                    }
                    Callee::DirectBack(g) => {
                        stack[ti].site += 1;
                        stack[ti].back = true;
                        enter(&mut stack, &mut events, g, false);
                    }
                }
                continue;
            }
            let outs: Vec<EdgeId> = fi.normal_succs(block).collect();
            let e = if steering {
                let d = &dist[func.index()];
                let returns = outs
                    .iter()
                    .copied()
                    .filter(|&e| fi.cfg.edge(e).kind == EdgeKind::Return)
                    .map(|e| (0, e));
                let inner = outs
                    .iter()
                    .copied()
                    .filter_map(|e| d[fi.cfg.edge(e).dst].map(|x| (x + 1, e)));
                match returns.chain(inner).min() {
                    Some((_, e)) => e,
                    None => panic!("{func} {block} cannot reach an end"),
                }
            } else {
                match rng.pick(&outs) {
                    Some(e) => e,
                    None => panic!("{func} {block} has no successor"),
                }
            };
            events.push(Event::Edge(e));
            let edge = fi.cfg.edge(e);
            if edge.kind == EdgeKind::Return {
                stack.pop();
                if let Some(caller) = stack.last_mut().filter(|c| c.back) {
                    caller.back = false;
                    events.push(Event::Back);
                }
            } else {
                stack[ti].block = edge.dst;
                stack[ti].site = 0;
            }
        }
    }
    if rng.percent(50) {
        events.push(Event::End);
    }
    events
}

// ---------------------------------------------------------------------------------------------
// Interprocedural programs and executions (Melski & Reps 1998; for `crate::ipaths`). A separate
// block: other additions to this file go above it.
// ---------------------------------------------------------------------------------------------

/// Random sets of functions with calls, recursion and calls of unknown functions, and random
/// whole-program executions of them, for the tests of [`crate::ipaths`].
///
/// Each function is a [`random_cfg_with`] graph, with early exits and re-entries if
/// [`ProgramConfig::early_percent`] says so (a block with an early-exit edge then mostly has a
/// call of an unknown function: the call that may not return), with random call sites: calls
/// of any function of the set (the function itself included, so direct and mutual recursion
/// occur) and calls of unknown functions, which may call back into the functions entered from
/// outside. An execution runs a few top-level calls of such functions; each activation walks
/// its graph like [`simulate`] (random edges, steering to a return once its step budget is
/// spent) and makes the calls of every block it passes in position order. With
/// [`ExecConfig::throw_percent`], an unknown call in a block with an early-exit edge may end
/// activations early (`Event::Unwind`): `exit`, a `longjmp` to any activation from there down
/// that is in such a call and has a re-entry edge, or an exception caught by an activation
/// from there down pending at a summary call (Melski & Reps 1998 §9.2).
pub mod programs {
    use super::{distance_to_exit, random_cfg_with, GenConfig, Rng};
    use crate::cfg::{Cfg, EdgeKind};
    use crate::ids::{EdgeId, NodeId};
    use crate::ipaths::supergraph::SiteKind;
    use crate::ipaths::{CallSite, Callee, Event, FnId, Function, Supergraph};
    use crate::paths::PathDag;

    /// Shape parameters of [`random_program`].
    #[derive(Clone, Debug)]
    pub struct ProgramConfig {
        /// The set has `1 ..= max_functions` functions.
        pub max_functions: usize,
        /// Each function has `1 ..= max_blocks` blocks.
        pub max_blocks: usize,
        /// Chance (%) that a block contains calls.
        pub call_percent: u32,
        /// A block with calls has `1 ..= max_calls` of them.
        pub max_calls: usize,
        /// Chance (%) that a call is of an unknown function.
        pub unknown_percent: u32,
        /// Chance (%) that a function other than the first is entered from outside.
        pub outside_percent: u32,
        /// Chance (%) that a cuttable `Flow` edge is cut.
        pub cut_percent: u32,
        /// Chance (%) that a block has an early-exit edge (and a re-entry edge).
        pub early_percent: u32,
    }

    impl Default for ProgramConfig {
        fn default() -> Self {
            ProgramConfig {
                max_functions: 4,
                max_blocks: 7,
                call_percent: 30,
                max_calls: 2,
                unknown_percent: 25,
                outside_percent: 30,
                cut_percent: 5,
                early_percent: 0,
            }
        }
    }

    /// A random set of functions; function 0 is always entered from outside.
    pub fn random_program(rng: &mut Rng, config: &ProgramConfig) -> Vec<Function> {
        let n = 1 + rng.below(config.max_functions.max(1));
        let shape = GenConfig {
            max_blocks: config.max_blocks,
            early_exit_percent: config.early_percent,
            noreturn_percent: 0,
            reentry_percent: config.early_percent,
            ..GenConfig::default()
        };
        (0..n)
            .map(|i| {
                let cfg = random_cfg_with(rng, &shape);
                let mut calls = Vec::new();
                for b in cfg.blocks() {
                    if !rng.percent(config.call_percent) {
                        continue;
                    }
                    for _ in 0..1 + rng.below(config.max_calls.max(1)) {
                        let callee = if rng.percent(config.unknown_percent) {
                            Callee::Unknown
                        } else {
                            Callee::Internal(FnId::new(rng.below(n)))
                        };
                        calls.push(CallSite {
                            block: b,
                            position: rng.below(4) as u32,
                            callee,
                        });
                    }
                }
                for b in cfg.blocks() {
                    let unknown = calls
                        .iter()
                        .any(|c| c.block == b && c.callee == Callee::Unknown);
                    if cfg.early_exit(b).is_some() && !unknown && rng.percent(80) {
                        calls.push(CallSite {
                            block: b,
                            position: rng.below(4) as u32,
                            callee: Callee::Unknown,
                        });
                    }
                }
                let dag = PathDag::new(&cfg);
                let cuts = cfg
                    .edges()
                    .filter(|&(e, edge)| {
                        edge.kind == EdgeKind::Flow && dag.is_live(edge.src) && !dag.is_back_edge(e)
                    })
                    .map(|(e, _)| e)
                    .filter(|_| rng.percent(config.cut_percent))
                    .collect();
                Function {
                    cfg,
                    calls,
                    entered_from_outside: i == 0 || rng.percent(config.outside_percent),
                    cuts,
                }
            })
            .collect()
    }

    /// Parameters of [`random_execution`].
    #[derive(Clone, Debug)]
    pub struct ExecConfig {
        /// Number of top-level calls.
        pub entries: usize,
        /// Steps per activation before it steers to a return.
        pub step_budget: usize,
        /// Chance (%) of each further callback from an unknown callee (at most 2 per call).
        pub callback_percent: u32,
        /// Deepest activation nesting before the execution is given up.
        pub max_depth: usize,
        /// Longest execution before it is given up.
        pub max_events: usize,
        /// Chance (%) that an unknown call in a block with an early-exit edge ends activations
        /// early (module doc).
        pub throw_percent: u32,
    }

    impl Default for ExecConfig {
        fn default() -> Self {
            ExecConfig {
                entries: 3,
                step_budget: 12,
                callback_percent: 30,
                max_depth: 12,
                max_events: 20_000,
                throw_percent: 0,
            }
        }
    }

    /// `Flow::Unwind::to` of a landing outside the set's activations.
    const OUTSIDE: usize = usize::MAX - 1;

    /// How an activation's call ended.
    #[derive(Copy, Clone, PartialEq, Eq, Debug)]
    enum Flow {
        Returned,
        /// Unwinding to the activation at this index of the stack (`usize::MAX`: `exit`),
        /// by `longjmp` (re-entry) or an exception (resume).
        Unwind {
            to: usize,
            longjmp: bool,
        },
    }

    struct Gen<'a> {
        program: &'a [Function],
        graph: Option<Supergraph>,
        dist: Vec<crate::ids::IdVec<NodeId, Option<usize>>>,
        outside: Vec<FnId>,
        config: &'a ExecConfig,
        events: Vec<Event>,
        /// Per activation: function, block, pending call.
        stack: Vec<(FnId, NodeId, Option<u32>)>,
    }

    impl Gen<'_> {
        fn abandonable(&self, i: usize) -> bool {
            let (f, b, site) = self.stack[i];
            site.is_some() && self.program[f.index()].cfg.early_exit(b).is_some()
        }

        /// The top activation, pending at an unknown call that may not return, ends
        /// activations (module doc): the events and how its call ends.
        fn throw(&mut self, rng: &mut Rng) -> Flow {
            let Some(g) = &self.graph else {
                return Flow::Returned;
            };
            let top = self.stack.len() - 1;
            let mut lo = top;
            while lo > 0 && self.abandonable(lo - 1) {
                lo -= 1;
            }
            let mut options = Vec::new();
            if lo == 0 && rng.percent(60) {
                // `exit`, or a landing outside the set (the execution goes on).
                let to = if rng.percent(50) { usize::MAX } else { OUTSIDE };
                options.push(Flow::Unwind { to, longjmp: false });
            }
            for l in lo..=top {
                let (f, _, site) = self.stack[l];
                let cfg = &self.program[f.index()].cfg;
                if cfg.edges().any(|(_, e)| e.kind == EdgeKind::Reentry) {
                    options.push(Flow::Unwind {
                        to: l,
                        longjmp: true,
                    });
                }
                let summary =
                    site.is_some_and(|s| !matches!(g.site_kind(f, s), SiteKind::Direct(_)));
                if l < top && summary {
                    options.push(Flow::Unwind {
                        to: l,
                        longjmp: false,
                    });
                }
            }
            let Some(flow) = rng.pick(&options) else {
                return Flow::Returned;
            };
            if let Flow::Unwind { to, .. } = flow {
                let keep = if to >= OUTSIDE { 0 } else { to + 1 };
                if keep < self.stack.len() {
                    self.events.push(Event::Unwind(keep as u32));
                }
            }
            flow
        }

        /// One activation of `f`; `None` if the limits are exceeded.
        fn activation(&mut self, rng: &mut Rng, f: FnId, depth: usize) -> Option<Flow> {
            if depth > self.config.max_depth || self.events.len() > self.config.max_events {
                return None;
            }
            let func = &self.program[f.index()];
            let cfg: &Cfg = &func.cfg;
            self.events.push(Event::Enter(f));
            self.stack.push((f, cfg.entry(), None));
            let me = self.stack.len() - 1;
            let mut v = cfg.entry();
            let mut steps = 0;
            'block: loop {
                if self.events.len() > self.config.max_events {
                    return None;
                }
                self.stack[me].1 = v;
                let mut sites: Vec<usize> = (0..func.calls.len())
                    .filter(|&s| func.calls[s].block == v)
                    .collect();
                sites.sort_by_key(|&s| (func.calls[s].position, s));
                for s in sites {
                    self.events.push(Event::Call(s as u32));
                    self.stack[me].2 = Some(s as u32);
                    let mut flow = Flow::Returned;
                    match func.calls[s].callee {
                        Callee::Internal(q) => flow = self.activation(rng, q, depth + 1)?,
                        Callee::Unknown => {
                            for _ in 0..2 {
                                if !rng.percent(self.config.callback_percent) {
                                    break;
                                }
                                if let Some(q) = rng.pick(&self.outside) {
                                    flow = self.activation(rng, q, depth + 1)?;
                                    if flow != Flow::Returned {
                                        break;
                                    }
                                }
                            }
                            if flow == Flow::Returned
                                && cfg.early_exit(v).is_some()
                                && rng.percent(self.config.throw_percent)
                            {
                                flow = self.throw(rng);
                            }
                        }
                    }
                    match flow {
                        Flow::Returned => {}
                        Flow::Unwind { to, longjmp } if to == me => {
                            if longjmp {
                                let reentries: Vec<EdgeId> = cfg
                                    .edges()
                                    .filter(|(_, e)| e.kind == EdgeKind::Reentry)
                                    .map(|(e, _)| e)
                                    .collect();
                                let e = rng.pick(&reentries)?;
                                self.events.push(Event::Edge(e));
                                self.stack[me].2 = None;
                                v = cfg.edge(e).dst;
                                steps += 1;
                                continue 'block;
                            }
                        }
                        Flow::Unwind { .. } => {
                            self.stack.pop();
                            return Some(flow);
                        }
                    }
                    self.events.push(Event::Resume);
                    self.stack[me].2 = None;
                }
                let outs: Vec<EdgeId> = cfg
                    .succs(v)
                    .iter()
                    .copied()
                    .filter(|&e| cfg.edge(e).kind.is_structural())
                    .collect();
                steps += 1;
                let e = if steps > self.config.step_budget {
                    let dist = &self.dist[f.index()];
                    outs.iter()
                        .copied()
                        .find(|&e| cfg.edge(e).kind == EdgeKind::Return)
                        .or_else(|| {
                            outs.iter()
                                .copied()
                                .filter_map(|e| dist[cfg.edge(e).dst].map(|d| (d, e)))
                                .min()
                                .map(|(_, e)| e)
                        })?
                } else {
                    rng.pick(&outs)?
                };
                self.events.push(Event::Edge(e));
                if cfg.edge(e).kind == EdgeKind::Return {
                    self.stack.pop();
                    return Some(Flow::Returned);
                }
                v = cfg.edge(e).dst;
            }
        }
    }

    /// A random execution of `program` (module doc), `None` if it recursed deeper than
    /// `max_depth` or grew longer than `max_events`.
    pub fn random_execution(
        program: &[Function],
        rng: &mut Rng,
        config: &ExecConfig,
    ) -> Option<Vec<Event>> {
        let outside: Vec<FnId> = (0..program.len())
            .filter(|&i| program[i].entered_from_outside)
            .map(FnId::new)
            .collect();
        let graph = if config.throw_percent > 0 {
            Some(Supergraph::new(program.to_vec()).ok()?)
        } else {
            None
        };
        let mut gen = Gen {
            program,
            graph,
            dist: program.iter().map(|f| distance_to_exit(&f.cfg)).collect(),
            outside,
            config,
            events: Vec::new(),
            stack: Vec::new(),
        };
        for _ in 0..config.entries {
            let f = rng.pick(&gen.outside)?;
            let flow = gen.activation(rng, f, 0)?;
            if flow
                == (Flow::Unwind {
                    to: usize::MAX,
                    longjmp: false,
                })
            {
                break; // exit
            }
        }
        Some(gen.events)
    }
}
