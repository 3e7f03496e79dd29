//! Structured fuzzing of the metadata contract: random module metadata, valid and
//! subtly invalid (indices out of range, short or long arrays, wrong lengths, inconsistent
//! paths, events, trace plans and interprocedural sets, two modes' facts at once, bad edge
//! kinds, overlapping counters, names with newlines), wrapped in a profile whose hashes are
//! right, goes through everything `tally report`, `tally paths` and `tally placements` do:
//! read, combine, analyze, render text and JSON, paths text and JSON, placement scores, and the
//! source-level model with `show`, `report --lines`, LCOV and Cobertura (the metadata's source
//! lines, scopes and branches are generated and mutated too). No case may panic, and every
//! refusal must be one line. Every mode is generated: trace mode's functions with the plans
//! `tally_graph::witness` makes, the `ipath` modes' modules with a set numbered as the
//! instrumenter numbers it.

//! The graphs and counts come from tally-graph's test support (random graphs, simulated
//! executions, the real placements), so valid cases reach the arithmetic; invalid ones are
//! valid ones with one to three mutations, most followed by recomputing the graph hash so that
//! the mutation is not caught by the hash alone.
//!
//! `TALLY_FUZZ_CASES=N` sets the number of cases (default 3000, the CI slice);
//! `TALLY_FUZZ_SEED=S` the first seed (cases use seeds `S .. S+N`); `TALLY_FUZZ_VERBOSE=1`
//! prints each seed before its case (to find one that aborts the process).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;
use std::time::Instant;

use tally_format::profile::{PathEntry, PathEntryKind, Profile, ProfileModule};
use tally_format::{
    BlockIdx, CallSiteMeta, CounterIdx, EdgeIdx, EventMeta, FileIdx, FunctionMeta,
    FunctionModeMeta, IpathCall, IpathFunction, IpathMeta, Linkage, Loc, Mode, ModeParts,
    ModuleMeta, ModuleModeMeta, PathMeta, PathStorage, Probe, StoredKind, WCallee, WtraceMeta,
};
use tally_format::{BranchMeta, LineRun, ScopeIdx, ScopeMeta, SourceFn, SourceFnIdx, SourceMeta};
use tally_graph::paths::{number_paths_limited, NumberedDag};
use tally_graph::testing::{random_cfg_with, simulate, GenConfig, Rng, SimConfig};
use tally_graph::{block_counts, heuristic_weights, place_edge_counters, Cfg, EdgeId, IdVec};

const MODES: [Mode; 11] = [
    Mode::Edge,
    Mode::EdgesNaive,
    Mode::BlocksNaive,
    Mode::Vertex,
    Mode::Path,
    Mode::Events,
    Mode::EventsNaive,
    Mode::TraceNaive,
    Mode::Trace,
    Mode::Ipath,
    Mode::IpathPiecewise,
];

/// Small numbers, boundary values and huge ones.
fn wild(rng: &mut Rng, near: u32) -> u32 {
    match rng.below(6) {
        0 => u32::MAX,
        1 => u32::MAX - 1,
        2 => near,
        3 => near.saturating_add(1),
        4 => rng.next_u64() as u32,
        _ => rng.below(near as usize + 3) as u32,
    }
}

fn wild_count(rng: &mut Rng) -> u64 {
    match rng.below(5) {
        0 => u64::MAX,
        1 => u64::MAX / 2 + 1,
        2 => rng.next_u64(),
        _ => rng.below(100) as u64,
    }
}

/// A path entry to be: `(kind, path, count)`.
type Entry = (PathEntryKind, u64, u64);

/// One function of a module in `mode`, its counter values, and its hashed path entries.
struct Built {
    f: FunctionMeta,
    values: Vec<u64>,
    entries: Vec<(PathEntryKind, u64, u64)>,
}

