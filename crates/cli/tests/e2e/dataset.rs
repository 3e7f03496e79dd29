//! `tally export` (docs/dataset.md): the Parquet dataset of many runs, read by DuckDB (the
//! PyPI package that `scripts/setup.sh` installs in `target/pyenv`), must give exactly the
//! counts `tally merge` + `tally report --format json --lines` give for the same profiles
//! (`dataset_check.py` compares every block, edge, entry, line and path count and the answers
//! of the document's questions): on the demo program in every counting mode, all in one dataset
//! of several builds, and on SQLite. Exporting a profile again adds nothing; a corrupt or
//! foreign file among the inputs is named in one line and the rest is exported.

use crate::support::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The Python that has DuckDB (made by `scripts/setup.sh`).
fn python() -> PathBuf {
    let p = repo().join("target/pyenv/bin/python3");
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup.sh (it installs DuckDB from PyPI for these tests)",
        p.display()
    );
    p
}

/// `tally ARGS` in `dir`.
fn tally_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(tally())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Merges `profiles`, reports on the sum, and runs `dataset_check.py` on the build of
/// `program` in `dataset`, which must hold exactly those runs with `labels`; returns the
/// checker's line.
fn check(dataset: &Path, program: &Path, profiles: &[PathBuf], labels: &str) -> String {
    let dir = dataset.parent().unwrap();
    let stem = program.file_name().unwrap().to_str().unwrap();
    let merged = dir.join(format!("{stem}.merged.tally"));
    let mut args = vec![
        "merge".to_string(),
        "-o".into(),
        merged.display().to_string(),
    ];
    args.extend(profiles.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    tally_ok(dir, &args);
    let json = dir.join(format!("{stem}.json"));
    let out = tally_ok(
        dir,
        &[
            "report",
            "--format",
            "json",
            "--lines",
            merged.to_str().unwrap(),
        ],
    );
    std::fs::write(&json, out).unwrap();
    let mut paths = Vec::new();
    if ["path", "ipath", "ipath-piecewise"].contains(&report_mode(&json).as_str()) {
        let p = dir.join(format!("{stem}.paths.json"));
        let out = tally_ok(
            dir,
            &["paths", "--format", "json", merged.to_str().unwrap()],
        );
        std::fs::write(&p, out).unwrap();
        paths.push(p);
    }
    let o = Command::new(python())
        .arg(repo().join("crates/cli/tests/e2e/dataset_check.py"))
        .arg(dataset)
        .arg(program.canonicalize().unwrap())
        .arg(profiles.len().to_string())
        .arg(&json)
        .arg(labels)
        .args(&paths)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{}: the dataset differs from tally merge + report:\n{said}{}",
        program.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    // The build read back as a profile is the merged profile, byte for byte, and reports the
    // same (`tally report` on the dataset is `tally merge` + `report`).
    let key = said
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches(':');
    let build = dataset.join("runs").join(format!("build={key}"));
    let back = dir.join(format!("{stem}.back.tally"));
    tally_ok(
        dir,
        &[
            "merge",
            "-o",
            back.to_str().unwrap(),
            build.to_str().unwrap(),
        ],
    );
    assert!(
        std::fs::read(&back).unwrap() == std::fs::read(&merged).unwrap(),
        "{}: the dataset's build {key} read back is not the merged profile",
        program.display()
    );
    let without_name = |p: &Path| {
        let out = tally_ok(
            dir,
            &["report", "--format", "json", "--lines", p.to_str().unwrap()],
        );
        let mut v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        v.as_object_mut().unwrap().remove("profile");
        v
    };
    assert_eq!(without_name(&build), without_name(&merged));
    said.trim().to_string()
}

/// The one mode of a report.
fn report_mode(json: &Path) -> String {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    v["modes"][0].as_str().unwrap_or_default().to_string()
}

/// Runs the demo program `bin` on `input` (its standard input), profile to `profile`.
fn run_demo(bin: &Path, input: &Path, profile: &Path) {
    let o = Command::new(bin)
        .stdin(std::fs::File::open(input).unwrap())
        .stdout(Stdio::null())
        .env("TALLY_PROFILE", profile)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}: {o:?}", bin.display());
}

