//! Single-cycle loops counted at their exits: tally's addition to the instrumentation of
//! Ball & Larus 1996 §3.4 ("Instrumentation"), in the spirit of Frenot & Pereira 2024's counters
//! that a loop pays for once, at its exits, instead of on every iteration.
//!
//! A loop whose body has exactly one path from its header back to itself (every branch inside
//! it leaves the loop: a `for` loop whose body the optimizer turned into straight-line code,
//! selects included) ends the same acyclic path on every iteration but the first: after the
//! first back edge the path register holds a constant, so iteration `i >= 2` counts the same
//! path numbers (`later`), and the first iteration counts `r + c` with `r` as it was when the
//! loop was entered (`first`). The counting actions of the cycle can therefore leave the loop:
//! the loop keeps a count `n` of its header's executions (`n = 0` on every entry edge, `n += 1`
//! at the header), remembers `r + c` on entry for the `first` counts that depend on `r`, and
//! every exit edge adds, when `n >= 2` (the back edge was taken `n - 1 >= 1` times), each
//! `first` count once and each `later` count `n - 2` times. The other actions of the cycle
//! (`r = c`, `r += c`) stay where they are: the last, partial pass through the body needs them.
//!
//! That is exact when the counts removed run exactly once per completed pass: each removed
//! count sits after the cycle's last exit (a count placed before a branch out of the loop
//! would also run on the partial pass), the loop is entered only at its header, and it cannot
//! be left other than through its exits (no early exits or re-entries in it; the front end
//! also keeps out loops with calls, which could write or abandon the frame's counts meanwhile).
//! In a function counted in a hash table this turns a probe per iteration (a multiplication, a
//! shift, a compare and an increment) into one register increment.
//!
//! [`CycleLoop::replay`] is the reference semantics, checked against
//! [`PathPlacement::replay`] on random graphs and walks.

use super::actions::{Action, PathPlacement};
use super::dag::{CfgImage, PathDag};
use crate::cfg::{Cfg, EdgeKind};
use crate::dfs::Dfs;
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::loops::Loops;
use std::collections::HashSet;

/// A count of the first pass through a cycle.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum FirstCount {
    /// `count[r + c]`, `r` the path register as the loop is entered (after the entry edge's
    /// actions).
    FromR(i128),
    /// `count[v]`.
    Const(i128),
}

/// A loop whose cycle counts are made at its exits (module doc).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CycleLoop {
    /// The loop's header.
    pub header: NodeId,
    /// The cycle's edges from the header back to it, the back edge last.
    pub cycle: Vec<EdgeId>,
    /// The edges entering the header from outside the loop.
    pub entries: Vec<EdgeId>,
    /// The edges leaving the loop.
    pub exits: Vec<EdgeId>,
    /// The counting actions taken out of the cycle: `(edge, index in its action list)`.
    pub removed: Vec<(EdgeId, usize)>,
    /// What the first pass counts.
    pub first: Vec<FirstCount>,
    /// What every later pass counts.
    pub later: Vec<i128>,
}

/// Register state during the symbolic replay of a cycle.
#[derive(Copy, Clone)]
enum Sym {
    /// `r` on entry plus a constant.
    FromR(i128),
    Const(i128),
}

/// The loops of `cfg` whose cycle counts can move to their exits under `placement` (module
/// doc), among those whose every block `eligible` accepts.
pub fn cycle_loops(
    cfg: &Cfg,
    dag: &PathDag,
    placement: &PathPlacement,
    eligible: impl Fn(NodeId) -> bool,
) -> Vec<CycleLoop> {
    let dfs = Dfs::compute(cfg);
    let loops = Loops::compute(cfg, &dfs);
    loops
        .entries()
        .iter()
        .filter_map(|&y| cycle_loop(cfg, dag, placement, &loops, y, &eligible))
        .collect()
}

