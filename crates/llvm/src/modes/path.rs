//! Path mode: Ball-Larus path profiling (Ball & Larus 1996) applied to IR.
//!
//! The graph crate numbers the acyclic paths of each function (`tally_graph::paths`: the DAG
//! with back edges, early exits, re-entries and cuts turned into dummy START/END edges, Val
//! numbering, chord increments on a maximum spanning tree of DAG + END->START, and the paper's
//! optimized placement as per-edge actions). Here those actions become code: a path register
//! `r` (an `alloca` promoted to SSA by mem2reg), `r = c` / `r += c` on edges, and
//! `count[r + c]++` where paths end — in the module's counter array when the function has at
//! most [`ARRAY_PATHS`] paths, else in the function's home table (probed inline at a constant
//! address; `tally.path.probe`) backed by the runtime's overflow hash table with its last-path
//! cache.
//! A frame abandoned in block `v` (exit, longjmp, exception) ends its path with `v`'s early-exit
//! edge: before the first call of `v` that may end the frame, the frame record's site is set
//! to that path's counter (or, for hashed paths, to a `{table, path}` pair in the frame), and
//! the runtime counts it when the frame is abandoned. A longjmp back into the frame starts a new
//! path at the re-entry edge.
//!
//! Functions with more than [`MAX_PATHS`] paths are cut (extra path ends, Ball & Larus 1996's
//! remedy, `tally_graph::paths::number_paths_limited`); a function whose path code would have to
//! sit on an edge that can neither be split nor reached from one end (an indirect branch into a
//! block with several predecessors) is profiled with edge counters instead, and says so.

use super::{Counting, EmitCx, Emitted, FnPlan, ModeImpl, PlanCx};
use crate::counters::place::edge_plan;
use crate::emit::build::{
    add_incoming, append_block, const_int, const_null, erase, i8_type, move_block_after,
    struct_type, type_of,
};
use crate::emit::frame::{
    frame_alloca, frame_at_sites, frame_exits, frame_plan, frame_push, records_at_sites,
};
use crate::emit::sites::{base_weights, direct_site, Realize};
use crate::emit::surgery::split_edge;
use crate::emit::{Emitter, Globals};
use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::Val;
use crate::options::PathCycles;
use llvm_sys::prelude::*;
use llvm_sys::LLVMIntPredicate;
use tally_format::{PathMeta, PathStorage, Probe};
use tally_graph::paths::{
    chord_increments, cycle_loops, dag_weights, number_paths_limited, without_cycle_counts, Action,
    CycleLoop, FirstCount, PathPlacement, Slice, Slices,
};
use tally_graph::{EdgeId, IdVec, NodeId};

/// Most paths a function keeps before extra cuts are made (path numbers must fit a signed
/// 64-bit register with room for increments); readers number with the same limit.
pub(crate) const MAX_PATHS: u128 = tally_graph::paths::MAX_PATHS;
/// Most paths counted in an array; more go to the runtime's hash table.
pub(crate) const ARRAY_PATHS: u128 = tally_graph::paths::ARRAY_PATHS;

pub(crate) struct Path;

impl ModeImpl for Path {
    fn plan(&self, cx: &PlanCx) -> Result<Box<dyn FnPlan>, String> {
        let cycles = if cx.opts.atomic {
            PathCycles::Off
        } else {
            cx.opts.path_cycles
        };
        let planned = plan_paths(
            cx.l,
            cx.weights,
            cycles,
            cx.opts.path_slices,
            cx.opts.atomic,
        );
        Ok(match planned {
            Ok(mut pp) => {
                pp.shadow &= cx.opts.shadow;
                // Where the record goes is judged on the frequencies the spanning tree was
                // given, else on LLVM's estimate (§5's heuristic splits every branch evenly;
                // the estimate sees `__builtin_expect`, cold and noreturn calls).
                pp.records_at_sites = pp.shadow
                    && match cx.weights {
                        Some(w) => records_at_sites(cx.l, w),
                        None => records_at_sites(
                            cx.l,
                            &crate::ir::estimate::estimated_weights(cx.func, cx.l),
                        ),
                    };
                Box::new(pp)
            }
            // Functions that cannot have paths get edge counters, and say why.
            Err(reason) => Box::new(Fallback {
                counting: Counting(edge_plan(cx.l, cx.weights, cx.opts)),
                reason,
            }),
        })
    }
}

