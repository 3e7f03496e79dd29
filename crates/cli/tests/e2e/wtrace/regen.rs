//! Regeneration against trace-naive, block for block: the test programs, exceptions, callbacks,
//! threads, forks, the codes of `Enter` and varints, `tally trace`, path numbers.

use super::*;

/// The programs of [`early_and_shapes`], C++ exceptions included (`exceptions.cpp`,
/// `mixed.cpp`): every one regenerates exactly.
#[test]
fn regenerated_block_sequences_equal_trace_naive() {
    let mut exact = 0;
    for (file, status) in &early_and_shapes() {
        for opt in ["-O0", "-O2"] {
            let name = format!("{}{opt}", file.file_name().unwrap().to_str().unwrap());
            let cxx = file.extension().is_some_and(|e| e == "cpp");
            let o = run_both(&name, cxx, &single(file, opt), *status);
            eprintln!(
                "{name}: {} blocks; trace {} bytes, trace-naive {} bytes ({:.4}x)",
                o.oracle.len(),
                o.trace_bytes,
                o.naive_bytes,
                o.trace_bytes as f64 / o.naive_bytes as f64
            );
            assert!(o.stopped.is_empty(), "{name}: stopped: {:?}", o.stopped);
            assert!(
                o.regenerated == o.oracle,
                "{name}: {}",
                first_difference(&o.regenerated, &o.oracle)
            );
            // At -O2 latch.ll folds to a constant (one block).
            if !name.starts_with("latch.ll-O2") {
                assert!(o.oracle.len() > 10, "{name}: too little compared");
            }
            exact += 1;
        }
    }
    assert_eq!(exact, 2 * early_and_shapes().len());
}

/// C++ exceptions (`testdata/wtrace/throws.cpp`): throws through several traced frames with
/// and without destructors (cleanup landing pads that `resume`), catches at different
/// depths, a rethrow, a translation in a catch block, `catch (...)` in a loop: every landing
/// pad writes `Unwind` (activations abandoned, block) and regeneration follows it exactly.
#[test]
fn exceptions_regenerate_exactly() {
    let src = repo().join("testdata/wtrace/throws.cpp");
    for opt in ["-O0", "-O2"] {
        let name = format!("throws{opt}");
        let o = exact_lang(&name, true, &single(&src, opt), 0);
        assert!(o.oracle.len() > 1000, "{name}: too little compared");
    }
}

#[test]
fn callbacks_and_pointers_regenerate_exactly() {
    let dir = scratch("wtrace-callbacks-src");
    let src = dir.join("callbacks.c");
    std::fs::write(&src, CALLBACKS).unwrap();
    for opt in ["-O0", "-O2"] {
        let name = format!("callbacks{opt}");
        let o = exact(&name, &single(&src, opt), 0);
        assert!(o.oracle.len() > 1000, "{name}: too little compared");
    }
}

/// Four threads at once (one stream each): the blocks regenerated over all threads, counted,
/// equal trace-naive's (whose records interleave the threads, so only counts compare).
#[test]
fn threads_regenerate_to_the_oracle_block_counts() {
    let src = repo().join("testdata/threads/workers.c");
    let args = vec![
        "-O2".into(),
        "-g".into(),
        "-pthread".into(),
        src.display().to_string(),
    ];
    let o = run_both("workers", false, &args, 0);
    assert!(o.stopped.is_empty(), "{:?}", o.stopped);
    let count = |v: &[(String, u32)]| {
        let mut m = std::collections::BTreeMap::new();
        for b in v {
            *m.entry(b.clone()).or_insert(0u64) += 1;
        }
        m
    };
    assert!(o.threads >= 5, "{} streams", o.threads);
    assert_eq!(count(&o.regenerated), count(&o.oracle));
    eprintln!(
        "workers: {} blocks in {} threads; trace {} bytes, trace-naive {} bytes",
        o.oracle.len(),
        o.threads,
        o.trace_bytes,
        o.naive_bytes
    );
}

