//! # tally-llvm
//!
//! The LLVM 19 front end of tally and the only crate that touches inkwell / llvm-sys. It takes
//! an *optimized* module (bitcode or text IR), and for every defined function:
//!
//! 1. [`lower`](lower): builds the function's [`tally_graph::Cfg`] (paper 000 §2) with the
//!    early-termination edges of §3.2, and remembers the IR position of every vertex and edge;
//! 2. [`plan`](plan): decides which edges or blocks get counters for the chosen mode (Eprof(Ecnt)
//!    on the chords of a maximum spanning tree for `edge`, every edge / every block for the
//!    naive oracles);
//! 3. [`apply`](apply): inserts the increments, splits edges where needed, and maintains the
//!    shadow-stack frame record that makes early termination exact (§3.2, Fig. 7);
//!
//! then emits the module's counter array, metadata blob and registration constructor
//! ([`module`]), verifies the module, and returns bitcode.
#![deny(missing_docs)]

mod apply;
mod ends;
mod estimate;
mod events;
mod ir;
mod lower;
mod module;
mod paths;
mod plan;
mod prepare;
mod promote;

pub use estimate::Weighting;
pub use events::{EventKind, EV_SLACK};
pub use module::{ABI_VERSION, PATH_HOME_BITS};

use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use ir::Val;
use llvm_sys::core as c;
use llvm_sys::LLVMLinkage;
use std::collections::HashMap;
use tally_format::{
    FunctionMeta, Linkage, Loc, Mode, ModuleMeta, PathMeta, PathStorage, Probe, SkippedFunction,
};
use thiserror::Error;

/// What to instrument and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// Instrumentation mode.
    pub mode: Mode,
    /// The source file the module was compiled from (recorded in the metadata).
    pub source: String,
    /// Use atomic counter increments (for multi-threaded programs).
    pub atomic: bool,
    /// Keep shadow-stack frame records in edge mode (default). Turning them off is only for
    /// measuring their cost: early exits are then not counted and counts of frames that end
    /// early come out wrong.
    pub shadow: bool,
    /// Measured edge counts from an earlier run, by function name and graph hash: counters are
    /// placed with these as weights (paper 000 §6.4, "Exact-Max") where a function's graph
    /// matches; other functions use the heuristic weighting.
    pub weights: Option<std::sync::Arc<Weights>>,
    /// The weighting used where no measured weights apply: paper 000 §5's loop-based
    /// heuristic (default) or LLVM's static frequency estimate.
    pub weighting: Weighting,
    /// Events mode: what an event is.
    pub events: EventKind,
    /// Edge mode: how early exits are made exact in functions without landing pads or setjmp.
    pub early_exits: EarlyExits,
    /// Keep the counters of innermost call-free loops in registers, stored at the loop exits
    /// ([`promote`](mod@promote)); `edge` and `vertex` modes and path mode's edge-counter
    /// functions, not with `atomic`. The driver turns it on by default
    /// (`--tally-promote=off` turns it off).
    pub promote: bool,
    /// Jump optimization (paper 000 §6.3, generalizing Fig. 19): what an unconditional jump
    /// costs relative to a counter increment. A counter on an edge that must be split also
    /// costs the jump out of the new block, so the spanning tree is taken under weights that
    /// make split edges dearer by this factor (`1 + jump_cost`); 0 ignores jumps.
    pub jump_cost: f64,
}

/// The default [`Options::jump_cost`]: on x86-64 a counter increment is one instruction
/// (`incq counter(%rip)`) and so is the jump, but the increment is a read-modify-write.
pub const DEFAULT_JUMP_COST: f64 = 0.5;

/// How edge mode makes the counts of frames that end early exact (paper 000 §3.2, Fig. 7).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum EarlyExits {
    /// Per function, whichever of the two below the weighting predicts to be cheaper.
    #[default]
    Auto,
    /// A frame record; the runtime charges the exit counter of the site the frame ends at.
    Record,
    /// The early-exit edges are spanning-tree edges: their counts are derived, no record.
    Derive,
}

impl EarlyExits {
    /// The option names, for messages.
    pub const NAMES: &'static str = "auto, record, derive";

    /// Parses an option value.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(EarlyExits::Auto),
            "record" => Some(EarlyExits::Record),
            "derive" => Some(EarlyExits::Derive),
            _ => None,
        }
    }
}

/// Edge frequencies of an earlier run: (function name, graph hash) -> count of each edge.
pub type Weights = HashMap<(String, u64), Vec<u64>>;

