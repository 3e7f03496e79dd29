//! The arithmetic of a report: every function's graph rebuilt from its metadata, its counter
//! values put on the edges or blocks they measure, the rest derived by its mode's
//! reconstruction (`crate::modes`), linkonce copies added up, and the functions ranked.
//! [`analyze`] is the one entry point; [`Inputs`] carries counts measured elsewhere (a witness
//! trace) and graphs already built.

mod delta;
mod paths;

use crate::modes::{self, ReportSolveError, Solved};
use crate::{
    demangle, loc_file, one_line, source, BlockCount, EdgeCount, FunctionReport, Report,
    ReportError, Skipped,
};
use paths::add_paths;
use std::collections::HashMap;
use tally_format::profile::Profile;
use tally_format::Linkage;

/// Edge and block counts measured outside the profile's counters (a witness trace,
/// [`trace::report`](crate::trace::report)), by `(module index, function index)`:
/// `(edges, blocks)` in id order.
pub type Counted = HashMap<(usize, usize), (Vec<u64>, Vec<u64>)>;

/// What [`analyze`] takes besides the profile; `Inputs::default()` for a profile's own
/// counters alone.
#[derive(Default)]
pub struct Inputs<'a> {
    /// Counts of some functions measured elsewhere, taken instead of their counters' (ignored
    /// for a function when their lengths do not fit its graph).
    pub counted: Counted,
    /// The graphs of some functions already built from their metadata (by `(module index,
    /// function index)`), which are then not built again.
    pub cfgs: HashMap<(usize, usize), &'a tally_graph::Cfg>,
    /// Only these functions (by `(module index, function index)`) are reported, when given:
    /// the dataset export leaves out functions whose counters are all zero, whose counts are
    /// all zero (`crate::dataset`).
    pub only: Option<std::collections::HashSet<(usize, usize)>>,
    /// Counts only: the reports leave out what names and places them (`demangled` is the
    /// name, the function and its blocks have no file, `source` is empty), which the dataset export takes from
    /// its build's first profile instead of from every run.
    pub lean: bool,
}

