//! The merge pattern (`%m` in TALLY_PROFILE, `crates/runtime/c/merge.c`): 50 processes started
//! at once, all writing one file, give exactly the sum of their runs (`tally merge` of 50 copies
//! of one run's profile, which is the oracle of the addition), in `edge` and `path` mode (path
//! mode with hashed path counters: `many_paths` has 2^12 paths); a profile of another build, a
//! corrupt or truncated file at the path is refused with one stderr line and left unchanged
//! (this run's profile kept as `<path>.refused.<pid>`); a symbolic link at the path is not
//! followed.

use crate::support::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const RUNS: usize = 50;

fn build_c(mode: &'static str, file: &str, dir: &Path) -> PathBuf {
    let bin = dir.join(format!("{}-{mode}", file.trim_end_matches(".c")));
    let src = repo().join("testdata/exec").join(file);
    build(
        Variant::Tally(mode),
        false,
        &["-O0", src.to_str().unwrap()],
        &bin,
        dir,
    );
    bin
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// Runs `bin` once with TALLY_PROFILE=`pattern`; returns its stderr (the status must be 0).
fn run_once(bin: &Path, pattern: &Path) -> String {
    let out = Command::new(bin)
        .env("TALLY_PROFILE", pattern)
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `dir/x.%m` after one run in an empty `dir`: the name %m expands to for `bin`.
fn merged_name(bin: &Path, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    assert_eq!(run_once(bin, &dir.join("x.%m")), "");
    let e = entries(dir);
    assert_eq!(e.len(), 1, "one file expected: {e:?}");
    let name = e[0].file_name().unwrap().to_str().unwrap().to_string();
    let sig = name.strip_prefix("x.").expect("x.<signature>");
    assert!(
        sig.len() == 16 && sig.bytes().all(|b| b.is_ascii_hexdigit()),
        "%m expands to 16 hex digits, not {sig:?}"
    );
    e[0].clone()
}

fn fifty_merge_exactly(mode: &'static str) {
    let dir = scratch(&format!("online-merge-{mode}"));
    let bin = build_c(mode, "merged.c", &dir);
    let single = dir.join("single.tally");
    assert_eq!(run_once(&bin, &single), "");
    let mdir = dir.join("m");
    std::fs::create_dir_all(&mdir).unwrap();
    let children: Vec<_> = (0..RUNS)
        .map(|_| {
            Command::new(&bin)
                .env("TALLY_PROFILE", mdir.join("x.%m"))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert!(
            out.stderr.is_empty(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let e = entries(&mdir);
    assert_eq!(
        e.len(),
        1,
        "{mode}: one merged file and nothing else: {e:?}"
    );
    // The oracle of the sum: tally merge of RUNS copies of the single run.
    let sum = dir.join("sum.tally");
    let o = Command::new(tally())
        .args(["merge", "-o"])
        .arg(&sum)
        .args(std::iter::repeat_n(&single, RUNS))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let merged = report_json(&e[0]);
    let (nf, executed) = assert_same_counts(
        mode,
        "online merge",
        &merged,
        "tally merge",
        &report_json(&sum),
        Edges::All,
    );
    assert!(nf >= 2 && executed >= 20, "{mode}: too little compared");
    assert_eq!(main_entries(&merged), Some(RUNS as u64));
}

#[test]
fn fifty_concurrent_runs_merge_exactly_edge() {
    fifty_merge_exactly("edge");
}

#[test]
fn fifty_concurrent_runs_merge_exactly_path() {
    fifty_merge_exactly("path");
}

/// Puts `bytes` at `target`, runs `bin` on it and checks: one stderr line saying why, the file
/// unchanged, and this run's profile kept under `<target>.refused.<pid>`, equal to one run.
fn refused(bin: &Path, target: &Path, bytes: &[u8], single: &Path, why: &str) {
    std::fs::write(target, bytes).unwrap();
    let stderr = run_once(bin, &target.with_file_name("x.%m"));
    assert_eq!(stderr.lines().count(), 1, "{why}: one line: {stderr}");
    assert!(
        stderr.contains("not merging profile") && stderr.contains(why),
        "{why}: {stderr}"
    );
    assert_eq!(std::fs::read(target).unwrap(), bytes, "{why}: file changed");
    let dir = target.parent().unwrap();
    let kept: Vec<PathBuf> = entries(dir)
        .into_iter()
        .filter(|p| p.to_str().unwrap().contains(".refused."))
        .collect();
    assert_eq!(kept.len(), 1, "{why}: {kept:?}");
    assert!(
        stderr.contains(kept[0].to_str().unwrap()),
        "{why}: {stderr}"
    );
    assert_same_counts(
        why,
        "kept",
        &report_json(&kept[0]),
        "one run",
        &report_json(single),
        Edges::All,
    );
    std::fs::remove_file(&kept[0]).unwrap();
}

#[test]
fn refuses_other_builds_corrupt_files_and_symlinks() {
    let dir = scratch("online-merge-refusals");
    let bin = build_c("edge", "merged.c", &dir);
    let other = build_c("edge", "other.c", &dir);
    let single = dir.join("single.tally");
    assert_eq!(run_once(&bin, &single), "");
    let other_prof = dir.join("other.tally");
    assert_eq!(run_once(&other, &other_prof), "");
    let target = merged_name(&bin, &dir.join("m"));
    let good = std::fs::read(&target).unwrap();

    // Another build's profile at the path.
    let theirs = std::fs::read(&other_prof).unwrap();
    refused(&bin, &target, &theirs, &single, "another build");
    // Not a profile; truncated; one counter changed (checksum); a crafted header whose module
    // count and lengths point far past the end.
    refused(&bin, &target, b"garbage\n", &single, "not a tally profile");
    refused(
        &bin,
        &target,
        &good[..good.len() / 2],
        &single,
        "corrupt or truncated",
    );
    let mut flipped = good.clone();
    let at = flipped.len() - 40;
    flipped[at] ^= 1;
    refused(&bin, &target, &flipped, &single, "corrupt");
    let mut crafted = good.clone();
    crafted[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    refused(&bin, &target, &crafted, &single, "corrupt");
    let module = good
        .windows(8)
        .position(|w| w == b"TALLYMOD")
        .expect("a module record");
    for len in [u64::MAX - 3, 1 << 40] {
        let mut crafted = good.clone();
        crafted[module + 16..module + 24].copy_from_slice(&len.to_le_bytes());
        refused(&bin, &target, &crafted, &single, "corrupt");
    }
    refused(&bin, &target, &good[..60], &single, "corrupt or truncated");

    // The intact file still merges.
    std::fs::write(&target, &good).unwrap();
    assert_eq!(run_once(&bin, &target.with_file_name("x.%m")), "");
    let twice = report_json(&target);
    assert_eq!(main_entries(&twice), Some(2));

    // One run's profile (version 5, with its run record) at the path merges too, into a
    // version-4 sum.
    std::fs::copy(&single, &target).unwrap();
    assert_eq!(run_once(&bin, &target.with_file_name("x.%m")), "");
    let sum = std::fs::read(&target).unwrap();
    assert_eq!(sum[8..12], 4u32.to_le_bytes());
    let two = report_json(&target);
    assert_eq!(main_entries(&two), Some(2));

    // A symbolic link at the path, to a profile of the same build: not followed, not replaced.
    let victim = dir.join("victim.tally");
    std::fs::write(&victim, &good).unwrap();
    std::fs::remove_file(&target).unwrap();
    std::os::unix::fs::symlink(&victim, &target).unwrap();
    let stderr = run_once(&bin, &target.with_file_name("x.%m"));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert_eq!(std::fs::read(&victim).unwrap(), good);
    assert!(std::fs::symlink_metadata(&target)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        entries(target.parent().unwrap()).len(),
        1,
        "nothing else written"
    );
}

/// `main`'s entry count in a `tally report --format json`.
fn main_entries(report: &serde_json::Value) -> Option<u64> {
    report["functions"]
        .as_array()?
        .iter()
        .find(|f| f["name"] == "main")?["entry_count"]
        .as_u64()
}
