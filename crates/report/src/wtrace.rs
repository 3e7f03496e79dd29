//! `tally trace`: the executed block sequence of each thread, regenerated from a witness
//! trace (`--tally-mode=trace`, `tally_format::trace::read_witness_trace`) and the profile the
//! same run wrote (its metadata holds each function's graph, call sites and plan). Regeneration
//! is Ball & Larus 1994's Fig. 14 with a stack of active procedures
//! (`tally_graph::witness::regen`); this module resolves the trace's `(module slot, function
//! index)` names and decodes the runtime's bit stream (`crates/runtime/c/wtrace.c`). [`report`] is
//! `tally report --trace`: the block and edge counts of the regenerated execution, counted as it is
//! regenerated. A flight recorder's file (`TALLY_TRACE_RING`, `c/wring.c`) is regenerated per
//! thread from its oldest chunk's synchronization point ([`RingEnd`]: the tail and the call stack
//! at the end); it has no counts.

pub mod stats;

use std::collections::HashMap;
use tally_format::profile::Profile;
use tally_format::trace::{read_witness_trace, WitnessTrace};
use tally_format::{FunctionMeta, WCallee};
use tally_graph::witness::bits::EnterCoder;
use tally_graph::witness::regen::{Expect, RecordSource, Regenerator, Visit};
use tally_graph::witness::{
    check_plan, paths::paths_plan, CallSite, Callee, FuncId, FunctionInput, Landing, Plan,
    PlanKind, Record, RegenError, Traced, Witness,
};
use tally_graph::IdVec;

/// What the reader says when a thread landed where regeneration cannot follow.
pub const NOT_EXACT: &str =
    "regeneration not exact past this point: control reached a function trace mode could not instrument";

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

struct Program<'a> {
    funcs: Vec<Traced>,
    /// For each FuncId: its metadata and its module's file table.
    meta: Vec<(&'a FunctionMeta, &'a [String])>,
    /// For each FuncId: its module's index in the profile and its index in the module.
    at: Vec<(usize, usize)>,
    /// `(module hash, function index)` -> FuncId.
    ids: HashMap<(u64, u32), FuncId>,
}

impl Program<'_> {
    /// Block `block` of function `func`, run by `thread`, with its source line.
    fn block(&self, thread: u32, func: FuncId, block: tally_graph::NodeId) -> Block {
        let (f, files) = self.meta[func.index()];
        let loc = f.blocks.get(block.index());
        Block {
            thread,
            function: f.name.clone(),
            block: block.index() as u32,
            file: loc
                .and_then(|l| l.file)
                .and_then(|i| files.get(i.0 as usize).cloned()),
            line: loc.map_or(0, |l| l.line),
        }
    }
}

/// The resolution of each module's external callees (`WCallee::Extern`), by module hash, from
/// the trace's resolution chunks: `None` for a module that never ran (no slot: its external
/// calls never ran either).
struct Resolved<'t> {
    slot_of: HashMap<u64, u32>,
    hash_of: HashMap<u32, u64>,
    by_slot: HashMap<u32, &'t [Option<(u32, u32)>]>,
}

impl<'t> Resolved<'t> {
    fn new(trace: &'t WitnessTrace) -> Self {
        let mut r = Resolved {
            slot_of: HashMap::new(),
            hash_of: HashMap::new(),
            by_slot: HashMap::new(),
        };
        for &(slot, hash) in &trace.modules {
            r.slot_of.entry(hash).or_insert(slot);
            r.hash_of.insert(slot, hash);
        }
        for (slot, entries) in &trace.resolutions {
            r.by_slot.insert(*slot, entries.as_slice());
        }
        r
    }

    /// The callee of external call `index` of the module hashing to `hash`: `Ok(Some((hash,
    /// function index)))` of the function the runtime found at its address, `Ok(None)` for
    /// none (or a module that never ran).
    fn callee(&self, hash: u64, index: u32) -> Result<Option<(u64, u32)>, String> {
        let Some(slot) = self.slot_of.get(&hash) else {
            return Ok(None);
        };
        let entries = self.by_slot.get(slot).ok_or(
            "the trace does not resolve a module's external calls (the process did not end \
             normally, or the trace was copied while it ran)",
        )?;
        let e = entries
            .get(index as usize)
            .ok_or_else(|| format!("external call {index} out of range of module slot {slot}"))?;
        Ok(e.and_then(|(s, i)| Some((*self.hash_of.get(&s)?, i))))
    }
}

