//! Where witnesses go and what they write (Ball & Larus 1994 §4.2 and §6.2).
//!
//! [`witness_plan`] is the algorithm of §4.2:
//!
//! 1. **blocking** ([`blocking_placement`]): for each call vertex and EXIT `v`, every edge of
//!    [`blockers`]`(G, v)` is witnessed: the out-edges of the nearest predicates on the paths
//!    into `v` through non-predicates, so that blocking witnesses sit as far from the calls as
//!    possible and none is redundant (Fig. 15's second placement);
//! 2. **spanning tree** ([`constrained_spanning_tree`]): a maximum spanning forest of the
//!    normal edges that may not contain an edge already witnessed (footnote 4: when the
//!    blocking edges disconnect the graph this is "the maximal cost set of edges in E - Ewit
//!    that contains no (undirected) cycle"); every normal edge outside it is witnessed too, so
//!    `E - Ewit` has no cycle at all, hence no diamond and no directed cycle (Fig. 16(a));
//! 3. **values** (§6.2: "there are situations where witness values can be reused"): two
//!    witnesses conflict when they lie in the witness sets of two different successors of one
//!    predicate, the only place where regeneration tells witnesses apart. The conflict graph
//!    is coloured greedily (DSatur). Witnesses that a predicate may read together form a
//!    group (connected through predicates); a group with `k` colours writes `ceil(log2 k)`
//!    bits per witness, never more than `ceil(log2 |Ewit|)`, and a witness no predicate ever
//!    reads writes nothing (0 bits). The width is per group rather than per function because
//!    a reader at a predicate only needs to know the width of what it may read there.
//!
//! `e0` is not in the tree (§4.1 leaves `EXIT -> root` out of the tracing problem): seeding the
//! tree with it, as [`crate::mst::max_spanning_tree`] does for profiling, would cost a witness
//! on every function; so the tree is built here with the same [`UnionFind`] and tie-breaking
//! (heaviest first, then lowest id).
//!
//! [`branch_plan`] is the baseline of §6.2: a witness on every normal out-edge of every
//! predicate whose value is the edge's index among them, in `ceil(log2 N)` bits for `N`
//! successors: AE's original scheme ("recorded the outcome of each conditional branch"), what a
//! hardware branch tracer records, and the paper's *bit tracing*, which is the same placement
//! with the same widths ("for predicates with two successors, only one bit").

use super::FunctionInput;
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::mst::{SpanningTree, UnionFind};

/// Which algorithm made a [`Plan`].
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum PlanKind {
    /// Blocking witnesses, constrained spanning tree, reused values (§4.2, §6.2).
    Witness,
    /// Every out-edge of every predicate, value = successor index (§6.2 bit tracing, AE's old
    /// scheme, hardware branch tracing).
    Branch,
    /// No witnesses: the Ball-Larus number of each path, written where it ends, paths cut
    /// before call vertices ([`super::paths`]; Larus's Whole Program Paths).
    Paths,
}

/// What a witnessed edge writes.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Witness {
    /// The value, below `2^bits`.
    pub value: u32,
    /// Its width in the stream (0 when the function has a single witness value).
    pub bits: u8,
}

/// The witnesses of one function.
///
/// Invariants (checked by [`super::check_plan`]): only normal edges are witnessed; for each
/// predicate `p`, every witness regeneration may read at `p` has width `read_bits[p]`, and the
/// values reachable witness-free from different out-edges of `p` are disjoint.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Plan {
    /// The algorithm that made it.
    pub kind: PlanKind,
    /// The witness of each edge, `None` for edges that write nothing.
    pub witness: IdVec<EdgeId, Option<Witness>>,
    /// For each predicate, the width of the witness regeneration reads there (0 elsewhere).
    pub read_bits: IdVec<NodeId, u8>,
}

impl Plan {
    /// True for the witnessed edges (`Ewit`), as a side table.
    pub fn witnessed(&self) -> IdVec<EdgeId, bool> {
        IdVec::from_vec(self.witness.values().iter().map(Option::is_some).collect())
    }

