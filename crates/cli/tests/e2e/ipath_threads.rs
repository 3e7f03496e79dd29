//! Interprocedural path profiles under threads (per-thread state). A pthread
//! program — four threads, each running recursive (`fib`), mutually recursive (`even`/`odd`)
//! and directly calling (`mid` -> `leaf`, `odd` -> `leaf`) functions of one translation unit
//! on its own inputs, entered through a table of function pointers — is built in `ipath`,
//! `ipath-piecewise`, `edges-naive` and `trace-naive` mode and run under three schedules:
//!
//! - `free`: the threads run at once, 3000 rounds of work each (builds with `--tally-atomic`,
//!   as threads require);
//! - `seq`: the same work, one thread after the other;
//! - `token`: one round; one thread runs at a time and hands a token to the next one from
//!   *inside* the set's activations (`leaf` and `fib` call `yield_to`, which posts the next
//!   thread's semaphore and waits on its own), so every thread is suspended, again and again,
//!   in the middle of interprocedural paths, with calls pending, while the others run theirs.
//!
//! Under `free` and `token`, every block and edge count derived from the interprocedural paths
//! equals the `edges-naive` oracle's. The path counts of prog.c's set under `free` equal those
//! under `seq` (the threads run the same code of prog.c under both; only sched.c differs).
//! Under `token`, the path counts equal the `trace-naive` trace cut per thread
//! (`support/ipath_cut.rs`): the trace is one stream of records without thread ids, but the
//! token makes it splittable — an edge record names its activation, whose thread is known; an
//! entry record belongs to the thread that holds the token, which is the thread of the last
//! edge record, except for edges of threads that gave the token away for good (`handoff`,
//! entered to pass it on at a thread's end and by `main` to start the first thread: their later
//! records only unwind) and entries of `worker` (a new thread). The split checks itself: every
//! edge record must belong to its thread's innermost activation.
//! `yield_to` is declared `pure` (`nounwind willreturn`), so the set's functions may call it
//! (a call that cannot end the caller's frame: a summary edge) — the thread switches happen
//! with set activations live; `via` (also `pure`) calls a set function back from inside a set
//! activation (`nest`), so threads switch at different depths of nested roots.
//!
//! What it catches (checked 2026-11-24 by making the runtime's four thread-locals plain
//! globals: `c/ipath.c`, `include/tally.h` and the instrumenter's `LLVMSetThreadLocalMode`):
//! `ipath-piecewise` fails every time under `token` (`leaf` block n1: 36 against
//! edges-naive's 45; six path numbers differ from the trace cut), since piecewise keeps
//! `open` in a thread-local across summary calls. Context mode keeps nothing in them across a
//! call that can block (its handshake and returned register are written and read with no call
//! between), so only threads racing inside those few instructions show shared state: `free`
//! caught it in 3 of 4 runs (a block count off by one, or a path number out of range), and in
//! 1 of 3 with 300 rounds; with the real runtime every run passed.

use crate::support::ipath_cut;
use crate::support::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use tally_format::profile::Profile;
use tally_format::trace::TraceRecord;

const PROG: &str = r#"#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4
extern sem_t turns[];
void setup(const char *schedule, int n);
void finish(int me);
/* Hands the token to the next thread and waits for it (token schedule); returns 0. */
int yield_to(int me) __attribute__((nothrow, pure));
/* Calls f(me, x) (sched.c): a set function entered under a set activation's pending call. */
int via(int (*f)(int, int), int me, int x) __attribute__((nothrow, pure));

__attribute__((noinline)) static int leaf(int me, int x) {
    if (x % 4 == 0)
        x += yield_to(me);
    return (x & 1) ? 3 * x + 1 : x / 2;
}
__attribute__((noinline)) static int even(int me, int n);
__attribute__((noinline)) static int odd(int me, int n) {
    return n == 0 ? 0 : leaf(me, n) + even(me, n - 1);
}
__attribute__((noinline)) static int even(int me, int n) { return n == 0 ? 1 : odd(me, n - 1); }
__attribute__((noinline)) static int fib(int me, int n) {
    if (n < 2)
        return n + yield_to(me);
    return fib(me, n - 1) + fib(me, n - 2);
}
__attribute__((noinline)) static int mid(int me, int x) {
    int s = 0;
    for (int i = 0; i < x % 4; i++)
        s += leaf(me, x + i);
    return s + even(me, x % 7);
}

