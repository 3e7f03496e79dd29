//! Functions with too many paths (Ball & Larus 1996 §5, "routines with many paths": when the number
//! of paths reachable from a vertex exceeds a threshold, pp removes the vertex's outgoing edges and
//! treats them like loop back edges, ending paths there).
//!
//! A *cut* `Flow` edge `x -> y` becomes the dummy edges `x -> END` and `START -> y`, exactly like
//! a back edge ([`PathDag::with_cuts`]). [`number_paths_limited`] chooses the cuts so that
//! `NumPaths(START) <= limit`:
//!
//! - **No cut** if the plain numbering fits.
//! - **One pass for a threshold `θ`** (the paper's rule, refined): visit the live blocks in
//!   reverse topological order computing `NumPaths` with the cuts made so far. At a block `v`
//!   whose count exceeds `θ`, cut its outgoing `Flow` edges in decreasing order of
//!   `NumPaths(target)` (ties by edge id) until the count is at most `θ`; a cut turns the edge's
//!   contribution `NumPaths(target)` into 1 (its `x -> END` edge), so only edges with
//!   `NumPaths(target) >= 2` are worth cutting and no others are cut. Afterwards every path
//!   *head* (the targets of START's edges, cut targets included) starts at most about `θ`
//!   paths, and `NumPaths(START)` is the sum over the heads. Counts saturate in the pass.
//! - **Choosing `θ`**: the total is not monotone in `θ` (a smaller threshold cuts more edges and
//!   creates more heads), so the pass runs for `θ = 0, 1, 2, 4, ...` up to `limit` and for
//!   `limit` itself, then the largest fitting `θ` found is refined by bisection towards the next
//!   candidate. The result is the fitting pass with the largest threshold found: the fewest,
//!   longest paths this search sees. At most about 256 passes of `O(E log E)` each.
//!
//! Guarantee: with `θ = 0` every `Flow` edge into a vertex with at least two paths is cut, and
//! then every vertex has at most as many paths as if *every* `Flow` edge were cut (at most its
//! out-degree) and START has a subset of those heads. So the result fits whenever cutting every
//! `Flow` edge would; otherwise [`PathError::LimitUnreachable`] reports the fewest paths seen.
//! The search is a heuristic: it does not find the minimum number of paths over all cut sets.

use super::dag::{DagEdgeKind, PathDag};
use super::number::NumberedDag;
use super::PathError;
use crate::cfg::Cfg;
use crate::ids::{EdgeId, IdVec, NodeId};

/// A path count in a pass: `None` is more than `u128::MAX`.
type Count = Option<u128>;

fn add(a: Count, b: Count) -> Count {
    a?.checked_add(b?)
}

fn fits(c: Count, limit: u128) -> bool {
    c.is_some_and(|c| c <= limit)
}

/// The cuts of one pass and the resulting `NumPaths(START)`.
struct Pass {
    cuts: Vec<EdgeId>,
    total: Count,
}

/// One pass of the threshold rule (module doc) over the DAG without cuts.
fn pass(dag: &PathDag, theta: u128) -> Pass {
    let (start, end) = (dag.start(), dag.end());
    let mut n: IdVec<NodeId, Count> = IdVec::filled(dag.num_nodes(), Some(0));
    n[end] = Some(1);
    let mut cuts = Vec::new();
    let mut heads = Vec::new();
    for &v in dag.topo_order().iter().rev() {
        if v == start || v == end {
            continue;
        }
        // Edges to END count 1 and cannot be cut; Flow edges are candidates.
        let mut fixed: Count = Some(0);
        let mut cands = Vec::new();
        for &d in dag.succs(v) {
            let edge = dag.edge(d);
            match edge.kind {
                DagEdgeKind::Cfg(e) if edge.dst != end => cands.push((n[edge.dst], e, edge.dst)),
                _ => fixed = add(fixed, n[edge.dst]),
            }
        }
        // Largest first (`None` is the largest), ties by edge id.
        cands.sort_by(|(a, ea, _), (b, eb, _)| match (a, b) {
            (None, None) => ea.cmp(eb),
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(a), Some(b)) => b.cmp(a).then(ea.cmp(eb)),
        });
        let useful = cands.iter().take_while(|(c, _, _)| !fits(*c, 1)).count();
        // suffix[j]: the sum of the counts of cands[j..].
        let mut suffix = vec![Some(0); cands.len() + 1];
        for j in (0..cands.len()).rev() {
            suffix[j] = add(suffix[j + 1], cands[j].0);
        }
        // After cutting cands[..j]: fixed + j + suffix[j].
        let with = |j: usize| add(add(fixed, Some(j as u128)), suffix[j]);
        let mut j = 0;
        while j < useful && !fits(with(j), theta) {
            j += 1;
        }
        for &(_, e, target) in &cands[..j] {
            cuts.push(e);
            heads.push(target);
        }
        n[v] = with(j);
    }
    let mut total: Count = Some(0);
    for &d in dag.succs(start) {
        total = add(total, n[dag.edge(d).dst]);
    }
    for &t in &heads {
        total = add(total, n[t]);
    }
    Pass { cuts, total }
}

/// Most paths `path` mode lets a function keep before extra cuts are made (path numbers must
/// fit a signed 64-bit register with room for increments). Readers that number paths without
/// a path build's metadata (`tally trace --paths`) cut with the same limit, so that their
/// path numbers are `path` mode's.
pub const MAX_PATHS: u128 = 1 << 62;

/// Most paths `path` mode counts in the module's counter array; more go to a hash table.
pub const ARRAY_PATHS: u128 = 1024;

