//! `tally html` on a small two-file program built at -O2 in `edge` and
//! `path` mode:
//!
//! - every count on the pages equals the JSON report's: line counts and branch outcomes of
//!   each file page against `tally report --format json --lines`, the per-file coverage of the
//!   index against its summaries, block and edge counts of each function page (its tables and
//!   its drawn graph) against `tally report --format json`, and the paths table against
//!   `tally paths --format json` (the hottest path first and highlighted in the graph);
//! - markup in a file name (`<img ... onerror=...>`) and in the source (`</script><script>`)
//!   is escaped: it never appears raw in any page, and would log to the console if it ran;
//! - every page loads in Debian's headless Chromium without a console message (errors,
//!   uncaught exceptions, Content-Security-Policy violations all log one) and its script runs
//!   to the end (it marks `<body data-ready="1">`); the checker is shown to catch a page that
//!   throws. File pages are loaded with `?keys`, which makes their script press `n u U p`
//!   (real keydown events through the page's handler): where each lands must be the hot and
//!   never-run lines the page's rows say. Without `chromium` on PATH this part fails under CI=true and is skipped loudly
//!   otherwise (`apt-get install chromium`; scripts/setup.sh installs it);
//! - the output directory: a symbolic link at a page's name is refused and not followed; a
//!   missing profile is a one-line error.

use crate::support::*;
use regex_lite::Regex;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The file name that would inject markup if it were not escaped.
const EVIL: &str = "inj<img src=x onerror=console.error(7)>.c";

const MAIN: &str = r#"#include <stdio.h>
/* </script><script>console.error("injected from a comment")</script> */
int util_sum(const int *a, int n);
int classify(int c);
static const char *tag = "<script>console.error('injected from a string')</script>";

static int collatz(unsigned n) {
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

__attribute__((noinline)) int never(int x) { return x * 3 + 1; }

int main(int argc, char **argv) {
    int best = 0, a[64];
    for (unsigned i = 1; i < 64; i++) {
        int s = collatz(i);
        a[i] = s;
        if (s > best)
            best = s;
    }
    int t = 0;
    for (int k = 0; k < 10; k++) t += classify(k);
    if (argc > 5)
        t += never(argc);
    if (argc > 7)
        puts("</script><script>console.error('injected from code')</script>");
    printf("%d %d %d %c\n", best, util_sum(a + 1, 63), t, tag[1]);
    return 0;
}
"#;

const UTIL: &str = r#"int util_sum(const int *a, int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] & 1 ? a[i] : -a[i];
    return s;
}

__attribute__((noinline)) int classify(int c) {
    switch (c) {
    case 0: return 10;
    case 1:
    case 2: return 20;
    default: break;
    }
    return c > 5 ? 1 : 2;
}
"#;

/// `tally html -o OUT PROFILE`.
fn tally_html(out: &Path, prof: &Path) -> std::process::Output {
    Command::new(tally())
        .args(["html", "-o"])
        .arg(out)
        .arg(prof)
        .output()
        .unwrap()
}

