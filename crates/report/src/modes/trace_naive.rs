//! A mode without counters of executions: a `trace-naive` build counts nothing (its counts are
//! in the trace file, `tally_report::trace_naive`). No edge or block count is known (also the
//! answer of the events modes and of trace mode without a trace: `events.rs`, `trace.rs`).

use super::{ReportSolveError, Solved};
use crate::PathProfile;
use tally_format::FunctionMeta;
use tally_graph::Cfg;

pub(crate) struct Uncounted;

impl super::Reconstruct for Uncounted {
    fn solve(
        &self,
        cfg: &Cfg,
        _f: &FunctionMeta,
        _counters: &[u64],
        _paths: Option<&PathProfile>,
    ) -> Result<Solved, ReportSolveError> {
        Ok(Solved::unknown(cfg))
    }
}