/// A parent that forks three children while its accumulator holds a part-filled word (one
/// child returns through `exit`, which runs tally's exit handler in the child, the others
/// through `_exit`); each child runs enough traced code to fill words and spill, and must write
/// nothing. The parent's trace crosses a buffer flush (more than 4 KiB) and regenerates block
/// for block as trace-naive's, in one stream.
const FORKS: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static unsigned work(unsigned s, int n) {
    for (int i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        if (s & 0x100)
            s ^= s >> 3;
        else if (s & 0x200)
            s += 7;
    }
    return s;
}
int main(int argc, char **argv) {
    (void)argv;
    unsigned s = work(1, 20000 + argc);
    fflush(stdout);
    for (int k = 0; k < 3; k++) {
        pid_t p = fork();
        if (p == 0) {
            unsigned c = work(s + k, 5000);
            if (k == 1)
                exit(c & 1 ? 3 : 4);
            _exit(c & 1 ? 3 : 4);
        }
        int st = 0;
        waitpid(p, &st, 0);
        s = work(s ^ (unsigned)WEXITSTATUS(st), 300 + k);
    }
    printf("%u\n", s);
    return 0;
}
"#;

#[test]
fn fork_children_write_nothing_and_the_parent_regenerates_exactly() {
    let dir = scratch("wtrace-forks-src");
    let src = dir.join("forks.c");
    std::fs::write(&src, FORKS).unwrap();
    for opt in ["-O0", "-O2"] {
        let name = format!("forks{opt}");
        let o = exact(&name, &single(&src, opt), 0);
        assert_eq!(o.threads, 1, "{name}: a fork child wrote a stream");
        assert!(o.trace_bytes > 4096, "{name}: {} bytes", o.trace_bytes);
    }
}

