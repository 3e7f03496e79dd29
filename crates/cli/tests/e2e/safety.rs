//! The runtime in hostile or unusual processes: it reads its environment once at
//! startup, so a program that moves `environ` behaves as a plain build does; it never replaces
//! a file that is not a regular file nor writes through a planted symbolic link; a setuid
//! process ignores every `TALLY_*` variable; an invalid `TALLY_STOP_AT` gives one stderr line.

use crate::support::*;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn build_c(dir: &Path, name: &str, v: Variant, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let bin = dir.join(format!("{name}-{}", v.name()));
    build(v, false, &["-O2", c.to_str().unwrap()], &bin, dir);
    bin
}

fn run_with(bin: &Path, cwd: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin);
    c.current_dir(cwd).env_remove("TALLY_PROFILE");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// A profile `tally report` reads.
fn assert_profile(p: &Path) {
    let o = Command::new(tally()).arg("report").arg(p).output().unwrap();
    assert!(
        o.status.success(),
        "{}: {}",
        p.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// gnulib's configure test "whether unsetenv obeys POSIX" points `environ` at an array in
/// main's frame; the runtime's exit handler runs after main returned, when that array is
/// garbage. The program must behave exactly as its plain build, and the profile still go where
/// TALLY_PROFILE said at startup.
const ENVIRON_ON_STACK: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
extern char **environ;
int main(void) {
    char entry1[] = "a=1";
    char entry2[] = "b=2";
    char *env[] = { entry1, entry2, NULL };
    if (putenv((char *)"a=1")) return 1;
    if (putenv(entry2)) return 2;
    entry2[0] = 'a';
    unsetenv("a");
    if (getenv("a")) return 3;
    entry2[0] = 'b';
    environ = env;
    if (unsetenv("a")) return 4;
    if (getenv("TALLY_PROFILE")) return 5;
    printf("%s %s\n", env[0] ? env[0] : "-", env[1] ? env[1] : "-");
    return 0;
}
"#;

#[test]
fn a_program_that_moves_environ_behaves_as_its_plain_build() {
    let dir = scratch("safety-environ");
    let plain = build_c(&dir, "envp", Variant::Plain, ENVIRON_ON_STACK);
    let tallied = build_c(&dir, "envp", Variant::Tally("edge"), ENVIRON_ON_STACK);
    let prof = dir.join("saved.tally");
    let p = prof.to_str().unwrap();
    let a = run_with(&plain, &dir, &[("TALLY_PROFILE", p)]);
    let b = run_with(&tallied, &dir, &[("TALLY_PROFILE", p)]);
    assert_eq!(a.status.code(), b.status.code(), "exit status");
    assert_eq!(a.stdout, b.stdout, "stdout");
    assert_eq!(
        String::from_utf8_lossy(&b.stderr),
        "",
        "the tally build printed something"
    );
    assert!(a.status.success(), "{a:?}");
    assert_profile(&prof);
}

const SMALL: &str = "#include <stdio.h>\nint main(void){int s=0; for(int i=0;i<10;i++) if(i&1) s+=i; printf(\"%d\\n\", s); return 0;}\n";

#[test]
fn special_files_are_never_replaced() {
    let dir = scratch("safety-special");
    let bin = build_c(&dir, "small", Variant::Tally("edge"), SMALL);

    // A FIFO nobody reads: refused with one line, left a FIFO, the program unchanged.
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let o = run_with(&bin, &dir, &[("TALLY_PROFILE", fifo.to_str().unwrap())]);
    assert!(o.status.success());
    assert_eq!(o.stdout, b"25\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("FIFO that no process is reading"), "{err}");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());

    // A FIFO with a reader: the profile is written into it, in place.
    let reader = Command::new("cat")
        .arg(&fifo)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let o = run_with(&bin, &dir, &[("TALLY_PROFILE", fifo.to_str().unwrap())]);
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    let got = reader.wait_with_output().unwrap().stdout;
    let copy = dir.join("from-fifo.tally");
    std::fs::write(&copy, got).unwrap();
    assert_profile(&copy);
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());

    // A directory, and a symbolic link to a FIFO: refused, untouched.
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let link = dir.join("to-fifo");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    for (target, want) in [
        (&sub, "cannot write profile "),
        (&link, "not writing profile "),
    ] {
        let o = run_with(&bin, &dir, &[("TALLY_PROFILE", target.to_str().unwrap())]);
        assert!(o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with(&format!("tally: {want}")), "{err}");
    }
    assert!(sub.is_dir());
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());

    // Character devices are written in place. As root, first a private node (so that a
    // regression replaces that one, never the system's), then /dev/null itself.
    if root_or_skip(
        "special_files_are_never_replaced, device nodes",
        "make a device node",
    ) {
        let null = dir.join("null");
        let made = Command::new("mknod")
            .arg(&null)
            .args(["c", "1", "3"])
            .status()
            .unwrap();
        if made.success() {
            let o = run_with(&bin, &dir, &[("TALLY_PROFILE", null.to_str().unwrap())]);
            assert!(o.status.success());
            assert_eq!(String::from_utf8_lossy(&o.stderr), "");
            let m = std::fs::symlink_metadata(&null).unwrap();
            assert!(m.file_type().is_char_device(), "{m:?}");
            assert_eq!(m.rdev(), std::fs::metadata("/dev/null").unwrap().rdev());
        } else {
            skipped(
                "special_files_are_never_replaced, private device node",
                "mknod refused",
            );
        }
        let before = std::fs::symlink_metadata("/dev/null").unwrap();
        let o = run_with(&bin, &dir, &[("TALLY_PROFILE", "/dev/null")]);
        assert!(o.status.success());
        assert_eq!(String::from_utf8_lossy(&o.stderr), "");
        let after = std::fs::symlink_metadata("/dev/null").unwrap();
        assert!(after.file_type().is_char_device());
        assert_eq!((before.ino(), before.rdev()), (after.ino(), after.rdev()));
    }
}

/// The program plants a symbolic link at the temporary name the runtime used to take
/// (`<profile>.tmp.<pid>`) pointing at a victim file, and asks for a profile: the victim is
/// unchanged, the profile is good, no temporary file is left, and the profile replaced a
/// symbolic link planted at the target itself instead of writing through it.
const PLANTER: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
void tally_write_profile(void);
int main(int argc, char **argv) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", argv[1], (int)getpid());
    if (symlink(argv[2], tmp) != 0) return 9;
    tally_write_profile();
    return argc == 3 ? 0 : 1;
}
"#;

