//! The run record of one run's profile (container version 5; write.c, `out_run`): when the
//! run started and wrote its profile, the host, how it ended (the status given to `exit` or
//! `_exit`, or returned by `main`; unknown after a fatal signal) and `TALLY_LABELS` as given.
//! Merged profiles (`%m`) have none.

use super::*;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};
use tally_format::profile::Profile;

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn hostname() -> Vec<u8> {
    let h = std::fs::read("/proc/sys/kernel/hostname").unwrap();
    h.strip_suffix(b"\n").unwrap_or(&h).to_vec()
}

/// `prog how`: ends by `return 7` from main, `exit(3)`, `_exit(5)` (as instrumented code calls
/// it: `__tally__exit`, tally_format::abi::REDIRECTS) or `raise(SIGTERM)`.
fn program(env: &Env) -> (PathBuf, Module) {
    let m = Module::new("m", "r.c", 2, 101);
    let src = format!(
        "{}{}#include <signal.h>\nvoid __tally__exit(int);\nint main(int argc, char **argv) {{\n  m_ctr[0] = 1;\n  \
         if (argc > 1 && argv[1][0] == 'e') exit(3);\n  \
         if (argc > 1 && argv[1][0] == '_') __tally__exit(5);\n  \
         if (argc > 1 && argv[1][0] == 's') raise(SIGTERM);\n  return 7;\n}}\n",
        prelude(),
        m.c
    );
    (env.build("prog", &[("prog.c", src)]), m)
}

#[test]
fn the_run_record_says_when_where_how_and_the_labels() {
    let env = Env::new();
    let (exe, m) = program(&env);
    for (arg, code, status) in [("r", 7, Some(7)), ("e", 3, Some(3)), ("_", 5, Some(5))] {
        let _ = std::fs::remove_file(env.path().join("r.tally"));
        let before = now_ns();
        env.run_ok(
            &exe,
            &[arg],
            &[
                ("TALLY_LABELS", "suite=unit,shard=3"),
                ("TALLY_PROFILE", "r.tally"),
            ],
            code,
        );
        let after = now_ns();
        let p = env.profile("r.tally");
        let run = p.run.as_ref().expect("a run record");
        assert_eq!(run.exit_status, status, "{arg}");
        assert!(before <= run.start_ns && run.start_ns <= run.end_ns && run.end_ns <= after);
        assert_eq!(run.host, hostname());
        assert_eq!(run.labels, b"suite=unit,shard=3");
        assert_eq!(
            run.label_pairs(),
            vec![
                ("suite".to_string(), "unit".to_string()),
                ("shard".to_string(), "3".to_string())
            ]
        );
        assert_eq!(counters_of(&p, &[&m]), vec![vec![1, 0]]);
        // The Rust writer writes the record as the runtime does.
        assert_eq!(
            p.write(),
            std::fs::read(env.path().join("r.tally")).unwrap()
        );
    }
    // A fatal signal: the profile says which; the exit status is unknown.
    let out = env.run(&exe, &["s"], &[("TALLY_PROFILE", "s.tally")]);
    assert_eq!(out.status.code(), None);
    let p = env.profile("s.tally");
    assert_eq!(p.signal, Some(15)); // SIGTERM
    let run = p.run.expect("a run record");
    assert_eq!(run.exit_status, None);
    assert!(run.labels.is_empty());
}

/// A `%m` profile is a sum of runs: version 4, no run record.
#[test]
fn merged_profiles_have_no_run_record() {
    let env = Env::new();
    let (exe, m) = program(&env);
    for _ in 0..2 {
        env.run_ok(&exe, &[], &[("TALLY_PROFILE", "m.%m.tally")], 7);
    }
    let name = env.files_ending(".tally").pop().unwrap();
    let bytes = std::fs::read(env.path().join(&name)).unwrap();
    assert_eq!(&bytes[8..12], &4u32.to_le_bytes());
    let p = Profile::read(&bytes).unwrap();
    assert_eq!(p.run, None);
    assert_eq!(counters_of(&p, &[&m]), vec![vec![2, 0]]);
}
