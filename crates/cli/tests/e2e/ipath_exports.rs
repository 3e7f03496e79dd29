//! `tally report` on interprocedural path profiles (modes `ipath`, `ipath-piecewise`) in every
//! output format: the LCOV tracefile, the Cobertura XML and the JSON report's source-level
//! part (`--lines`: `files`, `source_functions`) must be those of the `edges-naive` oracle's
//! profile of the same program (the LCOV test name, which is the mode, aside), and the JSON's
//! block and edge counts its counts — on `testdata/ipath/calls.c` (direct calls, recursion,
//! calls through pointers, a qsort callback) at -O0 and -O2. exports.rs checks the formats
//! themselves with their consumers (genhtml, xmllint) on an edge profile.

use crate::support::*;
use serde_json::Value;
use std::path::Path;

fn tally_out(dir: &Path, args: &[&str]) -> String {
    String::from_utf8(tally_ok(dir, args)).unwrap()
}

/// The LCOV tracefile without its `TN:` (test name) line.
fn lcov(dir: &Path, prof: &str) -> String {
    tally_out(dir, &["report", "--export", "lcov", prof])
        .lines()
        .filter(|l| !l.starts_with("TN:"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The Cobertura XML with its `timestamp` (the second it was written) blanked: two reports
/// written a second apart are otherwise equal.
fn cobertura(dir: &Path, prof: &str) -> String {
    let xml = tally_out(dir, &["report", "--export", "cobertura", prof]);
    let Some(at) = xml.find(" timestamp=\"") else {
        return xml;
    };
    let start = at + " timestamp=\"".len();
    let end = start + xml[start..].find('"').expect("a closed attribute");
    format!("{}{}", &xml[..start], &xml[end..])
}

#[test]
fn ipath_report_exports_equal_edges_naive() {
    let calls = repo().join("testdata/ipath/calls.c");
    for opt in ["-O0", "-O2"] {
        let dir = scratch(&format!("ipath-exports{opt}"));
        let modes = ["edges-naive", "ipath", "ipath-piecewise"];
        for m in modes {
            let v = Variant::Tally(m);
            build(
                v,
                false,
                &[opt, "-g", calls.to_str().unwrap()],
                &dir.join(m),
                &dir,
            );
            let o = run(&dir.join(m), &[], &dir, &dir.join(format!("{m}.tally")));
            assert!(o.status.success(), "{m}{opt}: {o:?}");
        }
        let oracle = "edges-naive.tally";
        let want_lcov = lcov(&dir, oracle);
        let want_xml = cobertura(&dir, oracle);
        let json = |p: &str| -> Value {
            serde_json::from_str(&tally_out(
                &dir,
                &["report", "--format", "json", "--lines", p],
            ))
            .unwrap()
        };
        let want = json(oracle);
        assert!(
            want_lcov.contains("\nDA:") && want_lcov.contains("\nBRDA:"),
            "{want_lcov}"
        );
        for m in &modes[1..] {
            let what = format!("calls.c{opt} {m}");
            let prof = format!("{m}.tally");
            assert_eq!(lcov(&dir, &prof), want_lcov, "{what}: LCOV");
            let xml = cobertura(&dir, &prof);
            assert_eq!(xml, want_xml, "{what}: Cobertura");
            let got = json(&prof);
            for key in ["files", "source_functions"] {
                assert_eq!(got[key], want[key], "{what}: JSON {key}");
            }
            assert_same_counts(&what, m, &got, "edges-naive", &want, Edges::All);
            // The counts come from paths: the set's functions have no counters.
            let by_paths = got["functions"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["counters"] == 0 && f["entry_count"].as_u64() > Some(0))
                .count();
            assert!(by_paths >= 6, "{what}: {by_paths} functions by paths");
        }
    }
}
