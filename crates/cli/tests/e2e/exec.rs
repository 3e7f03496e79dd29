//! The exec family (`abi::REDIRECTS`, `crates/runtime/c/exec.c`): the profile written before an
//! exec holds exactly the work done up to it, the frames it abandons charged as `exit` charges
//! them; a failed exec takes the charges back, so the profile written at exit is exact (also
//! with the merge pattern `%m`, where the counts written at the failed exec are already in the
//! file); a vfork child's exec and `_exit` charge and write nothing. Every profile is compared
//! with the `edges-naive` oracle (and the other oracles) by `compare_modes`, for every mode and
//! early-exit strategy (programs in `testdata/exec/`).

use crate::support::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn variants() -> Vec<Variant> {
    MODES.into_iter().chain(EARLY_EXIT_VARIANTS).collect()
}

/// Builds `testdata/exec/<file>` in every variant; returns (variant, binary).
fn build_all(file: &str, opt: &str, dir: &Path) -> Vec<(Variant, PathBuf)> {
    let src = repo().join("testdata/exec").join(file);
    let stem = file.trim_end_matches(".c");
    variants()
        .into_iter()
        .map(|v| {
            let bin = dir.join(format!("{stem}-{}", v.name()));
            build(v, false, &[opt, "-g", src.to_str().unwrap()], &bin, dir);
            (v, bin)
        })
        .collect()
}

/// Runs `bin` in `cwd` with TALLY_PROFILE set to `pattern` (which may hold %p or %m).
fn run_with(bin: &Path, args: &[&str], cwd: &Path, pattern: &Path) -> Output {
    Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .env("TALLY_PROFILE", pattern)
        .output()
        .expect("run program")
}

/// The files of `dir` whose names start with `prefix`.
fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with(prefix))
        .collect();
    v.sort();
    v
}

fn only_file(dir: &Path, prefix: &str, what: &str) -> PathBuf {
    let f = files(dir, prefix);
    assert_eq!(
        f.len(),
        1,
        "{what}: expected one {prefix}* file in {dir:?}, found {f:?}"
    );
    f.into_iter().next().unwrap()
}

