//! Witness tracing (`--tally-mode=trace`, paper 000 §4) against its oracle: the same program
//! built in `trace-naive` mode (every edge taken, per activation) and run on the same input.
//! The block sequence `tally trace` regenerates from the witnesses must equal trace-naive's,
//! block for block, `longjmp` included; where regeneration cannot be exact (an exception
//! landing pad) it must stop there with a clear error, after a prefix of the oracle's sequence.

mod support;
use std::path::{Path, PathBuf};
use support::*;

struct Outcome {
    /// `(function, block)` of every regenerated block.
    regenerated: Vec<(String, u32)>,
    /// Why regeneration stopped early, if it did.
    stopped: Vec<String>,
    oracle: Vec<(String, u32)>,
    trace_bytes: u64,
    naive_bytes: u64,
}

/// Builds `args` in trace and trace-naive mode, runs both, regenerates and reads the oracle.
fn run_both(name: &str, cxx: bool, args: &[String], status: i32) -> Outcome {
    let dir = scratch(&format!("wtrace-{name}"));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut outs = Vec::new();
    for mode in ["trace", "trace-naive"] {
        let vdir = dir.join(mode);
        std::fs::create_dir_all(&vdir).unwrap();
        build(Variant::Tally(mode), cxx, &a, &vdir.join("prog"), &dir);
        let out = std::process::Command::new("./prog")
            .current_dir(&vdir)
            .env("TALLY_PROFILE", vdir.join("prog.tally"))
            .env("TALLY_TRACE", vdir.join("prog.trace"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(status), "{name} {mode}");
        outs.push(out.stdout);
    }
    assert_eq!(outs[0], outs[1], "{name}: outputs differ");
    let prof = tally_format::profile::Profile::read_file(dir.join("trace/prog.tally")).unwrap();
    let bytes = std::fs::read(dir.join("trace/prog.trace")).unwrap();
    let r =
        tally_report::wtrace::regenerate(&bytes, &prof).unwrap_or_else(|e| panic!("{name}: {e}"));
    let naive_prof =
        tally_format::profile::Profile::read_file(dir.join("trace-naive/prog.tally")).unwrap();
    let naive_bytes = std::fs::read(dir.join("trace-naive/prog.trace")).unwrap();
    let naive = tally_format::trace::read_trace(&naive_bytes).unwrap();
    let oracle = tally_report::trace::block_sequence(&naive, &naive_prof).unwrap();
    Outcome {
        regenerated: r
            .blocks
            .iter()
            .map(|b| (b.function.clone(), b.block))
            .collect(),
        stopped: r.stopped.iter().map(|s| s.1.clone()).collect(),
        oracle,
        trace_bytes: bytes.len() as u64,
        naive_bytes: naive_bytes.len() as u64,
    }
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

/// The test programs of the path oracle: every early-exit case and the shapes. Programs that
/// throw must stop with the "not exact" error after a prefix of the oracle.
#[test]
fn regenerated_block_sequences_equal_trace_naive() {
    let early: Vec<(PathBuf, i32)> =
        std::fs::read_to_string(repo().join("testdata/early/EXPECTED"))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let mut it = l.split_whitespace();
                (
                    repo().join("testdata/early").join(it.next().unwrap()),
                    it.next().unwrap().parse().unwrap(),
                )
            })
            .chain(
                ["shapes.c", "manypaths.c", "indirect.ll", "latch.ll"]
                    .iter()
                    .map(|f| (repo().join("testdata/shapes").join(f), 0)),
            )
            .collect();
    let mut exact = 0;
    for (file, status) in &early {
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
            if o.stopped.is_empty() {
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
            } else {
                assert!(
                    o.stopped
                        .iter()
                        .all(|s| s == tally_report::wtrace::NOT_EXACT),
                    "{name}: {:?}",
                    o.stopped
                );
                assert!(
                    o.oracle.starts_with(&o.regenerated),
                    "{name}: stopped early, but not after a prefix: {}",
                    first_difference(&o.regenerated, &o.oracle)
                );
                eprintln!(
                    "{name}: stopped after {} blocks: {:?}",
                    o.regenerated.len(),
                    o.stopped
                );
            }
        }
    }
    assert!(exact >= 16, "only {exact} programs regenerated exactly");
}
