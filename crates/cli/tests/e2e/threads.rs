//! Threads with `--tally-atomic`: four threads running the same code at once
//! (`testdata/threads/workers.c`). Every count is a sum over the threads, so the `edge`,
//! `path` (derived counts; its hashed function's home table and the runtime's overflow table
//! are shared by the threads) and `blocks-naive` builds must equal the `edges-naive` oracle
//! built with `--tally-atomic` too, and the output the plain build's.

use crate::support::*;

#[test]
fn atomic_counts_are_exact_under_threads() {
    let src = repo().join("testdata/threads/workers.c");
    for opt in ["-O0", "-O2"] {
        let dir = scratch(&format!("threads{opt}"));
        let args = [opt, "-g", "-pthread", src.to_str().unwrap()];
        build(Variant::Plain, false, &args, &dir.join("plain"), &dir);
        let want = run(&dir.join("plain"), &[], &dir, &dir.join("plain.tally"));
        assert!(want.status.success());
        let mut reports = Vec::new();
        for mode in ["edges-naive", "edge", "path", "blocks-naive"] {
            let bin = dir.join(mode);
            let mut a = args.to_vec();
            a.push("--tally-atomic");
            build(Variant::Tally(mode), false, &a, &bin, &dir);
            let profile = dir.join(format!("{mode}.tally"));
            let out = run(&bin, &[], &dir, &profile);
            assert_eq!(out.status.code(), Some(0), "{mode}{opt}");
            assert_eq!(out.stdout, want.stdout, "{mode}{opt}: output differs");
            reports.push((mode, report_json(&profile)));
        }
        let (oracle, rest) = reports.split_first().unwrap();
        for (mode, r) in rest {
            let edges = if *mode == "blocks-naive" {
                Edges::None
            } else {
                Edges::All
            };
            let (fns, executed) = assert_same_counts(
                &format!("threads{opt}"),
                mode,
                r,
                oracle.0,
                &oracle.1,
                edges,
            );
            assert!(
                fns >= 3 && executed >= 8,
                "{mode}{opt}: too little compared"
            );
        }
    }
}
