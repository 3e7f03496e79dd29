//! The path-profiling instrumentation as data (Ball & Larus 1996 §3.4 "Instrumentation", its
//! algorithm for placing instrumentation), for a front end to apply to control-flow edges.
//!
//! A front end keeps one register `r` per frame and one counter array per function. The naive
//! instrumentation would set `r = 0` on every edge leaving START, add `Inc(c)` on every chord
//! `c`, and do `count[r]++` on every edge entering END. The paper improves it in three loops,
//! all over the DAG with the spanning tree of [`Increments`]:
//!
//! 1. **Initialization**, from START: a vertex is in the work set if every path from START to
//!    it is free of chords. For each edge `v -> w` out of such a vertex: a chord gets `r = Inc`
//!    (it is the first instrumented edge of every path through it); a tree edge that is `w`'s
//!    only incoming edge puts `w` in the work set; any other tree edge gets `r = 0`.
//! 2. **Counting**, from END backwards: a vertex is in the work set if every path from it to
//!    END is free of chords. For each edge `v -> w` into such a vertex: a chord gets
//!    `count[r + Inc]++` (its increment folded into the count), or `count[X]++` if loop 1 gave
//!    it `r = X` (the path is then fully known); a tree edge that is `v`'s only outgoing edge
//!    puts `v` in the work set; any other tree edge gets `count[r]++` (`count[0]++` if it has
//!    `r = 0`).
//! 3. **Increments**: every other chord with a nonzero increment gets `r += Inc`.
//!
//! No vertex is in both work sets (its unique tree paths from START and to END, closed by the
//! tree edge `END -> START`, would be a cycle of the tree), so on every path the one
//! initialization comes before every increment and the count comes last; a count can come
//! before the path's last edge when the rest of the path is a chain of single-successor
//! blocks, which cannot branch or exit early.
//!
//! [`PathPlacement::code`] holds the resulting action of each DAG edge, and
//! [`PathPlacement::actions`] the list for each control-flow edge, to be executed in order when
//! that edge is taken:
//!
//! | control-flow edge | where the front end applies the list | what it can contain |
//! |---|---|---|
//! | `e0` | at function entry | `Init` |
//! | `Flow` / `Return` kept | on the edge (like an edge counter) | `Init`, `Add`, `CountAt` or `Count` |
//! | `EarlyExit` of `v` | when the frame is abandoned in `v` (the runtime needs `r`) | `CountAt` or `Count` |
//! | `Reentry` into `v` | at the second return of `setjmp` | `Init` |
//! | back / cut edge `x -> y` | on the edge | the `x -> END` part (`CountAt` or `Count`), then the `START -> y` part: `Reinit`, or `Count` if the new path is already determined |
//! | dead edge | nowhere | nothing |
//!
//! Any list can be empty: an uninstrumented tree edge, or an edge whose count was made earlier
//! (e.g. the early exit of a block that can only exit early is counted on the way into the
//! block) or whose initialization happens later. Tree edges can carry actions too (`r=0`,
//! `count[r]++`): a front end with edges it cannot split must place those at an equivalent
//! point (the end of the source if it has one successor, the start of the target if it has one
//! predecessor).
//!
//! Reading `r` before any `Init` on a path never happens; [`PathPlacement::replay`] is a
//! reference interpreter of these semantics.

use super::dag::{CfgImage, DagEdgeId};
use super::number::NumberedDag;
use super::place::Increments;
use super::PathError;
use crate::ids::{EdgeId, IdVec};
use std::fmt;

/// One instrumentation step on the path register `r` and the function's path counters.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Action {
    /// `r = value`: the path's first instrumented edge.
    Init(i128),
    /// `r += delta`.
    Add(i128),
    /// `count[r + delta] += 1`: the path ends (or its remaining edges are uninstrumented).
    CountAt(i128),
    /// `count[value] += 1`: the whole path is known on this edge; `r` is not read.
    Count(i128),
    /// `r = value` after the path that ended on this back or cut edge was counted: the next
    /// path starts.
    Reinit(i128),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Action::Init(v) => write!(f, "r={v}"),
            Action::Add(d) if d < 0 => write!(f, "r-={}", d.unsigned_abs()),
            Action::Add(d) => write!(f, "r+={d}"),
            Action::CountAt(0) => write!(f, "count[r]++"),
            Action::CountAt(d) if d < 0 => write!(f, "count[r-{}]++", d.unsigned_abs()),
            Action::CountAt(d) => write!(f, "count[r+{d}]++"),
            Action::Count(v) => write!(f, "count[{v}]++"),
            Action::Reinit(v) => write!(f, "next r={v}"),
        }
    }
}

