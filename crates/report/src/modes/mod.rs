//! Reconstruction, one file per mode: a [`Reconstruct`] turns one function's counters (and, in
//! path mode, its path entries) into its edge and block counts; its module-level hook solves
//! what a mode solves per module (the interprocedural set of the `ipath` modes, the events
//! modes' total), and its other hooks take trace mode's counts measured elsewhere and give the
//! events modes' per-function events. [`of`] is the one place that maps a [`Mode`] to its
//! reconstruction (ARCHITECTURE.md, "Adding a mode"); `analyze` never names a mode.

mod blocks;
mod edge;
mod events;
pub(crate) mod ipath;
pub(crate) mod path;
mod trace;
mod trace_naive;
mod vertex;

use std::collections::HashMap;

use crate::{FunctionEvents, IpathPath, PathProfile, PathRow, ReportError};
use tally_format::profile::ProfileModule;
use tally_format::{FunctionMeta, Mode, Probe};
use tally_graph::propagate::FlowError;
use tally_graph::{Cfg, EdgeId, IdVec, NodeId};
use thiserror::Error;

/// Edge and block counts of one function, `None` where undetermined.
pub(crate) struct Solved {
    pub edges: IdVec<EdgeId, Option<u64>>,
    pub blocks: IdVec<NodeId, Option<u64>>,
    /// Path mode: the executed paths spelled out.
    pub rows: Option<Vec<PathRow>>,
}

impl Solved {
    /// No count known (a function whose counters break the flow law).
    pub(crate) fn unknown(cfg: &Cfg) -> Solved {
        Solved {
            edges: IdVec::filled(cfg.num_edges(), None),
            blocks: IdVec::filled(cfg.num_blocks(), None),
            rows: None,
        }
    }

    /// Every count determined.
    pub(crate) fn exact(edges: IdVec<EdgeId, u64>, blocks: IdVec<NodeId, u64>) -> Solved {
        Solved {
            edges: IdVec::from_vec(edges.into_vec().into_iter().map(Some).collect()),
            blocks: IdVec::from_vec(blocks.into_vec().into_iter().map(Some).collect()),
            rows: None,
        }
    }
}

/// Why a function's counts cannot be recovered.
#[derive(Debug, Error)]
pub(crate) enum ReportSolveError {
    #[error("{0}")]
    Flow(#[from] FlowError),
    #[error("{0}")]
    Paths(tally_graph::paths::PathError),
    #[error("the profile numbers {stored} paths but this tally numbers {computed}")]
    Numbering { stored: u128, computed: u128 },
    #[error("the profile's path numbering (fingerprint {stored:016x}) is not the one this tally computes from the graph and cuts ({computed:016x}), so its path numbers cannot be read")]
    Fingerprint { stored: u64, computed: u64 },
    #[error("{0}")]
    Meta(String),
    #[error("a derived count overflows 64 bits")]
    Overflow,
    #[error("{0} path increments were lost (the program ran out of memory for path tables)")]
    Lost(u64),
}

/// What a mode solves once per module, before its functions ([`Reconstruct::module`]).
#[derive(Default)]
pub(crate) struct ModuleSolved {
    /// Functions solved together (by index in the module): their counts, or why they are
    /// unknown (the function is then reported inconsistent).
    pub functions: HashMap<usize, Result<Solved, String>>,
    /// The module's interprocedural paths, named and located.
    pub ipaths: Vec<IpathPath>,
    /// The event kind and the module's total (counter 0: the exiting thread's events).
    pub events: Option<(String, u64)>,
}

/// The reader's side of a mode.
pub(crate) trait Reconstruct: Sync {
    /// What the mode solves per module, before its functions (nothing by default); an error
    /// is a metadata error of the whole module.
    fn module(&self, _m: &ProfileModule) -> Result<ModuleSolved, ReportError> {
        Ok(ModuleSolved::default())
    }

    /// The counts of function `f` (graph `cfg`) from its `counters` and, for hashed paths, its
    /// path entries.
    fn solve(
        &self,
        cfg: &Cfg,
        f: &FunctionMeta,
        counters: &[u64],
        paths: Option<&PathProfile>,
    ) -> Result<Solved, ReportSolveError>;

    /// The counts of a function measured outside the profile (`Inputs::counted`: `(edges,
    /// blocks)` in id order), if the mode takes such counts and they fit graph `cfg`.
    fn counted(&self, _cfg: &Cfg, _counts: &(Vec<u64>, Vec<u64>)) -> Option<Solved> {
        None
    }

    /// The events of function `f` from its `counters`, in the modes that count events.
    fn events(&self, _f: &FunctionMeta, _counters: &[u64]) -> Option<FunctionEvents> {
        None
    }
}

/// The reconstruction of `mode`: the registration of every mode.
pub(crate) fn of(mode: Mode) -> &'static dyn Reconstruct {
    match mode {
        Mode::Edge | Mode::EdgesNaive => &edge::Edges,
        Mode::Vertex => &vertex::Vertex,
        Mode::BlocksNaive => &blocks::Blocks,
        Mode::Path => &path::Path,
        Mode::Ipath | Mode::IpathPiecewise => &ipath::Ipath,
        Mode::Events | Mode::EventsNaive => &events::Events,
        Mode::Trace => &trace::Trace,
        Mode::TraceNaive => &trace_naive::Uncounted,
    }
}

/// The measured edge counts of a function: its `Probe::Edge` counters.
fn measured_edges(cfg: &Cfg, f: &FunctionMeta, counters: &[u64]) -> IdVec<EdgeId, Option<u64>> {
    let mut measured = IdVec::filled(cfg.num_edges(), None);
    for (p, &v) in f.counters.iter().zip(counters) {
        if let Probe::Edge(e) = *p {
            measured[e.edge()] = Some(v);
        }
    }
    measured
}
