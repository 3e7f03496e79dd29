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
//!
//! Every index the metadata holds has its own newtype ([`BlockIdx`], [`EdgeIdx`],
//! [`CounterIdx`], [`FileIdx`]), serialized as the bare `u32` (postcard's varint), so a block
//! index cannot be stored where an edge index is meant. [`ModuleMeta::decode`] validates what
//! it decodes (`crate::validate`): no caller ever sees metadata whose indices point outside
//! what they index.

use serde::{Deserialize, Serialize};
use std::fmt;
use tally_graph::{Cfg, Edge, EdgeId, EdgeKind, NodeId};
use thiserror::Error;

mod probes;
#[cfg(test)]
mod tests;
mod wire;

pub use probes::{CallTargets, DirectCall, ProbeAt, ProbeDesc};

pub use crate::validate::{InvalidMeta, Problem};

/// Magic bytes at the start of every metadata blob.
pub const META_MAGIC: &[u8; 8] = b"TALLYMD\0";
/// Version of the metadata encoding. Bump on any change of the encoding: the wire layout
/// (`meta/wire.rs`) and the types it holds. (Version 11 did not change when the mode facts
/// became [`FunctionModeMeta`] and [`ModuleModeMeta`]: their wire layout is the old fields.)
/// 5: [`PathMeta::numbering`], the fingerprint of the path numbering.
/// 6: [`FunctionMeta::source`] (every line of every block, inline scopes, branches) and
/// [`ModuleMeta::source_fns`].
/// 7: [`FunctionMeta::wtrace`] (trace mode: call sites and witnesses) and [`ModuleMeta::ipath`]
/// (the interprocedural path modes).
/// 8: [`IpathFunction::array`] (interprocedural paths counted in the counter array).
/// 9: [`IpathCall::context_cut`] (direct calls made summary edges for array storage).
/// 10: [`WtraceMeta::paths`] (trace mode's path-number plan); [`Probe::Path`] is a `u64`, and
/// hashed path functions ([`PathStorage::Hash`]) may have counters: the counter slices of their
/// narrow path ends (`tally_graph::paths::slices`).
/// 11: [`ModuleMeta::oracle_for`] (the same-run oracle of `--tally-oracle`).
/// 12: [`SourceMeta::probes`], [`ModuleMeta::probe_descs`] and
/// [`ModuleMeta::probes_before_optimization`] (clang's pseudo-probes, for sample profiles:
/// `probes`).
/// 13: the same encoding, with what `probes` say in a `--tally-pgo` build: a probe after a call
/// that may end the frame starts a block (its count is how often the calls returned), and small
/// callees are inlined before instrumenting (a probe an inlined copy lacks ran 0 times in it).
/// Version 12's profiles counted such a probe as its block's entries.
/// 14: [`ScopeMeta::call_probe`], the call-site probe of an inlined call (nested records of the
/// sample profile).
/// 15: [`SourceMeta::call_targets`], the targets of indirect calls in a `--tally-pgo` build.
/// 16: [`ScopeMeta::top_level`], inline instances the rebuild's loader will not inline again.
/// 17: [`SourceMeta::direct_calls`], the direct calls of a `--tally-pgo` build.
pub const META_VERSION: u32 = 17;

macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(
            Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The index as a `usize`, for indexing.
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

index_type!(
    /// A vertex of a function's graph as stored: a block `n0 .. n(k-1)`, or, as an edge
    /// endpoint, EXIT (`nk`, `k` = [`FunctionMeta::num_blocks`]).
    BlockIdx,
    "n"
);
index_type!(
    /// An edge of a function's graph as stored (`e0` is the implicit `EXIT -> n0`).
    EdgeIdx,
    "e"
);
index_type!(
    /// A counter: module-relative in [`FunctionMeta::counter_base`], function-relative in
    /// [`EventMeta`] and [`CallSiteMeta`].
    CounterIdx,
    "c"
);
index_type!(
    /// An entry of [`ModuleMeta::files`].
    FileIdx,
    "file #"
);
index_type!(
    /// An entry of [`ModuleMeta::source_fns`].
    SourceFnIdx,
    "source function #"
);
index_type!(
    /// An entry of [`SourceMeta::scopes`]: `s0` is the function's own body, the others are
    /// inlined calls.
    ScopeIdx,
    "s"
);

impl From<NodeId> for BlockIdx {
    fn from(n: NodeId) -> BlockIdx {
        BlockIdx(n.index() as u32)
    }
}

impl From<EdgeId> for EdgeIdx {
    fn from(e: EdgeId) -> EdgeIdx {
        EdgeIdx(e.index() as u32)
    }
}

impl BlockIdx {
    /// The graph vertex. Only for validated metadata, where every index is below the number of
    /// vertices (ids of `u32::MAX` do not exist).
    pub fn node(self) -> NodeId {
        NodeId::new(self.index())
    }
}

impl EdgeIdx {
    /// The graph edge. Only for validated metadata, where every index is below the number of
    /// edges.
    pub fn edge(self) -> EdgeId {
        EdgeId::new(self.index())
    }
}

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
    pub file: Option<FileIdx>,
    /// 1-based line, 0 when unknown.
    pub line: u32,
}

/// What one counter measures.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Probe {
    /// The number of traversals of the edge with this id (`e0` = number of calls).
    Edge(EdgeIdx),
    /// The number of times the block with this id was entered.
    Block(BlockIdx),
    /// The number of times the path with this number ran (path mode: every path of an array
    /// function; for a hashed function, the paths of its counter slices, whose counts add to
    /// its hash-table counts).
    Path(u64),
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
    pub inclusive: CounterIdx,
    /// The function's call sites.
    pub calls: Vec<CallSiteMeta>,
}

/// A call site (events mode).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct CallSiteMeta {
    /// The block holding the call.
    pub block: BlockIdx,
    /// The callee's name, for direct calls.
    pub callee: Option<String>,
    /// Counter (function-relative) holding the events of the completed calls, callees included.
    pub counter: CounterIdx,
}

/// Who a call site calls, as trace mode's plan saw it (`tally_graph::witness::Callee`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum WCallee {
    /// A function defined (and traced) in the same module, by linkage name.
    Direct(String),
    /// Code that writes nothing and never calls traced code (intrinsics, libc leaves).
    Opaque,
    /// Anything else (calls through pointers, other declared functions): `Enter`/`Back`.
    Unknown,
    /// A direct call of a function the linker resolves (a declaration, or a definition another
    /// copy may replace): entry `index` of the module's table of such callees. The runtime
    /// resolves each entry by address to a traced function or none (the trace's resolution
    /// chunks): a traced callee writes no `Enter`; the caller writes `Back` after the call.
    Extern {
        /// The callee's linkage name.
        name: String,
        /// Its index in the module's table of external callees.
        index: u32,
    },
}

/// Trace mode: what regeneration needs of one function besides its graph.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct WtraceMeta {
    /// The call sites of each block (`num_blocks` entries), in execution order.
    pub calls: Vec<Vec<WCallee>>,
    /// The witness `(value, bits)` of each edge (`e0` included), `None` when it writes nothing.
    pub witness: Vec<Option<(u32, u8)>>,
    /// For each vertex (EXIT included), the width of the witness read there.
    pub read_bits: Vec<u8>,
    /// The unwind edges (an `invoke`'s edge to its landing pad), which carry no witness.
    pub unwind: Vec<EdgeIdx>,
    /// The plan is the one-bit-per-branch plan (`PlanKind::Branch`).
    pub branch: bool,
    /// The function writes Ball-Larus path numbers instead of witnesses (`PlanKind::Paths`,
    /// `--tally-trace=paths`; `witness` is then all `None`): the fingerprint of the numbering
    /// (`NumberedDag::fingerprint`), which the reader recomputes from the graph and the call
    /// sites (`tally_graph::witness::paths::paths_plan`) and compares.
    pub paths: Option<u64>,
    /// Why the function could not be traced, if it could not (the other fields are then
    /// empty): it writes a "lost" record at entry, so regeneration stops where it runs.
    pub untraced: Option<String>,
}

