//! Tests of the metadata's wire layout (the sum types encode as the optional fields they
//! replaced) and of the refusals of mode facts that do not fit: two modes' at once, and trace
//! mode's plans.

use super::*;
use tally_graph::witness::{witness_plan, FunctionInput, PlanKind};
use tally_graph::IdVec;

/// `FunctionMeta` as it was declared up to META_VERSION 11 (derived serde; 12 added
/// `SourceMeta::probes`, inside `source`), the reference
/// for the wire layout.
#[derive(Serialize)]
struct Legacy {
    name: String,
    linkage: Linkage,
    loc: Loc,
    num_blocks: u32,
    edges: Vec<(BlockIdx, BlockIdx, StoredKind)>,
    blocks: Vec<Loc>,
    cfg_hash: u64,
    counter_base: CounterIdx,
    counters: Vec<Probe>,
    zero_edges: Vec<EdgeIdx>,
    unknown_edges: Vec<EdgeIdx>,
    paths: Option<PathMeta>,
    events: Option<EventMeta>,
    wtrace: Option<WtraceMeta>,
    source: SourceMeta,
}

/// `ModuleMeta` as encoded since META_VERSION 12 (11 without `probe_descs`).
#[derive(Serialize)]
struct LegacyModule {
    source: String,
    producer: String,
    mode: Mode,
    num_counters: u32,
    files: Vec<String>,
    functions: Vec<Legacy>,
    source_fns: Vec<SourceFn>,
    skipped: Vec<SkippedFunction>,
    event_kind: Option<String>,
    ipath: Option<IpathMeta>,
    oracle_for: Option<u64>,
    probe_descs: Vec<ProbeDesc>,
    probes_before_optimization: bool,
}

/// `n0 -> {n1, n2} -> n3 -> n0` (a loop), `n3 -> EXIT`, with `mode_meta`.
fn function(mode_meta: FunctionModeMeta) -> FunctionMeta {
    use StoredKind::*;
    let b = BlockIdx;
    let mut f = FunctionMeta {
        name: "f".into(),
        linkage: Linkage::External,
        loc: Loc::default(),
        num_blocks: 4,
        edges: vec![
            (b(0), b(1), Flow),
            (b(0), b(2), Flow),
            (b(1), b(3), Flow),
            (b(2), b(3), Flow),
            (b(3), b(0), Flow),
            (b(3), b(4), Return),
        ],
        blocks: vec![Loc::default(); 4],
        cfg_hash: 0,
        counter_base: CounterIdx(0),
        counters: vec![],
        mode_meta,
        source: SourceMeta::default(),
    };
    f.cfg_hash = f.cfg().expect("a graph").shape_hash();
    f
}

fn module(mode: Mode, functions: Vec<FunctionMeta>) -> ModuleMeta {
    ModuleMeta {
        source: "t.c".into(),
        producer: "test".into(),
        mode,
        num_counters: functions.iter().map(|f| f.counters.len() as u32).sum(),
        files: vec!["t.c".into()],
        functions,
        source_fns: vec![],
        skipped: vec![],
        mode_meta: if mode.counts_events() {
            ModuleModeMeta::Events {
                kind: "insns".into(),
            }
        } else {
            ModuleModeMeta::None
        },
        oracle_for: None,
        probe_descs: Vec::new(),
        probes_before_optimization: false,
    }
}

/// The witness plan of [`function`]'s graph, as trace mode stores it.
fn traced() -> WtraceMeta {
    let cfg = function(FunctionModeMeta::Counters).cfg().expect("a graph");
    let input = FunctionInput::without_calls(cfg.clone());
    let plan = witness_plan(&input, &IdVec::filled(cfg.num_edges(), 1.0));
    assert_eq!(plan.kind, PlanKind::Witness);
    WtraceMeta {
        calls: vec![vec![]; cfg.num_blocks()],
        witness: plan
            .witness
            .values()
            .iter()
            .map(|w| w.map(|w| (w.value, w.bits)))
            .collect(),
        read_bits: plan.read_bits.values().to_vec(),
        unwind: vec![],
        branch: false,
        paths: None,
        untraced: None,
    }
}

