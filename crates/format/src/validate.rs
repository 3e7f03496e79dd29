//! Validation of decoded module metadata: the metadata is a checked contract.
//!
//! A profile's module hash only proves that the blob is the one the runtime copied; it says
//! nothing about whether the blob makes sense. [`validate`] runs on every decode
//! ([`ModuleMeta::decode`](crate::ModuleMeta::decode), so no reader can skip it) and checks
//! everything the report and its renderers index or rely on:
//!
//! - per function: at least one block and fewer than `u32::MAX`; one location per block; every
//!   file index of a location inside the file table; every edge endpoint a vertex (`n0 ..
//!   n(num_blocks)`, the last being EXIT), checked before the graph is built; the edge kinds
//!   obeying the graph rules ([`Cfg::from_edges`](tally_graph::Cfg::from_edges)); the graph
//!   hash;
//! - counters: `counter_base + counters.len() <= num_counters`, no two functions sharing a
//!   counter; every probe naming an existing edge or block, at most one counter per edge or
//!   block; `Probe::Events` only where events are counted;
//! - each mode's facts ([`FunctionModeMeta`](crate::meta::FunctionModeMeta)) only in a module
//!   of that mode (two modes' facts at once are refused when the wire layout is converted);
//! - vertex mode's `zero_edges` and `unknown_edges`: existing edges, no repeats;
//! - trace mode: an untraced function records nothing else; a traced one has one call list
//!   per block, one witness per edge, one read width per vertex, existing unwind edges (no
//!   repeats), and a plan that passes `tally_graph::witness::check_plan` (Ball & Larus 1994
//!   §4); the path-number plan's fingerprint is checked where it is recomputed (tally-report);
//! - paths (path modules only): cut edges that exist, no repeats; array storage counts exactly
//!   paths `0 .. num_paths` in its counters, in order; hash storage has no counters and a table
//!   index of its own, below the number of hashed functions. The numbering itself is checked
//!   where it is recomputed (tally-report, against [`PathMeta::numbering`](crate::PathMeta));
//! - an oracle mark ([`ModuleMeta::oracle_for`](crate::ModuleMeta)) only on an `edges-naive`
//!   module;
//! - events (events modules only): one `per_block` entry per block; the inclusive counter and
//!   each call site's counter inside the function's counters; each call site's block a block;
//! - source lines: every source function's location in the file table; per
//!   function, no lines at all or one list per block, and then at least one scope; `s0` its
//!   own parent, every other scope's parent below it (so the inline chains end), every scope's
//!   source function in the module's table and call location in the file table; every line
//!   run's scope a scope, its line not 0 and its file listed; every branch with at least two
//!   outcome edges that exist, all leaving one block, its scope a scope and its file listed;
//! - pseudo-probes: one list per block (or none), each probe naming a descriptor of the module,
//!   an id from 1 and a scope of the function; each indirect call with counted targets
//!   (`--tally-pgo-targets`) in a block of the function, with a probe id from 1, a scope of the
//!   function and at least one target, its counters inside the counter array;
//! - interprocedural path arrays: each in a function of the module without probes of its own,
//!   inside the counter array (and in the overlap check), its paths below the set's total;
//! - the module: `event_kind` present exactly in events modules, an interprocedural path set
//!   only in the `ipath` modes.
//!
//! Every failure is an [`InvalidMeta`]: the module's source file, the function, and what is
//! wrong ([`Problem`]), printed on one line (names are escaped).

use std::collections::HashSet;
use std::fmt;

use tally_graph::CfgError;
use thiserror::Error;

use crate::meta::{
    BlockIdx, CounterIdx, EdgeIdx, FileIdx, FunctionMeta, FunctionModeMeta, Loc, Mode, ModuleMeta,
    PathStorage, Probe, ScopeIdx, SourceFnIdx, WtraceMeta,
};

