//! Witness tracing (Ball & Larus 1994 §4): random programs of several functions with calls, and
//! their executions as `witness::Event`s.

use super::{arb_functions, random_cfg_with, GenConfig, Rng};
use crate::cfg::{Cfg, EdgeKind};
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::witness::{CallSite, Callee, Event, FuncId, FunctionInput, Landing};
use proptest::prelude::*;
use std::collections::VecDeque;

/// Shape parameters of [`random_program`].
#[derive(Clone, Debug)]
pub struct ProgramConfig {
    /// The program has `1 ..= max_functions` functions.
    pub max_functions: usize,
    /// The shape of each function's graph.
    pub graph: GenConfig,
    /// Chance (%) that a block has call sites.
    pub call_percent: u32,
    /// A block with calls has `1 ..= max_sites` of them.
    pub max_sites: usize,
    /// Chance (%) that a call site is [`Callee::Unknown`] (else direct if possible, or opaque).
    pub unknown_percent: u32,
    /// Chance (%) that a call site is [`Callee::Opaque`].
    pub opaque_percent: u32,
    /// Chance (%) that a block with calls gets an unwind edge (an `invoke`).
    pub unwind_percent: u32,
}

impl Default for ProgramConfig {
    fn default() -> Self {
        ProgramConfig {
            max_functions: 5,
            graph: GenConfig {
                max_blocks: 16,
                max_extra_edges: 3,
                ..GenConfig::default()
            },
            call_percent: 30,
            max_sites: 2,
            unknown_percent: 40,
            opaque_percent: 20,
            unwind_percent: 30,
        }
    }
}

/// A random program: function `i` calls functions `j > i` directly (so direct calls always
/// end), any function through [`Callee::Unknown`] sites (recursion included). Like tally's
/// lowering, every block with a call that is not opaque has an `EarlyExit` edge, and every
/// block with an `EarlyExit` edge has an unknown call (the one that may not return: in a block
/// with no other successor, like a call to `exit`, it is the last call). Some blocks with calls
/// get an unwind edge to a random block. Graphs come from [`random_cfg_with`]: multi-way
/// branches, self loops, irreducible loops, re-entry edges, dead blocks.
pub fn random_program(rng: &mut Rng, config: &ProgramConfig) -> Vec<FunctionInput> {
    let n = 1 + rng.below(config.max_functions.max(1));
    (0..n)
        .map(|i| {
            let g = random_cfg_with(rng, &config.graph);
            with_calls(i, n, g, rng, config)
        })
        .collect()
}

/// [`random_program`] as a proptest strategy: the graphs come from [`arb_cfg`] (so a failure
/// shrinks to fewer, smaller functions), the call sites and unwind edges from a seed.
pub fn arb_program(config: &ProgramConfig) -> impl Strategy<Value = Vec<FunctionInput>> {
    let (shape, max_functions) = (config.graph.clone(), config.max_functions);
    let config = config.clone();
    arb_functions(&shape, max_functions, move |i, n, g, rng| {
        with_calls(i, n, g, rng, &config)
    })
}

/// Function `i` of `n` of a [`random_program`]: graph `g` with random call sites (and the
/// early-exit and unwind edges they bring).
fn with_calls(i: usize, n: usize, g: Cfg, rng: &mut Rng, config: &ProgramConfig) -> FunctionInput {
    let mut calls: IdVec<NodeId, Vec<CallSite>> = IdVec::filled(g.num_nodes(), Vec::new());
    let mut edges: Vec<crate::cfg::Edge> = g.edges().map(|(_, e)| e).collect();
    let mut unwind = vec![false; edges.len()];
    for v in g.blocks() {
        if rng.percent(config.call_percent) {
            for _ in 0..1 + rng.below(config.max_sites.max(1)) {
                let callee = if rng.percent(config.unknown_percent) {
                    Callee::Unknown
                } else if i + 1 < n && !rng.percent(config.opaque_percent) {
                    let g = FuncId((i + 1 + rng.below(n - i - 1)) as u32);
                    if rng.percent(30) {
                        Callee::DirectBack(g)
                    } else {
                        Callee::Direct(g)
                    }
                } else {
                    Callee::Opaque
                };
                calls[v].push(CallSite { callee });
            }
        }
        let early = g.early_exit(v).is_some();
        if early {
            calls[v].push(CallSite {
                callee: Callee::Unknown,
            });
        }
        let calling = calls[v].iter().any(|c| c.callee != Callee::Opaque);
        if calling && !early {
            edges.push(crate::cfg::Edge {
                src: v,
                dst: g.exit(),
                kind: EdgeKind::EarlyExit,
            });
            unwind.push(false);
        }
        if calling && rng.percent(config.unwind_percent) {
            edges.push(crate::cfg::Edge {
                src: v,
                dst: NodeId::new(rng.below(g.num_blocks())),
                kind: EdgeKind::Flow,
            });
            unwind.push(true);
        }
    }
    let cfg = match Cfg::from_edges(g.num_blocks(), edges) {
        Ok(cfg) => cfg,
        Err(err) => panic!("random_program built an invalid graph: {err}"),
    };
    FunctionInput {
        cfg,
        calls,
        unwind: IdVec::from_vec(unwind),
    }
}

