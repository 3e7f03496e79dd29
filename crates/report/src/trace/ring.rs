//! A flight recorder's file (`TALLY_TRACE_RING`, `c/wring.c`): each thread regenerated from
//! its oldest chunk's synchronization point, and its call stack at the end.

use super::program::Program;
use super::stream::{Names, Stream};
use std::collections::HashMap;
use tally_graph::witness::regen::{Expect, RecordSource, Regenerator, Visit};
use tally_graph::witness::{Callee, FuncId, Record, RegenError};

/// Why [`report`](super::report) refuses a flight recorder's file.
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
pub(super) struct Counting<'s, S> {
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
pub(super) struct Until<'s, S> {
    pub(super) src: S,
    pub(super) stop: &'s std::cell::Cell<bool>,
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
pub(super) fn ring_stream(chunks: &[tally_format::trace::RingChunk]) -> (Vec<u8>, u64) {
    let mut w = tally_graph::witness::code::BitWriter::new();
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
pub(super) fn ring_frame(
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
pub(super) fn walk_ring_thread(
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
