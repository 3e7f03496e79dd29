//! Counter placements scored on a measured profile, as Ball & Larus 1994 §6 does for its Graphs
//! 2-4: "given a counter placement for one of the algorithms, we used the profile information
//! collected from a previous run to determine how many times each counter would have been
//! incremented". No program is rebuilt or rerun: every placement is computed on each function's
//! graph from the profile's metadata and charged the measured counts of what it counts.
//!
//! The placements are the paper's idealized ones: every edge may carry a counter (the builds
//! force unsplittable edges into the tree and count early exits in the runtime, which this
//! ignores), and the weights are either the heuristic of §5 or the measured counts themselves.

use crate::{FunctionReport, Report};
use tally_graph::knuth::place_vertex_counters_ks;
use tally_graph::vertex::place_vertex_counters;
use tally_graph::{
    heuristic_weights, max_spanning_tree, Cfg, EdgeId, EdgeKind, IdVec, NodeId, TreeClass,
};

/// One placement: how many counters it needs and how often they would have been incremented.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Score {
    /// Static counters.
    pub counters: u64,
    /// Dynamic increments on the profiled run.
    pub increments: u64,
}

impl std::ops::AddAssign for Score {
    fn add_assign(&mut self, o: Score) {
        self.counters = self.counters.saturating_add(o.counters);
        self.increments = self.increments.saturating_add(o.increments);
    }
}

/// The placements compared, in report order, with a short description.
pub const PLACEMENTS: [(&str, &str); 8] = [
    (
        "blocks",
        "a counter in every block (redundant vertex profiling)",
    ),
    ("edges", "a counter on every edge but EXIT->entry"),
    (
        "eprof-heuristic",
        "Eprof(Ecnt): chords of a maximum spanning tree, heuristic weights (Heuristic-Max)",
    ),
    (
        "eprof-exact",
        "Eprof(Ecnt): chords of a maximum spanning tree, measured weights (Exact-Max)",
    ),
    (
        "eprof-min",
        "Eprof(Ecnt): chords of a minimum spanning tree, measured weights (the worst tree)",
    ),
    (
        "vprof-ecnt",
        "Vprof(Ecnt): the heuristic of Fig. 11, heuristic weights",
    ),
    (
        "vprof-vcnt",
        "Vprof(Vcnt): Knuth-Stevenson block counters, heuristic block weights",
    ),
    (
        "vprof-vcnt-exact",
        "Vprof(Vcnt): Knuth-Stevenson block counters, measured block counts as weights",
    ),
];

/// Scores of every placement over the functions a profile determines fully.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scores {
    /// Functions scored (every edge count known).
    pub functions: usize,
    /// Functions left out because the profile does not give all their edge counts.
    pub skipped: usize,
    /// One score per entry of [`PLACEMENTS`].
    pub scores: [Score; 8],
}

/// Scores every placement of [`PLACEMENTS`] on the edge counts of `r`.
pub fn score(r: &Report) -> Scores {
    let mut out = Scores {
        functions: 0,
        skipped: 0,
        scores: [Score::default(); 8],
    };
    for f in &r.functions {
        match score_function(f) {
            Some(s) => {
                out.functions += 1;
                for (t, x) in out.scores.iter_mut().zip(s) {
                    *t += x;
                }
            }
            None => out.skipped += 1,
        }
    }
    out
}

fn kind_of(name: &str) -> Option<EdgeKind> {
    Some(match name {
        "entry" => EdgeKind::Entry,
        "flow" => EdgeKind::Flow,
        "return" => EdgeKind::Return,
        "early-exit" => EdgeKind::EarlyExit,
        "reentry" => EdgeKind::Reentry,
        _ => return None,
    })
}