fn cycle_loop(
    cfg: &Cfg,
    dag: &PathDag,
    placement: &PathPlacement,
    loops: &Loops,
    y: NodeId,
    eligible: &impl Fn(NodeId) -> bool,
) -> Option<CycleLoop> {
    let members = loops.nat_loop(y);
    let inside = |v: NodeId| loops.contains(y, v);
    if members
        .iter()
        .any(|&v| !eligible(v) || cfg.early_exit(v).is_some())
    {
        return None;
    }
    // Entered only at the header, only by plain flow edges; no re-entries.
    let mut entries = Vec::new();
    for &v in members {
        for &e in cfg.preds(v) {
            let edge = cfg.edge(e);
            if inside(edge.src) {
                continue;
            }
            if v != y || edge.kind != EdgeKind::Flow {
                return None;
            }
            entries.push(e);
        }
    }
    if entries.is_empty() {
        return None;
    }
    // The one cycle: every member has exactly one successor inside the loop.
    let mut cycle = Vec::new();
    let mut seen = HashSet::new();
    let mut v = y;
    loop {
        let mut next = cfg
            .succs(v)
            .iter()
            .copied()
            .filter(|&e| cfg.edge(e).kind.is_structural() && inside(cfg.edge(e).dst));
        let e = next.next()?;
        if next.next().is_some() || !seen.insert(v) {
            return None;
        }
        cycle.push(e);
        v = cfg.edge(e).dst;
        if v == y {
            break;
        }
    }
    if seen.len() != members.len() || !matches!(dag.image(*cycle.last()?), CfgImage::Back { .. }) {
        return None;
    }
    let exits: Vec<EdgeId> = loops.loop_exits(y).to_vec();
    // Position of the last edge of the cycle whose source has an exit: counts must come after.
    let last_exit = cycle
        .iter()
        .rposition(|&e| {
            let src = cfg.edge(e).src;
            cfg.succs(src).iter().any(|x| exits.contains(x))
        })
        .unwrap_or(0);

    let mut removed = Vec::new();
    let mut first = Vec::new();
    let mut r = Sym::FromR(0);
    for (i, &e) in cycle.iter().enumerate() {
        for (j, a) in placement.actions[e].iter().enumerate() {
            match *a {
                Action::Init(v) | Action::Reinit(v) => r = Sym::Const(v),
                Action::Add(d) => {
                    r = match r {
                        Sym::FromR(c) => Sym::FromR(c.checked_add(d)?),
                        Sym::Const(c) => Sym::Const(c.checked_add(d)?),
                    }
                }
                Action::CountAt(d) | Action::Count(d) => {
                    if i < last_exit {
                        return None;
                    }
                    removed.push((e, j));
                    first.push(match (*a, r) {
                        (Action::Count(v), _) => FirstCount::Const(v),
                        (_, Sym::FromR(c)) => FirstCount::FromR(c.checked_add(d)?),
                        (_, Sym::Const(c)) => FirstCount::Const(c.checked_add(d)?),
                    });
                }
            }
        }
    }
    if removed.is_empty() {
        return None;
    }
    // The later passes start from the constant the first one left.
    let Sym::Const(mut s) = r else { return None };
    let mut later = Vec::new();
    for &e in &cycle {
        for a in &placement.actions[e] {
            match *a {
                Action::Init(v) | Action::Reinit(v) => s = v,
                Action::Add(d) => s = s.checked_add(d)?,
                Action::CountAt(d) => later.push(s.checked_add(d)?),
                Action::Count(v) => later.push(v),
            }
        }
    }
    Some(CycleLoop {
        header: y,
        cycle,
        entries,
        exits,
        removed,
        first,
        later,
    })
}

/// The action lists of `placement` with the counts of `loops` taken out.
pub fn without_cycle_counts(
    placement: &PathPlacement,
    loops: &[CycleLoop],
) -> IdVec<EdgeId, Vec<Action>> {
    let mut actions = placement.actions.clone();
    let mut drop: HashSet<(EdgeId, usize)> = HashSet::new();
    for l in loops {
        drop.extend(l.removed.iter().copied());
    }
    for i in 0..actions.len() {
        let e = EdgeId::new(i);
        let mut j = 0;
        actions[e].retain(|_| {
            let keep = !drop.contains(&(e, j));
            j += 1;
            keep
        });
    }
    actions
}

