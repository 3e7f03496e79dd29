//! `path`: Ball & Larus 1996's paths regenerated from their numbers (the DAG renumbered from the
//! graph and the cuts, checked against the stored total and numbering fingerprint), and block and
//! edge counts derived from the path counts (`tally_graph::paths::derive_counts`). Functions
//! profiled with edge counters instead are solved as in `edge` mode.

use super::{Reconstruct, ReportSolveError, Solved};
use crate::{PathProfile, PathRow};
use tally_format::FunctionMeta;
use tally_graph::{Cfg, EdgeId, IdVec};

pub(crate) struct Path;

impl Reconstruct for Path {
    fn solve(
        &self,
        cfg: &Cfg,
        f: &FunctionMeta,
        counters: &[u64],
        paths: Option<&PathProfile>,
    ) -> Result<Solved, ReportSolveError> {
        let (Some(pm), Some(pp)) = (f.paths(), paths) else {
            // Functions that could not have paths were profiled with edge counters.
            return super::edge::Edges.solve(cfg, f, counters, paths);
        };
        if pp.lost > 0 {
            return Err(ReportSolveError::Lost(pp.lost));
        }
        let cuts: Vec<EdgeId> = pm.cuts.iter().map(|e| e.edge()).collect();
        let dag =
            tally_graph::paths::PathDag::with_cuts(cfg, &cuts).map_err(ReportSolveError::Paths)?;
        let numbered =
            tally_graph::paths::NumberedDag::new(dag).map_err(ReportSolveError::Paths)?;
        if numbered.total() != pm.num_paths {
            return Err(ReportSolveError::Numbering {
                stored: pm.num_paths,
                computed: numbered.total(),
            });
        }
        let fingerprint = numbered.fingerprint();
        if fingerprint != pm.numbering {
            return Err(ReportSolveError::Fingerprint {
                stored: pm.numbering,
                computed: fingerprint,
            });
        }
        let d = tally_graph::paths::derive_counts(cfg, &numbered, pp.counts.iter().copied())
            .map_err(ReportSolveError::Paths)?;
        let rows = path_rows(&numbered, &pp.counts).map_err(ReportSolveError::Paths)?;
        Ok(Solved {
            edges: IdVec::from_vec(d.edges.into_vec().into_iter().map(Some).collect()),
            blocks: IdVec::from_vec(d.blocks.into_vec().into_iter().map(Some).collect()),
            rows: Some(rows),
        })
    }
}

/// The executed paths spelled out: each `(number, count)` of `counts` regenerated from its
/// number (Ball & Larus 1996 §3.5), with how it starts and ends.
pub(crate) fn path_rows(
    numbered: &tally_graph::paths::NumberedDag,
    counts: &[(u128, u64)],
) -> Result<Vec<PathRow>, tally_graph::paths::PathError> {
    use tally_graph::paths::{PathEnd, PathStart};
    let mut rows = Vec::with_capacity(counts.len());
    for &(number, count) in counts {
        let r = numbered.regenerate(number)?;
        rows.push(PathRow {
            number,
            count,
            blocks: r.blocks.iter().map(|b| b.index() as u32).collect(),
            start: match r.start {
                PathStart::Entry => "entry",
                PathStart::Reentry(_) => "reentry",
                PathStart::Back(_) => "back-edge",
                PathStart::Cut(_) => "cut",
            },
            end: match r.end {
                PathEnd::Return(_) => "return",
                PathEnd::EarlyExit(_) => "early-exit",
                PathEnd::Back(_) => "back-edge",
                PathEnd::Cut(_) => "cut",
            },
        })
    }
    Ok(rows)
}

/// The path counts of function `fi` of a module: from its counter slice (array storage) or
/// the module's path entries plus its counters, each a [`Probe::Path`](tally_format::Probe)
/// (hash storage: the counter slices of narrow path ends).
pub(crate) fn path_profile(
    pm: &tally_format::PathMeta,
    probes: &[tally_format::Probe],
    counters: &[u64],
    entries: &[tally_format::profile::PathEntry],
    fi: usize,
) -> PathProfile {
    use tally_format::profile::PathEntryKind;
    let mut counts = Vec::new();
    let mut lost = 0u64;
    match pm.storage {
        tally_format::PathStorage::Array => {
            for (p, &c) in counters.iter().enumerate() {
                if c > 0 {
                    counts.push((p as u128, c));
                }
            }
        }
        tally_format::PathStorage::Hash { .. } => {
            for e in entries.iter().filter(|e| e.function as usize == fi) {
                match e.kind {
                    PathEntryKind::Count => counts.push((u128::from(e.path), e.count)),
                    PathEntryKind::Lost => lost = lost.saturating_add(e.count),
                }
            }
            for (probe, &c) in probes.iter().zip(counters) {
                if let (tally_format::Probe::Path(p), true) = (probe, c > 0) {
                    counts.push((u128::from(*p), c));
                }
            }
            // A path may have entries from the home table, the overflow table and a counter
            // slice: they add up.
            counts.sort_unstable();
            counts.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    kept.1 = kept.1.saturating_add(later.1);
                }
                same
            });
        }
    }
    PathProfile {
        potential: pm.num_paths,
        counts,
        lost,
        cuts: pm.cuts.iter().map(|e| e.0).collect(),
        hashed: pm.storage != tally_format::PathStorage::Array,
        rows: Vec::new(),
    }
}
