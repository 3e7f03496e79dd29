//! Text views of the source-level model ([`crate::source`]): annotated source like
//! `llvm-cov show` ([`show`], `tally show`), and the per-file and per-line summary of
//! `tally report --lines` ([`lines_text`]) with its JSON ([`lines_json`]).

use crate::names::{short_name, SHORT_NAME_MAX};
use crate::source::{percent, Coverage, LineCounts, SourceFunction, SourceModel};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;

/// What `tally show` prints.
pub struct ShowOptions<'a> {
    /// Only these functions' lines (`None`: whole files).
    pub function: Option<&'a dyn Fn(&SourceFunction) -> bool>,
    /// Only files whose path is one of these or ends with `/` and one of these (empty: all but
    /// the system headers, named in a closing note unless there is nothing else).
    pub files: Vec<String>,
    /// Print the branch counts under each line.
    pub branches: bool,
}

/// Whether `path` is named by `wanted` (equal, or ending in `/wanted`).
fn file_matches(path: &str, wanted: &[String]) -> bool {
    wanted.is_empty()
        || wanted.iter().any(|w| {
            let w = w.trim_start_matches("./");
            path == w || path.ends_with(&format!("/{w}"))
        })
}

/// Source files read for quoting, by path (`None` when unreadable).
#[derive(Default)]
pub(crate) struct SourceText(HashMap<String, Option<Vec<String>>>);

impl SourceText {
    /// The lines of a file, if it can be read.
    pub(crate) fn lines(&mut self, path: &str) -> Option<&[String]> {
        self.0
            .entry(path.to_string())
            .or_insert_with(|| {
                std::fs::read(path).ok().map(|b| {
                    String::from_utf8_lossy(&b)
                        .lines()
                        .map(|l| l.replace('\t', "    "))
                        .collect()
                })
            })
            .as_deref()
    }
}

/// The count column: the count, `#####` for a line that never ran, `?` when unknown, blank
/// for a line without code.
fn count_cell(l: Option<&LineCounts>) -> String {
    match l.map(|l| l.count) {
        None => String::new(),
        Some(None) => "?".into(),
        Some(Some(0)) => "#####".into(),
        Some(Some(c)) => c.to_string(),
    }
}

fn outcome(c: Option<u64>) -> String {
    match c {
        None => "?".into(),
        Some(0) => "never".into(),
        Some(c) => c.to_string(),
    }
}

/// Prints lines `from..=to` of a file with their counts (and branches).
fn print_range(
    out: &mut String,
    m: &SourceModel,
    text: &mut SourceText,
    o: &ShowOptions,
    width: usize,
    path: &str,
    (from, to): (u32, u32),
) {
    if from > to {
        return;
    }
    let file = m.files.get(path);
    let src = text.lines(path);
    // The file's lines in range, then lines with code past its end (never a loop over line
    // numbers the metadata made up).
    let len = src.map_or(0, |s| s.len() as u32);
    let mut numbers: Vec<u32> = (from..=to.min(len)).collect();
    if let Some(f) = file {
        numbers.extend(
            f.lines
                .range(from..=to)
                .map(|(&n, _)| n)
                .filter(|&n| n > len),
        );
    }
    for n in numbers {
        let l = file.and_then(|f| f.lines.get(&n));
        let t = src
            .and_then(|s| s.get((n as usize).wrapping_sub(1)))
            .map(String::as_str);
        if t.is_none() && l.is_none() {
            continue;
        }
        let _ = writeln!(
            out,
            "{:>width$}|{n:>6}|{}",
            count_cell(l),
            t.unwrap_or("<source not found>")
        );
        if o.branches {
            for (i, b) in l
                .map(|l| l.branches.as_slice())
                .unwrap_or(&[])
                .iter()
                .enumerate()
            {
                let outs: Vec<String> = b.outcomes.iter().map(|&c| outcome(c)).collect();
                let _ = writeln!(
                    out,
                    "{:>width$}|{:>6}|  branch {i}: {}",
                    "",
                    "",
                    outs.join(", ")
                );
            }
        }
    }
}

