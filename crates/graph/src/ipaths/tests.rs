//! The paper's running example (Melski & Reps 1998 Fig. 4: `main` calling `pow` at two call sites),
//! with the figures the text gives: the `ψ`/`ρ` labels of Fig. 7, the 36 context paths and the
//! profile printed by the instrumented program of Figs. 8-9, the 21 piecewise paths and the
//! profile of Figs. 16-17.

use super::*;
use crate::cfg::EdgeKind::*;
use crate::ids::EdgeId;
use crate::paths::dag::CfgImage;
use crate::testing::cfg;
use std::collections::BTreeMap;

const MAIN: FnId = FnId::new(0);
const POW: FnId = FnId::new(1);

/// `main` of Fig. 4 as blocks: n0 = v2 v3 (`i = 1`), n1 = v4 (`while i <= 18`), n2 = v5
/// (`if i%2 == 0`), n3 = v6 v7 v8 (first call of `pow`), n4 = v9 (`if i%3 == 0`), n5 = v10 v11
/// v12 (second call), n6 = v13 (`i++`, the back edge), n7 = v15 (`return 0`). `pow`: n0 = u2,
/// n1 = u3 (`while exp > 0`), n2 = u4 u5 (the body, back edge), n3 = u7 (`return power`).
/// `Entry_P` is the DAG's START (v1, u1), `Exit_P` its END for returns.
fn program() -> Vec<Function> {
    let main = cfg(
        8,
        &[
            (0, 1, Flow),   // e1
            (1, 2, Flow),   // e2
            (1, 7, Flow),   // e3
            (2, 3, Flow),   // e4
            (2, 4, Flow),   // e5
            (3, 4, Flow),   // e6
            (4, 5, Flow),   // e7
            (4, 6, Flow),   // e8
            (5, 6, Flow),   // e9
            (6, 1, Flow),   // e10, back edge v13 -> v4
            (7, 8, Return), // e11
        ],
    );
    let pow = cfg(
        4,
        &[
            (0, 1, Flow),   // e1
            (1, 2, Flow),   // e2
            (1, 3, Flow),   // e3
            (2, 1, Flow),   // e4, back edge u5 -> u3
            (3, 4, Return), // e5
        ],
    );
    let site = |block, callee| CallSite {
        block: NodeId::new(block),
        position: 0,
        callee,
    };
    vec![
        Function {
            cfg: main,
            calls: vec![
                site(3, Callee::Internal(POW)),
                site(5, Callee::Internal(POW)),
            ],
            entered_from_outside: true,
            cuts: Vec::new(),
        },
        Function {
            cfg: pow,
            calls: Vec::new(),
            entered_from_outside: false,
            cuts: Vec::new(),
        },
    ]
}

fn e(i: usize) -> Event {
    Event::Edge(EdgeId::new(i))
}

/// The execution of Fig. 4: `i` from 1 to 18, `pow(i, 2)` for even `i` and multiples of 3.
fn execution() -> Vec<Event> {
    let pow = |out: &mut Vec<Event>| {
        out.extend([Event::Enter(POW), e(1)]);
        for _ in 0..2 {
            out.extend([e(2), e(4)]);
        }
        out.extend([e(3), e(5)]);
    };
    let mut out = vec![Event::Enter(MAIN), e(1)];
    for i in 1..=18 {
        out.push(e(2));
        if i % 2 == 0 {
            out.extend([e(4), Event::Call(0)]);
            pow(&mut out);
            out.extend([Event::Resume, e(6)]);
        } else {
            out.push(e(5));
        }
        if i % 3 == 0 {
            out.extend([e(7), Event::Call(1)]);
            pow(&mut out);
            out.extend([Event::Resume, e(9)]);
        } else {
            out.push(e(8));
        }
        out.push(e(10));
    }
    out.extend([e(3), e(11)]);
    out
}

fn numbering(mode: Mode) -> IpNumbering {
    IpNumbering::new(Supergraph::new(program()).unwrap(), mode).unwrap()
}

fn lin(a: u128, b: u128) -> Lin {
    Lin { a, b }
}

/// `ρ` of the DAG edge standing for control-flow edge `e` (its `START -> y` half for a back
/// edge).
fn rho_of(num: &IpNumbering, f: FnId, e: usize) -> Lin {
    match num.graph().dag(f).image(EdgeId::new(e)) {
        CfgImage::Kept(d) | CfgImage::Start(d) => num.rho(f, d),
        CfgImage::Back { start, .. } => num.rho(f, start),
        other => panic!("no rho for {other:?}"),
    }
}

