//! Draws a function's graph with the `layout-rs` crate at a cost bounded by the graph's size.
//!
//! Left to itself, layout-rs makes its graph acyclic by asking, for each edge in the order
//! given, whether its source is reachable from its target, and checks the graph after each
//! edge and pass; its reachability search enumerates paths (it unmarks nodes on the way back),
//! so a chain of `n` if-statements costs `2^n` per question (38 s on
//! redis-server). Here the graph goes in acyclic and in an order where every question is
//! answered at once: back edges of a depth-first search from the entry are reversed (the
//! arrow still points at the real target, as layout-rs does for the back edges it finds), the
//! edges are added by topological position of their source (so each target has no successor
//! yet), and the checks are turned off. What is left is polynomial in the size of the layered
//! graph (blocks, edge-label connectors and one dummy node per layer a long edge crosses),
//! which [`lowered`] predicts: crossing minimisation runs only under [`CROSSING_BUDGET`],
//! coordinate placement (Brandes-Köpf and edge straightening) only under [`PLACE_BUDGET`]
//! (beyond them the layers are drawn in their first order), and layout-rs itself only under
//! [`LOWERED_BUDGET`]; beyond it, or when layout-rs panics (it asserts on a few graphs),
//! [`plain`] draws a simpler layered layout in linear time. Every node and edge is drawn,
//! whatever the graph.

use layout::backends::svg::SVGWriter;
use layout::core::base::Orientation;
use layout::core::color::Color;
use layout::core::style::{LineStyleKind, StyleAttr};
use layout::std_shapes::render::get_shape_size;
use layout::std_shapes::shapes::{Arrow, Element, LineEndKind, ShapeKind};
use layout::topo::layout::VisualGraph;

/// Predicted crossing-minimisation work, Σ over layers of width² × neighbouring widths,
/// above which the layers keep their first order (100 000: about 0.2 s).
pub(crate) const CROSSING_BUDGET: u64 = 100_000;

/// Nodes of the layered graph above which nodes are placed left to right in each layer
/// instead of by Brandes-Köpf (its time grows faster than the square: 0.2 s at 1 000 nodes,
/// 8 s at 5 000).
pub(crate) const PLACE_BUDGET: u64 = 1_200;

/// Nodes of the layered graph above which layout-rs is not used at all but [`plain`]
/// (its lowering alone grows with the square: 0.4 s at 13 000 nodes, 34 s at 146 000).
pub(crate) const LOWERED_BUDGET: u64 = 8_000;

/// Font size of labels.
const FONT: usize = 10;

/// A box to draw.
pub(crate) struct Node {
    pub label: String,
    pub fill: &'static str,
    /// SVG attributes of its group.
    pub props: String,
}

/// An edge to draw.
pub(crate) struct Edge {
    pub from: usize,
    pub to: usize,
    pub label: String,
    pub color: &'static str,
    pub width: usize,
    pub dashed: bool,
    /// SVG attributes of its group.
    pub props: String,
}

/// How a graph was laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Edges in the order given to layout-rs: (source, target, reversed, index in the input).
    pub order: Vec<(usize, usize, bool, usize)>,
    /// Nodes of the layered graph, as predicted.
    pub lowered_nodes: u64,
    /// Predicted crossing-minimisation work.
    pub crossing_work: u64,
    /// Crossing minimisation runs.
    pub optimize: bool,
    /// Coordinate placement runs.
    pub place: bool,
    /// Too large for layout-rs, or layout-rs failed on it: [`plain`] lays it out.
    pub plain: bool,
}

/// The depth-first back edges from node 0, then from each node not yet reached, in order;
/// successors in edge order. Self edges are not back edges (layout-rs draws them apart).
fn back_edges(n: usize, edges: &[(usize, usize)]) -> Vec<bool> {
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, &(a, b)) in edges.iter().enumerate() {
        if a < n && b < n && a != b {
            succ[a].push(i);
        }
    }
    // 0: unseen, 1: on the stack, 2: done.
    let mut state = vec![0u8; n];
    let mut back = vec![false; edges.len()];
    for root in 0..n {
        if state[root] != 0 {
            continue;
        }
        state[root] = 1;
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(top) = stack.last_mut() {
            let (v, k) = *top;
            match succ[v].get(k) {
                Some(&e) => {
                    top.1 += 1;
                    let w = edges[e].1;
                    match state[w] {
                        0 => {
                            state[w] = 1;
                            stack.push((w, 0));
                        }
                        1 => back[e] = true,
                        _ => {}
                    }
                }
                None => {
                    state[v] = 2;
                    stack.pop();
                }
            }
        }
    }
    back
}

/// The edges as layout-rs should get them: back edges reversed, sorted by the topological
/// position of their (new) source (Kahn's order, smallest node first), then input order.
fn feed_order(n: usize, edges: &[(usize, usize)]) -> Vec<(usize, usize, bool, usize)> {
    let back = back_edges(n, edges);
    let fed: Vec<(usize, usize, bool, usize)> = edges
        .iter()
        .enumerate()
        .filter(|(_, &(a, b))| a < n && b < n)
        .map(|(i, &(a, b))| {
            if back[i] {
                (b, a, true, i)
            } else {
                (a, b, false, i)
            }
        })
        .collect();
    let mut indeg = vec![0usize; n];
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b, _, _) in &fed {
        if a != b {
            indeg[b] += 1;
            succ[a].push(b);
        }
    }
    let mut ready: std::collections::BTreeSet<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    let mut pos = vec![usize::MAX; n];
    let mut next = 0;
    while let Some(v) = ready.pop_first() {
        pos[v] = next;
        next += 1;
        for &w in &succ[v] {
            indeg[w] -= 1;
            if indeg[w] == 0 {
                ready.insert(w);
            }
        }
    }
    let mut fed = fed;
    fed.sort_by_key(|&(a, _, _, i)| (pos[a], i));
    fed
}

