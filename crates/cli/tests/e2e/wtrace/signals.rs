//! Signal handlers in traces: streams of their own, timer signals, and `--tally-trace-floor`.

use super::*;

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
