//! Rendering a [`Report`] as text for people and as JSON for tools
//! (schema: `docs/report-json.md`, `"schema": "tally-report/1"`).
//!
//! A report made by [`analyze`](crate::analyze) from validated metadata names only blocks it
//! has; the renderers still look blocks up with `get`, so a hand-made [`Report`] that names
//! others prints `?` for their location instead of panicking.

use crate::{FunctionReport, Report};
use serde::Serialize;
use std::fmt::Write as _;

/// A function's name as text tables and headers show it ([`crate::names::short_name`]).
fn short_fn(demangled: &str) -> std::borrow::Cow<'_, str> {
    crate::names::short_name(demangled, crate::names::SHORT_NAME_MAX)
}

/// Text rendering options.
#[derive(Clone, Debug)]
pub struct TextOptions {
    /// How many functions to list in the summary table (0 = all).
    pub top: usize,
    /// How many functions to detail with blocks and edges (0 = all).
    pub detail: usize,
    /// How many blocks to show per detailed function (0 = all).
    pub blocks: usize,
    /// Show functions that never ran.
    pub show_unexecuted: bool,
    /// Quote the source line of each block when the file can be read.
    pub source: bool,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            top: 20,
            detail: 5,
            blocks: 10,
            show_unexecuted: false,
            source: true,
        }
    }
}

fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn where_(file: &Option<String>, line: u32) -> String {
    match (file, line) {
        (Some(f), 0) => short(f).to_string(),
        (Some(f), l) => format!("{}:{l}", short(f)),
        (None, 0) => "?".into(),
        (None, l) => format!("?:{l}"),
    }
}

/// Source files read for quoting, by path (`None` when unreadable).
#[derive(Default)]
struct Sources(std::collections::HashMap<String, Option<SourceText>>);

/// A source file read once: its bytes and where each line starts (one allocation for the
/// file, not one per line: SQLite's amalgamation has 260,000 lines); a quoted line is decoded
/// (UTF-8, lossily) on its own.
struct SourceText {
    bytes: Vec<u8>,
    starts: Vec<usize>,
}

impl Sources {
    fn line(&mut self, file: &Option<String>, line: u32) -> Option<String> {
        let f = file.as_ref()?;
        if line == 0 {
            return None;
        }
        if !self.0.contains_key(f) {
            let read = std::fs::read(f).ok().map(|bytes| {
                let starts = std::iter::once(0)
                    .chain(memchr::memchr_iter(b'\n', &bytes).map(|i| i + 1))
                    .collect();
                SourceText { bytes, starts }
            });
            self.0.insert(f.clone(), read);
        }
        let src = self.0.get(f)?.as_ref()?;
        let i = line as usize - 1;
        let start = *src.starts.get(i)?;
        if start >= src.bytes.len() {
            return None; // (the empty "line" after a final newline, which `str::lines` omits)
        }
        let end = src.starts.get(i + 1).map_or(src.bytes.len(), |&e| e - 1);
        // (`str::lines` also drops a `\r` before the `\n`; `trim` does here.)
        let decoded = String::from_utf8_lossy(src.bytes.get(start..end)?);
        let text = decoded.trim();
        let mut t: String = text.chars().take(60).collect();
        if text.chars().count() > 60 {
            t.push_str("...");
        }
        Some(t)
    }
}

fn num(v: Option<u64>) -> String {
    match v {
        Some(v) => v.to_string(),
        None => "?".into(),
    }
}

