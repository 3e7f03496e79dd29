//! Tests of SESE counters: the paper's figures by hand, and random loops executed by a walk
//! that simulates the counters' variables, the chord counters and the values added at the
//! loops' exits, whose recovered counts must equal the walk's true counts.

use super::*;
use crate::cfg::EdgeKind::*;
use crate::placement::{place_edge_counters, place_edge_counters_exits_in_tree};
use crate::testing::{arb_cfg, cfg, random_cfg_with, random_walk, GenConfig, Rng};
use crate::vertex::{place_vertex_counters_sese, propagate_vertex};
use crate::weight::heuristic_weights;
use proptest::prelude::*;

fn n(i: usize) -> NodeId {
    NodeId::new(i)
}
fn e(i: usize) -> EdgeId {
    EdgeId::new(i)
}
fn inc(block: usize, step: i64) -> Increment {
    Increment {
        block: n(block),
        step,
    }
}
fn sese_loop(g: &Cfg, header: usize) -> SeseLoop {
    let all = SeseLoop::all(g);
    match all.into_iter().find(|l| l.header == n(header)) {
        Some(l) => l,
        None => panic!("n{header} heads no usable loop"),
    }
}

/// Frenot & Pereira 2024 Fig. 2, `count_zeros`: L0 = n0, L2 = n1 (header, `i < N`), L6 = n2
/// (`!v[i]`), L9 = n3 (`sum++`), LA = n4 (`i++`, latch), LD = n5 (return).
fn count_zeros() -> Cfg {
    cfg(
        6,
        &[
            (0, 1, Flow),   // e1 L0 -> L2
            (1, 2, Flow),   // e2 L2 -> L6
            (1, 5, Flow),   // e3 L2 -> LD
            (2, 3, Flow),   // e4 L6 -> L9
            (2, 4, Flow),   // e5 L6 -> LA
            (3, 4, Flow),   // e6 L9 -> LA
            (4, 1, Flow),   // e7 LA -> L2
            (5, 6, Return), // e8 LD -> EXIT
        ],
    )
}

/// Example 2.3: `i` and `sum` replace both Knuth–Stevenson counters of the loop; what is left
/// is one counter outside the loop (the number of calls, which the paper takes as known).
#[test]
fn count_zeros_needs_no_counter_in_the_loop() {
    let g = count_zeros();
    let w = heuristic_weights(&g);
    let lp = sese_loop(&g, 1);
    let i = SeseCounter::affine(&g, &lp, &[inc(4, 1)], &w).unwrap();
    let sum = SeseCounter::affine(&g, &lp, &[inc(3, 1)], &w).unwrap();
    // i counts L2 -> L6 or LA -> L2; sum counts L6 -> L9 or L9 -> LA.
    assert!([e(2), e(7)].contains(&i.measured), "{i:?}");
    assert!([e(4), e(6)].contains(&sum.measured), "{sum:?}");
    assert_eq!(i.add_at, vec![e(3)]);
    assert!(!i.may_end_inside && i.flush_exact);
    let p = place_edge_counters_sese(&g, &w, |_| false, &[i.clone(), sum.clone()]);
    let plain = place_edge_counters(&g, &w, |_| false);
    assert_eq!(plain.chords.len(), 3);
    assert!(p.unused.is_empty());
    let incremented: Vec<EdgeId> = p.incremented().collect();
    assert_eq!(incremented.len(), 1);
    assert!([e(1), e(3), e(8)].contains(&incremented[0]));

    // One call with v = {0, 5, 0, 0}: four iterations, three zeros.
    let truth = IdVec::from_vec(vec![1, 1, 4, 1, 3, 1, 3, 4, 1]);
    let chords = truth.clone();
    let values = [i.count(0, 4).unwrap(), sum.count(0, 3).unwrap()];
    assert_eq!(recover(&g, &p, &chords, &values), Ok(truth.clone()));
    // An impossible SESE value (more zeros than iterations) is refused.
    let wrong = [values[0], values[0] + 1];
    assert!(matches!(
        recover(&g, &p, &chords, &wrong),
        Err(SeseError::Flow(FlowError::Negative { .. }))
    ));
}