/// Computes exact counts for every function of a profile.
pub fn analyze(profile: &Profile, inputs: &Inputs<'_>) -> Result<Report, ReportError> {
    let Inputs {
        counted,
        cfgs,
        only,
        lean,
    } = inputs;
    let mut functions: Vec<FunctionReport> = Vec::new();
    // (name, cfg hash) -> index in `functions`, for merging linkonce copies.
    let mut linkonce: HashMap<(String, u64), usize> = HashMap::new();
    let mut skipped = Vec::new();
    let mut modes = Vec::new();
    let mut counters_total = 0;
    let mut counter_sum = 0u128;
    let mut path_entry_sum = 0u128;
    let mut events_total: Option<(String, u64)> = None;
    let mut ipaths = Vec::new();
    for (mi, m) in profile.modules.iter().enumerate() {
        let meta = &m.meta;
        let tables = if *lean {
            source::Tables::default()
        } else {
            source::Tables::of(meta)
        };
        if !modes.contains(&meta.mode) {
            modes.push(meta.mode);
        }
        counters_total += m.counters.len();
        counter_sum += m.counters.iter().map(|&c| u128::from(c)).sum::<u128>();
        path_entry_sum += m.paths.iter().map(|p| u128::from(p.count)).sum::<u128>();
        for s in &meta.skipped {
            skipped.push(Skipped {
                name: s.name.clone(),
                module: meta.source.clone(),
                reason: s.reason.clone(),
            });
        }
        // What the mode solves per module: a set of functions solved together, the events total.
        let rc = modes::of(meta.mode);
        let mut group = rc.module(m)?;
        if let Some((kind, t)) = group.events.take() {
            let best = events_total.as_ref().map_or(0, |e| e.1);
            events_total = Some((kind, t.max(best)));
        }
        ipaths.append(&mut group.ipaths);
        for (fi, f) in meta.functions.iter().enumerate() {
            if only.as_ref().is_some_and(|o| !o.contains(&(mi, fi))) {
                continue;
            }
            let cfg = match cfgs.get(&(mi, fi)) {
                Some(&c) => std::borrow::Cow::Borrowed(c),
                None => std::borrow::Cow::Owned(f.cfg().map_err(|e| ReportError::Meta {
                    function: one_line(&f.name),
                    source_file: one_line(&meta.source),
                    message: e.to_string(),
                })?),
            };
            let cfg = cfg.as_ref();
            // In range: validated when the metadata was decoded (and the counters read).
            let base = f.counter_base.index();
            let vals = m
                .counters
                .get(base..base + f.counters.len())
                .ok_or_else(|| ReportError::Meta {
                    function: one_line(&f.name),
                    source_file: one_line(&meta.source),
                    message: "its counters lie outside the module's".into(),
                })?;
            let mut paths = f
                .paths()
                .map(|pm| modes::path::path_profile(pm, &f.counters, vals, &m.paths, fi));
            // Counts that break the flow law mark the function inconsistent (its counts unknown,
            // the reason kept); the rest of the profile is still reported.
            let mut inconsistent = None;
            let result = match group.functions.remove(&fi) {
                Some(Ok(s)) => Ok(s),
                Some(Err(why)) => {
                    inconsistent = Some(why);
                    Ok(modes::Solved::unknown(cfg))
                }
                None => match counted.get(&(mi, fi)).and_then(|c| rc.counted(cfg, c)) {
                    Some(s) => Ok(s),
                    // A part of a process that took snapshots: signed early exits.
                    None if profile.delta => delta::solve(meta.mode, cfg, f, vals),
                    None => rc.solve(cfg, f, vals, paths.as_ref()),
                },
            };
            let mut solved = match result {
                Ok(s) => s,
                // The metadata's numbering is not ours: a metadata error, not a count.
                Err(
                    error @ (ReportSolveError::Numbering { .. }
                    | ReportSolveError::Fingerprint { .. }),
                ) => {
                    return Err(ReportError::Meta {
                        function: one_line(&demangle(&f.name)),
                        source_file: one_line(&meta.source),
                        message: error.to_string(),
                    })
                }
                Err(error) => {
                    inconsistent = Some(one_line(&error.to_string()));
                    modes::Solved::unknown(cfg)
                }
            };
            let events = rc.events(f, vals);
            if let (Some(p), Some(rows)) = (&mut paths, solved.rows.take()) {
                p.rows = rows;
            }
            let key = (f.name.clone(), f.cfg_hash);
            if f.linkage == Linkage::Linkonce {
                if let Some(&i) = linkonce.get(&key) {
                    let r = &mut functions[i];
                    if r.mode == meta.mode {
                        // The copies are named after the first module by source path, not
                        // by their order in the profile (ascending hash: another build of
                        // the same sources names another module first).
                        if meta.source < r.module {
                            r.module = meta.source.clone();
                        }
                        add_into(r, &solved);
                        add_targets(&mut r.call_targets, &call_targets(f, &m.counters));
                        if r.inconsistent.is_none() {
                            r.inconsistent = inconsistent;
                        }
                        if let (Some(mine), Some(theirs)) = (&mut r.paths, &paths) {
                            add_paths(mine, theirs).ok_or(ReportError::Overflow)?;
                        }
                        r.copies += 1;
                        continue;
                    }
                }
            }
            let blocks = cfg
                .blocks()
                .map(|n| {
                    let l = &f.blocks[n.index()];
                    BlockCount {
                        id: n.index() as u32,
                        count: solved.blocks[n],
                        file: if *lean { None } else { loc_file(meta, l) },
                        line: l.line,
                    }
                })
                .collect();
            let edges = cfg
                .edges()
                .map(|(id, e)| EdgeCount {
                    id: id.index() as u32,
                    from: (!cfg.is_exit(e.src)).then_some(e.src.index() as u32),
                    to: (!cfg.is_exit(e.dst)).then_some(e.dst.index() as u32),
                    kind: kind_name(e.kind),
                    count: solved.edges[id],
                })
                .collect();
            let mut r = FunctionReport {
                name: f.name.clone(),
                demangled: if *lean {
                    f.name.clone()
                } else {
                    demangle(&f.name)
                },
                file: if *lean { None } else { loc_file(meta, &f.loc) },
                line: f.loc.line,
                module: meta.source.clone(),
                mode: meta.mode,
                cfg_hash: f.cfg_hash,
                entry_count: 0,
                block_executions: 0,
                blocks,
                edges,
                counters: f.counters.len(),
                copies: 1,
                paths,
                events,
                inconsistent,
                source: if *lean {
                    source::FunctionSource::default()
                } else {
                    source::FunctionSource::new(&tables, &f.source)
                },
                call_targets: call_targets(f, &m.counters),
            };
            finish(&mut r);
            if f.linkage == Linkage::Linkonce {
                linkonce.insert(key, functions.len());
            }
            functions.push(r);
        }
    }
    functions.sort_by(|a, b| {
        b.block_executions
            .cmp(&a.block_executions)
            .then(b.entry_count.cmp(&a.entry_count))
            .then(a.name.cmp(&b.name))
            .then(a.module.cmp(&b.module))
    });
    Ok(Report {
        program: profile.program.clone(),
        modes,
        modules: profile
            .modules
            .iter()
            .map(|m| m.meta.source.clone())
            .collect(),
        functions,
        skipped,
        counters: counters_total,
        counter_sum,
        path_entry_sum,
        events: events_total,
        unfinished: profile.unfinished,
        raced: profile.raced,
        signal: profile.signal,
        delta: profile.delta,
        ipaths,
    })
}