/// A function profiled with edge counters instead of paths (also `ipath`'s).
pub(super) struct Fallback {
    pub(super) counting: Counting,
    pub(super) reason: String,
}

impl FnPlan for Fallback {
    fn num_counters(&self) -> usize {
        self.counting.num_counters()
    }
    fn fallback(&self) -> Option<&str> {
        Some(&self.reason)
    }
    fn emit(&self, cx: &EmitCx) -> Emitted {
        self.counting.emit(cx)
    }
}

impl FnPlan for PathPlan {
    fn num_counters(&self) -> usize {
        if self.hashed {
            self.slices.total as usize
        } else {
            self.num_paths as usize
        }
    }
    fn num_tables(&self) -> usize {
        usize::from(self.hashed)
    }
    fn emit(&self, cx: &EmitCx) -> Emitted {
        let (counts, storage, counters) = if self.hashed {
            let (t, home) = crate::module::path_table(cx.g, cx.table, cx.index);
            (
                Counts::Hash {
                    table: t,
                    home,
                    base: cx.base,
                },
                PathStorage::Hash { table: cx.table },
                self.slices
                    .slot_paths()
                    .into_iter()
                    .map(|p| Probe::Path(p as u64))
                    .collect(),
            )
        } else {
            (
                Counts::Array { base: cx.base },
                PathStorage::Array,
                (0..self.num_paths as u64).map(Probe::Path).collect(),
            )
        };
        apply_paths(cx.g, cx.func, cx.l, self, counts);
        Emitted {
            counters,
            paths: Some(PathMeta {
                cuts: self.cuts.iter().map(|&e| e.into()).collect(),
                numbering: self.numbering,
                num_paths: self.num_paths,
                storage,
            }),
            shadow: self.shadow,
            needs_mem2reg: true,
            ..Emitted::default()
        }
    }
}

/// The path plan of one function.
pub(crate) struct PathPlan {
    /// Cut edges (besides back edges).
    pub cuts: Vec<EdgeId>,
    /// Number of potential paths.
    pub num_paths: u128,
    /// Fingerprint of the numbering (`NumberedDag::fingerprint`), stored in the metadata.
    pub numbering: u64,
    /// Counts go to a hash table rather than the counter array.
    pub hashed: bool,
    /// What to do on each control-flow edge.
    pub actions: IdVec<EdgeId, Vec<Action>>,
    /// The function keeps a frame record.
    pub shadow: bool,
    /// The record is pushed around the calls of each block with sites rather than once per
    /// activation (`frame::records_at_sites`; set by [`Path::plan`]).
    pub records_at_sites: bool,
    /// Single-cycle loops whose counts are made at their exits (`--tally-path-cycles`); their
    /// counting actions are already taken out of `actions`.
    pub cycles: Vec<CycleLoop>,
    /// Hashed functions: the path ends counted in slices of the counter array (parallel to
    /// `actions`).
    pub slices: Slices,
}

/// Widest path end of a hashed function counted in a counter slice rather than the hash table.
const SLICE_WIDTH: u64 = 256;
/// Widest range of the paths that start by taking a back or cut edge and end by taking it
/// again (a loop's later iterations) counted in a checked slice at that edge when the edge's
/// whole range is wider (`tally.path.slice`: other values are probed as before).
const CHECKED_WIDTH: u64 = 64;
/// Least share of the paths through a checked end that started by taking its back or cut edge
/// (those its slice counts), as `tally_graph::paths::slices::start_share` estimates it from the
/// weights: a path that misses the slice pays the check on top of the probe. 0: every end
/// narrow enough gets its checked slice. A share of 0.5 won pcre2 back 4 points before the
/// loop peeling, and on top of it lost bzip2 3 points, pcre2 4 and SQLite 2
/// (docs/log/paths-cost.md, "Measured: the merge").
const CHECKED_SHARE: f64 = 0.0;
/// Most counter slots a hashed function's slices take (an array function may take
/// [`ARRAY_PATHS`]).
const SLICE_BUDGET: u64 = ARRAY_PATHS as u64;

