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
//! ([`Records`]) or the bit-packed decoder of [`super::bits`], which needs to be told what it
//! is expected to read ([`Expect`]).

use super::place::{choice_table, PlanKind};
use super::{Callee, FuncId, Landing, Record, Traced};
use crate::cfg::EdgeKind;
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::paths::{CfgImage, NumberedDag};
use thiserror::Error;

/// One block of the regenerated execution.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct Step {
    /// The function of the activation.
    pub func: FuncId,
    /// The block entered.
    pub block: NodeId,
    /// The edge by which it was entered: `e0` at an activation's start, a normal edge, or the
    /// `Reentry` or unwind edge of a landing.
    pub via: EdgeId,
}

/// An event of the regenerated execution ([`Regenerator::run_visits`]).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Visit {
    /// A block entered.
    Step(Step),
    /// An activation of this function returned by this `Return` edge.
    Return(FuncId, EdgeId),
}

/// What regeneration expects to read next.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Expect {
    /// A witness of the current activation, of this width.
    Witness(u8),
    /// A control record (`Enter`, `Back`, `Unwind`, `End`).
    Control,
}

/// Why a trace cannot be regenerated.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RegenError {
    /// The stream ended (or `End` came) where a witness was needed: the thread stopped
    /// between a predicate and its witness (a crash, a trace cut short). Every block up to
    /// this point has been passed to the sink; the last ones, walked from the last record
    /// without reading, may include blocks after the point where the thread stopped.
    #[error("the trace ends inside {func} at {block}, where a witness is needed")]
    Truncated {
        /// The activation's function.
        func: FuncId,
        /// Its block.
        block: NodeId,
    },
    /// A record of the wrong kind.
    #[error("expected {expected:?}, found {found:?}")]
    Unexpected {
        /// What was expected.
        expected: Expect,
        /// What was read.
        found: Record,
    },
    /// No out-edge of the predicate has the witness value in its witness set.
    #[error("{func} {block}: no successor for witness value {value}")]
    NoChoice {
        /// The function.
        func: FuncId,
        /// The predicate.
        block: NodeId,
        /// The value read.
        value: u32,
    },
    /// A witnessed edge was traversed but the stream holds another value.
    #[error("{func} edge {edge}: witness {found} where {expected} was written")]
    WrongWitness {
        /// The function.
        func: FuncId,
        /// The edge.
        edge: EdgeId,
        /// Its value in the plan.
        expected: u32,
        /// The value read.
        found: u32,
    },
    /// A witness was pending at a call vertex or EXIT (the plan lacks the blocking property).
    #[error("{func} {block}: a witness is pending at a call or EXIT")]
    Pending {
        /// The function.
        func: FuncId,
        /// The block.
        block: NodeId,
    },
    /// A block with no normal successor finished its calls normally.
    #[error("{func} {block}: no normal successor")]
    NoSuccessor {
        /// The function.
        func: FuncId,
        /// The block.
        block: NodeId,
    },
    /// `Enter` or a direct call names a function that is not in the program.
    #[error("unknown function {0}")]
    NoFunction(FuncId),
    /// An `Unwind` discards more activations than there are, or lands on a block that is no
    /// landing target.
    #[error("bad landing: {abandoned} activations abandoned, landing at {to}")]
    BadLanding {
        /// Activations discarded.
        abandoned: u32,
        /// The landing block.
        to: NodeId,
    },
    /// Regeneration followed more steps than allowed without reading a record
    /// ([`Regenerator::with_max_quiet`]).
    #[error(
        "{func} {block}: too many steps without a record (a loop or recursion that writes nothing)"
    )]
    Quiet {
        /// The function of the current activation.
        func: FuncId,
        /// Its block.
        block: NodeId,
    },
    /// The bit-packed decoder failed.
    #[error("bad encoding: {0}")]
    Decode(String),
}

/// Where regeneration reads records from.
pub trait RecordSource {
    /// The next record, `None` at the end. `expect` says what regeneration expects; a source
    /// that stores record kinds may ignore it.
    fn read(&mut self, expect: Expect) -> Result<Option<Record>, RegenError>;

    /// A fast path for the most frequent read, a witness of `bits` bits (1..=32): its value,
    /// or `None` to let regeneration call [`RecordSource::read`] instead (the default; a
    /// source returns `None` at least where `read` would not give a witness of that width).
    #[inline]
    fn try_witness(&mut self, bits: u8) -> Option<u32> {
        let _ = bits;
        None
    }
}

