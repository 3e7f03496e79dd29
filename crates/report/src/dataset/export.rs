//! [`Exporter`]: profiles in, Parquet parts out. Each profile's build is found by its module
//! hashes; the first profile of a build is decoded in full and kept as the build's template
//! (its graphs built once), later ones only replace the template's counters
//! ([`Profile::load_same_build`]) before the counts are derived by [`analyze`] exactly as
//! `tally report` derives them. Rows gather per build in a part that is written when it holds
//! [`RUNS_PER_PART`] runs (or [`ROWS_PER_PART`] rows) and at the end, so memory is bounded by
//! the builds met, not by the number of profiles. A thread of its own ([`Writer`]) encodes
//! and writes the parts while the next runs are analysed.

use super::part::Part;
use super::schema::{self, TableSpec};
use super::table::{Rows, Table, Value};
use super::{run_id, DatasetError};
use crate::{analyze, source, FunctionReport, Inputs, Report};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use tally_format::profile::{BuildId, PathEntryKind, Profile, ProfileModule, MAX_PROFILE_BYTES};

/// Runs per part file.
pub const RUNS_PER_PART: usize = 1000;
/// Rows (of all the fact tables of a part) at which a part is written early.
pub const ROWS_PER_PART: usize = 1_000_000;

/// What happened to one input profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Exported as run `run` of build `build`.
    Exported {
        /// The run id.
        run: String,
        /// The build key.
        build: String,
    },
    /// The dataset already holds this run (the same profile bytes): nothing was added.
    Present {
        /// The run id.
        run: String,
    },
}

/// What an export did, for its summary line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Runs exported.
    pub runs: usize,
    /// Profiles skipped because the dataset held them already.
    pub present: usize,
    /// Builds met for the first time (their dimension tables written).
    pub new_builds: usize,
    /// Part files written (per fact table, `runs` counted once per part).
    pub parts: usize,
}

/// A build being exported.
struct Build {
    key: String,
    /// The build's first profile, its counters replaced by each run's.
    template: Profile,
    /// The graphs of its functions, by (module index, function index) with oracles taken out.
    cfgs: HashMap<(usize, usize), tally_graph::Cfg>,
    /// `functions.function` by module, name and graph hash.
    ids: FunctionIds,
    /// The terms of the line counts of each function (by `functions.function`), lines as
    /// indices into `lines`: counted per run without building the source model.
    line_terms: Vec<Vec<(u32, Vec<source::Term>)>>,
    /// The (file, line) of each line index, in the order of `line_counts` rows (by file name,
    /// then line).
    lines: Vec<(String, u32)>,
    /// Runs already in the dataset (or in this export).
    known: HashSet<String>,
    /// Paths (function, number) already in the `paths` table (or in a part of this export).
    paths: HashSet<(u32, u128)>,
    /// Interprocedural paths already in the `ipaths` table: module -> (mode, number).
    ipaths: super::read::IpathKeys,
    /// The part being filled.
    part: Part,
}

/// `functions.function` of a function report: by module, then name, then graph hash (two
/// levels of maps, so that a run's reports are looked up without building keys).
#[derive(Default)]
struct FunctionIds(HashMap<String, HashMap<String, Vec<(u64, u32)>>>);

impl FunctionIds {
    fn insert(&mut self, f: &FunctionReport, id: u32) {
        let by_name = self.0.entry(f.module.clone()).or_default();
        by_name
            .entry(f.name.clone())
            .or_default()
            .push((f.cfg_hash, id));
    }

    fn get(&self, f: &FunctionReport) -> Option<u32> {
        let ids = self.0.get(&f.module)?.get(&f.name)?;
        ids.iter()
            .find(|&&(h, _)| h == f.cfg_hash)
            .map(|&(_, id)| id)
    }
}

/// Profiles exported into one dataset directory.
pub struct Exporter {
    dir: PathBuf,
    labels: Vec<(String, String)>,
    builds: HashMap<String, Build>,
    /// The build of the last profile: runs of one build usually come together.
    last: Option<String>,
    summary: Summary,
    /// Writes the parts, while the next runs are analysed.
    writer: Writer,
}

