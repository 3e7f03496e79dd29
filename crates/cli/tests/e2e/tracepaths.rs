//! `tally trace --paths`: the execution regenerated from a witness trace,
//! cut into Ball-Larus paths, against `path` mode on the same program and input. The same
//! sources built with `--tally-mode=path` and `--tally-mode=trace` (both instrument the
//! optimized IR at the same -O, so their graphs must be the same: checked function by
//! function by graph hash), run on the same input: `tally trace --paths --format json` must
//! equal `tally paths --format json` — every function, every path number, count and block
//! sequence — except the functions `path` mode profiles with edge counters (they have no path
//! profile there). C++ exceptions included.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tally_format::profile::Profile;

/// What [`check`] compared.
struct Compared {
    functions: usize,
    path_runs: u64,
    /// Path runs that `path` mode ends at a `Return` before a tail call and the trace build
    /// (where the call is not a tail call) ends at the same block's early exit.
    tail_moves: u64,
}

/// `tally` with `args`: stdout, stderr and the exit status.
fn tally_out(args: &[&std::ffi::OsStr]) -> (Vec<u8>, String, Option<i32>) {
    let o = std::process::Command::new(tally())
        .args(args)
        .output()
        .unwrap();
    (
        o.stdout,
        String::from_utf8_lossy(&o.stderr).into_owned(),
        o.status.code(),
    )
}

/// The functions of a `tally-paths/1` document by `(module, name)`.
fn functions(doc: &Value) -> BTreeMap<(String, String), Value> {
    doc["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                (
                    f["module"].as_str().unwrap().to_string(),
                    f["name"].as_str().unwrap().to_string(),
                ),
                f.clone(),
            )
        })
        .collect()
}

/// Builds `args` in path and trace mode under a scratch directory, runs both with
/// `run_args` (exit status `status`, same output), and returns the directory.
fn build_both(name: &str, cxx: bool, args: &[String], run_args: &[&str], status: i32) -> PathBuf {
    let dir = scratch(&format!("tracepaths-{name}"));
    prebuild(
        &[Variant::Tally("path"), Variant::Tally("trace")],
        cxx,
        args,
    );
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut outs = Vec::new();
    for mode in ["path", "trace"] {
        let vdir = dir.join(mode);
        std::fs::create_dir_all(&vdir).unwrap();
        build(Variant::Tally(mode), cxx, &a, &vdir.join("prog"), &dir);
        let out = std::process::Command::new("./prog")
            .args(run_args)
            .current_dir(&vdir)
            .env("TALLY_PROFILE", vdir.join("prog.tally"))
            .env("TALLY_TRACE", vdir.join("prog.trace"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(status), "{name} {mode}");
        outs.push(out.stdout);
    }
    assert_eq!(outs[0], outs[1], "{name}: outputs differ");
    // The trace build again, its trace range-coded (TALLY_TRACE_COMPRESS=1, trace format 6):
    // `compare` checks it cuts into the same paths.
    let vdir = dir.join("trace");
    let out = std::process::Command::new("./prog")
        .args(run_args)
        .current_dir(&vdir)
        .env("TALLY_PROFILE", vdir.join("prog.ctally"))
        .env("TALLY_TRACE", vdir.join("prog.ctrace"))
        .env("TALLY_TRACE_COMPRESS", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(status), "{name} coded");
    assert_eq!(
        out.stdout, outs[0],
        "{name}: the coded run's output differs"
    );
    dir
}

/// The graphs of both builds are the same: every function both define has the same graph
/// hash (`(module, name)` -> hash differs otherwise).
fn same_graphs(name: &str, path: &Profile, trace: &Profile) {
    let hashes = |p: &Profile| -> BTreeMap<(String, String), u64> {
        p.modules
            .iter()
            .flat_map(|m| {
                m.meta
                    .functions
                    .iter()
                    .map(|f| ((m.meta.source.clone(), f.name.clone()), f.cfg_hash))
            })
            .collect()
    };
    let (a, b) = (hashes(path), hashes(trace));
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{name}: the builds define different functions"
    );
    for (k, h) in &a {
        assert_eq!(
            Some(h),
            b.get(k),
            "{name}: {k:?} has another graph in trace mode"
        );
    }
}

