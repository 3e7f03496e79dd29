//! The one written-down contract between the instrumenter (`tally-llvm`), the C runtime
//! (`tally-runtime`: `c/*.c`, `include/tally.h`) and the reader (`tally-format::profile`).
//!
//! Everything two of them must agree on lives here, once: the ABI version, the bits of
//! `struct tally_module.flags`, the path-mode home table (hash multiplier, slots), the events
//! countdown slack, the kinds of path entries, the profile container's magics, version,
//! fixed-size parts and counter checksum, and the layouts of the structs instrumented code
//! shares with the runtime (`tally_module`, `tally_path_table`, `tally_path_site`,
//! `tally_frame`), as `#[repr(C)]` mirror structs plus field tables ([`StructLayout`]), and
//! trace mode's witness record code ([`witness`], defined with its decoder in
//! `tally_graph::witness::code`).
//!
//! How the copies are held to it (docs/design/runtime.md, "Runtime ABI"):
//! - the C side: `crates/runtime/build.rs` generates `tally_abi_check.h` from [`DEFINES`] and
//!   [`LAYOUTS`] — a `_Static_assert` per `#define` of `tally.h` and per `sizeof` / `offsetof`
//!   of every struct field — and `c/rt.h` includes it, so a `tally.h` that drifts from this
//!   file fails `cargo build`;
//! - the LLVM side: `tally-llvm`'s `module/mod.rs` builds the LLVM struct types of the globals it
//!   emits from [`LAYOUTS`]' field lists and takes every constant from here;
//!   `crates/llvm/tests/abi.rs` compares the offsets LLVM's data layout gives the emitted
//!   globals with the offsets here;
//! - the reader: `profile/read.rs` and `profile/write.rs` read and write the container with the constants here;
//! - this file itself: the field tables are computed from the mirror structs with
//!   `offset_of!`, and a compile-time check verifies that each table is what the C rules give
//!   for its field types, so a table cannot disagree with its mirror.

use std::mem::{align_of, offset_of, size_of};

/// Version of the runtime ABI: `TALLY_ABI_VERSION`, the `abi_version` of every
/// `struct tally_module`. The runtime ignores descriptors of any other version.
pub const ABI_VERSION: u32 = 11;

/// `struct tally_module.flags`: the module counts events (events mode); at exit the runtime
/// stores the exiting thread's exact event total in the module's counter 0
/// (`TALLY_MODULE_EVENTS`).
pub const MODULE_FLAG_EVENTS: u32 = 1;
/// `struct tally_module.flags`: the counter array is aligned to [`COUNTER_ALIGN`] and its
/// size is a multiple of it (the entries past `num_counters` are padding), so continuous mode
/// may map the profile file over it (`TALLY_MODULE_PAGED`). Set by every instrumented module.
pub const MODULE_FLAG_PAGED: u32 = 2;
/// `struct tally_module.flags`: every count the module's code stores is updated atomically
/// (built with `--tally-atomic`, which `tally cc` turns on with `-pthread`), so threads that
/// run it at once lose no update (`TALLY_MODULE_ATOMIC`). A module without it that has
/// counters or path tables makes the runtime flag the profile [`PROFILE_RACED`] when the
/// process went multi-threaded.
pub const MODULE_FLAG_ATOMIC: u32 = 4;
/// `struct tally_module.flags`: every count is an edge counter whose difference between two
/// moments is what happened in between (`edge` and `edges-naive` modes, and the same-run
/// oracle), so a snapshot may write the counters and zero them (`TALLY_MODULE_DIFFABLE`,
/// `runtime/c/snapshot.c`). A process takes snapshots only when every module has it.
pub const MODULE_FLAG_DIFFABLE: u32 = 8;

/// `struct tally_frame.site` meaning "no early-exit counter" (`TALLY_NO_SITE`, a null pointer).
pub const NO_SITE: u64 = 0;
/// A frame record's `site` with this bit set points at a `struct tally_path_site`, not at a
/// counter (path mode, hashed paths; `TALLY_SITE_PATH_TAG`).
pub const SITE_PATH_TAG: u64 = 1;

/// Interprocedural path profiling (modes `ipath`, `ipath-piecewise`): the runtime's per-thread
/// handshake slot (the callee a direct call names, and its `nvc`), the path register passed
/// across direct calls and, piecewise, the number of open calls (`c/ipath.c`, `tally.h`).
pub const IPATH_HAND_FN: &str = "__tally_ipath_hand_fn";
/// See [`IPATH_HAND_FN`].
pub const IPATH_HAND_NVC: &str = "__tally_ipath_hand_nvc";
/// See [`IPATH_HAND_FN`].
pub const IPATH_REG: &str = "__tally_ipath_reg";
/// See [`IPATH_HAND_FN`].
pub const IPATH_OPEN: &str = "__tally_ipath_open";
/// The runtime's return of an instrumented function (count a root's path, restore).
pub const IPATH_RET: &str = "__tally_ipath_ret";

/// Witness trace mode: the thread-local pointer to the calling thread's
/// [`TallyWtraceAcc`] (`c/wtrace/`, `tally.h`; never null: a read-only one whose word is
/// [`WTRACE_CLOSED`] until the thread has a stream).
pub const WTRACE_ACC: &str = "__tally_wtrace_acc";
/// Witness trace mode: `void __tally_wtrace_spill(uint64_t value, uint64_t bits)`, the slow
/// path of an inline record: the accumulator's word has no room for it (its bits go to the
/// thread's buffer, the record into the emptied word; with `bits` 0, a shared check of room,
/// the word is just emptied), the thread has no stream yet, or its stream has ended.
pub const WTRACE_SPILL: &str = "__tally_wtrace_spill";