/// Frenot & Pereira 2024 Fig. 5/6, `nonSESE`: `sum` is incremented in L6 and in LA, which are not
/// control equivalent (the cycle L2, L6, LB misses LA); `i`, incremented in the latch LB, is.
#[test]
fn non_sese_is_refused() {
    // n0 L0, n1 L2, n2 L6 (sum++), n3 LA (sum++), n4 LB (i++), n5 return.
    let g = cfg(
        6,
        &[
            (0, 1, Flow),
            (1, 2, Flow),
            (1, 5, Flow),
            (2, 3, Flow),
            (2, 4, Flow),
            (3, 4, Flow),
            (4, 1, Flow),
            (5, 6, Return),
        ],
    );
    let w = heuristic_weights(&g);
    let lp = sese_loop(&g, 1);
    assert_eq!(
        SeseCounter::affine(&g, &lp, &[inc(2, 1), inc(3, 1)], &w),
        Err(SeseError::NotControlEquivalent {
            header: n(1),
            block: n(3),
            other: n(2)
        })
    );
    assert!(SeseCounter::affine(&g, &lp, &[inc(4, 1)], &w).is_ok());
    assert_eq!(
        SeseCounter::affine(&g, &lp, &[inc(5, 1)], &w),
        Err(SeseError::OutsideLoop {
            header: n(1),
            block: n(5)
        })
    );
    assert_eq!(
        SeseCounter::affine(&g, &lp, &[inc(4, 2), inc(4, -2)], &w),
        Err(SeseError::ZeroStep(n(1)))
    );
}

/// Frenot & Pereira 2024 Fig. 7, `first_occurrence`: the pointer `p` steps by `sizeof(long)`.
#[test]
fn pointer_step_gives_the_trip_count() {
    // n0 entry, n1 `*p != q` (header), n2 `p++` (latch), n3 return.
    let g = cfg(
        4,
        &[
            (0, 1, Flow),
            (1, 2, Flow),
            (2, 1, Flow),
            (1, 3, Flow),
            (3, 4, Return),
        ],
    );
    let w = heuristic_weights(&g);
    let lp = sese_loop(&g, 1);
    let p = SeseCounter::affine(&g, &lp, &[inc(2, 8)], &w).unwrap();
    assert_eq!(p.step(), 8);
    assert_eq!(p.count(0x1000, 0x1000 + 5 * 8), Ok(5));
    assert_eq!(p.count(0x1000, 0x1000), Ok(0));
    assert!(matches!(
        p.count(0x1000, 0x1004),
        Err(SeseError::BadValue { .. })
    ));
    assert!(matches!(
        p.count(0x1000, 0x0ff8),
        Err(SeseError::BadValue { .. })
    ));
    // A decreasing variable: `for (k = n; k > 0; k -= 3)`.
    let k = SeseCounter::affine(&g, &lp, &[inc(2, -3)], &w).unwrap();
    assert_eq!(k.count(10, 1), Ok(3));
    // The trip-count variant measures the back edge and adds at the exit (computed on entry).
    let t = SeseCounter::trip_count(&lp).unwrap();
    assert_eq!((t.measured, t.add_at.clone()), (e(3), vec![e(4)]));
}

