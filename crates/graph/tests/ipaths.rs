//! Interprocedural path profiling (Melski & Reps 1998) on random programs: several random graphs
//! with calls, direct and mutual recursion, calls of unknown functions that call back, and cut
//! edges, run by random executions.
//!
//! - the counts of the runtime protocol ([`Machine`], §5.5/§6.3) equal those of the reference
//!   cutter ([`cut_execution`], the paper's path definitions), and every cut path regenerates
//!   from its number;
//! - the numbering is dense (Theorem 4.1): where the paths are few enough to enumerate by the
//!   grammar alone ([`Walk`]), there are exactly `total` of them and their numbers are
//!   `0 .. total`, each once; elsewhere sampled numbers regenerate to paths that renumber to
//!   themselves;
//! - numbers that do not fit 64 bits are detected, and demoting call sites (§8) makes them fit.

use proptest::prelude::*;
use std::collections::BTreeSet;
use tally_graph::ipaths::supergraph::Walk;
use tally_graph::ipaths::{
    cut_execution, CallSite, Callee, FnId, Function, Heat, IpNumbering, IpathError, Machine, Mode,
    SEdge, Supergraph, Vertex,
};
use tally_graph::testing::programs::{
    arb_program, random_execution, random_program, ExecConfig, ProgramConfig,
};
use tally_graph::testing::{cfg, Rng};
use tally_graph::EdgeKind::*;
use tally_graph::{EdgeId, IdVec, NodeId};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const MODES: [Mode; 2] = [Mode::Context, Mode::Piecewise];

/// Programs with early exits and re-entries, and executions that take them.
const EARLY: ProgramConfig = ProgramConfig {
    max_functions: 4,
    max_blocks: 7,
    call_percent: 40,
    max_calls: 3,
    unknown_percent: 35,
    outside_percent: 30,
    cut_percent: 5,
    early_percent: 35,
};
const THROWING: ExecConfig = ExecConfig {
    entries: 6,
    step_budget: 12,
    callback_percent: 40,
    max_depth: 12,
    max_events: 20_000,
    throw_percent: 15,
};

/// All observable paths by the grammar alone, `None` if more than `cap` or too much search.
fn enumerate(g: &Supergraph, mode: Mode, cap: usize) -> Option<Vec<Vec<SEdge>>> {
    fn go(
        g: &Supergraph,
        mode: Mode,
        w: &Walk,
        path: &mut Vec<SEdge>,
        out: &mut Vec<Vec<SEdge>>,
        budget: &mut usize,
        cap: usize,
    ) -> bool {
        *budget = budget.saturating_sub(1);
        if *budget == 0 || out.len() > cap {
            return false;
        }
        if w.at == Vertex::ExitGlobal {
            out.push(path.clone());
            return true;
        }
        for e in w.valid_succs(g, mode) {
            let mut next = w.clone();
            next.step(g, e);
            path.push(e);
            if !go(g, mode, &next, path, out, budget, cap) {
                return false;
            }
            path.pop();
        }
        true
    }
    let mut out = Vec::new();
    let mut budget = 200_000;
    go(
        g,
        mode,
        &Walk::new(),
        &mut Vec::new(),
        &mut out,
        &mut budget,
        cap,
    )
    .then_some(out)
}

/// Runs one program in both modes on one execution: machine = cutter, cut paths regenerate.
fn check_run(
    num: &IpNumbering,
    events: &[tally_graph::ipaths::Event],
) -> Result<(), TestCaseError> {
    let cut = cut_execution(num.graph(), num.mode(), events).unwrap();
    let want = cut.counts(num).unwrap();
    let m = Machine::execute(num, events).unwrap();
    prop_assert_eq!(m.counts(), &want, "{:?}", num.mode());
    // What fits_u64 promises: registers never exceed the paths or numUnbalRLPaths.
    let nurl = num
        .graph()
        .functions()
        .map(|f| num.num_unbal_rl_paths(f))
        .max()
        .unwrap_or(0);
    prop_assert!(m.max_value() <= num.total().max(nurl));
    for p in &cut.paths {
        let n = num.path_number(p).unwrap();
        prop_assert!(n < num.total());
        prop_assert_eq!(&num.regenerate(n).unwrap(), p);
    }
    Ok(())
}