/// The multiplier of the path hashes (Fibonacci hashing, 2^64 / golden ratio): a path's home
/// slot is `(path * PATH_HASH_MULTIPLIER) >> (64 - PATH_HOME_BITS)` (`TALLY_PATH_HASH_MUL`).
pub const PATH_HASH_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;
/// log2 of the slots of a hashed function's home table (`TALLY_PATH_HOME_BITS`).
pub const PATH_HOME_BITS: u32 = 10;
/// Slots of a hashed function's home table, each `{path, count}` (`TALLY_PATH_HOME_SLOTS`).
pub const PATH_HOME_SLOTS: u64 = 1 << PATH_HOME_BITS;

/// Events mode: the runtime arms its countdown this many events before `TALLY_STOP_AT`, so
/// that checked points only need `left <= 0` (`TALLY_EV_SLACK`).
pub const EV_SLACK: i64 = 1 << 24;
/// Events mode: the countdown's limit while no stop is pending (`TALLY_EV_NO_LIMIT`).
pub const EV_NO_LIMIT: i64 = 1 << 62;

/// Path entry kind: "path `path` of function `function` ran `count` times"
/// (`TALLY_PATH_ENTRY_COUNT`).
pub const PATH_ENTRY_COUNT: u32 = 0;
/// Path entry kind: "`count` increments of function `function` were lost for lack of memory"
/// (`TALLY_PATH_ENTRY_LOST`).
pub const PATH_ENTRY_LOST: u32 = 1;

/// Magic bytes at the start of a profile (`TALLY_PROFILE_MAGIC`, as a little-endian u64).
pub const PROFILE_MAGIC: &[u8; 8] = b"TALLYPRF";
/// Magic bytes at the start of each module record (`TALLY_MODULE_MAGIC`).
pub const MODULE_MAGIC: &[u8; 8] = b"TALLYMOD";
/// Magic bytes at the start of the trailer (`TALLY_TRAILER_MAGIC`).
pub const TRAILER_MAGIC: &[u8; 8] = b"TALLYEND";
/// The container version of merged profiles (`TALLY_PROFILE_VERSION`: the runtime's `%m`
/// merge, `tally merge`, a [`crate::profile::Profile`] without a run): 3 added the per-module
/// counter checksum, 4 the program record after the header.
pub const PROFILE_VERSION: u32 = 4;
/// The container version of one run's profile (`TALLY_PROFILE_VERSION_RUN`): version 4 plus,
/// after the program record, the run record (when and where the run was, how it ended, its
/// `TALLY_LABELS`: [`RUN_HEADER_LEN`]), and module records that may name their metadata instead
/// of holding it ([`REF_MAGIC`], `TALLY_META=shared`). The runtime writes it for a profile file
/// of its own; merged profiles (`%m`, `tally merge` of several runs) are [`PROFILE_VERSION`].
pub const PROFILE_VERSION_RUN: u32 = 5;
/// Magic bytes of a module record that names its metadata instead of holding it
/// (`TALLY_REF_MAGIC`, version 5, `TALLY_META=shared`): the same 40-byte header as [`MODULE_MAGIC`]'s (magic, module
/// hash, metadata length, counter count, path entry count), no metadata, then the counters
/// sparse (groups of [`SPARSE_GROUP`]: a u64 mask whose bit `i` says counter `i` of the group is
/// not zero, then those counters), the path entries and the checksum of both as stored. The
/// metadata is the file `<module hash as 16 hex digits>`[`META_FILE_SUFFIX`] in the profile's
/// directory.
pub const REF_MAGIC: &[u8; 8] = b"TALLYREF";
/// Counters per mask word of a [`REF_MAGIC`] record (`TALLY_SPARSE_GROUP`).
pub const SPARSE_GROUP: u64 = 64;
/// Magic bytes of a metadata file (`TALLY_META_FILE_MAGIC`): `"TALLYMTA"  u32 version (=1)
/// u32 0  u64 module_hash  u64 meta_len`, then the metadata blob; the file is named after the
/// hash and the blob's FNV-1a 64 is that hash.
pub const META_FILE_MAGIC: &[u8; 8] = b"TALLYMTA";
/// Version of the metadata file (`TALLY_META_FILE_VERSION`).
pub const META_FILE_VERSION: u32 = 1;
/// Bytes of a metadata file before the blob (`TALLY_META_FILE_HEADER_LEN`).
pub const META_FILE_HEADER_LEN: u64 = 32;
/// What follows the hash in a metadata file's name.
pub const META_FILE_SUFFIX: &str = ".tallymeta";
/// Bytes of the run record before its strings (version 5): `u64 start_ns`, `u64 end_ns`
/// (wall-clock nanoseconds since the Unix epoch at the runtime's start and at the write),
/// `u32 status_kind` ([`RUN_STATUS_UNKNOWN`] or [`RUN_STATUS_EXITED`]), `i32 status` (the
/// status given to `exit`/`_exit`, or returned by `main`), `u32 host_len`, `u32 labels_len`; then
/// the host name (`uname`'s nodename) and `TALLY_LABELS` (`k=v,...` as given), zero-padded to a
/// multiple of 8.
pub const RUN_HEADER_LEN: usize = 32;
/// The run's exit status is not known: it ended by a signal, wrote before an `exec`, or called
/// `tally_write_profile()` (`TALLY_RUN_STATUS_UNKNOWN`).
pub const RUN_STATUS_UNKNOWN: u32 = 0;
/// The run called `exit` or `_exit` (or returned from `main`) with the status in the record
/// (`TALLY_RUN_STATUS_EXITED`).
pub const RUN_STATUS_EXITED: u32 = 1;
/// The run is still going: the profile is one of its snapshots (`TALLY_RUN_STATUS_SNAPSHOT`,
/// `runtime/c/snapshot.c`), whose number (1, 2, ...) is the record's status.
pub const RUN_STATUS_SNAPSHOT: u32 = 2;
/// The longest host name a run record holds (`TALLY_RUN_HOST_MAX`).
pub const RUN_HOST_MAX: u64 = 256;
/// The longest `TALLY_LABELS` a run record holds (`TALLY_RUN_LABELS_MAX`; a longer value is
/// written as empty).
pub const RUN_LABELS_MAX: u64 = 4096;
/// The previous container version, without the program record; still read (the program is
/// then unknown).
pub const PROFILE_VERSION_NO_PROGRAM: u32 = 3;
/// The version before, without checksums either; still read.
pub const PROFILE_VERSION_NO_CHECKSUM: u32 = 2;
/// The header flags of a finished profile (what the runtime writes at exit and `tally merge`
/// writes): none.
pub const PROFILE_FLAGS: u32 = 0;
/// Header flag of a continuous-mode profile that is not finished (`TALLY_PROFILE_CONTINUOUS`):
/// the runtime keeps the counters of every module mapped into the file while the program runs
/// (`TALLY_CONTINUOUS=1` or `%c` in `TALLY_PROFILE`) and replaces it with a finished profile
/// (flags 0) at a normal exit; a file still carrying the flag was left by a process that was
/// killed. Such a file may hold padding records ([`PAD_MAGIC`]) before module records, its
/// checksums are not kept (the counters change under them) and nothing after its last module
/// record is read (no trailer is required).
pub const PROFILE_CONTINUOUS: u32 = 1;
/// Header flag (`TALLY_PROFILE_RACED`): the process ran a second thread (glibc's
/// `__libc_single_threaded` was 0 at the write, or at a `fork`) and had code built without
/// atomic increments (a module without [`MODULE_FLAG_ATOMIC`] with counters or path tables):
/// counts of that code may have lost updates. `tally merge` keeps it.
pub const PROFILE_RACED: u32 = 2;
/// Header flag (`TALLY_PROFILE_SIGNALED`): the profile was written by the fatal-signal handler
/// (`runtime/c/signals.c`); the signal's number is in bits [`PROFILE_SIGNAL_SHIFT`].. of the
/// flags ([`PROFILE_SIGNAL_MASK`]). The functions active at that moment, in any thread, may have
/// inexact counts (a fault or an asynchronous signal between calls). `tally merge` keeps it
/// (with the first input's signal).
pub const PROFILE_SIGNALED: u32 = 4;
/// Shift of the signal number in the header flags of a [`PROFILE_SIGNALED`] profile
/// (`TALLY_PROFILE_SIGNAL_SHIFT`).
pub const PROFILE_SIGNAL_SHIFT: u32 = 8;
/// The bits of the header flags holding the signal number (`TALLY_PROFILE_SIGNAL_MASK`); zero
/// unless [`PROFILE_SIGNALED`] is set.
pub const PROFILE_SIGNAL_MASK: u32 = 0xff << PROFILE_SIGNAL_SHIFT;
/// Every header flag bit this version reads.
pub const PROFILE_KNOWN_FLAGS: u32 =
    PROFILE_CONTINUOUS | PROFILE_RACED | PROFILE_SIGNALED | PROFILE_SIGNAL_MASK | PROFILE_DELTA;