/// The second pattern: a variable changed only by constants in control-equivalent blocks,
/// `while (c) { x += 2; if (p) A; else B; x += 3; }`, step 5; an increment in one arm of the
/// `if` breaks it.
#[test]
fn constants_in_control_equivalent_blocks() {
    // n0 entry, n1 header, n2 `x += 2`, n3 A, n4 B, n5 `x += 3` (latch), n6 return.
    let g = cfg(
        7,
        &[
            (0, 1, Flow),   // e1
            (1, 2, Flow),   // e2
            (1, 6, Flow),   // e3
            (2, 3, Flow),   // e4
            (2, 4, Flow),   // e5
            (3, 5, Flow),   // e6
            (4, 5, Flow),   // e7
            (5, 1, Flow),   // e8
            (6, 7, Return), // e9
        ],
    );
    let w = heuristic_weights(&g);
    let lp = sese_loop(&g, 1);
    let x = SeseCounter::affine(&g, &lp, &[inc(5, 3), inc(2, 2)], &w).unwrap();
    assert_eq!(x.step(), 5);
    assert!([e(2), e(8)].contains(&x.measured));
    assert_eq!(
        x.kind,
        SeseKind::Affine {
            increments: vec![inc(2, 2), inc(5, 3)]
        }
    );
    assert!(matches!(
        SeseCounter::affine(&g, &lp, &[inc(2, 2), inc(3, 3)], &w),
        Err(SeseError::NotControlEquivalent { .. })
    ));
    // An increment only in A is a SESE counter of its own (it counts e4 or e6).
    let a = SeseCounter::affine(&g, &lp, &[inc(3, 1)], &w).unwrap();
    assert!([e(4), e(6)].contains(&a.measured));
    // Both together free two chords: the loop then needs no increment at all.
    let p = place_edge_counters_sese(&g, &w, |_| false, &[x, a]);
    assert_eq!(p.free.len(), 2);
    for c in p.incremented() {
        assert!(!lp.contains(g.edge(c).src), "{c} is in the loop");
    }
}

/// A counted loop with a call that may end the frame: `for (...) { f(); i++; }` with the
/// block cut at the call. The latch's increment matches the back edge even when the frame ends
/// in the call, so adding the value then is exact; a trip count is refused.
#[test]
fn early_exit_inside_the_loop() {
    // n0 entry, n1 header, n2 call (early exit), n3 `i++` latch, n4 return.
    let g = cfg(
        5,
        &[
            (0, 1, Flow),
            (1, 2, Flow),
            (2, 3, Flow),
            (3, 1, Flow),
            (1, 4, Flow),
            (4, 5, Return),
            (2, 5, EarlyExit),
        ],
    );
    let w = heuristic_weights(&g);
    let lp = sese_loop(&g, 1);
    let i = SeseCounter::affine(&g, &lp, &[inc(3, 1)], &w).unwrap();
    assert!(i.may_end_inside && i.flush_exact);
    assert_eq!(
        SeseCounter::trip_count(&lp),
        Err(SeseError::EndsInside(n(1)))
    );
    // Incremented in the header instead (`while (i++ < n) f();`), the variable is one ahead
    // of the body when the frame ends in the call.
    let h = SeseCounter::affine(&g, &lp, &[inc(2, 1)], &w).unwrap();
    assert!(h.flush_exact);
    let j = SeseCounter::affine(&g, &lp, &[inc(1, 1)], &w);
    assert!(matches!(j, Err(SeseError::NoMeasuredEdge(_))), "{j:?}");
}

#[test]
fn loops_that_cannot_carry_a_counter() {
    let check = |g: &Cfg, h: usize| {
        let dfs = Dfs::compute(g);
        let loops = Loops::compute(g, &dfs);
        let doms = Dominators::compute(g, &dfs);
        SeseLoop::new(g, &loops, &doms, n(h))
    };
    // Irreducible: n0 -> n1 <-> n2 <- n0.
    let g = cfg(
        3,
        &[
            (0, 1, Flow),
            (0, 2, Flow),
            (1, 2, Flow),
            (2, 1, Flow),
            (1, 3, Return),
        ],
    );
    let header = Loops::compute(&g, &Dfs::compute(&g)).entries()[0];
    assert!(matches!(
        check(&g, header.index()),
        Err(SeseError::Irreducible { .. })
    ));
    assert_eq!(check(&g, 0), Err(SeseError::NotALoop(n(0))));
    // The entry as header, and a setjmp inside a loop.
    let g = cfg(2, &[(0, 0, Flow), (0, 1, Flow), (1, 2, Return)]);
    assert_eq!(check(&g, 0), Err(SeseError::HeaderIsEntry(n(0))));
    let g = cfg(
        3,
        &[
            (0, 1, Flow),
            (1, 1, Flow),
            (1, 2, Flow),
            (2, 3, Return),
            (3, 1, Reentry),
        ],
    );
    assert_eq!(check(&g, 1), Err(SeseError::ReentryInside(n(1))));
    // Code reached only by a longjmp (n3, dead to the search) jumps into the body n2 of the
    // loop n1 <-> n2 (found by a long property run).
    let g = cfg(
        4,
        &[
            (0, 1, Flow),   // e1
            (1, 2, Flow),   // e2
            (2, 1, Flow),   // e3
            (1, 4, Return), // e4
            (4, 3, Reentry),
            (3, 2, Flow), // e6
        ],
    );
    assert_eq!(
        check(&g, 1),
        Err(SeseError::SideEntry {
            header: n(1),
            edge: e(6)
        })
    );
}

