//! A source file's page: its source functions, then every line with the exact count of the
//! source-level model and its branch outcomes, on the heat scale. Keyboard: `n`/`p` next and
//! previous hot line, `u`/`U` next and previous line that never ran.

use super::{count_text, esc, heat, legend, page, ratio_cell, Ctx};
use crate::show::SourceText;
use std::fmt::Write as _;

pub(crate) fn render(ctx: &Ctx, path: &str, text: &mut SourceText) -> String {
    let m = ctx.m;
    let file = &m.files[path];
    let c = m.file_coverage(path);
    let mut b = String::new();
    let _ = write!(
        b,
        "<header><h1><a href=\"index.html\">tally</a> / {}</h1>\
<div class=\"help\">Keys: <kbd>n</kbd>/<kbd>p</kbd> next/previous hot line (ran at least a tenth as often as this file's hottest line), \
<kbd>u</kbd>/<kbd>U</kbd> next/previous line that never ran. {}</div></header>",
        esc(path),
        legend(ctx.max_line)
    );
    let _ = write!(
        b,
        "<table class=\"list\" id=\"totals\"><tr><th>Lines</th><th>Branches</th><th>Functions</th></tr><tr>{}{}{}</tr></table>",
        ratio_cell(c.lines_hit, c.lines),
        ratio_cell(c.branches_hit, c.branches),
        ratio_cell(c.functions_hit, c.functions)
    );

    // Source functions defined here (inlined ones included) and their graphs.
    let fns: Vec<_> = m.functions_in(path).collect();
    if !fns.is_empty() {
        b.push_str(
            "<details><summary><h2 class=\"inline\">Functions</h2> defined in this file, inlined ones included, with their counts</summary><table class=\"list\" id=\"source-functions\"><thead><tr><th class=\"sort\">Function</th><th class=\"sort num\">Line</th><th class=\"sort num\">Count</th><th class=\"num\">Emitted</th><th class=\"num\">Inlined</th><th>Control-flow graphs</th></tr></thead><tbody>",
        );
        for f in fns {
            let mut graphs = String::new();
            for (i, g) in ctx.r.functions.iter().enumerate() {
                if g.name == f.symbol() || g.name == f.name {
                    let _ = write!(
                        graphs,
                        "<a href=\"{}\">{}</a> ",
                        ctx.fn_page(i),
                        esc(&g.module)
                    );
                }
            }
            let _ = write!(
                b,
                "<tr data-name=\"{n}\" data-count=\"{cnt}\"><td><a href=\"#L{l}\" title=\"{n}\">{short}</a></td><td class=\"num\" data-sort=\"{l}\">{l}</td><td class=\"num\" data-sort=\"{}\">{cnt}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{graphs}</td></tr>",
                f.count.map_or(-1, |c| c as i128),
                f.emitted,
                f.inlined,
                n = esc(f.display_name()),
                short = esc(&crate::names::short_name(
                    f.display_name(),
                    crate::names::SHORT_NAME_MAX
                )),
                l = f.line,
                cnt = count_text(f.count),
            );
        }
        b.push_str("</tbody></table></details>");
    }

    let max_here = file
        .lines
        .values()
        .filter_map(|l| l.count)
        .max()
        .unwrap_or(0);
    let src = text.lines(path);
    let len = src.map_or(0, |s| s.len() as u32);
    let last = len.max(file.lines.keys().next_back().copied().unwrap_or(0));
    b.push_str("<h2>Source</h2>");
    if src.is_none() {
        b.push_str("<p class=\"muted\">The source file could not be read; only the lines with code are listed.</p>");
    }
    let _ = write!(
        b,
        "<table class=\"src\" data-file=\"{}\"><thead><tr><th class=\"num\">Line</th><th class=\"num\">Count</th><th>Source</th><th>Branches (taken counts per outcome)</th></tr></thead><tbody>",
        esc(path)
    );
    let numbers: Box<dyn Iterator<Item = u32>> = if src.is_some() {
        Box::new(1..=last)
    } else {
        Box::new(file.lines.keys().copied())
    };
    for n in numbers {
        let l = file.lines.get(&n);
        let t = src
            .and_then(|s| s.get((n as usize).wrapping_sub(1)))
            .map(String::as_str);
        let Some(l) = l else {
            let _ = writeln!(
                b,
                "<tr id=\"L{n}\"><td class=\"n\">{n}</td><td class=\"c\"></td><td class=\"t\">{}</td><td class=\"b\"></td></tr>",
                esc(t.unwrap_or_default())
            );
            continue;
        };
        let class = match l.count {
            Some(0) => "unrun".to_string(),
            c => format!("h{}", heat(c, ctx.max_line)),
        };
        let hot = matches!(l.count, Some(c) if c > 0 && c.saturating_mul(10) >= max_here);
        let mut br = String::new();
        for (i, bc) in l.branches.iter().enumerate() {
            let outs: Vec<String> = bc
                .outcomes
                .iter()
                .map(|&o| match o {
                    Some(0) => "<span class=\"br0\">0</span>".to_string(),
                    o => count_text(o),
                })
                .collect();
            let data: Vec<String> = bc.outcomes.iter().map(|&o| count_text(o)).collect();
            let _ = write!(
                br,
                "<span class=\"br\" data-outcomes=\"{}\">b{i}: {}</span> ",
                data.join(" "),
                outs.join(" / ")
            );
        }
        let _ = writeln!(
            b,
            "<tr id=\"L{n}\" class=\"{class}\" data-line=\"{n}\" data-count=\"{cnt}\"{}><td class=\"n\">{n}</td><td class=\"c\">{cnt}</td><td class=\"t\">{}</td><td class=\"b\">{br}</td></tr>",
            if hot { " data-hot=\"\"" } else { "" },
            esc(t.unwrap_or("<source not found>")),
            cnt = count_text(l.count),
        );
    }
    b.push_str("</tbody></table>");
    page(&format!("tally: {path}"), &b)
}