/// Header flag (`TALLY_PROFILE_DELTA`): the counts since the process's previous snapshot
/// (`runtime/c/snapshot.c`), the difference of two "as if the process ended here" profiles:
/// early-exit counters hold the change in the number of frames waiting at their call (two's
/// complement when negative); every other count is what happened in between. A process that
/// took snapshots writes every part so, its last one (at its end) too.
pub const PROFILE_DELTA: u32 = 8;
/// Magic bytes of a padding record (`TALLY_PAD_MAGIC`), allowed only in a continuous profile,
/// before a module record: `"TALLYPAD"  u64 length` (of the whole padding record, at least 16,
/// a multiple of 8), then zeros. The runtime uses them to put each module's counters at a
/// page-aligned file offset.
pub const PAD_MAGIC: &[u8; 8] = b"TALLYPAD";
/// Alignment, in bytes, of every module's counter array (`__tally_counters`), whose size is
/// also a multiple of it (`TALLY_COUNTER_ALIGN`): the page size of x86-64 and most aarch64
/// systems, so that continuous mode can map whole pages of the profile file over it.
pub const COUNTER_ALIGN: u64 = 4096;

/// Bytes in the profile header: magic, version, flags, module count, pid.
pub const HEADER_LEN: usize = 32;
/// Bytes of the program record before its strings (version 4): `u64 path_len`,
/// `u32 build_id_kind`, `u32 build_id_len`; then the path and the build id, zero-padded to a
/// multiple of 8.
pub const PROGRAM_HEADER_LEN: usize = 16;
/// The longest executable path a program record holds (`TALLY_PROGRAM_PATH_MAX`; a longer
/// one is written as empty).
pub const PROGRAM_PATH_MAX: u64 = 4096;
/// The longest build id a program record holds (`TALLY_BUILD_ID_MAX`).
pub const BUILD_ID_MAX: u64 = 64;
/// Build id kind: none (`TALLY_BUILD_ID_NONE`, length 0).
pub const BUILD_ID_NONE: u32 = 0;
/// Build id kind: the descriptor of the main executable's GNU build-id note
/// (`NT_GNU_BUILD_ID`; `TALLY_BUILD_ID_GNU`).
pub const BUILD_ID_GNU: u32 = 1;
/// Build id kind: 8 bytes, the little-endian FNV-1a 64 of the sorted module hashes of the
/// profile's records, each as 8 little-endian bytes (`TALLY_BUILD_ID_MODULES`): used when the
/// executable has no GNU build-id note.
pub const BUILD_ID_MODULES: u32 = 2;
/// Bytes in a module record before the metadata: magic, hash, metadata length, counter
/// count, path entry count.
pub const MODULE_HEADER_LEN: usize = 40;
/// Bytes in a path entry: `u32 function, u32 kind, u64 path, u64 count`.
pub const PATH_ENTRY_LEN: usize = 24;
/// Bytes of the counter checksum that ends each module record (version 3).
pub const CHECKSUM_LEN: usize = 8;
/// Bytes in the trailer: magic, total length.
pub const TRAILER_LEN: usize = 16;

