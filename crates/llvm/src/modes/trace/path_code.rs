//! `--tally-trace=paths`: path mode's register code, appending path numbers instead of
//! counting them.

use super::records::Rec;
use crate::emit::build::const_int;
use crate::emit::sites::{direct_site, Realize};
use crate::emit::Emitter;
use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::Val;
use tally_graph::paths::Action;
use tally_graph::witness::{self, FunctionInput};
use tally_graph::{EdgeId, IdVec, NodeId};

/// A function traced by path numbers (`--tally-trace=paths`, `tally_graph::witness::paths`):
/// path mode's register code, with `count[r]++` replaced by appending `r` in `bits` bits.
pub(super) struct PathsCode {
    /// The actions of each control-flow edge (path mode's placement).
    actions: IdVec<EdgeId, Vec<Action>>,
    /// Call vertices whose paths are known where they start (`NumPaths = 1`): `count[r]` at
    /// the end of the block, after its calls (their START edges set `r`).
    head_counts: Vec<NodeId>,
    /// The width of a path number.
    bits: u8,
    /// The numbering's fingerprint (for the metadata).
    pub(super) numbering: u64,
}

/// The path-number plan of one function, or why it has none: path mode's placement (Ball &
/// Larus 1996 §3.4) of the numbering `witness::paths::paths_plan` recomputes in the reader, with
/// one change. A path whose number is known where it starts (its `START` edge carries `Count`:
/// the path from there is unique) would write its record before the calls of its first block,
/// which the reader meets first; when that block is a call vertex, the count becomes `r = v`
/// and the record is written by `count[r]` at the end of the block, after its calls (nothing
/// when the block has no normal successor: the path can only end early, in a call).
pub(super) fn paths_code(
    l: &Lowered,
    input: &FunctionInput,
    weights: &IdVec<EdgeId, f64>,
) -> Result<PathsCode, String> {
    use tally_graph::paths::{chord_increments, dag_weights, CfgImage, PathPlacement};
    let numbered = witness::paths::paths_plan(input).map_err(|e| e.to_string())?;
    let dag = numbered.dag();
    let w = crate::emit::sites::base_weights(l, Some(weights));
    let dw = dag_weights(dag, &w).map_err(|e| e.to_string())?;
    let incs = chord_increments(&numbered, &dw).map_err(|e| e.to_string())?;
    let placement = PathPlacement::new(&numbered, &incs).map_err(|e| e.to_string())?;
    let mut actions = placement.actions.clone();
    let mut head_counts: Vec<NodeId> = Vec::new();
    for (e, _) in l.cfg.edges() {
        let (d, init) = match dag.image(e) {
            CfgImage::Start(d) => (d, Action::Init as fn(i128) -> Action),
            CfgImage::Back { start, .. } | CfgImage::Cut { start, .. } => {
                (start, Action::Reinit as fn(i128) -> Action)
            }
            _ => continue,
        };
        let Some(Action::Count(v)) = placement.code[d] else {
            continue;
        };
        let head = dag.edge(d).dst;
        if !input.is_call_vertex(head) {
            continue; // (nothing is written between the start and the rest of the path)
        }
        // (The START part is the last action of the edge's list.)
        match actions[e].last_mut() {
            Some(last) if *last == Action::Count(v) => *last = init(v),
            _ => {
                return Err(format!(
                    "path start {e}: count not last in {:?}",
                    actions[e]
                ))
            }
        }
        // A call vertex is entered only by path starts (its other in-edges are cut), so the
        // count at its end, after its calls, counts exactly the paths starting there.
        if input.normal_succs(head).next().is_some() && !head_counts.contains(&head) {
            head_counts.push(head);
        }
    }
    for (e, acts) in actions.iter() {
        if acts.is_empty() {
            continue;
        }
        match l.edges[e.index()] {
            EdgeIr::Reentry | EdgeIr::Fallthrough => {
                return Err(format!("path code on edge {e} (a setjmp's)"))
            }
            EdgeIr::Succ { .. } if direct_site(l, e).is_none() => {
                return Err(format!("path code on edge {e}, which has no place for it"))
            }
            _ => {}
        }
        for a in acts {
            let (Action::Init(v)
            | Action::Add(v)
            | Action::CountAt(v)
            | Action::Count(v)
            | Action::Reinit(v)) = *a;
            if i64::try_from(v).is_err() {
                return Err(format!("path increment {v} does not fit 64 bits"));
            }
        }
    }
    Ok(PathsCode {
        actions,
        head_counts,
        bits: witness::paths::path_bits(numbered.total()),
        numbering: numbered.fingerprint(),
    })
}

