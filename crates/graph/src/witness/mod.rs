//! Witness tracing (Ball & Larus 1994 §4, "Program tracing"; §6.2 "Tracing performance"): record a
//! *witness* only on a few edges `Ewit` of each function and regenerate the exact sequence of
//! executed blocks, across calls, from the trace and the graphs.
//!
//! One file per step:
//!
//! - [`FunctionInput`] (here): what the front end supplies per function: its [`Cfg`], the
//!   call sites of each block in order ([`CallSite`], [`Callee`]: the graph crate has no notion
//!   of calls otherwise) and the edges that only unwinding takes (an `invoke`'s unwind edge).
//! - [`place`]: `blockers(G, v)` and the blocking placement (§4.2, Fig. 15: blocking witnesses
//!   as far from calls and EXIT as possible), the maximum spanning tree that may not contain
//!   witnessed edges (§4.2, Fig. 16(a) and footnote 4), and the witness values: the fewest bits
//!   (per group of witnesses a predicate may read, at most `ceil(log2 |Ewit|)` per function),
//!   values shared by witnesses that regeneration can never confuse (§6.2); the
//!   one-bit-per-conditional-branch plan (AE's old scheme, hardware branch tracers, and §6.2's
//!   bit tracing, which is the same placement) through the same [`Plan`] type.
//! - [`check`]: a checker for `Trace(Ewit)` (§4.1: `E - Ewit` has no diamonds and no directed
//!   cycles, and, with reused values, the witness sets of each predicate's successors are
//!   disjoint) and for the blocking property (§4.2).
//! - [`stream`]: the record stream ([`Record`]) and the reference instrumentation (which
//!   records an execution writes, [`stream::records_of`]); [`code`]: the bit-packed encoding, the one home of the
//!   record code (its constants, its decoder, a reference encoder).
//! - [`regen`]: regeneration (Fig. 14) with a stack of active procedures (§4.2).
//!
//! # The graph tracing works on
//!
//! Only *normal* edges take part in the witness analysis: `Flow` and `Return` edges that are
//! not unwind edges. `e0` is not part of it (§4.1: "assume ... that the extra edge EXIT -> root
//! is not included"), `EarlyExit` edges stand for a frame abandoned inside a call, and
//! `Reentry` and unwind edges are only taken when control lands after an abandonment, which the
//! stream announces with an [`Record::Unwind`] record; none of them ever carries a witness.
//! A *predicate* is a block with two or more normal out-edges; a *call vertex* a block with a
//! call site whose callee is not [`Callee::Opaque`].
//!
//! # The stream model
//!
//! One stream per thread, in execution order. What writes each record:
//!
//! - [`Record::Witness`]`{value, bits}`: traversing a witnessed edge of the current activation
//!   writes that edge's value in its plan's width (the width is known to the reader from the
//!   plan, so the encoding has no tag). A witness of width 0 (one that no predicate ever reads,
//!   which [`witness_plan`] can leave on a chord) writes nothing: no code is needed for it.
//! - [`Record::Enter`]`(f)`: the first record of an activation of `f` entered from a call site
//!   the plan does not resolve ([`Callee::Unknown`]: a call through a pointer, or into code
//!   that is not traced and may call back) or from no traced caller (the first function of the
//!   thread, `main`, a thread's start routine, an `atexit` handler called after `main`
//!   returned). Activations entered from a [`Callee::Direct`] or [`Callee::DirectBack`] site
//!   write nothing on entry.
//! - [`Record::Back`]: written by the caller when a [`Callee::Unknown`] or
//!   [`Callee::DirectBack`] call returns normally.
//! - [`Record::Unwind`]`{abandoned, to, how}`: written where control lands after a frame was
//!   abandoned (`longjmp` arriving at its `setjmp`, an exception arriving at a landing pad):
//!   `abandoned` traced activations above the landing one were discarded, and the landing
//!   activation resumes at block `to`, by the `Reentry` edge into `to` or by the unwind edge
//!   to `to` of the block it was executing a call in ([`Landing`]). Abandonment starts only inside a
//!   [`Callee::Unknown`] call (`longjmp`, `__cxa_throw` and `exit` are not traced code). A
//!   `resume` (an exception leaving a landing pad's activation) is modelled as such a call:
//!   an `Unknown` site ending its block, whose `Return` edge is an unwind edge; regeneration
//!   reports that `Return` edge when an `Unwind` abandons the activation waiting there.
//! - [`Record::End`]: the thread ends (`exit`, the end of the thread, a fatal signal): every
//!   activation still on the stack is abandoned. The end of the record iterator means the same.
//!
//! Where the regenerator reads: at a predicate it needs a witness of the current activation
//! (the blocking property guarantees the next record is one); when it traverses a witnessed
//! edge it consumes that edge's witness (already read at a predicate, or read now); at a
//! [`Callee::Unknown`] site and between top-level activations it reads a control record
//! (`Enter`, `Back`, `Unwind` or `End`). Those are the only places, so a reader always knows
//! whether the next record is a witness (and its width) or a control record, which is what
//! makes the bit-packed encoding of [`code`] need no tag on witnesses.
//!
//! Not covered by this model: signal handlers (an activation entering at an arbitrary point
//! would need an escape code in every witness alphabet) and code that is neither traced nor
//! declared in the call sites. A thread that stops at an arbitrary point (a crash) leaves a
//! trace that regenerates up to the next place a record is needed
//! ([`RegenError::Truncated`]): the blocks walked after the last record without reading may
//! go past the crash point, so a flight recorder must add the crashing block.
//!
//! # What the instrumentation and runtime must provide
//!
//! - [`FuncId`]s that the reader resolves: `Enter` names the function program-wide (e.g. an
//!   image's function table index), and a [`Callee::Direct`] site names a traced function
//!   whose activation, entered that way, writes no `Enter`; an activation entered from an
//!   unknown site or no traced caller must write it (e.g. a thread-local flag set before
//!   unknown calls and cleared by the callee's entry).
//! - `Back` after every normal return of an unknown call; nothing for [`Callee::Opaque`] calls,
//!   which must really never call traced code nor end the frame.
//! - At each landing (`setjmp`'s second return, a landing pad), `Unwind` with the number of
//!   traced activations discarded, which the frame records of `edge` mode already let the
//!   runtime count, and how control landed.
//! - Witness code on the witnessed edges with width > 0 only; none on `EarlyExit`, `Reentry`
//!   and unwind edges.

