//! `edge` mode: Eprof(Ecnt) of Ball & Larus 1994 §3.2 — counters on the chords of a maximum
//! spanning tree under the weighting of §5 (or measured / estimated weights, §6.4), with the jump
//! optimization of §6.3. Early-exit edges are either chords counted by the runtime through a
//! frame record (the exit counters of Fig. 7) or, when that is predicted to cost more, tree
//! edges whose counts the flow law derives (no record; gcov's fake edges); functions with
//! landing pads or setjmp always keep the record. Re-entry edges are always chords. Counts are
//! recovered by Fig. 6's propagation (`tally_report`).
//!
//! With `--tally-sese=on`, the SESE counters of Frenot & Pereira 2024 ([`crate::sese`]) make some
//! chords free (`place_edge_counters_sese`): their counters get no increment, the loop's affine
//! variable gives their count at the loop's exits. Both placements use them: the record one,
//! and the one whose early exits are derived from the tree (the counted loops contain no call
//! that may end the frame, so their values are added before it can end).

use super::{Counting, EmitCx, Emitted, FnPlan, ModeImpl, PlanCx};
use crate::frame::record_cost;
use crate::options::{EarlyExits, Sese};
use crate::plan::Plan;
use crate::sese::{self, Candidate, SeseStats};
use crate::sites::{base_weights, direct_site, with_jumps};
use tally_format::Probe;
use tally_graph::placement::{place_edge_counters, place_edge_counters_exits_in_tree};
use tally_graph::sese::{place_edge_counters_sese, place_edge_counters_sese_exits_in_tree};
use tally_graph::{Cfg, EdgeId, EdgeKind};

pub(crate) struct Edge;

impl ModeImpl for Edge {
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        let (plan, sese, stats) = plan_with(cx, cx.opts.sese);
        Ok(Box::new(EdgePlan {
            counting: Counting(plan),
            sese,
            stats,
        }))
    }
}

/// An edge-mode plan: the counter plan, then one counter per SESE counter used (after the
/// plan's), whose value is added at the loop's exits.
pub(super) struct EdgePlan {
    pub(super) counting: Counting,
    pub(super) sese: Vec<Candidate>,
    pub(super) stats: SeseStats,
}

impl FnPlan for EdgePlan {
    fn num_counters(&self) -> usize {
        self.counting.num_counters() + self.sese.len()
    }
    fn emit(&self, cx: &EmitCx) -> Emitted {
        // The SESE code first: it holds IR values that splitting edges for the plan rebuilds.
        let first = self.counting.num_counters();
        let used: Vec<(&Candidate, usize)> = self
            .sese
            .iter()
            .enumerate()
            .map(|(j, c)| (c, first + j))
            .collect();
        sese::emit(cx, &used);
        let mut out = self.counting.emit(cx);
        out.counters.extend(
            self.sese
                .iter()
                .map(|c| Probe::Edge(c.counter.measured.into())),
        );
        out.sese = self.stats;
        out
    }
}

/// The edge-mode plan of one function (also path mode's fallback), without SESE counters.
pub(crate) fn plan(cx: &PlanCx) -> Plan {
    plan_with(cx, Sese::Off).0
}

/// The edge-mode plan of one function, with the SESE counters it uses when `sese`.
pub(super) fn plan_with(cx: &PlanCx, sese: Sese) -> (Plan, Vec<Candidate>, SeseStats) {
    let (l, opts) = (cx.l, cx.opts);
    let cfg = &l.cfg;
    let w = with_jumps(l, base_weights(l, cx.weights), opts.jump_cost);
    let unsplittable = |e| direct_site(l, e).is_none();
    let mut stats = SeseStats::default();
    let mut cands = Vec::new();
    if sese != Sese::Off {
        (cands, stats) = candidates(cx, sese);
    }
    let counters: Vec<_> = cands.iter().map(|c| c.counter.clone()).collect();
    // The record placement: chords, and the free ones with their candidate's index.
    let with_record = || -> (Vec<EdgeId>, Vec<(EdgeId, usize)>) {
        if counters.is_empty() {
            return (
                place_edge_counters(cfg, &w, unsplittable).chords,
                Vec::new(),
            );
        }
        let p = place_edge_counters_sese(cfg, &w, unsplittable, &counters);
        (p.incremented().collect(), p.free)
    };
    let may_end_early = l.may_end_early();
    // Per function: the frame record (exit counters charged by the runtime) or the early exits
    // derived from the tree (no record), whichever costs less.
    let (measured, free, shadow) = if may_end_early
        && !l.has_landing_pads
        && !l.has_setjmp
        && opts.early_exits != EarlyExits::Record
    {
        let (rec_chords, rec_free) = with_record();
        // The derived placement takes the SESE counters too (their loops cannot end the frame,
        // so every value is added before the frame can end): comparing a placement with free
        // chords against one without would favour frame records.
        let (without_chords, without_free) = if counters.is_empty() {
            (
                place_edge_counters_exits_in_tree(cfg, &w, unsplittable).chords,
                Vec::new(),
            )
        } else {
            let p = place_edge_counters_sese_exits_in_tree(cfg, &w, unsplittable, &counters);
            (p.incremented().collect(), p.free)
        };
        let chord_cost = |chords: &[EdgeId]| -> f64 {
            chords
                .iter()
                .filter(|&&e| cfg.edge(e).kind != EdgeKind::EarlyExit)
                .map(|&e| w[e])
                .sum()
        };
        if opts.early_exits == EarlyExits::Derive
            || chord_cost(&without_chords) <= chord_cost(&rec_chords) + record_cost(l, &w)
        {
            (without_chords, without_free, false)
        } else {
            (rec_chords, rec_free, true)
        }
    } else {
        let (chords, free) = with_record();
        (chords, free, may_end_early)
    };
    let plan = Plan::for_edges(l, &measured, shadow && opts.shadow);
    let used = used_candidates(cfg, &plan, &free, cands, &mut stats);
    (plan, used, stats)
}

/// The SESE candidates of the function of `cx` under `sese` (not `Off`).
pub(super) fn candidates(cx: &PlanCx, sese: Sese) -> (Vec<Candidate>, SeseStats) {
    let opts = cx.opts;
    // Counter promotion runs after instrumentation (`lib.rs`); SESE asks where it will.
    let promotes = opts.promote && !opts.atomic && opts.mode.promotes();
    sese::candidates(cx.l, cx.weights, sese, promotes)
}

/// The candidates a placement's free chords `(edge, index in cands)` use, in `free`'s order,
/// with `stats` updated: a free edge into a block counted through tags is counted there
/// already, so its candidate is dropped.
pub(super) fn used_candidates(
    cfg: &Cfg,
    plan: &Plan,
    free: &[(EdgeId, usize)],
    cands: Vec<Candidate>,
    stats: &mut SeseStats,
) -> Vec<Candidate> {
    let mut used = Vec::new();
    let mut cands: Vec<Option<Candidate>> = cands.into_iter().map(Some).collect();
    for &(e, k) in free {
        let tagged = plan.tag_targets.iter().any(|t| t.node == cfg.edge(e).dst);
        if !tagged {
            used.extend(cands[k].take());
        }
    }
    stats.replaced = used.len();
    stats.replaced_trips = used.iter().filter(|c| c.is_trip_count()).count();
    stats.replaced_scev = used.iter().filter(|c| c.is_scev_affine()).count();
    used
}