    /// The witnessed edges, in id order.
    pub fn witnessed_edges(&self) -> impl Iterator<Item = EdgeId> + '_ {
        self.witness
            .iter()
            .filter(|(_, w)| w.is_some())
            .map(|(e, _)| e)
    }

    /// Number of distinct values the function writes.
    pub fn num_values(&self) -> usize {
        let mut values: Vec<u32> = self
            .witness
            .values()
            .iter()
            .flatten()
            .map(|w| w.value)
            .collect();
        values.sort_unstable();
        values.dedup();
        values.len()
    }

    /// Expected trace bits per call under an edge weighting (executions per call):
    /// `sum(weight(e) * bits(e))` over the witnessed edges. A front end can pick, per function,
    /// the plan with the smaller figure.
    pub fn expected_bits(&self, weights: &IdVec<EdgeId, f64>) -> f64 {
        self.witness
            .iter()
            .filter_map(|(e, w)| w.map(|w| weights[e] * f64::from(w.bits)))
            .sum()
    }
}

/// `blockers(G, v)` (§4.2): the edges `p -> x0` such that there is a path
/// `p -> x0 -> ... -> xn = v` of normal edges where `p` is a predicate and no `xi`, `i < n`,
/// is one. In id order.
pub fn blockers(f: &FunctionInput, v: NodeId) -> Vec<EdgeId> {
    let cfg = &f.cfg;
    let mut seen = IdVec::filled(cfg.num_nodes(), false);
    let mut out = Vec::new();
    let mut work = vec![v];
    seen[v] = true;
    while let Some(x) = work.pop() {
        for &e in cfg.preds(x) {
            if !f.is_normal(e) {
                continue;
            }
            let s = cfg.edge(e).src;
            if f.is_predicate(s) {
                out.push(e);
            } else if !seen[s] {
                seen[s] = true;
                work.push(s);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The blocking witnesses (§4.2, Fig. 15): the union of [`blockers`]`(G, v)` over EXIT and
/// the call vertices. With them, no witness-free path leads from a predicate to a call vertex
/// or to EXIT (the blocking property).
pub fn blocking_placement(f: &FunctionInput) -> IdVec<EdgeId, bool> {
    let mut witnessed = IdVec::filled(f.cfg.num_edges(), false);
    for v in f.cfg.nodes().filter(|&v| f.must_block(v)) {
        for e in blockers(f, v) {
            witnessed[e] = true;
        }
    }
    witnessed
}

/// The maximum spanning forest of the normal edges of `f` that contains no edge of
/// `witnessed` (§4.2 and footnote 4), by Kruskal under `weights`, heaviest first, ties by
/// lowest id. `failed_forced` is always empty; edges that are not normal are never in it.
pub fn constrained_spanning_tree(
    f: &FunctionInput,
    witnessed: &IdVec<EdgeId, bool>,
    weights: &IdVec<EdgeId, f64>,
) -> SpanningTree {
    let cfg = &f.cfg;
    let mut candidates: Vec<EdgeId> = cfg
        .edges()
        .map(|(e, _)| e)
        .filter(|&e| f.is_normal(e) && !witnessed[e])
        .collect();
    candidates.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]).then(a.cmp(&b)));
    let mut sets = UnionFind::new(cfg.num_nodes());
    let mut in_tree = IdVec::filled(cfg.num_edges(), false);
    for e in candidates {
        let edge = cfg.edge(e);
        if sets.union(edge.src.index(), edge.dst.index()) {
            in_tree[e] = true;
        }
    }
    SpanningTree {
        in_tree,
        failed_forced: Vec::new(),
    }
}

/// `witness(G, Ewit, p, q)` of §4.1 for one out-edge `p -> q`, over normal edges.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct WitnessSet {
    /// The witnessed edges that can be the next witness written after `p -> q` is taken: the
    /// edge itself if witnessed, else the first witnessed edges of the witness-free paths
    /// from `q`. In id order.
    pub witnesses: Vec<EdgeId>,
    /// A witness-free path from `q` reaches EXIT (the paper's EOF).
    pub reaches_exit: bool,
    /// A witness-free path from `q` reaches a call vertex (forbidden by the blocking
    /// property).
    pub reaches_call: bool,
}

