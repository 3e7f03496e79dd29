//! The witness trace's flight recorder (`TALLY_TRACE_RING`) against the
//! `trace-naive` oracle: `testdata/ring/ring.c` built in both modes and run on the same input,
//! long enough for the ring to wrap many times, then ending by a fault (SIGSEGV), `abort()`, a
//! normal exit, or after a `tally_dump_trace()` halfway. The blocks regenerated from the ring
//! must be the tail of trace-naive's block sequence, block for block (up to the blocks the
//! reader says it walked past the last record), the call stack printed must be the oracle's
//! stack at its end, function and block, and the exit status (death by signal) must not change.

use crate::support::*;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use tally_format::profile::Profile;
use tally_format::trace::TraceRecord;
use tally_graph::EdgeId;
use tally_report::trace::{Regenerated, RingEnd};

/// Builds `testdata/ring/ring.c` under `dir/trace` and `dir/trace-naive`.
fn build_both(name: &str) -> PathBuf {
    build_both_of(name, "testdata/ring/ring.c", false, &[])
}

/// Builds `file` (C++ when `cxx`) under `dir/trace` (with the `trace_flags`) and
/// `dir/trace-naive`.
fn build_both_of(name: &str, file: &str, cxx: bool, trace_flags: &[&str]) -> PathBuf {
    let dir = scratch(&format!("wring-{name}"));
    let src = repo().join(file);
    let src = src.display().to_string();
    // The program includes the header `tally header` prints, for tally_dump_trace().
    let header = std::process::Command::new(tally())
        .arg("header")
        .output()
        .unwrap();
    assert!(header.status.success());
    let text = String::from_utf8(header.stdout).unwrap();
    assert!(text.contains("void tally_dump_trace(void);"), "{text}");
    std::fs::write(dir.join("tally.h"), text).unwrap();
    let include = format!("-I{}", dir.display());
    for mode in ["trace", "trace-naive"] {
        let vdir = dir.join(mode);
        std::fs::create_dir_all(&vdir).unwrap();
        let mut args = vec!["-O1", "-g", "-pthread", &include, &src];
        if mode == "trace" {
            args.extend_from_slice(trace_flags);
        }
        build(Variant::Tally(mode), cxx, &args, &vdir.join("prog"), &dir);
    }
    dir
}

/// `dir/mode/prog args` with its profile and trace there, and neither a flight recorder nor
/// the range coder.
fn prog_command(dir: &Path, mode: &str, args: &[&str]) -> std::process::Command {
    let vdir = dir.join(mode);
    let mut c = std::process::Command::new("./prog");
    c.args(args)
        .current_dir(&vdir)
        .env("TALLY_PROFILE", vdir.join("prog.tally"))
        .env("TALLY_TRACE", vdir.join("prog.trace"))
        .env_remove("TALLY_TRACE_RING")
        .env_remove("TALLY_TRACE_COMPRESS");
    c
}

/// Runs `dir/mode/prog args` with its profile and trace there (and `ring`, if any). With a
/// ring, `TALLY_TRACE_COMPRESS=1` too: a flight recorder stays raw (its reader starts
/// mid-stream), and when the ring size is refused the full trace is range-coded (trace format
/// 6), which every test here then regenerates.
fn run_prog(dir: &Path, mode: &str, args: &[&str], ring: Option<&str>) -> Output {
    let mut c = prog_command(dir, mode, args);
    if let Some(r) = ring {
        c.env("TALLY_TRACE_RING", r)
            .env("TALLY_TRACE_COMPRESS", "1");
    }
    c.output().unwrap()
}

/// Runs both builds on `args` (the trace build with `ring`): same exit status or signal, same
/// output. Returns the trace build's run.
fn run_pair(dir: &Path, args: &[&str], ring: &str) -> Output {
    let t = run_prog(dir, "trace", args, Some(ring));
    let n = run_prog(dir, "trace-naive", args, None);
    assert_eq!(t.status.code(), n.status.code(), "{args:?}");
    assert_eq!(t.status.signal(), n.status.signal(), "{args:?}");
    assert_eq!(t.stdout, n.stdout, "{args:?}");
    t
}

