//! `blocks-naive`: block counts read directly; edge counts where the flow equations determine
//! them (`tally_graph::propagate::solve_from_blocks`).

use super::{ReportSolveError, Solved};
use crate::PathProfile;
use tally_format::{FunctionMeta, Probe};
use tally_graph::propagate;
use tally_graph::{Cfg, IdVec};

pub(crate) struct Blocks;

impl super::Reconstruct for Blocks {
    fn solve(
        &self,
        cfg: &Cfg,
        f: &FunctionMeta,
        counters: &[u64],
        _paths: Option<&PathProfile>,
    ) -> Result<Solved, ReportSolveError> {
        let mut blocks = IdVec::filled(cfg.num_blocks(), 0u64);
        for (p, &v) in f.counters.iter().zip(counters) {
            if let Probe::Block(b) = *p {
                blocks[b.node()] = v;
            }
        }
        let edges = propagate::solve_from_blocks(cfg, &blocks)?;
        Ok(Solved {
            edges,
            blocks: IdVec::from_vec(blocks.into_vec().into_iter().map(Some).collect()),
            rows: None,
        })
    }
}