/* Roots nested inside a set activation: threads switch at different depths of roots. */
__attribute__((noinline)) static int nest(int me, int x) {
    return via(x % 2 ? fib : odd, me, x % 6) + leaf(me, x);
}

typedef int op(int, int);
static op *const ops[] = {mid, odd, fib, leaf, nest};

/* Calls through pointers: the set functions they enter are roots. The direct call of mid
 * comes first in the block: the trace does not say which call entered mid, and the
 * conversion (support/ipath_cut.rs) takes the block's next direct call of it when one is left. */
__attribute__((noinline)) static int dispatch(int me, int i, int x) {
    int m = mid(me, i);
    return ops[(i + me) % 5](me, x % 9) + m;
}

static long results[N];
static int rounds = 1;

static void *worker(void *arg) {
    int me = (int)(intptr_t)arg;
    sem_wait(&turns[me]);
    long t = 0;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < 10 + 4 * me; i++)
            t += dispatch(me, i, i * (me + 3) + 1);
    results[me] = t;
    finish(me);
    return 0;
}

int main(int argc, char **argv) {
    int token = argc > 1 && strcmp(argv[1], "token") == 0;
    if (argc > 2)
        rounds = atoi(argv[2]);
    pthread_t th[N];
    setup(argv[1], N);
    for (int i = 0; i < N; i++)
        pthread_create(&th[i], 0, worker, (void *)(intptr_t)i);
    if (token)
        finish(-1);
    long t = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], 0);
        t += results[i] * (i + 1);
    }
    printf("%ld\n", t);
    return 0;
}
"#;

const SCHED: &str = r#"#include <semaphore.h>
#include <string.h>

#define MAXT 8
sem_t turns[MAXT];
static int token_mode, seq_mode, n_threads, done[MAXT];
static volatile int yields;

/* free: every thread at once; seq: one after the other; token: taking turns (yield_to). */
void setup(const char *schedule, int n) {
    token_mode = strcmp(schedule, "token") == 0;
    seq_mode = strcmp(schedule, "seq") == 0;
    n_threads = n;
    for (int i = 0; i < n; i++)
        sem_init(&turns[i], 0, token_mode || (seq_mode && i > 0) ? 0 : 1);
}

static int next_live(int me) {
    for (int k = 1; k <= n_threads; k++) {
        int j = (me + k + n_threads) % n_threads;
        if (j != me && !done[j])
            return j;
    }
    return -1;
}

/* Gives the token away for good: the caller ends (or is main, which only joins). */
__attribute__((noinline)) void handoff(int next) { sem_post(&turns[next]); }

void finish(int me) {
    if (me >= 0)
        done[me] = 1;
    if (seq_mode && me >= 0 && me + 1 < n_threads)
        handoff(me + 1);
    if (!token_mode)
        return;
    int next = next_live(me);
    if (next >= 0)
        handoff(next);
}

int via(int (*f)(int, int), int me, int x) { return f(me, x); }

int yield_to(int me) {
    if (!token_mode)
        return 0;
    int next = next_live(me);
    if (next < 0)
        return 0;
    sem_post(&turns[next]);
    sem_wait(&turns[me]);
    yields++;
    return 0;
}
"#;

