//! The reference cutter: an execution of the whole program cut into observable paths by the
//! definitions of Melski & Reps 1998 (§3.4 context paths, §6 piecewise paths), as explicit edge
//! sequences of `G*_fn`, without the `ψ`/`ρ` functions. Numbering them with
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
//!   the calls of its block (a `Return` edge ends the activation), or `Reentry` edge `e`
//!   (`longjmp` came back to its `setjmp`: the activation must be pending at a call in a block
//!   with an early-exit edge, the call that let the `longjmp` through);
//! - `Call(site)`: the current activation makes call `site`, the next call of its block;
//! - `Resume`: the pending call has returned (normally, or with an exception the activation
//!   catches: the landing pad is then the next `Edge`; or after an exception or `longjmp` that
//!   abandoned activations above landed in code outside the set that returned normally);
//! - `Unwind(k)`: the activations above the `k` innermost-last first ones are abandoned (`exit`,
//!   `longjmp`, an exception), at most one `longjmp` or exception at a time. Each abandoned
//!   activation is pending at a call in a block with an early-exit edge (a call that may not
//!   return: tally's graphs give such blocks that edge, Ball & Larus 1994 §3.2), and so is the
//!   remaining innermost one if it is pending at a direct call (its callee was abandoned): its
//!   next event is then its `Reentry` edge. `Unwind(0)` is `exit`, or a `longjmp` or exception
//!   that lands outside the set's activations: more activations may follow.
//!
//! An execution ends with no activation (after an `exit`, with `Unwind(0)`).
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
//!
//! Abandoned activations (§9.2.1-§9.2.2: the profile records the prefixes of the current path
//! and of every pending path): `Unwind(k)` ends, for every level with an abandoned activation,
//! the level's path at its innermost activation `a`, pending at a call in block `v`: the path
//! runs on through the summary edges of `v`'s calls after the pending one up to the first
//! direct call `c` (whose callee never ran) and ends `c -> GExit_P -> Exit_global` (the
//! surrogate edge `Abandon`), or, with no direct call left in `v`, through all of them and
//! `v`'s early-exit DAG edge `v -> GExit_P` ([`Supergraph`] module doc). A level whose
//! outermost activations remain keeps no path: its remaining innermost activation is pending
//! at a direct call into the abandoned part, and must take its `Reentry` edge next. A
//! `Reentry` edge `EXIT -> y` of the current activation `a` first ends the level's path at `a`
//! the same way (unless `Unwind` just ended it), then starts the next one like a back edge into
//! `y` (the DAG's `START -> y`): context-prefix then `Entry_P -> y`, or
//! `Entry_global -> GEntry_P -> y` (§9.2.2: "uses the edge `Entry_P -> v` (or the edge
//! `GEntry_P -> v`) to begin recording a new observable path"). An exception caught by an
//! activation pending at a summary call continues that activation's path (the summary edge, then
//! the landing pad's edge): the callee's activations were other levels.

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
    /// Every activation but the first `k` is abandoned (`Unwind(0)`: all of them, by `exit` or
    /// a landing outside the set).
    Unwind(u32),
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
    /// Its pending direct call's callee was abandoned: only its `Reentry` edge may follow.
    broken: bool,
}

fn bad(at: usize, what: impl Into<String>) -> IpathError {
    IpathError::BadExecution {
        at,
        what: what.into(),
    }
}

/// True if the activation may be abandoned (or re-entered) where it is: pending at a call in
/// a block with an early-exit edge.
fn abandonable(g: &Supergraph, a: &Act) -> bool {
    a.pending.is_some() && g.cfg(a.func).early_exit(a.block).is_some()
}