/// The optimized instrumentation of one function (module doc).
///
/// Invariants: `code[d]` is never `Reinit`; `first[d]` implies `d` is a chord; replaying
/// `actions` along any execution counts exactly the numbers of the paths it consists of.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PathPlacement {
    /// The action on each DAG edge, if any.
    pub code: IdVec<DagEdgeId, Option<Action>>,
    /// True for the chords that are the first instrumented edge of every path through them
    /// (they set `r = Inc` instead of adding).
    pub first: IdVec<DagEdgeId, bool>,
    /// The actions of each control-flow edge, in order (module doc's table).
    pub actions: IdVec<EdgeId, Vec<Action>>,
}

impl PathPlacement {
    /// The placement for `paths` with the spanning tree and increments `incs`.
    pub fn new(paths: &NumberedDag, incs: &Increments) -> Result<PathPlacement, PathError> {
        let dag = paths.dag();
        let m = dag.num_edges();
        if incs.in_tree.len() != m || incs.inc.len() != m {
            return Err(PathError::LengthMismatch {
                expected: m,
                found: incs.in_tree.len().min(incs.inc.len()),
            });
        }
        let chord = |d: DagEdgeId| !incs.in_tree[d];

        // Loop 1: initialization.
        let mut init: IdVec<DagEdgeId, Option<i128>> = IdVec::filled(m, None);
        let mut work = vec![dag.start()];
        while let Some(v) = work.pop() {
            for &d in dag.succs(v) {
                let w = dag.edge(d).dst;
                if chord(d) {
                    init[d] = Some(incs.inc[d]);
                } else if dag.preds(w).len() == 1 {
                    work.push(w);
                } else {
                    init[d] = Some(0);
                }
            }
        }

        // Loop 2: counting.
        let mut count: IdVec<DagEdgeId, Option<Action>> = IdVec::filled(m, None);
        let mut work = vec![dag.end()];
        while let Some(w) = work.pop() {
            for &d in dag.preds(w) {
                let v = dag.edge(d).src;
                if !chord(d) && dag.succs(v).len() == 1 {
                    work.push(v);
                    continue;
                }
                let delta = if chord(d) { incs.inc[d] } else { 0 };
                count[d] = Some(match init[d] {
                    Some(x) => Action::Count(x),
                    None => Action::CountAt(delta),
                });
            }
        }

        // Loop 3: increments; and the code of each DAG edge.
        let mut code: IdVec<DagEdgeId, Option<Action>> = IdVec::filled(m, None);
        let mut first = IdVec::filled(m, false);
        for i in 0..m {
            let d = DagEdgeId::new(i);
            first[d] = chord(d) && init[d].is_some();
            code[d] = match (count[d], init[d]) {
                (Some(c), _) => Some(c),
                (None, Some(x)) => Some(Action::Init(x)),
                (None, None) if chord(d) && incs.inc[d] != 0 => Some(Action::Add(incs.inc[d])),
                (None, None) => None,
            };
        }

        let mut actions = IdVec::filled(dag.num_cfg_edges(), Vec::new());
        for i in 0..dag.num_cfg_edges() {
            let e = EdgeId::new(i);
            actions[e] = match dag.image(e) {
                CfgImage::Start(d)
                | CfgImage::Kept(d)
                | CfgImage::EarlyExit(d)
                | CfgImage::Reentry(d) => code[d].into_iter().collect(),
                CfgImage::Back { end, start } | CfgImage::Cut { end, start } => code[end]
                    .into_iter()
                    .chain(code[start].map(|a| match a {
                        Action::Init(x) => Action::Reinit(x),
                        other => other,
                    }))
                    .collect(),
                CfgImage::Dead => Vec::new(),
            };
        }
        Ok(PathPlacement {
            code,
            first,
            actions,
        })
    }

    /// Replays the actions along `walk`, the control-flow edges one call executes in order
    /// (`e0` first, early exits and re-entries included), with `r` starting at `initial`.
    /// Returns the counter indices incremented, in order. Arithmetic wraps, so a poisoned
    /// `initial` shows up as a wrong index rather than a panic.
    pub fn replay(&self, walk: impl IntoIterator<Item = EdgeId>, initial: i128) -> Vec<i128> {
        let mut r = initial;
        let mut counted = Vec::new();
        for e in walk {
            for &a in &self.actions[e] {
                match a {
                    Action::Init(x) | Action::Reinit(x) => r = x,
                    Action::Add(d) => r = r.wrapping_add(d),
                    Action::CountAt(d) => counted.push(r.wrapping_add(d)),
                    Action::Count(x) => counted.push(x),
                }
            }
        }
        counted
    }

