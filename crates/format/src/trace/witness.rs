//! `trace`'s trace file (witness tracing, Ball & Larus 1994 §6; `crates/runtime/c/wtrace/`):
//! per-thread bit streams of witnesses and control records, the modules' slots, the
//! resolutions of external callees, signal-handler streams and flight-recorder rings.

use super::rc::RcModel;
use super::TraceError;

/// Magic of a witness trace (`--tally-mode=trace`, `crates/runtime/c/wtrace/`).
pub const WTRACE_MAGIC: &[u8; 8] = b"TALLYWTR";
/// Version of the witness trace format.
/// 2: a landing's `how` takes 2 bits (0 re-entry, 1 landing pad, 2 lost). 3: control records
/// are a prefix code (`1` Back, `0` + 2-bit kind) and resolution chunks
/// ([`WTRACE_RESOLVE_CHUNK`]) name the targets of external calls. 4: a call of an external
/// callee that resolves to a traced function writes no `Back` (the callee's `ret` tells the
/// caller it ran). 5: `Enter` is coded against the stream's history (kind 3: the predicted
/// function; kind 0 then `1` and a 4-bit recent position, or `0` and slot and index:
/// `tally_graph::witness::code::EnterCoder`). 7: a predicted `Enter` leaves the recent list
/// as it is (6 was the range-coded version 5; 8 is the range-coded version 7).
pub const WTRACE_VERSION: u32 = 7;
/// Version of a witness trace whose thread chunks are range-coded (`TALLY_TRACE_COMPRESS=1`,
/// [`super::rc`]): otherwise version [`WTRACE_VERSION`]'s.
pub const WTRACE_VERSION_CODED: u32 = 8;
/// Version of a witness trace whose thread streams are whole words (the default since
/// 2026-11-26, without a flight recorder or the range coder): each little-endian `u64` holds
/// up to 63 of the stream's bits above a sentinel 1 (its lowest set bit; 0 holds none), least
/// significant first, as instrumented code stages its inline word (`tally.h`), so that the
/// runtime writes the staged words as they are instead of packing them;
/// [`read_witness_trace`] unpacks them ([`unpack_words`]), so `threads` holds the same streams
/// as version 7's.
pub const WTRACE_VERSION_WORDS: u32 = 9;

/// The bits of a stream of words (version [`WTRACE_VERSION_WORDS`]), packed: each word's bits
/// above its sentinel, in order, least-significant first, the last byte padded with zeros
/// (the bytes version 7 holds). `None` when `bytes` is not whole words.
pub fn unpack_words(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut u = WordUnpacker::default();
    u.push(bytes, &mut out);
    u.finish(&mut out).then_some(out)
}

/// [`unpack_words`] chunk by chunk (a word may straddle two chunks), so that a thread's
/// stream is unpacked as the file is read.
#[derive(Default)]
struct WordUnpacker {
    pend: u64,        // bits not yet out, least-significant first
    np: u32,          // how many (< 64)
    partial: Vec<u8>, // the bytes of a word not yet whole (< 8)
}

impl WordUnpacker {
    fn word(&mut self, x: u64, out: &mut Vec<u8>) {
        if x == 0 {
            return; // (holds nothing)
        }
        let t = x.trailing_zeros(); // the sentinel
        let k = 63 - t; // the bits above it
        if k == 0 {
            return;
        }
        let bits = x >> t >> 1;
        self.pend |= bits << self.np;
        self.np += k;
        if self.np >= 64 {
            out.extend_from_slice(&self.pend.to_le_bytes());
            self.np -= 64;
            self.pend = if self.np == 0 {
                0
            } else {
                bits >> (k - self.np)
            };
        }
    }