fn legacy(m: &ModuleMeta) -> Vec<u8> {
    let functions = m
        .functions
        .iter()
        .map(|f| {
            let p = f.mode_meta.clone().into_parts();
            Legacy {
                name: f.name.clone(),
                linkage: f.linkage,
                loc: f.loc,
                num_blocks: f.num_blocks,
                edges: f.edges.clone(),
                blocks: f.blocks.clone(),
                cfg_hash: f.cfg_hash,
                counter_base: f.counter_base,
                counters: f.counters.clone(),
                zero_edges: p.zero_edges,
                unknown_edges: p.unknown_edges,
                paths: p.paths,
                events: p.events,
                wtrace: p.wtrace,
                source: f.source.clone(),
            }
        })
        .collect();
    let l = LegacyModule {
        source: m.source.clone(),
        producer: m.producer.clone(),
        mode: m.mode,
        num_counters: m.num_counters,
        files: m.files.clone(),
        functions,
        source_fns: m.source_fns.clone(),
        skipped: m.skipped.clone(),
        event_kind: m.event_kind().map(str::to_string),
        ipath: m.ipath().cloned(),
        oracle_for: m.oracle_for,
        probe_descs: m.probe_descs.clone(),
        probes_before_optimization: m.probes_before_optimization,
    };
    let mut out = META_MAGIC.to_vec();
    out.extend_from_slice(&META_VERSION.to_le_bytes());
    out.extend(postcard::to_allocvec(&l).expect("encodes"));
    out
}

/// The refusal of `m` when decoded: one line.
fn refusal(m: &ModuleMeta) -> String {
    let e = ModuleMeta::decode(&m.encode())
        .expect_err("refused")
        .to_string();
    assert!(!e.contains('\n'), "{e}");
    e
}

#[test]
fn every_mode_encodes_as_the_optional_fields() {
    let vertex = FunctionModeMeta::Vertex {
        zero_edges: vec![EdgeIdx(4)],
        unknown_edges: vec![EdgeIdx(1), EdgeIdx(3)],
    };
    let path = FunctionModeMeta::Path(PathMeta {
        cuts: vec![EdgeIdx(2)],
        num_paths: 9,
        storage: PathStorage::Hash { table: 0 },
        numbering: 77,
    });
    let events = FunctionModeMeta::Events(EventMeta {
        per_block: vec![1, 2, 3, 4],
        inclusive: CounterIdx(0),
        calls: vec![],
    });
    let mut ev = module(Mode::Events, vec![function(events)]);
    ev.functions[0].counters = vec![Probe::Events];
    ev.num_counters = 1;
    let mut ip = module(Mode::Ipath, vec![function(path.clone())]);
    ip.mode_meta = ModuleModeMeta::Ipath(IpathMeta {
        functions: vec![IpathFunction {
            function: 0,
            from_outside: true,
            calls: vec![],
            cuts: vec![],
            array: None,
        }],
        limit: 1 << 40,
        total: 9,
        fingerprint: 5,
        table_owner: 0,
    });
    let cases = [
        module(Mode::Edge, vec![function(FunctionModeMeta::Counters)]),
        module(Mode::Vertex, vec![function(vertex)]),
        module(Mode::Path, vec![function(path)]),
        ev,
        ip,
        module(
            Mode::Trace,
            vec![function(FunctionModeMeta::Trace(traced()))],
        ),
    ];
    for m in cases {
        let bytes = m.encode();
        assert_eq!(bytes, legacy(&m), "{:?}", m.mode);
        // Decoding gives the same facts back (no validation: the cases are not all valid).
        let (wire, rest): (wire::ModuleIn, &[u8]) =
            postcard::take_from_bytes(&bytes[12..]).expect("decodes");
        assert!(rest.is_empty());
        assert_eq!(ModuleMeta::try_from(wire).expect("converts"), m);
    }
}

