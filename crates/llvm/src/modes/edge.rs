//! `edge` mode: Eprof(Ecnt) of paper 000 §3.2 — counters on the chords of a maximum spanning
//! tree under the weighting of §5 (or measured / estimated weights, §6.4), with the jump
//! optimization of §6.3. Early-exit edges are either chords counted by the runtime through a
//! frame record (the exit counters of Fig. 7) or, when that is predicted to cost more, tree
//! edges whose counts the flow law derives (no record; gcov's fake edges); functions with
//! landing pads or setjmp always keep the record. Re-entry edges are always chords. Counts are
//! recovered by Fig. 6's propagation (`tally_report`).

use super::{Counting, FnPlan, ModeImpl, PlanCx};
use crate::frame::record_cost;
use crate::options::EarlyExits;
use crate::plan::Plan;
use crate::sites::{base_weights, direct_site, with_jumps};
use tally_graph::placement::{place_edge_counters, place_edge_counters_exits_in_tree};
use tally_graph::{EdgeId, EdgeKind};

pub(crate) struct Edge;

impl ModeImpl for Edge {
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        Ok(Box::new(Counting(plan(cx))))
    }
}

/// The edge-mode plan of one function (also path mode's fallback).
pub(crate) fn plan(cx: &PlanCx) -> Plan {
    let (l, opts) = (cx.l, cx.opts);
    let cfg = &l.cfg;
    let w = with_jumps(l, base_weights(l, cx.weights), opts.jump_cost);
    let unsplittable = |e| direct_site(l, e).is_none();
    let may_end_early = l.may_end_early();
    // Per function: the frame record (exit counters charged by the runtime) or the early exits
    // derived from the tree (no record), whichever costs less.
    let (measured, shadow) = if may_end_early
        && !l.has_landing_pads
        && !l.has_setjmp
        && opts.early_exits != EarlyExits::Record
    {
        let with_record = place_edge_counters(cfg, &w, unsplittable);
        let without = place_edge_counters_exits_in_tree(cfg, &w, unsplittable);
        let chord_cost = |chords: &[EdgeId]| -> f64 {
            chords
                .iter()
                .filter(|&&e| cfg.edge(e).kind != EdgeKind::EarlyExit)
                .map(|&e| w[e])
                .sum()
        };
        if opts.early_exits == EarlyExits::Derive
            || chord_cost(&without.chords) <= chord_cost(&with_record.chords) + record_cost(l, &w)
        {
            (without.chords, false)
        } else {
            (with_record.chords, true)
        }
    } else {
        (
            place_edge_counters(cfg, &w, unsplittable).chords,
            may_end_early,
        )
    };
    Plan::for_edges(l, &measured, shadow && opts.shadow)
}
