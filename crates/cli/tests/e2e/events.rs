//! Exact event counting with on-line queries (Ball 1994). `tally_events()` asked at many points
//! — in loops, recursion, libc callbacks (qsort), through function pointers, after longjmp back,
//! in an atexit handler after exit(); on entry to every Lua C API function; from SQLite's
//! progress handler deep inside its virtual machine — must answer in events mode exactly what
//! the events-naive oracle answers (every block adds its own events, in segments ending at its
//! calls: no spanning tree, no query increments). Totals and per-function / per-call-site
//! inclusive counts must agree too, for every event kind. TALLY_STOP_AT stops at the first
//! checked point whose exact count reaches N, the same point and count every run.

use crate::support::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn events_of(r: &Value) -> Vec<(String, String, Value)> {
    let mut v: Vec<_> = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["module"].as_str().unwrap().to_string(),
                f["name"].as_str().unwrap().to_string(),
                f["events"].clone(),
            )
        })
        .collect();
    v.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    v
}

/// Builds `args` in events and events-naive mode (with `extra` flags), runs both, and compares
/// outputs, totals and inclusive counts.
fn check(name: &str, args: &[String], run: &[&str], status: i32, extra: &[&str]) -> String {
    let dir = scratch(&format!("events-{name}"));
    let mut outs = Vec::new();
    let mut reports = Vec::new();
    let all: Vec<String> = extra
        .iter()
        .map(|s| s.to_string())
        .chain(args.to_vec())
        .collect();
    prebuild(
        &[Variant::Tally("events"), Variant::Tally("events-naive")],
        false,
        &all,
    );
    for mode in ["events", "events-naive"] {
        let vdir = dir.join(mode);
        std::fs::create_dir_all(&vdir).unwrap();
        let a: Vec<&str> = all.iter().map(String::as_str).collect();
        build(Variant::Tally(mode), false, &a, &vdir.join("prog"), &dir);
        let prof = vdir.join("prog.tally");
        let out = run_prog(&vdir, run, &prof);
        assert_eq!(
            out.status.code(),
            Some(status),
            "{name} {mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        outs.push(String::from_utf8_lossy(&out.stdout).into_owned());
        reports.push(report_json(&prof));
    }
    assert_eq!(
        outs[0], outs[1],
        "{name}: query answers differ between events and events-naive"
    );
    assert_eq!(
        reports[0]["total_events"], reports[1]["total_events"],
        "{name}: totals"
    );
    assert!(reports[0]["total_events"].as_u64().unwrap() > 0);
    let (a, b) = (events_of(&reports[0]), events_of(&reports[1]));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            x, y,
            "{name}: inclusive/exclusive/call-site events of {}",
            x.1
        );
    }
    outs.swap_remove(0)
}

fn run_prog(dir: &Path, args: &[&str], prof: &Path) -> std::process::Output {
    Command::new("./prog")
        .args(args)
        .current_dir(dir)
        .env("TALLY_PROFILE", prof)
        .output()
        .unwrap()
}

#[test]
fn queries_equal_the_oracle_for_every_event_kind() {
    let src = repo().join("testdata/events/queries.c");
    for kind in ["insns", "blocks", "calls", "mem"] {
        for opt in ["-O0", "-O2"] {
            let args = vec![opt.to_string(), "-g".into(), src.display().to_string()];
            let ev = format!("--tally-events={kind}");
            let out = check(&format!("queries-{kind}{opt}"), &args, &[], 0, &[&ev]);
            assert!(out.contains("after 736 queries"), "{out}");
            // exit() from a nested callee, queries in an atexit handler.
            let out = check(
                &format!("queries-exit-{kind}{opt}"),
                &args,
                &["x"],
                3,
                &[&ev],
            );
            assert!(out.contains("exit checksum"), "{out}");
        }
    }
}

#[test]
fn lua_api_probes_equal_the_oracle() {
    let probe = repo().join("testdata/lua/probe.h");
    let args = lua_args(&["-O2", "-DTALLY_PROBE", "-include", probe.to_str().unwrap()]);
    let script = repo().join("testdata/lua/workload.lua");
    let out = check("lua", &args, &[script.to_str().unwrap(), "1"], 0, &[]);
    let probes: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("probes "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("probe line");
    assert!(probes > 10_000, "{probes} probes");
}

#[test]
fn sqlite_progress_probes_equal_the_oracle() {
    let args = sqlite_args(&["-DTALLY_PROBE"]);
    let out = check("sqlite", &args, &["1"], 0, &[]);
    assert!(out.contains("probes "), "{out}");
}

/// Runs the events build of queries.c with TALLY_STOP_AT=n; returns (count, where) from the
/// runtime's message.
fn stop_at(bin: &Path, n: u64) -> (u64, String) {
    let out = Command::new(bin)
        .env("TALLY_STOP_AT", n.to_string())
        .env("TALLY_PROFILE", "off")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), None, "killed by SIGTRAP");
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("tally: TALLY_STOP_AT reached: "))
        .unwrap_or_else(|| panic!("no stop message: {err}"));
    let (count, rest) = line.split_once(" events at ").unwrap();
    (count.parse().unwrap(), rest.to_string())
}

