//! A profile names the program that wrote it, and
//! `tally merge --by-program` merges a directory of profiles of several programs into one
//! profile per program, listing the inputs it cannot read.

use crate::support::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
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

// ---- Module order and merging per image build -------------------------------------------

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
    // One of the runs ended by SIGTERM: the report says so (exit status 6), counts all the same.
    assert_eq!(
        o.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["signal"], 15, "the SIGTERM run is named");
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

/// Compiled into three plugins with -DV=1..3 (one source, three builds in one process).
const PLUGIN: &str = r#"
volatile int sink;
int plug(int n) {
    int s = 0;
    for (int i = 0; i < n * V; i++) {
#if V == 2
        if (i % 3 == 0) s += 2;
#elif V == 3
        if (i == 5) sink = s;
#endif
        s += i & 1 ? i : -1;
    }
    return s;
}
"#;

/// A fourth plugin from another source.
const OTHER: &str = r#"
static int twice(int n) { return n < 2 ? n : twice(n / 2) + 1; }
int plug(int n) { return twice(n * 7); }
"#;

/// argv: plugins to dlopen, each called with its position; every second one closed again.
const HOST: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
static int work(int n) { int s = 0; while (n--) s += n % 5; return s; }
int main(int argc, char **argv) {
    int s = work(argc * 3);
    for (int i = 1; i < argc; i++) {
        void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) { fprintf(stderr, "%s\n", dlerror()); return 2; }
        int (*f)(int) = (int (*)(int))dlsym(h, "plug");
        s += f(i + 2);
        if (i % 2 == 0) dlclose(h);
    }
    printf("%d\n", s);
    return 0;
}
"#;

/// Per function (module, name, cfg hash): entry count and block counts, summed over the
/// functions listed under that key (several builds of one source list the same names).
type Counts = BTreeMap<(String, String, String), (u64, Vec<u64>)>;

