//! The profile container: what an instrumented program writes at exit (`crates/runtime/c/write.c` in
//! tally-runtime) and what `tally merge` writes back.
//!
//! All integers are little-endian:
//!
//! ```text
//! header   "TALLYPRF"  u32 container_version (=4)  u32 flags (=0)  u64 module_count  u64 pid
//! program  u64 path_len  u32 build_id_kind  u32 build_id_len
//!          path bytes, build id bytes, zero-padded to a multiple of 8
//! module*  "TALLYMOD"  u64 module_hash  u64 meta_len  u64 num_counters  u64 num_path_entries
//!          meta bytes, zero-padded to a multiple of 8
//!          num_counters x u64 counters
//!          num_path_entries x { u32 function  u32 kind  u64 path  u64 count }
//!          u64 checksum: FNV-1a 64 of the counter and path-entry bytes just before it
//! trailer  "TALLYEND"  u64 total file length in bytes (trailer included)
//! ```
//!
//! A continuous-mode profile that is not finished (header flag [`PROFILE_CONTINUOUS`]: the
//! program was killed while its counters were mapped into the file) may hold padding records
//! (`"TALLYPAD"  u64 length`, then zeros up to that length) before any module record; its
//! checksums are not verified (the counters changed under them) and nothing after its last
//! module record is read. It reads as a [`Profile`] with `unfinished` set.
//!
//! Two more header flags say a finished profile's counts may not all be exact (what a reader
//! then tells its user): [`PROFILE_RACED`] (non-atomic code ran in a multi-threaded process:
//! [`Profile::raced`]) and [`PROFILE_SIGNALED`] with the signal's number in
//! [`PROFILE_SIGNAL_MASK`] (written by the fatal-signal handler: [`Profile::signal`]).
//!
//! Every constant of this layout is in [`crate::abi`], shared with the runtime's writer, which
//! `crates/runtime/build.rs` checks against it at compile time. Version 3 is the same without
//! the program record (read with an unknown [`Program`]), version 2 without the checksum
//! either; both are still read.
//!
//! The program record names the program that wrote the profile ([`Program`]): the path of its
//! executable and a build id (the GNU build-id note of the executable, else a hash of the
//! module hashes, [`Profile::modules_build_id`]).
//!
//! Path entries hold the hashed path counters of path mode: kind 0 is "path `path` of function
//! `function` (index in the module's metadata) ran `count` times", kind 1 is "`count` increments
//! of that function were lost because the runtime ran out of memory". Entries for the same path
//! of the same function add up (the runtime lists a path's home-table and overflow-table counts
//! separately).
//!
//! `module_hash` is the FNV-1a 64 hash ([`tally_graph::hash::fnv64`]) of the metadata blob; the
//! checksum guards the counts, so that a corrupted counter is refused instead of reported.
//! The reader checks every magic, the version, every length, the trailer, each module's hash
//! and checksum, that its metadata decodes and that the number of counters agrees with the
//! metadata; it never panics, whatever the input.

use std::fmt;
use std::path::{Path, PathBuf};

use tally_graph::hash::{fnv64, Fnv64};
use thiserror::Error;

use crate::abi::{
    BUILD_ID_GNU, BUILD_ID_MAX, BUILD_ID_MODULES, BUILD_ID_NONE, CHECKSUM_LEN, HEADER_LEN,
    MODULE_HEADER_LEN, PAD_MAGIC, PATH_ENTRY_COUNT, PATH_ENTRY_LEN, PATH_ENTRY_LOST,
    PROFILE_CONTINUOUS, PROFILE_FLAGS, PROFILE_KNOWN_FLAGS, PROFILE_RACED, PROFILE_SIGNALED,
    PROFILE_SIGNAL_MASK, PROFILE_SIGNAL_SHIFT, PROFILE_VERSION_NO_CHECKSUM,
    PROFILE_VERSION_NO_PROGRAM, PROGRAM_HEADER_LEN, PROGRAM_PATH_MAX, TRAILER_LEN,
};
use crate::meta::{MetaError, ModuleMeta};

pub use crate::abi::{MODULE_MAGIC, PROFILE_MAGIC, PROFILE_VERSION, TRAILER_MAGIC};