/// Builds `testdata/events/<program>` in events mode and checks TALLY_STOP_AT=n for each n:
/// the stop comes at a count >= n (and below n + `within`), is repeatable, and is the first
/// checked point reaching n (asking for exactly that count stops at the same point, asking
/// for one more stops later).
fn check_stops(program: &str, limits: &[u64], within: u64) {
    check_stops_with(program, &[], limits, within);
}

/// [`check_stops`] with `extra` flags for the build.
fn check_stops_with(program: &str, extra: &[&str], limits: &[u64], within: u64) {
    let dir = scratch(&format!("events-stop-{program}"));
    let src = repo().join("testdata/events").join(program);
    let bin = dir.join("prog");
    let mut args = extra.to_vec();
    args.extend(["-O2", "-g", src.to_str().unwrap()]);
    build(Variant::Tally("events"), false, &args, &bin, &dir);
    for &n in limits {
        let (c, at) = stop_at(&bin, n);
        assert!(c >= n, "{program}: stopped at {c} < {n}");
        assert!(c < n + within, "{program}: stopped at {c}, far beyond {n}");
        assert_eq!(stop_at(&bin, n), (c, at.clone()), "repeatable");
        assert_eq!(
            stop_at(&bin, c),
            (c, at.clone()),
            "{program}: first point with count >= {n}"
        );
        let (c2, _) = stop_at(&bin, c + 1);
        assert!(c2 > c);
    }
}

#[test]
fn stop_at_stops_at_the_first_point_reaching_n() {
    check_stops("queries.c", &[1, 100, 2_000, 10_000, 20_000], 1_000);
}

#[test]
fn stop_at_beyond_the_early_arming() {
    // The runtime arms the countdown TALLY_EV_SLACK (2^24) events before N and decides
    // exactly at every checked point from there: limits around and far beyond it stop at the
    // first checked point whose exact count reaches N, as small ones do.
    let slack = tally_llvm::EV_SLACK as u64;
    check_stops(
        "spin.c",
        &[slack - 3, slack, slack + 1000, 2 * slack + 7, 40_000_000],
        100,
    );
}

#[test]
fn shapes_and_early_exits_equal_the_oracle() {
    // Computed gotos and shared indirect-branch targets (chords counted through predecessor
    // tags), irreducible loops, a latch that is only a branch, 2^12 paths, and frames ended by
    // exit(), longjmp and abort handlers: totals and per-function and per-call-site events
    // must equal events-naive's.
    let early = early_programs()
        .into_iter()
        .filter(|(f, _)| f.extension().is_some_and(|e| e == "c"));
    let shapes = ["shapes.c", "manypaths.c", "indirect.ll", "latch.ll"]
        .iter()
        .map(|f| (repo().join("testdata/shapes").join(f), 0));
    for (file, status) in shapes.chain(early) {
        for opt in ["-O0", "-O2"] {
            let name = format!("{}{opt}", file.file_name().unwrap().to_str().unwrap());
            let args = vec![opt.to_string(), "-g".into(), file.display().to_string()];
            check(&name, &args, &[], status, &[]);
        }
    }
}

/// Builds counted.c in events mode with `--tally-verbose` and `extra`; returns how many loops
/// were versioned (the "SESE counters" of the statistics line) and how many by trip counts.
fn versioned(extra: &[&str]) -> (u64, u64) {
    versioned_in("counted.c", extra)
}

