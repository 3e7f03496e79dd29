//! A function's page: its control-flow graph drawn by [`draw`] (the `layout-rs` crate's
//! Sugiyama layout at a cost bounded by the graph's size, SVG rendered at generation time)
//! with each block's count and source lines, edge width by count and, in path profiles, the
//! hottest path highlighted (the others on a click in the paths table); then tables of the
//! blocks, edges and paths. Functions with more than
//! [`MAX_GRAPH_BLOCKS`](super::MAX_GRAPH_BLOCKS) blocks, that never ran, whose counts are
//! unknown or that are not among the [`MAX_GRAPHS`](super::MAX_GRAPHS) hottest drawable ones get
//! the tables only, and the page says why.

use super::draw::{self, Edge, Node};
use super::{count_text, esc, heat, heat_color, page, Ctx, MAX_GRAPHS, MAX_GRAPH_BLOCKS};
use crate::show::SourceText;
use crate::{FunctionReport, PathRow};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Graphs up to this many blocks get the layout's crossing minimisation.
const OPTIMIZE_BLOCKS: usize = 25;

/// Paths listed in the paths table.
const TOP_PATHS: usize = 20;

/// A block's source lines (file, line) in instruction order, from the metadata's line runs,
/// else its first location.
fn block_lines(f: &FunctionReport, b: usize) -> Vec<(String, u32)> {
    let files = &f.source.tables.files;
    let mut v: Vec<(String, u32)> = Vec::new();
    for run in f.source.meta.lines.get(b).map(Vec::as_slice).unwrap_or(&[]) {
        let file = run
            .loc
            .file
            .and_then(|i| files.get(i.index()))
            .cloned()
            .unwrap_or_default();
        if !v.iter().any(|(p, l)| *p == file && *l == run.loc.line) {
            v.push((file, run.loc.line));
        }
    }
    if v.is_empty() {
        if let Some(blk) = f.blocks.get(b) {
            if blk.line != 0 {
                v.push((blk.file.clone().unwrap_or_default(), blk.line));
            }
        }
    }
    v
}

