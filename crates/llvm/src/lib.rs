//! # tally-llvm
//!
//! The LLVM 19 front end of tally and the only crate that touches inkwell / llvm-sys. It takes
//! an *optimized* module (bitcode or text IR), and for every defined function:
//!
//! 1. [`lower`](lower): builds the function's [`tally_graph::Cfg`] (Ball & Larus 1994 §2) with the
//!    early-termination edges of §3.2, and remembers the IR position of every vertex and edge
//!    ([`lines`]: the source lines, inline scopes and branches the metadata records);
//! 2. plans it in the chosen mode ([`modes`]: one file per mode, behind one trait; the mode's
//!    facts come from `tally_format::mode::MODES`);
//! 3. emits its instrumentation (the mode's code, on the shared toolkit: [`emit`] helpers,
//!    `emit::sites` and `emit::surgery` for where code for an edge goes, `emit::frame` records
//!    for exact early termination (§3.2, Fig. 7), [`counters`] for counter plans and their
//!    application, SESE counters and counters in call-free loops);
//!
//! then emits the module's counter array, metadata blob and registration constructor
//! ([`module`]), verifies the module, and returns bitcode. Before all that, calls to the libc
//! functions the runtime wraps (`_exit`, the `exec` family, ...) are pointed at the wrappers
//! ([`redirect`]).
//!
//! The folders are the layers, each using only those before it:
//!
//! | layer | what |
//! |---|---|
//! | [`ir`] | reading IR: handles and the LLVM-C calls inkwell lacks (`ir/mod.rs`), preparing and lowering a function (`prepare`, `lower`), its source lines (`lines`), which calls may end a frame early (`ends`), LLVM's frequency estimate (`estimate`) |
//! | [`shim`] | the C++ shim's functions (`shim/*.cpp`), declared once, behind safe wrappers |
//! | [`emit`] | the emission toolkit: globals and the builder (`emit/mod.rs`), sites of edges (`sites`), edge splitting and tags (`surgery`), frame records (`frame`) |
//! | [`counters`] | counter placement (`place`), plans (`plan`) and their application (`apply`), SESE counters (`sese`), promotion (`promote`) |
//! | [`modes`] | one file or folder per mode, on the layers above |
//! | [`module`] | module assembly: the counter array, metadata, descriptor and constructor (`module/mod.rs`), redirected libc calls (`redirect`); `--tally-pgo`'s pre-inlining (`pre_inline`) and the instances the rebuild will not inline again (`reinline`), header copies made the module's own (`localize`) and counted targets of indirect calls (`call_targets`) |
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

// The layers, each using only those above it: reading IR, the emission toolkit, counters,
// the modes; module assembly and the C++ shim's declarations beside them.
mod counters;
mod emit;
mod ir;
mod modes;
mod module;
mod options;
mod shim;

use counters::{apply, plan, promote};
use ir::{ends, estimate, lines, lower, prepare};
use module::redirect;

pub use modes::EV_SLACK;
pub use module::{ABI_VERSION, PATH_HOME_BITS};
pub use options::{
    EarlyExits, EventKind, IpathCuts, Options, PathCycles, Sese, TracePlan, Weighting, Weights,
    DEFAULT_JUMP_COST, DEFAULT_PROMOTE_CHAIN, DEFAULT_PROMOTE_MAX, HOT_RESTARTS,
};

use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use ir::Val;
use llvm_sys::core as c;
use llvm_sys::LLVMLinkage;
use module::call_targets;
use tally_format::{
    CounterIdx, FunctionMeta, FunctionModeMeta, Linkage, Mode, ModeParts, ModuleMeta,
    ModuleModeMeta, PathStorage, SkippedFunction, SourceMeta,
};
use thiserror::Error;

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
    /// `--tally-sese=on`: natural loops of the instrumented functions.
    pub loops: usize,
    /// `--tally-sese=on`: SESE counters found in them ([`Options::sese`]).
    pub sese_candidates: usize,
    /// `--tally-sese=on`: edge counters those replaced (no increment in the loop).
    pub sese_replaced: usize,
    /// `--tally-sese=on`: of those, trip-count counters (ScalarEvolution).
    pub sese_trips: usize,
    /// `--tally-sese=on`: of those, affine variables only ScalarEvolution found.
    pub sese_scev: usize,
    /// `--tally-sese=on`: loops with a candidate the profitability test refused.
    pub sese_unprofitable: usize,
}