/// Parameters of [`simulate_program`].
#[derive(Clone, Debug)]
pub struct ExecConfig {
    /// Top-level activations (the first of function 0, then random functions).
    pub top_calls: usize,
    /// Steps (blocks and calls) before every activation steers to its nearest end.
    pub step_budget: usize,
    /// Chance (%) that an unknown call calls back (again) into a random function.
    pub callback_percent: u32,
    /// Chance (%) that an unknown call abandons its frame (longjmp, throw, exit).
    pub abandon_percent: u32,
    /// Chance (%) that an abandonment ends the thread rather than landing.
    pub end_percent: u32,
    /// No callbacks beyond this many activations.
    pub max_depth: usize,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            top_calls: 3,
            step_budget: 400,
            callback_percent: 25,
            abandon_percent: 8,
            end_percent: 20,
            max_depth: 8,
        }
    }
}

struct SimFrame {
    func: FuncId,
    block: NodeId,
    site: usize,
    in_unknown: bool,
    /// In a [`Callee::DirectBack`] call: `Back` follows its return.
    back: bool,
}

/// For each vertex, the length of a shortest path of normal edges to a block that returns or
/// has no normal successor (where the walk ends), `None` if there is none.
fn distance_to_end(f: &FunctionInput) -> IdVec<NodeId, Option<usize>> {
    let cfg = &f.cfg;
    let mut dist = IdVec::filled(cfg.num_nodes(), None);
    let mut queue = VecDeque::new();
    for v in cfg.blocks() {
        let mut outs = f.normal_succs(v).peekable();
        let ends = outs.peek().is_none()
            || f.normal_succs(v)
                .any(|e| cfg.edge(e).kind == EdgeKind::Return);
        if ends {
            dist[v] = Some(0);
            queue.push_back(v);
        }
    }
    while let Some(w) = queue.pop_front() {
        let d = dist[w].map_or(0, |d| d + 1);
        for &e in cfg.preds(w) {
            let src = cfg.edge(e).src;
            if f.is_normal(e) && !cfg.is_exit(src) && dist[src].is_none() {
                dist[src] = Some(d);
                queue.push_back(src);
            }
        }
    }
    dist
}