#[test]
fn the_dataset_gives_merges_counts_in_every_counting_mode() {
    let dir = scratch("dataset-modes");
    let src = repo().join("testdata/demo/wordfreq.c");
    let inputs = demo_inputs(&dir);
    let mut all = Vec::new();
    let mut programs = Vec::new();
    for mode in COUNTING {
        let bin = dir.join(format!("wordfreq-{mode}"));
        build(
            Variant::Tally(mode),
            false,
            &["-O2", "-g", src.to_str().unwrap()],
            &bin,
            &dir,
        );
        let mut profiles = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let p = dir.join(format!("{mode}-{i}.tally"));
            run_demo(&bin, input, &p);
            profiles.push(p);
        }
        all.extend(profiles.iter().map(|p| p.display().to_string()));
        programs.push((bin, profiles));
    }
    let dataset = dir.join("ds");
    let mut args = vec![
        "export",
        "-o",
        "ds",
        "--label",
        "suite=demo",
        "--label",
        "shard=1",
    ];
    args.extend(all.iter().map(String::as_str));
    let o = tally_in(&dir, &args);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "ds: 18 run(s) exported, 0 already there; 9 new build(s), 9 part(s) written\n"
    );
    for (bin, profiles) in &programs {
        let said = check(&dataset, bin, profiles, "shard=1,suite=demo");
        eprintln!("{}: {said}", bin.display());
    }
    // A dataset of several builds names the one to read.
    let o = tally_in(&dir, &["report", "ds"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.lines().count() == 1
            && err.contains("ds holds 9 builds; name one as ds/runs/build=KEY"),
        "{err}"
    );
}