/// The witness set of every normal out-edge of `p` under `witnessed`, in id order of the
/// out-edges.
pub fn witness_sets(
    f: &FunctionInput,
    witnessed: &IdVec<EdgeId, bool>,
    p: NodeId,
) -> Vec<(EdgeId, WitnessSet)> {
    let cfg = &f.cfg;
    f.normal_succs(p)
        .map(|e| {
            let mut set = WitnessSet::default();
            if witnessed[e] {
                set.witnesses.push(e);
                return (e, set);
            }
            let mut seen = IdVec::filled(cfg.num_nodes(), false);
            let start = cfg.edge(e).dst;
            seen[start] = true;
            let mut work = vec![start];
            while let Some(x) = work.pop() {
                set.reaches_exit |= cfg.is_exit(x);
                set.reaches_call |= !cfg.is_exit(x) && f.is_call_vertex(x);
                for d in f.normal_succs(x) {
                    if witnessed[d] {
                        set.witnesses.push(d);
                    } else {
                        let y = cfg.edge(d).dst;
                        if !seen[y] {
                            seen[y] = true;
                            work.push(y);
                        }
                    }
                }
            }
            set.witnesses.sort_unstable();
            set.witnesses.dedup();
            (e, set)
        })
        .collect()
}

/// `ceil(log2(k))`, 0 for `k <= 1`: the width that tells `k` values apart.
pub fn bits_for(k: usize) -> u8 {
    if k <= 1 {
        0
    } else {
        (usize::BITS - (k - 1).leading_zeros()) as u8
    }
}

/// The witness plan of §4.2 with the value reuse of §6.2 (see the module doc) under an edge
/// weighting (e.g. [`crate::weight::heuristic_weights`] of `f.cfg`).
pub fn witness_plan(f: &FunctionInput, weights: &IdVec<EdgeId, f64>) -> Plan {
    let cfg = &f.cfg;
    let mut witnessed = blocking_placement(f);
    let tree = constrained_spanning_tree(f, &witnessed, weights);
    for (e, _) in cfg.edges() {
        if f.is_normal(e) && !tree.in_tree[e] {
            witnessed[e] = true;
        }
    }
    let (values, group) = assign_values(f, &witnessed);
    // Each group of witnesses that some predicate may read gets the width of its own colours.
    let mut group_bits: Vec<u8> = vec![0; cfg.num_edges()];
    for (e, v) in values.iter() {
        if let (Some(v), Some(g)) = (v, group[e]) {
            group_bits[g] = group_bits[g].max(bits_for(*v as usize + 1));
        }
    }
    let witness = IdVec::from_vec(
        values
            .iter()
            .map(|(e, v)| {
                v.map(|value| Witness {
                    value,
                    bits: group[e].map_or(0, |g| group_bits[g]),
                })
            })
            .collect(),
    );
    let mut read_bits = IdVec::filled(cfg.num_nodes(), 0);
    for p in cfg.blocks().filter(|&p| f.is_predicate(p)) {
        let w = witness_sets(f, &witnessed, p)
            .into_iter()
            .find_map(|(_, set)| set.witnesses.first().copied());
        read_bits[p] = w.and_then(|w| witness[w]).map_or(0, |w: Witness| w.bits);
    }
    Plan {
        kind: PlanKind::Witness,
        witness,
        read_bits,
    }
}