fn build_function(rng: &mut Rng, mode: Mode, name: String, base: u32, table: &mut u32) -> Built {
    let config = GenConfig {
        max_blocks: 1 + rng.below(10),
        ..GenConfig::default()
    };
    let cfg = random_cfg_with(rng, &config);
    let sim = SimConfig {
        calls: rng.below(5) as u64,
        step_budget: 30,
        ..SimConfig::default()
    };
    let truth = simulate(&cfg, rng, &sim);
    let blocks_truth = block_counts(&cfg, &truth).expect("a simulated run conserves flow");
    let w = heuristic_weights(&cfg);
    let mut counters = Vec::new();
    let mut values = Vec::new();
    let mut zero_edges = Vec::new();
    let mut unknown_edges = Vec::new();
    let mut paths = None;
    let mut events = None;
    let mut wtrace = None;
    let mut entries = Vec::new();
    let edge = |e: EdgeId| EdgeIdx::from(e);
    match mode {
        Mode::Edge => {
            for e in place_edge_counters(&cfg, &w, |_| false).chords {
                counters.push(Probe::Edge(edge(e)));
                values.push(truth[e]);
            }
        }
        Mode::EdgesNaive => {
            for (e, _) in cfg.edges() {
                counters.push(Probe::Edge(edge(e)));
                values.push(truth[e]);
            }
        }
        Mode::BlocksNaive => {
            for n in cfg.blocks() {
                counters.push(Probe::Block(n.into()));
                values.push(blocks_truth[n]);
            }
        }
        Mode::Vertex => {
            let vp = tally_graph::vertex::place_vertex_counters(&cfg, &w, |_| false);
            for &e in &vp.counted {
                counters.push(Probe::Edge(edge(e)));
                values.push(truth[e]);
            }
            zero_edges = vp.dropped.iter().map(|&e| edge(e)).collect();
            unknown_edges = vp
                .undetermined
                .iter()
                .filter(|(_, u)| **u)
                .map(|(e, _)| edge(e))
                .collect();
        }
        Mode::Path if rng.percent(85) => {
            let limit = if rng.percent(30) {
                2 + rng.below(6) as u128
            } else {
                1 << 62
            };
            // A function whose paths cannot be numbered within the limit keeps edge counters,
            // as the instrumenter's fallback does.
            if let Ok(numbered) = number_paths_limited(&cfg, limit) {
                let total = numbered.total();
                let hashed = total > 16 || rng.percent(20);
                let count = |rng: &mut Rng| {
                    if rng.percent(60) {
                        0
                    } else {
                        rng.below(4) as u64
                    }
                };
                let storage = if hashed {
                    let n = 1 + rng.below(4);
                    for _ in 0..n {
                        let p = rng.next_u64() as u128 % total.max(1);
                        entries.push((PathEntryKind::Count, p as u64, count(rng)));
                    }
                    *table += 1;
                    PathStorage::Hash { table: *table - 1 }
                } else {
                    for p in 0..total as u32 {
                        counters.push(Probe::Path(u64::from(p)));
                        values.push(count(rng));
                    }
                    PathStorage::Array
                };
                paths = Some(PathMeta {
                    cuts: numbered.dag().cuts().map(edge).collect(),
                    num_paths: total,
                    storage,
                    numbering: numbered.fingerprint(),
                });
            }
        }
        Mode::Path => {}
        Mode::Events | Mode::EventsNaive => {
            let calls: Vec<CallSiteMeta> = (0..rng.below(4))
                .map(|i| CallSiteMeta {
                    block: BlockIdx(rng.below(cfg.num_blocks()) as u32),
                    callee: rng.percent(70).then(|| format!("callee{i}")),
                    counter: CounterIdx(1 + i as u32),
                })
                .collect();
            for _ in 0..=calls.len() {
                counters.push(Probe::Events);
                values.push(wild_count(rng));
            }
            events = Some(EventMeta {
                per_block: (0..cfg.num_blocks()).map(|_| rng.below(9) as u64).collect(),
                inclusive: CounterIdx(0),
                calls,
            });
        }
        Mode::Trace => wtrace = Some(trace_meta(rng, &cfg)),
        Mode::TraceNaive | Mode::Ipath | Mode::IpathPiecewise => {}
    }
    if mode == Mode::Path && paths.is_none() {
        for e in place_edge_counters(&cfg, &w, |_| false).chords {
            counters.push(Probe::Edge(edge(e)));
            values.push(truth[e]);
        }
    }
    let loc = |rng: &mut Rng| Loc {
        file: rng.percent(80).then_some(FileIdx(0)),
        line: rng.below(50) as u32,
    };
    let source = source_meta(rng, &cfg);
    let f = FunctionMeta {
        name,
        linkage: rng
            .pick(&[Linkage::External, Linkage::Internal, Linkage::Linkonce])
            .expect("three"),
        loc: loc(rng),
        num_blocks: cfg.num_blocks() as u32,
        edges: FunctionMeta::edges_of(&cfg),
        blocks: (0..cfg.num_blocks()).map(|_| loc(rng)).collect(),
        cfg_hash: cfg.shape_hash(),
        counter_base: CounterIdx(base),
        counters,
        mode_meta: FunctionModeMeta::from_parts(ModeParts {
            zero_edges,
            unknown_edges,
            paths,
            events,
            wtrace,
        })
        .expect("one mode's facts"),
        source,
    };
    Built { f, values, entries }
}

/// Trace mode's facts of a random graph, as the instrumenter plans them: random call sites
/// (opaque, unknown, direct, external), the cheaper of the witness and branch plans
/// (`tally_graph::witness`), or, when the plan fails its check (or at random), an untraced
/// function.
fn trace_meta(rng: &mut Rng, cfg: &Cfg) -> WtraceMeta {
    use tally_graph::witness::{
        branch_plan, cheaper_plan, check_plan, CallSite, Callee, FunctionInput, PlanKind,
    };
    let untraced = |why: &str| WtraceMeta {
        calls: vec![],
        witness: vec![],
        read_bits: vec![],
        unwind: vec![],
        branch: false,
        paths: None,
        untraced: Some(why.into()),
    };
    if rng.percent(10) {
        return untraced("fuzz: untraced");
    }
    let calls: Vec<Vec<WCallee>> = cfg
        .blocks()
        .map(|_| {
            (0..rng.below(3))
                .map(|i| match rng.below(4) {
                    0 => WCallee::Opaque,
                    1 => WCallee::Unknown,
                    2 => WCallee::Direct(["f", "g", "h"][i % 3].into()),
                    _ => WCallee::Extern {
                        name: "ext".into(),
                        index: rng.below(3) as u32,
                    },
                })
                .collect()
        })
        .collect();
    let mut sites: Vec<Vec<CallSite>> = calls
        .iter()
        .map(|b| {
            b.iter()
                .map(|c| CallSite {
                    callee: if *c == WCallee::Opaque {
                        Callee::Opaque
                    } else {
                        Callee::Unknown
                    },
                })
                .collect()
        })
        .collect();
    sites.push(Vec::new());
    let input = FunctionInput {
        cfg: cfg.clone(),
        calls: IdVec::from_vec(sites),
        unwind: IdVec::filled(cfg.num_edges(), false),
    };
    let plan = if rng.percent(30) {
        branch_plan(&input)
    } else {
        cheaper_plan(&input, &IdVec::filled(cfg.num_edges(), 1.0))
    };
    if check_plan(&input, &plan).is_err() {
        return untraced("fuzz: the plan fails its check");
    }
    WtraceMeta {
        calls,
        witness: plan
            .witness
            .values()
            .iter()
            .map(|w| w.map(|w| (w.value, w.bits)))
            .collect(),
        read_bits: plan.read_bits.values().to_vec(),
        unwind: vec![],
        branch: plan.kind == PlanKind::Branch,
        paths: None,
        untraced: None,
    }
}