/// FNV-1a 64 offset basis (`TALLY_FNV_OFFSET`): the module hash of the metadata blob and the
/// counter checksum are FNV-1a 64 ([`tally_graph::hash::Fnv64`]).
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64 prime (`TALLY_FNV_PRIME`).
pub const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// Name of the ELF notes tally's instrumenter emits (`"tally"`, with its NUL: namesz 6).
pub const NOTE_NAME: &str = "tally";
/// Type of the note carrying the profile directory baked in by `tally cc
/// --tally-profile-dir=DIR` (`TALLY_NOTE_PROFILE_DIR`): every module compiled with the option
/// has one in its image's `PT_NOTE`; the descriptor is the directory pattern (`%p`, `%m`, `%%`
/// as in `TALLY_PROFILE`) with its NUL, zero-padded to 4 bytes. The runtime takes the first one
/// of the first loaded object that has one (the executable, else libraries in load order).
pub const NOTE_PROFILE_DIR: u32 = 0x7464;

/// A magic as the runtime writes it: one little-endian u64.
pub const fn magic_word(magic: &[u8; 8]) -> u64 {
    u64::from_le_bytes(*magic)
}

/// `struct tally_module`: one per instrumented module, emitted by the instrumenter.
#[repr(C)]
#[derive(Debug)]
pub struct TallyModule {
    /// [`ABI_VERSION`].
    pub abi_version: u32,
    /// [`MODULE_FLAG_EVENTS`] or 0.
    pub flags: u32,
    /// FNV-1a 64 of the metadata blob.
    pub hash: u64,
    /// The metadata blob.
    pub meta: *const u8,
    /// Its length.
    pub meta_len: u64,
    /// The module's counter array.
    pub counters: *mut u64,
    /// Its length.
    pub num_counters: u64,
    /// Hashed path counters (path mode), or null.
    pub path_tables: *mut TallyPathTable,
    /// Their number.
    pub num_path_tables: u64,
    /// Owned by the runtime (its list of registered modules).
    pub next: *mut TallyModule,
}

/// `struct tally_path_table`: the path counters of one function whose paths are hashed.
#[repr(C)]
#[derive(Debug)]
pub struct TallyPathTable {
    /// Overflow table: `2 * capacity` words `{path + 1, count}`.
    pub slots: *mut u64,
    /// A power of two; 0 before the first overflow.
    pub capacity: u64,
    /// Occupied overflow slots.
    pub used: u64,
    /// Increments dropped because memory ran out.
    pub lost: u64,
    /// The last path counted in the overflow table ...
    pub last_path: u64,
    /// ... and its count.
    pub last_count: *mut u64,
    /// Index of the function in the module's metadata.
    pub function: u32,
    /// Spin lock.
    pub lock: u32,
    /// The home table: `2 * PATH_HOME_SLOTS` words `{path, count}`, in the module.
    pub home: *mut u64,
    /// Home slots the runtime gave a path.
    pub home_claims: u64,
}

/// `struct tally_path_site`: what a frame's tagged `site` points at (hashed paths).
#[repr(C)]
#[derive(Debug)]
pub struct TallyPathSite {
    /// The function's path table.
    pub table: *mut TallyPathTable,
    /// The path the frame is on if it ends in the current block.
    pub path: u64,
}

/// `struct tally_frame`: a frame record, linked through `__tally_top`.
#[repr(C)]
#[derive(Debug)]
pub struct TallyFrame {
    /// The next outer record.
    pub prev: *mut TallyFrame,
    /// The early-exit counter of the block executing a call, [`NO_SITE`], or a
    /// `TallyPathSite` address tagged with [`SITE_PATH_TAG`].
    pub site: *mut u64,
}

/// The C type of a struct field (x86-64 System V sizes).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FieldType {
    /// `uint32_t` (LLVM `i32`).
    U32,
    /// `uint64_t` (LLVM `i64`).
    U64,
    /// Any data pointer (LLVM `ptr`).
    Ptr,
}

impl FieldType {
    /// Size (and alignment) in bytes.
    pub const fn size(self) -> usize {
        match self {
            FieldType::U32 => 4,
            FieldType::U64 => 8,
            FieldType::Ptr => size_of::<*const u8>(),
        }
    }
}

/// One field of a shared struct.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Field {
    /// The field's name, the same in C and in the Rust mirror.
    pub name: &'static str,
    /// Its C type.
    pub ty: FieldType,
    /// Its byte offset.
    pub offset: usize,
}

/// The layout of a struct shared by instrumented code and the runtime.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct StructLayout {
    /// The C struct tag (`struct <name>` in tally.h).
    pub name: &'static str,
    /// `sizeof`.
    pub size: usize,
    /// `_Alignof`.
    pub align: usize,
    /// Every field, in declaration order (the LLVM struct type's element order).
    pub fields: &'static [Field],
}

impl StructLayout {
    /// The position of field `name` (its LLVM element index), if the struct has it.
    pub fn index(&self, name: &str) -> Option<u32> {
        self.fields
            .iter()
            .position(|f| f.name == name)
            .map(|i| i as u32)
    }
}

macro_rules! field {
    ($s:ty, $f:ident, $t:ident) => {
        Field {
            name: stringify!($f),
            ty: FieldType::$t,
            offset: offset_of!($s, $f),
        }
    };
}

macro_rules! layout {
    ($s:ty, $name:literal, [$(($f:ident, $t:ident)),* $(,)?]) => {
        StructLayout {
            name: $name,
            size: size_of::<$s>(),
            align: align_of::<$s>(),
            fields: &[$(field!($s, $f, $t)),*],
        }
    };
}

/// `struct tally_module`.
pub const TALLY_MODULE: StructLayout = layout!(
    TallyModule,
    "tally_module",
    [
        (abi_version, U32),
        (flags, U32),
        (hash, U64),
        (meta, Ptr),
        (meta_len, U64),
        (counters, Ptr),
        (num_counters, U64),
        (path_tables, Ptr),
        (num_path_tables, U64),
        (next, Ptr),
    ]
);

