//! What the instrumented program does (Melski & Reps 1998 §5.5 context, §6.3 piecewise), as the
//! data the instrumenter emits ([`EdgeAction`], [`CallAction`], [`EntryAction`]) and a [`Machine`]
//! that executes it on an [`Event`] sequence. The machine is the specification of the LLVM and C
//! runtime side: its counts must equal the [cutter](super::cutter)'s.
//!
//! # State
//!
//! Per thread: the path register `reg` (`pathNum`, which the paper passes by reference) and, in
//! piecewise mode, `open` (`cntOpenLfParens`). Per activation: `nvc`
//! (`numValidCompsFromExit`, passed by value), `on_entry` (`pathNumOnEntry`, context mode), and
//! in a root activation the `reg` and `open` of the interrupted path (the paper's
//! `pathNumBeforeCall`, which its caller saves around a recursive call; here the root itself
//! saves and restores them, so that callbacks from unknown code and signal handlers that run
//! instrumented code leave the interrupted path intact too). The paper changes
//! every function's signature to pass `reg` and `nvc`; tally must not (functions are called from
//! other files and through pointers), so a direct call passes `nvc` in a *handshake*: the caller
//! announces "callee `Q`, `nvc`" and `Q`'s entry takes it if it is addressed to `Q`, otherwise
//! the activation was entered from outside (a callback, a recursive call, a call from another
//! file) and is a *root*. How the runtime stores the handshake is its business; the machine
//! keeps it as `(callee, nvc)` in a per-thread slot that a direct call sets, the addressed
//! entry takes, and a summary call and every resume clear. An entry it is not addressed to
//! leaves it alone: a signal handler (or an interposed callee calling back) running between
//! the call and the callee's entry must not take or destroy it. A call of a definition that
//! can be interposed must therefore be `Unknown` in the description: if another definition
//! runs, nobody takes the handshake and the path would lack the callee's part.
//!
//! # Steps
//!
//! All sums are exact (`u128` here; `u64` in the program when
//! [`IpNumbering::fits_u64`]); `count[n]++` counts path `n`.
//!
//! - **Entry of `P`** ([`EntryAction`]): with a handshake for `P`: `nvc = handshake.nvc`,
//!   `on_entry = reg`. Otherwise (root): `saved = (reg, open)`, `reg = root_value` (the value
//!   of `Entry_global -> Entry_P`, eq. (27)), `nvc = 1`, `open = 1`, `on_entry = reg`. Then
//!   `reg += start(nvc)` (`ρ` of `Entry_P -> n0`, normally `<0,0>`).
//! - **Intraprocedural edge** ([`EdgeAction`]): `Add(l)`: `reg += l(nvc)` (§5.5 item 8).
//!   `ContextRestart { end, start }` (a back edge or cut edge, context mode, §5.5 item 9):
//!   `count[reg + end(nvc)]++; reg = on_entry + start(nvc)`. `PieceRestart { end, nvc: n, reg: r }`
//!   (piecewise, Fig. 16): `count[reg + end(nvc)]++; open = 0; nvc = n; reg = r`.
//!   `Return(l)`: `reg += l(nvc)`, then the return below.
//! - **Call at site `s`** ([`CallAction`]): `Direct { callee, psi_r, .. }` (non-recursive call
//!   of the set): handshake `(callee, psi_r(nvc))`; piecewise also `open += 1`. `Summary`
//!   (recursive call, call through a pointer, call leaving the set): no handshake, nothing
//!   else.
//! - **Return of `P`**: a root: piecewise, if `open == 0` (the path started inside the
//!   activation and returns unmatched), `reg += root_exit_value`; then `count[reg]++` (the path
//!   ends with `Exit_P -> Exit_global`); `(reg, open) = saved`. A non-root does nothing more.
//! - **Resume after call `s`**: `Direct { unmatched_value, unmatched_nvc, .. }`: piecewise, if
//!   `open == 0` (the callee restarted the path, so this return is an unmatched right
//!   parenthesis, Algorithm 6.1): `reg += unmatched_value; nvc = unmatched_nvc`, else
//!   `open -= 1`; context: nothing (`nvc` is the caller's own). `Summary`: nothing. Every
//!   resume clears the handshake.
//!
//! # Abandoned activations (§9.2)
//!
//! tally's frame records (Ball & Larus 1994 §3.2; `c/frames.c`) are the paper's stack of pending
//! path prefixes (§9.2.1 `pendingPaths`): each activation that may be abandoned keeps a
//! *site*, the number of the path that ends if the activation is abandoned where it is, and
//! the runtime counts the sites of the abandoned activations (`exit`, `_exit`, a `longjmp`
//! past them, an exception unwound through them) and, for a `longjmp`, of the activation it
//! lands in. The machine keeps `site` per activation:
//!
//! - **Call at site `s` in a block with an early-exit edge**: `Direct`: `site = none` (the
//!   callee's activations carry this level's path on; `clears_site`). `Summary { abandon:
//!   Some(l) }`: `site = reg + l(nvc)`: the path through the summary edges of the block's
//!   calls up to the next direct call and `Abandon` there, or to the block's early-exit edge
//!   (`ρ` of that edge; the summary edges are worth 0), as the [cutter](super::cutter) ends it.
//! - **Summary call**: the activation keeps its own `reg` across it (the program keeps it in
//!   the frame) and, piecewise, restores `open` after it (and at a landing pad, where an
//!   exception the activation catches lands): a root abandoned inside never restored what it
//!   saved. So at `Resume` after a summary call, `reg` and `open` are what they were at the
//!   call.
//! - **`Unwind(k)`**: `count[site]++` for each abandoned activation that has a site.
//! - **`Reentry` edge** (`__tally_longjmp_landed`): `count[site]++` for the activation, then
//!   context: `reg = on_entry + start(nvc)`; piecewise: `open = 0; nvc = n; reg = r` (as a
//!   back edge restarts).