use crate::cfg::{Cfg, EdgeKind};
use crate::ids::{EdgeId, IdVec, NodeId};
use std::fmt;

pub mod check;
pub mod code;
pub mod paths;
pub mod place;
pub mod regen;
pub mod stream;
#[cfg(test)]
mod tests;

pub use check::{check_plan, PlanError};
pub use place::{
    blockers, blocking_placement, branch_plan, cheaper_plan, constrained_spanning_tree,
    witness_plan, witness_sets, Plan, PlanKind, Witness,
};
pub use regen::{regenerate, Activation, RegenError, Step};
pub use stream::{records_of, steps_of, Event, Record};

/// A function of the traced program: an index into the slice of [`Traced`] functions that
/// regeneration is given.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct FuncId(pub u32);

impl FuncId {
    /// The dense index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for FuncId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "f{}", self.0)
    }
}

/// Who a call site calls, as far as the plan knows.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Callee {
    /// A traced function, known statically. Its activation writes no `Enter` record.
    Direct(FuncId),
    /// Code that writes no record, calls no traced function and always returns normally
    /// (`strlen`, intrinsics). Not a call vertex.
    Opaque,
    /// Anything else: a call through a pointer, or untraced code that may call back into
    /// traced code or may not return (`qsort`, `exit`, `longjmp`, `__cxa_throw`). Callbacks
    /// announce themselves with `Enter`, a normal return writes `Back`.
    Unknown,
    /// A traced function known only at run time (a call another module resolves, which the
    /// runtime resolved by address): its activation writes no `Enter`, like [`Callee::Direct`],
    /// and the caller writes `Back` when it returns normally, like [`Callee::Unknown`] (the
    /// caller's code cannot know which it is).
    DirectBack(FuncId),
}