fn score_function(f: &FunctionReport) -> Option<[Score; 8]> {
    let counts: Vec<u64> = f.edges.iter().map(|e| e.count).collect::<Option<_>>()?;
    let nb = f.blocks.len();
    let node = |b: Option<u32>| NodeId::new(b.map_or(nb, |b| b as usize));
    let edges = f
        .edges
        .iter()
        .map(|e| {
            Some(tally_graph::Edge {
                src: node(e.from),
                dst: node(e.to),
                kind: kind_of(e.kind)?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let cfg = Cfg::from_edges(nb, edges).ok()?;
    let count = IdVec::<EdgeId, u64>::from_vec(counts);
    let block = tally_graph::block_counts(&cfg, &count).ok()?.into_vec();
    let on_edges = |set: Vec<EdgeId>| {
        let mut s = Score::default();
        for e in set {
            s.counters += 1;
            s.increments = s.increments.saturating_add(count[e]);
        }
        s
    };
    let on_blocks = |set: &[NodeId]| Score {
        counters: set.len() as u64,
        increments: set
            .iter()
            .map(|v| block[v.index()])
            .fold(0, u64::saturating_add),
    };
    let heur = heuristic_weights(&cfg);
    let exact = IdVec::<EdgeId, f64>::from_vec(count.values().iter().map(|&c| c as f64).collect());
    let chords = |w: &IdVec<EdgeId, f64>, sign: f64| {
        let t = max_spanning_tree(&cfg, |e| TreeClass::Weighted(sign * w[e]));
        on_edges(t.chords().collect())
    };
    let all_blocks: Vec<NodeId> = cfg.blocks().collect();
    let vertex_heur = |v: NodeId| -> f64 { cfg.preds(v).iter().map(|&e| heur[e]).sum() };
    let vprof = place_vertex_counters(&cfg, &heur, |_| false);
    Some([
        on_blocks(&all_blocks),
        on_edges(
            cfg.edges()
                .map(|(e, _)| e)
                .filter(|e| e.index() != 0)
                .collect(),
        ),
        chords(&heur, 1.0),
        chords(&exact, 1.0),
        chords(&exact, -1.0),
        on_edges(vprof.counted.clone()),
        on_blocks(&place_vertex_counters_ks(&cfg, vertex_heur).counted),
        on_blocks(&place_vertex_counters_ks(&cfg, |v| block[v.index()] as f64).counted),
    ])
}

/// The scores as a text table, with increments relative to `blocks` (Ball & Larus 1994 Graphs 2-3).
pub fn text(s: &Scores, title: &str, program: &tally_format::profile::Program) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "tally placements: {title}");
    o.push_str(&crate::program_line(program));
    let _ = writeln!(
        o,
        "{} functions scored on their measured counts ({} without every edge count left out)\n",
        s.functions, s.skipped
    );
    let _ = writeln!(
        o,
        "{:<17} {:>9} {:>16} {:>9}  placement",
        "name", "counters", "increments", "÷ blocks"
    );
    let base = s.scores[0].increments;
    for ((name, what), sc) in PLACEMENTS.iter().zip(&s.scores) {
        let rel = if base == 0 {
            "-".to_string()
        } else {
            format!("{:.3}", sc.increments as f64 / base as f64)
        };
        let _ = writeln!(
            o,
            "{name:<17} {:>9} {:>16} {rel:>9}  {what}",
            sc.counters, sc.increments
        );
    }
    o
}

/// The scores as JSON: `{"functions", "skipped", "placements": [{"name", "description",
/// "counters", "increments"}]}`.
pub fn json(s: &Scores, title: &str, program: &tally_format::profile::Program) -> String {
    let placements: Vec<serde_json::Value> = PLACEMENTS
        .iter()
        .zip(&s.scores)
        .map(|((name, what), sc)| {
            serde_json::json!({
                "name": name,
                "description": what,
                "counters": sc.counters,
                "increments": sc.increments,
            })
        })
        .collect();
    let v = serde_json::json!({
        "profile": title,
        "program": crate::render::json_program(program),
        "functions": s.functions,
        "skipped": s.skipped,
        "placements": placements,
    });
    let mut out = serde_json::to_string_pretty(&v).expect("JSON values serialize");
    out.push('\n');
    out
}