// ---- random loops -------------------------------------------------------------------------

/// Random structured code, as a graph: sequences of plain blocks, calls that may end the frame
/// (an `EarlyExit` edge), `if`/`else`, `while` and `do`-`while` loops nested in each other, and
/// inside loops `if (c) break;` (more exits), `if (c) continue;` (more latches) and
/// `if (c) return;` (an exit straight to EXIT). Blocks in one sequence of a loop body are
/// control equivalent, so the paper's second pattern is frequent here.
struct Structured<'r> {
    rng: &'r mut Rng,
    blocks: usize,
    edges: Vec<(usize, usize, EdgeKind)>,
}

/// Stands for EXIT until the number of blocks is known.
const EXIT: usize = usize::MAX;

impl Structured<'_> {
    fn block(&mut self) -> usize {
        self.blocks += 1;
        self.blocks - 1
    }
    fn edge(&mut self, a: usize, b: usize, kind: EdgeKind) {
        self.edges.push((a, b, kind));
    }
    /// Emits a sequence after block `cur`; returns the block control falls out of.
    fn seq(&mut self, cur: usize, depth: usize, lp: Option<(usize, usize)>) -> usize {
        let mut cur = cur;
        for _ in 0..1 + self.rng.below(3) {
            cur = self.stmt(cur, depth, lp);
        }
        cur
    }
    fn stmt(&mut self, cur: usize, depth: usize, lp: Option<(usize, usize)>) -> usize {
        let next = self.block();
        let choice = self.rng.below(if depth == 0 { 2 } else { 9 });
        match (choice, lp) {
            (1, _) => {
                // A call that may end the frame.
                self.edge(cur, next, Flow);
                self.edge(next, EXIT, EarlyExit);
            }
            (2, _) => {
                let (t, f) = (self.block(), self.block());
                self.edge(cur, t, Flow);
                self.edge(cur, f, Flow);
                let t_end = self.seq(t, depth - 1, lp);
                let f_end = self.seq(f, depth - 1, lp);
                self.edge(t_end, next, Flow);
                self.edge(f_end, next, Flow);
            }
            (3 | 4, _) => {
                // while (c) body
                let h = self.block();
                let body = self.block();
                self.edge(cur, h, Flow);
                self.edge(h, body, Flow);
                self.edge(h, next, Flow);
                let end = self.seq(body, depth - 1, Some((h, next)));
                self.edge(end, h, Flow);
            }
            (5, _) => {
                // do body while (c)
                let h = self.block();
                self.edge(cur, h, Flow);
                let end = self.seq(h, depth - 1, Some((h, next)));
                self.edge(end, h, Flow);
                self.edge(end, next, Flow);
            }
            (6, Some((_, after))) => {
                self.edge(cur, after, Flow); // if (c) break;
                self.edge(cur, next, Flow);
            }
            (7, Some((h, _))) => {
                self.edge(cur, h, Flow); // if (c) continue;
                self.edge(cur, next, Flow);
            }
            (8, Some(_)) => {
                self.edge(cur, EXIT, Return); // if (c) return;
                self.edge(cur, next, Flow);
            }
            _ => self.edge(cur, next, Flow),
        }
        next
    }
}

fn structured_cfg(rng: &mut Rng) -> Cfg {
    let mut s = Structured {
        rng,
        blocks: 1,
        edges: Vec::new(),
    };
    let depth = 1 + s.rng.below(3);
    let end = s.seq(0, depth, None);
    s.edge(end, EXIT, Return);
    let exit = s.blocks;
    let edges: Vec<_> = s
        .edges
        .iter()
        .map(|&(a, b, k)| (a, if b == EXIT { exit } else { b }, k))
        .collect();
    cfg(exit, &edges)
}

