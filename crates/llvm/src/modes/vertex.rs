//! `vertex` mode: Vprof(Ecnt) of Ball & Larus 1994 §3.3 — the edge placement minus the chords whose
//! fundamental cycle is pipeless and vertex-disjoint from earlier ones (Fig. 11,
//! `tally_graph::vertex`). Block counts stay exact (Fig. 8: dropped chords taken as 0, signed
//! propagation); the dropped cycles' edge counts are unknown and listed in the metadata.
//!
//! With `--tally-sese=on` (the default), the SESE counters of Frenot & Pereira 2024
//! ([`crate::counters::sese`]) make some chords free as in `edge` mode
//! (`place_vertex_counters_sese`: Fig. 11 over the tree of `place_edge_counters_sese`, free chords
//! never dropped); their value is added at the loops' exits, and the candidates are those of edge
//! mode (no loop the frame may end inside), so the counts are exact whenever the frame ends. Early
//! exits keep the frame record.

use super::{Counting, FnPlan, ModeImpl, PlanCx, SesePlan};
use crate::counters::place::{sese_candidates, used_candidates};
use crate::counters::plan::Plan;
use crate::counters::sese::SeseStats;
use crate::emit::sites::{base_weights, direct_site, with_jumps};
use crate::options::Sese;
use tally_graph::sese::place_edge_counters_sese;
use tally_graph::vertex::{place_vertex_counters, place_vertex_counters_sese, VertexPlacement};
use tally_graph::EdgeId;

pub(crate) struct Vertex;

impl ModeImpl for Vertex {
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        let l = cx.l;
        let w = with_jumps(l, base_weights(l, cx.weights), cx.opts.jump_cost);
        let unsplittable = |e| direct_site(l, e).is_none();
        let (cands, mut stats) = if cx.opts.sese == Sese::Off {
            (Vec::new(), SeseStats::default())
        } else {
            sese_candidates(l, cx.weights, cx.opts, cx.opts.sese)
        };
        let (vp, incremented, free): (VertexPlacement, Vec<EdgeId>, _) = if cands.is_empty() {
            let vp = place_vertex_counters(&l.cfg, &w, unsplittable);
            let counted = vp.counted.clone();
            (vp, counted, Vec::new())
        } else {
            let counters: Vec<_> = cands.iter().map(|c| c.counter.clone()).collect();
            let p = place_vertex_counters_sese(&l.cfg, &w, unsplittable, &counters);
            let incremented = p.incremented().collect();
            (p.vertex, incremented, p.free)
        };
        let shadow = l.may_end_early() && cx.opts.shadow;
        if vp.counted.iter().any(|&e| unsplittable(e)) {
            // Tags would count the dropped chords' neighbours too; keep the edge placement
            // (with the frame record, and the same free chords).
            let counters: Vec<_> = cands.iter().map(|c| c.counter.clone()).collect();
            let p = place_edge_counters_sese(&l.cfg, &w, unsplittable, &counters);
            let chords: Vec<EdgeId> = p.incremented().collect();
            let plan = Plan::for_edges(l, &chords, shadow);
            let sese = used_candidates(&l.cfg, &plan, &p.free, cands, &mut stats);
            return Ok(Box::new(SesePlan {
                counting: Counting(plan),
                sese,
                stats,
            }));
        }
        let mut plan = Plan::for_edges(l, &incremented, shadow);
        plan.zero_edges = vp.dropped;
        plan.unknown_edges = vp
            .undetermined
            .iter()
            .filter(|(_, &u)| u)
            .map(|(e, _)| e)
            .collect();
        let sese = used_candidates(&l.cfg, &plan, &free, cands, &mut stats);
        Ok(Box::new(SesePlan {
            counting: Counting(plan),
            sese,
            stats,
        }))
    }
}