/// The files of a part, in the order they are to be written (`runs` last).
type Job = Vec<(PathBuf, Rows)>;

/// A thread that writes parts in the order they are given, so that encoding Parquet (about
/// a third of an export's work) overlaps with deriving the next runs' counts. At most one
/// part waits for it, which keeps memory bounded. After a failed write it writes nothing
/// more: the part's `runs` file is not written, so its runs are not in the dataset.
struct Writer {
    jobs: Option<std::sync::mpsc::SyncSender<Job>>,
    thread: Option<std::thread::JoinHandle<Result<(), DatasetError>>>,
}

impl Writer {
    fn new() -> Writer {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(1);
        let thread = std::thread::spawn(move || -> Result<(), DatasetError> {
            for job in rx {
                for (path, rows) in job {
                    rows.write(&path)?;
                }
            }
            Ok(())
        });
        Writer {
            jobs: Some(tx),
            thread: Some(thread),
        }
    }

    /// Hands a part over; an error is that of an earlier part's write (the writer stopped).
    fn send(&mut self, job: Job) -> Result<(), DatasetError> {
        let sent = self.jobs.as_ref().is_some_and(|tx| tx.send(job).is_ok());
        if sent {
            Ok(())
        } else {
            self.wait()?;
            Err(DatasetError::Inconsistent(
                "the dataset's writer has stopped".into(),
            ))
        }
    }

    /// Waits for every part handed over to be written; a failure is [`DatasetError::Write`].
    fn wait(&mut self) -> Result<(), DatasetError> {
        self.jobs = None;
        match self.thread.take().map(|t| t.join()) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(DatasetError::Write(Box::new(e))),
            Some(Err(panic)) => std::panic::resume_unwind(panic),
        }
    }
}