fn ok(out: &Output, status: i32, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(status),
        "{what}: exit status (stdout {}, stderr {})",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{what}: stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compares the reports of one run per variant (in `variants()` order) with the oracles, and
/// checks enough was compared.
fn compare(what: &str, profiles: &[PathBuf]) {
    let reports: Vec<_> = profiles.iter().map(|p| report_json(p)).collect();
    let (nf, executed) = compare_modes(what, &reports);
    assert!(
        nf >= 3 && executed >= 8,
        "{what}: too little compared ({nf} functions, {executed} blocks)"
    );
}

fn exec_self(opt: &str) {
    let dir = scratch(&format!("exec-self{opt}"));
    let bins = build_all("exec_self.c", opt, &dir);
    for how in [
        "execv", "execl", "execvp", "execle", "execlp", "execve", "execvpe", "fexecve", "execveat",
    ] {
        let mut pre = Vec::new();
        let mut child = Vec::new();
        let mut stdout = None;
        for (v, bin) in &bins {
            let what = format!("exec_self {opt} {how} {}", v.name());
            let run_dir = dir.join(format!("{how}-{}", v.name()));
            std::fs::create_dir_all(&run_dir).unwrap();
            let child_prof = run_dir.join("child.tally");
            let out = run_with(
                bin,
                &[how, child_prof.to_str().unwrap()],
                &run_dir,
                &run_dir.join("pre.%p"),
            );
            ok(&out, 0, &what);
            let s = String::from_utf8_lossy(&out.stdout).to_string();
            assert!(
                s.contains("child argc="),
                "{what}: the exec did not happen: {s}"
            );
            assert_eq!(
                stdout.get_or_insert_with(|| s.clone()),
                &s,
                "{what}: output"
            );
            // pid unchanged by exec: the one `pre.<pid>` file is the pre-exec image's.
            pre.push(only_file(&run_dir, "pre.", &what));
            assert!(
                child_prof.is_file(),
                "{what}: the new image wrote no profile"
            );
            child.push(child_prof);
        }
        compare(&format!("exec_self {opt} {how}: before the exec"), &pre);
        let reports: Vec<_> = child.iter().map(|p| report_json(p)).collect();
        compare_modes(&format!("exec_self {opt} {how}: the new image"), &reports);
    }
}

#[test]
fn profile_before_exec_is_exact_o0() {
    exec_self("-O0");
}

#[test]
fn profile_before_exec_is_exact_o2() {
    exec_self("-O2");
}

/// Failed execs (execv, execl, execvp, execle) from frames deep in loops, more work, exit: the
/// profile at exit is exact and errno is ENOENT after each (the program checks, status 4
/// otherwise). With `%m` the counts written at each failed exec are merged into the file and
/// must not be counted twice: the merged file equals the plain run's profile.
fn exec_fail(opt: &str) {
    let dir = scratch(&format!("exec-fail{opt}"));
    let bins = build_all("exec_fail.c", opt, &dir);
    let plain = dir.join("exec_fail-plain");
    let src = repo().join("testdata/exec/exec_fail.c");
    build(
        Variant::Plain,
        false,
        &[opt, src.to_str().unwrap()],
        &plain,
        &dir,
    );
    let expected = Command::new(&plain).output().unwrap();
    assert_eq!(expected.status.code(), Some(0));
    let mut profiles = Vec::new();
    let mut merged = Vec::new();
    for (v, bin) in &bins {
        let what = format!("exec_fail {opt} {}", v.name());
        let prof = dir.join(format!("{}.tally", v.name()));
        let out = run(bin, &[], &dir, &prof);
        ok(&out, 0, &what);
        assert_eq!(
            out.stdout, expected.stdout,
            "{what}: output differs from plain"
        );
        let mdir = dir.join(format!("m-{}", v.name()));
        std::fs::create_dir_all(&mdir).unwrap();
        let out = run_with(bin, &[], &mdir, &mdir.join("m.%m"));
        ok(&out, 0, &format!("{what} with %m"));
        let m = only_file(&mdir, "m.", &what);
        assert_same_counts(
            &what,
            "merged at each failed exec and at exit",
            &report_json(&m),
            "one write at exit",
            &report_json(&prof),
            Edges::DeterminedInFirst,
        );
        profiles.push(prof);
        merged.push(m);
    }
    compare(&format!("exec_fail {opt}"), &profiles);
    compare(&format!("exec_fail {opt} %m"), &merged);
}

#[test]
fn failed_exec_stays_exact_o0() {
    exec_fail("-O0");
}

#[test]
fn failed_exec_stays_exact_o2() {
    exec_fail("-O2");
}

/// vfork + exec of /bin/true, and vfork + failed exec + _exit(127): the child runs on the
/// parent's memory and writes nothing (the parent's is the only profile).
///
/// `vfork` returns twice in `spawn`, as `setjmp` does (`ends::SETJMP_NAMES`): the child's
/// return follows the call's own edge and the child abandons the frame at its `exec` or `_exit`
/// (its counts and frame records are the parent's memory); the parent's return is the
/// re-entry edge, where `__tally_longjmp_landed` charges what the child abandoned. So `spawn`
/// is exact in every mode and equal to the oracles, entered 6 times (CPython's
/// `_posixsubprocess.c` `do_fork_exec` was reported inconsistent before).
#[test]
fn vfork_child_exec_changes_nothing() {
    let dir = scratch("exec-vfork");
    let bins = build_all("vfork_exec.c", "-O2", &dir);
    for arg in ["ok", "fail"] {
        let mut reports = Vec::new();
        for (v, bin) in &bins {
            let what = format!("vfork_exec {arg} {}", v.name());
            let run_dir = dir.join(format!("{arg}-{}", v.name()));
            std::fs::create_dir_all(&run_dir).unwrap();
            let out = run_with(bin, &[arg], &run_dir, &run_dir.join("v.%p"));
            ok(&out, 0, &what);
            let prof = only_file(&run_dir, "v.", &what);
            let r = consistent_report(&prof);
            let spawn: u64 = r["functions"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["name"] == "spawn")
                .map(|f| f["entry_count"].as_u64().unwrap_or(0))
                .sum();
            if !v.name().starts_with("trace") {
                assert_eq!(spawn, 6, "{what}: calls of spawn");
            }
            reports.push(r);
        }
        let what = format!("vfork_exec {arg}");
        let (nf, executed) = compare_modes(&what, &reports);
        assert!(nf >= 3 && executed >= 8, "{what}: too little compared");
    }
}

/// `tally report --format json` of a profile, every function of which must be consistent.
fn consistent_report(profile: &Path) -> serde_json::Value {
    let o = Command::new(tally())
        .args(["report", "--format", "json"])
        .arg(profile)
        .output()
        .expect("run tally report");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "tally report {}: {e}: {}",
            profile.display(),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    for f in r["functions"].as_array().expect("functions[]") {
        assert!(
            f["inconsistent"].is_null(),
            "{}: {} inconsistent: {}",
            profile.display(),
            f["name"],
            f["inconsistent"]
        );
    }
    r
}

/// autoconf's link test for a function declares it `char NAME ();` and calls it. For `vfork`
/// (a setjmp-like function: its second return re-enters the frame) the instrumented re-entry
/// passed the `char` to the runtime's `int32_t` parameter and the module did not verify
/// (CPython's configure then lacked `HAVE_VFORK` under tally). Every mode must build it; a
/// `short vfork ()` program must run as the plain build does, counted exactly.
#[test]
fn vfork_declared_with_another_integer_type() {
    let dir = scratch("exec-vfork-types");
    let conftest = dir.join("conftest.c");
    std::fs::write(
        &conftest,
        "char vfork ();\nint main (void) { return vfork (); }\n",
    )
    .unwrap();
    let short = dir.join("short.c");
    std::fs::write(
        &short,
        "int printf(const char *, ...);\nvoid _exit(int);\nshort vfork ();\nint main (void) { short p = vfork (); if (p == 0) _exit(3); printf(\"parent %d\\n\", p > 0); return 0; }\n",
    )
    .unwrap();
    for m in tally_format::mode::MODES {
        let o = Command::new(tally())
            .args(["cc", &format!("--tally-mode={}", m.name), "-O2", "-w"])
            .arg(&conftest)
            .arg("-o")
            .arg(dir.join("conftest"))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}: {}",
            m.name,
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let mut profiles = Vec::new();
    for v in [Variant::Plain].into_iter().chain(variants()) {
        let bin = dir.join(format!("short-{}", v.name()));
        build(
            v,
            false,
            &["-O2", "-w", short.to_str().unwrap()],
            &bin,
            &dir,
        );
        let prof = dir.join(format!("short-{}.tally", v.name()));
        let out = run(&bin, &[], &dir, &prof);
        ok(&out, 0, v.name());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "parent 1\n",
            "{}",
            v.name()
        );
        if v != Variant::Plain {
            profiles.push(prof);
        }
    }
    let reports: Vec<_> = profiles.iter().map(|p| report_json(p)).collect();
    let (nf, executed) = compare_modes("short vfork", &reports);
    assert!(
        nf >= 1 && executed >= 3,
        "{nf} functions, {executed} blocks"
    );
}