fn program<'a>(profile: &'a Profile, trace: &WitnessTrace) -> Result<Program<'a>, String> {
    let resolved = Resolved::new(trace);
    let mut p = Program {
        funcs: Vec::new(),
        meta: Vec::new(),
        at: Vec::new(),
        ids: HashMap::new(),
    };
    let mut by_name: HashMap<(u64, &str), FuncId> = HashMap::new();
    // Functions that are instrumented but not traced: calls to them are unknown calls, whose
    // callee writes a "lost" record.
    let mut untraced: HashMap<(u64, &str), ()> = HashMap::new();
    for (mi, m) in profile.modules.iter().enumerate() {
        for (i, f) in m.meta.functions.iter().enumerate() {
            if f.wtrace.as_ref().is_some_and(|w| w.untraced.is_some()) {
                untraced.insert((m.hash, f.name.as_str()), ());
            } else if f.wtrace.is_some() {
                let id = FuncId(p.meta.len() as u32);
                p.ids.insert((m.hash, i as u32), id);
                by_name.insert((m.hash, f.name.as_str()), id);
                p.meta.push((f, &m.meta.files));
                p.at.push((mi, i));
            }
        }
    }
    if p.meta.is_empty() {
        // (Every function untraced: say why one was, e.g. a `--tally-trace-floor` build.)
        let why = profile
            .modules
            .iter()
            .flat_map(|m| &m.meta.functions)
            .find_map(|f| {
                let w = f.wtrace.as_ref()?.untraced.as_ref()?;
                Some(format!(" ({}: {w})", f.name))
            });
        return Err(format!(
            "the profile holds no function traced with --tally-mode=trace{}",
            why.unwrap_or_default()
        ));
    }
    for m in &profile.modules {
        for f in &m.meta.functions {
            let Some(w) = f.wtrace.as_ref().filter(|w| w.untraced.is_none()) else {
                continue;
            };
            let bad = |what: &str| format!("corrupt trace metadata of {}: {what}", f.name);
            let cfg = f.cfg().map_err(|e| bad(&e.to_string()))?;
            if w.calls.len() != cfg.num_blocks()
                || w.witness.len() != cfg.num_edges()
                || w.read_bits.len() != cfg.num_nodes()
            {
                return Err(bad("sizes differ from the graph"));
            }
            let mut calls = Vec::with_capacity(cfg.num_nodes());
            for block in &w.calls {
                let mut sites = Vec::with_capacity(block.len());
                for c in block {
                    let callee = match c {
                        WCallee::Direct(name)
                            if untraced.contains_key(&(m.hash, name.as_str())) =>
                        {
                            Callee::Unknown
                        }
                        WCallee::Direct(name) => Callee::Direct(
                            *by_name.get(&(m.hash, name.as_str())).ok_or_else(|| {
                                let why = m
                                    .meta
                                    .skipped
                                    .iter()
                                    .find(|s| &s.name == name)
                                    .map_or("not in the metadata", |s| s.reason.as_str());
                                bad(&format!(
                                    "direct callee {name} was not instrumented ({why}); \
                                         the trace cannot be regenerated"
                                ))
                            })?,
                        ),
                        WCallee::Opaque => Callee::Opaque,
                        WCallee::Unknown => Callee::Unknown,
                        WCallee::Extern { index, .. } => {
                            // (Since trace format 4 the caller of a traced external callee
                            // writes no `Back`: the callee's `ret` tells it the callee ran.)
                            match resolved.callee(m.hash, *index).map_err(|e| bad(&e))? {
                                Some(at) => p
                                    .ids
                                    .get(&at)
                                    .map_or(Callee::Unknown, |&f| Callee::Direct(f)),
                                None => Callee::Unknown,
                            }
                        }
                    };
                    sites.push(CallSite { callee });
                }
                calls.push(sites);
            }
            calls.push(Vec::new());
            let mut unwind = IdVec::filled(cfg.num_edges(), false);
            for e in &w.unwind {
                let e = e.edge();
                if e.index() >= cfg.num_edges() {
                    return Err(bad("unwind edge out of range"));
                }
                unwind[e] = true;
            }
            let input = FunctionInput {
                cfg,
                calls: IdVec::from_vec(calls),
                unwind,
            };
            if let Some(fingerprint) = w.paths {
                let numbered = paths_plan(&input).map_err(|e| bad(&e.to_string()))?;
                if numbered.fingerprint() != fingerprint {
                    return Err(bad("the path numbering differs from the instrumented one"));
                }
            }
            let plan = Plan {
                kind: if w.paths.is_some() {
                    PlanKind::Paths
                } else if w.branch {
                    PlanKind::Branch
                } else {
                    PlanKind::Witness
                },
                witness: IdVec::from_vec(
                    w.witness
                        .iter()
                        .map(|x| x.map(|(value, bits)| Witness { value, bits }))
                        .collect(),
                ),
                read_bits: IdVec::from_vec(w.read_bits.clone()),
            };
            check_plan(&input, &plan).map_err(|e| bad(&e.to_string()))?;
            p.funcs.push(Traced { input, plan });
        }
    }
    Ok(p)
}

/// The runtime's bit stream of one thread, as regeneration asks for it.
struct Stream<'a> {
    bytes: &'a [u8],
    /// The stream's length in bits (at most `bytes.len() * 8`): a flight recorder's stream
    /// ends exactly where the thread's last record does, so that a witness missing there is
    /// read as the end of the stream, never as padding.
    len: u64,
    /// The bits `loaded - avail .. loaded` of the stream, least-significant first, in `buf`
    /// (the bits above `avail` are not the stream's): one refill per 56 bits read.
    buf: u64,
    avail: u32,
    loaded: u64,
    ended: bool,
    names: &'a Names,
    /// The state behind `Enter`'s code (trace format 5), over `slot << 32 | index`.
    enters: EnterCoder,
}