impl Drop for Writer {
    /// An export dropped without [`Exporter::finish`] still ends its writes (whole files
    /// or none) before it goes.
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Exporter {
    /// An export into `dir` (created if missing), every run labelled with `labels`; an
    /// error when `dir` holds a dataset of another schema ([`super::read::check_schema`]).
    pub fn new(dir: &Path, labels: Vec<(String, String)>) -> Result<Exporter, DatasetError> {
        super::read::check_schema(dir)?;
        Ok(Exporter {
            dir: dir.to_path_buf(),
            labels,
            builds: HashMap::new(),
            last: None,
            summary: Summary::default(),
            writer: Writer::new(),
        })
    }

    /// Exports the profile file `path`; on error nothing of it is exported (the dataset is
    /// unchanged unless a part had to be written).
    pub fn add_file(&mut self, path: &Path) -> Result<Outcome, DatasetError> {
        let bytes = Profile::file_bytes(path, MAX_PROFILE_BYTES)?;
        let dir = tally_format::profile::meta_dir(path);
        self.add_bytes(&path.display().to_string(), &bytes, Some(dir))
    }

    /// Exports one profile's bytes; `source` names it in the `runs` table, `dir` is where the
    /// metadata files its records may name are (`TALLY_META=shared`).
    pub fn add_bytes(
        &mut self,
        source: &str,
        bytes: &[u8],
        dir: Option<&Path>,
    ) -> Result<Outcome, DatasetError> {
        let run = run_id(bytes);
        let key = self.load(bytes, dir)?;
        let build = self.builds.get_mut(&key).expect("loaded");
        if !build.known.insert(run.clone()) {
            self.summary.present += 1;
            return Ok(Outcome::Present { run });
        }
        // The same-run oracle modules (`--tally-oracle`) are left out of the counts and put
        // back where they were: the `modules` table and the counters keep the profile's order,
        // so that a build read back is its runs' merged profile, oracles included.
        let at: Vec<usize> = (build.template.modules.iter().enumerate())
            .filter(|(_, m)| m.meta.oracle_for.is_some())
            .map(|(i, _)| i)
            .collect();
        let oracles = build.template.take_oracles();
        let analysed = {
            let inputs = Inputs {
                counted: Default::default(),
                cfgs: build.cfgs.iter().map(|(&k, c)| (k, c)).collect(),
                only: Some(counting(&build.template)),
                lean: true,
            };
            analyze(&build.template, &inputs)
        };
        for (i, m) in at.into_iter().zip(oracles) {
            build.template.modules.insert(i, m);
        }
        let report = match analysed {
            Ok(r) => r,
            Err(e) => {
                build.known.remove(&run);
                return Err(e.into());
            }
        };
        let ids: Vec<Option<u32>> = report.functions.iter().map(|f| build.ids.get(f)).collect();
        let lines = line_counts(build, &report, &ids);
        let rows: Vec<Option<FunctionRow>> = report.functions.iter().map(function_row).collect();
        let ran = (ids.iter().zip(&rows))
            .filter_map(|(&id, row)| Some((id?, row.as_ref()?)))
            .map(|(id, row)| (id, row.entries, row.executions));
        if build.part.overflows(&lines, ran) {
            self.flush(&key)?;
        }
        let build = self.builds.get_mut(&key).expect("loaded");
        add_raw(&mut build.part, &run, &build.template.modules);
        let run_rows = RunRows {
            report: &report,
            ids: &ids,
            functions: &rows,
            lines: &lines,
        };
        add_run(build, &run, source, &self.labels, &run_rows);
        self.summary.runs += 1;
        if build.part.runs.len() >= RUNS_PER_PART || build.part.rows() >= ROWS_PER_PART {
            let key = build.key.clone();
            self.flush(&key)?;
        }
        Ok(Outcome::Exported { run, build: key })
    }

    /// Writes every part still held and says what was done.
    pub fn finish(mut self) -> Result<Summary, DatasetError> {
        let mut keys: Vec<String> = self.builds.keys().cloned().collect();
        keys.sort();
        for k in keys {
            self.flush(&k)?;
        }
        self.writer.wait()?;
        Ok(self.summary)
    }

    /// Puts the profile `bytes` into its build's template (meeting the build if it is new)
    /// and returns the build's key.
    fn load(&mut self, bytes: &[u8], dir: Option<&Path>) -> Result<String, DatasetError> {
        if let Some(k) = &self.last {
            let b = self.builds.get_mut(k).expect("known build");
            if b.template.load_same_build(bytes)? {
                return Ok(k.clone());
            }
        }
        let profile = Profile::read_at(bytes, dir)?;
        let key = build_key(&profile);
        if let Some(b) = self.builds.get_mut(&key) {
            // Another build came in between: decoded in full, then loaded as a known one.
            if !b.template.load_same_build(bytes)? {
                return Err(DatasetError::Inconsistent(format!(
                    "profile of build {key} whose modules are not the build's"
                )));
            }
        } else {
            self.meet(key.clone(), profile)?;
        }
        self.last = Some(key.clone());
        Ok(key)
    }

    /// A build seen for the first time: its graphs, its function numbers, the runs the
    /// dataset has of it, and its dimension tables (unless an earlier export wrote them).
    fn meet(&mut self, key: String, template: Profile) -> Result<(), DatasetError> {
        let mut reportable = template.clone();
        reportable.take_oracles();
        let mut cfgs = HashMap::new();
        for (mi, m) in reportable.modules.iter().enumerate() {
            for (fi, f) in m.meta.functions.iter().enumerate() {
                if let Ok(c) = f.cfg() {
                    cfgs.insert((mi, fi), c);
                }
            }
        }
        let report = {
            let inputs = Inputs {
                counted: Default::default(),
                cfgs: cfgs.iter().map(|(&k, c)| (k, c)).collect(),
                ..Default::default()
            };
            analyze(&reportable, &inputs)?
        };
        let mut order: Vec<&FunctionReport> = report.functions.iter().collect();
        order.sort_by(|a, b| {
            (&a.module, &a.name, a.cfg_hash).cmp(&(&b.module, &b.name, b.cfg_hash))
        });
        let mut ids = FunctionIds::default();
        for (i, f) in order.iter().enumerate() {
            ids.insert(f, i as u32);
        }
        let terms: Vec<Vec<(String, u32, Vec<source::Term>)>> =
            order.iter().map(|f| source::line_terms(f)).collect();
        let mut lines: Vec<(String, u32)> = terms
            .iter()
            .flatten()
            .map(|(file, line, _)| (file.clone(), *line))
            .collect();
        lines.sort_unstable();
        lines.dedup();
        let index: HashMap<(&str, u32), u32> = lines
            .iter()
            .enumerate()
            .map(|(i, (file, line))| ((file.as_str(), *line), i as u32))
            .collect();
        let line_terms = terms
            .into_iter()
            .map(|fl| {
                fl.into_iter()
                    .map(|(file, line, t)| (index[&(file.as_str(), line)], t))
                    .collect()
            })
            .collect();
        drop(index);
        let part = Part::new(lines.len(), order.len());
        let known = super::read::runs_of(&self.dir, &key)?;
        let paths = super::read::paths_of(&self.dir, &key)?;
        let ipaths = super::read::ipaths_of(&self.dir, &key)?;
        let marker = self.dir.join("builds").join(format!("build={key}"));
        if !marker.join("build.parquet").exists() {
            write_dimensions(&self.dir, &key, &report, &order, &template.modules)?;
            self.summary.new_builds += 1;
        }
        self.builds.insert(
            key.clone(),
            Build {
                key,
                template,
                cfgs,
                ids,
                line_terms,
                lines,
                known,
                paths,
                ipaths,
                part,
            },
        );
        Ok(())
    }

    /// Writes the part of build `key` if it holds runs: the fact tables, `runs` last (a
    /// run is in the dataset once its `runs` row is; an export that stopped before that left
    /// fact files that the next export of the same runs overwrites, since a part's name is
    /// the hash of its runs).
    fn flush(&mut self, key: &str) -> Result<(), DatasetError> {
        let b = self.builds.get_mut(key).expect("known build");
        if b.part.runs.is_empty() {
            return Ok(());
        }
        let mut ids = b.part.runs.clone();
        ids.sort();
        let hash = run_id(ids.join(",").as_bytes());
        let name = format!("part-{hash}.parquet");
        b.part.add_totals(&hash, &b.lines);
        // Every table gets its file, empty or not: a table with no file cannot be opened.
        let mut job = Job::new();
        for (spec, table) in schema::FACTS.iter().zip(&mut b.part.tables) {
            let path = self
                .dir
                .join(spec.name)
                .join(format!("build={key}"))
                .join(&name);
            job.push((path, table.take()?));
            self.summary.parts += usize::from(spec.name == schema::RUNS.name);
        }
        b.part.runs.clear();
        self.writer.send(job)
    }
}

/// The key of a profile's build: a hash of its program's build id and its module hashes
/// (the same executable at another path is the same build; a run that loaded other
/// libraries is another).
pub fn build_key(p: &Profile) -> String {
    let mut h = tally_graph::hash::Fnv64::new();
    h.write(p.program.build_id.kind().as_bytes());
    h.write(p.program.build_id.hex().as_bytes());
    let mut hashes: Vec<u64> = p
        .modules
        .iter()
        .filter(|m| m.meta.oracle_for.is_none())
        .map(|m| m.hash)
        .collect();
    hashes.sort_unstable();
    for x in hashes {
        h.write_u64(x);
    }
    format!("{:016x}", h.finish())
}

/// The functions of a profile that may count anything: those with a counter or a path entry
/// that is not zero, and those with no counters of their own (their counts come from their
/// module's, as in the interprocedural modes). A function whose counters are all zero has all
/// its counts zero (they are a linear function of its counters: Ball & Larus 1994 §3.3), so
/// the rows it would give are all left out anyway.
fn counting(p: &Profile) -> HashSet<(usize, usize)> {
    let mut out = HashSet::new();
    for (mi, m) in p.modules.iter().enumerate() {
        for (fi, f) in m.meta.functions.iter().enumerate() {
            let base = f.counter_base.index();
            let vals = m.counters.get(base..base + f.counters.len());
            if f.counters.is_empty() || vals.is_none_or(|v| v.iter().any(|&c| c != 0)) {
                out.insert((mi, fi));
            }
        }
        for e in &m.paths {
            out.insert((mi, e.function as usize));
        }
    }
    out
}

/// The counters and path entries of one run as its profile holds them (modules numbered as
/// in the `modules` table), zero counters left out.
fn add_raw(part: &mut Part, run: &str, modules: &[ProfileModule]) {
    let run_v = Value::Str(Some(run));
    for (mi, m) in modules.iter().enumerate() {
        let module = Value::U32(Some(mi as u32));
        for (ci, &v) in m.counters.iter().enumerate() {
            if v != 0 {
                part.table(&schema::COUNTERS).push(&[
                    run_v,
                    module,
                    Value::U32(Some(ci as u32)),
                    Value::U64(Some(v)),
                ]);
            }
        }
        for e in &m.paths {
            part.table(&schema::PATH_ENTRIES).push(&[
                run_v,
                module,
                Value::U32(Some(e.function)),
                Value::Bool(e.kind == PathEntryKind::Lost),
                Value::U64(Some(e.path)),
                Value::U64(Some(e.count)),
            ]);
        }
    }
}

/// A function's row of `function_counts` in a run: `None` when it did not run (no count or
/// event total above zero) or its counts could not be recovered.
#[derive(Clone, Copy)]
struct FunctionRow {
    entries: Option<u64>,
    executions: Option<u64>,
    inclusive: Option<u64>,
    exclusive: Option<u64>,
    lost: Option<u64>,
}

fn function_row(f: &FunctionReport) -> Option<FunctionRow> {
    if f.inconsistent.is_some() {
        return None;
    }
    let events = f.events.as_ref();
    let row = FunctionRow {
        entries: f.entries_known().then_some(f.entry_count),
        executions: f.blocks_known().then_some(f.block_executions),
        inclusive: events.map(|e| e.inclusive),
        exclusive: events.map(|e| e.exclusive),
        lost: (f.paths.as_ref())
            .filter(|_| f.mode == tally_format::Mode::Path)
            .map(|p| p.lost),
    };
    let counts = [row.entries, row.executions, row.inclusive, row.lost];
    counts
        .iter()
        .any(|c| c.is_some_and(|c| c > 0))
        .then_some(row)
}

/// One run's report and what was computed from it before [`add_run`]: by function, its id
/// (`functions.function`) and its row of `function_counts`; by line index, its count.
struct RunRows<'a> {
    report: &'a Report,
    ids: &'a [Option<u32>],
    functions: &'a [Option<FunctionRow>],
    lines: &'a [Option<u64>],
}