/// An interprocedural path set over a module's functions (modes `ipath`, `ipath-piecewise`),
/// numbered as the instrumenter numbers it (`IpNumbering::new_limited`): random direct and
/// unknown call sites, function 0 the table's owner (its paths hashed in table 0), and a few
/// path entries; `None` when the set cannot be numbered (its functions then count nothing).
fn ipath_set(
    rng: &mut Rng,
    mode: Mode,
    functions: &mut [FunctionMeta],
) -> Option<(IpathMeta, Vec<Entry>)> {
    use tally_graph::ipaths::{IpNumbering, Mode as IpMode};
    if functions.is_empty() {
        return None;
    }
    let n = functions.len();
    let set: Vec<IpathFunction> = functions
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut calls = Vec::new();
            for b in 0..f.num_blocks {
                for position in 0..rng.below(3) as u32 {
                    calls.push(IpathCall {
                        block: BlockIdx(b),
                        position,
                        callee: rng.percent(70).then(|| rng.below(n) as u32),
                        context_cut: None,
                    });
                }
            }
            IpathFunction {
                function: i as u32,
                from_outside: i == 0 || rng.percent(50),
                calls,
                cuts: vec![],
                array: None,
            }
        })
        .collect();
    let graphs: Vec<_> = set
        .iter()
        .zip(functions.iter())
        .map(|(s, f)| s.to_function(f.cfg().expect("a generated graph")))
        .collect();
    let ip_mode = match mode {
        Mode::IpathPiecewise => IpMode::Piecewise,
        _ => IpMode::Context,
    };
    let limit = 1u128 << 40;
    let num = IpNumbering::new_limited(graphs, ip_mode, limit).ok()?;
    let total = num.total();
    functions[0].mode_meta = FunctionModeMeta::Path(PathMeta {
        cuts: vec![],
        num_paths: total,
        storage: PathStorage::Hash { table: 0 },
        numbering: num.fingerprint(),
    });
    let entries = (0..rng.below(4))
        .map(|_| {
            let p = rng.next_u64() as u128 % total.max(1);
            (PathEntryKind::Count, p as u64, rng.below(4) as u64)
        })
        .collect();
    let meta = IpathMeta {
        functions: set,
        limit,
        total,
        fingerprint: num.fingerprint(),
        table_owner: 0,
    };
    Some((meta, entries))
}

/// Source lines of a random graph: scopes in a random inline tree, a few line runs per block,
/// a branch for every block with two or more flow edges out (sometimes none at all).
fn source_meta(rng: &mut Rng, cfg: &Cfg) -> SourceMeta {
    if rng.percent(15) {
        return SourceMeta::default();
    }
    let scopes: Vec<ScopeMeta> = (0..1 + rng.below(4))
        .map(|i| ScopeMeta {
            func: rng
                .percent(90)
                .then(|| SourceFnIdx(rng.below(SOURCE_FNS) as u32)),
            parent: ScopeIdx(if i == 0 { 0 } else { rng.below(i) as u32 }),
            call: Loc {
                file: Some(FileIdx(0)),
                line: if i == 0 { 0 } else { 1 + rng.below(40) as u32 },
            },
        })
        .collect();
    let lines = cfg
        .blocks()
        .map(|_| {
            (0..rng.below(4))
                .map(|_| LineRun {
                    loc: Loc {
                        file: rng.percent(90).then_some(FileIdx(0)),
                        line: 1 + rng.below(12) as u32,
                    },
                    scope: ScopeIdx(rng.below(scopes.len()) as u32),
                })
                .collect()
        })
        .collect();
    let mut branches = Vec::new();
    for n in cfg.blocks() {
        let out: Vec<EdgeIdx> = cfg
            .edges()
            .filter(|(_, e)| e.src == n && e.kind == tally_graph::EdgeKind::Flow)
            .map(|(id, _)| EdgeIdx::from(id))
            .collect();
        if out.len() >= 2 {
            branches.push(BranchMeta {
                loc: Loc {
                    file: Some(FileIdx(0)),
                    line: 1 + rng.below(12) as u32,
                },
                scope: ScopeIdx(0),
                edges: out,
            });
        }
    }
    SourceMeta {
        scopes,
        lines,
        branches,
    }
}

