//! Traces across files and images: cross-file calls, one trace per process, wrapped handlers,
//! traced external callees, inline returns.

use super::*;

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
/// calls over: "One trace per process" in `runtime/c/wtrace/home.c`). Calls cross the images both
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