use super::cutter::{check_execution, Event};
use super::number::{IpNumbering, Lin};
use super::supergraph::{Mode, SiteKind};
use super::{FnId, IpathError};
use crate::cfg::EdgeKind;
use crate::ids::{EdgeId, IdVec};
use crate::paths::dag::CfgImage;
use crate::paths::dag::DagEdgeId;
use std::collections::BTreeMap;

/// What the program does when it takes a control-flow edge (module doc).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum EdgeAction {
    /// `reg += l(nvc)`.
    Add(Lin),
    /// `reg += l(nvc)`, then the function returns.
    Return(Lin),
    /// Context mode, back or cut edge: `count[reg + end(nvc)]++; reg = on_entry + start(nvc)`.
    ContextRestart {
        /// `ρ` of `x -> GExit_P`.
        end: Lin,
        /// `ρ` of `Entry_P -> y`.
        start: Lin,
    },
    /// Piecewise mode, back or cut edge: `count[reg + end(nvc)]++; open = 0; nvc = n; reg = r`.
    PieceRestart {
        /// `ρ` of `x -> GExit_P`.
        end: Lin,
        /// `numUnbalRLPaths[Exit_P]`.
        nvc: u128,
        /// The value of `Entry_global -> GEntry_P` plus `ρ` of `GEntry_P -> y` at `nvc`.
        reg: u128,
    },
    /// An early exit: the path `reg + l(nvc)` ends there (the value a summary call with no
    /// direct call after it in the block stores as the site; the edge itself has no code).
    EarlyExit(Lin),
    /// Context mode, a re-entry (`longjmp` landed): `count[site]++; reg = on_entry + l(nvc)`.
    Reentry(Lin),
    /// Piecewise mode, a re-entry: `count[site]++; open = 0; nvc = n; reg = r`.
    PieceReentry {
        /// `numUnbalRLPaths[Exit_P]`.
        nvc: u128,
        /// The value of `Entry_global -> GEntry_P` plus `ρ` of `GEntry_P -> v` at `nvc`.
        reg: u128,
    },
    /// The edge leaves a dead block, or is `e0`: nothing.
    None,
}