/// Source functions listed per module.
const SOURCE_FNS: usize = 3;

fn source_fns() -> Vec<SourceFn> {
    (0..SOURCE_FNS)
        .map(|i| SourceFn {
            name: format!("sf{i}"),
            linkage_name: if i == 2 {
                "_Z3sf2v".into()
            } else {
                String::new()
            },
            loc: Loc {
                file: Some(FileIdx(0)),
                line: 1 + i as u32,
            },
        })
        .collect()
}

/// A module in `mode` with up to four functions; returns the module and its path entries.
fn build_module(rng: &mut Rng, mode: Mode, source: &str, names: &[&str]) -> ProfileModule {
    let events = matches!(mode, Mode::Events | Mode::EventsNaive);
    let mut base = u32::from(events);
    let mut values = vec![wild_count(rng); base as usize];
    let mut functions = Vec::new();
    let mut paths = Vec::new();
    let mut table = 0;
    for (i, name) in names.iter().enumerate() {
        let b = build_function(rng, mode, name.to_string(), base, &mut table);
        base += b.values.len() as u32;
        values.extend(b.values);
        for (kind, path, count) in b.entries {
            paths.push(PathEntry {
                function: i as u32,
                kind,
                path,
                count,
            });
        }
        functions.push(b.f);
    }
    let mut module_mode = if events {
        ModuleModeMeta::Events {
            kind: "insns".to_string(),
        }
    } else {
        ModuleModeMeta::None
    };
    if matches!(mode, Mode::Ipath | Mode::IpathPiecewise) {
        if let Some((ip, entries)) = ipath_set(rng, mode, &mut functions) {
            module_mode = ModuleModeMeta::Ipath(ip);
            for (kind, path, count) in entries {
                paths.push(PathEntry {
                    function: 0,
                    kind,
                    path,
                    count,
                });
            }
        }
    }
    let meta = ModuleMeta {
        source: source.into(),
        producer: "meta fuzz".into(),
        mode,
        num_counters: base,
        files: vec![format!("/nonexistent/{source}")],
        functions,
        source_fns: source_fns(),
        skipped: vec![],
        mode_meta: module_mode,
        oracle_for: None,
    };
    let mut m = ProfileModule::new(meta, values);
    m.paths = paths;
    m
}

fn rehash(f: &mut FunctionMeta) {
    if let Ok(cfg) = f.cfg() {
        f.cfg_hash = cfg.shape_hash();
    }
}

fn some_edge(rng: &mut Rng, f: &FunctionMeta) -> EdgeIdx {
    let n = f.edges.len() as u32 + 1;
    EdgeIdx(wild(rng, n))
}

/// A refusal message: one line.
fn assert_one_line(msg: &str) {
    assert!(!msg.contains('\n'), "a refusal over several lines: {msg:?}");
}