/// The rows of one run. Its counts are added to the part's totals, which [`Part::overflows`]
/// checked.
fn add_run(b: &mut Build, run: &str, source: &str, labels: &[(String, String)], rows: &RunRows) {
    let RunRows {
        report: r,
        ids,
        functions,
        lines,
    } = *rows;
    let run_v = Value::Str(Some(run));
    for ((f, id), row) in r.functions.iter().zip(ids).zip(functions) {
        let Some(id) = *id else {
            continue;
        };
        let fid = Value::U32(Some(id));
        if let Some(why) = &f.inconsistent {
            b.part
                .table(&schema::INEXACT)
                .push(&[run_v, fid, Value::Str(Some(why))]);
            continue;
        }
        if let Some(row) = *row {
            b.part.table(&schema::FUNCTION_COUNTS).push(&[
                run_v,
                fid,
                Value::U64(row.entries),
                Value::U64(row.executions),
                Value::U64(row.inclusive),
                Value::U64(row.exclusive),
                Value::U64(row.lost),
            ]);
            b.part.count_function(id, row.entries, row.executions);
        }
        for blk in &f.blocks {
            if let Some(c @ 1..) = blk.count {
                b.part.table(&schema::BLOCK_COUNTS).push(&[
                    run_v,
                    fid,
                    Value::U32(Some(blk.id)),
                    Value::U64(Some(c)),
                ]);
            }
        }
        for e in &f.edges {
            if let Some(c @ 1..) = e.count {
                b.part.table(&schema::EDGE_COUNTS).push(&[
                    run_v,
                    fid,
                    Value::U32(Some(e.id)),
                    Value::U64(Some(c)),
                ]);
            }
        }
        // Path mode's own paths (an interprocedural mode's module sets are `r.ipaths`).
        if let Some(p) = f
            .paths
            .as_ref()
            .filter(|_| f.mode == tally_format::Mode::Path)
        {
            for &(n, c) in &p.counts {
                if c > 0 {
                    let n = n.to_string();
                    b.part.table(&schema::PATH_COUNTS).push(&[
                        run_v,
                        fid,
                        Value::Str(Some(&n)),
                        Value::U64(Some(c)),
                    ]);
                }
            }
            for row in &p.rows {
                if row.count > 0 && b.paths.insert((id, row.number)) {
                    let n = row.number.to_string();
                    b.part.table(&schema::PATHS).push(&[
                        fid,
                        Value::Str(Some(&n)),
                        Value::U32List(&row.blocks),
                        Value::Str(Some(row.start)),
                        Value::Str(Some(row.end)),
                    ]);
                }
            }
        }
    }
    for (i, &c) in lines.iter().enumerate() {
        if let Some(c @ 1..) = c {
            b.part.count_line(i, c);
            let (file, line) = &b.lines[i];
            b.part.table(&schema::LINE_COUNTS).push(&[
                run_v,
                Value::Str(Some(file)),
                Value::U32(Some(*line)),
                Value::U64(Some(c)),
            ]);
        }
    }
    for p in &r.ipaths {
        if p.count > 0 {
            let n = p.number.to_string();
            b.part.table(&schema::IPATH_COUNTS).push(&[
                run_v,
                Value::Str(Some(&p.module)),
                Value::Str(Some(p.mode.name())),
                Value::Str(Some(&n)),
                Value::U64(Some(p.count)),
            ]);
            let known = b.ipaths.get(&p.module);
            if !known.is_some_and(|k| k.contains(&(p.mode, p.number))) {
                add_ipath(&mut b.part, p, &n);
                let set = b.ipaths.entry(p.module.clone()).or_default();
                set.insert((p.mode, p.number));
            }
        }
    }
    let program = r.program.path_lossy();
    let inexact = r.inconsistent().count() as u32;
    let run_rec = b.template.run.as_ref();
    let host = run_rec.map(|x| String::from_utf8_lossy(&x.host).into_owned());
    let mut all_labels = run_rec.map(|x| x.label_pairs()).unwrap_or_default();
    all_labels.retain(|(k, _)| !labels.iter().any(|(l, _)| l == k));
    all_labels.extend(labels.iter().cloned());
    all_labels.sort();
    b.part.table(&schema::RUNS).push(&[
        run_v,
        Value::Str(Some(&program)),
        Value::U64(Some(b.template.pid)),
        Value::Bool(r.unfinished),
        Value::Bool(r.raced),
        Value::U32(r.signal),
        Value::Bool(r.delta),
        Value::U32(run_rec.and_then(|x| x.snapshot)),
        Value::U32(run_rec.and_then(|x| x.exit_status).map(|s| s as u32 & 0xff)),
        Value::U64(run_rec.map(|x| x.start_ns)),
        Value::U64(run_rec.map(|x| x.end_ns)),
        Value::Str(host.as_deref()),
        Value::U32(Some(inexact)),
        Value::Str(Some(source)),
        Value::Map(&all_labels),
    ]);
    b.part.runs.push(run.to_string());
}

