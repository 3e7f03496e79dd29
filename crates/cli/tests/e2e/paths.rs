//! Path profiles (Ball & Larus 1996) against an independent oracle: a full control-flow trace of
//! the same program (`--tally-mode=trace-naive`: every edge taken, per activation), cut into
//! acyclic paths at back edges, cut edges, early exits and re-entries and numbered by the sum of
//! `Val` along each path — no instrumentation increments involved. On small inputs every path count
//! of every function must equal the path profile's. (That the block and edge counts derived
//! from path profiles equal the edges-naive oracle is checked by the other end-to-end tests.)

use crate::support::*;
use std::collections::BTreeMap;
use std::path::Path;
use tally_format::profile::Profile;

/// Builds `args` in path and trace mode, runs both with `run_args`, and compares path counts.
fn check(name: &str, cxx: bool, args: &[String], run_args: &[&str], status: i32, min_paths: usize) {
    check_with(name, cxx, args, &[], run_args, status, min_paths);
}

/// Counts made in the counter slices of hashed functions (`tally_graph::paths::slices`).
fn slice_counts(prof: &Profile) -> u64 {
    let mut sum = 0;
    for m in &prof.modules {
        for f in &m.meta.functions {
            let hashed = f
                .paths()
                .is_some_and(|p| matches!(p.storage, tally_format::PathStorage::Hash { .. }));
            if hashed {
                let base = f.counter_base.index();
                sum += m.counters[base..base + f.counters.len()]
                    .iter()
                    .sum::<u64>();
            }
        }
    }
    sum
}

/// Narrow path ends of hashed functions counted in counter slices rather than the hash table
/// (`tally_graph::paths::slices`): `testdata/paths/cycles.c`'s `wide` (more than 1024 paths)
/// counts its loops' iterations there. Every path count equals the trace oracle's (a slice
/// base or a reader's mapping off by one moves counts to a neighbouring path), and the slices
/// did count; with `--tally-path-slices=off` none do.
#[test]
fn path_slices_equal_the_trace_oracle() {
    let file = repo().join("testdata/paths/cycles.c");
    for opt in ["-O0", "-O2"] {
        let name = format!("slices{opt}");
        let prof = check_with(&name, false, &single(&file, opt), &[], &[], 3, 20);
        let sliced = slice_counts(&prof);
        assert!(sliced >= 100, "{name}: only {sliced} counts in slices");
        // `--tally-path-slices=off`: every count in the hash table, the same counts.
        let name = format!("noslices{opt}");
        let flags = ["--tally-path-slices=off"];
        let prof = check_with(&name, false, &single(&file, opt), &flags, &[], 3, 20);
        assert_eq!(slice_counts(&prof), 0, "{name}: slices with slices off");
    }
}

/// [`check`] with `path_flags` added to the path build's command line; returns the path
/// build's profile.
fn check_with(
    name: &str,
    cxx: bool,
    args: &[String],
    path_flags: &[&str],
    run_args: &[&str],
    status: i32,
    min_paths: usize,
) -> Profile {
    let dir = scratch(&format!("paths-{name}"));
    let mut outs = Vec::new();
    for mode in ["path", "trace-naive"] {
        let vdir = dir.join(mode);
        std::fs::create_dir_all(&vdir).unwrap();
        let flags = if mode == "path" { path_flags } else { &[] };
        let a: Vec<&str> = flags
            .iter()
            .copied()
            .chain(args.iter().map(String::as_str))
            .collect();
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
    let path_prof = Profile::read_file(dir.join("path/prog.tally")).unwrap();
    let trace_prof = Profile::read_file(dir.join("trace-naive/prog.tally")).unwrap();
    let trace_bytes = std::fs::read(dir.join("trace-naive/prog.trace")).unwrap();
    let trace = tally_format::trace::read_trace(&trace_bytes).unwrap();
    let oracle = tally_report::trace_naive::path_counts_from_trace(&trace, &trace_prof, &path_prof)
        .unwrap_or_else(|e| panic!("{name}: {e}"));

    // `tally paths` names the program that wrote the profile, in text and JSON.
    let shown = std::process::Command::new(tally())
        .args(["paths", "--top", "1"])
        .arg(dir.join("path/prog.tally"))
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("program: ") && l.contains("/path/prog")),
        "{name}: no program line in\n{shown}"
    );
    let json = std::process::Command::new(tally())
        .args(["paths", "--format", "json"])
        .arg(dir.join("path/prog.tally"))
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        json["program"]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("/path/prog")),
        "{name}: {}",
        json["program"]
    );

    let report = tally_report::analyze(&path_prof, &tally_report::Inputs::default()).unwrap();
    let mut profiled: BTreeMap<(String, String, u64), BTreeMap<u128, u64>> = BTreeMap::new();
    for f in &report.functions {
        if let Some(p) = &f.paths {
            let counts: BTreeMap<u128, u64> = p.counts.iter().copied().collect();
            if !counts.is_empty() {
                profiled.insert((f.module.clone(), f.name.clone(), f.cfg_hash), counts);
            }
        }
    }
    let oracle: BTreeMap<_, _> = oracle.into_iter().filter(|(_, v)| !v.is_empty()).collect();
    let keys: Vec<_> = profiled.keys().map(|k| &k.1).collect();
    let okeys: Vec<_> = oracle.keys().map(|k| &k.1).collect();
    assert_eq!(keys, okeys, "{name}: functions with executed paths differ");
    let mut paths = 0;
    for (k, want) in &oracle {
        assert_eq!(&profiled[k], want, "{name}: path counts of {}", k.1);
        paths += want.len();
    }
    eprintln!(
        "{name}: {} functions, {paths} executed paths equal",
        oracle.len()
    );
    assert!(paths >= min_paths, "{name}: too little compared");
    path_prof
}