/// One random execution of a program from [`random_program`], as the events the
/// instrumentation sees (see [`crate::witness::Event`]): calls in block order before the
/// terminator, callbacks and normal returns of unknown calls, abandonments that land at a
/// `Reentry` target or an unwind edge of any activation on the stack or end the thread.
pub fn simulate_program(funcs: &[FunctionInput], rng: &mut Rng, config: &ExecConfig) -> Vec<Event> {
    let dist: Vec<IdVec<NodeId, Option<usize>>> = funcs.iter().map(distance_to_end).collect();
    let mut events = Vec::new();
    let mut steps = 0usize;
    let mut stack: Vec<SimFrame> = Vec::new();
    let enter = |stack: &mut Vec<SimFrame>, events: &mut Vec<Event>, func: FuncId, announced| {
        events.push(Event::Enter { func, announced });
        stack.push(SimFrame {
            func,
            block: funcs[func.index()].cfg.entry(),
            site: 0,
            in_unknown: false,
            back: false,
        });
    };
    for t in 0..config.top_calls {
        let f = if t == 0 { 0 } else { rng.below(funcs.len()) };
        enter(&mut stack, &mut events, FuncId(f as u32), true);
        while let Some(top) = stack.last() {
            steps += 1;
            let steering = steps > config.step_budget;
            let ti = stack.len() - 1;
            let (func, block, site, in_unknown) = (top.func, top.block, top.site, top.in_unknown);
            let fi = &funcs[func.index()];
            let sites = &fi.calls[block];
            let noreturn = fi.normal_succs(block).next().is_none();
            if in_unknown {
                let must = noreturn && site + 1 == sites.len();
                if !steering
                    && !must
                    && stack.len() < config.max_depth
                    && rng.percent(config.callback_percent)
                {
                    let g = FuncId(rng.below(funcs.len()) as u32);
                    enter(&mut stack, &mut events, g, true);
                } else if must || (!steering && rng.percent(config.abandon_percent)) {
                    // Landing options: an unwind edge of the block an activation is calling
                    // from, or a re-entry point of its function.
                    let mut options = Vec::new();
                    for (j, fr) in stack.iter().enumerate() {
                        let g = &funcs[fr.func.index()];
                        for &e in g.cfg.succs(fr.block) {
                            if g.unwind[e] {
                                options.push((j, g.cfg.edge(e).dst, Landing::Unwind));
                            }
                        }
                        for &e in g.cfg.succs(g.cfg.exit()) {
                            if g.cfg.edge(e).kind == EdgeKind::Reentry {
                                options.push((j, g.cfg.edge(e).dst, Landing::Reentry));
                            }
                        }
                    }
                    if steering || options.is_empty() || rng.percent(config.end_percent) {
                        events.push(Event::End);
                        return events;
                    }
                    let (j, to, how) = options[rng.below(options.len())];
                    events.push(Event::Unwind {
                        abandoned: (stack.len() - 1 - j) as u32,
                        to,
                        how,
                    });
                    stack.truncate(j + 1);
                    let fr = &mut stack[j];
                    fr.block = to;
                    fr.site = 0;
                    fr.in_unknown = false;
                    fr.back = false;
                } else {
                    events.push(Event::Back);
                    stack[ti].in_unknown = false;
                    stack[ti].site += 1;
                }
                continue;
            }
            if site < sites.len() {
                match sites[site].callee {
                    Callee::Opaque => stack[ti].site += 1,
                    Callee::Unknown => stack[ti].in_unknown = true,
                    Callee::Direct(g) => {
                        stack[ti].site += 1;
                        enter(&mut stack, &mut events, g, false);
                    }
                    Callee::DirectBack(g) => {
                        stack[ti].site += 1;
                        stack[ti].back = true;
                        enter(&mut stack, &mut events, g, false);
                    }
                }
                continue;
            }
            let outs: Vec<EdgeId> = fi.normal_succs(block).collect();
            let e = if steering {
                let d = &dist[func.index()];
                let returns = outs
                    .iter()
                    .copied()
                    .filter(|&e| fi.cfg.edge(e).kind == EdgeKind::Return)
                    .map(|e| (0, e));
                let inner = outs
                    .iter()
                    .copied()
                    .filter_map(|e| d[fi.cfg.edge(e).dst].map(|x| (x + 1, e)));
                match returns.chain(inner).min() {
                    Some((_, e)) => e,
                    None => panic!("{func} {block} cannot reach an end"),
                }
            } else {
                match rng.pick(&outs) {
                    Some(e) => e,
                    None => panic!("{func} {block} has no successor"),
                }
            };
            events.push(Event::Edge(e));
            let edge = fi.cfg.edge(e);
            if edge.kind == EdgeKind::Return {
                stack.pop();
                if let Some(caller) = stack.last_mut().filter(|c| c.back) {
                    caller.back = false;
                    events.push(Event::Back);
                }
            } else {
                stack[ti].block = edge.dst;
                stack[ti].site = 0;
            }
        }
    }
    if rng.percent(50) {
        events.push(Event::End);
    }
    events
}