/// Colours the witnessed edges so that witnesses in the witness sets of different out-edges
/// of one predicate differ (DSatur: most distinct neighbour colours first, then most
/// neighbours, then lowest id; smallest free colour).
/// Also returns, per witnessed edge, its *group*: witnesses joined by appearing together in
/// the witness sets of one predicate share a group (a union-find representative), the unit
/// whose witnesses regeneration may read in one place and that therefore share a width.
/// Witnesses no predicate reads have no group (they carry no information: width 0).
#[allow(clippy::type_complexity)]
fn assign_values(
    f: &FunctionInput,
    witnessed: &IdVec<EdgeId, bool>,
) -> (IdVec<EdgeId, Option<u32>>, IdVec<EdgeId, Option<usize>>) {
    let cfg = &f.cfg;
    let nodes: Vec<EdgeId> = cfg
        .edges()
        .map(|(e, _)| e)
        .filter(|&e| witnessed[e])
        .collect();
    let mut slot = IdVec::filled(cfg.num_edges(), usize::MAX);
    for (i, &e) in nodes.iter().enumerate() {
        slot[e] = i;
    }
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut groups = UnionFind::new(nodes.len());
    let mut read = vec![false; nodes.len()];
    for p in cfg.blocks().filter(|&p| f.is_predicate(p)) {
        let sets = witness_sets(f, witnessed, p);
        let all: Vec<usize> = sets
            .iter()
            .flat_map(|(_, s)| s.witnesses.iter().map(|&w| slot[w]))
            .collect();
        for &i in &all {
            read[i] = true;
            groups.union(all[0], i);
        }
        for (i, (_, a)) in sets.iter().enumerate() {
            for (_, b) in &sets[i + 1..] {
                for &x in &a.witnesses {
                    for &y in &b.witnesses {
                        if x != y {
                            adj[slot[x]].push(slot[y]);
                            adj[slot[y]].push(slot[x]);
                        }
                    }
                }
            }
        }
    }
    for list in &mut adj {
        list.sort_unstable();
        list.dedup();
    }
    let mut color: Vec<Option<u32>> = vec![None; nodes.len()];
    // The distinct colours among each vertex's neighbours, kept sorted as colours are given.
    let mut near: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
    for _ in 0..nodes.len() {
        let next = (0..nodes.len())
            .filter(|&i| color[i].is_none())
            .max_by(|&a, &b| {
                (near[a].len(), adj[a].len())
                    .cmp(&(near[b].len(), adj[b].len()))
                    .then(b.cmp(&a))
            });
        let Some(i) = next else { break };
        let c = (0..)
            .zip(near[i].iter())
            .find(|&(k, &used)| k != used)
            .map_or(near[i].len() as u32, |(k, _)| k);
        color[i] = Some(c);
        for &j in &adj[i] {
            if let Err(at) = near[j].binary_search(&c) {
                near[j].insert(at, c);
            }
        }
    }
    let mut values = IdVec::filled(cfg.num_edges(), None);
    let mut group = IdVec::filled(cfg.num_edges(), None);
    for (i, &e) in nodes.iter().enumerate() {
        values[e] = color[i];
        if read[i] {
            group[e] = Some(groups.find(i));
        }
    }
    (values, group)
}

/// The branch plan (§6.2 bit tracing; AE's old scheme; hardware branch tracing): every normal
/// out-edge of every predicate is witnessed with its index among the predicate's normal
/// out-edges (id order), in `ceil(log2 N)` bits for `N` of them.
pub fn branch_plan(f: &FunctionInput) -> Plan {
    let cfg = &f.cfg;
    let mut witness = IdVec::filled(cfg.num_edges(), None);
    let mut read_bits = IdVec::filled(cfg.num_nodes(), 0);
    for p in cfg.blocks().filter(|&p| f.is_predicate(p)) {
        let outs: Vec<EdgeId> = f.normal_succs(p).collect();
        let bits = bits_for(outs.len());
        read_bits[p] = bits;
        for (i, e) in outs.into_iter().enumerate() {
            witness[e] = Some(Witness {
                value: i as u32,
                bits,
            });
        }
    }
    Plan {
        kind: PlanKind::Branch,
        witness,
        read_bits,
    }
}

/// For each predicate, its choices: `(value, out-edge)` sorted by value, from the witness sets
/// under `plan`. A value that two out-edges share (an invalid plan) is kept for the first.
pub fn choice_table(f: &FunctionInput, plan: &Plan) -> IdVec<NodeId, Vec<(u32, EdgeId)>> {
    let cfg = &f.cfg;
    let witnessed = plan.witnessed();
    let mut table = IdVec::filled(cfg.num_nodes(), Vec::new());
    for p in cfg.blocks().filter(|&p| f.is_predicate(p)) {
        let mut choices: Vec<(u32, EdgeId)> = Vec::new();
        for (e, set) in witness_sets(f, &witnessed, p) {
            for w in set.witnesses {
                if let Some(wit) = plan.witness[w] {
                    choices.push((wit.value, e));
                }
            }
        }
        choices.sort_by_key(|&(v, e)| (v, e));
        choices.dedup_by_key(|&mut (v, _)| v);
        table[p] = choices;
    }
    table
}

/// The plan, of [`witness_plan`] and [`branch_plan`], that writes fewer bits per call under
/// `weights` ([`Plan::expected_bits`]); the witness plan on ties. Plans of different functions
/// are independent (each reader knows the plan of the activation it reads for), so a front end
/// may choose per function.
pub fn cheaper_plan(f: &FunctionInput, weights: &IdVec<EdgeId, f64>) -> Plan {
    let witness = witness_plan(f, weights);
    let branch = branch_plan(f);
    if branch.expected_bits(weights) < witness.expected_bits(weights) {
        branch
    } else {
        witness
    }
}