/// What a dataset holds: every file with its size and modification time.
fn listing(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                todo.push(e.path());
            } else {
                out.push((e.path(), m.len(), m.modified().unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The demo program built in `edge` mode as `dir/wordfreq`.
fn edge_demo(dir: &Path) -> PathBuf {
    let src = repo().join("testdata/demo/wordfreq.c");
    let bin = dir.join("wordfreq");
    build(
        Variant::Tally("edge"),
        false,
        &["-O2", "-g", src.to_str().unwrap()],
        &bin,
        dir,
    );
    bin
}

/// The demo built in `edge` mode and run `n` times: `dir/r0.tally`, ...
fn demo_runs(dir: &Path, n: usize) -> (PathBuf, Vec<PathBuf>) {
    let bin = edge_demo(dir);
    let input = repo().join("testdata/demo/input.txt");
    let runs: Vec<PathBuf> = (0..n).map(|i| dir.join(format!("r{i}.tally"))).collect();
    for r in &runs {
        run_demo(&bin, &input, r);
    }
    (bin, runs)
}

/// `tally show`, `diff` and `html` take a build of the dataset where a merged profile would do,
/// and say of it what they say of the merged profile of the same runs (the HTML site names its
/// input in its title, nothing else differs).
#[test]
fn show_diff_and_html_read_a_build_of_the_dataset() {
    let dir = scratch("dataset-views");
    let (_, runs) = demo_runs(&dir, 3);
    let names: Vec<&str> = runs.iter().map(|r| r.to_str().unwrap()).collect();
    let o = tally_in(&dir, &[&["export", "-o", "ds"], &names[..]].concat());
    assert!(o.status.success(), "{o:?}");
    tally_ok(&dir, &[&["merge", "-o", "m.tally"], &names[..]].concat());
    let builds: Vec<PathBuf> = std::fs::read_dir(dir.join("ds/runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(builds.len(), 1, "{builds:?}");
    let build = builds[0].strip_prefix(&dir).unwrap().to_str().unwrap();
    assert_eq!(
        tally_ok(&dir, &["show", build]),
        tally_ok(&dir, &["show", "m.tally"]),
        "tally show of the build is not that of the merged profile"
    );
    let said = String::from_utf8(tally_ok(&dir, &["diff", "m.tally", build])).unwrap();
    assert!(said.contains("every count the same"), "{said}");
    // One run is not the three: the comparison can fail.
    let o = tally_in(&dir, &["diff", names[0], build]);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(!said.contains("every count the same"), "{said}");
    tally_ok(&dir, &["html", "--output", "h-merged", "m.tally"]);
    tally_ok(&dir, &["html", "--output", "h-build", build]);
    let (a, b) = (
        listing(&dir.join("h-merged")),
        listing(&dir.join("h-build")),
    );
    assert_eq!(a.len(), b.len(), "the two sites have other files");
    assert!(a.len() > 1, "{a:?}");
    for ((fa, _, _), (fb, _, _)) in a.iter().zip(&b) {
        assert_eq!(fa.file_name(), fb.file_name());
        let (ta, tb) = (
            std::fs::read_to_string(fa).unwrap(),
            std::fs::read_to_string(fb).unwrap(),
        );
        assert_eq!(
            ta.replace("tally: m.tally<", &format!("tally: {build}<")),
            tb,
            "{} differs",
            fa.display()
        );
    }
}

/// The `blocks` table gives each block's inline stack: at -O2 the demo's `hash_word` and
/// `is_word_char` are inlined into their callers, and the stacks name them with the lines of
/// their calls in the source (found here by reading the source).
#[test]
fn blocks_carry_their_inline_stacks() {
    let dir = scratch("dataset-inline");
    let (_, runs) = demo_runs(&dir, 1);
    let o = tally_in(&dir, &["export", "-o", "ds", runs[0].to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    let src = std::fs::read_to_string(repo().join("testdata/demo/wordfreq.c")).unwrap();
    let calls = |name: &str| -> Vec<u32> {
        let call = format!("{name}(");
        src.lines()
            .enumerate()
            .filter(|(_, l)| l.contains(&call) && !l.starts_with("static "))
            .map(|(i, _)| i as u32 + 1)
            .collect()
    };
    let q = r#"
import duckdb, json, sys
rows = duckdb.connect().execute(
    "SELECT inlined, inlined_at, inlined_at_file FROM read_parquet(?)",
    [sys.argv[1] + "/blocks/*/*.parquet"]).fetchall()
print(json.dumps(rows))
"#;
    let o = Command::new(python())
        .args(["-c", q, dir.join("ds").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let rows: Vec<(Vec<String>, Vec<u32>, Vec<String>)> =
        serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        rows.iter().any(|r| r.0.is_empty()),
        "blocks of their own code"
    );
    for name in ["hash_word", "is_word_char"] {
        let lines = calls(name);
        assert!(!lines.is_empty(), "{name} is called in the source");
        let mut seen = 0;
        for (names, at, files) in &rows {
            assert_eq!((names.len(), at.len()), (files.len(), files.len()));
            for (i, n) in names.iter().enumerate() {
                if n == name {
                    assert!(
                        lines.contains(&at[i]),
                        "{name} inlined at {}: {lines:?}",
                        at[i]
                    );
                    assert!(files[i].ends_with("wordfreq.c"), "{}", files[i]);
                    seen += 1;
                }
            }
        }
        assert!(seen > 0, "no block inlined from {name}: {rows:?}");
    }
}

/// A build made with `--tally-oracle` keeps its same-run oracle modules in the dataset: the
/// build read back is the merged profile byte for byte, oracle counters included, and `tally
/// check` on it says what it says on the runs' profiles.
#[test]
fn an_oracle_build_is_checked_from_the_dataset() {
    let dir = scratch("dataset-oracle");
    let src = repo().join("testdata/demo/wordfreq.c");
    let bin = dir.join("wordfreq");
    build(
        Variant::Tally("edge"),
        false,
        &["--tally-oracle", "-O2", "-g", src.to_str().unwrap()],
        &bin,
        &dir,
    );
    let input = repo().join("testdata/demo/input.txt");
    for i in 0..2 {
        run_demo(&bin, &input, &dir.join(format!("r{i}.tally")));
    }
    tally_ok(&dir, &["export", "-o", "ds", "r0.tally", "r1.tally"]);
    tally_ok(&dir, &["merge", "-o", "runs.tally", "r0.tally", "r1.tally"]);
    tally_ok(&dir, &["merge", "-o", "back.tally", "ds"]);
    let same = std::fs::read(dir.join("runs.tally")).unwrap()
        == std::fs::read(dir.join("back.tally")).unwrap();
    assert!(same, "the build read back is not the merged profile");
    let on_runs = tally_in(&dir, &["check", "r0.tally", "r1.tally"]);
    let on_dataset = tally_in(&dir, &["check", "ds"]);
    assert!(on_runs.status.success(), "{on_runs:?}");
    assert!(on_dataset.status.success(), "{on_dataset:?}");
    let said = |o: &Output| {
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        // "NAME: N functions compared ...": the same but for the name of the input.
        out.split_once(": ")
            .map(|(_, rest)| rest.to_string())
            .unwrap_or(out)
    };
    assert_eq!(said(&on_runs), said(&on_dataset));
    assert!(
        said(&on_dataset).contains(" 0 differ"),
        "{}",
        said(&on_dataset)
    );
}

/// The parts of a long-running process (snapshots, `runs.delta`) are runs of their own whose
/// counts DuckDB adds up exactly as `tally merge` + `report` do (early exits, changes in
/// waiting frames, have no rows in either), and the build read back is their merged profile.
#[test]
fn snapshot_parts_export_exactly() {
    let dir = scratch("dataset-snapshots");
    let src = repo().join("testdata/threads/server.c");
    let bin = dir.join("server");
    build(
        Variant::Tally("edge"),
        false,
        &["-O2", "-g", "-pthread", src.to_str().unwrap()],
        &bin,
        &dir,
    );
    let o = Command::new(&bin)
        .arg("3")
        .current_dir(&dir)
        .env("TALLY_PROFILE", dir.join("srv.tally"))
        .env("TALLY_SNAPSHOT_SIGNAL", "WINCH")
        .env("AWAIT_PARTS", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let parts: Vec<PathBuf> = ["srv.s1.tally", "srv.s2.tally", "srv.s3.tally", "srv.tally"]
        .iter()
        .map(|f| dir.join(f))
        .collect();
    let mut args = vec!["export", "-o", "ds"];
    args.extend(parts.iter().map(|p| p.to_str().unwrap()));
    tally_ok(&dir, &args);
    let said = check(&dir.join("ds"), &bin, &parts, "");
    eprintln!("{said}");
}

/// The `runs` table says when and where each run was, how it ended, and its labels: those of
/// `TALLY_LABELS` at run time and `--label` at export (which wins for a key in both).
#[test]
fn runs_say_when_where_how_and_their_labels() {
    let dir = scratch("dataset-runs");
    let bin = edge_demo(&dir);
    let input = repo().join("testdata/demo/input.txt");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    for (i, labels) in ["test=t1,shard=2", ""].iter().enumerate() {
        let o = Command::new(&bin)
            .stdin(std::fs::File::open(&input).unwrap())
            .stdout(Stdio::null())
            .env("TALLY_PROFILE", dir.join(format!("r{i}.tally")))
            .env("TALLY_LABELS", labels)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    let o = tally_in(
        &dir,
        &[
            "export", "-o", "ds", "--label", "shard=9", "r0.tally", "r1.tally",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let q = "import duckdb, sys; print(duckdb.connect().execute(\"SELECT source, exit_status, host, \
             map_entries(labels), start_ns >= ? AND start_ns <= end_ns FROM read_parquet(?, \
             hive_partitioning = true) ORDER BY source\", [int(sys.argv[1]), sys.argv[2]]).fetchall())";
    let o = Command::new(python())
        .args(["-c", q, &before.to_string(), "ds/runs/*/*.parquet"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!(
            "[('r0.tally', 0, '{host}', [{{'key': 'shard', 'value': '9'}}, {{'key': 'test', 'value': 't1'}}], True), \
             ('r1.tally', 0, '{host}', [{{'key': 'shard', 'value': '9'}}], True)]"
        )
    );
}

#[test]
fn exporting_again_adds_nothing_and_bad_inputs_are_named() {
    let dir = scratch("dataset-again");
    let (bin, runs) = demo_runs(&dir, 3);
    let o = tally_in(&dir, &["export", "-o", "ds", "r0.tally", "r1.tally"]);
    assert!(o.status.success(), "{o:?}");
    let before = listing(&dir.join("ds"));
    // The same profiles again (one of them twice): nothing is added, no file is touched.
    let o = tally_in(
        &dir,
        &["export", "-o", "ds", "r0.tally", "r1.tally", "r1.tally"],
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "ds: 0 run(s) exported, 3 already there; 0 new build(s), 0 part(s) written\n"
    );
    assert_eq!(before, listing(&dir.join("ds")));
    // An output that is not a directory is refused before anything is read.
    std::fs::write(dir.join("afile"), "x").unwrap();
    let o = tally_in(&dir, &["export", "-o", "afile", "r0.tally"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "tally: error: afile: not a directory\n"
    );
    // A truncated profile and a file that is no profile, among new and known ones.
    let bytes = std::fs::read(&runs[2]).unwrap();
    std::fs::write(dir.join("cut.tally"), &bytes[..bytes.len() / 2]).unwrap();
    std::fs::write(dir.join("notes.tally"), "not a profile\n").unwrap();
    let o = tally_in(
        &dir,
        &[
            "export",
            "-o",
            "ds",
            "cut.tally",
            "r0.tally",
            "notes.tally",
            "r2.tally",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[0].starts_with("tally: skipping cut.tally: "), "{err}");
    assert!(
        lines[1].starts_with("tally: skipping notes.tally: "),
        "{err}"
    );
    assert_eq!(
        lines[2],
        "tally: 2 of 4 profile(s) could not be exported (listed above); the rest is exported"
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "ds: 1 run(s) exported, 1 already there; 0 new build(s), 1 part(s) written\n"
    );
    let said = check(&dir.join("ds"), &bin, &runs, "");
    // A part's counters without its `runs` file (an export killed in between) count no run
    // when the build is read back.
    let key = said
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches(':');
    let counters = dir.join("ds/counters").join(format!("build={key}"));
    let part = std::fs::read_dir(&counters)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::copy(&part, counters.join("part-orphan.parquet")).unwrap();
    check(&dir.join("ds"), &bin, &runs, "");
    // A dataset written with another schema is refused in one line, before anything is read:
    // its parts and the new ones would not read as one table.
    let build = dir
        .join("ds/builds")
        .join(format!("build={key}/build.parquet"));
    let o = Command::new(python())
        .arg("-c")
        .arg(
            "import duckdb, sys; duckdb.sql(f\"COPY (SELECT * REPLACE (4::UINTEGER AS schema) \
             FROM read_parquet('{sys.argv[1]}')) TO '{sys.argv[1]}.old' (FORMAT parquet)\")",
        )
        .arg(&build)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    std::fs::rename(build.with_extension("parquet.old"), &build).unwrap();
    let before = listing(&dir.join("ds"));
    let o = tally_in(&dir, &["export", "-o", "ds", "cut.tally", "r0.tally"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "tally: error: ds: build {key} was exported with dataset schema 4, \
             this tally writes schema 5: export into a new directory\n"
        )
    );
    assert_eq!(before, listing(&dir.join("ds")));
}

/// A part that cannot be written (written by a thread of its own while the next runs are
/// analysed) stops the export with one line and exit status 2; its runs are not in the
/// dataset, and exporting the same profiles again, once the cause is gone, adds them.
#[test]
fn a_part_that_cannot_be_written_stops_the_export() {
    let dir = scratch("dataset-unwritable");
    let (bin, runs) = demo_runs(&dir, 3);
    let o = tally_in(&dir, &["export", "-o", "ds", "r0.tally"]);
    assert!(o.status.success(), "{o:?}");
    // A file where the build's directory of edge counts should be.
    let edges = dir.join("ds/edge_counts");
    let build_dir = std::fs::read_dir(&edges)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::rename(&build_dir, dir.join("saved")).unwrap();
    std::fs::write(&build_dir, "in the way\n").unwrap();
    let o = tally_in(&dir, &["export", "-o", "ds", "r1.tally", "r2.tally"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("tally: error: writing the dataset failed: ")
            && err.contains("edge_counts"),
        "{err}"
    );
    std::fs::remove_file(&build_dir).unwrap();
    std::fs::rename(dir.join("saved"), &build_dir).unwrap();
    // "0 already there": the stopped export's runs are not in the dataset; their part (the
    // same runs, the same name) replaces the files it left.
    let o = tally_in(&dir, &["export", "-o", "ds", "r1.tally", "r2.tally"]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "ds: 2 run(s) exported, 0 already there; 0 new build(s), 1 part(s) written\n"
    );
    check(&dir.join("ds"), &bin, &runs, "");
}

#[test]
fn sqlite_runs_export_exactly() {
    let dir = scratch("dataset-sqlite");
    let args = sqlite_args(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let bin = dir.join("sqlite");
    build(Variant::Tally("edge"), false, &args, &bin, &dir);
    let mut profiles = Vec::new();
    for size in ["1", "3"] {
        let p = dir.join(format!("sqlite-{size}.tally"));
        let o = run(&bin, &[size], &dir, &p);
        assert!(o.status.success(), "{o:?}");
        profiles.push(p);
    }
    let mut args = vec!["export".to_string(), "-o".into(), "ds".into()];
    args.extend(profiles.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = tally_in(&dir, &args);
    assert!(o.status.success(), "{o:?}");
    let said = check(&dir.join("ds"), &bin, &profiles, "");
    eprintln!("sqlite: {said}");
}
