//! The reference cutter: an execution of the whole program cut into observable paths by the
//! definitions of paper 004 (§3.4 context paths, §6 piecewise paths), as explicit edge sequences
//! of `G*_fn`, without the `ψ`/`ρ` functions. Numbering them with
//! [`IpNumbering::path_number`] gives the counts the instrumented program must produce.
//!
//! # Executions
//!
//! An execution is a sequence of [`Event`]s, one thread, properly nested:
//!
//! - `Enter(f)`: an activation of `f` starts at its entry block: the first event, the callee of
//!   the pending call of the current activation (exactly once for a call of a function of the
//!   set, recursive or not), or a function entered from outside called back from an unknown
//!   callee (any number of times), or, with no activation left, a new call from outside;
//! - `Edge(e)`: the current activation takes `Flow` or `Return` edge `e` of its graph, after all
//!   the calls of its block (a `Return` edge ends the activation);
//! - `Call(site)`: the current activation makes call `site`, the next call of its block;
//! - `Resume`: the pending call has returned.
//!
//! Every activation returns (early exits and re-entries are not modeled yet).
//!
//! # Cutting
//!
//! The current path of the innermost summary level (a new level starts at each activation
//! entered without a direct call, and its path begins `Entry_global -> Entry_P`) follows the
//! execution edge by edge: DAG edges, call edges `c -> Entry_Q` and return edges `Exit_Q -> r`
//! for direct calls, summary edges `c -> r` for the others (the callee's activations belong to
//! new levels, and the caller's path waits, pending). A root activation's return ends its path
//! with `Exit_P -> Exit_global`. A back edge or cut edge `x -> y` of `P` ends the current path
//! with `x -> GExit_P -> Exit_global` and starts the next one:
//!
//! - context (§3.4, §5.5 item 9): the prefix of the current path up to `Entry_P` of this
//!   activation (the context-prefix), then the surrogate edge `Entry_P -> y`;
//! - piecewise (§6): `Entry_global -> GEntry_P -> y`.

use super::number::IpNumbering;
use super::supergraph::{Callee, Mode, SEdge, SiteKind, Supergraph};
use super::{FnId, IpathError};
use crate::cfg::EdgeKind;
use crate::ids::{EdgeId, NodeId};
use crate::paths::dag::CfgImage;
use std::collections::BTreeMap;

/// One step of an execution (module doc).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Event {
    /// An activation of the function starts.
    Enter(FnId),
    /// The current activation takes the edge.
    Edge(EdgeId),
    /// The current activation makes the call (an index into its function's call sites).
    Call(u32),
    /// The pending call of the current activation returns.
    Resume,
}

/// The observable paths of an execution, in the order they end.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct CutPaths {
    /// Each path from `Entry_global` to `Exit_global`.
    pub paths: Vec<Vec<SEdge>>,
}

impl CutPaths {
    /// How often each path number occurs.
    pub fn counts(&self, num: &IpNumbering) -> Result<BTreeMap<u128, u64>, IpathError> {
        let mut counts = BTreeMap::new();
        for p in &self.paths {
            *counts.entry(num.path_number(p)?).or_insert(0u64) += 1;
        }
        Ok(counts)
    }
}

/// One activation while checking an execution.
struct Act {
    func: FnId,
    block: NodeId,
    seg: u32,
    /// The pending call and how many activations it has entered.
    pending: Option<(u32, u32)>,
}

fn bad(at: usize, what: impl Into<String>) -> IpathError {
    IpathError::BadExecution {
        at,
        what: what.into(),
    }
}

/// Checks that `events` is an execution of the functions of `g` (module doc).
pub fn check_execution(g: &Supergraph, events: &[Event]) -> Result<(), IpathError> {
    let mut stack: Vec<Act> = Vec::new();
    for (at, &ev) in events.iter().enumerate() {
        match ev {
            Event::Enter(f) => {
                if f.index() >= g.num_functions() {
                    return Err(bad(at, format!("no function {f}")));
                }
                match stack.last_mut() {
                    None if g.entered_from_outside(f) => {}
                    None => return Err(bad(at, format!("{f} is not entered from outside"))),
                    Some(a) => {
                        let Some((site, entered)) = a.pending.as_mut() else {
                            return Err(bad(at, "enter without a pending call"));
                        };
                        let ok = match g.calls(a.func)[*site as usize].callee {
                            Callee::Internal(q) => q == f && *entered == 0,
                            Callee::Unknown => g.entered_from_outside(f),
                        };
                        if !ok {
                            return Err(bad(at, format!("{f} cannot be entered here")));
                        }
                        *entered += 1;
                    }
                }
                stack.push(Act {
                    func: f,
                    block: NodeId::new(0),
                    seg: 0,
                    pending: None,
                });
            }
            Event::Edge(e) => {
                let Some(a) = stack.last_mut() else {
                    return Err(bad(at, "edge outside any activation"));
                };
                let cfg = g.cfg(a.func);
                if a.pending.is_some() || e.index() >= cfg.num_edges() {
                    return Err(bad(at, format!("edge {e} not possible here")));
                }
                let edge = cfg.edge(e);
                let calls_done = a.seg as usize == g.block_sites(a.func, a.block).len();
                if edge.src != a.block || !calls_done || !edge.kind.is_structural() {
                    return Err(bad(at, format!("edge {e} does not leave {}", a.block)));
                }
                if edge.kind == EdgeKind::Return {
                    stack.pop();
                } else {
                    a.block = edge.dst;
                    a.seg = 0;
                }
            }
            Event::Call(site) => {
                let Some(a) = stack.last_mut() else {
                    return Err(bad(at, "call outside any activation"));
                };
                let next = g.block_sites(a.func, a.block).get(a.seg as usize);
                if a.pending.is_some() || next != Some(&site) {
                    return Err(bad(at, format!("call {site} is not the next call")));
                }
                a.pending = Some((site, 0));
            }
            Event::Resume => {
                let Some(a) = stack.last_mut() else {
                    return Err(bad(at, "resume outside any activation"));
                };
                let Some((site, entered)) = a.pending.take() else {
                    return Err(bad(at, "resume without a pending call"));
                };
                let internal = matches!(g.calls(a.func)[site as usize].callee, Callee::Internal(_));
                if internal && entered != 1 {
                    return Err(bad(at, "the callee did not run"));
                }
                a.seg += 1;
            }
        }
    }
    if stack.is_empty() {
        Ok(())
    } else {
        Err(bad(
            events.len(),
            "the execution stops inside an activation",
        ))
    }
}