/// The counters one run (or a merge of runs) recorded for all instrumented modules.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Profile {
    /// Process id of the run that wrote the profile (0 for merged profiles, by convention).
    pub pid: u64,
    /// The program that wrote it (unknown for container versions before 4).
    pub program: Program,
    /// The modules, in the order of the file (the runtime writes them in ascending module
    /// hash; older runtimes in registration order).
    pub modules: Vec<ProfileModule>,
    /// A continuous-mode profile left by a process that did not exit normally (header flag
    /// [`PROFILE_CONTINUOUS`]): functions active when it was killed have counts that do not
    /// balance, and hashed path counts (path mode) are missing.
    pub unfinished: bool,
    /// Code built without atomic increments ran in a process that went multi-threaded (header
    /// flag [`PROFILE_RACED`]): its counts may have lost updates.
    pub raced: bool,
    /// Written by the fatal-signal handler for this signal (header flag [`PROFILE_SIGNALED`]):
    /// functions active at that moment, in any thread, may have inexact counts.
    pub signal: Option<u32>,
}

/// The program that wrote a profile: the container's program record.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct Program {
    /// The executable's path as the kernel gave it at startup (`/proc/self/exe`); empty if
    /// unknown.
    pub path: Vec<u8>,
    /// Its build id.
    pub build_id: BuildId,
}

/// How a profile's program is identified.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub enum BuildId {
    /// Unknown (a profile of container version 2 or 3, or no memory at exit).
    #[default]
    None,
    /// The descriptor of the executable's GNU build-id note (`NT_GNU_BUILD_ID`).
    Gnu(Vec<u8>),
    /// The executable has no build-id note: [`Profile::modules_build_id`] of the profile.
    Modules(u64),
}

impl BuildId {
    /// The id in hex (the GNU id byte by byte, as `file` and `readelf -n` print it; the module
    /// hash as a 16-digit number); empty when unknown.
    pub fn hex(&self) -> String {
        match self {
            BuildId::None => String::new(),
            BuildId::Gnu(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
            BuildId::Modules(h) => format!("{h:016x}"),
        }
    }

    /// `"gnu"`, `"modules"` or `"none"`.
    pub fn kind(&self) -> &'static str {
        match self {
            BuildId::None => "none",
            BuildId::Gnu(_) => "gnu",
            BuildId::Modules(_) => "modules",
        }
    }
}

impl Program {
    /// Neither a path nor a build id is known.
    pub fn is_unknown(&self) -> bool {
        self.path.is_empty() && self.build_id == BuildId::None
    }

    /// Whether profiles of `self` and `other` are of one program by their program records:
    /// the same GNU build id when both have one; otherwise the same path, or one of them
    /// unknown. (Readers also combine profiles of the same set of modules, whatever their
    /// programs say.)
    pub fn may_combine(&self, other: &Program) -> bool {
        match (&self.build_id, &other.build_id) {
            (BuildId::Gnu(a), BuildId::Gnu(b)) => a == b,
            _ => self.path.is_empty() || other.path.is_empty() || self.path == other.path,
        }
    }

    /// The program of a sum of profiles of `self` and `other`: the path when both name the
    /// same one, the GNU build id when both have it, a module-hash build id when both have
    /// one (it is `self`'s: the caller recomputes it from the sum's modules,
    /// [`Profile::modules_build_id`]); else nothing.
    pub fn combined(&self, other: &Program) -> Program {
        let path = if self.path == other.path {
            self.path.clone()
        } else {
            Vec::new()
        };
        let build_id = match (&self.build_id, &other.build_id) {
            (BuildId::Gnu(a), BuildId::Gnu(b)) if a == b => self.build_id.clone(),
            (BuildId::Modules(_), BuildId::Modules(_)) => self.build_id.clone(),
            _ => BuildId::None,
        };
        Program { path, build_id }
    }

    /// The path, for display (invalid UTF-8 replaced).
    pub fn path_lossy(&self) -> String {
        String::from_utf8_lossy(&self.path).into_owned()
    }
}

/// One module of a profile: its metadata and its counter array.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ProfileModule {
    /// FNV-1a 64 of [`ProfileModule::meta_blob`].
    pub hash: u64,
    /// The decoded metadata.
    pub meta: ModuleMeta,
    /// The metadata blob exactly as stored (what [`Profile::write`] writes back).
    pub meta_blob: Vec<u8>,
    /// The counters; `counters.len() == meta.num_counters`.
    pub counters: Vec<u64>,
    /// Hashed path counts (path mode), in file order.
    pub paths: Vec<PathEntry>,
}

