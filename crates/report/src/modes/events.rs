//! `events`, `events-naive`: the counters count events, not executions (Ball 1994's event
//! counting): per function the inclusive count of its completed activations and of each call
//! site, from which the exclusive count follows; per module the exiting thread's total
//! (counter 0). No edge or block count is known.

use super::{ModuleSolved, ReportSolveError, Solved};
use crate::{CallSiteEvents, FunctionEvents, PathProfile, ReportError};
use tally_format::profile::ProfileModule;
use tally_format::{CounterIdx, FunctionMeta};
use tally_graph::Cfg;

pub(crate) struct Events;

impl super::Reconstruct for Events {
    fn module(&self, m: &ProfileModule) -> Result<ModuleSolved, ReportError> {
        Ok(ModuleSolved {
            events: m.meta.event_kind().map(|kind| {
                let total = m.counters.first().copied().unwrap_or(0);
                (kind.to_string(), total)
            }),
            ..ModuleSolved::default()
        })
    }

    fn solve(
        &self,
        cfg: &Cfg,
        _f: &FunctionMeta,
        _counters: &[u64],
        _paths: Option<&PathProfile>,
    ) -> Result<Solved, ReportSolveError> {
        Ok(Solved::unknown(cfg))
    }

    fn events(&self, f: &FunctionMeta, counters: &[u64]) -> Option<FunctionEvents> {
        let em = f.events()?;
        let at = |i: CounterIdx| counters.get(i.index()).copied().unwrap_or(0);
        let calls: Vec<CallSiteEvents> = em
            .calls
            .iter()
            .map(|c| (c.block.0, c.callee.clone(), at(c.counter)))
            .collect();
        let inclusive = at(em.inclusive);
        let inner = calls.iter().fold(0u64, |a, c| a.saturating_add(c.2));
        Some(FunctionEvents {
            inclusive,
            exclusive: inclusive.saturating_sub(inner),
            per_block: em.per_block.clone(),
            calls,
        })
    }
}
