//! Edge and block counts from a path profile (Ball & Larus 1996 §1: a path profile determines the
//! edge and block profiles, not conversely).
//!
//! Each path number is [regenerated](NumberedDag::regenerate) and its count is added to the
//! control-flow edges its DAG edges stand for:
//!
//! - `Start` -> `e0` (the number of calls is the count of paths starting at the entry);
//! - `Cfg(e)` -> `e`; `EarlyExit(e)` -> `e`; `ReentryStart(e)` -> `e`;
//! - `BackEnd(b)` -> `b` and `CutEnd(c)` -> `c`: a back or cut edge is counted once, by the
//!   paths that end by taking it. The paths that start after it (`BackStart(b)`, `CutStart(c)`)
//!   must have the same total count, since each execution of the edge ends one path and
//!   starts the next; a difference is an error ([`PathError::Unpaired`]).
//!
//! Dead edges get 0. Every path enters and leaves each block it visits, so once every back and
//! cut edge is paired the flow law holds at every vertex; it is checked anyway (an exact
//! profiler reports an inconsistent profile, it never clamps). Block counts follow by
//! [`block_counts`].

use super::dag::DagEdgeKind;
use super::number::NumberedDag;
use super::PathError;
use crate::cfg::Cfg;
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::propagate::{block_counts, check_flow};

/// Edge and block counts derived from path counts.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DerivedCounts {
    /// The count of every control-flow edge.
    pub edges: IdVec<EdgeId, u64>,
    /// The count of every vertex (EXIT included), as [`block_counts`] defines it.
    pub blocks: IdVec<NodeId, u64>,
}

/// The count of every edge of `cfg` from `(path number, count)` pairs (repeated numbers add up).
pub fn derive_edge_counts(
    cfg: &Cfg,
    paths: &NumberedDag,
    path_counts: impl IntoIterator<Item = (u128, u64)>,
) -> Result<IdVec<EdgeId, u64>, PathError> {
    let dag = paths.dag();
    dag.check_graph(cfg)?;
    let mut count = IdVec::filled(cfg.num_edges(), 0u64);
    let mut started = IdVec::filled(cfg.num_edges(), 0u64);
    for (number, c) in path_counts {
        let path = paths.regenerate(number)?;
        for &d in &path.edges {
            let (table, e) = match dag.edge(d).kind {
                DagEdgeKind::Start => (&mut count, cfg.entry_edge()),
                DagEdgeKind::Cfg(e)
                | DagEdgeKind::EarlyExit(e)
                | DagEdgeKind::ReentryStart(e)
                | DagEdgeKind::BackEnd(e)
                | DagEdgeKind::CutEnd(e) => (&mut count, e),
                DagEdgeKind::BackStart(e) | DagEdgeKind::CutStart(e) => (&mut started, e),
            };
            table[e] = table[e]
                .checked_add(c)
                .ok_or(PathError::CountOverflow { edge: e })?;
        }
    }
    for e in dag.back_edges().chain(dag.cuts()) {
        if count[e] != started[e] {
            return Err(PathError::Unpaired {
                edge: e,
                ended: count[e],
                started: started[e],
            });
        }
    }
    check_flow(cfg, &count)?;
    Ok(count)
}

/// Edge counts ([`derive_edge_counts`]) and block counts of `cfg` from path counts.
pub fn derive_counts(
    cfg: &Cfg,
    paths: &NumberedDag,
    path_counts: impl IntoIterator<Item = (u128, u64)>,
) -> Result<DerivedCounts, PathError> {
    let edges = derive_edge_counts(cfg, paths, path_counts)?;
    let blocks = block_counts(cfg, &edges)?;
    Ok(DerivedCounts { edges, blocks })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::number::number_paths;
    use crate::paths::number::tests::abcdef;

    #[test]
    fn paper_example_profile() {
        // Ball & Larus 1996's Figure 1 idea: path counts determine the edge counts. ACDF x3, ABCDEF
        // x2, ABDEF x1 (numbers 0, 3, 5).
        let g = abcdef();
        let p = number_paths(&g).unwrap();
        let c = derive_counts(&g, &p, [(0, 3), (3, 2), (5, 1)]).unwrap();
        //                       e0 AC AB BC BD CD DF DE EF F>EXIT
        assert_eq!(c.edges.values(), &[6, 3, 3, 2, 1, 5, 3, 3, 3, 6]);
        //                         A  B  C  D  E  F  EXIT
        assert_eq!(c.blocks.values(), &[6, 3, 5, 6, 3, 6, 6]);
    }

    #[test]
    fn inconsistent_profiles_are_errors() {
        let g = crate::testing::cfg(
            2,
            &[
                (0, 1, crate::cfg::EdgeKind::Flow),
                (1, 1, crate::cfg::EdgeKind::Flow),
                (1, 2, crate::cfg::EdgeKind::Return),
            ],
        );
        let p = number_paths(&g).unwrap();
        // Paths: 0 entry..back, 1 entry..return, 2 back..back, 3 back..return.
        let e2 = EdgeId::new(2);
        assert_eq!(
            derive_edge_counts(&g, &p, [(0, 1)]),
            Err(PathError::Unpaired {
                edge: e2,
                ended: 1,
                started: 0
            })
        );
        assert_eq!(
            derive_edge_counts(&g, &p, [(0, 1), (3, 1)]).map(|c| c.into_vec()),
            Ok(vec![1, 1, 1, 1])
        );
        assert_eq!(
            derive_edge_counts(&g, &p, [(9, 1)]),
            Err(PathError::NumberOutOfRange {
                number: 9,
                paths: 4
            })
        );
        // Two calls, only one of which returns.
        assert_eq!(
            derive_edge_counts(&g, &p, [(0, 2), (3, 1), (2, 1)]),
            Err(PathError::Unpaired {
                edge: e2,
                ended: 3,
                started: 2
            })
        );
        let other = abcdef();
        assert_eq!(
            derive_edge_counts(&other, &p, []),
            Err(PathError::WrongGraph)
        );
    }
}
