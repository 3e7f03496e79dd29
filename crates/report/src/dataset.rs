//! The open dataset of `tally export`: profiles of many runs and builds as Parquet tables
//! that DuckDB, Spark and other engines query (docs/dataset.md has the schema and the SQL).
//!
//! Exact counts add, so what `tally merge` computes for one build is a `GROUP BY ... SUM`
//! over the fact tables: no weights, no sampling error. Every count in the dataset is what
//! `tally report` derives from the same profile ([`crate::analyze`]); a function whose
//! counts a run could not recover is a row of `inexact` instead of counts.
//!
//! Layout: `DIR/TABLE/build=KEY/FILE.parquet`, Hive-partitioned by build. The dimension tables
//! ([`schema::DIMENSIONS`]) are written once per build; the fact tables ([`schema::FACTS`])
//! get one file per part (a batch of runs), `runs` last; a part's totals tables hold the sums
//! of its runs' line and function counts. Exporting more profiles adds files and rewrites
//! none; a profile whose run id is in the dataset already is skipped.
//!
//! [`schema`] is the one description of the tables, [`table`] turns rows into Parquet files,
//! [`export`] derives the rows from profiles, `part` gathers a part's rows and totals,
//! [`read`] reads back what the dataset holds.

pub mod export;
mod part;
pub mod read;
pub mod schema;
pub mod table;

pub use export::{Exporter, Outcome, Summary};
pub use read::{build_profile, locate};
use std::path::Path;
use tally_format::profile::ProfileError;
use thiserror::Error;

/// Why a profile could not be exported, or the dataset not written.
#[derive(Debug, Error)]
pub enum DatasetError {
    /// The profile cannot be read.
    #[error(transparent)]
    Profile(Box<ProfileError>),
    /// Its counts cannot be derived.
    #[error(transparent)]
    Report(#[from] crate::ReportError),
    /// A file of the dataset cannot be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// What the system said.
        error: std::io::Error,
    },
    /// The Parquet writer or reader failed.
    #[error("{path}: {message}")]
    Parquet {
        /// The file.
        path: String,
        /// What the library said.
        message: String,
    },
    /// A table's columns do not fit together.
    #[error("table {table}: {message}")]
    Arrow {
        /// The table.
        table: &'static str,
        /// What the library said.
        message: String,
    },
    /// Something the exporter cannot reconcile.
    #[error("{0}")]
    Inconsistent(String),
    /// A part could not be written: the export stops (the part's runs are not in the
    /// dataset; exporting the same profiles again adds them).
    #[error("writing the dataset failed: {0}")]
    Write(Box<DatasetError>),
}

impl From<ProfileError> for DatasetError {
    fn from(e: ProfileError) -> DatasetError {
        DatasetError::Profile(Box::new(e))
    }
}

impl DatasetError {
    fn io(path: &Path, error: std::io::Error) -> DatasetError {
        DatasetError::Io {
            path: path.display().to_string(),
            error,
        }
    }
}

/// A run's id: 32 hex digits hashing the profile's bytes, so that the same profile exported
/// twice is one run. Two 64-bit multiply-rotate lanes over the bytes taken eight at a time
/// (not cryptographic: profiles are not adversaries of each other; it runs at memory speed).
pub fn run_id(bytes: &[u8]) -> String {
    const K1: u64 = 0x9e37_79b9_7f4a_7c15;
    const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;
    let (mut a, mut b) = (0x243f_6a88_85a3_08d3u64, 0x1319_8a2e_0370_7344u64);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("eight bytes"));
        a = (a ^ w).wrapping_mul(K1).rotate_left(29);
        b = (b ^ w.rotate_left(32)).wrapping_mul(K2).rotate_left(31);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    let w = u64::from_le_bytes(tail) ^ (bytes.len() as u64).rotate_left(56);
    a = (a ^ w).wrapping_mul(K1);
    b = (b ^ w).wrapping_mul(K2);
    // Final mixing, so that every input bit reaches every output bit.
    let fmix = |mut h: u64| {
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    };
    format!("{:016x}{:016x}", fmix(a ^ b.rotate_left(17)), fmix(b ^ a))
}

#[cfg(test)]
mod tests {
    use super::run_id;

    #[test]
    fn run_ids_are_stable_and_tell_profiles_apart() {
        let a = b"TALLYPRF a profile of some length, not a multiple of eight".to_vec();
        assert_eq!(run_id(&a), run_id(&a.clone()));
        assert_eq!(run_id(&a).len(), 32);
        assert!(run_id(&a).chars().all(|c| c.is_ascii_hexdigit()));
        // One bit anywhere, or one more zero byte, is another run.
        for i in 0..a.len() {
            let mut b = a.clone();
            b[i] ^= 1;
            assert_ne!(run_id(&a), run_id(&b), "bit 0 of byte {i}");
        }
        let mut longer = a.clone();
        longer.push(0);
        assert_ne!(run_id(&a), run_id(&longer));
        assert_ne!(run_id(b""), run_id(&[0]));
    }
}
