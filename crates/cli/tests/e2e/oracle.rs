//! The same-run oracle: a build with `--tally-oracle` carries an
//! `edges-naive` counter on every edge besides its mode's code, one run writes both profiles,
//! and `tally check` compares every edge and block count of every function. Shown on Lua (real
//! code, errors as longjmps), on the early-termination programs (exit, longjmp, exceptions,
//! abort), on four threads at once, and on profiles made wrong on purpose, which it must refuse.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Modes that carry the oracle, with the options each is built with.
const MODES: [&str; 5] = ["edge", "vertex", "path", "ipath", "ipath-piecewise"];

fn tally_cc(cxx: bool, mode: &str, oracle: bool, args: &[&str], out: &Path, cwd: &Path) {
    let o = Command::new(tally())
        .arg(if cxx { "c++" } else { "cc" })
        .arg(format!("--tally-mode={mode}"))
        .args(oracle.then_some("--tally-oracle"))
        .args(args)
        .arg("-o")
        .arg(out)
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tally cc {mode} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `tally check --format json PROFILE`: its exit status and JSON.
fn check(profile: &Path) -> (Option<i32>, Value, Output) {
    let o = Command::new(tally())
        .args(["check", "--format", "json"])
        .arg(profile)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o.status.code(), v, o)
}

