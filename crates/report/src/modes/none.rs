//! Modes whose counters are not execution counts: a `trace` or `trace-naive` build counts
//! nothing (its counts are in the trace file: `tally_report::trace`,
//! `tally_report::trace_naive`), an `events` or `events-naive` build counts events (rendered
//! per function and call site by `render`). No edge or block count is known.

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
