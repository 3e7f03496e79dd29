//! Continuous mode (`TALLY_CONTINUOUS=1` or `%c` in `TALLY_PROFILE`;
//! docs/design/processes.md, "Continuous mode"): a program killed by SIGKILL leaves an unfinished
//! profile whose functions not active at the kill have exactly the counts of a normal run, and
//! whose functions with unbalanced flow are reported as interrupted; a normal exit leaves the
//! ordinary profile. The programs are in `testdata/continuous/`.

use crate::support::{assert_same_counts, build, counts, repo, scratch, tally, Edges, Variant};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use tally_format::profile::Profile;

fn src(name: &str) -> String {
    repo()
        .join("testdata/continuous")
        .join(name)
        .to_str()
        .unwrap()
        .to_string()
}

/// Builds work.c + helper.c in `mode` as `dir/work-<mode>`.
fn build_work(dir: &Path, mode: &'static str) -> PathBuf {
    let bin = dir.join(format!("work-{mode}"));
    build(
        Variant::Tally(mode),
        false,
        &["-O2", "-g", &src("work.c"), &src("helper.c")],
        &bin,
        dir,
    );
    bin
}

/// A child killed (and reaped) when dropped, so that a failing test leaves no process behind.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `bin args` with `env`, waits for the line starting with "ready" on its stdout, kills it
/// with SIGKILL and returns its stdout and stderr.
fn run_killed(bin: &Path, args: &[&str], env: &[(&str, &str)], cwd: &Path) -> (String, String) {
    run_killed_when(bin, args, env, cwd, false)
}

/// [`run_killed`]; with `spinning`, after "ready" sends SIGUSR1 and reads the line it answers
/// until it is "spinning" (work.c's spin_forever is then in its loop).
fn run_killed_when(
    bin: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    cwd: &Path,
    spinning: bool,
) -> (String, String) {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("TALLY_PROFILE")
        .env_remove("TALLY_CONTINUOUS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = Killed(cmd.spawn().expect("start program"));
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut stdout = String::new();
    loop {
        let mut line = String::new();
        let n = out.read_line(&mut line).expect("read stdout");
        stdout.push_str(&line);
        if line.starts_with("spinning") || (line.starts_with("ready") && !spinning) {
            break;
        }
        if line.starts_with("ready") || line.starts_with("not yet") {
            let pid = child.0.id().to_string();
            let ok = Command::new("kill").args(["-USR1", &pid]).status();
            assert!(ok.is_ok_and(|s| s.success()), "kill -USR1");
        }
        if n == 0 {
            let mut err = String::new();
            let _ = child.0.stderr.take().unwrap().read_to_string(&mut err);
            panic!("{} ended before \"ready\": {stdout}{err}", bin.display());
        }
    }
    child.0.kill().expect("SIGKILL");
    let status = child.0.wait().expect("reap");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "killed by SIGKILL");
    let mut err = String::new();
    let _ = child.0.stderr.take().unwrap().read_to_string(&mut err);
    (stdout, err)
}

