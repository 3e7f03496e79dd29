//! `trace-naive`'s trace file (`crates/runtime/c/trace_naive.c`): every function entry and every edge
//! taken, per activation — a full control-flow trace, the independent oracle for path profiles.
//!
//! ```text
//! "TALLYTRC"  u32 version (=1)  u32 0
//! record*     u64 activation  u64 (kind << 56) | value  u64 module hash
//! ```
//! kind 0: activation entered function `value` (index in the metadata of the module whose
//! metadata hashes to `module hash`); kind 1: the activation took edge `value`.

use super::TraceError;

/// One record of a trace.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TraceRecord {
    /// An activation entered a function.
    Enter {
        /// Activation id (unique in the run).
        act: u64,
        /// Hash of the module's metadata.
        module: u64,
        /// Index of the function in the module's metadata.
        function: u32,
    },
    /// An activation took an edge of its function.
    Edge {
        /// Activation id.
        act: u64,
        /// Edge id.
        edge: u32,
    },
}

/// Parses a trace file.
pub fn read_trace(bytes: &[u8]) -> Result<Vec<TraceRecord>, TraceError> {
    if bytes.len() < 16 || &bytes[..8] != b"TALLYTRC" {
        return Err(TraceError::BadMagic);
    }
    let word = |b: &[u8]| {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        u64::from_le_bytes(a)
    };
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != 1 {
        return Err(TraceError::Version(version));
    }
    let body = &bytes[16..];
    if !body.len().is_multiple_of(24) {
        return Err(TraceError::Truncated(body.len() % 24));
    }
    body.chunks_exact(24)
        .enumerate()
        .map(|(i, r)| {
            let act = word(&r[0..8]);
            let kv = word(&r[8..16]);
            let module = word(&r[16..24]);
            match kv >> 56 {
                0 => Ok(TraceRecord::Enter {
                    act,
                    module,
                    function: (kv & 0xffff_ffff) as u32,
                }),
                1 => Ok(TraceRecord::Edge {
                    act,
                    edge: (kv & 0xffff_ffff) as u32,
                }),
                _ => Err(TraceError::BadRecord(i)),
            }
        })
        .collect()
}
