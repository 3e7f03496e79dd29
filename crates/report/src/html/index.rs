//! The index page: totals, the directory tree, the flat sortable list of files and the list
//! of instrumented functions, all filtered by the search box.

use super::{count_text, esc, page, ratio_cell, Ctx};
use crate::source::Coverage;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A directory of the tree: subdirectories and files (name, page, coverage).
#[derive(Default)]
struct Dir {
    dirs: BTreeMap<String, Dir>,
    files: Vec<(String, String, Coverage)>,
}

impl Dir {
    fn lines(&self) -> (usize, usize) {
        let mut t = (0, 0);
        for d in self.dirs.values() {
            let (h, n) = d.lines();
            t.0 += h;
            t.1 += n;
        }
        for (_, _, c) in &self.files {
            t.0 += c.lines_hit;
            t.1 += c.lines;
        }
        t
    }

    fn render(&self, o: &mut String) {
        o.push_str("<ul class=\"tree\">");
        for (name, d) in &self.dirs {
            // A chain of directories with one subdirectory and no file is one entry.
            let (mut name, mut d) = (name.clone(), d);
            while d.files.is_empty() && d.dirs.len() == 1 {
                let (sub, next) = d.dirs.iter().next().expect("one subdirectory");
                name = format!("{name}/{sub}");
                d = next;
            }
            let (h, n) = d.lines();
            let _ = write!(
                o,
                "<li><details open><summary>{}/ <span class=\"pct\">{}/{} lines {}</span></summary>",
                esc(&name),
                h,
                n,
                crate::source::percent(h, n)
            );
            d.render(o);
            o.push_str("</details></li>");
        }
        for (name, href, c) in &self.files {
            let _ = write!(
                o,
                "<li data-name=\"{}\"><a href=\"{href}\">{}</a> <span class=\"pct\">{}/{} lines {}</span></li>",
                esc(name),
                esc(name),
                c.lines_hit,
                c.lines,
                crate::source::percent(c.lines_hit, c.lines)
            );
        }
        o.push_str("</ul>");
    }
}

pub(crate) fn render(ctx: &Ctx) -> String {
    let m = ctx.m;
    let mut b = String::new();
    let t = m.total();
    let _ = write!(
        b,
        "<header><h1>tally: {}</h1>\
<label>Search files and functions: <input id=\"q\" type=\"search\" placeholder=\"name\" autocomplete=\"off\"></label></header>",
        esc(ctx.title)
    );
    let prog = crate::program_line(&ctx.r.program);
    if !prog.is_empty() {
        let _ = write!(b, "<p class=\"muted\">{}</p>", esc(&prog));
    }
    let _ = write!(
        b,
        "<table class=\"list\" id=\"totals\"><tr><th>Lines</th><th>Branches</th><th>Functions</th><th class=\"num\">Instrumented functions</th></tr><tr>{}{}{}<td class=\"num\">{}</td></tr></table>",
        ratio_cell(t.lines_hit, t.lines),
        ratio_cell(t.branches_hit, t.branches),
        ratio_cell(t.functions_hit, t.functions),
        ctx.r.functions.len()
    );
    if m.files.is_empty() {
        b.push_str("<p>No source lines: build with <code>-g</code> to see files and lines.</p>");
    }

    // Directory tree.
    let mut root = Dir::default();
    let mut rows = String::new();
    for (i, (path, f)) in m.files.iter().enumerate() {
        let c = m.file_coverage(path);
        let href = ctx.file_page(i);
        let mut parts: Vec<&str> = path.split('/').collect();
        let name = parts.pop().unwrap_or_default().to_string();
        let mut d = &mut root;
        for p in parts {
            d = d.dirs.entry(p.to_string()).or_default();
        }
        d.files.push((name, href.clone(), c));
        let (sum, max) = f
            .lines
            .values()
            .fold((Some(0u64), 0u64), |(s, mx), l| match l.count {
                Some(c) => (s.map(|s| s.saturating_add(c)), mx.max(c)),
                None => (None, mx),
            });
        let _ = write!(
            rows,
            "<tr data-name=\"{p}\" data-file=\"{p}\" data-lines=\"{}\" data-lines-hit=\"{}\" data-branches=\"{}\" data-branches-hit=\"{}\" data-functions=\"{}\" data-functions-hit=\"{}\"><td><a href=\"{href}\">{p}</a></td>{}{}{}<td class=\"num\" data-sort=\"{}\">{}</td><td class=\"num\" data-sort=\"{max}\">{max}</td></tr>",
            c.lines,
            c.lines_hit,
            c.branches,
            c.branches_hit,
            c.functions,
            c.functions_hit,
            ratio_cell(c.lines_hit, c.lines),
            ratio_cell(c.branches_hit, c.branches),
            ratio_cell(c.functions_hit, c.functions),
            sum.map_or(-1, |s| s as i128),
            count_text(sum),
            p = esc(path),
        );
    }
    if !m.files.is_empty() {
        b.push_str("<h2>Directories</h2>");
        root.render(&mut b);
        b.push_str(
            "<h2>Files</h2><p class=\"help\">Click a column header to sort. Line executions: the sum of the line counts; hottest line: the largest.</p>\
<table class=\"list\" id=\"files\"><thead><tr><th class=\"sort\">File</th><th class=\"sort num\">Lines</th><th class=\"sort num\">Branches</th><th class=\"sort num\">Functions</th><th class=\"sort num\">Line executions</th><th class=\"sort num\">Hottest line</th></tr></thead><tbody>",
        );
        b.push_str(&rows);
        b.push_str("</tbody></table>");
    }

    // Instrumented functions.
    b.push_str(
        "<h2>Functions</h2><p class=\"help\">Every instrumented function, hottest first; the name leads to its control-flow graph.</p>\
<table class=\"list\" id=\"functions\"><thead><tr><th class=\"sort\">Function</th><th class=\"sort\">Defined at</th><th class=\"sort num\">Calls</th><th class=\"sort num\">Block executions</th><th class=\"sort num\">Blocks</th></tr></thead><tbody>",
    );
    for (i, f) in ctx.r.functions.iter().enumerate() {
        let at = ctx.defined_at(f);
        let unknown = f.inconsistent.is_some();
        let calls = if unknown {
            "?".to_string()
        } else {
            f.entry_count.to_string()
        };
        let execs_unknown = unknown || !f.blocks_known();
        let execs = if execs_unknown {
            "?".to_string()
        } else {
            f.block_executions.to_string()
        };
        let _ = write!(
            b,
            "<tr data-name=\"{n}\" data-fn=\"{i}\"><td><a href=\"{}\" title=\"{n}\">{short}</a></td><td>{at}</td><td class=\"num\" data-sort=\"{}\">{calls}</td><td class=\"num\" data-sort=\"{}\">{execs}</td><td class=\"num\" data-sort=\"{nb}\">{nb}</td></tr>",
            ctx.fn_page(i),
            if unknown { -1 } else { f.entry_count as i128 },
            if execs_unknown { -1 } else { f.block_executions as i128 },
            n = esc(&f.demangled),
            short = esc(&crate::names::short_name(
                &f.demangled,
                crate::names::SHORT_NAME_MAX
            )),
            nb = f.blocks.len(),
        );
    }
    b.push_str("</tbody></table>");
    page(&format!("tally: {}", ctx.title), &b)
}
