//! Witness tracing (`--tally-mode=trace`, Ball & Larus 1994 §4) against its oracle: the same
//! program built in `trace-naive` mode (every edge taken, per activation) and run on the same
//! input. The block sequence `tally trace` regenerates from the witnesses must equal trace-naive's,
//! block for block, `longjmp` and C++ exceptions included.
//! `tally report --trace` must give the block and edge counts of the `edges-naive` oracle.

mod support;
use std::path::{Path, PathBuf};
use support::*;

/// `(function, block)` of each block, in order.
type Seq = Vec<(String, u32)>;

struct Outcome {
    /// `(function, block)` of every regenerated block.
    regenerated: Vec<(String, u32)>,
    /// Why regeneration stopped early, if it did.
    stopped: Vec<String>,
    oracle: Vec<(String, u32)>,
    trace_bytes: u64,
    /// The same run's trace range-coded (`TALLY_TRACE_COMPRESS=1`, [`check_coded`]).
    coded_bytes: u64,
    naive_bytes: u64,
    /// Streams in the trace.
    threads: usize,
    /// Functions traced with the one-bit-per-branch plan.
    branch_plans: usize,
    /// Functions traced by path numbers (`--tally-trace=paths`).
    paths_plans: usize,
    /// The scratch directory (`trace/` and `trace-naive/` builds and their files).
    dir: PathBuf,
}

/// A program to build in two modes and run on the same input.
struct Run<'a> {
    name: &'a str,
    cxx: bool,
    args: &'a [String],
    /// Exit status of both runs (`None`: death by signal).
    status: Option<i32>,
    /// Added to the `trace` build's arguments.
    trace_flags: &'a [&'a str],
    run_args: &'a [&'a str],
}

impl Run<'_> {
    /// Builds the program in `modes` under `dir/MODE/prog` and runs each there (profile
    /// `prog.tally`, trace `prog.trace`); both must exit with `status` and print the same.
    fn build_and_run(&self, dir: &Path, modes: [&'static str; 2]) {
        let name = self.name;
        let mut outs = Vec::new();
        for mode in modes {
            let vdir = dir.join(mode);
            std::fs::create_dir_all(&vdir).unwrap();
            let mut a: Vec<&str> = self.args.iter().map(String::as_str).collect();
            if mode == "trace" {
                a.splice(0..0, self.trace_flags.iter().copied());
            }
            build(Variant::Tally(mode), self.cxx, &a, &vdir.join("prog"), dir);
            let out = prog_in(&vdir, self.run_args).output().unwrap();
            assert_eq!(out.status.code(), self.status, "{name} {mode}");
            outs.push(out.stdout);
        }
        assert_eq!(outs[0], outs[1], "{name}: outputs differ");
        let coded = run_coded(&dir.join("trace"), self.run_args);
        assert_eq!(coded.status.code(), self.status, "{name} coded");
        assert_eq!(coded.stdout, outs[0], "{name}: coded run's output differs");
    }
}

/// `vdir/prog` with `args`, run in `vdir`, its profile `prog.tally` and its trace `prog.trace`
/// there, neither range-coded nor a flight recorder.
fn prog_in(vdir: &Path, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new("./prog");
    c.args(args)
        .current_dir(vdir)
        .env("TALLY_PROFILE", vdir.join("prog.tally"))
        .env("TALLY_TRACE", vdir.join("prog.trace"))
        .env_remove("TALLY_TRACE_COMPRESS")
        .env_remove("TALLY_TRACE_RING");
    c
}

/// Runs `vdir/prog` again with `TALLY_TRACE_COMPRESS=1`: its trace goes to `prog.ctrace`
/// (range-coded, trace format 6), its profile to `prog.ctally`.
fn run_coded(vdir: &Path, run_args: &[&str]) -> std::process::Output {
    std::process::Command::new("./prog")
        .args(run_args)
        .current_dir(vdir)
        .env("TALLY_PROFILE", vdir.join("prog.ctally"))
        .env("TALLY_TRACE", vdir.join("prog.ctrace"))
        .env("TALLY_TRACE_COMPRESS", "1")
        .env_remove("TALLY_TRACE_RING")
        .output()
        .unwrap()
}

/// The coded trace `dir/trace/prog.ctrace` of the same run as `prog.trace` (see [`run_coded`])
/// is a format-8 file, its streams unpack from the default file's words (format 9) bit for bit
/// when one thread ran, and it regenerates to the same blocks as the raw one: in the same order per
/// thread, so the same sequence for one thread and the same counts for several (threads are
/// numbered in the order they first write, which may differ between runs). Returns its size.
fn check_coded(name: &str, dir: &Path, raw: &tally_report::trace::Regenerated) -> u64 {
    let bytes = std::fs::read(dir.join("trace/prog.ctrace")).unwrap();
    assert_eq!(
        &bytes[8..12],
        &tally_format::trace::WTRACE_VERSION_CODED.to_le_bytes(),
        "{name}: not a coded trace"
    );
    let prof = tally_format::profile::Profile::read_file(dir.join("trace/prog.ctally")).unwrap();
    let r = tally_report::trace::regenerate(&bytes, &prof)
        .unwrap_or_else(|e| panic!("{name} coded: {e}"));
    let seq = |r: &tally_report::trace::Regenerated| -> Vec<(String, u32)> {
        r.blocks
            .iter()
            .map(|b| (b.function.clone(), b.block))
            .collect()
    };
    let stopped = |r: &tally_report::trace::Regenerated| -> Vec<String> {
        r.stopped.iter().map(|s| s.1.clone()).collect()
    };
    assert_eq!(
        stopped(&r),
        stopped(raw),
        "{name}: coded regeneration stopped differently"
    );
    let (mut a, mut b) = (seq(&r), seq(raw));
    let coded = tally_format::trace::read_witness_trace(&bytes).unwrap();
    // The default file is a stream of words (format 9), unpacked by the reader: for one thread
    // its stream is bit for bit the one the range coder packed (the same run, deterministic).
    let words = tally_format::trace::read_witness_trace(
        &std::fs::read(dir.join("trace/prog.trace")).unwrap(),
    )
    .unwrap();
    assert!(coded.coded && words.words, "{name}: formats 8 and 9");
    if coded.threads.len() == 1 && words.threads.len() == 1 {
        assert!(
            coded.threads[0].1 == words.threads[0].1,
            "{name}: the words unpack to other bits ({} bytes) than the coded stream ({} bytes)",
            words.threads[0].1.len(),
            coded.threads[0].1.len()
        );
    }
    if coded.threads.len() > 1 {
        a.sort();
        b.sort();
    }
    assert!(a == b, "{name}: coded trace: {}", first_difference(&a, &b));
    bytes.len() as u64
}

/// Builds `args` in trace and trace-naive mode, runs both, regenerates and reads the oracle.
fn run_both(name: &str, cxx: bool, args: &[String], status: i32) -> Outcome {
    run_both_with(name, cxx, args, Some(status), &[], &[])
}

/// [`run_both`] with `trace_flags` added to the trace build's arguments, the programs run
/// with `run_args`, and `status` `None` for a death by signal.
fn run_both_with(
    name: &str,
    cxx: bool,
    args: &[String],
    status: Option<i32>,
    trace_flags: &[&str],
    run_args: &[&str],
) -> Outcome {
    let dir = scratch(&format!("wtrace-{name}"));
    let run = Run {
        name,
        cxx,
        args,
        status,
        trace_flags,
        run_args,
    };
    run.build_and_run(&dir, ["trace", "trace-naive"]);
    outcome(name, dir)
}

/// Regenerates `dir/trace/prog.trace` and reads the oracle `dir/trace-naive/prog.trace`, each
/// with its `prog.tally`.
fn outcome(name: &str, dir: PathBuf) -> Outcome {
    let prof = tally_format::profile::Profile::read_file(dir.join("trace/prog.tally")).unwrap();
    let branch_plans = prof
        .modules
        .iter()
        .flat_map(|m| &m.meta.functions)
        .filter(|f| f.wtrace().is_some_and(|w| w.branch))
        .count();
    let paths_plans = prof
        .modules
        .iter()
        .flat_map(|m| &m.meta.functions)
        .filter(|f| f.wtrace().is_some_and(|w| w.paths.is_some()))
        .count();
    let bytes = std::fs::read(dir.join("trace/prog.trace")).unwrap();
    let r =
        tally_report::trace::regenerate(&bytes, &prof).unwrap_or_else(|e| panic!("{name}: {e}"));
    let coded_bytes = check_coded(name, &dir, &r);
    let naive_prof =
        tally_format::profile::Profile::read_file(dir.join("trace-naive/prog.tally")).unwrap();
    let naive_bytes = std::fs::read(dir.join("trace-naive/prog.trace")).unwrap();
    let naive = tally_format::trace::read_trace(&naive_bytes).unwrap();
    let oracle = tally_report::trace_naive::block_sequence(&naive, &naive_prof).unwrap();
    let (regenerated, oracle) = handlers_apart(&r, oracle);
    Outcome {
        regenerated,
        stopped: r.stopped.iter().map(|s| s.1.clone()).collect(),
        oracle,
        trace_bytes: bytes.len() as u64,
        coded_bytes,
        naive_bytes: naive_bytes.len() as u64,
        threads: tally_format::trace::read_witness_trace(&bytes)
            .unwrap()
            .threads
            .len(),
        dir,
        branch_plans,
        paths_plans,
    }
}

