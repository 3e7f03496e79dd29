//! Reading a profile: the bounds-checked parse of the container (magics, version, lengths,
//! hashes, checksums, trailer) and the file checks before a byte is read.

use super::shared::{read_meta_file, read_sparse};
use super::*;
use crate::abi::REF_MAGIC;
use std::borrow::Cow;

pub(super) fn file_kind(m: &std::fs::Metadata) -> &'static str {
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

/// A bounds-checked cursor over the input.
pub(super) struct Reader<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, what: &'static str, n: u64) -> Result<&'a [u8], ProfileError> {
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

    pub(super) fn u32(&mut self, what: &'static str) -> Result<u32, ProfileError> {
        let b = self.take(what, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(super) fn u64(&mut self, what: &'static str) -> Result<u64, ProfileError> {
        let b = self.take(what, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// The checksum of a module record (version 3): FNV-1a 64 of its counter bytes followed by its
/// path-entry bytes, as stored.
pub(super) fn counter_checksum(counters: &[u8], paths: &[u8]) -> u64 {
    let mut h = Fnv64::new();
    h.write(counters);
    h.write(paths);
    h.finish()
}

/// The program record (version 4).
pub(super) fn read_program(r: &mut Reader<'_>) -> Result<Program, ProfileError> {
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

/// The run record (version 5).
pub(super) fn read_run(r: &mut Reader<'_>) -> Result<Run, ProfileError> {
    let start_ns = r.u64("the run's start time")?;
    let end_ns = r.u64("the run's end time")?;
    let kind = r.u32("the run's status kind")?;
    let status = r.u32("the run's exit status")? as i32;
    let host_len = r.u32("the host name length")?;
    let labels_len = r.u32("the labels length")?;
    let (exit_status, snapshot) = match (kind, status) {
        (RUN_STATUS_EXITED, s) => (Some(s), None),
        (RUN_STATUS_UNKNOWN, 0) => (None, None),
        (RUN_STATUS_SNAPSHOT, n) if n > 0 => (None, Some(n as u32)),
        _ => return Err(ProfileError::BadRun("bad exit status kind")),
    };
    if u64::from(host_len) > RUN_HOST_MAX || u64::from(labels_len) > RUN_LABELS_MAX {
        return Err(ProfileError::BadRun("host name or labels too long"));
    }
    let host = r.take("the host name", u64::from(host_len))?.to_vec();
    let labels = r.take("the labels", u64::from(labels_len))?.to_vec();
    let strings = u64::from(host_len) + u64::from(labels_len);
    let padded = pad8(strings).unwrap_or(u64::MAX);
    if r.take("the run record padding", padded - strings)?
        .iter()
        .any(|&b| b != 0)
    {
        return Err(ProfileError::BadRun("non-zero padding"));
    }
    Ok(Run {
        start_ns,
        end_ns,
        exit_status,
        snapshot,
        host,
        labels,
    })
}

/// Skips the padding records before a module record of a continuous profile.
pub(super) fn skip_padding(r: &mut Reader<'_>) -> Result<(), ProfileError> {
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
pub(super) fn pad8(len: u64) -> Option<u64> {
    len.checked_add(7).map(|l| l & !7)
}

/// A module record as stored: lengths, hash and checksum checked, metadata not decoded.
pub(super) struct RawModule<'a> {
    pub(super) index: usize,
    pub(super) hash: u64,
    /// The metadata; `None` for a record that names its metadata file ([`REF_MAGIC`]).
    pub(super) blob: Option<&'a [u8]>,
    pub(super) meta_len: u64,
    /// The counters as little-endian words (a sparse record's made dense).
    pub(super) counters: Cow<'a, [u8]>,
    pub(super) paths: &'a [u8],
    /// `(stored, computed)` when the counter checksum does not match.
    pub(super) bad_checksum: Option<(u64, u64)>,
}

impl RawModule<'_> {
    /// Whether this record is of the module whose metadata is `blob` (its hash already
    /// matched): the same bytes, or, for a record naming its metadata file, the same length.
    pub(super) fn same_meta(&self, blob: &[u8]) -> bool {
        match self.blob {
            Some(b) => b == blob,
            None => self.meta_len == blob.len() as u64,
        }
    }

    /// The metadata blob: the record's own, else the file it names in `dir`.
    pub(super) fn resolve(&self, dir: Option<&Path>) -> Result<Vec<u8>, ProfileError> {
        match (self.blob, dir) {
            (Some(b), _) => Ok(b.to_vec()),
            (None, None) => Err(ProfileError::MetaNotFound {
                index: self.index,
                hash: self.hash,
            }),
            (None, Some(dir)) => read_meta_file(dir, self.hash, self.meta_len),
        }
    }

    pub(super) fn check_sum(&self, meta: &ModuleMeta) -> Result<(), ProfileError> {
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
pub(super) struct RawProfile<'a> {
    pub(super) pid: u64,
    pub(super) program: Program,
    pub(super) modules: Vec<RawModule<'a>>,
    pub(super) unfinished: bool,
    pub(super) raced: bool,
    pub(super) signal: Option<u32>,
    pub(super) delta: bool,
    pub(super) run: Option<Run>,
}

/// Checks everything about a profile but its metadata and path entries: magics, version,
/// flags, lengths, each module's hash and checksum, the trailer.
pub(super) fn parse(bytes: &[u8]) -> Result<RawProfile<'_>, ProfileError> {
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
    if !(PROFILE_VERSION_NO_CHECKSUM..=PROFILE_VERSION_RUN).contains(&version) {
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
    let delta = flags & PROFILE_DELTA != 0;
    let signal = signaled.then_some(signal);
    let module_count = r.u64("the module count")?;
    let pid = r.u64("the pid")?;
    let program = if version > PROFILE_VERSION_NO_PROGRAM {
        read_program(&mut r)?
    } else {
        Program::default()
    };
    let run = if version >= PROFILE_VERSION_RUN {
        Some(read_run(&mut r)?)
    } else {
        None
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
        let by_ref = version >= PROFILE_VERSION_RUN && magic == REF_MAGIC;
        if magic != MODULE_MAGIC && !by_ref {
            return Err(ProfileError::BadModuleMagic { index, offset });
        }
        let stored = r.u64("the module hash")?;
        let meta_len = r.u64("the metadata length")?;
        let num_counters = r.u64("the counter count")?;
        let num_paths = r.u64("the path entry count")?;
        let (blob, counters_at) = if by_ref {
            (None, r.pos)
        } else {
            let blob = r.take("the module metadata", meta_len)?;
            let padded = pad8(meta_len).unwrap_or(u64::MAX);
            r.take("the metadata padding", padded - meta_len)?;
            (Some(blob), r.pos)
        };
        let counters = if by_ref {
            Cow::Owned(read_sparse(&mut r, index, num_counters)?)
        } else {
            Cow::Borrowed(r.take("the module counters", num_counters.saturating_mul(8))?)
        };
        let stored_counters = &bytes[counters_at..r.pos];
        let paths = r.take(
            "the path entries",
            num_paths.saturating_mul(PATH_ENTRY_LEN as u64),
        )?;
        let checksum = if checksummed {
            Some(r.u64("the counter checksum")?)
        } else {
            None
        };
        if let Some(blob) = blob {
            let computed = fnv64(blob);
            if computed != stored {
                return Err(ProfileError::HashMismatch {
                    index,
                    stored,
                    computed,
                });
            }
        }
        // Compared by the caller, after the metadata decodes (the error names its source).
        let bad_checksum = checksum
            .filter(|_| !unfinished)
            .map(|stored| (stored, counter_checksum(stored_counters, paths)))
            .filter(|(stored, computed)| stored != computed);
        modules.push(RawModule {
            index,
            hash: stored,
            blob,
            meta_len,
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
        delta,
        run,
    })
}

pub(super) fn le_words(raw: &[u8]) -> impl Iterator<Item = u64> + '_ {
    raw.chunks_exact(8).map(|c| {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        u64::from_le_bytes(a)
    })
}

/// Decodes a module record's path entries, checked against its metadata.
pub(super) fn decode_path_entries(
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

impl Profile {
    /// Parses and checks a profile that holds all its metadata (a record naming its metadata
    /// file is an error: see [`Profile::read_at`]).
    pub fn read(bytes: &[u8]) -> Result<Profile, ProfileError> {
        Profile::read_at(bytes, None)
    }

    /// Parses and checks a profile read from a file in `dir`, where the metadata files its
    /// records name are (`TALLY_META=shared`, [`meta_dir`]).
    pub fn read_at(bytes: &[u8], dir: Option<&Path>) -> Result<Profile, ProfileError> {
        let raw = parse(bytes)?;
        let mut modules = Vec::with_capacity(raw.modules.len());
        for m in raw.modules {
            let counters = le_words(&m.counters).collect();
            let mut module = ProfileModule::from_blob(m.index, m.resolve(dir)?, counters)?;
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
            delta: raw.delta,
            run: raw.run,
        })
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
        let path = path.as_ref();
        Profile::read_at(&Profile::file_bytes(path, max)?, Some(meta_dir(path)))
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
}
