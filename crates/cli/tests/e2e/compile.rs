//! The compile step with clang options that change what it produces:
//! `-flto` is refused, a source on stdin is instrumented, `--coverage` leaves its gcov files
//! where clang leaves them.

use crate::support::*;
use std::path::Path;
use std::process::{Command, Output};

const PROG: &str = "#include <stdio.h>\nint f(int n) { int s = 0; for (int i = 0; i < n; i++) s += i % 3 ? i : 1; return s; }\nint main(int c, char **v) { printf(\"%d\\n\", f(10 * c)); return 0; }\n";

fn sh(dir: &Path, cmd: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env("TALLY", tally())
        .env_remove("TALLY_MODE")
        .env_remove("TALLY_PROFILE")
        .output()
        .unwrap()
}

fn ok(dir: &Path, cmd: &str) -> String {
    let o = sh(dir, cmd);
    assert!(
        o.status.success(),
        "`{cmd}` failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn lto_is_refused_with_one_line() {
    let dir = scratch("compile-lto");
    std::fs::write(dir.join("a.c"), PROG).unwrap();
    for cmd in [
        "$TALLY cc -O2 -flto a.c -o prog",
        "$TALLY cc -O2 -flto=thin -c a.c",
        "$TALLY cc -O2 -flto=full -S a.c",
        "$TALLY cc -fno-lto -flto a.c -o prog",
    ] {
        let o = sh(&dir, cmd);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "`{cmd}`: {err}");
        assert_eq!(err.lines().count(), 1, "`{cmd}`: {err}");
        assert!(
            err.contains(
                "is not supported: tally instruments each file's optimized IR before linking"
            ),
            "`{cmd}`: {err}"
        );
        assert!(err.contains("-flto"), "`{cmd}`: {err}");
    }
    assert!(!dir.join("prog").exists() && !dir.join("a.o").exists());
    // -fno-lto after it: an ordinary build.
    ok(&dir, "$TALLY cc -O2 -flto -fno-lto a.c -o prog");
    assert_eq!(ok(&dir, "./prog"), "31\n");
}

#[test]
fn a_source_on_stdin_is_instrumented() {
    let dir = scratch("compile-stdin");
    std::fs::write(dir.join("a.c"), PROG).unwrap();
    // Compile only: clang's name for the object is `-.o`.
    ok(&dir, "$TALLY cc -O2 -g -x c -c - < a.c");
    assert!(dir.join("-.o").exists());
    ok(&dir, "$TALLY cc -O2 -g -x c -c - -o s.o < a.c");
    ok(&dir, "$TALLY cc s.o -o prog1");
    // Compile and link in one step, as C++ too.
    ok(&dir, "$TALLY cc -O2 -g -x c - -o prog2 < a.c");
    ok(&dir, "$TALLY c++ -O2 -g -x c++ - -o prog3 < a.c");
    for p in ["prog1", "prog2", "prog3"] {
        let o = ok(&dir, &format!("TALLY_PROFILE={p}.tally ./{p}"));
        assert_eq!(o, "31\n");
        let r = report_json(&dir.join(format!("{p}.tally")));
        let fs = r["functions"].as_array().unwrap();
        assert!(
            fs.iter()
                .any(|f| f["name"] == "main" && f["entry_count"] == 1 && f["module"] == "<stdin>"),
            "{p}: {r}"
        );
    }
}

#[test]
fn coverage_notes_and_data_land_where_clang_puts_them() {
    let dir = scratch("compile-coverage");
    std::fs::write(dir.join("a.c"), PROG).unwrap();
    std::fs::create_dir_all(dir.join("obj")).unwrap();
    // Separate compile: next to the object.
    ok(&dir, "$TALLY cc -O2 --coverage -c a.c -o obj/a.o");
    assert!(dir.join("obj/a.gcno").exists());
    ok(&dir, "$TALLY cc --coverage obj/a.o -o prog");
    assert!(!dir.join("obj/a.gcda").exists());
    assert_eq!(ok(&dir, "./prog"), "31\n");
    assert!(dir.join("obj/a.gcda").exists());
    assert!(dir.join("prog.tally").exists());

    // -ftest-coverage -fprofile-arcs, default object name.
    ok(&dir, "$TALLY cc -O2 -ftest-coverage -fprofile-arcs -c a.c");
    assert!(dir.join("a.o").exists() && dir.join("a.gcno").exists());

    // Compile and link at once: `<output>-<source>`, as clang-19 names them.
    ok(&dir, "$TALLY cc -O2 --coverage a.c -o both");
    assert!(dir.join("both-a.gcno").exists());
    assert_eq!(ok(&dir, "./both"), "31\n");
    assert!(dir.join("both-a.gcda").exists());

    // The same names as clang's own build.
    ok(&dir, "clang-19 -O2 --coverage a.c -o plain && ./plain");
    assert!(dir.join("plain-a.gcno").exists() && dir.join("plain-a.gcda").exists());
}
