//! Witness tracing (`--tally-mode=trace`, Ball & Larus 1994 §4) against its oracle: the same
//! program built in `trace-naive` mode (every edge taken, per activation) and run on the same
//! input. The block sequence `tally trace` regenerates from the witnesses must equal trace-naive's,
//! block for block, `longjmp` and C++ exceptions included.
//! `tally report --trace` must give the block and edge counts of the `edges-naive` oracle.
//!
//! This module holds the helpers every group uses, each submodule one group of tests.

mod coded;
mod counts;
mod entries;
mod images;
mod regen;
mod signals;

use crate::support::*;
use std::path::{Path, PathBuf};

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
        let args = |mode: &str| -> Vec<String> {
            let flags = if mode == "trace" {
                self.trace_flags
            } else {
                &[]
            };
            flags
                .iter()
                .map(|f| f.to_string())
                .chain(self.args.iter().cloned())
                .collect()
        };
        let builds: Vec<_> = modes
            .iter()
            .map(|&m| (Variant::Tally(m), args(m)))
            .collect();
        prebuild_each(&builds, self.cxx);
        let mut outs = Vec::new();
        for (v, a) in &builds {
            let mode = v.name();
            let vdir = dir.join(mode);
            std::fs::create_dir_all(&vdir).unwrap();
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            build(*v, self.cxx, &a, &vdir.join("prog"), dir);
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

/// A trace's blocks per stream, the trace, and its regeneration.
type Streams = (
    std::collections::HashMap<u32, Seq>,
    tally_format::trace::WitnessTrace,
    tally_report::trace::Regenerated,
);