/// One path entry of a module record.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct PathEntry {
    /// Index of the function in the module's metadata.
    pub function: u32,
    /// What the entry says.
    pub kind: PathEntryKind,
    /// The path number (0 for `Lost`).
    pub path: u64,
    /// How often the path ran, or how many increments were lost.
    pub count: u64,
}

/// The kinds of path entries.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum PathEntryKind {
    /// A path count.
    Count,
    /// Increments lost for lack of memory.
    Lost,
}

impl ProfileModule {
    /// A module record for `meta` with the given counters; encodes the blob and its hash.
    pub fn new(meta: ModuleMeta, counters: Vec<u64>) -> ProfileModule {
        let meta_blob = meta.encode();
        ProfileModule {
            hash: fnv64(&meta_blob),
            meta,
            meta_blob,
            counters,
            paths: Vec::new(),
        }
    }

    /// A module record from a stored metadata blob, checked like a record read from a file
    /// (`index` only names the module in errors).
    pub fn from_blob(
        index: usize,
        meta_blob: Vec<u8>,
        counters: Vec<u64>,
    ) -> Result<ProfileModule, ProfileError> {
        let hash = fnv64(&meta_blob);
        let meta = ModuleMeta::decode(&meta_blob)
            .map_err(|cause| ProfileError::BadMetadata { index, cause })?;
        if counters.len() as u64 != u64::from(meta.num_counters) {
            return Err(ProfileError::CounterCount {
                index,
                source_file: meta.source.clone(),
                found: counters.len() as u64,
                expected: meta.num_counters,
            });
        }
        Ok(ProfileModule {
            hash,
            meta,
            meta_blob,
            counters,
            paths: Vec::new(),
        })
    }
}

/// The largest profile file a reader accepts: 4 GiB. A profile holds every module's metadata
/// and counters, a few megabytes for programs of millions of lines; the bound keeps a reader
/// pointed at a huge or endless input from exhausting memory.
pub const MAX_PROFILE_BYTES: u64 = 4 << 30;

