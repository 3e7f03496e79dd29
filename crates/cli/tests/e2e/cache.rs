//! The runtime archive `tally cc` links is one it wrote or verified: a
//! private cache directory (0700, this user's, not a symbolic link, in directories only this
//! user or root can change), an archive whose bytes are the embedded ones; anything else is
//! left alone and the build links a copy written into its own private temporary directory.
//! The same holds for `TALLY_IR_CACHE`, the optimized bitcode of step 1 reused across builds:
//! a hit compiles to the same object as a build without the cache, any change the
//! preprocessor sees (a header) is a miss, and an untrusted directory or entry is not used.

use crate::support::*;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;

const PROG: &str = "#include <stdio.h>\nint main(int c, char **v) { int s = 0; for (int i = 0; i < 10 * c; i++) s += i; printf(\"%d\\n\", s); return 0; }\n";

/// Builds `prog` in `dir` with `tally cc --tally-verbose`, the cache pointed at by `xdg` and
/// `home` (unset when `None`), runs it, and returns the runtime archive the link step used.
fn build(dir: &Path, xdg: Option<&Path>, home: Option<&Path>) -> PathBuf {
    std::fs::write(dir.join("p.c"), PROG).unwrap();
    let mut c = Command::new(tally());
    c.args(["cc", "--tally-verbose", "-O2", "p.c", "-o", "prog"])
        .current_dir(dir)
        .env_remove("TALLY_RUNTIME")
        .env_remove("TALLY_MODE")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("HOME");
    if let Some(x) = xdg {
        c.env("XDG_CACHE_HOME", x);
    }
    if let Some(h) = home {
        c.env("HOME", h);
    }
    let o = c.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "tally cc failed: {err}");
    let archive = err
        .lines()
        .filter(|l| l.starts_with("tally: "))
        .flat_map(|l| l.split(' '))
        .rfind(|w| w.contains("libtally_rt-"))
        .unwrap_or_else(|| panic!("no runtime archive on the link line: {err}"));
    let run = Command::new(dir.join("prog"))
        .current_dir(dir)
        .env("TALLY_PROFILE", "off")
        .output()
        .unwrap();
    assert!(run.status.success());
    assert_eq!(String::from_utf8_lossy(&run.stdout), "45\n");
    PathBuf::from(archive)
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// The archive's file name, from a build with no cache at all.
fn archive_name(dir: &Path) -> String {
    let a = build(dir, None, None);
    a.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn a_fresh_cache_is_private_and_reused() {
    let dir = scratch("cache-fresh");
    let xdg = dir.join("xdg");
    let a = build(&dir, Some(&xdg), None);
    let cache = std::fs::canonicalize(&xdg).unwrap().join("tally");
    assert_eq!(a.parent().unwrap(), cache);
    assert_eq!(mode(&cache), 0o700);
    assert!(std::fs::symlink_metadata(&a).unwrap().file_type().is_file());
    let mtime = std::fs::metadata(&a).unwrap().modified().unwrap();
    // Reused as it is, not rewritten.
    assert_eq!(build(&dir, Some(&xdg), None), a);
    assert_eq!(std::fs::metadata(&a).unwrap().modified().unwrap(), mtime);
    // HOME's cache, when XDG_CACHE_HOME is unset.
    let home = dir.join("home");
    let b = build(&dir, None, Some(&home));
    assert_eq!(
        b.parent().unwrap(),
        std::fs::canonicalize(&home).unwrap().join(".cache/tally")
    );
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn without_a_cache_the_archive_is_written_per_build() {
    let dir = scratch("cache-none");
    let a = build(&dir, None, None);
    // In the build's private temporary directory, removed after the build.
    let tmp = a.parent().unwrap();
    let base = tmp.file_name().unwrap().to_string_lossy().into_owned();
    assert!(base.starts_with("tally-"), "{}", a.display());
    assert!(!tmp.exists(), "{} left behind", tmp.display());
}

/// Plants `bytes` as the archive in `cache` and checks that a build does not link it and
/// leaves it as it was.
fn planted_is_ignored(dir: &Path, xdg: &Path, cache: &Path, name: &str) {
    let planted = cache.join(name);
    let bad = b"!<arch>\nnot the tally runtime\n";
    std::fs::write(&planted, bad).unwrap();
    let a = build(dir, Some(xdg), None);
    assert!(
        !a.starts_with(cache) && !a.starts_with(std::fs::canonicalize(cache).unwrap()),
        "linked {}",
        a.display()
    );
    assert_eq!(std::fs::read(&planted).unwrap(), bad);
}

#[test]
fn a_cache_directory_others_can_write_is_not_used() {
    let dir = scratch("cache-0777");
    let name = archive_name(&dir);
    let xdg = dir.join("xdg");
    let cache = xdg.join("tally");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    planted_is_ignored(&dir, &xdg, &cache, &name);
    assert_eq!(mode(&cache), 0o777);
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);

    // The same when a directory above it is writable by others (and not sticky).
    let dir = scratch("cache-0777-parent");
    let xdg = dir.join("xdg");
    let cache = xdg.join("tally");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(&xdg, std::fs::Permissions::from_mode(0o777)).unwrap();
    planted_is_ignored(&dir, &xdg, &cache, &name);
}

#[test]
fn a_cache_directory_of_another_user_is_not_used() {
    if !root_or_skip(
        "a_cache_directory_of_another_user_is_not_used",
        "give a directory to another user",
    ) {
        return;
    }
    let dir = scratch("cache-nobody");
    let name = archive_name(&dir);
    let xdg = dir.join("xdg");
    let cache = xdg.join("tally");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&cache, Some(65534), Some(65534)).unwrap();
    planted_is_ignored(&dir, &xdg, &cache, &name);
    assert_eq!(std::fs::metadata(&cache).unwrap().uid(), 65534);
}