impl CycleLoop {
    /// Replays `walk` (as [`PathPlacement::replay`]) with `actions` (from
    /// [`without_cycle_counts`]) and the exit code of `loops`; returns the counter indices
    /// incremented, each as often as counted, in no particular order.
    pub fn replay(
        cfg: &Cfg,
        actions: &IdVec<EdgeId, Vec<Action>>,
        loops: &[CycleLoop],
        walk: impl IntoIterator<Item = EdgeId>,
        initial: i128,
    ) -> Vec<i128> {
        let mut r = initial;
        let mut n = vec![0u64; loops.len()];
        let mut f: Vec<Vec<i128>> = vec![Vec::new(); loops.len()];
        let mut counted = Vec::new();
        for e in walk {
            for &a in &actions[e] {
                match a {
                    Action::Init(x) | Action::Reinit(x) => r = x,
                    Action::Add(d) => r = r.wrapping_add(d),
                    Action::CountAt(d) => counted.push(r.wrapping_add(d)),
                    Action::Count(x) => counted.push(x),
                }
            }
            for (i, l) in loops.iter().enumerate() {
                if l.exits.contains(&e) && n[i] >= 2 {
                    for (k, c) in l.first.iter().enumerate() {
                        counted.push(match *c {
                            FirstCount::FromR(_) => f[i][k],
                            FirstCount::Const(v) => v,
                        });
                    }
                    for _ in 2..n[i] {
                        counted.extend(l.later.iter().copied());
                    }
                }
                if l.entries.contains(&e) {
                    n[i] = 0;
                    f[i] = l
                        .first
                        .iter()
                        .map(|c| match *c {
                            FirstCount::FromR(d) => r.wrapping_add(d),
                            FirstCount::Const(v) => v,
                        })
                        .collect();
                }
                if cfg.edge(e).dst == l.header {
                    n[i] += 1;
                }
            }
        }
        counted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::paths::number::number_paths;
    use crate::paths::place::{chord_increments, dag_weights};
    use crate::testing::{cfg, random_cfg_with, GenConfig, Rng};
    use crate::weight::heuristic_weights;

    fn sorted(mut v: Vec<i128>) -> Vec<i128> {
        v.sort_unstable();
        v
    }

    fn check(g: &Cfg, rng: &mut Rng) -> usize {
        let Ok(p) = number_paths(g) else { return 0 };
        let Ok(w) = dag_weights(p.dag(), &heuristic_weights(g)) else {
            return 0;
        };
        let Ok(incs) = chord_increments(&p, &w) else {
            return 0;
        };
        let Ok(pl) = PathPlacement::new(&p, &incs) else {
            return 0;
        };
        let loops = cycle_loops(g, p.dag(), &pl, |_| true);
        let actions = without_cycle_counts(&pl, &loops);
        for _ in 0..4 {
            let run = crate::testing::random_walk(g, rng, 3);
            assert_eq!(
                sorted(CycleLoop::replay(g, &actions, &loops, run.clone(), -7)),
                sorted(pl.replay(run.clone(), -7)),
                "walk {run:?}, loops {loops:?}"
            );
        }
        loops.len()
    }

    #[test]
    fn straight_loop_counts_at_its_exit() {
        //   n0 -e1-> n1 -e2-> n2 -e3-> n1 (back) ; n1 -e4-> n3 -e5-> ret ; n2 -e6-> n3
        let g = cfg(
            4,
            &[
                (0, 1, Flow),   // e1
                (1, 2, Flow),   // e2
                (2, 1, Flow),   // e3 back
                (1, 3, Flow),   // e4
                (3, 4, Return), // e5
                (2, 3, Flow),   // e6
                (0, 3, Flow),   // e7
            ],
        );
        let p = number_paths(&g).unwrap();
        let incs =
            chord_increments(&p, &dag_weights(p.dag(), &heuristic_weights(&g)).unwrap()).unwrap();
        let pl = PathPlacement::new(&p, &incs).unwrap();
        let loops = cycle_loops(&g, p.dag(), &pl, |_| true);
        assert_eq!(loops.len(), 1, "{}", pl.summary());
        let l = &loops[0];
        assert_eq!(l.cycle, [EdgeId::new(2), EdgeId::new(3)]);
        assert_eq!(l.entries, [EdgeId::new(1)]);
        // No count is left on the cycle.
        let actions = without_cycle_counts(&pl, &loops);
        for &e in &l.cycle {
            assert!(actions[e]
                .iter()
                .all(|a| !matches!(a, Action::Count(_) | Action::CountAt(_))));
        }
        // Zero, one and five back edges, leaving from either block.
        let e = EdgeId::new;
        for run in [
            vec![e(0), e(1), e(4), e(5)],
            vec![e(0), e(1), e(2), e(6), e(5)],
            vec![e(0), e(1), e(2), e(3), e(4), e(5)],
            vec![
                e(0),
                e(1),
                e(2),
                e(3),
                e(2),
                e(3),
                e(2),
                e(3),
                e(2),
                e(3),
                e(2),
                e(3),
                e(2),
                e(6),
                e(5),
            ],
            vec![e(0), e(7), e(5)],
        ] {
            assert_eq!(
                sorted(CycleLoop::replay(&g, &actions, &loops, run.clone(), 99)),
                sorted(pl.replay(run.clone(), 99)),
                "{run:?}"
            );
        }
        // The check can fail: dropping the exit code loses the loop's paths.
        let run = vec![e(0), e(1), e(2), e(3), e(2), e(3), e(4), e(5)];
        assert_ne!(
            sorted(CycleLoop::replay(&g, &actions, &[], run.clone(), 99)),
            sorted(pl.replay(run, 99))
        );
    }

    #[test]
    fn loop_with_a_branch_inside_is_not_taken() {
        let g = cfg(
            4,
            &[
                (0, 1, Flow),
                (1, 2, Flow),
                (1, 3, Flow),
                (2, 1, Flow),
                (3, 1, Flow),
                (1, 4, Return),
            ],
        );
        let p = number_paths(&g).unwrap();
        let incs =
            chord_increments(&p, &dag_weights(p.dag(), &heuristic_weights(&g)).unwrap()).unwrap();
        let pl = PathPlacement::new(&p, &incs).unwrap();
        assert!(cycle_loops(&g, p.dag(), &pl, |_| true).is_empty());
    }

    #[test]
    fn random_graphs_count_as_the_placement() {
        let mut rng = Rng::new(16);
        let mut found = 0;
        for _ in 0..3000 {
            let config = GenConfig {
                max_blocks: 2 + rng.below(10),
                max_extra_edges: 1,
                early_exit_percent: 10,
                noreturn_percent: 25,
                reentry_percent: 10,
                return_percent: 10,
            };
            let g = random_cfg_with(&mut rng, &config);
            found += check(&g, &mut rng);
        }
        assert!(
            found > 100,
            "only {found} single-cycle loops in the random graphs"
        );
    }
}