fn kind_name(k: tally_graph::EdgeKind) -> &'static str {
    use tally_graph::EdgeKind::*;
    match k {
        Entry => "entry",
        Flow => "flow",
        Return => "return",
        EarlyExit => "early-exit",
        Reentry => "reentry",
    }
}

fn add_into(r: &mut FunctionReport, s: &Solved) {
    for (b, v) in r.blocks.iter_mut().zip(s.blocks.values()) {
        b.count = match (b.count, v) {
            (Some(x), Some(y)) => x.checked_add(*y),
            _ => None,
        };
    }
    for (e, v) in r.edges.iter_mut().zip(s.edges.values()) {
        e.count = match (e.count, v) {
            (Some(x), Some(y)) => x.checked_add(*y),
            _ => None,
        };
    }
    finish(r);
}

/// The counts of the candidate targets of each indirect call of `f` (`--tally-pgo`), from its
/// module's counters (in range: validated with the metadata).
fn call_targets(f: &tally_format::FunctionMeta, counters: &[u64]) -> Vec<Vec<u64>> {
    f.source
        .call_targets
        .iter()
        .map(|t| {
            let base = t.counter.index();
            counters
                .get(base..base + t.targets.len())
                .map_or_else(|| vec![0; t.targets.len()], <[u64]>::to_vec)
        })
        .collect()
}

/// Adds another copy's target counts (copies of one linkonce function share their metadata).
fn add_targets(into: &mut [Vec<u64>], other: &[Vec<u64>]) {
    for (a, b) in into.iter_mut().zip(other) {
        for (x, y) in a.iter_mut().zip(b) {
            *x = x.saturating_add(*y);
        }
    }
}

fn finish(r: &mut FunctionReport) {
    r.entry_count = r.blocks.first().and_then(|b| b.count).unwrap_or(0);
    // The entry block may also be re-entered by its own loops; calls are e0.
    if let Some(e0) = r.edges.first().and_then(|e| e.count) {
        r.entry_count = e0;
    }
    r.block_executions = r
        .blocks
        .iter()
        .filter_map(|b| b.count)
        .fold(0u64, |a, c| a.saturating_add(c));
}