/// Most exits of a loop whose counts move to its exits: each exit pays a compare and a
/// branch per activation, and loops with many exits (bzip2's `mainGtU`, an unrolled compare
/// left on the first difference) are mostly left in their first pass, where nothing is saved.
const MAX_CYCLE_EXITS: usize = 2;

/// True when block `v` of `l` can take part in a loop whose counts wait for its exits: no
/// call other than an intrinsic (no callee can end, write or fork the frame's counts), no
/// setjmp return, no landing pad.
fn cycle_block(l: &Lowered, v: NodeId) -> bool {
    let Some(node) = l.nodes.get(v.index()) else {
        return false;
    };
    node.first_site.is_none()
        && node.after_setjmp.is_none()
        && !node.landing_pad
        && node.instrs.iter().all(|&i| {
            !i.is_call_like()
                || (i.opcode() == llvm_sys::LLVMOpcode::LLVMCall
                    && !i.calls_inline_asm()
                    && i.called_function().is_some_and(|f| f.intrinsic_id() != 0))
        })
}

/// The single-cycle loops of `l` whose counts can move to their exits
/// (`tally_graph::paths::cycles`), where every entry and exit edge has a place for code.
fn cycles_at_exits(
    l: &Lowered,
    dag: &tally_graph::paths::PathDag,
    placement: &PathPlacement,
) -> Vec<CycleLoop> {
    let sited = |e: EdgeId| {
        matches!(l.edges[e.index()], EdgeIr::Succ { .. }) && direct_site(l, e).is_some()
    };
    let splittable = |e: EdgeId| {
        matches!(
            l.edges[e.index()],
            EdgeIr::Succ {
                splittable: true,
                ..
            }
        )
    };
    cycle_loops(&l.cfg, dag, placement, |v| cycle_block(l, v))
        .into_iter()
        .filter(|c| {
            c.exits.len() <= MAX_CYCLE_EXITS
                && c.entries.iter().all(|&e| sited(e))
                && c.exits.iter().all(|&e| splittable(e))
        })
        .collect()
}