/// Compares `tally trace --paths --format json` of the trace build in `dir` with `tally paths
/// --format json` of its path build.
fn compare(name: &str, dir: &Path) -> Compared {
    let path_prof = Profile::read_file(dir.join("path/prog.tally")).unwrap();
    let trace_prof = Profile::read_file(dir.join("trace/prog.tally")).unwrap();
    same_graphs(name, &path_prof, &trace_prof);
    let (out, err, code) = tally_out(&[
        "paths".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        dir.join("path/prog.tally").as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{name}: tally paths: {err}");
    let want: Value = serde_json::from_slice(&out).unwrap();
    let (out, err, code) = tally_out(&[
        "trace".as_ref(),
        "--paths".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        dir.join("trace/prog.trace").as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{name}: tally trace --paths: {err}");
    let got: Value = serde_json::from_slice(&out).unwrap();
    let coded = dir.join("trace/prog.ctrace");
    assert_eq!(
        &std::fs::read(&coded).unwrap()[8..12],
        &tally_format::trace::WTRACE_VERSION_CODED.to_le_bytes(),
        "{name}: not a coded trace"
    );
    let (cout, err, code) = tally_out(&[
        "trace".as_ref(),
        "--paths".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        "--profile".as_ref(),
        dir.join("trace/prog.ctally").as_os_str(),
        coded.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{name}: tally trace --paths (coded): {err}");
    let cgot: Value = serde_json::from_slice(&cout).unwrap();
    assert!(
        functions(&cgot) == functions(&got),
        "{name}: the range-coded trace cuts into other paths than the raw one"
    );
    assert_eq!(got["schema"], "tally-paths/1");
    let (want, got) = (functions(&want), functions(&got));
    // Functions path mode profiles with edge counters have no path profile there.
    let edge_counted: Vec<(String, String)> = path_prof
        .modules
        .iter()
        .flat_map(|m| {
            m.meta
                .functions
                .iter()
                .filter(|f| f.paths().is_none())
                .map(|f| (m.meta.source.clone(), f.name.clone()))
        })
        .collect();
    for k in got.keys() {
        assert!(
            want.contains_key(k) || edge_counted.contains(k),
            "{name}: {k:?} has paths in the trace but no path profile"
        );
    }
    let mut c = Compared {
        functions: 0,
        path_runs: 0,
        tail_moves: 0,
    };
    for (k, w) in &want {
        let g = got
            .get(k)
            .unwrap_or_else(|| panic!("{name}: {k:?} is missing from trace --paths"));
        if w != g {
            let moved = tail_call_moves(name, k, w, g, &trace_prof);
            c.tail_moves += moved;
        }
        c.functions += 1;
        c.path_runs += w["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["count"].as_u64().unwrap())
            .sum::<u64>();
    }
    c
}

/// `w` (path mode) and `g` (trace) of function `k` differ: the only difference allowed is
/// the one tail calls make. `path` mode ends a path before a `tail` call that a `ret` follows
/// (the frame is gone while the callee runs: the path ends with the `Return` edge), while the
/// trace build keeps the frame until the `ret` (its return record comes after the call); a
/// frame abandoned (`longjmp`, `exit`) inside such a callee is counted by `path` mode as the
/// path that returned and by the trace as the same blocks ending with the block's early exit,
/// which the block has when an earlier call of it may end the frame (the trace does not say
/// which call of the block was running, so the cutter cannot tell the two apart). Each such
/// move must pair a `return` path and an `early-exit` path with the same blocks, shift the
/// same count from one to the other, and end at a block that returns after a call that can
/// run traced code. Returns the path runs moved.
fn tail_call_moves(name: &str, k: &(String, String), w: &Value, g: &Value, trace: &Profile) -> u64 {
    let strip = |v: &Value| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("paths");
        v.as_object_mut().unwrap().remove("executed_paths");
        v
    };
    assert_eq!(strip(w), strip(g), "{name}: {k:?} differs");
    type Row = (u64, Vec<u64>, String, String);
    let rows = |v: &Value| -> BTreeMap<String, Row> {
        v["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let blocks = p["blocks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b.as_u64().unwrap())
                    .collect();
                (
                    p["number"].as_str().unwrap().to_string(),
                    (
                        p["count"].as_u64().unwrap(),
                        blocks,
                        p["start"].as_str().unwrap().to_string(),
                        p["end"].as_str().unwrap().to_string(),
                    ),
                )
            })
            .collect()
    };
    let (wr, gr) = (rows(w), rows(g));
    let f = trace
        .modules
        .iter()
        .filter(|m| m.meta.source == k.0)
        .flat_map(|m| &m.meta.functions)
        .find(|f| f.name == k.1)
        .unwrap();
    let cfg = f.cfg().unwrap();
    let calls = &f.wtrace().unwrap().calls;
    let mut moved = 0;
    let all: std::collections::BTreeSet<&String> = wr.keys().chain(gr.keys()).collect();
    for n in all {
        let (wc, gc) = (wr.get(n).map_or(0, |r| r.0), gr.get(n).map_or(0, |r| r.0));
        if wc <= gc {
            continue;
        }
        // Path `n` ran fewer times in the trace: it must be a `return` path whose runs
        // moved to the early-exit path with the same blocks.
        let r = &wr[n];
        let fail = || {
            panic!("{name}: {k:?} path {n} {r:?}: path mode {wc}, trace {gc}\npath mode: {}\n    trace: {}", w["paths"], g["paths"])
        };
        if r.3 != "return" {
            fail();
        }
        let Some((en, e)) = gr
            .iter()
            .find(|(_, x)| x.1 == r.1 && x.2 == r.2 && x.3 == "early-exit")
        else {
            fail()
        };
        let ew = wr.get(en).map_or(0, |x| x.0);
        if e.0 - ew != wc - gc {
            fail();
        }
        let last = tally_graph::NodeId::new(*r.1.last().unwrap() as usize);
        let returns = cfg
            .succs(last)
            .iter()
            .any(|&e| cfg.edge(e).kind == tally_graph::EdgeKind::Return);
        let early = cfg.early_exit(last).is_some();
        let traced_call = calls[last.index()]
            .last()
            .is_some_and(|c| *c != tally_format::WCallee::Opaque);
        assert!(
            returns && early && traced_call,
            "{name}: {k:?} path {n} ends at {last}, which does not return after a call"
        );
        moved += wc - gc;
    }
    // Every increase in the trace is one of the moves above.
    let up: u64 = gr
        .iter()
        .map(|(n, x)| x.0.saturating_sub(wr.get(n).map_or(0, |r| r.0)))
        .sum();
    assert_eq!(
        up, moved,
        "{name}: {k:?}: path mode {} / trace {}",
        w["paths"], g["paths"]
    );
    eprintln!(
        "{name}: {}: {moved} path runs end in a tail call (path mode: return; trace: early exit)",
        k.1
    );
    moved
}

fn single(file: &Path, opt: &str) -> Vec<String> {
    vec![opt.into(), "-g".into(), file.display().to_string()]
}

/// The programs `path` mode is tested with (`paths.rs`): every early-exit case and the shapes,
/// at -O0 and -O2, the C++ exceptions included.
#[test]
fn trace_paths_equal_path_mode_on_test_programs() {
    let programs = early_and_shapes();
    let mut exact = 0;
    for (file, status) in &programs {
        for opt in ["-O0", "-O2"] {
            let name = format!("{}{opt}", file.file_name().unwrap().to_str().unwrap());
            let cxx = file.extension().is_some_and(|e| e == "cpp");
            let dir = build_both(&name, cxx, &single(file, opt), &[], *status);
            let c = compare(&name, &dir);
            eprintln!(
                "{name}: {} functions, {} path runs compared, {} moved by tail calls",
                c.functions, c.path_runs, c.tail_moves
            );
            // At -O2 latch.ll folds to a constant; indirect.ll's interpreter is edge-counted
            // in path mode (only its main, run once, has paths).
            if !name.starts_with("latch.ll-O2") && !name.starts_with("indirect") {
                assert!(c.path_runs >= 2, "{name}: too little compared");
            }
            exact += 1;
        }
    }
    assert_eq!(exact, 2 * programs.len(), "not every program compared");
}

/// A real program built from `args` and run with `run_args`: at least `functions` functions
/// and `runs` path runs must be compared.
fn real_program(name: &str, args: &[String], run_args: &[&str], functions: usize, runs: u64) {
    let dir = build_both(name, false, args, run_args, 0);
    let c = compare(name, &dir);
    eprintln!(
        "{name}: {} functions, {} path runs compared, {} moved by tail calls",
        c.functions, c.path_runs, c.tail_moves
    );
    assert!(
        c.functions >= functions && c.path_runs >= runs,
        "{name}: too little compared"
    );
}

/// Lua on a small script: hundreds of functions, loops, calls through pointers, longjmp-based
/// errors.
#[test]
fn trace_paths_equal_path_mode_on_lua() {
    let script = repo().join("testdata/lua/small.lua");
    real_program(
        "lua",
        &lua_args(&["-O2"]),
        &[script.to_str().unwrap()],
        100,
        10_000,
    );
}

/// SQLite on the driver's smallest workload.
#[test]
fn trace_paths_equal_path_mode_on_sqlite() {
    real_program("sqlite", &sqlite_args(&[]), &["1"], 500, 10_000);
}

/// The text form and the function filter: `tally paths`' terms, hottest first.
#[test]
fn trace_paths_text_and_filter() {
    let src = repo().join("testdata/early/recursion.c");
    let dir = build_both("text", false, &single(&src, "-O1"), &[], 4);
    let (out, err, code) = tally_out(&[
        "trace".as_ref(),
        "--paths".as_ref(),
        "--limit".as_ref(),
        "3".as_ref(),
        dir.join("trace/prog.trace").as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("tally paths: "), "{text}");
    assert!(text.contains("Hottest paths:"), "{text}");
    // `--top`, as `tally paths` calls it, is the same option.
    let (top, err, code) = tally_out(&[
        "trace".as_ref(),
        "--paths".as_ref(),
        "--top".as_ref(),
        "3".as_ref(),
        dir.join("trace/prog.trace").as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(String::from_utf8(top).unwrap(), text);
    let (out, err, code) = tally_out(&[
        "trace".as_ref(),
        "--paths".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        "--function".as_ref(),
        "^main$".as_ref(),
        dir.join("trace/prog.trace").as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let doc: Value = serde_json::from_slice(&out).unwrap();
    let names: Vec<&str> = doc["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["main"]);
}