/// Metadata that decodes but breaks the contract: where, and what.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("module {}{}: {problem}", Escaped(module), Function(function))]
pub struct InvalidMeta {
    /// The module's source file.
    pub module: String,
    /// The function at fault, if the fault is in one.
    pub function: Option<String>,
    /// What is wrong.
    pub problem: Problem,
}

/// What is wrong with a module's metadata (the detail of [`InvalidMeta`]).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum Problem {
    /// A function without blocks, or with more than an id can number.
    #[error("{0} blocks")]
    BlockCount(u32),
    /// The block locations do not match the blocks.
    #[error("{found} block locations for {blocks} blocks")]
    BlockLocations {
        /// Locations stored.
        found: usize,
        /// `num_blocks`.
        blocks: u32,
    },
    /// A location names a file the module does not list.
    #[error("the location of {what} names {file} but the module lists {files} files")]
    File {
        /// Whose location (`the function`, `block n3`).
        what: String,
        /// The file index.
        file: FileIdx,
        /// Length of the file table.
        files: usize,
    },
    /// An edge endpoint beyond EXIT.
    #[error("edge {edge} names vertex {node} but the graph has {num_nodes} vertices (EXIT is n{})", num_nodes - 1)]
    Endpoint {
        /// The edge.
        edge: EdgeIdx,
        /// The vertex it names.
        node: BlockIdx,
        /// Blocks plus EXIT.
        num_nodes: u64,
    },
    /// The edges break a graph rule (kind and endpoints, duplicates, the entry edge).
    #[error("{0}")]
    Graph(CfgError),
    /// The graph is not the one its hash was computed from.
    #[error("the graph does not match its hash")]
    GraphHash,
    /// A function's counters run past the module's counter array.
    #[error("counters {base}..c{end} run past the module's {num_counters} counters")]
    CounterRange {
        /// The first counter.
        base: CounterIdx,
        /// One past the last.
        end: u64,
        /// The module's counters.
        num_counters: u32,
    },
    /// An interprocedural path array ([`IpathArray`](crate::IpathArray)) that cannot be read.
    #[error("its interprocedural path array {why}")]
    IpathArray {
        /// What is wrong.
        why: String,
    },
    /// A context cut ([`IpathCall::context_cut`](crate::IpathCall::context_cut)) that names
    /// no function of the set, or a call that is also direct.
    #[error("its call site {site} {why}")]
    IpathCut {
        /// The call site.
        site: usize,
        /// What is wrong.
        why: String,
    },
    /// Two functions share counters.
    #[error("counters {base}..c{end} overlap those of function {}", Escaped(other))]
    CounterOverlap {
        /// The first counter.
        base: CounterIdx,
        /// One past the last.
        end: u64,
        /// The other function.
        other: String,
    },
    /// A probe names an edge or block that does not exist, a path out of range, or events
    /// where none are counted.
    #[error("counter #{counter} measures {probe}, which {why}")]
    Probe {
        /// Function-relative counter.
        counter: usize,
        /// What it claims to measure.
        probe: ProbeName,
        /// Why that is wrong.
        why: &'static str,
    },
    /// A `zero_edges`, `unknown_edges` or cut entry names an edge that does not exist, or one
    /// twice.
    #[error("its {list} name {edge}, {why}")]
    EdgeList {
        /// Which list.
        list: &'static str,
        /// The edge.
        edge: EdgeIdx,
        /// `which it does not have` or `twice`.
        why: &'static str,
    },
    /// Path or events facts in a module of another mode, or an `event_kind` that does not
    /// fit the mode.
    #[error("{what} in a {mode} module")]
    Mode {
        /// What is out of place.
        what: &'static str,
        /// The module's mode.
        mode: &'static str,
    },
    /// Array-stored paths whose counters are not paths `0 .. num_paths` in order.
    #[error("{num_paths} paths in an array of {counters} counters that are not paths 0..{num_paths} in order")]
    PathArray {
        /// Potential paths.
        num_paths: u128,
        /// Counters of the function.
        counters: usize,
    },
    /// Hash-stored paths with counters, or a table index out of range or shared.
    #[error("its paths are in hash table #{table}, {why}")]
    PathTable {
        /// The table index.
        table: u32,
        /// What is wrong.
        why: String,
    },
    /// `per_block` does not have one entry per block.
    #[error("its events list {found} blocks but it has {blocks}")]
    EventBlocks {
        /// Entries of `per_block`.
        found: usize,
        /// `num_blocks`.
        blocks: u32,
    },
    /// An events counter outside the function's counters.
    #[error("its {what} counter is {counter} but it has {counters} counters")]
    EventCounter {
        /// `inclusive` or `call site #i`.
        what: String,
        /// The counter.
        counter: CounterIdx,
        /// Counters of the function.
        counters: usize,
    },
    /// Pseudo-probes that do not match the blocks or name a descriptor the module lacks.
    #[error("pseudo-probes: {why}")]
    Probes {
        /// What is wrong.
        why: String,
    },
    /// Source lines that do not match the blocks, or lines without a scope.
    #[error("{found} block line lists for {blocks} blocks and {scopes} scopes")]
    SourceLines {
        /// Line lists stored.
        found: usize,
        /// `num_blocks`.
        blocks: u32,
        /// Scopes stored.
        scopes: usize,
    },
    /// A scope, line run or branch that names a scope it cannot (a missing one, or a parent
    /// that is not an earlier scope).
    #[error("{what} names scope {scope} but {why}")]
    Scope {
        /// Who names it.
        what: String,
        /// The scope named.
        scope: ScopeIdx,
        /// What is wrong.
        why: String,
    },
    /// A scope naming a source function the module does not list.
    #[error("scope s{scope} names {func} but the module lists {funcs} source functions")]
    SourceFunction {
        /// The scope.
        scope: usize,
        /// The source function named.
        func: SourceFnIdx,
        /// Length of the source function table.
        funcs: usize,
    },
    /// A line run on line 0.
    #[error("block n{block} lists a line run on line 0")]
    LineZero {
        /// The block.
        block: usize,
    },
    /// A branch with fewer than two outcomes, an outcome edge that does not exist, or
    /// outcomes leaving different blocks.
    #[error("branch #{branch} {why}")]
    Branch {
        /// Index of the branch.
        branch: usize,
        /// What is wrong.
        why: String,
    },
    /// Two modes' facts in one function or module (the wire layout's optional fields allow
    /// it; [`FunctionModeMeta`](crate::meta::FunctionModeMeta) does not).
    #[error("it carries both {first} and {second} metadata")]
    ModeMeta {
        /// The first mode family found.
        first: &'static str,
        /// The second.
        second: &'static str,
    },
    /// Trace mode's facts that do not fit the graph or break the plan's rules.
    #[error("its trace metadata {why}")]
    Trace {
        /// What is wrong.
        why: String,
    },
    /// A call site in a block the function does not have.
    #[error("call site #{site} is in block {block} but it has {blocks} blocks")]
    CallBlock {
        /// Index of the call site.
        site: usize,
        /// Its block.
        block: BlockIdx,
        /// `num_blocks`.
        blocks: u32,
    },
}

