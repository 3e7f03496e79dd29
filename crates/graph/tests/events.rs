//! Property tests of exact event counting (Ball 1994) on random graphs with random events per
//! block: random executions are replayed against the plans, and at every query point (every
//! block's start and end, points inside blocks, abandonments, re-entries, calls) the counter plus
//! the query increment must be the true number of events executed so far.

use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use std::collections::VecDeque;
use tally_graph::events::{
    inclusive_events, CallPlan, CallSite, EdgeAction, EventPlan, QueryPoint,
};
use tally_graph::mst::UnionFind;
use tally_graph::testing::{arb_cfg, sample, GenConfig, Rng};
use tally_graph::{heuristic_weights, Cfg, EdgeId, EdgeKind, IdVec, NodeId, SpanningTree};

const MAX_BLOCKS: usize = 30;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn arb_graph() -> impl Strategy<Value = Cfg> {
    arb_cfg(&GenConfig {
        max_blocks: MAX_BLOCKS,
        ..GenConfig::default()
    })
}

/// Events per block, zero for a third of the blocks (so that zero increments occur) and for EXIT.
fn random_events(cfg: &Cfg, rng: &mut Rng) -> IdVec<NodeId, u64> {
    IdVec::from_vec(
        cfg.nodes()
            .map(|v| {
                if cfg.is_exit(v) || rng.percent(33) {
                    0
                } else {
                    1 + rng.below(20) as u64
                }
            })
            .collect(),
    )
}

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, TestCaseError> {
    r.map_err(|err| TestCaseError::fail(err.to_string()))
}

/// The structural (`Flow`, `Return`) successors of every vertex.
fn structural(cfg: &Cfg) -> IdVec<NodeId, Vec<EdgeId>> {
    IdVec::from_vec(
        cfg.nodes()
            .map(|v| {
                let outs = cfg.succs(v).iter().copied();
                outs.filter(|&e| cfg.edge(e).kind.is_structural()).collect()
            })
            .collect(),
    )
}

fn reentries(cfg: &Cfg) -> Vec<EdgeId> {
    let outs = cfg.succs(cfg.exit()).iter().copied();
    outs.filter(|&e| cfg.edge(e).kind == EdgeKind::Reentry)
        .collect()
}

/// Length of a shortest structural path from each block to one with a `Return` or `EarlyExit`
/// edge (the generator guarantees one exists).
fn distance_to_exit(cfg: &Cfg) -> IdVec<NodeId, usize> {
    let dist = tally_graph::testing::distance_to_exit(cfg).into_vec();
    IdVec::from_vec(dist.into_iter().map(|d| d.unwrap_or(usize::MAX)).collect())
}

/// The structural successor of `v` closest to an exit.
fn steer(cfg: &Cfg, outs: &[EdgeId], dist: &IdVec<NodeId, usize>) -> Option<EdgeId> {
    outs.iter().copied().min_by_key(|&e| dist[cfg.edge(e).dst])
}

// ---------------------------------------------------------------------------------------------
// One activation: walks and their replay.

/// One step of a recorded execution of one activation.
#[derive(Copy, Clone, Debug)]
enum Step {
    /// Control crosses the edge (`e0` first; a `Reentry` edge only after `Abandon`).
    Edge(EdgeId),
    /// The frame is abandoned in the current block after this many of its events.
    Abandon(u64),
}

/// A random execution in the style of `testing::simulate`, recorded step by step.
fn random_walk(cfg: &Cfg, events: &IdVec<NodeId, u64>, rng: &mut Rng) -> Vec<Step> {
    let (outs, reentries, dist) = (structural(cfg), reentries(cfg), distance_to_exit(cfg));
    let budget = 150;
    let mut walk = vec![Step::Edge(cfg.entry_edge())];
    let mut v = cfg.entry();
    for steps in 1.. {
        let early = cfg.early_exit(v).is_some();
        let abandon = Step::Abandon(rng.below(events[v] as usize + 1) as u64);
        if steps > budget {
            let ret = outs[v]
                .iter()
                .copied()
                .find(|&e| cfg.edge(e).kind == EdgeKind::Return);
            match ret {
                Some(e) => walk.push(Step::Edge(e)),
                None if early => walk.push(abandon),
                None => {
                    let Some(e) = steer(cfg, &outs[v], &dist) else {
                        break;
                    };
                    walk.push(Step::Edge(e));
                    v = cfg.edge(e).dst;
                    continue;
                }
            }
            break;
        }
        if early && (outs[v].is_empty() || rng.percent(12)) {
            walk.push(abandon);
            match rng.pick(&reentries) {
                Some(re) if rng.percent(60) => {
                    walk.push(Step::Edge(re));
                    v = cfg.edge(re).dst;
                    continue;
                }
                _ => break,
            }
        }
        let Some(e) = rng.pick(&outs[v]) else { break };
        walk.push(Step::Edge(e));
        if cfg.edge(e).kind == EdgeKind::Return {
            break;
        }
        v = cfg.edge(e).dst;
    }
    walk
}