impl Stats {
    /// Adds one instrumented function.
    fn add(&mut self, l: &lower::Lowered, out: &modes::Emitted) {
        self.functions += 1;
        self.blocks += l.cfg.num_blocks();
        self.edges += l.cfg.num_edges();
        self.counters += out.counters.len();
        self.shadow_frames += usize::from(out.shadow);
        self.split += out.split;
        self.tagged += out.tagged;
        self.loops += out.sese.loops;
        self.sese_candidates += out.sese.candidates;
        self.sese_replaced += out.sese.replaced;
        self.sese_trips += out.sese.replaced_trips;
        self.sese_scev += out.sese.replaced_scev;
        self.sese_unprofitable += out.sese.unprofitable;
        self.hashed_paths +=
            usize::from(matches!(&out.paths, Some(p) if p.storage != PathStorage::Array));
    }
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
    /// `--tally-oracle` in a mode that cannot carry it.
    #[error("--tally-oracle is not available in {0} mode (only in edge, vertex, path, ipath and ipath-piecewise modes)")]
    Oracle(&'static str),
    /// A mode filled two modes' metadata: a tally bug, reported instead of writing it.
    #[error("metadata of {function} (a tally bug): {message}")]
    Meta {
        /// The function.
        function: String,
        /// What is wrong.
        message: String,
    },
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

/// A function's lowering and plan, between planning and emission.
struct Planned {
    func: Val,
    name: String,
    lowered: lower::Lowered,
    plan: Box<dyn modes::FnPlan>,
    /// Source lines, scopes and branches, read before instrumentation.
    source: tally_format::SourceMeta,
}

/// Instruments an optimized module given as bitcode or textual IR: lower every function, plan
/// it in the chosen mode, size the module's globals, emit every function's instrumentation,
/// then the metadata and registration ([`finish`]).
pub fn instrument(input: &[u8], opts: &Options) -> Result<Instrumented, Error> {
    let context = Context::create();
    let buf = MemoryBuffer::create_from_memory_range_copy(input, "input");
    let module = context
        .create_module_from_ir(buf)
        .map_err(|e| Error::Parse(e.to_string()))?;
    let mut refusals = None;
    if opts.pgo {
        module::add_pseudo_probes(&module).map_err(Error::Parse)?;
        module::localize::localize_inline_copies(module.as_mut_ptr());
        if opts.pgo_inline {
            refusals = Some(module::reinline::Refusals::of(module.as_mut_ptr()));
            module::pre_inline::pre_inline(&module).map_err(Error::Parse)?;
        }
    }
    redirect::redirect_libc_calls(module.as_mut_ptr());
    let mode = modes::of(opts.mode);
    let mut stats = Stats::default();
    let mut skipped = Vec::new();
    // Source lines are read from the IR as lowered, before any instrumentation changes it.
    let mut files = lines::Tables::default();
    files.probes = ir::probes::Descs::of(module.as_mut_ptr());
    files.refusals = refusals;
    files.direct_calls = opts.pgo;
    files.indirect_calls = opts.pgo
        && opts.pgo_targets
        && matches!(
            opts.mode,
            Mode::Edge | Mode::EdgesNaive | Mode::BlocksNaive | Mode::Vertex
        );
    let mut work = lower_and_plan(&module, mode, opts, &mut stats, &mut skipped, &mut files);
    // Interprocedural modes plan the module as a whole.
    let funcs: Vec<_> = work.iter().map(|w| (w.func, &w.lowered)).collect();
    let module_plan = mode.plan_module(&funcs, opts);
    let (mut ipath, mut ip_failure) = (None, None);
    if let Some(mp) = module_plan {
        for (i, plan) in mp.plans {
            work[i].plan = plan;
        }
        ipath = mp.meta;
        ip_failure = mp.failure;
    }

    // `--tally-pgo`: the indirect calls whose targets are counted, after every function's own
    // counters.
    let sites: Vec<Vec<call_targets::Site>> = if files.indirect_calls {
        let candidates = call_targets::Candidates::of(module.as_mut_ptr());
        work.iter()
            .map(|w| candidates.sites(&lines::indirect_calls(&w.lowered)))
            .collect()
    } else {
        work.iter().map(|_| Vec::new()).collect()
    };
    let target_counters: usize = sites.iter().flatten().map(|s| s.targets.len()).sum();

    // The counter array and path tables are sized before any code is emitted.
    let reserved = opts.mode.reserved_counters();
    let own = reserved + work.iter().map(|w| w.plan.num_counters()).sum::<usize>();
    let total = own + target_counters;
    let tables: usize = work.iter().map(|w| w.plan.num_tables()).sum();
    let globals = module::make_globals(
        context.raw(),
        module.as_mut_ptr(),
        total as u64,
        tables as u64,
        opts.atomic,
    );

    let mut oracle = opts
        .oracle
        .then(|| Oracle::new(&globals, &work, opts))
        .transpose()?;

    let mut functions = Vec::with_capacity(work.len());
    let mut path_fallbacks = Vec::new();
    let mut mem2reg = false;
    let (mut base, mut table) = (reserved, 0);
    for (index, w) in work.iter().enumerate() {
        let cx = modes::EmitCx {
            g: &globals,
            func: w.func,
            l: &w.lowered,
            base: base as u64,
            table: table as u32,
            index: index as u32,
        };
        let out = w.plan.emit(&cx);
        // The oracle's increments go in after the mode's code, which is planned and checked
        // (SESE's trip counts) on the IR as lowered, and before promotion, which leaves them
        // in memory. Every position the lowering recorded is still there: an instruction to
        // insert before, or a terminator successor, which the mode may have split (the
        // oracle then splits the edge into the mode's block, counting the same traversals).
        if let Some(o) = &oracle {
            o.emit(index, w);
        }
        if out.promotable && opts.promote && !opts.atomic && opts.mode.promotes() {
            let (counters, loops) = promote::promote_loop_counters(
                &globals,
                w.func,
                opts.promote_chain,
                opts.promote_max as usize,
            );
            stats.promoted += counters;
            stats.promoted_loops += loops;
        }
        // `--tally-pgo`: the optimizer runs after instrumentation. Inlined, a function's frame
        // record would share its caller's frame with the caller's record, in either order, and
        // the runtime tells the records of abandoned frames by address (docs/design/frames.md).
        if opts.pgo && out.shadow {
            emit::build::never_inline(&globals, w.func.0);
        }
        mem2reg |= out.needs_mem2reg;
        if let Some(why) = w.plan.fallback() {
            path_fallbacks.push((w.name.clone(), why.to_string()));
        }
        stats.add(&w.lowered, &out);
        functions.push(function_meta(w, &out, base, &mut files)?);
        if let Some(o) = &mut oracle {
            o.add_meta(index, functions.last().expect("just pushed"));
        }
        base += w.plan.num_counters();
        table += w.plan.num_tables();
    }
    let mut next = own as u64;
    let mut target_tables = call_targets::Tables::default();
    for ((w, f), sites) in work.iter().zip(&mut functions).zip(&sites) {
        call_targets::record(&mut f.source.call_targets, sites, next);
        next += call_targets::emit(&globals, &mut target_tables, w.func, sites, next);
    }
    mode.after_emit(&globals);
    if let Some(why) = ip_failure {
        path_fallbacks.push(("(the interprocedural set)".into(), why));
    }
    stats.path_fallbacks = path_fallbacks.len();
    let meta = ModuleMeta {
        source: opts.source.clone(),
        producer: format!("tally {}", env!("CARGO_PKG_VERSION")),
        mode: opts.mode,
        num_counters: total as u32,
        files: files.files,
        functions,
        source_fns: files.source_fns,
        skipped,
        mode_meta: ModuleModeMeta::from_parts(
            opts.mode
                .counts_events()
                .then(|| opts.events.name().to_string()),
            ipath,
        )
        .map_err(|e| Error::Meta {
            function: "(the module)".into(),
            message: e.to_string(),
        })?,
        oracle_for: None,
        probe_descs: files.probes.descs,
        probes_before_optimization: opts.pgo,
    };
    let bitcode = finish(
        &module,
        &globals,
        &meta,
        tables,
        mem2reg || stats.promoted > 0,
        opts,
        oracle.as_ref(),
    )?;
    Ok(Instrumented {
        bitcode,
        meta,
        stats,
        path_fallbacks,
    })
}

/// The same-run oracle of `--tally-oracle` ([`Options::oracle`]): a counter on every edge of
/// every instrumented function (the `edges-naive` plan, `modes::naive`), in a counter array
/// and a module record of their own ([`ModuleMeta::oracle_for`]). Its counters are never
/// promoted and share nothing with the mode's but the graph both are planned on, so that
/// `tally check` can compare the two profiles one run writes.
struct Oracle {
    /// The module's globals with the oracle's counter array and no path tables.
    g: emit::Globals,
    /// Each function's plan, in `work` order.
    plans: Vec<plan::Plan>,
    /// Each function's first counter.
    bases: Vec<usize>,
    /// The oracle's metadata of the functions emitted so far.
    functions: Vec<FunctionMeta>,
}

impl Oracle {
    fn new(g: &emit::Globals, work: &[Planned], opts: &Options) -> Result<Oracle, Error> {
        if !opts.mode.takes_oracle() {
            return Err(Error::Oracle(opts.mode.name()));
        }
        let plans: Vec<plan::Plan> = work
            .iter()
            .map(|w| plan::Plan::for_edges(&w.lowered, &modes::every_edge(&w.lowered), false))
            .collect();
        let mut bases = Vec::with_capacity(plans.len());
        let mut total = 0;
        for p in &plans {
            bases.push(total);
            total += p.counters.len();
        }
        let counters = module::counter_array(g.module, "__tally_oracle_counters", total as u64);
        // SAFETY: a constant of a type of the module's context.
        let none = unsafe { c::LLVMConstNull(g.ptrt) };
        Ok(Oracle {
            g: emit::Globals {
                counters,
                path_tables: none,
                ..g.clone()
            },
            plans,
            bases,
            functions: Vec::new(),
        })
    }

    /// Emits function `index`'s increments.
    fn emit(&self, index: usize, w: &Planned) {
        let base = self.bases[index] as u64;
        apply::apply(
            &self.g,
            w.func,
            &w.lowered,
            &self.plans[index],
            base,
            &mut apply::Increment,
        );
    }

    /// Records function `index`'s oracle metadata: the mode's (same graph, lines and names)
    /// with the oracle's counters.
    fn add_meta(&mut self, index: usize, mode: &FunctionMeta) {
        let plan = &self.plans[index];
        self.functions.push(FunctionMeta {
            counter_base: CounterIdx(self.bases[index] as u32),
            counters: plan.counters.iter().map(|(p, _)| *p).collect(),
            mode_meta: FunctionModeMeta::Counters,
            // The targets of indirect calls are counted in the mode's counter array only.
            source: SourceMeta {
                call_targets: Vec::new(),
                ..mode.source.clone()
            },
            ..mode.clone()
        });
    }

    /// The oracle's module metadata, for the mode's module `mode` of hash `hash`.
    fn meta(&self, mode: &ModuleMeta, hash: u64) -> ModuleMeta {
        ModuleMeta {
            mode: tally_format::Mode::EdgesNaive,
            num_counters: self.plans.iter().map(|p| p.counters.len()).sum::<usize>() as u32,
            functions: self.functions.clone(),
            mode_meta: ModuleModeMeta::None,
            oracle_for: Some(hash),
            // Its functions name the mode's probes (a `--tally-pgo` build's among them).
            ..mode.clone()
        }
    }
}

/// Lowers and plans every defined function of the module (those that cannot be lowered or
/// planned are listed in `skipped`).
fn lower_and_plan(
    module: &inkwell::module::Module,
    mode: &dyn modes::ModeImpl,
    opts: &Options,
    stats: &mut Stats,
    skipped: &mut Vec<SkippedFunction>,
    files: &mut lines::Tables,
) -> Vec<Planned> {
    let m = module.as_mut_ptr();
    let kinds = ends::AttrKinds::lookup();
    let safe = ends::analyze(m, &kinds);
    let mut work = Vec::new();
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let mut f = unsafe { c::LLVMGetFirstFunction(m) };
    while !f.is_null() {
        let fv = Val(f);
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        f = unsafe { c::LLVMGetNextFunction(f) };
        let name = fv.name();
        if fv.is_declaration()
            || fv.linkage() == LLVMLinkage::LLVMAvailableExternallyLinkage
            || name.starts_with("__tally_")
        {
            continue;
        }
        prepare::split_shared_landing_pads(fv);
        let l = match lower::lower(fv, &kinds, &safe) {
            Ok(l) => l,
            Err(reason) => {
                skipped.push(SkippedFunction { name, reason });
                continue;
            }
        };
        // Measured weights first, else the chosen static weighting (`None`: §5's, which every
        // plan computes itself). Only the spanning-tree modes read weights.
        let measured = opts.weights.as_ref().and_then(|w| {
            let counts = w.get(&(name.clone(), l.cfg.shape_hash()))?;
            (counts.len() == l.cfg.num_edges()).then(|| exact_weights(&l.cfg, counts))
        });
        stats.weighted += usize::from(measured.is_some());
        let is_measured = measured.is_some();
        let weights = match measured {
            Some(m) => Some(m),
            None if opts.weighting == Weighting::Estimate && opts.mode.weighs() => {
                Some(estimate::estimated_weights(fv, &l))
            }
            None => None,
        };
        let source = lines::source_meta(fv, &l, files);
        let cx = modes::PlanCx {
            func: fv,
            l: &l,
            weights: weights.as_ref(),
            measured: is_measured,
            opts,
        };
        match mode.plan(&cx) {
            Ok(plan) => work.push(Planned {
                func: fv,
                name,
                source,
                lowered: l,
                plan,
            }),
            Err(reason) => skipped.push(SkippedFunction { name, reason }),
        }
    }
    stats.skipped = skipped.len();
    work
}

/// One function's metadata.
fn function_meta(
    w: &Planned,
    out: &modes::Emitted,
    base: usize,
    files: &mut lines::Tables,
) -> Result<FunctionMeta, Error> {
    let l = &w.lowered;
    let fpos = ir::function_pos(w.func);
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
    Ok(FunctionMeta {
        name: w.name.clone(),
        linkage: linkage_of(w.func),
        loc,
        num_blocks: l.cfg.num_blocks() as u32,
        edges: FunctionMeta::edges_of(&l.cfg),
        blocks,
        cfg_hash: l.cfg.shape_hash(),
        counter_base: CounterIdx(base as u32),
        counters: out.counters.clone(),
        mode_meta: FunctionModeMeta::from_parts(ModeParts {
            zero_edges: out.zero_edges.iter().map(|&e| e.into()).collect(),
            unknown_edges: out.unknown_edges.iter().map(|&e| e.into()).collect(),
            paths: out.paths.clone(),
            events: out.events.clone(),
            wtrace: out.wtrace.clone(),
        })
        .map_err(|e| Error::Meta {
            function: w.name.clone(),
            message: e.to_string(),
        })?,
        source: w.source.clone(),
    })
}

/// The module's metadata blob and registration, mem2reg where instrumentation left allocas
/// for it, verification, and the bitcode.
fn finish(
    module: &inkwell::module::Module,
    globals: &emit::Globals,
    meta: &ModuleMeta,
    tables: usize,
    mem2reg: bool,
    opts: &Options,
    oracle: Option<&Oracle>,
) -> Result<Vec<u8>, Error> {
    let blob = meta.encode();
    let hash = tally_graph::hash::fnv64(&blob);
    let flags = if meta.mode.counts_events() {
        tally_format::abi::MODULE_FLAG_EVENTS
    } else {
        0
    } | if opts.atomic {
        tally_format::abi::MODULE_FLAG_ATOMIC
    } else {
        0
    } | if matches!(
        meta.mode,
        tally_format::Mode::Edge | tally_format::Mode::EdgesNaive
    ) {
        tally_format::abi::MODULE_FLAG_DIFFABLE
    } else {
        0
    };
    module::emit_registration(
        globals,
        &blob,
        hash,
        u64::from(meta.num_counters),
        tables as u64,
        flags,
    );
    if let Some(o) = oracle {
        let om = o.meta(meta, hash);
        let blob = om.encode();
        module::emit_registration(
            &o.g,
            &blob,
            tally_graph::hash::fnv64(&blob),
            u64::from(om.num_counters),
            0,
            (flags & !tally_format::abi::MODULE_FLAG_EVENTS)
                | tally_format::abi::MODULE_FLAG_DIFFABLE,
        );
    }
    if let Some(dir) = &opts.profile_dir {
        module::emit_profile_dir(globals.module, dir);
    }
    let verify_error = |message: String| Error::Verify {
        source_file: opts.source.clone(),
        message,
    };
    if mem2reg {
        // Path mode: a loop whose register takes the same value on every back edge has it
        // constant after one peeled iteration (`module::PEEL`).
        let peel = meta.mode == tally_format::Mode::Path;
        module::promote_allocas(module, peel).map_err(verify_error)?;
    }
    module.verify().map_err(|e| verify_error(e.to_string()))?;
    Ok(module.write_bitcode_to_memory().as_slice().to_vec())
}