#[test]
fn two_modes_facts_are_refused_in_one_line() {
    let mut m = module(Mode::Path, vec![function(FunctionModeMeta::Counters)]);
    let mut l = legacy(&m);
    // Forge a function with both path and events facts through the legacy layout.
    let both = Legacy {
        paths: Some(PathMeta {
            cuts: vec![],
            num_paths: 1,
            storage: PathStorage::Array,
            numbering: 0,
        }),
        events: Some(EventMeta {
            per_block: vec![0; 4],
            inclusive: CounterIdx(0),
            calls: vec![],
        }),
        ..legacy_fn(&m.functions[0])
    };
    m.functions.clear();
    let mut lm = LegacyModule {
        source: m.source.clone(),
        producer: m.producer.clone(),
        mode: m.mode,
        num_counters: 0,
        files: vec![],
        functions: vec![both],
        source_fns: vec![],
        skipped: vec![],
        event_kind: None,
        ipath: None,
        oracle_for: None,
        probe_descs: Vec::new(),
        probes_before_optimization: false,
    };
    l.truncate(12);
    l.extend(postcard::to_allocvec(&lm).expect("encodes"));
    let e = ModuleMeta::decode(&l).expect_err("refused").to_string();
    assert_eq!(
        e,
        "inconsistent metadata: module t.c, function f: it carries both path and events metadata"
    );
    // And at module level: an event kind next to an interprocedural set.
    lm.functions.clear();
    lm.event_kind = Some("insns".into());
    lm.ipath = Some(IpathMeta {
        functions: vec![],
        limit: 0,
        total: 0,
        fingerprint: 0,
        table_owner: 0,
    });
    l.truncate(12);
    l.extend(postcard::to_allocvec(&lm).expect("encodes"));
    let e = ModuleMeta::decode(&l).expect_err("refused").to_string();
    assert_eq!(
        e,
        "inconsistent metadata: module t.c: it carries both events and interprocedural path metadata"
    );
}

fn legacy_fn(f: &FunctionMeta) -> Legacy {
    Legacy {
        name: f.name.clone(),
        linkage: f.linkage,
        loc: f.loc,
        num_blocks: f.num_blocks,
        edges: f.edges.clone(),
        blocks: f.blocks.clone(),
        cfg_hash: f.cfg_hash,
        counter_base: f.counter_base,
        counters: f.counters.clone(),
        zero_edges: vec![],
        unknown_edges: vec![],
        paths: None,
        events: None,
        wtrace: None,
        source: f.source.clone(),
    }
}

#[test]
fn a_valid_trace_plan_is_accepted() {
    let m = module(
        Mode::Trace,
        vec![function(FunctionModeMeta::Trace(traced()))],
    );
    assert_eq!(ModuleMeta::decode(&m.encode()).expect("valid"), m);
    let untraced = WtraceMeta {
        calls: vec![],
        witness: vec![],
        read_bits: vec![],
        unwind: vec![],
        branch: false,
        paths: None,
        untraced: Some("no room".into()),
    };
    let m = module(
        Mode::Trace,
        vec![function(FunctionModeMeta::Trace(untraced))],
    );
    ModuleMeta::decode(&m.encode()).expect("an untraced function is valid");
}