#[test]
fn an_archive_with_other_contents_in_a_private_cache_is_not_linked() {
    let dir = scratch("cache-planted");
    let xdg = dir.join("xdg");
    let good = build(&dir, Some(&xdg), None);
    let cache = good.parent().unwrap().to_path_buf();
    let name = good.file_name().unwrap().to_string_lossy().into_owned();
    let genuine = std::fs::read(&good).unwrap();
    planted_is_ignored(&dir, &xdg, &cache, &name);
    // Nor a symbolic link in its place, even to a file with the genuine bytes.
    let real = dir.join("genuine.a");
    std::fs::write(&real, &genuine).unwrap();
    std::fs::remove_file(cache.join(&name)).unwrap();
    std::os::unix::fs::symlink(&real, cache.join(&name)).unwrap();
    let a = build(&dir, Some(&xdg), None);
    assert!(!a.starts_with(&cache), "linked {}", a.display());
    assert!(std::fs::symlink_metadata(cache.join(&name))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_symbolic_link_as_the_cache_directory_is_not_followed() {
    let dir = scratch("cache-symlink");
    let xdg = dir.join("xdg");
    std::fs::create_dir_all(&xdg).unwrap();
    // A directory that would be trusted if it were reached directly.
    let target = dir.join("elsewhere");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&target, xdg.join("tally")).unwrap();
    let a = build(&dir, Some(&xdg), None);
    assert!(!a.starts_with(&target) && !a.starts_with(xdg.join("tally")));
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    assert!(std::fs::symlink_metadata(xdg.join("tally"))
        .unwrap()
        .file_type()
        .is_symlink());
}

/// Compiles `dir/p.c` (which includes `dir/p.h`) to `dir/<out>` with `tally cc -c` in `mode`,
/// with `TALLY_IR_CACHE=cache` if given; returns standard error.
fn compile_ir(dir: &Path, mode: &str, cache: Option<&Path>, out: &str) -> String {
    let mut c = Command::new(tally());
    c.args([
        "cc",
        &format!("--tally-mode={mode}"),
        "-O2",
        "-g",
        "-c",
        "p.c",
        "-o",
        out,
    ])
    .current_dir(dir)
    .env_remove("TALLY_MODE")
    .env_remove("TALLY_IR_CACHE");
    if let Some(cache) = cache {
        c.env("TALLY_IR_CACHE", cache);
    }
    let o = c.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "tally cc failed: {err}");
    err
}