/// Splits the trace of a `token` run into per-thread record streams (module doc): main's
/// first, then each worker's. Also returns how often the token changed hands while the
/// thread giving it up had an activation of a function of `set` live.
fn split(
    trace: &[TraceRecord],
    naive: &Profile,
    set: &BTreeSet<String>,
) -> (Vec<Vec<TraceRecord>>, usize) {
    let names = tally_report::trace_naive::function_cfgs(naive).unwrap();
    let mut threads: Vec<Vec<TraceRecord>> = vec![Vec::new()];
    // Per thread: its live activations (activation, function key); retired (gave the token
    // away for good); ended.
    let mut stacks: Vec<Vec<(u64, (u64, u32))>> = vec![Vec::new()];
    let mut retired = vec![false];
    let mut act_thread: HashMap<u64, usize> = HashMap::new();
    let (mut cur, mut switches, mut ended) = (0, 0, 0);
    for (at, r) in trace.iter().enumerate() {
        match *r {
            TraceRecord::Enter {
                act,
                module,
                function,
            } => {
                let name = &names[&(module, function)].0;
                let t = if name == "worker" {
                    threads.push(Vec::new());
                    stacks.push(Vec::new());
                    retired.push(false);
                    threads.len() - 1
                } else {
                    cur
                };
                if name == "handoff" {
                    retired[t] = true;
                }
                act_thread.insert(act, t);
                stacks[t].push((act, (module, function)));
                threads[t].push(*r);
            }
            TraceRecord::Edge { act, edge } => {
                let t = *act_thread
                    .get(&act)
                    .unwrap_or_else(|| panic!("record {at}: unknown activation {act}"));
                threads[t].push(*r);
                if !retired[t] && t != cur {
                    if stacks[cur].iter().any(|(_, k)| set.contains(&names[k].0)) {
                        switches += 1;
                    }
                    cur = t;
                }
                let &(top, key) = stacks[t]
                    .last()
                    .unwrap_or_else(|| panic!("record {at}: thread {t} has no activation"));
                assert_eq!(
                    top, act,
                    "record {at}: thread {t}: not its innermost activation"
                );
                if names[&key]
                    .1
                    .edge(tally_graph::EdgeId::new(edge as usize))
                    .kind
                    == tally_graph::EdgeKind::Return
                {
                    stacks[t].pop();
                    if t > 0 && stacks[t].is_empty() {
                        ended += 1;
                        if ended == WORKERS {
                            // Every worker ended: main runs on.
                            cur = 0;
                            retired[0] = false;
                        }
                    }
                }
            }
        }
    }
    (threads, switches)
}

/// Builds both sources in `mode` (threads need `--tally-atomic`; trace-naive serializes its
/// records itself) at `opt`.
fn build_mode(dir: &Path, mode: &'static str, opt: &str) {
    let mut args = vec![opt, "-g", "prog.c", "sched.c", "-pthread"];
    if mode != "trace-naive" {
        args.push("--tally-atomic");
    }
    build(Variant::Tally(mode), false, &args, &dir.join(mode), dir);
}

/// Runs the `mode` build under `schedule`: `token` once, `free` and `seq` with 3000 rounds of
/// each thread's work (so that free threads overlap and race on anything they share).
fn run_mode(dir: &Path, mode: &str, schedule: &str) -> Vec<u8> {
    let rounds = if schedule == "token" { "1" } else { "3000" };
    let out = std::process::Command::new(dir.join(mode))
        .args([schedule, rounds])
        .current_dir(dir)
        .env(
            "TALLY_PROFILE",
            dir.join(format!("{mode}-{schedule}.tally")),
        )
        .env("TALLY_TRACE", dir.join(format!("{mode}-{schedule}.trace")))
        .output()
        .expect("run the threaded program");
    assert!(out.status.success(), "{mode} {schedule}: {out:?}");
    out.stdout
}

/// The program's threads besides main (`N` in PROG).
const WORKERS: usize = 4;

const IPATH_MODES: [&str; 2] = ["ipath", "ipath-piecewise"];