/// A probe as a message names it (`edge e3`, `block n2`, `path 7`, `events`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeName(pub Probe);

impl fmt::Display for ProbeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Probe::Edge(e) => write!(f, "edge {e}"),
            Probe::Block(b) => write!(f, "block {b}"),
            Probe::Path(p) => write!(f, "path {p}"),
            Probe::Events => write!(f, "events"),
        }
    }
}

/// A name from the metadata, with control characters escaped so that a message stays on one
/// line.
struct Escaped<'a>(&'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// `, function NAME` or nothing.
struct Function<'a>(&'a Option<String>);

impl fmt::Display for Function<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(name) => write!(f, ", function {}", Escaped(name)),
            None => Ok(()),
        }
    }
}

/// Checks a decoded module (see the module doc for the list).
pub fn validate(m: &ModuleMeta) -> Result<(), InvalidMeta> {
    let module_err = |problem| InvalidMeta {
        module: m.source.clone(),
        function: None,
        problem,
    };
    let events_mode = m.mode.counts_events();
    if m.event_kind().is_some() != events_mode {
        return Err(module_err(Problem::Mode {
            what: if events_mode {
                "no event kind"
            } else {
                "an event kind"
            },
            mode: m.mode.name(),
        }));
    }
    if m.ipath().is_some() && !matches!(m.mode, Mode::Ipath | Mode::IpathPiecewise) {
        return Err(module_err(Problem::Mode {
            what: "an interprocedural path set",
            mode: m.mode.name(),
        }));
    }
    if m.oracle_for.is_some() && m.mode != crate::Mode::EdgesNaive {
        return Err(module_err(Problem::Mode {
            what: "an oracle mark",
            mode: m.mode.name(),
        }));
    }
    for (i, sf) in m.source_fns.iter().enumerate() {
        if let Some(file) = sf.loc.file.filter(|f| f.index() >= m.files.len()) {
            return Err(module_err(Problem::File {
                what: format!("source function #{i}"),
                file,
                files: m.files.len(),
            }));
        }
    }
    let hashed = m
        .functions
        .iter()
        .filter(|f| matches!(f.paths(), Some(p) if matches!(p.storage, PathStorage::Hash { .. })))
        .count();
    let mut tables = HashSet::new();
    for f in &m.functions {
        function(m, f, hashed, &mut tables).map_err(|problem| InvalidMeta {
            module: m.source.clone(),
            function: Some(f.name.clone()),
            problem,
        })?;
    }
    let arrays = ipath_arrays(m)?;
    // No two functions share a counter: sort the non-empty ranges and compare neighbours.
    let mut ranges: Vec<(u64, u64, &str)> = m
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let base = u64::from(f.counter_base.0);
            let len = f.counters.len() as u64 + arrays.get(&i).copied().unwrap_or(0);
            (base, base + len, f.name.as_str())
        })
        .filter(|r| r.1 > r.0)
        .collect();
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        let ((_, end, first), (base, next_end, name)) = (w[0], w[1]);
        if base < end {
            return Err(InvalidMeta {
                module: m.source.clone(),
                function: Some(name.to_string()),
                problem: Problem::CounterOverlap {
                    base: CounterIdx(base as u32),
                    end: next_end,
                    other: first.to_string(),
                },
            });
        }
    }
    Ok(())
}