fn check_dense(num: &IpNumbering, rng: &mut Rng) -> Result<(), TestCaseError> {
    let g = num.graph();
    if let Some(all) = enumerate(g, num.mode(), 4000) {
        prop_assert_eq!(all.len() as u128, num.total());
        let mut seen = BTreeSet::new();
        for p in &all {
            let n = num.path_number(p).unwrap();
            prop_assert!(
                n < num.total() && seen.insert(n),
                "number {} twice or out of range",
                n
            );
            prop_assert_eq!(&num.regenerate(n).unwrap(), p);
        }
    } else {
        for _ in 0..200 {
            let n = (u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())) % num.total();
            let p = num.regenerate(n).unwrap();
            prop_assert_eq!(num.path_number(&p), Ok(n));
        }
    }
    prop_assert!(num.regenerate(num.total()).is_err());
    check_own_paths(num)
}

/// `own_paths` cuts `0 .. total` into consecutive ranges, one per function (some empty), and a
/// path starts at the function whose range holds its number (its first edge leaves
/// `Entry_global` for that function's `Entry` or `GEntry`): what array storage of an isolated
/// function's paths relies on.
fn check_own_paths(num: &IpNumbering) -> Result<(), TestCaseError> {
    let mut next = 0u128;
    for f in num.graph().functions() {
        let r = num.own_paths(f);
        if r.is_empty() {
            continue;
        }
        prop_assert_eq!(r.start, next, "{:?}: ranges are consecutive", f);
        next = r.end;
        for n in [r.start, r.start + (r.end - r.start) / 2, r.end - 1] {
            let first = num.regenerate(n).unwrap()[0];
            prop_assert!(
                matches!(first, SEdge::RootEntry(g) | SEdge::PieceEntry(g) if g == f),
                "path {} of {:?}'s range starts with {:?}",
                n,
                f,
                first
            );
        }
    }
    prop_assert_eq!(next, num.total());
    Ok(())
}

