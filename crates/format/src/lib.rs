//! # tally-format
//!
//! The two data formats tally writes down:
//! - [`meta`]: per-module instrumentation metadata (graphs, locations, the counter plan),
//!   embedded in each instrumented object file;
//! - [`profile`]: the profile file the runtime writes at exit (metadata blobs plus counters).
#![deny(missing_docs)]

pub mod meta;
pub mod profile;

pub use meta::{
    FunctionMeta, Linkage, Loc, MetaError, Mode, ModuleMeta, PathMeta, PathStorage, Probe,
    SkippedFunction, StoredKind,
};
