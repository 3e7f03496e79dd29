//! Snapshots of a long-running process (`TALLY_SNAPSHOT_SIGNAL`, `TALLY_SNAPSHOT_INTERVAL`,
//! `runtime/c/snapshot.c`, docs/design/processes.md "Snapshots"): each part a profile of its
//! own holding the counts since the previous snapshot, exact, and the parts adding up to the
//! process's profile. Shown on `testdata/threads/server.c`, three workers and a main thread
//! whose snapshot points are deterministic: every part against the same-run oracle (every
//! edge and block), against the program's own counts (job() 4p times and nested() p + 1 times
//! in phase p) in an `edge` and an `edges-naive` build, and the sum of the parts against the
//! program's totals and a run without snapshots (the functions whose counts do not depend on
//! thread scheduling: job() and nested()). Then snapshots on a timer, a snapshot that waits
//! for a thread to stop computing (`testdata/threads/busy.c`), and the one-line refusals.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn server() -> PathBuf {
    repo().join("testdata/threads/server.c")
}

/// Builds the server in `mode` (with the same-run oracle where the mode carries one).
fn build_server(dir: &Path, mode: &str, oracle: bool) -> PathBuf {
    build_server_with(dir, mode, oracle, &[])
}

fn build_server_with(dir: &Path, mode: &str, oracle: bool, extra: &[&str]) -> PathBuf {
    let bin = dir.join(format!(
        "server-{mode}{}{}",
        if oracle { "-oracle" } else { "" },
        extra.join("")
    ));
    let o = Command::new(tally())
        .args(["cc", &format!("--tally-mode={mode}")])
        .args(oracle.then_some("--tally-oracle"))
        .args(extra)
        .args(["-O2", "-g", "-pthread"])
        .arg(server())
        .arg("-o")
        .arg(&bin)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tally cc {mode}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    bin
}

/// Runs `bin args` in `dir` with its profile at `dir/<name>.tally` and the environment `env`.
fn run_with(bin: &Path, args: &[&str], dir: &Path, name: &str, env: &[(&str, &str)]) -> Output {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let f = p.file_name().unwrap().to_str().unwrap().to_string();
        if f.starts_with(&format!("{name}.")) && f.ends_with(".tally") {
            std::fs::remove_file(p).unwrap();
        }
    }
    Command::new(bin)
        .args(args)
        .current_dir(dir)
        .env("TALLY_PROFILE", dir.join(format!("{name}.tally")))
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The parts a run left: `<name>.s1.tally`, `<name>.s2.tally`, ... in order, then `<name>.tally`.
fn parts(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut snaps: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let f = p.file_name()?.to_str()?.to_string();
            let n = f
                .strip_prefix(&format!("{name}.s"))?
                .strip_suffix(".tally")?
                .parse()
                .ok()?;
            Some((n, p))
        })
        .collect();
    snaps.sort();
    for (i, (n, _)) in snaps.iter().enumerate() {
        assert_eq!(*n as usize, i + 1, "{name}: snapshots numbered 1, 2, ...");
    }
    let mut out: Vec<PathBuf> = snaps.into_iter().map(|(_, p)| p).collect();
    out.push(dir.join(format!("{name}.tally")));
    out
}

/// `tally check` passes on `profile` with every compared function equal.
pub(crate) fn assert_oracle_equal(what: &str, profile: &Path) {
    let o = Command::new(tally())
        .args(["check", "--format", "json"])
        .arg(profile)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{what}: tally check failed: {v} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(v["compared"], v["equal"], "{what}: {v}");
    assert!(v["compared"].as_u64().unwrap() >= 3, "{what}: {v}");
}

/// The entry count of the function named `name` in a report (0 when not listed).
pub(crate) fn entries(report: &Value, name: &str) -> u64 {
    report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["name"] == name)
        .map(|f| f["entry_count"].as_u64().unwrap())
        .sum()
}

/// The header flag, and the run record's snapshot number, start and end.
pub(crate) fn header(profile: &Path) -> (bool, Option<u32>, u64, u64) {
    let p = tally_format::profile::Profile::read_file(profile).expect("a profile");
    let run = p.run.expect("a run record");
    (p.delta, run.snapshot, run.start_ns, run.end_ns)
}

/// The report with only the functions named `keep`: those whose counts do not depend on how
/// the threads were scheduled (the workers' and main's waits for one another do, and main's
/// sleeps: one a snapshot's signal cut short is resumed in one more pass of its loop).
pub(crate) fn only(report: &Value, keep: &[&str]) -> Value {
    let mut r = report.clone();
    r["functions"]
        .as_array_mut()
        .unwrap()
        .retain(|f| keep.iter().any(|k| f["name"] == *k));
    assert_eq!(r["functions"].as_array().unwrap().len(), keep.len());
    r
}

/// The profile's delta flag: a part, or a sum of parts that are not whole processes.
pub(crate) fn is_delta(profile: &Path) -> bool {
    tally_format::profile::Profile::read_file(profile)
        .expect("a profile")
        .delta
}

