//! Edge counts from block counts, for the `blocks-naive` mode (Ball & Larus 1994 §3: an edge
//! profile cannot always be deduced from a vertex profile, so only the edges the flow equations
//! determine are recovered). Equations with exactly one unknown are solved repeatedly, in the
//! style of the leaf-by-leaf derivation of §3.2, until none is left.

use super::{to_count, FlowError, Side};
use crate::cfg::Cfg;
use crate::ids::{EdgeId, IdVec, NodeId};

/// One flow equation `Σ coef(e) * x(e) = constant` of [`solve_from_blocks`].
struct Equation {
    /// The vertex the equation belongs to.
    node: NodeId,
    /// `Some` for a block equation, `None` for EXIT's `in = out`.
    side: Option<Side>,
    /// The measured block count (0 for EXIT).
    count: u64,
    /// `count` minus the known terms.
    remaining: i128,
    /// Number of edges with unknown count.
    unknowns: usize,
    /// Set once the fully known equation has been checked.
    checked: bool,
}

impl Equation {
    fn new(node: NodeId, side: Option<Side>, count: u64, unknowns: usize) -> Self {
        Equation {
            node,
            side,
            count,
            remaining: i128::from(count),
            unknowns,
            checked: false,
        }
    }

    /// The edges of the equation: (coefficient +1, coefficient -1).
    fn edges<'a>(&self, cfg: &'a Cfg) -> (&'a [EdgeId], &'a [EdgeId]) {
        match self.side {
            Some(Side::Incoming) => (cfg.preds(self.node), &[]),
            Some(Side::Outgoing) => (cfg.succs(self.node), &[]),
            None => (cfg.preds(self.node), cfg.succs(self.node)),
        }
    }
}

/// Determines the edge counts of the `blocks-naive` mode. `block_counts[v]` is the measured
/// entry count of each block `v` (EXIT has none, so `block_counts` has one entry per block).
/// The equations are, for each block `v`, `Σ in(v) = count(v)` and `Σ out(v) = count(v)` (the
/// latter including `v`'s early-exit edge), and at EXIT `Σ in = Σ out`. Equations with exactly
/// one unknown are solved until none is left; edges that no chain of such steps determines stay
/// `None`. Errors on a negative or oversized solution and on a fully known equation that does
/// not balance.
pub fn solve_from_blocks(
    cfg: &Cfg,
    block_counts: &IdVec<NodeId, u64>,
) -> Result<IdVec<EdgeId, Option<u64>>, FlowError> {
    if block_counts.len() != cfg.num_blocks() {
        return Err(FlowError::BlockCountMismatch {
            expected: cfg.num_blocks(),
            found: block_counts.len(),
        });
    }
    // Equation 2v is the incoming equation of block v, 2v+1 its outgoing one; the last is EXIT's.
    let exit = cfg.exit();
    let exit_eq = 2 * cfg.num_blocks();
    let mut eqs: Vec<Equation> = Vec::with_capacity(exit_eq + 1);
    for v in cfg.blocks() {
        let count = block_counts[v];
        eqs.push(Equation::new(
            v,
            Some(Side::Incoming),
            count,
            cfg.preds(v).len(),
        ));
        eqs.push(Equation::new(
            v,
            Some(Side::Outgoing),
            count,
            cfg.succs(v).len(),
        ));
    }
    let exit_unknowns = cfg.preds(exit).len() + cfg.succs(exit).len();
    eqs.push(Equation::new(exit, None, 0, exit_unknowns));
    // The two equations an edge occurs in, with its coefficient in each.
    let terms = |e: EdgeId| -> [(usize, i128); 2] {
        let edge = cfg.edge(e);
        let at_src = if cfg.is_exit(edge.src) {
            (exit_eq, -1)
        } else {
            (2 * edge.src.index() + 1, 1)
        };
        let at_dst = if cfg.is_exit(edge.dst) {
            (exit_eq, 1)
        } else {
            (2 * edge.dst.index(), 1)
        };
        [at_src, at_dst]
    };

    let mut value: IdVec<EdgeId, Option<u64>> = IdVec::filled(cfg.num_edges(), None);
    let mut work: Vec<usize> = (0..eqs.len()).rev().collect();
    while let Some(k) = work.pop() {
        let eq = &mut eqs[k];
        if eq.unknowns == 0 && !eq.checked {
            eq.checked = true;
            if eq.remaining != 0 {
                return Err(mismatch(cfg, eq, &value));
            }
            continue;
        }
        if eq.unknowns != 1 {
            continue;
        }
        let (plus, minus) = eq.edges(cfg);
        let unknown = plus
            .iter()
            .map(|&e| (e, 1))
            .chain(minus.iter().map(|&e| (e, -1)))
            .find(|&(e, _)| value[e].is_none());
        let Some((e, coef)) = unknown else {
            continue;
        };
        let x = to_count(eq.remaining * coef, e, eq.node)?;
        value[e] = Some(x);
        for (j, c) in terms(e) {
            eqs[j].remaining -= c * i128::from(x);
            eqs[j].unknowns -= 1;
            if eqs[j].unknowns <= 1 {
                work.push(j);
            }
        }
    }
    Ok(value)
}

