//! Crash-exact profiles (`crates/runtime/c/signals.c`): a process that ends
//! on a fatal signal, or through `quick_exit`, writes its profile with the active frames charged
//! as at `exit`, and ends exactly as the plain build does: same wait status (terminating signal
//! and core-dump bit, with core dumps enabled), same output (which includes what the program
//! sees of its signal dispositions through `sigaction`). `testdata/crash/crash.c` picks the way
//! it ends from its argument. Where every active frame is at a call (abort, raise, kill, a signal
//! while blocked in pause or read, quick_exit, a chained handler) the `edge` counts equal the
//! `edges-naive` oracle's; where the fault is between calls (a NULL dereference, a division by
//! zero) the oracle names the faulting function inconsistent and every other function is exact.

use crate::crash_support::*;
use crate::support::*;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The three builds of crash.c, made once for every test here.
fn builds() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("crash");
        let src = repo().join("testdata/crash/crash.c");
        for v in BUILDS {
            build(
                v,
                false,
                &["-O1", "-g", src.to_str().unwrap()],
                &dir.join(v.name()),
                &dir,
            );
        }
        dir
    })
}

/// Every active frame is at a call: `edge` equals the oracle everywhere, and the frames of
/// `die` (four recursive calls and the one that ends) are all counted as entered.
fn check_exact(case: &str, ignore_usr2: bool, signal_when_ready: bool) -> i32 {
    let c = check_case(builds(), case, ignore_usr2, signal_when_ready);
    assert_eq!(
        inconsistent(&c.naive),
        Vec::<String>::new(),
        "{case}: oracle"
    );
    for (name, r) in &c.others {
        assert_eq!(inconsistent(r), Vec::<String>::new(), "{case}: {name}");
        let (fns, executed) = assert_same_counts(case, name, r, "edges-naive", &c.naive, true);
        assert!(fns >= 3 && executed >= 8, "{case}: too little compared");
    }
    c.status
}

#[test]
fn abort_without_handler() {
    let s = check_exact("abort", false, false);
    assert_eq!(termsig(s), 6, "{s:#x}");
}

#[test]
fn raise_sigsegv() {
    let s = check_exact("raise", false, false);
    assert_eq!(termsig(s), 11, "{s:#x}");
}

#[test]
fn kill_self_sigterm() {
    let s = check_exact("kill", false, false);
    assert_eq!(termsig(s), 15, "{s:#x}");
}

#[test]
fn sigterm_while_blocked_in_pause() {
    let s = check_exact("pause", false, true);
    assert_eq!(termsig(s), 15, "{s:#x}");
}

#[test]
fn sigterm_while_blocked_in_read() {
    let s = check_exact("read", false, true);
    assert_eq!(termsig(s), 15, "{s:#x}");
}

#[test]
fn quick_exit_writes_the_profile() {
    let s = check_exact("quick", false, false);
    assert_eq!(s, 3 << 8);
}

/// The program's handler runs (it prints, and sees its own disposition), resets SIG_DFL with
/// `signal` and re-raises: the runtime writes the profile on the second delivery.
#[test]
fn program_handler_is_chained_then_reraises() {
    let s = check_exact("chain", false, false);
    assert_eq!(termsig(s), 10, "{s:#x}");
}

/// A one-shot handler (SA_RESETHAND | SA_SIGINFO | SA_NODEFER) runs once, the program then sees
/// SIG_DFL with the flags the kernel leaves, and the next SIGSEGV ends it with a profile.
#[test]
fn one_shot_handler_then_default() {
    let s = check_exact("resethand", false, false);
    assert_eq!(termsig(s), 11, "{s:#x}");
}

/// A vfork child's `signal` call goes to the kernel only: the parent (whose memory the child
/// shares) still sees SIG_DFL (the output is the plain build's), and still writes its profile
/// on SIGUSR1. `main`, which calls vfork, is exact too: vfork returns twice, as setjmp does
/// (the parent's return is a re-entry).
#[test]
fn vfork_child_leaves_the_parents_view_alone() {
    let c = check_case(builds(), "vfork", false, false);
    assert_eq!(termsig(c.status), 10, "{:#x}", c.status);
    assert_eq!(inconsistent(&c.naive), Vec::<String>::new());
    for (name, r) in &c.others {
        let (fns, _) = assert_same_counts("vfork", name, r, "edges-naive", &c.naive, true);
        assert!(fns >= 3);
    }
    assert_eq!(entries(&c.naive, "die"), 3);
}

/// SIGUSR2 ignored by the parent stays ignored (the runtime never touches SIG_IGN).
#[test]
fn ignored_signal_left_alone() {
    let s = check_exact("ignore", true, false);
    assert_eq!(s, 5 << 8);
}

/// A fault between calls: the innermost frame of `die` is charged at its last call site, which
/// is not where it stopped. The oracle names `die` inconsistent; every other function is exact.
/// `sig`: the signal that ends it (None: it exits with 0); `shows`: calls of `show`.
fn check_mid_code(case: &str, sig: Option<i32>, shows: u64) {
    let c = check_case(builds(), case, false, false);
    match sig {
        Some(sig) => assert_eq!(termsig(c.status), sig, "{:#x}", c.status),
        None => assert_eq!(c.status, 0),
    }
    assert_eq!(
        inconsistent(&c.naive),
        vec!["die".to_string()],
        "{case}: oracle"
    );
    // The counts up to the end are in the profile (show prints the dispositions).
    assert_eq!(entries(&c.naive, "show"), shows);
    for (name, r) in &c.others {
        let (fns, executed) = assert_same_counts(
            case,
            name,
            &without(r, "die"),
            "edges-naive",
            &without(&c.naive, "die"),
            true,
        );
        assert!(fns >= 3 && executed >= 8, "{case}: too little compared");
    }
}

#[test]
fn null_dereference_between_calls() {
    check_mid_code("null", Some(11), 2);
}

#[test]
fn division_by_zero_between_calls() {
    check_mid_code("fpe", Some(8), 2);
}

/// A SIGFPE handler that siglongjmps out of a division by zero: the program goes on and exits
/// normally. The frames the jump discards are charged at their sites; the one that faulted is
/// between calls, so `die` is inconsistent in the oracle, as above.
#[test]
fn handler_that_longjmps_out() {
    check_mid_code("longjmp", None, 4);
}