/// Runs `bin args` to its normal end with `env`; returns stdout.
fn run_normal(bin: &Path, args: &[&str], env: &[(&str, &str)], cwd: &Path) -> String {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("TALLY_PROFILE")
        .env_remove("TALLY_CONTINUOUS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("run program");
    assert!(
        o.status.success(),
        "{} failed: {}",
        bin.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `tally report --format json`: the report, the exit status and stderr.
fn report(profile: &Path) -> (Value, i32, String) {
    let o = Command::new(tally())
        .args(["report", "--format", "json"])
        .arg(profile)
        .output()
        .expect("run tally report");
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let json = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("report of {}: {e}: {stderr}", profile.display()));
    (json, o.status.code().unwrap_or(-1), stderr)
}

/// The report of an unfinished profile, checked to say so (JSON, stderr, exit status 4).
fn unfinished_report(profile: &Path) -> Value {
    assert!(profile.is_file(), "{}: no profile left", profile.display());
    let (r, status, stderr) = report(profile);
    assert_eq!(r["unfinished"], true, "{}", profile.display());
    assert_eq!(status, 4, "exit status of an unfinished report: {stderr}");
    assert!(
        stderr.starts_with("tally: unfinished continuous-mode profile (the program was killed)"),
        "{stderr}"
    );
    assert!(!stderr.contains("--tally-atomic"), "{stderr}");
    r
}

/// The report of a finished profile (exit status 0).
fn finished_report(profile: &Path) -> Value {
    let (r, status, stderr) = report(profile);
    assert_eq!(status, 0, "{}: {stderr}", profile.display());
    assert!(r.get("unfinished").is_none(), "{}", profile.display());
    r
}

/// Names of the functions reported as interrupted.
fn interrupted(r: &Value) -> BTreeSet<String> {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f.get("interrupted").is_some())
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

/// Every function of `killed` not named in `active` has the counts `reference` has (blocks,
/// edges, entries); the interrupted ones are among `active`. Returns how many were compared.
fn assert_exact_except(what: &str, killed: &Value, reference: &Value, active: &[&str]) -> usize {
    let k = counts(killed);
    let r = counts(reference);
    assert_eq!(
        k.keys().collect::<Vec<_>>(),
        r.keys().collect::<Vec<_>>(),
        "{what}: different functions"
    );
    let mut compared = 0;
    for (key, c) in &k {
        if active.contains(&key.1.as_str()) {
            continue;
        }
        assert_eq!(c, &r[key], "{what}: {key:?}");
        compared += 1;
    }
    for f in interrupted(killed) {
        assert!(active.contains(&f.as_str()), "{what}: {f} interrupted");
    }
    compared
}

const ACTIVE: &[&str] = &["main", "finale", "wait_forever", "spin_forever", "on_usr1"];

/// A program killed while it waits: in every mode, its unfinished profile has exactly the
/// counts of a normal run (same build, no argument, ordinary mode) for every function but the
/// ones active at the kill; the edge profile also equals the edges-naive oracle killed at the
/// same point.
#[test]
fn killed_program_is_exact_except_active_functions() {
    let dir = scratch("continuous-killed");
    let mut killed_by_mode = Vec::new();
    for mode in ["edge", "edges-naive", "blocks-naive", "vertex", "path"] {
        let bin = build_work(&dir, mode);
        let normal = dir.join(format!("normal-{mode}.tally"));
        let out = run_normal(
            &bin,
            &[],
            &[("TALLY_PROFILE", normal.to_str().unwrap())],
            &dir,
        );
        let reference = finished_report(&normal);
        let killed = dir.join(format!("killed-{mode}.tally"));
        let (ready, _) = run_killed(
            &bin,
            &["block"],
            &[
                ("TALLY_PROFILE", killed.to_str().unwrap()),
                ("TALLY_CONTINUOUS", "1"),
            ],
            &dir,
        );
        assert!(ready.starts_with(&out), "{mode}: same work before the wait");
        let r = unfinished_report(&killed);
        let n = assert_exact_except(mode, &r, &reference, ACTIVE);
        assert!(n >= 5, "{mode}: only {n} functions compared");
        killed_by_mode.push((mode, r));
    }
    let naive = &killed_by_mode[1].1;
    assert_exact_except("edge vs edges-naive", &killed_by_mode[0].1, naive, ACTIVE);
}

/// Killed in a call-free loop whose counters may be in registers: the functions not active are
/// still exact; in edges-naive mode the loop's function is reported interrupted (its flow
/// cannot balance: the frame is inside a block).
#[test]
fn killed_in_a_loop_reports_interrupted() {
    let dir = scratch("continuous-spin");
    let mut reports = Vec::new();
    for mode in ["edges-naive", "edge"] {
        let bin = build_work(&dir, mode);
        let normal = dir.join(format!("normal-{mode}.tally"));
        run_normal(
            &bin,
            &[],
            &[("TALLY_PROFILE", normal.to_str().unwrap())],
            &dir,
        );
        let killed = dir.join(format!("spin-{mode}.tally"));
        run_killed_when(
            &bin,
            &["spin"],
            &[
                ("TALLY_PROFILE", killed.to_str().unwrap()),
                ("TALLY_CONTINUOUS", "1"),
            ],
            &dir,
            true,
        );
        let r = unfinished_report(&killed);
        assert_exact_except(mode, &r, &finished_report(&normal), ACTIVE);
        reports.push(r);
    }
    assert!(
        interrupted(&reports[0]).contains("spin_forever"),
        "{:?}",
        interrupted(&reports[0])
    );
    // The text report says it too; a merge keeps the profile unfinished.
    let killed = dir.join("spin-edges-naive.tally");
    let o = Command::new(tally())
        .arg("report")
        .arg(&killed)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("UNFINISHED continuous-mode profile"),
        "{text}"
    );
    assert!(text.contains("INTERRUPTED: spin_forever"), "{text}");
    assert!(!text.contains("INCONSISTENT"), "{text}");
    let merged = dir.join("merged.tally");
    let o = Command::new(tally())
        .args(["merge", "-o"])
        .arg(&merged)
        .arg(&killed)
        .arg(&killed)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = Profile::read_file(&merged).unwrap();
    let k = Profile::read_file(&killed).unwrap();
    assert!(m.unfinished);
    // A sum lists its modules in ascending hash; a continuous file in registration order.
    assert_eq!(m.modules.len(), k.modules.len());
    for b in &k.modules {
        let a = m.modules.iter().find(|a| a.hash == b.hash).unwrap();
        let doubled: Vec<u64> = b.counters.iter().map(|c| 2 * c).collect();
        assert_eq!(a.counters, doubled);
    }
}

/// A normal exit in continuous mode (by variable or by `%c`) leaves a finished profile with the
/// very counters of an ordinary run.
#[test]
fn normal_exit_gives_the_ordinary_profile() {
    let dir = scratch("continuous-normal");
    let bin = build_work(&dir, "edge");
    let plain = dir.join("plain.tally");
    run_normal(
        &bin,
        &[],
        &[("TALLY_PROFILE", plain.to_str().unwrap())],
        &dir,
    );
    let by_var = dir.join("var.tally");
    run_normal(
        &bin,
        &[],
        &[
            ("TALLY_PROFILE", by_var.to_str().unwrap()),
            ("TALLY_CONTINUOUS", "1"),
        ],
        &dir,
    );
    // %c expands to nothing; a relative path is the current directory's.
    run_normal(&bin, &[], &[("TALLY_PROFILE", "pat%c.tally")], &dir);
    let by_pat = dir.join("pat.tally");
    let want = Profile::read_file(&plain).unwrap();
    for p in [&by_var, &by_pat] {
        let got = Profile::read_file(p).unwrap();
        assert!(!got.unfinished, "{}", p.display());
        assert_eq!(got.modules, want.modules, "{}", p.display());
        assert_same_counts(
            "normal exit",
            "continuous",
            &finished_report(p),
            "ordinary",
            &finished_report(&plain),
            Edges::All,
        );
    }
    // No temporaries left behind.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A fork child never counts into its parent's file: with `%p` each process has its own; the
/// parent's unfinished profile has no count of the child's work, the child's finished profile
/// has it.
#[test]
fn fork_child_keeps_its_counts_private() {
    let dir = scratch("continuous-fork");
    let bin = build_work(&dir, "edge");
    let normal = dir.join("normal.tally");
    run_normal(
        &bin,
        &[],
        &[("TALLY_PROFILE", normal.to_str().unwrap())],
        &dir,
    );
    let reference = finished_report(&normal);
    let pattern = dir.join("fork.%p.tally");
    let (stdout, _) = run_killed(
        &bin,
        &["fork"],
        &[
            ("TALLY_PROFILE", pattern.to_str().unwrap()),
            ("TALLY_CONTINUOUS", "1"),
        ],
        &dir,
    );
    assert!(stdout.contains("child "), "{stdout}");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("fork.") && n.ends_with(".tally")
        })
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    let (mut parent, mut child) = (None, None);
    for f in &files {
        if Profile::read_file(f).unwrap().unfinished {
            parent = Some(unfinished_report(f));
        } else {
            child = Some(finished_report(f));
        }
    }
    let (parent, child) = (parent.expect("parent's profile"), child.expect("child's"));
    let entry = |r: &Value, name: &str| {
        r["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .map(|f| f["entry_count"].as_u64().unwrap())
            .unwrap()
    };
    // The parent: exactly the normal run's counts (the child's work is not in them).
    assert_exact_except("parent", &parent, &reference, ACTIVE);
    assert_eq!(entry(&parent, "child_work"), 0);
    // The child: its work, and the counts it inherited at the fork.
    assert_eq!(entry(&child, "child_work"), 1);
    assert_eq!(
        entry(&child, "classify"),
        entry(&reference, "classify") + 50
    );
    assert_eq!(entry(&child, "stage"), entry(&reference, "stage"));
}

/// Two modules of the executable and a library dlopened, dlclosed and dlopened again: the
/// killed program's profile has the library's counts of both periods, once.
#[test]
fn dlopened_library_counts_survive_the_kill() {
    let dir = scratch("continuous-dlopen");
    let lib = dir.join("plugin.so");
    build(
        Variant::Tally("edge"),
        false,
        &["-O2", "-g", "-shared", "-fPIC", &src("plugin.c")],
        &lib,
        &dir,
    );
    let bin = dir.join("dl_main");
    build(
        Variant::Tally("edge"),
        false,
        &["-O2", "-g", &src("dl_main.c"), "-ldl"],
        &bin,
        &dir,
    );
    let lib_s = lib.to_str().unwrap();
    let normal = dir.join("normal.tally");
    run_normal(
        &bin,
        &[lib_s],
        &[("TALLY_PROFILE", normal.to_str().unwrap())],
        &dir,
    );
    let reference = finished_report(&normal);
    let killed = dir.join("killed.tally");
    run_killed(
        &bin,
        &[lib_s, "block"],
        &[
            ("TALLY_PROFILE", killed.to_str().unwrap()),
            ("TALLY_CONTINUOUS", "1"),
        ],
        &dir,
    );
    let r = unfinished_report(&killed);
    let n = assert_exact_except("dlopen", &r, &reference, &["main", "wait_forever"]);
    assert!(n >= 2, "{n}");
    let plugin_work = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "plugin_work")
        .unwrap();
    assert_eq!(plugin_work["entry_count"], 2);
    assert_eq!(
        r["modules"].as_array().unwrap().len(),
        2,
        "{}",
        r["modules"]
    );
}