impl WtraceMeta {
    /// The function's witness plan as regeneration checks and follows it
    /// (`tally_graph::witness::check_plan`, Ball & Larus 1994 §4): its kind, witnesses and
    /// read widths. The one conversion, so that the validator and the reader check the same plan.
    pub fn plan(&self) -> tally_graph::witness::Plan {
        use tally_graph::witness::{Plan, PlanKind, Witness};
        Plan {
            kind: if self.paths.is_some() {
                PlanKind::Paths
            } else if self.branch {
                PlanKind::Branch
            } else {
                PlanKind::Witness
            },
            witness: tally_graph::IdVec::from_vec(
                self.witness
                    .iter()
                    .map(|x| x.map(|(value, bits)| Witness { value, bits }))
                    .collect(),
            ),
            read_bits: tally_graph::IdVec::from_vec(self.read_bits.clone()),
        }
    }

    /// Which of `num_edges` edges are unwind edges (`None` when one is out of range).
    pub fn unwind_mask(
        &self,
        num_edges: usize,
    ) -> Option<tally_graph::IdVec<tally_graph::EdgeId, bool>> {
        let mut unwind = tally_graph::IdVec::filled(num_edges, false);
        for e in &self.unwind {
            let e = e.edge();
            if e.index() >= num_edges {
                return None;
            }
            unwind[e] = true;
        }
        Some(unwind)
    }
}

/// Where a function's path counts live (path mode).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum PathStorage {
    /// In the module's counter array: counter `counter_base + p` counts path `p`.
    Array,
    /// In the runtime's hash table number `table` of the module (profile path entries), plus
    /// the function's counters, each [`Probe::Path`] (the counter slices of path ends whose
    /// numbers lie in a narrow range): a path's count is the sum of all of them.
    Hash {
        /// Index of the table in the module's path tables.
        table: u32,
    },
}

/// Path-profiling facts of one function (path mode).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct PathMeta {
    /// Edges where paths are cut besides back edges (Ball & Larus 1996's answer to too many paths).
    pub cuts: Vec<EdgeIdx>,
    /// Number of potential paths (NumPaths of START); paths are numbered `0..num_paths`.
    pub num_paths: u128,
    /// Where the counts are.
    pub storage: PathStorage,
    /// Fingerprint of the numbering the instrumenter used
    /// ([`tally_graph::paths::NumberedDag::fingerprint`]): the reader renumbers the paths from
    /// the graph and the cuts and refuses a profile whose numbering differs, rather than label
    /// its paths wrongly.
    pub numbering: u64,
}

/// A source function (a `DISubprogram`): a function as written, which may have been inlined
/// into other functions or not emitted at all.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct SourceFn {
    /// Source name (`name:` of the subprogram).
    pub name: String,
    /// Linkage name (C++ mangled name), empty when the debug info has none (C).
    pub linkage_name: String,
    /// Where it is defined.
    pub loc: Loc,
}

/// One inline scope of a function: its own body (`s0`) or one inlined call (the code of
/// `func` inlined at `call`, itself inside scope `parent`). The chain of parents is the
/// `inlinedAt` chain of the debug info.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ScopeMeta {
    /// The source function whose code this is; `None` without debug info.
    pub func: Option<SourceFnIdx>,
    /// The enclosing scope; below this scope's own index (`s0` names itself).
    pub parent: ScopeIdx,
    /// Where the call was inlined (line 0 for `s0`).
    pub call: Loc,
    /// The inlined call's pseudo-probe id in the parent scope's function (a build with
    /// `-fpseudo-probe-for-profiling`: the probe id the discriminator of the `inlinedAt`
    /// location holds, `meta::probes`); 0 for `s0` and without probes.
    pub call_probe: u32,
    /// A `--tally-pgo` build inlined this call where the rebuild's sample-profile loader will
    /// not (`tally_llvm`'s `module::reinline`): a nested sample profile counts this instance in
    /// its function's own record, as the loader would merge it, not under the call site.
    pub top_level: bool,
}

/// A run of consecutive instructions of a block with the same line and scope.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct LineRun {
    /// The line (never 0: instructions without a line are not listed).
    pub loc: Loc,
    /// The inline scope the instructions come from.
    pub scope: ScopeIdx,
}