/// `struct tally_path_table`.
pub const TALLY_PATH_TABLE: StructLayout = layout!(
    TallyPathTable,
    "tally_path_table",
    [
        (slots, Ptr),
        (capacity, U64),
        (used, U64),
        (lost, U64),
        (last_path, U64),
        (last_count, Ptr),
        (function, U32),
        (lock, U32),
        (home, Ptr),
        (home_claims, U64),
    ]
);

/// `struct tally_path_site`.
pub const TALLY_PATH_SITE: StructLayout = layout!(
    TallyPathSite,
    "tally_path_site",
    [(table, Ptr), (path, U64)]
);

/// `struct tally_wtrace_acc`: a thread's witness-trace bit accumulator (trace mode), reached
/// through [`WTRACE_ACC`]. Instrumented code appends a record of `b` bits inline at the top of
/// the one word `acc` (`acc = acc >> b | v << (64 - b)`) while the word's low `b` bits are
/// zero (it has room), else calls [`WTRACE_SPILL`]: the word holds up to 63 bits above a
/// sentinel 1, so one register is the whole state of a function's copy and one `test` of a
/// constant mask the check.
#[repr(C)]
#[derive(Debug)]
pub struct TallyWtraceAcc {
    /// Up to 63 bits not yet in the thread's buffer, above a sentinel 1 (the lowest set bit):
    /// with `n` bits the sentinel is bit `63 - n` and the bits, least-significant first, are
    /// `acc >> (64 - n)`. [`WTRACE_EMPTY`] holds none; [`WTRACE_CLOSED`] has room for nothing
    /// (the thread has no stream or its stream has ended: every record takes the slow path).
    pub acc: u64,
    /// The callee a traced direct call site is about to enter (set inline while `slow` is 0).
    pub direct: *const u8,
    /// Traced activations on the thread (entries minus returns; inline while `slow` is 0).
    pub depth: u32,
    /// Nonzero: entries, direct flags and call sites go to the runtime (no stream yet, a
    /// flight recorder).
    pub slow: u32,
    /// `self` of the traced function that returned last (set inline by `ret`; null: none).
    pub ret: *const u8,
    /// The stream's previous `Enter` (its key, `slot << 32 | index`; 0: none), and its table
    /// of predictions ([`WTRACE_ENTER_TABLE`] keys, hashed by the previous key:
    /// `tally_graph::witness::code::EnterCoder`, whose state these are with the runtime's
    /// recent list). An announced entry of the function `e_next` predicts appends the 3-bit
    /// predicted `Enter` inline and sets `e_prev` (trace format 7: nothing else changes). The
    /// table stays zero (no key) with a flight recorder, which writes full `Enter`s only.
    pub e_prev: u64,
    /// See [`TallyWtraceAcc::e_prev`]: the thread's table of predictions.
    pub e_next: *mut u64,
    /// `self` of the function whose key is `e_prev` and predicts itself (null: none known): its
    /// announced entry appends the predicted `Enter` with no state to change, the shortest
    /// check (set by the runtime after every `Enter` it writes; cleared by the inline
    /// predicted `Enter`, which changes `e_prev`).
    pub again: *const u8,
    /// Where a full word goes without a call: while `stage` is below `stage_end`, the cold
    /// path of an inline record stores the word at `stage`, advances it, and empties the word
    /// (the runtime packs the staged words into the stream, in order, before anything else of
    /// the thread's: they are the stream's bits between its buffer and `acc`; in a stream of
    /// words, [`crate::trace::WTRACE_VERSION_WORDS`], `stage` points into the thread's buffer
    /// and the words are written as they are). Equal (no
    /// room) while the thread has no stream, once it has ended, and with a flight recorder,
    /// whose records all go through [`WTRACE_SPILL`].
    pub stage: *mut u64,
    /// See [`TallyWtraceAcc::stage`].
    pub stage_end: *mut u64,
}

/// Keys in [`TallyWtraceAcc::e_next`] ([`witness::ENTER_TABLE`]).
pub const WTRACE_ENTER_TABLE: usize = witness::ENTER_TABLE;
/// The hash of [`TallyWtraceAcc::e_next`]: `key * MUL >> SHIFT` (wrapping).
pub const WTRACE_ENTER_MUL: u64 = witness::ENTER_MUL;
/// See [`WTRACE_ENTER_MUL`].
pub const WTRACE_ENTER_SHIFT: u32 = witness::ENTER_SHIFT;

/// The witness record code (trace mode's streams): the prefix code of control records (`Back`,
/// the kinds, a landing's how), varints and the `Enter` prediction, as the runtime
/// (`c/wtrace/`), the instrumented code (`tally-llvm`'s trace mode) and the reader share it.
/// Defined with its one decoder in `tally_graph::witness::code` (the graph crate has no
/// dependencies, and its tests regenerate through that decoder); re-exported here as a fact
/// of the ABI, and held to `tally.h`'s `TALLY_WTRACE_*` by [`DEFINES`].
pub mod witness {
    pub use tally_graph::witness::code::{
        control, enter_recent, landing, BACK, BACK_BITS, END, ENTER_FULL, ENTER_MUL,
        ENTER_PREDICTED, ENTER_SHIFT, ENTER_TABLE, HOW_BITS, HOW_LOST, HOW_REENTRY, HOW_UNWIND,
        KIND_BITS, KIND_END, KIND_ENTER, KIND_LANDING, KIND_PREDICTED, LOST, RECENT, RECENT_BITS,
        VARINT_BITS,
    };
}

/// [`TallyWtraceAcc::acc`] holding no bits: the sentinel alone, at the top.
pub const WTRACE_EMPTY: u64 = 1 << 63;
/// [`TallyWtraceAcc::acc`] with room for nothing (no stream, or it has ended).
pub const WTRACE_CLOSED: u64 = 1;

