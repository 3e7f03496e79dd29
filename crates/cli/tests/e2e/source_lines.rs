//! The source-level model against independent answers:
//!
//! - at -O0, every line's count equals `llvm-cov gcov`'s for the same program built with
//!   clang's gcov instrumentation (`--coverage`), and no line has a count gcov does not list;
//! - a loop that ran 1,024 times, unrolled by two into one block that ran 512 times, shows
//!   1,024 on its lines;
//! - line, branch and function counts are identical in `edge`, `edges-naive` and `path`
//!   profiles of the same -O2 build (the demo and zlib);
//! - insta snapshots of `tally show --branches` and `tally report --lines` on the demo.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// A program with straight-line code, loops on one line, a switch, a ternary and recursion.
const PROG_A: &str = r#"#include <stdio.h>
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

static int sum(const int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }

int classify(int c) {
    switch (c) {
    case 0: return 10;
    case 1:
    case 2: return 20;
    default: break;
    }
    return c > 5 ? 1 : 2;
}

int main(int argc, char **argv) {
    int best = 0;
    int a[100];
    for (unsigned i = 1; i < 100; i++) {
        int s = collatz_steps(i);
        a[i] = s;
        if (s > best)
            best = s;
    }
    int t = 0;
    for (int k = 0; k < 10; k++) t += classify(k);
    const char *p = argv[0]; while (*p) p++;
    printf("best %d %d %d %d\n", best, sum(a + 1, 99), t, (int)(p - argv[0]) > 0);
    return 0;
}
"#;

/// Statements over several lines, goto, do-while, short-circuit operators, recursion.
const PROG_B: &str = r#"#include <stdio.h>
#include <string.h>

static int fib(int n) {
    if (n < 2)
        return n;
    return fib(n - 1) +
           fib(n - 2);
}

static int search(const int *a, int n, int key) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (a[mid] == key) goto found;
        if (a[mid] < key) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
found:
    return 1;
}

static int count_words(const char *s) {
    int n = 0, in = 0;
    do {
        if (*s == ' ' || *s == '\0') {
            if (in) n++;
            in = 0;
        } else
            in = 1;
    } while (*s++);
    return n;
}

int main(void) {
    int a[64];
    for (int i = 0; i < 64; i++) a[i] = 2 * i;
    int hits = 0;
    for (int k = 0; k < 100; k++)
        hits += search(a, 64, k) > 0 &&
                k % 3 != 0;
    int w = count_words("the quick brown fox jumps over the lazy dog");
    printf("%d %d %d\n",
           fib(15),
           hits,
           w);
    return 0;
}
"#;

/// `tally report --format json --lines` of a profile.
fn lines_json(profile: &Path) -> Value {
    let o = Command::new(tally())
        .args(["report", "--format", "json", "--lines"])
        .arg(profile)
        .output()
        .expect("run tally report");
    assert!(
        o.status.success(),
        "tally report --lines {}: {}",
        profile.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("report JSON parses")
}

/// Line counts of the file whose path ends with `/name`.
fn file_lines(report: &Value, name: &str) -> BTreeMap<u64, u64> {
    let file = report["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with(&format!("/{name}")))
        .unwrap_or_else(|| panic!("{name} not in the report"));
    file["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["line"].as_u64().unwrap(),
                l["count"].as_u64().expect("a known count"),
            )
        })
        .collect()
}

/// `llvm-cov gcov`'s line counts of `name` (lines marked `-` have no code).
fn gcov_lines(gcov_file: &Path) -> BTreeMap<u64, u64> {
    let text = std::fs::read_to_string(gcov_file).expect("read .gcov");
    let mut out = BTreeMap::new();
    for l in text.lines() {
        let mut parts = l.splitn(3, ':');
        let (Some(count), Some(line)) = (parts.next(), parts.next()) else {
            continue;
        };
        let (count, line) = (count.trim(), line.trim());
        let Ok(line) = line.parse::<u64>() else {
            continue;
        };
        if line == 0 || count == "-" {
            continue;
        }
        let count = match count {
            "#####" | "=====" => 0,
            c => c.trim_end_matches('*').parse().expect("a gcov count"),
        };
        out.insert(line, count);
    }
    out
}