/// `tally merge FLAGS -o OUT INPUTS` in `dir`.
fn tally_merge(dir: &Path, flags: &[&str], inputs: &[PathBuf], out: &Path) {
    let inputs = inputs.iter().map(|p| p.display().to_string());
    let args: Vec<String> = ["merge"]
        .iter()
        .chain(flags)
        .map(|a| a.to_string())
        .chain(["-o".to_string(), out.display().to_string()])
        .chain(inputs)
        .collect();
    tally_ok(dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
}

pub(crate) fn merge(dir: &Path, inputs: &[PathBuf], out: &str) -> PathBuf {
    let out = dir.join(out);
    tally_merge(dir, &[], inputs, &out);
    out
}

/// `tally merge --by-program -o DIR/OUT INPUTS`: the one profile it wrote.
fn merge_by_program(dir: &Path, inputs: &[PathBuf], out: &str) -> PathBuf {
    let out = dir.join(out);
    let _ = std::fs::remove_dir_all(&out);
    tally_merge(dir, &["--by-program"], inputs, &out);
    let files: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

/// Early exits of frames waiting at a snapshot derived (the default for these functions) and
/// counted through frame records (`--tally-early-exits=record`), which a snapshot charges and
/// takes back.
#[test]
fn snapshots_on_a_signal_are_exact_parts_that_add_up() {
    for how in ["auto", "record"] {
        signal_parts(how);
    }
}

fn signal_parts(how: &str) {
    let dir = scratch(&format!("snap-signal-{how}"));
    const PHASES: u64 = 4;
    let phases = PHASES.to_string();
    // AWAIT_PARTS: the program waits for each part's file after raising the signal.
    let snap = [("TALLY_SNAPSHOT_SIGNAL", "WINCH"), ("AWAIT_PARTS", "1")];
    let plain = dir.join("server-plain");
    build(
        Variant::Plain,
        false,
        &["-O2", "-pthread", server().to_str().unwrap()],
        &plain,
        &dir,
    );
    let want = run_with(&plain, &[&phases], &dir, "plain", &[]);
    assert!(want.status.success());

    let flag = format!("--tally-early-exits={how}");
    let edge = build_server_with(&dir, "edge", true, &[&flag]);
    let got = run_with(&edge, &[&phases], &dir, "edge", &snap);
    assert_eq!(
        got.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    assert_eq!(got.stdout, want.stdout, "snapshots changed the output");
    assert!(
        got.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let edge_parts = parts(&dir, "edge");
    assert_eq!(edge_parts.len() as u64, PHASES + 1, "{edge_parts:?}");

    let naive = build_server(&dir, "edges-naive", false);
    assert!(run_with(&naive, &[&phases], &dir, "naive", &snap)
        .status
        .success());
    let naive_parts = parts(&dir, "naive");
    assert_eq!(naive_parts.len(), edge_parts.len());

    let mut last_end = 0;
    for (k, e) in edge_parts.iter().enumerate() {
        let what = format!("part {}", k + 1);
        // Written as parts: the flag, the number (none for the last, written at exit), and
        // times that follow on.
        let (delta, number, start, end) = header(e);
        assert!(delta, "{what}: no delta flag");
        let last = k as u64 == PHASES;
        assert_eq!(number, (!last).then_some(k as u32 + 1), "{what}");
        assert!(
            start <= end && (k == 0 || start == last_end),
            "{what}: times"
        );
        last_end = end;
        // Exact: the same-run oracle on every edge and block, ...
        assert_oracle_equal(&what, e);
        // ... and the program's own counts, in both builds.
        let p = k as u64 + 1;
        let (jobs, nests) = if last { (0, 0) } else { (4 * p, p + 1) };
        for (build, part) in [("edge", e), ("edges-naive", &naive_parts[k])] {
            let r = report_json(part);
            assert_eq!(entries(&r, "job"), jobs, "{what} {build}: job()");
            assert_eq!(entries(&r, "nested"), nests, "{what} {build}: nested()");
            assert_eq!(r["delta"], true, "{what} {build}");
        }
    }

    // The parts add up to the process: every part of it merged is its profile (early exits
    // counts again), equal to a run without snapshots; a merge that lacks a part is not.
    let sum = merge(&dir, &edge_parts, "edge-sum.tally");
    assert!(!is_delta(&sum), "the sum of every part is not whole");
    let some = merge(&dir, &edge_parts[1..], "edge-some.tally");
    assert!(is_delta(&some), "a sum without part 1 is whole");
    // The same per program: the parts summed as they come are still known.
    let by = merge_by_program(&dir, &edge_parts, "by-program");
    assert!(
        !is_delta(&by),
        "--by-program: the sum of every part is not whole"
    );
    let by = merge_by_program(&dir, &edge_parts[1..], "by-program-some");
    assert!(is_delta(&by), "--by-program: a sum without part 1 is whole");
    let whole = run_with(&edge, &[&phases], &dir, "whole", &[]);
    assert!(whole.status.success());
    let whole = dir.join("whole.tally");
    assert!(!header(&whole).0, "a run without snapshots is not a part");
    let (s, w) = (report_json(&sum), report_json(&whole));
    assert_eq!(entries(&s, "job"), 4 * PHASES * (PHASES + 1) / 2);
    assert_eq!(entries(&s, "nested"), (PHASES + 1) * (PHASES + 2) / 2 - 1);
    let keep = ["job", "nested"];
    let (s, w) = (only(&s, &keep), only(&w, &keep));
    assert_same_counts("sum of parts", "sum", &s, "whole run", &w, Edges::All);
    assert_oracle_equal("sum of parts", &sum);

    // The text report says what a part is.
    let text = tally_ok(&dir, &["report", edge_parts[1].to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&text).contains("SNAPSHOT PART"));
}

#[test]
fn snapshots_on_a_timer_are_exact_and_add_up() {
    let dir = scratch("snap-interval");
    let edge = build_server(&dir, "edge", true);
    // 8 phases 40 ms apart, a snapshot every 25 ms.
    let args = ["8", "40"];
    let got = run_with(
        &edge,
        &args,
        &dir,
        "tick",
        &[("TALLY_SNAPSHOT_INTERVAL", "0.025")],
    );
    assert_eq!(
        got.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let ps = parts(&dir, "tick");
    assert!(ps.len() >= 3, "too few snapshots: {ps:?}");
    for (k, p) in ps.iter().enumerate() {
        assert_oracle_equal(&format!("timed part {}", k + 1), p);
    }
    let sum = merge(&dir, &ps, "tick-sum.tally");
    assert!(!is_delta(&sum), "the sum of every part is not whole");
    assert!(run_with(&edge, &args, &dir, "untimed", &[])
        .status
        .success());
    let (s, w) = (report_json(&sum), report_json(&dir.join("untimed.tally")));
    assert_eq!(entries(&s, "job"), 4 * 8 * 9 / 2);
    let (s, w) = (only(&s, &["job", "nested"]), only(&w, &["job", "nested"]));
    assert_same_counts("timed parts", "sum", &s, "whole run", &w, Edges::All);
    eprintln!("{} parts", ps.len());
}

/// A snapshot asked for while a thread computes waits: the runtime tries again until every
/// thread waits in a system call, says so in one stderr line once a second of tries failed,
/// and the part it then takes is exact and holds all the computing before it.
#[test]
fn a_snapshot_waits_for_a_running_thread_and_says_so_once() {
    let dir = scratch("snap-busy");
    let bin = dir.join("busy");
    let o = Command::new(tally())
        .args(["cc", "--tally-oracle", "-O2", "-g", "-pthread"])
        .arg(repo().join("testdata/threads/busy.c"))
        .arg("-o")
        .arg(&bin)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = run_with(
        &bin,
        &["1500"],
        &dir,
        "busy",
        &[("TALLY_SNAPSHOT_SIGNAL", "WINCH")],
    );
    let err = String::from_utf8_lossy(&got.stderr);
    assert_eq!(got.status.code(), Some(0), "{err}");
    assert_eq!(got.stdout, b"done\n");
    assert!(
        err.lines().count() == 1 && err.starts_with("tally: snapshot deferred: "),
        "{err}"
    );
    let ps = parts(&dir, "busy");
    assert_eq!(ps.len(), 2, "{ps:?}");
    for (k, p) in ps.iter().enumerate() {
        assert_oracle_equal(&format!("part {}", k + 1), p);
    }
    let (_, number, start, end) = header(&ps[0]);
    assert_eq!(number, Some(1));
    assert!(
        end - start >= 1_400_000_000,
        "taken {} ms after the start, before the worker was done",
        (end - start) / 1_000_000
    );
    let (first, last) = (report_json(&ps[0]), report_json(&ps[1]));
    assert!(entries(&first, "step") > 0);
    assert_eq!(entries(&last, "step"), 0, "computing after the snapshot");
}

/// What cannot be taken is said in one line, and the process runs and writes its profile as
/// without snapshots.
#[test]
fn snapshots_that_cannot_be_taken_are_refused_in_one_line() {
    let dir = scratch("snap-refused");
    let edge = build_server(&dir, "edge", false);
    let path = build_server(&dir, "path", false);
    let cases: [(&Path, (&str, &str), &str); 4] = [
        (
            &edge,
            ("TALLY_SNAPSHOT_SIGNAL", "NOPE"),
            "TALLY_SNAPSHOT_SIGNAL is not a signal",
        ),
        (
            &edge,
            ("TALLY_SNAPSHOT_INTERVAL", "soon"),
            "not a positive number of seconds",
        ),
        (
            &edge,
            ("TALLY_SNAPSHOT_INTERVAL", "0"),
            "not a positive number of seconds",
        ),
        (
            &path,
            ("TALLY_SNAPSHOT_SIGNAL", "WINCH"),
            "they need edge counters",
        ),
    ];
    for (bin, env, says) in cases {
        let o = run_with(bin, &["2"], &dir, "refused", &[env]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{env:?}: {err}");
        assert!(
            err.contains(says) && err.lines().count() == 1,
            "{env:?}: {err}"
        );
        assert_eq!(
            parts(&dir, "refused").len(),
            1,
            "{env:?}: a snapshot was written"
        );
        assert!(
            !header(&dir.join("refused.tally")).0,
            "{env:?}: written as a part"
        );
    }
}
