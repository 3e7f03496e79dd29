//! The naive modes, the oracles of the others: `edges-naive` puts a counter on every edge but
//! the early exits (derived at report time: they form a star on EXIT), `blocks-naive` one at the
//! start of every block (the "redundant" placement of Ball & Larus 1994 §6.1). Neither uses a
//! spanning tree or a frame record, so they share no code that could be wrong with `edge` mode.

use super::{Counting, FnPlan, ModeImpl, PlanCx};
use crate::counters::plan::Plan;
use crate::ir::lower::Lowered;
use tally_graph::{EdgeId, EdgeKind};

pub(crate) struct EdgesNaive;
pub(crate) struct BlocksNaive;

/// Every edge but the early exits: what `edges-naive` counts and trace mode logs.
pub(crate) fn every_edge(l: &Lowered) -> Vec<EdgeId> {
    l.cfg
        .edges()
        .filter(|(_, e)| e.kind != EdgeKind::EarlyExit)
        .map(|(id, _)| id)
        .collect()
}

impl ModeImpl for EdgesNaive {
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        Ok(Box::new(Counting(Plan::for_edges(
            cx.l,
            &every_edge(cx.l),
            false,
        ))))
    }
}

impl ModeImpl for BlocksNaive {
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        Ok(Box::new(Counting(Plan::for_blocks(cx.l))))
    }
}