/// One mutation of a function's mode facts (stored fields `p`; the function has `edges` edges,
/// `nb` blocks, `nc` counters and `nblocks` block locations; its module `nfun` functions).
fn mode_parts(
    rng: &mut Rng,
    p: &mut ModeParts,
    edges: u32,
    nb: u32,
    nfun: u32,
    nc: u32,
    nblocks: usize,
) {
    let some_edge = |rng: &mut Rng| EdgeIdx(wild(rng, edges));
    match rng.below(18) + 10 {
        10 => {
            let e = some_edge(rng);
            p.zero_edges.push(e);
        }
        11 => {
            let e = some_edge(rng);
            p.unknown_edges.push(e);
        }
        12 => {
            let e = some_edge(rng);
            match &mut p.paths {
                Some(pm) => pm.cuts.push(e),
                None => p.zero_edges.push(e),
            }
        }
        13 => {
            if let Some(pm) = &mut p.paths {
                pm.cuts.pop();
            }
        }
        14 => {
            if let Some(pm) = &mut p.paths {
                pm.num_paths = match rng.below(3) {
                    0 => u128::MAX,
                    1 => pm.num_paths + 1,
                    _ => pm.num_paths.saturating_sub(1),
                };
            }
        }
        15 => {
            if let Some(pm) = &mut p.paths {
                pm.numbering ^= 1 << rng.below(64);
            }
        }
        16 => {
            if let Some(pm) = &mut p.paths {
                pm.storage = match pm.storage {
                    PathStorage::Array => PathStorage::Hash {
                        table: wild(rng, nfun),
                    },
                    PathStorage::Hash { .. } if rng.percent(50) => PathStorage::Array,
                    PathStorage::Hash { .. } => PathStorage::Hash {
                        table: wild(rng, 2),
                    },
                };
            }
        }
        17 => {
            p.paths = match p.paths.take() {
                Some(_) => None,
                None => Some(PathMeta {
                    cuts: vec![],
                    num_paths: rng.below(5) as u128,
                    storage: PathStorage::Array,
                    numbering: rng.next_u64(),
                }),
            }
        }
        18 => {
            if let Some(e) = &mut p.events {
                let n = rng.below(e.per_block.len() + 2);
                e.per_block.resize(n, 1);
            }
        }
        19 => {
            if let Some(c) = p.events.as_mut().and_then(|e| e.calls.first_mut()) {
                c.block = BlockIdx(wild(rng, nb));
            }
        }
        20 => {
            if let Some(e) = &mut p.events {
                let c = CounterIdx(wild(rng, nc));
                match e.calls.first_mut() {
                    Some(call) if rng.percent(50) => call.counter = c,
                    _ => e.inclusive = c,
                }
            }
        }
        21 => {
            p.events = match p.events.take() {
                Some(_) => None,
                None => Some(EventMeta {
                    per_block: vec![1; nblocks],
                    inclusive: CounterIdx(0),
                    calls: vec![],
                }),
            }
        }
        22 => {
            if let Some(w) = &mut p.wtrace {
                let i = rng.below(w.witness.len().max(1));
                if let Some(x) = w.witness.get_mut(i) {
                    *x = rng.percent(70).then(|| (wild(rng, 4), rng.below(34) as u8));
                }
            }
        }
        23 => {
            if let Some(w) = &mut p.wtrace {
                if rng.percent(50) {
                    w.witness.pop();
                } else {
                    w.witness.push(None);
                }
            }
        }
        24 => {
            if let Some(w) = &mut p.wtrace {
                let i = rng.below(w.read_bits.len() + 1);
                match w.read_bits.get_mut(i) {
                    Some(b) => *b = rng.below(40) as u8,
                    None => w.read_bits.push(1),
                }
            }
        }
        25 => {
            let e = some_edge(rng);
            if let Some(w) = &mut p.wtrace {
                w.unwind.push(e);
            }
        }
        26 => {
            p.wtrace = match p.wtrace.take() {
                Some(mut w) if rng.percent(50) => {
                    w.untraced = w.untraced.xor(Some("fuzz".into()));
                    Some(w)
                }
                Some(_) => None,
                None => Some(WtraceMeta {
                    calls: vec![vec![]; nblocks],
                    witness: vec![None; edges as usize],
                    read_bits: vec![0; nblocks + 1],
                    unwind: vec![],
                    branch: false,
                    paths: None,
                    untraced: None,
                }),
            }
        }
        27 => {
            if let Some(w) = &mut p.wtrace {
                if rng.percent(50) {
                    w.branch = !w.branch;
                } else {
                    w.paths = w.paths.xor(Some(rng.next_u64()));
                }
            }
        }
        _ => unreachable!("18 cases"),
    }
}