impl<'a> Stream<'a> {
    /// The first `len` bits of `bytes`, read from the start with a fresh `Enter` coder.
    fn new(bytes: &'a [u8], len: u64, names: &'a Names) -> Self {
        Stream {
            bytes,
            len,
            buf: 0,
            avail: 0,
            loaded: 0,
            ended: false,
            names,
            enters: EnterCoder::default(),
        }
    }
}

/// The functions an `Enter` record can name, by module slot and function index: looked up
/// once per `Enter`, so by index where the slots are small (the runtime numbers them from 1).
struct Names {
    /// Slot -> index in `modules`, for slots below [`Names::DENSE`].
    dense: Vec<Option<usize>>,
    /// The same for larger slots.
    sparse: HashMap<u32, usize>,
    /// Per named module: function index -> FuncId.
    modules: Vec<Vec<Option<FuncId>>>,
}

impl Names {
    const DENSE: u32 = 1 << 16;

    fn new(trace: &WitnessTrace, ids: &HashMap<(u64, u32), FuncId>) -> Names {
        let mut n = Names {
            dense: Vec::new(),
            sparse: HashMap::new(),
            modules: Vec::new(),
        };
        let mut by_hash: HashMap<u64, usize> = HashMap::new();
        for (&(hash, i), &f) in ids {
            let at = *by_hash.entry(hash).or_insert_with(|| {
                n.modules.push(Vec::new());
                n.modules.len() - 1
            });
            let funcs = &mut n.modules[at];
            let i = i as usize;
            if funcs.len() <= i {
                funcs.resize(i + 1, None);
            }
            funcs[i] = Some(f);
        }
        for &(slot, hash) in &trace.modules {
            let Some(&at) = by_hash.get(&hash) else {
                continue;
            };
            if slot < Self::DENSE {
                if n.dense.len() <= slot as usize {
                    n.dense.resize(slot as usize + 1, None);
                }
                n.dense[slot as usize] = Some(at);
            } else {
                n.sparse.insert(slot, at);
            }
        }
        n
    }

    fn get(&self, slot: u64, index: u64) -> Option<FuncId> {
        let slot = u32::try_from(slot).ok()?;
        let m = if slot < Self::DENSE {
            *self.dense.get(slot as usize)?
        } else {
            self.sparse.get(&slot).copied()
        }?;
        *self.modules[m].get(usize::try_from(index).ok()?)?
    }
}

fn cut() -> RegenError {
    RegenError::Decode("the trace ends inside a control record".into())
}