/// The error for a fully known equation that does not balance.
fn mismatch(cfg: &Cfg, eq: &Equation, value: &IdVec<EdgeId, Option<u64>>) -> FlowError {
    let sum =
        |edges: &[EdgeId]| -> i128 { edges.iter().map(|&e| value[e].map_or(0, i128::from)).sum() };
    let (inflow, outflow) = (sum(cfg.preds(eq.node)), sum(cfg.succs(eq.node)));
    match eq.side {
        Some(side) => FlowError::BlockMismatch {
            node: eq.node,
            side,
            count: eq.count,
            sum: if side == Side::Incoming {
                inflow
            } else {
                outflow
            },
        },
        None => FlowError::Unbalanced {
            node: eq.node,
            inflow,
            outflow,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::testing::{cfg, diamond};

    #[test]
    fn blocks_determine_what_the_equations_allow() {
        //   EXIT -e0-> n0 ═e1,e2═> n1 -e3-> n2 -e5-> EXIT
        //              n1 -e4-> n3 -e6-> n2 ;  n3 -e7 (early exit)-> EXIT
        //   n0's parallel pair cannot be told apart; everything else follows.
        let g = cfg(
            4,
            &[
                (0, 1, Flow),      // e1
                (0, 1, Flow),      // e2
                (1, 2, Flow),      // e3
                (1, 3, Flow),      // e4
                (2, 4, Return),    // e5
                (3, 2, Flow),      // e6
                (3, 4, EarlyExit), // e7
            ],
        );
        // 10 calls; n1 goes to n2 directly 6 times, to n3 4 times; n3 exits early once.
        let blocks = IdVec::from_vec(vec![10, 10, 9, 4]);
        let solved = solve_from_blocks(&g, &blocks);
        // in(n0): e0 = 10; in(n3): e4 = 4; out(n1): e3 = 10 - 4; in(n2): e6 = 9 - 6;
        // out(n3): e7 = 4 - 3; out(n2): e5 = 9. Only the parallel pair e1, e2 stays open: its
        // two unknowns always share their equations.
        let expected = [
            Some(10),
            None,
            None,
            Some(6),
            Some(4),
            Some(9),
            Some(3),
            Some(1),
        ];
        assert_eq!(solved.as_ref().map(|v| v.values()), Ok(&expected[..]));

        // An impossible early-exit count: n3 entered 4 times, but n2 entered 11 > 6 + 4 times.
        let r = solve_from_blocks(&g, &IdVec::from_vec(vec![10, 10, 11, 4]));
        assert!(
            matches!(r, Err(FlowError::Negative { edge, .. }) if edge == EdgeId::new(7)),
            "{r:?}"
        );

        // Without the early exit the same happens.
        let g2 = cfg(
            4,
            &[
                (0, 1, Flow),
                (0, 1, Flow),
                (1, 2, Flow),
                (1, 3, Flow),
                (2, 4, Return),
                (3, 2, Flow),
            ],
        );
        let solved = solve_from_blocks(&g2, &IdVec::from_vec(vec![10, 10, 10, 4]));
        let expected = [Some(10), None, None, Some(6), Some(4), Some(10), Some(4)];
        assert_eq!(solved.as_ref().map(|v| v.values()), Ok(&expected[..]));
    }

    #[test]
    fn inconsistent_block_counts_are_errors() {
        let g = diamond();
        // n3 entered 5 times but n1 + n2 = 2 + 2.
        let r = solve_from_blocks(&g, &IdVec::from_vec(vec![4, 2, 2, 5]));
        assert!(
            matches!(r, Err(FlowError::BlockMismatch { node, .. }) if node == NodeId::new(3)),
            "{r:?}"
        );
        // n1 entered more often than n0.
        let r = solve_from_blocks(&g, &IdVec::from_vec(vec![1, 2, 0, 2]));
        assert!(r.is_err(), "{r:?}");
        assert!(matches!(
            solve_from_blocks(&g, &IdVec::from_vec(vec![1, 1])),
            Err(FlowError::BlockCountMismatch { .. })
        ));
    }
}
