//! `tally trace`: the executed block sequence of each thread, regenerated from a witness
//! trace (`--tally-mode=trace`, `tally_format::trace::read_witness_trace`) and the profile the
//! same run wrote (its metadata holds each function's graph, call sites and plan). Regeneration
//! is Ball & Larus 1994's Fig. 14 with a stack of active procedures
//! (`tally_graph::witness::regen`); this module resolves the trace's `(module slot, function
//! index)` names and decodes the runtime's bit stream (`crates/runtime/c/wtrace/`). [`report`] is
//! `tally report --trace`: the block and edge counts of the regenerated execution, counted as it is
//! regenerated. A flight recorder's file (`TALLY_TRACE_RING`, `c/wring.c`) is regenerated per
//! thread from its oldest chunk's synchronization point ([`RingEnd`]: the tail and the call stack
//! at the end); it has no counts.

pub mod paths;
mod program;
mod render;
mod ring;
pub mod stats;
mod stream;

use program::{program, Program};
pub use render::{render, render_trace, Rendered};
use ring::{walk_ring_thread, Until};
pub use ring::{RingEnd, StackFrame, FLIGHT_RECORDER_NO_COUNTS};
use std::collections::HashMap;
use stream::{records_end, Names, Stream};
use tally_format::profile::Profile;
use tally_format::trace::{read_witness_trace, WitnessTrace};
use tally_graph::witness::regen::{Regenerator, Visit};
use tally_graph::witness::RegenError;

/// What the reader says when a thread landed where regeneration cannot follow (the witness
/// record code's "lost" landing).
pub use tally_graph::witness::code::NOT_EXACT;

/// One executed block.
#[derive(Clone, PartialEq, Eq, Debug, serde::Serialize)]
pub struct Block {
    /// The thread (numbered from 1 in the order threads first wrote).
    pub thread: u32,
    /// The function's linkage name.
    pub function: String,
    /// The block's index in the function's graph.
    pub block: u32,
    /// Its source file, if known.
    pub file: Option<String>,
    /// Its line (0 when unknown).
    pub line: u32,
}

/// The regenerated execution.
#[derive(Clone, PartialEq, Eq, Debug, Default, serde::Serialize)]
pub struct Regenerated {
    /// Every block, thread by thread, in execution order within each thread.
    pub blocks: Vec<Block>,
    /// Threads whose regeneration stopped early, and why (their blocks up to that point are
    /// in [`Regenerated::blocks`]).
    pub stopped: Vec<(u32, String)>,
    /// Size of the trace file in bytes.
    pub trace_bytes: usize,
    /// A flight recorder's file (`TALLY_TRACE_RING`): how each thread ends.
    pub ring: Vec<RingEnd>,
    /// The streams of signal handlers that interrupted traced code (each a thread of its own
    /// in [`Regenerated::blocks`]), in the order written.
    pub signals: Vec<tally_format::trace::SignalStream>,
}

/// Why a stream ([`WitnessTrace::cut`]) stops where a signal handler left its code.
const CUT: &str = "a signal handler interrupted this thread's traced code and left it by \
                   siglongjmp or an exception, at an unknown point after its last record: \
                   regeneration is not exact past that record, and the thread wrote no more";

/// What [`walk`] returns: the threads that stopped early, and why; a flight recorder's ends.
type Walked = (Vec<(u32, String)>, Vec<RingEnd>);

/// Regenerates every thread of the witness trace `bytes` against the program `p` (of the
/// run's profile), calling `each` with the thread and every event as it comes (nothing is
/// kept) and the slot of its edge ([`Regenerator::slot`]: function `i`'s edges are the slots
/// from the number of edges of the functions before it); returns the threads that stopped
/// early, and why, and the ends of a flight recorder's threads.
fn walk(
    trace: &WitnessTrace,
    p: &Program<'_>,
    each: impl FnMut(u32, Visit, usize),
) -> Result<Walked, String> {
    walk_until(trace, p, &std::cell::Cell::new(false), each)
}

/// [`walk`], stopping once `each` sets `stop`: the thread being regenerated ends at its next
/// record (a few blocks of witness-free code may still be visited before it), the threads
/// after it are not regenerated, and only the threads regenerated to their end say whether
/// they stopped early. A flight recorder's threads, bounded by the ring's size, are always
/// walked whole (their ends give the call stacks).
fn walk_until(
    trace: &WitnessTrace,
    p: &Program<'_>,
    stop: &std::cell::Cell<bool>,
    mut each: impl FnMut(u32, Visit, usize),
) -> Result<Walked, String> {
    let names = Names::new(trace, &p.ids);
    let regen = Regenerator::new(&p.funcs);
    let mut stopped = Vec::new();
    let cut: std::collections::HashSet<u32> = trace.cut.iter().copied().collect();
    for (thread, stream) in &trace.threads {
        if stop.get() {
            break;
        }
        let mut src = Until {
            src: Stream::new(stream, records_end(stream), &names),
            stop,
        };
        let r = regen.run_slotted(&mut src, |v, slot| each(*thread, v, slot));
        if stop.get() {
            // Cut short by the caller: how the rest of this thread would end is not known.
            break;
        }
        if cut.contains(thread) {
            // Its code was left at an unknown point after its last record: whatever the
            // regenerator made of the end (it ran out of records, or took `End` for the end of
            // the thread), the blocks after that record are not known.
            stopped.push((*thread, CUT.to_string()));
        } else if let Err(e) = r {
            let why = match e {
                RegenError::Decode(m) => m,
                other => other.to_string(),
            };
            stopped.push((*thread, why));
        }
    }
    let slots: HashMap<u32, u64> = trace.modules.iter().copied().collect();
    let mut ends = Vec::new();
    for (thread, rt) in trace.ring.iter().flatten() {
        let (end, why) = walk_ring_thread(p, &regen, &names, &slots, *thread, rt, &mut each);
        stopped.extend(why.map(|w| (*thread, w)));
        ends.push(end);
    }
    Ok((stopped, ends))
}