/// A conditional branch or switch of the optimized code: where it is and which graph edges
/// are its outcomes, in successor order.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct BranchMeta {
    /// The line of the terminator (the block's last line when it has none).
    pub loc: Loc,
    /// Its inline scope.
    pub scope: ScopeIdx,
    /// The outcome edges; all leave the same block.
    pub edges: Vec<EdgeIdx>,
}

/// What a function's code is made of in source terms: its inline scopes, the
/// lines of every block in instruction order, and its branches. All empty when the
/// instrumenter recorded nothing (no debug info).
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct SourceMeta {
    /// Inline scopes; `s0`, the function's own body, first.
    pub scopes: Vec<ScopeMeta>,
    /// Per block (empty, or one entry per block): its lines in instruction order, consecutive
    /// repeats merged.
    pub lines: Vec<Vec<LineRun>>,
    /// Conditional branches and switches.
    pub branches: Vec<BranchMeta>,
    /// Per block (empty, or one entry per block): its pseudo-probe calls in instruction order
    /// (a build with `-fpseudo-probe-for-profiling`; [`probes`]).
    #[serde(default)]
    pub probes: Vec<Vec<ProbeAt>>,
    /// The indirect calls of a `--tally-pgo` build whose targets are counted, in block and
    /// instruction order ([`CallTargets`]; empty elsewhere).
    #[serde(default)]
    pub call_targets: Vec<CallTargets>,
    /// The direct calls with a call-site probe of a `--tally-pgo` build, in block and
    /// instruction order ([`DirectCall`]; empty elsewhere).
    #[serde(default)]
    pub direct_calls: Vec<DirectCall>,
}

/// One function of a module. Serialized through its wire layout (`meta::wire`).
#[derive(Clone, PartialEq, Eq, Debug)]
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
    pub edges: Vec<(BlockIdx, BlockIdx, StoredKind)>,
    /// Location of each block: its first instruction with a line that is code (not a PHI or
    /// a debug intrinsic), the first of its [`SourceMeta::lines`] when it has any.
    pub blocks: Vec<Loc>,
    /// [`Cfg::shape_hash`] of the graph: equal for every mode built from the same IR.
    pub cfg_hash: u64,
    /// Index of this function's first counter in the module's counter array.
    pub counter_base: CounterIdx,
    /// Counter `counter_base + i` measures `counters[i]`.
    pub counters: Vec<Probe>,
    /// What the function's mode adds: one variant per mode that adds anything.
    pub mode_meta: FunctionModeMeta,
    /// Source lines, inline scopes and branches.
    pub source: SourceMeta,
}

/// What a function's mode records besides its graph and counters: the one place a mode's
/// per-function facts live (a sum, so no function can carry two modes' facts). On the wire it
/// is the five optional fields it replaced (`meta::wire`), so the encoding did not change.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub enum FunctionModeMeta {
    /// Nothing: the counters say it all (`edge`, `edges-naive`, `blocks-naive`,
    /// `trace-naive`; a `path`-mode function profiled with edge counters because its paths
    /// could not be instrumented; the functions of an `ipath` set but its table's owner; a
    /// `vertex`-mode function whose chords all have counters).
    #[default]
    Counters,
    /// `vertex` mode (Ball & Larus 1994 §3.3, Fig. 8).
    Vertex {
        /// Chords without a counter, taken as 0 by the propagation of Fig. 8.
        zero_edges: Vec<EdgeIdx>,
        /// Edges whose count the counters do not determine (the cycles of `zero_edges`);
        /// their derived values are only vertex-equivalent and are not reported.
        unknown_edges: Vec<EdgeIdx>,
    },
    /// `path` mode (and the path table's owner of an `ipath` set): the function's paths.
    Path(PathMeta),
    /// Events modes: events per block and the inclusive counters.
    Events(EventMeta),
    /// `trace` mode: call sites and witnesses.
    Trace(WtraceMeta),
}

