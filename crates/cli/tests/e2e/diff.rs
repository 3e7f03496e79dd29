//! `tally diff A B` on path profiles of one program run with two inputs.
//! The expected differences are computed here from each profile's own `tally report --format
//! json --lines` (functions, blocks, lines) and `tally paths --format json` (paths), and must be
//! exactly what the diff lists, largest change first; the exit status says equal (0),
//! different (1) or error (2). Profiles of two programs list the functions only one has; the
//! text output of the first case is an insta snapshot.

use crate::support::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `mode` picks what runs: 0 only `evens`, 1 `evens` and `odds`; `n` how much.
const PROG: &str = r#"#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int evens(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        if (i % 2 == 0)
            s += i;
    return s;
}

__attribute__((noinline)) int odds(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        if (i % 2)
            s += i;
        else if (i % 3 == 0)
            s -= 1;
    }
    return s;
}

int main(int argc, char **argv) {
    int mode = argc > 1 ? atoi(argv[1]) : 0;
    int n = argc > 2 ? atoi(argv[2]) : 4;
    int t = evens(n);
    if (mode)
        t += odds(n);
    printf("%d\n", t);
    return 0;
}
"#;

/// Another program: `evens` the same (in another file), `main` different, `twice` new.
const OTHER: &str = r#"#include <stdio.h>

__attribute__((noinline)) int evens(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        if (i % 2 == 0)
            s += i;
    return s;
}

__attribute__((noinline)) int twice(int n) { return 2 * n; }

int main(void) {
    printf("%d\n", twice(evens(6)));
    return 0;
}
"#;

fn diff(args: &[&str], cwd: &Path) -> Output {
    Command::new(tally())
        .arg("diff")
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run tally diff")
}