fn file_kind(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

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
        "profile container version {found} is not supported (this tally reads versions {PROFILE_VERSION_NO_CHECKSUM} to {PROFILE_VERSION})"
    )]
    Version {
        /// The version found.
        found: u32,
    },
    /// A program record with an unknown build id kind or a length over its bound.
    #[error("corrupt profile: bad program record ({0})")]
    BadProgram(&'static str),
    /// Header flags this build does not know (version 1 defines none).
    #[error("profile flags {found:#x} are not supported (this tally reads flags {PROFILE_CONTINUOUS} (unfinished), {PROFILE_RACED} (raced), {PROFILE_SIGNALED} (fatal signal, its number in {PROFILE_SIGNAL_MASK:#x}))")]
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

/// A bounds-checked cursor over the input.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, what: &'static str, n: u64) -> Result<&'a [u8], ProfileError> {
        let at = self.pos;
        let past_end = || {
            ProfileError::Truncated(Truncation::PastEnd {
                what,
                at,
                need: n,
                len: self.bytes.len(),
            })
        };
        let n = usize::try_from(n).map_err(|_| past_end())?;
        let end = at.checked_add(n).ok_or_else(past_end)?;
        let slice = self.bytes.get(at..end).ok_or_else(past_end)?;
        self.pos = end;
        Ok(slice)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, ProfileError> {
        let b = self.take(what, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, ProfileError> {
        let b = self.take(what, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// The checksum of a module record (version 3): FNV-1a 64 of its counter bytes followed by its
/// path-entry bytes, as stored.
fn counter_checksum(counters: &[u8], paths: &[u8]) -> u64 {
    let mut h = Fnv64::new();
    h.write(counters);
    h.write(paths);
    h.finish()
}

/// The program record (version 4).
fn read_program(r: &mut Reader<'_>) -> Result<Program, ProfileError> {
    let path_len = r.u64("the program path length")?;
    let kind = r.u32("the build id kind")?;
    let id_len = r.u32("the build id length")?;
    if path_len > PROGRAM_PATH_MAX {
        return Err(ProfileError::BadProgram("path too long"));
    }
    if u64::from(id_len) > BUILD_ID_MAX {
        return Err(ProfileError::BadProgram("build id too long"));
    }
    let path = r.take("the program path", path_len)?.to_vec();
    let id = r.take("the build id", u64::from(id_len))?;
    let padded = pad8(path_len + u64::from(id_len)).unwrap_or(u64::MAX);
    r.take(
        "the program record padding",
        padded - path_len - u64::from(id_len),
    )?;
    let build_id = match (kind, id_len) {
        (BUILD_ID_NONE, 0) => BuildId::None,
        (BUILD_ID_GNU, 1..) => BuildId::Gnu(id.to_vec()),
        (BUILD_ID_MODULES, 8) => {
            let mut a = [0u8; 8];
            a.copy_from_slice(id);
            BuildId::Modules(u64::from_le_bytes(a))
        }
        _ => return Err(ProfileError::BadProgram("bad build id kind or length")),
    };
    Ok(Program { path, build_id })
}

/// Skips the padding records before a module record of a continuous profile.
fn skip_padding(r: &mut Reader<'_>) -> Result<(), ProfileError> {
    while r.bytes.get(r.pos..r.pos.saturating_add(8)) == Some(&PAD_MAGIC[..]) {
        let at = r.pos;
        r.take("a padding record", 8)?;
        let len = r.u64("the padding length")?;
        if len < 16 || len % 8 != 0 {
            return Err(ProfileError::BadPadding { offset: at });
        }
        let body = r.take("the padding", len - 16)?;
        if body.iter().any(|&b| b != 0) {
            return Err(ProfileError::BadPadding { offset: at });
        }
    }
    Ok(())
}

/// `len` rounded up to a multiple of 8, if that fits.
fn pad8(len: u64) -> Option<u64> {
    len.checked_add(7).map(|l| l & !7)
}

/// A module record as stored: lengths, hash and checksum checked, metadata not decoded.
struct RawModule<'a> {
    index: usize,
    hash: u64,
    blob: &'a [u8],
    counters: &'a [u8],
    paths: &'a [u8],
    /// `(stored, computed)` when the counter checksum does not match.
    bad_checksum: Option<(u64, u64)>,
}

impl RawModule<'_> {
    fn check_sum(&self, meta: &ModuleMeta) -> Result<(), ProfileError> {
        match self.bad_checksum {
            None => Ok(()),
            Some((stored, computed)) => Err(ProfileError::ChecksumMismatch {
                index: self.index,
                source_file: meta.source.clone(),
                stored,
                computed,
            }),
        }
    }
}

/// A profile parsed down to its module records ([`parse`]).
struct RawProfile<'a> {
    pid: u64,
    program: Program,
    modules: Vec<RawModule<'a>>,
    unfinished: bool,
    raced: bool,
    signal: Option<u32>,
}

/// Checks everything about a profile but its metadata and path entries: magics, version,
/// flags, lengths, each module's hash and checksum, the trailer.
fn parse(bytes: &[u8]) -> Result<RawProfile<'_>, ProfileError> {
    if bytes.is_empty() {
        return Err(ProfileError::Empty);
    }
    let prefix = bytes.len().min(PROFILE_MAGIC.len());
    if bytes[..prefix] != PROFILE_MAGIC[..prefix] {
        return Err(ProfileError::BadMagic);
    }
    let mut r = Reader { bytes, pos: 0 };
    r.take("the header", HEADER_LEN as u64)?;
    r.pos = PROFILE_MAGIC.len();
    let version = r.u32("the container version")?;
    if !(PROFILE_VERSION_NO_CHECKSUM..=PROFILE_VERSION).contains(&version) {
        return Err(ProfileError::Version { found: version });
    }
    let checksummed = version >= PROFILE_VERSION_NO_PROGRAM;
    let flags = r.u32("the flags")?;
    // Flags came with container version 4; a signal number only with its flag.
    let signal = (flags & PROFILE_SIGNAL_MASK) >> PROFILE_SIGNAL_SHIFT;
    let signaled = flags & PROFILE_SIGNALED != 0;
    if flags & !PROFILE_KNOWN_FLAGS != 0
        || (flags != PROFILE_FLAGS && version < PROFILE_VERSION)
        || signaled != (signal != 0)
    {
        return Err(ProfileError::Flags { found: flags });
    }
    let unfinished = flags & PROFILE_CONTINUOUS != 0;
    let raced = flags & PROFILE_RACED != 0;
    let signal = signaled.then_some(signal);
    let module_count = r.u64("the module count")?;
    let pid = r.u64("the pid")?;
    let program = if version > PROFILE_VERSION_NO_PROGRAM {
        read_program(&mut r)?
    } else {
        Program::default()
    };

    // Each module takes at least MODULE_HEADER_LEN bytes: never reserve more than fits.
    let fits = (bytes.len() - r.pos) / MODULE_HEADER_LEN;
    let cap = usize::try_from(module_count)
        .unwrap_or(usize::MAX)
        .min(fits);
    let mut modules = Vec::with_capacity(cap);
    for index in 0..module_count {
        let index = usize::try_from(index).unwrap_or(usize::MAX);
        if unfinished {
            skip_padding(&mut r)?;
        }
        let offset = r.pos;
        let magic = r.take("a module record", MODULE_MAGIC.len() as u64)?;
        if magic != MODULE_MAGIC {
            return Err(ProfileError::BadModuleMagic { index, offset });
        }
        let stored = r.u64("the module hash")?;
        let meta_len = r.u64("the metadata length")?;
        let num_counters = r.u64("the counter count")?;
        let num_paths = r.u64("the path entry count")?;
        let blob = r.take("the module metadata", meta_len)?;
        let padded = pad8(meta_len).unwrap_or(u64::MAX);
        r.take("the metadata padding", padded - meta_len)?;
        let counter_bytes = num_counters.saturating_mul(8);
        let counters = r.take("the module counters", counter_bytes)?;
        let paths = r.take(
            "the path entries",
            num_paths.saturating_mul(PATH_ENTRY_LEN as u64),
        )?;
        let checksum = if checksummed {
            Some(r.u64("the counter checksum")?)
        } else {
            None
        };
        let computed = fnv64(blob);
        if computed != stored {
            return Err(ProfileError::HashMismatch {
                index,
                stored,
                computed,
            });
        }
        // Compared by the caller, after the metadata decodes (the error names its source).
        let bad_checksum = checksum
            .filter(|_| !unfinished)
            .map(|stored| (stored, counter_checksum(counters, paths)))
            .filter(|(stored, computed)| stored != computed);
        modules.push(RawModule {
            index,
            hash: stored,
            blob,
            counters,
            paths,
            bad_checksum,
        });
    }

    if !unfinished {
        // (A continuous profile's runtime may have been killed while it appended a module:
        // what follows the last counted record is not read.)
        let at = r.pos;
        let magic = r.take("the trailer", TRAILER_MAGIC.len() as u64)?;
        if magic != TRAILER_MAGIC {
            return Err(ProfileError::Truncated(Truncation::MissingTrailer { at }));
        }
        let recorded = r.u64("the total length")?;
        let end = r.pos;
        if recorded != end as u64 {
            return Err(ProfileError::Truncated(Truncation::WrongLength {
                recorded,
                actual: end,
            }));
        }
        if end != bytes.len() {
            return Err(ProfileError::TrailingGarbage {
                extra: bytes.len() - end,
                end,
            });
        }
    }
    Ok(RawProfile {
        pid,
        program,
        modules,
        unfinished,
        raced,
        signal,
    })
}

fn le_words(raw: &[u8]) -> impl Iterator<Item = u64> + '_ {
    raw.chunks_exact(8).map(|c| {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        u64::from_le_bytes(a)
    })
}

