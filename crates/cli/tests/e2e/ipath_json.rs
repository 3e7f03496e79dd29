//! `tally paths --format json` on interprocedural path profiles (modes `ipath` and
//! `ipath-piecewise`; docs/paths-json.md, the `interprocedural` member of `tally-paths/1`).
//!
//! Checked structurally on programs with direct calls, recursion and calls through pointers:
//! every path's steps are a valid walk of the program (consecutive blocks joined by an edge of
//! the function's graph, or by a call into the callee's entry block at a site of the block the
//! walk is in, or by a return from a block with a return edge to the site of the matching call
//! — or, unmatched, to any caller's site (piecewise)); the calls and returns marked matched are
//! exactly those that pair up; the start and end words fit the steps; the counts equal the
//! text output's, path for path; and the block counts rebuilt from the JSON alone (each path's
//! own blocks, after its calling context, times its count) equal the `edges-naive` oracle's
//! for every function profiled by paths — on small programs and on Lua (one set per file).
//! A small deterministic case is an insta snapshot, and
//! the JSON is read by `jq` (or python3's json module) as a real consumer would.

use crate::support::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// A small program: direct calls, a loop in a directly called function (piecewise paths
/// return from it unmatched), recursion and a call through a pointer.
const TINY: &str = r#"#include <stdio.h>
__attribute__((noinline)) static int sq(int x) { return x * x; }
__attribute__((noinline)) static int sum(int n) { return n == 0 ? 0 : sq(n) + sum(n - 1); }
__attribute__((noinline)) static int apply(int (*f)(int), int x) { return f(x); }
__attribute__((noinline)) static int tri(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += i;
    return s;
}
__attribute__((noinline)) static int both(int n) { return tri(n) + sq(n); }
int main(int argc, char **argv) {
    (void)argv;
    printf("%d %d\n", apply(sum, 1 + argc), both(2 + argc));
    return 0;
}
"#;

/// One function's graph, from `tally report --format json`.
#[derive(Default)]
struct Graph {
    entry: u64,
    /// (from, to) of flow edges.
    flow: BTreeSet<(u64, u64)>,
    /// Blocks with a return edge.
    returns: BTreeSet<u64>,
    /// Blocks a reentry edge enters.
    reentries: BTreeSet<u64>,
    /// Profiled by paths (no counters).
    by_paths: bool,
    blocks: Vec<u64>,
}