fn regenerate(dir: &Path, file: &str) -> Regenerated {
    let prof = Profile::read_file(dir.join("trace/prog.tally")).unwrap();
    let bytes = std::fs::read(dir.join("trace").join(file)).unwrap();
    if tally_format::trace::is_flight_recorder(&bytes) {
        assert_eq!(
            u32::from(bytes[8]),
            tally_format::trace::WTRACE_VERSION,
            "a flight recorder's file is never range-coded"
        );
    }
    tally_report::trace::regenerate(&bytes, &prof).unwrap()
}

type Block = (String, u32);

/// trace-naive's block sequence and, at its end, the stack of activations (bottom first,
/// each with its current block), simulated from its records.
fn oracle(dir: &Path, file: &str) -> (Vec<Block>, Vec<Block>) {
    oracle_of(dir, file, false)
}

/// [`oracle`] of a single-threaded program that may throw (`throws`).
fn oracle_of(dir: &Path, file: &str, throws: bool) -> (Vec<Block>, Vec<Block>) {
    let prof = Profile::read_file(dir.join("trace-naive/prog.tally")).unwrap();
    let bytes = std::fs::read(dir.join("trace-naive").join(file)).unwrap();
    let recs = tally_format::trace::read_trace(&bytes).unwrap();
    let seq = tally_report::trace_naive::block_sequence(&recs, &prof).unwrap();
    let cfgs = tally_report::trace_naive::function_cfgs(&prof).unwrap();
    // The live activations (entered, neither returned nor abandoned) with their current
    // block, by activation id (entry order). At the end only one thread has any. (An
    // activation that takes an edge is running: the activations entered after it are over,
    // abandoned by an exception if they did not return; the programs are single-threaded
    // where they throw.)
    let mut live: std::collections::BTreeMap<u64, ((u64, u32), u32)> = Default::default();
    for r in &recs {
        match *r {
            TraceRecord::Enter {
                act,
                module,
                function,
            } => {
                let entry = cfgs[&(module, function)].1.entry().index() as u32;
                live.insert(act, ((module, function), entry));
            }
            TraceRecord::Edge { act, edge } => {
                if throws {
                    live.split_off(&(act + 1));
                }
                let a = live.get_mut(&act).expect("an edge of no live activation");
                let cfg = &cfgs[&a.0].1;
                let dst = cfg.edge(EdgeId::new(edge as usize)).dst;
                if cfg.is_exit(dst) {
                    live.remove(&act);
                } else {
                    a.1 = dst.index() as u32;
                }
            }
        }
    }
    let stack = live.values().map(|a| (cfgs[&a.0].0.clone(), a.1)).collect();
    (seq, stack)
}

/// The blocks of `thread`.
fn thread_blocks(r: &Regenerated, thread: u32) -> Vec<Block> {
    r.blocks
        .iter()
        .filter(|b| b.thread == thread)
        .map(|b| (b.function.clone(), b.block))
        .collect()
}

/// The regenerated tail `tail` (of which the first `end.certain` blocks precede the last
/// record) must be the end of `oracle`, possibly without some of the blocks walked past the
/// last record. Returns how many of those the oracle has.
fn assert_tail(what: &str, tail: &[Block], end: &RingEnd, oracle: &[Block]) -> usize {
    assert_eq!(end.blocks, tail.len(), "{what}");
    assert!(end.certain > 1000, "{what}: only {} blocks", end.certain);
    assert!(
        oracle.len() > 3 * tail.len(),
        "{what}: the ring kept {} of {} blocks: it did not wrap",
        tail.len(),
        oracle.len()
    );
    let m = (0..=tail.len() - end.certain)
        .find(|&m| oracle.ends_with(&tail[..end.certain + m]))
        .unwrap_or_else(|| {
            let c = end.certain;
            panic!(
                "{what}: the regenerated tail is not the oracle's: its last certain blocks {:?}, the oracle's last {:?}",
                &tail[c.saturating_sub(5)..c],
                &oracle[oracle.len().saturating_sub(8)..]
            )
        });
    eprintln!(
        "{what}: {} blocks regenerated from the ring ({} walked past the last record, {m} of them run), oracle {} blocks",
        tail.len(),
        tail.len() - end.certain,
        oracle.len()
    );
    m
}