/// Checks that `events` is an execution of the functions of `g` (module doc).
pub fn check_execution(g: &Supergraph, events: &[Event]) -> Result<(), IpathError> {
    let mut stack: Vec<Act> = Vec::new();
    for (at, &ev) in events.iter().enumerate() {
        if stack.last().is_some_and(|a| a.broken)
            && !matches!(ev, Event::Edge(e) if stack.last().is_some_and(|a| e.index() < g.cfg(a.func).num_edges() && g.cfg(a.func).edge(e).kind == EdgeKind::Reentry))
            && !matches!(ev, Event::Unwind(_))
        {
            return Err(bad(
                at,
                "an activation whose callee was abandoned must be re-entered",
            ));
        }
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
                    broken: false,
                });
            }
            Event::Edge(e) => {
                let Some(a) = stack.last_mut() else {
                    return Err(bad(at, "edge outside any activation"));
                };
                let cfg = g.cfg(a.func);
                if e.index() >= cfg.num_edges() {
                    return Err(bad(at, format!("edge {e} not possible here")));
                }
                let edge = cfg.edge(e);
                if edge.kind == EdgeKind::Reentry {
                    if !abandonable(g, a) {
                        return Err(bad(at, format!("re-entry {e} where no call may end")));
                    }
                    a.pending = None;
                    a.broken = false;
                    a.block = edge.dst;
                    a.seg = 0;
                    continue;
                }
                if a.pending.is_some() {
                    return Err(bad(at, format!("edge {e} not possible here")));
                }
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
            Event::Unwind(k) => {
                let k = k as usize;
                if k >= stack.len() {
                    return Err(bad(
                        at,
                        format!("unwind to {k} of {} activations", stack.len()),
                    ));
                }
                if stack[k..].iter().any(|a| !abandonable(g, a)) {
                    return Err(bad(at, "an activation abandoned where no call may end"));
                }
                stack.truncate(k);
                match stack.last_mut() {
                    None => {}
                    Some(a) => {
                        let site = a.pending.map(|p| p.0);
                        let direct = site
                            .is_some_and(|s| matches!(g.site_kind(a.func, s), SiteKind::Direct(_)));
                        if !abandonable(g, a) {
                            return Err(bad(
                                at,
                                "the landing activation is not in a call that may end",
                            ));
                        }
                        a.broken = direct;
                    }
                }
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
    block: NodeId,
    /// Calls of `block` made and resumed.
    seg: u32,
    pending: Option<u32>,
    /// Its level's path was ended by `Unwind` (its direct callee was abandoned).
    ended: bool,
}

/// The current path `cur` of the level whose innermost activation is `a`, ended where `a` is
/// abandoned (module doc).
fn abandoned_path(
    g: &Supergraph,
    a: &Frame,
    cur: &[SEdge],
    at: usize,
) -> Result<Vec<SEdge>, IpathError> {
    let f = a.func;
    let mut p = cur.to_vec();
    let sites = g.block_sites(f, a.block);
    // The pending call's summary edge is already on the path.
    let from = a.seg as usize + usize::from(a.pending.is_some());
    for &site in sites.iter().skip(from) {
        match g.site_kind(f, site) {
            SiteKind::Direct(_) => {
                if !g.has_abandon(f, site) {
                    return Err(bad(at, format!("{f}: call {site} has no abandon edge")));
                }
                p.push(SEdge::Abandon { func: f, site });
                p.push(SEdge::GExitEnd(f));
                return Ok(p);
            }
            _ => p.push(SEdge::Summary { func: f, site }),
        }
    }
    let e = g
        .cfg(f)
        .early_exit(a.block)
        .ok_or_else(|| bad(at, format!("{f}: block {} has no early exit", a.block)))?;
    match g.dag(f).image(e) {
        CfgImage::EarlyExit(d) => p.push(SEdge::Intra { func: f, dag: d }),
        other => return Err(bad(at, format!("early exit {e} has image {other:?}"))),
    }
    p.push(SEdge::GExitEnd(f));
    Ok(p)
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
    // Ends the current path of `a`'s level at `a` and restarts it at DAG edge `start`.
    let restart = |a: &Frame, cur: &mut Vec<SEdge>, start| {
        match mode {
            Mode::Context => cur.truncate(a.entry_len),
            Mode::Piecewise => *cur = vec![SEdge::PieceEntry(a.func)],
        }
        cur.push(SEdge::Intra {
            func: a.func,
            dag: start,
        });
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
                    block: NodeId::new(0),
                    seg: 0,
                    pending: None,
                    ended: false,
                });
                cur.push(start_edge(f));
            }
            Event::Edge(e) => {
                let a = frames.last_mut().ok_or_else(|| bad(at, "no activation"))?;
                let f = a.func;
                let cur = levels.last_mut().ok_or_else(|| bad(at, "no path"))?;
                let edge = g.cfg(f).edge(e);
                match g.dag(f).image(e) {
                    CfgImage::Kept(d) => cur.push(SEdge::Intra { func: f, dag: d }),
                    CfgImage::Back { end, start } | CfgImage::Cut { end, start } => {
                        let mut done = cur.clone();
                        done.push(SEdge::Intra { func: f, dag: end });
                        done.push(SEdge::GExitEnd(f));
                        out.paths.push(done);
                        restart(a, cur, start);
                    }
                    CfgImage::Reentry(start) => {
                        if !a.ended {
                            out.paths.push(abandoned_path(g, a, cur, at)?);
                        }
                        restart(a, cur, start);
                        a.pending = None;
                        a.ended = false;
                    }
                    CfgImage::Dead => {
                        // A re-entry into a block no search reached cannot happen: the DAG
                        // makes every re-entry target live.
                        return Err(bad(at, format!("edge {e} is dead")));
                    }
                    other => return Err(bad(at, format!("edge {e} has image {other:?}"))),
                }
                a.block = edge.dst;
                a.seg = 0;
                if edge.kind == EdgeKind::Return {
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
                a.seg += 1;
            }
            Event::Unwind(k) => {
                let k = k as usize;
                while frames.len() > k {
                    // The innermost activation of the current level, and where the level
                    // starts.
                    let top = frames.len() - 1;
                    let start = (0..=top)
                        .rev()
                        .find(|&i| frames[i].from.is_none())
                        .ok_or_else(|| bad(at, "no root"))?;
                    let cur = levels.last().ok_or_else(|| bad(at, "no path"))?;
                    out.paths.push(abandoned_path(g, &frames[top], cur, at)?);
                    if start >= k {
                        frames.truncate(start);
                        levels.pop();
                    } else {
                        frames.truncate(k);
                        if let Some(a) = frames.last_mut() {
                            a.ended = true;
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}