fn single(file: &Path, opt: &str) -> Vec<String> {
    vec![opt.into(), "-g".into(), file.display().to_string()]
}

#[test]
fn path_profiles_equal_the_trace_oracle_on_test_programs() {
    let early = early_and_shapes();
    for (file, status) in &early {
        for opt in ["-O0", "-O2"] {
            let name = format!("{}{opt}", file.file_name().unwrap().to_str().unwrap());
            let cxx = file.extension().is_some_and(|e| e == "cpp");
            // indirect.ll's interpreter falls back to edge counters (path code would have to
            // sit on indirect-branch edges); only its main has a path profile. At -O2 latch.ll
            // folds to a constant; its shape is tested at -O0.
            let min = if name.starts_with("indirect") || name.starts_with("latch") {
                1
            } else {
                5
            };
            check(&name, cxx, &single(file, opt), &[], *status, min);
        }
    }
}

#[test]
fn path_profiles_equal_the_trace_oracle_on_lua() {
    let args = lua_args(&["-O2"]);
    let script = repo().join("testdata/lua/small.lua");
    check("lua", false, &args, &[script.to_str().unwrap()], 0, 100);
}

/// Single-cycle loops counted at their exits (`--tally-path-cycles`, `tally_graph::paths::
/// cycles`): `testdata/paths/cycles.c` (loops run 0, 1 and many times, left from the middle,
/// followed by `exit()` and `longjmp`, in a hashed function and in array ones) with `on`
/// (hashed functions only) and `all` (every function), and the test programs and Lua with
/// `all`: every path count equals the trace oracle's.
#[test]
fn path_cycles_equal_the_trace_oracle() {
    let file = repo().join("testdata/paths/cycles.c");
    for opt in ["-O0", "-O2"] {
        for how in ["on", "all"] {
            let flags = [format!("--tally-path-cycles={how}")];
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            let name = format!("cycles-{how}{opt}");
            check_with(&name, false, &single(&file, opt), &flags, &[], 3, 20);
        }
    }
    for (file, status) in &early_and_shapes() {
        let name = format!("cycles-{}", file.file_name().unwrap().to_str().unwrap());
        let cxx = file.extension().is_some_and(|e| e == "cpp");
        let flags = ["--tally-path-cycles=all"];
        check_with(&name, cxx, &single(file, "-O2"), &flags, &[], *status, 1);
    }
    let args = lua_args(&["-O2"]);
    let script = repo().join("testdata/lua/small.lua");
    let flags = ["--tally-path-cycles=all"];
    check_with(
        "cycles-lua",
        false,
        &args,
        &flags,
        &[script.to_str().unwrap()],
        0,
        100,
    );
}

/// `tally paths` names every block of each path it lists: a path of N blocks shows N block
/// names, consecutive blocks on one source line sharing a row (the demo at -O2 has several:
/// `n19,n20` on line 147), each line quoted once.
#[test]
fn listed_paths_name_every_block() {
    let dir = scratch("paths-rows");
    let demo = repo().join("testdata/demo");
    build(
        Variant::Tally("path"),
        false,
        &["-O2", "-g", &demo.join("wordfreq.c").display().to_string()],
        &dir.join("wf"),
        &dir,
    );
    let prof = dir.join("wf.tally");
    let o = run(
        &dir.join("wf"),
        &[&demo.join("input.txt").display().to_string()],
        &dir,
        &prof,
    );
    assert!(o.status.success(), "{o:?}");
    let out = std::process::Command::new(tally())
        .args(["paths", "--top", "0"])
        .arg(&prof)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let (mut paths, mut shared) = (0, 0);
    let mut want: Option<usize> = None;
    let mut named = 0;
    let check = |want: Option<usize>, named: usize| {
        if let Some(n) = want {
            assert_eq!(named, n, "{text}");
        }
    };
    for l in text.lines() {
        if let Some(i) = l.find(" blocks  ") {
            check(want, named);
            let n = l[..i].rsplit(' ').next().unwrap().parse::<usize>().unwrap();
            want = Some(n);
            named = 0;
            paths += 1;
        } else if want.is_some() && l.starts_with("          n") {
            let ids = l.trim_start().split(' ').next().unwrap();
            let k = ids.split(',').filter(|b| b.starts_with('n')).count();
            shared += usize::from(k > 1);
            named += k;
        } else {
            check(want, named);
            want = None;
        }
    }
    check(want, named);
    assert!(paths >= 20, "{paths} paths: {text}");
    assert!(shared > 0, "no row of blocks sharing a line: {text}");
}