/// A function's mode facts as the optional fields they are stored as (the wire layout of
/// [`FunctionModeMeta`], and what tally-llvm's modes fill). Any combination can be written
/// down here; [`FunctionModeMeta::from_parts`] accepts at most one.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct ModeParts {
    /// `vertex` mode: [`FunctionModeMeta::Vertex`]'s `zero_edges`.
    pub zero_edges: Vec<EdgeIdx>,
    /// `vertex` mode: [`FunctionModeMeta::Vertex`]'s `unknown_edges`.
    pub unknown_edges: Vec<EdgeIdx>,
    /// Path modes.
    pub paths: Option<PathMeta>,
    /// Events modes.
    pub events: Option<EventMeta>,
    /// `trace` mode.
    pub wtrace: Option<WtraceMeta>,
}

impl FunctionModeMeta {
    /// The facts from their stored fields: at most one mode's may be given (empty vertex lists
    /// count as not given). Two at once is an error naming both, never a panic.
    pub fn from_parts(parts: ModeParts) -> Result<FunctionModeMeta, Problem> {
        let ModeParts {
            zero_edges,
            unknown_edges,
            paths,
            events,
            wtrace,
        } = parts;
        let vertex = !zero_edges.is_empty() || !unknown_edges.is_empty();
        let given: Vec<&'static str> = [
            (vertex, "vertex"),
            (paths.is_some(), "path"),
            (events.is_some(), "events"),
            (wtrace.is_some(), "trace"),
        ]
        .into_iter()
        .filter_map(|(g, name)| g.then_some(name))
        .collect();
        if let [first, second, ..] = given[..] {
            return Err(Problem::ModeMeta { first, second });
        }
        Ok(match (paths, events, wtrace) {
            (Some(p), _, _) => FunctionModeMeta::Path(p),
            (_, Some(e), _) => FunctionModeMeta::Events(e),
            (_, _, Some(w)) => FunctionModeMeta::Trace(w),
            _ if vertex => FunctionModeMeta::Vertex {
                zero_edges,
                unknown_edges,
            },
            _ => FunctionModeMeta::Counters,
        })
    }

    /// The stored fields of these facts (the inverse of [`FunctionModeMeta::from_parts`]).
    pub fn into_parts(self) -> ModeParts {
        let mut parts = ModeParts::default();
        match self {
            FunctionModeMeta::Counters => {}
            FunctionModeMeta::Vertex {
                zero_edges,
                unknown_edges,
            } => {
                parts.zero_edges = zero_edges;
                parts.unknown_edges = unknown_edges;
            }
            FunctionModeMeta::Path(p) => parts.paths = Some(p),
            FunctionModeMeta::Events(e) => parts.events = Some(e),
            FunctionModeMeta::Trace(w) => parts.wtrace = Some(w),
        }
        parts
    }

    /// The mode family whose facts these are, as messages name it.
    pub fn name(&self) -> &'static str {
        match self {
            FunctionModeMeta::Counters => "counters",
            FunctionModeMeta::Vertex { .. } => "vertex",
            FunctionModeMeta::Path(_) => "path",
            FunctionModeMeta::Events(_) => "events",
            FunctionModeMeta::Trace(_) => "trace",
        }
    }
}

impl FunctionMeta {
    /// `vertex` mode: the chords without a counter (empty in other modes).
    pub fn zero_edges(&self) -> &[EdgeIdx] {
        match &self.mode_meta {
            FunctionModeMeta::Vertex { zero_edges, .. } => zero_edges,
            _ => &[],
        }
    }

    /// `vertex` mode: the edges whose count is not determined (empty in other modes).
    pub fn unknown_edges(&self) -> &[EdgeIdx] {
        match &self.mode_meta {
            FunctionModeMeta::Vertex { unknown_edges, .. } => unknown_edges,
            _ => &[],
        }
    }

    /// Path modes: the function's paths, if it counts them.
    pub fn paths(&self) -> Option<&PathMeta> {
        match &self.mode_meta {
            FunctionModeMeta::Path(p) => Some(p),
            _ => None,
        }
    }

    /// Path modes: the function's paths, to edit (tests forging metadata).
    pub fn paths_mut(&mut self) -> Option<&mut PathMeta> {
        match &mut self.mode_meta {
            FunctionModeMeta::Path(p) => Some(p),
            _ => None,
        }
    }