/// Decodes a module record's path entries, checked against its metadata.
fn decode_path_entries(
    index: usize,
    raw: &[u8],
    meta: &ModuleMeta,
) -> Result<Vec<PathEntry>, ProfileError> {
    let mut out = Vec::with_capacity(raw.len() / PATH_ENTRY_LEN);
    for e in raw.chunks_exact(PATH_ENTRY_LEN) {
        let mut w = le_words(e);
        let (head, path, count) = (
            w.next().unwrap_or(0),
            w.next().unwrap_or(0),
            w.next().unwrap_or(0),
        );
        let (function, kind) = ((head & 0xffff_ffff) as u32, (head >> 32) as u32);
        let kind = match kind {
            PATH_ENTRY_COUNT => PathEntryKind::Count,
            PATH_ENTRY_LOST => PathEntryKind::Lost,
            _ => return Err(ProfileError::BadPathEntry { index, function }),
        };
        if function as usize >= meta.functions.len()
            || (kind == PathEntryKind::Count && meta.functions[function as usize].paths().is_none())
        {
            return Err(ProfileError::BadPathEntry { index, function });
        }
        out.push(PathEntry {
            function,
            kind,
            path,
            count,
        });
    }
    Ok(out)
}

/// Adds two lists of path entries (the hashed path counts and losses of one module): entries
/// for the same path of the same function, and the losses of one function, become one.
pub fn add_path_entries(a: &[PathEntry], b: &[PathEntry]) -> Option<Vec<PathEntry>> {
    let mut sum: std::collections::BTreeMap<(u32, bool, u64), u64> = Default::default();
    for e in a.iter().chain(b) {
        let k = (e.function, e.kind == PathEntryKind::Lost, e.path);
        let v = sum.entry(k).or_default();
        *v = v.checked_add(e.count)?;
    }
    Some(
        sum.into_iter()
            .map(|((function, lost, path), count)| PathEntry {
                function,
                kind: if lost {
                    PathEntryKind::Lost
                } else {
                    PathEntryKind::Count
                },
                path,
                count,
            })
            .collect(),
    )
}

