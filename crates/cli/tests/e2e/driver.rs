//! `tally cc` / `tally c++` drop into real builds: make with CC="tally cc", separate compile
//! and link steps, several sources, static archives, objects not built by tally, dependency
//! files, -S, pass-through invocations, compile errors, and mode selection.

use crate::support::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn sh(dir: &Path, cmd: &str) -> std::process::Output {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env("TALLY", tally())
        .env_remove("TALLY_MODE")
        .output()
        .unwrap()
}

fn ok(dir: &Path, cmd: &str) -> String {
    let o = sh(dir, cmd);
    assert!(
        o.status.success(),
        "`{cmd}` failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs `cmd`, which must fail with exit status 2 and one line on stderr containing `want`.
fn fails_with(dir: &Path, cmd: &str, want: &str) {
    let o = sh(dir, cmd);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "`{cmd}`: {err}");
    assert_eq!(err.lines().count(), 1, "`{cmd}`: {err}");
    assert!(err.contains(want), "`{cmd}`: want '{want}' in {err}");
}

fn function<'a>(r: &'a Value, name: &str) -> Option<&'a Value> {
    r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
}

const MAKEFILE: &str = r#"
CFLAGS ?= -O2 -g
all: app
util.o: util.c util.h
plain.o: plain.c
	clang-19 -O2 -c plain.c -o plain.o
libshape.a: shape.o
	ar rcs $@ $^
app: main.o util.o libshape.a plain.o
	$(CC) $(CFLAGS) -o $@ main.o util.o plain.o -L. -lshape
clean:
	rm -f *.o *.a *.d app
-include *.d
"#;

#[test]
fn make_with_tally_cc_archives_and_foreign_objects() {
    let dir = scratch("driver-make");
    write(&dir, "Makefile", MAKEFILE);
    write(
        &dir,
        "util.h",
        "int util(int);\nint area(int,int);\nint plain_fn(int);\n",
    );
    write(
        &dir,
        "util.c",
        "#include \"util.h\"\nint util(int x){ int s=0; for(int i=0;i<x;i++) s += (i&1)? i : -i; return s; }\n",
    );
    write(
        &dir,
        "shape.c",
        "int area(int w,int h){ return w>h ? w*h : h*w+1; }\n",
    );
    write(&dir, "plain.c", "int plain_fn(int x){ return x*2; }\n");
    write(
        &dir,
        "main.c",
        "#include <stdio.h>\n#include \"util.h\"\nint main(int c, char **v){ int t=0; for(int i=0;i<25;i++) t += util(i) + area(i,3) + plain_fn(i); printf(\"%d\\n\", t); return 0; }\n",
    );
    ok(&dir, "make CC=\"$TALLY cc\" CFLAGS='-O2 -g -MD' app");
    // Dependency files name the real object and the header.
    let deps = std::fs::read_to_string(dir.join("util.d")).expect("util.d written by -MD");
    assert!(deps.starts_with("util.o:"), "{deps}");
    assert!(deps.contains("util.h"), "{deps}");
    let out = ok(&dir, "TALLY_PROFILE=app.tally ./app");
    let plain = {
        ok(
            &dir,
            "clang-19 -O2 main.c util.c shape.c plain.c -o app-plain",
        );
        ok(&dir, "./app-plain")
    };
    assert_eq!(out, plain);
    let r = report_json(&dir.join("app.tally"));
    assert_eq!(function(&r, "main").unwrap()["entry_count"], 1);
    assert_eq!(function(&r, "util").unwrap()["entry_count"], 25);
    assert_eq!(
        function(&r, "area").unwrap()["entry_count"],
        25,
        "archive member"
    );
    assert!(
        function(&r, "plain_fn").is_none(),
        "plain.o was not built by tally"
    );
    assert!(
        function(&r, "main").unwrap()["blocks"][0]["line"]
            .as_u64()
            .unwrap()
            > 0,
        "-g gives lines"
    );
}

#[test]
fn passthrough_errors_and_assembly() {
    let dir = scratch("driver-misc");
    let v = ok(&dir, "$TALLY cc --version");
    assert!(v.contains("clang version 19"), "{v}");
    write(&dir, "bad.c", "int main(void){ return nope; }\n");
    let o = sh(&dir, "$TALLY cc -c bad.c -o bad.o");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope"));
    write(&dir, "a.c", "int f(int x){ return x>3 ? x : -x; }\n");
    ok(&dir, "$TALLY cc -O2 -S a.c");
    let asm = std::fs::read_to_string(dir.join("a.s")).unwrap();
    assert!(asm.contains("__tally_register"), "instrumented assembly");
    ok(&dir, "$TALLY cc -O2 -E a.c -o a.i");
    assert!(std::fs::read_to_string(dir.join("a.i"))
        .unwrap()
        .contains("int f"));
    // compile-only without -o names the object after the source
    ok(&dir, "$TALLY cc -O1 -c a.c");
    assert!(dir.join("a.o").is_file());
}

