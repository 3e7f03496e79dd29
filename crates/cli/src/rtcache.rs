//! Where `tally cc` finds the runtime archive it links: never a file it did not create or
//! cannot trust.
//!
//! The archive's bytes are embedded in the binary (`tally_runtime::ARCHIVE`). A link step
//! links a copy of them:
//! - in the user's cache, `$XDG_CACHE_HOME/tally` or `$HOME/.cache/tally`, when that
//!   directory can only be changed by this user or root: `tally` itself is created 0700 and
//!   must be a real directory (`lstat`, not a symbolic link), owned by the effective user,
//!   without group or other write permission; each directory above it (after resolving
//!   symbolic links in the path given) must be owned by this user or root and not writable by
//!   group or others unless sticky (`/tmp`). The cached archive is opened with `O_NOFOLLOW`,
//!   must be a regular file owned by this user without group or other write permission, and
//!   its bytes must equal the embedded ones; it is written through an `O_EXCL` temporary file
//!   in that directory and renamed into place. A file there with other contents is left alone
//!   and not linked;
//! - otherwise in the build's own private temporary directory (0700), written per build.

use anyhow::{Context as _, Result};
use std::fs::{DirBuilder, File, Metadata, OpenOptions};
use std::io::{ErrorKind, Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// Which of the two runtime archives (`tally_runtime::ARCHIVE`, `ARCHIVE_DYN`) a link needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// Initial-exec thread-locals: executables, and shared objects with trace-mode code.
    Static,
    /// General-dynamic thread-locals: every other shared object (no static TLS taken).
    Dynamic,
}

impl Runtime {
    fn bytes(self) -> &'static [u8] {
        match self {
            Runtime::Static => tally_runtime::ARCHIVE,
            Runtime::Dynamic => tally_runtime::ARCHIVE_DYN,
        }
    }

    /// The archive's file name: its content hash, so builds of different tally versions never
    /// share a name.
    fn name(self) -> String {
        let stem = match self {
            Runtime::Static => "libtally_rt",
            Runtime::Dynamic => "libtally_rt_dyn",
        };
        let hash = tally_graph::hash::fnv64(self.bytes());
        format!("{stem}-{hash:016x}.a")
    }
}

/// The runtime archive to link: a verified copy in the user's cache, else a copy written into
/// `private_tmp` (a directory this build created, mode 0700).
pub fn archive(private_tmp: &Path, rt: Runtime) -> Result<PathBuf> {
    let name = rt.name();
    let mut bases = Vec::new();
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        bases.push(PathBuf::from(x));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|x| !x.is_empty()) {
        bases.push(PathBuf::from(h).join(".cache"));
    }
    for base in bases {
        if let Some(p) = in_cache(&base, &name, rt) {
            return Ok(p);
        }
    }
    write_new(private_tmp, &name, rt.bytes()).with_context(|| {
        format!(
            "cannot write the runtime archive to {}",
            private_tmp.display()
        )
    })
}

pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// `lstat` says: a directory only this user can change.
pub(crate) fn private_dir(m: &Metadata) -> bool {
    m.file_type().is_dir() && m.uid() == euid() && m.mode() & 0o022 == 0
}

/// Every directory from `dir` (a canonical path) up to `/` can only be changed by this user
/// or root: owned by one of them, and not writable by group or others unless sticky.
pub(crate) fn safe_ancestors(dir: &Path) -> bool {
    dir.ancestors().all(|a| match std::fs::symlink_metadata(a) {
        Ok(m) => {
            m.file_type().is_dir()
                && (m.uid() == 0 || m.uid() == euid())
                && (m.mode() & 0o022 == 0 || m.mode() & 0o1000 != 0)
        }
        Err(_) => false,
    })
}

/// The archive in `<base>/tally`, created if missing, when that directory is trusted and the
/// file holds exactly the embedded bytes; `None` otherwise.
fn in_cache(base: &Path, name: &str, rt: Runtime) -> Option<PathBuf> {
    let _ = std::fs::create_dir_all(base);
    let base = std::fs::canonicalize(base).ok()?;
    if !safe_ancestors(&base) {
        return None;
    }
    let dir = base.join("tally");
    match DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    if !private_dir(&std::fs::symlink_metadata(&dir).ok()?) {
        return None;
    }
    let path = dir.join(name);
    match verify(&path, rt) {
        Found::Same => Some(path),
        Found::Missing => write_new(&dir, name, rt.bytes()).ok(),
        Found::Other => None,
    }
}

enum Found {
    /// A regular file of this user, not writable by others, with exactly the embedded bytes.
    Same,
    Missing,
    /// Anything else (other bytes, a symbolic link, another owner, unreadable): not ours.
    Other,
}

fn verify(path: &Path, rt: Runtime) -> Found {
    let f = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Found::Missing,
        Err(_) => return Found::Other,
    };
    let want = rt.bytes();
    let ok = f.metadata().is_ok_and(|m| {
        m.file_type().is_file()
            && m.uid() == euid()
            && m.mode() & 0o022 == 0
            && m.len() == want.len() as u64
    });
    let mut bytes = Vec::with_capacity(want.len());
    if ok
        && f.take(want.len() as u64 + 1)
            .read_to_end(&mut bytes)
            .is_ok()
        && bytes == want
    {
        Found::Same
    } else {
        Found::Other
    }
}

/// Writes `bytes` to a new file `dir/.name.<pid>.<n>` (`O_CREAT|O_EXCL|O_NOFOLLOW`,
/// mode 0644 & ~umask) and renames it to `dir/name`, so that a reader never sees a partial
/// file and a symbolic link at `dir/name` is replaced, never followed. Shared by both caches.
pub(crate) fn write_new(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf> {
    let path = dir.join(name);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for n in 0..100u32 {
        let tmp = dir.join(format!(".{name}.{}.{nanos:x}{n}", std::process::id()));
        let mut f: File = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
        {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", tmp.display())),
        };
        let done = f
            .write_all(bytes)
            .and_then(|()| f.sync_all())
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = done {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("cannot write {}", path.display()));
        }
        return Ok(path);
    }
    anyhow::bail!("cannot create a temporary file in {}", dir.display())
}