impl Stream<'_> {
    /// The next `bits` (at most 56) bits, least-significant first, or `None` (nothing
    /// consumed) where fewer are left.
    #[inline(always)]
    fn get(&mut self, bits: u8) -> Option<u64> {
        debug_assert!(bits <= 56);
        let bits = u32::from(bits);
        if self.avail < bits {
            self.refill();
            if self.avail < bits {
                return None;
            }
        }
        let v = self.buf & ((1u64 << bits) - 1);
        self.buf >>= bits;
        self.avail -= bits;
        Some(v)
    }

    /// Loads `buf` from the current position: one unaligned 8-byte load where the stream has
    /// 8 bytes left, a byte copy at its end; at most 56 bits, and none past `len`.
    #[inline(never)]
    fn refill(&mut self) {
        let pos = self.pos();
        let byte = (pos / 8) as usize;
        let shift = pos % 8;
        let word = match self.bytes.get(byte..byte + 8) {
            Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
            None => {
                let mut w = [0u8; 8];
                let tail = self.bytes.get(byte..).unwrap_or(&[]);
                w[..tail.len()].copy_from_slice(tail);
                u64::from_le_bytes(w)
            }
        };
        let avail = (64 - shift).min(56).min(self.len.saturating_sub(pos));
        self.buf = word >> shift;
        self.avail = avail as u32;
        self.loaded = pos + avail;
    }

    /// The position of the next bit read.
    fn pos(&self) -> u64 {
        self.loaded - u64::from(self.avail)
    }

    /// The stream ends here (`End`): nothing more is read from it.
    fn end(&mut self) {
        self.ended = true;
        self.len = self.pos();
        self.loaded = self.len;
        self.avail = 0;
    }

    fn varint(&mut self) -> Result<u64, RegenError> {
        let first = self.get(8).ok_or_else(cut)?;
        if first & 0x80 == 0 {
            return Ok(first);
        }
        let mut v = first & 0x7f;
        for shift in (7..64).step_by(7) {
            let byte = self.get(8).ok_or_else(cut)?;
            v |= (byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(RegenError::Decode("varint longer than 64 bits".into()))
    }
}

impl RecordSource for Stream<'_> {
    #[inline]
    fn try_witness(&mut self, bits: u8) -> Option<u32> {
        // (After `End` the stream is empty: `get` gives `None`.)
        if bits > 32 {
            return None;
        }
        self.get(bits).map(|v| v as u32)
    }

    fn read(&mut self, expect: Expect) -> Result<Option<Record>, RegenError> {
        if self.ended {
            return Ok(None);
        }
        match expect {
            Expect::Witness(bits) if bits > 32 => Err(RegenError::Decode(format!(
                "a witness of {bits} bits (at most 32 are written)"
            ))),
            Expect::Witness(bits) => Ok(self.get(bits).map(|v| Record::Witness {
                value: v as u32,
                bits,
            })),
            Expect::Control => {
                // A prefix code: `1` Back; `0` then a 2-bit kind.
                let Some(back) = self.get(1) else {
                    return Ok(None);
                };
                if back == 1 {
                    return Ok(Some(Record::Back));
                }
                let kind = self.get(2).ok_or_else(cut)?;
                match kind {
                    0 | 3 => {
                        let (slot, index) = if kind == 3 {
                            let k = self.enters.predicted();
                            (k >> 32, k & 0xffff_ffff)
                        } else if self.get(1).ok_or_else(cut)? == 1 {
                            let i = self.get(4).ok_or_else(cut)?;
                            let k = self.enters.recent(i as usize).ok_or_else(|| {
                                RegenError::Decode(format!(
                                    "Enter names recent function {i}, which the stream has not entered"
                                ))
                            })?;
                            (k >> 32, k & 0xffff_ffff)
                        } else {
                            (self.varint()?, self.varint()?)
                        };
                        if slot > u64::from(u32::MAX) || index > u64::from(u32::MAX) {
                            return Err(RegenError::Decode(format!(
                                "Enter names function {index} of module slot {slot}, out of range"
                            )));
                        }
                        self.enters.entered(slot << 32 | index);
                        match self.names.get(slot, index) {
                            Some(f) => Ok(Some(Record::Enter(f))),
                            None => Err(RegenError::Decode(format!(
                                "Enter names function {index} of module slot {slot}, which the profile does not hold"
                            ))),
                        }
                    }
                    1 => {
                        let how = match self.get(2).ok_or_else(cut)? {
                            0 => Landing::Reentry,
                            1 => Landing::Unwind,
                            _ => return Err(RegenError::Decode(NOT_EXACT.into())),
                        };
                        let abandoned = self.varint()?;
                        let to = self.varint()?;
                        let small = |v: u64| {
                            u32::try_from(v).map_err(|_| {
                                RegenError::Decode(format!("landing operand {v} too large"))
                            })
                        };
                        Ok(Some(Record::Unwind {
                            abandoned: small(abandoned)?,
                            to: tally_graph::NodeId::new(small(to)? as usize),
                            how,
                        }))
                    }
                    _ => {
                        self.end();
                        Ok(Some(Record::End))
                    }
                }
            }
        }
    }
}

/// Where the records of a full thread stream end: before its `End`.
///
/// The runtime ends every stream with `End` (`0` then kind `10`: the bits 0, 0, 1) and pads it
/// with zeros to a byte, so `End`'s last bit is the stream's last set bit. Reading the stream
/// only up to `End`'s first bit reads `End` as the end of the stream, which regeneration
/// treats alike at a control record, and, unlike `End`'s bits, also where the thread had not
/// yet written a witness or path number it was due (a fault between two records): there it
/// stops (`Truncated`) instead of decoding `End`'s bits as that record. A stream without
/// `End` (a process killed before its streams ended) whose last set bit happens to follow two
/// clear ones loses at most its last 10 bits: what it regenerates is still a prefix.
fn records_end(bytes: &[u8]) -> u64 {
    let all = bytes.len() as u64 * 8;
    let Some(i) = bytes.iter().rposition(|&b| b != 0) else {
        return all;
    };
    let last = i as u64 * 8 + 7 - u64::from(bytes[i].leading_zeros());
    let bit = |k: u64| bytes[(k / 8) as usize] >> (k % 8) & 1 == 1;
    if last >= 2 && !bit(last - 1) && !bit(last - 2) {
        last - 2
    } else {
        all
    }
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
    let r = crate::analyze(profile, &crate::Inputs { counted, cfgs }).map_err(|e| e.to_string())?;
    Ok((r, stopped))
}

/// `tally trace`'s output: blocks `from..from + limit` (0: all) of those `keep` selects, as
/// text (one line per block: index, thread, function, block, file:line) or JSON; the threads
/// that stopped early are listed after them. (The same text as [`render_trace`], from a
/// sequence already in memory; where a limit was reached, `render_trace` stopped regenerating
/// there and lists only the threads it regenerated to their end, this lists all of
/// `r.stopped`.) A limit that is reached leaves the total unknown: the text's first line then
/// says which blocks are shown instead of how many there are, and JSON's `total_blocks` is
/// `null`.
pub fn render(
    r: &Regenerated,
    keep: impl Fn(&Block) -> bool,
    from: usize,
    limit: usize,
    json: bool,
) -> String {
    let mut out = Vec::new();
    let mut w = Shown::new(&mut out, from, limit, json, r.blocks.len(), r.trace_bytes);
    for (i, b) in r.blocks.iter().enumerate() {
        if keep(b) {
            w.block(i, b);
        }
    }
    w.finish(&r.stopped, &r.signals, &r.ring, r.blocks.len());
    String::from_utf8(out).unwrap_or_default()
}