/// Numbers describing one instrumented module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Functions instrumented.
    pub functions: usize,
    /// Defined functions left alone.
    pub skipped: usize,
    /// Blocks (graph vertices) of the instrumented functions.
    pub blocks: usize,
    /// Edges of the instrumented functions.
    pub edges: usize,
    /// Counters placed.
    pub counters: usize,
    /// Functions that keep a shadow-stack frame record.
    pub shadow_frames: usize,
    /// Counters incremented through predecessor tags (edges that could be neither split nor
    /// kept in the spanning tree).
    pub tagged: usize,
    /// Functions placed with measured weights (`Options::weights`).
    pub weighted: usize,
    /// Path mode: functions whose paths are counted in the runtime's hash table.
    pub hashed_paths: usize,
    /// Path mode: functions profiled with edge counters instead.
    pub path_fallbacks: usize,
    /// Counters kept in registers across call-free loops.
    pub promoted: usize,
    /// Loops whose counters were promoted.
    pub promoted_loops: usize,
    /// Counters on blocks split onto their edge (each costs a jump besides the increment).
    pub split: usize,
}

/// Weights from measured counts: the count, with the heuristic weight as a tie-breaker below 1
/// so that equally frequent edges still prefer the heuristic's choice.
fn exact_weights(
    cfg: &tally_graph::Cfg,
    counts: &[u64],
) -> tally_graph::IdVec<tally_graph::EdgeId, f64> {
    let h = tally_graph::weight::heuristic_weights(cfg);
    tally_graph::IdVec::from_vec(
        counts
            .iter()
            .zip(h.values())
            .map(|(&c, &hw)| c as f64 + 0.5 * hw / (1.0 + hw))
            .collect(),
    )
}

/// The result of instrumenting a module.
pub struct Instrumented {
    /// The instrumented module as bitcode.
    pub bitcode: Vec<u8>,
    /// The metadata embedded in it.
    pub meta: ModuleMeta,
    /// Summary numbers.
    pub stats: Stats,
    /// Path mode: functions profiled with edge counters instead, and why.
    pub path_fallbacks: Vec<(String, String)>,
}

/// Instrumentation failures.
#[derive(Debug, Error)]
pub enum Error {
    /// The input is not LLVM IR this LLVM can read.
    #[error("cannot read LLVM IR: {0}")]
    Parse(String),
    /// The instrumented module is invalid: a tally bug, reported instead of emitting bad code.
    #[error("instrumented module of {source_file} does not verify (a tally bug): {message}")]
    Verify {
        /// The source file.
        source_file: String,
        /// LLVM's verifier message.
        message: String,
    },
}

fn linkage_of(f: Val) -> Linkage {
    use LLVMLinkage::*;
    match f.linkage() {
        LLVMInternalLinkage | LLVMPrivateLinkage => Linkage::Internal,
        LLVMLinkOnceAnyLinkage
        | LLVMLinkOnceODRLinkage
        | LLVMWeakAnyLinkage
        | LLVMWeakODRLinkage
        | LLVMCommonLinkage
        | LLVMExternalWeakLinkage => Linkage::Linkonce,
        _ => Linkage::External,
    }
}

/// File table for [`Loc`]s.
#[derive(Default)]
struct Files {
    names: Vec<String>,
    index: HashMap<String, u32>,
}

impl Files {
    fn loc(&mut self, p: &ir::SrcPos) -> Loc {
        let file = p.file.as_ref().map(|f| {
            if let Some(&i) = self.index.get(f) {
                i
            } else {
                let i = self.names.len() as u32;
                self.names.push(f.clone());
                self.index.insert(f.clone(), i);
                i
            }
        });
        Loc {
            file: file.map(tally_format::FileIdx),
            line: p.line,
        }
    }
}

