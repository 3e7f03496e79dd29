//! Profile-guided optimization from exact counts, checked on Lua by its real consumer, clang's
//! sample-profile loader (`docs/pgo.md`):
//!
//! - `tally cc --tally-pgo` trains: the sample profile (`tally report --export
//!   sample-profile`) of its `edge` build equals the one of its `edges-naive` build (the
//!   oracle that counts every edge), and every function's head count equals the entry count
//!   `tally report` gives it (probe 1 against the counter of edge `e0`);
//! - `tally cc --tally-use` rebuilds with it: every function clang compiles matched the profile
//!   by checksum, the loader applied every record (`-sample-profile-check-record-coverage=100`
//!   is silent), the entry counts it attached equal the profile's heads (up to the loader's
//!   `+1`) in every function that no `longjmp` or `exit` left early (where the loader's flow
//!   inference and the exact count part), and the program prints what it printed before;
//! - on a small program that counts its own branches, the whole loop: the profile's counts are
//!   the program's, and the rebuild's branch weights are those counts;
//! - a stale profile (altered checksums) never breaks the build and is said in one line;
//! - a build with probes but without `--tally-pgo` is warned about.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `name -> (total, head)` of a text sample profile.
pub(crate) fn heads(text: &str) -> BTreeMap<String, (u64, u64)> {
    text.lines()
        .filter(|l| !l.starts_with(' '))
        .map(|l| {
            let mut it = l.rsplitn(3, ':');
            let head = it.next().unwrap().parse().unwrap();
            let total = it.next().unwrap().parse().unwrap();
            (it.next().unwrap().to_string(), (total, head))
        })
        .collect()
}

/// The flat sample profiles of a pre-inlined training build and of one without pre-inlining
/// are the same, but for probes of 0 in the second that the first lacks, and records of
/// functions that never ran that it lacks altogether: a local function called once, inlined
/// there and deleted, has its inline copy for its one body, and a block the call's arguments
/// made unreachable is not in it, nor is a function whose one call was in such a block
/// (`crates/llvm/src/module/pre_inline.rs`). How many probe lines the second has that the
/// first lacks.
pub(crate) fn assert_same_profile(what: &str, pre_inlined: &str, whole: &str) -> usize {
    /// The records of a text profile: (name, header line, probe lines).
    fn records(text: &str) -> Vec<(&str, &str, Vec<&str>)> {
        let mut out: Vec<(&str, &str, Vec<&str>)> = Vec::new();
        for line in text.lines() {
            match out.last_mut() {
                Some((_, _, probes)) if line.starts_with(' ') => probes.push(line),
                _ => out.push((
                    line.rsplitn(3, ':').nth(2).unwrap_or(line),
                    line,
                    Vec::new(),
                )),
            }
        }
        out
    }
    let first: BTreeMap<&str, Vec<&str>> = records(pre_inlined)
        .into_iter()
        .map(|(name, _, probes)| (name, probes))
        .collect();
    let zero = |l: &&str| l.trim_start().starts_with('!') || l.ends_with(": 0");
    let (mut kept, mut dropped) = (String::new(), 0);
    for (name, head, probes) in records(whole) {
        let Some(have) = first.get(name) else {
            if head.ends_with(":0:0") && probes.iter().all(zero) {
                dropped += probes.len() - 1;
                continue;
            }
            panic!("{what}: {name} is only in the profile without pre-inlining");
        };
        kept.push_str(head);
        kept.push('\n');
        for l in probes {
            let probe = l.split(':').next().unwrap();
            if l.ends_with(": 0") && !have.iter().any(|h| h.split(':').next() == Some(probe)) {
                dropped += 1;
                continue;
            }
            kept.push_str(l);
            kept.push('\n');
        }
    }
    assert_eq!(
        pre_inlined, kept,
        "{what}: the sample profile depends on pre-inlining"
    );
    dropped
}