fn entries(cache: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

const IR_PROG: &str = "#include \"p.h\"\nint f(int n) { int s = 0; for (int i = 0; i < n; i++) s += i * K; return s; }\n";

#[test]
fn the_ir_cache_compiles_the_same_objects_and_sees_headers() {
    let dir = scratch("ir-cache");
    std::fs::write(dir.join("p.c"), IR_PROG).unwrap();
    std::fs::write(dir.join("p.h"), "#define K 3\n").unwrap();
    let cache = dir.join("cache");
    for mode in ["edge", "trace"] {
        compile_ir(&dir, mode, None, &format!("{mode}-plain.o"));
        compile_ir(&dir, mode, Some(&cache), &format!("{mode}-cached.o"));
        assert_eq!(
            std::fs::read(dir.join(format!("{mode}-plain.o"))).unwrap(),
            std::fs::read(dir.join(format!("{mode}-cached.o"))).unwrap(),
            "{mode}: the object built through the cache differs"
        );
    }
    // Both modes used the one entry the first build wrote (created 0700).
    assert_eq!(mode(&cache), 0o700);
    let first = entries(&cache);
    assert_eq!(first.len(), 1, "{first:?}");
    // A header the preprocessor sees changed: another entry, and the object follows it.
    std::fs::write(dir.join("p.h"), "#define K 5\n").unwrap();
    compile_ir(&dir, "edge", Some(&cache), "edge-k5.o");
    compile_ir(&dir, "edge", None, "edge-k5-plain.o");
    assert_eq!(entries(&cache).len(), 2);
    let k5 = std::fs::read(dir.join("edge-k5.o")).unwrap();
    assert_eq!(k5, std::fs::read(dir.join("edge-k5-plain.o")).unwrap());
    assert_ne!(k5, std::fs::read(dir.join("edge-plain.o")).unwrap());
}

#[test]
fn untrusted_ir_caches_and_entries_are_not_used() {
    let dir = scratch("ir-cache-untrusted");
    std::fs::write(dir.join("p.c"), IR_PROG).unwrap();
    std::fs::write(dir.join("p.h"), "#define K 3\n").unwrap();
    compile_ir(&dir, "edge", None, "want.o");
    let want = std::fs::read(dir.join("want.o")).unwrap();
    // The bitcode of another program, planted where this build's entry is.
    std::fs::write(dir.join("q.c"), "int f(int n) { return n * 7; }\n").unwrap();
    let other = dir.join("other.bc");
    let o = Command::new("clang-19")
        .args(["-O2", "-g", "-c", "-emit-llvm", "q.c", "-o"])
        .arg(&other)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success());
    let cache = dir.join("cache");
    compile_ir(&dir, "edge", Some(&cache), "a.o");
    let [entry] = entries(&cache).try_into().unwrap();
    // An entry others can write, and an entry that is a symbolic link: neither is read, and
    // each is replaced by the build's own bitcode.
    std::fs::copy(&other, &entry).unwrap();
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o666)).unwrap();
    compile_ir(&dir, "edge", Some(&cache), "b.o");
    assert_eq!(
        std::fs::read(dir.join("b.o")).unwrap(),
        want,
        "a writable entry was used"
    );
    let other_bytes = std::fs::read(&other).unwrap();
    std::fs::remove_file(&entry).unwrap();
    std::os::unix::fs::symlink(&other, &entry).unwrap();
    compile_ir(&dir, "edge", Some(&cache), "c.o");
    assert_eq!(
        std::fs::read(dir.join("c.o")).unwrap(),
        want,
        "a symbolic link was followed"
    );
    // The build's own bitcode replaced the link (a rename), and not written through it.
    assert!(std::fs::symlink_metadata(&entry)
        .unwrap()
        .file_type()
        .is_file());
    assert_eq!(std::fs::read(&other).unwrap(), other_bytes);
    // A cache directory others can write: a warning, and nothing read or written there.
    let open = dir.join("open");
    std::fs::create_dir_all(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let bc = open.join(entry.file_name().unwrap());
    std::fs::copy(&other, &bc).unwrap();
    std::fs::set_permissions(&bc, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = compile_ir(&dir, "edge", Some(&open), "d.o");
    assert!(
        err.contains("TALLY_IR_CACHE") && err.contains("not used"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.join("d.o")).unwrap(),
        want,
        "an open cache was used"
    );
    assert_eq!(entries(&open), vec![bc]);
}
