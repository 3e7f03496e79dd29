//! `vertex` mode: Vprof(Ecnt) of paper 000 §3.3 — the edge placement minus the chords whose
//! fundamental cycle is pipeless and vertex-disjoint from earlier ones (Fig. 11,
//! `tally_graph::vertex`). Block counts stay exact (Fig. 8: dropped chords taken as 0, signed
//! propagation); the dropped cycles' edge counts are unknown and listed in the metadata.

use super::{Counting, FnPlan, ModeImpl, PlanCx};
use crate::plan::Plan;
use crate::sites::{base_weights, direct_site, with_jumps};

pub(crate) struct Vertex;

impl ModeImpl for Vertex {
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        let l = cx.l;
        let w = with_jumps(l, base_weights(l, cx.weights), cx.opts.jump_cost);
        let unsplittable = |e| direct_site(l, e).is_none();
        let vp = tally_graph::vertex::place_vertex_counters(&l.cfg, &w, unsplittable);
        let shadow = l.may_end_early() && cx.opts.shadow;
        let plan = if vp.counted.iter().any(|&e| unsplittable(e)) {
            // Tags would count the dropped chords' neighbours too; keep the edge placement.
            let chords = tally_graph::placement::place_edge_counters(&l.cfg, &w, unsplittable);
            Plan::for_edges(l, &chords.chords, shadow)
        } else {
            let mut p = Plan::for_edges(l, &vp.counted, shadow);
            p.zero_edges = vp.dropped;
            p.unknown_edges = vp
                .undetermined
                .iter()
                .filter(|(_, &u)| u)
                .map(|(e, _)| e)
                .collect();
            p
        };
        Ok(Box::new(Counting(plan)))
    }
}