fn json_of(cmd: &str, profile: &Path, extra: &[&str]) -> Value {
    let o = Command::new(tally())
        .arg(cmd)
        .args(["--format", "json"])
        .args(extra)
        .arg(profile)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// What one profile says, keyed for comparison: functions (demangled -> (calls, block
/// executions)), blocks ((function, id) -> count), lines ((file, line) -> count), paths
/// ((function, number) -> count).
#[derive(Default)]
struct Counts {
    functions: BTreeMap<String, (u64, u64)>,
    blocks: BTreeMap<(String, u64), u64>,
    lines: BTreeMap<(String, u64), u64>,
    paths: BTreeMap<(String, String), u64>,
}

fn counts(profile: &Path) -> Counts {
    let r = json_of("report", profile, &["--lines"]);
    let mut c = Counts::default();
    for f in r["functions"].as_array().unwrap() {
        let name = f["demangled"].as_str().unwrap().to_string();
        c.functions.insert(
            name.clone(),
            (
                f["entry_count"].as_u64().unwrap(),
                f["block_executions"].as_u64().unwrap(),
            ),
        );
        for b in f["blocks"].as_array().unwrap() {
            c.blocks.insert(
                (name.clone(), b["id"].as_u64().unwrap()),
                b["count"].as_u64().unwrap(),
            );
        }
    }
    for f in r["files"].as_array().unwrap() {
        for l in f["lines"].as_array().unwrap() {
            if let Some(n) = l["count"].as_u64() {
                c.lines.insert(
                    (
                        f["path"].as_str().unwrap().to_string(),
                        l["line"].as_u64().unwrap(),
                    ),
                    n,
                );
            }
        }
    }
    let p = json_of("paths", profile, &[]);
    for f in p["functions"].as_array().unwrap() {
        for row in f["paths"].as_array().unwrap() {
            c.paths.insert(
                (
                    f["demangled"].as_str().unwrap().to_string(),
                    row["number"].as_str().unwrap().to_string(),
                ),
                row["count"].as_u64().unwrap(),
            );
        }
    }
    c
}

/// Keys whose values differ between two maps (missing = 0), with both values.
fn changed<K: Ord + Clone>(a: &BTreeMap<K, u64>, b: &BTreeMap<K, u64>) -> BTreeMap<K, (u64, u64)> {
    let keys: BTreeSet<&K> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .map(|k| {
            let (x, y) = (
                a.get(k).copied().unwrap_or(0),
                b.get(k).copied().unwrap_or(0),
            );
            (k.clone(), (x, y))
        })
        .filter(|(_, (x, y))| x != y)
        .collect()
}

/// The (key, a, b) rows of a diff JSON section, checked to be sorted by |b - a|, largest first.
fn section<K: Ord>(d: &Value, name: &str, key: impl Fn(&Value) -> K) -> BTreeMap<K, (u64, u64)> {
    let rows = d[name].as_array().unwrap_or_else(|| panic!("no {name}"));
    let mags: Vec<u64> = rows
        .iter()
        .map(|r| r["a"].as_u64().unwrap().abs_diff(r["b"].as_u64().unwrap()))
        .collect();
    assert!(
        mags.windows(2).all(|w| w[0] >= w[1]),
        "{name} not sorted by absolute change: {mags:?}"
    );
    rows.iter()
        .map(|r| (key(r), (r["a"].as_u64().unwrap(), r["b"].as_u64().unwrap())))
        .collect()
}

/// A count in A and in B.
type Pair = (u64, u64);

struct Setup {
    dir: PathBuf,
    a: PathBuf,
    b: PathBuf,
}

fn setup(name: &str) -> Setup {
    let dir = scratch(name);
    std::fs::write(dir.join("prog.c"), PROG).unwrap();
    build(
        Variant::Tally("path"),
        false,
        &["-O2", "-g", "prog.c"],
        &dir.join("prog"),
        &dir,
    );
    let (a, b) = (dir.join("a.tally"), dir.join("b.tally"));
    for (p, args) in [(&a, ["1", "5"]), (&b, ["0", "9"])] {
        let o = run(&dir.join("prog"), &args, &dir, p);
        assert!(o.status.success());
    }
    Setup { dir, a, b }
}

#[test]
fn diff_lists_exactly_what_changed_largest_first() {
    let s = setup("diff-changed");
    let (ca, cb) = (counts(&s.a), counts(&s.b));
    let o = diff(&["--format", "json", "a.tally", "b.tally"], &s.dir);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["schema"], "tally-diff/1");
    assert_eq!(d["equal"], false);
    assert!(d["only_in_a"].as_array().unwrap().is_empty());
    assert!(d["only_in_b"].as_array().unwrap().is_empty());

    // Functions: calls and block executions of every function that changed.
    let mut want_fns = BTreeMap::new();
    for (f, &(calls_a, exec_a)) in &ca.functions {
        let (calls_b, exec_b) = cb.functions[f];
        let blocks_differ = ca
            .blocks
            .iter()
            .any(|((g, id), n)| g == f && cb.blocks[&(g.clone(), *id)] != *n);
        if calls_a != calls_b || exec_a != exec_b || blocks_differ {
            want_fns.insert(f.clone(), ((calls_a, calls_b), (exec_a, exec_b)));
        }
    }
    let rows = d["functions"].as_array().unwrap();
    let got_fns: BTreeMap<String, (Pair, Pair)> = rows
        .iter()
        .map(|r| {
            let c = |k: &str, s: &str| r[k][s].as_u64().unwrap();
            (
                r["function"]["demangled"].as_str().unwrap().to_string(),
                (
                    (c("entry_count", "a"), c("entry_count", "b")),
                    (c("block_executions", "a"), c("block_executions", "b")),
                ),
            )
        })
        .collect();
    assert_eq!(got_fns, want_fns);
    // odds ran in A only, evens and main ran longer in B.
    assert!(got_fns.contains_key("odds") && got_fns.contains_key("evens"));
    assert_eq!(got_fns["odds"].0, (1, 0));
    let mags: Vec<u64> = rows
        .iter()
        .map(|r| {
            let e = &r["block_executions"];
            e["a"].as_u64().unwrap().abs_diff(e["b"].as_u64().unwrap())
        })
        .collect();
    assert!(
        mags.windows(2).all(|w| w[0] >= w[1]),
        "functions unsorted: {mags:?}"
    );

    let blocks = section(&d, "blocks", |r| {
        (
            r["function"].as_str().unwrap().to_string(),
            r["id"].as_u64().unwrap(),
        )
    });
    assert_eq!(blocks, changed(&ca.blocks, &cb.blocks));
    assert!(!blocks.is_empty());
    let lines = section(&d, "lines", |r| {
        (
            r["file"].as_str().unwrap().to_string(),
            r["line"].as_u64().unwrap(),
        )
    });
    assert_eq!(lines, changed(&ca.lines, &cb.lines));
    assert!(!lines.is_empty());
    let path_key = |r: &Value| {
        (
            r["function"].as_str().unwrap().to_string(),
            r["number"].as_str().unwrap().to_string(),
        )
    };
    let paths = section(&d, "paths", path_key);
    let want_paths = changed(&ca.paths, &cb.paths);
    assert_eq!(paths, want_paths);
    // Path spectra: run in one profile and not the other.
    let only_a = section(&d, "paths_only_in_a", path_key);
    let only_b = section(&d, "paths_only_in_b", path_key);
    let want_only_a: BTreeMap<_, _> = want_paths
        .iter()
        .filter(|(_, (_, b))| *b == 0)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let want_only_b: BTreeMap<_, _> = want_paths
        .iter()
        .filter(|(_, (a, _))| *a == 0)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    assert_eq!(only_a, want_only_a);
    assert_eq!(only_b, want_only_b);
    assert!(only_a.keys().any(|(f, _)| f == "odds"), "{only_a:?}");

    // The text names the same things; the snapshot pins its layout.
    let o = diff(&["a.tally", "b.tally"], &s.dir);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("different: "), "{text}");
    let dir = s.dir.display().to_string();
    insta::assert_snapshot!("diff_text", text.replace(&dir, "[dir]"));
}