/// Regenerates every thread of the witness trace `bytes`, written by a run whose profile is
/// `profile`.
pub fn regenerate(bytes: &[u8], profile: &Profile) -> Result<Regenerated, String> {
    let mut blocks = Vec::new();
    let trace = read_witness_trace(bytes).map_err(|e| e.to_string())?;
    let p = program(profile, &trace)?;
    let (stopped, ring) = walk(&trace, &p, |thread, ev, _| {
        let Visit::Step(s) = ev else { return };
        blocks.push(p.block(thread, s.func, s.block));
    })?;
    Ok(Regenerated {
        blocks,
        stopped,
        trace_bytes: bytes.len(),
        ring,
        signals: trace.signals.clone(),
    })
}

/// The block and edge counts of a witness trace, as an `edge` profile of the same run would
/// give them: every regenerated block and every edge entered (`Step::via`) or returned by is
/// counted while regenerating (memory: one counter per edge and block of the program), summed
/// over threads; early-exit edges, which no record tells, are derived by flow conservation at
/// their block as `edges-naive` derives them. Returns the report and the threads whose
/// regeneration stopped early (the counts then cover the regenerated prefix).
pub fn report(
    bytes: &[u8],
    profile: &Profile,
) -> Result<(crate::Report, Vec<(u32, String)>), String> {
    if tally_format::trace::is_flight_recorder(bytes) {
        return Err(FLIGHT_RECORDER_NO_COUNTS.into());
    }
    // Flat counters, one per edge slot (function i's edges at ebase[i]..., as the
    // regenerator numbers them), one increment per event. Only edges are counted as
    // regeneration goes: a step enters its block by its `via` edge (`e0`, a normal edge, a
    // landing edge: always one whose target is the block), so a block's count is the sum of
    // its in-edges' counts, summed once at the end.
    let trace = read_witness_trace(bytes).map_err(|e| e.to_string())?;
    let p = program(profile, &trace)?;
    let mut ebase = Vec::with_capacity(p.funcs.len());
    let mut ne = 0;
    for t in &p.funcs {
        ebase.push(ne);
        ne += t.input.cfg.num_edges();
    }
    let mut edges = vec![0u64; ne];
    let stopped = {
        let ecount = edges.as_mut_slice();
        walk(&trace, &p, move |_, _, slot| {
            let c = &mut ecount[slot];
            *c = c.saturating_add(1);
        })?
        .0
    };
    let mut counted = HashMap::new();
    for (i, t) in p.funcs.iter().enumerate() {
        let cfg = &t.input.cfg;
        let (ne, nb) = (cfg.num_edges(), cfg.num_blocks());
        let mut e = edges[ebase[i]..ebase[i] + ne].to_vec();
        let mut b = vec![0u64; nb];
        for (x, edge) in cfg.edges() {
            if let Some(c) = b.get_mut(edge.dst.index()) {
                *c = c.saturating_add(e[x.index()]);
            }
        }
        for v in cfg.blocks() {
            let Some(ee) = cfg.early_exit(v) else {
                continue;
            };
            let left = cfg
                .succs(v)
                .iter()
                .filter(|&&x| x != ee)
                .fold(0u64, |a, x| a.saturating_add(e[x.index()]));
            e[ee.index()] = b[v.index()].saturating_sub(left);
        }
        counted.insert(p.at[i], (e, b));
    }
    // (The graphs `program` built from the same metadata.)
    let cfgs =
        p.at.iter()
            .zip(&p.funcs)
            .map(|(&at, t)| (at, &t.input.cfg))
            .collect();
    let r = crate::analyze(
        profile,
        &crate::Inputs {
            counted,
            cfgs,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    Ok((r, stopped))
}

/// One event of [`activity`], in execution order within its thread.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Activity {
    /// A block of the function at `at` (`(module index, function index)` in the profile)
    /// entered by the edge `via`: `e0` starts an activation; a `Reentry` edge is a `longjmp`
    /// landing (the activations above the landing one were abandoned).
    Step {
        /// The function.
        at: (usize, usize),
        /// The block entered.
        block: tally_graph::NodeId,
        /// The edge by which it was entered.
        via: tally_graph::EdgeId,
    },
    /// The innermost activation, of the function at `at`, returned by its `Return` edge.
    Return {
        /// The function.
        at: (usize, usize),
        /// The `Return` edge.
        edge: tally_graph::EdgeId,
    },
}

/// Regenerates every thread of the witness trace `bytes` (threads one after another), calling
/// `each(thread, event)` for every block entered and every return: for readers that follow
/// activations (`crate::tracepaths`). Returns the threads that stopped early, and why.
pub fn activity(
    bytes: &[u8],
    profile: &Profile,
    mut each: impl FnMut(u32, Activity),
) -> Result<Vec<(u32, String)>, String> {
    if tally_format::trace::is_flight_recorder(bytes) {
        return Err(FLIGHT_RECORDER_NO_COUNTS.into());
    }
    let trace = read_witness_trace(bytes).map_err(|e| e.to_string())?;
    let p = program(profile, &trace)?;
    let (stopped, _) = walk(&trace, &p, |thread, ev, _| {
        let a = match ev {
            Visit::Step(s) => Activity::Step {
                at: p.at[s.func.index()],
                block: s.block,
                via: s.via,
            },
            Visit::Return(f, edge) => Activity::Return {
                at: p.at[f.index()],
                edge,
            },
        };
        each(thread, a);
    })?;
    Ok(stopped)
}
