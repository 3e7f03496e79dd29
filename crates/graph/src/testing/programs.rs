//! Random sets of functions with calls, recursion and calls of unknown functions, and random
//! whole-program executions of them, for the tests of [`crate::ipaths`].
//!
//! Each function is a [`random_cfg_with`] graph, with early exits and re-entries if
//! [`ProgramConfig::early_percent`] says so (a block with an early-exit edge then mostly has a
//! call of an unknown function: the call that may not return), with random call sites: calls
//! of any function of the set (the function itself included, so direct and mutual recursion
//! occur) and calls of unknown functions, which may call back into the functions entered from
//! outside. An execution runs a few top-level calls of such functions; each activation walks
//! its graph like [`simulate`](super::simulate::simulate) (random edges, steering to a return once its step budget is
//! spent) and makes the calls of every block it passes in position order. With
//! [`ExecConfig::throw_percent`], an unknown call in a block with an early-exit edge may end
//! activations early (`Event::Unwind`): `exit`, a `longjmp` to any activation from there down
//! that is in such a call and has a re-entry edge, or an exception caught by an activation
//! from there down pending at a summary call (Melski & Reps 1998 §9.2).

use super::{arb_functions, distance_to_exit, random_cfg_with, GenConfig, Rng};
use crate::cfg::{Cfg, EdgeKind};
use crate::ids::{EdgeId, NodeId};
use crate::ipaths::supergraph::SiteKind;
use crate::ipaths::{CallSite, Callee, Event, FnId, Function, Supergraph};
use crate::paths::PathDag;
use proptest::prelude::*;

/// Shape parameters of [`random_program`].
#[derive(Clone, Debug)]
pub struct ProgramConfig {
    /// The set has `1 ..= max_functions` functions.
    pub max_functions: usize,
    /// Each function has `1 ..= max_blocks` blocks.
    pub max_blocks: usize,
    /// Chance (%) that a block contains calls.
    pub call_percent: u32,
    /// A block with calls has `1 ..= max_calls` of them.
    pub max_calls: usize,
    /// Chance (%) that a call is of an unknown function.
    pub unknown_percent: u32,
    /// Chance (%) that a function other than the first is entered from outside.
    pub outside_percent: u32,
    /// Chance (%) that a cuttable `Flow` edge is cut.
    pub cut_percent: u32,
    /// Chance (%) that a block has an early-exit edge (and a re-entry edge).
    pub early_percent: u32,
}

impl Default for ProgramConfig {
    fn default() -> Self {
        ProgramConfig {
            max_functions: 4,
            max_blocks: 7,
            call_percent: 30,
            max_calls: 2,
            unknown_percent: 25,
            outside_percent: 30,
            cut_percent: 5,
            early_percent: 0,
        }
    }
}

/// A random set of functions; function 0 is always entered from outside.
pub fn random_program(rng: &mut Rng, config: &ProgramConfig) -> Vec<Function> {
    let n = 1 + rng.below(config.max_functions.max(1));
    (0..n)
        .map(|i| {
            let cfg = random_cfg_with(rng, &shape(config));
            with_calls(i, n, cfg, rng, config)
        })
        .collect()
}

/// [`random_program`] as a proptest strategy: the graphs come from [`arb_cfg`] (so a failure
/// shrinks to fewer, smaller functions), the call sites and cuts from a seed.
pub fn arb_program(config: &ProgramConfig) -> impl Strategy<Value = Vec<Function>> {
    let config = config.clone();
    arb_functions(
        &shape(&config),
        config.max_functions,
        move |i, n, g, rng| with_calls(i, n, g, rng, &config),
    )
}

/// The shape of each function's graph.
fn shape(config: &ProgramConfig) -> GenConfig {
    GenConfig {
        max_blocks: config.max_blocks,
        early_exit_percent: config.early_percent,
        noreturn_percent: 0,
        reentry_percent: config.early_percent,
        ..GenConfig::default()
    }
}

