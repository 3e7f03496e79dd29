//! The checker of a witness [`Plan`]: `Trace(Ewit)` (Ball & Larus 1994 §4.1) and the blocking
//! property (§4.2).
//!
//! Three independent checks, all over the normal edges:
//!
//! - **structure** (§4.1, "Ewit solves Trace(Ewit) iff E - Ewit contains no diamonds or
//!   directed cycles"): `E - Ewit` is acyclic, and for every vertex the sets of vertices
//!   reachable witness-free through two different unwitnessed out-edges are disjoint (a shared
//!   vertex closes a diamond; parallel edges count as one, since a traced edge sequence must
//!   tell them apart too);
//! - **blocking** (§4.2): no witness-free path leads from a predicate to a call vertex or EXIT;
//! - **values** (the definition of `Trace(Ewit)` with the values actually written, which is
//!   what reuse must respect): at each predicate the values of the witness sets of different
//!   out-edges are disjoint, and all of them have the width regeneration reads there.

use super::place::{witness_sets, PlanKind};
use super::{FunctionInput, Plan};
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::paths::CfgImage;
use thiserror::Error;

/// Why a plan does not let regeneration work.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    /// The plan's tables do not fit the graph.
    #[error("the plan has {edges} edge entries and {nodes} vertex entries for a graph with {graph_edges} edges and {graph_nodes} vertices")]
    Shape {
        /// Edge entries of the plan.
        edges: usize,
        /// Vertex entries of the plan.
        nodes: usize,
        /// Edges of the graph.
        graph_edges: usize,
        /// Vertices of the graph.
        graph_nodes: usize,
    },
    /// A witness on an edge that is not a normal edge, or a value that does not fit its width.
    #[error("edge {0} cannot carry its witness (not a normal edge, or value too wide)")]
    BadWitness(EdgeId),
    /// `E - Ewit` has a directed cycle through this vertex.
    #[error("E - Ewit has a directed cycle through {0}")]
    Cycle(NodeId),
    /// `E - Ewit` has a diamond forking at `fork` and joining at `join`.
    #[error("E - Ewit has a diamond from {fork} to {join}")]
    Diamond {
        /// The fork.
        fork: NodeId,
        /// A vertex both branches reach.
        join: NodeId,
    },
    /// A path-number plan cannot number the function's paths.
    #[error("path numbering: {0}")]
    Paths(String),
    /// A witness-free path leads from the predicate to a call vertex or EXIT.
    #[error("witness-free path from predicate {0} to a call or EXIT")]
    NotBlocking(NodeId),
    /// Two out-edges of the predicate share a witness value.
    #[error("predicate {pred}: out-edges {a} and {b} share witness value {value}")]
    Confusable {
        /// The predicate.
        pred: NodeId,
        /// One out-edge.
        a: EdgeId,
        /// Another.
        b: EdgeId,
        /// The shared value.
        value: u32,
    },
    /// A witness regeneration may read at the predicate has another width than the one read.
    #[error("predicate {pred} reads {read} bits but witness {edge} has {bits}")]
    Width {
        /// The predicate.
        pred: NodeId,
        /// The witnessed edge.
        edge: EdgeId,
        /// Its width.
        bits: u8,
        /// The width read at the predicate.
        read: u8,
    },
}

/// Checks `Trace(Ewit)`, the blocking property and the values of `plan` for `f` (see the
/// module doc). `Ok` means regeneration can follow every execution of `f`.
pub fn check_plan(f: &FunctionInput, plan: &Plan) -> Result<(), PlanError> {
    let cfg = &f.cfg;
    if plan.witness.len() != cfg.num_edges() || plan.read_bits.len() != cfg.num_nodes() {
        return Err(PlanError::Shape {
            edges: plan.witness.len(),
            nodes: plan.read_bits.len(),
            graph_edges: cfg.num_edges(),
            graph_nodes: cfg.num_nodes(),
        });
    }
    if plan.kind == PlanKind::Paths {
        if let Some((e, _)) = plan.witness.iter().find(|(_, w)| w.is_some()) {
            return Err(PlanError::BadWitness(e));
        }
        return check_paths(f);
    }
    for (e, w) in plan.witness.iter() {
        if let Some(w) = w {
            if !f.is_normal(e) || w.bits > 32 || (w.bits < 32 && u64::from(w.value) >> w.bits != 0)
            {
                return Err(PlanError::BadWitness(e));
            }
        }
    }
    let witnessed = plan.witnessed();
    check_structure(f, &witnessed)?;
    check_blocking(f, &witnessed)?;
    check_values(f, plan, &witnessed)
}