/// Programs with many calls, few of unknown functions: many call sites to demote or cut.
fn many_calls() -> ProgramConfig {
    ProgramConfig {
        call_percent: 60,
        unknown_percent: 10,
        ..ProgramConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn machine_equals_cutter_and_numbering_is_dense(program in arb_program(&ProgramConfig::default()), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let g = Supergraph::new(program.clone()).unwrap();
        let events = (0..5).find_map(|_| random_execution(&program, &mut rng, &ExecConfig::default()));
        for mode in MODES {
            let num = IpNumbering::new(g.clone(), mode).unwrap();
            check_dense(&num, &mut rng)?;
            if let Some(events) = &events {
                check_run(&num, events)?;
            }
        }
    }

    /// Executions that end activations early (exit, longjmp, exceptions; §9.2) at random
    /// points: the machine's counts, with the frame records' sites counted for the abandoned
    /// activations, equal the cutter's.
    #[test]
    fn early_exits_count_the_prefix_that_ran(program in arb_program(&EARLY), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let g = Supergraph::new(program.clone()).unwrap();
        let events = (0..5).find_map(|_| random_execution(&program, &mut rng, &THROWING));
        for mode in MODES {
            let num = IpNumbering::new(g.clone(), mode).unwrap();
            check_dense(&num, &mut rng)?;
            if let Some(events) = &events {
                check_run(&num, events)?;
            }
        }
    }

    #[test]
    fn demoted_call_sites_fit_a_limit_and_stay_exact(program in arb_program(&many_calls()), seed in any::<u64>(), limit in 1u128..200) {
        let mut rng = Rng::new(seed);
        let events = (0..5).find_map(|_| random_execution(&program, &mut rng, &ExecConfig::default()));
        for mode in MODES {
            match IpNumbering::new_limited(program.clone(), mode, limit) {
                Ok(num) => {
                    prop_assert!(num.total() <= limit);
                    check_dense(&num, &mut rng)?;
                    if let Some(events) = &events {
                        check_run(&num, events)?;
                    }
                }
                Err(IpathError::LimitUnreachable { fewest, .. }) => prop_assert!(fewest > limit),
                Err(e) => prop_assert!(false, "{}", e),
            }
        }
    }
}

/// The program with the context cuts of `num` (`IpNumbering::context_cuts`) applied as the
/// instrumenter applies them: each cut site calls an unknown function, and its callee is
/// entered from outside. `None` when there is none.
fn with_context_cuts(
    program: &[Function],
    num: &IpNumbering,
    array_paths: u128,
    context_paths: u128,
) -> Option<Vec<Function>> {
    let cuts = num.context_cuts(array_paths, context_paths).unwrap();
    with_cuts(program, cuts)
}

/// `program` with the direct calls `cuts` made calls of unknown functions (their callees
/// entered from outside); `None` when `cuts` is empty.
fn with_cuts(program: &[Function], cuts: Vec<(FnId, u32)>) -> Option<Vec<Function>> {
    if cuts.is_empty() {
        return None;
    }
    let mut out = program.to_vec();
    for (f, s) in cuts {
        let site = &mut out[f.index()].calls[s as usize];
        let Callee::Internal(q) = site.callee else {
            panic!("a context cut of a call that is not direct")
        };
        site.callee = Callee::Unknown;
        out[q.index()].entered_from_outside = true;
    }
    Some(out)
}

proptest! {
    #![proptest_config(config())]

    /// Context cuts (`ipaths::storage`) with small thresholds on random programs: every cut
    /// names a direct call into a function that loops (or calls one directly), and the
    /// program with the cuts applied numbers densely and counts exactly (machine = cutter).
    #[test]
    fn context_cuts_stay_exact(program in arb_program(&many_calls()), seed in any::<u64>(), array_paths in 1u128..40, context_paths in 1u128..40) {
        let mut rng = Rng::new(seed);
        for mode in MODES {
            let Ok(num) = IpNumbering::new_limited(program.clone(), mode, 1 << 40) else { continue };
            let before = as_numbered(&program, &num);
            let Some(cut) = with_context_cuts(&before, &num, array_paths, context_paths) else { continue };
            let events = (0..5).find_map(|_| random_execution(&cut, &mut rng, &ExecConfig::default()));
            let num = IpNumbering::new(Supergraph::new(cut.clone()).unwrap(), mode).unwrap();
            check_dense(&num, &mut rng)?;
            if let Some(events) = &events {
                check_run(&num, events)?;
            }
        }
    }
}

/// Random weights: every edge of `num`'s functions weighs 0 to 4 (a quarter of them 0),
/// per call.
fn random_weights(num: &IpNumbering, rng: &mut Rng) -> Vec<IdVec<EdgeId, f64>> {
    let g = num.graph();
    g.functions()
        .map(|f| {
            let m = g.cfg(f).num_edges();
            IdVec::from_vec(
                (0..m)
                    .map(|_| match rng.below(4) {
                        0 => 0.0,
                        _ => rng.below(17) as f64 / 4.0,
                    })
                    .collect(),
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(config())]

    /// Hot context cuts (`IpNumbering::context_cuts_where`) on random programs with random
    /// weights: they are the calls of `context_cuts` whose callee's restarts per call reach
    /// the threshold (all of them at threshold 0, fewer as it rises), a function's restarts
    /// are at least its callees' weighted by their blocks, and the program with the hot cuts
    /// applied numbers densely and counts exactly.
    #[test]
    fn hot_context_cuts_are_the_hot_subset_and_stay_exact(program in arb_program(&many_calls()), seed in any::<u64>(), array_paths in 1u128..40, context_paths in 1u128..40, threshold in 0u32..12) {
        let mut rng = Rng::new(seed);
        for mode in MODES {
            let Ok(num) = IpNumbering::new_limited(program.clone(), mode, 1 << 40) else { continue };
            let g = num.graph();
            let weights = random_weights(&num, &mut rng);
            let restarts = num.restarts_per_call(&weights).unwrap();
            let all = num.context_cuts(array_paths, context_paths).unwrap();
            let heat = |min_restarts: f64| Heat { weights: &weights, min_restarts };
            let at_zero = num.context_cuts_where(array_paths, context_paths, Some(&heat(0.0))).unwrap();
            prop_assert_eq!(&at_zero, &all);
            let min = f64::from(threshold) / 2.0;
            let hot = num.context_cuts_where(array_paths, context_paths, Some(&heat(min))).unwrap();
            let callee = |&(f, s): &(FnId, u32)| match g.calls(f)[s as usize].callee {
                Callee::Internal(q) => q.index(),
                Callee::Unknown => unreachable!("a cut of an unknown call"),
            };
            let expected: Vec<_> = all.iter().copied().filter(|c| restarts[callee(c)] >= min).collect();
            prop_assert_eq!(&hot, &expected);
            for f in g.functions() {
                let plan = num.plan(f).unwrap();
                for (s, a) in plan.calls.iter().enumerate() {
                    if let tally_graph::ipaths::CallAction::Direct { callee, .. } = *a {
                        let b = g.calls(f)[s].block;
                        let freq: f64 = g.cfg(f).preds(b).iter().map(|&e| weights[f.index()][e]).sum();
                        prop_assert!(restarts[f.index()] + 1e-9 >= freq * restarts[callee.index()]);
                    }
                }
            }
            let before = as_numbered(&program, &num);
            let Some(cut) = with_cuts(&before, hot) else { continue };
            let events = (0..5).find_map(|_| random_execution(&cut, &mut rng, &ExecConfig::default()));
            let num = IpNumbering::new(Supergraph::new(cut.clone()).unwrap(), mode).unwrap();
            check_dense(&num, &mut rng)?;
            if let Some(events) = &events {
                check_run(&num, events)?;
            }
        }
    }
}

/// The hot rule (`context_cuts_where`): `drive` (2^20 paths) calls `scan` (a loop estimated
/// at 40 iterations per call), `rare` (0.1) and `wrap` (no loop of its own; it calls `scan`
/// in a block run twice per call): the calls of scan and wrap (and wrap's of scan) are cut,
/// rare's is not, though the rule without heat cuts it too; restarts per call add a callee's, weighted by the
/// frequency of its call's block; weights that do not match the graphs are an error.
#[test]
fn hot_context_cuts_skip_cold_callees() {
    let looping = |back: f64| {
        let f = Function {
            cfg: cfg(
                3,
                &[(0, 1, Flow), (1, 1, Flow), (1, 2, Flow), (2, 3, Return)],
            ),
            calls: Vec::new(),
            entered_from_outside: false,
            cuts: Vec::new(),
        };
        let w: Vec<f64> = f
            .cfg
            .edges()
            .map(|(_, e)| if e.src == e.dst { back } else { 1.0 })
            .collect();
        (f, IdVec::from_vec(w))
    };
    let site = |block: usize, position: u32, q: usize| CallSite {
        block: NodeId::new(block),
        position,
        callee: Callee::Internal(FnId::new(q)),
    };
    let mut drive = diamonds(20);
    drive.calls = vec![site(0, 0, 1), site(0, 1, 2), site(0, 2, 3)];
    let drive_w = IdVec::from_vec(vec![1.0; drive.cfg.num_edges()]);
    let (scan, scan_w) = looping(40.0);
    let (rare, rare_w) = looping(0.1);
    let mut wrap = Function {
        cfg: cfg(2, &[(0, 1, Flow), (1, 2, Return)]),
        calls: vec![site(1, 0, 4)],
        entered_from_outside: false,
        cuts: Vec::new(),
    };
    let wrap_w = IdVec::from_vec(vec![2.0; wrap.cfg.num_edges()]);
    let (scan2, scan2_w) = looping(40.0);
    wrap.calls[0].callee = Callee::Internal(FnId::new(4));
    let program = vec![drive, scan, rare, wrap, scan2];
    let weights = vec![drive_w, scan_w, rare_w, wrap_w, scan2_w];
    for mode in MODES {
        let num = IpNumbering::new_limited(program.clone(), mode, 1 << 40).unwrap();
        let r = num.restarts_per_call(&weights).unwrap();
        assert_eq!(r[1], 40.0, "{mode:?}");
        assert_eq!(r[2], 0.1, "{mode:?}");
        assert_eq!(r[3], 80.0, "{mode:?}: wrap's block runs twice per call");
        let f0 = FnId::new(0);
        let all = num.context_cuts(1024, 1 << 16).unwrap();
        let f3 = FnId::new(3);
        assert_eq!(all, [(f0, 0), (f0, 1), (f0, 2), (f3, 0)], "{mode:?}");
        let heat = Heat {
            weights: &weights,
            min_restarts: 16.0,
        };
        let hot = num.context_cuts_where(1024, 1 << 16, Some(&heat)).unwrap();
        assert_eq!(hot, [(f0, 0), (f0, 2), (f3, 0)], "{mode:?}");
        let short = &weights[..4];
        assert!(
            matches!(
                num.restarts_per_call(short),
                Err(IpathError::Weights { .. })
            ),
            "{mode:?}"
        );
        let mut bad = weights.clone();
        bad[2] = IdVec::from_vec(vec![1.0]);
        assert_eq!(
            num.context_cuts_where(
                1024,
                1 << 16,
                Some(&Heat {
                    weights: &bad,
                    min_restarts: 1.0
                })
            ),
            Err(IpathError::Weights { func: FnId::new(2) }),
            "{mode:?}"
        );
    }
}

/// Context cuts name the direct call of a looping leaf from a root with many paths, and only
/// it: `drive` (2^20 paths of its own) calls `scan` (a loop); `small` (4 paths) calls `walk`
/// (a loop) and keeps its call.
#[test]
fn context_cuts_name_loops_under_huge_roots() {
    let looping = || Function {
        cfg: cfg(
            3,
            &[(0, 1, Flow), (1, 1, Flow), (1, 2, Flow), (2, 3, Return)],
        ),
        calls: Vec::new(),
        entered_from_outside: false,
        cuts: Vec::new(),
    };
    let mut drive = diamonds(20);
    drive.calls.push(CallSite {
        block: NodeId::new(0),
        position: 0,
        callee: Callee::Internal(FnId::new(1)),
    });
    let mut small = diamonds(2);
    small.calls.push(CallSite {
        block: NodeId::new(0),
        position: 0,
        callee: Callee::Internal(FnId::new(3)),
    });
    let program = vec![drive, looping(), small, looping()];
    for mode in MODES {
        let num = IpNumbering::new_limited(program.clone(), mode, 1 << 40).unwrap();
        let cuts = num.context_cuts(1024, 1 << 16).unwrap();
        assert_eq!(cuts, [(FnId::new(0), 0)], "{mode:?}");
        // Everything below the context threshold: nothing is cut.
        assert_eq!(num.context_cuts(1024, 1 << 30).unwrap(), [], "{mode:?}");
    }
    // The property test above is not vacuous: its programs have cuts.
    let config = ProgramConfig {
        call_percent: 60,
        unknown_percent: 10,
        ..ProgramConfig::default()
    };
    let with_cuts = (0..300)
        .filter(|&seed| {
            let program = random_program(&mut Rng::new(seed), &config);
            IpNumbering::new_limited(program, Mode::Context, 1 << 40)
                .is_ok_and(|num| !num.context_cuts(20, 4).unwrap().is_empty())
        })
        .count();
    assert!(
        with_cuts >= 20,
        "only {with_cuts} of 300 programs have cuts"
    );
}

/// `n` functions, each with two diamonds in a row and, in the block between them, two calls
/// of the next one: `ψ_Entry` of function `i` is about `4 · 2^(2(n-i))`-ish, exponential.
fn chain(n: usize) -> Vec<Function> {
    (0..n)
        .map(|i| {
            let g = cfg(
                7,
                &[
                    (0, 1, Flow),
                    (0, 2, Flow),
                    (1, 3, Flow),
                    (2, 3, Flow),
                    (3, 4, Flow),
                    (3, 5, Flow),
                    (4, 6, Flow),
                    (5, 6, Flow),
                    (6, 7, Return),
                ],
            );
            let calls = if i + 1 < n {
                (0..2)
                    .map(|p| CallSite {
                        block: NodeId::new(3),
                        position: p,
                        callee: Callee::Internal(FnId::new(i + 1)),
                    })
                    .collect()
            } else {
                Vec::new()
            };
            Function {
                cfg: g,
                calls,
                entered_from_outside: i == 0,
                cuts: Vec::new(),
            }
        })
        .collect()
}

#[test]
fn path_counts_beyond_64_bits_are_detected() {
    for mode in MODES {
        // 4 paths per function, squared at every level down: 4^(2^k) grows past 2^64 quickly.
        let small = IpNumbering::new(Supergraph::new(chain(3)).unwrap(), mode).unwrap();
        assert!(small.fits_u64(), "{mode:?}");
        let big = IpNumbering::new(Supergraph::new(chain(6)).unwrap(), mode).unwrap();
        assert!(!big.fits_u64(), "{mode:?}: {} paths", big.total());
        assert!(matches!(
            IpNumbering::new(Supergraph::new(chain(12)).unwrap(), mode),
            Err(IpathError::Overflow { .. })
        ));
        let limited = IpNumbering::new_limited(chain(12), mode, 1 << 32).unwrap();
        assert!(limited.total() <= 1 << 32 && limited.fits_u64(), "{mode:?}");
        // Regeneration still inverts numbering near the top of the range.
        let top = limited.total() - 1;
        let p = limited.regenerate(top).unwrap();
        assert_eq!(limited.path_number(&p), Ok(top));
    }
}

#[test]
fn bad_executions_are_errors() {
    let program = chain(2);
    let g = Supergraph::new(program).unwrap();
    use tally_graph::ipaths::Event::*;
    use tally_graph::EdgeId;
    let e = EdgeId::new;
    for events in [
        vec![Enter(FnId::new(1))],             // not entered from outside
        vec![Enter(FnId::new(0)), Edge(e(1))], // stops inside
        vec![Enter(FnId::new(0)), Edge(e(5))], // edge not from n0
        vec![Enter(FnId::new(0)), Edge(e(1)), Edge(e(3)), Edge(e(5))], // calls of n3 skipped
        vec![Enter(FnId::new(0)), Edge(e(1)), Edge(e(3)), Call(1)], // call out of order
        vec![
            Enter(FnId::new(0)),
            Edge(e(1)),
            Edge(e(3)),
            Call(0),
            Unwind(0),
        ], // no early exit
        vec![Enter(FnId::new(0)), Unwind(0)],  // not in a call
    ] {
        let num = IpNumbering::new(g.clone(), Mode::Context).unwrap();
        assert!(matches!(
            Machine::run(&num, &events),
            Err(IpathError::BadExecution { .. })
        ));
        assert!(cut_execution(&g, Mode::Context, &events).is_err());
    }
}

/// The random programs and executions exercise what the property tests are about.
#[test]
fn generator_covers_the_interesting_shapes() {
    use tally_graph::ipaths::supergraph::SiteKind;
    let (mut runs, mut recursive, mut unknown, mut callbacks, mut cuts) = (0, 0, 0, 0, 0);
    let (mut unmatched_returns, mut context_restarts_in_callee, mut summaries_in_paths) = (0, 0, 0);
    for seed in 0..300u64 {
        let mut rng = Rng::new(seed);
        let program = random_program(&mut rng, &ProgramConfig::default());
        let g = Supergraph::new(program.clone()).unwrap();
        for f in g.functions() {
            for s in 0..g.calls(f).len() as u32 {
                recursive += usize::from(matches!(g.site_kind(f, s), SiteKind::Recursive(_)));
                unknown += usize::from(g.site_kind(f, s) == SiteKind::Unknown);
            }
            cuts += g.dag(f).cuts().count();
        }
        let Some(events) = random_execution(&program, &mut rng, &ExecConfig::default()) else {
            continue;
        };
        runs += 1;
        // A callback: an activation entered while another is pending in an unknown call.
        let mut frames: Vec<FnId> = Vec::new();
        let mut pending: Vec<Option<u32>> = Vec::new();
        for ev in &events {
            use tally_graph::ipaths::Event::*;
            match *ev {
                Enter(f) => {
                    if let (Some(&caller), Some(Some(site))) = (frames.last(), pending.last()) {
                        callbacks +=
                            usize::from(g.calls(caller)[*site as usize].callee == Callee::Unknown);
                    }
                    frames.push(f);
                    pending.push(None);
                }
                Call(s) => *pending.last_mut().unwrap() = Some(s),
                Resume => *pending.last_mut().unwrap() = None,
                Edge(e) => {
                    if g.cfg(*frames.last().unwrap()).edge(e).kind == Return {
                        frames.pop();
                        pending.pop();
                    }
                }
                Unwind(k) => {
                    frames.truncate(k as usize);
                    pending.truncate(k as usize);
                }
            }
        }
        for mode in MODES {
            let cut = cut_execution(&g, mode, &events).unwrap();
            for p in &cut.paths {
                summaries_in_paths +=
                    usize::from(p.iter().any(|e| matches!(e, SEdge::Summary { .. })));
                match mode {
                    Mode::Piecewise => {
                        // Starts inside a function and leaves it by an unmatched return.
                        let mut open = 0i32;
                        for e in p {
                            match e {
                                SEdge::Call { .. } => open += 1,
                                SEdge::Return { .. } if open == 0 => unmatched_returns += 1,
                                SEdge::Return { .. } => open -= 1,
                                _ => {}
                            }
                        }
                    }
                    Mode::Context => {
                        // A restarted path whose context prefix crosses a call.
                        let calls = p.iter().position(|e| matches!(e, SEdge::Call { .. }));
                        let gexit = p.iter().any(|e| matches!(e, SEdge::GExitEnd(_)));
                        context_restarts_in_callee += usize::from(calls.is_some() && gexit);
                    }
                }
            }
        }
    }
    for (what, n) in [
        ("executions", runs),
        ("recursive call sites", recursive),
        ("unknown call sites", unknown),
        ("callbacks", callbacks),
        ("cut edges", cuts),
        ("unmatched returns in piecewise paths", unmatched_returns),
        (
            "context paths ending in a callee",
            context_restarts_in_callee,
        ),
        ("paths with summary edges", summaries_in_paths),
    ] {
        assert!(n >= 30, "only {n} {what} in 300 programs");
    }
}

/// The executions of [`early_exits_count_the_prefix_that_ran`] do end activations early in
/// every way the cutter distinguishes.
#[test]
fn generator_covers_early_exits() {
    use tally_graph::ipaths::Event::*;
    let (mut exits, mut longjmps, mut exceptions, mut into_direct) = (0, 0, 0, 0);
    let (mut abandon_edges, mut early_exit_edges, mut deep, mut outside) = (0, 0, 0, 0);
    for seed in 0..600u64 {
        let mut rng = Rng::new(seed);
        let program = random_program(&mut rng, &EARLY);
        let g = Supergraph::new(program.clone()).unwrap();
        let Some(events) = random_execution(&program, &mut rng, &THROWING) else {
            continue;
        };
        let mut frames: Vec<FnId> = Vec::new();
        for (i, ev) in events.iter().enumerate() {
            match *ev {
                Enter(f) => frames.push(f),
                Edge(e) => {
                    let kind = g.cfg(*frames.last().unwrap()).edge(e).kind;
                    if kind == Return {
                        frames.pop();
                    }
                    if kind == Reentry {
                        longjmps += 1;
                        into_direct +=
                            usize::from(matches!(events.get(i.wrapping_sub(1)), Some(Unwind(_))));
                    }
                }
                Unwind(k) => {
                    deep += usize::from(frames.len() - k as usize > 1);
                    frames.truncate(k as usize);
                    match events.get(i + 1) {
                        None => exits += 1,
                        Some(Enter(_)) if k == 0 => outside += 1,
                        Some(Resume) => exceptions += 1,
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        let cut = cut_execution(&g, Mode::Context, &events).unwrap();
        for p in &cut.paths {
            for e in p {
                match e {
                    SEdge::Abandon { .. } => abandon_edges += 1,
                    SEdge::Intra { func, dag } => {
                        early_exit_edges += usize::from(matches!(
                            g.dag(*func).edge(*dag).kind,
                            tally_graph::paths::DagEdgeKind::EarlyExit(_)
                        ))
                    }
                    _ => {}
                }
            }
        }
    }
    for (what, n) in [
        ("exits", exits),
        ("landings outside the set", outside),
        ("longjmps", longjmps),
        ("longjmps past other activations", into_direct),
        ("exceptions caught", exceptions),
        ("unwinds past several activations", deep),
        ("paths ending at an abandon edge", abandon_edges),
        ("paths ending at an early-exit edge", early_exit_edges),
    ] {
        eprintln!("{what}: {n}");
        assert!(n >= 20, "only {n} {what} in 600 programs");
    }
}

/// A function of `k` diamonds in a row, no calls: `2^k` paths of its own.
fn diamonds(k: usize) -> Function {
    let mut edges = Vec::new();
    for i in 0..k {
        let (top, l, r, next) = (3 * i, 3 * i + 1, 3 * i + 2, 3 * i + 3);
        edges.extend([
            (top, l, Flow),
            (top, r, Flow),
            (l, next, Flow),
            (r, next, Flow),
        ]);
    }
    edges.push((3 * k, 3 * k + 1, Return));
    Function {
        cfg: cfg(3 * k + 1, &edges),
        calls: Vec::new(),
        entered_from_outside: true,
        cuts: Vec::new(),
    }
}

/// One function whose own paths exceed the limit must not make every call of the set a
/// summary edge: it is cut (path mode's way) and the calls of the others, which fit, stay
/// direct. Before, `new_limited` demoted every call before it cut, and SQLite's paths crossed
/// no call.
#[test]
fn a_function_too_big_alone_is_cut_and_calls_stay_direct() {
    use tally_graph::ipaths::supergraph::SiteKind;
    let mut program = chain(3);
    program.push(diamonds(80));
    for mode in MODES {
        let limited = IpNumbering::new_limited(program.clone(), mode, 1 << 40).unwrap();
        assert!(limited.total() <= 1 << 40, "{mode:?}: {}", limited.total());
        let g = limited.graph();
        assert!(g.dag(FnId::new(3)).cuts().count() > 0, "{mode:?}");
        let direct = (0..3)
            .flat_map(|i| (0..g.calls(FnId::new(i)).len() as u32).map(move |s| (i, s)))
            .filter(|&(i, s)| matches!(g.site_kind(FnId::new(i), s), SiteKind::Direct(_)))
            .count();
        assert_eq!(
            direct, 4,
            "{mode:?}: chain(3)'s four calls fit and stay direct"
        );
        let p = limited.regenerate(limited.total() - 1).unwrap();
        assert_eq!(limited.path_number(&p), Ok(limited.total() - 1));
    }
}

#[test]
fn intraprocedural_paths_beyond_the_limit_are_cut() {
    // 80 diamonds in a row: 2^80 paths in one function, no calls to demote.
    let f = diamonds(80);
    for mode in MODES {
        let plain = IpNumbering::new(Supergraph::new(vec![f.clone()]).unwrap(), mode).unwrap();
        assert!(!plain.fits_u64() && plain.total() == 1 << 80, "{mode:?}");
        let limited = IpNumbering::new_limited(vec![f.clone()], mode, 1 << 20).unwrap();
        assert!(limited.total() <= 1 << 20, "{mode:?}: {}", limited.total());
        assert!(limited.graph().dag(FnId::new(0)).cuts().count() > 0);
        let p = limited.regenerate(limited.total() - 1).unwrap();
        assert_eq!(limited.path_number(&p), Ok(limited.total() - 1));
    }
}

/// `program` as `num` numbered it: the calls it did not keep direct (recursive, demoted) become
/// calls of unknown functions, so that cuts applied to it leave the rest as it was.
fn as_numbered(program: &[Function], num: &IpNumbering) -> Vec<Function> {
    let g = num.graph();
    g.functions()
        .map(|f| {
            let mut func = program[f.index()].clone();
            for (s, c) in func.calls.iter_mut().enumerate() {
                if !matches!(
                    g.site_kind(f, s as u32),
                    tally_graph::ipaths::supergraph::SiteKind::Direct(_)
                ) {
                    c.callee = Callee::Unknown;
                }
            }
            func
        })
        .collect()
}
