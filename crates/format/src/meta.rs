//! Module metadata: what the instrumenter knows about each function of one translation unit
//! (its control-flow graph, block locations, and which edge or block each counter measures).
//!
//! The instrumenter (tally-llvm) serializes a [`ModuleMeta`] into a blob that is embedded in the
//! object file; the runtime copies the blob verbatim into the profile next to the counters, so a
//! profile is self-describing and `tally report` needs nothing else. The plan is written down
//! explicitly — counter `i` measures `counters[i]` — so the reader never re-derives a spanning
//! tree or relies on the instrumenter's iteration order.
//!
//! Blob layout: `b"TALLYMD\0"`, a little-endian `u32` [`META_VERSION`], then the postcard
//! encoding of [`ModuleMeta`].

use serde::{Deserialize, Serialize};
use tally_graph::{Cfg, CfgError, Edge, EdgeId, EdgeKind, NodeId};
use thiserror::Error;

/// Magic bytes at the start of every metadata blob.
pub const META_MAGIC: &[u8; 8] = b"TALLYMD\0";
/// Version of the metadata encoding. Bump on any change of the types below.
pub const META_VERSION: u32 = 4;

pub use crate::mode::Mode;

/// Linkage of a function, as far as merging copies across modules is concerned.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Linkage {
    /// Visible only inside its module (`static`).
    Internal,
    /// One definition program-wide.
    External,
    /// An inline/template function of which every module may hold a copy; the linker keeps one.
    /// Counts of the copies with the same name and graph are summed by the reader.
    Linkonce,
}

/// The kind of an edge, as stored. Mirrors [`EdgeKind`] (minus `Entry`, which is implicit).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum StoredKind {
    /// See [`EdgeKind::Flow`].
    Flow,
    /// See [`EdgeKind::Return`].
    Return,
    /// See [`EdgeKind::EarlyExit`].
    EarlyExit,
    /// See [`EdgeKind::Reentry`].
    Reentry,
}

impl From<StoredKind> for EdgeKind {
    fn from(k: StoredKind) -> EdgeKind {
        match k {
            StoredKind::Flow => EdgeKind::Flow,
            StoredKind::Return => EdgeKind::Return,
            StoredKind::EarlyExit => EdgeKind::EarlyExit,
            StoredKind::Reentry => EdgeKind::Reentry,
        }
    }
}

/// A source location; `file` indexes [`ModuleMeta::files`]; line 0 means unknown.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct Loc {
    /// Index into the module's file table, if known.
    pub file: Option<u32>,
    /// 1-based line, 0 when unknown.
    pub line: u32,
}

/// What one counter measures.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Probe {
    /// The number of traversals of the edge with this id (`e0` = number of calls).
    Edge(u32),
    /// The number of times the block with this id was entered.
    Block(u32),
    /// The number of times the path with this number ran (path mode, array storage).
    Path(u32),
    /// Events mode: an inclusive event counter (see [`EventMeta`]), or the module's total.
    Events,
}

/// Event-counting facts of one function (events mode).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct EventMeta {
    /// Events one execution of each block contributes.
    pub per_block: Vec<u64>,
    /// Counter (function-relative) holding the events of completed activations, callees
    /// included.
    pub inclusive: u32,
    /// The function's call sites.
    pub calls: Vec<CallSiteMeta>,
}

/// A call site (events mode).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct CallSiteMeta {
    /// The block holding the call.
    pub block: u32,
    /// The callee's name, for direct calls.
    pub callee: Option<String>,
    /// Counter (function-relative) holding the events of the completed calls, callees included.
    pub counter: u32,
}

/// Where a function's path counts live (path mode).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum PathStorage {
    /// In the module's counter array: counter `counter_base + p` counts path `p`.
    Array,
    /// In the runtime's hash table number `table` of the module (profile path entries).
    Hash {
        /// Index of the table in the module's path tables.
        table: u32,
    },
}

/// Path-profiling facts of one function (path mode).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct PathMeta {
    /// Edges where paths are cut besides back edges (paper 002's answer to too many paths).
    pub cuts: Vec<u32>,
    /// Number of potential paths (NumPaths of START); paths are numbered `0..num_paths`.
    pub num_paths: u128,
    /// Where the counts are.
    pub storage: PathStorage,
}

