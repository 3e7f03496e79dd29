//! The runtime's bit stream of one thread (`crates/runtime/c/wtrace/`), as regeneration asks
//! for it: witnesses, control records and the names of `Enter`s.

use super::NOT_EXACT;
use std::collections::HashMap;
use tally_format::trace::WitnessTrace;
use tally_graph::witness::bits::EnterCoder;
use tally_graph::witness::regen::{Expect, RecordSource};
use tally_graph::witness::{FuncId, Landing, Record, RegenError};

/// The runtime's bit stream of one thread, as regeneration asks for it.
pub(super) struct Stream<'a> {
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
    pub(super) fn new(bytes: &'a [u8], len: u64, names: &'a Names) -> Self {
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
pub(super) struct Names {
    /// Slot -> index in `modules`, for slots below [`Names::DENSE`].
    dense: Vec<Option<usize>>,
    /// The same for larger slots.
    sparse: HashMap<u32, usize>,
    /// Per named module: function index -> FuncId.
    modules: Vec<Vec<Option<FuncId>>>,
}

impl Names {
    const DENSE: u32 = 1 << 16;

    pub(super) fn new(trace: &WitnessTrace, ids: &HashMap<(u64, u32), FuncId>) -> Names {
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

pub(super) fn cut() -> RegenError {
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
    pub(super) fn pos(&self) -> u64 {
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
pub(super) fn records_end(bytes: &[u8]) -> u64 {
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