fn add_counts(into: &mut Counts, report: &serde_json::Value) {
    for f in report["functions"].as_array().unwrap() {
        let key = (
            f["module"].as_str().unwrap().to_string(),
            f["name"].as_str().unwrap().to_string(),
            f["cfg_hash"].as_str().unwrap().to_string(),
        );
        let blocks: Vec<u64> = f["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["count"].as_u64().expect("exact block count"))
            .collect();
        let e = into
            .entry(key)
            .or_insert_with(|| (0, vec![0; blocks.len()]));
        e.0 += f["entry_count"].as_u64().unwrap();
        for (x, y) in e.1.iter_mut().zip(&blocks) {
            *x += y;
        }
    }
}

/// LCOV line counts: (file, line) -> count.
fn lcov_lines(text: &str, into: &mut BTreeMap<(String, u64), u64>) {
    let mut file = String::new();
    for l in text.lines() {
        if let Some(f) = l.strip_prefix("SF:") {
            file = f.to_string();
        } else if let Some(d) = l.strip_prefix("DA:") {
            let mut it = d.split(',');
            let line: u64 = it.next().unwrap().parse().unwrap();
            let n: u64 = it.next().unwrap().parse().unwrap();
            *into.entry((file.clone(), line)).or_default() += n;
        }
    }
}

fn lcov_of(dir: &Path, profiles: &[&str]) -> BTreeMap<(String, u64), u64> {
    let info = dir.join("x.info");
    let mut args = vec!["report", "--export", "lcov", "-o", info.to_str().unwrap()];
    args.extend_from_slice(profiles);
    let o = tally_cmd(dir, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut m = BTreeMap::new();
    lcov_lines(&std::fs::read_to_string(&info).unwrap(), &mut m);
    m
}

/// Point 3: runs of one executable that loaded different plugins, in different orders, make
/// one sum holding every image any of them loaded, each counted over the runs that had it;
/// `merge`, `merge --by-program`, `report a b ...` give it, and every reader reads it. A
/// source file whose module changed between runs (a rebuilt plugin) is refused by name.
#[test]
fn runs_with_different_plugins_merge_into_one_program() {
    let dir = scratch("merge-plugins");
    for (f, t) in [("plugin.c", PLUGIN), ("other.c", OTHER), ("host.c", HOST)] {
        std::fs::write(dir.join(f), t).unwrap();
    }
    let edge = Variant::Tally("edge");
    for v in 1..=3 {
        let d = format!("-DV={v}");
        let out = dir.join(format!("p{v}.so"));
        build(
            edge,
            false,
            &["-O1", "-g", "-fPIC", "-shared", &d, "plugin.c"],
            &out,
            &dir,
        );
    }
    build(
        edge,
        false,
        &["-O1", "-g", "-fPIC", "-shared", "other.c"],
        &dir.join("p4.so"),
        &dir,
    );
    // One host with a GNU build id (Debian's clang links with one), one without (its build
    // id is the hash of the module hashes, which differs with the plugins a run loaded).
    build(
        edge,
        false,
        &["-O1", "-g", "host.c"],
        &dir.join("host"),
        &dir,
    );
    build(
        edge,
        false,
        &["-O1", "-g", "-Wl,--build-id=none", "host.c"],
        &dir.join("host-noid"),
        &dir,
    );
    let sets: [&[&str]; 5] = [
        &["p1", "p2"],
        &["p3", "p1", "p4"],
        &["p2", "p3", "p1"],
        &[],
        &["p4", "p2"],
    ];
    for host in ["host", "host-noid"] {
        let runs = dir.join(format!("runs-{host}"));
        std::fs::create_dir(&runs).unwrap();
        std::fs::create_dir(dir.join(format!("online-{host}"))).unwrap();
        let mut expected = Counts::new();
        let mut expected_lines = BTreeMap::new();
        let mut files = Vec::new();
        for (k, set) in sets.iter().enumerate() {
            let args: Vec<String> = set
                .iter()
                .map(|p| dir.join(format!("{p}.so")).to_str().unwrap().to_string())
                .collect();
            let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
            let f = runs.join(format!("run{k}.tally"));
            let o = run(&dir.join(host), &args, &dir, &f);
            assert!(o.status.success(), "{host} {set:?}: {o:?}");
            add_counts(&mut expected, &report_json(&f));
            let name = f.to_str().unwrap().to_string();
            for (k, v) in lcov_of(&dir, &[&name]) {
                *expected_lines.entry(k).or_insert(0) += v;
            }
            files.push(name);
        }
        // The same runs again, merged by the runtime into one file per build (`%m`), the run
        // that holds the three builds of plugin.c first: `%m` adds one run at a time, so a
        // build of a file that no profile so far holds together with another is refused
        // there (`tally merge` of the file and the refused runs decides once all are in).
        for k in [2, 0, 1, 3, 4] {
            let args: Vec<String> = sets[k]
                .iter()
                .map(|p| dir.join(format!("{p}.so")).to_str().unwrap().to_string())
                .collect();
            let o = Command::new(dir.join(host))
                .args(&args)
                .current_dir(&dir)
                .env(
                    "TALLY_PROFILE",
                    dir.join(format!("online-{host}/m-%m.tally")),
                )
                .output()
                .unwrap();
            assert!(
                o.status.success() && o.stderr.is_empty(),
                "{host} {k}: {o:?}"
            );
        }
        let files: Vec<&str> = files.iter().map(|s| s.as_str()).collect();
        // The report reads every plugin's module, the three builds of plugin.c apart.
        assert_eq!(
            expected.keys().filter(|k| k.1 == "plug").count(),
            4,
            "{expected:?}"
        );

        let merged = dir.join(format!("{host}.tally"));
        let mut args = vec!["merge", "-o", merged.to_str().unwrap()];
        args.extend_from_slice(&files);
        let o = tally_cmd(&dir, &args);
        assert!(
            o.status.success(),
            "{host}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mut got = Counts::new();
        add_counts(&mut got, &report_json(&merged));
        assert_eq!(got, expected, "{host}: merge");
        let m = Profile::read_file(&merged).unwrap();
        assert_eq!(m.modules.len(), 5, "{host}: host.c and four plugins");
        // `%m`: with a GNU build id one file, the same sum; without one, one file per set of
        // modules (the module-hash build id names the file).
        let online: Vec<Profile> = std::fs::read_dir(dir.join(format!("online-{host}")))
            .unwrap()
            .map(|e| Profile::read_file(e.unwrap().path()).unwrap())
            .collect();
        assert_eq!(online.len(), if host == "host" { 1 } else { 5 }, "{host}");
        assert_eq!(sum_by_hash(&online), sum_by_hash([&m]), "{host}: %m");
        let exe = std::fs::canonicalize(dir.join(host)).unwrap();
        assert_eq!(m.program.path, exe.as_os_str().as_encoded_bytes());
        if host == "host-noid" {
            assert_eq!(m.program.build_id, BuildId::Modules(m.modules_build_id()));
        }
        // The same sum in any order, from `report a b ...` too.
        let mut rev = files.clone();
        rev.reverse();
        let mut args = vec!["report", "--format", "json"];
        args.extend_from_slice(&rev);
        let o = tally_cmd(&dir, &args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut got = Counts::new();
        add_counts(&mut got, &serde_json::from_slice(&o.stdout).unwrap());
        assert_eq!(got, expected, "{host}: report of every run");

        // --by-program: one program.
        let out = dir.join(format!("by-{host}"));
        let o = tally_cmd(
            &dir,
            &[
                "merge",
                "--by-program",
                "-o",
                out.to_str().unwrap(),
                runs.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let outs: Vec<PathBuf> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(outs.len(), 1, "{host}: {outs:?}");
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("5 profile(s)"),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
        let mut got = Counts::new();
        add_counts(&mut got, &report_json(&outs[0]));
        assert_eq!(got, expected, "{host}: --by-program");
        assert_eq!(
            Profile::read_file(&outs[0]).unwrap().write(),
            m.write(),
            "{host}: the same file as merge"
        );

        // Every reader reads the sum: source lines (LCOV) equal the runs' added up.
        let ms = merged.to_str().unwrap();
        assert_eq!(lcov_of(&dir, &[ms]), expected_lines, "{host}: lcov");
        let o = tally_cmd(&dir, &["show", ms]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains("twice(n / 2)"));
        let site = dir.join(format!("site-{host}"));
        let o = tally_cmd(&dir, &["html", "-o", site.to_str().unwrap(), ms]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let index = std::fs::read_to_string(site.join("index.html")).unwrap();
        assert!(index.contains("plugin.c") && index.contains("other.c"));
        let o = tally_cmd(&dir, &["report", "--lines", ms]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    // A rebuilt plugin (its lines moved): plugin.c's module changed between two runs that never held both
    // builds. Refused, naming the file, by every reader; --by-program keeps the two sets
    // apart.
    let first = dir.join("before.tally");
    std::fs::create_dir(dir.join("online-rebuilt")).unwrap();
    let online = dir.join("online-rebuilt/m-%m.tally");
    let p1 = dir.join("p1.so");
    let run_online = || {
        Command::new(dir.join("host"))
            .arg(&p1)
            .current_dir(&dir)
            .env("TALLY_PROFILE", &online)
            .output()
            .unwrap()
    };
    assert!(run_online().stderr.is_empty());
    let o = run(
        &dir.join("host"),
        &[dir.join("p1.so").to_str().unwrap()],
        &dir,
        &first,
    );
    assert!(o.status.success());
    std::fs::write(dir.join("plugin.c"), format!("\n{PLUGIN}")).unwrap();
    build(
        edge,
        false,
        &["-O1", "-g", "-fPIC", "-shared", "-DV=1", "plugin.c"],
        &dir.join("p1.so"),
        &dir,
    );
    let second = dir.join("after.tally");
    let o = run(
        &dir.join("host"),
        &[dir.join("p1.so").to_str().unwrap()],
        &dir,
        &second,
    );
    assert!(o.status.success());
    let o = run_online();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not merging profile") && err.contains("another build"),
        "{err}"
    );
    let (a, b) = (first.to_str().unwrap(), second.to_str().unwrap());
    for args in [
        vec!["report", a, b],
        vec!["merge", "-o", "rebuilt.tally", a, b],
        vec!["merge", "-o", "rebuilt.tally", b, a],
    ] {
        let o = tally_cmd(&dir, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("different build") && err.contains("plugin.c"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let out = dir.join("by-rebuilt");
    let o = tally_cmd(
        &dir,
        &["merge", "--by-program", "-o", out.to_str().unwrap(), a, b],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 2);
}