    fn push(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        if !self.partial.is_empty() {
            let take = (8 - self.partial.len()).min(bytes.len());
            self.partial.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.partial.len() < 8 {
                return;
            }
            let x = u64::from_le_bytes(self.partial[..].try_into().expect("8 bytes"));
            self.partial.clear();
            self.word(x, out);
        }
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.word(u64::from_le_bytes(w.try_into().expect("8 bytes")), out);
        }
        self.partial.extend_from_slice(words.remainder());
    }

    /// The last bits go out; false when the stream did not end on a whole word.
    fn finish(&mut self, out: &mut Vec<u8>) -> bool {
        out.extend_from_slice(&self.pend.to_le_bytes()[..self.np.div_ceil(8) as usize]);
        self.partial.is_empty()
    }
}

/// The thread id of a chunk that resolves a module's external callees.
pub const WTRACE_RESOLVE_CHUNK: u32 = u32::MAX - 2;

/// A module slot and, per external callee of the module, the traced function found at its
/// address, `(slot, function index)`, or `None`.
pub type Resolution = (u32, Vec<Option<(u32, u32)>>);
/// The thread id of a chunk that names a module instead of carrying stream bytes.
pub const WTRACE_MODULE_CHUNK: u32 = u32::MAX;
/// The thread id of a chunk that says a stream is a signal handler's: `u32 stream, u32
/// interrupted stream (0: none), u32 signal` (docs/design/trace.md, "Signal handlers in witness
/// traces").
pub const WTRACE_SIGNAL_CHUNK: u32 = u32::MAX - 3;
/// The thread id of a chunk that says a stream ends where a `siglongjmp` or an exception out of
/// a signal handler left its code between two records: `u32 stream`.
pub const WTRACE_CUT_CHUNK: u32 = u32::MAX - 4;

/// A signal handler's stream ([`WTRACE_SIGNAL_CHUNK`]).
#[derive(Copy, Clone, PartialEq, Eq, Debug, serde::Serialize)]
pub struct SignalStream {
    /// The handler's stream.
    pub stream: u32,
    /// The stream whose code the signal interrupted (0: a thread that had none yet).
    pub interrupted: u32,
    /// The signal number.
    pub signal: u32,
}
/// Header flag (the `u32` after the version) of a flight recorder's file (`TALLY_TRACE_RING`).
pub const WTRACE_RING: u32 = 1;
/// The thread id of a flight recorder's chunk holding a thread's activations at the dump.
pub const WTRACE_STACK_CHUNK: u32 = u32::MAX - 1;

/// A traced activation as the flight recorder's shadow stack holds it.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct RingFrame {
    /// The module's trace slot.
    pub slot: u32,
    /// The function's index in the module's metadata.
    pub index: u32,
    /// The call site it is calling at (its calls numbered over its blocks in order), if any.
    pub site: Option<u32>,
}

/// One chunk of a flight recorder's ring: it starts at a synchronization point.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RingChunk {
    /// The thread's traced activations there, bottom first; the top one was just entered.
    pub sync: Vec<RingFrame>,
    /// The stream bits that follow (the bytes' last ones are padding).
    pub bits: u64,
    /// The stream bytes.
    pub bytes: Vec<u8>,
}

/// A thread of a flight recorder's file: its chunks, oldest first, and its activations at the
/// dump (bottom first; `depth` may exceed the frames recorded).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct RingThread {
    /// The chunks still in the ring, oldest first.
    pub chunks: Vec<RingChunk>,
    /// The number of traced activations at the dump.
    pub depth: u32,
    /// The recorded ones, bottom first.
    pub stack: Vec<RingFrame>,
}

