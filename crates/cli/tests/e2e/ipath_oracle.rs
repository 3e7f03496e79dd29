//! Interprocedural path counts (modes `ipath` and `ipath-piecewise`, Melski & Reps 1998) against
//! the trace oracle: the same program built in `trace-naive` mode
//! (every edge taken, per activation) and in an ipath mode, run on the same input. For every
//! module with an interprocedural set, the trace is turned into the reference cutter's
//! execution model (`tally_graph::ipaths::cutter`: `Enter`, `Edge`, `Call(site)`, `Resume` of
//! the set's activations) and cut by the paper's definitions (§3.4 context paths, §6
//! piecewise paths) with the numbering the reader rebuilds from the module's metadata; the
//! path counts must equal the ipath profile's, number for number.
//!
//! The conversion from the trace to the cutter's execution (and its rules for calls the
//! trace does not see, abandoned activations and tail calls) is `support/ipath_cut.rs`'s.
//! Only single-threaded programs here; `ipath_threads.rs` splits a threaded trace first.

use crate::support::ipath_cut;
use crate::support::*;
use ipath_cut::{assert_same_paths, convert, crosses, sets};
use std::path::{Path, PathBuf};
use tally_format::profile::Profile;
use tally_graph::ipaths::{cut_execution, SEdge};
use tally_graph::paths::DagEdgeKind;

/// What [`check`] compared.
struct Compared {
    /// Modules with a set.
    sets: usize,
    /// Path runs (equal in both).
    runs: u64,
    /// Of those, runs of paths that cross a call or a return.
    crossing: u64,
    /// Runs of paths that end where a frame was abandoned (§9.2: `c -> GExit_P` at a direct
    /// call, or a block's early-exit edge), and of those the ones that cross a call.
    abandoned: u64,
    abandoned_crossing: u64,
    /// Runs of paths that start at a re-entry (`longjmp` came back).
    reentered: u64,
}