/// Renders an events-mode report: the total, functions by exclusive events, hottest call sites.
fn events_text(r: &Report, title: &str, o: &TextOptions, kind: &str, total: u64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "tally report: {title}\n{}events ({kind}): {total} in the thread that ended the program\n",
        crate::program_line(&r.program)
    );
    let mut fs: Vec<(&FunctionReport, &crate::FunctionEvents)> = r
        .functions
        .iter()
        .filter_map(|f| f.events.as_ref().map(|e| (f, e)))
        .filter(|(_, e)| o.show_unexecuted || e.inclusive > 0)
        .collect();
    fs.sort_by(|a, b| {
        b.1.exclusive
            .cmp(&a.1.exclusive)
            .then(a.0.name.cmp(&b.0.name))
    });
    let n = if o.top == 0 {
        fs.len()
    } else {
        o.top.min(fs.len())
    };
    let _ = writeln!(s, "Functions by exclusive events (completed activations):");
    let _ = writeln!(
        s,
        "{:>16} {:>16} {:>6}  {:<40} location",
        "exclusive", "inclusive", "%", "function"
    );
    for (f, e) in &fs[..n] {
        let pct = if total == 0 {
            0.0
        } else {
            100.0 * e.exclusive as f64 / total as f64
        };
        let _ = writeln!(
            s,
            "{:>16} {:>16} {:>6.2}  {:<40} {}",
            e.exclusive,
            e.inclusive,
            pct,
            short_fn(&f.demangled),
            where_(&f.file, f.line)
        );
    }
    if fs.len() > n {
        let _ = writeln!(s, "  ... {} more (--top 0 shows all)", fs.len() - n);
    }
    let mut sites: Vec<(&FunctionReport, &crate::CallSiteEvents)> = fs
        .iter()
        .flat_map(|(f, e)| e.calls.iter().map(move |c| (*f, c)))
        .filter(|(_, c)| c.2 > 0)
        .collect();
    sites.sort_by(|a, b| b.1 .2.cmp(&a.1 .2).then(a.0.name.cmp(&b.0.name)));
    let n = if o.top == 0 {
        sites.len()
    } else {
        o.top.min(sites.len())
    };
    let _ = writeln!(
        s,
        "\nCall sites by events inside their calls (callees included):"
    );
    for (f, (block, callee, ev)) in &sites[..n] {
        let (file, line) = f
            .blocks
            .get(*block as usize)
            .map_or((None, 0), |b| (b.file.clone(), b.line));
        let _ = writeln!(
            s,
            "{:>16}  {} -> {}  at {}",
            ev,
            short_fn(&f.demangled),
            callee
                .as_deref()
                .map(crate::demangle)
                .unwrap_or_else(|| "(indirect)".into()),
            where_(&file, line)
        );
    }
    s
}

