//! Path regeneration: the path with a given number (Ball & Larus 1996 §3.5 "Regenerating a path";
//! Melski & Reps 1998 Algorithm 5.2 generalizes it).
//!
//! Start at START with `R` = the number. At each vertex take the outgoing edge `e` with the
//! largest `Val(e) <= R` among those that lie on some path (`NumPaths(tgt(e)) > 0`); that is the
//! edge whose reserved range `Val(e) .. Val(e) + NumPaths(tgt(e))` holds `R`. Subtract `Val(e)`
//! and go on until END. The DAG edges at the ends tell how the path begins (a call, a back edge,
//! a re-entry, a cut edge) and how it ends (a return, an early exit, a back edge, a cut edge).

use super::dag::{DagEdgeId, DagEdgeKind};
use super::number::NumberedDag;
use super::PathError;
use crate::ids::{EdgeId, NodeId};
use std::fmt;

/// How a path begins.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum PathStart {
    /// At `n0`, when the function is called (`e0`).
    Entry,
    /// At the target of a `Reentry` edge, when `longjmp` came back.
    Reentry(EdgeId),
    /// At the target of a back edge, just taken.
    Back(EdgeId),
    /// At the target of a cut edge, just taken.
    Cut(EdgeId),
}

/// How a path ends.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum PathEnd {
    /// By the `Return` edge.
    Return(EdgeId),
    /// By the `EarlyExit` edge: the frame was abandoned.
    EarlyExit(EdgeId),
    /// By taking the back edge.
    Back(EdgeId),
    /// By taking the cut edge.
    Cut(EdgeId),
}

/// One path of a [`NumberedDag`], spelled out.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RegeneratedPath {
    /// Its number.
    pub number: u128,
    /// Its DAG edges from START to END.
    pub edges: Vec<DagEdgeId>,
    /// The blocks it runs through, in order.
    pub blocks: Vec<NodeId>,
    /// How it begins.
    pub start: PathStart,
    /// How it ends.
    pub end: PathEnd,
}

impl fmt::Display for RegeneratedPath {
    /// `"3: back e7 | n1 n4 n3 | return e6"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.number)?;
        match self.start {
            PathStart::Entry => write!(f, "entry")?,
            PathStart::Reentry(e) => write!(f, "reentry {e}")?,
            PathStart::Back(e) => write!(f, "back {e}")?,
            PathStart::Cut(e) => write!(f, "cut {e}")?,
        }
        write!(f, " |")?;
        for b in &self.blocks {
            write!(f, " {b}")?;
        }
        write!(f, " | ")?;
        match self.end {
            PathEnd::Return(e) => write!(f, "return {e}"),
            PathEnd::EarlyExit(e) => write!(f, "early exit {e}"),
            PathEnd::Back(e) => write!(f, "back {e}"),
            PathEnd::Cut(e) => write!(f, "cut {e}"),
        }
    }
}