/// The interprocedural path arrays (`IpathFunction::array`): each names a function of the
/// module that has no probes of its own, lies inside the counter array and counts paths that
/// exist; and the context cuts name functions of the set. Gives the array length per module
/// function index.
fn ipath_arrays(m: &ModuleMeta) -> Result<std::collections::HashMap<usize, u64>, InvalidMeta> {
    let mut out = std::collections::HashMap::new();
    let Some(ip) = m.ipath() else {
        return Ok(out);
    };
    for f in &ip.functions {
        for (site, c) in f.calls.iter().enumerate() {
            let why = match (c.context_cut, c.callee) {
                (Some(q), _) if q as usize >= ip.functions.len() => format!(
                    "is a context cut of function #{q}, but the set has {}",
                    ip.functions.len()
                ),
                (Some(_), Some(_)) => "is both a context cut and direct".to_string(),
                _ => continue,
            };
            return Err(InvalidMeta {
                module: m.source.clone(),
                function: m
                    .functions
                    .get(f.function as usize)
                    .map(|fm| fm.name.clone()),
                problem: Problem::IpathCut { site, why },
            });
        }
        let Some(a) = f.array else { continue };
        let fm = m.functions.get(f.function as usize);
        let err = |why: String| InvalidMeta {
            module: m.source.clone(),
            function: fm.map(|fm| fm.name.clone()),
            problem: Problem::IpathArray { why },
        };
        let Some(fm) = fm else {
            return Err(err(format!(
                "names function #{}, which the module lacks",
                f.function
            )));
        };
        let end = u64::from(fm.counter_base.0) + u64::from(a.len);
        let why = if !fm.counters.is_empty() {
            format!("is given although it has {} counters", fm.counters.len())
        } else if end > u64::from(m.num_counters) {
            format!("runs past the module's {} counters", m.num_counters)
        } else if u128::from(a.first) + u128::from(a.len) > ip.total {
            format!("counts paths beyond the set's {}", ip.total)
        } else if out.insert(f.function as usize, u64::from(a.len)).is_some() {
            "is given twice".to_string()
        } else {
            continue;
        };
        return Err(err(why));
    }
    Ok(out)
}