#[test]
fn mode_flag_wins_over_environment() {
    let dir = scratch("driver-mode");
    write(&dir, "m.c", "int main(void){ return 0; }\n");
    let mode_of = |env: &str, flag: &str| -> String {
        ok(
            &dir,
            &format!("{env} $TALLY cc {flag} m.c -o m && TALLY_PROFILE=m.tally ./m"),
        );
        let r = report_json(&dir.join("m.tally"));
        r["modes"][0].as_str().unwrap().to_string()
    };
    assert_eq!(mode_of("", ""), "edge");
    assert_eq!(mode_of("TALLY_MODE=blocks-naive", ""), "blocks-naive");
    assert_eq!(
        mode_of("TALLY_MODE=blocks-naive", "--tally-mode=edges-naive"),
        "edges-naive"
    );
    let o = sh(&dir, "$TALLY cc --tally-mode=bogus m.c -o m");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bogus"));

    // A bad TALLY_MODE is an error naming the variable, unless the flag overrides it; an
    // empty one is unset.
    fails_with(
        &dir,
        "TALLY_MODE=bogus $TALLY cc m.c -o m",
        "TALLY_MODE=bogus: invalid value 'bogus' (possible values: edge, ",
    );
    assert_eq!(
        mode_of("TALLY_MODE=bogus", "--tally-mode=edges-naive"),
        "edges-naive"
    );
    assert_eq!(mode_of("TALLY_MODE=", ""), "edge");
}

#[test]
fn bad_options_are_one_line_errors_listing_every_valid_value() {
    let dir = scratch("driver-bad-options");
    write(&dir, "m.c", "int main(void){ return 0; }\n");
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let value_options: [(&str, Vec<String>); 5] = [
        (
            "mode",
            tally_format::mode::MODES
                .iter()
                .map(|m| m.name.to_string())
                .collect(),
        ),
        (
            "weighting",
            tally_llvm::Weighting::ALL
                .iter()
                .map(|w| w.name().to_string())
                .collect(),
        ),
        (
            "events",
            tally_llvm::EventKind::ALL
                .iter()
                .map(|k| k.name().to_string())
                .collect(),
        ),
        (
            "early-exits",
            tally_llvm::EarlyExits::ALL
                .iter()
                .map(|k| k.name().to_string())
                .collect(),
        ),
        ("promote", names(&["on", "off"])),
    ];
    for (opt, valid) in value_options {
        let want = format!(
            "tally: error: --tally-{opt}=nope: invalid value 'nope' (possible values: {})\n",
            valid.join(", ")
        );
        fails_with(&dir, &format!("$TALLY cc --tally-{opt}=nope -c m.c"), &want);
    }
    for (args, want) in [
        (
            "--tally-jump-cost=x",
            "--tally-jump-cost=x: invalid value 'x' (not a non-negative number)",
        ),
        ("--tally-frobnicate", "unknown option --tally-frobnicate"),
        (
            "--tally-mode",
            "--tally-mode=<MODE>: missing value (possible values: edge, ",
        ),
        ("--tally-verbose=yes", "--tally-verbose"),
    ] {
        fails_with(&dir, &format!("$TALLY cc {args} -c m.c"), want);
    }
    assert!(!dir.join("m.o").exists());
}