#[test]
fn diff_of_a_profile_with_itself_is_equal() {
    let s = setup("diff-equal");
    let o = diff(&["a.tally", "a.tally"], &s.dir);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("equal: 3 functions")),
        "{text}"
    );
    let o = diff(&["--format", "json", "b.tally", "b.tally"], &s.dir);
    assert_eq!(o.status.code(), Some(0));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["equal"], true);
    assert_eq!(d["matched"], 3);
}

#[test]
fn diff_of_two_programs_lists_the_functions_only_one_has() {
    let s = setup("diff-programs");
    std::fs::write(s.dir.join("other.c"), OTHER).unwrap();
    build(
        Variant::Tally("path"),
        false,
        &["-O2", "-g", "other.c"],
        &s.dir.join("other"),
        &s.dir,
    );
    let o = run(&s.dir.join("other"), &[], &s.dir, &s.dir.join("o.tally"));
    assert!(o.status.success());
    let o = diff(&["--format", "json", "a.tally", "o.tally"], &s.dir);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names = |k: &str| -> BTreeSet<String> {
        d[k].as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(names("only_in_a").contains("odds"), "{d}");
    assert!(names("only_in_b").contains("twice"), "{d}");
    assert!(!names("only_in_b").contains("odds"));
    // `evens` has the same graph in both programs (another module): matched by graph hash.
    assert!(!names("only_in_a").contains("evens"), "{d}");
    assert!(!names("only_in_b").contains("evens"), "{d}");
    let text = String::from_utf8(diff(&["a.tally", "o.tally"], &s.dir).stdout).unwrap();
    let section = |title: &str| -> String {
        let at = text
            .find(title)
            .unwrap_or_else(|| panic!("no {title} in {text}"));
        text[at..].split("\n\n").next().unwrap().to_string()
    };
    assert!(
        section("functions only in A:").contains("\n  odds ("),
        "{text}"
    );
    assert!(
        section("functions only in B:").contains("\n  twice ("),
        "{text}"
    );
}

#[test]
fn diff_of_a_garbage_file_is_one_line_and_status_2() {
    let s = setup("diff-garbage");
    std::fs::write(s.dir.join("junk.tally"), b"not a profile at all").unwrap();
    for args in [["a.tally", "junk.tally"], ["missing.tally", "a.tally"]] {
        let o = diff(&args, &s.dir);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("tally: error: "), "{err}");
        assert!(o.stdout.is_empty());
    }
}

