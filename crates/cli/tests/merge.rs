//! Issue 14, point 9 (first part): a profile names the program that wrote it, and
//! `tally merge --by-program` merges a directory of profiles of several programs into one
//! profile per program, listing the inputs it cannot read.

mod support;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;
use tally_format::profile::{BuildId, Profile};

const ONE: &str = r#"#include <stdlib.h>
static int f(int n) { int s = 0; for (int i = 0; i < n; i++) s += i % 3 ? i : 1; return s; }
int main(int argc, char **argv) { return f(atoi(argv[1])) == -1; }
"#;

const TWO: &str = r#"#include <stdlib.h>
static int g(int n) { return n < 2 ? n : g(n - 1) + g(n - 2); }
int main(int argc, char **argv) { (void)argc; return g(atoi(argv[1])) < 0; }
"#;

fn sum(a: &mut Vec<Vec<u64>>, p: &Profile) {
    if a.is_empty() {
        a.extend(p.modules.iter().map(|m| vec![0; m.counters.len()]));
    }
    for (s, m) in a.iter_mut().zip(&p.modules) {
        for (x, y) in s.iter_mut().zip(&m.counters) {
            *x += y;
        }
    }
}

fn counters(p: &Profile) -> Vec<Vec<u64>> {
    p.modules.iter().map(|m| m.counters.clone()).collect()
}

#[test]
fn profiles_name_their_program_and_merge_by_program() {
    let dir = scratch("merge-by-program");
    std::fs::write(dir.join("one.c"), ONE).unwrap();
    std::fs::write(dir.join("two.c"), TWO).unwrap();
    build(
        Variant::Tally("edge"),
        false,
        &["-O1", "one.c"],
        &dir.join("one"),
        &dir,
    );
    // Without a GNU build-id note the build id is the hash of the module hashes.
    build(
        Variant::Tally("edge"),
        false,
        &["-O1", "-Wl,--build-id=none", "two.c"],
        &dir.join("two"),
        &dir,
    );
    let runs = dir.join("runs");
    std::fs::create_dir(&runs).unwrap();
    let mut expected: BTreeMap<&str, Vec<Vec<u64>>> = BTreeMap::new();
    let mut seen = 0;
    for (prog, args) in [
        ("one", "5"),
        ("two", "6"),
        ("one", "7"),
        ("one", "9"),
        ("two", "3"),
    ] {
        let before: Vec<PathBuf> = std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let o = Command::new(dir.join(prog))
            .arg(args)
            .current_dir(&dir)
            .env("TALLY_PROFILE", runs.join("%p.tally"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{prog} {args}: {o:?}");
        let new: Vec<PathBuf> = std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| !before.contains(p))
            .collect();
        assert_eq!(new.len(), 1, "{new:?}");
        seen += 1;
        let p = Profile::read_file(&new[0]).unwrap();
        let exe = std::fs::canonicalize(dir.join(prog)).unwrap();
        assert_eq!(p.program.path, exe.as_os_str().as_encoded_bytes(), "{prog}");
        match (prog, &p.program.build_id) {
            ("one", BuildId::Gnu(id)) => assert!(!id.is_empty()),
            ("two", BuildId::Modules(h)) => assert_eq!(*h, p.modules_build_id()),
            other => panic!("unexpected build id {other:?}"),
        }
        sum(expected.entry(prog).or_default(), &p);
    }
    assert_eq!(seen, 5);

    // The report names the program.
    let one_run = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let r = report_json(&one_run);
    assert!(
        r["program"]["path"].as_str().unwrap().starts_with('/'),
        "{}",
        r["program"]
    );

    // Unreadable inputs: listed, exit status 2, the rest merged.
    std::fs::write(runs.join("bad.tally"), b"not a profile").unwrap();
    std::fs::write(runs.join("empty.tally"), b"").unwrap();
    std::fs::write(runs.join("notes.txt"), b"not an input").unwrap();
    let out = dir.join("merged");
    let o = Command::new(tally())
        .args(["merge", "--by-program", "-o"])
        .arg(&out)
        .arg(&runs)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        !stderr.contains('\r'),
        "no progress line off a terminal: {stderr:?}"
    );
    let skipped: Vec<&str> = stderr.lines().filter(|l| l.contains("skipping")).collect();
    assert_eq!(skipped.len(), 2, "{stderr}");
    assert!(
        skipped[0].contains("bad.tally: not a tally profile"),
        "{stderr}"
    );
    assert!(
        skipped[1].contains("empty.tally: empty profile"),
        "{stderr}"
    );
    assert!(
        stderr.contains("2 of 7 profile(s) could not be merged"),
        "{stderr}"
    );

    let mut outputs: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    outputs.sort();
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    for (file, prog) in outputs.iter().zip(["one", "two"]) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&format!("{prog}-")) && name.ends_with(".tally"),
            "{name}"
        );
        let m = Profile::read_file(file).unwrap();
        assert_eq!(counters(&m), expected[prog], "{prog}");
        let exe = std::fs::canonicalize(dir.join(prog)).unwrap();
        assert_eq!(m.program.path, exe.as_os_str().as_encoded_bytes());
        assert!(name.contains(&m.program.build_id.hex()[..12]), "{name}");
    }

    // Plain merge keeps the program of its inputs; different programs are still refused.
    let ones: Vec<PathBuf> = outputs[..1].to_vec();
    let single = dir.join("single.tally");
    let o = Command::new(tally())
        .args(["merge", "-o"])
        .arg(&single)
        .args(&ones)
        .arg(&outputs[0])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let m = Profile::read_file(&single).unwrap();
    assert_eq!(m.program, Profile::read_file(&outputs[0]).unwrap().program);
    let o = Command::new(tally())
        .args(["merge", "-o"])
        .arg(dir.join("mixed.tally"))
        .args(&outputs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(Path::new(&dir.join("mixed.tally")).metadata().is_err());

    // On a terminal (util-linux `script` gives the command a pseudo-terminal) merging many
    // profiles shows a progress line; off a terminal it does not (checked above).
    let cmd = format!(
        "{} merge --by-program -o {} {}",
        tally().display(),
        dir.join("tty-merged").display(),
        runs.display()
    );
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("util-linux script");
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(shown.contains("tally: merging"), "{shown:?}");
    assert!(shown.contains("/7 profiles"), "{shown:?}");
}