#[test]
fn fig7_psi_and_rho_functions() {
    let num = numbering(Mode::Context);
    assert_eq!(num.psi(Vertex::Entry(POW)), lin(2, 2), "ψ_u1");
    assert_eq!(num.psi(Vertex::Entry(MAIN)), lin(2, 34), "ψ_v1");
    let g = num.graph();
    assert_eq!(num.psi(g.return_vertex(MAIN, 0)), lin(0, 5), "ψ_v7");
    assert_eq!(num.psi(g.return_vertex(MAIN, 1)), lin(0, 1), "ψ_v11");
    // The six non-zero edge labels of Fig. 7.
    assert_eq!(rho_of(&num, MAIN, 10), lin(1, 17), "v1 -> v4");
    assert_eq!(rho_of(&num, MAIN, 3), lin(0, 17), "v4 -> v15");
    assert_eq!(rho_of(&num, MAIN, 5), lin(0, 12), "v5 -> v9");
    assert_eq!(rho_of(&num, MAIN, 8), lin(0, 4), "v9 -> v13");
    assert_eq!(rho_of(&num, POW, 4), lin(1, 1), "u1 -> u3");
    assert_eq!(rho_of(&num, POW, 3), lin(0, 1), "u3 -> u7");
    let nonzero = |f: FnId| {
        let dag = num.graph().dag(f);
        dag.edges()
            .filter(|&(d, _)| num.rho(f, d) != Lin::ZERO)
            .count()
    };
    assert_eq!(nonzero(MAIN) + nonzero(POW), 6);
    assert_eq!(num.total(), 36, "profile[36]");
    // Fig. 9's instrumentation of main, as the plan says it.
    let plan = num.plan(MAIN).unwrap();
    assert_eq!(plan.entry.root_value, Some(0), "pathNum = 0");
    assert_eq!(
        plan.edges[EdgeId::new(10)],
        runtime::EdgeAction::ContextRestart {
            end: Lin::ZERO,
            start: lin(1, 17)
        },
        "profile[pathNum]++; pathNum = 1 * nvc + 17 + pathNumOnEntry"
    );
    assert_eq!(
        plan.edges[EdgeId::new(5)],
        runtime::EdgeAction::Add(lin(0, 12))
    );
    assert_eq!(
        plan.edges[EdgeId::new(3)],
        runtime::EdgeAction::Add(lin(0, 17))
    );
    assert_eq!(
        plan.edges[EdgeId::new(11)],
        runtime::EdgeAction::Return(Lin::ZERO)
    );
    for (site, psi_r) in [(0, lin(0, 5)), (1, lin(0, 1))] {
        assert!(matches!(
            plan.calls[site],
            CallAction::Direct { callee: POW, psi_r: p, .. } if p == psi_r
        ));
    }
    assert!(num.fits_u64());
}

#[test]
fn fig6_path_number() {
    // Entry_global v1 v4 v5 v9 v10 u1 u3 u4 u5 u6 Exit_global: 18 + 12 + 2 (u1 -> u3 at 1).
    let num = numbering(Mode::Context);
    let g = num.graph();
    let dag = |f: FnId, e: usize| match g.dag(f).image(EdgeId::new(e)) {
        CfgImage::Kept(d) | CfgImage::Start(d) => SEdge::Intra { func: f, dag: d },
        other => panic!("{other:?}"),
    };
    let back = |f: FnId, e: usize, end: bool| match g.dag(f).image(EdgeId::new(e)) {
        CfgImage::Back { end: x, start: y } => SEdge::Intra {
            func: f,
            dag: if end { x } else { y },
        },
        other => panic!("{other:?}"),
    };
    let path = vec![
        SEdge::RootEntry(MAIN),
        back(MAIN, 10, false), // v1 -> v4
        dag(MAIN, 2),          // v4 -> v5
        dag(MAIN, 5),          // v5 -> v9
        dag(MAIN, 7),          // v9 -> v10
        SEdge::Call {
            func: MAIN,
            site: 1,
        },
        back(POW, 4, false), // u1 -> u3
        dag(POW, 2),         // u3 -> u4 u5
        back(POW, 4, true),  // u5 -> u6
        SEdge::GExitEnd(POW),
    ];
    assert_eq!(num.path_number(&path), Ok(32));
    assert_eq!(num.regenerate(32), Ok(path));
}

