//! The runtime archive `tally cc` links is one it wrote or verified: a
//! private cache directory (0700, this user's, not a symbolic link, in directories only this
//! user or root can change), an archive whose bytes are the embedded ones; anything else is
//! left alone and the build links a copy written into its own private temporary directory.

mod support;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;

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
