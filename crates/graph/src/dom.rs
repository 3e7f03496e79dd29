//! Dominators over the structural edges from the entry (Cooper, Harvey & Kennedy, *A Simple,
//! Fast Dominance Algorithm*, 2001), and the placement of a function's frame-record push: the
//! latest single point that every use of the record follows (shrink-wrapping, in the spirit of
//! Ball & Larus 1994 §6.3's "place instrumentation where it executes least").

use crate::cfg::Cfg;
use crate::dfs::Dfs;
use crate::ids::{IdVec, NodeId};
use crate::loops::Loops;

/// Immediate dominators of the blocks reachable from the entry.
#[derive(Clone, Debug)]
pub struct Dominators {
    idom: IdVec<NodeId, Option<NodeId>>,
    rpo_index: IdVec<NodeId, usize>,
}

impl Dominators {
    /// Computes the dominator tree of `cfg` (structural edges, from the entry).
    pub fn compute(cfg: &Cfg, dfs: &Dfs) -> Dominators {
        let order = dfs.topo_order();
        let mut rpo_index = IdVec::filled(cfg.num_nodes(), usize::MAX);
        for (i, &n) in order.iter().enumerate() {
            rpo_index[n] = i;
        }
        let entry = cfg.entry();
        let mut idom: IdVec<NodeId, Option<NodeId>> = IdVec::filled(cfg.num_nodes(), None);
        idom[entry] = Some(entry);
        let mut changed = true;
        while changed {
            changed = false;
            for &b in order.iter().skip(1) {
                let mut new: Option<NodeId> = None;
                for &e in cfg.preds(b) {
                    let edge = cfg.edge(e);
                    if !edge.kind.is_structural() {
                        continue;
                    }
                    let p = edge.src;
                    if idom[p].is_none() {
                        continue;
                    }
                    new = Some(match new {
                        None => p,
                        Some(q) => intersect(&idom, &rpo_index, p, q),
                    });
                }
                if new.is_some() && idom[b] != new {
                    idom[b] = new;
                    changed = true;
                }
            }
        }
        Dominators { idom, rpo_index }
    }

    /// The immediate dominator of `n` (the entry's is itself); `None` if unreachable.
    pub fn idom(&self, n: NodeId) -> Option<NodeId> {
        self.idom[n]
    }

    /// True when `a` dominates `b` (both reachable).
    pub fn dominates(&self, a: NodeId, b: NodeId) -> bool {
        if self.idom[b].is_none() || self.idom[a].is_none() {
            return false;
        }
        let mut x = b;
        loop {
            if x == a {
                return true;
            }
            let up = self.idom[x].expect("reachable");
            if up == x {
                return false;
            }
            x = up;
        }
    }

    /// The nearest common dominator of `a` and `b` (both reachable).
    pub fn common(&self, a: NodeId, b: NodeId) -> NodeId {
        intersect(&self.idom, &self.rpo_index, a, b)
    }
}

fn intersect(
    idom: &IdVec<NodeId, Option<NodeId>>,
    rpo: &IdVec<NodeId, usize>,
    mut a: NodeId,
    mut b: NodeId,
) -> NodeId {
    while a != b {
        while rpo[a] > rpo[b] {
            a = idom[a].expect("processed");
        }
        while rpo[b] > rpo[a] {
            b = idom[b].expect("processed");
        }
    }
    a
}

/// Where a function's frame record is pushed, and where it is popped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushPlan {
    /// The block at whose start the record is pushed.
    pub at: NodeId,
    /// The return blocks reachable from `at` (all dominated by it): they pop the record.
    pub pops: Vec<NodeId>,
}

/// Where a function's frame record is pushed: the nearest common dominator `P` of the blocks
/// that use it (`uses`), moved up the dominator tree until it lies on no cycle, provided every
/// return block that control can reach from `P` is dominated by `P` (so that exactly the
/// returns after a push pop). Returns `None` when the push must stay at the entry (some use is
/// not reachable from the entry, or a return is reachable both with and without a push).
pub fn push_plan(cfg: &Cfg, uses: &[NodeId]) -> Option<PushPlan> {
    let at = push_point(cfg, uses)?;
    let mut seen = IdVec::filled(cfg.num_nodes(), false);
    let mut stack = vec![at];
    seen[at] = true;
    let mut pops = Vec::new();
    while let Some(v) = stack.pop() {
        for &e in cfg.succs(v) {
            let edge = cfg.edge(e);
            if edge.kind == crate::cfg::EdgeKind::Return && !pops.contains(&v) {
                pops.push(v);
            }
            if edge.kind.is_structural() && !cfg.is_exit(edge.dst) && !seen[edge.dst] {
                seen[edge.dst] = true;
                stack.push(edge.dst);
            }
        }
    }
    pops.sort();
    Some(PushPlan { at, pops })
}