/// The regenerated sequence and trace-naive's, comparable when signal handlers interrupted
/// traced code: such a handler's activation is a stream of its own in the witness trace
/// ("Signal handlers in witness traces") but inline in trace-naive's. So the regenerated
/// sequence becomes the other streams' blocks, then each handler stream's in the order
/// written, and the oracle its blocks without the handler activations (each from a handler's
/// entry for as long as the blocks are of functions the handler streams run), then those
/// activations in order. Without signal streams both stay as they are.
fn handlers_apart(r: &tally_report::trace::Regenerated, oracle: Vec<(String, u32)>) -> (Seq, Seq) {
    let seq = |t: Option<u32>| -> Vec<(String, u32)> {
        r.blocks
            .iter()
            .filter(|b| t.is_none_or(|t| b.thread == t))
            .map(|b| (b.function.clone(), b.block))
            .collect()
    };
    if r.signals.is_empty() {
        return (seq(None), oracle);
    }
    let handler_streams: std::collections::HashSet<u32> =
        r.signals.iter().map(|h| h.stream).collect();
    let mut regenerated: Vec<(String, u32)> = r
        .blocks
        .iter()
        .filter(|b| !handler_streams.contains(&b.thread))
        .map(|b| (b.function.clone(), b.block))
        .collect();
    let mut entries = std::collections::HashSet::new();
    let mut funcs = std::collections::HashSet::new();
    for h in &r.signals {
        let s = seq(Some(h.stream));
        if let Some(first) = s.first() {
            entries.insert(first.clone());
        }
        funcs.extend(s.iter().map(|b| b.0.clone()));
        regenerated.extend(s);
    }
    let (mut rest, mut acts) = (Vec::new(), Vec::new());
    let mut inside = false;
    for b in oracle {
        if entries.contains(&b) {
            inside = true;
        } else if !funcs.contains(&b.0) {
            inside = false;
        }
        if inside {
            acts.push(b);
        } else {
            rest.push(b);
        }
    }
    rest.extend(acts);
    (regenerated, rest)
}

fn first_difference(a: &[(String, u32)], b: &[(String, u32)]) -> String {
    let i = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    format!(
        "first difference at block {i} of {} / {}: regenerated {:?}, oracle {:?}",
        a.len(),
        b.len(),
        a.get(i.saturating_sub(2)..(i + 3).min(a.len())),
        b.get(i.saturating_sub(2)..(i + 3).min(b.len()))
    )
}

fn single(file: &Path, opt: &str) -> Vec<String> {
    vec![opt.into(), "-g".into(), file.display().to_string()]
}

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

/// Calls through pointers, `qsort` calling back into traced code, a callback table, recursion
/// through a pointer and a switch: every `Enter`/`Back` case of the stream model.
const CALLBACKS: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}
static int cmp_rev(const void *a, const void *b) { return cmp_int(b, a); }
static int twice(int x) { return 2 * x; }
static int inc(int x) { return x + 1; }
static int rec(int (*f)(int), int n) { return n <= 0 ? 0 : f(n) + rec(f, n - 1); }
int apply(int (*f)(int), int x) { return f(x); }
int main(int argc, char **argv) {
    int a[200];
    unsigned s = 7;
    for (int i = 0; i < 200; i++) { s = s * 1103515245u + 12345u; a[i] = (int)(s >> 8) % 1000; }
    qsort(a, 200, sizeof a[0], argc > 5 ? cmp_rev : cmp_int);
    int (*fs[3])(int) = {twice, inc, abs};
    long t = 0;
    for (int i = 0; i < 200; i++) {
        switch (a[i] % 5) {
        case 0: t += apply(fs[i % 3], a[i]); break;
        case 1: t += rec(fs[(i + 1) % 3], a[i] % 7); break;
        case 2: t -= (long)strlen(argv[0]); break;
        default: t ^= a[i];
        }
    }
    qsort(a, 200, sizeof a[0], cmp_rev);
    printf("%ld %d %d\n", t, a[0], a[199]);
    return 0;
}
"#;

/// Runs both builds of `args` (exit status `status`) and asserts that regeneration did not
/// stop and equals `trace-naive`'s block sequence; prints the sizes.
fn exact(name: &str, args: &[String], status: i32) -> Outcome {
    exact_lang(name, false, args, status)
}

/// [`exact`] for C (`cxx` false) or C++.
fn exact_lang(name: &str, cxx: bool, args: &[String], status: i32) -> Outcome {
    assert_exact(name, run_both(name, cxx, args, status))
}