/// Builds and runs the program in `mode`, then writes its site; returns (scratch dir, profile,
/// site dir).
fn site(mode: &'static str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = scratch(&format!("html-{mode}"));
    std::fs::write(dir.join(EVIL), MAIN).unwrap();
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    std::fs::write(dir.join("lib/util.c"), UTIL).unwrap();
    build(
        Variant::Tally(mode),
        false,
        &["-O2", "-g", EVIL, "lib/util.c"],
        &dir.join("prog"),
        &dir,
    );
    let prof = dir.join("prog.tally");
    let o = run(Path::new("./prog"), &[], &dir, &prof);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = dir.join("site");
    let o = tally_html(&out, &prof);
    assert!(
        o.status.success(),
        "tally html: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (dir, prof, out)
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The site's pages: (file name, HTML).
fn pages(site: &Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(site)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

fn attr(tag: &str, name: &str) -> Option<String> {
    let re = Regex::new(&format!(r#"\s{name}="([^"]*)""#)).unwrap();
    re.captures(tag).map(|c| unescape(&c[1]))
}

/// Opening tags of `element` that carry attribute `with`.
fn tags<'a>(html: &'a str, element: &str, with: &str) -> Vec<&'a str> {
    let re = Regex::new(&format!(r#"<{element}\s[^>]*\b{with}="[^>]*>"#)).unwrap();
    re.find_iter(html).map(|m| m.as_str()).collect()
}

fn count(s: &str) -> Option<u64> {
    (s != "?").then(|| s.parse().expect("a count"))
}

fn tally_json(args: &[&str], prof: &Path) -> Value {
    let o = Command::new(tally()).args(args).arg(prof).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Checks every count of the site against the JSON reports; returns how many were compared.
fn check_counts(mode: &str, prof: &Path, site: &Path) -> usize {
    let pages = pages(site);
    let lines = tally_json(&["report", "--format", "json", "--lines"], prof);
    let mut compared = 0;

    // File pages: every line with code, its count and its branch outcomes.
    let mut want: BTreeMap<String, BTreeMap<u64, (Option<u64>, String)>> = BTreeMap::new();
    for f in lines["files"].as_array().unwrap() {
        let m = want.entry(f["path"].as_str().unwrap().into()).or_default();
        for l in f["lines"].as_array().unwrap() {
            let br: Vec<String> = l["branches"]
                .as_array()
                .map(|bs| {
                    bs.iter()
                        .map(|b| {
                            let o: Vec<String> = b
                                .as_array()
                                .unwrap()
                                .iter()
                                .map(|c| c.as_u64().map_or("?".into(), |c| c.to_string()))
                                .collect();
                            o.join(" ")
                        })
                        .collect()
                })
                .unwrap_or_default();
            m.insert(
                l["line"].as_u64().unwrap(),
                (l["count"].as_u64(), br.join("|")),
            );
        }
    }
    let mut got: BTreeMap<String, BTreeMap<u64, (Option<u64>, String)>> = BTreeMap::new();
    let row = Regex::new(
        r#"(?s)<tr id="L\d+" class="[^"]*" data-line="(\d+)" data-count="([^"]*)"[^>]*>(.*?)</tr>"#,
    )
    .unwrap();
    let outcomes = Regex::new(r#"data-outcomes="([^"]*)""#).unwrap();
    for (name, html) in &pages {
        let Some(t) = tags(html, "table", "data-file").first().copied() else {
            continue;
        };
        assert!(name.starts_with('f'), "{name}");
        let path = attr(t, "data-file").unwrap();
        let m = got.entry(path).or_default();
        for c in row.captures_iter(html) {
            let br: Vec<String> = outcomes
                .captures_iter(&c[3])
                .map(|o| o[1].to_string())
                .collect();
            m.insert(c[1].parse().unwrap(), (count(&c[2]), br.join("|")));
        }
    }
    assert!(want.len() >= 2, "{mode}: files in the report: {want:?}");
    assert_eq!(got, want, "{mode}: line counts of the file pages");
    compared += want.values().map(|m| m.len()).sum::<usize>();

    // Index: per-file coverage.
    let index = &pages.iter().find(|(n, _)| n == "index.html").unwrap().1;
    let rows = tags(index, "tr", "data-file");
    assert_eq!(rows.len(), want.len(), "{mode}: files on the index");
    for f in lines["files"].as_array().unwrap() {
        let t = rows
            .iter()
            .find(|t| attr(t, "data-file").as_deref() == f["path"].as_str())
            .unwrap_or_else(|| panic!("{mode}: {} not on the index", f["path"]));
        for k in [
            "lines",
            "lines_hit",
            "branches",
            "branches_hit",
            "functions",
            "functions_hit",
        ] {
            let a = attr(t, &format!("data-{}", k.replace('_', "-"))).unwrap();
            assert_eq!(
                a.parse::<u64>().unwrap(),
                f["summary"][k].as_u64().unwrap(),
                "{mode}: {k} of {}",
                f["path"]
            );
            compared += 1;
        }
    }

    // Function pages: blocks and edges, in the tables and in the graph.
    let report = report_json(prof);
    let by_fn = counts(&report);
    let paths = (mode == "path").then(|| tally_json(&["paths", "--format", "json"], prof));
    let mut fn_pages = 0;
    let mut graphs = 0;
    let mut hot_paths = 0;
    for (name, html) in &pages {
        let Some(t) = tags(html, "table", "data-cfg-hash").first().copied() else {
            continue;
        };
        fn_pages += 1;
        let key = (
            attr(t, "data-module").unwrap(),
            attr(t, "data-function").unwrap(),
            attr(t, "data-cfg-hash").unwrap(),
        );
        let want = by_fn
            .get(&key)
            .unwrap_or_else(|| panic!("{mode}: {name}: {key:?} not in the report"));
        let blocks: Vec<Option<u64>> = tags(html, "tr", "data-block")
            .iter()
            .map(|t| count(&attr(t, "data-count").unwrap()))
            .collect();
        assert_eq!(blocks, want.blocks, "{mode}: blocks of {key:?}");
        let edges: Vec<Option<u64>> = tags(html, "tr", "data-edge")
            .iter()
            .map(|t| count(&attr(t, "data-count").unwrap()))
            .collect();
        let want_edges: Vec<Option<u64>> = want.edges.iter().map(|e| e.3).collect();
        assert_eq!(edges, want_edges, "{mode}: edges of {key:?}");
        compared += blocks.len() + edges.len();
        if html.contains("<svg") {
            graphs += 1;
            // The graph draws in its own order: by id.
            let drawn = |what: &str| -> Vec<Option<u64>> {
                let m: BTreeMap<u64, Option<u64>> = tags(html, "g", what)
                    .iter()
                    .filter_map(|t| {
                        let id = attr(t, what).unwrap().parse().ok()?;
                        Some((id, count(&attr(t, "data-count").unwrap())))
                    })
                    .collect();
                assert_eq!(
                    m.keys().copied().collect::<Vec<_>>(),
                    (0..m.len() as u64).collect::<Vec<_>>()
                );
                m.into_values().collect()
            };
            assert_eq!(
                drawn("data-block"),
                want.blocks,
                "{mode}: drawn blocks of {key:?}"
            );
            assert_eq!(
                drawn("data-edge"),
                want_edges,
                "{mode}: drawn edges of {key:?}"
            );
        } else {
            assert!(
                html.contains("id=\"no-graph\""),
                "{mode}: {name} says why no graph"
            );
        }
        if let Some(p) = &paths {
            let f = p["functions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["module"] == key.0.as_str() && f["name"] == key.1.as_str());
            let rows: Vec<(String, u64)> = tags(html, "tr", "data-path")
                .iter()
                .map(|t| {
                    (
                        attr(t, "data-path").unwrap(),
                        attr(t, "data-count").unwrap().parse().unwrap(),
                    )
                })
                .collect();
            let Some(f) = f else {
                assert!(rows.is_empty());
                continue;
            };
            let all: BTreeMap<String, u64> = f["paths"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    (
                        p["number"].as_str().unwrap().to_string(),
                        p["count"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(rows.len(), all.len().min(20), "{mode}: paths of {key:?}");
            for (n, c) in &rows {
                assert_eq!(all.get(n), Some(c), "{mode}: path {n} of {key:?}");
            }
            if rows.is_empty() {
                continue;
            }
            assert_eq!(
                rows[0].1,
                *all.values().max().unwrap(),
                "{mode}: hottest path first"
            );
            compared += rows.len();
            if html.contains("<svg") && want.entry > 0 {
                assert!(
                    html.contains("class=\"blk hot\""),
                    "{mode}: {key:?} highlights its hottest path"
                );
                hot_paths += 1;
            }
        }
    }
    assert_eq!(fn_pages, by_fn.len(), "{mode}: a page per function");
    assert!(graphs >= 3, "{mode}: graphs drawn: {graphs}");
    if mode == "path" {
        assert!(hot_paths >= 3, "hottest paths highlighted: {hot_paths}");
    }
    compared
}

/// Raw markup from the file name or the source never reaches a page.
fn check_escaped(site: &Path) {
    let pages = pages(site);
    for (name, html) in &pages {
        for raw in ["<img src=x", "<script>console.error", "</script><script>"] {
            assert!(!html.contains(raw), "{name} contains raw {raw:?}");
        }
    }
    let all: String = pages.iter().map(|(_, h)| h.as_str()).collect();
    assert!(all.contains("inj&lt;img src=x onerror=console.error(7)&gt;.c"));
    assert!(all.contains("&lt;/script&gt;&lt;script&gt;console.error("));
}

/// Chromium's verdict on a page (`query` appended to its URL): `Err` with the console lines
/// when it logged any, or when its script did not run to the end; else the DOM.
fn chromium_check(
    chromium: &Path,
    page: &Path,
    query: &str,
    profile_dir: &Path,
) -> Result<String, String> {
    let o = Command::new(chromium)
        .args([
            "--headless=new",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile_dir.display()))
        .arg(format!("file://{}{query}", page.display()))
        .output()
        .expect("run chromium");
    let err = String::from_utf8_lossy(&o.stderr);
    let console: Vec<&str> = err.lines().filter(|l| l.contains(":CONSOLE")).collect();
    if !console.is_empty() {
        return Err(console.join("\n"));
    }
    let dom = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() || !dom.contains("data-ready=\"1\"") {
        return Err(format!(
            "script did not finish (status {}): {err}",
            o.status
        ));
    }
    Ok(dom.into_owned())
}

/// Where the keys `n u U p` should land on a file page, from its rows: the first hot line,
/// the next line that never ran after it, the previous one before that, the previous hot line
/// before that (each search wraps around; `-` when there is none).
fn expected_keys(html: &str) -> String {
    let rows: Vec<(String, bool, bool)> = tags(html, "tr", "id")
        .iter()
        .filter_map(|t| {
            let id = attr(t, "id")?;
            id.starts_with('L').then(|| {
                let hot = t.contains(" data-hot=");
                let unrun = attr(t, "class").is_some_and(|c| c.split(' ').any(|c| c == "unrun"));
                (id, hot, unrun)
            })
        })
        .collect();
    let n = rows.len() as i64;
    let mut cur: i64 = -1;
    let mut seen = Vec::new();
    for (step, want_hot) in [(1i64, true), (1, false), (-1, false), (-1, true)] {
        let base = if cur < 0 {
            if step > 0 {
                -1
            } else {
                0
            }
        } else {
            cur
        };
        let found = (1..=n).map(|k| (base + step * k).rem_euclid(n)).find(|&i| {
            let r = &rows[i as usize];
            if want_hot {
                r.1
            } else {
                r.2
            }
        });
        if let Some(i) = found {
            cur = i;
        }
        seen.push(if cur < 0 {
            "-".to_string()
        } else {
            rows[cur as usize].0.clone()
        });
    }
    seen.join(" ")
}

fn find_chromium() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("chromium"))
            .find(|c| c.is_file())
    })
}

fn check_in_chromium(sites: &[&Path]) {
    let Some(chromium) = find_chromium() else {
        if std::env::var_os("CI").is_some_and(|v| v == "true") {
            panic!("chromium is not installed (apt-get install chromium; scripts/setup.sh)");
        }
        eprintln!("\n*** SKIPPING the Chromium checks: `chromium` is not on PATH (apt-get install chromium) ***\n");
        return;
    };
    let scratch = scratch("html-chromium");
    // The checker catches a page that throws and one that logs.
    let bad = scratch.join("bad.html");
    std::fs::write(&bad, "<!DOCTYPE html><body><script>console.error('x');nope();document.body.setAttribute('data-ready','1')</script></body>").unwrap();
    assert!(chromium_check(&chromium, &bad, "", &scratch.join("profile")).is_err());
    let (mut n, mut keys) = (0, 0);
    for site in sites {
        for (name, html) in pages(site) {
            let page = site.join(&name);
            // File pages are loaded with `?keys`: their script presses n u U p.
            let query = if html.contains("<table class=\"src\"") {
                "?keys"
            } else {
                ""
            };
            let dom = chromium_check(&chromium, &page, query, &scratch.join("profile"))
                .unwrap_or_else(|e| panic!("{}: {e}", page.display()));
            if !query.is_empty() {
                let want = expected_keys(&html);
                assert!(
                    want.split(' ').any(|k| k != "-"),
                    "{name}: no hot or unrun line"
                );
                assert!(
                    dom.contains(&format!("data-keys=\"{want}\"")),
                    "{name}: keys n u U p should land on {want}"
                );
                keys += 1;
            }
            n += 1;
        }
    }
    assert!(keys >= 4, "file pages with keys checked: {keys}");
    eprintln!("{n} pages loaded in Chromium without a console message; keys checked on {keys}");
}

#[test]
fn html_site_counts_escaping_and_chromium() {
    let (_, edge_prof, edge_site) = site("edge");
    let (_, path_prof, path_site) = site("path");
    let n =
        check_counts("edge", &edge_prof, &edge_site) + check_counts("path", &path_prof, &path_site);
    eprintln!("{n} counts compared");
    check_escaped(&edge_site);
    check_escaped(&path_site);
    check_in_chromium(&[&edge_site, &path_site]);
}

#[test]
fn html_output_directory_safety_and_bad_input() {
    let dir = scratch("html-safety");
    // A missing profile: one line, exit status 2.
    let o = tally_html(&dir.join("site"), &dir.join("missing.tally"));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    // A symbolic link at a page's name is refused, not followed.
    let (_, prof, _) = demo_profile(&dir);
    // A regular file where the directory should be: one line naming it once.
    let file = dir.join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let o = tally_html(&file, &prof);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.lines().count() == 1
            && err.contains("cannot write")
            && err.matches("os error").count() == 1,
        "{err}"
    );
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::os::unix::fs::symlink(&victim, out.join("index.html")).unwrap();
    let o = tally_html(&out, &prof);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("refusing") && err.lines().count() == 1,
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    // Without the link the site is written, and rewritten over itself.
    std::fs::remove_file(out.join("index.html")).unwrap();
    for _ in 0..2 {
        let o = tally_html(&out, &prof);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            o.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Off a terminal (above) nothing but errors on stderr; on one (a pseudo-terminal from
    // util-linux `script`) a progress line counts the pages.
    let cmd = format!(
        "{} html -o {} {}",
        tally().display(),
        out.display(),
        prof.display()
    );
    let o = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("util-linux script");
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(shown.contains("tally: making"), "{shown:?}");
    assert!(shown.contains(" pages"), "{shown:?}");
    let names: BTreeSet<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.contains("index.html") && names.iter().all(|n| n.ends_with(".html")),
        "{names:?}"
    );
}

/// `testdata/dense/dense.c` (graphs whose layout was slow): functions of at most 60 blocks with
/// 2^26 paths or a switch in a loop with gotos, which made the layout take 50 s. Every function's
/// graph is drawn with each of its blocks and edges, counts as in the report. (The layout's
/// work is counted in `tally-report`'s `html::draw` unit tests; here only that it finishes.)
#[test]
fn html_dense_graphs_are_drawn_whole() {
    let dir = scratch("html-dense");
    let src = repo().join("testdata/dense/dense.c");
    build(
        Variant::Tally("edge"),
        false,
        &["-O2", "-g", src.to_str().unwrap()],
        &dir.join("dense"),
        &dir,
    );
    let prof = dir.join("dense.tally");
    let o = run(Path::new("./dense"), &["200"], &dir, &prof);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let site = dir.join("site");
    let o = tally_html(&site, &prof);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let by_fn = counts(&report_json(&prof));
    let mut drawn = BTreeSet::new();
    for (name, html) in pages(&site) {
        let Some(t) = tags(&html, "table", "data-cfg-hash").first().copied() else {
            continue;
        };
        let f = attr(t, "data-function").unwrap();
        let key = (
            attr(t, "data-module").unwrap(),
            f.clone(),
            attr(t, "data-cfg-hash").unwrap(),
        );
        let want = &by_fn[&key];
        assert!(html.contains("<svg"), "{name}: {f} has no graph");
        let ids = |what: &str| -> Vec<(String, Option<u64>)> {
            let mut v: Vec<(String, Option<u64>)> = tags(&html, "g", what)
                .iter()
                .map(|t| {
                    (
                        attr(t, what).unwrap(),
                        attr(t, "data-count").and_then(|c| count(&c)),
                    )
                })
                .filter(|(id, _)| id.parse::<u64>().is_ok())
                .collect();
            v.sort_by_key(|(id, _)| id.parse::<u64>().unwrap());
            v
        };
        let blocks: Vec<Option<u64>> = ids("data-block").into_iter().map(|b| b.1).collect();
        assert_eq!(blocks, want.blocks, "{f}: drawn blocks");
        let edges: Vec<Option<u64>> = ids("data-edge").into_iter().map(|e| e.1).collect();
        let want_edges: Vec<Option<u64>> = want.edges.iter().map(|e| e.3).collect();
        assert_eq!(edges, want_edges, "{f}: drawn edges");
        drawn.insert((f, want.blocks.len(), want.edges.len()));
    }
    eprintln!("drawn: {drawn:?}");
    let big = |n: &str| drawn.iter().any(|(f, b, e)| f == n && *b >= 30 && *e >= 60);
    assert!(big("steps") && big("machine"), "{drawn:?}");
}

/// A small profile: the util file alone, edge mode, -O0.
fn demo_profile(dir: &Path) -> (PathBuf, PathBuf, ()) {
    std::fs::write(
        dir.join("small.c"),
        format!("{UTIL}\nint main(void) {{ int a[3] = {{1, 2, 3}}; return util_sum(a, 3) == 2 ? 0 : classify(1); }}\n"),
    )
    .unwrap();
    build(
        Variant::Tally("edge"),
        false,
        &["-O0", "-g", "small.c"],
        &dir.join("small"),
        dir,
    );
    let prof = dir.join("small.tally");
    let o = run(Path::new("./small"), &[], dir, &prof);
    assert!(o.status.success());
    (dir.to_path_buf(), prof, ())
}