    /// Events modes: events per block and the inclusive counters.
    pub fn events(&self) -> Option<&EventMeta> {
        match &self.mode_meta {
            FunctionModeMeta::Events(e) => Some(e),
            _ => None,
        }
    }

    /// Events modes: the events facts, to edit (tests forging metadata).
    pub fn events_mut(&mut self) -> Option<&mut EventMeta> {
        match &mut self.mode_meta {
            FunctionModeMeta::Events(e) => Some(e),
            _ => None,
        }
    }

    /// Trace mode: call sites and witnesses.
    pub fn wtrace(&self) -> Option<&WtraceMeta> {
        match &self.mode_meta {
            FunctionModeMeta::Trace(w) => Some(w),
            _ => None,
        }
    }

    /// Trace mode: the trace facts, to edit (tests forging metadata).
    pub fn wtrace_mut(&mut self) -> Option<&mut WtraceMeta> {
        match &mut self.mode_meta {
            FunctionModeMeta::Trace(w) => Some(w),
            _ => None,
        }
    }

    /// Rebuilds the control-flow graph, checking first what building it relies on: at least
    /// one block and fewer than `u32::MAX - 1` (ids must fit), one location per block (which
    /// bounds the graph's size by the metadata's, so bad metadata cannot make it allocate
    /// without limit), every edge endpoint a vertex; then the graph rules of
    /// [`Cfg::from_edges`]. Never panics.
    pub fn cfg(&self) -> Result<Cfg, Problem> {
        if self.num_blocks == 0 || self.num_blocks >= u32::MAX - 1 {
            return Err(Problem::BlockCount(self.num_blocks));
        }
        if self.blocks.len() != self.num_blocks as usize {
            return Err(Problem::BlockLocations {
                found: self.blocks.len(),
                blocks: self.num_blocks,
            });
        }
        let num_blocks = self.num_blocks as usize;
        let num_nodes = u64::from(self.num_blocks) + 1;
        let mut edges = Vec::with_capacity(self.edges.len() + 1);
        edges.push(Edge {
            src: NodeId::new(num_blocks),
            dst: NodeId::new(0),
            kind: EdgeKind::Entry,
        });
        for (i, &(s, d, k)) in self.edges.iter().enumerate() {
            for node in [s, d] {
                if u64::from(node.0) >= num_nodes {
                    return Err(Problem::Endpoint {
                        edge: EdgeIdx(u32::try_from(i + 1).unwrap_or(u32::MAX)),
                        node,
                        num_nodes,
                    });
                }
            }
            edges.push(Edge {
                src: s.node(),
                dst: d.node(),
                kind: k.into(),
            });
        }
        Cfg::from_edges(num_blocks, edges).map_err(Problem::Graph)
    }

    /// Stores a graph's edges (all but `e0`).
    pub fn edges_of(cfg: &Cfg) -> Vec<(BlockIdx, BlockIdx, StoredKind)> {
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
                (e.src.into(), e.dst.into(), k)
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

/// Everything the reader needs about one instrumented module. Serialized through its wire
/// layout (`meta::wire`).
#[derive(Clone, PartialEq, Eq, Debug)]
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
    /// Source functions named by [`ScopeMeta::func`].
    pub source_fns: Vec<SourceFn>,
    /// Defined functions that were not instrumented.
    pub skipped: Vec<SkippedFunction>,
    /// What the module's mode adds at module level.
    pub mode_meta: ModuleModeMeta,
    /// A same-run oracle (`tally cc --tally-oracle`): this `edges-naive` module counts every
    /// edge of the functions of the module whose hash this is, in the same binary and the
    /// same run, so that `tally check` compares the two. Reports leave such modules out.
    pub oracle_for: Option<u64>,
    /// The pseudo-probe descriptors [`ProbeAt::desc`] indexes (empty without probes).
    pub probe_descs: Vec<ProbeDesc>,
    /// The probes were added and the module instrumented before optimization (`tally cc
    /// --tally-pgo`): each block holds exactly its own probe, so probe counts are exact. After
    /// optimization (a plain `-fpseudo-probe-for-profiling` build) a probe's copies can have
    /// been dropped, and its sum is then a lower bound (`probes`).
    pub probes_before_optimization: bool,
}

/// What a module's mode records at module level: one variant per mode that records anything.
/// On the wire it is the two optional fields it replaced (`meta::wire`).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub enum ModuleModeMeta {
    /// Nothing at module level (every mode but the events and interprocedural path modes).
    #[default]
    None,
    /// Events modes: what an event is (`insns`, `blocks`, `calls`, `mem`); counter 0 of the
    /// module holds the exiting thread's total when the profile was written.
    Events {
        /// The event kind's name.
        kind: String,
    },
    /// Interprocedural path modes, in a module with a set: what the reader needs to number
    /// the paths as the instrumenter did (a module without a set records nothing: its
    /// functions count edges).
    Ipath(IpathMeta),
}

