//! The trace files of the two trace modes, one module per mode ("a file's name is its mode's
//! name"):
//! - [`naive`]: `trace-naive`'s, every function entry and every edge taken, per activation (the
//!   oracle for path profiles and witness traces in the tests);
//! - [`witness`]: `trace`'s, bit-packed witness streams, one per thread (Ball & Larus 1994 §6),
//!   whose chunks may be range-coded ([`rc`]).
//!
//! Both are re-exported here, so `tally_format::trace::read_trace` and
//! `tally_format::trace::read_witness_trace` name them.

use thiserror::Error;

pub mod naive;
pub mod rc;
pub mod witness;

pub use naive::*;
pub use witness::*;

/// A trace file that cannot be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum TraceError {
    /// Not a trace file.
    #[error("not a tally trace (bad magic)")]
    BadMagic,
    /// A version this build cannot read.
    #[error("trace version {0} is not supported (this tally reads version 1)")]
    Version(u32),
    /// A witness trace of a version this build cannot read.
    #[error("witness trace version {0} is not supported (this tally reads versions {WTRACE_VERSION}, {WTRACE_VERSION_CODED} and {WTRACE_VERSION_WORDS}): rerun the program built by this tally")]
    WitnessVersion(u32),
    /// A range-coded chunk that does not decode.
    #[error("corrupt trace: compressed chunk {0} does not decode")]
    BadCoded(usize),
    /// The file ends inside a record.
    #[error("truncated trace: {0} stray bytes at the end")]
    Truncated(usize),
    /// A record of unknown kind.
    #[error("corrupt trace: record {0} has an unknown kind")]
    BadRecord(usize),
    /// A stream of words (version [`WTRACE_VERSION_WORDS`]) that is not whole words.
    #[error("corrupt trace: the stream of thread {0} is not whole 8-byte words")]
    BadWords(u32),
}