/// One subtle mutation of a module's metadata (and sometimes its counters or path entries).
fn mutate(rng: &mut Rng, m: &mut ProfileModule) {
    let meta = &mut m.meta;
    let nf = meta.functions.len();
    if nf == 0 || rng.percent(10) {
        match rng.below(6) {
            0 => meta.num_counters = wild(rng, meta.num_counters),
            1 => {
                // Toggle the event kind; two modes' facts are refused in one line.
                let (kind, ip) = match std::mem::take(&mut meta.mode_meta) {
                    ModuleModeMeta::None => (Some("insns".to_string()), None),
                    ModuleModeMeta::Events { .. } => (None, None),
                    ModuleModeMeta::Ipath(ip) => (Some("insns".to_string()), Some(ip)),
                };
                meta.mode_meta = match ModuleModeMeta::from_parts(kind, ip.clone()) {
                    Ok(mm) => mm,
                    Err(e) => {
                        assert_one_line(&e.to_string());
                        ModuleModeMeta::Ipath(ip.expect("only a set conflicts"))
                    }
                };
            }
            2 => meta.mode = rng.pick(&MODES).expect("modes"),
            3 => meta.files.clear(),
            4 => {
                // The interprocedural set: its numbering, total, owner or a call site.
                if let Some(ip) = meta.ipath_mut() {
                    match rng.below(5) {
                        0 => ip.fingerprint ^= 1 << rng.below(64),
                        1 => ip.total = ip.total.wrapping_add(1),
                        2 => ip.table_owner = wild(rng, nf as u32),
                        3 => {
                            if let Some(c) =
                                ip.functions.iter_mut().flat_map(|f| &mut f.calls).next()
                            {
                                c.callee = c.callee.map_or(Some(wild(rng, nf as u32)), |_| None);
                            }
                        }
                        _ => {
                            if let Some(f) = ip.functions.first_mut() {
                                f.function = wild(rng, nf as u32);
                            }
                        }
                    }
                }
            }
            _ => m.counters.push(7),
        }
        return;
    }
    let fi = rng.below(nf);
    let nfun = nf as u32;
    let f = &mut meta.functions[fi];
    let nb = f.num_blocks;
    if rng.percent(25) {
        mutate_source(rng, &mut f.source, nb, f.edges.len() as u32 + 1);
        return;
    }
    match rng.below(32) {
        0 => {
            let i = rng.below(f.edges.len().max(1));
            if let Some(e) = f.edges.get_mut(i) {
                e.0 = BlockIdx(wild(rng, nb));
            }
        }
        1 => {
            let i = rng.below(f.edges.len().max(1));
            if let Some(e) = f.edges.get_mut(i) {
                e.1 = BlockIdx(wild(rng, nb));
            }
        }
        2 => {
            let i = rng.below(f.edges.len().max(1));
            if let Some(e) = f.edges.get_mut(i) {
                e.2 = rng
                    .pick(&[
                        StoredKind::Flow,
                        StoredKind::Return,
                        StoredKind::EarlyExit,
                        StoredKind::Reentry,
                    ])
                    .expect("kinds");
            }
        }
        3 => {
            let n = rng.below(f.blocks.len() + 2);
            f.blocks.resize(n, Loc::default());
        }
        4 => f.num_blocks = wild(rng, nb),
        5 => f.loc.file = Some(FileIdx(wild(rng, 1))),
        6 => {
            if let Some(l) = f.blocks.get_mut(rng.below(nb as usize)) {
                l.file = Some(FileIdx(wild(rng, 1)));
            }
        }
        7 => f.counter_base = CounterIdx(wild(rng, f.counter_base.0)),
        8 => {
            let at = rng.below(f.counters.len() + 1);
            let p = match rng.below(5) {
                0 => Probe::Edge(some_edge(rng, f)),
                1 => Probe::Block(BlockIdx(wild(rng, nb))),
                2 => Probe::Path(u64::from(wild(rng, 4))),
                3 => Probe::Events,
                _ => match f.counters.first() {
                    Some(&p) => p, // a duplicate
                    None => Probe::Edge(EdgeIdx(0)),
                },
            };
            if at < f.counters.len() && rng.percent(50) {
                f.counters[at] = p;
            } else {
                f.counters.insert(at.min(f.counters.len()), p);
            }
        }
        9 => {
            let n = rng.below(f.counters.len() + 1);
            f.counters.truncate(n);
        }
        10..=27 => {
            // The mode facts, as the optional fields they are stored as: any combination can
            // be written; two modes' at once is refused in one line (and not applied).
            let before = f.mode_meta.clone();
            let mut p = std::mem::take(&mut f.mode_meta).into_parts();
            let nc = f.counters.len() as u32;
            let nblocks = f.blocks.len();
            mode_parts(rng, &mut p, f.edges.len() as u32 + 1, nb, nfun, nc, nblocks);
            f.mode_meta = match FunctionModeMeta::from_parts(p) {
                Ok(mm) => mm,
                Err(e) => {
                    assert_one_line(&e.to_string());
                    before
                }
            };
        }
        28 => f.name = format!("bad\nname{fi}"),
        29 => {
            // A counter value from anywhere: inconsistent counts, overflows.
            let i = rng.below(m.counters.len().max(1));
            if let Some(c) = m.counters.get_mut(i) {
                *c = wild_count(rng);
            }
            return;
        }
        30 => {
            // Path entries naming other paths, other functions, huge counts.
            let function = rng.below(nf + 1) as u32;
            m.paths.push(PathEntry {
                function,
                kind: if rng.percent(80) {
                    PathEntryKind::Count
                } else {
                    PathEntryKind::Lost
                },
                path: wild_count(rng),
                count: wild_count(rng),
            });
            return;
        }
        _ => {
            // Another function's counters, or its name and graph (a linkonce twin).
            let other = meta.functions[rng.below(nf)].clone();
            let f = &mut meta.functions[fi];
            if rng.percent(50) {
                f.counter_base = other.counter_base;
            } else {
                f.name = other.name;
                f.linkage = Linkage::Linkonce;
            }
        }
    }
    if rng.percent(80) {
        rehash(&mut meta.functions[fi]);
    }
}

/// One mutation of a function's source lines.
fn mutate_source(rng: &mut Rng, s: &mut SourceMeta, nb: u32, ne: u32) {
    let ns = s.scopes.len() as u32;
    match rng.below(10) {
        0 => {
            let n = rng.below(s.lines.len() + 2);
            s.lines.resize(n, Vec::new());
        }
        1 => s.scopes.clear(),
        2 => {
            if let Some(sc) = s.scopes.last_mut() {
                sc.parent = ScopeIdx(wild(rng, ns));
            }
        }
        3 => {
            if let Some(sc) = s.scopes.first_mut() {
                sc.func = Some(SourceFnIdx(wild(rng, SOURCE_FNS as u32)));
            }
        }
        4 => {
            if let Some(r) = s.lines.iter_mut().flatten().next() {
                r.scope = ScopeIdx(wild(rng, ns));
            }
        }
        5 => {
            if let Some(r) = s.lines.iter_mut().flatten().next() {
                r.loc.line = if rng.percent(50) { 0 } else { u32::MAX };
            }
        }
        6 => {
            if let Some(r) = s.lines.iter_mut().flatten().next() {
                r.loc.file = Some(FileIdx(wild(rng, 1)));
            }
        }
        7 => {
            if let Some(b) = s.branches.first_mut() {
                match rng.below(3) {
                    0 => b.edges.truncate(1),
                    1 => b.edges.push(EdgeIdx(wild(rng, ne))),
                    _ => b.scope = ScopeIdx(wild(rng, ns)),
                }
            }
        }
        8 => s.branches.push(BranchMeta {
            loc: Loc {
                file: Some(FileIdx(0)),
                line: wild(rng, 10),
            },
            scope: ScopeIdx(0),
            edges: (0..rng.below(4)).map(|_| EdgeIdx(wild(rng, ne))).collect(),
        }),
        _ => {
            // A line run in a block that may not exist.
            let b = wild(rng, nb) as usize;
            if let Some(runs) = s.lines.get_mut(b) {
                runs.push(LineRun {
                    loc: Loc {
                        file: Some(FileIdx(0)),
                        line: wild(rng, 10).max(1),
                    },
                    scope: ScopeIdx(wild(rng, ns)),
                });
            }
        }
    }
}