/// `file:1,2,3` per file, with the file's last path component; `L1,2,3` for the lines of
/// `own` (the function's file).
fn lines_label(lines: &[(String, u32)], own: Option<&str>, max_numbers: usize) -> String {
    let mut parts: Vec<(String, Vec<u32>)> = Vec::new();
    for (file, line) in lines {
        let base = if Some(file.as_str()) == own {
            String::new()
        } else {
            file.rsplit('/').next().unwrap_or(file).to_string()
        };
        match parts.iter_mut().find(|(f, _)| *f == base) {
            Some((_, ls)) => ls.push(*line),
            None => parts.push((base, vec![*line])),
        }
    }
    parts
        .iter()
        .map(|(f, ls)| {
            let mut s: Vec<String> = ls.iter().take(max_numbers).map(u32::to_string).collect();
            if ls.len() > max_numbers {
                s.push("…".into());
            }
            if f.is_empty() {
                format!("L{}", s.join(","))
            } else {
                format!("{f}:{}", s.join(","))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The edges a path runs along: between consecutive blocks, plus its entry edge when it
/// starts at the function's entry and its return edge when it returns.
fn path_edges(f: &FunctionReport, p: &PathRow) -> BTreeSet<u32> {
    let mut s = BTreeSet::new();
    for w in p.blocks.windows(2) {
        for e in &f.edges {
            if e.from == Some(w[0]) && e.to == Some(w[1]) {
                s.insert(e.id);
            }
        }
    }
    let (first, last) = (p.blocks.first().copied(), p.blocks.last().copied());
    for e in &f.edges {
        if p.start == "entry" && e.kind == "entry" && e.to == first
            || matches!(p.end, "return" | "early-exit") && e.to.is_none() && e.from == last
        {
            s.insert(e.id);
        }
    }
    s
}

/// The hottest paths, most frequent first (then by number).
fn hottest_paths(f: &FunctionReport) -> Vec<&PathRow> {
    let mut rows: Vec<&PathRow> = f
        .paths
        .as_ref()
        .map(|p| p.rows.iter().collect())
        .unwrap_or_default();
    rows.sort_by(|a, b| b.count.cmp(&a.count).then(a.number.cmp(&b.number)));
    rows.truncate(TOP_PATHS);
    rows
}

/// Whether a function's graph can be drawn, or why not.
pub(crate) fn drawable(f: &FunctionReport) -> Result<(), String> {
    if f.inconsistent.is_some() {
        return Err("its counts are unknown".into());
    }
    if f.entry_count == 0 && f.block_executions == 0 {
        return Err("it never ran".into());
    }
    if f.blocks.len() > MAX_GRAPH_BLOCKS {
        return Err(format!(
            "it has {} blocks, more than the {MAX_GRAPH_BLOCKS} drawn",
            f.blocks.len()
        ));
    }
    Ok(())
}

/// Lays the graph out and renders it as SVG, or says why not.
fn graph_svg(
    f: &FunctionReport,
    hot: &BTreeSet<u32>,
    hot_blocks: &BTreeSet<u32>,
) -> Result<String, String> {
    let max_block = f.blocks.iter().filter_map(|b| b.count).max().unwrap_or(0);
    let max_edge = f.edges.iter().filter_map(|e| e.count).max().unwrap_or(0);
    let end_node = |block: &str| Node {
        label: block.to_uppercase(),
        fill: "#e8eefc",
        props: format!("class=\"blk\" data-block=\"{block}\""),
    };
    let mut nodes = vec![end_node("entry")];
    for (i, b) in f.blocks.iter().enumerate() {
        let lines = lines_label(&block_lines(f, i), f.file.as_deref(), 3);
        let label = if lines.is_empty() {
            format!("n{} ×{}", b.id, count_text(b.count))
        } else {
            format!("n{} ×{}\n{lines}", b.id, count_text(b.count))
        };
        nodes.push(Node {
            label,
            fill: heat_color(heat(b.count, max_block)),
            props: format!(
                "class=\"blk{}\" data-block=\"{}\" data-count=\"{}\"",
                if hot_blocks.contains(&b.id) {
                    " hot"
                } else {
                    ""
                },
                b.id,
                count_text(b.count)
            ),
        });
    }
    let block = |b: u32| Some(1 + b as usize).filter(|&n| n <= f.blocks.len());
    let mut edges = Vec::new();
    for e in &f.edges {
        let Some(from) = e.from.map_or(Some(0), block) else {
            return Err(format!("edge {} leaves an unknown block", e.id));
        };
        let to = match e.to {
            Some(b) => block(b).ok_or(format!("edge {} enters an unknown block", e.id))?,
            // One EXIT per edge that leaves: a single one would make every return a long
            // edge across the layers, which the layout pays for dearly.
            None => {
                nodes.push(end_node("exit"));
                nodes.len() - 1
            }
        };
        let width = match e.count {
            Some(0) | None => 1,
            Some(c) => {
                1 + ((c as f64).ln_1p() / (max_edge.max(1) as f64).ln_1p() * 6.0).round() as usize
            }
        };
        let color = if hot.contains(&e.id) {
            "#c00080"
        } else if e.count == Some(0) {
            "#bbbbbb"
        } else {
            "#333333"
        };
        edges.push(Edge {
            from,
            to,
            label: count_text(e.count),
            color,
            width,
            dashed: e.count == Some(0),
            props: format!(
                "class=\"edge{}\" data-edge=\"{}\" data-count=\"{}\"",
                if hot.contains(&e.id) { " hot" } else { "" },
                e.id,
                count_text(e.count)
            ),
        });
    }
    // Crossing minimisation costs seconds on large graphs.
    let allow_optimize = f.blocks.len() <= OPTIMIZE_BLOCKS;
    let build = || draw::svg(&nodes, &edges, allow_optimize).0;
    let svg = std::panic::catch_unwind(std::panic::AssertUnwindSafe(build))
        .map_err(|_| "the layout library failed on it".to_string())?;
    // Inline SVG in HTML: drop the XML declaration; arrow heads in user units, so that
    // they do not grow with the width of hot edges.
    let svg = match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => &svg[..],
    };
    Ok(svg.replace("<marker ", "<marker markerUnits=\"userSpaceOnUse\" "))
}

/// The page; `draw`: this function is among the hottest [`MAX_GRAPHS`] drawable ones.
pub(crate) fn render(ctx: &Ctx, f: &FunctionReport, text: &mut SourceText, draw: bool) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<header><h1><a href=\"index.html\">tally</a> / {}</h1></header>",
        esc(&f.demangled)
    );
    let at = ctx.defined_at(f);
    let at = if at.is_empty() { "unknown".into() } else { at };
    let _ = write!(
        b,
        "<p>Defined at {at}; module {}; mode {}; <span id=\"calls\" data-count=\"{c}\">{c} calls</span>, {} block executions, {} blocks, {} edges{}.</p>",
        esc(&f.module),
        esc(f.mode.name()),
        count_text((f.inconsistent.is_none() && f.blocks_known()).then_some(f.block_executions)),
        f.blocks.len(),
        f.edges.len(),
        if f.name != f.demangled {
            format!("; symbol <code>{}</code>", esc(&f.name))
        } else {
            String::new()
        },
        c = count_text((f.inconsistent.is_none()).then_some(f.entry_count)),
    );
    if let Some(why) = &f.inconsistent {
        let _ = write!(
            b,
            "<p class=\"br0\">Counts {}: {}</p>",
            ctx.r.unrecovered_word(),
            esc(why)
        );
    }

    let paths = hottest_paths(f);
    let hot = paths.first().map(|p| path_edges(f, p)).unwrap_or_default();
    let hot_blocks: BTreeSet<u32> = paths
        .first()
        .map(|p| p.blocks.iter().copied().collect())
        .unwrap_or_default();
    b.push_str("<h2>Control-flow graph</h2>");
    let svg = drawable(f).and_then(|()| {
        if draw {
            graph_svg(f, &hot, &hot_blocks)
        } else {
            Err(format!(
                "only the graphs of the {MAX_GRAPHS} hottest functions are drawn"
            ))
        }
    });
    match svg {
        Ok(svg) => {
            b.push_str(
                "<p class=\"help\">Blocks show their id, count (×) and source lines, coloured by count; edges are labelled with their counts, wider when hotter, dashed when never taken; ENTRY and EXIT stand for the function's entry and exit.",
            );
            if !hot_blocks.is_empty() {
                b.push_str(" The hottest path's blocks and edges are drawn in magenta (a path that ends on a back edge does not say which: that edge is not marked); click a path in the table below to highlight it in blue.");
            }
            b.push_str("</p><div class=\"graph\" id=\"graph\">");
            b.push_str(&svg);
            b.push_str("</div>");
        }
        Err(why) => {
            let _ = write!(
                b,
                "<p class=\"muted\" id=\"no-graph\">Graph not drawn: {}; the tables below list its blocks and edges.</p>",
                esc(&why)
            );
        }
    }

    if let Some(pp) = &f.paths {
        let _ = write!(
            b,
            "<h2>Hottest paths</h2><p class=\"help\">{} executed of {} potential paths; the {} most frequent:</p>\
<table class=\"list\" id=\"paths\"><thead><tr><th class=\"num\">Path</th><th class=\"num\">Count</th><th>Start</th><th>End</th><th>Blocks</th></tr></thead><tbody>",
            pp.rows.len(),
            pp.potential,
            paths.len()
        );
        for (k, p) in paths.iter().enumerate() {
            let edges: Vec<String> = path_edges(f, p).iter().map(u32::to_string).collect();
            let blocks: Vec<String> = p.blocks.iter().map(|b| format!("n{b}")).collect();
            let _ = write!(
                b,
                "<tr class=\"path{}\" data-path=\"{}\" data-count=\"{}\" data-edges=\"{}\" data-blocks=\"{}\"><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if k == 0 { " hot" } else { "" },
                p.number,
                p.count,
                edges.join(" "),
                p.blocks.iter().map(u32::to_string).collect::<Vec<_>>().join(" "),
                p.number,
                p.count,
                p.start,
                p.end,
                blocks.join(" ")
            );
        }
        b.push_str("</tbody></table>");
    }

    let _ = write!(
        b,
        "<h2>Blocks</h2><table class=\"list\" id=\"blocks\" data-module=\"{}\" data-function=\"{}\" data-cfg-hash=\"{:016x}\"><thead><tr><th class=\"sort num\">Block</th><th class=\"sort num\">Count</th><th>Lines</th><th>Source (first line)</th></tr></thead><tbody>",
        esc(&f.module),
        esc(&f.name),
        f.cfg_hash
    );
    for (i, blk) in f.blocks.iter().enumerate() {
        let lines = block_lines(f, i);
        let quote = lines
            .first()
            .and_then(|(file, line)| {
                text.lines(file)
                    .and_then(|s| s.get((*line as usize).wrapping_sub(1)))
                    .map(|t| t.trim().to_string())
            })
            .unwrap_or_default();
        let _ = write!(
            b,
            "<tr data-block=\"{}\" data-count=\"{c}\"><td class=\"num\" data-sort=\"{}\">n{}</td><td class=\"num\" data-sort=\"{}\">{c}</td><td>{}</td><td><code>{}</code></td></tr>",
            blk.id,
            blk.id,
            blk.id,
            blk.count.map_or(-1, |c| c as i128),
            esc(&lines_label(&lines, None, 12)),
            esc(&quote),
            c = count_text(blk.count),
        );
    }
    b.push_str("</tbody></table>");

    b.push_str(
        "<h2>Edges</h2><table class=\"list\" id=\"edges\"><thead><tr><th class=\"sort num\">Edge</th><th>From</th><th>To</th><th>Kind</th><th class=\"sort num\">Count</th></tr></thead><tbody>",
    );
    let end = |v: Option<u32>, what: &str| v.map_or(what.to_string(), |b| format!("n{b}"));
    for e in &f.edges {
        let _ = write!(
            b,
            "<tr data-edge=\"{}\" data-count=\"{c}\"><td class=\"num\" data-sort=\"{}\">e{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\" data-sort=\"{}\">{c}</td></tr>",
            e.id,
            e.id,
            e.id,
            end(e.from, "ENTRY"),
            end(e.to, "EXIT"),
            e.kind,
            e.count.map_or(-1, |c| c as i128),
            c = count_text(e.count),
        );
    }
    b.push_str("</tbody></table>");
    page(&format!("tally: {}", f.demangled), &b)
}
