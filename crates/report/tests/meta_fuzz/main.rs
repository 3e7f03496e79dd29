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
use tally_format::{
    BranchMeta, CallTargets, DirectCall, LineRun, ProbeAt, ProbeDesc, ScopeIdx, ScopeMeta,
    SourceFn, SourceFnIdx, SourceMeta,
};
use tally_graph::paths::{number_paths_limited, NumberedDag};
use tally_graph::testing::{random_cfg_with, simulate, GenConfig, Rng, SimConfig};
use tally_graph::{block_counts, heuristic_weights, place_edge_counters, Cfg, EdgeId, IdVec};

mod gen;
mod mutate;

use gen::*;
use mutate::*;

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

/// A refusal message: one line.
fn assert_one_line(msg: &str) {
    assert!(!msg.contains('\n'), "a refusal over several lines: {msg:?}");
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
            delta: false,
            pid: 0,
            program: Default::default(),
            modules: p.modules.clone(),
            unfinished: false,
            raced: false,
            signal: None,
            run: None,
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
            delta: false,
            pid: seed,
            program: Default::default(),
            modules,
            unfinished: false,
            raced: false,
            signal: None,
            run: None,
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
        probe_descs: Vec::new(),
        probes_before_optimization: false,
    };
    let bytes = Profile {
        delta: false,
        pid: 1,
        program: Default::default(),
        modules: vec![ProfileModule::new(meta.clone(), vec![0; total as usize])],
        unfinished: false,
        raced: false,
        signal: None,
        run: None,
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
        delta: false,
        pid: 1,
        program: Default::default(),
        modules: vec![ProfileModule::new(good, vec![0; total as usize])],
        unfinished: false,
        raced: false,
        signal: None,
        run: None,
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
                delta: false,
                pid: 1,
                program: Default::default(),
                modules: vec![m],
                unfinished: false,
                raced: false,
                signal: None,
                run: None,
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
