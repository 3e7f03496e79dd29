//! Interprocedural path profiles (modes `ipath` and `ipath-piecewise`, Melski & Reps 1998): the
//! block and edge counts derived from the regenerated interprocedural paths must equal the
//! `edges-naive` oracle's on every function, on programs with direct calls between static
//! functions, recursion, calls through pointers, callbacks from libc and loops, at -O0 and
//! -O2 — and enough functions must really be profiled by paths (no counters) for the
//! comparison to mean something.

use crate::support::*;
use std::path::Path;

/// Builds `file` in `mode` and in edges-naive with `opt -g`, runs both, compares every count,
/// and returns the number of executed functions profiled by paths (no counters).
fn compare(file: &Path, opt: &str, mode: &'static str) -> usize {
    let name = file.file_name().unwrap().to_str().unwrap();
    let src = file.display().to_string();
    compare_args(name, opt, &[opt, "-g", &src], &[], mode)
}

/// [`compare`] for a build from `args`, run with `run_args`.
fn compare_args(
    name: &str,
    opt: &str,
    args: &[&str],
    run_args: &[&str],
    mode: &'static str,
) -> usize {
    compare_status(name, opt, args, run_args, mode, 0)
}

/// [`compare_args`] for a program that exits with `status`.
fn compare_status(
    name: &str,
    opt: &str,
    args: &[&str],
    run_args: &[&str],
    mode: &'static str,
    status: i32,
) -> usize {
    let cxx = args.iter().any(|a| a.ends_with(".cpp"));
    let dir = scratch(&format!("ipaths-{name}{opt}-{mode}"));
    let mut reports = Vec::new();
    let mut outputs = Vec::new();
    for v in [Variant::Tally(mode), Variant::Tally("edges-naive")] {
        let bin = dir.join(v.name());
        build(v, cxx, args, &bin, &dir);
        let prof = dir.join(format!("{}.prof", v.name()));
        let o = run(&bin, run_args, &dir, &prof);
        assert_eq!(
            o.status.code(),
            Some(status),
            "{name}{opt} {}: {o:?}",
            v.name()
        );
        outputs.push(o.stdout);
        reports.push(report_json(&prof));
    }
    assert_eq!(
        outputs[0], outputs[1],
        "{name}{opt}: {mode} changed the output"
    );
    let what = format!("{name}{opt}");
    if name == "calls.c" {
        // `tally paths` spells interprocedural paths out across functions.
        let o = std::process::Command::new(tally())
            .args(["paths", "--top", "0"])
            .arg(dir.join(format!("{mode}.prof")))
            .output()
            .expect("run tally paths");
        assert!(o.status.success(), "{what}: tally paths: {o:?}");
        let text = String::from_utf8_lossy(&o.stdout);
        for want in [
            "interprocedural paths executed",
            "\n        call\n",
            "\n        return\n",
        ] {
            assert!(
                text.contains(want),
                "{what}: tally paths lacks {want:?}:\n{text}"
            );
        }
        assert!(
            text.contains("leaf:b0 (") && text.contains("calls.c:"),
            "{what}:\n{text}"
        );
    }
    assert_same_counts(
        &what,
        mode,
        &reports[0],
        "edges-naive",
        &reports[1],
        Edges::All,
    );
    reports[0]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["counters"].as_u64() == Some(0) && f["entry_count"].as_u64() > Some(0))
        .count()
}

#[test]
fn ipath_counts_equal_edges_naive() {
    let calls = repo().join("testdata/ipath/calls.c");
    for mode in ["ipath", "ipath-piecewise"] {
        for opt in ["-O0", "-O2"] {
            // leaf, mid, fact, even, odd, cb, cmp (a qsort callback) are in the set.
            let n = compare(&calls, opt, mode);
            assert!(
                n >= 6,
                "calls.c{opt} {mode}: only {n} functions profiled by paths"
            );
        }
    }
}

#[test]
fn ipath_counts_equal_edges_naive_on_path_test_programs() {
    // The programs of paths.rs without early exits: shapes.c and manypaths.c.
    for file in ["shapes.c", "manypaths.c"] {
        let f = repo().join("testdata/shapes").join(file);
        for mode in ["ipath", "ipath-piecewise"] {
            for opt in ["-O0", "-O2"] {
                // At -O2 everything is inlined into main, which calls printf (it may end
                // early and has edge counters): only the counts are compared.
                let n = compare(&f, opt, mode);
                let want = usize::from(opt == "-O0");
                assert!(
                    n >= want,
                    "{file}{opt} {mode}: no function profiled by paths"
                );
            }
        }
    }
}

