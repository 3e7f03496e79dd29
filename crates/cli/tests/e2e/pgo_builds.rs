//! The PGO loop (docs/pgo.md) through a project's own build system, as every other `tally cc`
//! option goes: `--tally-pgo` and then `--tally-use=PROFILE` in the C flags of a CMake
//! project configured with `tally links`'s `clang-19`, and of a Makefile built with
//! `CC="tally cc"`. Each rebuilt source says that every function of it with a profile matched
//! the profile by checksum, the rebuilt program prints what the trained one printed, and it is
//! not instrumented (it writes no profile).

use crate::support::*;
use std::path::Path;
use std::process::{Command, Output};

const LISTS: &str = r#"cmake_minimum_required(VERSION 3.13)
project(demo C)
add_executable(demo main.c work.c)
"#;

const MAKEFILE: &str = "demo: main.o work.o\n\t$(CC) $(CFLAGS) -o $@ main.o work.o\n\
                        %.o: %.c\n\t$(CC) $(CFLAGS) -c $< -o $@\n\
                        clean:\n\trm -f demo *.o\n";

const WORK: &str = r#"int classify(int x) {
    if (x % 10 == 0)
        return 2;
    if (x & 1)
        return 1;
    return 0;
}
"#;

const MAIN: &str = r#"#include <stdio.h>
#include <stdlib.h>
int classify(int x);
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    long c[3] = {0, 0, 0};
    for (int i = 0; i < n; i++)
        c[classify(i)]++;
    printf("%d %ld %ld %ld\n", n, c[0], c[1], c[2]);
    return 0;
}
"#;

fn ok(what: &str, cmd: &mut Command) -> String {
    let o: Output = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e} (scripts/setup.sh installs cmake and make)"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{what}:\n{text}");
    text
}

/// Runs `exe 1000` with `TALLY_PROFILE=profile`: what it printed, and whether it wrote the
/// profile.
fn run_demo(exe: &Path, profile: &Path) -> (String, bool) {
    let _ = std::fs::remove_file(profile);
    let out = ok(
        "demo",
        Command::new(exe).arg("1000").env("TALLY_PROFILE", profile),
    );
    (out, profile.exists())
}

/// The build's `--tally-use` lines: one per compiled source, each saying all its functions
/// with a profile matched.
fn assert_all_matched(what: &str, log: &str) {
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("tally: --tally-use: "))
        .collect();
    assert_eq!(lines.len(), 2, "{what}: one line per source:\n{log}");
    for l in lines {
        let words: Vec<&str> = l.split_whitespace().collect();
        // "tally: --tally-use: N of M functions with a profile matched it by checksum, 0 did not"
        let (n, m) = (words[2], words[4]);
        assert!(
            n == m && n != "0" && l.contains(", 0 did not"),
            "{what}: {l}"
        );
    }
}

fn write_project(src: &Path) {
    std::fs::create_dir_all(src).unwrap();
    for (name, text) in [
        ("CMakeLists.txt", LISTS),
        ("Makefile", MAKEFILE),
        ("main.c", MAIN),
        ("work.c", WORK),
    ] {
        std::fs::write(src.join(name), text).unwrap();
    }
}

#[test]
fn the_pgo_loop_runs_through_cmake() {
    let dir = scratch("pgo-cmake");
    let src = dir.join("src");
    write_project(&src);
    let bin = dir.join("bin");
    ok("tally links", Command::new(tally()).arg("links").arg(&bin));
    let configure = |build: &str, flags: String| {
        ok(
            "cmake",
            Command::new("cmake")
                .arg("-S")
                .arg(&src)
                .arg("-B")
                .arg(dir.join(build))
                .arg("-DCMAKE_BUILD_TYPE=None")
                .arg(format!("-DCMAKE_C_FLAGS={flags}"))
                .env("CC", bin.join("clang-19")),
        );
        ok(
            "cmake --build",
            Command::new("cmake").arg("--build").arg(dir.join(build)),
        )
    };
    configure("train", "--tally-pgo -O2".into());
    let prof = dir.join("train.tally");
    let (trained, wrote) = run_demo(&dir.join("train/demo"), &prof);
    assert_eq!(trained, "1000 400 500 100\n");
    assert!(wrote, "the training build wrote no profile");
    let log = configure("fast", format!("--tally-use={} -O2", prof.display()));
    assert_all_matched("cmake", &log);
    let (out, wrote) = run_demo(&dir.join("fast/demo"), &dir.join("fast.tally"));
    assert_eq!(out, trained);
    assert!(!wrote, "the rebuild is instrumented");
}

#[test]
fn the_pgo_loop_runs_through_make() {
    let dir = scratch("pgo-make");
    write_project(&dir);
    let make = |flags: String| {
        ok(
            "make clean",
            Command::new("make").arg("clean").current_dir(&dir),
        );
        ok(
            "make",
            Command::new("make")
                .arg(format!("CC={} cc", tally().display()))
                .arg(format!("CFLAGS={flags}"))
                .current_dir(&dir),
        )
    };
    make("--tally-pgo -O2".into());
    let prof = dir.join("train.tally");
    let (trained, wrote) = run_demo(&dir.join("demo"), &prof);
    assert_eq!(trained, "1000 400 500 100\n");
    assert!(wrote, "the training build wrote no profile");
    let log = make(format!("--tally-use={} -O2", prof.display()));
    assert_all_matched("make", &log);
    let (out, wrote) = run_demo(&dir.join("demo"), &dir.join("fast.tally"));
    assert_eq!(out, trained);
    assert!(!wrote, "the rebuild is instrumented");
}
