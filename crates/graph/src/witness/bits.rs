//! A bit-packed encoding of the record stream (Ball & Larus 1994 §6.2: "by using only as many bits
//! as necessary"), a reference for the runtime's buffer format.
//!
//! Bits are packed least-significant first into bytes. A witness is its value in the width of
//! its plan (`bits` bits, nothing when the width is 0): no tag, because the reader always knows
//! from regeneration whether a witness is next and its width ([`Expect`]). A control record is
//! a prefix code, `1` for Back (the most frequent), else `0` and a 2-bit kind (`0` Enter, `1`
//! Unwind, `2` End, `3` predicted Enter), followed by its operands as
//! varints (7 data bits, then a continuation bit, low groups first): `Unwind` two bits for how
//! (`0` re-entry, `1` unwind edge; the runtime's `2` is a "lost" record), the abandoned count,
//! then the landing block. [`encode`] ends every stream with `End`; the reader returns `None`
//! after `End` or past the last bit.
//!
//! `Enter` is coded against the stream's own history ([`EnterCoder`], trace format 5): kind `3`
//! alone when the function is the one that followed the previous `Enter`'s function last time
//! (a table of 256 entries hashed by that function), else kind `0` then `1` and the 4-bit
//! position of the function among the 16 most recently entered, or `0` and the function as a
//! varint (the runtime: its module slot, then its index). Writer and reader update the same
//! state after every `Enter`, so the code is exact whatever the prediction; a flight recorder
//! writes the full code only, since its reader starts in the middle of the stream. Since trace
//! format 7 a predicted `Enter` updates only the previous function (the recent list moves only
//! for the others), so that instrumented code can write it inline: a hash, two loads and a
//! compare, with no list to move (`tally.wtrace.enter.again` in tally-llvm).

use super::regen::{Expect, RecordSource, RegenError};
use super::{FuncId, Landing, Record};
use crate::ids::NodeId;

/// How an `Enter` is coded ([`EnterCoder::code`]).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum EnterCode {
    /// Kind 3: the predicted function.
    Predicted,
    /// Kind 0, `1`, then this 4-bit position among the recently entered functions.
    Recent(u8),
    /// Kind 0, `0`, then the function in full.
    Full,
}

/// The state behind `Enter`'s code (module doc): the function that followed each function's
/// `Enter` last time (direct-mapped by a hash of the function's key, no tags), the previous
/// `Enter`'s key, and the 16 most recently entered keys, most recent first. A key is the
/// function's number: `FuncId` here, `slot << 32 | index` in the runtime's streams
/// (`c/wtrace/records.c`'s `wt_enter_record` keeps the same state).
#[derive(Clone, Debug)]
pub struct EnterCoder {
    next: Box<[u64; Self::TABLE]>,
    prev: u64,
    recent: [u64; Self::RECENT],
    nrecent: usize,
}

impl Default for EnterCoder {
    fn default() -> Self {
        EnterCoder {
            next: Box::new([0; Self::TABLE]),
            prev: 0,
            recent: [0; Self::RECENT],
            nrecent: 0,
        }
    }
}

impl EnterCoder {
    /// Entries of the prediction table.
    pub const TABLE: usize = 256;
    /// Recently entered functions kept.
    pub const RECENT: usize = 16;
    /// The table's hash: `key * HASH_MUL >> HASH_SHIFT` (wrapping), as the runtime and the
    /// instrumented code compute it (`TALLY_WTRACE_ENTER_MUL`, `TALLY_WTRACE_ENTER_SHIFT`).
    pub const HASH_MUL: u64 = 0x9e37_79b9_7f4a_7c15;
    /// See [`EnterCoder::HASH_MUL`]: 64 minus log2 of [`EnterCoder::TABLE`].
    pub const HASH_SHIFT: u32 = 64 - Self::TABLE.trailing_zeros();

    fn slot(key: u64) -> usize {
        (key.wrapping_mul(Self::HASH_MUL) >> Self::HASH_SHIFT) as usize
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
        // others down (the 16th falls off a full list).
        let at = match self.recent[..self.nrecent].iter().position(|&k| k == key) {
            Some(i) => i,
            None => {
                self.nrecent = (self.nrecent + 1).min(Self::RECENT);
                self.nrecent - 1
            }
        };
        self.recent.copy_within(0..at, 1);
        self.recent[0] = key;
    }
}

