//! # tally-format
//!
//! The data formats tally writes down, and the contract they share with the runtime:
//! - [`abi`]: every constant and struct layout the instrumenter, the runtime and the reader
//!   share, written down once;
//! - [`meta`]: per-module instrumentation metadata (graphs, locations, the counter plan),
//!   embedded in each instrumented object file;
//! - [`profile`]: the profile file the runtime writes at exit (metadata blobs plus counters);
//! - [`trace`]: the trace file of trace mode (every edge taken), the oracle for path profiles.
#![deny(missing_docs)]

pub mod abi;
pub mod meta;
pub mod profile;
pub mod trace;

pub use meta::{
    CallSiteMeta, EventMeta, FunctionMeta, Linkage, Loc, MetaError, Mode, ModuleMeta, PathMeta,
    PathStorage, Probe, SkippedFunction, StoredKind,
};
