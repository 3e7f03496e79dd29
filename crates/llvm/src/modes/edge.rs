//! `edge` mode: Eprof(Ecnt) of Ball & Larus 1994 §3.2, placed by
//! [`crate::counters::place::edge_plan_with`] (the maximum spanning tree's chords, §5's
//! weighting or measured / estimated weights, §6.3's jump optimization, early exits counted
//! through a frame record or derived from the tree, whichever costs less). Counts are recovered
//! by Fig. 6's propagation (`tally_report`).
//!
//! With `--tally-sese=on`, the SESE counters of Frenot & Pereira 2024 ([`crate::counters::sese`])
//! make some chords free: their value is added at the loop's exits ([`SesePlan`]).

use super::{Counting, FnPlan, ModeImpl, PlanCx, SesePlan};
use crate::counters::place::edge_plan_with;

pub(crate) struct Edge;

impl ModeImpl for Edge {
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        let (plan, sese, stats) = edge_plan_with(cx.l, cx.weights, cx.opts, cx.opts.sese);
        Ok(Box::new(SesePlan {
            counting: Counting(plan),
            sese,
            stats,
        }))
    }
}
