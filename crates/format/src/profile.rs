//! The profile container: what an instrumented program writes at exit (`crates/runtime/c/write.c` in
//! tally-runtime) and what `tally merge` writes back.
//!
//! All integers are little-endian:
//!
//! ```text
//! header   "TALLYPRF"  u32 container_version (5: one run; 4: merged)  u32 flags  u64 module_count  u64 pid
//! program  u64 path_len  u32 build_id_kind  u32 build_id_len
//!          path bytes, build id bytes, zero-padded to a multiple of 8
//! run      (version 5) u64 start_ns  u64 end_ns  u32 status_kind  i32 status  u32 host_len
//!          u32 labels_len  host bytes, labels bytes, zero-padded to a multiple of 8
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
//! Version 5 ([`PROFILE_VERSION_RUN`], one run's profile) adds the run record ([`Run`]) and, under
//! `TALLY_META=shared`, module records that name their metadata instead of holding it ([`crate::abi::REF_MAGIC`]: the same header, no
//! metadata, the counters sparse); the metadata is the file `<module hash>`[`META_FILE_SUFFIX`]
//! in the profile's directory ([`meta_dir`]), which [`Profile::read_at`] reads and checks.
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
    PROFILE_CONTINUOUS, PROFILE_DELTA, PROFILE_FLAGS, PROFILE_KNOWN_FLAGS, PROFILE_RACED,
    PROFILE_SIGNALED, PROFILE_SIGNAL_MASK, PROFILE_SIGNAL_SHIFT, PROFILE_VERSION_NO_CHECKSUM,
    PROFILE_VERSION_NO_PROGRAM, PROGRAM_HEADER_LEN, PROGRAM_PATH_MAX, TRAILER_LEN,
};
pub use crate::abi::{META_FILE_SUFFIX, PROFILE_VERSION_RUN};
use crate::abi::{
    RUN_HEADER_LEN, RUN_HOST_MAX, RUN_LABELS_MAX, RUN_STATUS_EXITED, RUN_STATUS_SNAPSHOT,
    RUN_STATUS_UNKNOWN,
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
    /// Counts since a snapshot of the process (header flag [`PROFILE_DELTA`]): early-exit
    /// counters hold the change in frames waiting at their call (two's complement when
    /// negative), and sums of such profiles wrap.
    pub delta: bool,
    /// The run that wrote it (the run record of container version 5); `None` for a merged
    /// profile (a sum of runs) and for older versions.
    pub run: Option<Run>,
}

/// When and where one run was, how it ended and the labels it was given: the container's run
/// record (version 5, [`crate::abi::RUN_HEADER_LEN`]).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Run {
    /// Wall-clock nanoseconds since the Unix epoch when the runtime started (the first
    /// registration of an instrumented module, before `main`; a fork child's is its parent's,
    /// whose work before the fork its counts hold).
    pub start_ns: u64,
    /// ... and when the profile was written.
    pub end_ns: u64,
    /// The status given to `exit`/`_exit` (or returned by `main`); `None` when the run ended
    /// otherwise (a signal: [`Profile::signal`]) or wrote before an `exec`, or goes on.
    pub exit_status: Option<i32>,
    /// The run goes on: this is its snapshot number `n` (1, 2, ...), the counts since
    /// snapshot `n - 1` (since the start for 1; [`crate::abi::RUN_STATUS_SNAPSHOT`]).
    pub snapshot: Option<u32>,
    /// The host's name (`uname`'s nodename).
    pub host: Vec<u8>,
    /// `TALLY_LABELS` as the run was given it (`k=v,...`), empty if unset.
    pub labels: Vec<u8>,
}

impl Run {
    /// The labels as `(key, value)` pairs: `TALLY_LABELS` split at commas, each item at its
    /// first `=` (an item without one is a key with an empty value; empty items are skipped).
    pub fn label_pairs(&self) -> Vec<(String, String)> {
        String::from_utf8_lossy(&self.labels)
            .split(',')
            .filter(|i| !i.is_empty())
            .map(|i| match i.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (i.to_string(), String::new()),
            })
            .collect()
    }
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

mod error;
mod parts;
mod read;
mod shared;
mod sum;
mod write;

pub use error::{ProfileError, Truncation};
pub use parts::{whole_processes, Part};
pub use shared::meta_dir;
pub use sum::{add_path_entries, Added, Known};

impl Profile {
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
}

#[cfg(test)]
mod tests;