/// Plans path profiling for one function, or says why it cannot be done.
pub(crate) fn plan_paths(
    l: &Lowered,
    weights: Option<&IdVec<EdgeId, f64>>,
    cycles: PathCycles,
    slices: bool,
    atomic: bool,
) -> Result<PathPlan, String> {
    let cfg = &l.cfg;
    let numbered = number_paths_limited(cfg, MAX_PATHS).map_err(|e| e.to_string())?;
    let w = base_weights(l, weights);
    let dw = dag_weights(numbered.dag(), &w).map_err(|e| e.to_string())?;
    let incs = chord_increments(&numbered, &dw).map_err(|e| e.to_string())?;
    let placement = PathPlacement::new(&numbered, &incs).map_err(|e| e.to_string())?;
    for (e, acts) in placement.actions.iter() {
        if acts.is_empty() {
            continue;
        }
        if let EdgeIr::Succ { .. } = l.edges[e.index()] {
            if direct_site(l, e).is_none() {
                return Err(format!(
                    "path code needed on edge {e}, which can be neither split nor placed at one of its ends"
                ));
            }
        }
        for a in acts {
            let v = match *a {
                Action::Init(v)
                | Action::Add(v)
                | Action::CountAt(v)
                | Action::Count(v)
                | Action::Reinit(v) => v,
            };
            if i64::try_from(v).is_err() {
                return Err(format!("path increment {v} does not fit 64 bits"));
            }
        }
    }
    let shadow = l.may_end_early();
    let total = numbered.total();
    let hashed = total > ARRAY_PATHS;
    let loops = match cycles {
        PathCycles::All => cycles_at_exits(l, numbered.dag(), &placement),
        PathCycles::Hashed if hashed => cycles_at_exits(l, numbered.dag(), &placement),
        _ => Vec::new(),
    };
    // Narrow path ends of hashed functions count in counter slices, hottest first
    // (`tally_graph::paths::slices`; unless `--tally-path-slices=off`); not those whose counts
    // a single-cycle loop moved.
    let moved: std::collections::HashSet<EdgeId> = loops
        .iter()
        .flat_map(|cl| cl.removed.iter().map(|&(e, _)| e))
        .collect();
    let mut slices = if hashed && slices {
        // Checked slices fall back to the inline probe, which atomic builds do not have.
        let checked = if atomic { 0 } else { CHECKED_WIDTH };
        Slices::choose(
            &numbered,
            &placement,
            &dw,
            (SLICE_WIDTH, checked, CHECKED_SHARE),
            SLICE_BUDGET,
            |e| !moved.contains(&e),
        )
    } else {
        Slices::none(&placement.actions)
    };
    let actions = if loops.is_empty() {
        placement.actions
    } else {
        without_cycle_counts(&placement, &loops)
    };
    for &e in &moved {
        slices.at[e] = vec![None; actions[e].len()];
    }
    Ok(PathPlan {
        cuts: numbered.dag().cuts().collect(),
        num_paths: total,
        numbering: numbered.fingerprint(),
        hashed,
        actions,
        shadow,
        records_at_sites: false,
        cycles: loops,
        slices,
    })
}

/// Where a function's path counts go.
pub(crate) enum Counts {
    /// Counter `base + p` of the module array counts path `p`.
    Array { base: u64 },
    /// The function's `struct tally_path_table` and its home table; its counter slices start
    /// at counter `base` of the module array.
    Hash {
        table: LLVMValueRef,
        home: LLVMValueRef,
        base: u64,
    },
}

struct PathEmitter<'a, 'b> {
    em: &'a Emitter<'b>,
    r: LLVMValueRef,
    counts: Counts,
}

