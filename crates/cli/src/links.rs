//! Compiler entry points named like clang. Build systems infer a toolchain from the compiler's
//! file name: CMake matches `^(.+-)?(clang|g?cc)(-[0-9]+...)?$` and, for `clang-19`, looks for
//! `llvm-ar-19`, `llvm-nm-19`, `llvm-ranlib-19`, ... (with the prefix, if any, in front). For
//! `CC="tally cc"` it sees `tally` and finds the unversioned tools (on Debian 12, LLVM 14's), so
//! its configure results differ from a plain clang-19 build. `tally links DIR` creates, in DIR,
//! symbolic links to the tally binary named exactly `clang-19`, `clang++-19`, `cc` and `c++` (as
//! ccache's "masquerade" directory does); invoked through one of them, tally is the compiler
//! driver (C or C++ by the name), and `CC=DIR/clang-19` gives CMake the same name, hence the same
//! tools, as `CC=clang-19`. `PATH=DIR:$PATH make` also works: the driver never runs itself as
//! clang ([`is_self`]).

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::path::Path;

/// The names `tally links` creates: (file name, C++ driver).
pub const NAMES: &[(&str, bool)] = &[
    ("clang-19", false),
    ("clang++-19", true),
    ("cc", false),
    ("c++", true),
];

/// Whether tally was invoked through a compiler entry point: `Some(cxx)` when the file name of
/// `argv[0]` is a C compiler name (`cc`, `gcc`, `clang`, `clang-19`, ...: a name with an optional
/// `-N` version suffix) or a C++ one (`c++`, `g++`, `clang++`, ...).
pub fn driver_of(argv0: Option<&OsString>) -> Option<bool> {
    let name = Path::new(argv0?).file_name()?.to_str()?;
    // A version suffix: "-" and digits, possibly dotted ("-19", "-19.1").
    let tool = match name.rsplit_once('-') {
        Some((t, v)) if !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.') => t,
        _ => name,
    };
    match tool {
        "cc" | "gcc" | "clang" => Some(false),
        "c++" | "g++" | "clang++" => Some(true),
        _ => None,
    }
}

/// Whether `path` is the running tally binary (a link created by `tally links`, found on
/// `PATH` where the driver looks for clang).
pub fn is_self(path: &Path) -> bool {
    let (Ok(me), Ok(it)) = (
        std::env::current_exe().and_then(|p| p.canonicalize()),
        path.canonicalize(),
    ) else {
        return false;
    };
    me == it
}

/// Creates the entry points in `dir` (created if missing). An existing symbolic link of that
/// name is replaced; any other existing file is left alone with an error.
pub fn create(dir: &Path) -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the tally binary")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, _) in NAMES {
        let link = dir.join(name);
        match std::fs::symlink_metadata(&link) {
            Ok(m) if !m.file_type().is_symlink() => {
                bail!(
                    "{}: exists and is not a symbolic link; not replaced",
                    link.display()
                )
            }
            _ => {}
        }
        // Create under a temporary name, then rename over: never a moment without the link,
        // never a write through an existing one.
        let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&exe, &tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        if let Err(e) = std::fs::rename(&tmp, &link) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("cannot create {}", link.display()));
        }
        println!("{} -> {}", link.display(), exe.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(s: &str) -> Option<bool> {
        driver_of(Some(&OsString::from(s)))
    }

    #[test]
    fn entry_point_names() {
        assert_eq!(of("/usr/local/lib/tally/clang-19"), Some(false));
        assert_eq!(of("clang++-19"), Some(true));
        assert_eq!(of("cc"), Some(false));
        assert_eq!(of("c++"), Some(true));
        assert_eq!(of("gcc-12.2"), Some(false));
        assert_eq!(of("tally"), None);
        assert_eq!(of("/bin/tally"), None);
        assert_eq!(of("tally-cc"), None);
        assert_eq!(of("clang-"), None);
        assert_eq!(of("clang-tidy"), None);
        for (name, cxx) in NAMES {
            assert_eq!(of(name), Some(*cxx), "{name}");
        }
    }
}
