//! SESE counters (`--tally-sese=on`, the `edge-sese` variant; Frenot & Pereira 2024) next to frames
//! that end early: counted loops before an `exit()`, a `longjmp` and a C++ `throw` in the same
//! function (early exits derived from the tree or counted through a frame record, beside free
//! chords), loops whose callees may end the frame (refused), and steps that need the exact
//! division's shift and inverse in 8- to 64-bit variables. Every count must equal the
//! `edges-naive` oracle's, like every mode's (`check_program`).

use crate::support::*;
use std::path::Path;
use std::process::Command;

#[test]
fn counted_loops_before_exit_and_longjmp_o2_o0() {
    let src = repo().join("testdata/sese/exits.c");
    check_program(&src, 0, "-O2");
    check_program(&src, 0, "-O0");
}

#[test]
fn counted_loops_before_a_throw_o2() {
    check_program(&repo().join("testdata/sese/throws.cpp"), 0, "-O2");
}

/// The SESE choices compared with the oracle: the profitability test (`on`), every candidate
/// with an affine variable preferred (`all`), every candidate with a trip count preferred
/// (`trips`), in `edge` mode and in `vertex` mode (block counts, and the edges it determines).
const CHOICES: [Variant; 6] = [
    Variant::Tally("edge-sese"),
    Variant::Tally("edge-sese-all"),
    Variant::Tally("edge-sese-trips"),
    Variant::Tally("vertex-sese"),
    Variant::Tally("vertex-sese-all"),
    Variant::Tally("vertex-sese-trips"),
];

/// The SESE counters a `--tally-sese=<choice>` build of `src` uses, how many of them are trip
/// counts and how many affine variables only ScalarEvolution found (from `--tally-verbose`).
fn sese_used(src: &Path, opt: &str, choice: &str, dir: &Path) -> (usize, usize, usize) {
    sese_used_in("edge", src, opt, choice, dir)
}

