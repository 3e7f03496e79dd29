//! Dense counter slices for the path ends of hashed functions (tally's addition to Ball & Larus
//! 1996 §3.4 "Instrumentation"; §5 sends functions with too many paths to a hash table).
//!
//! A function with more paths than [`ARRAY_PATHS`](super::ARRAY_PATHS) counts every path end
//! through a hash-table probe. Yet the path number counted at one end — a DAG edge whose
//! action is `count[r + c]++` or `count[c]++` in the [`PathPlacement`] — is the number of a
//! START-to-END path through that edge `v -> w`, so it lies in
//!
//! `[minpre(v) + Val(v -> w), maxpre(v) + Val(v -> w) + NumPaths(w) - 1]`
//!
//! where `minpre`/`maxpre` are the smallest and largest sums of `Val` over the DAG paths from
//! START to `v` (a forward dataflow in topological order; the paths from `w` to END are
//! numbered `0 .. NumPaths(w)` by §3.2's construction). A loop's back edge often has a narrow
//! range even when the function has millions of paths (a one-block loop: a single value).
//! Such an end can count into a slice of the module's counter array, slot `r + c - min`, as
//! cheaply as an array function; the reader maps slot `i` of a slice back to path `min + i`
//! (values of the range that are no path stay 0, and a value may be a path counted elsewhere:
//! the counts of all places add up).
//!
//! [`Slices::choose`] picks the ends (hottest first under a weighting, within a width and a
//! budget of slots); early exits stay hashed (the runtime counts them from the frame record).
//! [`Slices::replay`] is the reference interpreter: [`PathPlacement::replay`] with the sliced
//! counts put in slots.

use super::actions::{Action, PathPlacement};
use super::dag::{CfgImage, DagEdgeId, DagEdgeKind, PathDag};
use super::number::NumberedDag;
use crate::ids::{EdgeId, IdVec, NodeId};

/// For every DAG edge, the smallest and largest numbers of the START-to-END paths through it
/// (`None` for edges on no such path).
pub fn path_ranges(paths: &NumberedDag) -> IdVec<DagEdgeId, Option<(u128, u128)>> {
    let dag = paths.dag();
    let mut pre: IdVec<NodeId, Option<(u128, u128)>> = IdVec::filled(dag.num_nodes(), None);
    pre[dag.start()] = Some((0, 0));
    let mut ranges = IdVec::filled(dag.num_edges(), None);
    for &v in dag.topo_order() {
        let Some((lo, hi)) = pre[v] else { continue };
        for &d in dag.succs(v) {
            let w = dag.edge(d).dst;
            let paths_w = paths.num_paths(w);
            if paths_w == 0 {
                continue;
            }
            // Every sum here is at most a path number, below `NumPaths(START)`.
            let val = paths.val(d);
            let (a, b) = (lo.saturating_add(val), hi.saturating_add(val));
            pre[w] = Some(match pre[w] {
                None => (a, b),
                Some((x, y)) => (x.min(a), y.max(b)),
            });
            ranges[d] = Some((a, b.saturating_add(paths_w - 1)));
        }
    }
    ranges
}

/// For every vertex, the smallest and largest sums of `Val` over the DAG paths from START
/// whose first edge is `first` (`None` where no such path arrives).
fn prefix_ranges_from(
    paths: &NumberedDag,
    first: DagEdgeId,
) -> IdVec<NodeId, Option<(u128, u128)>> {
    let dag = paths.dag();
    let mut pre: IdVec<NodeId, Option<(u128, u128)>> = IdVec::filled(dag.num_nodes(), None);
    let f = dag.edge(first);
    pre[f.dst] = Some((paths.val(first), paths.val(first)));
    for &v in dag.topo_order() {
        let Some((lo, hi)) = pre[v] else { continue };
        if v == dag.start() {
            continue;
        }
        for &d in dag.succs(v) {
            let w = dag.edge(d).dst;
            let val = paths.val(d);
            let (a, b) = (lo.saturating_add(val), hi.saturating_add(val));
            pre[w] = Some(match pre[w] {
                None => (a, b),
                Some((x, y)) => (x.min(a), y.max(b)),
            });
        }
    }
    pre
}

