//! Natural loops and loop-exit edges as defined in Ball & Larus 1994 §5, computed from the back
//! edges of a depth-first search (not from dominators, so the definitions apply unchanged to
//! irreducible graphs).
//!
//! For a back edge `x -> y`:
//!
//! ```text
//! nat-loop(x -> y) = {y} ∪ {w | there is a directed path from w to x that does not include y}
//! ```
//!
//! A vertex is a *loop entry* if it is the target of one or more back edges; `nat-loop(y)` is the
//! union of `nat-loop(x -> y)` over its back edges, and
//!
//! ```text
//! loop-exits(y) = {a -> b | a ∈ nat-loop(y), b ∉ nat-loop(y)}
//! ```
//!
//! Paths and loop exits use structural edges only (`Flow`, `Return`), like the search itself. A
//! `Return` edge leaving a loop is a loop exit: EXIT has no structural successor and so is in no
//! loop. The paper assumes every vertex is reachable from the root; here only vertices
//! reachable from the entry (over structural edges) are put into loops, so dead code never
//! joins a loop or adds loop exits.
//!
//! The paper notes that natural loops of distinct entries are disjoint or nested; that holds for
//! reducible graphs only. Nothing here relies on it: each loop's set is computed on its own by
//! one backward walk from the sources of its back edges, stopping at the entry.

use crate::cfg::Cfg;
use crate::dfs::Dfs;
use crate::ids::{EdgeId, IdVec, NodeId};

/// The natural loops of a graph, one per loop entry.
///
/// Invariants: `entries` is sorted by id; `members[i]` (sorted, the entry included) is
/// `nat-loop(entries[i])` and `exits[i]` (sorted) is `loop-exits(entries[i])`; `is_exit[e]` is
/// true iff `e` is in some `exits[i]`.
#[derive(Clone, Debug)]
pub struct Loops {
    entries: Vec<NodeId>,
    loop_of_entry: IdVec<NodeId, Option<usize>>,
    members: Vec<Vec<NodeId>>,
    exits: Vec<Vec<EdgeId>>,
    is_exit: IdVec<EdgeId, bool>,
}

impl Loops {
    /// Computes the natural loops of `cfg` from the back edges found by `dfs` (which must have
    /// been computed on the same graph).
    pub fn compute(cfg: &Cfg, dfs: &Dfs) -> Loops {
        assert_eq!(
            dfs.back_edges().len(),
            cfg.num_edges(),
            "the DFS was computed on a graph with {} edges, not this one with {}",
            dfs.back_edges().len(),
            cfg.num_edges()
        );
        let mut entries = Vec::new();
        let mut loop_of_entry = IdVec::filled(cfg.num_nodes(), None);
        let mut members = Vec::new();
        let mut exits = Vec::new();
        let mut is_exit = IdVec::filled(cfg.num_edges(), false);

        // `mark[w] == stamp` means "w is in the loop being built"; a fresh stamp per loop
        // avoids clearing the table between loops.
        let mut mark: IdVec<NodeId, usize> = IdVec::filled(cfg.num_nodes(), 0);
        let mut worklist = Vec::new();
        for y in cfg.nodes() {
            let sources: Vec<NodeId> = cfg
                .preds(y)
                .iter()
                .filter(|&&e| dfs.is_back_edge(e))
                .map(|&e| cfg.edge(e).src)
                .collect();
            if sources.is_empty() {
                continue;
            }
            let stamp = entries.len() + 1;
            mark[y] = stamp;
            let mut body = vec![y];
            for x in sources {
                if mark[x] != stamp {
                    mark[x] = stamp;
                    body.push(x);
                    worklist.push(x);
                }
            }
            // Backward walk: every reachable w with a path to some source avoiding y.
            while let Some(w) = worklist.pop() {
                for &e in cfg.preds(w) {
                    let edge = cfg.edge(e);
                    let p = edge.src;
                    if edge.kind.is_structural() && dfs.is_reachable(p) && mark[p] != stamp {
                        mark[p] = stamp;
                        body.push(p);
                        worklist.push(p);
                    }
                }
            }
            body.sort_unstable();
            let mut out: Vec<EdgeId> = Vec::new();
            for &a in &body {
                for &e in cfg.succs(a) {
                    let edge = cfg.edge(e);
                    if edge.kind.is_structural() && mark[edge.dst] != stamp {
                        out.push(e);
                        is_exit[e] = true;
                    }
                }
            }
            out.sort_unstable();
            loop_of_entry[y] = Some(entries.len());
            entries.push(y);
            members.push(body);
            exits.push(out);
        }
        Loops {
            entries,
            loop_of_entry,
            members,
            exits,
            is_exit,
        }
    }