/// [`sese_used`] in `mode`.
fn sese_used_in(
    mode: &str,
    src: &Path,
    opt: &str,
    choice: &str,
    dir: &Path,
) -> (usize, usize, usize) {
    let o = Command::new(tally())
        .args(["cc", "--tally-verbose"])
        .arg(format!("--tally-mode={mode}"))
        .arg(format!("--tally-sese={choice}"))
        .args([opt, "-g", "-c"])
        .arg(src)
        .arg("-o")
        .arg(dir.join(format!("used-{mode}-{choice}.o")))
        .current_dir(dir)
        .output()
        .expect("run tally cc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    let words: Vec<&str> = err.split_whitespace().collect();
    let at = words
        .windows(2)
        .position(|w| w == ["SESE", "counters"])
        .unwrap_or_else(|| panic!("no SESE statistics in:\n{err}"));
    let used = words[at - 1].parse().expect("a number of counters");
    let trips = words[at + 2]
        .trim_start_matches('(')
        .parse()
        .expect("a number of trip counts");
    let scev = words[at + 5].parse().expect("a number of variables");
    (used, trips, scev)
}

/// Each SESE choice's counts against `edges-naive`'s, blocks and edges, on `src` at `opt`;
/// the exit status and output must be the plain build's.
fn check_choices(src: &Path, status: i32, opt: &str) {
    let file = src.file_name().unwrap().to_str().unwrap();
    let stem = file.split('.').next().unwrap();
    let args = [opt.to_string(), "-g".into(), src.display().to_string()];
    let what = format!("{file} {opt}");
    check_choices_of(
        &what,
        &format!("choices-{stem}{opt}"),
        file.ends_with(".cpp"),
        &args,
        &[],
        status,
    );
}

/// [`check_choices`] for a program built with `args` and run with `run_args` (in its own
/// directory under `scratch(name)`).
fn check_choices_of(
    what: &str,
    name: &str,
    cxx: bool,
    args: &[String],
    run_args: &[&str],
    status: i32,
) {
    let dir = scratch(name);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut runs = Vec::new();
    for v in [Variant::Plain, Variant::Tally("edges-naive")]
        .into_iter()
        .chain(CHOICES)
    {
        let vdir = dir.join(v.name());
        std::fs::create_dir_all(&vdir).unwrap();
        build(v, cxx, &args, &vdir.join("prog"), &dir);
        let prof = vdir.join("prog.tally");
        let out = run(Path::new("./prog"), run_args, &vdir, &prof);
        assert_eq!(out.status.code(), Some(status), "{what} {}", v.name());
        let report = (v != Variant::Plain).then(|| report_json(&prof));
        runs.push((v.name(), out.stdout, report));
    }
    let naive = runs[1].2.as_ref().unwrap();
    for (name, stdout, report) in &runs[2..] {
        assert_eq!(stdout, &runs[0].1, "{what}: {name} output differs");
        let (nf, executed) = assert_same_counts(
            what,
            name,
            report.as_ref().unwrap(),
            "edges-naive",
            naive,
            if name.starts_with("vertex") {
                Edges::DeterminedInFirst
            } else {
                Edges::All
            },
        );
        assert!(nf >= 2 && executed >= 8, "{what}: too little compared");
    }
}

/// Trip-count counters (ScalarEvolution): at -O2 the `trips` build uses them (else this test
/// would test nothing), and every choice's counts equal the oracle's at -O2 and -O0, with loops
/// left zero, one and many times, before exit() and longjmp, and loops the frame may end
/// inside refused.
#[test]
fn trip_counts_equal_the_oracle_o2_o0() {
    let src = repo().join("testdata/sese/trips.c");
    let dir = scratch("trips-used");
    let (used, trips, _) = sese_used(&src, "-O2", "trips", &dir);
    assert!(
        trips >= 8 && used >= trips,
        "{used} SESE counters, {trips} trip counts"
    );
    let (_, none, _) = sese_used(&src, "-O2", "all", &dir);
    assert_eq!(none, 0, "`all` prefers affine variables");
    // Vertex mode uses them too (else its variants below would test nothing new).
    let (vused, vtrips, _) = sese_used_in("vertex", &src, "-O2", "trips", &dir);
    assert!(
        vtrips >= 8 && vused >= vtrips,
        "vertex: {vused} SESE counters, {vtrips} trip counts"
    );
    let (vused, vtrips, _) = sese_used_in("vertex", &src, "-O2", "all", &dir);
    assert!(vused >= 8 && vtrips == 0, "vertex: {vused} SESE counters");
    check_choices(&src, 0, "-O2");
    check_choices(&src, 0, "-O0");
}

/// The earlier programs with every choice, so trip counts meet exit(), longjmp and a throw.
#[test]
fn every_choice_before_exit_longjmp_and_throw() {
    check_choices(&repo().join("testdata/sese/exits.c"), 0, "-O2");
    check_choices(&repo().join("testdata/sese/throws.cpp"), 0, "-O2");
}

/// The loop shapes C does not give at -O2 (`testdata/shapes/sese.ll`: several entry values,
/// increments around a diamond, an i16 down-counter, a wrapping variable) with every choice:
/// the profitability test may refuse some of them under `on`, `all` and `trips` take all.
#[test]
fn every_choice_on_the_loop_shapes() {
    check_choices(&repo().join("testdata/shapes/sese.ll"), 0, "-O0");
}

/// Induction variables only ScalarEvolution finds (`testdata/sese/scev.ll`: a widened variable
/// whose back-edge value is a sign extension): the build uses one (else this tests nothing),
/// and every choice's counts equal the oracle's.
#[test]
fn scalar_evolution_variables_equal_the_oracle() {
    let src = repo().join("testdata/sese/scev.ll");
    let dir = scratch("scev-used");
    let (_, _, scev) = sese_used(&src, "-O0", "all", &dir);
    assert!(scev >= 1, "no variable found by ScalarEvolution");
    check_choices(&src, 0, "-O0");
}

/// Lua (the interpreter built from the registry's sources at -O2) with every choice: hundreds
/// of SESE counters, trip counts among them, against the oracle on the test workload.
#[test]
fn lua_with_every_choice_o2() {
    let script = repo().join("testdata/lua/workload.lua");
    check_choices_of(
        "lua -O2",
        "choices-lua-O2",
        false,
        &lua_args(&["-O2"]),
        &[script.to_str().unwrap(), "1"],
        0,
    );
}

/// Where `on` puts an affine counter (`CostModel::allows`, `testdata/sese/pressure.c`): of two
/// promoted sentinel loops, only the one under register pressure (`mix`) gets its variable;
/// `all` takes both. Before the rule, `on` used four variables here (every loop of the file).
/// Every choice's counts equal the oracle's.
#[test]
fn affine_counters_only_under_register_pressure_o2() {
    let src = repo().join("testdata/sese/pressure.c");
    let dir = scratch("pressure-used");
    let (used, trips, _) = sese_used(&src, "-O2", "on", &dir);
    assert_eq!(
        used - trips,
        1,
        "`on`: {used} counters, {trips} trip counts"
    );
    let (used, trips, _) = sese_used(&src, "-O2", "all", &dir);
    assert!(
        used - trips >= 2,
        "`all`: {used} counters, {trips} trip counts"
    );
    check_choices(&src, 0, "-O2");
}