fn gcov_case(name: &str, src: &str) {
    let dir = scratch(&format!("gcov-{name}"));
    let file = format!("{name}.c");
    std::fs::write(dir.join(&file), src).unwrap();
    build(
        Variant::Tally("edge"),
        false,
        &["-O0", "-g", &file],
        &dir.join("t"),
        &dir,
    );
    let mine = run(Path::new("./t"), &[], &dir, &dir.join("t.tally"));
    assert!(mine.status.success());
    let cov = Command::new("clang-19")
        .args(["--coverage", "-O0", "-g", &file, "-o", "g"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        cov.status.success(),
        "{}",
        String::from_utf8_lossy(&cov.stderr)
    );
    let theirs = Command::new("./g").current_dir(&dir).output().unwrap();
    assert_eq!(mine.stdout, theirs.stdout, "the two builds behave the same");
    let g = Command::new("llvm-cov-19")
        .args(["gcov", &format!("g-{name}.gcda")])
        .current_dir(&dir)
        .output()
        .expect("llvm-cov-19 gcov");
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let expected = gcov_lines(&dir.join(format!("{file}.gcov")));
    let got = file_lines(&lines_json(&dir.join("t.tally")), &file);
    assert!(expected.len() > 20, "gcov lists the program's lines");
    assert_eq!(
        got, expected,
        "{name}: tally's line counts (left) differ from llvm-cov gcov's (right)"
    );
}

#[test]
fn line_counts_equal_gcov_at_o0() {
    gcov_case("prog_a", PROG_A);
    gcov_case("prog_b", PROG_B);
}

#[test]
fn unrolled_copies_add_up() {
    const SRC: &str = r#"#include <stdio.h>
volatile int sink;
int main(void) {
    long total = 0;
#pragma clang loop unroll_count(2)
    for (int i = 0; i < 1024; i++) {
        sink = i;
        total += sink * 3;
    }
    printf("%ld\n", total);
    return 0;
}
"#;
    let dir = scratch("source-unrolled");
    std::fs::write(dir.join("u.c"), SRC).unwrap();
    build(
        Variant::Tally("edge"),
        false,
        &["-O2", "-g", "u.c"],
        &dir.join("u"),
        &dir,
    );
    assert!(run(Path::new("./u"), &[], &dir, &dir.join("u.tally"))
        .status
        .success());
    // The optimized code runs the body's block 512 times (two copies per iteration) ...
    let blocks = report_json(&dir.join("u.tally"));
    let body_blocks: Vec<u64> = blocks["functions"][0]["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["line"] == 7)
        .filter_map(|b| b["count"].as_u64())
        .collect();
    assert_eq!(body_blocks.iter().max(), Some(&512), "{body_blocks:?}");
    // ... and the lines show how often the source ran them.
    let lines = file_lines(&lines_json(&dir.join("u.tally")), "u.c");
    assert_eq!(lines.get(&7), Some(&1024), "{lines:?}");
    assert_eq!(lines.get(&8), Some(&1024), "{lines:?}");
}

/// The `files` and `source_functions` of a profile, for comparing modes.
fn source_part(profile: &Path) -> (Value, Value) {
    let r = lines_json(profile);
    (r["files"].clone(), r["source_functions"].clone())
}

/// Every block's location (where reports, `tally trace` and the HTML pages put it) is the
/// first of its line runs, the instructions that are code: not the line a loop header's PHI
/// keeps from an assignment before the loop (the demo's hottest block in `main` was shown at
/// `table_init`'s `t->nwords = 0;`, which runs once). Returns the blocks compared.
fn block_locations_are_their_first_lines(profile: &Path) -> usize {
    let p = tally_format::profile::Profile::read_file(profile).unwrap();
    let mut compared = 0;
    for m in &p.modules {
        for f in &m.meta.functions {
            for (b, runs) in f.source.lines.iter().enumerate() {
                let Some(first) = runs.first() else { continue };
                assert_eq!(
                    f.blocks[b], first.loc,
                    "{}: block n{b} of {}: location {:?}, first line run {:?}",
                    m.meta.source, f.name, f.blocks[b], first.loc
                );
                compared += 1;
            }
        }
    }
    assert!(compared > 50, "{}: {compared} blocks", profile.display());
    compared
}

/// Builds `args` in edge, edges-naive and path mode, runs each with `run_args`, and checks
/// that the source-level counts are identical. Returns the edge profile's model.
fn same_source_counts(what: &str, args: &[&str], run_args: &[&str]) -> (Value, Value) {
    let dir = scratch(&format!("source-modes-{what}"));
    let mut parts = Vec::new();
    for mode in ["edge", "edges-naive", "path"] {
        let bin = dir.join(format!("p-{mode}"));
        build(Variant::Tally(mode), false, args, &bin, &dir);
        let prof = dir.join(format!("{mode}.tally"));
        let o = run(&bin, run_args, &dir, &prof);
        assert!(o.status.success(), "{what} {mode}: {o:?}");
        block_locations_are_their_first_lines(&prof);
        parts.push((mode, source_part(&prof)));
    }
    let (_, first) = &parts[0];
    let lines: usize = first
        .0
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["lines"].as_array().unwrap().len())
        .sum();
    assert!(lines > 50, "{what}: {lines} lines");
    for (mode, p) in &parts[1..] {
        assert!(
            p.0 == first.0,
            "{what}: line or branch counts of {mode} differ from edge's"
        );
        assert!(
            p.1 == first.1,
            "{what}: function counts of {mode} differ from edge's"
        );
    }
    first.clone()
}

#[test]
fn modes_agree_on_lines_branches_and_functions_demo() {
    let demo = repo().join("testdata/demo");
    let src = demo.join("wordfreq.c").display().to_string();
    let input = demo.join("input.txt").display().to_string();
    let (files, functions) = same_source_counts("demo", &["-O2", "-g", &src], &[&input]);
    // Inlined functions are counted: hash_word is inlined in two places and never emitted.
    let hash = functions
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "hash_word")
        .expect("hash_word");
    assert_eq!(hash["emitted"], 0);
    assert!(hash["inlined"].as_u64().unwrap() >= 1);
    assert!(hash["count"].as_u64().unwrap() > 0);
    let branches: usize = files
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["lines"].as_array().unwrap())
        .filter_map(|l| l["branches"].as_array())
        .map(Vec::len)
        .sum();
    assert!(branches > 20, "{branches} branches");
}