impl ProfileModule {
    /// Adds another run's counters and path entries of the same module to this one's; `None`
    /// (and `self` unchanged) if a sum overflows 64 bits.
    pub fn add(
        &mut self,
        counters: impl IntoIterator<Item = u64>,
        paths: &[PathEntry],
    ) -> Option<()> {
        let sum = self.summed(counters, paths)?;
        self.set_sum(sum);
        Some(())
    }

    /// The sums [`ProfileModule::add`] stores.
    fn summed(
        &self,
        counters: impl IntoIterator<Item = u64>,
        paths: &[PathEntry],
    ) -> Option<(Vec<u64>, Option<Vec<PathEntry>>)> {
        let sums = self
            .counters
            .iter()
            .zip(counters)
            .map(|(a, b)| a.checked_add(b))
            .collect::<Option<Vec<u64>>>()?;
        let paths = if paths.is_empty() && self.paths.is_empty() {
            None
        } else {
            Some(add_path_entries(&self.paths, paths)?)
        };
        Some((sums, paths))
    }

    fn set_sum(&mut self, (counters, paths): (Vec<u64>, Option<Vec<PathEntry>>)) {
        self.counters = counters;
        if let Some(p) = paths {
            self.paths = p;
        }
    }
}

/// What [`Profile::add_same_build`] did.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Added {
    /// The other profile's counts were added.
    Added,
    /// The other profile holds a module this one does not have (or another module's metadata
    /// under its hash), or names another program: nothing was added.
    OtherBuild,
}

impl Profile {
    /// Parses and checks a profile.
    pub fn read(bytes: &[u8]) -> Result<Profile, ProfileError> {
        let raw = parse(bytes)?;
        let mut modules = Vec::with_capacity(raw.modules.len());
        for m in raw.modules {
            let counters = le_words(m.counters).collect();
            let mut module = ProfileModule::from_blob(m.index, m.blob.to_vec(), counters)?;
            m.check_sum(&module.meta)?;
            module.paths = decode_path_entries(m.index, m.paths, &module.meta)?;
            modules.push(module);
        }
        Ok(Profile {
            pid: raw.pid,
            program: raw.program,
            modules,
            unfinished: raw.unfinished,
            raced: raw.raced,
            signal: raw.signal,
        })
    }

    /// Adds the counts of the profile `bytes` to this one if every module it holds is one of
    /// this profile's (matched by module hash, metadata byte for byte the same), without
    /// decoding its metadata: what merging many runs of one program costs per run is reading
    /// and checking its bytes. The other profile is checked as [`Profile::read`] checks it (a
    /// corrupt one is an error, and nothing is added); on [`Added::OtherBuild`] (a module this
    /// profile does not have, or programs that do not [`Program::may_combine`]) the caller
    /// reads it in full. With `same_program`, a profile that names another program (or none)
    /// counts as another build.
    pub fn add_same_build(
        &mut self,
        bytes: &[u8],
        same_program: bool,
    ) -> Result<Added, ProfileError> {
        Ok(match self.add_known_modules(bytes, same_program)? {
            Some(_) => Added::Added,
            None => Added::OtherBuild,
        })
    }