/// An iterator of records as a [`RecordSource`].
#[derive(Clone, Debug)]
pub struct Records<I>(pub I);

impl<I: Iterator<Item = Record>> RecordSource for Records<I> {
    fn read(&mut self, _: Expect) -> Result<Option<Record>, RegenError> {
        Ok(self.0.next())
    }
}

/// Regenerates the block sequence of a trace: [`Regenerator::run`] into a vector.
pub fn regenerate(
    funcs: &[Traced],
    records: impl IntoIterator<Item = Record>,
) -> Result<Vec<Step>, RegenError> {
    let mut out = Vec::new();
    Regenerator::new(funcs).run(&mut Records(records.into_iter()), |s| out.push(s))?;
    Ok(out)
}

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

impl Tables {
    /// `index_limit`: a predicate's hops are indexed by value where its values span at most
    /// `max(index_limit, 4 * choices)` (0: only where they are `0..choices`, searched otherwise).
    fn new(t: &Traced, base: u32, index_limit: usize) -> Tables {
        let cfg = &t.input.cfg;
        // (A path-number plan has no witnesses to choose by: no witness sets to compute.)
        let table = if t.plan.kind == PlanKind::Paths {
            IdVec::filled(cfg.num_nodes(), Vec::new())
        } else {
            choice_table(&t.input, &t.plan)
        };
        // (A path-number plan that does not number is refused by `check_plan`; here it is
        // read as a plan without witnesses, which regeneration reports where it goes wrong.)
        let numbered = (t.plan.kind == PlanKind::Paths)
            .then(|| super::paths::paths_plan(&t.input).ok())
            .flatten();
        let mut callees = Vec::new();
        let mut choice = Vec::new();
        let edges = cfg
            .edges()
            .map(|(e, edge)| EdgeAct {
                dst: edge.dst,
                ret: edge.kind == EdgeKind::Return,
                witness: t.plan.witness[e].map(|w| (w.value, w.bits)),
            })
            .collect();
        let edges: IdVec<EdgeId, EdgeAct> = IdVec::from_vec(edges);
        let pacts = match &numbered {
            None => Vec::new(),
            Some(nd) => {
                let dag = nd.dag();
                cfg.edges()
                    .map(|(e, _)| {
                        let mut act = PathAct {
                            pval: 0,
                            pnum: 1,
                            pend: false,
                            pnext: 0,
                        };
                        match dag.image(e) {
                            CfgImage::Kept(d) => {
                                act.pval = nd.val(d) as u64;
                                act.pnum = nd.num_paths(dag.edge(d).dst) as u64;
                                act.pend = dag.edge(d).dst == dag.end();
                            }
                            CfgImage::Back { end, start } | CfgImage::Cut { end, start } => {
                                act.pval = nd.val(end) as u64;
                                act.pend = true;
                                act.pnext = nd.val(start) as u64;
                            }
                            _ => {}
                        }
                        act
                    })
                    .collect()
            }
        };
        let pacts: IdVec<EdgeId, PathAct> = IdVec::from_vec(pacts);
        let act = |e: EdgeId| edges[e];
        let mut blocks = Vec::with_capacity(cfg.num_nodes());
        for v in cfg.nodes() {
            let start = callees.len() as u32;
            callees.extend(t.input.calls[v].iter().map(|c| c.callee));
            let sites = start..callees.len() as u32;
            let mut outs = t.input.normal_succs(v);
            let leave = match (outs.next(), outs.next()) {
                (None, _) => Leave::None,
                (Some(e), None) => Leave::One(e, act(e)),
                (Some(_), Some(_)) if numbered.is_some() => {
                    let start = choice.len() as u32;
                    choice.extend(t.input.normal_succs(v));
                    Leave::Path {
                        start,
                        len: choice.len() as u32 - start,
                    }
                }
                (Some(_), Some(_)) => Leave::Choice,
            };
            let resume = cfg
                .succs(v)
                .iter()
                .copied()
                .find(|&e| t.input.unwind[e] && cfg.edge(e).kind == EdgeKind::Return);
            blocks.push(BlockTab {
                sites,
                leave,
                resume,
            });
        }
        // The fast walk's tables: `blocks[..].leave` with each edge's action a `Hop`, and each
        // predicate's choices (witness value -> out-edge) from the choice table.
        let hop = |e: EdgeId| {
            let a = edges[e];
            let mut flags = 0;
            if a.witness.is_some() {
                flags |= HOP_WITNESS;
            }
            if a.ret {
                flags |= HOP_RET;
            }
            // (Opaque sites do nothing in regeneration: the walk passes through them.)
            if !a.ret && t.input.is_call_vertex(a.dst) {
                flags |= HOP_STOP;
            }
            let (wval, wbits) = a.witness.unwrap_or((0, 0));
            Hop {
                next: OTHER,
                edge: e,
                dst: a.dst,
                slot: base + e.index() as u32,
                wval,
                wbits,
                flags,
            }
        };
        const OTHER: Walk = Walk {
            start: 0,
            len: 0,
            bits: 0,
            kind: WalkKind::Other,
        };
        let mut walk = Vec::with_capacity(blocks.len());
        let mut hops = Vec::new();
        let mut hop_values = Vec::new();
        for (v, b) in cfg.nodes().zip(&blocks) {
            let start = hops.len() as u32;
            let w = match b.leave {
                Leave::One(e, _) => {
                    hops.push(hop(e));
                    hop_values.push(0);
                    Walk {
                        start,
                        len: 1,
                        bits: 0,
                        kind: WalkKind::One,
                    }
                }
                Leave::Choice => {
                    // (value, out-edge), sorted by value.
                    let c = &table[v];
                    let bits = t.plan.read_bits[v];
                    let len = c.len();
                    let dense = c.iter().enumerate().all(|(i, &(x, _))| x as usize == i);
                    // Indexed by value where the values span a small range (holes: hops
                    // marked `HOP_NONE`), searched otherwise.
                    let span = c.last().map_or(0, |&(x, _)| x as usize + 1);
                    if dense || (index_limit > 0 && span <= (4 * len).max(index_limit)) {
                        let none = Hop {
                            next: OTHER,
                            edge: EdgeId::new(0),
                            dst: NodeId::new(0),
                            slot: 0,
                            wval: 0,
                            wbits: 0,
                            flags: HOP_NONE,
                        };
                        hops.resize(start as usize + span, none);
                        hop_values.resize(start as usize + span, 0);
                        for &(x, e) in c {
                            hops[start as usize + x as usize] = hop(e);
                        }
                        Walk {
                            start,
                            len: span as u32,
                            bits,
                            kind: WalkKind::Dense,
                        }
                    } else {
                        hops.extend(c.iter().map(|&(_, e)| hop(e)));
                        hop_values.extend(c.iter().map(|&(x, _)| x));
                        Walk {
                            start,
                            len: len as u32,
                            bits,
                            kind: WalkKind::Sparse,
                        }
                    }
                }
                Leave::None | Leave::Path { .. } => Walk {
                    start,
                    len: 0,
                    bits: 0,
                    kind: WalkKind::Other,
                },
            };
            walk.push(w);
        }
        for h in &mut hops {
            if h.flags & (HOP_NONE | HOP_RET) == 0 {
                h.next = walk[h.dst.index()];
            }
        }
        let paths = numbered.map(|nd| {
            let bits = super::paths::path_bits(nd.total());
            let entry = match nd.dag().image(cfg.entry_edge()) {
                CfgImage::Start(d) => nd.val(d) as u64,
                _ => 0,
            };
            (nd, bits, entry)
        });
        Tables {
            paths,
            blocks: IdVec::from_vec(blocks),
            callees,
            choice,
            edges,
            pacts,
            walk,
            hops,
            hop_values,
        }
    }