/// Function `i` of `n` of a [`random_program`]: graph `cfg` with random call sites and cuts.
fn with_calls(i: usize, n: usize, cfg: Cfg, rng: &mut Rng, config: &ProgramConfig) -> Function {
    let mut calls = Vec::new();
    for b in cfg.blocks() {
        if !rng.percent(config.call_percent) {
            continue;
        }
        for _ in 0..1 + rng.below(config.max_calls.max(1)) {
            let callee = if rng.percent(config.unknown_percent) {
                Callee::Unknown
            } else {
                Callee::Internal(FnId::new(rng.below(n)))
            };
            calls.push(CallSite {
                block: b,
                position: rng.below(4) as u32,
                callee,
            });
        }
    }
    for b in cfg.blocks() {
        let unknown = calls
            .iter()
            .any(|c| c.block == b && c.callee == Callee::Unknown);
        if cfg.early_exit(b).is_some() && !unknown && rng.percent(80) {
            calls.push(CallSite {
                block: b,
                position: rng.below(4) as u32,
                callee: Callee::Unknown,
            });
        }
    }
    let dag = PathDag::new(&cfg);
    let cuts = cfg
        .edges()
        .filter(|&(e, edge)| {
            edge.kind == EdgeKind::Flow && dag.is_live(edge.src) && !dag.is_back_edge(e)
        })
        .map(|(e, _)| e)
        .filter(|_| rng.percent(config.cut_percent))
        .collect();
    Function {
        cfg,
        calls,
        entered_from_outside: i == 0 || rng.percent(config.outside_percent),
        cuts,
    }
}

/// Parameters of [`random_execution`].
#[derive(Clone, Debug)]
pub struct ExecConfig {
    /// Number of top-level calls.
    pub entries: usize,
    /// Steps per activation before it steers to a return.
    pub step_budget: usize,
    /// Chance (%) of each further callback from an unknown callee (at most 2 per call).
    pub callback_percent: u32,
    /// Deepest activation nesting before the execution is given up.
    pub max_depth: usize,
    /// Longest execution before it is given up.
    pub max_events: usize,
    /// Chance (%) that an unknown call in a block with an early-exit edge ends activations
    /// early (module doc).
    pub throw_percent: u32,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            entries: 3,
            step_budget: 12,
            callback_percent: 30,
            max_depth: 12,
            max_events: 20_000,
            throw_percent: 0,
        }
    }
}

/// `Flow::Unwind::to` of a landing outside the set's activations.
const OUTSIDE: usize = usize::MAX - 1;

/// How an activation's call ended.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Flow {
    Returned,
    /// Unwinding to the activation at this index of the stack (`usize::MAX`: `exit`),
    /// by `longjmp` (re-entry) or an exception (resume).
    Unwind {
        to: usize,
        longjmp: bool,
    },
}

struct Gen<'a> {
    program: &'a [Function],
    graph: Option<Supergraph>,
    dist: Vec<crate::ids::IdVec<NodeId, Option<usize>>>,
    outside: Vec<FnId>,
    config: &'a ExecConfig,
    events: Vec<Event>,
    /// Per activation: function, block, pending call.
    stack: Vec<(FnId, NodeId, Option<u32>)>,
}

