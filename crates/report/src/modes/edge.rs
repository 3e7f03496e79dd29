//! `edge` and `edges-naive`: the counted edges' counts, then Fig. 6 of Ball & Larus 1994
//! (propagation over the unmeasured spanning forest, `tally_graph::propagate`) for the rest; in
//! `edges-naive` only the early exits (a star at EXIT) are derived. Block counts are the sums
//! of their incoming edges. Path mode's functions without paths are solved here too.

use super::{measured_edges, ReportSolveError, Solved};
use crate::PathProfile;
use tally_format::FunctionMeta;
use tally_graph::propagate;
use tally_graph::Cfg;

pub(crate) struct Edges;

impl super::Reconstruct for Edges {
    fn solve(
        &self,
        cfg: &Cfg,
        f: &FunctionMeta,
        counters: &[u64],
        _paths: Option<&PathProfile>,
    ) -> Result<Solved, ReportSolveError> {
        let edges = propagate::propagate(cfg, &measured_edges(cfg, f, counters))?;
        let blocks = propagate::block_counts(cfg, &edges)?;
        Ok(Solved::exact(edges, blocks))
    }
}