/// `struct tally_frame`.
pub const TALLY_FRAME: StructLayout =
    layout!(TallyFrame, "tally_frame", [(prev, Ptr), (site, Ptr)]);

/// `struct tally_wtrace_acc`.
pub const TALLY_WTRACE_ACC: StructLayout = layout!(
    TallyWtraceAcc,
    "tally_wtrace_acc",
    [
        (acc, U64),
        (direct, Ptr),
        (depth, U32),
        (slow, U32),
        (ret, Ptr),
        (e_prev, U64),
        (e_next, Ptr),
        (again, Ptr),
        (stage, Ptr),
        (stage_end, Ptr)
    ]
);

/// `struct tally_wtrace_module`: a module's trace slot and its tables of own functions and
/// external callees (trace mode: the runtime resolves external callees by address).
#[repr(C)]
#[derive(Debug)]
pub struct TallyWtraceModule {
    /// The module's trace slot (0 until assigned).
    pub slot: u32,
    /// Entries of `funcs`.
    pub nfuncs: u32,
    /// Entries of `externs`.
    pub nexterns: u32,
    /// Unused (0).
    pub reserved: u32,
    /// Function `i`'s own address when other modules may call it by name, else null.
    pub funcs: *const *const u8,
    /// External callee `k`'s address as the module resolves it.
    pub externs: *const *const u8,
}

/// `struct tally_wtrace_module`.
pub const TALLY_WTRACE_MODULE: StructLayout = layout!(
    TallyWtraceModule,
    "tally_wtrace_module",
    [
        (slot, U32),
        (nfuncs, U32),
        (nexterns, U32),
        (reserved, U32),
        (funcs, Ptr),
        (externs, Ptr)
    ]
);

/// Every shared struct.
pub const LAYOUTS: &[StructLayout] = &[
    TALLY_MODULE,
    TALLY_PATH_TABLE,
    TALLY_PATH_SITE,
    TALLY_FRAME,
    TALLY_WTRACE_ACC,
    TALLY_WTRACE_MODULE,
];

/// Whether `l`'s field table is exactly what C's layout rules give for its field types: every
/// field at the next offset aligned to its size, the size rounded up to the largest alignment.
/// With the offsets taken from the `#[repr(C)]` mirror by `offset_of!`, this ties each table's
/// types to its mirror (checked at compile time below).
pub const fn is_c_layout(l: &StructLayout) -> bool {
    let mut at: usize = 0;
    let mut align: usize = 1;
    let mut i = 0;
    while i < l.fields.len() {
        let s = l.fields[i].ty.size();
        at = at.next_multiple_of(s);
        if l.fields[i].offset != at {
            return false;
        }
        at += s;
        if s > align {
            align = s;
        }
        i += 1;
    }
    l.align == align && l.size == at.next_multiple_of(align)
}

const _: () = {
    let mut i = 0;
    while i < LAYOUTS.len() {
        assert!(
            is_c_layout(&LAYOUTS[i]),
            "a field table disagrees with its mirror struct"
        );
        i += 1;
    }
    assert!(PATH_HOME_SLOTS == 1 << PATH_HOME_BITS);
    assert!(EV_SLACK > 0 && EV_SLACK < EV_NO_LIMIT);
};

/// A `#define` of `tally.h` and the value this file gives it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Define {
    /// The macro's name.
    pub name: &'static str,
    /// Its value, as the C expression `(long long)` or `(unsigned long long)` of it.
    pub value: DefineValue,
}

/// The value of a [`Define`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DefineValue {
    /// Compared as `unsigned long long`.
    Unsigned(u64),
    /// Compared as `long long`.
    Signed(i64),
}

const fn u(name: &'static str, v: u64) -> Define {
    Define {
        name,
        value: DefineValue::Unsigned(v),
    }
}

const fn s(name: &'static str, v: i64) -> Define {
    Define {
        name,
        value: DefineValue::Signed(v),
    }
}

