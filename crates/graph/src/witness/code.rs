//! The witness record code, in one place: the bit-packed encoding of the record stream (Ball &
//! Larus 1994 §6.2: "by using only as many bits as necessary") that the runtime writes
//! (`crates/runtime/c/wtrace/`), the instrumented code writes inline (`tally-llvm`'s trace
//! mode) and `tally report --trace` reads; its constants, its one decoder ([`Decoder`]) and a
//! reference encoder ([`BitWriter`], for tests).
//!
//! Every fact of the code is a constant here; `tally_format::abi::witness` re-exports them as
//! part of the runtime ABI, and `tally_format::abi::DEFINES` holds the C side's copies
//! (`TALLY_WTRACE_BACK`, `TALLY_WTRACE_KIND_*`, ... in `tally.h`) to them at build time, as
//! every other fact of the ABI. They live in this crate, which has no dependencies, because
//! the graph tests regenerate through the same decoder as the report.
//!
//! Bits are packed least-significant first into bytes. A witness is its value in the width of
//! its plan (`bits` bits, nothing when the width is 0): no tag, because the reader always knows
//! from regeneration whether a witness is next and its width ([`Expect`]). A control record is
//! a prefix code, [`BACK`] (`1`, the most frequent), else `0` and a [`KIND_BITS`]-bit kind
//! ([`KIND_ENTER`], [`KIND_LANDING`], [`KIND_END`], [`KIND_PREDICTED`]), followed by its
//! operands as varints ([`VARINT_BITS`] data bits, then a continuation bit, low groups first):
//! a landing has [`HOW_BITS`] bits for how ([`HOW_REENTRY`], [`HOW_UNWIND`]; [`HOW_LOST`]:
//! control entered a function trace mode could not instrument, with no operands), the
//! abandoned count, then the landing block. [`encode`] ends every stream with `End`; the
//! decoder returns `None` after `End` or past the last bit.
//!
//! `Enter` is coded against the stream's own history ([`EnterCoder`], trace format 5): kind
//! [`KIND_PREDICTED`] alone when the function is the one that followed the previous `Enter`'s
//! function last time (a table of [`ENTER_TABLE`] entries hashed by that function), else kind
//! [`KIND_ENTER`] then `1` and the [`RECENT_BITS`]-bit position of the function among the
//! [`RECENT`] most recently entered, or `0` and the function in full: its module slot, then
//! its index, as varints (a key is `slot << 32 | index`). Writer and reader update the same
//! state after every `Enter`, so the code is exact whatever the prediction; a flight recorder
//! writes the full code only, since its reader starts in the middle of the stream. Since trace
//! format 7 a predicted `Enter` updates only the previous function (the recent list moves only
//! for the others), so that instrumented code can write it inline: a hash, two loads and a
//! compare, with no list to move (`tally.wtrace.enter.again` in tally-llvm).

use super::regen::{Expect, RecordSource, RegenError};
use super::{FuncId, Landing, Record};
use crate::ids::NodeId;

/// `Back`'s code: the one-bit `1` (`TALLY_WTRACE_BACK`).
pub const BACK: u64 = 1;
/// The width of [`BACK`], and of the `0` that starts every other control record.
pub const BACK_BITS: u8 = 1;
/// The width of a control record's kind, after its `0`.
pub const KIND_BITS: u8 = 2;
/// Kind: an `Enter` coded by recency or in full.
pub const KIND_ENTER: u64 = 0;
/// Kind: a landing (`Record::Unwind`), then how.
pub const KIND_LANDING: u64 = 1;
/// Kind: `End`.
pub const KIND_END: u64 = 2;
/// Kind: the predicted `Enter`.
pub const KIND_PREDICTED: u64 = 3;
/// The width of a landing's how.
pub const HOW_BITS: u8 = 2;
/// How: a `longjmp`'s re-entry ([`Landing::Reentry`]).
pub const HOW_REENTRY: u64 = 0;
/// How: an exception's landing pad ([`Landing::Unwind`]).
pub const HOW_UNWIND: u64 = 1;
/// How: "lost", control entered a function trace mode could not instrument (written by the
/// instrumented code; regeneration stops there, [`NOT_EXACT`]).
pub const HOW_LOST: u64 = 2;
/// Data bits of a varint's group (a continuation bit follows each).
pub const VARINT_BITS: u8 = 7;
/// Recently entered functions kept ([`EnterCoder`]).
pub const RECENT: usize = 16;
/// The width of a position among the [`RECENT`] functions.
pub const RECENT_BITS: u8 = RECENT.trailing_zeros() as u8;
/// Entries of the prediction table ([`EnterCoder`]; the runtime's `e_next`).
pub const ENTER_TABLE: usize = 256;
/// The table's hash: `key * ENTER_MUL >> ENTER_SHIFT` (wrapping), as the runtime and the
/// instrumented code compute it.
pub const ENTER_MUL: u64 = 0x9e37_79b9_7f4a_7c15;
/// See [`ENTER_MUL`]: 64 minus log2 of [`ENTER_TABLE`].
pub const ENTER_SHIFT: u32 = 64 - ENTER_TABLE.trailing_zeros();