/// Interprocedural paths (`ipath` and `ipath-piecewise` profiles of testdata/ipath/groups.c run
/// with two inputs): the diff's paths are exactly those whose counts differ in the two
/// profiles' `tally paths --format json --top 0` (module, number), spectra included, with
/// their steps; a profile against itself is equal.
#[test]
fn diff_compares_interprocedural_paths() {
    let src = repo().join("testdata/ipath/groups.c");
    for mode in ["ipath", "ipath-piecewise"] {
        let dir = scratch(&format!("diff-{mode}"));
        let bin = dir.join("prog");
        build(
            Variant::Tally(mode),
            false,
            &["-O2", "-g", src.to_str().unwrap()],
            &bin,
            &dir,
        );
        let (a, b) = (dir.join("a.tally"), dir.join("b.tally"));
        for (p, args) in [(&a, &["40"][..]), (&b, &["3", "x"][..])] {
            // groups.c ends in exit(3) when n > 7 (`iso_end`).
            let o = run(&bin, args, &dir, p);
            assert!(p.exists(), "{mode}: no profile: {o:?}");
        }
        let ipaths = |p: &Path| -> BTreeMap<(String, String), u64> {
            let j = json_of("paths", p, &["--top", "0"]);
            let mut m = BTreeMap::new();
            for set in j["interprocedural"].as_array().unwrap() {
                for row in set["paths"].as_array().unwrap() {
                    m.insert(
                        (
                            set["module"].as_str().unwrap().to_string(),
                            row["number"].as_str().unwrap().to_string(),
                        ),
                        row["count"].as_u64().unwrap(),
                    );
                }
            }
            m
        };
        let (pa, pb) = (ipaths(&a), ipaths(&b));
        let want = changed(&pa, &pb);
        assert!(
            !want.is_empty(),
            "{mode}: the two inputs ran the same paths"
        );
        let o = diff(&["--format", "json", "a.tally", "b.tally"], &dir);
        assert_eq!(o.status.code(), Some(1), "{mode}");
        let d: Value = serde_json::from_slice(&o.stdout).unwrap();
        let key = |r: &Value| {
            (
                r["function"].as_str().unwrap().to_string(),
                r["number"].as_str().unwrap().to_string(),
            )
        };
        assert_eq!(section(&d, "paths", key), want, "{mode}: paths");
        let only = |x: bool| -> BTreeMap<_, _> {
            want.iter()
                .filter(|(_, (ca, cb))| if x { *cb == 0 } else { *ca == 0 })
                .map(|(k, v)| (k.clone(), *v))
                .collect()
        };
        assert_eq!(section(&d, "paths_only_in_a", key), only(true), "{mode}");
        assert_eq!(section(&d, "paths_only_in_b", key), only(false), "{mode}");
        for r in d["paths"].as_array().unwrap() {
            let steps = r["steps"].as_array().expect("interprocedural steps");
            assert!(
                steps.iter().any(|s| s.as_str().unwrap().contains(":b")),
                "{mode}: {r}"
            );
        }
        let o = diff(&["a.tally", "a.tally"], &dir);
        assert_eq!(o.status.code(), Some(0), "{mode}");
    }
}