#[test]
fn help_lists_tally_options_then_clangs() {
    let dir = scratch("driver-help");
    for (cmd, clang) in [("cc", "clang-19"), ("c++", "clang++-19")] {
        let out = ok(&dir, &format!("$TALLY {cmd} --help"));
        let (tally, rest) = out
            .split_once(&format!(
                "All other options go to {clang}; its help follows."
            ))
            .unwrap_or_else(|| panic!("no clang part in:\n{out}"));
        assert!(tally.starts_with("Compile and link like clang"), "{tally}");
        assert!(tally.contains(&format!("Usage: tally {cmd} ")), "{tally}");
        for opt in [
            "--tally-mode=<MODE>",
            "--tally-atomic",
            "--tally-weighting=<W>",
            "--tally-events=<KIND>",
            "--tally-early-exits=<HOW>",
            "--tally-promote[=<on|off>]",
            "--tally-sese[=<on|off>]",
            "--tally-jump-cost=<X>",
            "--tally-weights=<PROFILE>",
            "--tally-verbose",
            "TALLY_MODE",
            "TALLY_VERBOSE",
        ] {
            assert!(tally.contains(opt), "{opt} missing from:\n{tally}");
        }
        for m in tally_format::mode::MODES {
            assert!(tally.contains(m.help), "{} missing from:\n{tally}", m.help);
        }
        assert!(!tally.contains("no-shadow"), "{tally}");
        assert!(rest.contains("OVERVIEW: clang LLVM compiler"), "{rest}");
        assert!(rest.lines().count() > 100, "{rest}");
    }
}

#[test]
fn cxx_inline_functions_in_several_units_are_merged() {
    let dir = scratch("driver-cxx");
    write(
        &dir,
        "shared.h",
        "#pragma once\n#include <vector>\ntemplate <class T> T total(const std::vector<T>& v){ T s{}; for (auto x : v) if (x > 0) s += x; return s; }\n",
    );
    write(
        &dir,
        "a.cpp",
        "#include \"shared.h\"\nint fa(){ std::vector<int> v{1,-2,3}; return total(v); }\n",
    );
    write(
        &dir,
        "b.cpp",
        "#include \"shared.h\"\n#include <cstdio>\nint fa();\nint main(){ std::vector<int> v{4,5,-6}; int r = 0; for (int i = 0; i < 10; i++) r += total(v) + fa(); std::printf(\"%d\\n\", r); }\n",
    );
    for mode in ["edge", "edges-naive"] {
        ok(
            &dir,
            &format!("$TALLY c++ --tally-mode={mode} -O0 -g -c a.cpp && $TALLY c++ --tally-mode={mode} -O0 -g -c b.cpp && $TALLY c++ --tally-mode={mode} a.o b.o -o app-{mode}"),
        );
        let out = ok(&dir, &format!("TALLY_PROFILE={mode}.tally ./app-{mode}"));
        assert_eq!(out.trim(), "130");
    }
    let e = report_json(&dir.join("edge.tally"));
    let n = report_json(&dir.join("edges-naive.tally"));
    let t = function(&e, "_Z5totalIiET_RKSt6vectorIS0_SaIS0_EE").expect("template instance");
    assert_eq!(t["entry_count"], 20);
    assert_eq!(t["copies"], 2, "one copy per translation unit, summed");
    assert_same_counts("c++ linkonce", "edge", &e, "edges-naive", &n, true);
}

#[test]
fn runtime_and_instrumenter_agree_on_the_abi() {
    assert_eq!(tally_llvm::ABI_VERSION, tally_runtime::ABI_VERSION);
    let slack = tally_llvm::EV_SLACK.trailing_zeros();
    assert_eq!(tally_llvm::EV_SLACK, 1 << slack);
    assert!(
        tally_runtime::HEADER.contains(&format!("#define TALLY_EV_SLACK (1LL << {slack})")),
        "TALLY_EV_SLACK of tally.h differs from tally_llvm::EV_SLACK"
    );
    assert!(
        tally_runtime::HEADER.contains(&format!(
            "#define TALLY_PATH_HOME_BITS {}",
            tally_llvm::PATH_HOME_BITS
        )),
        "TALLY_PATH_HOME_BITS of tally.h differs from tally_llvm::PATH_HOME_BITS"
    );
}