/// Every integer `#define` of `tally.h` that is part of the contract, with its value.
pub const DEFINES: &[Define] = &[
    u("TALLY_ABI_VERSION", ABI_VERSION as u64),
    u("TALLY_MODULE_EVENTS", MODULE_FLAG_EVENTS as u64),
    u("TALLY_MODULE_PAGED", MODULE_FLAG_PAGED as u64),
    u("TALLY_MODULE_ATOMIC", MODULE_FLAG_ATOMIC as u64),
    u("TALLY_MODULE_DIFFABLE", MODULE_FLAG_DIFFABLE as u64),
    u("TALLY_SITE_PATH_TAG", SITE_PATH_TAG),
    u("TALLY_PATH_HASH_MUL", PATH_HASH_MULTIPLIER),
    u("TALLY_PATH_HOME_BITS", PATH_HOME_BITS as u64),
    u("TALLY_PATH_HOME_SLOTS", PATH_HOME_SLOTS),
    s("TALLY_EV_SLACK", EV_SLACK),
    s("TALLY_EV_NO_LIMIT", EV_NO_LIMIT),
    u("TALLY_PATH_ENTRY_COUNT", PATH_ENTRY_COUNT as u64),
    u("TALLY_PATH_ENTRY_LOST", PATH_ENTRY_LOST as u64),
    u("TALLY_PROFILE_MAGIC", magic_word(PROFILE_MAGIC)),
    u("TALLY_MODULE_MAGIC", magic_word(MODULE_MAGIC)),
    u("TALLY_TRAILER_MAGIC", magic_word(TRAILER_MAGIC)),
    u("TALLY_PROFILE_VERSION", PROFILE_VERSION as u64),
    u("TALLY_PROFILE_VERSION_RUN", PROFILE_VERSION_RUN as u64),
    u("TALLY_REF_MAGIC", magic_word(REF_MAGIC)),
    u("TALLY_RUN_STATUS_UNKNOWN", RUN_STATUS_UNKNOWN as u64),
    u("TALLY_RUN_STATUS_EXITED", RUN_STATUS_EXITED as u64),
    u("TALLY_RUN_STATUS_SNAPSHOT", RUN_STATUS_SNAPSHOT as u64),
    u("TALLY_RUN_HOST_MAX", RUN_HOST_MAX),
    u("TALLY_RUN_LABELS_MAX", RUN_LABELS_MAX),
    u("TALLY_SPARSE_GROUP", SPARSE_GROUP),
    u("TALLY_META_FILE_MAGIC", magic_word(META_FILE_MAGIC)),
    u("TALLY_META_FILE_VERSION", META_FILE_VERSION as u64),
    u("TALLY_META_FILE_HEADER_LEN", META_FILE_HEADER_LEN),
    u("TALLY_PROFILE_FLAGS", PROFILE_FLAGS as u64),
    u("TALLY_PROFILE_CONTINUOUS", PROFILE_CONTINUOUS as u64),
    u("TALLY_PROFILE_RACED", PROFILE_RACED as u64),
    u("TALLY_PROFILE_SIGNALED", PROFILE_SIGNALED as u64),
    u("TALLY_PROFILE_SIGNAL_SHIFT", PROFILE_SIGNAL_SHIFT as u64),
    u("TALLY_PROFILE_SIGNAL_MASK", PROFILE_SIGNAL_MASK as u64),
    u("TALLY_PROFILE_DELTA", PROFILE_DELTA as u64),
    u("TALLY_PAD_MAGIC", magic_word(PAD_MAGIC)),
    u("TALLY_COUNTER_ALIGN", COUNTER_ALIGN),
    u("TALLY_PROGRAM_PATH_MAX", PROGRAM_PATH_MAX),
    u("TALLY_BUILD_ID_MAX", BUILD_ID_MAX),
    u("TALLY_BUILD_ID_NONE", BUILD_ID_NONE as u64),
    u("TALLY_BUILD_ID_GNU", BUILD_ID_GNU as u64),
    u("TALLY_BUILD_ID_MODULES", BUILD_ID_MODULES as u64),
    u("TALLY_FNV_OFFSET", FNV_OFFSET),
    u("TALLY_FNV_PRIME", FNV_PRIME),
    u("TALLY_NOTE_PROFILE_DIR", NOTE_PROFILE_DIR as u64),
    u("TALLY_WTRACE_EMPTY", WTRACE_EMPTY),
    u("TALLY_WTRACE_CLOSED", WTRACE_CLOSED),
    u("TALLY_WTRACE_ENTER_TABLE", WTRACE_ENTER_TABLE as u64),
    u("TALLY_WTRACE_ENTER_MUL", WTRACE_ENTER_MUL),
    u("TALLY_WTRACE_ENTER_SHIFT", WTRACE_ENTER_SHIFT as u64),
    u("TALLY_WTRACE_BACK", witness::BACK),
    u("TALLY_WTRACE_BACK_BITS", witness::BACK_BITS as u64),
    u("TALLY_WTRACE_KIND_BITS", witness::KIND_BITS as u64),
    u("TALLY_WTRACE_KIND_ENTER", witness::KIND_ENTER),
    u("TALLY_WTRACE_KIND_LANDING", witness::KIND_LANDING),
    u("TALLY_WTRACE_KIND_END", witness::KIND_END),
    u("TALLY_WTRACE_KIND_PREDICTED", witness::KIND_PREDICTED),
    u("TALLY_WTRACE_HOW_BITS", witness::HOW_BITS as u64),
    u("TALLY_WTRACE_HOW_REENTRY", witness::HOW_REENTRY),
    u("TALLY_WTRACE_HOW_UNWIND", witness::HOW_UNWIND),
    u("TALLY_WTRACE_HOW_LOST", witness::HOW_LOST),
    u("TALLY_WTRACE_VARINT_BITS", witness::VARINT_BITS as u64),
    u("TALLY_WTRACE_RECENT", witness::RECENT as u64),
    u("TALLY_WTRACE_RECENT_BITS", witness::RECENT_BITS as u64),
    u("TALLY_WTRACE_VERSION", crate::trace::WTRACE_VERSION as u64),
    u(
        "TALLY_WTRACE_VERSION_CODED",
        crate::trace::WTRACE_VERSION_CODED as u64,
    ),
    u(
        "TALLY_WTRACE_VERSION_WORDS",
        crate::trace::WTRACE_VERSION_WORDS as u64,
    ),
    u(
        "TALLY_WTRACE_MODULE_CHUNK",
        crate::trace::WTRACE_MODULE_CHUNK as u64,
    ),
    u(
        "TALLY_WTRACE_RESOLVE_CHUNK",
        crate::trace::WTRACE_RESOLVE_CHUNK as u64,
    ),
    u(
        "TALLY_WTRACE_SIGNAL_CHUNK",
        crate::trace::WTRACE_SIGNAL_CHUNK as u64,
    ),
    u(
        "TALLY_WTRACE_CUT_CHUNK",
        crate::trace::WTRACE_CUT_CHUNK as u64,
    ),
];

/// A libc function whose direct calls (and address uses) in instrumented code are redirected to
/// a runtime wrapper with the same type (`tally-llvm::module::redirect`), as gcc's `-fprofile-arcs`
/// redirects `execve` to `__gcov_execve`: the wrapper does the runtime's part (write the
/// profile before an `exec` or an `_exit`, ...) and then calls `real`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redirect {
    /// The libc function.
    pub real: &'static str,
    /// The runtime's wrapper (hidden in every image's copy of the runtime).
    pub wrapper: &'static str,
    /// The C header that declares `real` (for the runtime's type check).
    pub header: &'static str,
}

const fn redirect(real: &'static str, wrapper: &'static str, header: &'static str) -> Redirect {
    Redirect {
        real,
        wrapper,
        header,
    }
}