impl ModuleModeMeta {
    /// The facts from the optional fields they are stored as (the wire layout): at most one.
    pub fn from_parts(
        event_kind: Option<String>,
        ipath: Option<IpathMeta>,
    ) -> Result<ModuleModeMeta, Problem> {
        Ok(match (event_kind, ipath) {
            (Some(_), Some(_)) => {
                return Err(Problem::ModeMeta {
                    first: "events",
                    second: "interprocedural path",
                })
            }
            (Some(kind), None) => ModuleModeMeta::Events { kind },
            (None, Some(ip)) => ModuleModeMeta::Ipath(ip),
            (None, None) => ModuleModeMeta::None,
        })
    }
}

impl ModuleMeta {
    /// Events modes: the event kind.
    pub fn event_kind(&self) -> Option<&str> {
        match &self.mode_meta {
            ModuleModeMeta::Events { kind } => Some(kind),
            _ => None,
        }
    }

    /// Interprocedural path modes: the module's set, if it has one.
    pub fn ipath(&self) -> Option<&IpathMeta> {
        match &self.mode_meta {
            ModuleModeMeta::Ipath(ip) => Some(ip),
            _ => None,
        }
    }

    /// Interprocedural path modes: the module's set, to edit (tests forging metadata).
    pub fn ipath_mut(&mut self) -> Option<&mut IpathMeta> {
        match &mut self.mode_meta {
            ModuleModeMeta::Ipath(ip) => Some(ip),
            _ => None,
        }
    }
}

/// The interprocedural path numbering of a module (modes `ipath`, `ipath-piecewise`): the
/// description `tally_graph::ipaths::IpNumbering::new_limited` was given, and what it gave.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct IpathMeta {
    /// The functions of the set, in numbering order (`FnId` = index here).
    pub functions: Vec<IpathFunction>,
    /// The limit on the number of paths passed to `new_limited`.
    pub limit: u128,
    /// The number of observable paths.
    pub total: u128,
    /// `IpNumbering::fingerprint`.
    pub fingerprint: u64,
    /// Index (in [`ModuleMeta::functions`]) of the function whose path table holds the counts.
    pub table_owner: u32,
}

/// One function of an interprocedural path set.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct IpathFunction {
    /// Its index in [`ModuleMeta::functions`].
    pub function: u32,
    /// It can be entered other than by a direct call of the set.
    pub from_outside: bool,
    /// Its call sites, in id order.
    pub calls: Vec<IpathCall>,
    /// Cut edges given to the numbering (besides those it makes itself).
    pub cuts: Vec<EdgeIdx>,
    /// Its own paths (those starting at its edges out of `Entry_global`) counted in the
    /// module's counter array rather than the set's hash table, when it may be a root and has
    /// few of them, like path mode.
    pub array: Option<IpathArray>,
}

/// The paths a function of an interprocedural set counts in the module's counter array:
/// counter `counter_base + i` of the function ([`FunctionMeta::counter_base`]; its
/// [`FunctionMeta::counters`] are empty) counts path `first + i`, for `i < len`: the paths
/// starting at its own edges out of `Entry_global`
/// (`tally_graph::ipaths::IpNumbering::own_paths`). An isolated function (no direct call in or
/// out) counts all of them there; any other one counts there those it counts itself, while its
/// direct callees (and abandoned frames) count theirs in the hash table: a path's count is the
/// sum of its array counter and its table entries.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct IpathArray {
    /// The number of the path counter 0 counts.
    pub first: u64,
    /// How many counters.
    pub len: u32,
}