    /// The hop of predicate `w` that witness `value` chooses.
    #[inline(always)]
    fn pick(&self, w: Walk, value: u32) -> Option<&Hop> {
        let (start, len) = (w.start as usize, w.len as usize);
        if w.kind == WalkKind::Dense {
            return ((value as usize) < len)
                .then(|| &self.hops[start + value as usize])
                .filter(|h| h.flags & HOP_NONE == 0);
        }
        let values = &self.hop_values[start..start + len];
        let i = if len <= 8 {
            values.iter().position(|&v| v == value)
        } else {
            values.binary_search(&value).ok()
        };
        i.map(|i| &self.hops[start + i])
    }
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

    /// A witness-plan activation out of its calls: its walk from block to block while the
    /// blocks entered have no call sites, the same steps as [`Regenerator::step_path`]'s (which
    /// serves path-number functions) with the activation's state in locals, without going back
    /// through the stack, the waiting flag and the call sites between two blocks. Whether the
    /// activation returned.
    #[inline(always)]
    fn walk_plan<S: RecordSource>(
        &self,
        top: &mut Frame,
        tables: &Tables,
        src: &mut Noting<'_, S>,
        quiet: &mut u64,
        visit: &mut impl FnMut(Visit, usize),
    ) -> Result<bool, RegenError> {
        let func = top.func;
        let mut block = top.block;
        // The pending witness, `NONE` for none (a plain word: `Option<u32>` made the
        // compiler reassemble the value byte by byte after every read).
        const NONE: u64 = u64::MAX;
        let mut pending = top.pending.map_or(NONE, u64::from);
        let mut stepped = false;
        let mut w = tables.walk[block.index()];
        let r = loop {
            let hop = match w.kind {
                WalkKind::One => &tables.hops[w.start as usize],
                WalkKind::Dense | WalkKind::Sparse => {
                    let value = if pending != NONE {
                        pending as u32
                    } else {
                        match read_witness(src, w.bits, func, block) {
                            Ok(v) => {
                                pending = u64::from(v);
                                v
                            }
                            Err(err) => break Err(err),
                        }
                    };
                    match tables.pick(w, value) {
                        Some(h) => h,
                        None => break Err(RegenError::NoChoice { func, block, value }),
                    }
                }
                WalkKind::Other => match tables.blocks[block].leave {
                    // (`Tables::new` gives path predicates to path-number functions
                    // only.)
                    Leave::Path { .. } => {
                        break Err(RegenError::Decode(format!(
                            "{func} {block}: a path predicate in a witness-plan function"
                        )))
                    }
                    _ => break Err(RegenError::NoSuccessor { func, block }),
                },
            };
            if hop.flags & HOP_WITNESS != 0 {
                // (`check_witness`.)
                let found = if pending != NONE {
                    std::mem::replace(&mut pending, NONE) as u32
                } else {
                    match read_witness(src, hop.wbits, func, block) {
                        Ok(v) => v,
                        Err(err) => break Err(err),
                    }
                };
                if found != hop.wval {
                    break Err(RegenError::WrongWitness {
                        func,
                        edge: hop.edge,
                        expected: hop.wval,
                        found,
                    });
                }
            }
            if hop.flags & HOP_RET != 0 {
                if pending != NONE {
                    break Err(RegenError::Pending { func, block });
                }
                visit(Visit::Return(func, hop.edge), hop.slot as usize);
                break Ok(true);
            }
            block = hop.dst;
            w = hop.next;
            stepped = true;
            visit(
                Visit::Step(Step {
                    func,
                    block,
                    via: hop.edge,
                }),
                hop.slot as usize,
            );
            if hop.flags & HOP_STOP != 0 {
                break Ok(false);
            }
            // (What the general loop checks before each step.)
            if self.too_quiet(src, quiet) {
                break Err(RegenError::Quiet { func, block });
            }
        };
        if stepped {
            // The block's sites, still to follow where the walk stopped for them,
            // else passed (none, or opaque ones only).
            let sites = tables.blocks[block].sites.clone();
            top.block = block;
            top.sites = if matches!(r, Ok(false)) {
                sites
            } else {
                sites.end..sites.end
            };
        }
        top.pending = (pending != NONE).then_some(pending as u32);
        r
    }