/// Checks one function.
fn function(
    m: &ModuleMeta,
    f: &FunctionMeta,
    hashed: usize,
    tables: &mut HashSet<u32>,
) -> Result<(), Problem> {
    let check_loc = |l: &Loc, what: &dyn Fn() -> String| match l.file {
        Some(file) if file.index() >= m.files.len() => Err(Problem::File {
            what: what(),
            file,
            files: m.files.len(),
        }),
        _ => Ok(()),
    };
    check_loc(&f.loc, &|| "the function".into())?;
    // `cfg` checks the block count, one location per block and the endpoints before it builds
    // anything.
    let cfg = f.cfg()?;
    for (i, l) in f.blocks.iter().enumerate() {
        check_loc(l, &|| format!("block n{i}"))?;
    }
    if cfg.shape_hash() != f.cfg_hash {
        return Err(Problem::GraphHash);
    }
    let num_edges = cfg.num_edges();

    let end = u64::from(f.counter_base.0) + f.counters.len() as u64;
    if end > u64::from(m.num_counters) {
        return Err(Problem::CounterRange {
            base: f.counter_base,
            end,
            num_counters: m.num_counters,
        });
    }
    let mut seen_edges = vec![false; num_edges];
    let mut seen_blocks = vec![false; cfg.num_blocks()];
    for (counter, &p) in f.counters.iter().enumerate() {
        let bad = |why| {
            Err(Problem::Probe {
                counter,
                probe: ProbeName(p),
                why,
            })
        };
        let seen = match p {
            Probe::Edge(e) if e.index() < num_edges => &mut seen_edges[e.index()],
            Probe::Edge(_) => return bad("the function does not have"),
            Probe::Block(b) if b.index() < cfg.num_blocks() => &mut seen_blocks[b.index()],
            Probe::Block(_) => return bad("the function does not have"),
            Probe::Path(k) => match f.paths() {
                Some(pm) if u128::from(k) < pm.num_paths => continue,
                Some(_) => return bad("is beyond the function's paths"),
                None => return bad("a function without paths does not count"),
            },
            Probe::Events if f.events().is_some() || m.event_kind().is_some() => continue,
            Probe::Events => return bad("only an events module counts"),
        };
        if std::mem::replace(seen, true) {
            return bad("another counter measures too");
        }
    }
    let check_edges = |list: &'static str, edges: &[EdgeIdx]| {
        let mut seen = vec![false; num_edges];
        for &edge in edges {
            let why = match seen.get_mut(edge.index()) {
                None => "which it does not have",
                Some(s) if *s => "twice",
                Some(s) => {
                    *s = true;
                    continue;
                }
            };
            return Err(Problem::EdgeList { list, edge, why });
        }
        Ok(())
    };
    source(m, f, &cfg, &check_loc)?;
    // Each mode's facts only in a module of that mode (path facts: the path modes').
    let fits = match &f.mode_meta {
        FunctionModeMeta::Counters => true,
        FunctionModeMeta::Vertex { .. } => m.mode == Mode::Vertex,
        FunctionModeMeta::Path(_) => m.mode.profiles_paths(),
        FunctionModeMeta::Events(_) => m.event_kind().is_some(),
        FunctionModeMeta::Trace(_) => m.mode == Mode::Trace,
    };
    if !fits {
        return Err(Problem::Mode {
            what: match f.mode_meta {
                FunctionModeMeta::Path(_) => "paths",
                _ => f.mode_meta.name(),
            },
            mode: m.mode.name(),
        });
    }
    check_edges("zero edges", f.zero_edges())?;
    check_edges("unknown edges", f.unknown_edges())?;
    if let Some(w) = f.wtrace() {
        trace(&cfg, w, &check_edges)?;
    }

    if let Some(pm) = f.paths() {
        check_edges("cut edges", &pm.cuts)?;
        match pm.storage {
            PathStorage::Array => {
                let in_order = u128::from(f.counters.len() as u64) == pm.num_paths
                    && f.counters
                        .iter()
                        .enumerate()
                        .all(|(i, &p)| p == Probe::Path(i as u64));
                if !in_order {
                    return Err(Problem::PathArray {
                        num_paths: pm.num_paths,
                        counters: f.counters.len(),
                    });
                }
            }
            PathStorage::Hash { table } => {
                // Its counters (slices of path ends) are paths, checked above.
                let why = if let Some(p) = f.counters.iter().find(|p| !matches!(p, Probe::Path(_)))
                {
                    format!("yet it has a counter of {}", ProbeName(*p))
                } else if table as usize >= hashed {
                    format!("but the module has {hashed} hashed functions")
                } else if !tables.insert(table) {
                    "which another function uses".to_string()
                } else {
                    String::new()
                };
                if !why.is_empty() {
                    return Err(Problem::PathTable { table, why });
                }
            }
        }
    }

    if let Some(em) = f.events() {
        if em.per_block.len() != f.num_blocks as usize {
            return Err(Problem::EventBlocks {
                found: em.per_block.len(),
                blocks: f.num_blocks,
            });
        }
        let counter = |what: &dyn Fn() -> String, c: CounterIdx| {
            if c.index() < f.counters.len() {
                Ok(())
            } else {
                Err(Problem::EventCounter {
                    what: what(),
                    counter: c,
                    counters: f.counters.len(),
                })
            }
        };
        counter(&|| "inclusive".into(), em.inclusive)?;
        for (site, c) in em.calls.iter().enumerate() {
            if c.block.0 >= f.num_blocks {
                return Err(Problem::CallBlock {
                    site,
                    block: c.block,
                    blocks: f.num_blocks,
                });
            }
            counter(&|| format!("call site #{site}"), c.counter)?;
        }
    }
    Ok(())
}