/// A control record's head, `0` then `kind`: `(value, bits)`, least-significant first.
pub const fn control(kind: u64) -> (u64, u8) {
    (kind << BACK_BITS, BACK_BITS + KIND_BITS)
}

/// The head of a landing with how `how`: `(value, bits)` (its operands follow).
pub const fn landing(how: u64) -> (u64, u8) {
    let (v, n) = control(KIND_LANDING);
    (v | how << n, n + HOW_BITS)
}

/// An `Enter` of the function at position `i` among the recently entered: `(value, bits)`.
pub const fn enter_recent(i: u64) -> (u64, u8) {
    let (v, n) = control(KIND_ENTER);
    (v | 1 << n | i << (n + 1), n + 1 + RECENT_BITS)
}

/// `End`: `(value, bits)`.
pub const END: (u64, u8) = control(KIND_END);
/// The predicted `Enter`: `(value, bits)`.
pub const ENTER_PREDICTED: (u64, u8) = control(KIND_PREDICTED);
/// The head of an `Enter` in full (its slot and index follow as varints): `(value, bits)`.
pub const ENTER_FULL: (u64, u8) = {
    let (v, n) = control(KIND_ENTER);
    (v, n + 1)
};
/// A "lost" landing (no operands): `(value, bits)`.
pub const LOST: (u64, u8) = landing(HOW_LOST);

/// What the decoder says when a thread landed where regeneration cannot follow ([`HOW_LOST`]).
pub const NOT_EXACT: &str =
    "regeneration not exact past this point: control reached a function trace mode could not instrument";

/// How an `Enter` is coded ([`EnterCoder::code`]).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum EnterCode {
    /// [`ENTER_PREDICTED`]: the predicted function.
    Predicted,
    /// [`enter_recent`]: this position among the recently entered functions.
    Recent(u8),
    /// [`ENTER_FULL`], then the function's slot and index.
    Full,
}

/// The state behind `Enter`'s code (module doc): the function that followed each function's
/// `Enter` last time (direct-mapped by a hash of the function's key, no tags), the previous
/// `Enter`'s key, and the [`RECENT`] most recently entered keys, most recent first. A key is
/// `slot << 32 | index` (`c/wtrace/records.c`'s `wt_enter_record` keeps the same state).
#[derive(Clone, Debug)]
pub struct EnterCoder {
    next: Box<[u64; ENTER_TABLE]>,
    prev: u64,
    recent: [u64; RECENT],
    nrecent: usize,
}

impl Default for EnterCoder {
    fn default() -> Self {
        EnterCoder {
            next: Box::new([0; ENTER_TABLE]),
            prev: 0,
            recent: [0; RECENT],
            nrecent: 0,
        }
    }
}

impl EnterCoder {
    fn slot(key: u64) -> usize {
        (key.wrapping_mul(ENTER_MUL) >> ENTER_SHIFT) as usize
    }

    /// The function predicted to be entered next.
    pub fn predicted(&self) -> u64 {
        self.next[Self::slot(self.prev)]
    }

    /// The `i`th most recently entered function, if there is one.
    pub fn recent(&self, i: usize) -> Option<u64> {
        self.recent[..self.nrecent].get(i).copied()
    }