/// What one random case exercised.
#[derive(Default, Debug)]
struct Stats {
    free: usize,
    multi_increment: usize,
    trip_counts: usize,
    flushed: usize,
    lost: usize,
    refused: usize,
    multi_exit: usize,
    multi_latch: usize,
    nested: usize,
    exits_in_tree: usize,
    free_exits_in_tree: usize,
    vertex_checks: usize,
}

/// One random case: a random graph (structured code or an arbitrary graph), counters on its usable loops (some invalid on purpose, to
/// be refused), the placement, a random execution replayed with the variables, the chord
/// counters and the values added at exits (and, where exact, when the frame ends inside a
/// loop). After every call the recovered counts must equal the true ones, unless a frame ended
/// inside a loop whose counter cannot be flushed exactly: then the value is lost (the front end
/// must keep such loops out) and the recovery must not come out equal by accident.
/// The shape of the unstructured graphs of these tests.
fn unstructured() -> GenConfig {
    GenConfig {
        max_blocks: 16,
        max_extra_edges: 2,
        early_exit_percent: 15,
        reentry_percent: 5,
        ..GenConfig::default()
    }
}

fn check_seed(seed: u64) -> Stats {
    let mut rng = Rng::new(seed);
    let g = if rng.percent(50) {
        structured_cfg(&mut rng)
    } else {
        random_cfg_with(&mut rng, &unstructured())
    };
    check_graph(g, rng, seed)
}

/// Half structured graphs (from a seed), half [`arb_cfg`] graphs, which shrink.
fn arb_sese_graph() -> impl Strategy<Value = Cfg> {
    prop_oneof![
        any::<u64>().prop_map(|seed| structured_cfg(&mut Rng::new(seed))),
        arb_cfg(&unstructured()),
    ]
}