/// Instruments an optimized module given as bitcode or textual IR.
pub fn instrument(input: &[u8], opts: &Options) -> Result<Instrumented, Error> {
    let context = Context::create();
    let buf = MemoryBuffer::create_from_memory_range_copy(input, "input");
    let module = context
        .create_module_from_ir(buf)
        .map_err(|e| Error::Parse(e.to_string()))?;
    let ctx = context.raw();
    let m = module.as_mut_ptr();
    let kinds = lower::AttrKinds::lookup();
    let safe = ends::analyze(m, &kinds);

    // Lower and plan every function first: the counter array size must be known before
    // any increment is emitted.
    let mut work = Vec::new();
    let mut weighted = 0;
    let mut path_fallbacks = Vec::new();
    let mut skipped = Vec::new();
    let mut f = unsafe { c::LLVMGetFirstFunction(m) };
    while !f.is_null() {
        let fv = Val(f);
        f = unsafe { c::LLVMGetNextFunction(f) };
        let name = fv.name();
        if fv.is_declaration()
            || fv.linkage() == LLVMLinkage::LLVMAvailableExternallyLinkage
            || name.starts_with("__tally_")
        {
            continue;
        }
        prepare::split_shared_landing_pads(fv);
        match lower::lower(fv, &kinds, &safe) {
            Ok(l) => {
                let measured = opts.weights.as_ref().and_then(|w| {
                    let counts = w.get(&(name.clone(), l.cfg.shape_hash()))?;
                    (counts.len() == l.cfg.num_edges()).then(|| exact_weights(&l.cfg, counts))
                });
                weighted += usize::from(measured.is_some());
                // Only the spanning-tree modes read weights.
                let weighs = matches!(
                    opts.mode,
                    Mode::Edge | Mode::Vertex | Mode::Path | Mode::Events
                );
                // Measured weights first, else the chosen static weighting (`None`: §5's,
                // which every plan computes itself).
                let measured = match (measured, opts.weighting) {
                    (Some(m), _) => Some(m),
                    (None, Weighting::Estimate) if weighs => {
                        Some(estimate::estimated_weights(fv, &l))
                    }
                    (None, _) => None,
                };
                let mut fp = if matches!(opts.mode, Mode::Events | Mode::EventsNaive) {
                    let naive = opts.mode == Mode::EventsNaive;
                    match events::plan_events(&l, opts.events, measured.as_ref(), naive) {
                        Ok(ep) => FnPlan::Events(Box::new(ep)),
                        Err(reason) => {
                            skipped.push(SkippedFunction { name, reason });
                            continue;
                        }
                    }
                } else if opts.mode == Mode::Path {
                    match paths::plan_paths(&l, measured.as_ref()) {
                        Ok(pp) => FnPlan::Paths(pp),
                        Err(reason) => {
                            path_fallbacks.push((name.clone(), reason));
                            FnPlan::Counters(plan::plan(
                                &l,
                                Mode::Edge,
                                measured.as_ref(),
                                opts.early_exits,
                                opts.jump_cost,
                            ))
                        }
                    }
                } else {
                    FnPlan::Counters(plan::plan(
                        &l,
                        opts.mode,
                        measured.as_ref(),
                        opts.early_exits,
                        opts.jump_cost,
                    ))
                };
                if !opts.shadow {
                    match &mut fp {
                        FnPlan::Counters(p) => p.shadow = false,
                        FnPlan::Paths(p) => p.shadow = false,
                        FnPlan::Events(_) => {}
                    }
                }
                work.push((fv, name, l, fp));
            }
            Err(reason) => skipped.push(SkippedFunction { name, reason }),
        }
    }
    // Events mode: counter 0 of the module receives the exiting thread's total.
    let events_mode = matches!(opts.mode, Mode::Events | Mode::EventsNaive);
    let reserved = usize::from(events_mode);
    let total: usize = reserved
        + work
            .iter()
            .map(|w| w.3.num_counters(opts.mode))
            .sum::<usize>();
    let tables = work
        .iter()
        .filter(|w| matches!(&w.3, FnPlan::Paths(p) if p.hashed))
        .count();
    let globals = module::make_globals(ctx, m, total as u64, tables as u64, opts.atomic);

    let mut files = Files::default();
    let mut functions = Vec::with_capacity(work.len());
    let mut stats = Stats {
        skipped: skipped.len(),
        weighted,
        ..Stats::default()
    };
    let mut base = reserved;
    let mut table = 0u32;
    for (index, (fv, name, l, fp)) in work.iter().enumerate() {
        let mut events_meta = None;
        let (counters, zero_edges, unknown_edges, paths_meta, shadow) = match fp {
            FnPlan::Events(ep) => {
                events::apply_events(&globals, *fv, l, ep, base as u64);
                events_meta = Some(tally_format::EventMeta {
                    per_block: ep.events.values()[..l.cfg.num_blocks()].to_vec(),
                    inclusive: tally_format::CounterIdx(0),
                    calls: ep
                        .call_sites()
                        .into_iter()
                        .enumerate()
                        .map(|(i, (n, callee))| tally_format::CallSiteMeta {
                            block: n.into(),
                            callee,
                            counter: tally_format::CounterIdx(1 + i as u32),
                        })
                        .collect(),
                });
                (
                    vec![Probe::Events; ep.num_counters],
                    Vec::new(),
                    Vec::new(),
                    None,
                    false,
                )
            }
            FnPlan::Counters(p) => {
                let trace = (opts.mode == Mode::Trace).then_some(index as u32);
                apply::apply(&globals, *fv, l, p, base as u64, trace);
                if opts.promote
                    && !opts.atomic
                    && matches!(opts.mode, Mode::Edge | Mode::Vertex | Mode::Path)
                {
                    let (counters, loops) = promote::promote_loop_counters(&globals, *fv);
                    stats.promoted += counters;
                    stats.promoted_loops += loops;
                }
                stats.split += p
                    .counters
                    .iter()
                    .filter(|(_, r)| matches!(r, plan::Realize::Split(_)))
                    .count();
                stats.tagged += p
                    .counters
                    .iter()
                    .filter(|(_, r)| matches!(r, plan::Realize::Tagged { .. }))
                    .count();
                (
                    if trace.is_some() {
                        Vec::new() // a trace build counts nothing
                    } else {
                        p.counters
                            .iter()
                            .map(|(probe, _)| *probe)
                            .collect::<Vec<_>>()
                    },
                    p.zero_edges.iter().map(|&e| e.into()).collect(),
                    p.unknown_edges.iter().map(|&e| e.into()).collect(),
                    None,
                    p.shadow,
                )
            }
            FnPlan::Paths(pp) => {
                let (counts, storage, counters) = if pp.hashed {
                    let (t, home) = module::path_table(&globals, table, index as u32);
                    let s = PathStorage::Hash { table };
                    table += 1;
                    (paths::Counts::Hash { table: t, home }, s, Vec::new())
                } else {
                    (
                        paths::Counts::Array { base: base as u64 },
                        PathStorage::Array,
                        (0..pp.num_paths as u32).map(Probe::Path).collect(),
                    )
                };
                paths::apply_paths(&globals, *fv, l, pp, counts);
                let pm = PathMeta {
                    cuts: pp.cuts.iter().map(|&e| e.into()).collect(),
                    num_paths: pp.num_paths,
                    storage,
                    numbering: pp.numbering,
                };
                (counters, Vec::new(), Vec::new(), Some(pm), pp.shadow)
            }
        };
        let fpos = ir::function_pos(*fv);
        let loc = files.loc(&fpos);
        // A block without any located instruction: the entry block takes the function's line.
        let blocks = l
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                if i == 0 && n.pos.line == 0 {
                    files.loc(&fpos)
                } else {
                    files.loc(&n.pos)
                }
            })
            .collect();
        stats.functions += 1;
        stats.blocks += l.cfg.num_blocks();
        stats.edges += l.cfg.num_edges();
        stats.counters += counters.len();
        stats.shadow_frames += usize::from(shadow);
        stats.hashed_paths +=
            usize::from(matches!(&paths_meta, Some(p) if p.storage != PathStorage::Array));
        let n = counters.len();
        functions.push(FunctionMeta {
            name: name.clone(),
            linkage: linkage_of(*fv),
            loc,
            num_blocks: l.cfg.num_blocks() as u32,
            edges: FunctionMeta::edges_of(&l.cfg),
            blocks,
            cfg_hash: l.cfg.shape_hash(),
            counter_base: tally_format::CounterIdx(base as u32),
            counters,
            zero_edges,
            unknown_edges,
            paths: paths_meta,
            events: events_meta,
        });
        base += n;
    }
    stats.path_fallbacks = path_fallbacks.len();
    let meta = ModuleMeta {
        source: opts.source.clone(),
        producer: format!("tally {}", env!("CARGO_PKG_VERSION")),
        mode: opts.mode,
        num_counters: total as u32,
        files: files.names,
        functions,
        skipped,
        event_kind: events_mode.then(|| opts.events.name().to_string()),
    };
    let blob = meta.encode();
    let hash = tally_graph::hash::fnv64(&blob);
    let flags = u32::from(events_mode);
    module::emit_registration(&globals, &blob, hash, total as u64, tables as u64, flags);
    if opts.mode == Mode::Path || stats.promoted > 0 {
        module::promote_allocas(&module).map_err(|message| Error::Verify {
            source_file: opts.source.clone(),
            message,
        })?;
    }

    module.verify().map_err(|e| Error::Verify {
        source_file: opts.source.clone(),
        message: e.to_string(),
    })?;
    let bitcode = module.write_bitcode_to_memory().as_slice().to_vec();
    Ok(Instrumented {
        bitcode,
        meta,
        stats,
        path_fallbacks,
    })
}

/// The plan of one function.
enum FnPlan {
    /// Counters on edges or blocks.
    Counters(plan::Plan),
    /// Path profiling.
    Paths(paths::PathPlan),
    /// Event counting.
    Events(Box<events::EventsPlan>),
}

impl FnPlan {
    /// Slots the function takes in the module's counter array.
    fn num_counters(&self, mode: Mode) -> usize {
        match self {
            FnPlan::Counters(_) if mode == Mode::Trace => 0,
            FnPlan::Counters(p) => p.counters.len(),
            FnPlan::Paths(p) if p.hashed => 0,
            FnPlan::Paths(p) => p.num_paths as usize,
            FnPlan::Events(e) => e.num_counters,
        }
    }
}
