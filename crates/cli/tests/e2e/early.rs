//! Early termination stays exact (Ball & Larus 1994 §3.2, Fig. 7): programs whose frames end
//! through exit() deep in a callee, longjmp across frames, abort() caught by a SIGABRT handler that
//! exits, and C++ exceptions unwinding through frames without handlers. For each program, at
//! -O0 and -O2, the `edge` build's block and edge counts must equal the `edges-naive` oracle's
//! (a counter on every edge, no shadow stack), its block counts must equal the `blocks-naive`
//! oracle's, and every instrumented build must print the same output and exit with the same
//! status as the plain clang build. `edge` is also built with each early-exit strategy forced
//! (`--tally-early-exits=record`: frame records charged by the runtime; `derive`: early-exit
//! edges in the spanning tree), since the default mixes them per function.

use crate::support::*;

fn expected() -> Vec<(String, i32)> {
    let text = std::fs::read_to_string(repo().join("testdata/early/EXPECTED")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            (
                it.next().unwrap().to_string(),
                it.next().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

fn check_all(opt: &str) {
    for (file, status) in expected() {
        check_program(&repo().join("testdata/early").join(&file), status, opt);
    }
}

#[test]
fn early_termination_exact_o0() {
    check_all("-O0");
}

#[test]
fn early_termination_exact_o2() {
    check_all("-O2");
}