/// The row of `ipaths` spelling out path `p` (number `n`).
fn add_ipath(part: &mut Part, p: &crate::IpathPath, n: &str) {
    use crate::IpathPathStep as S;
    let len = p.steps.len();
    let (mut kinds, mut functions, mut callees) = (
        Vec::with_capacity(len),
        Vec::with_capacity(len),
        Vec::with_capacity(len),
    );
    let (mut blocks, mut matched) = (Vec::with_capacity(len), Vec::with_capacity(len));
    for s in &p.steps {
        let (kind, function, block, callee, m) = match s {
            S::Block {
                function, block, ..
            } => ("block", function.as_str(), *block, None, false),
            S::Call { call, matched } => (
                "call",
                call.caller.as_str(),
                call.block,
                call.callee.as_deref(),
                *matched,
            ),
            S::Return { call, matched } => (
                "return",
                call.caller.as_str(),
                call.block,
                call.callee.as_deref(),
                *matched,
            ),
            S::Summary(call) => (
                "summary",
                call.caller.as_str(),
                call.block,
                call.callee.as_deref(),
                false,
            ),
            S::Restart => ("restart", "", 0, None, false),
            S::Reentry => ("reentry", "", 0, None, false),
            S::Cut => ("cut", "", 0, None, false),
            S::EarlyExit => ("early-exit", "", 0, None, false),
        };
        kinds.push(kind.to_string());
        functions.push(function.to_string());
        blocks.push(block);
        callees.push(callee.unwrap_or_default().to_string());
        matched.push(m);
    }
    part.table(&schema::IPATHS).push(&[
        Value::Str(Some(&p.module)),
        Value::Str(Some(p.mode.name())),
        Value::Str(Some(n)),
        Value::Str(Some(p.start)),
        Value::Str(Some(p.end)),
        Value::U32(Some(p.context as u32)),
        Value::StrList(&kinds),
        Value::StrList(&functions),
        Value::U32List(&blocks),
        Value::StrList(&callees),
        Value::BoolList(&matched),
    ]);
}

