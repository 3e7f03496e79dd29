//! Path counts of a function as the profile holds them: from a counter slice or the module's
//! path entries ([`path_profile`]), and added over linkonce copies ([`add_paths`]); the
//! interprocedural paths of a module's set, named and located ([`ipath_text`]).

use super::loc_file;
use crate::modes;
use crate::{demangle, IpathCallStep, IpathPath, IpathPathStep, PathProfile, PathRow};
use tally_format::ModuleMeta;

/// The path counts of function `fi` of a module: from its counter slice (array storage) or
/// the module's path entries plus its counters, each a [`Probe::Path`](tally_format::Probe)
/// (hash storage: the counter slices of narrow path ends).
pub(super) fn path_profile(
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

/// Adds the path counts of another copy of a linkonce function; `None` on overflow.
pub(super) fn add_paths(mine: &mut PathProfile, theirs: &PathProfile) -> Option<()> {
    use std::collections::BTreeMap;
    let mut all: BTreeMap<u128, u64> = mine.counts.iter().copied().collect();
    for &(p, c) in &theirs.counts {
        let v = all.entry(p).or_default();
        *v = v.checked_add(c)?;
    }
    mine.counts = all.into_iter().collect();
    mine.lost = mine.lost.checked_add(theirs.lost)?;
    let mut rows: BTreeMap<u128, PathRow> = mine.rows.drain(..).map(|r| (r.number, r)).collect();
    for r in &theirs.rows {
        match rows.get_mut(&r.number) {
            Some(m) => m.count = m.count.checked_add(r.count)?,
            None => {
                rows.insert(r.number, r.clone());
            }
        }
    }
    mine.rows = rows.into_values().collect();
    Some(())
}

/// An interprocedural path with its functions named and its blocks located.
pub(super) fn ipath_text(
    meta: &ModuleMeta,
    potential: u128,
    r: &modes::ipath::IpathRow,
) -> IpathPath {
    use modes::ipath::IpathStep;
    let name = |f: u32| meta.functions[f as usize].name.clone();
    let at = |function: u32, block: u32, site: u32, callee: Option<u32>| IpathCallStep {
        caller: name(function),
        block,
        site,
        callee: callee.map(name),
    };
    let steps = r
        .steps
        .iter()
        .map(|s| match *s {
            IpathStep::Block { function, block } => {
                let f = &meta.functions[function as usize];
                let l = f.blocks.get(block as usize);
                IpathPathStep::Block {
                    function: f.name.clone(),
                    demangled: demangle(&f.name),
                    block,
                    file: l.and_then(|l| loc_file(meta, l)),
                    line: l.map_or(0, |l| l.line),
                }
            }
            IpathStep::Call {
                function,
                block,
                site,
                callee,
                matched,
            } => IpathPathStep::Call {
                call: at(function, block, site, Some(callee)),
                matched,
            },
            IpathStep::Return {
                function,
                block,
                site,
                callee,
                matched,
            } => IpathPathStep::Return {
                call: at(function, block, site, Some(callee)),
                matched,
            },
            IpathStep::Summary {
                function,
                block,
                site,
                callee,
            } => IpathPathStep::Summary(at(function, block, site, callee)),
            IpathStep::Restart => IpathPathStep::Restart,
            IpathStep::Reentry => IpathPathStep::Reentry,
            IpathStep::Cut => IpathPathStep::Cut,
            IpathStep::EarlyExit => IpathPathStep::EarlyExit,
        })
        .collect();
    IpathPath {
        module: meta.source.clone(),
        mode: meta.mode,
        potential,
        number: r.number,
        count: r.count,
        start: r.start,
        end: r.end,
        context: r.context,
        steps,
    }
}
