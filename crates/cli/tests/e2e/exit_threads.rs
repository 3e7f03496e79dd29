//! Threads still running when the process ends (`crates/runtime/c/threads.c`):
//! the ending thread has every other thread charge its own active frames (a real-time signal)
//! before the profile is written. `testdata/crash/threads.c`, built with `--tally-atomic`, ends
//! with its other threads blocked in a library call (pthread_cond_wait, read, pthread_join):
//! every frame is at a call, and the `edge` counts equal the `edges-naive` oracle's, the output
//! and wait status the plain build's. A thread spinning in a loop without calls is stopped
//! between calls: the oracle names its function inconsistent (and its caller, whose call the
//! instrumentation knows cannot end the process, so no site was recorded for it); every other
//! function is exact.

use crate::crash_support::*;
use crate::support::*;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::OnceLock;

fn builds() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("exit-threads");
        let src = repo().join("testdata/crash/threads.c");
        for v in BUILDS {
            let mut args = vec!["-O1", "-g", "-pthread", src.to_str().unwrap()];
            if v != Variant::Plain {
                args.push("--tally-atomic");
            }
            build(v, false, &args, &dir.join(v.name()), &dir);
        }
        dir
    })
}

/// The report without the functions whose counts depend on timing (threads.c's waiting loops)
/// and the other `names`.
fn timing_free(r: &Value, names: &[&str]) -> Value {
    let mut r = r.clone();
    for f in ["await_started", "await_sleep", "sleeping"]
        .iter()
        .chain(names)
    {
        r = without(&r, f);
    }
    r
}

/// The workers' and main's frames are all at calls: exact everywhere. Returns the wait status.
fn check_exact(case: &str) -> i32 {
    let c = check_case(builds(), case, false, false);
    let naive = timing_free(&c.naive, &[]);
    assert_eq!(inconsistent(&naive), Vec::<String>::new(), "{case}: oracle");
    for (name, r) in &c.others {
        let r = timing_free(r, &[]);
        assert_eq!(inconsistent(&r), Vec::<String>::new(), "{case}: {name}");
        let (fns, executed) = assert_same_counts(case, name, &r, "edges-naive", &naive, true);
        assert!(fns >= 4 && executed >= 8, "{case}: too little compared");
    }
    // `block` recursed (worker i calls block(i)): its frames, abandoned in the other threads,
    // are all charged, so they balance.
    assert!(entries(&naive, "block") >= 2, "{case}");
    c.status
}

#[test]
fn workers_blocked_in_cond_wait_at_exit() {
    assert_eq!(check_exact("cond"), 0);
}

#[test]
fn workers_blocked_in_read_at_exit() {
    assert_eq!(check_exact("pipe"), 0);
}

#[test]
fn workers_blocked_at_abort() {
    assert_eq!(termsig(check_exact("cond-abort")), 6);
}

#[test]
fn main_blocked_in_join_when_a_worker_exits() {
    assert_eq!(check_exact("join"), 0);
}

#[test]
fn busy_worker_is_named_inconsistent() {
    let c = check_case(builds(), "busy", false, false);
    assert_eq!(c.status, 0);
    let bad = inconsistent(&c.naive);
    assert!(bad.contains(&"spin".to_string()), "{bad:?}");
    assert!(
        bad.iter().all(|f| f == "spin" || f == "worker"),
        "oracle: {bad:?}"
    );
    let n = timing_free(&c.naive, &["spin", "worker"]);
    for (name, r) in &c.others {
        let e = timing_free(r, &["spin", "worker"]);
        let (fns, executed) = assert_same_counts("busy", name, &e, "edges-naive", &n, true);
        assert!(fns >= 3 && executed >= 8, "busy: too little compared");
    }
    assert!(entries(&n, "block") >= 2);
}

/// A worker that blocks every signal cannot be stopped: its frames stay uncharged (the program
/// still ends at once, as the plain build does). The oracle derives early exits by propagation
/// and stays exact; with records forced, the functions active in that worker (`worker`, and
/// `block`, one entry short: its recursion is a loop after optimization) are wrong without
/// being detectable, everything else is exact.
#[test]
fn worker_blocking_every_signal_stays_uncharged() {
    let c = check_case(builds(), "masked", false, false);
    assert_eq!(c.status, 0);
    let naive = timing_free(&c.naive, &[]);
    assert_eq!(inconsistent(&naive), Vec::<String>::new());
    for (name, r) in &c.others {
        let r = timing_free(r, &[]);
        if *name == "edge-record" {
            assert_eq!(entries(&r, "block") + 1, entries(&naive, "block"));
            assert_same_counts(
                "masked",
                name,
                &timing_free(&r, &["block", "worker"]),
                "edges-naive",
                &timing_free(&naive, &["block", "worker"]),
                true,
            );
        } else {
            assert_same_counts("masked", name, &r, "edges-naive", &naive, true);
        }
    }
}