/// One activation while cutting.
struct Frame {
    func: FnId,
    /// Length of the current path up to and including the edge into `Entry_P`.
    entry_len: usize,
    /// Direct call site this activation was entered from.
    from: Option<(FnId, u32)>,
    pending: Option<u32>,
}

/// Cuts `events` (checked by [`check_execution`]) into the observable paths of `mode`.
pub fn cut_execution(g: &Supergraph, mode: Mode, events: &[Event]) -> Result<CutPaths, IpathError> {
    check_execution(g, events)?;
    let mut out = CutPaths::default();
    // The pending paths, one per summary level, current last.
    let mut levels: Vec<Vec<SEdge>> = Vec::new();
    let mut frames: Vec<Frame> = Vec::new();
    let start_edge = |f: FnId| match g.dag(f).image(EdgeId::new(0)) {
        CfgImage::Start(d) => SEdge::Intra { func: f, dag: d },
        _ => unreachable!("e0 is always the DAG's Start edge"),
    };
    for (at, &ev) in events.iter().enumerate() {
        match ev {
            Event::Enter(f) => {
                let direct = frames.last().and_then(|a| {
                    let site = a.pending?;
                    match g.site_kind(a.func, site) {
                        SiteKind::Direct(_) => Some((a.func, site)),
                        _ => None,
                    }
                });
                let from = match direct {
                    Some((func, site)) => {
                        let cur = levels.last_mut().ok_or_else(|| bad(at, "no path"))?;
                        cur.push(SEdge::Call { func, site });
                        Some((func, site))
                    }
                    None => {
                        levels.push(vec![SEdge::RootEntry(f)]);
                        None
                    }
                };
                let cur = levels.last_mut().ok_or_else(|| bad(at, "no path"))?;
                frames.push(Frame {
                    func: f,
                    entry_len: cur.len(),
                    from,
                    pending: None,
                });
                cur.push(start_edge(f));
            }
            Event::Edge(e) => {
                let a = frames.last().ok_or_else(|| bad(at, "no activation"))?;
                let f = a.func;
                let cur = levels.last_mut().ok_or_else(|| bad(at, "no path"))?;
                match g.dag(f).image(e) {
                    CfgImage::Kept(d) => cur.push(SEdge::Intra { func: f, dag: d }),
                    CfgImage::Back { end, start } | CfgImage::Cut { end, start } => {
                        let mut done = cur.clone();
                        done.push(SEdge::Intra { func: f, dag: end });
                        done.push(SEdge::GExitEnd(f));
                        out.paths.push(done);
                        match mode {
                            Mode::Context => cur.truncate(a.entry_len),
                            Mode::Piecewise => *cur = vec![SEdge::PieceEntry(f)],
                        }
                        cur.push(SEdge::Intra {
                            func: f,
                            dag: start,
                        });
                    }
                    other => return Err(bad(at, format!("edge {e} has image {other:?}"))),
                }
                if g.cfg(f).edge(e).kind == EdgeKind::Return {
                    match a.from {
                        Some((func, site)) => cur.push(SEdge::Return { func, site }),
                        None => {
                            cur.push(SEdge::RootExit(f));
                            out.paths.extend(levels.pop());
                        }
                    }
                    frames.pop();
                }
            }
            Event::Call(site) => {
                let a = frames.last_mut().ok_or_else(|| bad(at, "no activation"))?;
                a.pending = Some(site);
                if !matches!(g.site_kind(a.func, site), SiteKind::Direct(_)) {
                    let cur = levels.last_mut().ok_or_else(|| bad(at, "no path"))?;
                    cur.push(SEdge::Summary { func: a.func, site });
                }
            }
            Event::Resume => {
                let a = frames.last_mut().ok_or_else(|| bad(at, "no activation"))?;
                a.pending = None;
            }
        }
    }
    Ok(out)
}