impl PathEmitter<'_, '_> {
    fn i64c(&self, v: i128) -> LLVMValueRef {
        const_int(self.em.g.i64t, v as i64 as u64, true)
    }
    fn load_r(&self) -> LLVMValueRef {
        self.em.load(self.em.g.i64t, self.r)
    }
    /// `r + d` (or the constant `d` when `from_r` is false).
    fn path_value(&self, d: i128, from_r: bool) -> LLVMValueRef {
        if !from_r {
            return self.i64c(d);
        }
        self.em.add(self.load_r(), self.i64c(d))
    }
    /// Counts path `p` (an i64 value).
    fn count(&self, p: LLVMValueRef, near: Val) {
        let em = self.em;
        match self.counts {
            Counts::Array { base } => em.add_to(array_slot(em, base, p), em.i64c(1)),
            Counts::Hash { table, home, .. } => match em.g.path_probe {
                Some(f) => em.call(f, &mut [table, home, p], near),
                None => em.call(em.g.path_count, &mut [table, p], near),
            },
        }
    }
    /// Adds `k` (an i64 value) to path `p`'s count.
    fn count_k(&self, p: LLVMValueRef, k: LLVMValueRef, near: Val) {
        let em = self.em;
        match self.counts {
            Counts::Array { base } => em.add_to(array_slot(em, base, p), k),
            Counts::Hash { table, home, .. } => {
                em.call(
                    crate::module::path_add_fn(em.g),
                    &mut [table, home, p, k],
                    near,
                );
            }
        }
    }
    /// On an entry edge `e` of the single-cycle loops `cycles` (allocas `slots`), at the
    /// builder's position: `n = 0` and the entry values of the `first` counts that read `r`.
    fn cycle_entries(&self, cycles: &[CycleLoop], slots: &[CycleSlots], e: EdgeId) {
        let em = self.em;
        for (cl, sl) in cycles.iter().zip(slots) {
            if !cl.entries.contains(&e) {
                continue;
            }
            em.store(self.i64c(0), sl.n);
            for (fc, f) in cl.first.iter().zip(&sl.first) {
                if let (FirstCount::FromR(d), Some(f)) = (*fc, f) {
                    em.store(self.path_value(d, true), *f);
                }
            }
        }
    }
    /// On an exit edge of `cl` (allocas `sl`), given the terminator `br dst` of a block `s`
    /// of its own on the edge: `s` branches to a new block that counts the passes made when
    /// the back edge was taken (`n >= 2`), else straight to `dst` (`tally_graph::paths::
    /// cycles`): `first` once each, `later` `n - 2` times each.
    fn cycle_exit(&self, cl: &CycleLoop, sl: &CycleSlots, s_term: Val) {
        let em = self.em;
        let s = s_term.parent();
        let dst = s_term.successor(0);
        em.at(s_term);
        let n = em.load(em.g.i64t, sl.n);
        let taken = em.icmp(LLVMIntPredicate::LLVMIntUGT, n, self.i64c(1));
        let f = append_block(em.g, em.func, "tally.cycle.exit");
        move_block_after(f, s);
        erase(s_term);
        em.at_end(s);
        em.cond_br(taken, f, dst);
        for phi in dst.phis() {
            let from_s = phi
                .incoming()
                .into_iter()
                .find(|&(_, from)| from == s)
                .map(|(v, _)| v.0)
                .expect("the split block is a predecessor of its target");
            add_incoming(phi, from_s, f);
        }
        em.at_end(f);
        let br = em.br(dst);
        em.at(br);
        for (fc, slot) in cl.first.iter().zip(&sl.first) {
            let p = match (*fc, slot) {
                (FirstCount::FromR(_), Some(slot)) => em.load(em.g.i64t, *slot),
                (FirstCount::Const(v), _) => self.i64c(v),
                (FirstCount::FromR(_), None) => unreachable!("a slot per FromR count"),
            };
            self.count(p, br);
        }
        if !cl.later.is_empty() {
            let k = em.sub(n, self.i64c(2));
            for &v in &cl.later {
                self.count_k(self.i64c(v), k, br);
            }
        }
    }
    /// Counts path `p` (an i64 value) in slice `s`: counter `base + offset + p - min`, one
    /// indexed increment (LLVM folds the constants into the address).
    fn count_in_slice(&self, s: &Slice, p: LLVMValueRef, near: Val) {
        let em = self.em;
        let Counts::Hash { base, table, home } = self.counts else {
            unreachable!("only hashed functions have slices")
        };
        if s.checked {
            // `tally.path.slice`: the slot when `p - min < width`, else the home-table probe.
            let probe =
                em.g.path_probe
                    .expect("checked slices only with the inline probe");
            let slot0 = array_slot(em, base + s.offset, em.i64c(0));
            em.call(
                crate::module::path_slice_fn(em.g, probe),
                &mut [
                    table,
                    home,
                    p,
                    self.i64c(s.min as i128),
                    em.i64c(s.width),
                    slot0,
                ],
                near,
            );
            return;
        }
        // Wrapping 64-bit arithmetic: `p - min` is in `0 .. width`.
        let at = (i128::from(base) + i128::from(s.offset) - s.min as i128) as i64 as u64;
        em.add_to(array_slot(em, at, p), em.i64c(1));
    }
    /// The actions of one edge; `slices[i]` is the counter slice of action `i`'s count, if any.
    fn emit(&self, actions: &[Action], slices: &[Option<usize>], all: &Slices, near: Val) {
        let em = self.em;
        for (i, a) in actions.iter().enumerate() {
            if let Some(s) = slices.get(i).copied().flatten() {
                let p = match *a {
                    Action::CountAt(d) => self.path_value(d, true),
                    Action::Count(v) => self.i64c(v),
                    other => unreachable!("a slice for the action {other}"),
                };
                self.count_in_slice(&all.slices[s], p, near);
                continue;
            }
            match *a {
                Action::Init(v) | Action::Reinit(v) => {
                    em.store(self.i64c(v), self.r);
                }
                Action::Add(d) => {
                    let v = self.path_value(d, true);
                    em.store(v, self.r);
                }
                Action::CountAt(d) => self.count(self.path_value(d, true), near),
                Action::Count(v) => self.count(self.i64c(v), near),
            }
        }
    }
}