/// One call inside a block. Calls of a block run in order, before its terminator.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct CallSite {
    /// Who is called.
    pub callee: Callee,
}

/// Everything the tracing algorithms need to know about one function.
#[derive(Clone, PartialEq, Debug)]
pub struct FunctionInput {
    /// The control-flow graph.
    pub cfg: Cfg,
    /// The call sites of each block (EXIT has none), in execution order.
    pub calls: IdVec<NodeId, Vec<CallSite>>,
    /// `Flow` edges taken only by unwinding out of a call in their source block (an
    /// `invoke`'s unwind edge). They never carry a witness: landing on them writes `Unwind`.
    pub unwind: IdVec<EdgeId, bool>,
}

impl FunctionInput {
    /// A function without calls and without unwind edges.
    pub fn without_calls(cfg: Cfg) -> FunctionInput {
        let calls = IdVec::filled(cfg.num_nodes(), Vec::new());
        let unwind = IdVec::filled(cfg.num_edges(), false);
        FunctionInput { cfg, calls, unwind }
    }

    /// True for the edges the witness analysis works on: `Flow` and `Return` edges that are
    /// not unwind edges.
    pub fn is_normal(&self, e: EdgeId) -> bool {
        self.cfg.edge(e).kind.is_structural() && !self.unwind[e]
    }

    /// The normal out-edges of `v`, in id order.
    pub fn normal_succs(&self, v: NodeId) -> impl Iterator<Item = EdgeId> + '_ {
        self.cfg
            .succs(v)
            .iter()
            .copied()
            .filter(move |&e| self.is_normal(e))
    }

    /// True for a block with two or more normal out-edges.
    pub fn is_predicate(&self, v: NodeId) -> bool {
        self.normal_succs(v).nth(1).is_some()
    }

    /// True for a block with a call site that is not [`Callee::Opaque`].
    pub fn is_call_vertex(&self, v: NodeId) -> bool {
        self.calls[v].iter().any(|c| c.callee != Callee::Opaque)
    }

    /// The vertices that blocking witnesses must shield from predicates (§4.2): the call
    /// vertices and EXIT.
    pub fn must_block(&self, v: NodeId) -> bool {
        self.cfg.is_exit(v) || self.is_call_vertex(v)
    }

    /// The edge by which control lands in `to` when an abandonment ends in an activation
    /// that was executing a call in `from`: the unwind edge `from -> to` (the first, if
    /// parallel) or the `Reentry` edge into `to`.
    pub fn landing_edge(&self, from: NodeId, to: NodeId, how: Landing) -> Option<EdgeId> {
        match how {
            Landing::Unwind => self
                .cfg
                .succs(from)
                .iter()
                .copied()
                .find(|&e| self.unwind[e] && self.cfg.edge(e).dst == to),
            Landing::Reentry => self
                .cfg
                .reentry(to)
                .filter(|&e| self.cfg.edge(e).kind == EdgeKind::Reentry),
        }
    }
}

/// How control lands after an abandonment.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Landing {
    /// By a `Reentry` edge (`longjmp` arriving at its `setjmp`).
    Reentry,
    /// By an unwind edge of the block whose call was executing (an exception arriving at a
    /// landing pad).
    Unwind,
}

/// A function with the plan it was instrumented with: what regeneration needs.
#[derive(Clone, PartialEq, Debug)]
pub struct Traced {
    /// The function.
    pub input: FunctionInput,
    /// Its witnesses.
    pub plan: Plan,
}
