//! The layout of graphs too large for layout-rs's passes (see [`super::LOWERED_BUDGET`]): its
//! time grows with the square of the layered graph's nodes, and a few dense blocks (a
//! switch or computed goto in each) give it a hundred thousand. Here nodes sit on their
//! longest-path layer, ordered in each by the mean position of their predecessors (one
//! sweep down), and edges are curves from node to node (bulging sideways when they cross
//! layers), their labels at the middle:
//! linear in nodes and edges, and every node and edge drawn, in the markup layout-rs writes
//! (`<g>` with the caller's attributes around each node's box and each edge's path).

use super::{Edge, Node};
use crate::html::esc;
use std::fmt::Write as _;

/// Pixels per character and per line of a label (10 px monospace).
const CHAR_W: f64 = 6.5;
const LINE_H: f64 = 13.0;
/// Gaps between boxes in a layer and between layers.
const GAP_X: f64 = 24.0;
const GAP_Y: f64 = 70.0;
/// Room on each side for edges that bulge around the boxes.
const MARGIN: f64 = 150.0;

/// SVG of `nodes` and `edges`, laid out from `order` (the edges as fed to layout-rs:
/// source, target, reversed, index; topological by source).
pub(crate) fn svg(nodes: &[Node], edges: &[Edge], order: &[(usize, usize, bool, usize)]) -> String {
    let n = nodes.len();
    let mut level = vec![0usize; n];
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b, _, _) in order {
        if a != b && a < n && b < n {
            level[b] = level[b].max(level[a] + 1);
            preds[b].push(a);
        }
    }
    let depth = level.iter().max().map_or(0, |d| d + 1);
    let size: Vec<(f64, f64)> = nodes
        .iter()
        .map(|v| {
            let lines = v.label.lines().count().max(1) as f64;
            let chars = v
                .label
                .lines()
                .map(|l| l.chars().count())
                .max()
                .unwrap_or(0) as f64;
            (chars * CHAR_W + 16.0, lines * LINE_H + 10.0)
        })
        .collect();
    // Layers, each ordered by the mean rank of the predecessors in the layers above.
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for v in 0..n {
        rows[level[v]].push(v);
    }
    let mut rank = vec![0usize; n];
    for row in &mut rows {
        let key = |v: usize| -> (u64, usize) {
            let p = &preds[v];
            let sum: usize = p.iter().map(|&u| rank[u]).sum();
            let mean = if p.is_empty() {
                0
            } else {
                (sum * 1000 / p.len()) as u64
            };
            (mean, v)
        };
        row.sort_by_key(|&v| key(v));
        for (i, &v) in row.iter().enumerate() {
            rank[v] = i;
        }
    }
    // Centre of each box; rows centred on the widest.
    let row_w: Vec<f64> = rows
        .iter()
        .map(|r| r.iter().map(|&v| size[v].0 + GAP_X).sum::<f64>())
        .collect();
    let width = row_w.iter().copied().fold(0.0, f64::max) + 2.0 * MARGIN;
    let mut pos = vec![(0.0, 0.0); n];
    let mut y = GAP_X;
    for (row, w) in rows.iter().zip(&row_w) {
        let h = row.iter().map(|&v| size[v].1).fold(0.0, f64::max);
        let mut x = (width - w) / 2.0 + GAP_X / 2.0;
        for &v in row {
            pos[v] = (x + size[v].0 / 2.0, y + h / 2.0);
            x += size[v].0 + GAP_X;
        }
        y += h + GAP_Y;
    }
    let height = y - GAP_Y + 2.0 * GAP_X;

    let mut s = String::new();
    let _ = write!(
        s,
        "<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" xmlns=\"http://www.w3.org/2000/svg\">\
<defs><marker id=\"startarrow\" markerWidth=\"10\" markerHeight=\"7\" refX=\"0\" refY=\"3.5\" orient=\"auto\"><polygon points=\"10 0, 10 7, 0 3.5\" fill=\"context-stroke\" /></marker>\
<marker id=\"endarrow\" markerWidth=\"10\" markerHeight=\"7\" refX=\"10\" refY=\"3.5\" orient=\"auto\"><polygon points=\"0 0, 10 3.5, 0 7\" fill=\"context-stroke\" /></marker></defs>",
        w = width.ceil(),
        h = height.ceil()
    );
    for (v, node) in nodes.iter().enumerate() {
        let ((cx, cy), (w, h)) = (pos[v], size[v]);
        let _ = write!(
            s,
            "<g {}><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{}\" stroke=\"#444444\" stroke-width=\"1\" rx=\"3\" /><text text-anchor=\"middle\" font-size=\"10\" x=\"{cx:.1}\" y=\"{:.1}\">",
            node.props,
            cx - w / 2.0,
            cy - h / 2.0,
            node.fill,
            cy - h / 2.0 + 5.0,
        );
        for line in node.label.lines() {
            let _ = write!(
                s,
                "<tspan x=\"{cx:.1}\" dy=\"{LINE_H}\">{}</tspan>",
                esc(line)
            );
        }
        s.push_str("</text></g>\n");
    }
    for &(a, b, reversed, i) in order {
        let (Some(e), true) = (edges.get(i), a < n && b < n) else {
            continue;
        };
        let (x1, y1) = (pos[a].0, pos[a].1 + size[a].1 / 2.0);
        let (x2, y2) = (pos[b].0, pos[b].1 - size[b].1 / 2.0);
        let (d, lx, ly) = if a == b {
            let r = pos[a].0 + size[a].0 / 2.0;
            let (t, u) = (pos[a].1 - size[a].1 / 4.0, pos[a].1 + size[a].1 / 4.0);
            (
                format!(
                    "M {r:.1} {t:.1} C {:.1} {t:.1}, {:.1} {u:.1}, {r:.1} {u:.1}",
                    r + 40.0,
                    r + 40.0
                ),
                r + 30.0,
                pos[a].1,
            )
        } else {
            // An edge across layers bulges sideways, away from the boxes between its ends;
            // to the right or left by index, further for longer ones.
            let span = level[b] - level[a];
            let dx = if span > 1 {
                let side = if i % 2 == 0 { 1.0 } else { -1.0 };
                side * (MARGIN / 3.0) * (1.0 + (i / 2 % 3) as f64) * (span.min(4) as f64 / 4.0)
            } else {
                0.0
            };
            let bend = (y2 - y1).abs() / 2.0;
            let (c1, c2) = ((x1 + dx, y1 + bend), (x2 + dx, y2 - bend));
            (
                format!(
                    "M {x1:.1} {y1:.1} C {:.1} {:.1}, {:.1} {:.1}, {x2:.1} {y2:.1}",
                    c1.0, c1.1, c2.0, c2.1
                ),
                (x1 + 3.0 * (c1.0 + c2.0) + x2) / 8.0,
                (y1 + 3.0 * (c1.1 + c2.1) + y2) / 8.0,
            )
        };
        let marker = if reversed {
            "marker-start=\"url(#startarrow)\""
        } else {
            "marker-end=\"url(#endarrow)\""
        };
        let dash = if e.dashed {
            " stroke-dasharray=\"5,5\""
        } else {
            ""
        };
        let _ = write!(
            s,
            "<g {}><path d=\"{d}\" stroke=\"{}\" stroke-width=\"{}\"{dash} {marker} fill=\"transparent\" /><text text-anchor=\"middle\" font-size=\"10\" x=\"{lx:.1}\" y=\"{ly:.1}\">{}</text></g>",
            e.props,
            e.color,
            e.width,
            esc(&e.label)
        );
    }
    s.push_str("</svg>\n");
    s
}