/// A witness trace, split into its per-thread bit streams.
///
/// ```text
/// "TALLYWTR"  u32 version (=7, 8: range-coded, 9: words)  u32 0
/// chunk*      u32 thread  u32 length  byte[length]
/// ```
/// In version 8 ([`WTRACE_VERSION_CODED`], `TALLY_TRACE_COMPRESS=1`) a thread's chunk is
/// `u32 raw bytes` and that many bytes of its stream range-coded ([`super::rc`]);
/// [`read_witness_trace`] decodes them, so `threads` holds the same streams as version 7's.
/// In version 9 ([`WTRACE_VERSION_WORDS`], the default) a thread's chunks are whole words,
/// each up to 63 of the stream's bits above a sentinel ([`unpack_words`]), also unpacked.
/// A chunk of thread [`WTRACE_MODULE_CHUNK`] holds `u32 slot, u64 hash`: module slot `slot`
/// (named by `Enter` records) is the module whose metadata hashes to `hash`. A chunk of thread
/// [`WTRACE_RESOLVE_CHUNK`] holds `u32 slot, u32 n, n x {u32 slot', u32 index}`: the module's
/// external callee `k` (`tally_format::WCallee::Extern`) is function `index` of module `slot'`
/// (0: no traced function), as the runtime found it by address. A chunk of thread
/// [`WTRACE_SIGNAL_CHUNK`] says that a stream is a signal handler's, one of
/// [`WTRACE_CUT_CHUNK`] that a stream was left between two records. Any other chunk
/// continues the bit stream of thread `thread` (threads are numbered from 1 in the order they
/// first wrote). A stream is in the witness record code (`tally_graph::witness::code`,
/// [`crate::abi::witness`]: control records `1` Back, `0` then a 2-bit kind, 0 Enter, 1
/// landing, 2 End, 3 predicted Enter); a full `Enter` names the module slot and the function's
/// index in that module's metadata (its key for `EnterCoder`: `slot << 32 | index`), a
/// landing has a 2-bit `how`: 0 a `longjmp`'s re-entry and 1 an exception's landing pad (then
/// the varints abandoned activations and landing block, as `Record::Unwind`), 2 "lost": the
/// thread entered a function trace mode could not instrument, where regeneration stops.
///
/// A flight recorder's file (`TALLY_TRACE_RING`, `crates/runtime/c/wring.c`) has header flag
/// [`WTRACE_RING`] in the `u32` after the version; each thread chunk is then one chunk of the
/// thread's ring, oldest first: `u32 bits` (stream bits after the sync header), the sync
/// header (LEB128 count, then per activation bottom first LEB128 slot, function index, call
/// site + 1, 0 for none), the stream bytes. A chunk of thread [`WTRACE_STACK_CHUNK`] holds
/// `u32 thread, u32 depth` and `{u32 slot, u32 index, u32 site + 1}` per recorded activation
/// (bottom first): the thread's stack at the dump.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct WitnessTrace {
    /// `(slot, module hash)`, in the order written.
    pub modules: Vec<(u32, u64)>,
    /// Per module slot, the resolution of its external callees (index `k`: callee `k` of the
    /// module's table): `Some((slot, function index))` of the traced function at that address,
    /// `None` for none. A module with a slot but no entry here was not resolved (the process
    /// did not end normally).
    pub resolutions: Vec<Resolution>,
    /// `(thread, stream bytes)`, in the order the threads first wrote (empty in a flight
    /// recorder's file).
    pub threads: Vec<(u32, Vec<u8>)>,
    /// A flight recorder's file (`TALLY_TRACE_RING`, header flag [`WTRACE_RING`]): each
    /// thread's chunks and stack, in the order written.
    pub ring: Option<Vec<(u32, RingThread)>>,
    /// The thread chunks were range-coded (version [`WTRACE_VERSION_CODED`]); `threads` holds
    /// the decoded streams.
    pub coded: bool,
    /// The thread chunks were whole words (version [`WTRACE_VERSION_WORDS`]); `threads` holds
    /// the unpacked streams.
    pub words: bool,
    /// The streams of signal handlers that interrupted traced code, in the order written.
    pub signals: Vec<SignalStream>,
    /// Streams that end where a `siglongjmp` or an exception out of a signal handler left
    /// their code between two records ([`WTRACE_CUT_CHUNK`]).
    pub cut: Vec<u32>,
}

fn leb(bytes: &[u8], pos: &mut usize) -> Option<u32> {
    let mut v = 0u64;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return u32::try_from(v).ok();
        }
    }
    None
}