/// The share of the paths through `d` that started by taking `first`, estimated from the
/// weights alone: the weight of every edge out of START flows forward in topological order,
/// split at every vertex in proportion to the weights of its outgoing edges (a Markov
/// estimate: the weights say how often an edge runs, not on which paths), and the share is
/// the part of the flow through `d` that came from `first`. In `0 ..= 1`; 1 when no flow
/// reaches `d` (no estimate: the slice is kept).
pub fn start_share(
    paths: &NumberedDag,
    weights: &IdVec<DagEdgeId, f64>,
    first: DagEdgeId,
    d: DagEdgeId,
) -> f64 {
    let dag = paths.dag();
    let weight = |e: DagEdgeId| {
        let w = weights.values().get(e.index()).copied().unwrap_or(0.0);
        if w.is_finite() && w > 0.0 {
            w
        } else {
            0.0
        }
    };
    // (all the flow, the flow that came from `first`) at each vertex.
    let mut flow: IdVec<NodeId, (f64, f64)> = IdVec::filled(dag.num_nodes(), (0.0, 0.0));
    for &e in dag.succs(dag.start()) {
        let (all, from) = &mut flow[dag.edge(e).dst];
        *all += weight(e);
        if e == first {
            *from += weight(e);
        }
    }
    let target = dag.edge(d).src;
    for &v in dag.topo_order() {
        let (all, from) = flow[v];
        if v == dag.start() || all <= 0.0 {
            continue;
        }
        let succs = dag.succs(v);
        let out: f64 = succs.iter().map(|&e| weight(e)).sum();
        let share = |e: DagEdgeId| {
            if out > 0.0 {
                weight(e) / out
            } else {
                1.0 / succs.len() as f64
            }
        };
        if v == target {
            // The split at `v` is the same for both flows.
            return (from / all).min(1.0);
        }
        for &e in succs {
            let (a, f) = &mut flow[dag.edge(e).dst];
            *a += all * share(e);
            *f += from * share(e);
        }
    }
    1.0
}

/// The DAG edge of each action of `placement.actions` (`PathPlacement::new`'s layout: one
/// action per DAG edge with code; a back or cut edge lists its `x -> END` part first).
pub fn action_edges(dag: &PathDag, placement: &PathPlacement) -> IdVec<EdgeId, Vec<DagEdgeId>> {
    let mut out = IdVec::filled(dag.num_cfg_edges(), Vec::new());
    for i in 0..dag.num_cfg_edges() {
        let e = EdgeId::new(i);
        let parts: Vec<DagEdgeId> = match dag.image(e) {
            CfgImage::Start(d)
            | CfgImage::Kept(d)
            | CfgImage::EarlyExit(d)
            | CfgImage::Reentry(d) => {
                vec![d]
            }
            CfgImage::Back { end, start } | CfgImage::Cut { end, start } => vec![end, start],
            CfgImage::Dead => Vec::new(),
        };
        out[e] = parts
            .into_iter()
            .filter(|&d| placement.code[d].is_some())
            .collect();
    }
    out
}

/// One slice: the counts of one path end.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Slice {
    /// The DAG edge whose count it takes.
    pub edge: DagEdgeId,
    /// The smallest path number counted there: slot `offset + i` counts path `min + i`.
    pub min: u128,
    /// Number of slots (`max - min + 1`).
    pub width: u64,
    /// Its first slot among the function's slices.
    pub offset: u64,
    /// The range covers only some of the paths counted there (those that end with a back or
    /// cut edge and started by taking the same edge: the iterations of its loop after the
    /// first): a value outside it is counted where it was before (the hash table).
    pub checked: bool,
}

/// The sliced ends of one function.
///
/// Invariants: `at[e]` has one entry per action of the placement's `actions[e]`, `Some(s)` only
/// for a count action, whose value then lies in `slices[s]`'s range; the slices' slots are
/// `0 .. total`, disjoint, in order.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Slices {
    /// For each action of each control-flow edge, the slice its count goes to.
    pub at: IdVec<EdgeId, Vec<Option<usize>>>,
    /// The slices, in slot order.
    pub slices: Vec<Slice>,
    /// Number of slots.
    pub total: u64,
}

impl Slices {
    /// No sliced end: every count stays where it was.
    pub fn none(actions: &IdVec<EdgeId, Vec<Action>>) -> Slices {
        Slices {
            at: IdVec::from_vec(
                actions
                    .values()
                    .iter()
                    .map(|a| vec![None; a.len()])
                    .collect(),
            ),
            slices: Vec::new(),
            total: 0,
        }
    }

