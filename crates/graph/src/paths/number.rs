//! Path numbering: `NumPaths(v)` and `Val(e)` (Ball & Larus 1996 §3.2 "Compactly representing paths
//! with sums", the "algorithm for assigning values to edges"; Melski & Reps 1998 §2.1, equations
//! (1) and (2)).
//!
//! Vertices are visited in reverse topological order. `NumPaths(END) = 1`; for a vertex `v`
//! with outgoing edges `e_1 .. e_k` (in [`PathDag::succs`] order),
//! `Val(e_i) = sum of NumPaths(tgt(e_j)) for j < i` and `NumPaths(v) = sum of NumPaths(tgt(e_j))`
//! over all `j`. By induction on the height of `v` (the paper's Theorem), the sums of `Val` along
//! the paths from `v` to END are exactly `0 .. NumPaths(v) - 1`, each once: edge `e_i` reserves
//! the range `Val(e_i) .. Val(e_i) + NumPaths(tgt(e_i))`. The number of a START-to-END path is
//! its sum, a dense index in `0 .. NumPaths(START)`.
//!
//! Counts are `u128` with checked arithmetic: a function whose count does not fit is an error
//! ([`PathError::Overflow`]); [`number_paths_limited`](super::cut::number_paths_limited) cuts
//! edges until it fits a chosen limit instead. A vertex that cannot reach END (a block with no
//! successor at all) has `NumPaths = 0` and lies on no path.

use super::dag::{DagEdgeId, PathDag};
use super::PathError;
use crate::cfg::Cfg;
use crate::ids::{IdVec, NodeId};

/// A [`PathDag`] with its path numbering.
///
/// Invariants: `num_paths[END] = 1`; for every other live vertex `num_paths` and `val` satisfy
/// the equations of the module doc; dead vertices have `num_paths = 0`. Only [`NumberedDag::new`]
/// builds one, so regeneration and placement may rely on the equations.
#[derive(Clone, Debug)]
pub struct NumberedDag {
    dag: PathDag,
    num_paths: IdVec<NodeId, u128>,
    val: IdVec<DagEdgeId, u128>,
}

/// The path DAG of `cfg` (no cut edges) and its numbering.
pub fn number_paths(cfg: &Cfg) -> Result<NumberedDag, PathError> {
    NumberedDag::new(PathDag::new(cfg))
}

impl NumberedDag {
    /// Numbers the paths of `dag`.
    pub fn new(dag: PathDag) -> Result<NumberedDag, PathError> {
        let mut num_paths = IdVec::filled(dag.num_nodes(), 0u128);
        let mut val = IdVec::filled(dag.num_edges(), 0u128);
        num_paths[dag.end()] = 1;
        for &v in dag.topo_order().iter().rev() {
            if v == dag.end() {
                continue;
            }
            let mut sum = 0u128;
            for &d in dag.succs(v) {
                val[d] = sum;
                sum = sum
                    .checked_add(num_paths[dag.edge(d).dst])
                    .ok_or(PathError::Overflow { node: v })?;
            }
            num_paths[v] = sum;
        }
        Ok(NumberedDag {
            dag,
            num_paths,
            val,
        })
    }

    /// The DAG.
    pub fn dag(&self) -> &PathDag {
        &self.dag
    }
    /// Consumes the numbering, returning the DAG.
    pub fn into_dag(self) -> PathDag {
        self.dag
    }
    /// `NumPaths(v)`: the number of paths from `v` to END.
    pub fn num_paths(&self, v: NodeId) -> u128 {
        self.num_paths[v]
    }
    /// `NumPaths(START)`: the number of paths, one more than the largest path number.
    pub fn total(&self) -> u128 {
        self.num_paths[self.dag.start()]
    }
    /// `Val(d)`.
    pub fn val(&self, d: DagEdgeId) -> u128 {
        self.val[d]
    }
    /// All `Val` values, by DAG edge.
    pub fn vals(&self) -> &IdVec<DagEdgeId, u128> {
        &self.val
    }

