//! Cobertura XML export of the source-level model (`tally report --export cobertura`), valid
//! against Cobertura's `coverage-04.dtd` (the test validates it with `xmllint --dtdvalid`).
//!
//! Mapping: one `package` per directory, one `class` per source file (named by the file's
//! path), one `method` per source function defined in it (with the lines of its own code),
//! one `line` per line with code: `hits` its exact count, and for lines with branches
//! `branch="true"`, `condition-coverage="P% (taken/outcomes)"` and one `condition` per
//! conditional branch or switch of the line (`type="jump"` for two outcomes, `switch` for
//! more). Rates are taken outcomes over outcomes and executed lines over lines. Lines with an
//! undetermined count are left out; `complexity` is not computed (0). No `DOCTYPE` is written
//! (validators would fetch the DTD from the network); the document validates against the DTD.

use crate::source::{Coverage, LineCounts, SourceModel};
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, Event};
use quick_xml::Writer;
use std::collections::BTreeMap;

fn rate(hit: usize, total: usize) -> String {
    if total == 0 {
        "1".into()
    } else {
        format!("{:.4}", hit as f64 / total as f64)
    }
}

fn dir_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => ".",
    }
}

/// Branch outcomes of a line: (taken, total).
fn outcomes(l: &LineCounts) -> (usize, usize) {
    let total = l.branches.iter().map(|b| b.outcomes.len()).sum();
    let taken = l
        .branches
        .iter()
        .flat_map(|b| &b.outcomes)
        .filter(|o| o.is_some_and(|c| c > 0))
        .count();
    (taken, total)
}

type W = Writer<Vec<u8>>;

/// Text XML 1.0 can hold: characters it forbids (control characters from crafted metadata)
/// become U+FFFD.
fn clean(v: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && !matches!(c, '\t' | '\n' | '\r');
    if v.chars().any(bad) {
        v.chars()
            .map(|c| if bad(c) { '\u{fffd}' } else { c })
            .collect::<String>()
            .into()
    } else {
        v.into()
    }
}

fn tag<'a>(name: &'a str, attrs: &[(&str, &str)]) -> BytesStart<'a> {
    let mut e = BytesStart::new(name);
    for (k, v) in attrs {
        e.push_attribute((*k, clean(v).as_ref()));
    }
    e
}

fn start(w: &mut W, name: &str, attrs: &[(&str, &str)]) {
    let e = tag(name, attrs);
    w.write_event(Event::Start(e)).expect("writing to a Vec");
}

fn empty(w: &mut W, name: &str, attrs: &[(&str, &str)]) {
    let e = tag(name, attrs);
    w.write_event(Event::Empty(e)).expect("writing to a Vec");
}

fn end(w: &mut W, name: &str) {
    w.write_event(Event::End(BytesEnd::new(name)))
        .expect("writing to a Vec");
}

/// Writes `<lines>` for the given lines of a file.
fn lines<'a>(w: &mut W, ls: impl Iterator<Item = (u32, &'a LineCounts)>) {
    start(w, "lines", &[]);
    for (n, l) in ls {
        let Some(hits) = l.count else { continue };
        let (number, hits) = (n.to_string(), hits.to_string());
        if l.branches.is_empty() {
            empty(
                w,
                "line",
                &[("number", &number), ("hits", &hits), ("branch", "false")],
            );
            continue;
        }
        let (taken, total) = outcomes(l);
        let cc = format!(
            "{}% ({taken}/{total})",
            (taken * 100).checked_div(total).unwrap_or(100)
        );
        start(
            w,
            "line",
            &[
                ("number", &number),
                ("hits", &hits),
                ("branch", "true"),
                ("condition-coverage", &cc),
            ],
        );
        start(w, "conditions", &[]);
        for (i, b) in l.branches.iter().enumerate() {
            let t = b
                .outcomes
                .iter()
                .filter(|o| o.is_some_and(|c| c > 0))
                .count();
            let n = b.outcomes.len();
            let pct = format!("{}%", (t * 100).checked_div(n).unwrap_or(100));
            empty(
                w,
                "condition",
                &[
                    ("number", &i.to_string()),
                    ("type", if n == 2 { "jump" } else { "switch" }),
                    ("coverage", &pct),
                ],
            );
        }
        end(w, "conditions");
        end(w, "line");
    }
    end(w, "lines");
}

