//! Every count is exact or flagged: races between threads, faults between calls.
//!
//! - Threads: `tally cc` builds a `-pthread` command with atomic increments, so four threads
//!   calling one function (`testdata/threads/calls.c`) give exactly the calls the program says
//!   it made, in `edge` as in the `edges-naive` oracle. Code built without atomic increments
//!   (no `-pthread`, or `--tally-atomic=off`) in a process that ran a second thread gets a
//!   profile flagged `raced`: the report says why on stderr and exits 5; a run that creates no
//!   thread is not flagged.
//! - Faults: a SIGSEGV or SIGFPE inside a hot loop (`testdata/crash/hot.c`) leaves a profile
//!   written at a fatal signal: the report names the signal and exits 6, even where `edge`'s
//!   counts balance; a normal exit of the same program reports exit 0.

use crate::support::*;
use serde_json::Value;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::Command;

/// `tally report --format json` (or `--format text`): output, exit status, stderr.
fn report(profile: &Path, json: bool) -> (String, i32, String) {
    let o = Command::new(tally())
        .args(["report", "--format", if json { "json" } else { "text" }])
        .arg(profile)
        .output()
        .expect("run tally report");
    (
        String::from_utf8(o.stdout).unwrap(),
        o.status.code().expect("exit status"),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn report_value(profile: &Path) -> (Value, i32, String) {
    let (out, code, err) = report(profile, true);
    (serde_json::from_str(&out).expect("report JSON"), code, err)
}

fn entry_count(r: &Value, name: &str) -> u64 {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no function {name}"))["entry_count"]
        .as_u64()
        .unwrap()
}

/// Runs calls.c's build `bin` with `threads` threads; returns the calls it says it made.
fn run_calls(bin: &Path, threads: &str, dir: &Path, profile: &Path) -> u64 {
    let o = run(bin, &[threads], dir, profile);
    assert!(o.status.success(), "{}: {:?}", bin.display(), o.status);
    let out = String::from_utf8(o.stdout).unwrap();
    out.trim()
        .strip_prefix("calls ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected output {out:?}"))
}

#[test]
fn pthread_builds_count_threads_exactly() {
    let dir = scratch("flags-pthread");
    let src = repo().join("testdata/threads/calls.c");
    let args = ["-O2", "-g", "-pthread", src.to_str().unwrap()];
    let mut reports = Vec::new();
    for mode in ["edges-naive", "edge"] {
        let bin = dir.join(mode);
        build(Variant::Tally(mode), false, &args, &bin, &dir);
        let profile = dir.join(format!("{mode}.tally"));
        let calls = run_calls(&bin, "4", &dir, &profile);
        let (r, code, err) = report_value(&profile);
        assert_eq!(code, 0, "{mode}: {err}");
        assert!(r.get("raced").is_none(), "{mode}");
        assert_eq!(entry_count(&r, "tick"), calls, "{mode}: calls of tick");
        reports.push((mode, r));
    }
    let (fns, _) = assert_same_counts(
        "calls",
        reports[1].0,
        &reports[1].1,
        reports[0].0,
        &reports[0].1,
        Edges::All,
    );
    assert!(fns >= 3);
    // Deterministic whatever the scheduling: the -pthread build's increments are atomic
    // (lock-prefixed on x86-64), those of --tally-atomic=off are not.
    if cfg!(target_arch = "x86_64") {
        for (extra, atomic) in [(None, true), (Some("--tally-atomic=off"), false)] {
            let asm = dir.join("calls.s");
            let mut a = vec!["-O2", "-pthread", "-S", src.to_str().unwrap()];
            a.extend(extra);
            build(Variant::Tally("edge"), false, &a, &asm, &dir);
            let text = std::fs::read_to_string(&asm).unwrap();
            assert_eq!(
                text.contains("\tlock\t") || text.contains("lock "),
                atomic,
                "{extra:?}"
            );
        }
    }
}

#[test]
fn threads_in_non_atomic_builds_are_flagged() {
    let dir = scratch("flags-raced");
    let src = repo().join("testdata/threads/calls.c");
    let src = src.to_str().unwrap();
    for (name, args) in [
        // glibc 2.34+ programs create threads without -pthread.
        ("no-pthread", vec!["-O2", "-g", src]),
        (
            "atomic-off",
            vec!["-O2", "-g", "-pthread", "--tally-atomic=off", src],
        ),
    ] {
        let bin = dir.join(name);
        build(Variant::Tally("edge"), false, &args, &bin, &dir);
        let raced = dir.join(format!("{name}-raced.tally"));
        run_calls(&bin, "4", &dir, &raced);
        let (r, code, err) = report_value(&raced);
        assert_eq!(code, 5, "{name}: exit status; stderr: {err}");
        assert_eq!(r["raced"], true, "{name}");
        assert!(
            err.contains("ran in a multi-threaded process")
                && err.contains("may have lost updates")
                && err.contains("-pthread or --tally-atomic"),
            "{name}: {err}"
        );
        let (text, code, _) = report(&raced, false);
        assert_eq!(code, 5);
        assert!(text.contains("RACED"), "{name}: {text}");

        // No thread created: exact, nothing said.
        let single = dir.join(format!("{name}-single.tally"));
        let calls = run_calls(&bin, "0", &dir, &single);
        let (r, code, err) = report_value(&single);
        assert_eq!(code, 0, "{name} single: {err}");
        assert!(r.get("raced").is_none(), "{name} single");
        assert_eq!(entry_count(&r, "tick"), calls);

        // A merge keeps the flag.
        let merged = dir.join(format!("{name}-merged.tally"));
        tally_ok(
            &dir,
            &[
                "merge",
                "-o",
                merged.to_str().unwrap(),
                single.to_str().unwrap(),
                raced.to_str().unwrap(),
            ],
        );
        let (r, code, _) = report_value(&merged);
        assert_eq!(
            (code, &r["raced"]),
            (5, &Value::Bool(true)),
            "{name} merged"
        );
    }
}

#[test]
fn faults_in_a_hot_function_are_flagged() {
    let dir = scratch("flags-fault");
    let src = repo().join("testdata/crash/hot.c");
    for mode in ["edge", "edges-naive"] {
        let bin = dir.join(mode);
        build(
            Variant::Tally(mode),
            false,
            &["-O2", "-g", src.to_str().unwrap()],
            &bin,
            &dir,
        );
        for (how, sig, name) in [("segv", 11, "SIGSEGV"), ("fpe", 8, "SIGFPE")] {
            let profile = dir.join(format!("{mode}-{how}.tally"));
            let o = run(&bin, &[how], &dir, &profile);
            assert_eq!(o.status.signal(), Some(sig), "{mode} {how}");
            let (r, code, err) = report_value(&profile);
            assert_eq!(code, 6, "{mode} {how}: exit status; stderr: {err}");
            assert_eq!(r["signal"], sig, "{mode} {how}");
            assert!(
                err.contains(&format!(
                    "the profile was written at a fatal signal ({name}, signal {sig})"
                )) && err.contains("functions active at that moment (in any thread)"),
                "{mode} {how}: {err}"
            );
            let (text, _, _) = report(&profile, false);
            assert!(text.contains("FATAL SIGNAL"), "{mode} {how}");
        }
        let profile = dir.join(format!("{mode}-exit.tally"));
        let o = run(&bin, &["exit"], &dir, &profile);
        assert!(o.status.success(), "{mode} exit");
        let (r, code, err) = report_value(&profile);
        assert_eq!(code, 0, "{mode} exit: {err}");
        assert!(r.get("signal").is_none(), "{mode} exit");
        assert_eq!(entry_count(&r, "hot"), 1);
    }
}