/// The continuous file is opened like any profile: a symbolic link is replaced, never written
/// through; a device or a directory turns continuous mode off with one stderr line and the
/// program runs on.
#[test]
fn continuous_file_is_opened_safely() {
    let dir = scratch("continuous-safety");
    let bin = build_work(&dir, "edge");
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = dir.join("link.tally");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    run_killed(
        &bin,
        &["block"],
        &[
            ("TALLY_PROFILE", link.to_str().unwrap()),
            ("TALLY_CONTINUOUS", "1"),
        ],
        &dir,
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
    unfinished_report(&link);

    let null_link = dir.join("null.tally");
    std::os::unix::fs::symlink("/dev/null", &null_link).unwrap();
    let sub = dir.join("adir");
    std::fs::create_dir(&sub).unwrap();
    for (target, why) in [
        ("/dev/null", "it is not a regular file"),
        (
            null_link.to_str().unwrap(),
            "it is a symbolic link to something that is not a regular file",
        ),
        (sub.to_str().unwrap(), "Is a directory"),
    ] {
        let (_, stderr) = run_killed(
            &bin,
            &["block"],
            &[("TALLY_PROFILE", target), ("TALLY_CONTINUOUS", "1")],
            &dir,
        );
        let want = format!("tally: continuous mode off for {target}: {why}");
        assert!(stderr.starts_with(&want), "{target}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    assert!(std::fs::symlink_metadata(&null_link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_dir(&sub).unwrap().next().is_none());
}