/// Asserts that the check passed with every compared function equal, and returns the numbers
/// of functions and edge counts compared.
fn assert_all_equal(what: &str, profile: &Path) -> (u64, u64) {
    let (code, v, o) = check(profile);
    assert_eq!(
        code,
        Some(0),
        "{what}: tally check failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(v["passed"], true, "{what}: {v}");
    let n = |k: &str| v[k].as_u64().unwrap();
    assert_eq!(n("compared"), n("equal"), "{what}: not all equal: {v}");
    (n("compared"), n("edges"))
}

/// Builds `args` plain and with the oracle in `mode`, runs both in `dir` with `run_args`, and
/// checks that the output and status are the plain build's and that the check passes.
fn plain_and_checked(
    name: &str,
    cxx: bool,
    mode: &str,
    args: &[&str],
    run_args: &[&str],
    dir: &Path,
) -> (u64, u64) {
    let plain = dir.join(format!("{name}-plain"));
    if !plain.exists() {
        build(Variant::Plain, cxx, args, &plain, dir);
    }
    let bin = dir.join(format!("{name}-{mode}"));
    tally_cc(cxx, mode, true, args, &bin, dir);
    let prof = dir.join(format!("{name}-{mode}.tally"));
    let want = run(&plain, run_args, dir, &dir.join("unused.tally"));
    let got = run(&bin, run_args, dir, &prof);
    assert_eq!(
        got.status.code(),
        want.status.code(),
        "{name} {mode}: status"
    );
    assert_eq!(got.stdout, want.stdout, "{name} {mode}: output");
    assert!(prof.is_file(), "{name} {mode}: no profile");
    assert_all_equal(&format!("{name} {mode}"), &prof)
}

#[test]
fn lua_equals_its_same_run_oracle() {
    let dir = scratch("oracle-lua");
    let script = repo().join("testdata/lua/workload.lua");
    let args = lua_args(&["-O2"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    for mode in ["edge", "vertex", "path"] {
        let (fns, edges) = plain_and_checked(
            "lua",
            false,
            mode,
            &args,
            &[script.to_str().unwrap(), "1"],
            &dir,
        );
        eprintln!("lua {mode}: {fns} functions, {edges} edge counts equal");
        assert!(
            fns > 300 && edges > 10_000,
            "lua {mode}: too little compared"
        );
    }
}

#[test]
fn early_termination_equals_its_same_run_oracle() {
    let dir = scratch("oracle-early");
    for (src, _) in early_programs() {
        let file = src.file_name().unwrap().to_str().unwrap().to_string();
        let stem = file.split('.').next().unwrap();
        for mode in MODES {
            let (fns, _) = plain_and_checked(
                stem,
                file.ends_with(".cpp"),
                mode,
                &["-O2", "-g", src.to_str().unwrap()],
                &[],
                &dir,
            );
            assert!(fns >= 2, "{file} {mode}: too little compared");
        }
    }
}

fn workers() -> PathBuf {
    repo().join("testdata/threads/workers.c")
}

#[test]
fn threads_equal_their_same_run_oracle() {
    let dir = scratch("oracle-threads");
    let src = workers();
    for mode in MODES {
        // -pthread makes both the mode's and the oracle's increments atomic.
        let (fns, edges) = plain_and_checked(
            "workers",
            false,
            mode,
            &["-O2", "-g", "-pthread", src.to_str().unwrap()],
            &[],
            &dir,
        );
        assert!(
            fns >= 3 && edges >= 20,
            "workers {mode}: too little compared"
        );
    }
}

/// Reports read only the mode's modules: an oracle build reports exactly what a build without
/// the oracle reports.
#[test]
fn reports_leave_the_oracle_out() {
    let dir = scratch("oracle-reports");
    let src = workers();
    let args = ["-O2", "-g", "-pthread", src.to_str().unwrap()];
    for mode in ["edge", "path"] {
        let mut reports = Vec::new();
        for oracle in [false, true] {
            let bin = dir.join(format!("workers-{mode}-{oracle}"));
            tally_cc(false, mode, oracle, &args, &bin, &dir);
            let prof = dir.join(format!("workers-{mode}-{oracle}.tally"));
            assert!(run(&bin, &[], &dir, &prof).status.success());
            reports.push(counts(&report_json(&prof)));
        }
        assert!(!reports[0].is_empty());
        assert_eq!(
            reports[0], reports[1],
            "{mode}: the oracle changed the report"
        );
    }
    // Without an oracle there is nothing to check: one line, exit status 2.
    let (code, _, o) = check(&dir.join("workers-edge-false.tally"));
    assert_eq!(code, Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("has no same-run oracle") && err.lines().count() == 1,
        "{err}"
    );
}

/// The check is not vacuous: one count changed in the mode's counters, or in the oracle's,
/// and it fails naming the function.
#[test]
fn a_wrong_count_fails_the_check() {
    use tally_format::profile::Profile;
    let dir = scratch("oracle-wrong");
    let src = workers();
    let bin = dir.join("workers");
    tally_cc(
        false,
        "edge",
        true,
        &["-O2", "-g", "-pthread", src.to_str().unwrap()],
        &bin,
        &dir,
    );
    let prof = dir.join("workers.tally");
    assert!(run(&bin, &[], &dir, &prof).status.success());
    assert_all_equal("workers edge", &prof);
    for oracle_side in [false, true] {
        let mut p = Profile::read_file(&prof).unwrap();
        let m = p
            .modules
            .iter_mut()
            .find(|m| m.meta.oracle_for.is_some() == oracle_side)
            .unwrap();
        // The hottest counter of a function whose counts are compared.
        let f = m
            .meta
            .functions
            .iter()
            .find(|f| f.name == "mix" || f.name == "work")
            .expect("workers.c's functions")
            .clone();
        let base = f.counter_base.0 as usize;
        let i = (base..base + f.counters.len())
            .max_by_key(|&i| m.counters[i])
            .unwrap();
        m.counters[i] += 1;
        let bad = dir.join(format!("wrong-{oracle_side}.tally"));
        p.write_file(&bad).unwrap();
        let (code, v, o) = check(&bad);
        assert_eq!(
            code,
            Some(1),
            "oracle side {oracle_side}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert_eq!(v["passed"], false);
        let named = v["differ"]
            .as_array()
            .unwrap()
            .iter()
            .chain(v["unconfirmed"].as_array().unwrap())
            .chain(v["flagged"].as_array().unwrap())
            .any(|d| d.to_string().contains(&f.name));
        assert!(named, "oracle side {oracle_side}: {v}");
    }
}

/// Modes whose profiles give no edge counts refuse the oracle in one line.
#[test]
fn the_oracle_is_refused_where_edges_are_not_counted() {
    let dir = scratch("oracle-refused");
    let src = workers();
    for mode in [
        "events",
        "events-naive",
        "edges-naive",
        "blocks-naive",
        "trace",
        "trace-naive",
    ] {
        let o = Command::new(tally())
            .args([
                "cc",
                &format!("--tally-mode={mode}"),
                "--tally-oracle",
                "-O2",
                "-c",
            ])
            .arg(&src)
            .current_dir(&dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{mode}: accepted");
        assert!(
            err.contains("--tally-oracle is not available") && err.lines().count() == 1,
            "{mode}: {err}"
        );
    }
}

/// A fault between calls (testdata/crash/hot.c): the function active at it cannot be exact,
/// the oracle shows it interrupted, and the profile's signal flag covers it, so the check
/// passes naming it; the same profile without its signal flag fails the check, because the
/// mode's balanced counts of that function would then be shown as exact.
#[test]
fn a_fault_between_calls_is_interrupted_not_silent() {
    use tally_format::profile::Profile;
    let dir = scratch("oracle-fault");
    let src = repo().join("testdata/crash/hot.c");
    for (mode, how) in [("edge", "segv"), ("edge", "fpe"), ("path", "segv")] {
        let bin = dir.join(format!("hot-{mode}"));
        tally_cc(
            false,
            mode,
            true,
            &["-O2", "-g", src.to_str().unwrap()],
            &bin,
            &dir,
        );
        let prof = dir.join(format!("hot-{mode}-{how}.tally"));
        let out = run(&bin, &[how], &dir, &prof);
        assert!(out.status.code().is_none(), "{mode} {how}: no fatal signal");
        let (code, v, o) = check(&prof);
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(code, Some(0), "{mode} {how}: {text}");
        let named = |k: &str| {
            v[k].as_array()
                .unwrap()
                .iter()
                .any(|f| f.to_string().contains("hot ("))
        };
        assert!(
            named("interrupted") || named("flagged"),
            "{mode} {how}: hot is neither interrupted nor flagged: {v}"
        );
        assert!(!v["caveats"].as_array().unwrap().is_empty(), "{v}");
        if named("interrupted") {
            let mut p = Profile::read_file(&prof).unwrap();
            p.signal = None;
            let quiet = dir.join(format!("hot-{mode}-{how}-unflagged.tally"));
            p.write_file(&quiet).unwrap();
            let (code, v, _) = check(&quiet);
            assert_eq!(code, Some(1), "{mode} {how}: {v}");
            assert!(v["unconfirmed"].to_string().contains("hot ("), "{v}");
        }
    }
}