#[test]
fn fig8_9_context_profile() {
    let num = numbering(Mode::Context);
    let want: BTreeMap<u128, u64> = [
        (16, 1),
        (18, 9),
        (24, 9),
        (25, 3),
        (27, 3),
        (28, 3),
        (29, 6),
        (30, 3),
        (32, 3),
        (33, 3),
        (34, 5),
        (35, 1),
    ]
    .into();
    let ev = execution();
    assert_eq!(Machine::run(&num, &ev), Ok(want.clone()));
    let cut = cut_execution(num.graph(), Mode::Context, &ev).unwrap();
    assert_eq!(cut.counts(&num), Ok(want));
}

#[test]
fn fig16_17_piecewise_profile() {
    let num = numbering(Mode::Piecewise);
    assert_eq!(num.total(), 21, "profile[21]");
    assert_eq!(num.psi(Vertex::Entry(MAIN)).eval(1), Some(8));
    assert_eq!(num.num_unbal_rl_paths(POW), 4, "numUnbalRLPaths(u8)");
    assert_eq!(num.piece_value(POW), Some(16), "entry_global -> u9");
    let want: BTreeMap<u128, u64> = [
        (6, 1),
        (8, 9),
        (12, 3),
        (14, 5),
        (15, 1),
        (16, 15),
        (17, 3),
        (19, 6),
        (20, 6),
    ]
    .into();
    let ev = execution();
    assert_eq!(Machine::run(&num, &ev), Ok(want.clone()));
    let cut = cut_execution(num.graph(), Mode::Piecewise, &ev).unwrap();
    assert_eq!(cut.counts(&num), Ok(want));
}

#[test]
fn every_number_regenerates_and_renumbers() {
    for mode in [Mode::Context, Mode::Piecewise] {
        let num = numbering(mode);
        for n in 0..num.total() {
            let p = num.regenerate(n).unwrap();
            assert_eq!(num.path_number(&p), Ok(n), "{mode:?} {}", num.describe(&p));
        }
        assert!(num.regenerate(num.total()).is_err());
    }
}

#[test]
fn recursion_makes_summary_edges_and_roots() {
    // f0 calls f1, f1 calls itself and f0: the calls back are recursive.
    let one = |calls: Vec<CallSite>, outside| Function {
        cfg: cfg(2, &[(0, 1, Flow), (0, 2, Return), (1, 2, Return)]),
        calls,
        entered_from_outside: outside,
        cuts: Vec::new(),
    };
    let at = |block, position, callee| CallSite {
        block: NodeId::new(block),
        position,
        callee: Callee::Internal(callee),
    };
    let g = Supergraph::new(vec![
        one(vec![at(1, 0, FnId::new(1))], true),
        one(vec![at(1, 1, FnId::new(0)), at(1, 0, FnId::new(1))], false),
    ])
    .unwrap();
    use supergraph::SiteKind::*;
    assert_eq!(g.site_kind(MAIN, 0), Direct(POW));
    assert_eq!(g.site_kind(POW, 0), Recursive(MAIN));
    assert_eq!(g.site_kind(POW, 1), Recursive(POW));
    assert!(g.is_root(MAIN) && g.is_root(POW));
    // Site 1 comes first in its block (position 0).
    assert_eq!(g.site_index(POW, 1), 0);
    assert_eq!(g.bottom_up(), &[POW, MAIN]);
}

#[test]
fn fingerprint_tells_numberings_apart() {
    let ctx = numbering(Mode::Context);
    assert_eq!(ctx.fingerprint(), numbering(Mode::Context).fingerprint());
    assert_ne!(ctx.fingerprint(), numbering(Mode::Piecewise).fingerprint());
    let demoted = Supergraph::with_demoted(program(), &[(MAIN, 1)]).unwrap();
    let demoted = IpNumbering::new(demoted, Mode::Context).unwrap();
    assert_ne!(ctx.fingerprint(), demoted.fingerprint());
    // The second call of pow now starts its own paths at Entry_global -> Entry_pow.
    assert!(demoted.graph().is_root(POW));
    assert_eq!(
        demoted.call_action(MAIN, 1),
        Ok(CallAction::Summary { abandon: None })
    );
    let cut = cut_execution(demoted.graph(), Mode::Context, &execution()).unwrap();
    assert_eq!(Machine::run(&demoted, &execution()), cut.counts(&demoted));
}