/// Asserts that regeneration did not stop and equals `trace-naive`'s block sequence; prints
/// the sizes.
fn assert_exact(name: &str, o: Outcome) -> Outcome {
    assert!(o.stopped.is_empty(), "{name}: {:?}", o.stopped);
    assert!(
        o.regenerated == o.oracle,
        "{name}: {}",
        first_difference(&o.regenerated, &o.oracle)
    );
    eprintln!(
        "{name}: {} blocks; trace {} bytes (range-coded {}), trace-naive {} bytes",
        o.oracle.len(),
        o.trace_bytes,
        o.coded_bytes,
        o.naive_bytes
    );
    o
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

/// `tally trace` on the command line: text, JSON, a range and a function filter; a file that
/// is not a trace is a one-line error.
/// `tally trace`, which writes as it regenerates (never the whole sequence in memory), prints
/// what `render` makes of the sequence `regenerate` keeps, to stdout and to `--output`, for
/// text and JSON, ranges and function filters.
fn cli_equals_render(dir: &Path) {
    let prof = tally_format::profile::Profile::read_file(dir.join("prog.tally")).unwrap();
    let bytes = std::fs::read(dir.join("prog.trace")).unwrap();
    let r = tally_report::trace::regenerate(&bytes, &prof).unwrap();
    let out = dir.join("shown.txt");
    for (from, limit, function) in [
        (0, 0, ""),
        (7, 5, ""),
        (2, 3, "^main$"),
        (usize::MAX, 0, ""),
    ] {
        for json in [false, true] {
            let re = regex_lite::Regex::new(function).unwrap();
            let want =
                tally_report::trace::render(&r, |b| re.is_match(&b.function), from, limit, json);
            let mut cmd = std::process::Command::new(tally());
            cmd.arg("trace").arg(dir.join("prog.trace")).args([
                "--from",
                &from.to_string(),
                "--limit",
                &limit.to_string(),
            ]);
            if !function.is_empty() {
                cmd.args(["--function", function]);
            }
            if json {
                cmd.args(["--format", "json"]);
            }
            let o = cmd.output().unwrap();
            assert_eq!(
                String::from_utf8_lossy(&o.stdout),
                want,
                "{from} {limit} {function} {json}"
            );
            let o = cmd.arg("--output").arg(&out).output().unwrap();
            assert!(o.stdout.is_empty());
            assert_eq!(std::fs::read_to_string(&out).unwrap(), want);
        }
    }
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

/// A loop of biased branches (one taken in 64, one in 1000, and a call's early return) under
/// `--tally-trace=bits`: the raw trace takes at least one bit per executed conditional branch,
/// the range-coded one (`TALLY_TRACE_COMPRESS=1`, trace format 6) less than one, and
/// regenerates block for block as `trace-naive` (`check_coded`, through `run_both_with`).
const BIASED: &str = r#"
#include <stdio.h>
__attribute__((noinline)) static unsigned step(unsigned s, int i) {
    if (i % 1000 == 999)
        return s * 3 + 1;
    return s + 1;
}
int main(int argc, char **argv) {
    (void)argv;
    unsigned s = 1, hits = 0;
    for (int i = 0; i < 30000 + argc; i++) {
        if ((i & 63) == 0) {
            hits++;
            printf("%u\n", hits);
        }
        s = step(s, i);
    }
    printf("%u %u\n", hits, s);
    return 0;
}
"#;

#[test]
fn range_coding_takes_under_one_bit_per_branch() {
    let dir = scratch("wtrace-biased-src");
    let src = dir.join("biased.c");
    std::fs::write(&src, BIASED).unwrap();
    let o = run_both_with(
        "biased",
        false,
        &single(&src, "-O2"),
        Some(0),
        &["--tally-trace=bits"],
        &[],
    );
    let o = assert_exact("biased", o);
    let per_branch = |trace: &str, prof: &str| {
        let bytes = std::fs::read(o.dir.join("trace").join(trace)).unwrap();
        let prof =
            tally_format::profile::Profile::read_file(o.dir.join("trace").join(prof)).unwrap();
        let s = tally_report::trace::stats::stats(&bytes, &prof, 0).unwrap();
        assert!(s.branches > 60_000, "{} branches", s.branches);
        s.file_bits as f64 / s.branches as f64
    };
    let (raw, coded) = (
        per_branch("prog.trace", "prog.tally"),
        per_branch("prog.ctrace", "prog.ctally"),
    );
    eprintln!("biased loop: {raw:.3} bits per branch raw, {coded:.3} range-coded");
    assert!(raw >= 1.0, "raw {raw}");
    assert!(coded < 1.0, "range-coded {coded}");
    assert!(coded < 0.5 * raw, "range-coded {coded}, raw {raw}");
}

/// A range-coded trace that is truncated or corrupt is refused in one line (exit status 2),
/// never a panic; a chunk claiming more than 64 KiB of stream is refused before decoding. The
/// same for a stream of words (the default file).
#[test]
fn corrupt_range_coded_traces_are_refused() {
    let shapes = repo().join("testdata/shapes/shapes.c");
    let o = assert_exact(
        "shapes-coded",
        run_both("shapes-coded", false, &single(&shapes, "-O2"), 0),
    );
    let dir = o.dir.join("trace");
    let good = std::fs::read(dir.join("prog.ctrace")).unwrap();
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    // the first thread chunk's offset and length (coded: { u32 thread, u32 length, u32 raw
    // bytes, coded bytes })
    let first_chunk = |b: &[u8]| -> (usize, usize) {
        let mut pos = 16;
        while u32_at(b, pos) >= 0xffff_fff0 {
            pos += 8 + u32_at(b, pos + 4) as usize;
        }
        (pos, u32_at(b, pos + 4) as usize)
    };
    // the file with its first thread chunk `by` bytes shorter (its length too)
    let shortened = |b: &[u8], by: usize| -> Vec<u8> {
        let (pos, len) = first_chunk(b);
        let mut cut = b[..pos + 8 + len - by].to_vec();
        cut[pos + 4..pos + 8].copy_from_slice(&((len - by) as u32).to_le_bytes());
        cut.extend_from_slice(&b[pos + 8 + len..]);
        cut
    };
    let (pos, len) = first_chunk(&good);
    assert!(len > 12, "chunk of {len} bytes");
    let trace = |bytes: &[u8], what: &str| -> (Option<i32>, String) {
        let path = dir.join(format!("bad-{what}.trace"));
        std::fs::write(&path, bytes).unwrap();
        let out = std::process::Command::new(tally())
            .args(["trace", "--limit", "5", "--profile"])
            .arg(dir.join("prog.ctally"))
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.contains("panicked"), "{what}: {err}");
        (out.status.code(), err)
    };
    let refused = |bytes: &[u8], what: &str, says: &str| {
        let (code, err) = trace(bytes, what);
        assert_eq!(code, Some(2), "{what}: {err}");
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
        assert!(err.contains(says), "{what}: {err}");
    };
    // bytes of the first thread chunk from `from` on, every `step`th flipped in turn: refused
    // (2), or read as a stream that regeneration reads as far as it can (0, or 1 when it stops
    // early and says where), never a panic or a hang
    let flipped = |b: &[u8], from: usize, step: usize, what: &str| {
        let (pos, len) = first_chunk(b);
        for k in (from..len).step_by(step) {
            let mut bad = b.to_vec();
            bad[pos + 8 + k] ^= 0x5a;
            let (code, err) = trace(&bad, what);
            assert!(matches!(code, Some(0..=2)), "{what} {k}: {code:?} {err}");
        }
    };
    // a flight recorder is never coded, nor a stream of words
    let ring = |b: &[u8], what: &str| {
        let mut ring = b.to_vec();
        ring[12] = 1;
        refused(&ring, what, "corrupt");
    };
    assert_eq!(trace(&good, "good").0, Some(0));
    // the file cut inside the chunk
    refused(&good[..pos + 8 + len / 2], "cut", "truncated");
    // the chunk's coded bytes cut: they run out
    refused(&shortened(&good, 3), "short", "does not decode");
    // bytes left over after the chunk's stream
    let mut long = good[..pos + 8 + len].to_vec();
    long[pos + 4..pos + 8].copy_from_slice(&(len as u32 + 2).to_le_bytes());
    long.extend_from_slice(&[0x55, 0xaa]);
    long.extend_from_slice(&good[pos + 8 + len..]);
    refused(&long, "long", "does not decode");
    // a chunk claiming more stream than a chunk holds
    let mut big = good.clone();
    big[pos + 8..pos + 12].copy_from_slice(&(65537u32).to_le_bytes());
    refused(&big, "big", "does not decode");
    ring(&good, "ring");
    flipped(&good, 12, 3, "flipped");
    // The same run's default file, a stream of words (format 9): a chunk that is not whole
    // words is refused; flipped bytes (a sentinel moved, a word emptied or filled) read as
    // another stream.
    let words = std::fs::read(dir.join("prog.trace")).unwrap();
    assert_eq!(
        &words[8..12],
        &tally_format::trace::WTRACE_VERSION_WORDS.to_le_bytes()
    );
    let len = first_chunk(&words).1;
    assert!(len >= 16 && len.is_multiple_of(8), "chunk of {len} bytes");
    refused(&shortened(&words, 3), "odd-words", "not whole 8-byte words");
    ring(&words, "words-ring");
    flipped(&words, 0, 5, "flipped-words");
}

/// The three ways a function keeps the accumulator: written through (the default: a register
/// copy stored to the thread's word after every record), `--tally-trace-registers=on` (stored
/// only at calls and returns) and `--tally-trace-write-through=off` (every record appended to
/// the thread's word in memory). The trace is the same bit stream, so each regenerates equal
/// to the oracle block for block; and the flags change the code (the `.text` sections differ
/// from the default build's).
#[test]
fn register_accumulator_regenerates_exactly() {
    let picked = ["shapes.c", "exit_nested.c", "recursion.c"];
    let cases: Vec<(PathBuf, i32)> = early_and_shapes()
        .into_iter()
        .filter(|(f, _)| picked.iter().any(|p| f.ends_with(p)))
        .collect();
    assert_eq!(cases.len(), picked.len(), "{cases:?}");
    for (src, status) in cases {
        let base = src.file_name().unwrap().to_str().unwrap().to_string();
        for (n, flags) in [
            ("default", &[][..]),
            ("registers", &["--tally-trace-registers=on"][..]),
            ("memory", &["--tally-trace-write-through=off"][..]),
        ] {
            let o = run_both_with(
                &format!("{base}-{n}"),
                false,
                &single(&src, "-O2"),
                Some(status),
                flags,
                &[],
            );
            assert!(o.stopped.is_empty(), "{base} {n}: {:?}", o.stopped);
            assert!(
                o.oracle.len() > 10 && o.regenerated == o.oracle,
                "{base} {n}: {}",
                first_difference(&o.regenerated, &o.oracle)
            );
        }
        // The code (`.text`, which does not depend on the build directory) differs.
        let text = |n: &str| {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("wtrace-{base}-{n}"));
            let out = dir.join("text.bin");
            let st = std::process::Command::new("objcopy")
                .args(["-O", "binary", "--only-section=.text"])
                .arg(dir.join("trace/prog"))
                .arg(&out)
                .status()
                .unwrap();
            assert!(st.success(), "objcopy");
            std::fs::read(out).unwrap()
        };
        for n in ["registers", "memory"] {
            assert!(
                text("default") != text(n),
                "{base}: the {n} build has the default's code"
            );
        }
    }
}

/// Twenty-four switches in a row, no call and no loop between them: more witness bits than one
/// shared check of room covers (`Rec::hoist_checks` puts another check where a path would pass
/// 32 bits). Block for block as `trace-naive`, the word in memory and in registers.
const WIDE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
volatile unsigned g[4];
#define SW(k)                                \
    switch ((h >> (2 * (k))) & 3) {          \
    case 0: g[0] = (k); break;               \
    case 1: g[1] = (k) + 1; break;           \
    case 2: g[2] = (k) + 2; break;           \
    default: g[3] = (k) + 3; break;          \
    }
__attribute__((noinline)) static void wide(unsigned long long h) {
    SW(0) SW(1) SW(2) SW(3) SW(4) SW(5) SW(6) SW(7) SW(8) SW(9) SW(10) SW(11)
    SW(12) SW(13) SW(14) SW(15) SW(16) SW(17) SW(18) SW(19) SW(20) SW(21) SW(22) SW(23)
}
int main(int argc, char **argv) {
    unsigned long long h = 88172645463325252ull + (unsigned)argc;
    int n = argc > 1 ? atoi(argv[1]) : 3000;
    for (int i = 0; i < n; i++) {
        h ^= h << 13, h ^= h >> 7, h ^= h << 17;
        wide(h);
    }
    printf("%u %u %u %u\n", g[0], g[1], g[2], g[3]);
    return 0;
}
"#;

#[test]
fn long_runs_of_records_without_calls_regenerate_exactly() {
    let dir = scratch("wtrace-wide-src");
    let src = dir.join("wide.c");
    std::fs::write(&src, WIDE).unwrap();
    for (name, flags) in [
        ("wide-memory", &[][..]),
        ("wide-registers", &["--tally-trace-registers=on"][..]),
    ] {
        let o = run_both_with(name, false, &single(&src, "-O2"), Some(0), flags, &[]);
        let o = assert_exact(name, o);
        assert!(
            o.oracle.len() > 3000 * 48,
            "{name}: {} blocks",
            o.oracle.len()
        );
    }
}

/// Two loops whose witnesses (and branch outcomes) repeat for 700,000 iterations: long runs
/// of equal bits.
const RUNS: &str = r#"
#include <stdio.h>
volatile unsigned sink;
__attribute__((noinline)) static void up(int n) {
#pragma clang loop unroll(disable)
    for (int i = 0; i < n; i++)
        sink += (unsigned)i;
}
__attribute__((noinline)) static void down(int n) {
    int i = n;
#pragma clang loop unroll(disable)
    do
        sink ^= (unsigned)i;
    while (--i > 0);
}
int main(int argc, char **argv) {
    (void)argv;
    int n = 700000 + argc;
    up(n);
    down(n);
    printf("%u\n", sink);
    return 0;
}
"#;