impl Gen<'_> {
    fn abandonable(&self, i: usize) -> bool {
        let (f, b, site) = self.stack[i];
        site.is_some() && self.program[f.index()].cfg.early_exit(b).is_some()
    }

    /// The top activation, pending at an unknown call that may not return, ends
    /// activations (module doc): the events and how its call ends.
    fn throw(&mut self, rng: &mut Rng) -> Flow {
        let Some(g) = &self.graph else {
            return Flow::Returned;
        };
        let top = self.stack.len() - 1;
        let mut lo = top;
        while lo > 0 && self.abandonable(lo - 1) {
            lo -= 1;
        }
        let mut options = Vec::new();
        if lo == 0 && rng.percent(60) {
            // `exit`, or a landing outside the set (the execution goes on).
            let to = if rng.percent(50) { usize::MAX } else { OUTSIDE };
            options.push(Flow::Unwind { to, longjmp: false });
        }
        for l in lo..=top {
            let (f, _, site) = self.stack[l];
            let cfg = &self.program[f.index()].cfg;
            if cfg.edges().any(|(_, e)| e.kind == EdgeKind::Reentry) {
                options.push(Flow::Unwind {
                    to: l,
                    longjmp: true,
                });
            }
            let summary = site.is_some_and(|s| !matches!(g.site_kind(f, s), SiteKind::Direct(_)));
            if l < top && summary {
                options.push(Flow::Unwind {
                    to: l,
                    longjmp: false,
                });
            }
        }
        let Some(flow) = rng.pick(&options) else {
            return Flow::Returned;
        };
        if let Flow::Unwind { to, .. } = flow {
            let keep = if to >= OUTSIDE { 0 } else { to + 1 };
            if keep < self.stack.len() {
                self.events.push(Event::Unwind(keep as u32));
            }
        }
        flow
    }

    /// One activation of `f`; `None` if the limits are exceeded.
    fn activation(&mut self, rng: &mut Rng, f: FnId, depth: usize) -> Option<Flow> {
        if depth > self.config.max_depth || self.events.len() > self.config.max_events {
            return None;
        }
        let func = &self.program[f.index()];
        let cfg: &Cfg = &func.cfg;
        self.events.push(Event::Enter(f));
        self.stack.push((f, cfg.entry(), None));
        let me = self.stack.len() - 1;
        let mut v = cfg.entry();
        let mut steps = 0;
        'block: loop {
            if self.events.len() > self.config.max_events {
                return None;
            }
            self.stack[me].1 = v;
            let mut sites: Vec<usize> = (0..func.calls.len())
                .filter(|&s| func.calls[s].block == v)
                .collect();
            sites.sort_by_key(|&s| (func.calls[s].position, s));
            for s in sites {
                self.events.push(Event::Call(s as u32));
                self.stack[me].2 = Some(s as u32);
                let mut flow = Flow::Returned;
                match func.calls[s].callee {
                    Callee::Internal(q) => flow = self.activation(rng, q, depth + 1)?,
                    Callee::Unknown => {
                        for _ in 0..2 {
                            if !rng.percent(self.config.callback_percent) {
                                break;
                            }
                            if let Some(q) = rng.pick(&self.outside) {
                                flow = self.activation(rng, q, depth + 1)?;
                                if flow != Flow::Returned {
                                    break;
                                }
                            }
                        }
                        if flow == Flow::Returned
                            && cfg.early_exit(v).is_some()
                            && rng.percent(self.config.throw_percent)
                        {
                            flow = self.throw(rng);
                        }
                    }
                }
                match flow {
                    Flow::Returned => {}
                    Flow::Unwind { to, longjmp } if to == me => {
                        if longjmp {
                            let reentries: Vec<EdgeId> = cfg
                                .edges()
                                .filter(|(_, e)| e.kind == EdgeKind::Reentry)
                                .map(|(e, _)| e)
                                .collect();
                            let e = rng.pick(&reentries)?;
                            self.events.push(Event::Edge(e));
                            self.stack[me].2 = None;
                            v = cfg.edge(e).dst;
                            steps += 1;
                            continue 'block;
                        }
                    }
                    Flow::Unwind { .. } => {
                        self.stack.pop();
                        return Some(flow);
                    }
                }
                self.events.push(Event::Resume);
                self.stack[me].2 = None;
            }
            let outs: Vec<EdgeId> = cfg
                .succs(v)
                .iter()
                .copied()
                .filter(|&e| cfg.edge(e).kind.is_structural())
                .collect();
            steps += 1;
            let e = if steps > self.config.step_budget {
                let dist = &self.dist[f.index()];
                outs.iter()
                    .copied()
                    .find(|&e| cfg.edge(e).kind == EdgeKind::Return)
                    .or_else(|| {
                        outs.iter()
                            .copied()
                            .filter_map(|e| dist[cfg.edge(e).dst].map(|d| (d, e)))
                            .min()
                            .map(|(_, e)| e)
                    })?
            } else {
                rng.pick(&outs)?
            };
            self.events.push(Event::Edge(e));
            if cfg.edge(e).kind == EdgeKind::Return {
                self.stack.pop();
                return Some(Flow::Returned);
            }
            v = cfg.edge(e).dst;
        }
    }
}

/// A random execution of `program` (module doc), `None` if it recursed deeper than
/// `max_depth` or grew longer than `max_events`.
pub fn random_execution(
    program: &[Function],
    rng: &mut Rng,
    config: &ExecConfig,
) -> Option<Vec<Event>> {
    let outside: Vec<FnId> = (0..program.len())
        .filter(|&i| program[i].entered_from_outside)
        .map(FnId::new)
        .collect();
    let graph = if config.throw_percent > 0 {
        Some(Supergraph::new(program.to_vec()).ok()?)
    } else {
        None
    };
    let mut gen = Gen {
        program,
        graph,
        dist: program.iter().map(|f| distance_to_exit(&f.cfg)).collect(),
        outside,
        config,
        events: Vec::new(),
        stack: Vec::new(),
    };
    for _ in 0..config.entries {
        let f = rng.pick(&gen.outside)?;
        let flow = gen.activation(rng, f, 0)?;
        if flow
            == (Flow::Unwind {
                to: usize::MAX,
                longjmp: false,
            })
        {
            break; // exit
        }
    }
    Some(gen.events)
}