/// What [`render_trace`] returns: the threads that stopped early (thread, why), and the first
/// error writing the output, if any.
pub type Rendered = (Vec<(u32, String)>, Option<std::io::Error>);

/// `tally trace FILE`: [`render`]'s output for the witness trace `bytes` (of the run whose
/// profile is `profile`), written to `out` as regeneration goes. Memory is the regenerator's
/// and the trace's, not the sequence's (which [`regenerate`] keeps, about 40 bytes a block):
/// without a limit, the text's first line gives the number of blocks, so text takes two
/// passes, one counting; with one, regeneration stops at the last block shown (time bounded by
/// the blocks up to it, not by the trace).
/// `keep` selects blocks by function name. Returns the threads that stopped early and the
/// first error writing to `out`, if any (nothing more was written after it).
pub fn render_trace(
    bytes: &[u8],
    profile: &Profile,
    keep: impl Fn(&str) -> bool,
    from: usize,
    limit: usize,
    json: bool,
    out: &mut dyn std::io::Write,
) -> Result<Rendered, String> {
    let trace = read_witness_trace(bytes).map_err(|e| e.to_string())?;
    let p = program(profile, &trace)?;
    let mut total = 0usize;
    if !json && limit == 0 {
        walk(&trace, &p, |_, ev, _| {
            total += usize::from(matches!(ev, Visit::Step(_)))
        })?;
    }
    let mut w = Shown::new(out, from, limit, json, total, bytes.len());
    let mut index = 0usize;
    // With a limit, regeneration stops once the last block asked for is shown; and once the
    // output cannot be written (`tally trace ... | head`), nothing more can be shown.
    let stop = std::cell::Cell::new(false);
    let (stopped, ring) = walk_until(&trace, &p, &stop, |thread, ev, _| {
        if w.error.is_some() {
            stop.set(true);
            return;
        }
        let Visit::Step(s) = ev else { return };
        let f = p.meta[s.func.index()].0;
        index += 1;
        if !keep(&f.name) {
            return;
        }
        if !w.wants() {
            w.skip_one(true);
            return;
        }
        w.block(index - 1, &p.block(thread, s.func, s.block));
        if w.full() {
            stop.set(true);
        }
    })?;
    w.finish(&stopped, &trace.signals, &ring, index);
    Ok((stopped, w.error))
}

/// The writer of `tally trace`'s output, block by block: which of the selected blocks are
/// shown (`from`, `limit`), and the text or JSON around them (JSON as `serde_json` prints it
/// pretty, its keys in order: `blocks` first, so it streams too).
struct Shown<'a> {
    out: &'a mut dyn std::io::Write,
    json: bool,
    /// Selected blocks to pass over, then to show.
    skip: usize,
    left: usize,
    shown: usize,
    trace_bytes: usize,
    error: Option<std::io::Error>,
}

impl<'a> Shown<'a> {
    fn new(
        out: &'a mut dyn std::io::Write,
        from: usize,
        limit: usize,
        json: bool,
        total: usize,
        trace_bytes: usize,
    ) -> Self {
        let mut w = Shown {
            out,
            json,
            skip: from,
            left: if limit == 0 { usize::MAX } else { limit },
            shown: 0,
            trace_bytes,
            error: None,
        };
        if json {
            w.put("{\n  \"blocks\": [");
        } else if limit == 0 {
            w.put(&format!(
                "{total} blocks regenerated from {trace_bytes} trace bytes\n"
            ));
        } else {
            let skip = match from {
                0 => String::new(),
                n => format!(" after the first {n}"),
            };
            w.put(&format!(
                "at most {limit} blocks{skip}, regenerated from {trace_bytes} trace bytes \
                 (regeneration stops after them; --limit 0 shows and counts all)\n"
            ));
        }
        w
    }

    /// Whether the limit is reached: every block asked for is shown.
    fn full(&self) -> bool {
        self.left == 0
    }