/// Builds Lua in `mode` with `flags`, runs the small workload; the profile and the output.
fn train(dir: &Path, mode: &'static str, flags: &[&str]) -> (PathBuf, Vec<u8>) {
    let mut extra = vec!["-O2"];
    extra.extend(flags);
    let args = lua_args(&extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let prog = dir.join(format!("lua-{mode}"));
    build(Variant::Tally(mode), false, &args, &prog, dir);
    let prof = dir.join(format!("lua-{mode}.tally"));
    let script = repo().join("testdata/lua/small.lua");
    let o = run(&prog, &[script.to_str().unwrap()], dir, &prof);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (prof, o.stdout)
}

/// `tally report --export sample-profile --flat`: the profile and what tally said.
pub(crate) fn export(dir: &Path, prof: &Path) -> (String, String) {
    let o = Command::new(tally())
        .args(["report", "--export", "sample-profile", "--flat"])
        .arg(prof)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The function entry counts an IR dump (`-print-after=...`) shows, by function name.
pub(crate) fn entry_counts(dump: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for module in dump.split("*** IR Dump After").skip(1) {
        let mut md = BTreeMap::new();
        for l in module.lines() {
            if let Some((id, rest)) = l
                .strip_prefix('!')
                .and_then(|r| r.split_once(" = !{!\"function_entry_count\", i64 "))
            {
                md.insert(
                    id.to_string(),
                    rest.trim_end_matches('}').parse::<u64>().unwrap(),
                );
            }
        }
        for l in module.lines().filter(|l| l.starts_with("define ")) {
            let Some(name) = l.split('@').nth(1).and_then(|r| r.split('(').next()) else {
                continue;
            };
            let Some(id) = l.rsplit("!prof !").next().filter(|_| l.contains("!prof !")) else {
                continue;
            };
            let id = id.split_whitespace().next().unwrap_or("");
            if let Some(&c) = md.get(id) {
                out.insert(name.trim_matches('"').to_string(), c);
            }
        }
    }
    out
}

/// The entry count the loader attached to each function (an IR dump, `dump`) is its head count
/// in `heads`, or that plus the loader's `+1`, in more than 500 functions not in `early`.
pub(crate) fn assert_heads_attached(
    what: &str,
    dump: &str,
    heads: &BTreeMap<String, (u64, u64)>,
    early: &[String],
) {
    let attached = entry_counts(dump);
    let mut equal = 0;
    for (name, &(_, head)) in heads {
        let Some(&got) = attached.get(name) else {
            continue;
        };
        if early.contains(name) {
            continue;
        }
        assert!(
            got == head || got == head + 1,
            "{name}{what}: the loader attached entry count {got}, the profile says {head}"
        );
        equal += 1;
    }
    assert!(equal > 500, "{equal} entry counts compared");
}

/// Functions an early exit left (`early-exit` edges that ran), from the JSON report.
pub(crate) fn left_early(report: &Value) -> Vec<String> {
    report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["edges"].as_array().unwrap().iter().any(|e| {
                e["kind"].as_str() == Some("early-exit") && e["count"].as_u64().unwrap_or(0) > 0
            })
        })
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn exact_counts_train_clangs_sample_profile_loader() {
    let dir = scratch("pgo");
    let (prof, out) = train(&dir, "edge", &["--tally-pgo"]);
    let (text, said) = export(&dir, &prof);
    assert!(!said.contains("warning"), "{said}");
    assert!(!said.contains("left out"), "{said}");

    // Exact: the same profile from the oracle that counts every edge, built without the
    // pre-inlining (every function counted as written: a probe's count cannot depend on
    // which copies of it inlining made).
    let (naive, _) = train(
        &dir,
        "edges-naive",
        &["--tally-pgo", "--tally-pgo-inline=off"],
    );
    assert_same_profile("Lua, edge and edges-naive", &text, &export(&dir, &naive).0);

    // Every head is the function's entry count in the build without pre-inlining (each
    // function's every entry is the entry of its own graph there).
    let report = report_json(&naive);
    let entries: BTreeMap<String, u64> = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let n = f["name"].as_str().unwrap().to_string();
            (n, f["entry_count"].as_u64().unwrap())
        })
        .collect();
    let h = heads(&text);
    assert!(h.len() > 500, "{} functions in the profile", h.len());
    let mut checked = 0;
    for (name, &(_, head)) in &h {
        if let Some(&e) = entries.get(name) {
            assert_eq!(head, e, "{name}: head count against entry count");
            checked += 1;
        }
    }
    assert!(checked > 500, "{checked} heads checked");

    // clang applies it: a rebuild with --tally-use, the loader's entry counts printed.
    std::fs::write(dir.join("lua.prof"), &text).unwrap();
    let mut args = vec![
        "cc".to_string(),
        "--tally-use=lua.prof".into(),
        "-mllvm".into(),
        "-sample-profile-check-record-coverage=100".into(),
        "-mllvm".into(),
        "-print-after=sample-profile".into(),
    ];
    args.extend(lua_args(&["-O2"]));
    args.extend(["-o".into(), "lua-pgo".into()]);
    let o = Command::new(tally())
        .args(&args)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let summary: Vec<&str> = err.lines().filter(|l| l.starts_with("tally:")).collect();
    assert_eq!(summary.len(), 1, "{summary:?}");
    // Every function with a profile matched. (The loader does not count the functions a
    // module has of glibc's headers, such as `tolower`, which the profile also holds.)
    let n = h.len();
    let m: usize = summary[0]
        .split(" of ")
        .next()
        .and_then(|w| w.rsplit(' ').next())
        .and_then(|w| w.parse().ok())
        .unwrap_or(0);
    assert!(
        m > 1000
            && m <= n
            && summary[0].contains(&format!(
                " {m} of {m} functions with a profile matched it by checksum, 0 did not"
            )),
        "{}",
        summary[0]
    );
    assert!(
        !err.contains("profile records"),
        "the loader left records unused"
    );
    let early = left_early(&report);
    assert_heads_attached("", &err, &h, &early);

    // Block weights: every two-way branch whose successors can be matched with their probes
    // (each has the branch as its only predecessor) is weighed with exactly their counts, in
    // the functions no early exit left. The loader keeps a `__builtin_expect`'s weights
    // (LLVM's `-overwrite-existing-weights` is off), and weighs no branch that never ran.
    let (mut weighed, mut kept, mut never_ran) = (0, 0, 0);
    for b in crate::pgo_fidelity::weighed_branches(&err, &text) {
        if early.contains(&b.function) {
            continue;
        }
        match &b.weights {
            _ if b.expected => kept += 1,
            Some(w) => {
                assert_eq!(w[..], b.counts[..], "{}: branch weights", b.function);
                weighed += 1;
            }
            None => {
                assert_eq!(
                    b.counts,
                    [0, 0],
                    "{}: a branch that ran has no weights",
                    b.function
                );
                never_ran += 1;
            }
        }
    }
    eprintln!(
        "pgo: {weighed} branches weighed with their probes' exact counts; {kept} kept \
         __builtin_expect's weights; {never_ran} never ran"
    );
    assert!(weighed > 300, "{weighed} branch weights compared");
    crate::pgo_nested::check_lua(&dir, &prof, &text, &report_json(&prof), &early);
    let script = repo().join("testdata/lua/small.lua");
    let rebuilt = Command::new(dir.join("lua-pgo"))
        .arg(&script)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(
        rebuilt.stdout, out,
        "the rebuilt program prints what the trained one did"
    );

    // A stale profile: every checksum altered. The build goes on, and says so in one line.
    let stale: String = text
        .lines()
        .map(|l| match l.strip_prefix(" !CFGChecksum: ") {
            Some(c) => format!(" !CFGChecksum: {}\n", c.parse::<u64>().unwrap() ^ 1),
            None => format!("{l}\n"),
        })
        .collect();
    std::fs::write(dir.join("stale.prof"), stale).unwrap();
    let mut args = vec!["cc".to_string(), "--tally-use=stale.prof".into()];
    args.extend(lua_args(&["-O2"]));
    args.extend(["-o".into(), "lua-stale".into()]);
    let o = Command::new(tally())
        .args(&args)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            " 0 of {m} functions with a profile matched it by checksum, {m} did not"
        )),
        "{err}"
    );
}

