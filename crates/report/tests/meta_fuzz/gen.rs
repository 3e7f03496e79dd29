//! The generators: random module metadata of every mode, valid as the instrumenter writes it
//! (graphs, placements, path numberings, trace plans, interprocedural sets, source lines).

use super::*;

/// Small numbers, boundary values and huge ones.
pub(crate) fn wild(rng: &mut Rng, near: u32) -> u32 {
    match rng.below(6) {
        0 => u32::MAX,
        1 => u32::MAX - 1,
        2 => near,
        3 => near.saturating_add(1),
        4 => rng.next_u64() as u32,
        _ => rng.below(near as usize + 3) as u32,
    }
}

pub(crate) fn wild_count(rng: &mut Rng) -> u64 {
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
pub(crate) struct Built {
    f: FunctionMeta,
    values: Vec<u64>,
    entries: Vec<(PathEntryKind, u64, u64)>,
}

pub(crate) fn build_function(
    rng: &mut Rng,
    mode: Mode,
    name: String,
    base: u32,
    table: &mut u32,
) -> Built {
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
pub(crate) fn trace_meta(rng: &mut Rng, cfg: &Cfg) -> WtraceMeta {
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
pub(crate) fn ipath_set(
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
pub(crate) fn source_meta(rng: &mut Rng, cfg: &Cfg) -> SourceMeta {
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
            call_probe: if i == 0 { 0 } else { rng.below(8) as u32 },
            top_level: i > 0 && rng.below(4) == 0,
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
    // Pseudo-probes (a `-fpseudo-probe-for-profiling` build): sometimes none, else a few per
    // block, repeated ids included (an unrolled body).
    let probes = if rng.percent(50) {
        Vec::new()
    } else {
        (0..cfg.num_blocks())
            .map(|_| {
                (0..rng.below(4))
                    .map(|_| ProbeAt {
                        desc: rng.below(PROBE_DESCS) as u32,
                        id: 1 + rng.below(6) as u32,
                        scope: ScopeIdx(rng.below(scopes.len().max(1)) as u32),
                    })
                    .collect()
            })
            .collect()
    };
    SourceMeta {
        scopes,
        lines,
        branches,
        probes,
        call_targets: vec![],
        direct_calls: vec![],
    }
}

/// Pseudo-probe descriptors listed per module.
pub(crate) const PROBE_DESCS: usize = 2;

pub(crate) fn probe_descs() -> Vec<ProbeDesc> {
    (0..PROBE_DESCS as u64)
        .map(|i| ProbeDesc {
            guid: 0x1234_5678_9abc_def0 ^ i,
            checksum: 1000 + i,
            name: format!("probed{i}"),
        })
        .collect()
}

/// Source functions listed per module.
pub(crate) const SOURCE_FNS: usize = 3;

pub(crate) fn source_fns() -> Vec<SourceFn> {
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
pub(crate) fn build_module(
    rng: &mut Rng,
    mode: Mode,
    source: &str,
    names: &[&str],
) -> ProfileModule {
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
    // Direct calls with a call-site probe (`--tally-pgo`): counted by their blocks.
    for f in &mut functions {
        if rng.percent(30) {
            f.source.direct_calls.push(DirectCall {
                block: rng.below(f.num_blocks as usize) as u32,
                probe: 1 + rng.below(6) as u32,
                scope: ScopeIdx(rng.below(f.source.scopes.len().max(1)) as u32),
                callee: format!("d{}", rng.below(3)),
            });
        }
    }
    // Indirect calls with counted targets (`--tally-pgo`), after every function's counters.
    for f in &mut functions {
        if !rng.percent(30) {
            continue;
        }
        let k = 1 + rng.below(3);
        f.source.call_targets.push(CallTargets {
            block: rng.below(f.num_blocks as usize) as u32,
            probe: 1 + rng.below(6) as u32,
            scope: ScopeIdx(rng.below(f.source.scopes.len().max(1)) as u32),
            counter: CounterIdx(base),
            targets: (0..k).map(|i| format!("t{i}")).collect(),
        });
        values.extend((0..k).map(|_| wild_count(rng)));
        base += k as u32;
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
        probe_descs: probe_descs(),
        probes_before_optimization: false,
    };
    let mut m = ProfileModule::new(meta, values);
    m.paths = paths;
    m
}