    /// How `key` is coded now (the state is not changed: see [`EnterCoder::entered`]).
    pub fn code(&self, key: u64) -> EnterCode {
        if self.predicted() == key {
            return EnterCode::Predicted;
        }
        match self.recent[..self.nrecent].iter().position(|&k| k == key) {
            Some(i) => EnterCode::Recent(i as u8),
            None => EnterCode::Full,
        }
    }

    /// `key` was entered: updates the prediction and the recent list (a predicted `key`: only
    /// the previous function, trace format 7).
    pub fn entered(&mut self, key: u64) {
        if self.predicted() == key {
            self.prev = key;
            return;
        }
        self.next[Self::slot(self.prev)] = key;
        self.prev = key;
        // Move to front: a key already kept moves up from its place; a new one pushes the
        // others down (the last falls off a full list).
        let at = match self.recent[..self.nrecent].iter().position(|&k| k == key) {
            Some(i) => i,
            None => {
                self.nrecent = (self.nrecent + 1).min(RECENT);
                self.nrecent - 1
            }
        };
        self.recent.copy_within(0..at, 1);
        self.recent[0] = key;
    }
}

/// The functions an `Enter` can name: by module slot and function index.
pub trait EnterNames {
    /// The function `index` of the module in `slot`, if the trace's reader knows it.
    fn name(&self, slot: u32, index: u32) -> Option<FuncId>;
}

/// The names of a stream written by [`BitWriter`]: function `f` is index `f` of slot 0.
#[derive(Copy, Clone, Debug, Default)]
pub struct OwnNames;

impl EnterNames for OwnNames {
    fn name(&self, slot: u32, index: u32) -> Option<FuncId> {
        (slot == 0).then_some(FuncId(index))
    }
}

/// Bits written so far, packed least-significant first: the reference encoder (the runtime's
/// records, with function `f` as index `f` of slot 0, [`OwnNames`]).
#[derive(Clone, Debug, Default)]
pub struct BitWriter {
    bytes: Vec<u8>,
    len: u64,
    enters: EnterCoder,
}

impl BitWriter {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the low `bits` bits of `value`.
    pub fn put(&mut self, value: u64, bits: u8) {
        for i in 0..bits {
            if self.len.is_multiple_of(8) {
                self.bytes.push(0);
            }
            if (value >> i) & 1 == 1 {
                let last = self.bytes.len() - 1;
                self.bytes[last] |= 1 << (self.len % 8);
            }
            self.len += 1;
        }
    }

    fn put_code(&mut self, (value, bits): (u64, u8)) {
        self.put(value, bits);
    }

    fn varint(&mut self, mut value: u64) {
        let group = 1u64 << VARINT_BITS;
        loop {
            let more = value >= group;
            self.put(value & (group - 1), VARINT_BITS);
            self.put(u64::from(more), 1);
            value >>= VARINT_BITS;
            if !more {
                break;
            }
        }
    }

    /// Appends one record.
    pub fn record(&mut self, r: &Record) {
        match *r {
            Record::Witness { value, bits } => self.put(u64::from(value), bits),
            Record::Enter(f) => {
                let key = u64::from(f.0);
                match self.enters.code(key) {
                    EnterCode::Predicted => self.put_code(ENTER_PREDICTED),
                    EnterCode::Recent(i) => self.put_code(enter_recent(u64::from(i))),
                    EnterCode::Full => {
                        self.put_code(ENTER_FULL);
                        self.varint(key >> 32);
                        self.varint(key & 0xffff_ffff);
                    }
                }
                self.enters.entered(key);
            }
            Record::Back => self.put(BACK, BACK_BITS),
            Record::Unwind { abandoned, to, how } => {
                self.put_code(landing(match how {
                    Landing::Reentry => HOW_REENTRY,
                    Landing::Unwind => HOW_UNWIND,
                }));
                self.varint(u64::from(abandoned));
                self.varint(to.index() as u64);
            }
            Record::End => self.put_code(END),
        }
    }

    /// Number of bits written.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The packed bytes (the last one padded with zeros) and the number of bits.
    pub fn finish(self) -> (Vec<u8>, u64) {
        (self.bytes, self.len)
    }
}

/// Encodes `records`, ending the stream with `End` if it does not end with one.
pub fn encode(records: &[Record]) -> (Vec<u8>, u64) {
    let mut w = BitWriter::new();
    for r in records {
        w.record(r);
    }
    if records.last() != Some(&Record::End) {
        w.record(&Record::End);
    }
    w.finish()
}