/// Checks trace mode's facts of a function (graph `cfg`): an untraced function records only
/// why; a traced one has one call list per block, one witness per edge and one read width per
/// vertex, unwind edges that exist (once each), and a plan that passes the checker
/// regeneration relies on (`tally_graph::witness::check_plan`: Ball & Larus 1994 §4's
/// `Trace(Ewit)`, the blocking property and distinct values; for a path-number plan, a
/// numbering whose call vertices are path heads). The checker only distinguishes opaque callees
/// from the others, so each site is given as opaque or unknown; the reader, which resolves
/// callees, reaches the same verdict. The fingerprint of a path-number plan is compared where
/// the numbering is recomputed (tally-report), like path mode's.
fn trace(cfg: &tally_graph::Cfg, w: &WtraceMeta, check_edges: &CheckEdges) -> Result<(), Problem> {
    use tally_graph::witness::{self, CallSite, Callee, FunctionInput};
    use tally_graph::IdVec;
    let bad = |why: String| Err(Problem::Trace { why });
    if w.untraced.is_some() {
        let empty = w.calls.is_empty()
            && w.witness.is_empty()
            && w.read_bits.is_empty()
            && w.unwind.is_empty()
            && !w.branch
            && w.paths.is_none();
        return if empty {
            Ok(())
        } else {
            bad("marks the function untraced yet plans it".into())
        };
    }
    let sizes = [
        ("call lists", w.calls.len(), "blocks", cfg.num_blocks()),
        ("witnesses", w.witness.len(), "edges", cfg.num_edges()),
        (
            "read widths",
            w.read_bits.len(),
            "vertices",
            cfg.num_nodes(),
        ),
    ];
    for (what, found, of, want) in sizes {
        if found != want {
            return bad(format!("has {found} {what} for {want} {of}"));
        }
    }
    check_edges("unwind edges", &w.unwind)?;
    if w.branch && w.paths.is_some() {
        return bad("is both a branch plan and a path-number plan".into());
    }
    let mut calls: Vec<Vec<CallSite>> = w
        .calls
        .iter()
        .map(|sites| {
            sites
                .iter()
                .map(|c| CallSite {
                    callee: match c {
                        crate::meta::WCallee::Opaque => Callee::Opaque,
                        _ => Callee::Unknown,
                    },
                })
                .collect()
        })
        .collect();
    calls.push(Vec::new());
    let input = FunctionInput {
        cfg: cfg.clone(),
        calls: IdVec::from_vec(calls),
        // (`check_edges` above refused unwind edges out of range.)
        unwind: w
            .unwind_mask(cfg.num_edges())
            .expect("unwind edges checked"),
    };
    witness::check_plan(&input, &w.plan()).or_else(|e| bad(format!("breaks its plan: {e}")))
}