/// What a replay saw.
#[derive(Default, Debug)]
struct Seen {
    queries: usize,
    abandons: usize,
    reentries: usize,
}

/// Replays `walk` applying only the plan's instrumented edges (zero chords, tree edges and
/// early exits do nothing) and the abandonment rule (the runtime adds the query increment of the
/// point where the frame is abandoned), checking `counter + QueryInc == truth` at the start and
/// end of every block, at a point inside it, at abandonments, and `counter == truth` at the end.
fn replay(
    cfg: &Cfg,
    plan: &EventPlan,
    events: &IdVec<NodeId, u64>,
    walk: &[Step],
) -> Result<Seen, TestCaseError> {
    let add = |c: u64, x: i64| c.wrapping_add(x as u64);
    let (mut counter, mut truth, mut seen) = (0u64, 0u64, Seen::default());
    let mut current: Option<NodeId> = None;
    for (i, step) in walk.iter().enumerate() {
        match *step {
            Step::Edge(e) => {
                if let Some(v) = current {
                    truth += events[v];
                    prop_assert_eq!(
                        add(counter, plan.query_end(v)),
                        truth,
                        "end of {} (step {})",
                        v,
                        i
                    );
                } else if cfg.edge(e).kind == EdgeKind::Reentry {
                    seen.reentries += 1;
                }
                counter = add(counter, plan.action(e).amount());
                let w = cfg.edge(e).dst;
                prop_assert_eq!(
                    add(counter, plan.query_start(w)),
                    truth,
                    "start of {} (step {})",
                    w,
                    i
                );
                let mid = events[w] / 2;
                let q = ok(plan.query_inc(QueryPoint::Within {
                    block: w,
                    events_before: mid,
                }))?;
                prop_assert_eq!(add(counter, q), truth + mid, "inside {}", w);
                seen.queries += 3;
                current = (!cfg.is_exit(w)).then_some(w);
            }
            Step::Abandon(k) => {
                let Some(v) = current.take() else {
                    return Err(TestCaseError::fail("abandoned outside a block"));
                };
                truth += k;
                let point = QueryPoint::Within {
                    block: v,
                    events_before: k,
                };
                counter = add(counter, ok(plan.query_inc(point))?);
                prop_assert_eq!(counter, truth, "abandoned in {} after {} events", v, k);
                seen.abandons += 1;
            }
        }
    }
    prop_assert!(current.is_none(), "the walk did not end");
    prop_assert_eq!(counter, truth, "final count");
    Ok(seen)
}

/// The structural checks of a plan: actions partition the edges as documented.
fn check_actions(cfg: &Cfg, plan: &EventPlan) -> Result<(), TestCaseError> {
    for (e, edge) in cfg.edges() {
        let a = plan.action(e);
        match edge.kind {
            EdgeKind::EarlyExit => prop_assert_eq!(a, EdgeAction::Abandon),
            _ if plan.is_tree_edge(e) => {
                prop_assert_eq!(a, EdgeAction::Tree);
                prop_assert_eq!(plan.increment(e), 0);
            }
            _ if plan.increment(e) == 0 => prop_assert_eq!(a, EdgeAction::ZeroChord),
            _ => prop_assert_eq!(a, EdgeAction::Add(plan.increment(e))),
        }
    }
    let instrumented: Vec<EdgeId> = plan.instrumented().map(|(e, _)| e).collect();
    let zero: Vec<EdgeId> = plan.zero_chords().collect();
    for e in &zero {
        prop_assert!(!instrumented.contains(e));
    }
    prop_assert_eq!(plan.action(cfg.entry_edge()), EdgeAction::Tree);
    Ok(())
}