/// The printed stack (top first) as `(function, block)`, bottom first.
fn ring_stack(end: &RingEnd) -> Vec<Block> {
    end.stack
        .iter()
        .rev()
        .map(|f| {
            (
                f.function.clone(),
                f.block.expect("a frame without a block"),
            )
        })
        .collect()
}

/// A SIGSEGV, and `abort()`, after a long run: killed by the same signal as without the
/// recorder; the ring's tail is trace-naive's, and the call stack at the crash is the
/// oracle's (functions and blocks, the faulting block on top).
#[test]
fn crash_tail_and_stack_equal_trace_naive() {
    crash_tail_and_stack(&build_both("crash"), false);
}

/// The same with Ball-Larus path numbers instead of witnesses (`--tally-trace=paths`): the
/// ring's tail starts inside some path, and its records still regenerate the oracle's tail.
#[test]
fn crash_tail_and_stack_equal_trace_naive_with_path_numbers() {
    let dir = build_both_of(
        "crash-paths",
        "testdata/ring/ring.c",
        false,
        &["--tally-trace=paths"],
    );
    crash_tail_and_stack(&dir, true);
    let prof = Profile::read_file(dir.join("trace/prog.tally")).unwrap();
    let on_paths: Vec<&str> = prof
        .modules
        .iter()
        .flat_map(|m| &m.meta.functions)
        .filter(|f| f.wtrace().is_some_and(|w| w.paths.is_some()))
        .map(|f| f.name.as_str())
        .collect();
    assert!(on_paths.contains(&"deep"), "{on_paths:?}");
}

