//! Snapshots across the events of a process's life that change what it counts
//! (`testdata/snapshots/lifecycle.c`; docs/design/processes.md, "Snapshots"): a tally-built
//! plugin `dlopen`ed, `dlclose`d (its counts since the last snapshot saved, and written with
//! the next part) and loaded again; a `fork` (the child's parts start where its parent's last
//! snapshot ended); an `exec` (it writes the last part). Every part against the same-run
//! oracle and against the program's own counts, and the parts of each process against a run
//! without snapshots. Also with a tally-built library linked in, whose copy of the runtime
//! takes the snapshots while an `exec` or `_exit` in the executable writes through its own.

use crate::long_running::{assert_oracle_equal, entries, header, is_delta, merge, only};
use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `tally cc --tally-mode=edge --tally-oracle -O2 -g ARGS -o OUT` in `dir`.
fn tally_cc(dir: &Path, args: &[&str], out: &str) -> PathBuf {
    let bin = dir.join(out);
    let o = Command::new(tally())
        .args(["cc", "--tally-mode=edge", "--tally-oracle", "-O2", "-g"])
        .args(args)
        .arg("-o")
        .arg(&bin)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    bin
}

/// The program and its plugin, built in `dir`.
fn build_lifecycle(dir: &Path) -> (PathBuf, PathBuf) {
    let src = repo().join("testdata/snapshots");
    let plugin = src.join("plugin.c");
    let life = src.join("lifecycle.c");
    let so = tally_cc(
        dir,
        &["-fPIC", "-shared", plugin.to_str().unwrap()],
        "plugin.so",
    );
    let exe = tally_cc(dir, &[life.to_str().unwrap(), "-ldl"], "lifecycle");
    (exe, so)
}

/// The program linked with its plugin as a library (loaded before the program's own code, so
/// the plugin's copy of the runtime is the one that registers first and takes snapshots).
fn build_lifecycle_with_library(dir: &Path) -> PathBuf {
    let (_, so) = build_lifecycle(dir);
    let life = repo().join("testdata/snapshots/lifecycle.c");
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    tally_cc(
        dir,
        &[
            life.to_str().unwrap(),
            "-Wl,--no-as-needed",
            so.to_str().unwrap(),
            &rpath,
            "-ldl",
        ],
        "lifecycle-lib",
    )
}

/// Runs the program in a directory of its own, `dir/NAME`, its profiles at `r.%p.tally`,
/// with snapshots on SIGWINCH when `snapshots`.
fn run_lifecycle(
    exe: &Path,
    args: &[&str],
    dir: &Path,
    name: &str,
    snapshots: bool,
) -> (Output, PathBuf) {
    let out = dir.join(name);
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .current_dir(&out)
        .env("TALLY_PROFILE", out.join("r.%p.tally"));
    if snapshots {
        cmd.env("TALLY_SNAPSHOT_SIGNAL", "WINCH");
    }
    let o = cmd.output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.stderr.is_empty(),
        "{name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (o, out)
}

/// Each process's parts in `dir`, by pid: `r.PID.s1.tally`, ... in order, then `r.PID.tally`
/// (a fork child's first snapshot has its parent's next number).
fn processes(dir: &Path) -> BTreeMap<u32, Vec<PathBuf>> {
    let mut by_pid: BTreeMap<u32, Vec<(u32, PathBuf)>> = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let f = p.file_name().unwrap().to_str().unwrap().to_string();
        let Some(rest) = f.strip_prefix("r.").and_then(|r| r.strip_suffix(".tally")) else {
            panic!("unexpected file {f}");
        };
        let (pid, snap) = match rest.split_once(".s") {
            Some((pid, n)) => (pid, n.parse().unwrap()),
            None => (rest, u32::MAX),
        };
        by_pid
            .entry(pid.parse().unwrap())
            .or_default()
            .push((snap, p));
    }
    by_pid
        .into_iter()
        .map(|(pid, mut ps)| {
            ps.sort();
            (pid, ps.into_iter().map(|(_, p)| p).collect())
        })
        .collect()
}