    /// Slices for the count ends of `placement` whose range is at most `max_width` wide,
    /// heaviest first under `weights` (ties: narrower first, then by DAG edge id), while the
    /// slots stay within `budget`. Where the range is wider and every path counted there ends
    /// with the same back or cut edge, the range of those paths that started by taking that
    /// edge gets a checked slice if it is at most `checked_width` wide and those paths make at
    /// least `checked_share` of the end's weight ([`start_share`]: a path that misses the
    /// slice pays the check on top of its probe). Early exits and the ends on control-flow
    /// edges for which `allowed` is false keep their counts.
    pub fn choose(
        paths: &NumberedDag,
        placement: &PathPlacement,
        weights: &IdVec<DagEdgeId, f64>,
        (max_width, checked_width, checked_share): (u64, u64, f64),
        budget: u64,
        allowed: impl Fn(EdgeId) -> bool,
    ) -> Slices {
        let dag = paths.dag();
        let ranges = path_ranges(paths);
        let edges = action_edges(dag, placement);
        let mut candidates: Vec<(DagEdgeId, u128, u64, bool)> = Vec::new();
        for (e, ds) in edges.iter() {
            if !allowed(e) {
                continue;
            }
            for &d in ds {
                let counts = matches!(
                    placement.code[d],
                    Some(Action::Count(_) | Action::CountAt(_))
                );
                if !counts || matches!(dag.edge(d).kind, DagEdgeKind::EarlyExit(_)) {
                    continue;
                }
                let Some((lo, hi)) = ranges[d] else { continue };
                match u64::try_from(hi - lo + 1) {
                    Ok(width) if width <= max_width => {
                        candidates.push((d, lo, width, false));
                        continue;
                    }
                    _ => {}
                }
                if checked_width == 0 {
                    continue;
                }
                // The paths that started by taking the back or cut edge they end with (after
                // `d`, a chain of single-successor edges, the count being made early).
                let (mut last, mut w) = (d, dag.edge(d).dst);
                while let [next] = dag.succs(w) {
                    (last, w) = (*next, dag.edge(*next).dst);
                }
                let start = match dag.edge(last).kind {
                    DagEdgeKind::BackEnd(b) | DagEdgeKind::CutEnd(b) if w == dag.end() => {
                        match dag.image(b) {
                            CfgImage::Back { start, .. } | CfgImage::Cut { start, .. } => start,
                            _ => continue,
                        }
                    }
                    _ => continue,
                };
                let src = dag.edge(d).src;
                if let Some((a, b)) = prefix_ranges_from(paths, start)[src] {
                    // The rest is a chain: one path from `d`'s target.
                    let (lo, hi) = (a + paths.val(d), b + paths.val(d));
                    match u64::try_from(hi - lo + 1) {
                        Ok(width)
                            if width <= checked_width
                                && (checked_share <= 0.0
                                    || start_share(paths, weights, start, d) >= checked_share) =>
                        {
                            candidates.push((d, lo, width, true))
                        }
                        _ => {}
                    }
                }
            }
        }
        candidates.sort_by(|a, b| {
            weights
                .values()
                .get(b.0.index())
                .unwrap_or(&0.0)
                .total_cmp(weights.values().get(a.0.index()).unwrap_or(&0.0))
                .then(a.2.cmp(&b.2))
                .then(a.0.cmp(&b.0))
        });
        let mut slices = Vec::new();
        let mut total = 0u64;
        let mut of_edge: IdVec<DagEdgeId, Option<usize>> = IdVec::filled(dag.num_edges(), None);
        for (d, min, width, checked) in candidates {
            if total.checked_add(width).is_none_or(|t| t > budget) {
                continue;
            }
            of_edge[d] = Some(slices.len());
            slices.push(Slice {
                edge: d,
                min,
                width,
                offset: total,
                checked,
            });
            total += width;
        }
        let at = IdVec::from_vec(
            edges
                .values()
                .iter()
                .map(|ds| ds.iter().map(|&d| of_edge[d]).collect())
                .collect(),
        );
        Slices { at, slices, total }
    }

    /// The path number each slot counts.
    pub fn slot_paths(&self) -> Vec<u128> {
        self.slices
            .iter()
            .flat_map(|s| (0..u128::from(s.width)).map(move |i| s.min + i))
            .collect()
    }