/// What the program does at a call site (module doc).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum CallAction {
    /// A direct call of a function of the set.
    Direct {
        /// The callee.
        callee: FnId,
        /// `ψ_r` of the return site: the callee's `nvc` is `psi_r(nvc)`.
        psi_r: Lin,
        /// Piecewise: added to `reg` when the call returns with `open == 0` (eq. (35)).
        unmatched_value: u128,
        /// Piecewise: the caller's `nvc` after such a return, `numUnbalRLPaths[Exit_S]` (not
        /// `ψ_r` of it, as Algorithm 6.1 is printed: see [`IpNumbering::path_number`]'s walk).
        unmatched_nvc: u128,
        /// The block has an early-exit edge: `site = none` before the call.
        clears_site: bool,
    },
    /// A summary edge (a root the call enters saves and restores `reg`).
    Summary {
        /// With an early-exit edge in the block: `site = reg + abandon(nvc)` before the call.
        abandon: Option<Lin>,
    },
}

/// What the program does when a function is entered (module doc).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct EntryAction {
    /// The value of `Entry_global -> Entry_P`, `None` if the function is not a root (entering
    /// it without a handshake is then an error of the front end).
    pub root_value: Option<u128>,
    /// `ρ` of `Entry_P -> n0`.
    pub start: Lin,
    /// Piecewise: added to `reg` when a root returns with `open == 0`.
    pub root_exit_value: u128,
}

/// Everything the instrumenter emits for one function.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FunctionPlan {
    /// At the entry.
    pub entry: EntryAction,
    /// Per control-flow edge.
    pub edges: IdVec<EdgeId, EdgeAction>,
    /// Per call site (index into the function's call sites).
    pub calls: Vec<CallAction>,
}