    /// A fingerprint of the numbering: FNV-1a 64 over `NumPaths(START)`, the number of DAG edges
    /// and, for each DAG edge in id order, its endpoints and `Val`. Two numberings with the same
    /// fingerprint give (barring hash collisions) every path the same number, so the
    /// instrumenter stores it with a path profile and the reader, renumbering from the graph and
    /// the cuts, compares: the one function both sides call.
    pub fn fingerprint(&self) -> u64 {
        let mut h = crate::hash::Fnv64::new();
        h.write(&self.total().to_le_bytes());
        h.write_u64(self.dag.num_edges() as u64);
        for (d, e) in self.dag.edges() {
            h.write_u64(e.src.index() as u64);
            h.write_u64(e.dst.index() as u64);
            h.write(&self.val[d].to_le_bytes());
        }
        h.finish()
    }

    /// The number of a START-to-END path given as its edge sequence: the sum of `Val`.
    pub fn path_number(&self, path: &[DagEdgeId]) -> Result<u128, PathError> {
        let mut at = self.dag.start();
        let mut sum = 0u128;
        for (i, &d) in path.iter().enumerate() {
            if d.index() >= self.dag.num_edges() || self.dag.edge(d).src != at {
                return Err(PathError::NotAPath { at: i });
            }
            at = self.dag.edge(d).dst;
            sum = sum
                .checked_add(self.val[d])
                .ok_or(PathError::NotAPath { at: i })?;
        }
        if at == self.dag.end() {
            Ok(sum)
        } else {
            Err(PathError::NotAPath { at: path.len() })
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cfg::EdgeKind::*;
    use crate::ids::EdgeId;
    use crate::testing::cfg;

    /// Ball & Larus 1996's running example (its Figures 1 and 5): six blocks A..F = n0..n5.
    ///
    /// ```text
    ///            ┌───┐
    ///            │ A │ n0
    ///            └┬─┬┘
    ///          e2 │ │ e1
    ///        ┌────▼┐│
    ///     n1 │  B  ││
    ///        └┬──┬─┘│
    ///      e4 │  │e3▼
    ///         │ ┌▼────┐
    ///         │ │  C  │ n2
    ///         │ └──┬──┘
    ///         │    │ e5
    ///        ┌▼────▼┐
    ///     n3 │  D   │
    ///        └┬────┬┘
    ///      e7 │    │ e6
    ///       ┌─▼─┐  │
    ///    n4 │ E │  │
    ///       └─┬─┘  │
    ///      e8 │    │
    ///        ┌▼────▼┐
    ///     n5 │  F   │──e9──▶ EXIT
    ///        └──────┘
    /// ```
    ///
    /// The successors are listed so that the numbering is the paper's table: ACDF = 0,
    /// ACDEF = 1, ABCDF = 2, ABCDEF = 3, ABDF = 4, ABDEF = 5.
    pub(crate) fn abcdef() -> Cfg {
        cfg(
            6,
            &[
                (0, 2, Flow),   // e1 A->C
                (0, 1, Flow),   // e2 A->B
                (1, 2, Flow),   // e3 B->C
                (1, 3, Flow),   // e4 B->D
                (2, 3, Flow),   // e5 C->D
                (3, 5, Flow),   // e6 D->F
                (3, 4, Flow),   // e7 D->E
                (4, 5, Flow),   // e8 E->F
                (5, 6, Return), // e9 F->EXIT
            ],
        )
    }

    /// `"n0:6 ..."` and `"START->n0 (start)=0 ..."`: the numbering as short strings.
    pub(crate) fn show(p: &NumberedDag) -> (String, String) {
        let dag = p.dag();
        let nodes: Vec<String> = dag
            .topo_order()
            .iter()
            .map(|&v| format!("{}:{}", dag.node_name(v), p.num_paths(v)))
            .collect();
        let edges: Vec<String> = dag
            .edges()
            .map(|(d, _)| format!("{}={}", dag.describe(d), p.val(d)))
            .collect();
        (nodes.join(" "), edges.join(", "))
    }

    fn by_edges(p: &NumberedDag, cfg_edges: &[usize]) -> u128 {
        use super::super::dag::CfgImage;
        let mut path = Vec::new();
        for &e in cfg_edges {
            match p.dag().image(EdgeId::new(e)) {
                CfgImage::Start(d) | CfgImage::Kept(d) => path.push(d),
                other => panic!("e{e} is {other:?}"),
            }
        }
        match p.path_number(&path) {
            Ok(n) => n,
            Err(err) => panic!("{cfg_edges:?}: {err}"),
        }
    }

    #[test]
    fn paper_example_numbering() {
        let p = number_paths(&abcdef()).unwrap();
        let (nodes, edges) = show(&p);
        assert_eq!(nodes, "START:6 n0:6 n1:4 n2:2 n3:2 n4:1 n5:1 END:1");
        assert_eq!(
            edges,
            "START->n0 (start)=0, n0->n2 (e1)=0, n0->n1 (e2)=2, n1->n2 (e3)=0, \
             n1->n3 (e4)=2, n2->n3 (e5)=0, n3->n5 (e6)=0, n3->n4 (e7)=1, n4->n5 (e8)=0, \
             n5->END (e9)=0"
        );
        // The paper's table of path encodings.
        let table: [(&[usize], u128); 6] = [
            (&[0, 1, 5, 6, 9], 0),       // ACDF
            (&[0, 1, 5, 7, 8, 9], 1),    // ACDEF
            (&[0, 2, 3, 5, 6, 9], 2),    // ABCDF
            (&[0, 2, 3, 5, 7, 8, 9], 3), // ABCDEF
            (&[0, 2, 4, 6, 9], 4),       // ABDF
            (&[0, 2, 4, 7, 8, 9], 5),    // ABDEF
        ];
        for (path, number) in table {
            assert_eq!(by_edges(&p, path), number, "{path:?}");
        }
    }

    #[test]
    fn fingerprint_tells_numberings_apart() {
        use crate::paths::PathDag;
        let g = abcdef();
        let plain = number_paths(&g).unwrap().fingerprint();
        assert_eq!(
            number_paths(&g).unwrap().fingerprint(),
            plain,
            "deterministic"
        );
        // Cutting D->E (e7) changes the numbering (and here even the number of paths).
        let cut = NumberedDag::new(PathDag::with_cuts(&g, &[EdgeId::new(7)]).unwrap()).unwrap();
        assert_ne!(cut.fingerprint(), plain);
        // The same graph with A's successors listed the other way round: same path count,
        // other numbers.
        let mut edges: Vec<_> = g.edges().skip(1).map(|(_, e)| e).collect();
        edges.swap(0, 1);
        let swapped = Cfg::new(6, edges.iter().map(|e| (e.src, e.dst, e.kind))).unwrap();
        let other = number_paths(&swapped).unwrap();
        assert_eq!(other.total(), 6);
        assert_ne!(other.fingerprint(), plain);
    }

    #[test]
    fn path_number_rejects_non_paths() {
        let p = number_paths(&abcdef()).unwrap();
        let d = DagEdgeId::new;
        assert_eq!(p.path_number(&[d(1)]), Err(PathError::NotAPath { at: 0 }));
        assert_eq!(
            p.path_number(&[d(0), d(1)]),
            Err(PathError::NotAPath { at: 2 })
        );
        assert_eq!(
            p.path_number(&[d(0), d(99)]),
            Err(PathError::NotAPath { at: 1 })
        );
    }

    #[test]
    fn counts_beyond_u128_are_an_error() {
        // 130 diamonds in sequence: 2^130 paths.
        let n = 3 * 130 + 1;
        let mut edges = Vec::new();
        for i in 0..130 {
            let h = 3 * i;
            edges.extend([
                (h, h + 1, Flow),
                (h, h + 2, Flow),
                (h + 1, h + 3, Flow),
                (h + 2, h + 3, Flow),
            ]);
        }
        edges.push((n - 1, n, Return));
        let err = number_paths(&cfg(n, &edges)).unwrap_err();
        assert!(matches!(err, PathError::Overflow { .. }), "{err}");
        // 127 diamonds fit.
        let short: Vec<_> = edges[..4 * 127].to_vec();
        let mut short = short;
        short.push((3 * 127, n, Return));
        let g = cfg(n, &short);
        assert_eq!(number_paths(&g).unwrap().total(), 1u128 << 127);
    }
}