/// Renders the report as text.
pub fn text(r: &Report, title: &str, o: &TextOptions) -> String {
    if let Some((kind, total)) = &r.events {
        return events_text(r, title, o, kind, *total);
    }
    let mut s = String::new();
    let modes: Vec<_> = r.modes.iter().map(|m| m.name()).collect();
    let executed = r.functions.iter().filter(|f| f.entry_count > 0).count();
    let unknown = r.functions.iter().filter(|f| !f.entries_known()).count();
    let executed = if unknown == 0 {
        executed.to_string()
    } else {
        format!("{executed}+?")
    };
    let _ = writeln!(
        s,
        "tally report: {title}\n{}mode {}, {} modules, {} functions ({} executed, {} not instrumented), {} counters",
        crate::program_line(&r.program),
        modes.join("+"),
        r.modules.len(),
        r.functions.len(),
        executed,
        r.skipped.len(),
        r.counters
    );
    let total: u64 = r
        .functions
        .iter()
        .fold(0u64, |a, f| a.saturating_add(f.block_executions));
    let partial = r.functions.iter().filter(|f| !f.blocks_known()).count();
    if partial == 0 {
        let _ = writeln!(s, "block executions: {total}\n");
    } else {
        let _ = writeln!(
            s,
            "block executions: ? (block counts unknown in {partial} functions; known blocks: {total})\n"
        );
    }
    if r.unfinished {
        let _ = writeln!(
            s,
            "UNFINISHED continuous-mode profile (the program was killed): functions active at the kill have partial counts\n"
        );
    }
    if let Some(sig) = r.signal {
        let _ = writeln!(
            s,
            "FATAL SIGNAL ({}): the profile was written at it; functions active at that moment may have inexact counts\n",
            crate::signal_name(sig)
        );
    }
    if r.delta {
        let _ = writeln!(
            s,
            "SNAPSHOT PART: the counts since a snapshot of a process that went on (or of several): early exits are changes in waiting frames, shown unknown\n"
        );
    }
    if r.raced {
        let _ = writeln!(
            s,
            "RACED: code built without atomic increments ran in a multi-threaded process; its counts may have lost updates (build with -pthread or --tally-atomic)\n"
        );
    }
    for f in r.inconsistent() {
        let _ = writeln!(
            s,
            "{}: {} ({}): counts unknown: {}",
            r.unrecovered_word().to_uppercase(),
            f.demangled,
            f.module,
            f.inconsistent.as_deref().unwrap_or_default()
        );
    }

    let shown: Vec<&FunctionReport> = r
        .functions
        .iter()
        .filter(|f| {
            o.show_unexecuted || f.entry_count > 0 || f.inconsistent.is_some() || !f.entries_known()
        })
        .collect();
    let n = if o.top == 0 {
        shown.len()
    } else {
        o.top.min(shown.len())
    };
    let _ = writeln!(s, "Functions, hottest first:");
    let _ = writeln!(
        s,
        "{:>14} {:>16} {:>6}  {:<40} location",
        "entries", "block execs", "%", "function"
    );
    for f in &shown[..n] {
        let pct = if total == 0 {
            0.0
        } else {
            100.0 * f.block_executions as f64 / total as f64
        };
        let (execs, pct) = if f.blocks_known() {
            (f.block_executions.to_string(), format!("{pct:.2}"))
        } else {
            ("?".to_string(), "?".to_string())
        };
        let entries = match f.entries_known() {
            true => f.entry_count.to_string(),
            false => "?".to_string(),
        };
        let _ = writeln!(
            s,
            "{:>14} {:>16} {:>6}  {:<40} {}",
            entries,
            execs,
            pct,
            short_fn(&f.demangled),
            where_(&f.file, f.line)
        );
    }
    if shown.len() > n {
        let _ = writeln!(s, "  ... {} more (--top 0 shows all)", shown.len() - n);
    }

    let mut sources = Sources::default();
    let d = if o.detail == 0 {
        shown.len()
    } else {
        o.detail.min(shown.len())
    };
    for f in &shown[..d] {
        let _ = writeln!(
            s,
            "\n== {}  ({})  entries {}  blocks {}  edges {}  counters {}",
            short_fn(&f.demangled),
            where_(&f.file, f.line),
            if f.entries_known() {
                f.entry_count.to_string()
            } else {
                "?".to_string()
            },
            f.blocks.len(),
            f.edges.len(),
            f.counters
        );
        if let Some(why) = &f.inconsistent {
            let word = r.unrecovered_word().to_uppercase();
            let _ = writeln!(s, "   {word}, counts unknown: {why}");
        }
        let mut blocks: Vec<_> = f.blocks.iter().collect();
        blocks.sort_by(|a, b| b.count.cmp(&a.count).then(a.id.cmp(&b.id)));
        let nb = if o.blocks == 0 {
            blocks.len()
        } else {
            o.blocks.min(blocks.len())
        };
        let _ = writeln!(s, "   {:>8} {:>14}  line", "block", "count");
        for b in &blocks[..nb] {
            let quote = if o.source {
                sources
                    .line(&b.file, b.line)
                    .map(|t| format!("  | {t}"))
                    .unwrap_or_default()
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "   {:>8} {:>14}  {:<24}{}",
                format!("n{}", b.id),
                num(b.count),
                where_(&b.file, b.line),
                quote
            );
        }
        if blocks.len() > nb {
            let _ = writeln!(s, "   ... {} more blocks", blocks.len() - nb);
        }
        let mut edges: Vec<_> = f.edges.iter().collect();
        edges.sort_by(|a, b| b.count.cmp(&a.count).then(a.id.cmp(&b.id)));
        let ne = if o.blocks == 0 {
            edges.len()
        } else {
            o.blocks.min(edges.len())
        };
        let _ = writeln!(s, "   {:>18} {:>14}  kind", "edge", "count");
        for e in &edges[..ne] {
            let end = |v: Option<u32>| v.map_or("EXIT".to_string(), |b| format!("n{b}"));
            let _ = writeln!(
                s,
                "   {:>18} {:>14}  {}",
                format!("{} -> {}", end(e.from), end(e.to)),
                num(e.count),
                e.kind
            );
        }
        if edges.len() > ne {
            let _ = writeln!(s, "   ... {} more edges", edges.len() - ne);
        }
    }
    s
}

#[derive(Serialize)]
struct JsonReport<'a> {
    schema: &'static str,
    profile: &'a str,
    program: Option<JsonProgram>,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_kind: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_events: Option<u64>,
    modes: Vec<&'static str>,
    modules: &'a [String],
    counters: usize,
    counter_sum: u128,
    path_entry_sum: u128,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    unfinished: bool,
    /// Non-atomic code ran in a multi-threaded process: counts may have lost updates.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    raced: bool,
    /// The fatal signal at which the profile was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<u32>,
    /// Counts since a snapshot: early exits unknown.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    delta: bool,
    functions: Vec<JsonFunction<'a>>,
    skipped: Vec<JsonSkipped<'a>>,
    /// `--lines`: the source-level model (`files`, `source_functions`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    lines: Option<crate::show::LinesJson<'a>>,
}