/// The one process's parts in `dir`, checked: snapshot numbers `first`, `first + 1`, ... and
/// the last part, each part's counts starting where the one before ended, every part exact
/// against the same-run oracle.
fn checked_parts(what: &str, parts: &[PathBuf], first: u32) -> Vec<(u64, u64)> {
    let mut times = Vec::new();
    for (k, p) in parts.iter().enumerate() {
        let part = format!("{what}, part {}", k + 1);
        let (delta, number, start, end) = header(p);
        assert!(delta, "{part}: no delta flag");
        let last = k + 1 == parts.len();
        assert_eq!(number, (!last).then_some(first + k as u32), "{part}");
        if let Some(&(_, prev_end)) = times.last() {
            assert_eq!(
                start, prev_end,
                "{part}: does not start where the part before ended"
            );
        }
        assert!(start <= end, "{part}: times");
        times.push((start, end));
        assert_oracle_equal(&part, p);
    }
    times
}

/// The parts of the two processes a run left in `out`, a parent whose first snapshot is number
/// 1 and a fork child made after it, `lens` parts each, checked: the child's first part starts
/// at the parent's snapshot 1 (and, after a snapshot of its own, is numbered 2).
fn parent_and_child(what: &str, out: &Path, lens: (usize, usize)) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let procs = processes(out);
    assert_eq!(procs.len(), 2, "{what}: {procs:?}");
    let (mut parent, mut child): (Vec<_>, Vec<_>) = procs
        .into_values()
        .partition(|ps| header(&ps[0]).1 == Some(1));
    let (parent, child) = (parent.remove(0), child.remove(0));
    assert_eq!((parent.len(), child.len()), lens, "{parent:?} {child:?}");
    let pt = checked_parts(&format!("{what}: parent"), &parent, 1);
    let ct = checked_parts(&format!("{what}: child"), &child, 2);
    assert_eq!(
        ct[0].0, pt[0].1,
        "{what}: the child's first part does not start at the parent's snapshot 1"
    );
    (parent, child)
}

/// The parts of the one process a run left in `out`, `n` of them.
fn one_process(out: &Path, n: usize) -> Vec<PathBuf> {
    let procs = processes(out);
    assert_eq!(procs.len(), 1, "{procs:?}");
    let parts = procs.into_values().next().unwrap();
    assert_eq!(parts.len(), n, "{parts:?}");
    parts
}

/// The parts of one process merged are whole and equal, every function and edge, to the
/// profile of a run of `exe ARGS` without snapshots, which printed what `got` printed. The
/// report of the sum.
fn assert_parts_add_up(
    dir: &Path,
    exe: &Path,
    args: &[&str],
    got: &Output,
    parts: &[PathBuf],
) -> Value {
    let (want, whole) = run_lifecycle(exe, args, dir, "whole", false);
    assert_eq!(
        got.stdout, want.stdout,
        "{args:?}: snapshots changed the output"
    );
    let whole = one_process(&whole, 1);
    let sum = merge(dir, parts, &format!("{}-sum.tally", args[0]));
    assert!(
        !is_delta(&sum),
        "{args:?}: every part of the process merged is not whole"
    );
    let (s, w) = (report_json(&sum), report_json(&whole[0]));
    assert_same_counts(
        &format!("{args:?}: sum of parts"),
        "sum",
        &s,
        "run",
        &w,
        Edges::All,
    );
    s
}

fn entries_in(parts: &[PathBuf], name: &str) -> Vec<u64> {
    parts
        .iter()
        .map(|p| entries(&report_json(p), name))
        .collect()
}

/// A plugin dlclosed between two snapshots: its counts since the first are saved at the
/// dlclose and written with the second; loaded and closed twice before the third, it counts
/// both loads there.
#[test]
fn snapshots_count_a_plugin_across_dlclose_and_dlopen() {
    let dir = scratch("snap-life-dl");
    let (exe, so) = build_lifecycle(&dir);
    let args = ["dl", so.to_str().unwrap()];
    let (got, out) = run_lifecycle(&exe, &args, &dir, "snap", true);
    let parts = one_process(&out, 4);
    checked_parts("dl", &parts, 1);
    assert_eq!(entries_in(&parts, "plugin_work"), [1, 2, 7, 0]);
    let sum = assert_parts_add_up(&dir, &exe, &args, &got, &parts);
    assert_eq!(entries(&sum, "plugin_work"), 10);
}

