//! `tally trace --paths`: the regenerated execution of a witness trace ([`crate::trace`])
//! cut into Ball-Larus paths (Ball & Larus 1996: a path starts at the entry or where a back edge
//! lands and ends at a back edge or the exit), numbered exactly as `path` mode numbers them.
//!
//! Each traced function's path DAG and numbering come from its graph alone, as `path` mode
//! computes them (`tally_graph::paths::number_paths_limited` with `path` mode's limit
//! [`MAX_PATHS`]: the same back edges, the same cut edges where a function has more than 2^62
//! paths, the same `Val`s), so a path's number is the one a `path` build of the same sources
//! and flags gives it. Each thread's activations are followed on a stack: an activation starts
//! at `e0`; a back or cut edge ends its path (`x -> END`) and starts the next (`START -> y`);
//! a `Return` edge ends it. Paths cut short count as the prefix that ran, as in `path` mode
//! (a frame abandoned in block `v` counts the path ending with `v`'s early-exit edge): the
//! frames a `longjmp` abandons, the frame it lands in (whose new path starts at the `Reentry`
//! edge), and the frames still active when a thread's stream ends (`exit`, a crash, a thread
//! still running at exit). A `longjmp` lands in the innermost activation of its function: when
//! a function that called `setjmp` is active several times at once and the jump goes to an
//! outer activation, the counts are not exact (the witness trace does not say which).
//!
//! Tail calls: `path` mode ends a path before a `tail` call that a `ret` follows (the frame
//! is gone while the callee runs), trace mode keeps the frame until the `ret`. A frame
//! abandoned inside such a callee is counted here with its block's early-exit edge where the
//! block has one (an earlier call of the block may end the frame, and the trace does not say
//! which call was running), where `path` mode counts the path that returns: the same blocks,
//! another end (`crates/cli/tests/e2e/tracepaths.rs` checks that this is the only difference).
//! Without an early exit only the tail call can have been running, and the `Return` path is
//! counted, as in `path` mode.
//!
//! The result is a [`Report`] whose traced functions carry a [`PathProfile`] (so `tally
//! paths`' renderers print it) and whose block and edge counts are derived from the path
//! counts (`tally_graph::paths::derive_counts`), as `path` mode's reader derives them.

use super::{activity, Activity};
use crate::{PathProfile, Report};
use std::collections::{BTreeMap, HashMap};
use tally_format::profile::Profile;
use tally_graph::paths::{
    number_paths_limited, CfgImage, DagEdgeId, NumberedDag, ARRAY_PATHS, MAX_PATHS,
};
use tally_graph::{Cfg, EdgeId, EdgeKind, NodeId};

/// A traced function's graph and path numbering.
struct Numbering {
    name: String,
    cfg: Cfg,
    paths: NumberedDag,
}

impl Numbering {
    fn val(&self, d: DagEdgeId) -> u128 {
        self.paths.val(d)
    }
}

/// One activation: its function, the value of its path so far and the block it is at.
struct Act {
    at: (usize, usize),
    value: u128,
    node: NodeId,
}

/// The paths of a witness trace: the report (see the module doc), the threads whose
/// regeneration stopped early (their paths are counted up to there), and notes on what could
/// not be counted.
pub struct TracePaths {
    /// Traced functions carry their path profile; block and edge counts derived from it.
    pub report: Report,
    /// Threads whose regeneration stopped early, and why.
    pub stopped: Vec<(u32, String)>,
    /// Paths that could not be counted, and why (none when the counts are exact).
    pub notes: Vec<String>,
}

struct Cutter<'a> {
    numbering: &'a HashMap<(usize, usize), Numbering>,
    counts: HashMap<(usize, usize), BTreeMap<u128, u64>>,
    notes: Vec<String>,
}

