//! What regeneration reads and what it gives: the record source ([`RecordSource`], told what it
//! is expected to read, [`Expect`]), the steps and visits of the regenerated execution, its
//! errors, and [`regenerate`] over a list of records.

use super::super::{FuncId, Record, Traced};
use super::Regenerator;
use crate::ids::{EdgeId, NodeId};
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
