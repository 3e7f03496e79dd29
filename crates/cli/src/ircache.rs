//! `TALLY_IR_CACHE=DIR`: the optimized bitcode of step 1 (clang's front end and optimization
//! pipeline, before instrumentation) reused by later builds of the same source with the same
//! flags, in any mode. A build in another mode then costs only instrumentation and code
//! generation: the test suite builds Lua and SQLite in a dozen modes each.
//!
//! An entry is `DIR/<key>.bc`, the key an FNV-64 hash of everything step 1's output depends
//! on: the clang binary (path, size, modification time), the working directory (in the debug
//! information), step 1's arguments without its output path, and the source as clang's
//! preprocessor sees it (`clang ARGS -E`: every header, macro and `-include` expanded), as
//! ccache's preprocessor mode keys a compile. A step 1 that writes more than bitcode
//! (dependency or coverage files) is never cached.
//!
//! The bitcode is compiled into the user's program, so the cache is trusted as the runtime
//! archive's is (`rtcache`): DIR must be a real directory of this user without group or other
//! write permission (created 0700) in directories only this user or root can change; an entry
//! is read with `O_NOFOLLOW` and used only if it is a regular file of this user that others
//! cannot write; entries are written through an `O_EXCL` temporary file renamed into place.
//! Otherwise the build runs step 1 as without a cache (and, in a trusted directory, renames its
//! bitcode over the entry it could not use).

use crate::rtcache::{euid, private_dir, safe_ancestors, write_new};
use std::ffi::OsString;
use std::fs::{DirBuilder, OpenOptions};
use std::io::{ErrorKind, Read as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One step 1's place in the cache.
pub struct Entry {
    path: PathBuf,
}

/// The cache entry of step 1 (`clang ARGS -o <bitcode>`), or `None` without a usable
/// `TALLY_IR_CACHE` (unset, untrusted; a warning says which) or when clang's preprocessor fails
/// on ARGS (the compile then reports the error itself).
pub fn entry(clang: &Path, args: &[OsString]) -> Option<Entry> {
    let dir = std::env::var_os("TALLY_IR_CACHE").filter(|d| !d.is_empty())?;
    let Some(dir) = trusted_dir(Path::new(&dir)) else {
        eprintln!(
            "tally: warning: TALLY_IR_CACHE={}: not a directory only this user can change; not used",
            Path::new(&dir).display()
        );
        return None;
    };
    let out = Command::new(clang)
        .args(args)
        .args(["-E", "-o", "-"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut h = tally_graph::hash::Fnv64::new();
    let mut field = |bytes: &[u8]| {
        h.write_u64(bytes.len() as u64);
        h.write(bytes);
    };
    field(clang.as_os_str().as_encoded_bytes());
    if let Ok(m) = std::fs::metadata(clang) {
        field(&m.len().to_le_bytes());
        field(&m.mtime().to_le_bytes());
        field(&m.mtime_nsec().to_le_bytes());
    }
    let cwd = std::env::current_dir().ok()?;
    field(cwd.as_os_str().as_encoded_bytes());
    for a in args {
        field(a.as_encoded_bytes());
    }
    field(&out.stdout);
    Some(Entry {
        path: dir.join(format!("{:016x}.bc", h.finish())),
    })
}

impl Entry {
    /// The cached bitcode, if this entry holds a file the cache trusts.
    pub fn get(&self) -> Option<Vec<u8>> {
        let mut f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&self.path)
            .ok()?;
        let m = f.metadata().ok()?;
        if !(m.file_type().is_file() && m.uid() == euid() && m.mode() & 0o022 == 0) {
            return None;
        }
        let mut bytes = Vec::with_capacity(m.len() as usize);
        f.read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }

    /// Keeps `bitcode` in this entry (best effort: a cache that cannot be written is only a
    /// slower build).
    pub fn put(&self, bitcode: &[u8]) {
        if let (Some(dir), Some(name)) = (self.path.parent(), self.path.file_name()) {
            let _ = write_new(dir, &name.to_string_lossy(), bitcode);
        }
    }
}

/// `dir`, created 0700 if missing, canonical, when only this user (or root, above it) can
/// change it.
fn trusted_dir(dir: &Path) -> Option<PathBuf> {
    match DirBuilder::new().recursive(true).mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    let dir = std::fs::canonicalize(dir).ok()?;
    (private_dir(&std::fs::symlink_metadata(&dir).ok()?) && safe_ancestors(&dir)).then_some(dir)
}