    /// One step of a path-number activation out of its calls: the edge its block leaves by
    /// (by the current path's number at a path predicate), the path's number accounted for,
    /// the edge's witness checked; whether the activation returned.
    #[inline(always)]
    fn step_path(
        &self,
        top: &mut Frame,
        tables: &Tables,
        src: &mut impl RecordSource,
        visit: &mut impl FnMut(Visit, usize),
    ) -> Result<bool, RegenError> {
        let (func, block) = (top.func, top.block);
        let (e, act) = match tables.blocks[block].leave {
            Leave::None => return Err(RegenError::NoSuccessor { func, block }),
            Leave::One(e, act) => (e, act),
            // (Witness-plan functions take the fast walk above; `Tables::new` gives
            // witness predicates to them only.)
            Leave::Choice => {
                return Err(RegenError::Decode(format!(
                    "{func} {block}: a witness predicate in a path-number function"
                )))
            }
            Leave::Path { start, len } => {
                let rest = match top.prest {
                    Some(r) => r,
                    None => {
                        let r = read_path(src, tables, top, func, block)?;
                        top.prest = Some(r);
                        r
                    }
                };
                let choices = &tables.choice[start as usize..(start + len) as usize];
                let e = choices
                    .iter()
                    .copied()
                    .find(|&e| {
                        let a = &tables.pacts[e];
                        a.pval <= rest && rest - a.pval < a.pnum
                    })
                    .ok_or(RegenError::NoChoice {
                        func,
                        block,
                        value: rest as u32,
                    })?;
                (e, tables.edges[e])
            }
        };
        if tables.paths.is_some() {
            follow_path(top, tables, src, e)?;
        }
        if let Some(w) = act.witness {
            check_witness(src, &mut top.pending, w, func, block, e)?;
        }
        if act.ret {
            if top.pending.is_some() {
                return Err(RegenError::Pending { func, block });
            }
            visit(Visit::Return(func, e), self.slot(func, e));
            Ok(true)
        } else {
            top.block = act.dst;
            top.sites = tables.blocks[act.dst].sites.clone();
            visit(
                Visit::Step(Step {
                    func,
                    block: act.dst,
                    via: e,
                }),
                self.slot(func, e),
            );
            Ok(false)
        }
    }
}

