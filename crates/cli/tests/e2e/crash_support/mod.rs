//! Helpers of the tests of how a process ends (`crash.rs`, `exit_threads.rs`): run a build
//! with core dumps enabled and keep its raw wait status, read reports that name inconsistent
//! functions.
#![allow(dead_code)]

use crate::support::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The builds every case runs: plain (the reference), `edge` (default: each function picks
/// records or derived early exits), `edge` with frame records forced (every abandoned frame's
/// count then comes from the runtime charging its record) and the `edges-naive` oracle (which
/// derives early exits by propagation: it needs no record), last.
pub const BUILDS: [Variant; 4] = [
    Variant::Plain,
    Variant::Tally("edge"),
    Variant::Tally("edge-record"),
    Variant::Tally("edges-naive"),
];

/// The reports of one case: the oracle's and the others', by build name.
pub struct Case {
    pub status: i32,
    pub naive: Value,
    pub others: Vec<(&'static str, Value)>,
}

/// One run: the raw wait status, stdout, and the profile (None for the plain build).
pub struct Run {
    pub status: i32,
    pub stdout: String,
    pub profile: Option<PathBuf>,
}

/// Runs the build `v` (a file named after it in `builds`) with core dumps enabled (so the core-dump bit of the wait status means
/// something), in a directory of its own (cores land there and are removed). `ignore_usr2`
/// starts it with SIGUSR2 ignored; `signal_when_ready` sends it SIGTERM once it printed
/// "ready" (it then blocks in pause() or read()).
pub fn run_case(
    builds: &Path,
    v: Variant,
    case: &str,
    ignore_usr2: bool,
    signal_when_ready: bool,
) -> Run {
    let dir = builds.join(format!("run-{case}-{}", v.name()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("p.tally");
    let trap = if ignore_usr2 { "trap '' USR2; " } else { "" };
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -c unlimited 2>/dev/null; {trap}exec \"$0\" \"$@\""
        ))
        .arg(builds.join(v.name()))
        .arg(case)
        .current_dir(&dir)
        .env("TALLY_PROFILE", &profile)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run crash");
    let stdin = child.stdin.take(); // kept open: the program blocks in read(0)
    let mut out = String::new();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        out.push_str(&line);
        if signal_when_ready && line == "ready\n" {
            wait_until_sleeping(child.id());
            let k = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .unwrap();
            assert!(k.success());
        }
    }
    let status = child.wait().unwrap().into_raw();
    drop(stdin);
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("core") {
            let _ = std::fs::remove_file(e.path());
        }
    }
    Run {
        status,
        stdout: out,
        profile: (v != Variant::Plain).then_some(profile),
    }
}

/// Waits until the process sleeps: after printing "ready" the program's only blocking call is
/// pause() or read(0), so the signal then arrives inside it (an exact point, where a signal
/// between "ready" and the call would stop the function between calls).
pub fn wait_until_sleeping(pid: u32) {
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let state = stat.rsplit(") ").next().unwrap().chars().next().unwrap();
        if state == 'S' {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// `tally report --format json`, which exits 3 when a function is inconsistent, and 6 (with
/// the signal in the JSON and on stderr) for a profile written at a fatal signal.
pub fn report_any(profile: &Path) -> (Value, i32) {
    let o = Command::new(tally())
        .args(["report", "--format", "json"])
        .arg(profile)
        .output()
        .unwrap();
    let code = o.status.code().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        code == 0 || code == 3 || code == 6,
        "tally report {}: {stderr}",
        profile.display(),
    );
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        code == 6,
        r["signal"].is_u64(),
        "{}: exit status {code}, signal {}",
        profile.display(),
        r["signal"]
    );
    if code == 6 {
        assert!(
            stderr.contains("the profile was written at a fatal signal"),
            "{stderr}"
        );
    }
    (r, code)
}

pub fn inconsistent(r: &Value) -> Vec<String> {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| !f["inconsistent"].is_null())
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

/// Drops the named function from a report.
pub fn without(r: &Value, name: &str) -> Value {
    let mut r = r.clone();
    r["functions"]
        .as_array_mut()
        .unwrap()
        .retain(|f| f["name"] != name);
    r
}

pub fn entries(r: &Value, name: &str) -> u64 {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no function {name}"))["entry_count"]
        .as_u64()
        .unwrap()
}

/// The terminating signal of a raw wait status (0: it exited).
pub fn termsig(status: i32) -> i32 {
    status & 0x7f
}

/// Runs the builds of [`BUILDS`] (files in `builds` named after them); checks they end alike and print alike, and returns the `edge` and
/// `edges-naive` reports with the plain run's wait status.
pub fn check_case(builds: &Path, case: &str, ignore_usr2: bool, signal_when_ready: bool) -> Case {
    let runs: Vec<Run> = BUILDS
        .iter()
        .map(|v| run_case(builds, *v, case, ignore_usr2, signal_when_ready))
        .collect();
    let mut reports = Vec::new();
    for (v, r) in BUILDS.iter().zip(&runs).skip(1) {
        assert_eq!(
            r.status,
            runs[0].status,
            "{case} {}: wait status {:#x}, plain {:#x}",
            v.name(),
            r.status,
            runs[0].status
        );
        assert_eq!(r.stdout, runs[0].stdout, "{case} {}: output", v.name());
        let p = r.profile.as_ref().unwrap();
        assert!(p.is_file(), "{case} {}: no profile written", v.name());
        reports.push((v.name(), report_any(p).0));
    }
    let (_, naive) = reports.pop().unwrap();
    Case {
        status: runs[0].status,
        naive,
        others: reports,
    }
}
