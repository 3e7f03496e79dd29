//! What can be wrong with a profile: every refusal of the reader, each one line.

use super::*;

/// What can be wrong with a profile. Every message is one line.
#[derive(Debug, Error)]
pub enum ProfileError {
    /// The file has no bytes at all.
    #[error("empty profile (0 bytes): the program wrote nothing")]
    Empty,
    /// A path entry that names no function with hashed paths, or has an unknown kind.
    #[error("corrupt profile: module record #{index} has a bad path entry (function #{function})")]
    BadPathEntry {
        /// The module record.
        index: usize,
        /// The function it names.
        function: u32,
    },
    /// The file does not start with `TALLYPRF`.
    #[error("not a tally profile (bad magic)")]
    BadMagic,
    /// A container version this build cannot read.
    #[error(
        "profile container version {found} is not supported (this tally reads versions {PROFILE_VERSION_NO_CHECKSUM} to {PROFILE_VERSION_RUN})"
    )]
    Version {
        /// The version found.
        found: u32,
    },
    /// A run record with an unknown status kind, over-long strings or non-zero padding.
    #[error("corrupt profile: bad run record ({0})")]
    BadRun(&'static str),
    /// A program record with an unknown build id kind or a length over its bound.
    #[error("corrupt profile: bad program record ({0})")]
    BadProgram(&'static str),
    /// Header flags this build does not know (version 1 defines none).
    #[error("profile flags {found:#x} are not supported (this tally reads flags {PROFILE_CONTINUOUS} (unfinished), {PROFILE_RACED} (raced), {PROFILE_SIGNALED} (fatal signal, its number in {PROFILE_SIGNAL_MASK:#x}), {PROFILE_DELTA} (a snapshot's part))")]
    Flags {
        /// The flags found.
        found: u32,
    },
    /// Something runs past the end of the file, or the trailer is missing or wrong.
    #[error("truncated profile: {0}")]
    Truncated(Truncation),
    /// A padding record of a continuous profile with a bad length or non-zero bytes.
    #[error("corrupt profile: bad padding record at byte {offset}")]
    BadPadding {
        /// Byte offset of the record.
        offset: usize,
    },
    /// A module record does not start with `TALLYMOD`.
    #[error("corrupt profile: module record #{index} at byte {offset} has a bad magic")]
    BadModuleMagic {
        /// Position of the module in the file (0-based).
        index: usize,
        /// Byte offset of the record.
        offset: usize,
    },
    /// A module's stored hash is not the hash of its metadata blob.
    #[error(
        "corrupt profile: module record #{index} metadata hash mismatch (stored {stored:016x}, computed {computed:016x})"
    )]
    HashMismatch {
        /// Position of the module in the file (0-based).
        index: usize,
        /// The hash stored in the record.
        stored: u64,
        /// FNV-1a 64 of the stored blob.
        computed: u64,
    },
    /// A module's counters or path entries are not what its checksum says.
    #[error(
        "corrupt profile: module record #{index} ({source_file}) counter checksum mismatch (stored {stored:016x}, computed {computed:016x}): its counts are damaged"
    )]
    ChecksumMismatch {
        /// Position of the module in the file (0-based).
        index: usize,
        /// The module's source file, from its metadata.
        source_file: String,
        /// The checksum stored in the record.
        stored: u64,
        /// FNV-1a 64 of the stored counter and path-entry bytes.
        computed: u64,
    },
    /// Adding a profile's counts to another's overflowed 64 bits.
    #[error("module record #{index}: a count overflows 64 bits when the profiles are added")]
    Overflow {
        /// Position of the module in the file (0-based).
        index: usize,
    },
    /// A module's metadata blob does not decode.
    #[error("corrupt profile: module record #{index} metadata: {cause}")]
    BadMetadata {
        /// Position of the module in the file (0-based).
        index: usize,
        /// Why the blob does not decode (part of the message, not a separate source, so that
        /// the one-line error does not repeat it).
        cause: MetaError,
    },
    /// A module stores a different number of counters than its metadata declares.
    #[error(
        "corrupt profile: module record #{index} ({source_file}) has {found} counters but its metadata declares {expected}"
    )]
    CounterCount {
        /// Position of the module in the file (0-based).
        index: usize,
        /// The module's source file, from its metadata.
        source_file: String,
        /// Counters stored.
        found: u64,
        /// `num_counters` of the metadata.
        expected: u32,
    },
    /// Bytes follow a valid trailer.
    #[error("corrupt profile: {extra} bytes of trailing garbage after the trailer at byte {end}")]
    TrailingGarbage {
        /// Number of extra bytes.
        extra: usize,
        /// Where the profile proper ends.
        end: usize,
    },
    /// A sparse counter group (a [`crate::abi::REF_MAGIC`] record) whose mask has bits past
    /// the record's counters.
    #[error("corrupt profile: module record #{index} has a bad sparse counter mask")]
    BadSparse {
        /// The module record.
        index: usize,
    },
    /// A record names its metadata file (`TALLY_META=shared`), but the profile was given as
    /// bytes, without the directory it came from.
    #[error("module record #{index} keeps its metadata in {hash:016x}{META_FILE_SUFFIX} next to the profile (TALLY_META=shared); read the profile from its file")]
    MetaNotFound {
        /// The module record.
        index: usize,
        /// Its module hash.
        hash: u64,
    },
    /// The metadata file a record names is missing, unreadable or not that module's.
    #[error("cannot read the metadata file {} the profile needs (TALLY_META=shared keeps it next to the profile): {why}", path.display())]
    MetaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The path names something other than a regular file (a directory, a FIFO, a device such
    /// as /dev/zero): readers never read those, so they never block or read without end.
    #[error("cannot read profile {}: not a regular file ({kind})", path.display())]
    NotRegular {
        /// The path given.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// The file is larger than the bound ([`MAX_PROFILE_BYTES`]).
    #[error(
        "cannot read profile {}: {len} bytes is more than the {max} a profile may have",
        path.display()
    )]
    TooLarge {
        /// The path given.
        path: PathBuf,
        /// Its length (at least, when it grew while being read).
        len: u64,
        /// The bound.
        max: u64,
    },
    /// The file cannot be read.
    #[error("cannot read profile {}: {error}", path.display())]
    Io {
        /// The path given.
        path: PathBuf,
        /// The I/O error (in the message, not a `source`: error chains print it once).
        error: std::io::Error,
    },
}

/// How a profile is truncated (the detail of [`ProfileError::Truncated`]).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Truncation {
    /// `what`, `need` bytes starting at byte `at`, runs past the end (`len` bytes).
    PastEnd {
        /// The part that does not fit.
        what: &'static str,
        /// Where it starts.
        at: usize,
        /// How many bytes it needs (saturated).
        need: u64,
        /// The file length.
        len: usize,
    },
    /// No `TALLYEND` where the trailer should start.
    MissingTrailer {
        /// Where the trailer should start.
        at: usize,
    },
    /// The trailer's total length disagrees with where it actually ends.
    WrongLength {
        /// The length recorded in the trailer.
        recorded: u64,
        /// The actual end of the trailer.
        actual: usize,
    },
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Truncation::PastEnd {
                what,
                at,
                need,
                len,
            } => write!(
                f,
                "{what} at byte {at} needs {need} bytes but the file has {len} bytes"
            ),
            Truncation::MissingTrailer { at } => {
                write!(f, "no TALLYEND trailer at byte {at}")
            }
            Truncation::WrongLength { recorded, actual } => write!(
                f,
                "the trailer records a length of {recorded} bytes but the profile ends at byte {actual}"
            ),
        }
    }
}
