//! Where the profile goes when the environment is gone: `tally cc
//! --tally-profile-dir=DIR` bakes a default into the program, as clang's
//! `-fprofile-generate=DIR` and gcc's `-fprofile-dir` do. A program started with an empty
//! environment (CPython's `test_subprocess.test_empty_env`) writes `DIR/<program>.%m.tally` and
//! nothing into its current directory; `TALLY_PROFILE` still wins; the runs of one build add up
//! in that file (as gcov's `.gcda` files and clang's `default_%m.profraw` do), while a build
//! without the option keeps today's last-run `<program>.tally`; a child that changed its uid and
//! cannot write says so once, however many times it tries (exec after exec, then `_exit`).

use crate::support::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Counts its argument's length in a loop: `main` runs once per process, the loop body
/// `strlen(argv[1])` times.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strlen(argv[1]) : 0, s = 0;
    for (unsigned long i = 0; i < n; i++)
        s += (unsigned char)argv[1][i];
    printf("%lu\n", s);
    return 0;
}
"#;

/// Builds PROGRAM in `dir` as `name` with the extra `tally cc` options `opts`.
fn build_prog(dir: &Path, name: &str, src: &str, opts: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let bin = dir.join(name);
    let o = Command::new(tally())
        .arg("cc")
        .args(opts)
        .args(["-O1", c.to_str().unwrap(), "-o", bin.to_str().unwrap()])
        .current_dir(dir)
        .env_remove("TALLY_MODE")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    bin
}

