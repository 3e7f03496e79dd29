//! Vertex profiling with vertex counters, Vprof(Vcnt): Knuth & Stevenson, *Optimal measurement
//! points for program frequency counts* (BIT 13, 1973), the third placement Ball & Larus 1994
//! compares in §6 (Graph 3: "Knuth and Stevenson's Vprof(Vcnt) algorithm", scored on a previous
//! run's counts, next to Eprof(Ecnt) and the Vprof(Ecnt) heuristic).
//!
//! Ball & Larus 1994 only cites the algorithm; this is its construction. Take every vertex `v`
//! (EXIT included) twice, as the head `v.out` of its outgoing edges and as the tail `v.in` of its
//! incoming edges, and join `a.out` with `b.in` for every edge `a -> b`. The connected parts
//! of that bipartite graph are the nodes of the *derived graph* `H`. Every edge lies in exactly
//! one part `K`, and Kirchhoff's law at each vertex gives, per part,
//!
//! ```text
//! sum of count(v) over v.out in K  =  sum of edge counts in K  =  sum of count(v) over v.in in K
//! ```
//!
//! So the vertex counts are exactly a flow on `H` in which vertex `v` is an edge from the part of
//! `v.in` to the part of `v.out`, and the vertex counts are determined by the counted vertices iff
//! the uncounted ones contain no cycle of `H` (Knuth's theorem for edge counters, applied to `H`).
//! A minimum-cost `Vcnt` is the complement of a maximum spanning forest of `H` under the vertex
//! weights. EXIT, which cannot hold a counter, is forced into the forest; a vertex whose two
//! halves fall into one part (a self-loop of `H`) is never determined by the others and is
//! always counted.

use crate::cfg::Cfg;
use crate::ids::{IdVec, NodeId};
use crate::mst::UnionFind;
use thiserror::Error;

/// A Vprof(Vcnt) placement.
#[derive(Clone, Debug, PartialEq)]
pub struct VcntPlacement {
    /// The vertices that carry a counter, in id order (never EXIT).
    pub counted: Vec<NodeId>,
    /// For each vertex, its edge in the derived graph: (part of `v.in`, part of `v.out`), as
    /// dense part indices.
    ends: IdVec<NodeId, (usize, usize)>,
    /// Number of parts (nodes of the derived graph).
    parts: usize,
}

/// Why vertex counts could not be reconstructed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum VcntError {
    /// A counted vertex has no given count, or the counts are for another graph.
    #[error("expected a count for each of the {expected} counted vertices, got {found}")]
    Counts {
        /// Number of counted vertices.
        expected: usize,
        /// Number of counts given.
        found: usize,
    },
    /// The counts violate the flow law of the derived graph or give a negative count.
    #[error("the vertex counts are inconsistent at part {part} of the derived graph")]
    Inconsistent {
        /// The part.
        part: usize,
    },
}

/// Knuth and Stevenson's minimum-cost Vprof(Vcnt) placement under `weight` (heavier vertices are
/// kept uncounted first; ties by ascending id).
pub fn place_vertex_counters_ks(cfg: &Cfg, weight: impl Fn(NodeId) -> f64) -> VcntPlacement {
    let n = cfg.num_nodes();
    // Items 0..n are the `v.out` halves, n..2n the `v.in` halves.
    let mut uf = UnionFind::new(2 * n);
    for (_, e) in cfg.edges() {
        uf.union(e.src.index(), n + e.dst.index());
    }
    let mut dense = vec![usize::MAX; 2 * n];
    let mut parts = 0;
    let mut part = |x: usize, uf: &mut UnionFind| {
        let r = uf.find(x);
        if dense[r] == usize::MAX {
            dense[r] = parts;
            parts += 1;
        }
        dense[r]
    };
    let ends: IdVec<NodeId, (usize, usize)> = IdVec::from_vec(
        cfg.nodes()
            .map(|v| (part(n + v.index(), &mut uf), part(v.index(), &mut uf)))
            .collect(),
    );
    let mut order: Vec<NodeId> = cfg.blocks().collect();
    order.sort_by(|&a, &b| weight(b).total_cmp(&weight(a)).then(a.cmp(&b)));
    let mut forest = UnionFind::new(parts);
    let mut in_forest = IdVec::filled(n, false);
    let exit = cfg.exit();
    for v in std::iter::once(exit).chain(order) {
        let (a, b) = ends[v];
        if forest.union(a, b) {
            in_forest[v] = true;
        }
    }
    let counted = cfg.blocks().filter(|&v| !in_forest[v]).collect();
    VcntPlacement {
        counted,
        ends,
        parts,
    }
}

impl VcntPlacement {
    /// Every block count (EXIT excluded: its count, the calls plus re-entries, is not always
    /// determined by block counts) from the counts of [`VcntPlacement::counted`], in that
    /// order, by peeling leaves of the uncounted forest.
    pub fn reconstruct(&self, counts: &[u64]) -> Result<IdVec<NodeId, u64>, VcntError> {
        if counts.len() != self.counted.len() {
            return Err(VcntError::Counts {
                expected: self.counted.len(),
                found: counts.len(),
            });
        }
        let n = self.ends.len();
        let mut known: IdVec<NodeId, Option<i128>> = IdVec::filled(n, None);
        for (&v, &c) in self.counted.iter().zip(counts) {
            known[v] = Some(i128::from(c));
        }
        // Per part: the balance of the known vertices (out minus in) and its unknown vertices.
        let mut balance = vec![0i128; self.parts];
        let mut unknown: Vec<Vec<NodeId>> = vec![Vec::new(); self.parts];
        for i in 0..n {
            let v = NodeId::new(i);
            let (pin, pout) = self.ends[v];
            match known[v] {
                Some(c) => {
                    balance[pout] += c;
                    balance[pin] -= c;
                }
                None if pin != pout => {
                    unknown[pin].push(v);
                    unknown[pout].push(v);
                }
                None => {}
            }
        }
        let mut pending: Vec<usize> = (0..self.parts).filter(|&p| unknown[p].len() == 1).collect();
        while let Some(p) = pending.pop() {
            let Some(&v) = unknown[p].iter().find(|&&v| known[v].is_none()) else {
                continue;
            };
            let (pin, pout) = self.ends[v];
            // The part's balance must come out zero.
            let c = if p == pout { -balance[p] } else { balance[p] };
            if c < 0 {
                return Err(VcntError::Inconsistent { part: p });
            }
            known[v] = Some(c);
            balance[pout] += c;
            balance[pin] -= c;
            for q in [pin, pout] {
                unknown[q].retain(|&w| w != v);
                if unknown[q].len() == 1 {
                    pending.push(q);
                }
            }
        }
        if let Some(p) = (0..self.parts).find(|&p| balance[p] != 0 || !unknown[p].is_empty()) {
            return Err(VcntError::Inconsistent { part: p });
        }
        let mut out = Vec::with_capacity(n - 1);
        for i in 0..n - 1 {
            let v = NodeId::new(i);
            let c = known[v].ok_or(VcntError::Inconsistent {
                part: self.ends[v].0,
            })?;
            out.push(u64::try_from(c).map_err(|_| VcntError::Inconsistent {
                part: self.ends[v].0,
            })?);
        }
        Ok(IdVec::from_vec(out))
    }
}