/// Annotated source: per file (or per selected function) every line with its count.
pub fn show(m: &SourceModel, o: &ShowOptions) -> String {
    let mut out = String::new();
    let mut text = SourceText::default();
    let width = m
        .files
        .values()
        .flat_map(|f| f.lines.values())
        .filter_map(|l| l.count)
        .max()
        .unwrap_or(0)
        .to_string()
        .len()
        .max(5);
    match o.function {
        Some(pred) => {
            for f in m.functions.iter().filter(|f| pred(f)) {
                let Some(path) = f.file.as_deref() else {
                    continue;
                };
                if !file_matches(path, &o.files) {
                    continue;
                }
                let last = f.lines.iter().next_back().copied().unwrap_or(f.line);
                let _ = writeln!(
                    out,
                    "{} ({path}:{}): {} ({} emitted, {} inlined)",
                    short_name(f.display_name(), SHORT_NAME_MAX),
                    f.line,
                    match f.count {
                        Some(c) => format!("{c} calls"),
                        None => "? calls".into(),
                    },
                    f.emitted,
                    f.inlined
                );
                print_range(
                    &mut out,
                    m,
                    &mut text,
                    o,
                    width,
                    path,
                    (f.line.max(1), last.max(f.line)),
                );
                out.push('\n');
            }
        }
        None => {
            // Named files are shown whatever they are; otherwise the program's own, and the
            // system headers whose inline functions ran only in a closing note (unless there
            // is nothing else), as gcovr keeps to the project's files by default.
            let own = |path: &str| !o.files.is_empty() || !is_system_header(path);
            let all = !m.files.keys().any(|p| own(p));
            let mut hidden = Vec::new();
            for (path, f) in &m.files {
                if !file_matches(path, &o.files) {
                    continue;
                }
                if !all && !own(path) {
                    hidden.push(path.as_str());
                    continue;
                }
                let _ = writeln!(out, "{path}:");
                let last = match text.lines(path) {
                    Some(l) => l.len() as u32,
                    None => f.lines.keys().next_back().copied().unwrap_or(0),
                };
                let last = last.max(f.lines.keys().next_back().copied().unwrap_or(0));
                print_range(&mut out, m, &mut text, o, width, path, (1, last));
                out.push('\n');
            }
            if !hidden.is_empty() {
                let _ = writeln!(
                    out,
                    "(not shown: {} system header{} with inlined code: {}; name one to \
                     show it)",
                    hidden.len(),
                    if hidden.len() == 1 { "" } else { "s" },
                    hidden.join(", ")
                );
            }
        }
    }
    out
}

/// Whether `path` is a system header (the C library's, the compiler's), whose inline
/// functions (`atoi`, `stat`, `fputc_unlocked`, ...) are counted like the program's own.
fn is_system_header(path: &str) -> bool {
    ["/usr/include/", "/usr/lib/"]
        .iter()
        .any(|d| path.starts_with(d))
}

fn cov_cells(c: &Coverage) -> [String; 3] {
    let cell = |hit: usize, total: usize, unknown: usize| {
        let mut t = format!("{hit}/{total} {}", percent(hit, total));
        if unknown > 0 {
            t += &format!(" ({unknown} unknown)");
        }
        t
    };
    [
        cell(c.lines_hit, c.lines, c.unknown[0]),
        cell(c.branches_hit, c.branches, c.unknown[1]),
        cell(c.functions_hit, c.functions, c.unknown[2]),
    ]
}

/// Shortens a path to its last two components for tables.
fn short(path: &str) -> &str {
    match path.rmatch_indices('/').nth(1) {
        Some((i, _)) => &path[i + 1..],
        None => path,
    }
}

