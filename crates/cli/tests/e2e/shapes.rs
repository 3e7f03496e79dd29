//! Control-flow shapes that stress the placement: computed gotos (indirectbr edges that cannot
//! be split), switches with several cases to one block (parallel edges), irreducible loops, and
//! two indirect branches sharing their targets, which no spanning tree can hold so that edge
//! mode must count an edge through predecessor tags. Counts must equal the oracles'.

use crate::support::*;
use std::process::Command;

#[test]
fn computed_goto_switch_irreducible_o0_o2() {
    let src = repo().join("testdata/shapes/shapes.c");
    check_program(&src, 0, "-O0");
    check_program(&src, 0, "-O2");
}

/// SESE counters (`--tally-sese=on`, the `edge-sese` variant) on loop shapes C does not give
/// at -O2: several entry values, increments around a diamond, an i16 counting down, a
/// variable that may wrap (refused).
#[test]
fn sese_loop_shapes() {
    check_program(&repo().join("testdata/shapes/sese.ll"), 0, "-O0");
}

#[test]
fn indirect_branches_sharing_targets_need_tags() {
    let src = repo().join("testdata/shapes/indirect.ll");
    check_program(&src, 0, "-O0");
    // The plan really took the tag path in edge mode.
    let dir = scratch("indirect-verbose");
    let o = Command::new(tally())
        .args(["cc", "--tally-mode=edge", "--tally-verbose", "-O0", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(dir.join("i.o"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let tagged: usize = err
        .split(" tagged")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no tag count in {err}"));
    assert!(
        tagged >= 2,
        "edge mode should tag the targets' incoming edges: {err}"
    );
}

#[test]
fn hashed_paths_and_a_call_right_after_setjmp() {
    let src = repo().join("testdata/shapes/manypaths.c");
    check_program(&src, 0, "-O0");
    check_program(&src, 0, "-O2");
}