/// The allocas of one single-cycle loop: its header count and the entry values of its `first`
/// counts that depend on `r`.
struct CycleSlots {
    n: LLVMValueRef,
    first: Vec<Option<LLVMValueRef>>,
}

/// A new builder for `func` at its entry's first instruction, where the allocas go (path
/// modes).
pub(super) fn emitter_at_entry(g: &Globals, func: Val) -> Emitter<'_> {
    let em = Emitter::new(g, func);
    let entry_first = func
        .first_block()
        .and_then(|bb| bb.first())
        .expect("lowered functions have an entry instruction");
    em.at(entry_first);
    em
}

/// Instruments one function for path profiling.
pub(crate) fn apply_paths(g: &Globals, func: Val, l: &Lowered, pp: &PathPlan, counts: Counts) {
    let em = emitter_at_entry(g, func);
    let rec = pp.shadow.then(|| frame_alloca(&em));
    let r = em.alloca(g.i64t, "tally.path");
    let slots: Vec<CycleSlots> = pp
        .cycles
        .iter()
        .map(|cl| CycleSlots {
            n: em.alloca(g.i64t, "tally.cycle"),
            first: cl
                .first
                .iter()
                .map(|fc| {
                    matches!(fc, FirstCount::FromR(_))
                        .then(|| em.alloca(g.i64t, "tally.cycle.first"))
                })
                .collect(),
        })
        .collect();
    let hashed = matches!(counts, Counts::Hash { .. });
    let path_site = (pp.shadow && hashed).then(|| {
        let ty = struct_type(g, &[g.ptrt, g.i64t]);
        (em.alloca(ty, "tally.pathsite"), ty)
    });
    if let (Some(rec), true) = (rec, pp.records_at_sites) {
        frame_at_sites(&em, l, rec);
    } else if let Some(rec) = rec {
        let (at, pops) = frame_plan(l);
        em.at(l.nodes[at.index()].start);
        frame_push(&em, rec, None);
        frame_exits(&em, l, rec, &pops);
    }
    let pe = PathEmitter { em: &em, r, counts };

    // Single-cycle loops: the header counts its executions.
    for (cl, sl) in pp.cycles.iter().zip(&slots) {
        let start = l.nodes[cl.header.index()].start;
        em.at(start);
        let v = em.load(g.i64t, sl.n);
        let v = em.add(v, em.i64c(1));
        em.store(v, sl.n);
    }
    let cycle_edge = |e: EdgeId| {
        pp.cycles
            .iter()
            .any(|cl| cl.entries.contains(&e) || cl.exits.contains(&e))
    };

    // Edge actions (before the site stores: a site reads r as its block sees it). Actions at
    // the start of a block go first: in a block whose only instruction is its terminator the
    // start and the end are the same insertion point, and the actions of the edge into the
    // block must run before those of the edge out of it, whatever their edge ids.
    let at_start = |e: EdgeId| {
        matches!(
            direct_site(l, e),
            Some(Realize::NodeStart(_) | Realize::Reentry(_))
        )
    };
    let in_order = pp
        .actions
        .iter()
        .filter(|&(e, _)| at_start(e))
        .chain(pp.actions.iter().filter(|&(e, _)| !at_start(e)));
    for (e, acts) in in_order {
        if acts.is_empty() && !cycle_edge(e) {
            continue;
        }
        match l.edges[e.index()] {
            EdgeIr::EarlyExit => {} // site stores below
            EdgeIr::Reentry => {
                let n = l.cfg.edge(e).dst;
                let node = &l.nodes[n.index()];
                let sj = node
                    .after_setjmp
                    .expect("re-entry vertex follows a setjmp call");
                em.at(node.start);
                for a in acts {
                    let (Action::Init(v) | Action::Reinit(v)) = *a else {
                        unreachable!("a re-entry edge only starts a path: {a}")
                    };
                    let zero = const_int(type_of(sj.0), 0, false);
                    let again = em.icmp(LLVMIntPredicate::LLVMIntNE, sj.0, zero);
                    let cur = pe.load_r();
                    let v = em.select(again, pe.i64c(v), cur);
                    em.store(v, r);
                }
            }
            EdgeIr::Entry => {
                let node = &l.nodes[0];
                em.at(node.start);
                pe.emit(acts, &pp.slices.at[e], &pp.slices, node.start);
            }
            EdgeIr::Fallthrough | EdgeIr::AfterCalls | EdgeIr::Return | EdgeIr::Succ { .. } => {
                let at = match direct_site(l, e).expect("checked by plan_paths") {
                    Realize::NodeEnd(n) => l.nodes[n.index()].end,
                    Realize::NodeStart(n) => l.nodes[n.index()].start,
                    Realize::Split(_) => {
                        let EdgeIr::Succ { term, index, .. } = l.edges[e.index()] else {
                            unreachable!("only terminator edges are split")
                        };
                        split_edge(&em, term, index)
                            .terminator()
                            .expect("split block has its branch")
                    }
                    other => unreachable!("edge {e} realized as {other:?}"),
                };
                em.at(at);
                pe.emit(acts, &pp.slices.at[e], &pp.slices, at);
                pe.cycle_entries(&pp.cycles, &slots, e);
                // A loop exit gets a block of its own, which branches around the counts.
                if let Some(i) = pp.cycles.iter().position(|cl| cl.exits.contains(&e)) {
                    let s_term = match direct_site(l, e) {
                        Some(Realize::Split(_)) => at,
                        _ => {
                            let EdgeIr::Succ { term, index, .. } = l.edges[e.index()] else {
                                unreachable!("loop exits are terminator edges")
                            };
                            split_edge(&em, term, index)
                                .terminator()
                                .expect("split block has its branch")
                        }
                    };
                    pe.cycle_exit(&pp.cycles[i], &slots[i], s_term);
                }
            }
        }
    }

    // Sites: the path a frame abandoned in this block is on.
    if let Some(rec) = rec {
        for (i, node) in l.nodes.iter().enumerate() {
            let Some(site) = node.first_site else {
                continue;
            };
            let n = NodeId::new(i);
            let ee = l
                .cfg
                .early_exit(n)
                .expect("a vertex with a site has an early-exit edge");
            em.at(site);
            let value = match pp.actions[ee].as_slice() {
                [] => None,
                [Action::CountAt(d)] => Some(pe.path_value(*d, true)),
                [Action::Count(v)] => Some(pe.path_value(*v, false)),
                other => unreachable!("early exit of {n} with actions {other:?}"),
            };
            let site_value = match (value, &pe.counts) {
                (None, _) => const_null(g.ptrt),
                (Some(p), Counts::Array { base }) => array_slot(&em, *base, p),
                (Some(p), Counts::Hash { table, .. }) => {
                    let (ps, ty) = path_site.expect("hashed functions with sites have a path site");
                    let f0 = em.struct_gep(ty, ps, 0);
                    em.store(*table, f0);
                    let f1 = em.struct_gep(ty, ps, 1);
                    em.store(p, f1);
                    // Tag the pointer with its low bit.
                    let one = em.i64c(1);
                    em.gep(i8_type(g), ps, &[one])
                }
            };
            em.store(site_value, em.field(rec, 1));
        }
    }
}

/// The address of path `p`'s counter in the module's counter array (`base + p`).
pub(crate) fn array_slot(em: &Emitter, base: u64, p: LLVMValueRef) -> LLVMValueRef {
    let i = em.add(p, em.i64c(base));
    em.inbounds_gep(em.g.i64t, em.g.counters, &[i])
}