    /// Replays `walk` as [`PathPlacement::replay`] does with `actions`, except that sliced
    /// counts go to their slots. Returns the slot counts and the other counted values, in
    /// order. A sliced value outside its slice's range is reported as `Err` with the value.
    pub fn replay(
        &self,
        actions: &IdVec<EdgeId, Vec<Action>>,
        walk: impl IntoIterator<Item = EdgeId>,
        initial: i128,
    ) -> Result<(Vec<u64>, Vec<i128>), i128> {
        let mut r = initial;
        let mut slots = vec![0u64; self.total as usize];
        let mut rest = Vec::new();
        for e in walk {
            for (j, &a) in actions[e].iter().enumerate() {
                let value = match a {
                    Action::Init(x) | Action::Reinit(x) => {
                        r = x;
                        continue;
                    }
                    Action::Add(d) => {
                        r = r.wrapping_add(d);
                        continue;
                    }
                    Action::CountAt(d) => r.wrapping_add(d),
                    Action::Count(x) => x,
                };
                match self.at[e].get(j).copied().flatten() {
                    Some(s) => {
                        let s = &self.slices[s];
                        let i = value
                            .checked_sub(s.min as i128)
                            .filter(|&i| (0..i128::from(s.width)).contains(&i));
                        match i {
                            Some(i) => slots[(s.offset as i128 + i) as usize] += 1,
                            None if s.checked => rest.push(value),
                            None => return Err(value),
                        }
                    }
                    None => rest.push(value),
                }
            }
        }
        Ok((slots, rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::{Cfg, EdgeKind::*};
    use crate::paths::number::number_paths;
    use crate::paths::place::{chord_increments, dag_weights};
    use crate::testing::{cfg, random_cfg_with, random_walk, GenConfig, Rng};
    use crate::weight::heuristic_weights;
    use std::collections::BTreeMap;

    fn placement(g: &Cfg) -> Option<(NumberedDag, PathPlacement, IdVec<DagEdgeId, f64>)> {
        let p = number_paths(g).ok()?;
        let w = dag_weights(p.dag(), &heuristic_weights(g)).ok()?;
        let incs = chord_increments(&p, &w).ok()?;
        let pl = PathPlacement::new(&p, &incs).ok()?;
        Some((p, pl, w))
    }

    fn tally(values: impl IntoIterator<Item = i128>) -> BTreeMap<i128, u64> {
        let mut m = BTreeMap::new();
        for v in values {
            *m.entry(v).or_default() += 1;
        }
        m
    }

    /// Slot counts mapped back to paths plus the other counts, as a count per path.
    fn recovered(sl: &Slices, slots: &[u64], rest: Vec<i128>) -> BTreeMap<i128, u64> {
        let mut m = tally(rest);
        for (p, &c) in sl.slot_paths().iter().zip(slots) {
            if c > 0 {
                *m.entry(*p as i128).or_default() += c;
            }
        }
        m
    }

    /// n0 -e1-> n1 -e2-> n1 (back) ; n1 -e3-> n2 ; n0 -e4-> n2 ; n2 -e5-> ret
    fn one_block_loop() -> Cfg {
        cfg(
            3,
            &[
                (0, 1, Flow),   // e1
                (1, 1, Flow),   // e2 back
                (1, 2, Flow),   // e3
                (0, 2, Flow),   // e4
                (2, 3, Return), // e5
            ],
        )
    }

    #[test]
    fn one_block_loop_has_a_narrow_range() {
        //   n0 -e1-> n1 -e2-> n1 (back) ; n1 -e3-> n2 ; n0 -e4-> n2 ; n2 -e5-> ret
        let g = one_block_loop();
        let (p, pl, w) = placement(&g).unwrap();
        let sl = Slices::choose(&p, &pl, &w, (4, 0, 0.0), 16, |_| true);
        // The back edge ends the paths n0 n1 (back) and, after a back edge, n1 (back): two
        // values, and the numbers of the paths between them.
        let back = EdgeId::new(2);
        let CfgImage::Back { end, .. } = p.dag().image(back) else {
            panic!("e2 is a back edge")
        };
        let (lo, hi) = path_ranges(&p)[end].unwrap();
        assert!(hi > lo && hi - lo < 4, "{lo}..={hi}");
        assert!(sl.slices.iter().any(|s| s.edge == end));
        // Three iterations: three paths end at the back edge, in the slice.
        let e = EdgeId::new;
        let run = [e(0), e(1), e(2), e(2), e(2), e(3), e(5)];
        let (slots, rest) = sl.replay(&pl.actions, run, -7).unwrap();
        assert_eq!(
            recovered(&sl, &slots, rest),
            tally(pl.replay(run, -7)),
            "{}",
            pl.summary()
        );
        assert!(slots.iter().sum::<u64>() >= 3);

        // Narrower: the paths that start by taking the back edge have a single number, a
        // checked slice of one slot; the first iteration's path is counted elsewhere.
        let sl = Slices::choose(&p, &pl, &w, (1, 1, 0.0), 16, |_| true);
        let s = sl.slices.iter().find(|s| s.edge == end).unwrap();
        assert!(
            s.checked && s.width == 1 && s.min > lo && s.min <= hi,
            "{s:?}"
        );
        let (slots, rest) = sl.replay(&pl.actions, run, -7).unwrap();
        assert_eq!(slots[s.offset as usize], 2);
        assert_eq!(
            recovered(&sl, &slots, rest),
            tally(pl.replay(run, -7)),
            "{}",
            pl.summary()
        );
    }

    /// `start_share`: a loop the heuristic assumes iterates 10 times (of which the weights keep
    /// 9 in 10 on the back edge) takes 9 in 10 of its back-edge paths from the back edge; one
    /// whose back edge runs once per entry takes half of them, and a share above that leaves it
    /// without a checked slice.
    #[test]
    fn start_share_follows_the_weights() {
        let g = one_block_loop();
        let (p, pl, w) = placement(&g).unwrap();
        let CfgImage::Back { end, start } = p.dag().image(EdgeId::new(2)) else {
            panic!("e2 is a back edge")
        };
        let share = start_share(&p, &w, start, end);
        assert!((share - 0.9).abs() < 1e-9, "{share}");
        let once = IdVec::from_vec(vec![1.0, 1.0, 1.0, 1.0, 0.0, 1.0]);
        let w1 = dag_weights(p.dag(), &once).unwrap();
        let share = start_share(&p, &w1, start, end);
        assert!((share - 0.5).abs() < 1e-9, "{share}");
        let checked = |w: &IdVec<DagEdgeId, f64>, min: f64| {
            let sl = Slices::choose(&p, &pl, w, (1, 1, min), 16, |_| true);
            sl.slices.iter().any(|s| s.edge == end && s.checked)
        };
        assert!(checked(&w, 0.6));
        assert!(checked(&w1, 0.5));
        assert!(!checked(&w1, 0.6));
    }

    /// On random graphs and walks: every value counted at an end lies in its range, every
    /// value an unchecked slice takes lies in the slice, and slots mapped back to paths plus
    /// the other counts are the walk's path counts. Returns the number of slices and of
    /// checked ones.
    fn check(g: &Cfg, rng: &mut Rng, widths: (u64, u64, f64), budget: u64) -> (usize, usize) {
        let Some((p, pl, w)) = placement(g) else {
            return (0, 0);
        };
        let ranges = path_ranges(&p);
        let sl = Slices::choose(&p, &pl, &w, widths, budget, |_| true);
        assert!(sl.total <= budget);
        let mut next = 0;
        for s in &sl.slices {
            assert_eq!(s.offset, next);
            next += s.width;
            let (lo, hi) = ranges[s.edge].unwrap();
            if s.checked {
                assert!(
                    lo <= s.min && s.min + u128::from(s.width) <= hi + 1,
                    "{s:?}"
                );
                assert!(u128::from(s.width) < hi - lo + 1);
            } else {
                assert_eq!((s.min, u128::from(s.width)), (lo, hi - lo + 1));
            }
        }
        for (e, list) in sl.at.iter() {
            assert_eq!(list.len(), pl.actions[e].len());
        }
        for _ in 0..4 {
            let run = random_walk(g, rng, 3);
            let (slots, rest) = sl
                .replay(&pl.actions, run.clone(), -7)
                .unwrap_or_else(|v| panic!("value {v} outside its slice, walk {run:?}"));
            assert_eq!(
                recovered(&sl, &slots, rest),
                tally(pl.replay(run.clone(), -7)),
                "walk {run:?}, {}",
                pl.summary()
            );
            // Every counted path lies in the range of the edge it was counted at.
            let all = Slices::choose(&p, &pl, &w, (u64::MAX, 0, 0.0), u64::MAX, |_| true);
            let (_, outside) = all
                .replay(&pl.actions, run.clone(), -7)
                .unwrap_or_else(|v| panic!("value {v} outside its range, walk {run:?}"));
            assert!(outside.iter().all(|&v| v >= 0 && (v as u128) < p.total()));
        }
        (
            sl.slices.len(),
            sl.slices.iter().filter(|s| s.checked).count(),
        )
    }

    #[test]
    fn random_graphs_recover_path_counts() {
        let mut rng = Rng::new(0x51_1ce5);
        let (mut sliced, mut checked) = (0, 0);
        for i in 0..400 {
            let config = GenConfig {
                max_blocks: 2 + i % 14,
                ..GenConfig::default()
            };
            let g = random_cfg_with(&mut rng, &config);
            let (widths, budget) = [
                ((1, 0, 0.0), 4),
                ((1, 4, 0.0), 16),
                ((8, 32, 0.5), 64),
                ((64, 64, 0.9), 1024),
                ((u64::MAX, 0, 0.0), u64::MAX),
            ][i % 5];
            let (s, c) = check(&g, &mut rng, widths, budget);
            sliced += s;
            checked += c;
        }
        assert!(
            sliced > 400 && checked > 40,
            "only {sliced} slices, {checked} checked"
        );
    }
}
