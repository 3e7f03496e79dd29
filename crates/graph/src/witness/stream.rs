//! The trace stream (see the stream model in the [module doc](super)) and the reference
//! instrumentation: which records an execution writes under a set of plans
//! ([`records_of`]) and which block sequence it is ([`steps_of`]). The LLVM and runtime side
//! must write exactly what [`records_of`] writes; the property tests check that
//! [`super::regenerate`] inverts it.

use super::{FuncId, Landing, PlanKind, Step, Traced};
use crate::cfg::EdgeKind;
use crate::ids::{EdgeId, NodeId};
use crate::paths::{CfgImage, NumberedDag};

/// One record of a thread's trace.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Record {
    /// A witnessed edge of the current activation was traversed.
    Witness {
        /// The edge's value.
        value: u32,
        /// Its width (from the plan; a bit-packed stream does not store it).
        bits: u8,
    },
    /// An activation entered from a [`super::Callee::Unknown`] site or from no traced caller.
    Enter(FuncId),
    /// A [`super::Callee::Unknown`] call of the current activation returned normally.
    Back,
    /// Control landed after an abandonment: `abandoned` activations above the landing one are
    /// gone and the landing one resumes at block `to`.
    Unwind {
        /// How many traced activations were discarded.
        abandoned: u32,
        /// Where the landing activation resumes (a `Reentry` target or an unwind edge's target).
        to: NodeId,
        /// By which edge.
        how: Landing,
    },
    /// The thread ended: every activation on the stack is abandoned.
    End,
}

/// What happened during an execution, as the instrumentation sees it (the input of the
/// reference instrumentation and of the tests' simulator).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Event {
    /// An activation of `func` begins at its entry. `announced` when it was entered from a
    /// [`super::Callee::Unknown`] site or from no traced caller (it writes `Enter`).
    Enter {
        /// The function.
        func: FuncId,
        /// Whether it writes `Enter`.
        announced: bool,
    },
    /// The current activation traversed a normal edge (a `Return` edge ends it).
    Edge(EdgeId),
    /// A [`super::Callee::Unknown`] call of the current activation returned normally.
    Back,
    /// Control landed after an abandonment (see [`Record::Unwind`]).
    Unwind {
        /// How many activations were discarded.
        abandoned: u32,
        /// Where the landing activation resumes.
        to: NodeId,
        /// By which edge.
        how: Landing,
    },
    /// The thread ended.
    End,
}

/// The records `events` write under the plans of `funcs` (the reference instrumentation).
///
/// # Panics
/// If the events are not a well-formed execution of `funcs` (an edge with no activation, an
/// unwind below the stack).
///
/// A function with a [`PlanKind::Paths`] plan keeps its path register `r` (the sum of the
/// `Val`s of the current path's DAG edges, Ball & Larus 1996 §3.2) and writes it, in
/// [`super::paths::path_bits`] bits, on the edge that ends the path (a `Return`, back or cut
/// edge), as a [`Record::Witness`].
pub fn records_of(funcs: &[Traced], events: &[Event]) -> Vec<Record> {
    let numbered: Vec<Option<NumberedDag>> = funcs
        .iter()
        .map(|t| {
            (t.plan.kind == PlanKind::Paths).then(|| {
                super::paths::paths_plan(&t.input).expect("a paths plan numbers its function")
            })
        })
        .collect();
    // Each activation's function and path register.
    let mut stack: Vec<(FuncId, u128)> = Vec::new();
    let mut out = Vec::new();
    for &ev in events {
        match ev {
            Event::Enter { func, announced } => {
                let r = numbered[func.index()].as_ref().map_or(0, |nd| {
                    match nd.dag().image(funcs[func.index()].input.cfg.entry_edge()) {
                        CfgImage::Start(d) => nd.val(d),
                        other => unreachable!("e0 is a START edge, not {other:?}"),
                    }
                });
                stack.push((func, r));
                if announced {
                    out.push(Record::Enter(func));
                }
            }
            Event::Edge(e) => {
                let (f, r) = stack.last_mut().expect("edge outside any activation");
                let t = &funcs[f.index()];
                if let Some(nd) = &numbered[f.index()] {
                    let bits = super::paths::path_bits(nd.total());
                    let mut put = |p: u128| {
                        if bits > 0 {
                            out.push(Record::Witness {
                                value: p as u32,
                                bits,
                            });
                        }
                    };
                    match nd.dag().image(e) {
                        CfgImage::Kept(d) => {
                            *r += nd.val(d);
                            if nd.dag().edge(d).dst == nd.dag().end() {
                                put(*r);
                            }
                        }
                        CfgImage::Back { end, start } | CfgImage::Cut { end, start } => {
                            put(*r + nd.val(end));
                            *r = nd.val(start);
                        }
                        other => unreachable!("normal edge {e} is {other:?} in the path DAG"),
                    }
                } else if let Some(w) = t.plan.witness[e].filter(|w| w.bits > 0) {
                    out.push(Record::Witness {
                        value: w.value,
                        bits: w.bits,
                    });
                }
                if t.input.cfg.edge(e).kind == EdgeKind::Return {
                    stack.pop();
                }
            }
            Event::Back => out.push(Record::Back),
            Event::Unwind { abandoned, to, how } => {
                let keep = stack.len() - abandoned as usize;
                stack.truncate(keep);
                out.push(Record::Unwind { abandoned, to, how });
            }
            Event::End => {
                stack.clear();
                out.push(Record::End);
            }
        }
    }
    out
}

/// The block sequence of `events`: one [`Step`] per block entered (at an activation's start,
/// by a normal edge, or by landing), in order.
///
/// # Panics
/// As [`records_of`], and if a landing block is neither a `Reentry` target nor an unwind
/// target of the landing activation's block.
pub fn steps_of(funcs: &[Traced], events: &[Event]) -> Vec<Step> {
    let mut stack: Vec<(FuncId, NodeId)> = Vec::new();
    let mut out = Vec::new();
    for &ev in events {
        match ev {
            Event::Enter { func, .. } => {
                let cfg = &funcs[func.index()].input.cfg;
                stack.push((func, cfg.entry()));
                out.push(Step {
                    func,
                    block: cfg.entry(),
                    via: cfg.entry_edge(),
                });
            }
            Event::Edge(e) => {
                let top = stack.last_mut().expect("edge outside any activation");
                let edge = funcs[top.0.index()].input.cfg.edge(e);
                if edge.kind == EdgeKind::Return {
                    stack.pop();
                } else {
                    top.1 = edge.dst;
                    out.push(Step {
                        func: top.0,
                        block: edge.dst,
                        via: e,
                    });
                }
            }
            Event::Back => {}
            Event::Unwind { abandoned, to, how } => {
                let keep = stack.len() - abandoned as usize;
                stack.truncate(keep);
                let top = stack.last_mut().expect("landing below the stack");
                let via = funcs[top.0.index()]
                    .input
                    .landing_edge(top.1, to, how)
                    .expect("landing block is no landing target");
                top.1 = to;
                out.push(Step {
                    func: top.0,
                    block: to,
                    via,
                });
            }
            Event::End => stack.clear(),
        }
    }
    out
}