#[test]
fn symbolic_links_are_never_written_through() {
    let dir = scratch("safety-symlink");
    let bin = build_c(&dir, "planter", Variant::Tally("edge"), PLANTER);
    let victim = dir.join("victim");
    std::fs::write(&victim, "secret\n").unwrap();
    let prof = dir.join("p.tally");
    std::os::unix::fs::symlink(&victim, &prof).unwrap();
    let o = Command::new(&bin)
        .args([prof.to_str().unwrap(), victim.to_str().unwrap()])
        .current_dir(&dir)
        .env("TALLY_PROFILE", &prof)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret\n");
    let m = std::fs::symlink_metadata(&prof).unwrap();
    assert!(m.file_type().is_file(), "the link itself is replaced");
    assert_profile(&prof);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("p.tally.tmp."))
        .collect();
    names.sort();
    // Only the planted link: the runtime's own temporary file had another name and is gone.
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(std::fs::symlink_metadata(dir.join(&names[0]))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn trace_files_follow_the_same_rules() {
    // Both trace modes open their file the same way (`trace_open_file`).
    for (mode, magic) in [("trace-naive", b"TALLYTRC"), ("trace", b"TALLYWTR")] {
        trace_file_rules(mode, magic);
    }
}

fn trace_file_rules(mode: &'static str, magic: &[u8]) {
    let dir = scratch(&format!("safety-{mode}"));
    let bin = build_c(&dir, "small", Variant::Tally(mode), SMALL);
    let victim = dir.join("victim");
    std::fs::write(&victim, "secret\n").unwrap();
    let trace = dir.join("t.trace");
    std::os::unix::fs::symlink(&victim, &trace).unwrap();
    let o = run_with(
        &bin,
        &dir,
        &[
            ("TALLY_TRACE", trace.to_str().unwrap()),
            ("TALLY_PROFILE", "off"),
        ],
    );
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret\n");
    assert!(std::fs::symlink_metadata(&trace)
        .unwrap()
        .file_type()
        .is_file());
    assert!(std::fs::read(&trace).unwrap().starts_with(magic), "{mode}");
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let o = run_with(
        &bin,
        &dir,
        &[
            ("TALLY_TRACE", fifo.to_str().unwrap()),
            ("TALLY_PROFILE", "off"),
        ],
    );
    assert!(o.status.success());
    assert_eq!(o.stdout, b"25\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}

/// A setuid-`nobody` program run by root has AT_SECURE (euid != ruid): TALLY_PROFILE is
/// ignored, the default profile is written in the current directory when the real user owns
/// it, and nothing (one stderr line) when another user owns it.
#[test]
fn setuid_processes_ignore_the_environment() {
    if !root_or_skip(
        "setuid_processes_ignore_the_environment",
        "make a setuid binary of another user",
    ) {
        return;
    }
    let dir = scratch("safety-setuid");
    let bin = build_c(&dir, "small", Variant::Tally("edge"), SMALL);
    let suid = dir.join("suid");
    std::fs::copy(&bin, &suid).unwrap();
    std::os::unix::fs::chown(&suid, Some(65534), None).unwrap();
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let elsewhere = dir.join("elsewhere.tally");
    let o = run_with(
        &suid,
        &dir,
        &[
            ("TALLY_PROFILE", elsewhere.to_str().unwrap()),
            ("TALLY_STOP_AT", "abc"),
        ],
    );
    assert!(o.status.success());
    assert_eq!(o.stdout, b"25\n");
    let default = dir.join("suid.tally");
    if !default.exists() && std::fs::metadata(&suid).unwrap().mode() & 0o4000 != 0 {
        let err = String::from_utf8_lossy(&o.stderr);
        if err.is_empty() && elsewhere.exists() {
            eprintln!("setuid bit not honoured here (nosuid mount?); skipped");
            return;
        }
    }
    assert_eq!(String::from_utf8_lossy(&o.stderr), "", "TALLY_* ignored");
    assert!(!elsewhere.exists(), "TALLY_PROFILE was honoured");
    assert_eq!(std::fs::metadata(&default).unwrap().uid(), 65534);
    assert_profile(&default);

    let other = dir.join("other");
    std::fs::create_dir(&other).unwrap();
    std::os::unix::fs::chown(&other, Some(1), None).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = run_with(&suid, &other, &[]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("setuid/setgid process"), "{err}");
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 0);
}

/// A local attacker, for real: an unprivileged user (uid 65534, through
/// `setpriv`) runs a setuid-root tally program with TALLY_PROFILE and TALLY_TRACE aimed at a
/// root-only file and with a symbolic link planted where the default profile goes. The root-only
/// file is untouched, the link not followed, and the program behaves as its plain build. (CI
/// runs as root, so this runs there; elsewhere it is skipped with a line.)
#[test]
fn an_unprivileged_user_cannot_aim_a_setuid_root_program() {
    if !root_or_skip(
        "an_unprivileged_user_cannot_aim_a_setuid_root_program",
        "make a setuid-root binary",
    ) {
        return;
    }
    // Under /tmp (world-traversable), not the checkout, which may sit in root's home.
    let tmp = tempfile::Builder::new()
        .prefix("tally-priv")
        .tempdir_in("/tmp")
        .unwrap();
    let dir = tmp.path();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = build_c(dir, "small", Variant::Tally("edge"), SMALL);
    let suid = dir.join("suid");
    std::fs::copy(&bin, &suid).unwrap();
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let victim = dir.join("root-only");
    std::fs::write(&victim, b"secret\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The user's own directory, with a link planted where the default profile would go.
    let home = dir.join("home");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
    std::os::unix::fs::symlink(&victim, home.join("suid.tally")).unwrap();
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&suid)
        .current_dir(&home)
        .env("TALLY_PROFILE", &victim)
        .env("TALLY_TRACE", &victim)
        .output()
        .expect("run setpriv (util-linux)");
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(126) || err.contains("setpriv:") {
        panic!("setpriv failed: {err}");
    }
    assert!(o.status.success(), "{err}");
    assert_eq!(o.stdout, b"25\n");
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"secret\n",
        "root-only file changed"
    );
    let meta = std::fs::metadata(&victim).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o600));
    // The setuid bit was honoured (euid 0, ruid 65534: AT_SECURE) unless the mount forbids it.
    let honoured = !err.contains("nosuid");
    if honoured {
        // The default profile's place holds the planted link, which is replaced, never written
        // through (the profile lands in the user's directory, owned by the effective user).
        let link = home.join("suid.tally");
        let m = std::fs::symlink_metadata(&link).unwrap();
        assert!(
            m.file_type().is_file(),
            "the planted link was not replaced: {err}"
        );
        assert_profile(&link);
    }
}

