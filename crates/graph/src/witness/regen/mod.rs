//! Regeneration (Ball & Larus 1994 §4.1, Fig. 14) with a stack of active procedures (§4.2: "When
//! the algorithm encounters a call vertex, it pushes the current CFG name and pc value onto the
//! stack and starts executing the callee. When the algorithm encounters an EXIT vertex, it pops
//! the stack and resumes executing the caller.").
//!
//! Fig. 14 reads the next witness eagerly, after each witnessed edge; with several procedures
//! sharing one stream that would read the callee's records in the caller's place, so here a
//! witness is read only when it is needed: at a predicate (kept as the activation's *pending*
//! witness until its edge is traversed, exactly Fig. 14's `wit`) or when a witnessed edge is
//! traversed with nothing pending. The blocking property guarantees that nothing is pending at
//! a call vertex or at EXIT, which is checked. Calls of a block are followed in order before
//! its terminator; the records read at [`Callee::Unknown`] sites and between top-level
//! activations are the control records of the stream model (module doc of [`super`]).
//!
//! The record source is abstract ([`RecordSource`]): an iterator of [`Record`]s
//! ([`Records`]) or the bit-packed decoder of [`super::code`], which needs to be told what it
//! is expected to read ([`Expect`]).
//!
//! Files: `source.rs` what regeneration reads and gives (records, steps, errors);
//! `tables.rs` the per-function tables it looks up, built once; this file the
//! [`Regenerator`], its stack of activations, calls and landings; `walk.rs` an activation's
//! walk between its calls and the reading of witnesses and path numbers.

use super::place::{choice_table, PlanKind};
use super::{Callee, FuncId, Landing, Record, Traced};
use crate::cfg::EdgeKind;
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::paths::{CfgImage, NumberedDag};

mod source;
mod tables;
mod walk;

pub use source::*;

/// How regeneration leaves a block once its calls are done, precomputed per block.
#[derive(Copy, Clone)]
enum Leave {
    /// No normal successor.
    None,
    /// One normal successor: this edge, and what traversing it does.
    One(EdgeId, EdgeAct),
    /// A predicate of a witness plan: left by the fast walk only (its [`Walk`] and hops).
    Choice,
    /// A predicate of a path-number function: the out-edges `choice[start..start + len]`;
    /// the one whose range `[Val, Val + NumPaths(target))` holds the path's remaining value.
    Path { start: u32, len: u32 },
}

/// What traversing an edge does, precomputed per edge.
#[derive(Copy, Clone)]
struct EdgeAct {
    dst: NodeId,
    ret: bool,
    /// The edge's witness, if it has one: (value, bits).
    witness: Option<(u32, u8)>,
}

/// What traversing an edge does to a path-number function's path, per edge: a side table of
/// its own, so that the witness plans' [`EdgeAct`]s (also embedded in [`Leave::One`]) stay
/// small in the hot walk.
#[derive(Copy, Clone)]
struct PathAct {
    /// What the edge adds to the path's number.
    pval: u64,
    /// `NumPaths` of its DAG target (1 for END).
    pnum: u64,
    /// The path ends on this edge (a `Return`, back or cut edge).
    pend: bool,
    /// After a back or cut edge: the `Val` of the next path's START edge.
    pnext: u64,
}

/// How the fast walk of a witness-plan activation leaves a block ([`Walk`]'s `kind`).
#[derive(Copy, Clone, PartialEq, Eq)]
enum WalkKind {
    /// By `hops[start]`.
    One,
    /// A predicate: by `hops[start + value]` for the witness value read (`value < len`;
    /// a hop marked `HOP_NONE` where no out-edge has the value).
    Dense,
    /// A predicate: by the hop of `hops[start..start + len]` whose `hop_values` entry is the
    /// value read.
    Sparse,
    /// No normal successor, or a path predicate: the general walk's error.
    Other,
}

/// A block as the fast walk sees it (12 bytes): [`Leave`] with the edges' actions moved out
/// to `hops`, so that a step loads one `Walk` and one [`Hop`].
#[derive(Copy, Clone)]
struct Walk {
    start: u32,
    len: u32,
    bits: u8,
    kind: WalkKind,
}

