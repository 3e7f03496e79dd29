//! Edge-counter placement on one function: Eprof(Ecnt) of Ball & Larus 1994 §3.2 — counters on
//! the chords of a maximum spanning tree under the weighting of §5 (or measured / estimated
//! weights, §6.4), with the jump optimization of §6.3. Early-exit edges are either chords
//! counted by the runtime through a frame record (the exit counters of Fig. 7) or, when that is
//! predicted to cost more, tree edges whose counts the flow law derives (no record; gcov's fake
//! edges); functions with landing pads or setjmp always keep the record. Re-entry edges are
//! always chords.
//!
//! With SESE counters (Frenot & Pereira 2024, [`crate::counters::sese`]), some chords are free
//! (`place_edge_counters_sese`): their counters get no increment, the loop's affine variable
//! gives their count at the loop's exits. Both placements use them: the record one, and the one
//! whose early exits are derived from the tree (the counted loops contain no call that may end
//! the frame, so their values are added before it can end).
//!
//! The planner of `edge` mode, shared by `vertex` (its SESE candidates), `path` and `ipath`
//! (their fallback for functions without paths).

use crate::counters::plan::Plan;
use crate::counters::sese::{self, Candidate, SeseStats};
use crate::emit::frame::record_cost;
use crate::emit::sites::{base_weights, direct_site, with_jumps};
use crate::ir::lower::Lowered;
use crate::options::{EarlyExits, Options, Sese};
use tally_graph::placement::{place_edge_counters, place_edge_counters_exits_in_tree};
use tally_graph::sese::{place_edge_counters_sese, place_edge_counters_sese_exits_in_tree};
use tally_graph::{Cfg, EdgeId, EdgeKind, IdVec};

/// The edge-mode plan of one function (also the fallback of path modes), without SESE
/// counters. `weights`: as [`base_weights`] takes them.
pub(crate) fn edge_plan(l: &Lowered, weights: Option<&IdVec<EdgeId, f64>>, opts: &Options) -> Plan {
    edge_plan_with(l, weights, opts, Sese::Off).0
}

/// The edge-mode plan of one function, with the SESE counters it uses when `sese`.
pub(crate) fn edge_plan_with(
    l: &Lowered,
    weights: Option<&IdVec<EdgeId, f64>>,
    opts: &Options,
    sese: Sese,
) -> (Plan, Vec<Candidate>, SeseStats) {
    let cfg = &l.cfg;
    let w = with_jumps(l, base_weights(l, weights), opts.jump_cost);
    let unsplittable = |e| direct_site(l, e).is_none();
    let mut stats = SeseStats::default();
    let mut cands = Vec::new();
    if sese != Sese::Off {
        (cands, stats) = sese_candidates(l, weights, opts, sese);
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

/// The SESE candidates of `l`'s function under `sese` (not `Off`).
pub(crate) fn sese_candidates(
    l: &Lowered,
    weights: Option<&IdVec<EdgeId, f64>>,
    opts: &Options,
    sese: Sese,
) -> (Vec<Candidate>, SeseStats) {
    // Counter promotion runs after instrumentation (`lib.rs`); SESE asks where it will.
    let promotes = opts.promote && !opts.atomic && opts.mode.promotes();
    sese::candidates(l, weights, sese, promotes)
}

/// The candidates a placement's free chords `(edge, index in cands)` use, in `free`'s order,
/// with `stats` updated: a free edge into a block counted through tags is counted there
/// already, so its candidate is dropped.
pub(crate) fn used_candidates(
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