    /// The loop entries (targets of at least one back edge), in id order.
    pub fn entries(&self) -> &[NodeId] {
        &self.entries
    }

    /// True if `n` is the target of at least one back edge.
    pub fn is_loop_entry(&self, n: NodeId) -> bool {
        self.loop_of_entry[n].is_some()
    }

    /// `nat-loop(y)` in id order (`y` included), or an empty slice if `y` is not a loop entry.
    pub fn nat_loop(&self, y: NodeId) -> &[NodeId] {
        match self.loop_of_entry[y] {
            Some(i) => &self.members[i],
            None => &[],
        }
    }

    /// True if `w` is in `nat-loop(y)` (false if `y` is not a loop entry).
    pub fn contains(&self, y: NodeId, w: NodeId) -> bool {
        self.nat_loop(y).binary_search(&w).is_ok()
    }

    /// `loop-exits(y)` in id order, or an empty slice if `y` is not a loop entry.
    pub fn loop_exits(&self, y: NodeId) -> &[EdgeId] {
        match self.loop_of_entry[y] {
            Some(i) => &self.exits[i],
            None => &[],
        }
    }

    /// True if `e` is in `loop-exits(y)` for some loop entry `y`.
    pub fn is_loop_exit(&self, e: EdgeId) -> bool {
        self.is_exit[e]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::testing::{cfg, nested_loops};

    fn idx<T: Copy>(items: &[T], f: impl Fn(T) -> usize) -> Vec<usize> {
        items.iter().map(|&t| f(t)).collect()
    }

    #[test]
    fn nested_loops_with_break_and_return() {
        let g = nested_loops();
        let dfs = Dfs::compute(&g);
        let l = Loops::compute(&g, &dfs);
        assert_eq!(idx(l.entries(), NodeId::index), vec![1, 2]);
        assert_eq!(
            idx(l.nat_loop(NodeId::new(1)), NodeId::index),
            vec![1, 2, 3, 4]
        );
        assert_eq!(idx(l.nat_loop(NodeId::new(2)), NodeId::index), vec![2, 3]);
        assert_eq!(idx(l.loop_exits(NodeId::new(1)), EdgeId::index), vec![3, 7]);
        assert_eq!(idx(l.loop_exits(NodeId::new(2)), EdgeId::index), vec![3, 5]);
        assert!(l.is_loop_exit(EdgeId::new(5)));
        assert!(!l.is_loop_exit(EdgeId::new(6)));
        assert!(!l.is_loop_entry(NodeId::new(3)));
        assert!(l.loop_exits(NodeId::new(0)).is_empty());
    }

    #[test]
    fn irreducible_loop_pulls_in_the_second_entry() {
        //   n0 -> n1 <-> n2 , n0 -> n2 : two ways into the cycle {n1, n2}.
        //   DFS: n0, n1, n2; n2 -> n1 is the back edge; nat-loop contains n0 (path n0 -> n2).
        let g = cfg(
            3,
            &[
                (0, 1, Flow),   // e1
                (0, 2, Flow),   // e2
                (1, 2, Flow),   // e3
                (2, 1, Flow),   // e4 (back)
                (2, 3, Return), // e5
            ],
        );
        let dfs = Dfs::compute(&g);
        let l = Loops::compute(&g, &dfs);
        assert_eq!(idx(l.entries(), NodeId::index), vec![1]);
        assert_eq!(
            idx(l.nat_loop(NodeId::new(1)), NodeId::index),
            vec![0, 1, 2]
        );
        assert_eq!(idx(l.loop_exits(NodeId::new(1)), EdgeId::index), vec![5]);
    }

    #[test]
    fn self_loop_and_unreachable_predecessor() {
        // n0 -> n0 (self loop), n0 -> EXIT; n1 (dead) -> n0 does not join the loop.
        let g = cfg(2, &[(0, 0, Flow), (0, 2, Return), (1, 0, Flow)]);
        let dfs = Dfs::compute(&g);
        let l = Loops::compute(&g, &dfs);
        assert_eq!(idx(l.nat_loop(NodeId::new(0)), NodeId::index), vec![0]);
        assert_eq!(idx(l.loop_exits(NodeId::new(0)), EdgeId::index), vec![2]);
        assert!(l.contains(NodeId::new(0), NodeId::new(0)));
        assert!(!l.contains(NodeId::new(0), NodeId::new(1)));
    }
}