/// A random forest: `e0`, then every other edge (side edges included) in random order, kept
/// with probability 3/4 unless it closes a cycle. It need not span the graph.
fn random_forest(cfg: &Cfg, rng: &mut Rng) -> SpanningTree {
    let mut order: Vec<EdgeId> = cfg.edges().skip(1).map(|(e, _)| e).collect();
    rng.shuffle(&mut order);
    let mut sets = UnionFind::new(cfg.num_nodes());
    let mut in_tree = IdVec::filled(cfg.num_edges(), false);
    for e in std::iter::once(cfg.entry_edge()).chain(order) {
        let edge = cfg.edge(e);
        if (e == cfg.entry_edge() || rng.percent(75))
            && sets.union(edge.src.index(), edge.dst.index())
        {
            in_tree[e] = true;
        }
    }
    SpanningTree {
        in_tree,
        failed_forced: Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// The definition: fundamental cycles in the vertex-split graph of Fig. 2.

/// Increment(f) and QueryInc by §3.1's definition on the graph of Fig. 2 (`v` split into
/// `v_in = 2v -> v_out = 2v + 1` carrying `events[v]`, all vertex edges in the tree), summing
/// the events on each fundamental cycle. `None` where the tree does not close the cycle.
struct SplitOracle {
    /// Tree adjacency of the split graph: (neighbour, events, +1 if the edge points to it).
    adj: Vec<Vec<(usize, i128, i128)>>,
}

impl SplitOracle {
    fn new(cfg: &Cfg, events: &IdVec<NodeId, u64>, plan: &EventPlan) -> Self {
        let mut adj = vec![Vec::new(); 2 * cfg.num_nodes()];
        let mut link = |a: usize, b: usize, ev: i128| {
            adj[a].push((b, ev, 1));
            adj[b].push((a, ev, -1));
        };
        for v in cfg.nodes() {
            link(2 * v.index(), 2 * v.index() + 1, i128::from(events[v]));
        }
        for (e, edge) in cfg.edges() {
            if plan.is_tree_edge(e) {
                link(2 * edge.src.index() + 1, 2 * edge.dst.index(), 0);
            }
        }
        SplitOracle { adj }
    }

    /// The signed events of the tree path from `from` to `to`, edges along the path positive.
    fn path(&self, from: usize, to: usize) -> Option<i128> {
        let mut sum = vec![None; self.adj.len()];
        sum[from] = Some(0i128);
        let mut queue = VecDeque::from([from]);
        while let Some(a) = queue.pop_front() {
            let here = sum[a]?;
            for &(b, ev, dir) in &self.adj[a] {
                if sum[b].is_none() {
                    sum[b] = Some(here + dir * ev);
                    queue.push_back(b);
                }
            }
        }
        sum[to]
    }
}

// ---------------------------------------------------------------------------------------------
// Calls: a recursive function sharing one global counter.

/// Random call sites: at least one in every block with an early exit (the call that may not
/// return), up to two elsewhere.
fn random_sites(cfg: &Cfg, events: &IdVec<NodeId, u64>, rng: &mut Rng) -> Vec<CallSite> {
    let mut sites = Vec::new();
    for v in cfg.blocks() {
        let n = if cfg.early_exit(v).is_some() {
            1 + rng.below(2)
        } else {
            rng.below(3)
        };
        for _ in 0..n {
            sites.push(CallSite {
                block: v,
                events_before: rng.below(events[v] as usize + 1) as u64,
            });
        }
    }
    rng.shuffle(&mut sites);
    sites
}

/// How a call ended.
enum Outcome {
    Returned,
    /// `exit()`: every frame is abandoned.
    Exit,
    /// `longjmp` to the frame at this depth.
    Longjmp(usize),
}

/// One function calling itself, with its graph and plan.
struct Program {
    cfg: Cfg,
    events: IdVec<NodeId, u64>,
    sites: Vec<CallSite>,
    plan: CallPlan,
    outs: IdVec<NodeId, Vec<EdgeId>>,
    reentries: Vec<EdgeId>,
    dist: IdVec<NodeId, usize>,
}

/// The state shared by all frames.
struct World {
    rng: Rng,
    counter: u64,
    truth: u64,
    frames: usize,
    calls_checked: usize,
    landings: usize,
}

const MAX_DEPTH: usize = 3;
const MAX_FRAMES: usize = 60;
const FRAME_BUDGET: usize = 25;

impl World {
    fn add(&mut self, x: i64) {
        self.counter = self.counter.wrapping_add(x as u64);
    }
}

/// Crosses `e` into its target and checks the query at the target's start.
fn cross(p: &Program, w: &mut World, e: EdgeId) -> Result<NodeId, TestCaseError> {
    w.add(p.plan.action(e).amount());
    let v = p.cfg.edge(e).dst;
    let q = p.plan.query_start(v);
    prop_assert_eq!(w.counter.wrapping_add(q as u64), w.truth, "start of {}", v);
    Ok(v)
}

/// Runs one activation at `depth` to its end.
fn run_frame(p: &Program, w: &mut World, depth: usize) -> Result<Outcome, TestCaseError> {
    w.frames += 1;
    let mut v = cross(p, w, p.cfg.entry_edge())?;
    let mut steps = 0;
    'blocks: loop {
        steps += 1;
        let steering = steps > FRAME_BUDGET;
        let mut done = 0u64;
        for (j, &i) in p.plan.block_sites(v).iter().enumerate() {
            let k = p.sites[i].events_before;
            w.truth += k - done;
            done = k;
            let q = ok(p.plan.query_inc(v, k, j))?;
            prop_assert_eq!(
                w.counter.wrapping_add(q as u64),
                w.truth,
                "before call {} in {}",
                i,
                v
            );
            w.add(p.plan.sites()[i].before);
            prop_assert_eq!(w.counter, w.truth, "at call {} in {}", i, v);
            w.calls_checked += 1;
            let (reading, truth_before) = (w.counter, w.truth);
            match call(p, w, depth, v, steering)? {
                Outcome::Returned => {
                    prop_assert_eq!(inclusive_events(reading, w.counter), w.truth - truth_before);
                    w.add(p.plan.sites()[i].after);
                }
                Outcome::Longjmp(t) if t == depth => {
                    // The frame was abandoned exact and comes back at a re-entry point.
                    prop_assert_eq!(w.counter, w.truth, "longjmp into depth {}", depth);
                    w.landings += 1;
                    let Some(re) = w.rng.pick(&p.reentries) else {
                        return Err(TestCaseError::fail("longjmp without re-entry"));
                    };
                    v = cross(p, w, re)?;
                    continue 'blocks;
                }
                other => return Ok(other),
            }
        }
        w.truth += p.events[v] - done;
        let q = p.plan.query_end(v);
        prop_assert_eq!(w.counter.wrapping_add(q as u64), w.truth, "end of {}", v);
        let outs = &p.outs[v];
        let ret = outs
            .iter()
            .copied()
            .find(|&e| p.cfg.edge(e).kind == EdgeKind::Return);
        let next = if steering {
            ret.or_else(|| steer(&p.cfg, outs, &p.dist))
        } else {
            w.rng.pick(outs)
        };
        let Some(e) = next else {
            return Err(TestCaseError::fail(format!(
                "{v} returned from a noreturn call"
            )));
        };
        if p.cfg.edge(e).kind == EdgeKind::Return {
            w.add(p.plan.action(e).amount());
            prop_assert_eq!(w.counter, w.truth, "return at depth {}", depth);
            return Ok(Outcome::Returned);
        }
        v = cross(p, w, e)?;
    }
}

/// A call from block `v` of the frame at `depth`: a recursive call, a leaf callee that counts
/// its own events exactly, or, from a block with an early exit, `exit()` or `longjmp`.
fn call(
    p: &Program,
    w: &mut World,
    depth: usize,
    v: NodeId,
    steering: bool,
) -> Result<Outcome, TestCaseError> {
    let may_abandon = p.cfg.early_exit(v).is_some();
    let returns_normally = !p.outs[v].is_empty();
    let no_return = p.outs[v]
        .iter()
        .all(|&e| p.cfg.edge(e).kind != EdgeKind::Return);
    if may_abandon && (!returns_normally || (steering && no_return) || w.rng.percent(10)) {
        prop_assert_eq!(w.counter, w.truth, "abandoning call in {}", v);
        if !steering && !p.reentries.is_empty() && w.rng.percent(70) {
            return Ok(Outcome::Longjmp(w.rng.below(depth + 1)));
        }
        return Ok(Outcome::Exit);
    }
    if depth < MAX_DEPTH && w.frames < MAX_FRAMES && w.rng.percent(15) {
        return run_frame(p, w, depth + 1);
    }
    let x = w.rng.below(4) as u64;
    w.truth += x;
    w.counter = w.counter.wrapping_add(x);
    Ok(Outcome::Returned)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn heuristic_tree_counts_every_prefix(cfg in arb_graph(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let events = random_events(&cfg, &mut rng);
        let plan = ok(EventPlan::with_weights(&cfg, &events, &heuristic_weights(&cfg), |_| false))?;
        check_actions(&cfg, &plan)?;
        // Every EarlyExit and Reentry edge is a chord of the maximum spanning tree.
        for (e, edge) in cfg.edges() {
            if matches!(edge.kind, EdgeKind::EarlyExit | EdgeKind::Reentry) {
                prop_assert!(!plan.is_tree_edge(e));
            }
        }
        for _ in 0..3 {
            let walk = random_walk(&cfg, &events, &mut rng);
            replay(&cfg, &plan, &events, &walk)?;
        }
    }

    #[test]
    fn arbitrary_spanning_trees_count_every_prefix(cfg in arb_graph(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let events = random_events(&cfg, &mut rng);
        // Few distinct weights (many ties) and random forced edges, as in properties.rs.
        let weights = IdVec::from_vec((0..cfg.num_edges()).map(|_| rng.below(4) as f64).collect());
        let forced: Vec<bool> = (0..cfg.num_edges()).map(|_| rng.percent(20)).collect();
        let plan = ok(EventPlan::with_weights(&cfg, &events, &weights, |e| forced[e.index()]))?;
        check_actions(&cfg, &plan)?;
        let walk = random_walk(&cfg, &events, &mut rng);
        replay(&cfg, &plan, &events, &walk)?;
    }

    #[test]
    fn any_forest_counts_every_prefix(cfg in arb_graph(), seed in any::<u64>()) {
        // Forests that do not span, with early exits and re-entries as tree edges.
        let mut rng = Rng::new(seed);
        let events = random_events(&cfg, &mut rng);
        let tree = random_forest(&cfg, &mut rng);
        let plan = ok(EventPlan::compute(&cfg, &events, &tree))?;
        check_actions(&cfg, &plan)?;
        let walk = random_walk(&cfg, &events, &mut rng);
        replay(&cfg, &plan, &events, &walk)?;
    }

    #[test]
    fn increments_are_the_fundamental_cycles_of_fig_2(cfg in arb_graph(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let events = random_events(&cfg, &mut rng);
        let tree = if rng.percent(50) { random_forest(&cfg, &mut rng) } else {
            tally_graph::max_spanning_tree(&cfg, |_| tally_graph::TreeClass::Weighted(1.0))
        };
        let plan = ok(EventPlan::compute(&cfg, &events, &tree))?;
        let oracle = SplitOracle::new(&cfg, &events, &plan);
        for (e, edge) in cfg.edges() {
            // C(f): f from src_out to dst_in, then the tree path back to src_out.
            let (s, d) = (2 * edge.src.index() + 1, 2 * edge.dst.index());
            if let Some(back) = oracle.path(d, s) {
                prop_assert_eq!(i128::from(plan.increment(e)), back, "increment of {}", e);
            }
        }
        let root = 2 * cfg.entry().index();
        for v in cfg.nodes() {
            // §3.3: QueryInc of g' = v_in -> root (start) and v_out -> root (end).
            if let Some(q) = oracle.path(root, 2 * v.index()) {
                prop_assert_eq!(i128::from(plan.query_start(v)), q, "start of {}", v);
            }
            if let Some(q) = oracle.path(root, 2 * v.index() + 1) {
                prop_assert_eq!(i128::from(plan.query_end(v)), q, "end of {}", v);
            }
        }
        let table = plan.query_table(&cfg);
        for (e, edge) in cfg.edges() {
            prop_assert_eq!(table.after_edge[e], plan.query_start(edge.dst));
        }
    }

    #[test]
    fn calls_are_exact_in_recursive_executions(
        cfg in arb_cfg(&GenConfig { max_blocks: 16, ..GenConfig::default() }),
        seed in any::<u64>(),
    ) {
        let mut rng = Rng::new(seed);
        let events = random_events(&cfg, &mut rng);
        let plain = ok(EventPlan::with_weights(&cfg, &events, &heuristic_weights(&cfg), |_| false))?;
        let sites = random_sites(&cfg, &events, &mut rng);
        let plan = ok(CallPlan::compute(&cfg, &plain, &sites))?;
        // Folding never adds code: what is instrumented was instrumented before.
        for (e, _) in plan.instrumented() {
            prop_assert!(matches!(plain.action(e), EdgeAction::Add(_)), "fold added code on {}", e);
        }
        for (e, edge) in cfg.edges() {
            if edge.kind == EdgeKind::Reentry {
                prop_assert_eq!(plan.action(e), plain.action(e));
            }
        }
        let program = Program {
            outs: structural(&cfg),
            reentries: reentries(&cfg),
            dist: distance_to_exit(&cfg),
            cfg,
            events,
            sites,
            plan,
        };
        let mut world = World { rng, counter: 0, truth: 0, frames: 0, calls_checked: 0, landings: 0 };
        match run_frame(&program, &mut world, 0)? {
            Outcome::Returned | Outcome::Exit => {}
            Outcome::Longjmp(t) => return Err(TestCaseError::fail(format!("longjmp to depth {t} escaped"))),
        }
        prop_assert_eq!(world.counter, world.truth, "final count");
    }
}

/// The random tests exercise what they claim to: zero chords, abandonments, re-entries,
/// folds in both directions, nested frames and longjmp landings all occur.
#[test]
fn the_properties_see_the_interesting_cases() {
    let (mut zero, mut abandons, mut reentries, mut queries) = (0, 0, 0, 0);
    let (mut fold_in, mut fold_out, mut explicit, mut frames, mut landings, mut calls) =
        (0, 0, 0, 0, 0, 0);
    let mut runner = TestRunner::deterministic();
    for seed in 0..150 {
        let cfg = sample(&arb_graph(), &mut runner);
        let mut rng = Rng::new(seed);
        let events = random_events(&cfg, &mut rng);
        let Ok(plan) = EventPlan::with_weights(&cfg, &events, &heuristic_weights(&cfg), |_| false)
        else {
            panic!("seed {seed}: no plan");
        };
        zero += plan.zero_chords().count();
        let walk = random_walk(&cfg, &events, &mut rng);
        match replay(&cfg, &plan, &events, &walk) {
            Ok(seen) => {
                abandons += seen.abandons;
                reentries += seen.reentries;
                queries += seen.queries;
            }
            Err(err) => panic!("seed {seed}: {err}"),
        }
        let sites = random_sites(&cfg, &events, &mut rng);
        let Ok(calls_plan) = CallPlan::compute(&cfg, &plan, &sites) else {
            panic!("seed {seed}: no call plan");
        };
        let outs = structural(&cfg);
        for v in cfg.blocks() {
            fold_in += usize::from(calls_plan.folded_entry(v).is_some());
            fold_out += usize::from(calls_plan.folded_exits(v) && !outs[v].is_empty());
        }
        explicit += calls_plan
            .sites()
            .iter()
            .filter(|s| s.before != 0 || s.after != 0)
            .count();
        let program = Program {
            outs,
            reentries: self::reentries(&cfg),
            dist: distance_to_exit(&cfg),
            cfg,
            events,
            sites,
            plan: calls_plan,
        };
        let mut world = World {
            rng,
            counter: 0,
            truth: 0,
            frames: 0,
            calls_checked: 0,
            landings: 0,
        };
        if let Err(err) = run_frame(&program, &mut world, 0) {
            panic!("seed {seed}: {err}");
        }
        frames += world.frames;
        landings += world.landings;
        calls += world.calls_checked;
    }
    for (what, n) in [
        ("zero chords", zero),
        ("abandonments", abandons),
        ("re-entries", reentries),
        ("queries", queries),
        ("entry folds", fold_in),
        ("exit folds", fold_out),
        ("explicit adjustments", explicit),
        ("nested frames", frames - 150),
        ("longjmp landings", landings),
        ("checked calls", calls),
    ] {
        assert!(n >= 20, "only {n} {what} in 150 runs");
    }
}