/// A path-number plan ([`PlanKind::Paths`]): the function can be numbered
/// ([`super::paths::paths_plan`]) and every call vertex is a path head (each of its normal
/// in-edges is a back or cut edge), so nothing of a path is read before its calls' records
/// (the blocking property of §4.2 for path records). EXIT needs nothing: a `Return` edge
/// ends its path.
pub fn check_paths(f: &FunctionInput) -> Result<(), PlanError> {
    let numbered = super::paths::paths_plan(f).map_err(|e| PlanError::Paths(e.to_string()))?;
    let dag = numbered.dag();
    for (e, edge) in f.cfg.edges() {
        if f.is_normal(e) && f.is_call_vertex(edge.dst) && matches!(dag.image(e), CfgImage::Kept(_))
        {
            return Err(PlanError::NotBlocking(edge.src));
        }
    }
    Ok(())
}

/// The structural half of `Trace(Ewit)`: `E - Ewit` (normal edges) has no directed cycle and
/// no diamond.
pub fn check_structure(
    f: &FunctionInput,
    witnessed: &IdVec<EdgeId, bool>,
) -> Result<(), PlanError> {
    let cfg = &f.cfg;
    let free = |e: EdgeId| f.is_normal(e) && !witnessed[e];
    // Kahn's algorithm over the witness-free edges.
    let mut indeg = IdVec::filled(cfg.num_nodes(), 0usize);
    for (e, edge) in cfg.edges() {
        if free(e) {
            indeg[edge.dst] += 1;
        }
    }
    let mut work: Vec<NodeId> = cfg.nodes().filter(|&v| indeg[v] == 0).collect();
    let mut done = 0;
    while let Some(v) = work.pop() {
        done += 1;
        for &e in cfg.succs(v) {
            if free(e) {
                let d = cfg.edge(e).dst;
                indeg[d] -= 1;
                if indeg[d] == 0 {
                    work.push(d);
                }
            }
        }
    }
    if done != cfg.num_nodes() {
        let v = cfg.nodes().find(|&v| indeg[v] > 0).unwrap_or(cfg.exit());
        return Err(PlanError::Cycle(v));
    }
    // Acyclic: a vertex reachable through two different free out-edges closes a diamond.
    for p in cfg.nodes() {
        let outs: Vec<EdgeId> = cfg.succs(p).iter().copied().filter(|&e| free(e)).collect();
        if outs.len() < 2 {
            continue;
        }
        let mut owner: IdVec<NodeId, Option<usize>> = IdVec::filled(cfg.num_nodes(), None);
        for (i, &e) in outs.iter().enumerate() {
            let mut work = vec![cfg.edge(e).dst];
            while let Some(x) = work.pop() {
                match owner[x] {
                    Some(j) if j == i => continue,
                    Some(_) => return Err(PlanError::Diamond { fork: p, join: x }),
                    None => owner[x] = Some(i),
                }
                for &d in cfg.succs(x) {
                    if free(d) {
                        work.push(cfg.edge(d).dst);
                    }
                }
            }
        }
    }
    Ok(())
}

/// The blocking property (§4.2): no witness-free path from a predicate to a call vertex or
/// EXIT.
pub fn check_blocking(f: &FunctionInput, witnessed: &IdVec<EdgeId, bool>) -> Result<(), PlanError> {
    for p in f.cfg.blocks().filter(|&p| f.is_predicate(p)) {
        for (_, set) in witness_sets(f, witnessed, p) {
            if set.reaches_call || set.reaches_exit {
                return Err(PlanError::NotBlocking(p));
            }
        }
    }
    Ok(())
}

fn check_values(
    f: &FunctionInput,
    plan: &Plan,
    witnessed: &IdVec<EdgeId, bool>,
) -> Result<(), PlanError> {
    for p in f.cfg.blocks().filter(|&p| f.is_predicate(p)) {
        let read = plan.read_bits[p];
        let mut seen: Vec<(u32, EdgeId)> = Vec::new();
        for (out, set) in witness_sets(f, witnessed, p) {
            let mut mine: Vec<u32> = Vec::new();
            for w in set.witnesses {
                let wit = plan.witness[w].ok_or(PlanError::BadWitness(w))?;
                if wit.bits != read {
                    return Err(PlanError::Width {
                        pred: p,
                        edge: w,
                        bits: wit.bits,
                        read,
                    });
                }
                mine.push(wit.value);
            }
            mine.sort_unstable();
            mine.dedup();
            for value in mine {
                if let Some(&(_, a)) = seen.iter().find(|&&(v, _)| v == value) {
                    return Err(PlanError::Confusable {
                        pred: p,
                        a,
                        b: out,
                        value,
                    });
                }
                seen.push((value, out));
            }
        }
    }
    Ok(())
}