// ---- Issue 44, points 2 and 3: module order and merging per image build -------------------

/// Linked into the executable as a tally-built shared library.
const SHLIB: &str = r#"
int lib_work(int n) { int s = 0; for (int i = 0; i < n; i++) s += i & 1 ? i : 3; return s; }
"#;

/// A second file of the executable: the executable's modules are more than one.
const HELPER: &str = r#"
int helper(int n) { return n > 4 ? helper(n - 1) + 1 : n; }
"#;

/// argv[1]: how to end: "exit", "_exit", "signal" (SIGTERM left at SIG_DFL) or "return".
const ENDS: &str = r#"
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int lib_work(int);
int helper(int);
int main(int argc, char **argv) {
    int s = lib_work(10) + helper(8);
    if (argc > 1 && strcmp(argv[1], "exit") == 0) exit(s & 1);
    if (argc > 1 && strcmp(argv[1], "_exit") == 0) _exit(s & 1);
    if (argc > 1 && strcmp(argv[1], "signal") == 0) raise(SIGTERM);
    return s & 1;
}
"#;

fn hashes(p: &Profile) -> Vec<u64> {
    p.modules.iter().map(|m| m.hash).collect()
}

/// Counters summed per module hash over `profiles`.
fn sum_by_hash<'a>(profiles: impl IntoIterator<Item = &'a Profile>) -> BTreeMap<u64, Vec<u64>> {
    let mut s: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for p in profiles {
        for m in &p.modules {
            let e = s.entry(m.hash).or_insert_with(|| vec![0; m.counters.len()]);
            for (x, y) in e.iter_mut().zip(&m.counters) {
                *x += y;
            }
        }
    }
    s
}

fn tally_cmd(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(tally())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Point 2: the module order of a profile does not depend on how the process ended (it
/// used to: the executable's modules last and reversed after exit(), in load order after
/// `_exit` or a signal), so every reader combines the profiles of one binary.
#[test]
fn module_order_does_not_depend_on_how_the_process_ended() {
    let dir = scratch("merge-ends");
    for (f, t) in [("lib.c", SHLIB), ("helper.c", HELPER), ("main.c", ENDS)] {
        std::fs::write(dir.join(f), t).unwrap();
    }
    let edge = Variant::Tally("edge");
    build(
        edge,
        false,
        &["-O1", "-g", "-fPIC", "-shared", "lib.c"],
        &dir.join("libw.so"),
        &dir,
    );
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    let libdir = format!("-L{}", dir.display());
    build(
        edge,
        false,
        &["-O1", "-g", "main.c", "helper.c", &libdir, "-lw", &rpath],
        &dir.join("main"),
        &dir,
    );
    let mut profiles = Vec::new();
    let mut names = Vec::new();
    for end in ["exit", "_exit", "signal", "return"] {
        let f = dir.join(format!("{end}.tally"));
        let o = run(&dir.join("main"), &[end], &dir, &f);
        assert!(
            o.stderr.is_empty(),
            "{end}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let p = Profile::read_file(&f).unwrap();
        assert_eq!(p.modules.len(), 3, "{end}");
        profiles.push(p);
        names.push(f.to_str().unwrap().to_string());
    }
    for (p, n) in profiles.iter().zip(&names).skip(1) {
        assert_eq!(
            hashes(p),
            hashes(&profiles[0]),
            "{n} lists its modules in another order"
        );
    }
    let mut sorted = hashes(&profiles[0]);
    sorted.sort_unstable();
    assert_eq!(hashes(&profiles[0]), sorted, "ascending module hash");

    let merged = dir.join("all.tally");
    let mut args = vec!["merge", "-o", merged.to_str().unwrap()];
    args.extend(names.iter().map(|s| s.as_str()));
    let o = tally_cmd(&dir, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = Profile::read_file(&merged).unwrap();
    assert_eq!(sum_by_hash([&m]), sum_by_hash(&profiles));
    assert_eq!(m.program, profiles[0].program);
    let mut args = vec!["report", "--format", "json"];
    args.extend(names.iter().map(|s| s.as_str()));
    let o = tally_cmd(&dir, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let main = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "lib_work")
        .unwrap();
    assert_eq!(main["entry_count"], 4);
    // One program: --by-program writes one file.
    let out = dir.join("by");
    let mut args = vec!["merge", "--by-program", "-o", out.to_str().unwrap()];
    args.extend(names.iter().map(|s| s.as_str()));
    let o = tally_cmd(&dir, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
}