impl IpathMeta {
    /// The counts kept in counter arrays ([`IpathFunction::array`]), nonzero ones only, by
    /// number within each array (to be added to the table's entries for the same paths); `counters` is the module's counter array and
    /// `functions` its [`ModuleMeta::functions`] (validated metadata: every array lies inside
    /// the counters; a shorter array, e.g. of a damaged profile, gives what it holds).
    pub fn array_counts<'a>(
        &'a self,
        functions: &'a [FunctionMeta],
        counters: &'a [u64],
    ) -> impl Iterator<Item = (u128, u64)> + 'a {
        self.functions.iter().flat_map(move |f| {
            let (base, a) = match (functions.get(f.function as usize), f.array) {
                (Some(fm), Some(a)) => (fm.counter_base.index(), a),
                _ => (0, IpathArray { first: 0, len: 0 }),
            };
            let end = base.saturating_add(a.len as usize).min(counters.len());
            counters
                .get(base..end)
                .unwrap_or(&[])
                .iter()
                .enumerate()
                .filter(|&(_, &c)| c > 0)
                .map(move |(i, &c)| (u128::from(a.first) + i as u128, c))
        })
    }
}

impl IpathFunction {
    /// The graph crate's description of the function (graph `cfg`): the instrumenter and the
    /// reader build the numbering from the same one.
    pub fn to_function(&self, cfg: Cfg) -> tally_graph::ipaths::Function {
        use tally_graph::ipaths::{CallSite, Callee, FnId};
        tally_graph::ipaths::Function {
            cfg,
            calls: self
                .calls
                .iter()
                .map(|c| CallSite {
                    block: c.block.node(),
                    position: c.position,
                    callee: match c.callee {
                        Some(q) => Callee::Internal(FnId::new(q as usize)),
                        None => Callee::Unknown,
                    },
                })
                .collect(),
            entered_from_outside: self.from_outside,
            cuts: self.cuts.iter().map(|e| e.edge()).collect(),
        }
    }
}

/// One call site of a function of an interprocedural path set.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct IpathCall {
    /// Its block.
    pub block: BlockIdx,
    /// Its position among the block's instructions.
    pub position: u32,
    /// The callee's index in [`IpathMeta::functions`]; `None`: unknown (a summary edge).
    pub callee: Option<u32>,
    /// A call of a function of the set that the instrumenter made a summary edge although it
    /// could be direct (`callee` is then `None`), so that the loops of the callee (index in
    /// [`IpathMeta::functions`]) count their paths as its own, in an array, rather than in the
    /// hash table under the caller's context: the *context cut* of the `ipath` modes (paths
    /// through this call lose their calling context; `tally paths` lists these calls).
    pub context_cut: Option<u32>,
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
    Invalid(#[from] InvalidMeta),
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
        let (meta, rest): (wire::ModuleIn, &[u8]) =
            postcard::take_from_bytes(&blob[12..]).map_err(|e| MetaError::Decode(e.to_string()))?;
        if !rest.is_empty() {
            return Err(MetaError::Decode(format!(
                "{} trailing bytes after the metadata",
                rest.len()
            )));
        }
        // Two modes' facts in one place is an inconsistency, named like the others.
        let meta = ModuleMeta::try_from(meta)?;
        meta.validate()?;
        Ok(meta)
    }

    /// Checks everything the reader and the renderers index (see `crate::validate`).
    /// [`ModuleMeta::decode`] calls it; metadata built in memory can call it too.
    pub fn validate(&self) -> Result<(), InvalidMeta> {
        crate::validate::validate(self)
    }
}

/// Returns the edge a probe names, if it is an edge probe.
pub fn probe_edge(p: Probe) -> Option<EdgeId> {
    match p {
        Probe::Edge(e) => Some(e.edge()),
        Probe::Block(_) | Probe::Path(_) | Probe::Events => None,
    }
}