/// An out-edge as the fast walk takes it (32 bytes): the edge, its target and the target's
/// [`Walk`], its slot, its witness and whether the walk must stop there (flags below).
#[derive(Copy, Clone)]
struct Hop {
    edge: EdgeId,
    dst: NodeId,
    /// The edge's program-wide index ([`Regenerator::slot`]).
    slot: u32,
    wval: u32,
    wbits: u8,
    flags: u8,
    /// `walk[dst]`, copied: the walk's next load depends on this one only.
    next: Walk,
}

/// [`Hop::flags`]: the edge carries the witness `(wval, wbits)`.
const HOP_WITNESS: u8 = 1;
/// [`Hop::flags`]: a `Return` edge.
const HOP_RET: u8 = 2;
/// [`Hop::flags`]: its target has call sites other than opaque ones (the general walk
/// follows them).
const HOP_STOP: u8 = 4;
/// [`Hop::flags`]: no hop (a value no out-edge of the predicate has).
const HOP_NONE: u8 = 8;

/// A block's call sites (a range of its function's `callees`) and how it is left.
#[derive(Clone)]
struct BlockTab {
    sites: std::ops::Range<u32>,
    leave: Leave,
    /// The block's `Return` edge that is an unwind edge (a `resume`: it continues an
    /// unwinding; its last call site is the `Unknown` site where it waits for the landing).
    resume: Option<EdgeId>,
}

/// One function's tables, flat: per block its call sites and how it is left, per edge what
/// traversing it does.
struct Tables {
    /// A path-number function: the numbering, the width of a number and the `Val` of `e0`.
    paths: Option<(NumberedDag, u8, u64)>,
    blocks: IdVec<NodeId, BlockTab>,
    callees: Vec<Callee>,
    /// The out-edges of path predicates (`Leave::Path`).
    choice: Vec<EdgeId>,
    edges: IdVec<EdgeId, EdgeAct>,
    /// Per edge, in a path-number function only (empty otherwise).
    pacts: IdVec<EdgeId, PathAct>,
    /// The fast walk's tables (witness plans): per block, and the hops they index, with the
    /// witness value of each predicate's hop in `hop_values`.
    walk: Vec<Walk>,
    hops: Vec<Hop>,
    hop_values: Vec<u32>,
}

/// A program's functions and plans with the tables regeneration looks up (each predicate's
/// choices by witness value), built once.
pub struct Regenerator<'a> {
    funcs: &'a [Traced],
    tables: Vec<Tables>,
    /// Per function, the slot of its first edge; then the number of slots.
    base: Vec<u32>,
    max_quiet: u64,
}

/// Default of [`Regenerator::with_max_quiet`].
pub const MAX_QUIET: u64 = 1 << 22;

/// A source that notes whether anything was read.
struct Noting<'s, S> {
    src: &'s mut S,
    read: bool,
}

impl<S: RecordSource> RecordSource for Noting<'_, S> {
    fn read(&mut self, expect: Expect) -> Result<Option<Record>, RegenError> {
        self.read = true;
        self.src.read(expect)
    }

    #[inline]
    fn try_witness(&mut self, bits: u8) -> Option<u32> {
        self.read = true;
        self.src.try_witness(bits)
    }
}

struct Frame {
    func: FuncId,
    block: NodeId,
    /// The call sites of the block still to follow (indices into its function's `callees`;
    /// an `Unknown` site being waited on has been taken off already).
    sites: std::ops::Range<u32>,
    waiting: bool,
    pending: Option<u32>,
    /// A path-number function: the current path's number so far (the `Val`s of the edges
    /// walked since it started), until the number is read ...
    pwalked: u64,
    /// ... then what is left of it (`None`: not read yet).
    prest: Option<u64>,
    /// The current path's START edge is not known (the activation was resumed at a flight
    /// recorder's synchronization point): it started at this block, and `pwalked` counts from
    /// there; the number read tells which START edge it was.
    phead: Option<NodeId>,
}

