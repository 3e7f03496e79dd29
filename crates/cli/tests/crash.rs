//! Crash-exact profiles (issue 14, point 7; `crates/runtime/c/signals.c`): a process that ends
//! on a fatal signal, or through `quick_exit`, writes its profile with the active frames charged
//! as at `exit`, and ends exactly as the plain build does: same wait status (terminating signal
//! and core-dump bit, with core dumps enabled), same output (which includes what the program
//! sees of its signal dispositions through `sigaction`). `testdata/crash/crash.c` picks the way
//! it ends from its argument. Where every active frame is at a call (abort, raise, kill, a signal
//! while blocked in pause or read, quick_exit, a chained handler) the `edge` counts equal the
//! `edges-naive` oracle's; where the fault is between calls (a NULL dereference, a division by
//! zero) the oracle names the faulting function inconsistent and every other function is exact.

mod support;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use support::*;

const BUILDS: [Variant; 3] = [
    Variant::Plain,
    Variant::Tally("edge"),
    Variant::Tally("edges-naive"),
];

/// The three builds of crash.c, made once for every test here.
fn builds() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("crash");
        let src = repo().join("testdata/crash/crash.c");
        for v in BUILDS {
            build(
                v,
                false,
                &["-O1", "-g", src.to_str().unwrap()],
                &dir.join(v.name()),
                &dir,
            );
        }
        dir
    })
}

/// One run: the raw wait status, stdout, and the profile (None for the plain build).
struct Run {
    status: i32,
    stdout: String,
    profile: Option<PathBuf>,
}