impl Cutter<'_> {
    fn count(&mut self, at: (usize, usize), value: u128) {
        let c = self.counts.entry(at).or_default().entry(value).or_default();
        *c = c.saturating_add(1);
    }

    /// Ends `a`'s path where the frame was abandoned: the early-exit edge of its block. A
    /// block without one can only have been left in the `tail` call its `ret` follows (the
    /// lowering does not count that call as one that may end the frame): `path` mode ends the
    /// path with the `Return` edge before such a call (the frame is gone while the callee
    /// runs), so it is counted that way here too.
    fn abandon(&mut self, thread: u32, a: &Act) {
        let n = &self.numbering[&a.at];
        let dag = n.paths.dag();
        let end = match n.cfg.early_exit(a.node) {
            Some(e) => match dag.image(e) {
                CfgImage::EarlyExit(d) => Some(d),
                _ => None,
            },
            None => match n.cfg.succs(a.node) {
                [e] if n.cfg.edge(*e).kind == EdgeKind::Return => match dag.image(*e) {
                    CfgImage::Kept(d) => Some(d),
                    _ => None,
                },
                _ => None,
            },
        };
        match end {
            Some(d) => self.count(a.at, a.value + n.val(d)),
            None => self.notes.push(format!(
                "thread {thread}: an activation of {} ended in block {}, which has no early exit; its last path is not counted",
                n.name, a.node
            )),
        }
    }

    fn event(&mut self, thread: u32, stack: &mut Vec<Act>, ev: Activity) -> Result<(), String> {
        match ev {
            Activity::Step { at, block, via } => {
                let Some(n) = self.numbering.get(&at) else {
                    return Err(format!(
                        "function {} of module {} has no numbering",
                        at.1, at.0
                    ));
                };
                let kind = n.cfg.edge(via).kind;
                if kind == EdgeKind::Entry {
                    let CfgImage::Start(d) = n.paths.dag().image(via) else {
                        return Err("e0 is not the start edge".into());
                    };
                    stack.push(Act {
                        at,
                        value: n.val(d),
                        node: block,
                    });
                    return Ok(());
                }
                if kind == EdgeKind::Reentry {
                    // A longjmp: the frames above the landing one were abandoned where they
                    // were; the landing frame's path ends there too and a new one starts.
                    while stack.last().is_some_and(|a| a.at != at) {
                        let a = stack.pop().expect("checked");
                        self.abandon(thread, &a);
                    }
                    let Some(a) = stack.pop() else {
                        return Err(format!(
                            "a longjmp lands in {}, which is not active",
                            n.name
                        ));
                    };
                    self.abandon(thread, &a);
                    let CfgImage::Reentry(d) = n.paths.dag().image(via) else {
                        return Err(format!("re-entry edge {via} has no re-entry image"));
                    };
                    stack.push(Act {
                        at,
                        value: n.val(d),
                        node: block,
                    });
                    return Ok(());
                }
                let src = n.cfg.edge(via).src;
                // An unwind landing: frames above the one whose call unwound were abandoned.
                while stack.last().is_some_and(|a| a.at != at || a.node != src) {
                    let a = stack.pop().expect("checked");
                    self.abandon(thread, &a);
                }
                let Some(a) = stack.last_mut() else {
                    return Err(format!(
                        "edge {via} of function {} of module {} taken outside an activation",
                        at.1, at.0
                    ));
                };
                match n.paths.dag().image(via) {
                    CfgImage::Kept(d) => a.value += n.val(d),
                    CfgImage::Back { end, start } | CfgImage::Cut { end, start } => {
                        let v = a.value + n.val(end);
                        a.value = n.val(start);
                        self.count(at, v);
                    }
                    other => return Err(format!("edge {via} taken, whose image is {other:?}")),
                }
                stack.last_mut().expect("checked").node = block;
            }
            Activity::Return { at, edge } => {
                let n = &self.numbering[&at];
                let Some(a) = stack.pop().filter(|a| a.at == at) else {
                    return Err(format!(
                        "function {} of module {} returns but is not the innermost activation",
                        at.1, at.0
                    ));
                };
                let CfgImage::Kept(d) = n.paths.dag().image(edge) else {
                    return Err(format!("return edge {edge} has no image"));
                };
                self.count(at, a.value + n.val(d));
            }
        }
        Ok(())
    }
}

/// A function as `tally paths` lists it: module source, name, graph hash.
type Key<'a> = (&'a str, &'a str, u64);