/// An activation as regeneration holds it between records: where a flight recorder's
/// synchronization point resumes ([`Regenerator::run_from`]) and what the stack is when
/// regeneration stops. Nothing is pending in such an activation (the blocking property: no
/// witness is pending at a call vertex).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Activation {
    /// The function.
    pub func: FuncId,
    /// Its current block.
    pub block: NodeId,
    /// The next call site of the block to follow (a direct call at `site - 1` is running
    /// when this is not the top activation).
    pub site: usize,
    /// Whether the unknown call at `site` is running (its `Back` is the next record).
    pub waiting: bool,
}

impl<'a> Regenerator<'a> {
    /// Builds the choice tables of every function (the witness sets of §4.1, per value).
    pub fn new(funcs: &'a [Traced]) -> Self {
        Self::with_index_limit(funcs, 64)
    }

    fn with_index_limit(funcs: &'a [Traced], index_limit: usize) -> Self {
        let mut base = Vec::with_capacity(funcs.len() + 1);
        let mut n = 0u32;
        for t in funcs {
            base.push(n);
            let edges = u32::try_from(t.input.cfg.num_edges()).unwrap_or(u32::MAX);
            n = n
                .checked_add(edges)
                .expect("fewer than 2^32 edges in a program");
        }
        base.push(n);
        let tables = funcs
            .iter()
            .zip(&base)
            .map(|(t, &b)| Tables::new(t, b, index_limit))
            .collect();
        Regenerator {
            funcs,
            tables,
            base,
            max_quiet: MAX_QUIET,
        }
    }

    /// The number of edge slots: every edge of every function has one, `0..slots()`.
    pub fn slots(&self) -> usize {
        self.base.last().map_or(0, |&n| n as usize)
    }

    /// The slot of `edge` of `func` ([`Regenerator::run_slotted`]): function by function,
    /// each function's edges in order.
    #[inline]
    pub fn slot(&self, func: FuncId, edge: EdgeId) -> usize {
        self.base[func.index()] as usize + edge.index()
    }

    /// The slot of the edge an event is about (a step's `via`, a return's edge).
    #[inline]
    pub fn slot_of(&self, v: &Visit) -> usize {
        match *v {
            Visit::Step(s) => self.slot(s.func, s.via),
            Visit::Return(f, e) => self.slot(f, e),
        }
    }

    /// A regenerator that searches every predicate's choices whose values are not `0..n`
    /// (tests: the path that wide sparse switches take).
    #[cfg(test)]
    pub(crate) fn searching(funcs: &'a [Traced]) -> Self {
        Self::with_index_limit(funcs, 0)
    }

    /// Sets how many steps (blocks entered, calls, returns) regeneration follows without
    /// reading a record before it gives up with [`RegenError::Quiet`] (default [`MAX_QUIET`]).
    /// Only a program stuck in a loop or a recursion that contains no predicate and no
    /// unknown call runs that long without writing (or a plan that fails [`super::check_plan`]);
    /// the limit keeps regeneration of such a trace finite.
    pub fn with_max_quiet(mut self, max_quiet: u64) -> Self {
        self.max_quiet = max_quiet;
        self
    }

    fn enter(
        &self,
        func: FuncId,
        visit: &mut impl FnMut(Visit, usize),
    ) -> Result<Frame, RegenError> {
        let t = self
            .funcs
            .get(func.index())
            .ok_or(RegenError::NoFunction(func))?;
        let cfg = &t.input.cfg;
        visit(
            Visit::Step(Step {
                func,
                block: cfg.entry(),
                via: cfg.entry_edge(),
            }),
            self.slot(func, cfg.entry_edge()),
        );
        let tables = &self.tables[func.index()];
        Ok(Frame {
            func,
            block: cfg.entry(),
            sites: tables.blocks[cfg.entry()].sites.clone(),
            waiting: false,
            pending: None,
            pwalked: tables.paths.as_ref().map_or(0, |p| p.2),
            prest: None,
            phead: None,
        })
    }

    /// Regenerates the execution recorded in `src`, calling `sink` with each block in order.
    /// Stops at `End` or at the end of the stream where a control record is expected (the
    /// thread ended there); the end of the stream where a witness is needed is
    /// [`RegenError::Truncated`], after every block up to that point has been passed to `sink`.
    pub fn run(
        &self,
        src: &mut impl RecordSource,
        sink: impl FnMut(Step),
    ) -> Result<(), RegenError> {
        let mut sink = sink;
        self.run_visits(src, |v| {
            if let Visit::Step(s) = v {
                sink(s)
            }
        })
    }