impl NumberedDag {
    /// The path numbered `number` (module doc). Errors if `number >= NumPaths(START)`.
    pub fn regenerate(&self, number: u128) -> Result<RegeneratedPath, PathError> {
        let dag = self.dag();
        if number >= self.total() {
            return Err(PathError::NumberOutOfRange {
                number,
                paths: self.total(),
            });
        }
        let mut v = dag.start();
        let mut remaining = number;
        let mut edges = Vec::new();
        let mut blocks = Vec::new();
        while v != dag.end() {
            let next = dag.succs(v).iter().copied().find(|&d| {
                let val = self.val(d);
                val <= remaining && remaining - val < self.num_paths(dag.edge(d).dst)
            });
            let Some(d) = next else {
                return Err(PathError::NoEdgeFor { node: v, remaining });
            };
            remaining -= self.val(d);
            edges.push(d);
            v = dag.edge(d).dst;
            if dag.is_block(v) {
                blocks.push(v);
            }
        }
        let start = match edges.first().map(|&d| dag.edge(d).kind) {
            Some(DagEdgeKind::Start) => PathStart::Entry,
            Some(DagEdgeKind::ReentryStart(e)) => PathStart::Reentry(e),
            Some(DagEdgeKind::BackStart(e)) => PathStart::Back(e),
            Some(DagEdgeKind::CutStart(e)) => PathStart::Cut(e),
            _ => return Err(PathError::NotAPath { at: 0 }),
        };
        let last = edges.len().saturating_sub(1);
        let end = match edges.last().map(|&d| dag.edge(d).kind) {
            Some(DagEdgeKind::Cfg(e)) => PathEnd::Return(e),
            Some(DagEdgeKind::EarlyExit(e)) => PathEnd::EarlyExit(e),
            Some(DagEdgeKind::BackEnd(e)) => PathEnd::Back(e),
            Some(DagEdgeKind::CutEnd(e)) => PathEnd::Cut(e),
            _ => return Err(PathError::NotAPath { at: last }),
        };
        Ok(RegeneratedPath {
            number,
            edges,
            blocks,
            start,
            end,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::paths::number::number_paths;
    use crate::paths::number::tests::abcdef;
    use crate::testing::cfg;

    fn all(p: &NumberedDag) -> Vec<String> {
        (0..p.total())
            .map(|n| match p.regenerate(n) {
                Ok(path) => path.to_string(),
                Err(err) => panic!("{n}: {err}"),
            })
            .collect()
    }

    #[test]
    fn paper_example_regeneration() {
        // The paper regenerates path 4 from A: Val(A->B) = 2 <= 4, R = 2; at B, Val(B->D) =
        // 2 <= 2, R = 0; then D->F, F->EXIT: ABDF.
        let p = number_paths(&abcdef()).unwrap();
        assert_eq!(
            all(&p),
            [
                "0: entry | n0 n2 n3 n5 | return e9",
                "1: entry | n0 n2 n3 n4 n5 | return e9",
                "2: entry | n0 n1 n2 n3 n5 | return e9",
                "3: entry | n0 n1 n2 n3 n4 n5 | return e9",
                "4: entry | n0 n1 n3 n5 | return e9",
                "5: entry | n0 n1 n3 n4 n5 | return e9",
            ]
        );
        assert_eq!(
            p.regenerate(6),
            Err(PathError::NumberOutOfRange {
                number: 6,
                paths: 6
            })
        );
    }

    #[test]
    fn loop_paths_start_and_end_at_the_back_edge() {
        // The paper's §4 loop: A -> B, B -> C | D, C | D -> E, E -> B (back), E -> F -> EXIT.
        //
        //     A ─▶ B ─▶ C ─▶ E ─▶ F ─▶ EXIT
        //          ▲└─▶ D ──┘│
        //          └─────────┘
        let g = cfg(
            6,
            &[
                (0, 1, Flow),   // e1 A->B
                (1, 2, Flow),   // e2 B->C
                (1, 3, Flow),   // e3 B->D
                (2, 4, Flow),   // e4 C->E
                (3, 4, Flow),   // e5 D->E
                (4, 1, Flow),   // e6 E->B back
                (4, 5, Flow),   // e7 E->F
                (5, 6, Return), // e8
            ],
        );
        let p = number_paths(&g).unwrap();
        assert_eq!(
            all(&p),
            [
                "0: entry | n0 n1 n2 n4 | back e6",
                "1: entry | n0 n1 n2 n4 n5 | return e8",
                "2: entry | n0 n1 n3 n4 | back e6",
                "3: entry | n0 n1 n3 n4 n5 | return e8",
                "4: back e6 | n1 n2 n4 | back e6",
                "5: back e6 | n1 n2 n4 n5 | return e8",
                "6: back e6 | n1 n3 n4 | back e6",
                "7: back e6 | n1 n3 n4 n5 | return e8",
            ]
        );
    }

    #[test]
    fn early_exits_reentries_and_self_loops() {
        // n0 -> n1; n1 self loop; n1 early exit; re-entry into n1; n1 returns.
        let g = cfg(
            2,
            &[
                (0, 1, Flow),
                (1, 1, Flow),
                (1, 2, EarlyExit),
                (2, 1, Reentry),
                (1, 2, Return),
            ],
        );
        let p = number_paths(&g).unwrap();
        assert_eq!(
            all(&p),
            [
                "0: entry | n0 n1 | back e2",
                "1: entry | n0 n1 | early exit e3",
                "2: entry | n0 n1 | return e5",
                "3: back e2 | n1 | back e2",
                "4: back e2 | n1 | early exit e3",
                "5: back e2 | n1 | return e5",
                "6: reentry e4 | n1 | back e2",
                "7: reentry e4 | n1 | early exit e3",
                "8: reentry e4 | n1 | return e5",
            ]
        );
    }
}
