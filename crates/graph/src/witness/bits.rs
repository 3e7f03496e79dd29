//! A bit-packed encoding of the record stream (paper 000 §6.2: "by using only as many bits as
//! necessary"), a reference for the runtime's buffer format.
//!
//! Bits are packed least-significant first into bytes. A witness is its value in the width of
//! its plan (`bits` bits, nothing when the width is 0): no tag, because the reader always knows
//! from regeneration whether a witness is next and its width ([`Expect`]). A control record is
//! a prefix code, `1` for Back (the most frequent), else `0` and a 2-bit kind (`0` Enter, `1`
//! Unwind, `2` End), followed by its operands as
//! varints (7 data bits, then a continuation bit, low groups first): `Enter` the function
//! index, `Unwind` two bits for how (`0` re-entry, `1` unwind edge; the runtime's `2` is a
//! "lost" record), the abandoned count, then
//! the landing block. [`encode`] ends every stream
//! with `End`; the reader returns `None` after `End` or past the last bit.

use super::regen::{Expect, RecordSource, RegenError};
use super::{FuncId, Landing, Record};
use crate::ids::NodeId;

/// Bits written so far, packed least-significant first.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct BitWriter {
    bytes: Vec<u8>,
    len: u64,
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
                self.put(0, 3);
                self.varint(u64::from(f.0));
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
}

impl<'a> BitReader<'a> {
    /// A reader of the first `len` bits of `bytes`.
    pub fn new(bytes: &'a [u8], len: u64) -> Self {
        BitReader {
            bytes,
            len: len.min(bytes.len() as u64 * 8),
            pos: 0,
            ended: false,
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
                    0 => Record::Enter(FuncId(small(self.varint()?)?)),
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