impl IpNumbering {
    /// The actions of every edge, call site and the entry of `f`.
    pub fn plan(&self, f: FnId) -> Result<FunctionPlan, IpathError> {
        let cfg = self.graph().cfg(f);
        let edges = cfg
            .edges()
            .map(|(e, _)| self.edge_action(f, e))
            .collect::<Result<Vec<_>, _>>()?;
        let calls = (0..self.graph().calls(f).len() as u32)
            .map(|s| self.call_action(f, s))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FunctionPlan {
            entry: self.entry_action(f),
            edges: IdVec::from_vec(edges),
            calls,
        })
    }

    /// The action for edge `e` of `f`.
    pub fn edge_action(&self, f: FnId, e: EdgeId) -> Result<EdgeAction, IpathError> {
        let g = self.graph();
        let rho = |d| self.rho(f, d);
        Ok(match g.dag(f).image(e) {
            CfgImage::Start(_) | CfgImage::Dead => EdgeAction::None,
            CfgImage::Kept(d) if g.cfg(f).edge(e).kind == EdgeKind::Return => {
                EdgeAction::Return(rho(d))
            }
            CfgImage::Kept(d) => EdgeAction::Add(rho(d)),
            CfgImage::EarlyExit(d) => EdgeAction::EarlyExit(rho(d)),
            CfgImage::Reentry(d) => match self.mode() {
                Mode::Context => EdgeAction::Reentry(rho(d)),
                Mode::Piecewise => {
                    let (nvc, reg) = self.piece_start(f, d)?;
                    EdgeAction::PieceReentry { nvc, reg }
                }
            },
            CfgImage::Back { end, start } | CfgImage::Cut { end, start } => match self.mode() {
                Mode::Context => EdgeAction::ContextRestart {
                    end: rho(end),
                    start: rho(start),
                },
                Mode::Piecewise => {
                    let (nvc, reg) = self.piece_start(f, start)?;
                    EdgeAction::PieceRestart {
                        end: rho(end),
                        nvc,
                        reg,
                    }
                }
            },
        })
    }

    /// `numUnbalRLPaths[Exit_f]` and the register of a piecewise path that starts with
    /// `Entry_global -> GEntry_f` and DAG edge `start`.
    fn piece_start(&self, f: FnId, start: DagEdgeId) -> Result<(u128, u128), IpathError> {
        let nvc = self.num_unbal_rl_paths(f);
        let base = self.piece_value(f).unwrap_or(0);
        let reg = self
            .rho(f, start)
            .eval(nvc)
            .and_then(|v| v.checked_add(base))
            .ok_or(IpathError::Overflow { func: f })?;
        Ok((nvc, reg))
    }

    /// What summary call `site` of `f` adds to `reg` for the path that ends if the activation
    /// is abandoned in it (module doc), `None` if its block has no early-exit edge.
    pub fn abandon_value(&self, f: FnId, site: u32) -> Result<Option<Lin>, IpathError> {
        let g = self.graph();
        let block = g.calls(f)[site as usize].block;
        let Some(ee) = g.cfg(f).early_exit(block) else {
            return Ok(None);
        };
        let sites = g.block_sites(f, block);
        let after = &sites[g.site_index(f, site) as usize + 1..];
        if let Some(&j) = after
            .iter()
            .find(|&&j| matches!(g.site_kind(f, j), SiteKind::Direct(_)))
        {
            return self.abandon_rho(f, j).map(Some);
        }
        Ok(match g.dag(f).image(ee) {
            CfgImage::EarlyExit(d) => Some(self.rho(f, d)),
            _ => None, // a dead block
        })
    }

    /// The action for call site `site` of `f`.
    pub fn call_action(&self, f: FnId, site: u32) -> Result<CallAction, IpathError> {
        let g = self.graph();
        let block = g.calls(f)[site as usize].block;
        Ok(match g.site_kind(f, site) {
            SiteKind::Direct(callee) => {
                let psi_r = self.psi(g.return_vertex(f, site));
                let (unmatched_value, unmatched_nvc) = match self.mode() {
                    Mode::Context => (0, 0),
                    Mode::Piecewise => (self.return_value(f, site), self.num_unbal_rl_paths(f)),
                };
                CallAction::Direct {
                    callee,
                    psi_r,
                    unmatched_value,
                    unmatched_nvc,
                    clears_site: g.cfg(f).early_exit(block).is_some(),
                }
            }
            SiteKind::Recursive(_) | SiteKind::Unknown => CallAction::Summary {
                abandon: self.abandon_value(f, site)?,
            },
        })
    }

    /// The action at the entry of `f`.
    pub fn entry_action(&self, f: FnId) -> EntryAction {
        let start = match self.graph().dag(f).image(EdgeId::new(0)) {
            CfgImage::Start(d) => self.rho(f, d),
            _ => Lin::ZERO,
        };
        EntryAction {
            root_value: self.root_value(f),
            start,
            root_exit_value: self.root_exit_value(f),
        }
    }
}

/// One activation of the machine.
#[derive(Clone, Debug)]
struct Frame {
    func: FnId,
    nvc: u128,
    on_entry: u128,
    root: bool,
    pending: Option<u32>,
    saved_reg: u128,
    saved_open: u128,
    /// What its frame record holds (module doc).
    site: Option<u128>,
    /// `reg` and `open` at its pending summary call.
    call_reg: u128,
    call_open: u128,
}

/// The instrumented program's profiling state (module doc), one thread.
#[derive(Clone, Debug)]
pub struct Machine<'n> {
    num: &'n IpNumbering,
    reg: u128,
    open: u128,
    handshake: Option<(FnId, u128)>,
    frames: Vec<Frame>,
    counts: BTreeMap<u128, u64>,
    max_value: u128,
}

