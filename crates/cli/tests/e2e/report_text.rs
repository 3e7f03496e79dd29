//! The text and JSON reports of a small deterministic program, as snapshots (insta; a missing
//! or changed snapshot fails under INSTA_UPDATE=no, which scripts/test.sh sets).

use crate::support::*;
use std::path::Path;

const PROG: &str = r#"#include <stdio.h>
#include <stdlib.h>

static int collatz_steps(unsigned n) {
    int steps = 0;
    while (n != 1) {
        if (n % 2 == 0)
            n /= 2;
        else
            n = 3 * n + 1;
        steps++;
    }
    return steps;
}

static void check(int v) {
    if (v > 100) {
        printf("too long: %d\n", v);
        exit(0);
    }
}

int main(void) {
    int best = 0;
    for (unsigned i = 1; i < 100; i++) {
        int s = collatz_steps(i);
        if (s > best)
            best = s;
        check(s);
    }
    printf("best %d\n", best);
    return 0;
}
"#;

#[test]
fn report_text_and_json_snapshots() {
    let dir = scratch("report-text");
    std::fs::write(dir.join("collatz.c"), PROG).unwrap();
    build(
        Variant::Tally("edge"),
        false,
        &["-O1", "-g", "collatz.c"],
        &dir.join("collatz"),
        &dir,
    );
    let out = run(
        Path::new("./collatz"),
        &[],
        &dir,
        &dir.join("collatz.tally"),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "too long: 111\n");
    let text = std::process::Command::new(tally())
        .args(["report", "--detail", "2", "collatz.tally"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(text.status.success());
    // The program line names the scratch directory and the linker's build id: keep the shape.
    let text: String = String::from_utf8_lossy(&text.stdout)
        .lines()
        .map(|l| match l.strip_prefix("program: ") {
            Some(rest) => {
                let (path, id) = rest.split_once(" (build id ").expect("a build id");
                assert!(path.ends_with("/collatz"), "{l}");
                assert!(id.ends_with(')'), "{l}");
                "program: .../collatz (build id ...)\n".to_string()
            }
            None => format!("{l}\n"),
        })
        .collect();
    insta::assert_snapshot!("collatz_text", text);

    let mut json = report_json(&dir.join("collatz.tally"));
    // Absolute paths depend on the checkout: keep file names only.
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) if s.contains('/') => {
                *s = s.rsplit('/').next().unwrap().to_string();
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            serde_json::Value::Object(o) => o.values_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut json);
    let id = &mut json["program"]["build_id"];
    assert!(id.is_string(), "{id}");
    *id = "...".into();
    insta::assert_json_snapshot!("collatz_json", json);
}

/// Long C++ names are shortened in text views and kept whole in JSON: libstdc++'s
/// `std::map<std::string, long>::operator[]` reads as `std::map<…>::operator[](std::string&&)`
/// in `tally report` and `report --lines`, and the JSON has the demangler's full name.
#[test]
fn cxx_names_are_short_in_text_and_whole_in_json() {
    const CXX: &str = r#"#include <map>
#include <string>
#include <cstdio>
int main() {
    std::map<std::string, long> m;
    for (int i = 0; i < 100; i++) ++m[std::to_string(i % 7)];
    std::printf("%zu\n", m.size());
}
"#;
    let dir = scratch("report-cxx-names");
    std::fs::write(dir.join("m.cpp"), CXX).unwrap();
    build(
        Variant::Tally("edge"),
        true,
        &["-O2", "-g", "m.cpp"],
        &dir.join("m"),
        &dir,
    );
    let out = run(Path::new("./m"), &[], &dir, &dir.join("m.tally"));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "7\n");
    let tally_stdout = |args: &[&str]| {
        let o = std::process::Command::new(tally())
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}");
        String::from_utf8(o.stdout).unwrap()
    };
    // (`operator[](std::string&&)`: the key is a temporary.)
    let short = "std::map<…>::operator[](std::string&&)";
    let text = tally_stdout(&["report", "m.tally"]);
    assert!(text.contains(short), "{text}");
    assert!(!text.contains("std::__cxx11::basic_string"), "{text}");
    let lines = tally_stdout(&["report", "--lines", "m.tally"]);
    assert!(!lines.contains("std::__cxx11::basic_string"), "{lines}");
    let json: serde_json::Value =
        serde_json::from_str(&tally_stdout(&["report", "--format", "json", "m.tally"])).unwrap();
    let names: Vec<&str> = json["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["demangled"].as_str())
        .collect();
    assert!(
        names.iter().any(
            |n| n.starts_with("std::map<std::__cxx11::basic_string<char")
                && n.contains(">::operator[](")
        ),
        "{names:?}"
    );
}

/// A `trace-naive` profile counts nothing (the trace holds the blocks): the reports say every
/// count is unknown instead of printing zeros, and say where the counts are.
#[test]
fn a_profile_that_counts_nothing_shows_unknown_counts() {
    let dir = scratch("report-unknown");
    std::fs::write(dir.join("collatz.c"), PROG).unwrap();
    build(
        Variant::Tally("trace-naive"),
        false,
        &["-O1", "-g", "collatz.c"],
        &dir.join("collatz"),
        &dir,
    );
    let prof = dir.join("collatz.tally");
    run(Path::new("./collatz"), &[], &dir, &prof);
    let o = std::process::Command::new(tally())
        .args(["report", "collatz.tally"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("block executions: ? (block counts unknown in 1 functions"),
        "{text}"
    );
    assert!(text.contains("(0+? executed"), "{text}");
    let main = text
        .lines()
        .find(|l| l.contains(" main "))
        .expect("main listed");
    assert!(main.trim_start().starts_with("? "), "{main}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("trace-naive build counts nothing"), "{err}");
    let json = report_json(&prof);
    for f in json["functions"].as_array().unwrap() {
        assert!(f["entry_count"].is_null(), "{f}");
        assert!(f["block_executions"].is_null(), "{f}");
    }
    let lines = tally_ok(&dir, &["report", "--lines", "collatz.tally"]);
    let lines = String::from_utf8_lossy(&lines);
    assert!(
        lines.lines().nth(1).unwrap().contains("unknown)"),
        "{lines}"
    );
}