/// Frames abandoned by `exit`, `longjmp` and C++ exceptions (Melski & Reps 1998 §9.2):
/// testdata/ipath's early.c and throw.cpp and the early-termination programs of testdata/early,
/// whose functions are now in the set (before, a function that may end early kept edge counters).
#[test]
fn ipath_counts_equal_edges_naive_when_frames_are_abandoned() {
    let mut programs = vec![
        (repo().join("testdata/ipath/early.c"), 3),
        (repo().join("testdata/ipath/throw.cpp"), 0),
    ];
    programs.extend(early_programs());
    for (file, status) in &programs {
        let name = file.file_name().unwrap().to_str().unwrap();
        let src = file.display().to_string();
        for mode in ["ipath", "ipath-piecewise"] {
            for opt in ["-O0", "-O2"] {
                let n = compare_status(name, opt, &[opt, "-g", &src], &[], mode, *status);
                if name == "early.c" || name == "throw.cpp" {
                    assert!(
                        n >= 4,
                        "{name}{opt} {mode}: only {n} functions profiled by paths"
                    );
                }
            }
        }
    }
}

/// The builds [`compare_args`] makes of a program for both ipath modes.
const IPATH_AND_ORACLE: [Variant; 3] = [
    Variant::Tally("ipath"),
    Variant::Tally("ipath-piecewise"),
    Variant::Tally("edges-naive"),
];

#[test]
fn ipath_counts_equal_edges_naive_on_lua() {
    let args = lua_args(&["-O2"]);
    prebuild(&IPATH_AND_ORACLE, false, &args);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let script = repo().join("testdata/lua/small.lua");
    for mode in ["ipath", "ipath-piecewise"] {
        let n = compare_args("lua", "-O2", &args, &[script.to_str().unwrap()], mode);
        assert!(n >= 20, "lua {mode}: only {n} functions profiled by paths");
    }
}

/// SQLite (the amalgamation and the driver) on the driver's smallest workload: block and edge
/// counts derived from interprocedural paths equal `edges-naive`'s, as path mode's do in
/// `realcode` (the path counts themselves: `ipath_oracle`'s ignored SQLite test).
#[test]
fn ipath_counts_equal_edges_naive_on_sqlite() {
    let args = sqlite_args(&[]);
    prebuild(&IPATH_AND_ORACLE, false, &args);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    for mode in ["ipath", "ipath-piecewise"] {
        let n = compare_args("sqlite", "-O2", &args, &["1"], mode);
        assert!(
            n >= 100,
            "sqlite {mode}: only {n} functions profiled by paths"
        );
    }
}