impl<'n> Machine<'n> {
    /// A thread with no activation.
    pub fn new(num: &'n IpNumbering) -> Machine<'n> {
        Machine {
            num,
            reg: 0,
            open: 0,
            handshake: None,
            frames: Vec::new(),
            counts: BTreeMap::new(),
            max_value: 0,
        }
    }

    /// Runs `events` (checked first) and returns the path counts.
    pub fn run(num: &'n IpNumbering, events: &[Event]) -> Result<BTreeMap<u128, u64>, IpathError> {
        Ok(Machine::execute(num, events)?.counts)
    }

    /// Runs `events` (checked first) and returns the machine in its final state.
    pub fn execute(num: &'n IpNumbering, events: &[Event]) -> Result<Machine<'n>, IpathError> {
        check_execution(num.graph(), events)?;
        let mut m = Machine::new(num);
        for (at, &ev) in events.iter().enumerate() {
            m.event(ev)
                .map_err(|what| IpathError::BadExecution { at, what })?;
        }
        Ok(m)
    }

    /// The path counts so far.
    pub fn counts(&self) -> &BTreeMap<u128, u64> {
        &self.counts
    }

    /// The largest value `reg`, an `nvc` or a handshake has held after any event: what the
    /// program's registers must hold (see [`IpNumbering::fits_u64`]).
    pub fn max_value(&self) -> u128 {
        self.max_value
    }

    fn note_values(&mut self) {
        let nvc = self.frames.last().map_or(0, |f| f.nvc);
        let hand = self.handshake.map_or(0, |h| h.1);
        self.max_value = self.max_value.max(self.reg).max(nvc).max(hand);
    }

    fn count(&mut self, n: u128) -> Result<(), String> {
        let c = self.counts.entry(n).or_insert(0);
        *c = c.checked_add(1).ok_or("count overflow")?;
        Ok(())
    }

    /// Executes one event (module doc, "Steps").
    pub fn event(&mut self, ev: Event) -> Result<(), String> {
        let num = self.num;
        let piecewise = num.mode() == Mode::Piecewise;
        let ovf = || "arithmetic overflow".to_string();
        let err = |e: IpathError| e.to_string();
        match ev {
            Event::Enter(f) => {
                let act = num.entry_action(f);
                let mut frame = Frame {
                    func: f,
                    nvc: 1,
                    on_entry: 0,
                    root: true,
                    pending: None,
                    saved_reg: 0,
                    saved_open: 0,
                    site: None,
                    call_reg: 0,
                    call_open: 0,
                };
                match self.handshake {
                    Some((callee, nvc)) if callee == f => {
                        self.handshake = None;
                        frame.nvc = nvc;
                        frame.root = false;
                    }
                    _ => {
                        frame.saved_reg = self.reg;
                        frame.saved_open = self.open;
                        self.reg = act.root_value.ok_or(format!("{f} is not a root"))?;
                        self.open = 1;
                    }
                }
                frame.on_entry = self.reg;
                let inc = act.start.eval(frame.nvc).ok_or_else(ovf)?;
                self.reg = self.reg.checked_add(inc).ok_or_else(ovf)?;
                self.frames.push(frame);
            }
            Event::Edge(e) => {
                let frame = self.frames.last_mut().ok_or("no activation")?;
                let f = frame.func;
                match num.edge_action(f, e).map_err(err)? {
                    EdgeAction::Add(l) => {
                        let inc = l.eval(frame.nvc).ok_or_else(ovf)?;
                        self.reg = self.reg.checked_add(inc).ok_or_else(ovf)?;
                    }
                    EdgeAction::ContextRestart { end, start } => {
                        let n = end.eval(frame.nvc).and_then(|v| v.checked_add(self.reg));
                        let next = start.eval(frame.nvc);
                        let next = next.and_then(|v| v.checked_add(frame.on_entry));
                        self.reg = next.ok_or_else(ovf)?;
                        self.count(n.ok_or_else(ovf)?)?;
                    }
                    EdgeAction::PieceRestart { end, nvc, reg } => {
                        let n = end.eval(frame.nvc).and_then(|v| v.checked_add(self.reg));
                        frame.nvc = nvc;
                        self.open = 0;
                        self.reg = reg;
                        self.count(n.ok_or_else(ovf)?)?;
                    }
                    EdgeAction::Return(l) => {
                        let inc = l.eval(frame.nvc).ok_or_else(ovf)?;
                        self.reg = self.reg.checked_add(inc).ok_or_else(ovf)?;
                        let (root, saved_reg, saved_open) =
                            (frame.root, frame.saved_reg, frame.saved_open);
                        self.frames.pop();
                        if root {
                            if piecewise && self.open == 0 {
                                let inc = num.entry_action(f).root_exit_value;
                                self.reg = self.reg.checked_add(inc).ok_or_else(ovf)?;
                            }
                            self.count(self.reg)?;
                            self.reg = saved_reg;
                            self.open = saved_open;
                        }
                    }
                    EdgeAction::Reentry(start) => {
                        let site = frame.site;
                        let next = start.eval(frame.nvc);
                        let next = next.and_then(|v| v.checked_add(frame.on_entry));
                        self.reg = next.ok_or_else(ovf)?;
                        frame.pending = None;
                        if let Some(n) = site {
                            self.count(n)?;
                        }
                    }
                    EdgeAction::PieceReentry { nvc, reg } => {
                        let site = frame.site;
                        frame.nvc = nvc;
                        frame.pending = None;
                        self.open = 0;
                        self.reg = reg;
                        if let Some(n) = site {
                            self.count(n)?;
                        }
                    }
                    other => return Err(format!("edge {e} of {f}: {other:?} is not simulated")),
                }
            }
            Event::Call(site) => {
                let frame = self.frames.last_mut().ok_or("no activation")?;
                frame.pending = Some(site);
                self.handshake = None;
                match num.call_action(frame.func, site).map_err(err)? {
                    CallAction::Direct {
                        callee,
                        psi_r,
                        clears_site,
                        ..
                    } => {
                        self.handshake = Some((callee, psi_r.eval(frame.nvc).ok_or_else(ovf)?));
                        if piecewise {
                            self.open += 1;
                        }
                        if clears_site {
                            frame.site = None;
                        }
                    }
                    CallAction::Summary { abandon } => {
                        frame.call_reg = self.reg;
                        frame.call_open = self.open;
                        if let Some(l) = abandon {
                            let v = l.eval(frame.nvc).and_then(|v| v.checked_add(self.reg));
                            frame.site = Some(v.ok_or_else(ovf)?);
                        }
                    }
                }
            }
            Event::Resume => {
                let frame = self.frames.last_mut().ok_or("no activation")?;
                let site = frame.pending.take().ok_or("no pending call")?;
                self.handshake = None;
                match num.call_action(frame.func, site).map_err(err)? {
                    CallAction::Direct {
                        unmatched_value,
                        unmatched_nvc,
                        ..
                    } => {
                        if piecewise && self.open == 0 {
                            self.reg = self.reg.checked_add(unmatched_value).ok_or_else(ovf)?;
                            frame.nvc = unmatched_nvc;
                        } else if piecewise {
                            self.open -= 1;
                        }
                    }
                    CallAction::Summary { .. } => {
                        self.reg = frame.call_reg;
                        if piecewise {
                            self.open = frame.call_open;
                        }
                    }
                }
            }
            Event::Unwind(k) => {
                while self.frames.len() > k as usize {
                    let frame = self.frames.pop().ok_or("no activation")?;
                    if let Some(n) = frame.site {
                        self.count(n)?;
                    }
                }
            }
        }
        self.note_values();
        Ok(())
    }
}