    fn put(&mut self, s: &str) {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(s.as_bytes()) {
                self.error = Some(e);
            }
        }
    }

    /// Whether the next selected block is shown.
    fn wants(&self) -> bool {
        self.skip == 0 && self.left > 0 && self.error.is_none()
    }

    /// A block not shown: passed over when `selected`.
    fn skip_one(&mut self, selected: bool) {
        if selected && self.skip > 0 {
            self.skip -= 1;
        }
    }

    /// Selected block `b`, the `i`th of the sequence.
    fn block(&mut self, i: usize, b: &Block) {
        if !self.wants() {
            self.skip_one(true);
            return;
        }
        self.left -= 1;
        self.shown += 1;
        if self.json {
            let v = serde_json::json!({
                "index": i, "thread": b.thread, "function": b.function,
                "block": b.block, "file": b.file, "line": b.line,
            });
            let text = serde_json::to_string_pretty(&v).unwrap_or_default();
            let sep = if self.shown == 1 { "\n" } else { ",\n" };
            let mut s = String::from(sep);
            for (k, line) in text.lines().enumerate() {
                if k > 0 {
                    s.push('\n');
                }
                s.push_str("    ");
                s.push_str(line);
            }
            self.put(&s);
            return;
        }
        let at = match &b.file {
            Some(f) => format!("{f}:{}", b.line),
            None => "?".into(),
        };
        self.put(&format!(
            "{i:>10}  t{}  {}  b{}  {at}\n",
            b.thread, b.function, b.block
        ));
    }

    fn finish(
        &mut self,
        stopped: &[(u32, String)],
        signals: &[tally_format::trace::SignalStream],
        ring: &[RingEnd],
        total: usize,
    ) {
        if !self.json {
            let mut s = String::new();
            for (t, why) in stopped {
                s.push_str(&format!("thread {t}: {why}\n"));
            }
            s.push_str(&render_signals(signals));
            s.push_str(&render_ring(ring));
            self.put(&s);
            return;
        }
        let stopped: Vec<serde_json::Value> = stopped
            .iter()
            .map(|(t, why)| serde_json::json!({"thread": t, "error": why}))
            .collect();
        // A limit that was reached stopped regeneration there: the total is not known.
        let total = (!self.full()).then_some(total);
        let mut v = serde_json::json!({
            "total_blocks": total,
            "trace_bytes": self.trace_bytes,
            "stopped": stopped,
        });
        if !signals.is_empty() {
            v["signal_handlers"] = signals
                .iter()
                .map(|h| {
                    serde_json::json!({
                        "thread": h.stream, "signal": h.signal, "interrupted": h.interrupted,
                    })
                })
                .collect();
        }
        if !ring.is_empty() {
            v["ring"] = serde_json::to_value(ring).unwrap_or_default();
        }
        // The rest of the object, after `blocks` (its first key): `{` and a newline dropped.
        let rest = serde_json::to_string_pretty(&v).unwrap_or_default();
        let rest = rest.strip_prefix("{\n").unwrap_or(&rest);
        let close = if self.shown == 0 { "],\n" } else { "\n  ],\n" };
        self.put(&format!("{close}{rest}\n"));
    }
}

/// Which threads of `tally trace`'s text are signal handlers' streams: one line for a few,
/// a summary per signal and interrupted thread for many.
fn render_signals(signals: &[tally_format::trace::SignalStream]) -> String {
    let mut s = String::new();
    if signals.len() <= 8 {
        for h in signals {
            s.push_str(&format!(
                "thread {}: a handler of signal {} that interrupted thread {}\n",
                h.stream, h.signal, h.interrupted
            ));
        }
        return s;
    }
    let mut by: std::collections::BTreeMap<(u32, u32), (u32, u32, usize)> = Default::default();
    for h in signals {
        let e = by
            .entry((h.signal, h.interrupted))
            .or_insert((h.stream, h.stream, 0));
        e.0 = e.0.min(h.stream);
        e.1 = e.1.max(h.stream);
        e.2 += 1;
    }
    for ((signal, interrupted), (lo, hi, n)) in by {
        s.push_str(&format!(
            "threads {lo}-{hi}: {n} handlers of signal {signal} that interrupted thread {interrupted}\n"
        ));
    }
    s
}

/// The flight recorder's part of `tally trace`'s text: per thread, how much of its tail was
/// regenerated and its call stack at the dump, top first.
fn render_ring(ends: &[RingEnd]) -> String {
    let mut s = String::new();
    for e in ends {
        s.push_str(&format!(
            "thread {}: flight recorder: its last {} blocks",
            e.thread, e.blocks
        ));
        if e.certain < e.blocks {
            s.push_str(&format!(
                " (the last {} walked past the last record: it may have stopped among them)",
                e.blocks - e.certain
            ));
        }
        s.push_str(&format!(
            "; call stack at the end ({} activations):\n",
            e.depth
        ));
        for (i, f) in e.stack.iter().enumerate() {
            let at = match &f.file {
                Some(file) => format!("{file}:{}", f.line),
                None => "?".into(),
            };
            let block = f.block.map_or("b?".into(), |b| format!("b{b}"));
            s.push_str(&format!("  #{i:<3} {}  {block}  {at}\n", f.function));
        }
        if (e.stack.len() as u64) < u64::from(e.depth) {
            s.push_str(&format!(
                "  ... {} deeper activations not recorded\n",
                u64::from(e.depth) - e.stack.len() as u64
            ));
        }
    }
    s
}

/// Why [`report`] refuses a flight recorder's file.
pub const FLIGHT_RECORDER_NO_COUNTS: &str = "a flight recorder's trace (TALLY_TRACE_RING) holds only the last blocks of each thread: it has no counts (`tally trace` shows them)";