impl PathsCode {
    /// Emits the path register's code and the path records (after the entry, before the
    /// direct flags and `ret`s are placed).
    pub(super) fn emit(&self, em: &Emitter, l: &Lowered, rec: &Rec) {
        let g = em.g;
        em.at(l.nodes[0].start);
        let r = em.alloca(g.i64t, "tally.path");
        let i64c = |v: i128| const_int(g.i64t, v as i64 as u64, true);
        let r_plus = |d: i128| {
            let cur = em.load(g.i64t, r);
            if d == 0 {
                cur
            } else {
                em.add(cur, i64c(d))
            }
        };
        let bits = u64::from(self.bits);
        let run = |acts: &[Action], near: Val| {
            for a in acts {
                match *a {
                    Action::Init(v) | Action::Reinit(v) => {
                        em.store(i64c(v), r);
                    }
                    Action::Add(d) => {
                        em.store(r_plus(d), r);
                    }
                    Action::CountAt(d) if bits > 0 => {
                        rec.put(em, r_plus(d), em.i64c(bits), near);
                    }
                    Action::Count(v) if bits > 0 => rec.put_const(em, (v as u64, bits), near),
                    Action::CountAt(_) | Action::Count(_) => {}
                }
            }
        };
        // Actions at block starts first (as in path mode: in a block whose only instruction
        // is its terminator, the edge into it must run before the edge out of it).
        let at_start = |e: EdgeId| matches!(direct_site(l, e), Some(Realize::NodeStart(_)));
        let in_order = self
            .actions
            .iter()
            .filter(|&(e, _)| at_start(e))
            .chain(self.actions.iter().filter(|&(e, _)| !at_start(e)));
        for (e, acts) in in_order {
            if acts.is_empty() {
                continue;
            }
            let at = match l.edges[e.index()] {
                // A frame abandoned inside a call loses its path's record (the reader stops
                // at the call's `End` or `Unwind`); no re-entries (no setjmp).
                EdgeIr::EarlyExit | EdgeIr::Reentry => continue,
                EdgeIr::Entry => l.nodes[0].start,
                // Right before the `ret`, after any `tail` call (whose records come first).
                EdgeIr::Return => {
                    let src = l.cfg.edge(e).src;
                    *l.nodes[src.index()]
                        .instrs
                        .last()
                        .expect("a returning vertex has its terminator")
                }
                EdgeIr::Fallthrough | EdgeIr::AfterCalls | EdgeIr::Succ { .. } => {
                    match direct_site(l, e).expect("checked by plan_numbered") {
                        Realize::NodeEnd(n) => l.nodes[n.index()].end,
                        Realize::NodeStart(n) => l.nodes[n.index()].start,
                        Realize::Split(_) => {
                            let EdgeIr::Succ { term, index, .. } = l.edges[e.index()] else {
                                unreachable!("only terminator edges are split")
                            };
                            crate::emit::surgery::split_edge(em, term, index)
                                .terminator()
                                .expect("split block has its branch")
                        }
                        other => unreachable!("edge {e} realized as {other:?}"),
                    }
                }
            };
            em.at(at);
            run(acts, at);
        }
        for &h in &self.head_counts {
            let term = *l.nodes[h.index()]
                .instrs
                .last()
                .expect("a block has its terminator");
            em.at(term);
            run(&[Action::CountAt(0)], term);
        }
    }
}