/// Cuts the execution regenerated from the witness trace `bytes` (written by the run whose
/// profile is `profile`) into paths (module doc).
pub fn trace_paths(bytes: &[u8], profile: &Profile) -> Result<TracePaths, String> {
    let mut numbering = HashMap::new();
    for (mi, m) in profile.modules.iter().enumerate() {
        for (fi, f) in m.meta.functions.iter().enumerate() {
            if f.wtrace().is_none_or(|w| w.untraced.is_some()) {
                continue;
            }
            let cfg = f.cfg().map_err(|e| format!("{}: {e}", f.name))?;
            let paths =
                number_paths_limited(&cfg, MAX_PATHS).map_err(|e| format!("{}: {e}", f.name))?;
            numbering.insert(
                (mi, fi),
                Numbering {
                    name: f.name.clone(),
                    cfg,
                    paths,
                },
            );
        }
    }
    let mut cutter = Cutter {
        numbering: &numbering,
        counts: HashMap::new(),
        notes: Vec::new(),
    };
    let mut stacks: BTreeMap<u32, Vec<Act>> = BTreeMap::new();
    let mut failed: Option<String> = None;
    let mut stopped = activity(bytes, profile, |thread, ev| {
        if failed.is_some() {
            return;
        }
        let stack = stacks.entry(thread).or_default();
        if let Err(e) = cutter.event(thread, stack, ev) {
            failed = Some(format!("thread {thread}: {e}"));
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    // Frames still active where a thread's stream ended were abandoned there.
    for (thread, stack) in &mut stacks {
        while let Some(a) = stack.pop() {
            cutter.abandon(*thread, &a);
        }
    }
    stopped.sort();
    let Cutter { counts, notes, .. } = cutter;

    let mut counted = crate::Counted::new();
    let mut profiles: HashMap<Key, Vec<(u128, u64)>> = HashMap::new();
    let mut potential: HashMap<Key, &Numbering> = HashMap::new();
    for (&at, n) in &numbering {
        let m = &profile.modules[at.0];
        let f = &m.meta.functions[at.1];
        let c: Vec<(u128, u64)> = counts
            .get(&at)
            .map(|c| c.iter().map(|(&k, &v)| (k, v)).collect())
            .unwrap_or_default();
        if let Ok(d) = tally_graph::paths::derive_counts(&n.cfg, &n.paths, c.iter().copied()) {
            counted.insert(at, (d.edges.into_vec(), d.blocks.into_vec()));
        }
        let key = (m.meta.source.as_str(), f.name.as_str(), f.cfg_hash);
        profiles.entry(key).or_default().extend(c);
        potential.insert(key, n);
    }
    let inputs = crate::Inputs {
        counted,
        ..Default::default()
    };
    let mut report = crate::analyze(profile, &inputs).map_err(|e| e.to_string())?;
    for fr in &mut report.functions {
        // Linkonce copies merged into one entry add their paths.
        let mut sum: BTreeMap<u128, u64> = BTreeMap::new();
        let mut numbered = None;
        for (k, c) in &profiles {
            if k.1 == fr.name && k.2 == fr.cfg_hash && (fr.copies > 1 || k.0 == fr.module) {
                numbered = potential.get(k).copied();
                for &(p, n) in c {
                    let s = sum.entry(p).or_default();
                    *s = s.saturating_add(n);
                }
            }
        }
        let Some(n) = numbered else { continue };
        let counts: Vec<(u128, u64)> = sum.into_iter().collect();
        let rows = crate::modes::path::path_rows(&n.paths, &counts)
            .map_err(|e| format!("{}: {e}", fr.name))?;
        let total = n.paths.total();
        fr.paths = Some(PathProfile {
            potential: total,
            counts,
            lost: 0,
            cuts: n
                .paths
                .dag()
                .cuts()
                .map(|e: EdgeId| e.index() as u32)
                .collect(),
            hashed: total > ARRAY_PATHS,
            rows,
        });
    }
    Ok(TracePaths {
        report,
        stopped,
        notes,
    })
}
