//! `tally report --trace` against the `edges-naive` oracle: counts, JSON, the HTML site, and
//! streams ended by fatal signals.

use super::*;

/// A process that ends by `abort`, by `raise` of a fatal signal, or normally after a function
/// with an endless loop of calls (`for (;;) pause();`, whose cycle has no predicate): the
/// streams end at the fatal-signal path and regenerate exactly. (A fault *between* calls is
/// not compared: the last blocks regenerated may go past the faulting instruction.)
#[test]
fn fatal_signals_end_the_streams() {
    let src = repo().join("testdata/crash/crash.c");
    for (how, status) in [("", Some(0)), ("abort", None), ("raise", None)] {
        let name = format!("crash-{}", if how.is_empty() { "none" } else { how });
        let run: Vec<&str> = if how.is_empty() { vec![] } else { vec![how] };
        let o = run_both_with(&name, false, &single(&src, "-O1"), status, &[], &run);
        assert!(o.stopped.is_empty(), "{name}: {:?}", o.stopped);
        assert!(
            o.regenerated == o.oracle,
            "{name}: {}",
            first_difference(&o.regenerated, &o.oracle)
        );
        assert!(o.oracle.len() > 100, "{name}: too little compared");
    }
}

fn trace_report_equals_edges_naive(name: &str, cxx: bool, args: &[String], status: i32) -> bool {
    let dir = scratch(&format!("wtrace-report-{name}"));
    let run = Run {
        name,
        cxx,
        args,
        status: Some(status),
        trace_flags: &[],
        run_args: &[],
    };
    run.build_and_run(&dir, ["trace", "edges-naive"]);
    let t = dir.join("trace");
    let o = trace_report_json(&t);
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(3) {
        assert!(
            err.contains("regeneration stopped early")
                && err.contains(tally_report::trace::NOT_EXACT)
                && err.contains("counts cover the regenerated part"),
            "{name}: {err}"
        );
        // The counts are those of the regenerated prefix (which the regeneration test
        // compares with trace-naive's sequence).
        let prof = tally_format::profile::Profile::read_file(t.join("prog.tally")).unwrap();
        let bytes = std::fs::read(t.join("prog.trace")).unwrap();
        let r = tally_report::trace::regenerate(&bytes, &prof).unwrap();
        let mut want = std::collections::BTreeMap::new();
        for b in &r.blocks {
            *want
                .entry((b.function.clone(), b.block as u64))
                .or_insert(0u64) += 1;
        }
        let traced: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut got = std::collections::BTreeMap::new();
        for f in traced["functions"].as_array().unwrap() {
            for b in f["blocks"].as_array().unwrap() {
                if let Some(c) = b["count"].as_u64().filter(|&c| c > 0) {
                    let key = (
                        f["name"].as_str().unwrap().to_string(),
                        b["id"].as_u64().unwrap(),
                    );
                    got.insert(key, c);
                }
            }
        }
        assert_eq!(got, want, "{name}: counts are not the regenerated prefix's");
        return false;
    }
    assert_eq!(o.status.code(), Some(0), "{name}: {err}");
    let traced: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let oracle = report_json(&dir.join("edges-naive/prog.tally"));
    let (fns, executed) =
        assert_same_counts(name, "trace", &traced, "edges-naive", &oracle, Edges::All);
    // At -O2 latch.ll folds to a constant (one block).
    assert!(
        fns >= 1 && (executed >= 3 || name.starts_with("latch.ll-O2")),
        "{name}: too little compared"
    );
    true
}

/// Block and edge counts from witness traces equal the `edges-naive`
/// oracle's on every program the regeneration tests use: the early exits and shapes, C++
/// exceptions (a `resume` counts its `Return` edge), callbacks through pointers and `qsort`,
/// and four threads.
#[test]
fn trace_report_counts_equal_edges_naive() {
    let mut exact = 0;
    for (file, status) in &early_and_shapes() {
        for opt in ["-O0", "-O2"] {
            let name = format!("{}{opt}", file.file_name().unwrap().to_str().unwrap());
            let cxx = file.extension().is_some_and(|e| e == "cpp");
            exact += usize::from(trace_report_equals_edges_naive(
                &name,
                cxx,
                &single(file, opt),
                *status,
            ));
        }
    }
    assert_eq!(
        exact,
        2 * early_and_shapes().len(),
        "not every program counted exactly"
    );
    let throws = repo().join("testdata/wtrace/throws.cpp");
    for opt in ["-O0", "-O2"] {
        assert!(trace_report_equals_edges_naive(
            &format!("throws{opt}"),
            true,
            &single(&throws, opt),
            0
        ));
    }
    let dir = scratch("wtrace-report-callbacks-src");
    let src = dir.join("callbacks.c");
    std::fs::write(&src, CALLBACKS).unwrap();
    for opt in ["-O0", "-O2"] {
        assert!(trace_report_equals_edges_naive(
            &format!("callbacks{opt}"),
            false,
            &single(&src, opt),
            0
        ));
    }
    let workers = repo().join("testdata/threads/workers.c");
    let args = vec![
        "-O2".into(),
        "-g".into(),
        "-pthread".into(),
        "--tally-atomic".into(),
        workers.display().to_string(),
    ];
    assert!(trace_report_equals_edges_naive("workers", false, &args, 0));
}

/// The `data-count` values (line counts) of a site's file pages, sorted.
fn site_line_counts(dir: &std::path::Path) -> Vec<String> {
    let mut counts = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with('f') && name.ends_with(".html")) {
            continue;
        }
        let page = std::fs::read_to_string(&p).unwrap();
        for part in page.split("data-count=\"").skip(1) {
            counts.push(part.split('"').next().unwrap().to_string());
        }
    }
    counts.sort();
    counts
}

#[test]
fn html_site_of_a_trace_equals_edges_naive_site() {
    let dir = scratch("wtrace-html");
    let src = dir.join("callbacks.c");
    std::fs::write(&src, CALLBACKS).unwrap();
    let run = Run {
        name: "html",
        cxx: false,
        args: &single(&src, "-O2"),
        status: Some(0),
        trace_flags: &[],
        run_args: &[],
    };
    run.build_and_run(&dir, ["trace", "edges-naive"]);
    let (t, n) = (dir.join("trace"), dir.join("edges-naive"));
    let o = std::process::Command::new(tally())
        .args(["html", "-o"])
        .arg(dir.join("site-trace"))
        .arg("--trace")
        .arg(t.join("prog.trace"))
        .arg(t.join("prog.tally"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = std::process::Command::new(tally())
        .args(["html", "-o"])
        .arg(dir.join("site-naive"))
        .arg(n.join("prog.tally"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (traced, naive) = (
        site_line_counts(&dir.join("site-trace")),
        site_line_counts(&dir.join("site-naive")),
    );
    assert!(traced.iter().any(|c| c != "0"), "{traced:?}");
    assert_eq!(traced, naive);
}