#[test]
fn modes_agree_on_lines_branches_and_functions_zlib() {
    const DRIVER: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "zlib.h"
int main(void) {
    static unsigned char in[1 << 16], out[1 << 17], back[1 << 16];
    unsigned x = 12345;
    for (size_t i = 0; i < sizeof in; i++) {
        x = x * 1103515245u + 12345u;
        in[i] = "abcdefgh ,.\n"[(x >> 16) % 12];
    }
    uLongf n = sizeof out, m = sizeof back;
    if (compress2(out, &n, in, sizeof in, 6) != Z_OK) return 1;
    if (uncompress(back, &m, out, n) != Z_OK) return 2;
    if (m != sizeof in || memcmp(in, back, m) != 0) return 3;
    printf("%lu -> %lu, crc %08lx\n", (unsigned long)m, (unsigned long)n,
           crc32(0, in, sizeof in));
    return 0;
}
"#;
    let z = locate("zlib");
    let dir = scratch("source-zlib-driver");
    std::fs::write(dir.join("driver.c"), DRIVER).unwrap();
    let mut args: Vec<String> = vec!["-O2".into(), "-g".into(), format!("-I{}", z.display())];
    for f in [
        "adler32.c",
        "compress.c",
        "crc32.c",
        "deflate.c",
        "inffast.c",
        "inflate.c",
        "inftrees.c",
        "trees.c",
        "uncompr.c",
        "zutil.c",
    ] {
        args.push(z.join(f).display().to_string());
    }
    args.push(dir.join("driver.c").display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_, functions) = same_source_counts("zlib", &args, &[]);
    let deflate = functions
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "deflate")
        .expect("deflate");
    assert!(deflate["count"].as_u64().unwrap() > 0);
}