/// `tally report --lines`: per-file coverage, the hottest lines (`top`, 0 = all) and the
/// source functions.
pub fn lines_text(m: &SourceModel, title: &str, top: usize, quote: bool) -> String {
    let mut out = String::new();
    let total = m.total();
    let [l, b, f] = cov_cells(&total);
    let _ = writeln!(out, "profile: {title}");
    let _ = writeln!(
        out,
        "lines executed: {l}   branches taken: {b}   functions executed: {f}"
    );
    out.push('\n');
    let rows: Vec<(String, [String; 3])> = m
        .files
        .keys()
        .map(|p| (short(p).to_string(), cov_cells(&m.file_coverage(p))))
        .collect();
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(4).max(4);
    let w = |k: usize| rows.iter().map(|r| r.1[k].len()).max().unwrap_or(0).max(9);
    let (w1, w2, w3) = (w(0), w(1), w(2));
    let _ = writeln!(
        out,
        "{:<w0$}  {:>w1$}  {:>w2$}  {:>w3$}",
        "file", "lines", "branches", "functions"
    );
    for (p, [a, b, c]) in &rows {
        let _ = writeln!(out, "{p:<w0$}  {a:>w1$}  {b:>w2$}  {c:>w3$}");
    }
    out.push('\n');
    let hot = m.hottest_lines();
    let n = if top == 0 {
        hot.len()
    } else {
        top.min(hot.len())
    };
    let _ = writeln!(out, "hottest lines ({n} of {}):", hot.len());
    let mut text = SourceText::default();
    let cw = hot
        .first()
        .and_then(|h| h.2.count)
        .unwrap_or(0)
        .to_string()
        .len()
        .max(5);
    let aw = hot
        .iter()
        .take(n)
        .map(|(path, line, _)| short(path).len() + 1 + line.to_string().len())
        .max()
        .unwrap_or(0);
    for (path, line, lc) in hot.iter().take(n) {
        let at = format!("{}:{line}", short(path));
        let q = if quote {
            text.lines(path)
                .and_then(|s| s.get(*line as usize - 1))
                .map(|t| format!("  | {}", t.trim()))
                .unwrap_or_default()
        } else {
            String::new()
        };
        let c = match lc.count {
            Some(c) => c.to_string(),
            None => "?".into(),
        };
        let _ = writeln!(out, "{}", format!("{c:>cw$}  {at:<aw$}{q}").trim_end());
    }
    out.push('\n');
    let _ = writeln!(out, "functions ({}):", m.functions.len());
    let mut funcs: Vec<&SourceFunction> = m.functions.iter().collect();
    funcs.sort_by(|a, b| {
        b.count
            .map(|c| c as u128 + 1)
            .cmp(&a.count.map(|c| c as u128 + 1))
            .then(a.display_name().cmp(b.display_name()))
    });
    // One row per function, in columns: count, name, location, lines run, how it was emitted.
    let mut table = Vec::with_capacity(funcs.len());
    for f in funcs {
        let hit = f.lines.iter().filter(|&&n| {
            f.file
                .as_ref()
                .and_then(|p| m.files.get(p))
                .and_then(|fc| fc.lines.get(&n))
                .is_some_and(|l| l.count.is_some_and(|c| c > 0))
        });
        let c = match f.count {
            Some(c) => c.to_string(),
            None => "?".into(),
        };
        let at = match &f.file {
            Some(p) => format!("{}:{}", short(p), f.line),
            None => "?".into(),
        };
        let how = match (f.emitted, f.inlined) {
            (0, i) => format!("inlined {i}x"),
            (_, 0) => String::new(),
            (_, i) => format!("also inlined {i}x"),
        };
        let lines = format!("lines {}/{}", hit.count(), f.lines.len());
        let name = short_name(f.display_name(), SHORT_NAME_MAX).into_owned();
        table.push([c, name, at, lines, how]);
    }
    let width = |k: usize| {
        table
            .iter()
            .map(|r| r[k].chars().count())
            .max()
            .unwrap_or(0)
    };
    // (A long C++ name overflows its column rather than pushing every row right.)
    let (fw, nw, lw, hw) = (width(0).max(cw), width(1).min(40), width(2), width(3));
    for [c, name, at, lines, how] in &table {
        let row = format!("{c:>fw$}  {name:<nw$}  {at:<lw$}  {lines:<hw$}  {how}");
        let _ = writeln!(out, "{}", row.trim_end());
    }
    out
}

/// The `files` and `source_functions` fields `tally report --format json --lines` adds
/// (docs/report-json.md).
#[derive(Serialize)]
pub struct LinesJson<'a> {
    files: Vec<JsonFile<'a>>,
    source_functions: Vec<JsonSourceFunction<'a>>,
}

#[derive(Serialize)]
struct JsonCoverage {
    lines: usize,
    lines_hit: usize,
    branches: usize,
    branches_hit: usize,
    functions: usize,
    functions_hit: usize,
}

#[derive(Serialize)]
struct JsonFile<'a> {
    path: &'a str,
    summary: JsonCoverage,
    lines: Vec<JsonLine>,
}

#[derive(Serialize)]
struct JsonLine {
    line: u32,
    count: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    branches: Vec<Vec<Option<u64>>>,
}

#[derive(Serialize)]
struct JsonSourceFunction<'a> {
    name: &'a str,
    linkage_name: &'a str,
    demangled: &'a str,
    file: Option<&'a str>,
    line: u32,
    count: Option<u64>,
    emitted: usize,
    inlined: usize,
    lines: Vec<u32>,
}

/// The source-level model as the JSON report's extra fields.
pub fn lines_json(m: &SourceModel) -> LinesJson<'_> {
    LinesJson {
        files: m
            .files
            .iter()
            .map(|(p, f)| {
                let c = m.file_coverage(p);
                JsonFile {
                    path: p,
                    summary: JsonCoverage {
                        lines: c.lines,
                        lines_hit: c.lines_hit,
                        branches: c.branches,
                        branches_hit: c.branches_hit,
                        functions: c.functions,
                        functions_hit: c.functions_hit,
                    },
                    lines: f
                        .lines
                        .iter()
                        .map(|(&n, l)| JsonLine {
                            line: n,
                            count: l.count,
                            branches: l.branches.iter().map(|b| b.outcomes.clone()).collect(),
                        })
                        .collect(),
                }
            })
            .collect(),
        source_functions: m
            .functions
            .iter()
            .map(|f| JsonSourceFunction {
                name: &f.name,
                linkage_name: &f.linkage_name,
                demangled: &f.demangled,
                file: f.file.as_deref(),
                line: f.line,
                count: f.count,
                emitted: f.emitted,
                inlined: f.inlined,
                lines: f.lines.iter().copied().collect(),
            })
            .collect(),
    }
}