/// The line counts of a run (by index into the build's `lines`), as `tally report --lines`
/// counts them (`source::model`), from the build's line terms: a line's count is a sum of block
/// and edge counts, so a function whose counts are all zero adds nothing and is skipped; one
/// with a count the mode leaves undetermined makes the lines it adds to undetermined (`None`).
/// `ids` are the functions' `functions.function`.
fn line_counts(b: &Build, r: &Report, ids: &[Option<u32>]) -> Vec<Option<u64>> {
    let mut out: Vec<Option<u64>> = vec![Some(0); b.lines.len()];
    for (f, id) in r.functions.iter().zip(ids) {
        let counts = f.blocks.iter().map(|b| b.count);
        let mut counts = counts.chain(f.edges.iter().map(|e| e.count));
        if f.inconsistent.is_none() && counts.all(|c| c == Some(0)) {
            continue;
        }
        let Some(id) = *id else {
            continue;
        };
        for (line, terms) in &b.line_terms[id as usize] {
            let total = &mut out[*line as usize];
            let c = source::eval(terms, f);
            *total = match (*total, c) {
                (Some(x), Some(y)) => Some(x.saturating_add(y)),
                _ => None,
            };
        }
    }
    out
}

/// The inline stack of block `block`'s first line (the instruction `blocks.line` names): the
/// source functions of its inline scope and the scopes enclosing it, innermost first, up to
/// the function's own body (`s0`, left out), with the line and file of each inlined call.
fn inline_stack(
    src: &source::FunctionSource,
    block: usize,
) -> (Vec<String>, Vec<u32>, Vec<String>) {
    let (mut names, mut lines, mut files) = (Vec::new(), Vec::new(), Vec::new());
    let scopes = &src.meta.scopes;
    let Some(first) = src.meta.lines.get(block).and_then(|l| l.first()) else {
        return (names, lines, files);
    };
    let mut scope = first.scope.index();
    // Parents lie below their scope (`ScopeMeta::parent`), so the walk ends; bounded anyway.
    while scope != 0 && names.len() < scopes.len() {
        let Some(s) = scopes.get(scope) else {
            break;
        };
        let name = s
            .func
            .and_then(|i| src.tables.fns.get(i.index()))
            .map_or("?", |f| f.name.as_str());
        names.push(name.to_string());
        lines.push(s.call.line);
        let file = s.call.file.and_then(|i| src.tables.files.get(i.index()));
        files.push(file.cloned().unwrap_or_default());
        scope = s.parent.index();
    }
    (names, lines, files)
}