/// Runs `tally` in `dir` and returns stdout, with the scratch directory's path replaced.
fn tally_out(dir: &Path, args: &[&str]) -> String {
    let o = Command::new(tally())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).replace(&dir.display().to_string(), "<dir>")
}

/// The per-file table lists files by absolute path, so the demo's row moves relative to the
/// system headers' with the checkout's location (`/tmp/ci` sorts before `/usr`, `/work` after):
/// the snapshot takes the table's rows sorted by their shown name.
fn sort_file_table(report: &str) -> String {
    let mut out = Vec::new();
    let mut rows = Vec::new();
    let mut in_table = false;
    for l in report.lines() {
        if l.starts_with("file ") {
            in_table = true;
            out.push(l.to_string());
        } else if in_table && !l.is_empty() {
            rows.push(l.to_string());
        } else {
            if in_table {
                rows.sort();
                out.append(&mut rows);
                in_table = false;
            }
            out.push(l.to_string());
        }
    }
    rows.sort();
    out.append(&mut rows);
    out.join("\n") + "\n"
}

#[test]
fn show_and_line_report_snapshots_of_the_demo() {
    let dir = scratch("source-demo");
    let demo = repo().join("testdata/demo");
    std::fs::copy(demo.join("wordfreq.c"), dir.join("wordfreq.c")).unwrap();
    std::fs::copy(demo.join("input.txt"), dir.join("input.txt")).unwrap();
    build(
        Variant::Tally("edge"),
        false,
        &["-O2", "-g", "wordfreq.c"],
        &dir.join("wordfreq"),
        &dir,
    );
    let o = run(
        Path::new("./wordfreq"),
        &["input.txt"],
        &dir,
        &dir.join("wordfreq.tally"),
    );
    assert!(o.status.success());
    let show = tally_out(
        &dir,
        &["show", "--branches", "wordfreq.tally", "wordfreq.c"],
    );
    insta::assert_snapshot!("demo_show", show);
    let show_fn = tally_out(
        &dir,
        &["show", "--function", "^table_(add|grow)$", "wordfreq.tally"],
    );
    insta::assert_snapshot!("demo_show_function", show_fn);
    // Without file names: the program's own file, and the system headers whose inline
    // functions it used (`atoi`'s `strtol` in stdlib.h) only named in a closing note;
    // named, a header is shown.
    let all = tally_out(&dir, &["show", "wordfreq.tally"]);
    assert!(all.starts_with("<dir>/wordfreq.c:\n"), "{}", &all[..200]);
    assert!(!all.lines().any(|l| l == "/usr/include/stdlib.h:"));
    let note = all.lines().last().unwrap();
    assert!(
        note.starts_with("(not shown: ") && note.contains("/usr/include/stdlib.h"),
        "{note}"
    );
    let header = tally_out(&dir, &["show", "wordfreq.tally", "stdlib.h"]);
    assert!(
        header.starts_with("/usr/include/stdlib.h:\n"),
        "{}",
        &header[..200]
    );
    assert!(header.contains("strtol"));
    let lines = tally_out(&dir, &["report", "--lines", "wordfreq.tally"]);
    insta::assert_snapshot!("demo_report_lines", sort_file_table(&lines));
}