    /// [`Profile::add_same_build`], returning the indices (in `self.modules`) of the modules
    /// the other profile held, or `None` for [`Added::OtherBuild`]. The k-th record of a
    /// module hash in `bytes` is added to the k-th record of that hash here.
    pub fn add_known_modules(
        &mut self,
        bytes: &[u8],
        same_program: bool,
    ) -> Result<Option<Vec<usize>>, ProfileError> {
        let raw = parse(bytes)?;
        if (same_program && raw.program != self.program)
            || !raw.program.may_combine(&self.program)
            || raw.modules.len() > self.modules.len()
        {
            return Ok(None);
        }
        let mut by_hash: std::collections::HashMap<u64, Vec<usize>> =
            std::collections::HashMap::with_capacity(self.modules.len());
        for (i, m) in self.modules.iter().enumerate().rev() {
            by_hash.entry(m.hash).or_default().push(i);
        }
        let mut at = Vec::with_capacity(raw.modules.len());
        for r in &raw.modules {
            match by_hash.get_mut(&r.hash).and_then(|v| v.pop()) {
                Some(i) if self.modules[i].meta_blob.as_slice() == r.blob => at.push(i),
                _ => return Ok(None),
            }
        }
        let mut paths = Vec::with_capacity(raw.modules.len());
        for (r, &i) in raw.modules.iter().zip(&at) {
            let m = &self.modules[i];
            r.check_sum(&m.meta)?;
            paths.push(decode_path_entries(r.index, r.paths, &m.meta)?);
        }
        // Every sum is checked before any is stored: an overflow leaves `self` unchanged.
        let mut sums = Vec::with_capacity(paths.len());
        for ((r, p), &i) in raw.modules.iter().zip(&paths).zip(&at) {
            sums.push(
                self.modules[i]
                    .summed(le_words(r.counters), p)
                    .ok_or(ProfileError::Overflow { index: r.index })?,
            );
        }
        for (&i, sum) in at.iter().zip(sums) {
            self.modules[i].set_sum(sum);
        }
        self.unfinished |= raw.unfinished;
        self.raced |= raw.raced;
        self.signal = self.signal.or(raw.signal);
        self.program = self.program.combined(&raw.program);
        Ok(Some(at))
    }

    /// Takes the same-run oracle modules (`--tally-oracle`, [`ModuleMeta::oracle_for`]) out
    /// of the profile and returns them: what every report reads is the rest.
    pub fn take_oracles(&mut self) -> Vec<ProfileModule> {
        let (oracles, rest) = std::mem::take(&mut self.modules)
            .into_iter()
            .partition(|m| m.meta.oracle_for.is_some());
        self.modules = rest;
        oracles
    }

    /// The header flags this profile is written with: what [`Profile::read`] read from them
    /// (a signal number that does not fit [`PROFILE_SIGNAL_MASK`] is written as 255).
    pub fn header_flags(&self) -> u32 {
        let mut flags = PROFILE_FLAGS;
        if self.unfinished {
            flags |= PROFILE_CONTINUOUS;
        }
        if self.raced {
            flags |= PROFILE_RACED;
        }
        if let Some(sig) = self.signal {
            let max = PROFILE_SIGNAL_MASK >> PROFILE_SIGNAL_SHIFT;
            flags |= PROFILE_SIGNALED | (sig.clamp(1, max) << PROFILE_SIGNAL_SHIFT);
        }
        flags
    }

    /// The build id of a program without a GNU build-id note ([`BuildId::Modules`]): FNV-1a 64
    /// of the sorted module hashes, each as 8 little-endian bytes (what the runtime writes).
    pub fn modules_build_id(&self) -> u64 {
        let mut hashes: Vec<u64> = self.modules.iter().map(|m| m.hash).collect();
        hashes.sort_unstable();
        let mut h = Fnv64::new();
        for x in hashes {
            h.write(&x.to_le_bytes());
        }
        h.finish()
    }

    /// Reads and parses a profile file. Only a regular file (symbolic links followed) of at
    /// most [`MAX_PROFILE_BYTES`] is read: anything else is refused before a byte is read, and
    /// a file that grows past the bound while being read is refused too.
    pub fn read_file(path: impl AsRef<Path>) -> Result<Profile, ProfileError> {
        Profile::read_file_bounded(path, MAX_PROFILE_BYTES)
    }

    /// [`Profile::read_file`] with another bound than [`MAX_PROFILE_BYTES`] (the tests use a
    /// small one: a file over 4 GiB cannot be made where `ulimit -f` forbids it).
    pub fn read_file_bounded(path: impl AsRef<Path>, max: u64) -> Result<Profile, ProfileError> {
        Profile::read(&Profile::file_bytes(path, max)?)
    }