/// The dimension tables of a build, `builds` last (its file marks the build as written).
fn write_dimensions(
    dir: &Path,
    key: &str,
    r: &Report,
    order: &[&FunctionReport],
    modules: &[ProfileModule],
) -> Result<(), DatasetError> {
    let at = |t: &TableSpec, file: &str| dir.join(t.name).join(format!("build={key}")).join(file);
    let mut table = Table::new(&schema::MODULES);
    for (i, m) in modules.iter().enumerate() {
        table.push(&[
            Value::U32(Some(i as u32)),
            Value::U64(Some(m.hash)),
            Value::Str(Some(&m.meta.source)),
            Value::Str(Some(m.meta.mode.name())),
            Value::U32(Some(m.counters.len() as u32)),
            Value::Bytes(&m.meta_blob),
        ]);
    }
    table.write(&at(&schema::MODULES, "modules.parquet"))?;
    let mut functions = Table::new(&schema::FUNCTIONS);
    let mut blocks = Table::new(&schema::BLOCKS);
    let mut edges = Table::new(&schema::EDGES);
    for (i, f) in order.iter().enumerate() {
        let fid = Value::U32(Some(i as u32));
        let mode = f.mode.name();
        functions.push(&[
            fid,
            Value::Str(Some(&f.name)),
            Value::Str(Some(&f.demangled)),
            Value::Str(Some(&f.module)),
            Value::Str(f.file.as_deref()),
            Value::U32(Some(f.line)),
            Value::Str(Some(mode)),
            Value::U64(Some(f.cfg_hash)),
            Value::U32(Some(f.blocks.len() as u32)),
            Value::U32(Some(f.edges.len() as u32)),
        ]);
        for blk in &f.blocks {
            let (names, lines, files) = inline_stack(&f.source, blk.id as usize);
            blocks.push(&[
                fid,
                Value::U32(Some(blk.id)),
                Value::Str(blk.file.as_deref()),
                Value::U32(Some(blk.line)),
                Value::StrList(&names),
                Value::U32List(&lines),
                Value::StrList(&files),
            ]);
        }
        for e in &f.edges {
            edges.push(&[
                fid,
                Value::U32(Some(e.id)),
                Value::U32(e.from),
                Value::U32(e.to),
                Value::Str(Some(e.kind)),
            ]);
        }
    }
    let mut lines = Table::new(&schema::LINES);
    for (file, fc) in &source::model(r).files {
        for &line in fc.lines.keys() {
            lines.push(&[Value::Str(Some(file)), Value::U32(Some(line))]);
        }
    }
    functions.write(&at(&schema::FUNCTIONS, "functions.parquet"))?;
    blocks.write(&at(&schema::BLOCKS, "blocks.parquet"))?;
    edges.write(&at(&schema::EDGES, "edges.parquet"))?;
    lines.write(&at(&schema::LINES, "lines.parquet"))?;
    let mut builds = Table::new(&schema::BUILDS);
    let modes: Vec<&str> = r.modes.iter().map(|m| m.name()).collect();
    let modes = modes.join(",");
    let program = r.program.path_lossy();
    let id = match &r.program.build_id {
        BuildId::None => None,
        other => Some(other.hex()),
    };
    builds.push(&[
        Value::U32(Some(schema::SCHEMA_VERSION)),
        Value::Str(Some(&program)),
        Value::Str(id.as_deref()),
        Value::Str(Some(r.program.build_id.kind())),
        Value::Str(Some(&modes)),
        Value::U32(Some(r.modules.len() as u32)),
        Value::U32(Some(order.len() as u32)),
    ]);
    builds.write(&at(&schema::BUILDS, "build.parquet"))
}