/// `seed` names the case in messages.
fn check_graph(g: Cfg, mut rng: Rng, seed: u64) -> Stats {
    let w = heuristic_weights(&g);
    let mut stats = Stats::default();
    let loops = SeseLoop::all(&g);
    let mut counters: Vec<(SeseCounter, usize)> = Vec::new();
    for (li, lp) in loops.iter().enumerate() {
        for _ in 0..2 {
            let c = if rng.percent(25) {
                SeseCounter::trip_count(lp)
            } else {
                let first = lp.members[rng.below(lp.members.len())];
                let pool: Vec<NodeId> = if rng.percent(70) {
                    let eq = |&b: &NodeId| lp.blocks_equivalent(&g, first, b, false);
                    lp.members.iter().copied().filter(eq).collect()
                } else {
                    lp.members.clone()
                };
                let mut incs = vec![Increment {
                    block: first,
                    step: 1 + rng.below(4) as i64,
                }];
                for &b in &pool {
                    if b != first && rng.percent(40) {
                        let step = rng.below(9) as i64 - 4;
                        incs.push(Increment { block: b, step });
                    }
                }
                SeseCounter::affine(&g, lp, &incs, &w)
            };
            match c {
                Ok(c) => {
                    if let SeseKind::Affine { increments } = &c.kind {
                        stats.multi_increment += usize::from(increments.len() > 1);
                    }
                    stats.multi_exit += usize::from(lp.exits.len() > 1);
                    stats.multi_latch += usize::from(lp.latches.len() > 1);
                    stats.nested += usize::from(
                        loops
                            .iter()
                            .any(|o| o.header != lp.header && o.contains(lp.header)),
                    );
                    counters.push((c, li));
                }
                Err(_) => stats.refused += 1,
            }
        }
    }
    let only: Vec<SeseCounter> = counters.iter().map(|(c, _)| c.clone()).collect();
    // A third of the cases derive the early exits from the tree (no frame record).
    let exits_in_tree = rng.percent(30);
    let (p, plain) = if exits_in_tree {
        stats.exits_in_tree += 1;
        (
            place_edge_counters_sese_exits_in_tree(&g, &w, |_| false, &only),
            place_edge_counters_exits_in_tree(&g, &w, |_| false),
        )
    } else {
        (
            place_edge_counters_sese(&g, &w, |_| false, &only),
            place_edge_counters(&g, &w, |_| false),
        )
    };
    // Ball–Larus with free chords: each free edge replaces one counter, no more are needed.
    assert_eq!(
        p.incremented().count() + p.free.len(),
        plain.chords.len(),
        "seed {seed}"
    );
    if exits_in_tree {
        assert!(
            p.free.iter().all(|&(_, k)| !only[k].may_end_inside),
            "seed {seed}"
        );
        // Cases where the derived early exits depend on the free chords' values.
        stats.free_exits_in_tree +=
            usize::from(!p.free.is_empty() && g.edges().any(|(_, e)| e.kind == EarlyExit));
    }
    for &(f, k) in &p.free {
        assert!(!p.placement.tree.in_tree[f], "seed {seed}");
        assert_eq!(only[k].measured, f);
    }
    stats.free += p.free.len();
    // Vertex mode (record placement only): the same tree and free chords, Fig. 11 on top.
    let vp = (!exits_in_tree).then(|| place_vertex_counters_sese(&g, &w, |_| false, &only));
    if let Some(vp) = &vp {
        assert_eq!(vp.free, p.free, "seed {seed}");
        for &(f, _) in &vp.free {
            assert!(
                !vp.vertex.dropped.contains(&f),
                "seed {seed}: free {f} dropped"
            );
        }
        assert_eq!(
            vp.incremented().count() + vp.free.len() + vp.vertex.dropped.len(),
            plain.chords.len(),
            "seed {seed}"
        );
        assert!(vp.incremented().all(|e| p.incremented().any(|x| x == e)));
    }

    let calls = 1 + rng.below(6);
    let path = random_walk(&g, &mut rng, calls);
    let mut truth = IdVec::filled(g.num_edges(), 0u64);
    let mut chord_values = IdVec::filled(g.num_edges(), 0u64);
    let incremented: Vec<EdgeId> = p.incremented().collect();
    let mut sese_values = vec![0u64; only.len()];
    // Per counter, while its loop is active: the variable's init and value, and how often
    // the measured edge was taken in this activation (what the value must give).
    let mut state: Vec<Option<(i128, i128, u64)>> = vec![None; only.len()];
    let mut lost = false;
    for (pos, &x) in path.iter().enumerate() {
        truth[x] += 1;
        if incremented.contains(&x) {
            chord_values[x] += 1;
        }
        let edge = g.edge(x);
        for &(_, k) in &p.free {
            let c = &only[k];
            let lp = &loops[counters[k].1];
            let leaves = edge.src != g.exit()
                && lp.contains(edge.src)
                && (edge.dst == g.exit() || !lp.contains(edge.dst));
            if let Some((init, v, taken)) = state[k] {
                if leaves {
                    state[k] = None;
                    // Derived early exits have no frame record to flush a value from.
                    if edge.kind == EarlyExit && (!c.flush_exact || exits_in_tree) {
                        assert!(c.may_end_inside, "seed {seed}");
                        lost |= taken > 0;
                        stats.lost += usize::from(taken > 0);
                    } else {
                        stats.flushed += usize::from(edge.kind == EarlyExit);
                        let n = c
                            .count(init, v)
                            .unwrap_or_else(|err| panic!("seed {seed}: counter {c:?}: {err}"));
                        // Theorem 3.10, activation by activation.
                        assert_eq!(n, taken, "seed {seed}: counter {c:?}");
                        sese_values[k] += n;
                    }
                }
            }
            if let Some((_, _, taken)) = state[k].as_mut() {
                *taken += u64::from(x == c.measured);
            }
            let enters = edge.dst == lp.header && edge.src != g.exit() && !lp.contains(edge.src);
            if enters && c.kind == SeseKind::TripCount {
                // What ScalarEvolution knows on entry: the back edges this activation will
                // take; the count is added at the exit (a variable from 0 to `trips`, step 1).
                let mut trips = 0;
                for &y in &path[pos + 1..] {
                    let ye = g.edge(y);
                    if ye.kind == EarlyExit || (ye.src != g.exit() && !lp.contains(ye.dst)) {
                        break;
                    }
                    trips += u64::from(y == c.measured);
                }
                state[k] = Some((0, i128::from(trips), 0));
                stats.trip_counts += 1;
            }
            if let SeseKind::Affine { increments } = &c.kind {
                if edge.dst == lp.header && edge.src != g.exit() && !lp.contains(edge.src) {
                    let init = i128::from(rng.next_u64() as i32);
                    state[k] = Some((init, init, 0));
                }
                if let Some((_, v, _)) = state[k].as_mut() {
                    for i in increments.iter().filter(|i| i.block == edge.dst) {
                        *v += i128::from(i.step);
                    }
                }
            }
        }
        let call_over = matches!(edge.kind, Return)
            || (edge.kind == EarlyExit && path.get(pos + 1).is_none_or(|&y| y == g.entry_edge()));
        if call_over {
            assert!(state.iter().all(Option::is_none), "seed {seed}");
            let got = recover(&g, &p, &chord_values, &sese_values);
            if lost {
                assert_ne!(
                    got.as_ref().ok(),
                    Some(&truth),
                    "seed {seed}: lost yet equal"
                );
            } else {
                assert_eq!(got.as_ref(), Ok(&truth), "seed {seed} at {pos}");
                if let Some(vp) = &vp {
                    check_vertex(&g, vp, &chord_values, &sese_values, &truth, seed);
                    stats.vertex_checks +=
                        usize::from(!vp.free.is_empty() && !vp.vertex.dropped.is_empty());
                }
            }
        }
    }
    stats
}