#[test]
fn ipath_under_threads_equals_edges_naive_and_the_trace_cut_per_thread() {
    for opt in ["-O0", "-O2"] {
        let dir = scratch(&format!("ipath-threads{opt}"));
        std::fs::write(dir.join("prog.c"), PROG).unwrap();
        std::fs::write(dir.join("sched.c"), SCHED).unwrap();
        for mode in IPATH_MODES.iter().chain(&["edges-naive", "trace-naive"]) {
            build_mode(&dir, mode, opt);
        }
        for schedule in ["free", "token"] {
            let what = format!("threads{opt} {schedule}");
            let mut outputs = BTreeSet::new();
            outputs.insert(run_mode(&dir, "edges-naive", schedule));
            let naive = report_json(&dir.join(format!("edges-naive-{schedule}.tally")));
            for mode in IPATH_MODES {
                outputs.insert(run_mode(&dir, mode, schedule));
                let r = report_json(&dir.join(format!("{mode}-{schedule}.tally")));
                assert_same_counts(&what, mode, &r, "edges-naive", &naive, Edges::All);
                let by_paths = r["functions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|f| f["counters"] == 0 && f["entry_count"].as_u64() > Some(0))
                    .count();
                assert!(
                    by_paths >= 5,
                    "{what} {mode}: {by_paths} functions by paths"
                );
            }
            if schedule == "token" {
                outputs.insert(run_mode(&dir, "trace-naive", "token"));
            }
            assert_eq!(
                outputs.len(),
                1,
                "{what}: the builds print different results"
            );
        }

        // Free threads count the paths one thread after another counts: prog.c runs the same
        // per thread under both (only sched.c's control flow differs).
        for mode in IPATH_MODES {
            run_mode(&dir, mode, "seq");
            let read = |schedule: &str| {
                ipath_cut::path_counts(
                    &Profile::read_file(dir.join(format!("{mode}-{schedule}.tally"))).unwrap(),
                )
            };
            let prog = |mut c: BTreeMap<String, BTreeMap<u128, u64>>| {
                let key = c.keys().find(|k| k.ends_with("/prog.c")).cloned();
                c.remove(&key.expect("prog.c's set")).unwrap()
            };
            let (free, seq) = (prog(read("free")), prog(read("seq")));
            assert!(
                free.values().sum::<u64>() > 100_000,
                "threads{opt} {mode}: {free:?}"
            );
            assert_eq!(
                free, seq,
                "threads{opt} {mode}: free and seq path counts differ"
            );
        }

        // The path counts of the token run against the trace-naive trace, cut per thread.
        let naive = Profile::read_file(dir.join("trace-naive-token.tally")).unwrap();
        let trace = tally_format::trace::read_trace(
            &std::fs::read(dir.join("trace-naive-token.trace")).unwrap(),
        )
        .unwrap();
        for mode in IPATH_MODES {
            let what = format!("threads{opt} {mode}");
            let ipath = Profile::read_file(dir.join(format!("{mode}-token.tally"))).unwrap();
            let mut sets = ipath_cut::sets(&ipath, &naive);
            let set_names: BTreeSet<String> = ipath
                .modules
                .iter()
                .filter_map(|m| m.meta.ipath().map(|ip| (m, ip)))
                .flat_map(|(m, ip)| {
                    ip.functions
                        .iter()
                        .map(|f| m.meta.functions[f.function as usize].name.clone())
                })
                .collect();
            for f in ["leaf", "even", "odd", "fib", "mid", "nest"] {
                assert!(set_names.contains(f), "{what}: {f} is not in the set");
            }
            let (threads, switches) = split(&trace, &naive, &set_names);
            assert_eq!(threads.len(), 1 + WORKERS, "{what}: main and the workers");
            assert!(
                switches >= 40,
                "{what}: only {switches} thread switches inside set activations"
            );
            for (t, records) in threads.iter().enumerate() {
                ipath_cut::cut_thread(&format!("{what} thread {t}"), records, &naive, &mut sets);
            }
            let (mut runs, mut crossing) = (0, 0);
            for s in &sets {
                let at = format!("{what} {}", s.source);
                ipath_cut::assert_same_paths(&at, &s.oracle, &s.counts);
                runs += s.oracle.values().sum::<u64>();
                crossing += s.crossing;
            }
            eprintln!("{what}: {switches} switches inside the set, {runs} path runs equal, {crossing} across calls");
            assert!(
                runs >= 400 && crossing >= 100,
                "{what}: too little compared"
            );
        }
    }
}