#[test]
fn exact_weights_from_an_earlier_profile() {
    // Ball & Larus 1994 §6.4 "Exact-Max": counters placed with measured frequencies. The counts
    // stay exact, the placement executes no more increments than the heuristic one, and a profile
    // of other sources is reported and ignored function by function.
    let dir = scratch("driver-weights");
    write(
        &dir,
        "w.c",
        "#include <stdio.h>\nint main(void){ long s=0; for(int i=0;i<5000;i++){ if(i%97==0) s+=3; else if(i&1) s+=i; else s-=1; } printf(\"%ld\\n\", s); return 0; }\n",
    );
    ok(&dir, "$TALLY cc --tally-mode=edges-naive -O1 w.c -o oracle && TALLY_PROFILE=oracle.tally ./oracle");
    let o = sh(
        &dir,
        "$TALLY cc --tally-mode=edge --tally-verbose --tally-weights=oracle.tally -O1 w.c -o exact && TALLY_PROFILE=exact.tally ./exact",
    );
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("1 with measured weights"), "{err}");
    ok(
        &dir,
        "$TALLY cc --tally-mode=edge -O1 w.c -o heur && TALLY_PROFILE=heur.tally ./heur",
    );
    let exact = report_json(&dir.join("exact.tally"));
    let heur = report_json(&dir.join("heur.tally"));
    let oracle = report_json(&dir.join("oracle.tally"));
    assert_same_counts("weights", "exact", &exact, "edges-naive", &oracle, true);
    assert_same_counts("weights", "heuristic", &heur, "edges-naive", &oracle, true);
    let increments = |p: &str| -> u64 {
        let prof = tally_format::profile::Profile::read_file(dir.join(p)).unwrap();
        prof.modules.iter().flat_map(|m| m.counters.iter()).sum()
    };
    assert!(increments("exact.tally") <= increments("heur.tally"));

    // Weights from a different program: a warning, heuristic placement, exact counts.
    write(
        &dir,
        "v.c",
        "int main(void){ int s=0; for(int i=0;i<3;i++) s+=i; return s-3; }\n",
    );
    let o = sh(&dir, "$TALLY cc --tally-weights=oracle.tally -O1 v.c -o v");
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("different graph"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A broken weights profile is refused.
    write(&dir, "bad.tally", "nonsense");
    let o = sh(&dir, "$TALLY cc --tally-weights=bad.tally -O1 v.c -o v");
    assert_eq!(o.status.code(), Some(2));
}

/// A loop whose branches LLVM's estimate can rank and Ball & Larus 1994 §5's loop-only weighting
/// cannot: `__builtin_expect` both ways round and a test that leads to a `cold` function, each
/// beside the common case.
const RANKED_BRANCHES: &str = r#"#include <stdio.h>
struct node { int v; struct node *next; };
__attribute__((cold, noinline)) static long complain(int i) { fprintf(stderr, "odd %d\n", i); return 1; }
__attribute__((noinline)) static long up(struct node *n) { return n->v + 1; }
__attribute__((noinline)) static long down(struct node *n) { return n->v - 1; }
__attribute__((noinline)) static long walk(struct node *n, int r) {
  long s = 0;
  for (; n; n = n->next) {
    if (__builtin_expect(n->v == 1000 + r, 0)) s += down(n);
    else s += up(n);
    if (__builtin_expect(n->v != 2000 + r, 1)) s += up(n);
    else s += down(n);
    if (n->v < -r) s += complain(r);
    else s ^= up(n);
  }
  return s;
}
int main(int argc, char **argv) {
  (void)argv;
  static struct node nodes[64];
  for (int i = 0; i < 64; i++) {
    nodes[i].v = i * argc;
    nodes[i].next = i + 1 < 64 ? &nodes[i + 1] : NULL;
  }
  long s = 0;
  for (int r = 0; r < 20000; r++) s += walk(&nodes[0], r);
  printf("%ld\n", s);
  return 0;
}
"#;

#[test]
fn static_estimate_places_fewer_increments_than_loop_weighting() {
    // `--tally-weighting=estimate` is LLVM's static frequency estimate (branch-prediction
    // heuristics); the default, `loops`, is Ball & Larus 1994 §5's (asked for by name here). Both
    // are exact; on branches the estimate can rank, its spanning tree leaves the counters on the
    // rare sides.
    let dir = scratch("driver-weighting");
    write(&dir, "r.c", RANKED_BRANCHES);
    ok(&dir, "$TALLY cc --tally-mode=edges-naive -O2 r.c -o oracle && TALLY_PROFILE=oracle.tally ./oracle");
    ok(
        &dir,
        "$TALLY cc --tally-weighting=estimate -O2 r.c -o est && TALLY_PROFILE=est.tally ./est",
    );
    ok(
        &dir,
        "$TALLY cc --tally-weighting=loops -O2 r.c -o loops && TALLY_PROFILE=loops.tally ./loops",
    );
    let oracle = report_json(&dir.join("oracle.tally"));
    for p in ["est.tally", "loops.tally"] {
        let r = report_json(&dir.join(p));
        assert_same_counts("weighting", p, &r, "edges-naive", &oracle, true);
    }
    let increments = |p: &str| -> u64 {
        let prof = tally_format::profile::Profile::read_file(dir.join(p)).unwrap();
        prof.modules.iter().flat_map(|m| m.counters.iter()).sum()
    };
    let (est, loops) = (increments("est.tally"), increments("loops.tally"));
    // 1.28M loop iterations: the estimate counts once per iteration (the loop's own cycle)
    // besides the 3.84M calls of `up`, §5's tie-breaking once more.
    assert!(
        est + 1_000_000 < loops,
        "estimate: {est} increments, loops: {loops}: the estimate should save one per iteration"
    );

    fails_with(
        &dir,
        "$TALLY cc --tally-weighting=guess r.c -o bad",
        "--tally-weighting=guess: invalid value 'guess' (possible values: estimate, loops)",
    );
}