/// The push point of [`push_plan`].
pub fn push_point(cfg: &Cfg, uses: &[NodeId]) -> Option<NodeId> {
    let dfs = Dfs::compute(cfg);
    if uses.is_empty() || uses.iter().any(|&u| !dfs.is_reachable(u)) {
        return None;
    }
    let doms = Dominators::compute(cfg, &dfs);
    let loops = Loops::compute(cfg, &dfs);
    let mut p = uses[0];
    for &u in &uses[1..] {
        p = doms.common(p, u);
    }
    // Not on a cycle: the push must run at most once per activation.
    let in_loop = |n: NodeId| loops.entries().iter().any(|&y| loops.contains(y, n));
    while in_loop(p) {
        let up = doms.idom(p)?;
        if up == p {
            return None;
        }
        p = up;
    }
    // Returns reachable from P must be dominated by P.
    let mut seen = IdVec::filled(cfg.num_nodes(), false);
    let mut stack = vec![p];
    seen[p] = true;
    while let Some(v) = stack.pop() {
        for &e in cfg.succs(v) {
            let edge = cfg.edge(e);
            if !edge.kind.is_structural() || cfg.is_exit(edge.dst) {
                continue;
            }
            if !seen[edge.dst] {
                seen[edge.dst] = true;
                stack.push(edge.dst);
            }
        }
    }
    for n in cfg.blocks() {
        let returns = cfg
            .succs(n)
            .iter()
            .any(|&e| cfg.edge(e).kind == crate::cfg::EdgeKind::Return);
        if returns && seen[n] && !doms.dominates(p, n) {
            return None;
        }
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::testing::{cfg, diamond};

    fn n(i: usize) -> NodeId {
        NodeId::new(i)
    }

    /// ```text
    ///   n0 --> n1 (return)          early out
    ///    \\
    ///     n2 --> n3 (call) --> n4 (return)
    /// ```
    #[test]
    fn push_moves_past_an_early_return() {
        let g = cfg(
            5,
            &[
                (0, 1, Flow),
                (0, 2, Flow),
                (1, 5, Return),
                (2, 3, Flow),
                (3, 4, Flow),
                (4, 5, Return),
            ],
        );
        assert_eq!(push_point(&g, &[n(3)]), Some(n(3)));
        assert_eq!(push_point(&g, &[n(2), n(3)]), Some(n(2)));
        assert_eq!(push_point(&g, &[n(3), n(1)]), Some(n(0)));
    }

    /// A use inside a loop pushes before the loop; a return reachable around the push keeps the
    /// push at the entry.
    #[test]
    fn loops_and_merging_returns() {
        // n0 -> n1 (loop head) -> n2 (call) -> n1 ; n1 -> n3 (return)
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
        assert_eq!(push_point(&g, &[n(2)]), Some(n(0)));
        // n0 -> n1 (call) -> n3 ; n0 -> n2 -> n3 (return): n3 is reached with and without a push.
        let g = diamond();
        assert_eq!(push_point(&g, &[n(1)]), None);
    }

    /// On random graphs: the push point dominates every use, lies on no cycle, and every return
    /// reachable from it is dominated by it; a dominator is an ancestor on every path.
    #[test]
    fn push_points_are_sound_on_random_graphs() {
        use crate::testing::{random_cfg_with, GenConfig, Rng};
        let mut found = 0;
        for seed in 0..400u64 {
            let mut rng = Rng::new(seed);
            let g = random_cfg_with(&mut rng, &GenConfig::default());
            let dfs = Dfs::compute(&g);
            let uses: Vec<NodeId> = g
                .blocks()
                .filter(|&b| dfs.is_reachable(b) && rng.percent(30))
                .collect();
            let Some(p) = push_point(&g, &uses) else {
                continue;
            };
            found += 1;
            let d = Dominators::compute(&g, &dfs);
            let loops = Loops::compute(&g, &dfs);
            for &u in &uses {
                assert!(d.dominates(p, u), "seed {seed}: {p} does not dominate {u}");
            }
            assert!(
                loops.entries().iter().all(|&y| !loops.contains(y, p)),
                "seed {seed}"
            );
        }
        assert!(found > 50, "too few graphs with a push point: {found}");
    }

    #[test]
    fn dominators_of_a_diamond() {
        let g = diamond();
        let d = Dominators::compute(&g, &Dfs::compute(&g));
        assert_eq!(d.idom(n(3)), Some(n(0)));
        assert!(d.dominates(n(0), n(3)));
        assert!(!d.dominates(n(1), n(3)));
        assert_eq!(d.common(n(1), n(2)), n(0));
    }
}