/// Runs `bin arg` in `cwd` with an empty environment plus `env`.
fn run_env(bin: &Path, arg: &str, cwd: &Path, env: &[(&str, &str)]) -> Output {
    let o = Command::new(bin)
        .arg(arg)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// main's entry count in a profile.
fn main_entries(profile: &Path) -> u64 {
    let c = counts(&report_json(profile));
    c.iter()
        .find(|(k, _)| k.1 == "main")
        .map(|(_, v)| v.entry)
        .expect("main in the profile")
}

/// The one file in `dir`, which must be `<program>.<16 hex digits>.tally`.
fn the_profile(dir: &Path, program: &str) -> PathBuf {
    let e = entries(dir);
    assert_eq!(
        e.len(),
        1,
        "one profile expected in {}: {e:?}",
        dir.display()
    );
    let name = e[0].file_name().unwrap().to_str().unwrap();
    let sig = name
        .strip_prefix(&format!("{program}."))
        .and_then(|s| s.strip_suffix(".tally"))
        .unwrap_or_else(|| panic!("{name}: not {program}.<signature>.tally"));
    assert!(
        sig.len() == 16 && sig.bytes().all(|b| b.is_ascii_hexdigit()),
        "{name}"
    );
    e[0].clone()
}

/// (a) An empty environment: the profile goes to the baked-in directory (relative at build
/// time: taken from where `tally cc` ran; missing directories created), nothing to the cwd.
/// (c) The runs of one build add up there, while a build without the option keeps the last run
/// in `<program>.tally`, as before.
#[test]
fn an_empty_environment_writes_to_the_baked_in_directory_and_runs_add_up() {
    let dir = scratch("profile-dir-empty-env");
    let bin = build_prog(&dir, "prog", PROGRAM, &["--tally-profile-dir=out/profiles"]);
    let cwd = dir.join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let baked = dir.join("out/profiles");
    for i in 1..=3u64 {
        let o = run_env(&bin, "abc", &cwd, &[]);
        assert_eq!(String::from_utf8_lossy(&o.stderr), "");
        assert_eq!(entries(&cwd), Vec::<PathBuf>::new(), "nothing in the cwd");
        assert_eq!(main_entries(&the_profile(&baked, "prog")), i, "run {i}");
    }
    // The directories were made 0755 & ~umask, as clang's and gcc's runtimes make them.
    let mode = std::fs::metadata(&baked).unwrap().permissions().mode() & 0o777;
    let umask = u32::from_str_radix(
        String::from_utf8_lossy(
            &Command::new("sh")
                .args(["-c", "umask"])
                .output()
                .unwrap()
                .stdout,
        )
        .trim(),
        8,
    )
    .unwrap();
    assert_eq!(mode, 0o755 & !umask);

    // Without the option: today's default, the last run in <program>.tally in the cwd.
    let plain = build_prog(&dir, "plain", PROGRAM, &[]);
    for _ in 0..3 {
        run_env(&plain, "abc", &cwd, &[]);
    }
    assert_eq!(entries(&cwd), vec![cwd.join("plain.tally")]);
    assert_eq!(main_entries(&cwd.join("plain.tally")), 1);

    // Another build (other code) with the same directory gets a file of its own.
    let other = build_prog(
        &dir,
        "prog2",
        &PROGRAM.replace("printf(\"%lu\\n\", s)", "printf(\"%lu.\\n\", s)"),
        &["--tally-profile-dir=out/profiles"],
    );
    std::fs::rename(&other, dir.join("prog")).unwrap();
    run_env(&dir.join("prog"), "abc", &cwd, &[]);
    assert_eq!(entries(&baked).len(), 2, "{:?}", entries(&baked));
}

/// (b) TALLY_PROFILE still wins over the baked-in directory, and so does TALLY_PROFILE=off.
/// `%p` in the directory expands at run time.
#[test]
fn tally_profile_wins_and_patterns_expand() {
    let dir = scratch("profile-dir-env-wins");
    let bin = build_prog(&dir, "prog", PROGRAM, &["--tally-profile-dir=p/%p"]);
    let cwd = dir.join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    run_env(&bin, "ab", &cwd, &[("TALLY_PROFILE", "mine.tally")]);
    assert_eq!(entries(&cwd), vec![cwd.join("mine.tally")]);
    assert_eq!(entries(&dir.join("p")), Vec::<PathBuf>::new());
    run_env(&bin, "ab", &cwd, &[("TALLY_PROFILE", "off")]);
    assert_eq!(entries(&dir.join("p")), Vec::<PathBuf>::new());
    // An empty TALLY_PROFILE is unset, as before: the baked-in default.
    run_env(&bin, "ab", &cwd, &[("TALLY_PROFILE", "")]);
    let pids = entries(&dir.join("p"));
    assert_eq!(pids.len(), 1, "{pids:?}");
    let pid = pids[0].file_name().unwrap().to_str().unwrap();
    assert!(pid.parse::<u32>().is_ok(), "%p: {pid}");
    the_profile(&pids[0], "prog");
}

/// Trace modes take the baked-in directory too: `DIR/<program>.trace` (a trace is never merged),
/// next to the merged profile; TALLY_TRACE still wins.
#[test]
fn traces_go_to_the_baked_in_directory() {
    let dir = scratch("profile-dir-trace");
    let bin = build_prog(
        &dir,
        "prog",
        PROGRAM,
        &["--tally-mode=trace", "--tally-profile-dir=out"],
    );
    let cwd = dir.join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let o = run_env(&bin, "abc", &cwd, &[]);
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    assert_eq!(entries(&cwd), Vec::<PathBuf>::new(), "nothing in the cwd");
    let out = entries(&dir.join("out"));
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(out.contains(&dir.join("out/prog.trace")), "{out:?}");
    let profile = out
        .iter()
        .find(|p| p.extension().unwrap() == "tally")
        .unwrap();
    tally_ok(
        &dir,
        &[
            "trace",
            "out/prog.trace",
            "--profile",
            profile.to_str().unwrap(),
        ],
    );
    run_env(&bin, "abc", &cwd, &[("TALLY_TRACE", "t.trace")]);
    assert_eq!(entries(&cwd), vec![cwd.join("t.trace")]);
}

/// Images built with different directories: the executable's note wins; a plain executable
/// linking a tally-built library takes the library's.
#[test]
fn the_executables_directory_wins_over_a_librarys() {
    let dir = scratch("profile-dir-images");
    std::fs::write(
        dir.join("lib.c"),
        "int twice(int x) { return x > 0 ? 2 * x : 0; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("main.c"),
        "#include <stdio.h>\nint twice(int);\nint main(void) { printf(\"%d\\n\", twice(21)); return 0; }\n",
    )
    .unwrap();
    let tally_cc = |args: &[&str]| {
        let o = Command::new(tally())
            .arg("cc")
            .args(args)
            .current_dir(&dir)
            .env_remove("TALLY_MODE")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    tally_cc(&[
        "--tally-profile-dir=libdir",
        "-O1",
        "-shared",
        "-fPIC",
        "lib.c",
        "-o",
        "libtw.so",
    ]);
    let link = ["-O1", "main.c", "-L.", "-ltw", "-Wl,-rpath,$ORIGIN"];
    let o = Command::new("clang-19")
        .args(link)
        .args(["-o", "plain"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    tally_cc(
        &[
            &["--tally-profile-dir=exedir"][..],
            &link[..],
            &["-o", "inst"],
        ]
        .concat(),
    );
    let cwd = dir.join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    run_env(&dir.join("plain"), "", &cwd, &[]);
    the_profile(&dir.join("libdir"), "plain");
    run_env(&dir.join("inst"), "", &cwd, &[]);
    the_profile(&dir.join("exedir"), "inst");
    assert_eq!(entries(&dir.join("libdir")).len(), 1);
    assert_eq!(entries(&cwd), Vec::<PathBuf>::new());
}

/// A directory component that is a symbolic link someone else owns is not followed (the write
/// fails with one line); one the user or root owns is.
#[test]
fn planted_directory_links_are_not_followed() {
    if !root_or_skip(
        "planted_directory_links_are_not_followed",
        "make a link owned by another user",
    ) {
        return;
    }
    let dir = scratch("profile-dir-links");
    let bin = build_prog(&dir, "prog", PROGRAM, &["--tally-profile-dir=via/sub"]);
    let target = dir.join("target");
    std::fs::create_dir(&target).unwrap();
    std::os::unix::fs::symlink(&target, dir.join("via")).unwrap();
    std::os::unix::fs::lchown(dir.join("via"), Some(1), Some(1)).unwrap();
    let o = run_env(&bin, "x", &dir, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot write profile"), "{err}");
    assert_eq!(entries(&target), Vec::<PathBuf>::new());
    std::os::unix::fs::lchown(dir.join("via"), Some(0), Some(0)).unwrap();
    let o = run_env(&bin, "x", &dir, &[]);
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    the_profile(&target.join("sub"), "prog");
}

/// Forks; the child becomes uid 65534 and, as a shell or Python's subprocess does, tries to
/// exec argv[1] at two places (the first missing), then `_exit`s if both fail.
const FORKER: &str = r#"
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
    pid_t p = fork();
    if (p == 0) {
        if (setgid(65534) || setuid(65534))
            _exit(2);
        execl("/nonexistent/child", "child", (char *)0);
        execl(argv[1], "child", (char *)0);
        _exit(127);
    }
    int st;
    if (waitpid(p, &st, 0) != p)
        return 3;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 4;
}
"#;

/// (d) A child that changed its uid and cannot write its profile (the directory is root's)
/// says so once: not at each failed exec, the successful one and its `_exit`. The program it
/// execs is another process image with a profile of its own: one line for it.
#[test]
fn a_child_that_cannot_write_says_so_once() {
    if !root_or_skip("a_child_that_cannot_write_says_so_once", "change uid") {
        return;
    }
    // Under /tmp (world-traversable), not the checkout, which may sit in root's home.
    let dir = PathBuf::from(format!("/tmp/tally-profile-dir-uid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let forker = build_prog(&dir, "forker", FORKER, &[]);
    let child = build_prog(&dir, "child", PROGRAM, &[]);
    for (arg, status, lines) in [
        // Both execs fail, then _exit: one line.
        ("/nonexistent/again", 127, vec!["forker.tally"]),
        // The second exec works: one line for the forker's image, one for the child's.
        (
            child.to_str().unwrap(),
            0,
            vec!["forker.tally", "child.tally"],
        ),
    ] {
        let o = Command::new(&forker)
            .arg(arg)
            .current_dir(&dir)
            .env_remove("TALLY_PROFILE")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(status));
        let err = String::from_utf8_lossy(&o.stderr);
        let got: Vec<&str> = err.lines().collect();
        assert_eq!(got.len(), lines.len(), "{err}");
        for (l, name) in got.iter().zip(&lines) {
            assert!(
                l.starts_with("tally: cannot write profile") && l.contains(name),
                "{err}"
            );
        }
    }
    // The parent (root) wrote its own profile.
    assert!(dir.join("forker.tally").exists());
    // With the baked-in directory (root's, 0755): the same, one line.
    let forker = build_prog(
        &dir,
        "forker2",
        FORKER,
        &[&format!("--tally-profile-dir={}/prof", dir.display())],
    );
    let o = Command::new(&forker)
        .arg("/nonexistent/again")
        .current_dir(&dir)
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot write profile"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