/// The path DAG of `cfg` and its numbering, with `Flow` edges cut (module doc) so that
/// `NumPaths(START) <= limit`. The cut edges are [`PathDag::cuts`] of the result.
pub fn number_paths_limited(cfg: &Cfg, limit: u128) -> Result<NumberedDag, PathError> {
    let base = PathDag::new(cfg);
    let mut fewest: Count = None;
    if let Ok(plain) = NumberedDag::new(base.clone()) {
        if plain.total() <= limit {
            return Ok(plain);
        }
        fewest = Some(plain.total());
    }
    let mut thetas = vec![0u128];
    let mut t = 1u128;
    while t < limit {
        thetas.push(t);
        t = t.saturating_mul(2);
    }
    if limit > 0 {
        thetas.push(limit);
    }
    let mut best: Option<(usize, Pass)> = None;
    for (i, &theta) in thetas.iter().enumerate() {
        let p = pass(&base, theta);
        if p.total.is_some() && (fewest.is_none() || p.total < fewest) {
            fewest = p.total;
        }
        if fits(p.total, limit) {
            best = Some((i, p));
        }
    }
    let Some((i, mut chosen)) = best else {
        return Err(PathError::LimitUnreachable {
            limit,
            fewest: fewest.unwrap_or(u128::MAX),
        });
    };
    // Bisect between the chosen threshold (fits) and the next candidate (does not).
    if let Some(&next) = thetas.get(i + 1) {
        let (mut lo, mut hi) = (thetas[i], next);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let p = pass(&base, mid);
            if fits(p.total, limit) {
                lo = mid;
                chosen = p;
            } else {
                hi = mid;
            }
        }
    }
    NumberedDag::new(PathDag::with_cuts(cfg, &chosen.cuts)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::{self, *};
    use crate::testing::cfg;

    /// `k` if-then-else diamonds in sequence: head `3i`, arms `3i+1`, `3i+2`, join `3i+3`;
    /// the last join returns. `2^k` paths.
    ///
    /// ```text
    ///   n0 ─▶ n1 ─▶ n3 ─▶ n4 ─▶ n6 ...
    ///    └──▶ n2 ──┘└──▶ n5 ──┘
    /// ```
    fn diamonds(k: usize) -> Cfg {
        let mut edges: Vec<(usize, usize, EdgeKind)> = Vec::new();
        for i in 0..k {
            let h = 3 * i;
            edges.extend([
                (h, h + 1, Flow),
                (h, h + 2, Flow),
                (h + 1, h + 3, Flow),
                (h + 2, h + 3, Flow),
            ]);
        }
        let n = 3 * k + 1;
        edges.push((n - 1, n, Return));
        cfg(n, &edges)
    }

    fn cut_pairs(p: &NumberedDag, g: &Cfg) -> Vec<(usize, usize)> {
        p.dag()
            .cuts()
            .map(|e| (g.edge(e).src.index(), g.edge(e).dst.index()))
            .collect()
    }

    #[test]
    fn no_cut_when_the_count_fits() {
        let g = diamonds(4);
        let p = number_paths_limited(&g, 16).unwrap();
        assert_eq!(p.total(), 16);
        assert!(cut_pairs(&p, &g).is_empty());
    }

    #[test]
    fn four_diamonds_under_fourteen() {
        // Candidates θ = 0, 1, 2, 4, 8, 14 give totals 14, 14, 14, 12, 18, 17: θ = 4 is the
        // largest that fits; bisection between 4 and 8 finds 5 (16) and 6 (15) too large.
        // With θ = 4: n6 has 4 paths (kept); n3 has 8, so both its arms are cut (one cut
        // leaves 1 + 4 = 5 > 4); n0 then has 2 + 2 = 4. Total: 4 from n0, 4 from each of
        // n4 and n5.
        let g = diamonds(4);
        for limit in [12, 13, 14] {
            let p = number_paths_limited(&g, limit).unwrap();
            assert_eq!(cut_pairs(&p, &g), [(3, 4), (3, 5)], "limit {limit}");
            assert_eq!(p.total(), 12);
        }
        assert_eq!(
            number_paths_limited(&g, 11).unwrap_err(),
            PathError::LimitUnreachable {
                limit: 11,
                fewest: 12
            }
        );
    }

    #[test]
    fn long_chains_are_split() {
        // 200 diamonds: 2^200 paths, beyond u128.
        let g = diamonds(200);
        assert!(matches!(
            NumberedDag::new(PathDag::new(&g)),
            Err(PathError::Overflow { .. })
        ));
        for limit in [1u128 << 20, 1 << 40, u128::MAX] {
            let p = number_paths_limited(&g, limit).unwrap();
            assert!(p.total() <= limit, "{} > {limit}", p.total());
            assert!(
                p.total() > limit / 8,
                "too many cuts: {} for {limit}",
                p.total()
            );
        }
    }

    #[test]
    fn cutting_can_only_hurt_a_wide_fan() {
        // n0 has 40 parallel edges to n1, which has 2 to n2: 80 paths. Cutting j of the 40
        // edges leaves 80 - j paths from n0 and adds j heads of 2 paths: 80 + j. Nothing
        // below 80 is reachable, and the error says so.
        let mut edges = vec![(0, 1, Flow); 40];
        edges.extend([(1, 2, Flow), (1, 2, Flow), (2, 3, Return)]);
        let g = cfg(3, &edges);
        assert_eq!(number_paths(&g), 80);
        let p = number_paths_limited(&g, 80).unwrap();
        assert!(cut_pairs(&p, &g).is_empty());
        assert_eq!(
            number_paths_limited(&g, 79).unwrap_err(),
            PathError::LimitUnreachable {
                limit: 79,
                fewest: 80
            }
        );
    }

    fn number_paths(g: &Cfg) -> u128 {
        NumberedDag::new(PathDag::new(g)).unwrap().total()
    }
}