/// `paths`: the functions record Ball-Larus path numbers, written at each path's end, so a
/// fault inside a path leaves that path unrecorded: the tail then stops in the faulting
/// activation where its number is needed, before the faulting block (docs/log/trace.md, "Path
/// numbers instead of witnesses"), and the stack's top block is where it stopped.
fn crash_tail_and_stack(dir: &Path, paths: bool) {
    let dir = dir.to_path_buf();
    for (how, sig) in [("segv", libc_sig("SEGV")), ("abort", libc_sig("ABRT"))] {
        let out = run_pair(&dir, &[how, "100"], "2K");
        assert_eq!(out.status.signal(), Some(sig), "{how}");
        assert!(
            out.stderr.is_empty(),
            "{how}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r = regenerate(&dir, "prog.trace");
        assert_eq!(r.ring.len(), 1, "{how}");
        let end = &r.ring[0];
        let (seq, stack) = oracle(&dir, "prog.trace");
        let tail = thread_blocks(&r, end.thread);
        let names: Vec<&str> = stack.iter().map(|b| b.0.as_str()).collect();
        assert_eq!(
            names,
            ["main", "deep", "deep", "deep", "deep", "crash_here"],
            "{how}"
        );
        assert_eq!(end.depth, 6, "{how}");
        let mut top_block = stack[5].1;
        if paths && how == "segv" {
            // The oracle's blocks after the tail are the faulting path's, in `crash_here`.
            let lost = seq.iter().rev().take_while(|b| b.0 == "crash_here").count();
            assert!(lost > 0, "{how}: {:?}", &seq[seq.len() - 3..]);
            let kept = &seq[..seq.len() - lost];
            assert_eq!(end.blocks, tail.len(), "{how}");
            assert!(end.certain > 1000, "{how}: only {} blocks", end.certain);
            assert!(seq.len() > 3 * tail.len(), "{how}: the ring did not wrap");
            assert!(
                kept.ends_with(&tail[..tail.len() - 1]),
                "{how}: the tail is not the oracle's: {:?}, the oracle's last {:?}",
                &tail[tail.len().saturating_sub(5)..],
                &seq[seq.len().saturating_sub(8)..]
            );
            assert_eq!(tail.last(), seq.get(seq.len() - lost), "{how}");
            // None of `crash_here`'s blocks is certain: it wrote no record. (When the ring's
            // stream ended with `End`, the reader took `End`'s bits for the path's number.)
            assert_ne!(tail[end.certain - 1].0, "crash_here", "{how}");
            let got = ring_stack(end);
            assert_eq!(got[..5], stack[..5], "{how}");
            assert_eq!(got[5], *tail.last().unwrap(), "{how}");
            top_block = got[5].1;
        } else {
            assert_tail(how, &tail, end, &seq);
            assert_eq!(ring_stack(end), stack, "{how}");
        }
        // `tally trace` prints the stack with source lines.
        let text = std::process::Command::new(tally())
            .arg("trace")
            .arg(dir.join("trace/prog.trace"))
            .args(["--from", "0", "--limit", "3"])
            .output()
            .unwrap();
        let text = String::from_utf8(text.stdout).unwrap();
        assert!(
            text.contains("call stack at the end (6 activations)"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.contains("#0") && l.contains("crash_here") && l.contains("ring.c:")),
            "{text}"
        );
        let json = std::process::Command::new(tally())
            .arg("trace")
            .arg(dir.join("trace/prog.trace"))
            .args(["--format", "json", "--limit", "1"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let top = &v["ring"][0]["stack"][0];
        assert_eq!(top["function"], "crash_here", "{v}");
        assert_eq!(top["block"].as_u64(), Some(u64::from(top_block)), "{v}");
        assert!(top["line"].as_u64().unwrap() > 0, "{v}");
    }
}

/// The signal numbers of this platform (Linux).
fn libc_sig(name: &str) -> i32 {
    match name {
        "SEGV" => 11,
        "ABRT" => 6,
        _ => unreachable!(),
    }
}

/// Signal handlers under a flight recorder (`testdata/wtrace/signals.c`, modes `tail`,
/// `tail-nested`, `tail-abort`): a SIGSEGV handler interrupts the traced loop between two
/// records, 196 times, the last few within the ring's tail. A handler that interrupts traced
/// code runs on a stream of its own that records nothing with a flight recorder
/// (docs/design/trace.md, "Signal handlers in witness traces"), so the thread's ring stays exact:
/// its tail is trace-naive's sequence without the handlers' blocks (`on_segv`, `hwork`), and
/// the ring holds no other stream; with nested faults too; and when a handler calls `abort()`
/// the process dies of SIGABRT as without the recorder, the tail ends where the handler
/// interrupted the loop, and the stack at the end is the interrupted thread's.
#[test]
fn signal_handlers_leave_the_ring_exact() {
    let dir = build_both_of("signals", "testdata/wtrace/signals.c", false, &[]);
    let handler = |b: &Block| b.0 == "on_segv" || b.0 == "hwork";
    for mode in ["tail", "tail-nested", "tail-abort"] {
        let out = run_pair(&dir, &[mode], "1K");
        if mode == "tail-abort" {
            assert_eq!(out.status.signal(), Some(libc_sig("ABRT")), "{mode}");
        } else {
            assert_eq!(out.status.code(), Some(0), "{mode}");
        }
        let r = regenerate(&dir, "prog.trace");
        assert!(r.stopped.is_empty(), "{mode}: {:?}", r.stopped);
        assert_eq!(r.ring.len(), 1, "{mode}: streams in the ring");
        let end = &r.ring[0];
        let (seq, stack) = oracle(&dir, "prog.trace");
        let cut = seq.iter().rposition(|b| !handler(b)).unwrap() + 1;
        let unhandled =
            |s: &[Block]| -> Vec<Block> { s.iter().filter(|b| !handler(b)).cloned().collect() };
        let tail = thread_blocks(&r, end.thread);
        // The handler activations among the oracle's blocks the tail covers (its certain ones).
        let (mut i, mut n) = (cut, 0);
        while i > 0 && n < end.certain {
            i -= 1;
            n += usize::from(!handler(&seq[i]));
        }
        let handlers = seq[i..cut].iter().filter(|b| b.0 == "on_segv" && b.1 == 0);
        let handlers = handlers.count();
        assert!(handlers >= 4, "{mode}: {handlers} handlers in the tail");
        let seq = unhandled(&seq[..cut]);
        assert_tail(mode, &tail, end, &seq);
        if mode == "tail-abort" {
            // The stack: the interrupted thread's, without the handler's activations.
            let stack: Vec<Block> = stack.into_iter().filter(|b| !handler(b)).collect();
            assert_eq!(
                ring_stack(end).iter().map(|b| &b.0).collect::<Vec<_>>(),
                stack.iter().map(|b| &b.0).collect::<Vec<_>>(),
                "{mode}: stack"
            );
        } else {
            assert!(
                seq.ends_with(&tail),
                "{mode}: the whole tail is the oracle's"
            );
        }
    }
}

/// A normal exit writes the ring: its tail is the oracle's, to the last block, and no
/// activation is left.
#[test]
fn exit_tail_equals_trace_naive() {
    let dir = build_both("exit");
    let out = run_pair(&dir, &["exit", "100"], "2K");
    assert_eq!(out.status.code(), Some(0));
    let r = regenerate(&dir, "prog.trace");
    assert!(r.stopped.is_empty(), "{:?}", r.stopped);
    let end = &r.ring[0];
    let (seq, stack) = oracle(&dir, "prog.trace");
    let tail = thread_blocks(&r, end.thread);
    assert_tail("exit", &tail, end, &seq);
    assert!(seq.ends_with(&tail), "exit: the whole tail is the oracle's");
    assert!(stack.is_empty());
    assert_eq!(end.depth, 0);
    // A ring has no counts: `tally report --trace` says so in one line.
    let rep = std::process::Command::new(tally())
        .args(["report", "--trace"])
        .arg(dir.join("trace/prog.trace"))
        .arg(dir.join("trace/prog.tally"))
        .output()
        .unwrap();
    assert_ne!(rep.status.code(), Some(0));
    let err = String::from_utf8(rep.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("flight recorder"), "{err}");
}

/// `tally_dump_trace()` halfway (the program copies the file right after): the snapshot's
/// tail is the oracle's sequence up to the call, and its stack is `main -> snapshot`.
#[test]
fn dump_mid_run_equals_trace_naive_prefix() {
    let dir = build_both("dump");
    let out = run_pair(&dir, &["dump", "100"], "2K");
    assert_eq!(out.status.code(), Some(0));
    let r = regenerate(&dir, "prog.trace.snap");
    let end = &r.ring[0];
    let (seq, _) = oracle(&dir, "prog.trace");
    let at = seq
        .iter()
        .position(|b| b.0 == "snapshot")
        .expect("snapshot in the oracle");
    let tail = thread_blocks(&r, end.thread);
    assert_eq!(tail.last().map(|b| b.0.as_str()), Some("snapshot"));
    assert_tail("dump", &tail, end, &seq[..=at]);
    let names: Vec<String> = ring_stack(end).into_iter().map(|b| b.0).collect();
    assert_eq!(names, ["main", "snapshot"]);
    assert!(
        at > 1000 && seq.len() - at > 1000,
        "not halfway: {at} of {}",
        seq.len()
    );
    // The file at the end is the ring at exit, not the snapshot.
    let last = regenerate(&dir, "prog.trace");
    let (_, stack) = oracle(&dir, "prog.trace");
    assert!(stack.is_empty() && last.ring[0].depth == 0);
    assert!(seq.ends_with(&thread_blocks(&last, last.ring[0].thread)));
}

/// Without a flight recorder, `tally_dump_trace()` writes what the thread's buffer holds (a
/// stream of words, trace format 9; with `TALLY_TRACE_COMPRESS=1` the coded chunk, which it
/// ends) and the stream goes on: the file at the end regenerates block for block as
/// trace-naive's, and the copy taken right after the dump holds a prefix of its stream.
#[test]
fn dump_without_a_ring_keeps_the_stream_exact() {
    let dir = build_both("dump-plain");
    let args = ["dump", "2000"];
    let naive = run_prog(&dir, "trace-naive", &args, None);
    assert_eq!(naive.status.code(), Some(0));
    let (seq, _) = oracle(&dir, "prog.trace");
    for coded in [false, true] {
        let vdir = dir.join("trace");
        let mut c = prog_command(&dir, "trace", &args);
        if coded {
            c.env("TALLY_TRACE_COMPRESS", "1");
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "coded {coded}");
        assert_eq!(out.stdout, naive.stdout, "coded {coded}");
        let bytes = std::fs::read(vdir.join("prog.trace")).unwrap();
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        let want = if coded {
            tally_format::trace::WTRACE_VERSION_CODED
        } else {
            tally_format::trace::WTRACE_VERSION_WORDS
        };
        assert_eq!(version, want, "coded {coded}");
        let prof = Profile::read_file(vdir.join("prog.tally")).unwrap();
        let r = tally_report::trace::regenerate(&bytes, &prof).unwrap();
        assert!(r.stopped.is_empty(), "coded {coded}: {:?}", r.stopped);
        // (without `snapshot`'s blocks: its copy loop runs once per 4 KiB of the file, which
        // trace-naive's is larger)
        let all: Vec<Block> = thread_blocks(&r, r.blocks[0].thread)
            .into_iter()
            .filter(|b| b.0 != "snapshot")
            .collect();
        let seq: Vec<Block> = seq.iter().filter(|b| b.0 != "snapshot").cloned().collect();
        let same = all.iter().zip(&seq).take_while(|(a, b)| a == b).count();
        assert!(
            all == seq,
            "coded {coded}: the whole run: {} blocks against {}, the same up to {same}: {:?} / {:?}",
            all.len(),
            seq.len(),
            &all[same.saturating_sub(3)..(same + 3).min(all.len())],
            &seq[same.saturating_sub(3)..(same + 3).min(seq.len())]
        );
        // The copy: a prefix of the stream (but for the last byte's padding), which does not
        // regenerate alone (the resolution of external calls comes at the end): one error.
        let snap = std::fs::read(vdir.join("prog.trace.snap")).unwrap();
        let (st, ft) = (
            tally_format::trace::read_witness_trace(&snap).unwrap(),
            tally_format::trace::read_witness_trace(&bytes).unwrap(),
        );
        let (a, b) = (&st.threads[0].1, &ft.threads[0].1);
        assert!(
            a.len() > 10_000 && a.len() < b.len() && b.starts_with(&a[..a.len() - 1]),
            "coded {coded}: the dump's {} stream bytes, the end's {}",
            a.len(),
            b.len()
        );
        let err = tally_report::trace::regenerate(&snap, &prof)
            .unwrap_err()
            .to_string();
        assert!(err.contains("does not resolve"), "coded {coded}: {err}");
    }
}

/// Worker threads, joined, then the main thread faults: every thread has its ring; the
/// workers' end with no activation left, the main thread's tail is the oracle's (whose last
/// blocks are the main thread's alone) and its stack the oracle's.
#[test]
fn threads_each_have_a_ring() {
    let dir = build_both("threads");
    let out = run_pair(&dir, &["segv", "30", "3"], "1K");
    assert_eq!(out.status.signal(), Some(libc_sig("SEGV")));
    let r = regenerate(&dir, "prog.trace");
    assert_eq!(r.ring.len(), 4, "{:?}", r.ring);
    let (seq, stack) = oracle(&dir, "prog.trace");
    let main = r
        .ring
        .iter()
        .find(|e| e.depth > 0)
        .expect("the main thread's ring");
    for e in r.ring.iter().filter(|e| e.thread != main.thread) {
        assert_eq!(e.depth, 0, "worker {}", e.thread);
        assert!(e.blocks > 1000, "worker {}: {} blocks", e.thread, e.blocks);
        assert!(
            !r.stopped.iter().any(|s| s.0 == e.thread),
            "worker {}: {:?}",
            e.thread,
            r.stopped
        );
    }
    assert_tail("threads", &thread_blocks(&r, main.thread), main, &seq);
    assert_eq!(ring_stack(main), stack);
}

/// Recursion 400 deep with work at the bottom, then the fault: there the activations' sync
/// header (3 bytes each) would exceed a quarter of the 4K ring, so no chunk starts while that
/// deep (the current chunk goes on, unpadded); the tail, which covers the way back up, and
/// the stack at the fault are still the oracle's.
#[test]
fn too_deep_to_synchronize() {
    let dir = build_both("deep");
    let out = run_pair(&dir, &["segv", "100", "0", "400"], "4K");
    assert_eq!(out.status.signal(), Some(libc_sig("SEGV")));
    let r = regenerate(&dir, "prog.trace");
    let end = &r.ring[0];
    let (seq, stack) = oracle(&dir, "prog.trace");
    assert_tail("deep", &thread_blocks(&r, end.thread), end, &seq);
    assert_eq!(stack.len(), 6);
    assert_eq!(end.depth, 6);
    assert_eq!(ring_stack(end), stack);
    let dives = thread_blocks(&r, end.thread)
        .iter()
        .filter(|b| b.0 == "dive")
        .count();
    assert!(
        dives > 600,
        "the tail does not cover the dive: {dives} blocks"
    );
}

/// A damaged ring file (bytes flipped, cut short) is read without a panic: an error, or a
/// thread that stops early.
#[test]
fn damaged_ring_files_do_not_panic() {
    let dir = build_both("damaged");
    run_pair(&dir, &["segv", "20"], "1K");
    let prof = Profile::read_file(dir.join("trace/prog.tally")).unwrap();
    let good = std::fs::read(dir.join("trace/prog.trace")).unwrap();
    let mut seed = 12345u64;
    let mut errors = 0;
    for i in 0..400 {
        let mut b = good.clone();
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let at = 16 + (seed >> 33) as usize % (b.len() - 16);
        if i % 4 == 0 {
            b.truncate(at);
        } else {
            b[at] ^= 1 << ((seed >> 20) % 8);
        }
        match tally_report::trace::regenerate(&b, &prof) {
            Ok(r) => errors += usize::from(!r.stopped.is_empty()),
            Err(_) => errors += 1,
        }
    }
    assert!(errors > 0);
}

/// A bad TALLY_TRACE_RING: one line on stderr, and the trace is the full one (the ring off),
/// equal to the oracle block for block.
#[test]
fn bad_ring_size_is_reported_and_ignored() {
    let dir = build_both("bad");
    for bad in ["12X", "100", "-5", "9999999999999999999999", "1M5"] {
        let out = run_pair(&dir, &["exit", "5"], bad);
        assert_eq!(out.status.code(), Some(0), "{bad}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{bad}: {err}");
        assert!(err.contains("TALLY_TRACE_RING"), "{bad}: {err}");
        let bytes = std::fs::read(dir.join("trace/prog.trace")).unwrap();
        assert_eq!(
            &bytes[8..12],
            &tally_format::trace::WTRACE_VERSION_CODED.to_le_bytes(),
            "{bad}: not range-coded"
        );
        let r = regenerate(&dir, "prog.trace");
        assert!(r.ring.is_empty() && r.stopped.is_empty(), "{bad}");
        let (seq, _) = oracle(&dir, "prog.trace");
        assert_eq!(thread_blocks(&r, 1), seq, "{bad}");
    }
}

/// The file written at the crash is opened like every trace file (`trace_open_file`): a
/// symlink in its place is replaced, never followed; a FIFO is refused, not waited on.
#[test]
fn ring_file_is_not_written_through_a_symlink_or_into_a_fifo() {
    let dir = build_both("symlink");
    let vdir = dir.join("trace");
    let file = vdir.join("prog.trace");
    let victim = vdir.join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    let _ = std::fs::remove_file(&file);
    std::os::unix::fs::symlink(&victim, &file).unwrap();
    let out = run_prog(&dir, "trace", &["segv", "5"], Some("4K"));
    assert_eq!(out.status.signal(), Some(libc_sig("SEGV")));
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    assert!(!std::fs::symlink_metadata(&file).unwrap().is_symlink());
    assert_eq!(regenerate(&dir, "prog.trace").ring.len(), 1);
    std::fs::remove_file(&file).unwrap();
    let mk = std::process::Command::new("mkfifo")
        .arg(&file)
        .status()
        .unwrap();
    assert!(mk.success());
    let out = run_prog(&dir, "trace", &["segv", "5"], Some("4K"));
    assert_eq!(out.status.signal(), Some(libc_sig("SEGV")));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("not writing the trace file"), "{err}");
    assert!(std::fs::symlink_metadata(&file)
        .unwrap()
        .file_type()
        .is_fifo());
}

/// C++ exceptions under the flight recorder (`testdata/wtrace/ring_throws.cpp`): many rounds
/// of throws through frames with destructors, catches and rethrows (each landing pad writes
/// `Unwind` and resets the shadow stack's depth), then a fault three frames deep right after
/// an exception landed there, or a normal exit. The ring's tail is trace-naive's and the
/// stack at the fault is the oracle's.
#[test]
fn exceptions_tail_and_stack_equal_trace_naive() {
    let dir = build_both_of("throws", "testdata/wtrace/ring_throws.cpp", true, &[]);
    let out = run_pair(&dir, &["3000", "segv"], "2K");
    assert_eq!(out.status.signal(), Some(libc_sig("SEGV")));
    let r = regenerate(&dir, "prog.trace");
    assert_eq!(r.ring.len(), 1);
    let end = &r.ring[0];
    let (seq, stack) = oracle_of(&dir, "prog.trace", true);
    let tail = thread_blocks(&r, end.thread);
    assert_tail("throws-segv", &tail, end, &seq);
    let names: Vec<&str> = stack.iter().map(|b| b.0.as_str()).collect();
    // (`deep`'s recursion may have become a loop.)
    assert!(names.len() >= 3, "{names:?}");
    assert!(
        names[0] == "main" && names[names.len() - 1].contains("crash_here"),
        "{names:?}"
    );
    assert_eq!(end.depth as usize, names.len());
    // The callers' blocks are exact; the top one is where regeneration stopped, which may be
    // past the faulting block (regeneration walks on until it needs a record; `crash_tail_…`
    // checks a fault where it cannot): it is among the blocks walked past the last record.
    let got = ring_stack(end);
    let n = stack.len();
    assert_eq!(got[..n - 1], stack[..n - 1]);
    assert_eq!(got[n - 1].0, stack[n - 1].0);
    assert!(tail[end.certain..].contains(&got[n - 1]), "{got:?}");
    assert!(tail[end.certain..].contains(&stack[n - 1]), "{stack:?}");
    let out = run_pair(&dir, &["3000", "exit"], "2K");
    assert_eq!(out.status.code(), Some(0));
    let r = regenerate(&dir, "prog.trace");
    assert!(r.stopped.is_empty(), "{:?}", r.stopped);
    let end = &r.ring[0];
    let (seq, stack) = oracle_of(&dir, "prog.trace", true);
    let tail = thread_blocks(&r, end.thread);
    assert_tail("throws-exit", &tail, end, &seq);
    assert!(
        seq.ends_with(&tail),
        "throws-exit: the whole tail is the oracle's"
    );
    assert!(stack.is_empty() && end.depth == 0);
}