/// One function of a module.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct FunctionMeta {
    /// Linkage (symbol) name.
    pub name: String,
    /// How copies in several modules are merged.
    pub linkage: Linkage,
    /// Where the function is defined.
    pub loc: Loc,
    /// Number of blocks; EXIT is vertex `num_blocks`.
    pub num_blocks: u32,
    /// Edges `e1, e2, ...` as `(src, dst, kind)`; `e0 = EXIT -> n0` is implicit.
    pub edges: Vec<(u32, u32, StoredKind)>,
    /// Location of each block (its first instruction with a line).
    pub blocks: Vec<Loc>,
    /// [`Cfg::shape_hash`] of the graph: equal for every mode built from the same IR.
    pub cfg_hash: u64,
    /// Index of this function's first counter in the module's counter array.
    pub counter_base: u32,
    /// Counter `counter_base + i` measures `counters[i]`.
    pub counters: Vec<Probe>,
    /// `vertex` mode: chords without a counter, taken as 0 by the propagation of Fig. 8.
    pub zero_edges: Vec<u32>,
    /// `vertex` mode: edges whose count the counters do not determine (the cycles of
    /// `zero_edges`); their derived values are only vertex-equivalent and are not reported.
    pub unknown_edges: Vec<u32>,
    /// Path mode: the function's paths. `None` in a path-mode module means the function is
    /// profiled with edge counters instead (its paths could not be instrumented).
    pub paths: Option<PathMeta>,
    /// Events mode: events per block and the inclusive counters.
    pub events: Option<EventMeta>,
}

impl FunctionMeta {
    /// Rebuilds the control-flow graph.
    pub fn cfg(&self) -> Result<Cfg, CfgError> {
        let exit = self.num_blocks as usize;
        let mut edges = Vec::with_capacity(self.edges.len() + 1);
        edges.push(Edge {
            src: NodeId::new(exit),
            dst: NodeId::new(0),
            kind: EdgeKind::Entry,
        });
        edges.extend(self.edges.iter().map(|&(s, d, k)| Edge {
            src: NodeId::new(s as usize),
            dst: NodeId::new(d as usize),
            kind: k.into(),
        }));
        Cfg::from_edges(self.num_blocks as usize, edges)
    }

    /// Stores a graph's edges (all but `e0`).
    pub fn edges_of(cfg: &Cfg) -> Vec<(u32, u32, StoredKind)> {
        cfg.edges()
            .skip(1)
            .map(|(_, e)| {
                let k = match e.kind {
                    EdgeKind::Flow => StoredKind::Flow,
                    EdgeKind::Return => StoredKind::Return,
                    EdgeKind::EarlyExit => StoredKind::EarlyExit,
                    EdgeKind::Reentry => StoredKind::Reentry,
                    EdgeKind::Entry => unreachable!("only e0 is an Entry edge"),
                };
                (e.src.index() as u32, e.dst.index() as u32, k)
            })
            .collect()
    }
}

/// A function the instrumenter left alone, and why.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct SkippedFunction {
    /// Linkage name.
    pub name: String,
    /// Why it was not instrumented.
    pub reason: String,
}

/// Everything the reader needs about one instrumented module.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ModuleMeta {
    /// The source file the module was compiled from.
    pub source: String,
    /// The tally version that instrumented it.
    pub producer: String,
    /// The instrumentation mode.
    pub mode: Mode,
    /// Length of the module's counter array.
    pub num_counters: u32,
    /// File table for [`Loc::file`].
    pub files: Vec<String>,
    /// The instrumented functions.
    pub functions: Vec<FunctionMeta>,
    /// Defined functions that were not instrumented.
    pub skipped: Vec<SkippedFunction>,
    /// Events mode: what an event is (`insns`, `blocks`, `calls`, `mem`); counter 0 of the module
    /// holds the exiting thread's total when the profile was written.
    pub event_kind: Option<String>,
}