/// 300 functions called through a table of pointers: every call writes an `Enter` whose
/// function index needs a two-group varint (the runtime packs a varint at once), and the
/// witnesses of the callees' branches land at every position of the accumulator's word.
#[test]
fn long_varints_regenerate_exactly() {
    let dir = scratch("wtrace-varints-src");
    let src = dir.join("many.c");
    let mut c = String::from("#include <stdio.h>\n");
    for i in 0..300 {
        c.push_str(&format!(
            "int f{i}(int x) {{ return x % {m} == 0 ? x / 2 + {i} : x * 3 - {i}; }}\n",
            m = i % 7 + 2
        ));
    }
    c.push_str("int (*tab[300])(int) = {");
    c.push_str(
        &(0..300)
            .map(|i| format!("f{i}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    c.push_str(
        "};\nint main(int argc, char **argv) {\n    (void)argv;\n    long s = argc;\n    \
         for (int i = 0; i < 3000; i++)\n        s += tab[(i * 7 + (int)(s & 3)) % 300]((int)(s & 0xffff) + i);\n    \
         printf(\"%ld\\n\", s);\n    return 0;\n}\n",
    );
    std::fs::write(&src, c).unwrap();
    let o = exact("varints", &single(&src, "-O2"), 0);
    assert!(o.oracle.len() > 6000, "too little compared");
}

/// Calls through pointers write `Enter` coded against the stream's history (trace format 5):
/// one callee again and again (the predicted code, 3 bits), a few alternating with the data
/// (recent positions) and 40 at random (more than the 16 recent ones: full records) all
/// regenerate block for block as `trace-naive` has them, and the `Enter` records average under
/// 8 bits (in full, each took at least 19: kind, slot and index). Predicted callees take the
/// inline entry's predicted `Enter` (`tally.wtrace.enter.again`: the runtime's `again` mark,
/// then the prediction table); the test fails when the runtime marks a function without
/// checking that it predicts itself, and when the inline path does not set `e_prev`.
#[test]
fn enter_codes_regenerate_exactly_and_repeats_are_short() {
    let dir = scratch("wtrace-enters-src");
    let src = dir.join("enters.c");
    let mut c = String::from("#include <stdio.h>\n");
    for i in 0..40 {
        c.push_str(&format!(
            "int g{i}(int x) {{ return x & {b} ? x + {i} : x - {i}; }}\n",
            b = 1 << (i % 5)
        ));
    }
    c.push_str("int (*tab[40])(int) = {");
    c.push_str(
        &(0..40)
            .map(|i| format!("g{i}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    c.push_str(
        "};\nint main(int argc, char **argv) {\n    (void)argv;\n    unsigned s = (unsigned)argc;\n    \
         for (int i = 0; i < 30000; i++) {\n        s = s * 1103515245u + 12345u;\n        \
         int k = i < 20000 ? 0 : i < 25000 ? (int)(s >> 16) % 3 + 1 : (int)(s >> 16) % 40;\n        \
         s += (unsigned)tab[k]((int)(s >> 8));\n    }\n    printf(\"%u\\n\", s);\n    return 0;\n}\n",
    );
    std::fs::write(&src, c).unwrap();
    let o = exact("enters", &single(&src, "-O2"), 0);
    assert!(o.oracle.len() > 60_000, "too little compared");
    let prof = tally_format::profile::Profile::read_file(o.dir.join("trace/prog.tally")).unwrap();
    let bytes = std::fs::read(o.dir.join("trace/prog.trace")).unwrap();
    let st = tally_report::trace::stats::stats(&bytes, &prof, 0).unwrap();
    let enter = st
        .kinds
        .iter()
        .find(|k| k.kind == "Enter")
        .expect("Enter records");
    eprintln!("Enter: {} records, {} bits", enter.records, enter.bits);
    assert!(enter.records >= 30_000, "{enter:?}");
    assert!(enter.bits < 8 * enter.records, "{enter:?}");
}

#[test]
fn tally_trace_command() {
    let src = repo().join("testdata/early/recursion.c");
    let o = run_both("cli", false, &single(&src, "-O1"), 4);
    let dir = o.dir.join("trace");
    let run = |args: &[&str]| {
        std::process::Command::new(tally())
            .arg("trace")
            .arg(dir.join("prog.trace"))
            .args(args)
            .output()
            .unwrap()
    };
    let text = run(&["--limit", "5"]);
    assert_eq!(text.status.code(), Some(0));
    let text = String::from_utf8(text.stdout).unwrap();
    assert_eq!(text.lines().count(), 6, "{text}");
    assert!(text.lines().nth(1).unwrap().contains("main"), "{text}");
    assert!(text.contains("recursion.c:"), "{text}");
    let json = run(&[
        "--format",
        "json",
        "--function",
        "^main$",
        "--from",
        "1",
        "--limit",
        "3",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    // Regeneration stopped at the third block shown: the total is not known.
    assert!(v["total_blocks"].is_null(), "{v}");
    let all = run(&["--format", "json", "--function", "^main$"]);
    let all: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    assert_eq!(all["total_blocks"].as_u64(), Some(o.oracle.len() as u64));
    let blocks = v["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 3);
    assert!(blocks.iter().all(|b| b["function"] == "main"));
    let mains: Vec<u32> = o
        .oracle
        .iter()
        .filter(|b| b.0 == "main")
        .map(|b| b.1)
        .collect();
    let shown: Vec<u32> = blocks
        .iter()
        .map(|b| b["block"].as_u64().unwrap() as u32)
        .collect();
    assert_eq!(shown, mains[1..4]);
    cli_equals_render(&dir);
    let bad = std::process::Command::new(tally())
        .args(["trace", "--profile"])
        .arg(dir.join("prog.tally"))
        .arg(dir.join("prog.tally"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8(bad.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a tally trace"), "{err}");
    // A trace of format 4 (full `Enter` records only) is refused in one line, not misread.
    let mut old = std::fs::read(dir.join("prog.trace")).unwrap();
    old[8] = 4;
    let old_path = dir.join("old.trace");
    std::fs::write(&old_path, old).unwrap();
    let bad = std::process::Command::new(tally())
        .args(["trace", "--profile"])
        .arg(dir.join("prog.tally"))
        .arg(&old_path)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8(bad.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("version 4 is not supported"), "{err}");
    // --stats: the bits by record kind add up to the file, the blocks to the oracle's.
    let stats = run(&["--stats", "--format", "json"]);
    assert_eq!(stats.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(v["blocks"].as_u64(), Some(o.oracle.len() as u64));
    let kinds = v["kinds"].as_array().unwrap();
    let sum: u64 = kinds.iter().map(|k| k["bits"].as_u64().unwrap()).sum();
    assert_eq!(sum, v["file_bits"].as_u64().unwrap());
    assert!(kinds.iter().any(|k| k["kind"] == "Enter"), "{v}");
    assert!(v["branches"].as_u64().unwrap() > 0, "{v}");
}

/// `--tally-trace=bits`: every function takes the one-bit-per-branch plan (§6.2's bit
/// tracing), which regenerates as exactly; its size is printed next to the default's.
#[test]
fn bit_tracing_regenerates_exactly() {
    for file in ["testdata/shapes/shapes.c", "testdata/early/longjmp.c"] {
        let src = repo().join(file);
        let base = src.file_name().unwrap().to_str().unwrap().to_string();
        let default = run_both(&format!("{base}-witness"), false, &single(&src, "-O2"), 0);
        let bits = run_both_with(
            &format!("{base}-bits"),
            false,
            &single(&src, "-O2"),
            Some(0),
            &["--tally-trace=bits"],
            &[],
        );
        assert!(bits.stopped.is_empty(), "{base}: {:?}", bits.stopped);
        assert!(
            bits.regenerated == bits.oracle,
            "{base}: {}",
            first_difference(&bits.regenerated, &bits.oracle)
        );
        assert!(
            bits.branch_plans > 0,
            "{base}: no function took the branch plan"
        );
        eprintln!(
            "{base} -O2: {} blocks; trace (cheaper plan, {} of the functions on the branch plan) {} bytes, --tally-trace=bits {} bytes, trace-naive {} bytes",
            bits.oracle.len(),
            default.branch_plans,
            default.trace_bytes,
            bits.trace_bytes,
            bits.naive_bytes
        );
    }
}

/// `--tally-trace=paths` (path numbers written where each Ball-Larus path ends, paths cut
/// before calls; `tally_graph::witness::paths`): every early-exit program and the shapes at
/// -O0 and -O2 (C++ exceptions included: functions with landing pads or `setjmp` keep the
/// witness plan), the callbacks program and four threads
/// regenerate block for block as `trace-naive`, and many functions take the path plan; the
/// -O2 builds, the callbacks and the threads also with `--tally-trace-registers=on` (the
/// accumulator, the path register and the width of the current path's head in registers).
#[test]
fn path_numbers_regenerate_exactly() {
    let (mut functions, mut exact) = (0, 0);
    let mut check = |name: &str, cxx: bool, args: &[String], status: i32, threads: bool| {
        let regs = name.ends_with("-regs");
        let mut flags = vec!["--tally-trace=paths"];
        if regs {
            flags.push("--tally-trace-registers=on");
        }
        let o = run_both_with(
            &format!("{name}-paths"),
            cxx,
            args,
            Some(status),
            &flags,
            &[],
        );
        assert!(o.stopped.is_empty(), "{name}: stopped: {:?}", o.stopped);
        let (mut a, mut b) = (o.regenerated.clone(), o.oracle.clone());
        if threads {
            assert!(o.threads >= 5, "{name}: {} streams", o.threads);
            a.sort();
            b.sort();
        }
        assert!(a == b, "{name}: {}", first_difference(&a, &b));
        eprintln!(
            "{name}: {} blocks, {} functions on path numbers; trace {} bytes (range-coded {}), trace-naive {} bytes",
            o.oracle.len(),
            o.paths_plans,
            o.trace_bytes,
            o.coded_bytes,
            o.naive_bytes
        );
        functions += o.paths_plans;
        exact += 1;
    };
    for (file, status) in &early_and_shapes() {
        for opt in ["-O0", "-O2", "-O2-regs"] {
            let name = format!("{}{opt}", file.file_name().unwrap().to_str().unwrap());
            let cxx = file.extension().is_some_and(|e| e == "cpp");
            check(&name, cxx, &single(file, &opt[..3]), *status, false);
        }
    }
    let dir = scratch("wtrace-callbacks-paths-src");
    let src = dir.join("callbacks.c");
    std::fs::write(&src, CALLBACKS).unwrap();
    check("callbacks", false, &single(&src, "-O2"), 0, false);
    check("callbacks-regs", false, &single(&src, "-O2"), 0, false);
    let workers = repo().join("testdata/threads/workers.c");
    let args = vec![
        "-O2".into(),
        "-g".into(),
        "-pthread".into(),
        workers.display().to_string(),
    ];
    check("workers", false, &args, 0, true);
    check("workers-regs", false, &args, 0, true);
    assert_eq!(exact, 3 * early_and_shapes().len() + 4);
    assert!(
        functions >= 20,
        "only {functions} functions on path numbers"
    );
}

/// `--tally-trace=paths` on Lua (a small script: hundreds of functions, calls through
/// pointers, longjmp-based errors) and SQLite (the driver's smallest workload): block for
/// block as `trace-naive`. Then the witness plans with `--tally-trace-registers=on` (each
/// function's word in a register, the checks of room shared by the appends up to the next
/// check) against the same oracle: the same run, so the same block sequence.
#[test]
fn path_numbers_and_registers_regenerate_exactly_on_lua_and_sqlite() {
    let script = repo().join("testdata/lua/small.lua");
    for (name, args, run_args) in [
        ("lua", lua_args(&["-O2"]), vec![script.to_str().unwrap()]),
        ("sqlite", sqlite_args(&[]), vec!["1"]),
    ] {
        // The three builds at once; `run_both_with` and the registers build below copy them.
        let traced = |flag: &str| -> Vec<String> {
            std::iter::once(flag.to_string())
                .chain(args.iter().cloned())
                .collect()
        };
        prebuild_each(
            &[
                (Variant::Tally("trace"), traced("--tally-trace=paths")),
                (Variant::Tally("trace-naive"), args.clone()),
                (
                    Variant::Tally("trace"),
                    traced("--tally-trace-registers=on"),
                ),
            ],
            false,
        );
        let o = run_both_with(
            &format!("{name}-paths"),
            false,
            &args,
            Some(0),
            &["--tally-trace=paths"],
            &run_args,
        );
        assert!(o.stopped.is_empty(), "{name}: stopped: {:?}", o.stopped);
        assert!(
            o.regenerated == o.oracle,
            "{name}: {}",
            first_difference(&o.regenerated, &o.oracle)
        );
        assert!(o.paths_plans >= 100, "{name}: {} functions", o.paths_plans);
        eprintln!(
            "{name}: {} blocks, {} functions on path numbers; trace {} bytes, trace-naive {} bytes",
            o.oracle.len(),
            o.paths_plans,
            o.trace_bytes,
            o.naive_bytes
        );
        let dir = scratch(&format!("wtrace-{name}-registers"));
        let vdir = dir.join("trace");
        std::fs::create_dir_all(&vdir).unwrap();
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        a.insert(0, "--tally-trace-registers=on");
        build(Variant::Tally("trace"), false, &a, &vdir.join("prog"), &dir);
        let out = prog_in(&vdir, &run_args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{name} registers");
        let prof = tally_format::profile::Profile::read_file(vdir.join("prog.tally")).unwrap();
        let bytes = std::fs::read(vdir.join("prog.trace")).unwrap();
        let r = tally_report::trace::regenerate(&bytes, &prof)
            .unwrap_or_else(|e| panic!("{name} registers: {e}"));
        assert!(r.stopped.is_empty(), "{name} registers: {:?}", r.stopped);
        let regenerated: Vec<(String, u32)> = r
            .blocks
            .iter()
            .map(|b| (b.function.clone(), b.block))
            .collect();
        assert!(
            regenerated == o.oracle,
            "{name} registers: {}",
            first_difference(&regenerated, &o.oracle)
        );
    }
}