#[derive(Serialize)]
struct JsonFunction<'a> {
    name: &'a str,
    demangled: &'a str,
    file: Option<&'a str>,
    line: u32,
    module: &'a str,
    mode: &'static str,
    cfg_hash: String,
    /// `None` when unknown (`trace-naive` counts nothing in its profile).
    entry_count: Option<u64>,
    /// `None` when some block count is unknown (`trace-naive`).
    block_executions: Option<u64>,
    counters: usize,
    copies: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    inconsistent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interrupted: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<JsonEvents<'a>>,
    blocks: Vec<JsonBlock<'a>>,
    edges: Vec<JsonEdge>,
}

#[derive(Serialize)]
pub(crate) struct JsonProgram {
    path: Option<String>,
    build_id: Option<String>,
    build_id_kind: &'static str,
}

pub(crate) fn json_program(p: &tally_format::profile::Program) -> Option<JsonProgram> {
    (!p.is_unknown()).then(|| JsonProgram {
        path: (!p.path.is_empty()).then(|| p.path_lossy()),
        build_id: (p.build_id != tally_format::profile::BuildId::None).then(|| p.build_id.hex()),
        build_id_kind: p.build_id.kind(),
    })
}

#[derive(Serialize)]
struct JsonEvents<'a> {
    inclusive: u64,
    exclusive: u64,
    calls: Vec<JsonCall<'a>>,
}

#[derive(Serialize)]
struct JsonCall<'a> {
    block: u32,
    callee: Option<&'a str>,
    events: u64,
}

#[derive(Serialize)]
struct JsonBlock<'a> {
    id: u32,
    count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<u64>,
    file: Option<&'a str>,
    line: u32,
}

#[derive(Serialize)]
struct JsonEdge {
    id: u32,
    from: Option<u32>,
    to: Option<u32>,
    kind: &'static str,
    count: Option<u64>,
}

#[derive(Serialize)]
struct JsonSkipped<'a> {
    name: &'a str,
    module: &'a str,
    reason: &'a str,
}

/// Renders the report as JSON (schema `tally-report/1`).
pub fn json(r: &Report, profile: &str) -> String {
    json_with(r, profile, None)
}

/// The JSON report with the source-level model's `files` and `source_functions` added
/// (`tally report --format json --lines`).
pub fn json_with_lines(r: &Report, profile: &str, m: &crate::source::SourceModel) -> String {
    json_with(r, profile, Some(crate::show::lines_json(m)))
}

fn json_with<'a>(
    r: &'a Report,
    profile: &'a str,
    lines: Option<crate::show::LinesJson<'a>>,
) -> String {
    let doc = JsonReport {
        lines,
        schema: "tally-report/1",
        profile,
        program: json_program(&r.program),
        event_kind: r.events.as_ref().map(|e| e.0.as_str()),
        total_events: r.events.as_ref().map(|e| e.1),
        modes: r.modes.iter().map(|m| m.name()).collect(),
        modules: &r.modules,
        counters: r.counters,
        counter_sum: r.counter_sum,
        path_entry_sum: r.path_entry_sum,
        unfinished: r.unfinished,
        raced: r.raced,
        signal: r.signal,
        delta: r.delta,
        functions: r
            .functions
            .iter()
            .map(|f| JsonFunction {
                name: &f.name,
                demangled: &f.demangled,
                file: f.file.as_deref(),
                line: f.line,
                module: &f.module,
                mode: f.mode.name(),
                cfg_hash: format!("{:016x}", f.cfg_hash),
                entry_count: f.entries_known().then_some(f.entry_count),
                block_executions: f.blocks_known().then_some(f.block_executions),
                counters: f.counters,
                copies: f.copies,
                inconsistent: f.inconsistent.as_deref().filter(|_| !r.unfinished),
                interrupted: f.inconsistent.as_deref().filter(|_| r.unfinished),
                events: f.events.as_ref().map(|e| JsonEvents {
                    inclusive: e.inclusive,
                    exclusive: e.exclusive,
                    calls: e
                        .calls
                        .iter()
                        .map(|c| JsonCall {
                            block: c.0,
                            callee: c.1.as_deref(),
                            events: c.2,
                        })
                        .collect(),
                }),
                blocks: f
                    .blocks
                    .iter()
                    .map(|b| JsonBlock {
                        id: b.id,
                        count: b.count,
                        events: f
                            .events
                            .as_ref()
                            .and_then(|e| e.per_block.get(b.id as usize).copied()),
                        file: b.file.as_deref(),
                        line: b.line,
                    })
                    .collect(),
                edges: f
                    .edges
                    .iter()
                    .map(|e| JsonEdge {
                        id: e.id,
                        from: e.from,
                        to: e.to,
                        kind: e.kind,
                        count: e.count,
                    })
                    .collect(),
            })
            .collect(),
        skipped: r
            .skipped
            .iter()
            .map(|s| JsonSkipped {
                name: &s.name,
                module: &s.module,
                reason: &s.reason,
            })
            .collect(),
    };
    let mut out = serde_json::to_string_pretty(&doc).expect("report serializes");
    out.push('\n');
    out
}