/// Every redirected function. The runtime's build checks each wrapper's type against `real`'s
/// declaration ([`c_redirects_header`]); `crates/runtime/tests/runtime/linking.rs` checks the
/// archive defines every wrapper.
pub const REDIRECTS: &[Redirect] = &[
    redirect("_exit", "__tally__exit", "unistd.h"),
    redirect("_Exit", "__tally__Exit", "stdlib.h"),
    redirect("execl", "__tally_execl", "unistd.h"),
    redirect("execle", "__tally_execle", "unistd.h"),
    redirect("execlp", "__tally_execlp", "unistd.h"),
    redirect("execv", "__tally_execv", "unistd.h"),
    redirect("execve", "__tally_execve", "unistd.h"),
    redirect("execvp", "__tally_execvp", "unistd.h"),
    redirect("execvpe", "__tally_execvpe", "unistd.h"),
    redirect("fexecve", "__tally_fexecve", "unistd.h"),
    redirect("execveat", "__tally_execveat", "unistd.h"),
    redirect("signal", "__tally_signal", "signal.h"),
    redirect("sigaction", "__tally_sigaction", "signal.h"),
];

/// The C header `crates/runtime/build.rs` writes for [`REDIRECTS`]: each wrapper declared with
/// the type of the function it stands for (`__typeof__(real) wrapper;`), so a wrapper defined
/// with another type fails to compile. `c/rt.h` includes it.
pub fn c_redirects_header() -> String {
    let mut h = String::from(
        "/* Generated by crates/runtime/build.rs from tally_format::abi::REDIRECTS. Do not edit. */\n\
         #ifndef TALLY_REDIRECTS_H\n#define TALLY_REDIRECTS_H\n",
    );
    let mut headers: Vec<&str> = REDIRECTS.iter().map(|r| r.header).collect();
    headers.sort_unstable();
    headers.dedup();
    for header in headers {
        h.push_str(&format!("#include <{header}>\n"));
    }
    for r in REDIRECTS {
        h.push_str(&format!(
            "__typeof__({real}) {wrapper} __attribute__((visibility(\"hidden\")));\n",
            real = r.real,
            wrapper = r.wrapper
        ));
    }
    h.push_str("#endif\n");
    h
}

/// The C header of compile-time checks `crates/runtime/build.rs` writes: a `_Static_assert`
/// per [`DEFINES`] entry and per `sizeof`, `_Alignof`, field `offsetof` and field `sizeof` of
/// [`LAYOUTS`], each message naming this file. Include it after `tally.h`.
pub fn c_check_header() -> String {
    let mut h = String::from(
        "/* Generated by crates/runtime/build.rs from tally_format::abi (crates/format/src/abi.rs),\n \
         * the single source of the runtime ABI: tally.h must agree with it. Do not edit. */\n\
         #ifndef TALLY_ABI_CHECK_H\n#define TALLY_ABI_CHECK_H\n#include <stddef.h>\n",
    );
    for d in DEFINES {
        let (ty, v) = match d.value {
            DefineValue::Unsigned(v) => ("unsigned long long", format!("{v:#x}ULL")),
            DefineValue::Signed(v) => ("long long", format!("{v}LL")),
        };
        h.push_str(&format!(
            "_Static_assert(({ty})({n}) == {v}, \"tally.h: {n} differs from tally_format::abi ({v})\");\n",
            n = d.name,
        ));
    }
    for l in LAYOUTS {
        let st = format!("struct {}", l.name);
        h.push_str(&format!(
            "_Static_assert(sizeof({st}) == {size}, \"tally.h: sizeof({st}) differs from tally_format::abi ({size})\");\n\
             _Static_assert(_Alignof({st}) == {align}, \"tally.h: _Alignof({st}) differs from tally_format::abi ({align})\");\n",
            size = l.size,
            align = l.align,
        ));
        for f in l.fields {
            h.push_str(&format!(
                "_Static_assert(offsetof({st}, {n}) == {o}, \"tally.h: offsetof({st}, {n}) differs from tally_format::abi ({o})\");\n\
                 _Static_assert(sizeof(((({st} *)0)->{n})) == {s}, \"tally.h: sizeof {st}.{n} differs from tally_format::abi ({s})\");\n",
                n = f.name,
                o = f.offset,
                s = f.ty.size(),
            ));
        }
    }
    h.push_str("#endif /* TALLY_ABI_CHECK_H */\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use tally_graph::hash::Fnv64;

    #[test]
    fn layouts_match_the_mirrors() {
        assert_eq!(TALLY_MODULE.size, 72);
        assert_eq!(TALLY_PATH_TABLE.size, 72);
        assert_eq!(TALLY_PATH_SITE.size, 16);
        assert_eq!(TALLY_FRAME.size, 16);
        for l in LAYOUTS {
            assert!(is_c_layout(l), "{}", l.name);
        }
        assert_eq!(TALLY_FRAME.index("site"), Some(1));
        assert_eq!(TALLY_FRAME.index("nope"), None);
    }

    #[test]
    fn fnv_constants_are_the_hash_of_tally_graph() {
        let bytes = b"tally counters";
        let mut h = FNV_OFFSET;
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
        let mut f = Fnv64::new();
        f.write(bytes);
        assert_eq!(h, f.finish());
        assert_eq!(Fnv64::new().finish(), FNV_OFFSET);
    }

    #[test]
    fn magic_words_are_little_endian() {
        assert_eq!(magic_word(PROFILE_MAGIC).to_le_bytes(), *PROFILE_MAGIC);
        assert_eq!(magic_word(MODULE_MAGIC) & 0xff, u64::from(b'T'));
    }

    #[test]
    fn check_header_names_every_define_and_field() {
        let h = c_check_header();
        for d in DEFINES {
            assert!(h.contains(d.name), "{}", d.name);
        }
        for l in LAYOUTS {
            for f in l.fields {
                assert!(
                    h.contains(&format!("offsetof(struct {}, {})", l.name, f.name)),
                    "{}.{}",
                    l.name,
                    f.name
                );
            }
        }
        assert!(h.contains("(unsigned long long)(TALLY_PATH_HASH_MUL) == 0x9e3779b97f4a7c15ULL"));
    }
}