/// Builds `args` in trace-naive and `mode`, runs both with `run_args`, converts and cuts the
/// trace per set and compares with the profile.
fn check(
    name: &str,
    args: &[String],
    run_args: &[&str],
    status: i32,
    mode: &'static str,
) -> Compared {
    let dir = scratch(&format!("ipath-oracle-{name}-{mode}"));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let cxx = a.iter().any(|x| x.ends_with(".cpp"));
    prebuild(
        &[Variant::Tally("trace-naive"), Variant::Tally(mode)],
        cxx,
        args,
    );
    let mut outs = Vec::new();
    for m in ["trace-naive", mode] {
        let vdir = dir.join(m);
        std::fs::create_dir_all(&vdir).unwrap();
        build(Variant::Tally(m), cxx, &a, &vdir.join("prog"), &dir);
        let out = std::process::Command::new("./prog")
            .args(run_args)
            .current_dir(&vdir)
            .env("TALLY_PROFILE", vdir.join("prog.tally"))
            .env("TALLY_TRACE", vdir.join("prog.trace"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(status), "{name} {m}");
        outs.push(out.stdout);
    }
    assert_eq!(outs[0], outs[1], "{name}: outputs differ");
    let naive = Profile::read_file(dir.join("trace-naive/prog.tally")).unwrap();
    let ipath = Profile::read_file(dir.join(mode).join("prog.tally")).unwrap();
    let trace = tally_format::trace::read_trace(
        &std::fs::read(dir.join("trace-naive/prog.trace")).unwrap(),
    )
    .unwrap();
    let mut sets = sets(&ipath, &naive);
    convert(&trace, &naive, &mut sets);
    let (mut runs, mut crossing) = (0, 0);
    let (mut abandoned, mut abandoned_crossing, mut reentered) = (0, 0, 0);
    for s in &sets {
        let cut = cut_execution(s.g(), s.num.mode(), &s.events)
            .unwrap_or_else(|e| panic!("{name} {mode} {}: {e}", s.source));
        let oracle = cut.counts(&s.num).unwrap();
        assert_same_paths(&format!("{name} {mode} {}", s.source), &oracle, &s.counts);
        runs += oracle.values().sum::<u64>();
        crossing += cut.paths.iter().filter(|p| crosses(p)).count() as u64;
        let g = s.g();
        let kind = |e: &SEdge| match *e {
            SEdge::Intra { func, dag } => Some(g.dag(func).edge(dag).kind),
            _ => None,
        };
        for p in &cut.paths {
            let last = p.len().checked_sub(2).map(|i| &p[i]);
            let ends_abandoned = matches!(last, Some(SEdge::Abandon { .. }))
                || matches!(last.and_then(kind), Some(DagEdgeKind::EarlyExit(_)));
            if ends_abandoned {
                abandoned += 1;
                abandoned_crossing += u64::from(crosses(p));
            }
            reentered += u64::from(
                p.iter()
                    .any(|e| matches!(kind(e), Some(DagEdgeKind::ReentryStart(_)))),
            );
        }
    }
    Compared {
        sets: sets.len(),
        runs,
        crossing,
        abandoned,
        abandoned_crossing,
        reentered,
    }
}

fn single(file: &Path, opt: &str) -> Vec<String> {
    vec![opt.into(), "-g".into(), file.display().to_string()]
}

/// calls.c (direct calls, recursion, mutual recursion, calls through pointers, a qsort
/// callback, an `exit`ing function), groups.c (isolated functions, with path mode's code, next
/// to groups linked by direct calls), the early-exit C programs and the shapes, at -O0 and -O2.
#[test]
fn ipath_counts_equal_the_cut_trace_on_test_programs() {
    let mut programs: Vec<(PathBuf, i32)> = vec![
        (repo().join("testdata/ipath/calls.c"), 0),
        (repo().join("testdata/ipath/groups.c"), 3),
    ];
    programs.extend(
        early_programs()
            .into_iter()
            .filter(|(f, _)| f.extension().is_some_and(|e| e == "c")),
    );
    for f in ["shapes.c", "manypaths.c"] {
        programs.push((repo().join("testdata/shapes").join(f), 0));
    }
    let (mut runs, mut crossing) = (0, 0);
    for (file, status) in &programs {
        for opt in ["-O0", "-O2"] {
            for mode in ["ipath", "ipath-piecewise"] {
                let name = format!("{}{opt}", file.file_name().unwrap().to_str().unwrap());
                let c = check(&name, &single(file, opt), &[], *status, mode);
                eprintln!(
                    "{name} {mode}: {} sets, {} path runs equal, {} of them across calls",
                    c.sets, c.runs, c.crossing
                );
                if name.starts_with("calls.c") {
                    assert!(
                        c.crossing >= 20,
                        "{name} {mode}: too few paths across calls"
                    );
                }
                runs += c.runs;
                crossing += c.crossing;
            }
        }
    }
    assert!(runs > 100_000 && crossing > 1000, "too little compared");
}

/// Paths cut short (Melski & Reps 1998 §9.2), both modes, -O0 and -O2: early.c (`exit` deep in a
/// chain of static functions called directly, `longjmp` across such a chain, `longjmp` back into a
/// function waiting in a direct call) and throw.cpp (an exception through such a chain and a
/// destructor, caught higher up). Every path count equals the cut trace's, and paths that end
/// where a frame was abandoned, cross a call on the way, and start after a `longjmp` are among
/// them: before the set took functions that may end early, none of these functions had paths.
#[test]
fn ipath_counts_equal_the_cut_trace_when_frames_are_abandoned() {
    let dir = repo().join("testdata/ipath");
    for (file, status) in [("early.c", 3), ("throw.cpp", 0)] {
        for opt in ["-O0", "-O2"] {
            for mode in ["ipath", "ipath-piecewise"] {
                let name = format!("{file}{opt}");
                let c = check(&name, &single(&dir.join(file), opt), &[], status, mode);
                eprintln!(
                    "{name} {mode}: {} path runs equal, {} across calls; {} end in an abandoned \
                     frame ({} of them across calls), {} start at a re-entry",
                    c.runs, c.crossing, c.abandoned, c.abandoned_crossing, c.reentered
                );
                assert!(
                    c.abandoned >= 10 && c.abandoned_crossing >= 5,
                    "{name} {mode}: too few abandoned paths"
                );
                if file == "early.c" {
                    assert!(c.reentered >= 5, "{name} {mode}: too few re-entries");
                }
            }
        }
    }
}

/// An exception that abandons frames of one file's set lands in another file
/// (testdata/ipath/landing_set.cpp and landing_main.cpp), whose loop goes on calling into the
/// set: both modes, -O0 and -O2, every path count of both files' sets equals the cut trace's,
/// and paths ending in an abandoned frame after crossing a call are among them.
#[test]
fn ipath_counts_equal_the_cut_trace_when_an_exception_lands_in_another_file() {
    let dir = repo().join("testdata/ipath");
    for opt in ["-O0", "-O2"] {
        for mode in ["ipath", "ipath-piecewise"] {
            let name = format!("landing{opt}");
            let args: Vec<String> = [opt, "-g"]
                .into_iter()
                .map(String::from)
                .chain(
                    ["landing_set.cpp", "landing_main.cpp"]
                        .iter()
                        .map(|f| dir.join(f).display().to_string()),
                )
                .collect();
            let c = check(&name, &args, &[], 0, mode);
            eprintln!(
                "{name} {mode}: {} sets, {} path runs equal, {} across calls; {} end in an \
                 abandoned frame ({} of them across calls)",
                c.sets, c.runs, c.crossing, c.abandoned, c.abandoned_crossing
            );
            assert!(c.sets >= 1, "{name} {mode}: no set");
            assert!(
                c.abandoned >= 20 && c.abandoned_crossing >= 10 && c.crossing >= 20,
                "{name} {mode}: too few abandoned or crossing paths"
            );
        }
    }
}

/// Both modes on a real program built from `args` and run with `run_args`: at least `sets`
/// sets, `runs` path runs and `crossing` runs across calls must be compared.
fn real_program(
    name: &str,
    args: &[String],
    run_args: &[&str],
    sets: usize,
    runs: u64,
    crossing: u64,
) {
    for mode in ["ipath", "ipath-piecewise"] {
        let c = check(name, args, run_args, 0, mode);
        eprintln!(
            "{name} {mode}: {} sets, {} path runs equal, {} of them across calls",
            c.sets, c.runs, c.crossing
        );
        assert!(
            c.sets >= sets && c.runs > runs && c.crossing > crossing,
            "{name} {mode}: too little compared"
        );
    }
}

/// Lua on a small script.
#[test]
fn ipath_counts_equal_the_cut_trace_on_lua() {
    let script = repo().join("testdata/lua/small.lua");
    real_program(
        "lua",
        &lua_args(&["-O2"]),
        &[script.to_str().unwrap()],
        10,
        1000,
        100,
    );
}

/// SQLite (the amalgamation and the driver: two sets) on the driver's smallest workload.
/// Ignored by default: trace-naive writes a 300 MB trace there and the test takes about 7
/// minutes (2026-11-24: 196458 path runs equal in both modes, 7604 / 5295 across calls).
/// From 6cb1447 to 595dfbe it failed on `crossing` (the amalgamation's numbering demoted every
/// call, so no path crossed one); since `new_limited` cuts a function too big alone before
/// demoting calls it passes again (2026-11-24 14:05 UTC, 11 minutes under load).
#[test]
#[ignore = "trace-naive writes a 300 MB trace; run with --ignored"]
fn ipath_counts_equal_the_cut_trace_on_sqlite() {
    real_program("sqlite", &sqlite_args(&[]), &["1"], 1, 1000, 100);
}