/// Vertex mode's recovery (Fig. 8 with the free chords' SESE values): every block count equals
/// the true one.
fn check_vertex(
    g: &Cfg,
    vp: &crate::vertex::VertexSesePlacement,
    chord_values: &IdVec<EdgeId, u64>,
    sese_values: &[u64],
    truth: &IdVec<EdgeId, u64>,
    seed: u64,
) {
    let mut measured = IdVec::filled(g.num_edges(), None);
    for e in vp.incremented() {
        measured[e] = Some(chord_values[e]);
    }
    for &(f, k) in &vp.free {
        measured[f] = Some(sese_values[k]);
    }
    let got = propagate_vertex(g, &measured, &vp.vertex.dropped, &vp.vertex.undetermined)
        .unwrap_or_else(|err| panic!("seed {seed}: {err}"));
    for node in g.nodes() {
        let want: u64 = g.preds(node).iter().map(|&e| truth[e]).sum();
        assert_eq!(got.blocks[node], want, "seed {seed}: block {node}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn recovered_counts_equal_the_true_ones(g in arb_sese_graph(), seed in any::<u64>()) {
        check_graph(g, Rng::new(seed), seed);
    }
}

/// The random cases do exercise what they claim to.
#[test]
fn random_cases_cover_the_patterns() {
    let mut total = Stats::default();
    for seed in 0..500 {
        let s = check_seed(seed);
        total.free += s.free;
        total.multi_increment += s.multi_increment;
        total.trip_counts += s.trip_counts;
        total.flushed += s.flushed;
        total.lost += s.lost;
        total.refused += s.refused;
        total.multi_exit += s.multi_exit;
        total.multi_latch += s.multi_latch;
        total.nested += s.nested;
        total.exits_in_tree += s.exits_in_tree;
        total.free_exits_in_tree += s.free_exits_in_tree;
        total.vertex_checks += s.vertex_checks;
    }
    eprintln!("{total:?}");
    let want = [
        ("free chords", total.free, 200),
        ("counters of several increments", total.multi_increment, 60),
        ("trip counts", total.trip_counts, 60),
        (
            "values added when the frame ended inside",
            total.flushed,
            25,
        ),
        ("values lost when the frame ended inside", total.lost, 10),
        ("refused counters", total.refused, 100),
        ("counters of loops with several exits", total.multi_exit, 40),
        (
            "counters of loops with several latches",
            total.multi_latch,
            20,
        ),
        ("counters of nested loops", total.nested, 40),
        (
            "early exits derived next to free chords",
            total.free_exits_in_tree,
            20,
        ),
        (
            "vertex recoveries with free and dropped chords",
            total.vertex_checks,
            50,
        ),
    ];
    for (what, got, min) in want {
        assert!(got >= min, "only {got} {what}: {total:?}");
    }
}