/// Two call-free inner loops, data-dependent trip counts, inside one call-free outer loop.
const TWO_INNER_LOOPS: &str = r#"
extern unsigned char buf[8192];
long scan(int n, int seed) {
    long total = 0;
    for (int i = 0; i < n; i++) {
        int j = (i * 7 + seed) & 4095;
        while (buf[j] != 0) j++;
        int k = (i * 13 + seed) & 4095;
        while (buf[k] != 0 && (k & 7) != 7) k++;
        total += j - k;
    }
    return total;
}
"#;

const SCAN_MAIN: &str = r#"
#include <stdio.h>
unsigned char buf[8192];
long scan(int n, int seed);
int main(void) {
    for (int i = 0; i < 4096; i++) buf[i] = (i % 13) != 0;
    long t = 0;
    for (int r = 0; r < 40; r++) t += scan(3000, r);
    printf("%ld\n", t);
    return 0;
}
"#;

#[test]
fn promotion_keeps_innermost_loop_counters_in_registers_exactly() {
    // The default promotes the counters of innermost call-free loops (one load and store per
    // loop entry, not one memory increment per iteration); `--tally-promote=off` does not.
    // The outer loop is call-free too, but is not promoted as a nest: that would keep every
    // counter of the nest live across it.
    let dir = scratch("driver-promote");
    write(&dir, "s.c", TWO_INNER_LOOPS);
    write(&dir, "m.c", SCAN_MAIN);
    ok(
        &dir,
        "$TALLY cc --tally-mode=edges-naive -O2 s.c m.c -o oracle && TALLY_PROFILE=oracle.tally ./oracle > oracle.out",
    );
    let oracle = report_json(&dir.join("oracle.tally"));
    for (flags, loops) in [
        ("", 2),
        ("--tally-promote=on", 2),
        ("--tally-promote=off", 0),
        // Hidden tuning knobs (docs/log/sese.md, twelfth round): no cycle of either loop is one
        // instruction long, none is a thousand; neither loop touches more than 20 counters,
        // both touch at least one.
        ("--tally-promote-chain=1", 0),
        ("--tally-promote-chain=1000", 2),
        ("--tally-promote-max=0", 0),
        ("--tally-promote-max=20", 2),
    ] {
        let stats = ok(
            &dir,
            &format!("$TALLY cc {flags} --tally-verbose -O2 -c s.c -o s.o 2>&1"),
        );
        let want = format!(" promoted counters in {loops} loops");
        assert!(stats.contains(&want), "{flags}: want '{want}' in:\n{stats}");
        if loops == 0 {
            assert!(stats.contains(" 0 promoted counters"), "{flags}:\n{stats}");
        }
        ok(
            &dir,
            &format!("$TALLY cc {flags} -O2 s.o m.c -o p && TALLY_PROFILE=p.tally ./p > p.out && cmp p.out oracle.out"),
        );
        let r = report_json(&dir.join("p.tally"));
        assert_same_counts("promote", flags, &r, "edges-naive", &oracle, true);
    }

    fails_with(
        &dir,
        "$TALLY cc --tally-promote=maybe s.c -c -o bad.o",
        "--tally-promote=maybe: invalid value 'maybe' (possible values: on, off)",
    );
}

#[test]
fn jump_cost_option_is_checked() {
    let dir = scratch("driver-jump-cost");
    write(&dir, "j.c", "int main(void){ return 0; }\n");
    ok(
        &dir,
        "$TALLY cc --tally-jump-cost=0 j.c -o j0 && $TALLY cc --tally-jump-cost=1.5 j.c -o j1",
    );
    fails_with(
        &dir,
        "$TALLY cc --tally-jump-cost=-1 j.c -o bad",
        "--tally-jump-cost=-1: invalid value '-1' (not a non-negative number)",
    );
}