/// What happened to one case.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Reported,
    RefusedRead(String),
    RefusedAnalyze,
}

/// Everything the CLI does with a profile, as `tally report`, `paths` and `placements` do.
fn pipeline(bytes: &[u8]) -> Result<Outcome, String> {
    let one_line = |e: String| {
        if e.contains('\n') || e.is_empty() {
            Err(format!("not one line: {e:?}"))
        } else {
            Ok(())
        }
    };
    let p = match Profile::read(bytes) {
        Ok(p) => p,
        Err(e) => {
            one_line(e.to_string())?;
            return Ok(Outcome::RefusedRead(e.to_string()));
        }
    };
    let twice = tally_report::combine(("a", &p), &[("b", &p)]);
    let mut outcome = Outcome::Reported;
    for p in [Ok(p.clone()), twice.map_err(|e| e.to_string())] {
        let p = match p {
            Ok(p) => p,
            Err(e) => {
                one_line(e)?;
                continue;
            }
        };
        let r = match tally_report::analyze(&p, &tally_report::Inputs::default()) {
            Ok(r) => r,
            Err(e) => {
                one_line(e.to_string())?;
                outcome = Outcome::RefusedAnalyze;
                continue;
            }
        };
        for all in [false, true] {
            let mut o = tally_report::render::TextOptions {
                source: false,
                ..Default::default()
            };
            if all {
                o.top = 0;
                o.detail = 0;
                o.blocks = 0;
                o.show_unexecuted = true;
            }
            tally_report::render::text(&r, "t", &o);
        }
        tally_report::render::json(&r, "t");
        // The source-level model and everything that renders it.
        let m = tally_report::source::model(&r);
        let all = |_: &tally_report::source::SourceFunction| true;
        for function in [None, Some(&all as &dyn Fn(&_) -> bool)] {
            tally_report::show::show(
                &m,
                &tally_report::show::ShowOptions {
                    function,
                    files: vec![],
                    branches: true,
                },
            );
        }
        tally_report::show::lines_text(&m, "t", 0, false);
        tally_report::render::json_with_lines(&r, "t", &m);
        tally_report::lcov::lcov(&m, "t");
        tally_report::cobertura::cobertura(&m);
        tally_report::render::paths_text(&r, "t", 10, false);
        tally_report::render::paths_text(&r, "t", 0, true);
        tally_report::render::paths_json(&r, "t");
        let s = tally_report::placements::score(&r);
        tally_report::placements::text(&s, "t", &r.program);
        tally_report::placements::json(&s, "t", &r.program);
        Profile {
            pid: 0,
            program: Default::default(),
            modules: p.modules.clone(),
            unfinished: false,
            raced: false,
            signal: None,
        }
        .write();
    }
    Ok(outcome)
}

/// The profile bytes of case `seed`, and whether it was mutated.
fn case(seed: u64) -> (Vec<u8>, bool) {
    let mut rng = Rng::new(seed);
    let mode = rng.pick(&MODES).expect("modes");
    let mut modules = Vec::new();
    let names = ["f", "g", "h", "_Z3fooi"];
    for source in ["a.c", "b.cc"].iter().take(1 + rng.below(2)) {
        let n = rng.below(5);
        modules.push(build_module(&mut rng, mode, source, &names[..n]));
    }
    let mutated = rng.percent(60);
    if mutated {
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(modules.len());
            mutate(&mut rng, &mut modules[i]);
        }
        // The metadata was edited after encoding: encode again, hash right.
        for m in &mut modules {
            let paths = std::mem::take(&mut m.paths);
            let counters = std::mem::take(&mut m.counters);
            *m = ProfileModule::new(m.meta.clone(), counters);
            m.paths = paths;
        }
    }
    (
        Profile {
            pid: seed,
            program: Default::default(),
            modules,
            unfinished: false,
            raced: false,
            signal: None,
        }
        .write(),
        mutated,
    )
}

static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

#[test]
fn metadata_fuzz_never_panics() {
    let cases: u64 = std::env::var("TALLY_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let first: u64 = std::env::var("TALLY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7a11_7000);
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = info.to_string();
    }));
    let start = Instant::now();
    let (mut reported, mut refused_read, mut refused_analyze, mut mutated_reported) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    let verbose = std::env::var_os("TALLY_FUZZ_VERBOSE").is_some();
    for seed in first..first + cases {
        if verbose {
            eprintln!("seed {seed:#x}");
        }
        let run = catch_unwind(AssertUnwindSafe(|| {
            let (bytes, mutated) = case(seed);
            (pipeline(&bytes), mutated)
        }));
        match run {
            Ok((Ok(Outcome::Reported), mutated)) => {
                reported += 1;
                mutated_reported += u64::from(mutated);
            }
            // Metadata as the instrumenter writes it always passes validation.
            Ok((Ok(Outcome::RefusedRead(e)), false)) => {
                failures.push((seed, format!("a valid profile was refused: {e}")))
            }
            Ok((Ok(Outcome::RefusedRead(_)), true)) => refused_read += 1,
            Ok((Ok(Outcome::RefusedAnalyze), _)) => refused_analyze += 1,
            Ok((Err(e), _)) => failures.push((seed, e)),
            Err(_) => {
                let msg = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).clone();
                failures.push((seed, format!("panic: {msg}")));
            }
        }
    }
    std::panic::set_hook(hook);
    eprintln!(
        "meta fuzz: {cases} cases from seed {first:#x} in {:.1} s: {reported} reported \
         ({mutated_reported} of them mutated), {refused_read} refused by the reader, \
         {refused_analyze} by the analysis, {} failures",
        start.elapsed().as_secs_f64(),
        failures.len()
    );
    for (seed, e) in failures.iter().take(10) {
        eprintln!("  seed {seed:#x}: {e}");
    }
    assert!(failures.is_empty(), "{} failing cases", failures.len());
    // The generator reaches every stage.
    if cases >= 1000 {
        assert!(reported > cases / 10 && refused_read > cases / 10 && refused_analyze > 0);
    }
}