/// The thread-local symbols of the interprocedural protocol that function `name`'s code
/// refers to, from `objdump -dr` of an object built with `-ffunction-sections`.
/// `objdump -dr` of `src` compiled by tally in `mode` at -O2 with one section per function.
fn object_dump(mode: &'static str, src: &str, dir: &Path) -> String {
    let obj = dir.join("groups.o");
    let args = ["-O2", "-g", "-c", "-ffunction-sections", src];
    build(Variant::Tally(mode), false, &args, &obj, dir);
    let o = std::process::Command::new("objdump")
        .arg("-dr")
        .arg(&obj)
        .output()
        .expect("run objdump");
    assert!(o.status.success(), "objdump: {o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn protocol_symbols(dump: &str, name: &str) -> Vec<String> {
    let head = format!("<{name}>:");
    let mut out = Vec::new();
    let mut inside = false;
    for l in dump.lines() {
        if l.ends_with(">:") {
            inside = l.ends_with(&head);
            continue;
        }
        if let Some(sym) = l.split_whitespace().last().filter(|_| inside) {
            let sym = sym.split(['-', '+']).next().unwrap();
            if sym.starts_with("__tally_ipath_") && !out.iter().any(|s| s == sym) {
                out.push(sym.to_string());
            }
        }
    }
    out.sort();
    out
}

/// testdata/ipath/groups.c: two groups of static functions linked by direct calls (a1 -> a2,
/// b1 -> b2, called directly by main) next to *isolated* functions, which make and receive no
/// direct call (through a pointer, qsort's callback, exported ones): they are always roots and
/// get path mode's code, with the same numbers (no handshake, no thread-local register or
/// `open`, no `__tally_ipath_ret`: only the handshake is cleared at their entry), and direct
/// callees that are never roots take the handshake without a name. The counts stay those of
/// the oracle, with loops, a setjmp re-entry, a longjmp and an `exit` in isolated functions.
#[test]
fn ipath_isolated_functions_have_path_mode_code_and_exact_counts() {
    let src = repo().join("testdata/ipath/groups.c");
    let s = src.to_str().unwrap();
    for mode in ["ipath", "ipath-piecewise"] {
        for opt in ["-O0", "-O2"] {
            let n = compare_status("groups.c", opt, &[opt, "-g", s], &[], mode, 3);
            assert!(n >= 8, "groups.c{opt} {mode}: only {n} functions by paths");
        }
        let dir = scratch(&format!("ipaths-groups-obj-{mode}"));
        let dump = object_dump(mode, s, &dir);
        let hand = vec!["__tally_ipath_hand_fn".to_string()];
        for f in [
            "iso_loop",
            "iso_static",
            "cmp",
            "fail",
            "iso_jump",
            "iso_end",
        ] {
            assert_eq!(protocol_symbols(&dump, f), hand, "{mode}: {f}\n{dump}");
        }
        // a2 and b2 are only called directly: they take an unnamed handshake and pass the
        // register back, no root's return; a1 and b1 call them and are called by main.
        for f in ["a2", "b2"] {
            let syms = protocol_symbols(&dump, f);
            assert!(
                !syms
                    .iter()
                    .any(|s| s == "__tally_ipath_hand_fn" || s == "__tally_ipath_ret"),
                "{mode}: {f}: {syms:?}"
            );
        }
        for f in ["a1", "b1", "main"] {
            let syms = protocol_symbols(&dump, f);
            assert!(
                ["__tally_ipath_hand_nvc", "__tally_ipath_reg"]
                    .iter()
                    .all(|want| syms.iter().any(|s| s == want)),
                "{mode}: {f}: {syms:?}"
            );
        }
    }
}

/// Array storage (docs/log/ipaths.md, "Overhead"): testdata/ipath/groups.c's isolated functions
/// (few paths, no direct call in or out) count their paths in the module's counter array, the
/// numbers `[first, first + len)` of their own root (and `GEntry`) edges, as path mode counts a
/// small function's paths; a1, a2, b1, b2 (never roots) in the set's hash table, main (a root
/// with direct callees) its own paths in its array and its callees' (in main's range) in the
/// table. The table holds none of the isolated functions' paths, the arrays hold what ran
/// (iso_loop's loop, the longjmp site of fail's frame, exit's site of iso_end's), and the
/// isolated functions' machine code calls no `__tally_path_count` (a1's, hashed, does). The derived counts
/// equal edges-naive's (the test above) and the path counts the cut trace's
/// (ipath_oracle.rs, groups.c), the arrays merged with the table.
/// A change that makes a module's metadata invalid (the function of the set given).
type Mutation = fn(&mut tally_format::ModuleMeta, usize);

#[test]
fn ipath_isolated_functions_count_in_the_counter_array() {
    let src = repo().join("testdata/ipath/groups.c");
    let s = src.to_str().unwrap();
    let isolated = [
        "iso_loop",
        "iso_static",
        "cmp",
        "fail",
        "iso_jump",
        "iso_end",
    ];
    for mode in ["ipath", "ipath-piecewise"] {
        let dir = scratch(&format!("ipaths-groups-array-{mode}"));
        let bin = dir.join("prog");
        build(Variant::Tally(mode), false, &["-O2", "-g", s], &bin, &dir);
        let prof = dir.join("prog.tally");
        let o = run(&bin, &[], &dir, &prof);
        assert_eq!(o.status.code(), Some(3), "{mode}: {o:?}");
        let p = tally_format::profile::Profile::read_file(&prof).unwrap();
        let m = &p.modules[0];
        let ip = m.meta.ipath().expect("groups.c has a set");
        let mut ranges = Vec::new();
        for f in &ip.functions {
            let fm = &m.meta.functions[f.function as usize];
            let name = fm.name.as_str();
            if isolated.contains(&name) {
                let a = f
                    .array
                    .unwrap_or_else(|| panic!("{mode}: {name} has no array"));
                assert!(a.len > 0 && fm.counters.is_empty(), "{mode}: {name}: {a:?}");
                let base = fm.counter_base.index();
                let ran: u64 = m.counters[base..base + a.len as usize].iter().sum();
                let runs = ip
                    .array_counts(&m.meta.functions, &m.counters)
                    .filter(|&(n, _)| (a.first..a.first + u64::from(a.len)).contains(&(n as u64)))
                    .map(|(_, c)| c)
                    .sum::<u64>();
                assert_eq!(ran, runs, "{mode}: {name}");
                if ["iso_loop", "fail", "iso_jump", "iso_end"].contains(&name) {
                    assert!(ran > 0, "{mode}: {name}'s array counted nothing");
                }
                ranges.push((u128::from(a.first), u128::from(a.first) + u128::from(a.len)));
            } else if ["a1", "a2", "b1", "b2"].contains(&name) {
                assert_eq!(f.array, None, "{mode}: {name} is never a root");
            } else if name == "main" {
                // A root with direct callees: its own code counts its paths in its array
                // (behind a range check), its callees a1, a2, b1, b2 count theirs (under
                // main's root, so in main's range) in the table; the reader adds both.
                let a = f
                    .array
                    .unwrap_or_else(|| panic!("{mode}: main has no array"));
                let base = fm.counter_base.index();
                let own: u64 = m.counters[base..base + a.len as usize].iter().sum();
                let range = a.first..a.first + u64::from(a.len);
                let in_table: u64 = m
                    .paths
                    .iter()
                    .filter(|e| e.function == ip.table_owner && range.contains(&e.path))
                    .map(|e| e.count)
                    .sum();
                assert!(own > 0 && in_table > 0, "{mode}: main {own} {in_table}");
            }
        }
        assert_eq!(ranges.len(), isolated.len(), "{mode}: isolated functions");
        // The metadata contract refuses arrays that cannot be read.
        tally_format::validate::validate(&m.meta).unwrap();
        let k = ip.functions.iter().position(|f| f.array.is_some()).unwrap();
        let bad: [(&str, Mutation); 4] = [
            ("past the counters", |m, k| {
                let len = m.num_counters + 1;
                let ip = m.ipath_mut().unwrap();
                ip.functions[k].array.as_mut().unwrap().len = len;
            }),
            ("beyond the paths", |m, k| {
                let ip = m.ipath_mut().unwrap();
                ip.functions[k].array.as_mut().unwrap().first = ip.total as u64;
            }),
            ("overlapping", |m, k| {
                // Another isolated function's array moved onto this one's.
                let ip = m.ipath().unwrap();
                let f = ip.functions[k].function as usize;
                let other = ip.functions.iter().skip(k + 1).find(|q| q.array.is_some());
                let j = other.unwrap().function as usize;
                m.functions[j].counter_base = m.functions[f].counter_base;
            }),
            ("a function with counters", |m, k| {
                let f = m.ipath().unwrap().functions[k].function as usize;
                m.functions[f]
                    .counters
                    .push(tally_format::Probe::Edge(tally_format::EdgeIdx(0)));
            }),
        ];
        for (what, mutate) in bad {
            let mut meta = m.meta.clone();
            mutate(&mut meta, k);
            let e = tally_format::validate::validate(&meta);
            assert!(e.is_err(), "{mode}: an array {what} is accepted");
        }
        let table: Vec<u128> = m
            .paths
            .iter()
            .filter(|e| e.function == ip.table_owner && e.count > 0)
            .map(|e| u128::from(e.path))
            .collect();
        assert!(
            !table.is_empty(),
            "{mode}: the linked functions count in the table"
        );
        for n in &table {
            assert!(
                !ranges.iter().any(|r| (r.0..r.1).contains(n)),
                "{mode}: path {n} of an array is in the table"
            );
        }
        // Machine code: no home-table probe or __tally_path_count in the isolated functions.
        let dump = object_dump(mode, s, &dir);
        let refs = |name: &str| -> Vec<String> {
            let head = format!("<{name}>:");
            let mut inside = false;
            let mut out = Vec::new();
            for l in dump.lines() {
                if l.ends_with(">:") {
                    inside = l.ends_with(&head);
                } else if inside && (l.contains("R_X86_64") || l.contains("call")) {
                    out.push(l.trim().to_string());
                }
            }
            out
        };
        for name in isolated {
            let r = refs(name);
            assert!(
                !r.iter().any(|l| l.contains("__tally_path_count")),
                "{mode}: {name} still probes the table: {r:?}"
            );
        }
        let a1 = refs("a1");
        assert!(
            a1.iter().any(|l| l.contains("__tally_path_count")),
            "{mode}: a1 should probe the table: {a1:?}"
        );
    }
}

/// Context cuts (docs/log/ipaths.md, "Context cuts"; `tally_graph::ipaths::storage`):
/// testdata/ipath/cuts.c's `drive` has more than 2^16 paths of its own and calls the static
/// looping `scan` directly; the instrumenter makes that call a summary edge (the metadata names
/// it, `IpathCall::context_cut`), so scan is an isolated root whose loop counts in its own
/// array (no table probe in its machine code) and `tally paths` shows the cut call as a summary
/// call of scan; `small -> walk` (a small root's loop) stays direct and its paths cross the
/// call. Derived counts equal edges-naive's. Without the cuts scan has no array (its
/// iterations are paths of drive's root range, hashed). The default rule cuts only hot
/// callees (`--tally-ipath-cuts=hot`, `tally_graph::ipaths::Heat`): drive's call of `rare`,
/// whose loop LLVM estimates cold, stays direct, and `all` cuts it; under a run's measured
/// weights (`--tally-weights`) scan's 4 iterations per call are too few and nothing is cut.
#[test]
fn ipath_context_cuts_put_callee_loops_in_arrays() {
    let src = repo().join("testdata/ipath/cuts.c");
    let s = src.to_str().unwrap();
    for mode in ["ipath", "ipath-piecewise"] {
        compare(&src, "-O2", mode);
        let dir = scratch(&format!("ipaths-cuts-{mode}"));
        let bin = dir.join("prog");
        build(Variant::Tally(mode), false, &["-O2", "-g", s], &bin, &dir);
        let prof = dir.join("prog.tally");
        let o = run(&bin, &[], &dir, &prof);
        assert_eq!(o.status.code(), Some(0), "{mode}: {o:?}");
        let p = tally_format::profile::Profile::read_file(&prof).unwrap();
        let m = &p.modules[0];
        let ip = m.meta.ipath().expect("cuts.c has a set");
        let name = |k: u32| {
            m.meta.functions[ip.functions[k as usize].function as usize]
                .name
                .as_str()
        };
        let k_of = |n: &str| {
            ip.functions
                .iter()
                .position(|f| m.meta.functions[f.function as usize].name == n)
                .unwrap()
        };
        let (drive, scan, small, rare) = (k_of("drive"), k_of("scan"), k_of("small"), k_of("rare"));
        let cut: Vec<_> = ip.functions[drive]
            .calls
            .iter()
            .filter_map(|c| c.context_cut)
            .collect();
        assert_eq!(cut, [scan as u32], "{mode}: drive's cut calls");
        let direct: Vec<_> = ip.functions[drive]
            .calls
            .iter()
            .filter_map(|c| c.callee)
            .collect();
        assert_eq!(
            direct,
            [rare as u32],
            "{mode}: drive's direct calls (rare is cold)"
        );
        for c in &ip.functions[small].calls {
            assert_eq!(c.context_cut, None, "{mode}: small's call was cut");
            assert_eq!(c.callee.map(name), Some("walk"), "{mode}: small -> walk");
        }
        let a = ip.functions[scan]
            .array
            .unwrap_or_else(|| panic!("{mode}: scan has no array"));
        let base = m.meta.functions[ip.functions[scan].function as usize]
            .counter_base
            .index();
        let ran: u64 = m.counters[base..base + a.len as usize].iter().sum();
        assert!(ran > 300, "{mode}: scan's array counted {ran}");
        tally_format::validate::validate(&m.meta).unwrap();
        let mut bad = m.meta.clone();
        let f = &mut bad.ipath_mut().unwrap().functions[drive];
        let c = f
            .calls
            .iter_mut()
            .find(|c| c.context_cut.is_some())
            .unwrap();
        c.context_cut = Some(u32::MAX);
        assert!(
            tally_format::validate::validate(&bad).is_err(),
            "{mode}: a context cut naming no function is accepted"
        );
        let dump = object_dump(mode, s, &dir);
        let mut inside = false;
        for l in dump.lines() {
            if l.ends_with(">:") {
                inside = l.ends_with("<scan>:");
            } else if inside {
                assert!(
                    !l.contains("__tally_path"),
                    "{mode}: scan probes the table: {l}"
                );
            }
        }
        let o = std::process::Command::new(tally())
            .args(["paths", "--top", "0"])
            .arg(&prof)
            .output()
            .expect("run tally paths");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{mode}: {o:?}");
        assert!(text.contains("(summary call of scan)"), "{mode}:\n{text}");
        let crossing = text.split(" runs  path ").any(|p| {
            let p = p.split("\n  ... ").next().unwrap_or(p);
            p.contains("small:b") && p.contains("walk:b") && p.contains("call (still pending)\n")
        });
        assert!(crossing, "{mode}: no path crosses small -> walk:\n{text}");

        // `--tally-ipath-cuts=off` keeps every context: drive calls scan directly, nothing is
        // cut, and the derived counts still equal the oracle's.
        let off = ["-O2", "-g", "--tally-ipath-cuts=off", s];
        compare_args("cuts-off.c", "-O2", &off, &[], mode);
        let bin = dir.join("prog-off");
        build(Variant::Tally(mode), false, &off, &bin, &dir);
        let prof = dir.join("prog-off.tally");
        let o = run(&bin, &[], &dir, &prof);
        assert_eq!(o.status.code(), Some(0), "{mode} cuts off: {o:?}");
        let p = tally_format::profile::Profile::read_file(&prof).unwrap();
        let ip = p.modules[0].meta.ipath().expect("cuts.c has a set");
        assert!(
            ip.functions
                .iter()
                .all(|f| f.calls.iter().all(|c| c.context_cut.is_none())),
            "{mode}: a call was cut with --tally-ipath-cuts=off"
        );
        assert!(
            ip.functions[drive]
                .calls
                .iter()
                .any(|c| c.callee == Some(scan as u32)),
            "{mode}: drive's call to scan is not direct with --tally-ipath-cuts=off"
        );

        // The metadata's context cuts of a build of cuts.c with `args` (by callee name).
        let cuts_of = |tag: &str, args: &[&str]| -> Vec<String> {
            compare_args(&format!("cuts-{tag}.c"), "-O2", args, &[], mode);
            let bin = dir.join(format!("prog-{tag}"));
            build(Variant::Tally(mode), false, args, &bin, &dir);
            let prof = dir.join(format!("prog-{tag}.tally"));
            let o = run(&bin, &[], &dir, &prof);
            assert_eq!(o.status.code(), Some(0), "{mode} {tag}: {o:?}");
            let p = tally_format::profile::Profile::read_file(&prof).unwrap();
            let m = &p.modules[0];
            let ip = m.meta.ipath().expect("cuts.c has a set");
            let mut cut: Vec<String> = ip
                .functions
                .iter()
                .flat_map(|f| f.calls.iter().filter_map(|c| c.context_cut))
                .map(|k| {
                    m.meta.functions[ip.functions[k as usize].function as usize]
                        .name
                        .clone()
                })
                .collect();
            cut.sort();
            cut
        };
        // `all` (the rule before heat): rare's cold loop is cut too.
        let all = cuts_of("all", &["-O2", "-g", "--tally-ipath-cuts=all", s]);
        assert_eq!(all, ["rare", "scan"], "{mode}: --tally-ipath-cuts=all");
        // Under a run's measured weights scan restarts 4 times per call (x % 9 iterations),
        // below the threshold: nothing is cut.
        let oracle = dir.join("oracle");
        build(
            Variant::Tally("edges-naive"),
            false,
            &["-O2", "-g", s],
            &oracle,
            &dir,
        );
        let weights = dir.join("oracle.tally");
        let o = run(&oracle, &[], &dir, &weights);
        assert_eq!(o.status.code(), Some(0), "{mode} oracle: {o:?}");
        let flag = format!("--tally-weights={}", weights.display());
        let measured = cuts_of("measured", &["-O2", "-g", &flag, s]);
        assert!(
            measured.is_empty(),
            "{mode}: cut under measured weights: {measured:?}"
        );
    }
}