/// One path with the function it belongs to, for ranking.
struct Ranked<'a> {
    f: &'a FunctionReport,
    row: &'a crate::PathRow,
}

fn ranked(r: &Report) -> Vec<Ranked<'_>> {
    r.functions
        .iter()
        .filter_map(|f| f.paths.as_ref().map(|p| (f, p)))
        .flat_map(|(f, p)| p.rows.iter().map(move |row| Ranked { f, row }))
        .collect()
}

fn work(row: &crate::PathRow) -> u128 {
    u128::from(row.count) * row.blocks.len() as u128
}

fn path_line(s: &mut String, rank: usize, x: &Ranked, sources: &mut Sources, source: bool) {
    let f = x.f;
    let _ = writeln!(
        s,
        "{:>4}. {:>12} runs x {:>3} blocks  {}  path #{}  ({} -> {})",
        rank,
        x.row.count,
        x.row.blocks.len(),
        short_fn(&f.demangled),
        x.row.number,
        x.row.start,
        x.row.end
    );
    // Consecutive blocks on the same line share a row ("n19,n20"), so every block of the
    // path is named and each line is quoted once.
    let mut rows: Vec<(String, (Option<String>, u32))> = Vec::new();
    for &b in &x.row.blocks {
        let (file, line) = f
            .blocks
            .get(b as usize)
            .map_or((None, 0), |blk| (blk.file.clone(), blk.line));
        let key = (file, line);
        match rows.last_mut() {
            Some((ids, k)) if *k == key => {
                let _ = write!(ids, ",n{b}");
            }
            _ => rows.push((format!("n{b}"), key)),
        }
    }
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(6);
    for (ids, key) in rows {
        let quote = if source {
            sources
                .line(&key.0, key.1)
                .map(|t| format!("  | {t}"))
                .unwrap_or_default()
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "          {ids:<w$} {:<24}{}",
            where_(&key.0, key.1),
            quote
        );
    }
}

/// Renders the path profile: hottest paths, the paths doing the most work (runs x blocks),
/// and per function its potential and executed paths.
pub fn paths_text(r: &Report, title: &str, top: usize, source: bool) -> String {
    let sel = crate::ipaths::Select {
        top: (top > 0).then_some(top),
        function: None,
    };
    paths_text_with(r, title, top, source, &sel)
}