/// Checks an edge list (`which list`, its edges): edges that exist, none twice.
type CheckEdges<'a> = dyn Fn(&'static str, &[EdgeIdx]) -> Result<(), Problem> + 'a;

/// Checks that a location's file is listed; the closure names whose location it is.
type CheckLoc<'a> = dyn Fn(&Loc, &dyn Fn() -> String) -> Result<(), Problem> + 'a;

/// Checks a function's source lines, scopes and branches (see the module doc).
fn source(
    m: &ModuleMeta,
    f: &FunctionMeta,
    cfg: &tally_graph::Cfg,
    check_loc: &CheckLoc,
) -> Result<(), Problem> {
    let s = &f.source;
    let has_lines = !s.lines.is_empty() || !s.branches.is_empty();
    if (!s.lines.is_empty() && s.lines.len() != f.num_blocks as usize)
        || (has_lines && s.scopes.is_empty())
    {
        return Err(Problem::SourceLines {
            found: s.lines.len(),
            blocks: f.num_blocks,
            scopes: s.scopes.len(),
        });
    }
    let scope_ok = |what: &dyn Fn() -> String, scope: ScopeIdx| {
        if scope.index() < s.scopes.len() {
            Ok(())
        } else {
            Err(Problem::Scope {
                what: what(),
                scope,
                why: format!("the function has {} scopes", s.scopes.len()),
            })
        }
    };
    for (i, sc) in s.scopes.iter().enumerate() {
        let parent_ok = if i == 0 {
            sc.parent.index() == 0
        } else {
            sc.parent.index() < i
        };
        if !parent_ok {
            return Err(Problem::Scope {
                what: format!("scope s{i}"),
                scope: sc.parent,
                why: "a parent must be an earlier scope (s0 its own)".into(),
            });
        }
        if let Some(func) = sc.func.filter(|x| x.index() >= m.source_fns.len()) {
            return Err(Problem::SourceFunction {
                scope: i,
                func,
                funcs: m.source_fns.len(),
            });
        }
        check_loc(&sc.call, &|| format!("scope s{i}"))?;
    }
    for (b, runs) in s.lines.iter().enumerate() {
        for r in runs {
            if r.loc.line == 0 {
                return Err(Problem::LineZero { block: b });
            }
            check_loc(&r.loc, &|| format!("a line of block n{b}"))?;
            scope_ok(&|| format!("a line of block n{b}"), r.scope)?;
        }
    }
    for (i, br) in s.branches.iter().enumerate() {
        let bad = |why: String| Err(Problem::Branch { branch: i, why });
        if br.edges.len() < 2 {
            return bad(format!("has {} outcomes", br.edges.len()));
        }
        let mut src = None;
        for &e in &br.edges {
            if e.index() >= cfg.num_edges() {
                return bad(format!("names {e}, which the function does not have"));
            }
            let from = cfg.edge(e.edge()).src;
            if cfg.is_exit(from) || src.is_some_and(|s| s != from) {
                return bad("has outcomes that do not leave one block".into());
            }
            src = Some(from);
        }
        check_loc(&br.loc, &|| format!("branch #{i}"))?;
        scope_ok(&|| format!("branch #{i}"), br.scope)?;
    }
    probes(m, f)
}