/// Runs a build with core dumps enabled (so the core-dump bit of the wait status means
/// something), in a directory of its own (cores land there and are removed). `ignore_usr2`
/// starts it with SIGUSR2 ignored; `signal_when_ready` sends it SIGTERM once it printed
/// "ready" (it then blocks in pause() or read()).
fn run_case(v: Variant, case: &str, ignore_usr2: bool, signal_when_ready: bool) -> Run {
    let dir = builds().join(format!("run-{case}-{}", v.name()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("p.tally");
    let trap = if ignore_usr2 { "trap '' USR2; " } else { "" };
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -c unlimited 2>/dev/null; {trap}exec \"$0\" \"$@\""
        ))
        .arg(builds().join(v.name()))
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
fn wait_until_sleeping(pid: u32) {
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let state = stat.rsplit(") ").next().unwrap().chars().next().unwrap();
        if state == 'S' {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// `tally report --format json`, which exits 3 when a function is inconsistent.
fn report_any(profile: &Path) -> (Value, i32) {
    let o = Command::new(tally())
        .args(["report", "--format", "json"])
        .arg(profile)
        .output()
        .unwrap();
    let code = o.status.code().unwrap();
    assert!(
        code == 0 || code == 3,
        "tally report {}: {}",
        profile.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    (serde_json::from_slice(&o.stdout).unwrap(), code)
}

fn inconsistent(r: &Value) -> Vec<String> {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| !f["inconsistent"].is_null())
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

/// Drops the named function from a report.
fn without(r: &Value, name: &str) -> Value {
    let mut r = r.clone();
    r["functions"]
        .as_array_mut()
        .unwrap()
        .retain(|f| f["name"] != name);
    r
}

fn entries(r: &Value, name: &str) -> u64 {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no function {name}"))["entry_count"]
        .as_u64()
        .unwrap()
}

/// Runs the three builds; checks they end alike and print alike, and returns the `edge` and
/// `edges-naive` reports with the plain run's wait status.
fn check_case(case: &str, ignore_usr2: bool, signal_when_ready: bool) -> (i32, Value, Value) {
    let runs: Vec<Run> = BUILDS
        .iter()
        .map(|v| run_case(*v, case, ignore_usr2, signal_when_ready))
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
        reports.push(report_any(p).0);
    }
    let naive = reports.pop().unwrap();
    let edge = reports.pop().unwrap();
    (runs[0].status, edge, naive)
}

/// Every active frame is at a call: `edge` equals the oracle everywhere, and the frames of
/// `die` (four recursive calls and the one that ends) are all counted as entered.
fn check_exact(case: &str, ignore_usr2: bool, signal_when_ready: bool) -> i32 {
    let (status, edge, naive) = check_case(case, ignore_usr2, signal_when_ready);
    assert_eq!(inconsistent(&naive), Vec::<String>::new(), "{case}: oracle");
    assert_eq!(inconsistent(&edge), Vec::<String>::new(), "{case}: edge");
    let (fns, executed) = assert_same_counts(case, "edge", &edge, "edges-naive", &naive, true);
    assert!(fns >= 3 && executed >= 8, "{case}: too little compared");
    status
}

fn termsig(status: i32) -> i32 {
    status & 0x7f
}

#[test]
fn abort_without_handler() {
    let s = check_exact("abort", false, false);
    assert_eq!(termsig(s), 6, "{s:#x}");
}

#[test]
fn raise_sigsegv() {
    let s = check_exact("raise", false, false);
    assert_eq!(termsig(s), 11, "{s:#x}");
}

#[test]
fn kill_self_sigterm() {
    let s = check_exact("kill", false, false);
    assert_eq!(termsig(s), 15, "{s:#x}");
}

#[test]
fn sigterm_while_blocked_in_pause() {
    let s = check_exact("pause", false, true);
    assert_eq!(termsig(s), 15, "{s:#x}");
}

#[test]
fn sigterm_while_blocked_in_read() {
    let s = check_exact("read", false, true);
    assert_eq!(termsig(s), 15, "{s:#x}");
}

#[test]
fn quick_exit_writes_the_profile() {
    let s = check_exact("quick", false, false);
    assert_eq!(s, 3 << 8);
}

/// The program's handler runs (it prints, and sees its own disposition), resets SIG_DFL with
/// `signal` and re-raises: the runtime writes the profile on the second delivery.
#[test]
fn program_handler_is_chained_then_reraises() {
    let s = check_exact("chain", false, false);
    assert_eq!(termsig(s), 10, "{s:#x}");
}

/// A one-shot handler (SA_RESETHAND | SA_SIGINFO | SA_NODEFER) runs once, the program then sees
/// SIG_DFL with the flags the kernel leaves, and the next SIGSEGV ends it with a profile.
#[test]
fn one_shot_handler_then_default() {
    let s = check_exact("resethand", false, false);
    assert_eq!(termsig(s), 11, "{s:#x}");
}

/// SIGUSR2 ignored by the parent stays ignored (the runtime never touches SIG_IGN).
#[test]
fn ignored_signal_left_alone() {
    let s = check_exact("ignore", true, false);
    assert_eq!(s, 5 << 8);
}

/// A fault between calls: the innermost frame of `die` is charged at its last call site, which
/// is not where it stopped. The oracle names `die` inconsistent; every other function is exact.
/// `sig`: the signal that ends it (None: it exits with 0); `shows`: calls of `show`.
fn check_mid_code(case: &str, sig: Option<i32>, shows: u64) {
    let (s, edge, naive) = check_case(case, false, false);
    match sig {
        Some(sig) => assert_eq!(termsig(s), sig, "{s:#x}"),
        None => assert_eq!(s, 0),
    }
    assert_eq!(
        inconsistent(&naive),
        vec!["die".to_string()],
        "{case}: oracle"
    );
    let (fns, executed) = assert_same_counts(
        case,
        "edge",
        &without(&edge, "die"),
        "edges-naive",
        &without(&naive, "die"),
        true,
    );
    assert!(fns >= 3 && executed >= 8, "{case}: too little compared");
    // The counts up to the end are in the profile (show prints the dispositions).
    assert_eq!(entries(&naive, "show"), shows);
    assert_eq!(entries(&edge, "show"), shows);
}

#[test]
fn null_dereference_between_calls() {
    check_mid_code("null", Some(11), 2);
}

#[test]
fn division_by_zero_between_calls() {
    check_mid_code("fpe", Some(8), 2);
}

/// A SIGFPE handler that siglongjmps out of a division by zero: the program goes on and exits
/// normally. The frames the jump discards are charged at their sites; the one that faulted is
/// between calls, so `die` is inconsistent in the oracle, as above.
#[test]
fn handler_that_longjmps_out() {
    check_mid_code("longjmp", None, 4);
}