#[test]
fn invalid_stop_at_is_one_line_and_ignored() {
    let dir = scratch("safety-stop-at");
    let src = repo().join("testdata/events/queries.c");
    let bin = dir.join("queries");
    build(
        Variant::Tally("events"),
        false,
        &["-O2", src.to_str().unwrap()],
        &bin,
        &dir,
    );
    let base = run_with(&bin, &dir, &[("TALLY_PROFILE", "off")]);
    assert!(base.status.success());
    for (v, why) in [
        ("-1", "not a whole number"),
        ("abc", "not a whole number"),
        ("5e4", "not a whole number"),
        ("", "not a whole number"),
        ("0", "out of range"),
        ("99999999999999999999", "out of range"),
    ] {
        let o = run_with(
            &bin,
            &dir,
            &[("TALLY_PROFILE", "off"), ("TALLY_STOP_AT", v)],
        );
        assert_eq!(o.status.code(), base.status.code(), "TALLY_STOP_AT={v}");
        assert_eq!(o.stdout, base.stdout, "TALLY_STOP_AT={v}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            err,
            format!(
                "tally: ignoring TALLY_STOP_AT={v}: {why}{}\n",
                if why == "out of range" {
                    " (1 to 4611686018427387903)"
                } else {
                    ""
                }
            )
        );
    }
}