/// The Cobertura document.
pub fn cobertura(m: &SourceModel) -> String {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))
        .expect("writing to a Vec");
    let t = m.total();
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .to_string();
    let version = format!("tally {}", env!("CARGO_PKG_VERSION"));
    start(
        &mut w,
        "coverage",
        &[
            ("line-rate", &rate(t.lines_hit, t.lines)),
            ("branch-rate", &rate(t.branches_hit, t.branches)),
            ("lines-covered", &t.lines_hit.to_string()),
            ("lines-valid", &t.lines.to_string()),
            ("branches-covered", &t.branches_hit.to_string()),
            ("branches-valid", &t.branches.to_string()),
            ("complexity", "0"),
            ("version", &version),
            ("timestamp", &timestamp),
        ],
    );
    start(&mut w, "sources", &[]);
    empty(&mut w, "source", &[]);
    end(&mut w, "sources");
    start(&mut w, "packages", &[]);
    let mut packages: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for p in m.files.keys() {
        packages.entry(dir_of(p)).or_default().push(p);
    }
    for (dir, files) in packages {
        let mut c = Coverage::default();
        for f in &files {
            let fc = m.file_coverage(f);
            c.lines += fc.lines;
            c.lines_hit += fc.lines_hit;
            c.branches += fc.branches;
            c.branches_hit += fc.branches_hit;
        }
        start(
            &mut w,
            "package",
            &[
                ("name", dir),
                ("line-rate", &rate(c.lines_hit, c.lines)),
                ("branch-rate", &rate(c.branches_hit, c.branches)),
                ("complexity", "0"),
            ],
        );
        start(&mut w, "classes", &[]);
        for path in files {
            let fc = m.file_coverage(path);
            let file = &m.files[path];
            start(
                &mut w,
                "class",
                &[
                    ("name", path),
                    ("filename", path),
                    ("line-rate", &rate(fc.lines_hit, fc.lines)),
                    ("branch-rate", &rate(fc.branches_hit, fc.branches)),
                    ("complexity", "0"),
                ],
            );
            start(&mut w, "methods", &[]);
            for f in m.functions_in(path) {
                let own: Vec<(u32, &LineCounts)> = f
                    .lines
                    .iter()
                    .filter_map(|n| file.lines.get(n).map(|l| (*n, l)))
                    .collect();
                let lh = own
                    .iter()
                    .filter(|(_, l)| l.count.is_some_and(|c| c > 0))
                    .count();
                let (bh, bt) = own.iter().fold((0, 0), |(a, b), (_, l)| {
                    let (x, y) = outcomes(l);
                    (a + x, b + y)
                });
                start(
                    &mut w,
                    "method",
                    &[
                        ("name", f.display_name()),
                        ("signature", ""),
                        ("line-rate", &rate(lh, own.len())),
                        ("branch-rate", &rate(bh, bt)),
                        ("complexity", "0"),
                    ],
                );
                lines(&mut w, own.into_iter());
                end(&mut w, "method");
            }
            end(&mut w, "methods");
            lines(&mut w, file.lines.iter().map(|(&n, l)| (n, l)));
            end(&mut w, "class");
        }
        end(&mut w, "classes");
        end(&mut w, "package");
    }
    end(&mut w, "packages");
    end(&mut w, "coverage");
    let mut s = String::from_utf8(w.into_inner()).expect("the writer writes UTF-8");
    s.push('\n');
    s
}