    /// The bytes of a profile file, read as [`Profile::read_file_bounded`] reads them (only a
    /// regular file of at most `max` bytes), for [`Profile::read`] or
    /// [`Profile::add_same_build`].
    pub fn file_bytes(path: impl AsRef<Path>, max: u64) -> Result<Vec<u8>, ProfileError> {
        use std::io::Read;
        let path = path.as_ref();
        let io = |error| ProfileError::Io {
            path: path.to_path_buf(),
            error,
        };
        let check = |m: &std::fs::Metadata| {
            if !m.is_file() {
                return Err(ProfileError::NotRegular {
                    path: path.to_path_buf(),
                    kind: file_kind(m),
                });
            }
            if m.len() > max {
                return Err(ProfileError::TooLarge {
                    path: path.to_path_buf(),
                    len: m.len(),
                    max,
                });
            }
            Ok(())
        };
        // Checked before opening (opening a FIFO would wait for a writer), and again on the
        // opened file (the path may have been replaced in between).
        check(&std::fs::metadata(path).map_err(io)?)?;
        let file = std::fs::File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        check(&meta)?;
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > max {
            return Err(ProfileError::TooLarge {
                path: path.to_path_buf(),
                len: bytes.len() as u64,
                max,
            });
        }
        Ok(bytes)
    }

    /// Serializes in exactly the layout the runtime writes (the current version, with
    /// checksums). Each module is written with its `hash` and `meta_blob` as they are.
    pub fn write(&self) -> Vec<u8> {
        let body: usize = self
            .modules
            .iter()
            .map(|m| {
                MODULE_HEADER_LEN
                    + m.meta_blob.len().next_multiple_of(8)
                    + 8 * m.counters.len()
                    + PATH_ENTRY_LEN * m.paths.len()
                    + CHECKSUM_LEN
            })
            .sum();
        let (kind, id): (u32, Vec<u8>) = match &self.program.build_id {
            BuildId::None => (BUILD_ID_NONE, Vec::new()),
            BuildId::Gnu(b) => (BUILD_ID_GNU, b.clone()),
            BuildId::Modules(h) => (BUILD_ID_MODULES, h.to_le_bytes().to_vec()),
        };
        let path = &self.program.path;
        let program = PROGRAM_HEADER_LEN + (path.len() + id.len()).next_multiple_of(8);
        let mut out = Vec::with_capacity(HEADER_LEN + program + body + TRAILER_LEN);
        out.extend_from_slice(PROFILE_MAGIC);
        out.extend_from_slice(&PROFILE_VERSION.to_le_bytes());
        let flags = self.header_flags();
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&(self.modules.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&(path.len() as u64).to_le_bytes());
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&(id.len() as u32).to_le_bytes());
        out.extend_from_slice(path);
        out.extend_from_slice(&id);
        out.resize(out.len().next_multiple_of(8), 0);
        for m in &self.modules {
            out.extend_from_slice(MODULE_MAGIC);
            out.extend_from_slice(&m.hash.to_le_bytes());
            out.extend_from_slice(&(m.meta_blob.len() as u64).to_le_bytes());
            out.extend_from_slice(&(m.counters.len() as u64).to_le_bytes());
            out.extend_from_slice(&(m.paths.len() as u64).to_le_bytes());
            out.extend_from_slice(&m.meta_blob);
            out.resize(out.len().next_multiple_of(8), 0);
            let counts_at = out.len();
            for c in &m.counters {
                out.extend_from_slice(&c.to_le_bytes());
            }
            for p in &m.paths {
                out.extend_from_slice(&p.function.to_le_bytes());
                let kind: u32 = match p.kind {
                    PathEntryKind::Count => PATH_ENTRY_COUNT,
                    PathEntryKind::Lost => PATH_ENTRY_LOST,
                };
                out.extend_from_slice(&kind.to_le_bytes());
                out.extend_from_slice(&p.path.to_le_bytes());
                out.extend_from_slice(&p.count.to_le_bytes());
            }
            let checksum = counter_checksum(&out[counts_at..], &[]);
            out.extend_from_slice(&checksum.to_le_bytes());
        }
        out.extend_from_slice(TRAILER_MAGIC);
        let total = (out.len() + 8) as u64;
        out.extend_from_slice(&total.to_le_bytes());
        out
    }

    /// Writes the profile to `path` (through a temporary file renamed into place).
    pub fn write_file(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        let path = path.as_ref();
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp.{}", std::process::id()));
        std::fs::write(&tmp, self.write())?;
        std::fs::rename(&tmp, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}

#[cfg(test)]
mod tests;