/// A valid case renumbered on the reader's side differently than stored is refused by the
/// fingerprint, not mislabelled.
#[test]
fn a_different_numbering_is_refused() {
    let mut rng = Rng::new(5);
    let cfg: Cfg = loop {
        let g = random_cfg_with(
            &mut rng,
            &GenConfig {
                max_blocks: 8,
                ..GenConfig::default()
            },
        );
        if tally_graph::paths::number_paths(&g).is_ok_and(|n| n.total() > 2) {
            break g;
        }
    };
    let numbered: NumberedDag = tally_graph::paths::number_paths(&cfg).unwrap();
    let total = numbered.total();
    let f = FunctionMeta {
        name: "p".into(),
        linkage: Linkage::External,
        loc: Loc::default(),
        num_blocks: cfg.num_blocks() as u32,
        edges: FunctionMeta::edges_of(&cfg),
        blocks: vec![Loc::default(); cfg.num_blocks()],
        cfg_hash: cfg.shape_hash(),
        counter_base: CounterIdx(0),
        counters: (0..total as u64).map(Probe::Path).collect(),
        mode_meta: FunctionModeMeta::Path(PathMeta {
            cuts: vec![],
            num_paths: total,
            storage: PathStorage::Array,
            numbering: numbered.fingerprint() ^ 1,
        }),
        source: Default::default(),
    };
    let meta = ModuleMeta {
        source: "p.c".into(),
        producer: "test".into(),
        mode: Mode::Path,
        num_counters: total as u32,
        files: vec![],
        functions: vec![f],
        source_fns: vec![],
        skipped: vec![],
        mode_meta: Default::default(),
        oracle_for: None,
    };
    let bytes = Profile {
        pid: 1,
        program: Default::default(),
        modules: vec![ProfileModule::new(meta.clone(), vec![0; total as usize])],
        unfinished: false,
        raced: false,
        signal: None,
    }
    .write();
    let p = Profile::read(&bytes).unwrap();
    let e = tally_report::analyze(&p, &tally_report::Inputs::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("function p (p.c)") && e.contains("path numbering") && !e.contains('\n'),
        "{e}"
    );
    // With the right fingerprint the same profile reports.
    let mut good = meta;
    good.functions[0].paths_mut().unwrap().numbering = numbered.fingerprint();
    let p = Profile {
        pid: 1,
        program: Default::default(),
        modules: vec![ProfileModule::new(good, vec![0; total as usize])],
        unfinished: false,
        raced: false,
        signal: None,
    };
    tally_report::analyze(&p, &tally_report::Inputs::default()).unwrap();
}

/// The generator's trace and interprocedural metadata is what the instrumenter writes: it
/// passes validation (trace plans included), its sets' numberings are the reader's, and it
/// reaches the analysis; most trace functions are traced and most modules have a set.
#[test]
fn generated_trace_and_ipath_metadata_is_valid() {
    let (mut traced, mut functions, mut sets, mut modules) = (0, 0, 0, 0);
    for seed in 0..300 {
        for mode in [Mode::Trace, Mode::Ipath, Mode::IpathPiecewise] {
            let mut rng = Rng::new(seed);
            let m = build_module(&mut rng, mode, "a.c", &["f", "g", "h"]);
            if let Err(e) = m.meta.validate() {
                panic!("seed {seed}, {}: {e}", mode.name());
            }
            if mode == Mode::Trace {
                functions += m.meta.functions.len();
                traced += (m.meta.functions.iter())
                    .filter(|f| f.wtrace().is_some_and(|w| w.untraced.is_none()))
                    .count();
                continue;
            }
            modules += 1;
            sets += usize::from(m.meta.ipath().is_some());
            let p = Profile {
                pid: 1,
                program: Default::default(),
                modules: vec![m],
                unfinished: false,
                raced: false,
                signal: None,
            };
            let p = Profile::read(&p.write()).expect("reads back");
            if let Err(e) = tally_report::analyze(&p, &tally_report::Inputs::default()) {
                panic!("seed {seed}, {}: {e}", mode.name());
            }
        }
    }
    assert!(traced * 2 > functions, "{traced} of {functions} traced");
    assert!(sets * 2 > modules, "{sets} of {modules} modules with a set");
}