/// [`paths_text`], listing the interprocedural paths `sel` selects.
pub fn paths_text_with(
    r: &Report,
    title: &str,
    top: usize,
    source: bool,
    sel: &crate::ipaths::Select,
) -> String {
    if r.modes.iter().any(|m| {
        matches!(
            m,
            tally_format::Mode::Ipath | tally_format::Mode::IpathPiecewise
        )
    }) {
        return crate::ipaths::text(r, title, sel);
    }
    let mut s = String::new();
    let pf: Vec<&FunctionReport> = r.functions.iter().filter(|f| f.paths.is_some()).collect();
    let potential: u128 = pf
        .iter()
        .map(|f| f.paths.as_ref().map_or(0, |p| p.potential))
        .fold(0, u128::saturating_add);
    let executed: usize = pf
        .iter()
        .map(|f| f.paths.as_ref().map_or(0, |p| p.rows.len()))
        .sum();
    let _ = writeln!(
        s,
        "tally paths: {title}\n{}{} functions with path profiles, {} potential paths, {} executed",
        crate::program_line(&r.program),
        pf.len(),
        potential,
        executed
    );
    if pf.is_empty() {
        let _ = writeln!(s, "(no path profile: build with --tally-mode=path)");
        return s;
    }
    let mut sources = Sources::default();
    let mut all = ranked(r);
    let n = if top == 0 {
        all.len()
    } else {
        top.min(all.len())
    };
    all.sort_by(|a, b| {
        b.row
            .count
            .cmp(&a.row.count)
            .then(a.f.name.cmp(&b.f.name))
            .then(a.row.number.cmp(&b.row.number))
    });
    let _ = writeln!(s, "\nHottest paths:");
    for (i, x) in all.iter().take(n).enumerate() {
        path_line(&mut s, i + 1, x, &mut sources, source);
    }
    all.sort_by(|a, b| {
        work(b.row)
            .cmp(&work(a.row))
            .then(a.f.name.cmp(&b.f.name))
            .then(a.row.number.cmp(&b.row.number))
    });
    let _ = writeln!(s, "\nPaths doing the most work (runs x blocks):");
    for (i, x) in all.iter().take(n).enumerate() {
        path_line(&mut s, i + 1, x, &mut sources, source);
    }
    let _ = writeln!(s, "\nFunctions:");
    let _ = writeln!(
        s,
        "{:>22} {:>10} {:>14}  {:<40} storage",
        "potential paths", "executed", "path runs", "function"
    );
    let mut fs = pf.clone();
    fs.sort_by(|a, b| {
        b.block_executions
            .cmp(&a.block_executions)
            .then(a.name.cmp(&b.name))
    });
    let nf = if top == 0 {
        fs.len()
    } else {
        (top * 2).min(fs.len())
    };
    for f in &fs[..nf] {
        let p = f.paths.as_ref().expect("filtered");
        let runs: u64 = p.rows.iter().map(|r| r.count).fold(0, u64::saturating_add);
        let _ = writeln!(
            s,
            "{:>22} {:>10} {:>14}  {:<40} {}{}",
            p.potential,
            p.rows.len(),
            runs,
            short_fn(&f.demangled),
            if p.hashed { "hash" } else { "array" },
            if p.cuts.is_empty() {
                String::new()
            } else {
                format!(", {} cut edges", p.cuts.len())
            }
        );
    }
    if fs.len() > nf {
        let _ = writeln!(s, "  ... {} more (--top 0 shows all)", fs.len() - nf);
    }
    s
}

#[derive(Serialize)]
struct JsonPaths<'a> {
    schema: &'static str,
    profile: &'a str,
    program: Option<JsonProgram>,
    functions: Vec<JsonPathFunction<'a>>,
    /// Modes `ipath`, `ipath-piecewise`: the interprocedural paths, per module.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    interprocedural: Vec<crate::ipaths::JsonSet<'a>>,
}

#[derive(Serialize)]
struct JsonPathFunction<'a> {
    name: &'a str,
    demangled: &'a str,
    file: Option<&'a str>,
    line: u32,
    module: &'a str,
    cfg_hash: String,
    potential_paths: String,
    executed_paths: usize,
    storage: &'static str,
    cut_edges: &'a [u32],
    lost: u64,
    paths: Vec<JsonPath<'a>>,
}

#[derive(Serialize)]
struct JsonPath<'a> {
    number: String,
    count: u64,
    length: usize,
    start: &'static str,
    end: &'static str,
    blocks: &'a [u32],
}

/// Renders the path profile as JSON (schema `tally-paths/1`; path numbers and potential path
/// counts are decimal strings, since they can exceed 2^53).
pub fn paths_json(r: &Report, profile: &str) -> String {
    paths_json_with(r, profile, &crate::ipaths::Select::default())
}

/// [`paths_json`], listing the interprocedural paths `sel` selects.
pub fn paths_json_with(r: &Report, profile: &str, sel: &crate::ipaths::Select) -> String {
    let doc = JsonPaths {
        interprocedural: crate::ipaths::json(r, sel),
        schema: "tally-paths/1",
        profile,
        program: json_program(&r.program),
        functions: r
            .functions
            .iter()
            .filter_map(|f| f.paths.as_ref().map(|p| (f, p)))
            .map(|(f, p)| JsonPathFunction {
                name: &f.name,
                demangled: &f.demangled,
                file: f.file.as_deref(),
                line: f.line,
                module: &f.module,
                cfg_hash: format!("{:016x}", f.cfg_hash),
                potential_paths: p.potential.to_string(),
                executed_paths: p.rows.len(),
                storage: if p.hashed { "hash" } else { "array" },
                cut_edges: &p.cuts,
                lost: p.lost,
                paths: p
                    .rows
                    .iter()
                    .map(|row| JsonPath {
                        number: row.number.to_string(),
                        count: row.count,
                        length: row.blocks.len(),
                        start: row.start,
                        end: row.end,
                        blocks: &row.blocks,
                    })
                    .collect(),
            })
            .collect(),
    };
    let mut out = serde_json::to_string_pretty(&doc).expect("paths serialize");
    out.push('\n');
    out
}
