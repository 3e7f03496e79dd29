//! Stress: a few hundred runs of a program that dlopens a tally-built
//! library, forks, execs itself, dlcloses, and ends in every way a process ends (return, exit,
//! _exit, exec chains, SIGTERM, abort), eight at a time, all writing one merge-pattern (`%m`) file
//! per build, plus runs killed with SIGKILL at random moments (continuous mode, `%p` files) or
//! with SIGTERM (the crash path). Checked:
//! - no run lost: the merged `edges-naive` profile's `main` entry count is exactly the number of
//!   process images that wrote into it (each run, each exec'd image, each fork child), and every
//!   count of the merged `edge` profile equals the merged oracle's (the runs are deterministic,
//!   so the two builds' sums are comparable);
//! - no file corrupt: every profile written by a killed run reads (`tally report` exits 0, or 4
//!   for an unfinished continuous profile), and nothing but the expected files is left;
//! - every profile exact or marked interrupted: the `edges-naive` profiles of killed runs balance
//!   in every function except those named interrupted, which are among the functions that can be
//!   active at a kill.
//!
//! The schedule comes from a fixed seed, so a failure reproduces.

use crate::support::*;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Runs written through the merge pattern (each for both builds).
const MERGED_RUNS: usize = 240;
/// Runs killed at a random moment (edges-naive build, `%p`).
const KILLED_RUNS: usize = 60;
/// Processes alive at once.
const BATCH: usize = 8;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A case of `testdata/stress/stress.c` and the process images that write a profile for it.
fn pick(rng: &mut Rng) -> (Vec<String>, u64) {
    match rng.below(9) {
        0 => (vec!["return".into()], 1),
        1 => (vec!["exit".into()], 1),
        2 => (vec!["_exit".into()], 1),
        3 => {
            let n = rng.below(3) + 1;
            (vec!["exec".into(), n.to_string()], n + 1)
        }
        4 => (vec!["fork".into()], 2),
        5 => (vec!["dlclose".into()], 1),
        6 => (vec!["term".into()], 1),
        7 => (vec!["abort".into()], 1),
        _ => (vec!["exit".into()], 1),
    }
}

struct Build {
    exe: PathBuf,
    lib: PathBuf,
}

fn build_pair(dir: &Path, mode: &'static str) -> Build {
    let src = repo().join("testdata/stress");
    let lib = dir.join(format!("libstress-{mode}.so"));
    build(
        Variant::Tally(mode),
        false,
        &[
            "-O2",
            "-g",
            "-shared",
            "-fPIC",
            src.join("stresslib.c").to_str().unwrap(),
        ],
        &lib,
        dir,
    );
    let exe = dir.join(format!("stress-{mode}"));
    build(
        Variant::Tally(mode),
        false,
        &["-O2", "-g", src.join("stress.c").to_str().unwrap(), "-ldl"],
        &exe,
        dir,
    );
    Build { exe, lib }
}

fn spawn(b: &Build, case: &[String], profile: &Path, continuous: bool) -> Child {
    let mut c = Command::new(&b.exe);
    c.arg(&b.lib)
        .args(case)
        .env("TALLY_PROFILE", profile)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if continuous {
        c.env("TALLY_CONTINUOUS", "1");
    } else {
        c.env_remove("TALLY_CONTINUOUS");
    }
    c.spawn().unwrap()
}

/// Waits for a run and checks it ended as its case says, with nothing on stderr.
fn finish(child: Child, case: &[String]) {
    use std::os::unix::process::ExitStatusExt;
    let out = child.wait_with_output().unwrap();
    let want = match case[0].as_str() {
        "term" => (None, Some(libc_sig("TERM"))),
        "abort" => (None, Some(libc_sig("ABRT"))),
        _ => (Some(0), None),
    };
    assert_eq!(
        (out.status.code(), out.status.signal()),
        want,
        "{case:?}: stderr {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{case:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn libc_sig(name: &str) -> i32 {
    match name {
        "TERM" => 15,
        "ABRT" => 6,
        "KILL" => 9,
        _ => unreachable!(),
    }
}

fn only_file(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{}: {files:?}", dir.display());
    files.into_iter().next().unwrap()
}

fn main_entries(report: &serde_json::Value) -> u64 {
    report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["name"] == "main")
        .map(|f| f["entry_count"].as_u64().expect("main's count is known"))
        .sum()
}

