//! # tally-format
//!
//! The data formats tally writes down, the modes they describe, and the contract they share
//! with the runtime:
//! - [`mode`]: the modes and their facts, one table;
//! - [`abi`]: every constant and struct layout the instrumenter, the runtime and the reader
//!   share, written down once;
//! - [`meta`]: per-module instrumentation metadata (graphs, locations, the counter plan),
//!   embedded in each instrumented object file;
//! - [`profile`]: the profile file the runtime writes at exit (metadata blobs plus counters);
//! - [`trace`]: the trace files, one module per mode: `trace-naive` (`trace::naive`, every edge
//!   taken, the oracle for path profiles and witness traces in the tests) and `trace`
//!   (`trace::witness`, bit-packed witness streams, one per thread; `trace::rc`, their range
//!   coding);
//! - [`validate`]: the checks every decoded metadata blob passes before anyone reads it.
#![deny(missing_docs)]

pub mod abi;
pub mod meta;
pub mod mode;
pub mod profile;
pub mod trace;
pub mod validate;

pub use meta::{
    BlockIdx, BranchMeta, CallSiteMeta, CallTargets, CounterIdx, DirectCall, EdgeIdx, EventMeta,
    FileIdx, FunctionMeta, FunctionModeMeta, IpathArray, IpathCall, IpathFunction, IpathMeta,
    LineRun, Linkage, Loc, MetaError, Mode, ModeParts, ModuleMeta, ModuleModeMeta, PathMeta,
    PathStorage, Probe, ProbeAt, ProbeDesc, ScopeIdx, ScopeMeta, SkippedFunction, SourceFn,
    SourceFnIdx, SourceMeta, StoredKind, WCallee, WtraceMeta,
};
pub use validate::{InvalidMeta, Problem};
