//! `vertex`: Fig. 8 of Ball & Larus 1994 — the dropped chords (Fig. 11) taken as 0 and a signed
//! propagation give exact block counts; the edges of the dropped cycles stay unknown
//! (`tally_graph::vertex::propagate_vertex`).

use super::{measured_edges, ReportSolveError, Solved};
use crate::PathProfile;
use tally_format::FunctionMeta;
use tally_graph::{Cfg, EdgeId, IdVec};

pub(crate) struct Vertex;

impl super::Reconstruct for Vertex {
    fn solve(
        &self,
        cfg: &Cfg,
        f: &FunctionMeta,
        counters: &[u64],
        _paths: Option<&PathProfile>,
    ) -> Result<Solved, ReportSolveError> {
        let measured = measured_edges(cfg, f, counters);
        let dropped: Vec<EdgeId> = f.zero_edges().iter().map(|e| e.edge()).collect();
        let mut unknown = IdVec::filled(cfg.num_edges(), false);
        for e in f.unknown_edges() {
            unknown[e.edge()] = true;
        }
        let got = tally_graph::vertex::propagate_vertex(cfg, &measured, &dropped, &unknown)?;
        let blocks = cfg.blocks().map(|n| Some(got.blocks[n])).collect();
        Ok(Solved {
            edges: got.edges,
            blocks: IdVec::from_vec(blocks),
            rows: None,
        })
    }
}