/// `tally report --format json` of a merged profile: exit 0, or 6 when some run of it ended by
/// a fatal signal (`abort` runs), which the JSON then names.
fn merged_report(profile: &Path) -> serde_json::Value {
    let o = Command::new(tally())
        .args(["report", "--format", "json"])
        .arg(profile)
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: {}",
            profile.display(),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    match o.status.code() {
        Some(0) => assert!(r["signal"].is_null(), "{}", profile.display()),
        Some(6) => assert!(r["signal"].is_u64(), "{}", profile.display()),
        c => panic!(
            "{}: status {c:?}: {}",
            profile.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
    }
    r
}

#[test]
fn hundreds_of_runs_fork_exec_dlopen_killed_none_lost() {
    let dir = scratch("stress");
    let naive = build_pair(&dir, "edges-naive");
    let edge = build_pair(&dir, "edge");
    let mut rng = Rng(0x5eed_1234_abcd_0001);

    // Merge-pattern runs, eight at a time, the same schedule for both builds.
    let mut images = 0;
    let schedule: Vec<(Vec<String>, u64)> = (0..MERGED_RUNS).map(|_| pick(&mut rng)).collect();
    for (b, name) in [(&naive, "naive"), (&edge, "edge")] {
        let out = dir.join(format!("merged-{name}"));
        std::fs::create_dir_all(&out).unwrap();
        for chunk in schedule.chunks(BATCH) {
            let running: Vec<(Child, &Vec<String>)> = chunk
                .iter()
                .map(|(case, _)| (spawn(b, case, &out.join("runs.%m.tally"), false), case))
                .collect();
            for (c, case) in running {
                finish(c, case);
            }
        }
        images = schedule.iter().map(|(_, n)| n).sum::<u64>();
    }
    let merged_naive = only_file(&dir.join("merged-naive"));
    let merged_edge = only_file(&dir.join("merged-edge"));
    let rn = merged_report(&merged_naive);
    let re = merged_report(&merged_edge);
    assert_eq!(main_entries(&rn), images, "runs lost in the merged oracle");
    assert_eq!(
        main_entries(&re),
        images,
        "runs lost in the merged edge profile"
    );
    assert_same_counts("stress merged", "edge", &re, "edges-naive", &rn, Edges::All);

    // Runs killed at random moments: SIGKILL in continuous mode, or SIGTERM; `%p` files.
    let killed = dir.join("killed");
    std::fs::create_dir_all(&killed).unwrap();
    let may_be_active: BTreeSet<&str> = ["main", "work", "inner", "end_here", "lib_step"]
        .into_iter()
        .collect();
    let mut kinds = [0usize; 2];
    for round in 0..KILLED_RUNS / BATCH + 1 {
        let n = BATCH.min(KILLED_RUNS.saturating_sub(round * BATCH));
        let mut batch = Vec::new();
        for _ in 0..n {
            let sigkill = rng.below(2) == 0;
            kinds[sigkill as usize] += 1;
            let case = vec!["block".to_string()];
            let child = spawn(&naive, &case, &killed.join("%p.tally"), sigkill);
            batch.push((child, sigkill, rng.below(3)));
        }
        for (mut child, sigkill, when) in batch {
            // Kill before, while or after it works: at once, after a random short sleep, or
            // once it says it is blocked.
            match when {
                0 => {}
                1 => std::thread::sleep(std::time::Duration::from_micros(rng.below(3000))),
                _ => {
                    let mut line = String::new();
                    let _ = BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line);
                }
            }
            let sig = if sigkill { "-KILL" } else { "-TERM" };
            Command::new("kill")
                .arg(sig)
                .arg(child.id().to_string())
                .status()
                .unwrap();
            let _ = child.wait();
        }
    }
    assert!(
        kinds[0] > 0 && kinds[1] > 0,
        "both kinds of kill: {kinds:?}"
    );
    let mut checked = 0;
    for e in std::fs::read_dir(&killed).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            name.ends_with(".tally") && !name.contains(".tmp."),
            "unexpected file {name}"
        );
        let out = Command::new(tally())
            .args(["report", "--format", "json"])
            .arg(&p)
            .output()
            .unwrap();
        assert!(
            matches!(out.status.code(), Some(0 | 3 | 4 | 6)),
            "{name}: status {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for f in r["functions"].as_array().unwrap() {
            let bad = f.get("interrupted").or_else(|| f.get("inconsistent"));
            if let Some(why) = bad {
                let fname = f["name"].as_str().unwrap();
                assert!(
                    may_be_active.contains(fname),
                    "{name}: {fname} marked {why} but cannot be active at a kill"
                );
            }
        }
        checked += 1;
    }
    // A run killed before its first module registered writes nothing; most write a profile.
    assert!(
        checked >= KILLED_RUNS / 2,
        "only {checked} of {KILLED_RUNS} killed runs left a profile"
    );
}