#[test]
fn probes_added_after_optimization_are_warned_about() {
    let dir = scratch("pgo-late");
    let src = repo().join("testdata/demo/wordfreq.c");
    let o = Command::new(tally())
        .args(["cc", "-O2", "-fpseudo-probe-for-profiling"])
        .arg(&src)
        .args(["-o", "wordfreq"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let input = repo().join("testdata/demo/input.txt");
    let prof = dir.join("wordfreq.tally");
    assert!(run(
        &dir.join("wordfreq"),
        &[input.to_str().unwrap()],
        &dir,
        &prof
    )
    .status
    .success());
    let (text, said) = export(&dir, &prof);
    assert!(!text.is_empty());
    assert!(
        said.contains("warning: 1 modules got their probes after optimization"),
        "{said}"
    );

    // Without probes there is nothing to export: one line, status 2.
    let o = Command::new(tally())
        .args(["cc", "-O2"])
        .arg(&src)
        .args(["-o", "plain"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success());
    let prof = dir.join("plain.tally");
    assert!(
        run(&dir.join("plain"), &[input.to_str().unwrap()], &dir, &prof)
            .status
            .success()
    );
    let o = Command::new(tally())
        .args(["report", "--export", "sample-profile"])
        .arg(&prof)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no pseudo-probes"), "{err}");
}

/// A program that counts how often `classify` is called and how its two branches go, and
/// prints the counts: the oracle of the loop's counts.
const CLASSIFY: &str = r#"#include <stdio.h>
#include <stdlib.h>
static unsigned long calls, tens, odd;
__attribute__((noinline)) static int classify(unsigned x) {
    calls++;
    if (x % 10 == 0) {
        tens++;
        return (int)(x / 10);
    }
    if (x & 1) {
        odd++;
        return (int)(3 * x + 1);
    }
    return (int)(x / 2);
}
int main(int argc, char **argv) {
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 1000;
    long sum = 0;
    for (unsigned i = 0; i < n; i++) sum += classify(i * 7 + 3);
    printf("%lu %lu %lu %ld\n", calls, tens, odd, sum);
    return 0;
}
"#;

/// `tally cc ARGS` in `dir`, which must succeed; what it said on stderr.
pub(crate) fn tally_cc(dir: &Path, args: &[&str]) -> String {
    let o = Command::new(tally())
        .arg("cc")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `source` to `dir/NAME.c`, trains it with `--tally-pgo -O2 FLAGS` on `1000`: the profile,
/// and the numbers the program printed.
pub(crate) fn train_small(
    dir: &Path,
    name: &str,
    source: &str,
    flags: &[&str],
) -> (PathBuf, String, Vec<u64>) {
    let src = format!("{name}.c");
    std::fs::write(dir.join(&src), source).unwrap();
    let mut args = vec!["--tally-pgo", "-O2", &src, "-o", "train"];
    args.extend(flags);
    tally_cc(dir, &args);
    let prof = dir.join("train.tally");
    let o = run(&dir.join("train"), &["1000"], dir, &prof);
    let out = String::from_utf8(o.stdout).unwrap();
    let n = out.split_whitespace().map(|w| w.parse().unwrap()).collect();
    (prof, out, n)
}

#[test]
fn the_loop_gives_a_programs_own_counts_to_its_branches() {
    let dir = scratch("pgo-classify");
    let cc = |args: &[&str]| tally_cc(&dir, args);
    let (prof, out, n) = train_small(&dir, "classify", CLASSIFY, &[]);
    let (calls, tens, odd) = (n[0], n[1], n[2]);
    let (text, _) = export(&dir, &prof);
    let (name, &(_, head)) = heads(&text)
        .iter()
        .find(|(n, _)| n.contains("classify"))
        .map(|(n, h)| (n.clone(), h))
        .expect("classify in the profile");
    assert_eq!(
        head, calls,
        "{name}: head count against the program's own count"
    );
    // The rebuild: the loader weighs classify's two branches with exactly those counts.
    let dump = cc(&[
        "--tally-use=train.tally",
        "-O2",
        "classify.c",
        "-o",
        "fast",
        "-mllvm",
        "-print-after=sample-profile",
    ]);
    for (taken, not) in [(tens, calls - tens), (odd, calls - tens - odd)] {
        let w = format!("!{{!\"branch_weights\", i32 {taken}, i32 {not}}}");
        assert!(dump.contains(&w), "no {w} in the loader's output");
    }
    let fast = Command::new(dir.join("fast")).arg("1000").output().unwrap();
    assert_eq!(String::from_utf8(fast.stdout).unwrap(), out);
    // The inliner's cost-benefit analysis is turned on, unless the command sets it (LLVM
    // refuses an option given twice).
    let base = [
        "--tally-verbose",
        "--tally-use=train.tally",
        "-O2",
        "classify.c",
        "-o",
        "fast2",
    ];
    assert_mllvm_once(
        &dir,
        &base,
        "-fprofile-sample-use=",
        "-inline-enable-cost-benefit-analysis",
    );
    // The training build generates code from the instrumented IR without LICM's promotion of
    // memory to registers, unless the command says otherwise.
    let base = [
        "--tally-verbose",
        "--tally-pgo",
        "-O2",
        "-c",
        "classify.c",
        "-o",
        "classify.o",
    ];
    assert_mllvm_once(&dir, &base, " -x ir ", "-disable-licm-promotion");
}

/// `tally cc BASE` runs clang (its line in the verbose output holds `marker`) with `-mllvm
/// FLAG` once; `tally cc BASE -mllvm FLAG=false` with the command's own, once.
fn assert_mllvm_once(dir: &Path, base: &[&str], marker: &str, flag: &str) {
    let own = format!("{flag}=false");
    for (extra, want) in [(vec![], flag), (vec!["-mllvm", own.as_str()], own.as_str())] {
        let args: Vec<&str> = base.iter().copied().chain(extra).collect();
        let err = tally_cc(dir, &args);
        let line = err
            .lines()
            .find(|l| l.contains(marker))
            .unwrap_or_else(|| panic!("no clang line with {marker}: {err}"));
        let given: Vec<&str> = line.split(' ').filter(|w| w.starts_with(flag)).collect();
        assert_eq!(given, [want], "{line}");
    }
}

/// `tally check` of a profile with a same-run oracle: every function compared, all equal.
fn assert_checked(what: &str, prof: &Path) {
    let o = Command::new(tally())
        .args(["check", "--format", "json"])
        .arg(prof)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{what}: {e}: {}", String::from_utf8_lossy(&o.stderr)));
    assert!(o.status.success() && v["passed"] == true, "{what}: {v}");
    assert!(
        v["compared"].as_u64() > Some(0),
        "{what}: nothing compared: {v}"
    );
    assert_eq!(v["compared"], v["equal"], "{what}: {v}");
}

/// The training build on the early-termination programs (`exit`, `longjmp`, abort handlers,
/// C++ exceptions unwinding through functions): instrumented before optimization, with the
/// same-run `edges-naive` oracle (`--tally-oracle`), every count of `edge` equals the oracle's
/// after clang's optimizer ran on both (a function with a frame record is kept from inlining:
/// docs/pgo.md), and every head count of its sample profile is the function's entry count in
/// an `edges-naive` build without pre-inlining. For the C programs that build's sample profile
/// is the same text. (Not for C++: inlined there, the library's header templates run in the
/// program or in libstdc++ depending on the optimizer's choices, which the two builds'
/// instrumentation changes; heads are compared for the program's own functions.)
#[test]
fn training_builds_are_exact_on_the_early_termination_programs() {
    for (src, status) in early_programs() {
        let name = src.file_stem().unwrap().to_str().unwrap().to_string();
        let cxx = src.extension().is_some_and(|e| e == "cpp");
        let dir = scratch(&format!("pgo-early-{name}"));
        let mut texts = Vec::new();
        for mode in ["edge", "edges-naive"] {
            let o = Command::new(tally())
                .args([if cxx { "c++" } else { "cc" }, "--tally-pgo"])
                .arg(format!("--tally-mode={mode}"))
                .args((mode == "edge").then_some("--tally-oracle"))
                // The oracle counts every function as written, without pre-inlining.
                .args((mode == "edges-naive").then_some("--tally-pgo-inline=off"))
                .args(["-O2", "-g"])
                .arg(&src)
                .arg("-o")
                .arg(mode)
                .current_dir(&dir)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let built = String::from_utf8_lossy(&o.stderr);
            assert!(!built.contains("warning"), "{name}: {built}");
            let prof = dir.join(format!("{mode}.tally"));
            let o = run(&dir.join(mode), &[], &dir, &prof);
            assert_eq!(o.status.code(), Some(status), "{name} {mode}");
            if mode == "edge" {
                assert_checked(&format!("{name} --tally-pgo edge"), &prof);
            }
            let (text, said) = export(&dir, &prof);
            assert!(!said.contains("warning"), "{name}: {said}");
            texts.push(text);
        }
        assert!(!texts[0].is_empty(), "{name}: empty profile");
        if !cxx {
            assert_same_profile(
                &format!("{name}: edge and edges-naive"),
                &texts[0],
                &texts[1],
            );
        }
        let report = report_json(&dir.join("edges-naive.tally"));
        let h = heads(&texts[0]);
        let mut compared = 0;
        for f in report["functions"].as_array().unwrap() {
            let n = f["name"].as_str().unwrap();
            // In C++, the program's own functions (libstdc++'s header members run in the
            // program or in the library depending on inlining).
            let own = f["file"]
                .as_str()
                .is_some_and(|p| Path::new(p).file_name() == src.file_name());
            if cxx && !own {
                continue;
            }
            if let Some(&(_, head)) = h.get(n) {
                assert_eq!(Some(head), f["entry_count"].as_u64(), "{name}: {n}");
                compared += 1;
            }
        }
        assert!(compared > 2, "{name}: {compared} heads compared");
    }
}

/// Real code whose errors are C++ exceptions: Lua compiled as C++, trained with `--tally-pgo`
/// and the same-run oracle on the workload (errors thrown through the interpreter's frames):
/// every count equals the oracle's, and the output is the plain build's.
#[test]
fn lua_as_cxx_training_build_equals_its_same_run_oracle() {
    let dir = scratch("pgo-lua-cxx");
    let mut args = vec!["-x".to_string(), "c++".to_string()];
    args.extend(lua_args(&["-O2"]));
    let script = repo().join("testdata/lua/workload.lua");
    let run_args = [script.to_str().unwrap(), "1"];
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    build(Variant::Plain, true, &a, &dir.join("plain"), &dir);
    let want = run(
        &dir.join("plain"),
        &run_args,
        &dir,
        &dir.join("plain.tally"),
    );
    let o = Command::new(tally())
        .args(["c++", "--tally-pgo", "--tally-mode=edge", "--tally-oracle"])
        .args(&args)
        .arg("-o")
        .arg("trained")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let prof = dir.join("trained.tally");
    let got = run(&dir.join("trained"), &run_args, &dir, &prof);
    assert_eq!(got.status.code(), want.status.code());
    assert!(
        got.stdout == want.stdout,
        "the trained build's output differs"
    );
    assert_checked("lua as C++, --tally-pgo edge", &prof);
}

/// `--export sample-profile --extbinary`: LLVM's binary format through llvm-profdata, with a
/// profile symbol list naming every function, records only for those that ran; clang builds
/// the same object from it as from the text profile (whose zero records say the same).
#[test]
fn an_extbinary_profile_names_never_run_functions_in_its_symbol_list() {
    let dir = scratch("pgo-extbinary");
    let src = repo().join("testdata/demo/wordfreq.c");
    let input = repo().join("testdata/demo/input.txt");
    let cc = |args: &[&str]| {
        let o = Command::new(tally())
            .arg("cc")
            .args(args)
            .arg(&src)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    cc(&["--tally-pgo", "-O2", "-o", "train"]);
    let prof = dir.join("train.tally");
    run(&dir.join("train"), &[input.to_str().unwrap()], &dir, &prof);
    let (text, _) = export(&dir, &prof);
    let o = Command::new(tally())
        .args([
            "report",
            "--export",
            "sample-profile",
            "--flat",
            "--extbinary",
            "-o",
            "w.extbinary",
        ])
        .arg(&prof)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let show = |extra: &[&str]| {
        let o = Command::new("llvm-profdata-19")
            .args(["show", "--sample"])
            .args(extra)
            .arg("w.extbinary")
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let h = heads(&text);
    let never: Vec<&String> = h
        .iter()
        .filter(|(_, &(t, _))| t == 0)
        .map(|(n, _)| n)
        .collect();
    assert!(!never.is_empty(), "every function ran: nothing to check");
    let listed = show(&["--show-prof-sym-list"]);
    for name in h.keys() {
        assert!(
            listed.lines().any(|l| l == name),
            "{name} not in the symbol list"
        );
    }
    let records = show(&[]);
    for (name, &(total, _)) in &h {
        let has = records.contains(&format!("Function: {name}: "));
        assert_eq!(has, total > 0, "{name}: record in the extbinary profile");
    }
    std::fs::write(dir.join("w.prof"), &text).unwrap();
    cc(&["--tally-use=w.prof", "-O2", "-c", "-o", "text.o"]);
    cc(&["--tally-use=w.extbinary", "-O2", "-c", "-o", "extbinary.o"]);
    // The code (LLVM writes the objects' `.pseudo_probe` sections in no fixed order).
    let code = |o: &str| {
        let d = Command::new("llvm-objdump-19")
            .args(["-d", "--no-leading-headers", o])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(d.status.success());
        let text = String::from_utf8(d.stdout).unwrap();
        text.lines()
            .filter(|l| !l.contains("file format"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        code("text.o") == code("extbinary.o"),
        "the two profiles build different code"
    );
}