/// One activation of a flight recorder thread's call stack at the dump.
#[derive(Clone, PartialEq, Eq, Debug, serde::Serialize)]
pub struct StackFrame {
    /// The function's linkage name.
    pub function: String,
    /// Its current block: for a caller the block of the call it is in, for the top
    /// activation the last block regeneration reached in it (`None`: not regenerated).
    pub block: Option<u32>,
    /// The block's source file, if known.
    pub file: Option<String>,
    /// Its line (0 when unknown).
    pub line: u32,
}

/// How a flight recorder thread (`TALLY_TRACE_RING`) ends.
#[derive(Clone, PartialEq, Eq, Debug, serde::Serialize)]
pub struct RingEnd {
    /// The thread.
    pub thread: u32,
    /// Its blocks regenerated from the ring (the tail of its execution).
    pub blocks: usize,
    /// The first `certain` of them come before the last record read: the thread ran them.
    /// The others were walked from there without a record; a thread that crashed may have
    /// stopped anywhere among them.
    pub certain: usize,
    /// Traced activations at the dump (`stack` may hold fewer, bottom ones, when deeper).
    pub depth: u32,
    /// The activations at the dump as the runtime's shadow stack holds them, top first.
    pub stack: Vec<StackFrame>,
}

/// A source that counts what it read (for [`RingEnd::certain`]).
struct Counting<'s, S> {
    src: &'s mut S,
    steps: &'s std::cell::Cell<usize>,
    certain: usize,
}

impl<S: RecordSource> RecordSource for Counting<'_, S> {
    fn read(&mut self, expect: Expect) -> Result<Option<Record>, RegenError> {
        let r = self.src.read(expect)?;
        // `End` is written where the process ended, not where the thread was.
        if r.is_some_and(|r| r != Record::End) {
            self.certain = self.steps.get();
        }
        Ok(r)
    }
}

/// A record source that ends (reads as the end of the stream) once `stop` is set.
struct Until<'s, S> {
    src: S,
    stop: &'s std::cell::Cell<bool>,
}

impl<S: RecordSource> RecordSource for Until<'_, S> {
    #[inline]
    fn try_witness(&mut self, bits: u8) -> Option<u32> {
        if self.stop.get() {
            return None;
        }
        self.src.try_witness(bits)
    }

    fn read(&mut self, expect: Expect) -> Result<Option<Record>, RegenError> {
        if self.stop.get() {
            return Ok(None);
        }
        self.src.read(expect)
    }
}

/// A flight recorder's chunks as one stream: each chunk's stream bits after its sync header,
/// concatenated (the runtime padded the stream to a byte before each sync); returns the bytes
/// and the number of bits (nothing is added: where the thread's last record ends, the stream
/// ends, so a witness the thread had not written yet reads as the end).
fn ring_stream(chunks: &[tally_format::trace::RingChunk]) -> (Vec<u8>, u64) {
    let mut w = tally_graph::witness::bits::BitWriter::new();
    for c in chunks {
        let full = (c.bits / 8) as usize;
        for &b in &c.bytes[..full] {
            w.put(u64::from(b), 8);
        }
        if c.bits % 8 != 0 {
            w.put(u64::from(c.bytes[full]), (c.bits % 8) as u8);
        }
    }
    let bits = w.len();
    (w.finish().0, bits)
}

/// The function of a shadow-stack frame, and its call site's `(block, position)`.
fn ring_frame(
    p: &Program<'_>,
    slots: &HashMap<u32, u64>,
    f: &tally_format::trace::RingFrame,
) -> Result<(FuncId, Option<(usize, usize)>), String> {
    let id = slots
        .get(&f.slot)
        .and_then(|h| p.ids.get(&(*h, f.index)))
        .copied()
        .ok_or_else(|| {
            format!(
                "the flight recorder names function {} of module slot {}, which the profile does not hold",
                f.index, f.slot
            )
        })?;
    let site = f.site.and_then(|s| {
        let calls = &p.funcs[id.index()].input.calls;
        let mut k = s as usize;
        for (b, sites) in calls.iter() {
            if k < sites.len() {
                return Some((b.index(), k));
            }
            k -= sites.len();
        }
        None
    });
    Ok((id, site))
}