/// A stream of words (trace format 9) whose 64 KiB buffers fill inside long runs of equal
/// bits: a full word of 63 zeros has the closed word's value (1), one of 63 ones is all ones.
/// Both kinds cross buffer boundaries (counted in the file), the words unpack bit for bit to
/// the range-coded run's stream, and the trace's block and edge counts equal `edges-naive`'s.
#[test]
fn long_runs_of_equal_bits_cross_buffers_exactly() {
    let src = scratch("wtrace-runs-src").join("runs.c");
    std::fs::write(&src, RUNS).unwrap();
    let (mut zeros, mut ones) = (0u64, 0u64);
    for (name, flags) in [
        ("runs-witness", &[][..]),
        ("runs-bits", &["--tally-trace=bits"][..]),
    ] {
        let dir = scratch(&format!("wtrace-{name}"));
        let args = single(&src, "-O2");
        let run = Run {
            name,
            cxx: false,
            args: &args,
            status: Some(0),
            trace_flags: flags,
            run_args: &[],
        };
        run.build_and_run(&dir, ["trace", "edges-naive"]);
        let t = dir.join("trace");
        let bytes = std::fs::read(t.join("prog.trace")).unwrap();
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
        let mut pos = 16;
        while pos < bytes.len() {
            let (thread, len) = (u32_at(pos), u32_at(pos + 4) as usize);
            if thread < 0xffff_fff0 {
                for w in bytes[pos + 8..pos + 8 + len].chunks_exact(8) {
                    match u64::from_le_bytes(w.try_into().unwrap()) {
                        1 => zeros += 1,
                        u64::MAX => ones += 1,
                        _ => {}
                    }
                }
            }
            pos += 8 + len;
        }
        let words = tally_format::trace::read_witness_trace(&bytes).unwrap();
        let coded = std::fs::read(t.join("prog.ctrace")).unwrap();
        let coded = tally_format::trace::read_witness_trace(&coded).unwrap();
        assert!(words.words && coded.coded, "{name}: formats 9 and 8");
        assert!(
            words.threads == coded.threads,
            "{name}: the words unpack to other bits than the coded stream"
        );
        let o = trace_report_json(&t);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{name}: {err}");
        let traced: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let oracle = report_json(&dir.join("edges-naive/prog.tally"));
        assert_same_counts(name, "trace", &traced, "edges-naive", &oracle, Edges::All);
    }
    // (8192 words fill a buffer: each kind spans at least one boundary)
    assert!(
        zeros > 8192 && ones > 8192,
        "{zeros} words of 63 zeros, {ones} of 63 ones"
    );
}

/// A process that ends by `abort`, by `raise` of a fatal signal, or normally after a function
/// with an endless loop of calls (`for (;;) pause();`, whose cycle has no predicate): the
/// streams end at the fatal-signal path and regenerate exactly. (A fault *between* calls is
/// not compared: the last blocks regenerated may go past the faulting instruction.)
#[test]
fn fatal_signals_end_the_streams() {
    let src = repo().join("testdata/crash/crash.c");
    for (how, status) in [("", Some(0)), ("abort", None), ("raise", None)] {
        let name = format!("crash-{}", if how.is_empty() { "none" } else { how });
        let run: Vec<&str> = if how.is_empty() { vec![] } else { vec![how] };
        let o = run_both_with(&name, false, &single(&src, "-O1"), status, &[], &run);
        assert!(o.stopped.is_empty(), "{name}: {:?}", o.stopped);
        assert!(
            o.regenerated == o.oracle,
            "{name}: {}",
            first_difference(&o.regenerated, &o.oracle)
        );
        assert!(o.oracle.len() > 100, "{name}: too little compared");
    }
}

/// `tally report --trace prog.trace prog.tally` against the `edges-naive` oracle built from
/// the same arguments and run on the same input: every block and edge count equal. Where
/// regeneration stops early (an exception), the exit status is 3 and stderr says the counts
/// cover the regenerated part. Returns whether regeneration was complete.
/// `tally report --format json --trace` of `dir/prog.trace` with `dir/prog.tally`.
fn trace_report_json(dir: &Path) -> std::process::Output {
    std::process::Command::new(tally())
        .args(["report", "--format", "json", "--trace"])
        .arg(dir.join("prog.trace"))
        .arg(dir.join("prog.tally"))
        .output()
        .unwrap()
}

fn trace_report_equals_edges_naive(name: &str, cxx: bool, args: &[String], status: i32) -> bool {
    let dir = scratch(&format!("wtrace-report-{name}"));
    let run = Run {
        name,
        cxx,
        args,
        status: Some(status),
        trace_flags: &[],
        run_args: &[],
    };
    run.build_and_run(&dir, ["trace", "edges-naive"]);
    let t = dir.join("trace");
    let o = trace_report_json(&t);
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(3) {
        assert!(
            err.contains("regeneration stopped early")
                && err.contains(tally_report::trace::NOT_EXACT)
                && err.contains("counts cover the regenerated part"),
            "{name}: {err}"
        );
        // The counts are those of the regenerated prefix (which the regeneration test
        // compares with trace-naive's sequence).
        let prof = tally_format::profile::Profile::read_file(t.join("prog.tally")).unwrap();
        let bytes = std::fs::read(t.join("prog.trace")).unwrap();
        let r = tally_report::trace::regenerate(&bytes, &prof).unwrap();
        let mut want = std::collections::BTreeMap::new();
        for b in &r.blocks {
            *want
                .entry((b.function.clone(), b.block as u64))
                .or_insert(0u64) += 1;
        }
        let traced: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut got = std::collections::BTreeMap::new();
        for f in traced["functions"].as_array().unwrap() {
            for b in f["blocks"].as_array().unwrap() {
                if let Some(c) = b["count"].as_u64().filter(|&c| c > 0) {
                    let key = (
                        f["name"].as_str().unwrap().to_string(),
                        b["id"].as_u64().unwrap(),
                    );
                    got.insert(key, c);
                }
            }
        }
        assert_eq!(got, want, "{name}: counts are not the regenerated prefix's");
        return false;
    }
    assert_eq!(o.status.code(), Some(0), "{name}: {err}");
    let traced: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let oracle = report_json(&dir.join("edges-naive/prog.tally"));
    let (fns, executed) =
        assert_same_counts(name, "trace", &traced, "edges-naive", &oracle, Edges::All);
    // At -O2 latch.ll folds to a constant (one block).
    assert!(
        fns >= 1 && (executed >= 3 || name.starts_with("latch.ll-O2")),
        "{name}: too little compared"
    );
    true
}

/// Block and edge counts from witness traces equal the `edges-naive`
/// oracle's on every program the regeneration tests use: the early exits and shapes, C++
/// exceptions (a `resume` counts its `Return` edge), callbacks through pointers and `qsort`,
/// and four threads.
#[test]
fn trace_report_counts_equal_edges_naive() {
    let mut exact = 0;
    for (file, status) in &early_and_shapes() {
        for opt in ["-O0", "-O2"] {
            let name = format!("{}{opt}", file.file_name().unwrap().to_str().unwrap());
            let cxx = file.extension().is_some_and(|e| e == "cpp");
            exact += usize::from(trace_report_equals_edges_naive(
                &name,
                cxx,
                &single(file, opt),
                *status,
            ));
        }
    }
    assert_eq!(
        exact,
        2 * early_and_shapes().len(),
        "not every program counted exactly"
    );
    let throws = repo().join("testdata/wtrace/throws.cpp");
    for opt in ["-O0", "-O2"] {
        assert!(trace_report_equals_edges_naive(
            &format!("throws{opt}"),
            true,
            &single(&throws, opt),
            0
        ));
    }
    let dir = scratch("wtrace-report-callbacks-src");
    let src = dir.join("callbacks.c");
    std::fs::write(&src, CALLBACKS).unwrap();
    for opt in ["-O0", "-O2"] {
        assert!(trace_report_equals_edges_naive(
            &format!("callbacks{opt}"),
            false,
            &single(&src, opt),
            0
        ));
    }
    let workers = repo().join("testdata/threads/workers.c");
    let args = vec![
        "-O2".into(),
        "-g".into(),
        "-pthread".into(),
        "--tally-atomic".into(),
        workers.display().to_string(),
    ];
    assert!(trace_report_equals_edges_naive("workers", false, &args, 0));
}

/// The `data-count` values (line counts) of a site's file pages, sorted.
fn site_line_counts(dir: &std::path::Path) -> Vec<String> {
    let mut counts = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with('f') && name.ends_with(".html")) {
            continue;
        }
        let page = std::fs::read_to_string(&p).unwrap();
        for part in page.split("data-count=\"").skip(1) {
            counts.push(part.split('"').next().unwrap().to_string());
        }
    }
    counts.sort();
    counts
}