/// Checks a function's pseudo-probes: one list per block (or none), each naming a descriptor
/// of the module, a probe id from 1 and a scope of the function (`s0` when it has none)
/// (`crate::meta::ProbeAt`).
fn probes(m: &ModuleMeta, f: &FunctionMeta) -> Result<(), Problem> {
    let p = &f.source.probes;
    let bad = |why: String| Err(Problem::Probes { why });
    if !p.is_empty() && p.len() != f.num_blocks as usize {
        return bad(format!("{} lists for {} blocks", p.len(), f.num_blocks));
    }
    for (b, list) in p.iter().enumerate() {
        for at in list {
            if at.desc as usize >= m.probe_descs.len() {
                return bad(format!(
                    "block n{b} names descriptor {} of {}",
                    at.desc,
                    m.probe_descs.len()
                ));
            }
            if at.id == 0 {
                return bad(format!("block n{b} holds probe id 0"));
            }
            if at.scope.index() >= f.source.scopes.len().max(1) {
                return bad(format!("block n{b} names scope {}", at.scope));
            }
        }
    }
    call_targets(m, f)?;
    direct_calls(f)
}

/// Checks a function's direct calls (`crate::meta::DirectCall`): each in a block of the
/// function, with a probe id from 1, a scope of the function and a callee's name.
fn direct_calls(f: &FunctionMeta) -> Result<(), Problem> {
    let bad = |why: String| Err(Problem::Probes { why });
    for (i, d) in f.source.direct_calls.iter().enumerate() {
        if d.block >= f.num_blocks {
            return bad(format!(
                "direct call #{i} is in block n{} of {}",
                d.block, f.num_blocks
            ));
        }
        if d.probe == 0 {
            return bad(format!("direct call #{i} has probe id 0"));
        }
        if d.scope.index() >= f.source.scopes.len().max(1) {
            return bad(format!("direct call #{i} names scope {}", d.scope));
        }
        if d.callee.is_empty() {
            return bad(format!("direct call #{i} names no callee"));
        }
    }
    Ok(())
}

/// Checks a function's indirect calls with counted targets (`crate::meta::CallTargets`): each
/// in a block of the function, with a probe id from 1, a scope of the function and at least one
/// target, counted inside the module's counter array.
fn call_targets(m: &ModuleMeta, f: &FunctionMeta) -> Result<(), Problem> {
    let bad = |why: String| Err(Problem::Probes { why });
    for (i, t) in f.source.call_targets.iter().enumerate() {
        if t.block >= f.num_blocks {
            return bad(format!(
                "call #{i} is in block n{} of {}",
                t.block, f.num_blocks
            ));
        }
        if t.probe == 0 {
            return bad(format!("call #{i} has probe id 0"));
        }
        if t.scope.index() >= f.source.scopes.len().max(1) {
            return bad(format!("call #{i} names scope {}", t.scope));
        }
        let end = u64::from(t.counter.0) + t.targets.len() as u64;
        if t.targets.is_empty() || end > u64::from(m.num_counters) {
            return bad(format!(
                "call #{i} counts {} targets from counter {} of {}",
                t.targets.len(),
                t.counter.0,
                m.num_counters
            ));
        }
    }
    Ok(())
}