/// Regenerates one flight recorder thread from its oldest chunk's synchronization point:
/// the callers resume in their calls, the top activation at its entry. Returns the thread's
/// end and why regeneration stopped early, if it did.
fn walk_ring_thread(
    p: &Program<'_>,
    regen: &Regenerator<'_>,
    names: &Names,
    slots: &HashMap<u32, u64>,
    thread: u32,
    rt: &tally_format::trace::RingThread,
    each: &mut impl FnMut(u32, Visit, usize),
) -> (RingEnd, Option<String>) {
    use tally_graph::witness::Activation;
    let steps = std::cell::Cell::new(0usize);
    let last_in: std::cell::RefCell<HashMap<FuncId, tally_graph::NodeId>> = Default::default();
    let mut end = RingEnd {
        thread,
        blocks: 0,
        certain: 0,
        depth: rt.depth,
        stack: Vec::new(),
    };
    let mut stack: Vec<Activation> = Vec::new();
    let mut run = || -> Result<(), String> {
        let first = rt
            .chunks
            .first()
            .ok_or("the ring holds no whole chunk (nothing since a synchronization point fits)")?;
        let n = first.sync.len();
        for (i, f) in first.sync.iter().enumerate() {
            let (func, site) = ring_frame(p, slots, f)?;
            let input = &p.funcs[func.index()].input;
            if i + 1 == n {
                let (block, via) = (input.cfg.entry(), input.cfg.entry_edge());
                steps.set(steps.get() + 1);
                last_in.borrow_mut().insert(func, block);
                each(
                    thread,
                    Visit::Step(tally_graph::witness::Step { func, block, via }),
                    regen.slot(func, via),
                );
                stack.push(Activation {
                    func,
                    block,
                    site: 0,
                    waiting: false,
                });
                continue;
            }
            let (b, k) = site.ok_or("a synchronization point's caller is at no call site")?;
            let block = tally_graph::NodeId::new(b);
            let waiting = match input.calls[block][k].callee {
                Callee::Direct(_) => false,
                // (A `DirectBack` caller waits for the `Back` after its callee's return.)
                Callee::Unknown | Callee::DirectBack(_) => true,
                Callee::Opaque => return Err("a caller at an opaque call site".into()),
            };
            stack.push(Activation {
                func,
                block,
                site: if waiting { k } else { k + 1 },
                waiting,
            });
        }
        let (bytes, bits) = ring_stream(&rt.chunks);
        // (A flight recorder writes only the full code of `Enter`, which needs no state.)
        let mut stream = Stream::new(&bytes, bits.min(bytes.len() as u64 * 8), names);
        let mut src = Counting {
            src: &mut stream,
            steps: &steps,
            certain: 0,
        };
        let r = regen.run_from(&mut stack, &mut src, |v| {
            if let Visit::Step(s) = v {
                steps.set(steps.get() + 1);
                last_in.borrow_mut().insert(s.func, s.block);
            }
            each(thread, v, regen.slot_of(&v))
        });
        end.certain = src.certain;
        match r {
            // A ring ends where the thread's last record does: a thread stopped between a
            // branch and its witness (a fault) ends there, as `certain` says.
            Ok(()) | Err(RegenError::Truncated { .. }) => Ok(()),
            Err(RegenError::Decode(m)) => Err(m),
            Err(other) => Err(other.to_string()),
        }
    };
    let stopped = run().err();
    end.blocks = steps.get();
    // The call stack at the dump: the runtime's shadow stack; the top activation's block is
    // where regeneration left it.
    let n = rt.stack.len();
    for (i, f) in rt.stack.iter().enumerate().rev() {
        let Ok((func, site)) = ring_frame(p, slots, f) else {
            end.stack.push(StackFrame {
                function: format!("<slot {} function {}>", f.slot, f.index),
                block: None,
                file: None,
                line: 0,
            });
            continue;
        };
        let block = if i + 1 == n && n == rt.depth as usize {
            // Where regeneration left it, or (it walked on past the last record, out of
            // this activation) the last block it reached in the function.
            stack
                .last()
                .filter(|a| a.func == func && stack.len() == n)
                .map(|a| a.block)
                .or_else(|| last_in.borrow().get(&func).copied())
                .map(|b| b.index())
        } else {
            site.map(|s| s.0)
        };
        let (meta, files) = p.meta[func.index()];
        let loc = block.and_then(|b| meta.blocks.get(b));
        end.stack.push(StackFrame {
            function: meta.name.clone(),
            block: block.map(|b| b as u32),
            file: loc
                .and_then(|l| l.file)
                .and_then(|i| files.get(i.0 as usize).cloned()),
            line: loc.map_or(0, |l| l.line),
        });
    }
    (end, stopped)
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

#[cfg(test)]
mod tests {
    use super::records_end;
    use tally_graph::witness::bits::BitWriter;

    /// The stream `put`s, then `End` and its padding, as the runtime writes them.
    fn stream(puts: &[(u64, u8)], end: bool) -> (Vec<u8>, u64) {
        let mut w = BitWriter::new();
        for &(v, n) in puts {
            w.put(v, n);
        }
        let records = w.len();
        if end {
            w.put(4, 3);
        }
        (w.finish().0, records)
    }

    #[test]
    fn records_end_before_end() {
        for puts in [
            vec![],
            vec![(0, 1)],
            vec![(1, 1)],
            vec![(0, 5), (0, 7)],
            vec![(0b1011, 4), (0, 2)],
            vec![(u64::MAX, 64), (0, 3)],
        ] {
            let (bytes, records) = stream(&puts, true);
            assert_eq!(records_end(&bytes), records, "{puts:?}");
        }
        // No `End`: all of it, unless it ends like one.
        let (bytes, _) = stream(&[(0b111, 3)], false);
        assert_eq!(records_end(&bytes), 8);
        assert_eq!(records_end(&[]), 0);
        assert_eq!(records_end(&[0, 0]), 16);
    }
}