/// [`versioned`] for `program` of testdata/events.
fn versioned_in(program: &str, extra: &[&str]) -> (u64, u64) {
    let dir = scratch(&format!("events-verbose-{program}"));
    let src = repo().join("testdata/events").join(program);
    let out = Command::new(tally())
        .args(["cc", "--tally-mode=events", "--tally-verbose"])
        .args(extra)
        .args(["-O2", "-g", "-c", src.to_str().unwrap(), "-o"])
        .arg(dir.join("prog.o"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let (n, rest) = err
        .split_once(" SESE counters (")
        .map(|(a, b)| (a.rsplit(' ').next().unwrap(), b))
        .unwrap_or_else(|| panic!("no statistics: {err}"));
    let trips = rest.split(' ').next().unwrap();
    (n.parse().unwrap(), trips.parse().unwrap())
}

#[test]
fn counted_loops_equal_the_oracle() {
    // Call-free counted loops run a copy without decrements that subtracts its activation's
    // events at its exits (modes/events/fast/): every query, total and inclusive count must
    // stay the oracle's, for every event kind, with affine variables and with trip counts,
    // when frames holding such loops are left by longjmp and by exit().
    let (n, _) = versioned(&[]);
    assert!(n >= 8, "{n} loops versioned");
    let (n, trips) = versioned(&["--tally-sese=trips"]);
    assert!(
        n >= 8 && trips >= 4,
        "{n} loops versioned, {trips} by trip counts"
    );
    assert_eq!(versioned(&["--tally-sese=off"]).0, 0);
    let src = repo().join("testdata/events/counted.c");
    for (sese, kinds) in [
        ("on", &["insns", "blocks", "calls", "mem"][..]),
        ("trips", &["insns", "mem"][..]),
    ] {
        for kind in kinds {
            for opt in ["-O0", "-O2"] {
                let args = vec![opt.to_string(), "-g".into(), src.display().to_string()];
                let ev = format!("--tally-events={kind}");
                let se = format!("--tally-sese={sese}");
                let name = format!("counted-{sese}-{kind}{opt}");
                let out = check(&name, &args, &[], 0, &[&ev, &se]);
                assert!(out.contains("done checksum"), "{out}");
                let out = check(&format!("{name}-exit"), &args, &["x"], 4, &[&ev, &se]);
                assert!(out.contains("exit checksum"), "{out}");
            }
        }
    }
}

#[test]
fn nested_loops_are_versioned_only_over_fixed_ranges() {
    // The nesting rule (modes/events/fast/, docs/log/sese.md "Tenth round"): an inner loop is
    // versioned when its exit compares values fixed before the enclosing loop runs
    // (counted.c's `nest_sweep`), not when its range moves from entry to entry
    // (`nest_resume`, whose `while (end < off)` resumes where the last entry stopped; the
    // vectorizer splits it in a vector body and a remainder, both refused).
    let dir = scratch("events-nesting");
    let src = repo().join("testdata/events/counted.c");
    let out = Command::new(tally())
        .env("TALLY_DEBUG_FAST", "1")
        .args(["cc", "--tally-mode=events", "-O2", "-g", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(dir.join("prog.o"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("versioned nest_sweep "), "{err}");
    assert!(!err.contains("versioned nest_resume "), "{err}");
    assert!(err.contains("refused Resumes"), "{err}");
    // A fixed range on a path the weights say is cold (`nest_cold`, zlib's window copy in
    // `inflate_fast`): refused, docs/log/sese.md "Eleventh round".
    assert!(!err.contains("versioned nest_cold "), "{err}");
    assert!(err.contains("refused Cold"), "{err}");
}

#[test]
fn branchy_loops_equal_the_oracle() {
    // Call-free loops with if/else, switch, `continue`, several exits, no induction variable,
    // inner loops of nests: their copies add the plan's chord increments to a register and
    // subtract the total at each exit (modes/events/fast/; `--tally-sese=all`, off by
    // default). More of them are versioned than with the one-cycle loops alone (`on`), and
    // every query, total and inclusive count stays the oracle's, also when a frame is left by
    // exit().
    let (all, _) = versioned_in("branchy.c", &["--tally-sese=all"]);
    let (cycles, _) = versioned_in("branchy.c", &[]);
    assert!(
        all >= cycles + 5,
        "{all} loops versioned, {cycles} with one cycle only"
    );
    assert_eq!(versioned_in("branchy.c", &["--tally-sese=off"]).0, 0);
    let src = repo().join("testdata/events/branchy.c");
    for kind in ["insns", "blocks", "calls", "mem"] {
        for opt in ["-O0", "-O2"] {
            let args = vec![opt.to_string(), "-g".into(), src.display().to_string()];
            let ev = format!("--tally-events={kind}");
            let name = format!("branchy-{kind}{opt}");
            let se = "--tally-sese=all";
            let out = check(&name, &args, &[], 0, &[&ev, se]);
            assert!(out.contains("done checksum"), "{out}");
            let out = check(&format!("{name}-exit"), &args, &["x"], 4, &[&ev, se]);
            assert!(out.contains("exit checksum"), "{out}");
        }
    }
}

#[test]
fn stop_at_inside_branchy_loops() {
    // With a stop pending the original loops run: stops inside loops with branches come at
    // the first checked point reaching N.
    check_stops_with(
        "branchy.c",
        &["--tally-sese=all"],
        &[5_000, 40_000, 123_456, 400_000, 1_000_000],
        40,
    );
}

#[test]
fn stop_at_inside_counted_loops() {
    // With a stop pending the original loops run, with their decrements and checks: the stop
    // comes at the first checked point reaching N even where N falls inside a versioned loop
    // (up() runs up to 4000 turns of about ten events; a stop at a loop's exit would be
    // thousands of events late).
    check_stops(
        "counted.c",
        &[5_000, 40_000, 123_456, 400_000, 1_000_000],
        40,
    );
}