/// Where the records of a full thread stream end: before its `End`.
///
/// The runtime ends every stream with `End` ([`END`]: the bits 0, 0, 1) and pads it with zeros
/// to a byte, so `End`'s last bit is the stream's last set bit. Reading the stream only up to
/// `End`'s first bit reads `End` as the end of the stream, which regeneration treats alike at a
/// control record, and, unlike `End`'s bits, also where the thread had not yet written a
/// witness or path number it was due (a fault between two records): there it stops
/// (`Truncated`) instead of decoding `End`'s bits as that record. A stream without `End` (a
/// process killed before its streams ended) whose last set bit happens to follow two clear
/// ones loses at most its last 10 bits: what it regenerates is still a prefix.
pub fn records_end(bytes: &[u8]) -> u64 {
    const _: () = assert!(END.0 == 0b100 && END.1 == 3, "End is 0, 0, then 1");
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

/// The decoder of a thread's stream, as regeneration asks for it: witnesses, control records
/// and the names of `Enter`s (by `names`). The one reader of the code: `tally report --trace`
/// reads the runtime's streams with it, the graph tests [`encode`]'s.
pub struct Decoder<'a, N> {
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
    names: &'a N,
    /// The state behind `Enter`'s code (trace format 5), over `slot << 32 | index`.
    enters: EnterCoder,
}