#[test]
fn bad_trace_plans_are_refused_in_one_line() {
    type Edit = fn(&mut WtraceMeta);
    let cases: [(&str, Edit, &str); 7] = [
        (
            "a witness wider than its bits",
            |w| {
                let x = w.witness.iter_mut().flatten().next().expect("a witness");
                x.0 = 1 << x.1;
            },
            "breaks its plan: edge e",
        ),
        (
            "no witness at all (the loop is unwitnessed)",
            |w| w.witness.iter_mut().for_each(|x| *x = None),
            "breaks its plan: E - Ewit has a directed cycle",
        ),
        (
            "a short list of read widths",
            |w| {
                w.read_bits.pop();
            },
            "has 4 read widths for 5 vertices",
        ),
        (
            "a long list of witnesses",
            |w| w.witness.push(None),
            "has 8 witnesses for 7 edges",
        ),
        (
            "an unwind edge it does not have",
            |w| w.unwind.push(EdgeIdx(99)),
            "its unwind edges name e99, which it does not have",
        ),
        (
            "an untraced function with a plan",
            |w| w.untraced = Some("why".into()),
            "marks the function untraced yet plans it",
        ),
        (
            "a branch plan of path numbers",
            |w| {
                w.branch = true;
                w.paths = Some(1);
            },
            "is both a branch plan and a path-number plan",
        ),
    ];
    for (what, edit, want) in cases {
        let mut w = traced();
        edit(&mut w);
        let m = module(Mode::Trace, vec![function(FunctionModeMeta::Trace(w))]);
        let e = refusal(&m);
        assert!(
            e.starts_with("inconsistent metadata: module t.c, function f: ") && e.contains(want),
            "{what}: {e}"
        );
    }
    // Trace facts in a module of another mode.
    let m = module(
        Mode::Edge,
        vec![function(FunctionModeMeta::Trace(traced()))],
    );
    assert!(refusal(&m).ends_with("trace in a edge module"));
}

#[test]
fn call_targets_round_trip_and_bad_ones_are_refused_in_one_line() {
    let mut f = function(FunctionModeMeta::Counters);
    f.source.call_targets = vec![CallTargets {
        block: 3,
        probe: 7,
        scope: ScopeIdx(0),
        counter: CounterIdx(1),
        targets: vec!["g".into(), "h".into()],
    }];
    let mut m = module(Mode::Edge, vec![f]);
    m.num_counters = 3;
    assert_eq!(ModuleMeta::decode(&m.encode()).expect("valid"), m);
    type Edit = fn(&mut CallTargets);
    let cases: [(Edit, &str); 5] = [
        (|t| t.block = 4, "call #0 is in block n4 of 4"),
        (|t| t.probe = 0, "call #0 has probe id 0"),
        (|t| t.scope = ScopeIdx(1), "call #0 names scope s1"),
        (
            |t| t.counter = CounterIdx(2),
            "call #0 counts 2 targets from counter 2 of 3",
        ),
        (
            |t| t.targets.clear(),
            "call #0 counts 0 targets from counter 1 of 3",
        ),
    ];
    for (edit, why) in cases {
        let mut bad = m.clone();
        edit(&mut bad.functions[0].source.call_targets[0]);
        let e = refusal(&bad);
        assert!(e.ends_with(&format!("pseudo-probes: {why}")), "{e}");
    }
}

#[test]
fn direct_calls_round_trip_and_bad_ones_are_refused_in_one_line() {
    let mut f = function(FunctionModeMeta::Counters);
    f.source.direct_calls = vec![DirectCall {
        block: 3,
        probe: 7,
        scope: ScopeIdx(0),
        callee: "g".into(),
    }];
    let m = module(Mode::Edge, vec![f]);
    assert_eq!(ModuleMeta::decode(&m.encode()).expect("valid"), m);
    type Edit = fn(&mut DirectCall);
    let cases: [(Edit, &str); 4] = [
        (|d| d.block = 4, "direct call #0 is in block n4 of 4"),
        (|d| d.probe = 0, "direct call #0 has probe id 0"),
        (|d| d.scope = ScopeIdx(1), "direct call #0 names scope s1"),
        (|d| d.callee.clear(), "direct call #0 names no callee"),
    ];
    for (edit, why) in cases {
        let mut bad = m.clone();
        edit(&mut bad.functions[0].source.direct_calls[0]);
        let e = refusal(&bad);
        assert!(e.ends_with(&format!("pseudo-probes: {why}")), "{e}");
    }
}