/// A flight recorder's thread chunk: `u32 bits`, the sync header (LEB128 count, then slot,
/// index, site + 1 per activation), the stream bytes.
fn ring_chunk(body: &[u8]) -> Option<RingChunk> {
    let bits = u64::from(u32::from_le_bytes(body.get(..4)?.try_into().ok()?));
    let mut pos = 4;
    let n = leb(body, &mut pos)?;
    let mut sync = Vec::new();
    for _ in 0..n {
        let slot = leb(body, &mut pos)?;
        let index = leb(body, &mut pos)?;
        let site = leb(body, &mut pos)?.checked_sub(1);
        sync.push(RingFrame { slot, index, site });
    }
    let bytes = body[pos..].to_vec();
    (bits <= bytes.len() as u64 * 8).then_some(RingChunk { sync, bits, bytes })
}

/// A flight recorder's stack chunk: `u32 thread, u32 depth`, then `{u32 slot, index, site + 1}`.
fn ring_stack(body: &[u8]) -> Option<(u32, u32, Vec<RingFrame>)> {
    let u = |i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(body.get(i..i + 4)?.try_into().ok()?))
    };
    if body.len() < 8 || !(body.len() - 8).is_multiple_of(12) {
        return None;
    }
    let frames = (8..body.len())
        .step_by(12)
        .map(|i| {
            Some(RingFrame {
                slot: u(i)?,
                index: u(i + 4)?,
                site: u(i + 8)?.checked_sub(1),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some((u(0)?, u(4)?, frames))
}

/// A resolution chunk: `u32 slot, u32 n`, then `n` times `u32 slot' (0: none), u32 index`.
fn resolution(body: &[u8]) -> Option<Resolution> {
    let u = |i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(body.get(i..i + 4)?.try_into().ok()?))
    };
    let n = u(4)? as usize;
    if body.len() != 8 + 8 * n {
        return None;
    }
    let entries = (0..n)
        .map(|k| {
            let (slot, index) = (u(8 + 8 * k)?, u(12 + 8 * k)?);
            Some((slot != 0).then_some((slot, index)))
        })
        .collect::<Option<Vec<_>>>()?;
    Some((u(0)?, entries))
}

fn ring_thread(ring: &mut Vec<(u32, RingThread)>, thread: u32) -> &mut RingThread {
    let i = match ring.iter().position(|t| t.0 == thread) {
        Some(i) => i,
        None => {
            ring.push((thread, RingThread::default()));
            ring.len() - 1
        }
    };
    &mut ring[i].1
}

/// Whether `bytes` is a flight recorder's witness trace (header flag [`WTRACE_RING`]).
pub fn is_flight_recorder(bytes: &[u8]) -> bool {
    bytes.len() >= 16
        && &bytes[..8] == WTRACE_MAGIC
        && u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) & WTRACE_RING != 0
}