/// Per module, per function name, its graph.
fn graphs(report: &Value) -> BTreeMap<String, BTreeMap<String, Graph>> {
    let mut m: BTreeMap<String, BTreeMap<String, Graph>> = BTreeMap::new();
    for f in report["functions"].as_array().unwrap() {
        let mut g = Graph {
            by_paths: f["counters"].as_u64() == Some(0),
            blocks: f["blocks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["count"].as_u64().unwrap())
                .collect(),
            ..Graph::default()
        };
        for e in f["edges"].as_array().unwrap() {
            let (from, to) = (e["from"].as_u64(), e["to"].as_u64());
            match (e["kind"].as_str().unwrap(), from, to) {
                ("entry", _, Some(t)) => g.entry = t,
                ("flow", Some(a), Some(b)) => {
                    g.flow.insert((a, b));
                }
                ("return", Some(a), _) => {
                    g.returns.insert(a);
                }
                ("reentry", _, Some(b)) => {
                    g.reentries.insert(b);
                }
                _ => {}
            }
        }
        m.entry(f["module"].as_str().unwrap().to_string())
            .or_default()
            .insert(f["name"].as_str().unwrap().to_string(), g);
    }
    m
}

/// Where a walk is: in block `b` of `f` (`Some`), or just entered `f` by a call (`None`).
type At = (String, Option<u64>);

/// Checks one path (module doc); returns its own blocks (after its calling context).
fn check_path(what: &str, p: &Value, g: &BTreeMap<String, Graph>, piecewise: bool) -> Vec<At> {
    let steps = p["steps"].as_array().unwrap();
    let context = p["context_steps"].as_u64().unwrap() as usize;
    let (start, end) = (p["start"].as_str().unwrap(), p["end"].as_str().unwrap());
    let s = |k: &Value, f: &str| k[f].as_str().unwrap().to_string();
    let mut at: Option<At> = None;
    // A restart or reentry marker was the previous step.
    let mut restarted: Option<&str> = None;
    let mut pending: Vec<(String, u64, u64, bool)> = Vec::new();
    let mut own = Vec::new();
    let mut ended = false;
    let mut blocks = 0;
    let mut restarts = 0;
    for (i, st) in steps.iter().enumerate() {
        let what = format!("{what}: step {i} {st}");
        assert!(!ended, "{what}: a step after the path's end");
        match st["kind"].as_str().unwrap() {
            "block" => {
                let (f, b) = (s(st, "function"), st["block"].as_u64().unwrap());
                let gf = &g[&f];
                match (&at, restarted.take()) {
                    (None, None) => {
                        assert_eq!(b, gf.entry, "{what}: a path starts at an entry block")
                    }
                    (Some((pf, None)), None) => {
                        assert_eq!(pf, &f, "{what}: a call enters its callee");
                        assert_eq!(b, gf.entry, "{what}: a call enters the entry block");
                    }
                    (Some((pf, Some(pb))), None) => {
                        assert_eq!(pf, &f, "{what}: a block of another function");
                        assert!(gf.flow.contains(&(*pb, b)), "{what}: no edge {pb} -> {b}");
                    }
                    (_, Some(m)) => {
                        if let Some((pf, None)) = &at {
                            assert_eq!(pf, &f, "{what}: a restart in another function");
                        }
                        if m == "restart" {
                            assert!(
                                gf.flow.iter().any(|&(_, y)| y == b),
                                "{what}: a restart at a block no edge enters"
                            );
                        } else {
                            assert!(gf.reentries.contains(&b), "{what}: no reentry");
                        }
                    }
                }
                if i >= context {
                    own.push((f.clone(), Some(b)));
                }
                blocks += 1;
                at = Some((f, Some(b)));
            }
            k @ ("call" | "summary") => {
                let (f, b) = (s(st, "function"), st["block"].as_u64().unwrap());
                assert_eq!(
                    at.as_ref(),
                    Some(&(f.clone(), Some(b))),
                    "{what}: a call from where the walk is not"
                );
                if k == "call" {
                    let callee = s(st, "callee");
                    pending.push((f, b, st["site"].as_u64().unwrap(), st["matched"] == true));
                    at = Some((callee, None));
                }
            }
            "return" => {
                let (f, b, site) = (
                    s(st, "function"),
                    st["block"].as_u64().unwrap(),
                    st["site"].as_u64().unwrap(),
                );
                let callee = s(st, "callee");
                match &at {
                    Some((pf, Some(pb))) => {
                        assert_eq!(pf, &callee, "{what}: a return from another function");
                        assert!(g[pf].returns.contains(pb), "{what}: no return edge");
                    }
                    _ => panic!("{what}: a return from no block"),
                }
                match pending.pop() {
                    Some((cf, cb, cs, matched)) => {
                        assert_eq!((cf, cb, cs), (f.clone(), b, site), "{what}: wrong site");
                        assert!(matched && st["matched"] == true, "{what}: a pair unmarked");
                    }
                    None => {
                        assert!(piecewise, "{what}: an unmatched return in context mode");
                        assert!(i >= context, "{what}");
                        assert_eq!(st["matched"], false, "{what}: unmatched marked matched");
                    }
                }
                at = Some((f, Some(b)));
            }
            m @ ("restart" | "reentry") => {
                // A restart before the path's own start is its calling context's (a caller
                // that restarted before the pending call); the path's own steps start at its
                // last one.
                assert!(
                    i <= context,
                    "{what}: the path's own steps start at its last restart"
                );
                restarted = Some(m);
                if i == context {
                    restarts += 1;
                    if m == "reentry" {
                        assert_eq!(start, "reentry", "{what}");
                    } else {
                        assert!(
                            matches!(start, "back-edge" | "cut"),
                            "{what}: start {start}"
                        );
                    }
                }
            }
            "cut" => {
                let Some((f, Some(b))) = &at else {
                    panic!("{what}: a cut outside a block")
                };
                assert!(
                    g[f].flow.iter().any(|&(x, _)| x == *b),
                    "{what}: a cut at a block without flow edges"
                );
                assert!(matches!(end, "back-edge" | "cut"), "{what}: end {end}");
                ended = true;
            }
            "early-exit" => {
                assert_eq!(end, "early-exit", "{what}");
                ended = true;
            }
            k => panic!("{what}: unknown step kind {k}"),
        }
    }
    if !ended {
        assert_eq!(end, "return", "{what}: the path ends without a marker");
        let Some((f, Some(b))) = &at else {
            panic!("{what}: a path ends outside a block")
        };
        assert!(
            g[f].returns.contains(b),
            "{what}: ends at a block without return"
        );
        assert!(
            pending.is_empty(),
            "{what}: ends by returning with calls pending"
        );
    }
    for (_, _, _, matched) in &pending {
        assert!(!matched, "{what}: a pending call marked matched");
    }
    assert!(restarts <= 1, "{what}: {restarts} restarts");
    if restarts == 0 {
        assert_eq!(start, "entry", "{what}");
        assert_eq!(context, 0, "{what}");
    }
    assert_eq!(p["length"].as_u64(), Some(blocks), "{what}: length");
    own
}

fn tally_paths(dir: &Path, prof: &str, args: &[&str]) -> std::process::Output {
    Command::new(tally())
        .arg("paths")
        .args(args)
        .arg(prof)
        .current_dir(dir)
        .output()
        .expect("run tally paths")
}

/// Builds `args` in `mode` and edges-naive, runs both with `run_args`, checks the JSON of
/// the ipath profile (module doc); returns the profile's directory and the JSON.
fn check(
    name: &str,
    args: &[String],
    run_args: &[&str],
    mode: &'static str,
    status: i32,
) -> (std::path::PathBuf, Value) {
    let dir = scratch(&format!("ipath-json-{name}-{mode}"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut reports = Vec::new();
    let cxx = args.iter().any(|a| a.ends_with(".cpp"));
    for v in [Variant::Tally(mode), Variant::Tally("edges-naive")] {
        build(v, cxx, &args, &dir.join(v.name()), &dir);
        let prof = dir.join(format!("{}.tally", v.name()));
        let o = run(&dir.join(v.name()), run_args, &dir, &prof);
        assert_eq!(o.status.code(), Some(status), "{name} {}: {o:?}", v.name());
        reports.push(report_json(&prof));
    }
    let what = format!("{name} {mode}");
    let prof = format!("{mode}.tally");
    let o = tally_paths(&dir, &prof, &["--format", "json"]);
    assert!(o.status.success(), "{what}: {o:?}");
    let json: Value = serde_json::from_slice(&o.stdout).expect("tally-paths JSON");
    assert_eq!(json["schema"], "tally-paths/1");
    let sets = json["interprocedural"]
        .as_array()
        .expect("interprocedural[]");
    assert!(!sets.is_empty(), "{what}: no set");
    let g = graphs(&reports[1]);
    let ip = graphs(&reports[0]);
    // Block counts rebuilt from the JSON, and (count, module, number) of every path.
    let mut derived: BTreeMap<(String, String, u64), u64> = BTreeMap::new();
    let mut listed: Vec<(u64, String, u128)> = Vec::new();
    // (module, number) -> (context steps, steps) of every path.
    let mut shape: BTreeMap<(String, u128), (usize, usize)> = BTreeMap::new();
    for set in sets {
        let module = set["module"].as_str().unwrap().to_string();
        assert_eq!(
            set["mode"],
            if mode == "ipath" {
                "context"
            } else {
                "piecewise"
            }
        );
        let paths = set["paths"].as_array().unwrap();
        assert_eq!(set["executed_paths"].as_u64(), Some(paths.len() as u64));
        let potential: u128 = set["potential_paths"].as_str().unwrap().parse().unwrap();
        let mut numbers = BTreeSet::new();
        let mut last = u64::MAX;
        for (i, p) in paths.iter().enumerate() {
            let number: u128 = p["number"].as_str().unwrap().parse().unwrap();
            assert!(number < potential, "{what}: path {number} of {potential}");
            assert!(numbers.insert(number), "{what}: path {number} twice");
            let count = p["count"].as_u64().unwrap();
            assert!(count > 0 && count <= last, "{what}: not hottest first");
            last = count;
            listed.push((count, module.clone(), number));
            let steps = p["steps"].as_array().unwrap().len();
            let context = p["context_steps"].as_u64().unwrap() as usize;
            shape.insert((module.clone(), number), (context, steps));
            let at = format!("{what} {module} path {i}");
            for (f, b) in check_path(&at, p, &g[&module], mode != "ipath") {
                *derived.entry((module.clone(), f, b.unwrap())).or_insert(0) += count;
            }
        }
    }
    let mut by_paths = 0;
    for (module, fns) in &ip {
        for (f, gf) in fns.iter().filter(|(_, gf)| gf.by_paths) {
            by_paths += usize::from(gf.blocks.iter().any(|&c| c > 0));
            for (b, &want) in g[module][f].blocks.iter().enumerate() {
                let key = (module.clone(), f.clone(), b as u64);
                let got = derived.get(&key).copied().unwrap_or(0);
                assert_eq!(
                    got, want,
                    "{what}: {module} {f} block n{b}: JSON {got}, edges-naive {want}"
                );
            }
        }
    }
    assert!(by_paths >= 3, "{what}: only {by_paths} functions by paths");
    // The text lists the same paths with the same counts, in the same order.
    let o = tally_paths(&dir, &prof, &["--top", "0"]);
    assert!(o.status.success(), "{what}: {o:?}");
    let text = String::from_utf8(o.stdout).unwrap();
    let runs: Vec<(u64, String, u128)> = text
        .lines()
        .filter_map(|l| {
            let (count, rest) = l.split_once(" runs  path ")?;
            let (number, module) = rest.split_once(" of ")?;
            Some((
                count.split_whitespace().last()?.parse().ok()?,
                module.to_string(),
                number.parse().ok()?,
            ))
        })
        .collect();
    listed.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    assert_eq!(runs, listed, "{what}: text and JSON list other paths");
    // Each path's text: its calling context set apart (as many lines as the JSON's
    // `context_steps`), then its own steps.
    let mut chunks: Vec<Vec<&str>> = Vec::new();
    for l in text.lines().skip_while(|l| !l.contains(" runs  path ")) {
        if l.contains(" runs  path ") {
            chunks.push(Vec::new());
        } else if let Some(c) = chunks.last_mut() {
            c.push(l.trim());
        }
    }
    assert_eq!(chunks.len(), listed.len(), "{what}: text paths");
    let mut with_context = 0;
    for (c, (_, module, number)) in chunks.iter().zip(&listed) {
        let (context, steps) = shape[&(module.clone(), *number)];
        match c.iter().position(|l| *l == "this path:") {
            Some(own) => {
                assert_eq!(
                    c[0], "calling context (counted on earlier paths):",
                    "{what}"
                );
                assert_eq!(
                    (own - 1, c.len() - own - 1),
                    (context, steps - context),
                    "{what}"
                );
                with_context += 1;
            }
            None => assert_eq!((0, c.len()), (context, steps), "{what}: path {number}"),
        }
    }
    if mode == "ipath" && name.starts_with("early") {
        assert!(with_context > 0, "{what}: no path with a calling context");
    }
    (dir, json)
}

/// The command line of a one-file build.
fn one(src: &Path, opt: &str) -> Vec<String> {
    vec![opt.into(), "-g".into(), src.display().to_string()]
}

/// (paths crossing a call, unmatched returns) in a `tally-paths` JSON.
fn crossings(json: &Value) -> (usize, usize) {
    let (mut crossing, mut unmatched) = (0, 0);
    for set in json["interprocedural"].as_array().unwrap() {
        for p in set["paths"].as_array().unwrap() {
            let steps = p["steps"].as_array().unwrap();
            crossing += usize::from(steps.iter().any(|s| s["kind"] == "call"));
            unmatched += steps
                .iter()
                .filter(|s| s["kind"] == "return" && s["matched"] == false)
                .count();
        }
    }
    (crossing, unmatched)
}

#[test]
fn ipath_json_paths_are_walks_and_counts_equal_edges_naive() {
    let dir = scratch("ipath-json-src");
    let tiny = dir.join("tiny.c");
    std::fs::write(&tiny, TINY).unwrap();
    let calls = repo().join("testdata/ipath/calls.c");
    // Frames abandoned by exit, longjmp and a throw (Melski & Reps 1998 §9.2): paths that end early
    // and paths that restart at a re-entry.
    let early = repo().join("testdata/ipath/early.c");
    let throw = repo().join("testdata/ipath/throw.cpp");
    let (mut crossing, mut unmatched) = (0, 0);
    for (name, src, status) in [
        ("tiny", &tiny, 0),
        ("calls", &calls, 0),
        ("early", &early, 3),
        ("throw", &throw, 0),
    ] {
        for opt in ["-O0", "-O2"] {
            for mode in ["ipath", "ipath-piecewise"] {
                let (_, json) = check(&format!("{name}{opt}"), &one(src, opt), &[], mode, status);
                let (c, u) = crossings(&json);
                crossing += c;
                unmatched += u;
            }
        }
    }
    assert!(crossing >= 20, "only {crossing} paths cross a call");
    assert!(unmatched >= 2, "only {unmatched} unmatched returns");
}

/// `--function` and `--top` select the same paths in the JSON as in the text; a consumer
/// (`jq`, else python3) reads the document; damaged profiles give a one-line error.
#[test]
fn ipath_json_selection_consumer_and_damage() {
    let dir = scratch("ipath-json-src2");
    let tiny = dir.join("tiny.c");
    std::fs::write(&tiny, TINY).unwrap();
    let (dir, json) = check("tiny-sel", &one(&tiny, "-O0"), &[], "ipath-piecewise", 0);
    let all = json["interprocedural"][0]["paths"].as_array().unwrap();
    let through_sq = all
        .iter()
        .filter(|p| {
            p["steps"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["kind"] == "block" && s["function"] == "sq")
        })
        .count();
    assert!(through_sq >= 1 && through_sq < all.len());
    let o = tally_paths(
        &dir,
        "ipath-piecewise.tally",
        &["--format", "json", "--function", "^sq$"],
    );
    assert!(o.status.success(), "{o:?}");
    let sel: Value = serde_json::from_slice(&o.stdout).unwrap();
    let set = &sel["interprocedural"][0];
    assert_eq!(set["paths"].as_array().unwrap().len(), through_sq);
    assert_eq!(set["executed_paths"].as_u64(), Some(all.len() as u64));
    let o = tally_paths(
        &dir,
        "ipath-piecewise.tally",
        &["--format", "json", "--top", "2"],
    );
    let top: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        top["interprocedural"][0]["paths"],
        Value::from(all[..2].to_vec())
    );
    let text = tally_paths(&dir, "ipath-piecewise.tally", &["--function", "^sq$"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "{through_sq} of them through the functions selected"
        )),
        "{text}"
    );

    // Path mode: --function keeps the matching functions.
    build(
        Variant::Tally("path"),
        false,
        &["-O0", "-g", tiny.to_str().unwrap()],
        &dir.join("path"),
        &dir,
    );
    assert!(run(&dir.join("path"), &[], &dir, &dir.join("path.tally"))
        .status
        .success());
    let o = tally_paths(
        &dir,
        "path.tally",
        &["--format", "json", "--function", "^tr"],
    );
    let p: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = p["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["tri"], "{p}");
    assert!(p.get("interprocedural").is_none(), "{p}");
    let o = tally_paths(&dir, "path.tally", &["--function", "("]);
    assert!(!o.status.success() && o.stderr.ends_with(b"\n"), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);

    // A real consumer: the total of the counts and the kinds of steps, from jq or python3.
    let total: u64 = all.iter().map(|p| p["count"].as_u64().unwrap()).sum();
    let file = dir.join("paths.json");
    std::fs::write(&file, serde_json::to_vec(&json).unwrap()).unwrap();
    let jq = Command::new("jq")
        .args(["-r", "[.interprocedural[].paths[].count] | add"])
        .arg(&file)
        .output();
    let out = match jq {
        Ok(o) if o.status.success() => o.stdout,
        _ => {
            let o = Command::new("python3")
                .args([
                    "-c",
                    "import json,sys; d=json.load(open(sys.argv[1])); \
                     print(sum(p['count'] for s in d['interprocedural'] for p in s['paths']))",
                ])
                .arg(&file)
                .output()
                .expect("jq or python3");
            assert!(o.status.success(), "{o:?}");
            o.stdout
        }
    };
    assert_eq!(String::from_utf8(out).unwrap().trim(), total.to_string());

    // Damage: a truncated profile, and path numbers out of range.
    let bytes = std::fs::read(dir.join("ipath-piecewise.tally")).unwrap();
    std::fs::write(dir.join("cut.tally"), &bytes[..bytes.len() / 2]).unwrap();
    let mut p = tally_format::profile::Profile::read(&bytes).unwrap();
    for e in &mut p.modules[0].paths {
        e.path = e.path.wrapping_add(1 << 40);
    }
    p.write_file(dir.join("range.tally")).unwrap();
    for prof in ["cut.tally", "range.tally"] {
        for args in [&["--format", "json"][..], &[][..]] {
            let o = tally_paths(&dir, prof, args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "{prof}: {o:?}");
            assert_eq!(err.trim_end().lines().count(), 1, "{prof}: {err}");
            assert!(!err.contains("panicked"), "{prof}: {err}");
        }
    }
}

/// The JSON of the small program at -O0 in both modes (file paths reduced to their names).
#[test]
fn ipath_json_snapshot() {
    let dir = scratch("ipath-json-snap");
    std::fs::write(dir.join("tiny.c"), TINY).unwrap();
    for mode in ["ipath", "ipath-piecewise"] {
        build(
            Variant::Tally(mode),
            false,
            &["-O0", "-g", "tiny.c"],
            &dir.join(mode),
            &dir,
        );
        let prof = format!("{mode}.tally");
        let o = run(&dir.join(mode), &[], &dir, &dir.join(&prof));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "5 12\n");
        let o = tally_paths(&dir, &prof, &["--format", "json"]);
        assert!(o.status.success(), "{o:?}");
        let mut json: Value = serde_json::from_slice(&o.stdout).unwrap();
        json["program"] = Value::Null;
        fn strip(v: &mut Value) {
            match v {
                Value::String(s) if s.contains('/') => {
                    *s = s.rsplit('/').next().unwrap().to_string();
                }
                Value::Array(a) => a.iter_mut().for_each(strip),
                Value::Object(o) => o.values_mut().for_each(strip),
                _ => {}
            }
        }
        strip(&mut json);
        // Only the interprocedural member: the functions' own lists are path mode's.
        insta::assert_json_snapshot!(
            format!("tiny_{}", mode.replace('-', "_")),
            json["interprocedural"]
        );
    }
}

/// Lua at -O2 on a small script: many sets (one per file), real code.
#[test]
fn ipath_json_paths_are_walks_on_lua() {
    let script = repo().join("testdata/lua/small.lua");
    for mode in ["ipath", "ipath-piecewise"] {
        let (_, json) = check(
            "lua",
            &lua_args(&["-O2"]),
            &[script.to_str().unwrap()],
            mode,
            0,
        );
        let sets = json["interprocedural"].as_array().unwrap();
        let paths: usize = sets
            .iter()
            .map(|s| s["paths"].as_array().unwrap().len())
            .sum();
        // Few of Lua's functions are in a set today (most may end early: longjmp), so few
        // of its paths cross calls (96 paths, 2 across calls, on 2026-11-24).
        let (crossing, _) = crossings(&json);
        eprintln!(
            "lua {mode}: {} sets, {paths} paths, {crossing} across calls",
            sets.len()
        );
        assert!(
            sets.len() >= 10 && paths >= 60 && crossing >= 1,
            "lua {mode}: {} sets, {paths} paths, {crossing} crossing",
            sets.len()
        );
    }
}