    /// [`Regenerator::run`], also telling each `Return` edge taken (an activation returning
    /// normally: no block is entered, so no [`Step`] tells it): `visit` gets every event in
    /// execution order.
    pub fn run_visits(
        &self,
        src: &mut impl RecordSource,
        mut visit: impl FnMut(Visit),
    ) -> Result<(), RegenError> {
        self.run_frames(&mut Vec::new(), src, |v, _| visit(v))
    }

    /// [`Regenerator::run_visits`], also telling the slot of each event's edge
    /// ([`Regenerator::slot_of`]), which the walk has at hand: for readers that count edges
    /// in one flat array.
    pub fn run_slotted(
        &self,
        src: &mut impl RecordSource,
        visit: impl FnMut(Visit, usize),
    ) -> Result<(), RegenError> {
        self.run_frames(&mut Vec::new(), src, visit)
    }

    /// [`Regenerator::run_visits`] from the activations in `stack` (bottom first; the state at
    /// a flight recorder's synchronization point) instead of an empty stack; when it returns,
    /// `stack` holds the activations active at that point (bottom first).
    pub fn run_from(
        &self,
        stack: &mut Vec<Activation>,
        src: &mut impl RecordSource,
        visit: impl FnMut(Visit),
    ) -> Result<(), RegenError> {
        let mut frames = Vec::with_capacity(stack.len());
        for a in stack.iter() {
            let t = self
                .funcs
                .get(a.func.index())
                .ok_or(RegenError::NoFunction(a.func))?;
            if a.block.index() >= t.input.cfg.num_blocks()
                || a.site > t.input.calls[a.block].len()
                || (a.waiting && a.site == t.input.calls[a.block].len())
            {
                return Err(RegenError::Decode(format!(
                    "no call site {} in block {} of {}",
                    a.site, a.block, a.func
                )));
            }
            // A frame's `sites` are those still to follow: past a waited-on unknown call.
            let all = self.tables[a.func.index()].blocks[a.block].sites.clone();
            frames.push(Frame {
                func: a.func,
                block: a.block,
                sites: all.start + a.site as u32 + u32::from(a.waiting)..all.end,
                waiting: a.waiting,
                pending: None,
                // (A synchronization point is at a call: in a path-number function, the
                // first block of its path.)
                pwalked: 0,
                prest: None,
                phead: Some(a.block),
            });
        }
        let mut visit = visit;
        let r = self.run_frames(&mut frames, src, |v, _| visit(v));
        stack.clear();
        stack.extend(frames.iter().map(|f| {
            let start = self.tables[f.func.index()].blocks[f.block].sites.start;
            Activation {
                func: f.func,
                block: f.block,
                site: (f.sites.start - start - u32::from(f.waiting)) as usize,
                waiting: f.waiting,
            }
        }));
        r
    }

    fn run_frames(
        &self,
        stack: &mut Vec<Frame>,
        src: &mut impl RecordSource,
        mut visit: impl FnMut(Visit, usize),
    ) -> Result<(), RegenError> {
        let src = &mut Noting { src, read: false };
        let mut quiet = 0u64;
        loop {
            if self.too_quiet(src, &mut quiet) {
                let (func, block) = stack
                    .last()
                    .map_or((FuncId(0), NodeId::new(0)), |f| (f.func, f.block));
                return Err(RegenError::Quiet { func, block });
            }
            let Some(top) = stack.last_mut() else {
                match src.read(Expect::Control)? {
                    None | Some(Record::End) => return Ok(()),
                    Some(Record::Enter(f)) => {
                        let frame = self.enter(f, &mut visit)?;
                        stack.push(frame);
                        continue;
                    }
                    Some(found) => {
                        return Err(RegenError::Unexpected {
                            expected: Expect::Control,
                            found,
                        })
                    }
                }
            };
            if top.waiting {
                match src.read(Expect::Control)? {
                    None | Some(Record::End) => return Ok(()),
                    Some(Record::Enter(g)) => {
                        let frame = self.enter(g, &mut visit)?;
                        stack.push(frame);
                    }
                    Some(Record::Back) => top.waiting = false,
                    Some(Record::Unwind { abandoned, to, how }) => {
                        self.unwind(stack, abandoned, to, how, &mut visit)?
                    }
                    Some(found) => {
                        return Err(RegenError::Unexpected {
                            expected: Expect::Control,
                            found,
                        })
                    }
                }
                continue;
            }
            let tables = &self.tables[top.func.index()];
            if let Some(site) = top.sites.next() {
                if let Some(frame) = self.call(top, tables.callees[site as usize], &mut visit)? {
                    stack.push(frame);
                }
                continue;
            }
            let returned = if tables.paths.is_none() {
                self.walk_plan(top, tables, src, &mut quiet, &mut visit)?
            } else {
                self.step_path(top, tables, src, &mut visit)?
            };
            if returned {
                stack.pop();
            }
        }
    }

