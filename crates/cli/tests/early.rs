//! Early termination stays exact (paper 000 §3.2, Fig. 7): programs whose frames end through
//! exit() deep in a callee, longjmp across frames, abort() caught by a SIGABRT handler that
//! exits, and C++ exceptions unwinding through frames without handlers. For each program, at
//! -O0 and -O2, the `edge` build's block and edge counts must equal the `edges-naive` oracle's
//! (a counter on every edge, no shadow stack), its block counts must equal the `blocks-naive`
//! oracle's, and every instrumented build must print the same output and exit with the same
//! status as the plain clang build.

mod support;
use support::*;

fn expected() -> Vec<(String, i32)> {
    let text = std::fs::read_to_string(repo().join("testdata/early/EXPECTED")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            (
                it.next().unwrap().to_string(),
                it.next().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

fn check_program(file: &str, status: i32, opt: &str) {
    let src = repo().join("testdata/early").join(file);
    let cxx = file.ends_with(".cpp");
    let stem = file.split('.').next().unwrap();
    let dir = scratch(&format!("early-{stem}{opt}"));
    let src_s = src.to_str().unwrap();
    let mut outputs = Vec::new();
    let mut reports = Vec::new();
    for v in std::iter::once(Variant::Plain).chain(MODES) {
        let bin = dir.join(format!("{stem}-{}", v.name()));
        build(v, cxx, &[opt, "-g", src_s], &bin, &dir);
        let prof = dir.join(format!("{stem}-{}.tally", v.name()));
        let out = run(&bin, &[], &dir, &prof);
        assert_eq!(
            out.status.code(),
            Some(status),
            "{file} {opt} {}: exit status (stderr: {})",
            v.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push((v.name(), out.stdout));
        if v != Variant::Plain {
            assert!(
                prof.is_file(),
                "{file} {opt} {}: no profile written",
                v.name()
            );
            reports.push((v.name(), report_json(&prof)));
        }
    }
    for (name, o) in &outputs[1..] {
        assert_eq!(
            String::from_utf8_lossy(o),
            String::from_utf8_lossy(&outputs[0].1),
            "{file} {opt}: {name} output differs from plain"
        );
    }
    let what = format!("{file} {opt}");
    let (edge, naive, blocks) = (&reports[0].1, &reports[1].1, &reports[2].1);
    let (nf, executed) = assert_same_counts(&what, "edge", edge, "edges-naive", naive, true);
    assert_same_counts(&what, "edge", edge, "blocks-naive", blocks, false);
    assert!(
        nf >= 3 && executed >= 10,
        "{what}: too little was compared ({nf} functions, {executed} blocks)"
    );
}

fn check_all(opt: &str) {
    for (file, status) in expected() {
        check_program(&file, status, opt);
    }
}

#[test]
fn early_termination_exact_o0() {
    check_all("-O0");
}

#[test]
fn early_termination_exact_o2() {
    check_all("-O2");
}