/// The layered graph layout-rs will build from `order`: layers by longest path, an edge with
/// a label two layers long (its label is a node), a self edge one node beside its node, a
/// dummy node in each layer an edge crosses. Returns the width of each layer.
fn lowered(n: usize, order: &[(usize, usize, bool, usize)], labelled: &[bool]) -> Vec<u64> {
    let mut level = vec![0usize; n];
    // `order` is topological by source: one pass settles every level.
    for &(a, b, _, i) in order {
        if a != b {
            let len = if labelled.get(i).copied().unwrap_or(false) {
                2
            } else {
                1
            };
            level[b] = level[b].max(level[a] + len);
        }
    }
    let depth = level.iter().max().map_or(0, |d| d + 1);
    let mut width = vec![0u64; depth];
    for &l in &level {
        width[l] += 1;
    }
    for &(a, b, _, _) in order {
        if a == b {
            width[level[a]] += 1;
        } else {
            // (`order` being topological, level[b] > level[a]; `max` only guards the slice.)
            for w in &mut width[level[a] + 1..level[b].max(level[a] + 1)] {
                *w += 1;
            }
        }
    }
    width
}

/// Decides how to lay out `n` nodes joined by `edges` (source, target, labelled).
pub(crate) fn plan(n: usize, edges: &[(usize, usize, bool)], allow_optimize: bool) -> Plan {
    let pairs: Vec<(usize, usize)> = edges.iter().map(|&(a, b, _)| (a, b)).collect();
    let labelled: Vec<bool> = edges.iter().map(|e| e.2).collect();
    let order = feed_order(n, &pairs);
    let width = lowered(n, &order, &labelled);
    let lowered_nodes: u64 = width.iter().sum();
    let crossing_work = (0..width.len())
        .map(|i| {
            let near =
                if i > 0 { width[i - 1] } else { 0 } + width.get(i + 1).copied().unwrap_or(0);
            width[i].saturating_mul(width[i]).saturating_mul(near)
        })
        .fold(0u64, u64::saturating_add);
    Plan {
        optimize: allow_optimize && crossing_work <= CROSSING_BUDGET,
        place: lowered_nodes <= PLACE_BUDGET,
        plain: lowered_nodes > LOWERED_BUDGET,
        order,
        lowered_nodes,
        crossing_work,
    }
}

/// Lays out and renders the graph as an SVG document; `allow_optimize`: crossing
/// minimisation is wanted (it still runs only under its budget).
pub(crate) fn svg(nodes: &[Node], edges: &[Edge], allow_optimize: bool) -> (String, Plan) {
    let shape: Vec<(usize, usize, bool)> = edges
        .iter()
        .map(|e| (e.from, e.to, !e.label.is_empty()))
        .collect();
    let mut plan = plan(nodes.len(), &shape, allow_optimize);
    if !plan.plain {
        // layout-rs asserts on a few graphs (5 of SQLite's 100 hottest): they get the plain
        // layout. (`html::site`'s panic hook keeps its message off stderr.)
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| render(nodes, edges, &plan)))
        {
            Ok(svg) => return (svg, plan),
            Err(_) => plan.plain = true,
        }
    }
    (plain::svg(nodes, edges, &plan.order), plan)
}

/// Lays out and renders the graph as `plan` says.
fn render(nodes: &[Node], edges: &[Edge], plan: &Plan) -> String {
    let dir = Orientation::TopToBottom;
    let mut vg = VisualGraph::new(dir);
    // Each edge is checked to be acyclic as given (see the module docs): no need to check
    // the whole graph again after each one.
    vg.dag.set_validate(false);
    let handles: Vec<_> = nodes
        .iter()
        .map(|n| {
            let shape = ShapeKind::new_box(&n.label);
            let look = StyleAttr::new(
                Color::fast("#444444"),
                1,
                Some(Color::fast(n.fill)),
                3,
                FONT,
            );
            let size = get_shape_size(dir, &shape, FONT, false);
            vg.add_node(Element::create_with_properties(
                shape,
                look,
                dir,
                size,
                n.props.clone(),
            ))
        })
        .collect();
    for &(a, b, reversed, i) in &plan.order {
        let e = &edges[i];
        let look = StyleAttr::new(Color::fast(e.color), e.width, None, 0, FONT);
        let style = if e.dashed {
            LineStyleKind::Dashed
        } else {
            LineStyleKind::Normal
        };
        let mut arrow = Arrow::new(
            LineEndKind::None,
            LineEndKind::Arrow,
            style,
            &e.label,
            &look,
            &None,
            &None,
        );
        arrow.properties = Some(e.props.clone());
        if reversed {
            arrow = arrow.reverse();
        }
        vg.add_edge(arrow, handles[a], handles[b]);
    }
    let mut out = SVGWriter::new();
    vg.do_it(false, !plan.optimize, !plan.place, &mut out);
    sort_styles(&out.finalize())
}

/// The SVG with the lines of its `<style>` sorted: layout-rs writes one per font size in the
/// order of a `HashMap`, which differs from run to run.
fn sort_styles(svg: &str) -> String {
    let (Some(a), Some(b)) = (svg.find("<style>\n"), svg.find("</style>")) else {
        return svg.to_string();
    };
    let start = a + "<style>\n".len();
    if b < start {
        return svg.to_string();
    }
    let mut lines: Vec<&str> = svg[start..b].lines().collect();
    lines.sort_unstable();
    let mut out = String::with_capacity(svg.len());
    out.push_str(&svg[..start]);
    for l in lines {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(&svg[b..]);
    out
}

mod plain;

#[cfg(test)]
mod tests;
