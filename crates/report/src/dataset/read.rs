//! Reading back what a dataset holds: the runs of a build (so that an export skips them), and
//! the merged profile of all the runs of a build ([`build_profile`]), which every report
//! command reads as it reads a `.tally` file.

use super::schema::{self, TableSpec};
use super::DatasetError;
use crate::Parts;
use arrow_array::{
    Array, BinaryArray, BooleanArray, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use tally_format::profile::{
    add_path_entries, BuildId, Part, PathEntry, PathEntryKind, Profile, ProfileModule, Program,
};
use tally_format::Mode;

/// The Parquet files of `table` of build `key`, sorted by name (none when there are none).
fn files(dir: &Path, table: &TableSpec, key: &str) -> Result<Vec<PathBuf>, DatasetError> {
    let at = dir.join(table.name).join(format!("build={key}"));
    let entries = match std::fs::read_dir(&at) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(DatasetError::io(&at, e)),
    };
    let mut out = Vec::new();
    for e in entries {
        let path = e.map_err(|e| DatasetError::io(&at, e))?.path();
        if path.extension().is_some_and(|x| x == "parquet") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Calls `f` on each record batch of the file `path`, with only `columns` read.
fn batches(
    path: &Path,
    columns: &[&str],
    mut f: impl FnMut(&Batch<'_>) -> Result<(), DatasetError>,
) -> Result<(), DatasetError> {
    let bad = |message: String| DatasetError::Parquet {
        path: path.display().to_string(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| DatasetError::io(path, e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| bad(e.to_string()))?;
    let mask = ProjectionMask::columns(builder.parquet_schema(), columns.iter().copied());
    let reader = builder
        .with_projection(mask)
        .build()
        .map_err(|e| bad(e.to_string()))?;
    for batch in reader {
        let batch = batch.map_err(|e| bad(e.to_string()))?;
        f(&Batch { batch, path })?;
    }
    Ok(())
}

/// A record batch of a file, with typed access to its columns.
struct Batch<'a> {
    batch: RecordBatch,
    path: &'a Path,
}

impl Batch<'_> {
    fn rows(&self) -> usize {
        self.batch.num_rows()
    }

    fn column<T: 'static>(&self, name: &str) -> Result<&T, DatasetError> {
        self.batch
            .column_by_name(name)
            .and_then(|c| c.as_any().downcast_ref::<T>())
            .ok_or_else(|| DatasetError::Parquet {
                path: self.path.display().to_string(),
                message: format!("no column {name} of the dataset's type"),
            })
    }

    fn bad(&self, message: String) -> DatasetError {
        DatasetError::Parquet {
            path: self.path.display().to_string(),
            message,
        }
    }
}

/// The run ids in `DIR/runs/build=KEY/*.parquet` (none when the directory does not exist).
pub(super) fn runs_of(dir: &Path, key: &str) -> Result<HashSet<String>, DatasetError> {
    let mut out = HashSet::new();
    for path in files(dir, &schema::RUNS, key)? {
        batches(&path, &["run"], |b| {
            let col: &StringArray = b.column("run")?;
            out.extend((0..col.len()).map(|i| col.value(i).to_string()));
            Ok(())
        })?;
    }
    Ok(out)
}

/// The part files of `table` for build `key` whose runs are in the dataset (a `runs` file of
/// the same name exists).
fn parts_with_runs(dir: &Path, table: &TableSpec, key: &str) -> Result<Vec<PathBuf>, DatasetError> {
    let runs = dir.join(schema::RUNS.name).join(format!("build={key}"));
    let mut out = files(dir, table, key)?;
    out.retain(|p| p.file_name().is_some_and(|n| runs.join(n).exists()));
    Ok(out)
}

/// The paths in `DIR/paths/build=KEY/*.parquet` as (function, number), from the parts whose
/// runs are in the dataset (a part left by an export that stopped before its `runs` file is
/// written again, paths included, when its runs are exported).
pub(super) fn paths_of(dir: &Path, key: &str) -> Result<HashSet<(u32, u128)>, DatasetError> {
    let mut out = HashSet::new();
    for path in parts_with_runs(dir, &schema::PATHS, key)? {
        batches(&path, &["function", "path"], |b| {
            let function: &UInt32Array = b.column("function")?;
            let number: &StringArray = b.column("path")?;
            for i in 0..b.rows() {
                let n = number.value(i).parse().map_err(|_| {
                    b.bad(format!("path number {:?} is not a number", number.value(i)))
                })?;
                out.insert((function.value(i), n));
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// The interprocedural paths in `DIR/ipaths/build=KEY/*.parquet` as (module, mode, number),
/// from the parts whose runs are in the dataset (as [`paths_of`]).
/// The interprocedural paths of a build's `ipaths` table: module -> (mode, path number), so
/// that a run's paths are looked up without building strings.
pub(super) type IpathKeys = HashMap<String, HashSet<(Mode, u128)>>;

pub(super) fn ipaths_of(dir: &Path, key: &str) -> Result<IpathKeys, DatasetError> {
    let mut out = IpathKeys::new();
    for path in parts_with_runs(dir, &schema::IPATHS, key)? {
        batches(&path, &["module", "mode", "path"], |b| {
            let module: &StringArray = b.column("module")?;
            let mode: &StringArray = b.column("mode")?;
            let number: &StringArray = b.column("path")?;
            for i in 0..b.rows() {
                // A row this tally cannot read names no path it writes: left to be written
                // again rather than refused.
                let (Some(m), Ok(n)) = (Mode::from_name(mode.value(i)), number.value(i).parse())
                else {
                    continue;
                };
                let set = out.entry(module.value(i).to_string()).or_default();
                set.insert((m, n));
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// Checks that every build the dataset `dir` holds was written with this schema: parts of
/// two schemas in one dataset would not read as one table (and the tables a newer schema adds
/// would miss the older parts' runs).
pub fn check_schema(dir: &Path) -> Result<(), DatasetError> {
    let builds = dir.join(schema::BUILDS.name);
    let entries = match std::fs::read_dir(&builds) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(DatasetError::io(&builds, e)),
    };
    for e in entries {
        let e = e.map_err(|e| DatasetError::io(&builds, e))?;
        let Some(key) = e
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix("build="))
            .map(String::from)
        else {
            continue;
        };
        for path in files(dir, &schema::BUILDS, &key)? {
            batches(&path, &["schema"], |b| {
                let v: &UInt32Array = b.column("schema")?;
                match (0..b.rows()).map(|i| v.value(i)).find(|&v| v != schema::SCHEMA_VERSION) {
                    None => Ok(()),
                    Some(old) => Err(DatasetError::Inconsistent(format!(
                        "{}: build {key} was exported with dataset schema {old}, this tally writes schema {}: export into a new directory",
                        dir.display(),
                        schema::SCHEMA_VERSION
                    ))),
                }
            })?;
        }
    }
    Ok(())
}

/// The dataset and build a path names: `DIR/TABLE/build=KEY` (any table's directory of the
/// build), or `DIR` itself when it holds one build. `Ok(None)` when the path is no dataset.
pub fn locate(path: &Path) -> Result<Option<(PathBuf, String)>, DatasetError> {
    if !path.is_dir() {
        return Ok(None);
    }
    if let Some(key) = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("build="))
    {
        let dir = path
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        if dir.join(schema::BUILDS.name).is_dir() {
            return Ok(Some((dir.to_path_buf(), key.to_string())));
        }
        return Ok(None);
    }
    let builds = path.join(schema::BUILDS.name);
    if !builds.is_dir() {
        return Ok(None);
    }
    let mut keys = Vec::new();
    for e in std::fs::read_dir(&builds).map_err(|e| DatasetError::io(&builds, e))? {
        let e = e.map_err(|e| DatasetError::io(&builds, e))?;
        if let Some(k) = e
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix("build="))
        {
            keys.push(k.to_string());
        }
    }
    keys.sort();
    match keys.as_slice() {
        [one] => Ok(Some((path.to_path_buf(), one.clone()))),
        _ => Err(DatasetError::Inconsistent(format!(
            "{} holds {} builds; name one as {}/runs/build=KEY (KEY: {})",
            path.display(),
            keys.len(),
            path.display(),
            keys.join(", ")
        ))),
    }
}

/// The merged profile of every run of build `key` of the dataset `dir`: the modules' metadata
/// from `modules`, their counters and path entries added up over the parts that have their
/// `runs` file (a part whose export stopped before it counts no run), the flags of the runs
/// combined. What `tally merge` of the same profiles gives, pid 0.
pub fn build_profile(dir: &Path, key: &str) -> Result<Profile, DatasetError> {
    let missing = || DatasetError::Inconsistent(format!("no build {key} in the dataset"));
    let mut modules: Vec<Option<ProfileModule>> = Vec::new();
    for path in files(dir, &schema::MODULES, key)? {
        batches(&path, &["module", "meta"], |b| {
            let index: &UInt32Array = b.column("module")?;
            let meta: &BinaryArray = b.column("meta")?;
            for i in 0..b.rows() {
                let m = index.value(i) as usize;
                if m > 1 << 20 {
                    return Err(b.bad(format!("module number {m} out of range")));
                }
                let blob = meta.value(i).to_vec();
                let decoded = tally_format::ModuleMeta::decode(&blob)
                    .map_err(|e| b.bad(format!("module {m}: {e}")))?;
                let counters = vec![0; decoded.num_counters as usize];
                let pm = ProfileModule::from_blob(m, blob, counters)?;
                if modules.len() <= m {
                    modules.resize_with(m + 1, || None);
                }
                modules[m] = Some(pm);
            }
            Ok(())
        })?;
    }
    let mut modules: Vec<ProfileModule> = modules
        .into_iter()
        .collect::<Option<_>>()
        .filter(|m: &Vec<ProfileModule>| !m.is_empty())
        .ok_or_else(missing)?;
    let mut program = Program::default();
    for path in files(dir, &schema::BUILDS, key)? {
        batches(&path, &["program", "build_id", "build_id_kind"], |b| {
            let p: &StringArray = b.column("program")?;
            let id: &StringArray = b.column("build_id")?;
            let kind: &StringArray = b.column("build_id_kind")?;
            if b.rows() > 0 {
                program.path = p.value(0).as_bytes().to_vec();
                let hex = if id.is_null(0) { "" } else { id.value(0) };
                program.build_id = build_id(kind.value(0), hex)
                    .ok_or_else(|| b.bad(format!("bad build id {hex:?}")))?;
            }
            Ok(())
        })?;
    }
    let mut profile = Profile {
        pid: 0,
        program,
        modules: Vec::new(),
        unfinished: false,
        raced: false,
        signal: None,
        delta: false,
        run: None,
    };
    let mut paths: Vec<Vec<PathEntry>> = vec![Vec::new(); modules.len()];
    // Runs that are parts of processes that took snapshots (an exported sum of parts names none).
    let mut parts = Parts::default();
    let cols = [
        "unfinished",
        "raced",
        "signal",
        "delta",
        "pid",
        "host",
        "snapshot",
        "start_ns",
        "end_ns",
    ];
    for runs in files(dir, &schema::RUNS, key)? {
        let part = runs.file_name().expect("a file");
        batches(&runs, &cols, |b| {
            let unfinished: &BooleanArray = b.column("unfinished")?;
            let raced: &BooleanArray = b.column("raced")?;
            let signal: &UInt32Array = b.column("signal")?;
            let delta: &BooleanArray = b.column("delta")?;
            let pid: &UInt64Array = b.column("pid")?;
            let host: &StringArray = b.column("host")?;
            let snapshot: &UInt32Array = b.column("snapshot")?;
            let start: &UInt64Array = b.column("start_ns")?;
            let end: &UInt64Array = b.column("end_ns")?;
            for i in 0..b.rows() {
                profile.unfinished |= unfinished.value(i);
                profile.raced |= raced.value(i);
                profile.delta |= delta.value(i);
                let named = (delta.value(i)
                    && !(start.is_null(i) || end.is_null(i) || host.is_null(i)))
                .then(|| Part {
                    pid: pid.value(i),
                    host: host.value(i).as_bytes().to_vec(),
                    program: profile.program.clone(),
                    snapshot: (!snapshot.is_null(i)).then(|| snapshot.value(i)),
                    start_ns: start.value(i),
                    end_ns: end.value(i),
                });
                parts.note(delta.value(i), named);
                if profile.signal.is_none() && !signal.is_null(i) {
                    profile.signal = Some(signal.value(i));
                }
            }
            Ok(())
        })?;
        let counters = dir
            .join(schema::COUNTERS.name)
            .join(format!("build={key}"))
            .join(part);
        batches(&counters, &["module", "counter", "value"], |b| {
            let module: &UInt32Array = b.column("module")?;
            let counter: &UInt32Array = b.column("counter")?;
            let value: &UInt64Array = b.column("value")?;
            for i in 0..b.rows() {
                let (m, c) = (module.value(i) as usize, counter.value(i) as usize);
                let slot = modules
                    .get_mut(m)
                    .and_then(|pm| pm.counters.get_mut(c))
                    .ok_or_else(|| b.bad(format!("counter {c} of module {m} out of range")))?;
                *slot = match profile.delta {
                    // Parts of processes that took snapshots: early exits in two's complement.
                    true => slot.wrapping_add(value.value(i)),
                    false => slot
                        .checked_add(value.value(i))
                        .ok_or_else(|| b.bad("counter overflow while adding runs".into()))?,
                };
            }
            Ok(())
        })?;
        let entries = dir
            .join(schema::PATH_ENTRIES.name)
            .join(format!("build={key}"))
            .join(part);
        batches(
            &entries,
            &["module", "function", "lost", "path", "count"],
            |b| {
                let module: &UInt32Array = b.column("module")?;
                let function: &UInt32Array = b.column("function")?;
                let lost: &BooleanArray = b.column("lost")?;
                let path: &UInt64Array = b.column("path")?;
                let count: &UInt64Array = b.column("count")?;
                for i in 0..b.rows() {
                    let m = module.value(i) as usize;
                    let list = paths
                        .get_mut(m)
                        .ok_or_else(|| b.bad(format!("path entry of module {m} out of range")))?;
                    list.push(PathEntry {
                        function: function.value(i),
                        kind: if lost.value(i) {
                            PathEntryKind::Lost
                        } else {
                            PathEntryKind::Count
                        },
                        path: path.value(i),
                        count: count.value(i),
                    });
                }
                Ok(())
            },
        )?;
    }
    for (m, entries) in modules.iter_mut().zip(paths) {
        if !entries.is_empty() {
            m.paths = add_path_entries(&[], &entries).ok_or_else(|| {
                DatasetError::Inconsistent("path count overflow while adding runs".into())
            })?;
        }
    }
    profile.modules = modules;
    // Every part of whole processes: their profiles, early exits counts again (as `tally merge`).
    if profile.delta && parts.whole() {
        profile.delta = false;
    }
    Ok(profile)
}

/// A build id from the `builds` table's kind and hex.
fn build_id(kind: &str, hex: &str) -> Option<BuildId> {
    match kind {
        "none" => Some(BuildId::None),
        "modules" => u64::from_str_radix(hex, 16).ok().map(BuildId::Modules),
        "gnu" if hex.len() & 1 == 0 && hex.is_ascii() => (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
            .collect::<Option<Vec<u8>>>()
            .map(BuildId::Gnu),
        _ => None,
    }
}
