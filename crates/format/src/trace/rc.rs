//! The range coding of witness streams (trace format 6, `TALLY_TRACE_COMPRESS=1`): the decoder
//! of `crates/runtime/c/wtrace/coder.c`'s coder, and a reference encoder for tests.
//!
//! Each bit of a thread's stream (least-significant first within a byte, the stream's order)
//! is coded by an LZMA-style binary range coder with a 12-bit probability (of a 0) taken from
//! a table of 2^16 indexed by the stream's previous 16 bits and updated by a shift of 4. The
//! model (table and history) continues over the chunks of one thread, in file order; the coder
//! is flushed at each chunk's end, and a chunk holds `u32 raw bytes` (at most [`RC_RAW_MAX`])
//! then the coded bytes. Decoding a chunk that is corrupt or truncated is an error, never a
//! panic; a chunk yields at most [`RC_RAW_MAX`] bytes.

/// Raw bytes of one coded chunk, at most (the runtime's `WT_RC_RAW`).
pub const RC_RAW_MAX: usize = 65536;
const BITS: u32 = 16;
const TOP: u32 = 1 << 24;

/// The adaptive model of one thread's stream.
pub struct RcModel {
    p: Vec<u16>,
    hist: u32,
}

impl Default for RcModel {
    fn default() -> Self {
        RcModel {
            p: vec![2048; 1 << BITS],
            hist: 0,
        }
    }
}

impl RcModel {
    #[inline(always)]
    fn slot(&self) -> usize {
        (self.hist & ((1 << BITS) - 1)) as usize
    }

    #[inline(always)]
    fn update(&mut self, i: usize, bit: u32) {
        let p = u32::from(self.p[i]);
        self.p[i] = if bit == 0 {
            (p + ((4096 - p) >> 4)) as u16
        } else {
            (p - (p >> 4)) as u16
        };
        self.hist = self.hist << 1 | bit;
    }

    /// Decodes one chunk's body (`u32 raw bytes`, coded bytes), appending the raw bytes to
    /// `out`; `None` if the chunk is corrupt (too long, or its coded bytes run out or are left
    /// over).
    pub fn decode_chunk(&mut self, body: &[u8], out: &mut Vec<u8>) -> Option<()> {
        let raw = u32::from_le_bytes(body.get(..4)?.try_into().ok()?) as usize;
        if raw == 0 || raw > RC_RAW_MAX {
            return None;
        }
        let coded = &body[4..];
        if coded.len() < 5 || coded[0] != 0 {
            return None;
        }
        let mut code = u32::from_be_bytes(coded[1..5].try_into().ok()?);
        let mut range = u32::MAX;
        let mut pos = 5;
        out.reserve(raw);
        for _ in 0..raw {
            let mut byte = 0u8;
            for k in 0..8 {
                let i = self.slot();
                let bound = (range >> 12) * u32::from(self.p[i]);
                let bit = if code < bound {
                    range = bound;
                    0
                } else {
                    code -= bound;
                    range -= bound;
                    1
                };
                self.update(i, bit);
                byte |= (bit as u8) << k;
                while range < TOP {
                    range <<= 8;
                    code = code << 8 | u32::from(*coded.get(pos)?);
                    pos += 1;
                }
            }
            out.push(byte);
        }
        (pos == coded.len()).then_some(())
    }

    /// Codes `raw` (at most [`RC_RAW_MAX`] bytes) as one chunk's body, as the runtime does.
    pub fn encode_chunk(&mut self, raw: &[u8]) -> Vec<u8> {
        assert!(!raw.is_empty() && raw.len() <= RC_RAW_MAX);
        let mut e = Encoder {
            low: 0,
            range: u32::MAX,
            cache: 0,
            cache_size: 1,
            out: (raw.len() as u32).to_le_bytes().to_vec(),
        };
        for &b in raw {
            for k in 0..8 {
                let bit = u32::from(b >> k & 1);
                let i = self.slot();
                let bound = (e.range >> 12) * u32::from(self.p[i]);
                if bit == 0 {
                    e.range = bound;
                } else {
                    e.low += u64::from(bound);
                    e.range -= bound;
                }
                self.update(i, bit);
                while e.range < TOP {
                    e.range <<= 8;
                    e.shift_low();
                }
            }
        }
        for _ in 0..5 {
            e.shift_low();
        }
        e.out
    }
}

struct Encoder {
    low: u64,
    range: u32,
    cache: u8,
    cache_size: u64,
    out: Vec<u8>,
}

impl Encoder {
    fn shift_low(&mut self) {
        if (self.low as u32) < 0xff00_0000 || (self.low >> 32) != 0 {
            let carry = (self.low >> 32) as u8;
            let mut temp = self.cache;
            loop {
                self.out.push(temp.wrapping_add(carry));
                temp = 0xff;
                self.cache_size -= 1;
                if self.cache_size == 0 {
                    break;
                }
            }
            self.cache = (self.low >> 24) as u8;
        }
        self.cache_size += 1;
        self.low = (self.low & 0x00ff_ffff) << 8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(n: usize, seed: u64) -> Vec<u8> {
        // a biased, patterned stream: loops with a rare exit, and some noise
        let mut x = seed;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 7 == 0 {
                    x as u8
                } else {
                    0xfe
                }
            })
            .collect()
    }

    #[test]
    fn chunks_round_trip_with_the_model_carried_over() {
        let (mut enc, mut dec) = (RcModel::default(), RcModel::default());
        let mut all = Vec::new();
        let mut coded = 0;
        for (k, n) in [1usize, 5000, RC_RAW_MAX, 300].into_iter().enumerate() {
            let raw = stream(n, k as u64 + 1);
            let body = enc.encode_chunk(&raw);
            coded += body.len();
            dec.decode_chunk(&body, &mut all).unwrap();
            assert_eq!(&all[all.len() - n..], &raw[..]);
        }
        assert!(
            coded * 2 < all.len(),
            "{coded} coded bytes for {}",
            all.len()
        );
        // random bytes too (no compression, still exact)
        let mut x = 7u64;
        let noise: Vec<u8> = (0..20000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect();
        let body = enc.encode_chunk(&noise);
        let mut out = Vec::new();
        dec.decode_chunk(&body, &mut out).unwrap();
        assert_eq!(out, noise);
    }

    #[test]
    fn corrupt_or_truncated_chunks_are_refused() {
        let raw = stream(10000, 3);
        let body = RcModel::default().encode_chunk(&raw);
        let mut out = Vec::new();
        for cut in [0, 3, 4, 8, body.len() / 2, body.len() - 1] {
            assert!(RcModel::default()
                .decode_chunk(&body[..cut], &mut out)
                .is_none());
        }
        let mut long = body.clone();
        long.push(0);
        assert!(RcModel::default().decode_chunk(&long, &mut out).is_none());
        let mut big = body.clone();
        big[..4].copy_from_slice(&(RC_RAW_MAX as u32 + 1).to_le_bytes());
        assert!(RcModel::default().decode_chunk(&big, &mut out).is_none());
        // flipped bits decode to something (the stream parser checks it) or are refused
        for i in (4..body.len()).step_by(7) {
            let mut bad = body.clone();
            bad[i] ^= 0x5a;
            let _ = RcModel::default().decode_chunk(&bad, &mut Vec::new());
        }
    }
}