    /// `"e1: r=0; e2: r=2"`: the non-empty action lists, for tests and debugging.
    pub fn summary(&self) -> String {
        self.actions
            .iter()
            .filter(|(_, list)| !list.is_empty())
            .map(|(e, list)| {
                let steps: Vec<String> = list.iter().map(Action::to_string).collect();
                format!("{e}: {}", steps.join(" "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::paths::number::number_paths;
    use crate::paths::number::tests::abcdef;
    use crate::paths::place::tests::abcdef_weights;
    use crate::paths::place::{chord_increments, dag_weights};
    use crate::testing::cfg;
    use crate::weight::heuristic_weights;

    const POISON: i128 = -1_000_000_007;

    fn walk(edges: &[usize]) -> Vec<EdgeId> {
        edges.iter().map(|&e| EdgeId::new(e)).collect()
    }

    #[test]
    fn paper_example_placement() {
        // Chords A->B (2), B->D (2), D->E (1), F->EXIT (0). Loop 1: START->A is A's only
        // incoming tree edge, so A joins the work set; A->B is a chord: r=2; A->C enters C,
        // which has two predecessors: r=0. Loop 2: F->EXIT is a chord: count[r+0]. Loop 3:
        // B->D and D->E add.
        let p = number_paths(&abcdef()).unwrap();
        let incs = chord_increments(&p, &abcdef_weights()).unwrap();
        let pl = PathPlacement::new(&p, &incs).unwrap();
        assert_eq!(
            pl.summary(),
            "e1: r=0; e2: r=2; e4: r+=2; e7: r+=1; e9: count[r]++"
        );
        assert_eq!(
            (0..p.dag().num_edges())
                .filter(|&i| pl.first[DagEdgeId::new(i)])
                .collect::<Vec<_>>(),
            [2]
        );
        // The paper's table: ACDF 0, ACDEF 1, ABCDF 2, ABCDEF 3, ABDF 4, ABDEF 5.
        for (path, number) in [
            (&[0, 1, 5, 6, 9][..], 0),
            (&[0, 1, 5, 7, 8, 9], 1),
            (&[0, 2, 3, 5, 6, 9], 2),
            (&[0, 2, 3, 5, 7, 8, 9], 3),
            (&[0, 2, 4, 6, 9], 4),
            (&[0, 2, 4, 7, 8, 9], 5),
        ] {
            assert_eq!(pl.replay(walk(path), POISON), [number], "{path:?}");
        }
    }

    #[test]
    fn loop_with_early_exit_and_reentry() {
        //   n0 ─e1─▶ n1 ─e2─▶ n2 ─e4─▶ n3 ─e6─▶ EXIT (return)
        //            ▲ └─e3─▶ n4 ─e5──┘ │
        //            └───────e7─────────┘   (back edge n3 -> n1)
        //   e8: n2 early exit; e9: re-entry into n3
        let g = cfg(
            5,
            &[
                (0, 1, Flow),      // e1
                (1, 2, Flow),      // e2
                (1, 4, Flow),      // e3
                (2, 3, Flow),      // e4
                (4, 3, Flow),      // e5
                (3, 5, Return),    // e6
                (3, 1, Flow),      // e7 back
                (2, 5, EarlyExit), // e8
                (5, 3, Reentry),   // e9
            ],
        );
        let p = number_paths(&g).unwrap();
        let w = dag_weights(p.dag(), &heuristic_weights(&g)).unwrap();
        let incs = chord_increments(&p, &w).unwrap();
        let pl = PathPlacement::new(&p, &incs).unwrap();
        // Paths (regenerated): 0 n0 n1 n2 n3 ret, 1 n0 n1 n2 n3 back, 2 n0 n1 n2 early,
        // 3 n0 n1 n4 n3 ret, 4 n0 n1 n4 n3 back, then the same five from the back edge
        // (5..9) and the two from the re-entry (10 ret, 11 back).
        assert_eq!(p.total(), 12);
        // The heuristic tree leaves e1 (n0 -> n1, which also has the back edge's START -> n1)
        // as the first chord of the entry paths. E.g. path 3 (n0 n1 n4 n3, return): r = -5,
        // r += 9, count[r - 1] = count[3]; path 5 (after the back edge: n1 n2 n3, return):
        // r = 0, r += 6, count[5].
        assert_eq!(
            pl.summary(),
            "e1: r=-5; e4: r+=6; e5: r+=9; e6: count[r-1]++; e7: count[r]++ next r=0; \
             e8: count[r+7]++; e9: r=11"
        );

        // One call: two iterations, an early exit in n2, re-entry at n3, then the return.
        let run = walk(&[0, 1, 2, 4, 7, 3, 5, 7, 2, 8, 9, 6]);
        assert_eq!(pl.replay(run, POISON), [1, 9, 7, 10]);
    }
}