/// Edge `e` of a path-number activation `top` taken: the current path's number so far (or
/// what is left of it) accounted for, the number read and checked where a path without a
/// predicate ends.
#[inline(always)]
fn follow_path(
    top: &mut Frame,
    tables: &Tables,
    src: &mut impl RecordSource,
    e: EdgeId,
) -> Result<(), RegenError> {
    let (func, block) = (top.func, top.block);
    let act = tables.pacts[e];
    match top.prest {
        Some(rest) => {
            let left = rest.checked_sub(act.pval).filter(|&r| r < act.pnum);
            top.prest = left;
            if left.is_none() || (act.pend && left != Some(0)) {
                return Err(RegenError::WrongWitness {
                    func,
                    edge: e,
                    expected: act.pval as u32,
                    found: rest as u32,
                });
            }
        }
        None => top.pwalked += act.pval,
    }
    if act.pend {
        if top.prest.is_none() {
            // A path without a predicate: its number is read (and checked) here.
            let left = read_path(src, tables, top, func, block)?;
            if left != 0 {
                return Err(RegenError::WrongWitness {
                    func,
                    edge: e,
                    expected: top.pwalked as u32,
                    found: (top.pwalked + left) as u32,
                });
            }
        }
        top.prest = None;
        top.phead = None;
        top.pwalked = act.pnext;
    }
    Ok(())
}

/// Reads the number of the current path of `top` (a path-number function) and returns what
/// is left of it past the edges walked so far.
fn read_path(
    src: &mut impl RecordSource,
    tables: &Tables,
    top: &mut Frame,
    func: FuncId,
    block: NodeId,
) -> Result<u64, RegenError> {
    let (nd, bits, _) = tables.paths.as_ref().expect("a path-number function");
    let number = u64::from(read_witness(src, *bits, func, block)?);
    let bad = || RegenError::NoChoice {
        func,
        block,
        value: number as u32,
    };
    let base = match top.phead.take() {
        None => 0,
        // Resumed mid-path: the START edge into the head whose range holds the number.
        Some(head) => {
            let dag = nd.dag();
            let span = nd.num_paths(head) as u64;
            dag.succs(dag.start())
                .iter()
                .map(|&d| (dag.edge(d).dst, nd.val(d) as u64))
                .find(|&(dst, v)| dst == head && v <= number && number - v < span)
                .map(|(_, v)| v)
                .ok_or_else(bad)?
        }
    };
    number.checked_sub(base + top.pwalked).ok_or_else(bad)
}

/// The witness `(value, bits)` an edge's action expects: the pending one, else read from
/// `src`, and an error when it is another.
#[inline(always)]
fn check_witness(
    src: &mut impl RecordSource,
    pending: &mut Option<u32>,
    (value, bits): (u32, u8),
    func: FuncId,
    block: NodeId,
    edge: EdgeId,
) -> Result<(), RegenError> {
    let found = match pending.take() {
        Some(v) => v,
        None => read_witness(src, bits, func, block)?,
    };
    if found != value {
        return Err(RegenError::WrongWitness {
            func,
            edge,
            expected: value,
            found,
        });
    }
    Ok(())
}

#[inline]
fn read_witness(
    src: &mut impl RecordSource,
    bits: u8,
    func: FuncId,
    block: NodeId,
) -> Result<u32, RegenError> {
    // A witness of width 0 carries nothing and is not written (module doc of `super`).
    if bits == 0 {
        return Ok(0);
    }
    if let Some(v) = src.try_witness(bits) {
        return Ok(v);
    }
    let expected = Expect::Witness(bits);
    match src.read(expected)? {
        Some(Record::Witness { value, bits: b }) if b == bits => Ok(value),
        None | Some(Record::End) => Err(RegenError::Truncated { func, block }),
        Some(found) => Err(RegenError::Unexpected { expected, found }),
    }
}