/// Parses a witness trace file.
pub fn read_witness_trace(bytes: &[u8]) -> Result<WitnessTrace, TraceError> {
    if bytes.len() < 16 || &bytes[..8] != WTRACE_MAGIC {
        return Err(TraceError::BadMagic);
    }
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let version = u32_at(bytes, 8);
    if ![WTRACE_VERSION, WTRACE_VERSION_CODED, WTRACE_VERSION_WORDS].contains(&version) {
        return Err(TraceError::WitnessVersion(version));
    }
    let words = version == WTRACE_VERSION_WORDS;
    // per thread of a stream of words, its unpacker (in the order of `out.threads`)
    let mut unpackers: Vec<WordUnpacker> = Vec::new();
    let mut out = WitnessTrace::default();
    let mut ring = (u32_at(bytes, 12) & WTRACE_RING != 0).then(Vec::new);
    // per thread of a coded file, its model (in the order of `out.threads`)
    let mut models: Option<Vec<RcModel>> = (version == WTRACE_VERSION_CODED).then(Vec::new);
    if (models.is_some() || words) && ring.is_some() {
        return Err(TraceError::BadRecord(0)); // (a flight recorder's ring is packed)
    }
    let mut pos = 16;
    let mut chunk = 0;
    while pos < bytes.len() {
        if bytes.len() - pos < 8 {
            return Err(TraceError::Truncated(bytes.len() - pos));
        }
        let thread = u32_at(bytes, pos);
        let len = u32_at(bytes, pos + 4) as usize;
        pos += 8;
        if bytes.len() - pos < len {
            return Err(TraceError::Truncated(bytes.len() - pos + 8));
        }
        let body = &bytes[pos..pos + len];
        pos += len;
        if thread == WTRACE_RESOLVE_CHUNK {
            let r = resolution(body).ok_or(TraceError::BadRecord(chunk))?;
            out.resolutions.push(r);
        } else if thread == WTRACE_SIGNAL_CHUNK {
            if len != 12 {
                return Err(TraceError::BadRecord(chunk));
            }
            out.signals.push(SignalStream {
                stream: u32_at(body, 0),
                interrupted: u32_at(body, 4),
                signal: u32_at(body, 8),
            });
        } else if thread == WTRACE_CUT_CHUNK {
            if len != 4 {
                return Err(TraceError::BadRecord(chunk));
            }
            out.cut.push(u32_at(body, 0));
        } else if thread == WTRACE_MODULE_CHUNK {
            if len != 12 {
                return Err(TraceError::BadRecord(chunk));
            }
            let mut h = [0u8; 8];
            h.copy_from_slice(&body[4..12]);
            out.modules.push((u32_at(body, 0), u64::from_le_bytes(h)));
        } else if let Some(ring) = ring.as_mut() {
            if thread == WTRACE_STACK_CHUNK {
                let (t, depth, stack) = ring_stack(body).ok_or(TraceError::BadRecord(chunk))?;
                let t = ring_thread(ring, t);
                t.depth = depth;
                t.stack = stack;
            } else {
                let c = ring_chunk(body).ok_or(TraceError::BadRecord(chunk))?;
                ring_thread(ring, thread).chunks.push(c);
            }
        } else {
            let i = match out.threads.iter().position(|t| t.0 == thread) {
                Some(i) => i,
                None => {
                    out.threads.push((thread, Vec::new()));
                    if let Some(m) = models.as_mut() {
                        m.push(RcModel::default());
                    }
                    if words {
                        unpackers.push(WordUnpacker::default());
                    }
                    out.threads.len() - 1
                }
            };
            match models.as_mut() {
                Some(m) => m[i]
                    .decode_chunk(body, &mut out.threads[i].1)
                    .ok_or(TraceError::BadCoded(chunk))?,
                None if words => unpackers[i].push(body, &mut out.threads[i].1),
                None => out.threads[i].1.extend_from_slice(body),
            }
        }
        chunk += 1;
    }
    for (u, (thread, stream)) in unpackers.iter_mut().zip(&mut out.threads) {
        if !u.finish(stream) {
            return Err(TraceError::BadWords(*thread));
        }
    }
    out.ring = ring;
    out.coded = models.is_some();
    out.words = words;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A word holding `n` (0-63) bits of `v` above its sentinel, as the inline code stages it.
    fn word(v: u64, n: u32) -> u64 {
        if n == 0 {
            return 1 << 63;
        }
        ((v & ((1 << n) - 1)) << 1 | 1) << (63 - n)
    }

    /// The bits packed one by one, least-significant first, the last byte padded with zeros.
    fn packed(bits: &[bool]) -> Vec<u8> {
        let mut out = vec![0u8; bits.len().div_ceil(8)];
        for (i, &b) in bits.iter().enumerate() {
            out[i / 8] |= u8::from(b) << (i % 8);
        }
        out
    }

    proptest! {
        #[test]
        fn words_unpack_to_their_bits_in_order(
            records in prop::collection::vec((any::<u64>(), 0u32..64, any::<bool>()), 0..200)
        ) {
            let (mut file, mut bits) = (Vec::new(), Vec::new());
            for &(v, n, zero) in &records {
                // (a word of 0 holds nothing: the runtime never stages one, the reader skips it)
                let w = if zero && n == 0 { 0 } else { word(v, n) };
                file.extend_from_slice(&w.to_le_bytes());
                if w != 0 {
                    bits.extend((0..n).map(|i| v >> i & 1 == 1));
                }
            }
            prop_assert_eq!(unpack_words(&file), Some(packed(&bits)));
        }

        #[test]
        fn a_stream_of_words_reads_like_its_packed_stream(
            records in prop::collection::vec((any::<u64>(), 1u32..64), 1..100),
            split in 1usize..40,
        ) {
            // one thread's words over chunks of `split` bytes (a word may straddle two)
            let mut stream = Vec::new();
            let mut bits = Vec::new();
            for &(v, n) in &records {
                stream.extend_from_slice(&word(v, n).to_le_bytes());
                bits.extend((0..n).map(|i| v >> i & 1 == 1));
            }
            let mut file = b"TALLYWTR".to_vec();
            file.extend_from_slice(&WTRACE_VERSION_WORDS.to_le_bytes());
            file.extend_from_slice(&0u32.to_le_bytes());
            for c in stream.chunks(split) {
                file.extend_from_slice(&1u32.to_le_bytes());
                file.extend_from_slice(&(c.len() as u32).to_le_bytes());
                file.extend_from_slice(c);
            }
            let t = read_witness_trace(&file).unwrap();
            prop_assert!(t.words && !t.coded);
            prop_assert_eq!(t.threads, vec![(1, packed(&bits))]);
        }
    }

    #[test]
    fn a_stream_of_words_that_is_not_whole_words_is_refused() {
        assert_eq!(unpack_words(&[0; 12]), None);
        let mut file = b"TALLYWTR".to_vec();
        file.extend_from_slice(&WTRACE_VERSION_WORDS.to_le_bytes());
        file.extend_from_slice(&0u32.to_le_bytes());
        file.extend_from_slice(&3u32.to_le_bytes());
        file.extend_from_slice(&5u32.to_le_bytes());
        file.extend_from_slice(&[1, 2, 3, 4, 5]);
        assert_eq!(read_witness_trace(&file), Err(TraceError::BadWords(3)));
        // a flight recorder's ring is never a stream of words
        file[12] = WTRACE_RING as u8;
        assert_eq!(read_witness_trace(&file), Err(TraceError::BadRecord(0)));
    }

    #[test]
    fn signal_and_cut_chunks_are_read_and_checked() {
        let chunk = |file: &mut Vec<u8>, id: u32, words: &[u32]| {
            file.extend_from_slice(&id.to_le_bytes());
            file.extend_from_slice(&(4 * words.len() as u32).to_le_bytes());
            for w in words {
                file.extend_from_slice(&w.to_le_bytes());
            }
        };
        let mut file = b"TALLYWTR".to_vec();
        file.extend_from_slice(&WTRACE_VERSION.to_le_bytes());
        file.extend_from_slice(&0u32.to_le_bytes());
        chunk(&mut file, WTRACE_SIGNAL_CHUNK, &[2, 1, 11]);
        chunk(&mut file, 2, &[0x0403_0201]);
        chunk(&mut file, WTRACE_CUT_CHUNK, &[1]);
        let t = read_witness_trace(&file).unwrap();
        assert_eq!(
            t.signals,
            vec![SignalStream {
                stream: 2,
                interrupted: 1,
                signal: 11
            }]
        );
        assert_eq!(t.cut, vec![1]);
        assert_eq!(t.threads, vec![(2, vec![1, 2, 3, 4])]);
        // wrong lengths are refused, not read past
        let mut bad = file[..16].to_vec();
        chunk(&mut bad, WTRACE_SIGNAL_CHUNK, &[2, 1]);
        assert_eq!(read_witness_trace(&bad), Err(TraceError::BadRecord(0)));
        let mut bad = file[..16].to_vec();
        chunk(&mut bad, WTRACE_CUT_CHUNK, &[]);
        assert_eq!(read_witness_trace(&bad), Err(TraceError::BadRecord(0)));
    }
}
