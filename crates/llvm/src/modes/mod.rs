//! The instrumentation modes, one file each. A mode is a [`ModeImpl`]: it plans each function
//! ([`ModeImpl::plan`]) into a [`FnPlan`], which says how many counters and path tables the
//! function takes and then emits its code and returns the function's metadata parts
//! ([`FnPlan::emit`]). `crate::instrument` drives every mode the same way (lower -> plan ->
//! emit -> finish) and asks the mode's facts of its row in `tally_format::mode::MODES`; [`of`]
//! is the one place that maps a [`Mode`] to its code.

mod edge;
mod events;
mod ipath;
mod naive;
mod path;
mod trace;
mod trace_naive;
mod vertex;

pub use events::EV_SLACK;
pub(crate) use naive::every_edge;

use crate::counters::sese::{Candidate, SeseStats};
use crate::emit::Globals;
use crate::ir::lower::Lowered;
use crate::ir::Val;
use crate::options::Options;
use tally_format::{EventMeta, Mode, PathMeta, Probe};
use tally_graph::{EdgeId, IdVec};

/// What planning one function sees.
pub(crate) struct PlanCx<'a> {
    /// The function, not yet changed (LLVM's frequency estimate reads it).
    pub func: Val,
    /// Its graph and IR positions.
    pub l: &'a Lowered,
    /// Edge weights for the spanning tree: measured (`--tally-weights`) or LLVM's estimate;
    /// `None`: Ball & Larus 1994 §5's heuristic.
    pub weights: Option<&'a IdVec<EdgeId, f64>>,
    /// `weights` are measured counts (`--tally-weights`), not an estimate.
    pub measured: bool,
    /// The options of the run.
    pub opts: &'a Options,
}

/// What emitting one function's code sees.
pub(crate) struct EmitCx<'a> {
    /// The module's declarations.
    pub g: &'a Globals,
    /// The function.
    pub func: Val,
    /// Its graph and IR positions.
    pub l: &'a Lowered,
    /// Module index of the function's first counter.
    pub base: u64,
    /// Index of the function's first path table among the module's.
    pub table: u32,
    /// Index of the function in the module's metadata.
    pub index: u32,
}

/// What one function's instrumentation puts in the metadata and the statistics.
#[derive(Default)]
pub(crate) struct Emitted {
    /// What each of the function's counters measures.
    pub counters: Vec<Probe>,
    /// Chords left without a counter, taken as 0 (vertex mode).
    pub zero_edges: Vec<EdgeId>,
    /// Edges whose count is not determined (vertex mode).
    pub unknown_edges: Vec<EdgeId>,
    /// Path mode: the numbering and where the counts are.
    pub paths: Option<PathMeta>,
    /// Events mode: events per block and call sites.
    pub events: Option<EventMeta>,
    /// Trace mode: call sites and witnesses.
    pub wtrace: Option<tally_format::WtraceMeta>,
    /// The function keeps a shadow-stack frame record.
    pub shadow: bool,
    /// Counters on blocks split onto their edge.
    pub split: usize,
    /// Counters incremented through predecessor tags.
    pub tagged: usize,
    /// Its edge and block counters may be promoted to registers in call-free loops.
    pub promotable: bool,
    /// It uses allocas that mem2reg must promote (the path register).
    pub needs_mem2reg: bool,
    /// Edge mode with `--tally-sese=on`: loops, SESE counters found and used.
    pub sese: SeseStats,
}

/// The plan of one function, made before any code is emitted (the module's counter array
/// must be sized first).
pub(crate) trait FnPlan {
    /// Slots the function takes in the module's counter array.
    fn num_counters(&self) -> usize;
    /// Path tables the function takes.
    fn num_tables(&self) -> usize {
        0
    }
    /// Why the function is instrumented in a simpler way than its mode's (path mode's edge
    /// counters), if it is.
    fn fallback(&self) -> Option<&str> {
        None
    }
    /// Emits the function's instrumentation.
    fn emit(&self, cx: &EmitCx) -> Emitted;
}

/// The instrumenter's side of a mode.
pub(crate) trait ModeImpl: Sync {
    /// Plans one function, or says why it cannot be instrumented (it is then left alone and
    /// listed in the metadata's skipped functions).
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String>;
    /// Plans the module as a whole after every function was planned (interprocedural modes):
    /// replacement plans for some functions and module metadata.
    fn plan_module(&self, _funcs: &[(Val, &Lowered)], _opts: &Options) -> Option<ModulePlan> {
        None
    }
    /// Changes the module after every function's instrumentation is emitted (trace mode's
    /// second entries, `trace::split_entries`).
    fn after_emit(&self, _g: &crate::emit::Globals) {}
}

pub(crate) use ipath::ModulePlan;

/// The code of `mode`: the registration of every mode.
pub(crate) fn of(mode: Mode) -> &'static dyn ModeImpl {
    match mode {
        Mode::Edge => &edge::Edge,
        Mode::EdgesNaive => &naive::EdgesNaive,
        Mode::BlocksNaive => &naive::BlocksNaive,
        Mode::Vertex => &vertex::Vertex,
        Mode::Path => &path::Path,
        Mode::TraceNaive => &trace_naive::TraceNaive,
        Mode::Trace => &trace::Trace,
        Mode::Ipath => &ipath::Ipath { piecewise: false },
        Mode::IpathPiecewise => &ipath::Ipath { piecewise: true },
        Mode::Events => &events::Events { naive: false },
        Mode::EventsNaive => &events::Events { naive: true },
    }
}

/// A counter plan ([`crate::counters::plan::Plan`]) applied by counting: edge, vertex, the naive
/// modes and path mode's fallback share it.
pub(crate) struct Counting(pub crate::counters::plan::Plan);

impl FnPlan for Counting {
    fn num_counters(&self) -> usize {
        self.0.counters.len()
    }
    fn emit(&self, cx: &EmitCx) -> Emitted {
        let p = &self.0;
        crate::counters::apply::apply(
            cx.g,
            cx.func,
            cx.l,
            p,
            cx.base,
            &mut crate::counters::apply::Increment,
        );
        Emitted {
            counters: p.counters.iter().map(|(probe, _)| *probe).collect(),
            zero_edges: p.zero_edges.clone(),
            unknown_edges: p.unknown_edges.clone(),
            shadow: p.shadow,
            split: p.split(),
            tagged: p.tagged(),
            promotable: true,
            ..Emitted::default()
        }
    }
}

/// A counter plan with SESE counters (`edge` and `vertex` modes): the counter plan, then one
/// counter per SESE counter used (after the plan's), whose value is added at the loop's exits.
pub(crate) struct SesePlan {
    pub counting: Counting,
    pub sese: Vec<Candidate>,
    pub stats: SeseStats,
}

impl FnPlan for SesePlan {
    fn num_counters(&self) -> usize {
        self.counting.num_counters() + self.sese.len()
    }
    fn emit(&self, cx: &EmitCx) -> Emitted {
        // The SESE code first: it holds IR values that splitting edges for the plan rebuilds.
        let first = self.counting.num_counters();
        let used: Vec<(&Candidate, usize)> = self
            .sese
            .iter()
            .enumerate()
            .map(|(j, c)| (c, first + j))
            .collect();
        crate::counters::sese::emit(cx.g, cx.func, cx.l, cx.base, &used);
        let mut out = self.counting.emit(cx);
        out.counters.extend(
            self.sese
                .iter()
                .map(|c| Probe::Edge(c.counter.measured.into())),
        );
        out.sese = self.stats;
        out
    }
}
