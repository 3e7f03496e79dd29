//! A part of a process that took snapshots ([`Profile::delta`], `runtime/c/snapshot.c`): the
//! difference of two "as if the process ended here" profiles, each charging the frames then
//! waiting at a call to that call's early exit (Ball & Larus 1994 §3.2). Every count of a part
//! is what happened between its two snapshots, except the early exits: they are the change in
//! the number of frames waiting at each call, negative when more waited at the start (their
//! counters hold it in two's complement). So the propagation (Fig. 6) runs over signed values,
//! the early exits are reported unknown, and every other edge must come out a count. Block
//! counts are the sums of their incoming edges, never an early exit. `edge` and `edges-naive`
//! only: other modes' counts of a part are refused.
//!
//! [`Profile::delta`]: tally_format::profile::Profile::delta

use crate::modes::{ReportSolveError, Solved};
use tally_format::{FunctionMeta, Mode, Probe};
use tally_graph::propagate::{self, FlowError};
use tally_graph::{Cfg, EdgeKind, IdVec};

/// The counts of function `f` (graph `cfg`, built in `mode`) of a part, from its `counters`.
pub(crate) fn solve(
    mode: Mode,
    cfg: &Cfg,
    f: &FunctionMeta,
    counters: &[u64],
) -> Result<Solved, ReportSolveError> {
    if !matches!(mode, Mode::Edge | Mode::EdgesNaive) {
        return Err(ReportSolveError::Meta(format!(
            "the counts of a snapshot are read in edge and edges-naive modes only, not {}",
            mode.name()
        )));
    }
    let mut measured = IdVec::filled(cfg.num_edges(), None);
    for (p, &v) in f.counters.iter().zip(counters) {
        if let Probe::Edge(e) = *p {
            let e = e.edge();
            measured[e] = Some(match cfg.edge(e).kind {
                EdgeKind::EarlyExit => i128::from(v as i64), // a change: two's complement
                _ => i128::from(v),
            });
        }
    }
    let values = propagate::propagate_signed(cfg, &measured)?;
    let mut edges = IdVec::filled(cfg.num_edges(), None);
    for (e, edge) in cfg.edges() {
        if edge.kind == EdgeKind::EarlyExit {
            continue;
        }
        let v = values[e];
        let count = u64::try_from(v).map_err(|_| match v < 0 {
            true => FlowError::Negative {
                edge: e,
                node: edge.src,
                value: v,
            },
            false => FlowError::Overflow {
                edge: e,
                node: edge.src,
                value: v,
            },
        })?;
        edges[e] = Some(count);
    }
    let mut blocks = Vec::with_capacity(cfg.num_blocks());
    for n in cfg.blocks() {
        let mut sum = 0u64;
        for &e in cfg.preds(n) {
            let c = edges[e].ok_or(ReportSolveError::Overflow)?; // never an early exit
            sum = sum.checked_add(c).ok_or(ReportSolveError::Overflow)?;
        }
        blocks.push(Some(sum));
    }
    Ok(Solved {
        edges,
        blocks: IdVec::from_vec(blocks),
        rows: None,
    })
}