/// Bits written so far, packed least-significant first.
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

    fn varint(&mut self, mut value: u64) {
        loop {
            let more = value >= 0x80;
            self.put(value & 0x7f, 7);
            self.put(u64::from(more), 1);
            value >>= 7;
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
                    EnterCode::Predicted => self.put(6, 3),
                    EnterCode::Recent(i) => self.put(0b1000 | u64::from(i) << 4, 8),
                    EnterCode::Full => {
                        self.put(0, 4);
                        self.varint(key);
                    }
                }
                self.enters.entered(key);
            }
            Record::Back => self.put(1, 1),
            Record::Unwind { abandoned, to, how } => {
                self.put(2, 3);
                self.put(u64::from(how == Landing::Unwind), 2);
                self.varint(u64::from(abandoned));
                self.varint(to.index() as u64);
            }
            Record::End => self.put(4, 3),
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

/// Reads a stream written by [`BitWriter`], as regeneration asks.
#[derive(Clone, Debug)]
pub struct BitReader<'a> {
    bytes: &'a [u8],
    len: u64,
    pos: u64,
    ended: bool,
    enters: EnterCoder,
}

impl<'a> BitReader<'a> {
    /// A reader of the first `len` bits of `bytes`.
    pub fn new(bytes: &'a [u8], len: u64) -> Self {
        BitReader {
            bytes,
            len: len.min(bytes.len() as u64 * 8),
            pos: 0,
            ended: false,
            enters: EnterCoder::default(),
        }
    }

    fn get(&mut self, bits: u8) -> Option<u64> {
        if self.len - self.pos < u64::from(bits) {
            return None;
        }
        let mut v = 0u64;
        for i in 0..bits {
            let p = self.pos + u64::from(i);
            let bit = (self.bytes[(p / 8) as usize] >> (p % 8)) & 1;
            v |= u64::from(bit) << i;
        }
        self.pos += u64::from(bits);
        Some(v)
    }

    fn varint(&mut self) -> Result<u64, RegenError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let group = self.get(7).ok_or_else(truncated)?;
            let more = self.get(1).ok_or_else(truncated)?;
            v |= group << shift;
            if more == 0 {
                return Ok(v);
            }
        }
        Err(RegenError::Decode("varint longer than 64 bits".into()))
    }
}

fn truncated() -> RegenError {
    RegenError::Decode("stream ends inside a control record".into())
}

fn small(v: u64) -> Result<u32, RegenError> {
    u32::try_from(v).map_err(|_| RegenError::Decode(format!("operand {v} does not fit 32 bits")))
}

impl RecordSource for BitReader<'_> {
    fn read(&mut self, expect: Expect) -> Result<Option<Record>, RegenError> {
        if self.ended {
            return Ok(None);
        }
        match expect {
            Expect::Witness(bits) => Ok(self.get(bits).map(|v| Record::Witness {
                value: v as u32,
                bits,
            })),
            Expect::Control => {
                let Some(back) = self.get(1) else {
                    return Ok(None);
                };
                if back == 1 {
                    return Ok(Some(Record::Back));
                }
                let kind = self.get(2).ok_or_else(truncated)?;
                Ok(Some(match kind {
                    0 | 3 => {
                        let key = if kind == 3 {
                            self.enters.predicted()
                        } else if self.get(1).ok_or_else(truncated)? == 1 {
                            let i = self.get(4).ok_or_else(truncated)? as usize;
                            self.enters.recent(i).ok_or_else(|| {
                                RegenError::Decode(format!("no recent function {i}"))
                            })?
                        } else {
                            self.varint()?
                        };
                        self.enters.entered(key);
                        Record::Enter(FuncId(small(key)?))
                    }
                    1 => {
                        let how = match self.get(2).ok_or_else(truncated)? {
                            0 => Landing::Reentry,
                            1 => Landing::Unwind,
                            h => return Err(RegenError::Decode(format!("landing kind {h}"))),
                        };
                        let abandoned = small(self.varint()?)?;
                        let to = small(self.varint()?)?;
                        Record::Unwind {
                            abandoned,
                            to: NodeId::new(to as usize),
                            how,
                        }
                    }
                    _ => {
                        self.ended = true;
                        Record::End
                    }
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut r = BitReader::new(&bytes, len);
        for want in &records {
            assert_eq!(r.read(Expect::Control).unwrap(), Some(*want));
        }
        assert_eq!(r.read(Expect::Control).unwrap(), Some(Record::End));

        let same = vec![Record::Enter(FuncId(300)); 1000];
        let (_, bits) = encode(&same);
        // The first in full (3 + 1 + a 2-group varint), the second as the most recent (8: 300
        // has not followed itself yet), then 3 bits each, then End.
        assert_eq!(bits, 4 + 16 + 8 + 998 * 3 + 3);
    }
}