/// A metadata blob that cannot be decoded.
#[derive(Debug, Error)]
pub enum MetaError {
    /// Wrong magic bytes.
    #[error("not tally metadata (bad magic)")]
    BadMagic,
    /// A version this build cannot read.
    #[error("metadata version {found} is not supported (this tally reads version {META_VERSION})")]
    Version {
        /// The version found.
        found: u32,
    },
    /// The encoding is damaged.
    #[error("corrupt metadata: {0}")]
    Decode(String),
    /// The decoded data is inconsistent.
    #[error("inconsistent metadata: {0}")]
    Invalid(String),
}

impl ModuleMeta {
    /// Serializes into a blob (magic, version, postcard body).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.functions.len() * 64);
        out.extend_from_slice(META_MAGIC);
        out.extend_from_slice(&META_VERSION.to_le_bytes());
        let body = postcard::to_allocvec(self).expect("postcard encoding to a Vec cannot fail");
        out.extend_from_slice(&body);
        out
    }

    /// Decodes and validates a blob.
    pub fn decode(blob: &[u8]) -> Result<ModuleMeta, MetaError> {
        if blob.len() < 12 || &blob[..8] != META_MAGIC {
            return Err(MetaError::BadMagic);
        }
        let found = u32::from_le_bytes(blob[8..12].try_into().expect("4 bytes"));
        if found != META_VERSION {
            return Err(MetaError::Version { found });
        }
        let (meta, rest): (ModuleMeta, &[u8]) =
            postcard::take_from_bytes(&blob[12..]).map_err(|e| MetaError::Decode(e.to_string()))?;
        if !rest.is_empty() {
            return Err(MetaError::Decode(format!(
                "{} trailing bytes after the metadata",
                rest.len()
            )));
        }
        meta.validate()?;
        Ok(meta)
    }

    /// Checks the internal consistency the reader relies on: counter ranges inside the array,
    /// probes naming existing edges/blocks, locations naming existing files, graphs well formed.
    pub fn validate(&self) -> Result<(), MetaError> {
        let bad = |m: String| Err(MetaError::Invalid(m));
        let check_loc = |l: &Loc, what: &str| -> Result<(), MetaError> {
            match l.file {
                Some(f) if f as usize >= self.files.len() => Err(MetaError::Invalid(format!(
                    "{what} names file #{f} of {}",
                    self.files.len()
                ))),
                _ => Ok(()),
            }
        };
        for f in &self.functions {
            check_loc(&f.loc, &f.name)?;
            if f.blocks.len() != f.num_blocks as usize {
                return bad(format!(
                    "function {} has {} block locations for {} blocks",
                    f.name,
                    f.blocks.len(),
                    f.num_blocks
                ));
            }
            for l in &f.blocks {
                check_loc(l, &f.name)?;
            }
            let end = f.counter_base as u64 + f.counters.len() as u64;
            if end > self.num_counters as u64 {
                return bad(format!(
                    "function {} uses counters {}..{} of {}",
                    f.name, f.counter_base, end, self.num_counters
                ));
            }
            let cfg = f
                .cfg()
                .map_err(|e| MetaError::Invalid(format!("function {}: {e}", f.name)))?;
            for p in &f.counters {
                let ok = match *p {
                    Probe::Edge(e) => (e as usize) < cfg.num_edges(),
                    Probe::Block(b) => (b as usize) < cfg.num_blocks(),
                    Probe::Path(k) => f
                        .paths
                        .as_ref()
                        .is_some_and(|pm| u128::from(k) < pm.num_paths),
                    Probe::Events => f.events.is_some() || self.event_kind.is_some(),
                };
                if !ok {
                    return bad(format!("function {} has a counter for {p:?}", f.name));
                }
            }
            if f.zero_edges
                .iter()
                .chain(&f.unknown_edges)
                .any(|&e| e as usize >= cfg.num_edges())
            {
                return bad(format!(
                    "function {} names an edge it does not have",
                    f.name
                ));
            }
            if cfg.shape_hash() != f.cfg_hash {
                return bad(format!("function {} graph does not match its hash", f.name));
            }
        }
        Ok(())
    }
}

/// Returns the edge a probe names, if it is an edge probe.
pub fn probe_edge(p: Probe) -> Option<EdgeId> {
    match p {
        Probe::Edge(e) => Some(EdgeId::new(e as usize)),
        Probe::Block(_) | Probe::Path(_) | Probe::Events => None,
    }
}
