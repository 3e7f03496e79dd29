//! The wire layout of [`FunctionMeta`] and [`ModuleMeta`]: the fields in the order, and of the
//! types, they have been encoded with since META_VERSION 11 (12 added `probe_descs` and `probes_before_optimization` at the end), mode facts as optional fields.
//! In memory each mode's facts are one variant of [`FunctionModeMeta`] / [`ModuleModeMeta`];
//! this module converts between the two, so the postcard bytes (and the JSON) are unchanged.
//! Serializing borrows ([`FunctionOut`], [`ModuleOut`]); deserializing reads the owned layout
//! ([`FunctionIn`], [`ModuleIn`]) and converts it, refusing two modes' facts at once with an
//! [`InvalidMeta`] (a one-line message, never a panic).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{
    BlockIdx, CounterIdx, EdgeIdx, EventMeta, FunctionMeta, FunctionModeMeta, IpathMeta, Linkage,
    Loc, Mode, ModeParts, ModuleMeta, ModuleModeMeta, PathMeta, Probe, ProbeDesc, SkippedFunction,
    SourceFn, SourceMeta, StoredKind, WtraceMeta,
};
use crate::validate::InvalidMeta;

/// [`FunctionMeta`] as encoded, borrowed.
#[derive(Serialize)]
struct FunctionOut<'a> {
    name: &'a str,
    linkage: Linkage,
    loc: Loc,
    num_blocks: u32,
    edges: &'a [(BlockIdx, BlockIdx, StoredKind)],
    blocks: &'a [Loc],
    cfg_hash: u64,
    counter_base: CounterIdx,
    counters: &'a [Probe],
    zero_edges: &'a [EdgeIdx],
    unknown_edges: &'a [EdgeIdx],
    paths: Option<&'a PathMeta>,
    events: Option<&'a EventMeta>,
    wtrace: Option<&'a WtraceMeta>,
    source: &'a SourceMeta,
}

/// [`FunctionMeta`] as encoded.
#[derive(Deserialize)]
pub(super) struct FunctionIn {
    name: String,
    linkage: Linkage,
    loc: Loc,
    num_blocks: u32,
    edges: Vec<(BlockIdx, BlockIdx, StoredKind)>,
    blocks: Vec<Loc>,
    cfg_hash: u64,
    counter_base: CounterIdx,
    counters: Vec<Probe>,
    zero_edges: Vec<EdgeIdx>,
    unknown_edges: Vec<EdgeIdx>,
    paths: Option<PathMeta>,
    events: Option<EventMeta>,
    wtrace: Option<WtraceMeta>,
    #[serde(default)]
    source: SourceMeta,
}

impl<'a> From<&'a FunctionMeta> for FunctionOut<'a> {
    fn from(f: &'a FunctionMeta) -> FunctionOut<'a> {
        FunctionOut {
            name: &f.name,
            linkage: f.linkage,
            loc: f.loc,
            num_blocks: f.num_blocks,
            edges: &f.edges,
            blocks: &f.blocks,
            cfg_hash: f.cfg_hash,
            counter_base: f.counter_base,
            counters: &f.counters,
            zero_edges: f.zero_edges(),
            unknown_edges: f.unknown_edges(),
            paths: f.paths(),
            events: f.events(),
            wtrace: f.wtrace(),
            source: &f.source,
        }
    }
}

impl FunctionIn {
    /// The function, or its name and why its mode facts cannot be.
    fn convert(self) -> Result<FunctionMeta, (String, crate::Problem)> {
        let FunctionIn {
            name,
            linkage,
            loc,
            num_blocks,
            edges,
            blocks,
            cfg_hash,
            counter_base,
            counters,
            zero_edges,
            unknown_edges,
            paths,
            events,
            wtrace,
            source,
        } = self;
        let parts = ModeParts {
            zero_edges,
            unknown_edges,
            paths,
            events,
            wtrace,
        };
        let mode_meta = match FunctionModeMeta::from_parts(parts) {
            Ok(m) => m,
            Err(p) => return Err((name, p)),
        };
        Ok(FunctionMeta {
            name,
            linkage,
            loc,
            num_blocks,
            edges,
            blocks,
            cfg_hash,
            counter_base,
            counters,
            mode_meta,
            source,
        })
    }
}

impl Serialize for FunctionMeta {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        FunctionOut::from(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for FunctionMeta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<FunctionMeta, D::Error> {
        FunctionIn::deserialize(d)?
            .convert()
            .map_err(|(name, p)| serde::de::Error::custom(format!("function {name}: {p}")))
    }
}

/// [`ModuleMeta`] as encoded, borrowed.
#[derive(Serialize)]
struct ModuleOut<'a> {
    source: &'a str,
    producer: &'a str,
    mode: Mode,
    num_counters: u32,
    files: &'a [String],
    functions: &'a [FunctionMeta],
    source_fns: &'a [SourceFn],
    skipped: &'a [SkippedFunction],
    event_kind: Option<&'a str>,
    ipath: Option<&'a IpathMeta>,
    oracle_for: Option<u64>,
    probe_descs: &'a [ProbeDesc],
    probes_before_optimization: bool,
}

/// [`ModuleMeta`] as encoded.
#[derive(Deserialize)]
pub(super) struct ModuleIn {
    source: String,
    producer: String,
    mode: Mode,
    num_counters: u32,
    files: Vec<String>,
    functions: Vec<FunctionIn>,
    #[serde(default)]
    source_fns: Vec<SourceFn>,
    skipped: Vec<SkippedFunction>,
    event_kind: Option<String>,
    ipath: Option<IpathMeta>,
    oracle_for: Option<u64>,
    #[serde(default)]
    probe_descs: Vec<ProbeDesc>,
    #[serde(default)]
    probes_before_optimization: bool,
}

impl TryFrom<ModuleIn> for ModuleMeta {
    type Error = InvalidMeta;

    fn try_from(m: ModuleIn) -> Result<ModuleMeta, InvalidMeta> {
        let ModuleIn {
            source,
            producer,
            mode,
            num_counters,
            files,
            functions,
            source_fns,
            skipped,
            event_kind,
            ipath,
            oracle_for,
            probe_descs,
            probes_before_optimization,
        } = m;
        let mode_meta = match ModuleModeMeta::from_parts(event_kind, ipath) {
            Ok(mm) => mm,
            Err(problem) => {
                return Err(InvalidMeta {
                    module: source,
                    function: None,
                    problem,
                })
            }
        };
        let mut fns = Vec::with_capacity(functions.len());
        for f in functions {
            match f.convert() {
                Ok(f) => fns.push(f),
                Err((name, problem)) => {
                    return Err(InvalidMeta {
                        module: source,
                        function: Some(name),
                        problem,
                    })
                }
            }
        }
        Ok(ModuleMeta {
            source,
            producer,
            mode,
            num_counters,
            files,
            functions: fns,
            source_fns,
            skipped,
            mode_meta,
            oracle_for,
            probe_descs,
            probes_before_optimization,
        })
    }
}

impl Serialize for ModuleMeta {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ModuleOut {
            source: &self.source,
            producer: &self.producer,
            mode: self.mode,
            num_counters: self.num_counters,
            files: &self.files,
            functions: &self.functions,
            source_fns: &self.source_fns,
            skipped: &self.skipped,
            event_kind: self.event_kind(),
            ipath: self.ipath(),
            oracle_for: self.oracle_for,
            probe_descs: &self.probe_descs,
            probes_before_optimization: self.probes_before_optimization,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for ModuleMeta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ModuleMeta, D::Error> {
        ModuleMeta::try_from(ModuleIn::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}