#[test]
fn html_site_of_a_trace_equals_edges_naive_site() {
    let dir = scratch("wtrace-html");
    let src = dir.join("callbacks.c");
    std::fs::write(&src, CALLBACKS).unwrap();
    let run = Run {
        name: "html",
        cxx: false,
        args: &single(&src, "-O2"),
        status: Some(0),
        trace_flags: &[],
        run_args: &[],
    };
    run.build_and_run(&dir, ["trace", "edges-naive"]);
    let (t, n) = (dir.join("trace"), dir.join("edges-naive"));
    let o = std::process::Command::new(tally())
        .args(["html", "-o"])
        .arg(dir.join("site-trace"))
        .arg("--trace")
        .arg(t.join("prog.trace"))
        .arg(t.join("prog.tally"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = std::process::Command::new(tally())
        .args(["html", "-o"])
        .arg(dir.join("site-naive"))
        .arg(n.join("prog.tally"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (traced, naive) = (
        site_line_counts(&dir.join("site-trace")),
        site_line_counts(&dir.join("site-naive")),
    );
    assert!(traced.iter().any(|c| c != "0"), "{traced:?}");
    assert_eq!(traced, naive);
}

/// How a step of [`build_steps_and_compare`] is built.
#[derive(Clone, Copy)]
enum Step {
    /// Without tally.
    Plain,
    /// With tally, in the mode under comparison (`trace`, then `trace-naive`).
    Traced,
    /// With tally, in this mode in both builds.
    Mode(&'static str),
}

/// Builds, in `trace` and `trace-naive` mode, what `steps` says (each step: how it is built,
/// its arguments, its output's name), runs `dir/MODE/prog` in both and returns the comparison.
/// Sources are in `testdata/wtrace/xfile`.
fn build_steps_and_compare(name: &str, steps: &[(Step, &[&str], &str)]) -> Outcome {
    let dir = scratch(&format!("wtrace-{name}"));
    let outs: Vec<Vec<u8>> = ["trace", "trace-naive"]
        .into_iter()
        .map(|mode| build_steps_and_run(name, &dir, mode, steps))
        .collect();
    assert_eq!(outs[0], outs[1], "{name}: outputs differ");
    let coded = run_coded(&dir.join("trace"), &[]);
    assert_eq!(coded.status.code(), Some(0), "{name} coded");
    assert_eq!(coded.stdout, outs[0], "{name}: coded run's output differs");
    assert_exact(name, outcome(name, dir))
}

/// Builds `steps` (see [`build_steps_and_compare`]) in `mode` under `dir/MODE`, runs
/// `prog` there (profile `prog.tally`, trace `prog.trace`) and returns its output.
fn build_steps_and_run(
    name: &str,
    dir: &Path,
    mode: &'static str,
    steps: &[(Step, &[&str], &str)],
) -> Vec<u8> {
    let src = repo().join("testdata/wtrace/xfile");
    let vdir = dir.join(mode);
    std::fs::create_dir_all(&vdir).unwrap();
    for (how, args, out) in steps {
        let v = match how {
            Step::Plain => Variant::Plain,
            Step::Traced => Variant::Tally(mode),
            Step::Mode(m) => Variant::Tally(m),
        };
        let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        for x in a.iter_mut() {
            if x.ends_with(".c") {
                *x = src.join(&*x).display().to_string();
            }
            if x == "RPATH" {
                *x = format!("-Wl,-rpath,{}", vdir.display());
            }
        }
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        build(v, false, &a, &vdir.join(out), &vdir);
    }
    let out = prog_in(&vdir, &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{name} {mode}");
    out.stdout
}

/// The external callees of the trace build's metadata (`WCallee::Extern`) and how the trace
/// resolved them: `(callee name, resolved to a traced function)` per site.
fn extern_sites(o: &Outcome) -> Vec<(String, bool)> {
    let prof = tally_format::profile::Profile::read_file(o.dir.join("trace/prog.tally")).unwrap();
    let bytes = std::fs::read(o.dir.join("trace/prog.trace")).unwrap();
    let t = tally_format::trace::read_witness_trace(&bytes).unwrap();
    let mut out = Vec::new();
    for m in &prof.modules {
        let slot = t.modules.iter().find(|x| x.1 == m.hash).map(|x| x.0);
        let res = slot.and_then(|s| t.resolutions.iter().find(|r| r.0 == s));
        for f in &m.meta.functions {
            for c in f.wtrace().iter().flat_map(|w| w.calls.iter().flatten()) {
                if let tally_format::WCallee::Extern { name, index } = c {
                    let to = res.and_then(|r| r.1.get(*index as usize).copied().flatten());
                    out.push((name.clone(), to.is_some()));
                }
            }
        }
    }
    out
}

/// Direct calls between files (most of Lua's entries were such calls): the caller
/// announces the callee's address (`__tally_wtrace_direct`), a traced callee writes no
/// `Enter`, and the runtime resolves each module's external callees by address into the
/// trace. One executable of five files: mutual recursion across files, a weak `hook` in one
/// file replaced by the strong one of another (two definitions of one name), and a callee
/// compiled without tally that calls back into traced code; then a shared library built with
/// tally, loaded by an executable built without it that interposes the library's `level` (the
/// library's direct call of its own `level` runs the executable's, which calls back). Both
/// regenerate block for block as trace-naive's; the sites resolve as the linker did.
#[test]
fn cross_file_calls_regenerate_exactly() {
    let o = build_steps_and_compare(
        "xfile",
        &[
            (Step::Plain, &["-O2", "-g", "-c", "plain.c"], "plain.o"),
            (
                Step::Traced,
                &[
                    "-O2", "-g", "main.c", "parse.c", "weak.c", "hooks.c", "plain.o",
                ],
                "prog",
            ),
        ],
    );
    assert!(o.oracle.len() > 5000, "too little compared");
    let sites = extern_sites(&o);
    let resolved = |name: &str| {
        let v: Vec<bool> = sites.iter().filter(|s| s.0 == name).map(|s| s.1).collect();
        assert!(!v.is_empty(), "no external call of {name}: {sites:?}");
        v.iter().all(|&r| r)
    };
    // Traced callees in other files resolve to them (`hook`: the strong one, which the
    // regeneration being exact shows); the plain callee resolves to nothing.
    for f in ["parse_expr", "visit", "twice", "hook", "use_weak"] {
        assert!(resolved(f), "{f}: {sites:?}");
    }
    assert!(!resolved("apply_plain"), "{sites:?}");
    // Without its resolution chunks (a process killed before it wrote them) the trace is
    // refused, not misread.
    let bytes = std::fs::read(o.dir.join("trace/prog.trace")).unwrap();
    let mut cut = bytes[..16].to_vec();
    let mut at = 16;
    while at + 8 <= bytes.len() {
        let thread = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        if thread != tally_format::trace::WTRACE_RESOLVE_CHUNK {
            cut.extend_from_slice(&bytes[at..at + 8 + len]);
        }
        at += 8 + len;
    }
    assert!(cut.len() < bytes.len());
    let prof = tally_format::profile::Profile::read_file(o.dir.join("trace/prog.tally")).unwrap();
    let err = tally_report::trace::regenerate(&cut, &prof).unwrap_err();
    assert!(err.contains("does not resolve"), "{err}");
    let o = build_steps_and_compare(
        "xfile-shlib",
        &[
            (
                Step::Traced,
                &["-O2", "-g", "-fPIC", "-shared", "lib.c"],
                "liblib.so",
            ),
            (
                Step::Plain,
                &["-O2", "-g", "exe.c", "-L.", "-llib", "RPATH"],
                "prog",
            ),
        ],
    );
    assert!(o.oracle.len() > 1000, "too little compared");
    let sites = extern_sites(&o);
    // The library's own `level` is interposed: its call resolves to no traced function.
    assert!(sites.iter().any(|s| s.0 == "level" && !s.1), "{sites:?}");
    assert!(sites.iter().any(|s| s.0 == "lib_twice" && s.1), "{sites:?}");
}

/// `tally report --trace` of `dir/trace` has the counts of the `edges-naive` profile of
/// `dir/edges-naive`; returns how many functions were compared.
fn trace_counts_equal_edges_naive(name: &str, dir: &Path) -> usize {
    let traced = trace_report_json(&dir.join("trace"));
    let err = String::from_utf8_lossy(&traced.stderr);
    assert_eq!(traced.status.code(), Some(0), "{name}: {err}");
    let traced: serde_json::Value = serde_json::from_slice(&traced.stdout).unwrap();
    let oracle = report_json(&dir.join("edges-naive/prog.tally"));
    assert_same_counts(name, "trace", &traced, "edges-naive", &oracle, Edges::All).0
}

/// Traced code in several images of one process (calls through pointers,
/// threads and signals keep regeneration exact, shared libraries included): an executable, a
/// linked library and a library opened with `dlopen` and closed, twice, each with its own copy
/// of the runtime, write one trace (the registry owner's copy writes, the others hand their
/// calls over: "One trace per process" in `runtime/c/wtrace.c`). Calls cross the images both
/// ways, directly and through pointers, and a signal raised in one image runs a handler of
/// another that calls into a third, on a stream of its own. Regenerated block for block as
/// trace-naive's (whose copies hand over too), the direct calls between images resolved to
/// their traced callees. Then the same with the linked library built in `edge` mode: the
/// copy that writes the trace has no traced code of its own.
#[test]
fn one_trace_for_every_image() {
    let steps = |lib: Step| -> [(Step, &'static [&'static str], &'static str); 3] {
        [
            (
                lib,
                &["-O2", "-g", "-fPIC", "-shared", "lib.c"],
                "liblib.so",
            ),
            (
                Step::Traced,
                &[
                    "-O2", "-g", "-fPIC", "-shared", "dl.c", "-L.", "-llib", "RPATH",
                ],
                "libdl.so",
            ),
            (
                Step::Traced,
                &["-O2", "-g", "multi.c", "-L.", "-llib", "RPATH"],
                "prog",
            ),
        ]
    };
    let o = build_steps_and_compare("multi", &steps(Step::Traced));
    assert!(o.oracle.len() > 20000, "too little compared");
    let bytes = std::fs::read(o.dir.join("trace/prog.trace")).unwrap();
    let t = tally_format::trace::read_witness_trace(&bytes).unwrap();
    let prof = tally_format::profile::Profile::read_file(o.dir.join("trace/prog.tally")).unwrap();
    cli_equals_render(&o.dir.join("trace"));
    // A slot per module of the three images, and one more for libdl.so's second load.
    let mut hashes: Vec<u64> = t.modules.iter().map(|m| m.1).collect();
    assert_eq!(hashes.len(), 4, "slots");
    hashes.sort();
    hashes.dedup();
    let mut want: Vec<u64> = prof.modules.iter().map(|m| m.hash).collect();
    want.sort();
    want.dedup();
    assert_eq!(hashes, want, "modules of the three images");
    // 27 raised signals per round (i % 11 == 10 for i < 300), each handler on its own stream.
    assert_eq!(t.signals.len(), 54, "signal streams");
    let sites = extern_sites(&o);
    for f in ["lib_run", "lib_twice", "level"] {
        let v: Vec<bool> = sites.iter().filter(|s| s.0 == f).map(|s| s.1).collect();
        assert!(
            !v.is_empty() && v.iter().all(|&r| r),
            "{f} not resolved across images: {sites:?}"
        );
    }
    // The counts `tally report --trace` makes of the trace are those of the edges-naive
    // build of the same three images (whose one profile the registry already made right).
    let out = build_steps_and_run("multi", &o.dir, "edges-naive", &steps(Step::Traced));
    assert_eq!(
        trace_counts_equal_edges_naive("multi", &o.dir),
        8,
        "functions compared"
    );
    // 54 handlers, each adding lib_twice(10) + level(10) = 7 - 10.
    let out = String::from_utf8_lossy(&out);
    assert!(out.ends_with(" -162\n"), "{out}");
    // Four threads, each a stream through both images: the counts equal edges-naive's.
    let dir = scratch("wtrace-multi-threads");
    let lib: &[&str] = &["-O2", "-g", "-fPIC", "-shared", "--tally-atomic", "lib.c"];
    let exe: &[&str] = &[
        "-O2",
        "-g",
        "-pthread",
        "--tally-atomic",
        "workers.c",
        "-L.",
        "-llib",
        "RPATH",
    ];
    let steps2 = [
        (Step::Traced, lib, "liblib.so"),
        (Step::Traced, exe, "prog"),
    ];
    let a = build_steps_and_run("multi-threads", &dir, "trace", &steps2);
    let b = build_steps_and_run("multi-threads", &dir, "edges-naive", &steps2);
    assert_eq!(a, b, "outputs differ");
    let fns = trace_counts_equal_edges_naive("multi-threads", &dir);
    assert!(fns >= 4, "functions compared: {fns}");
    let bytes = std::fs::read(dir.join("trace/prog.trace")).unwrap();
    let t = tally_format::trace::read_witness_trace(&bytes).unwrap();
    assert_eq!(
        t.threads
            .iter()
            .map(|x| x.0)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        5
    );
    let o = build_steps_and_compare("multi-edge", &steps(Step::Mode("edge")));
    assert!(o.oracle.len() > 10000, "too little compared");
    let sites = extern_sites(&o);
    assert!(sites.iter().any(|s| s.0 == "lib_run" && !s.1), "{sites:?}");
}

/// A handler installed before tracing starts -- here by code tally did not build, with the real
/// `sigaction`, before any traced function ran -- is wrapped when the process makes its first
/// stream (`signals_trace_started`), so its traced work runs on streams of its own: 96 SIGSEGV
/// handlers calling traced `hwork` between two records of the traced loop they interrupt, and
/// the loop's stream is trace-naive's sequence without them, block for block.
#[test]
fn handlers_installed_before_tracing_are_wrapped() {
    let o = build_steps_and_compare(
        "presig",
        &[
            (Step::Plain, &["-O2", "-g", "-c", "presig.c"], "presig.o"),
            (
                Step::Traced,
                &["-O2", "-g", "presig_work.c", "presig.o"],
                "prog",
            ),
        ],
    );
    assert!(o.oracle.len() > 10000, "too little compared");
    let bytes = std::fs::read(o.dir.join("trace/prog.trace")).unwrap();
    let t = tally_format::trace::read_witness_trace(&bytes).unwrap();
    assert_eq!(t.signals.len(), 96, "handler streams");
}

/// A call of a function of another file that is traced writes no `Back` (trace format 4: the
/// callee's `ret` tells the caller it ran; the reader resolves the site to that function),
/// while a call of an untraced one still does: 100,000 calls of a traced `step` make a trace
/// at least 10,000 bytes smaller than the same calls of a plain-compiled `step`, and both
/// regenerate to every block of the loop.
#[test]
fn traced_external_callees_write_no_back() {
    let dir = scratch("wtrace-noback");
    let main = "#include <stdio.h>\nint step(int);\nint main(void) {\n  long s = 0;\n  \
                for (int i = 0; i < 100000; i++)\n    s += step(i);\n  \
                printf(\"%ld\\n\", s);\n  return 0;\n}\n";
    std::fs::write(dir.join("main.c"), main).unwrap();
    std::fs::write(
        dir.join("step.c"),
        "int step(int x) { return 3 * x + 1; }\n",
    )
    .unwrap();
    let mut sizes = Vec::new();
    for traced in [true, false] {
        let d = dir.join(if traced { "traced" } else { "plain" });
        std::fs::create_dir_all(&d).unwrap();
        let step = d.join("step.o");
        let step_s = step.to_str().unwrap();
        let v = if traced {
            Variant::Tally("trace")
        } else {
            Variant::Plain
        };
        build(v, false, &["-O2", "-c", "step.c"], &step, &dir);
        let prog = d.join("prog");
        build(
            Variant::Tally("trace"),
            false,
            &["-O2", "-g", "main.c", step_s],
            &prog,
            &dir,
        );
        let out = std::process::Command::new(&prog)
            .current_dir(&d)
            .env("TALLY_PROFILE", d.join("prog.tally"))
            .env("TALLY_TRACE", d.join("prog.trace"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let prof = tally_format::profile::Profile::read_file(d.join("prog.tally")).unwrap();
        let bytes = std::fs::read(d.join("prog.trace")).unwrap();
        let r = tally_report::trace::regenerate(&bytes, &prof).unwrap();
        assert!(r.stopped.is_empty(), "{:?}", r.stopped);
        assert!(r.blocks.len() >= 100_000, "{} blocks", r.blocks.len());
        sizes.push(bytes.len());
    }
    eprintln!(
        "trace bytes: traced step {}, plain step {}",
        sizes[0], sizes[1]
    );
    assert!(sizes[0] + 10_000 <= sizes[1], "{sizes:?}");
}

/// Entries, returns and direct flags are inline code (the thread's depth and direct flag are
/// in its accumulator): an object with traced calls and returns references no
/// `__tally_wtrace_ret` at all (every `ret` used to call it), and still the runtime's
/// `__tally_wtrace_enter` (the slow path of an announced entry).
#[test]
fn returns_are_inline() {
    let dir = scratch("wtrace-inline");
    let src = "static int leaf(int x) { return x > 2 ? x - 1 : x + 3; }\n\
               int mid(int x) { int s = 0; for (int i = 0; i < x; i++) s += leaf(i); return s; }\n\
               int main(void) { return mid(10) == 47 ? 0 : 1; }\n";
    std::fs::write(dir.join("m.c"), src).unwrap();
    let obj = dir.join("m.o");
    build(
        Variant::Tally("trace"),
        false,
        &["-O1", "-fno-inline", "-c", "m.c"],
        &obj,
        &dir,
    );
    let nm = std::process::Command::new("nm")
        .arg("-u")
        .arg(&obj)
        .output()
        .unwrap();
    let undefined = String::from_utf8_lossy(&nm.stdout);
    assert!(undefined.contains("__tally_wtrace_enter"), "{undefined}");
    assert!(!undefined.contains("__tally_wtrace_ret"), "{undefined}");
}

/// A trace's blocks per stream, the trace, and its regeneration.
type Streams = (
    std::collections::HashMap<u32, Seq>,
    tally_format::trace::WitnessTrace,
    tally_report::trace::Regenerated,
);

/// The blocks of `dir`'s regenerated trace per stream, the trace and its regeneration.
fn streams_of(dir: &Path) -> Streams {
    let prof = tally_format::profile::Profile::read_file(dir.join("prog.tally")).unwrap();
    let bytes = std::fs::read(dir.join("prog.trace")).unwrap();
    let r = tally_report::trace::regenerate(&bytes, &prof).unwrap();
    let mut by = std::collections::HashMap::<u32, Vec<(String, u32)>>::new();
    for b in &r.blocks {
        by.entry(b.thread)
            .or_default()
            .push((b.function.clone(), b.block));
    }
    let t = tally_format::trace::read_witness_trace(&bytes).unwrap();
    (by, t, r)
}

/// trace-naive's sequence cut into the interrupted code and the handler activations: each
/// activation starts at `handler`'s entry and runs while the blocks are `handler`'s or
/// `callee`'s (functions only the handler calls).
fn cut_handlers(seq: &[(String, u32)], handler: &str, callee: &str) -> (Seq, Vec<Seq>) {
    let (mut rest, mut acts) = (Vec::new(), Vec::<Vec<(String, u32)>>::new());
    let mut inside = false;
    for b in seq {
        if b.0 == handler && b.1 == 0 {
            acts.push(Vec::new());
            inside = true;
        } else if b.0 != handler && b.0 != callee {
            inside = false;
        }
        if inside {
            acts.last_mut().unwrap().push(b.clone());
        } else {
            rest.push(b.clone());
        }
    }
    (rest, acts)
}

/// Signals: a SIGSEGV handler that runs traced code interrupts traced code
/// between two records (`testdata/wtrace/signals.c`: stores to read-only pages in a loop, the
/// handler makes the page writable). The runtime runs each handler on a stream of its own,
/// described by a signal chunk (the interrupted stream, the signal); the interrupted stream
/// regenerates block for block as trace-naive's sequence without the handlers, each handler's
/// stream as trace-naive's handler activation, in order; with nested faults inside the handler
/// (`nested`, SA_NODEFER) the block counts equal trace-naive's. With a siglongjmp out of the
/// handler (`jump`), the interrupted stream is cut where the handler left it: regeneration
/// stops there saying so, the blocks before are trace-naive's, and the handlers before the jump
/// equal trace-naive's. Fails without the signal streams (the handler's records land in the
/// middle of the interrupted activation's) and without the cut chunk (regeneration of `jump`
/// would end as if `main` had returned).
#[test]
fn signal_handlers_get_streams_of_their_own() {
    let src = repo().join("testdata/wtrace/signals.c");
    let args = single(&src, "-O2");
    for mode in ["", "nested", "jump"] {
        let name = format!("signals-{}", if mode.is_empty() { "return" } else { mode });
        let run: Vec<&str> = if mode.is_empty() { vec![] } else { vec![mode] };
        let o = run_both_with(&name, false, &args, Some(0), &[], &run);
        let (by, trace, _) = streams_of(&o.dir.join("trace"));
        let main = *by
            .iter()
            .find(|(_, v)| v.iter().any(|b| b.0 == "main"))
            .unwrap()
            .0;
        assert!(
            trace
                .signals
                .iter()
                .all(|s| s.signal == SIGSEGV && by.contains_key(&s.stream)),
            "{name}: {:?}",
            trace.signals
        );
        let handlers: Vec<&Vec<(String, u32)>> = trace
            .signals
            .iter()
            .filter(|s| s.interrupted == main)
            .map(|s| &by[&s.stream])
            .collect();
        let (rest, acts) = cut_handlers(&o.oracle, "on_segv", "hwork");
        // `tally trace` says which threads are handlers (a line each for a few, per signal and
        // interrupted thread for many), in text and JSON.
        let tr = |json: bool| {
            let mut c = std::process::Command::new(tally());
            c.arg("trace").arg(o.dir.join("trace/prog.trace"));
            c.arg("--profile").arg(o.dir.join("trace/prog.tally"));
            if json {
                c.args(["--format", "json"]);
            }
            c.output().unwrap()
        };
        let text = String::from_utf8_lossy(&tr(false).stdout).to_string();
        let n = trace.signals.len();
        let want = if n <= 8 {
            format!(
                "thread {}: a handler of signal 11 that interrupted thread {main}",
                trace.signals[0].stream
            )
        } else {
            format!("handlers of signal 11 that interrupted thread {main}")
        };
        assert!(
            text.contains(&want),
            "{name}: {want:?} not in {}",
            &text[text.len().saturating_sub(600)..]
        );
        let j: serde_json::Value = serde_json::from_slice(&tr(true).stdout).unwrap();
        assert_eq!(
            j["signal_handlers"].as_array().map(Vec::len),
            Some(n),
            "{name}"
        );
        match mode {
            "" => {
                assert!(o.stopped.is_empty(), "{name}: {:?}", o.stopped);
                assert!(trace.cut.is_empty(), "{name}");
                assert_eq!(acts.len(), 192, "{name}: the program faults 192 times");
                assert_eq!(handlers.len(), acts.len(), "{name}: one stream per handler");
                assert!(
                    by[&main] == rest,
                    "{name}: interrupted stream: {}",
                    first_difference(&by[&main], &rest)
                );
                for (i, (h, a)) in handlers.iter().zip(&acts).enumerate() {
                    assert!(*h == a, "{name}: handler {i}: {}", first_difference(h, a));
                }
            }
            "nested" => {
                assert!(o.stopped.is_empty(), "{name}: {:?}", o.stopped);
                // 192 faults in the loop and 64 inside handlers, each a stream of its own.
                assert_eq!(trace.signals.len(), 192 + 64, "{name}");
                assert!(
                    trace
                        .signals
                        .iter()
                        .filter(|s| s.interrupted != main)
                        .count()
                        == 64,
                    "{name}: the nested ones interrupt a handler's stream"
                );
                let count = |v: &[(String, u32)]| {
                    let mut m = std::collections::BTreeMap::new();
                    for b in v {
                        *m.entry(b.clone()).or_insert(0u64) += 1;
                    }
                    m
                };
                assert_eq!(count(&o.regenerated), count(&o.oracle), "{name}");
            }
            _ => {
                assert_eq!(
                    trace.cut,
                    vec![main],
                    "{name}: the interrupted stream is cut"
                );
                assert!(
                    o.stopped.len() == 1 && o.stopped[0].contains("siglongjmp"),
                    "{name}: {:?}",
                    o.stopped
                );
                // The whole trace ends with the cut thread's reason (exit status 1); a
                // window of its first blocks is shown without regenerating up to the cut, so
                // neither the reason nor the status comes up.
                let stop_line = format!("thread {main}: a signal handler interrupted");
                assert_eq!(tr(false).status.code(), Some(1), "{name}");
                assert!(text.contains(&stop_line), "{name}");
                let head = std::process::Command::new(tally())
                    .arg("trace")
                    .arg(o.dir.join("trace/prog.trace"))
                    .args(["--limit", "5"])
                    .output()
                    .unwrap();
                let head_text = String::from_utf8_lossy(&head.stdout);
                assert_eq!(head.status.code(), Some(0), "{name}: {head_text}");
                assert!(!head_text.contains(&stop_line), "{name}: {head_text}");
                assert!(
                    head_text.starts_with("at most 5 blocks, regenerated from "),
                    "{name}: {head_text}"
                );
                // The first jump leaves the fifth handler; the thread writes no more.
                assert_eq!(handlers.len(), 5, "{name}");
                for (i, (h, a)) in handlers.iter().zip(&acts).enumerate() {
                    assert!(*h == a, "{name}: handler {i}: {}", first_difference(h, a));
                }
                let got = &by[&main];
                let same = got.iter().zip(&rest).take_while(|(x, y)| x == y).count();
                // Regeneration may walk a few blocks past the last record, not necessarily
                // the way the program went (it stops where it needs the next record).
                assert!(
                    same > 100 && got.len() - same <= 8,
                    "{name}: {same} of {} blocks as trace-naive's: {}",
                    got.len(),
                    first_difference(got, &rest)
                );
            }
        }
    }
}

/// SIGSEGV's number on Linux (the signal chunk's field).
const SIGSEGV: u32 = 11;

/// A SIGALRM timer (200 us) interrupts a loop at arbitrary points, 300 times; the handler runs
/// traced code. Every handler gets a stream (300 signal chunks) and every stream regenerates
/// completely; the regenerated entries of the handler and of the loop's function equal the
/// program's own counts (stderr: the runs differ, so no oracle run can match), also range-coded
/// (`TALLY_TRACE_COMPRESS=1`) and under `trace-naive`, whose runtime used to wait for ever when
/// a handler interrupted the writing of a record (its lock's holder). `storm` (trace only):
/// every 20 us, 3000 times, over a loop writing more trace, so that handlers also interrupt the
/// runtime while it writes a chunk (about 10-20 a run here; they then write their own whole
/// chunks, one `write` each).
#[test]
fn timer_signals_regenerate_to_the_programs_counts() {
    let src = repo().join("testdata/wtrace/signals.c");
    let dir = scratch("wtrace-signals-alarm");
    let args = single(&src, "-O2");
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let counts = |v: &[(String, u32)], f: &str| v.iter().filter(|b| b.0 == f && b.1 == 0).count();
    for (mode, run) in [
        ("trace", "alarm"),
        ("trace", "storm"),
        ("trace-naive", "alarm"),
    ] {
        let vdir = dir.join(mode);
        if !vdir.join("prog").exists() {
            std::fs::create_dir_all(&vdir).unwrap();
            build(Variant::Tally(mode), false, &a, &vdir.join("prog"), &dir);
        }
        for compress in ["0", "1"] {
            if mode == "trace-naive" && compress == "1" {
                continue;
            }
            let mut child = std::process::Command::new("./prog")
                .arg(run)
                .current_dir(&vdir)
                .env("TALLY_PROFILE", vdir.join("prog.tally"))
                .env("TALLY_TRACE", vdir.join("prog.trace"))
                .env("TALLY_TRACE_COMPRESS", compress)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let start = std::time::Instant::now();
            while child.try_wait().unwrap().is_none() {
                if start.elapsed().as_secs() > 120 {
                    child.kill().unwrap();
                    panic!("{mode}: the program hangs");
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{mode}: {out:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            let w: Vec<usize> = err
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            let (calls, ticks) = (w[0], w[1]);
            assert!(ticks >= 300 && calls > 0, "{mode} {run}: {err}");
            let seq = if mode == "trace" {
                let (by, trace, r) = streams_of(&vdir);
                assert!(r.stopped.is_empty(), "{mode} {compress}: {:?}", r.stopped);
                assert_eq!(
                    trace.signals.len(),
                    ticks,
                    "{mode} {compress}: signal streams"
                );
                assert!(by.len() > ticks, "{mode} {compress}");
                r.blocks
                    .iter()
                    .map(|b| (b.function.clone(), b.block))
                    .collect::<Vec<_>>()
            } else {
                let prof =
                    tally_format::profile::Profile::read_file(vdir.join("prog.tally")).unwrap();
                let naive = tally_format::trace::read_trace(
                    &std::fs::read(vdir.join("prog.trace")).unwrap(),
                )
                .unwrap();
                tally_report::trace_naive::block_sequence(&naive, &prof).unwrap()
            };
            assert_eq!(
                counts(&seq, "on_alarm"),
                ticks,
                "{mode} {compress}: handler entries"
            );
            assert_eq!(
                counts(&seq, "crunch"),
                calls,
                "{mode} {compress}: loop calls"
            );
        }
    }
}

/// `--tally-trace-floor` (measurement only: the bench's `trace-floor`, docs/log/trace.md) keeps a
/// function's witnesses and drops the call protocol: on the callbacks program (`Enter` and
/// `Back` records from `qsort` and calls through pointers) its stream is the witnesses of the
/// default build's run (as `tally trace --stats` charges them), the thread's first `Enter` and
/// `End`, nothing else; the program's output and exit status are unchanged.
#[test]
fn floor_writes_the_witnesses_alone() {
    let dir = scratch("wtrace-floor");
    let src = dir.join("callbacks.c");
    std::fs::write(&src, CALLBACKS).unwrap();
    let o = run_both("callbacks-floor-default", false, &single(&src, "-O2"), 0);
    let stats = std::process::Command::new(tally())
        .args(["trace", "--stats", "--format", "json", "--profile"])
        .arg(o.dir.join("trace/prog.tally"))
        .arg(o.dir.join("trace/prog.trace"))
        .output()
        .unwrap();
    assert_eq!(stats.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    let kinds = v["kinds"].as_array().unwrap();
    let bits_of = |pre: &str| -> u64 {
        kinds
            .iter()
            .filter(|k| k["kind"].as_str().unwrap().starts_with(pre))
            .map(|k| k["bits"].as_u64().unwrap())
            .sum()
    };
    let (witness, control) = (bits_of("witness/"), bits_of("Enter") + bits_of("Back"));
    assert!(witness > 500 && control > 1000, "{v}");

    let one = single(&src, "-O2");
    let args: Vec<&str> = ["--tally-trace-registers=on", "--tally-trace-floor"]
        .into_iter()
        .chain(one.iter().map(String::as_str))
        .collect();
    build(
        Variant::Tally("trace"),
        false,
        &args,
        &dir.join("prog"),
        &dir,
    );
    let floor = prog_in(&dir, &[]).output().unwrap();
    let plain = prog_in(&o.dir.join("trace"), &[]).output().unwrap();
    assert_eq!(floor.status.code(), Some(0));
    assert_eq!(
        floor.stdout, plain.stdout,
        "the floor build's output differs"
    );
    let t =
        tally_format::trace::read_witness_trace(&std::fs::read(dir.join("prog.trace")).unwrap())
            .unwrap();
    assert_eq!(t.threads.len(), 1, "{:?}", t.threads.len());
    // The stream's bits up to its last set bit, `End`'s `1` (`0`, `0`, `1`, then padding).
    let s = &t.threads[0].1;
    let last = s.iter().rposition(|&b| b != 0).unwrap();
    let bits = (last * 8 + 8 - s[last].leading_zeros() as usize) as u64;
    assert!(
        bits >= witness + 3 && bits <= witness + 3 + 64,
        "floor stream {bits} bits, the default's witnesses {witness} (control {control})"
    );
    // The reader refuses such a trace in one line rather than regenerate nonsense.
    let refused = std::process::Command::new(tally())
        .args(["trace", "--profile"])
        .arg(dir.join("prog.tally"))
        .arg(dir.join("prog.trace"))
        .output()
        .unwrap();
    let err = String::from_utf8(refused.stderr).unwrap();
    assert!(
        refused.status.code() == Some(2)
            && err.lines().count() == 1
            && err.contains("--tally-trace-floor"),
        "{:?} {err}",
        refused.status
    );
}

/// Second entries (`split_entries` in tally-llvm's trace mode): `pub`, called directly in its
/// module, through a pointer and recursively, gets an internal body that the direct calls
/// enter without the direct flag, and keeps its public symbol; `sq`, static and only called
/// directly, needs no public entry; `vsum` (variable arguments) keeps one entry, and so does
/// every function of a `-pg` build. Block for block as `trace-naive`, with the public entries
/// entered from a pointer and from `qsort`; and the code of a file with several public entries
/// is the same in every build.
const SECOND_ENTRIES: &str = r#"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
static int __attribute__((noinline)) sq(int x) { return x > 5 ? x * x : x + 1; }
int __attribute__((noinline)) pub(int x) { return x <= 0 ? 0 : (x & 1 ? sq(x) : pub(x - 3)); }
int __attribute__((noinline)) vsum(int n, ...) {
    va_list ap; va_start(ap, n); int s = 0;
    for (int i = 0; i < n; i++) s += va_arg(ap, int);
    va_end(ap); return s;
}
int __attribute__((noinline)) cmp(const void *a, const void *b) {
    return pub(*(const int *)a) - pub(*(const int *)b);
}
int (*volatile fp)(int) = pub;
int main(void) {
    long s = 0;
    int a[64];
    for (int i = 0; i < 2000; i++) {
        s += pub(i % 50) + fp(i % 17) + vsum(3, i, sq(i % 9), 1);
        a[i % 64] = i * 7919 % 101;
    }
    qsort(a, 64, sizeof a[0], cmp);
    printf("%ld %d %d\n", s, a[0], a[63]);
    return 0;
}
"#;

#[test]
fn second_entries_regenerate_exactly() {
    let dir = scratch("wtrace-second-src");
    let src = dir.join("second.c");
    std::fs::write(&src, SECOND_ENTRIES).unwrap();
    let o = exact("second-entries", &single(&src, "-O2"), 0);
    assert!(o.oracle.len() > 10_000, "too little compared");
    let nm = std::process::Command::new("nm")
        .arg(o.dir.join("trace/prog"))
        .output()
        .unwrap();
    let syms = String::from_utf8(nm.stdout).unwrap();
    let has = |s: &str| syms.lines().any(|l| l.ends_with(s));
    assert!(has(" T pub") && has(" t pub.tally.body"), "{syms}");
    assert!(has(" t sq") && !has("sq.tally.body"), "{syms}");
    assert!(has(" T vsum") && !has("vsum.tally.body"), "{syms}");
    // With an entry hook (`-pg`'s `mcount`) every function keeps one entry: the hook runs
    // once a call.
    let asm = dir.join("second-pg.s");
    let st = std::process::Command::new(tally())
        .args(["cc", "--tally-mode=trace", "-O2", "-pg", "-S"])
        .arg(&src)
        .arg("-o")
        .arg(&asm)
        .status()
        .unwrap();
    assert!(st.success());
    let asm = std::fs::read_to_string(asm).unwrap();
    assert!(asm.contains("mcount") && !asm.contains(".tally.body"));
    // The same input gives the same code: Lua's `ldo.c`, whose public entries were once emitted
    // in a hash map's order, built three times.
    let lua = locate("lua");
    let built: Vec<String> = (0..3)
        .map(|i| {
            let out = dir.join(format!("ldo-{i}.s"));
            let st = std::process::Command::new(tally())
                .args([
                    "cc",
                    "--tally-mode=trace",
                    "-O2",
                    "-DLUA_USE_LINUX",
                    "-S",
                    "-I",
                ])
                .arg(&lua)
                .arg(lua.join("ldo.c"))
                .arg("-o")
                .arg(&out)
                .status()
                .unwrap();
            assert!(st.success());
            std::fs::read_to_string(out).unwrap()
        })
        .collect();
    assert!(
        built[0].matches(".tally.body:").count() >= 3,
        "too few second entries"
    );
    assert!(
        built[0] == built[1] && built[1] == built[2],
        "ldo.c's code differs between builds"
    );
}