/// A fork child's parts hold what it did after its parent's last snapshot (its first one
/// starts then): with that snapshot of the parent they add up to the child's counts; the
/// parent's own parts add up to its profile.
#[test]
fn snapshots_of_a_fork_child_start_at_its_parents_last() {
    let dir = scratch("snap-life-fork");
    let (exe, _) = build_lifecycle(&dir);
    let (got, out) = run_lifecycle(&exe, &["fork"], &dir, "snap", true);
    // The parent took snapshot 1; the child's first is number 2.
    let (parent, child) = &parent_and_child("fork", &out, (3, 2));
    assert_eq!(entries_in(parent, "work"), [1, 2, 0]);
    assert_eq!(entries_in(child, "work"), [7, 3]);

    let (want, whole) = run_lifecycle(&exe, &["fork"], &dir, "whole", false);
    let mut got_lines: Vec<_> = got.stdout.split(|&b| b == b'\n').collect();
    let mut want_lines: Vec<_> = want.stdout.split(|&b| b == b'\n').collect();
    got_lines.sort();
    want_lines.sort();
    assert_eq!(got_lines, want_lines, "snapshots changed the output");
    // Without snapshots: the parent's profile counts work() 3 times, the child's 1 + 7 + 3.
    let whole: Vec<Vec<PathBuf>> = processes(&whole).into_values().collect();
    let (wp, wc): (Vec<_>, Vec<_>) = whole
        .iter()
        .map(|ps| report_json(&ps[0]))
        .partition(|r| entries(r, "work") == 3);
    assert_eq!((wp.len(), wc.len()), (1, 1));
    assert_eq!(entries(&wc[0], "work"), 11);

    let sum = merge(&dir, parent, "parent-sum.tally");
    assert!(!is_delta(&sum), "the parent's parts merged are not whole");
    let s = report_json(&sum);
    assert_same_counts("fork: parent's parts", "sum", &s, "run", &wp[0], Edges::All);

    // The child's parts alone are not a whole process; with the parent's snapshot 1 they hold
    // the child's counts (a sum of two processes' parts: main's early exits stay unknown).
    let alone = merge(&dir, child, "child-sum.tally");
    assert!(is_delta(&alone), "a fork child's parts alone are whole");
    let mut with = vec![parent[0].clone()];
    with.extend(child.iter().cloned());
    let sum = merge(&dir, &with, "child-with-parent.tally");
    let (s, w) = (only(&report_json(&sum), &["work"]), only(&wc[0], &["work"]));
    assert_same_counts("fork: child's parts", "sum", &s, "run", &w, Edges::All);
}

/// An exec writes the last part, exact up to the exec; with the snapshots before it the
/// process's profile.
#[test]
fn snapshots_end_at_an_exec() {
    let dir = scratch("snap-life-exec");
    let (exe, _) = build_lifecycle(&dir);
    let (got, out) = run_lifecycle(&exe, &["exec"], &dir, "snap", true);
    let parts = one_process(&out, 2);
    checked_parts("exec", &parts, 1);
    assert_eq!(entries_in(&parts, "work"), [4, 6]);
    assert_parts_add_up(&dir, &exe, &["exec"], &got, &parts);
}

/// An exec and an `_exit` in the executable write the last part through the executable's copy
/// of the runtime while the library's copy took the snapshots: the part is one (delta flag,
/// starting at the last snapshot), and the parts add up to the process's profile.
#[test]
fn the_last_part_is_a_part_whichever_image_writes_it() {
    let dir = scratch("snap-life-owner");
    let exe = build_lifecycle_with_library(&dir);
    for mode in ["exec", "_exit"] {
        let (got, out) = run_lifecycle(&exe, &[mode], &dir, "snap", true);
        let parts = one_process(&out, 2);
        checked_parts(mode, &parts, 1);
        assert_eq!(entries_in(&parts, "work"), [4, 6], "{mode}");
        assert_parts_add_up(&dir, &exe, &[mode], &got, &parts);
    }
}

/// A fork child that execs, as test runners start their tests (libuv's): its profile, written
/// before the exec, holds what it did after its parent's last snapshot, so it is a part, and
/// with the parent's parts the sum of the two processes stays one of parts (early exits
/// unknown), never a profile with negative counts.
#[test]
fn a_fork_child_that_execs_writes_a_part() {
    let dir = scratch("snap-life-fork-exec");
    let exe = build_lifecycle_with_library(&dir);
    let (_, out) = run_lifecycle(&exe, &["fork-exec"], &dir, "snap", true);
    let (parent, child) = &parent_and_child("fork-exec", &out, (2, 1));
    assert_eq!(entries_in(parent, "work"), [1, 2]);
    assert_eq!(entries_in(child, "work"), [5]);
    let all: Vec<PathBuf> = parent.iter().chain(child).cloned().collect();
    let sum = merge(&dir, &all, "fork-exec-sum.tally");
    assert!(is_delta(&sum), "a fork child's part made the sum whole");
    assert_oracle_equal("fork-exec: sum", &sum);
}
