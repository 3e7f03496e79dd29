//! # tally-format
//!
//! The two data formats tally writes down:
//! - [`meta`]: per-module instrumentation metadata (graphs, locations, the counter plan),
//!   embedded in each instrumented object file;
//! - [`profile`]: the profile file the runtime writes at exit (metadata blobs plus counters);
//! - [`trace`]: the trace file of trace mode (every edge taken), the oracle for path profiles;
//! - [`validate`]: the checks every decoded metadata blob passes before anyone reads it.
#![deny(missing_docs)]

pub mod meta;
pub mod profile;
pub mod trace;
pub mod validate;

pub use meta::{
    BlockIdx, CallSiteMeta, CounterIdx, EdgeIdx, EventMeta, FileIdx, FunctionMeta, Linkage, Loc,
    MetaError, Mode, ModuleMeta, PathMeta, PathStorage, Probe, SkippedFunction, StoredKind,
};
pub use validate::{InvalidMeta, Problem};
