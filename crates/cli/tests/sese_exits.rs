//! SESE counters (`--tally-sese=on`, the `edge-sese` variant; paper 003) next to frames that
//! end early: counted loops before an `exit()`, a `longjmp` and a C++ `throw` in the same
//! function (early exits derived from the tree or counted through a frame record, beside free
//! chords), loops whose callees may end the frame (refused), and steps that need the exact
//! division's shift and inverse in 8- to 64-bit variables. Every count must equal the
//! `edges-naive` oracle's, like every mode's (`check_program`).

mod support;
use support::*;

#[test]
fn counted_loops_before_exit_and_longjmp_o2_o0() {
    let src = repo().join("testdata/sese/exits.c");
    check_program(&src, 0, "-O2");
    check_program(&src, 0, "-O0");
}

#[test]
fn counted_loops_before_a_throw_o2() {
    check_program(&repo().join("testdata/sese/throws.cpp"), 0, "-O2");
}