impl<'a, N: EnterNames> Decoder<'a, N> {
    /// The first `len` bits of `bytes`, read from the start with a fresh `Enter` coder.
    pub fn new(bytes: &'a [u8], len: u64, names: &'a N) -> Self {
        Decoder {
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
    pub fn pos(&self) -> u64 {
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
        const GROUP: u8 = VARINT_BITS + 1;
        const MORE: u64 = 1 << VARINT_BITS;
        let first = self.get(GROUP).ok_or_else(cut)?;
        if first & MORE == 0 {
            return Ok(first);
        }
        let mut v = first & (MORE - 1);
        for shift in (u32::from(VARINT_BITS)..64).step_by(usize::from(VARINT_BITS)) {
            let byte = self.get(GROUP).ok_or_else(cut)?;
            v |= (byte & (MORE - 1)) << shift;
            if byte & MORE == 0 {
                return Ok(v);
            }
        }
        Err(RegenError::Decode("varint longer than 64 bits".into()))
    }

    /// An `Enter`'s function, after its kind ([`KIND_ENTER`] or [`KIND_PREDICTED`]).
    fn enter(&mut self, kind: u64) -> Result<Record, RegenError> {
        let (slot, index) = if kind == KIND_PREDICTED {
            let k = self.enters.predicted();
            (k >> 32, k & 0xffff_ffff)
        } else if self.get(1).ok_or_else(cut)? == 1 {
            let i = self.get(RECENT_BITS).ok_or_else(cut)?;
            let k = self.enters.recent(i as usize).ok_or_else(|| {
                RegenError::Decode(format!(
                    "Enter names recent function {i}, which the stream has not entered"
                ))
            })?;
            (k >> 32, k & 0xffff_ffff)
        } else {
            (self.varint()?, self.varint()?)
        };
        let (Ok(slot32), Ok(index32)) = (u32::try_from(slot), u32::try_from(index)) else {
            return Err(RegenError::Decode(format!(
                "Enter names function {index} of module slot {slot}, out of range"
            )));
        };
        self.enters.entered(slot << 32 | index);
        match self.names.name(slot32, index32) {
            Some(f) => Ok(Record::Enter(f)),
            None => Err(RegenError::Decode(format!(
                "Enter names function {index} of module slot {slot}, which the profile does not hold"
            ))),
        }
    }

    /// A landing's how and operands, after its kind.
    fn landing(&mut self) -> Result<Record, RegenError> {
        let how = match self.get(HOW_BITS).ok_or_else(cut)? {
            HOW_REENTRY => Landing::Reentry,
            HOW_UNWIND => Landing::Unwind,
            _ => return Err(RegenError::Decode(NOT_EXACT.into())),
        };
        let abandoned = self.varint()?;
        let to = self.varint()?;
        let small = |v: u64| {
            u32::try_from(v)
                .map_err(|_| RegenError::Decode(format!("landing operand {v} too large")))
        };
        Ok(Record::Unwind {
            abandoned: small(abandoned)?,
            to: NodeId::new(small(to)? as usize),
            how,
        })
    }
}

fn cut() -> RegenError {
    RegenError::Decode("the trace ends inside a control record".into())
}

impl<N: EnterNames> RecordSource for Decoder<'_, N> {
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
                let Some(back) = self.get(BACK_BITS) else {
                    return Ok(None);
                };
                if back == BACK {
                    return Ok(Some(Record::Back));
                }
                match self.get(KIND_BITS).ok_or_else(cut)? {
                    kind @ (KIND_ENTER | KIND_PREDICTED) => self.enter(kind).map(Some),
                    KIND_LANDING => self.landing().map(Some),
                    _ => {
                        self.end();
                        Ok(Some(Record::End))
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime's codes, as `c/wtrace/wtrace.h` and tally-llvm spell them.
    #[test]
    fn codes_are_the_runtimes() {
        assert_eq!(END, (4, 3));
        assert_eq!(ENTER_PREDICTED, (6, 3));
        assert_eq!(ENTER_FULL, (0, 4));
        assert_eq!(enter_recent(5), (8 | 5 << 4, 8));
        assert_eq!(landing(HOW_UNWIND), (2 | 1 << 3, 5));
        assert_eq!(LOST, (2 | 2 << 3, 5));
        assert_eq!((RECENT_BITS, ENTER_SHIFT), (4, 56));
    }

    /// Every `Enter` decodes to the function written, whichever code it took (predicted,
    /// recent, full, across the 16-entry list's overflow and prediction-table collisions), and
    /// a repeated callee costs 3 bits.
    #[test]
    fn enter_codes_round_trip_and_repeats_are_short() {
        let mut x = 12345u64;
        let mut records = Vec::new();
        for i in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let f = match i % 5 {
                0 | 1 => 7,                    // one callee again and again
                2 => (x % 24) as u32,          // a few, often recent
                3 => 1000 + (x % 3000) as u32, // many, mostly full
                _ => i / 10,                   // runs
            };
            records.push(Record::Enter(FuncId(f)));
            if i % 3 == 0 {
                records.push(Record::Back);
            }
        }
        let (bytes, len) = encode(&records);
        let mut r = Decoder::new(&bytes, len, &OwnNames);
        for want in &records {
            assert_eq!(r.read(Expect::Control).unwrap(), Some(*want));
        }
        assert_eq!(r.read(Expect::Control).unwrap(), Some(Record::End));

        let same = vec![Record::Enter(FuncId(300)); 1000];
        let (_, bits) = encode(&same);
        // The first in full (4, slot 0 in one group, 300 in two), the second as the most
        // recent (8: 300 has not followed itself yet), then 3 bits each, then End.
        assert_eq!(bits, 4 + 8 + 16 + 8 + 998 * 3 + 3);
    }

    /// Landings, lost ones included, and varints of every length.
    #[test]
    fn landings_and_varints_round_trip() {
        let mut w = BitWriter::new();
        let mut want = Vec::new();
        for (k, v) in [0u32, 1, 127, 128, 16383, 16384, u32::MAX]
            .into_iter()
            .enumerate()
        {
            let how = if k % 2 == 0 {
                Landing::Reentry
            } else {
                Landing::Unwind
            };
            let r = Record::Unwind {
                abandoned: v,
                to: NodeId::new(k),
                how,
            };
            w.record(&r);
            want.push(r);
        }
        w.put(LOST.0, LOST.1);
        let (bytes, len) = w.finish();
        let mut r = Decoder::new(&bytes, len, &OwnNames);
        for want in &want {
            assert_eq!(r.read(Expect::Control).unwrap(), Some(*want));
        }
        assert_eq!(
            r.read(Expect::Control),
            Err(RegenError::Decode(NOT_EXACT.into()))
        );
    }

    /// The stream `put`s, then `End` and its padding, as the runtime writes them.
    fn stream(puts: &[(u64, u8)], end: bool) -> (Vec<u8>, u64) {
        let mut w = BitWriter::new();
        for &(v, n) in puts {
            w.put(v, n);
        }
        let records = w.len();
        if end {
            w.put(END.0, END.1);
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