    /// Whether regeneration has followed more than `max_quiet` steps without reading a record
    /// (counted in `quiet`); checked before each step.
    #[inline(always)]
    fn too_quiet<S: RecordSource>(&self, src: &mut Noting<'_, S>, quiet: &mut u64) -> bool {
        if std::mem::take(&mut src.read) {
            *quiet = 0;
        } else {
            *quiet += 1;
            if *quiet > self.max_quiet {
                return true;
            }
        }
        false
    }

    /// An `Unwind` record read while the top activation waits in an unknown call: the
    /// `abandoned` activations above the landing one are dropped and the landing one resumes
    /// at block `to`.
    fn unwind(
        &self,
        stack: &mut Vec<Frame>,
        abandoned: u32,
        to: NodeId,
        how: Landing,
        visit: &mut impl FnMut(Visit, usize),
    ) -> Result<(), RegenError> {
        let bad = RegenError::BadLanding { abandoned, to };
        if abandoned as usize >= stack.len() {
            return Err(bad);
        }
        // An abandoned activation waiting at its `resume` left by that
        // `Return` edge (it unwound on from there).
        for f in stack.iter().rev().take(abandoned as usize) {
            let b = &self.tables[f.func.index()].blocks[f.block];
            if let Some(e) = b.resume.filter(|_| f.waiting && f.sites.is_empty()) {
                visit(Visit::Return(f.func, e), self.slot(f.func, e));
            }
        }
        stack.truncate(stack.len() - abandoned as usize);
        let top = stack
            .last_mut()
            .ok_or(RegenError::BadLanding { abandoned, to })?;
        let input = &self.funcs[top.func.index()].input;
        if to.index() >= input.cfg.num_blocks() {
            return Err(bad);
        }
        let via = input.landing_edge(top.block, to, how).ok_or(bad)?;
        // (Path-number functions have no landings: `paths_plan`.)
        *top = Frame {
            func: top.func,
            block: to,
            sites: self.tables[top.func.index()].blocks[to].sites.clone(),
            waiting: false,
            pending: None,
            pwalked: 0,
            prest: None,
            phead: None,
        };
        visit(
            Visit::Step(Step {
                func: top.func,
                block: to,
                via,
            }),
            self.slot(top.func, via),
        );
        Ok(())
    }

    /// The top activation's next call site, to `callee`: the activation to push, if any.
    #[inline(always)]
    fn call(
        &self,
        top: &mut Frame,
        callee: Callee,
        visit: &mut impl FnMut(Visit, usize),
    ) -> Result<Option<Frame>, RegenError> {
        if callee != Callee::Opaque && (top.pending.is_some() || top.prest.is_some()) {
            return Err(RegenError::Pending {
                func: top.func,
                block: top.block,
            });
        }
        Ok(match callee {
            Callee::Opaque => None,
            Callee::Unknown => {
                top.waiting = true;
                None
            }
            Callee::Direct(g) => Some(self.enter(g, visit)?),
            Callee::DirectBack(g) => {
                // The caller reads `Back` once `g` has returned.
                top.waiting = true;
                Some(self.enter(g, visit)?)
            }
        })
    }
}
