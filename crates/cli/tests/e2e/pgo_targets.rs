//! Call targets of indirect calls (`tally cc --tally-pgo`, `module::call_targets` in tally-llvm;
//! docs/pgo.md): a training build counts where each indirect call goes, and the sample profile
//! gives the counts as the call-site probe's targets (` id: count name:count ...`), which clang's
//! loader turns into value-profile metadata for its indirect-call promotion.
//!
//! On a small program that calls through a table of function pointers and counts its own calls
//! of each target (a static function, and `abs` from libc):
//! - the profile's line of the indirect call is the program's own counts, exactly, in the
//!   `edge` build and in the `edges-naive` one (every edge counted), and with the training
//!   build's pre-inlining off;
//! - `tally cc --tally-use` promotes the call to each target defined in the module with exactly
//!   those counts (clang's `-Rpass=pgo-icall-prom` remarks), and the rebuilt program prints
//!   what the trained one did;
//! - they are counted by default; with `--tally-pgo-targets=off` none are, and the profile has
//!   none.
//!
//! Direct calls have their line too when asked (`--direct-calls`: ` id: count callee:count`):
//! on a program whose last call of one function ends it, the calls after that one in the same
//! block are counted as the program counts them, and a call the training build inlined is one
//! line of the flat profile and a nested record of the nested one; without the flag there are
//! none.

use crate::pgo::{export, tally_cc, train_small};
use crate::support::*;

/// Calls through a table, from a function the optimizer does not inline: `add` 6 times in 10,
/// `sub` 3 in 10 and `abs` 1 in 10, counted by the program itself.
const DISPATCH: &str = r#"
#include <stdio.h>
#include <stdlib.h>
typedef int (*op_fn)(int);
static int add(int a) { return a + 3; }
static int sub(int a) { return a - 3; }
__attribute__((noinline)) int apply(op_fn f, int a) { return f(a); }
int main(int argc, char **argv) {
    op_fn ops[3] = {add, sub, abs};
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    long s = 0;
    int calls[3] = {0, 0, 0};
    for (int i = 0; i < n; i++) {
        int k = (i % 10 == 0) ? 2 : (i % 3 == 0 ? 1 : 0);
        calls[k]++;
        s += apply(ops[k], i - 500);
    }
    printf("%d %d %d %d\n", n, calls[0], calls[1], calls[2]);
    return s == 42;
}
"#;

/// The line of `apply`'s indirect call in a sample profile: its count, and the targets' counts
/// by name (a static function's name carries a `.__uniq.` suffix: the prefix before it).
fn targets_of_apply(text: &str) -> Option<(u64, Vec<(String, u64)>)> {
    let mut in_apply = false;
    for l in text.lines() {
        if !l.starts_with(' ') {
            in_apply = l.starts_with("apply:");
            continue;
        }
        let mut words = l.split_whitespace();
        let (Some(_id), Some(count)) = (words.next(), words.next()) else {
            continue;
        };
        let rest: Vec<&str> = words.collect();
        if !in_apply || rest.is_empty() {
            continue;
        }
        let targets = rest
            .iter()
            .map(|t| {
                let (name, c) = t.rsplit_once(':').unwrap();
                let name = name.split(".__uniq.").next().unwrap();
                (name.to_string(), c.parse().unwrap())
            })
            .collect();
        return Some((count.parse().unwrap(), targets));
    }
    None
}

/// The program's own counts as the profile's targets (largest first).
fn expected(n: &[u64]) -> (u64, Vec<(String, u64)>) {
    let names = ["_ZL3addi", "_ZL3subi", "abs"];
    let mut t: Vec<(String, u64)> = names
        .iter()
        .zip(&n[1..])
        .map(|(name, &c)| (name.to_string(), c))
        .collect();
    t.sort_by_key(|x| std::cmp::Reverse(x.1));
    (n[0], t)
}

#[test]
fn indirect_calls_count_their_targets_and_drive_promotion() {
    let dir = scratch("pgo-targets");
    let (prof, out, n) = train_small(&dir, "dispatch", DISPATCH, &[]);
    assert_eq!(n, [1000, 600, 300, 100], "{out}");
    let (text, _) = export(&dir, &prof);
    let line = targets_of_apply(&text).unwrap_or_else(|| panic!("no targets in\n{text}"));
    assert_eq!(line, expected(&n), "{text}");

    // The same line from every edge counted, and without pre-inlining.
    for flags in [
        &["--tally-mode=edges-naive"][..],
        &["--tally-pgo-inline=off"][..],
    ] {
        let mut args = vec!["--tally-pgo", "-O2"];
        args.extend(flags);
        args.extend(["dispatch.c", "-o", "other"]);
        tally_cc(&dir, &args);
        let other = dir.join("other.tally");
        let o = run(&dir.join("other"), &["1000"], &dir, &other);
        assert_eq!(String::from_utf8_lossy(&o.stdout), out);
        let (t, _) = export(&dir, &other);
        assert_eq!(targets_of_apply(&t), Some(expected(&n)), "{flags:?}:\n{t}");
    }

    // The rebuild promotes the call to each target, with the program's counts.
    let said = tally_cc(
        &dir,
        &[
            "--tally-use=train.tally",
            "-O2",
            "dispatch.c",
            "-o",
            "fast",
            "-Rpass=pgo-icall-prom",
        ],
    );
    // (`abs` is declared, not defined, in the module: LLVM's promotion leaves such a target to
    // the indirect call, as it does with IR PGO's value profiles.)
    let (total, targets) = expected(&n);
    let mut left = total;
    for (name, c) in targets.iter().filter(|(name, _)| name != "abs") {
        let remark = format!("with count {c} out of {left}");
        assert!(
            said.lines().any(|l| l.contains("Promote indirect call to")
                && l.contains(name.as_str())
                && l.contains(&remark)),
            "no promotion of {name} {remark}:\n{said}"
        );
        left -= c;
    }
    let fast = std::process::Command::new(dir.join("fast"))
        .arg("1000")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&fast.stdout), out);

    // Turned off: no targets.
    tally_cc(
        &dir,
        &[
            "--tally-pgo",
            "--tally-pgo-targets=off",
            "-O2",
            "dispatch.c",
            "-o",
            "off",
        ],
    );
    let off = dir.join("off.tally");
    let o = run(&dir.join("off"), &["1000"], &dir, &off);
    assert_eq!(String::from_utf8_lossy(&o.stdout), out);
    let (t, _) = export(&dir, &off);
    assert_eq!(targets_of_apply(&t), None, "{t}");
}

/// 24 candidates of one type (the runtime looks a miss up in a hash of them from 16 on,
/// `runtime/c/targets.c`), called in an order that changes the target at nearly every call,
/// each a number of times of its own: the program's counts.
const MANY: &str = r#"
#include <stdio.h>
#include <stdlib.h>
typedef int (*op_fn)(int);
#define F(k) static int f##k(int a) { return a + k; }
F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
F(12) F(13) F(14) F(15) F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23)
__attribute__((noinline)) int apply(op_fn f, int a) { return f(a); }
int main(int argc, char **argv) {
    op_fn ops[24] = {f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11,
                     f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23};
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    long s = 0;
    int calls[24] = {0};
    for (int i = 0; i < n; i++) {
        int k = (i * 7 + i / 24) % 24;
        if (k % 3 == 0 && i % 2)
            k = 23 - k / 3; /* counts of their own */
        calls[k]++;
        s += apply(ops[k], i);
    }
    printf("%d", n);
    for (int k = 0; k < 24; k++)
        printf(" %d", calls[k]);
    printf("\n");
    return s == 42;
}
"#;

#[test]
fn a_call_with_many_candidates_counts_each_exactly() {
    let dir = scratch("pgo-targets-many");
    let (prof, out, n) = train_small(&dir, "many", MANY, &[]);
    assert_eq!(n.len(), 25, "{out}");
    let (text, _) = export(&dir, &prof);
    let (count, mut got) =
        targets_of_apply(&text).unwrap_or_else(|| panic!("no targets in\n{text}"));
    assert_eq!(count, n[0]);
    let mut want: Vec<(String, u64)> = (0..24)
        .filter(|&k| n[k + 1] > 0)
        .map(|k| (format!("_ZL{}f{k}i", if k < 10 { 2 } else { 3 }), n[k + 1]))
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "{text}");
    assert!(want.len() > 16, "{want:?}");
}

/// `check` ends the program at the last iteration, between the calls of the block before
/// `record` and `help` run: they are called once fewer than `check`.
const EARLY: &str = r#"
#include <stdio.h>
#include <stdlib.h>
static unsigned long checks, records, helps;
__attribute__((noinline)) static void check(unsigned i, unsigned n) {
    checks++;
    if (i + 1 == n) {
        printf("%lu %lu %lu\n", checks, records, helps);
        exit(0);
    }
}
__attribute__((noinline)) static void record(void) { records++; }
static inline unsigned help(unsigned i) { helps++; return i * 3; }
int main(int argc, char **argv) {
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 1000;
    unsigned s = 0;
    for (unsigned i = 0; i < n; i++) {
        check(i, n);
        record();
        s += help(i);
    }
    return (int)(s & 1);
}
"#;

/// A call line: the callee (without its `.__uniq.` suffix), the line's count and the callee's.
type CallLine = (String, (u64, u64));

/// `main`'s call lines, sorted, and the names of its nested records.
fn calls_of_main(text: &str) -> (Vec<CallLine>, Vec<String>) {
    let (mut calls, mut nested, mut in_main) = (Vec::new(), Vec::new(), false);
    for l in text.lines() {
        if !l.starts_with(' ') {
            in_main = l.starts_with("main:");
            continue;
        }
        if !in_main || l.starts_with("  ") {
            continue;
        }
        let words: Vec<&str> = l.split_whitespace().collect();
        let strip = |n: &str| n.split(".__uniq.").next().unwrap().to_string();
        match words[..] {
            [_, count, target] => {
                let (name, c) = target.rsplit_once(':').unwrap();
                let pair = (count.parse().unwrap(), c.parse().unwrap());
                calls.push((strip(name), pair));
            }
            [_, record] if !record.starts_with(|c: char| c.is_ascii_digit()) => {
                nested.push(strip(record.rsplit_once(':').unwrap().0));
            }
            _ => {}
        }
    }
    calls.sort();
    (calls, nested)
}

/// `tally report --export sample-profile ARGS PROFILE`'s text.
fn sample_profile(prof: &std::path::Path, args: &[&str]) -> String {
    let o = std::process::Command::new(tally())
        .args(["report", "--export", "sample-profile"])
        .args(args)
        .arg(prof)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn direct_calls_count_the_calls_made_even_when_the_program_ends_between_them() {
    let dir = scratch("pgo-direct");
    let (prof, out, n) = train_small(&dir, "early", EARLY, &[]);
    assert_eq!(n, [1000, 999, 999], "{out}");
    let (checks, records, helps) = (n[0], n[1], n[2]);
    let line = |name: &str, c: u64| (name.to_string(), (c, c));

    // Flat: the inlined `help` is a call like the others.
    let flat = sample_profile(&prof, &["--flat", "--direct-calls"]);
    let (calls, _) = calls_of_main(&flat);
    for want in [
        line("_ZL5checkjj", checks),
        line("_ZL6recordv", records),
        line("_ZL4helpj", helps),
    ] {
        assert!(
            calls.contains(&want),
            "no {want:?} in main's calls {calls:?}:\n{flat}"
        );
    }

    // Nested: `help` is a record under its call site, not a call line.
    let text = sample_profile(&prof, &["--direct-calls"]);
    let (calls, nested) = calls_of_main(&text);
    assert!(calls.contains(&line("_ZL6recordv", records)), "{text}");
    assert!(!calls.iter().any(|(c, _)| c == "_ZL4helpj"), "{text}");
    assert!(nested.iter().any(|n| n == "_ZL4helpj"), "{text}");

    // Without the flag, no call lines (the program makes no indirect call).
    for args in [&[][..], &["--flat"][..]] {
        let text = sample_profile(&prof, args);
        assert_eq!(calls_of_main(&text).0, [], "{args:?}:\n{text}");
    }

    // The same lines without pre-inlining, where `help` is called.
    tally_cc(
        &dir,
        &[
            "--tally-pgo",
            "--tally-pgo-inline=off",
            "-O2",
            "early.c",
            "-o",
            "whole",
        ],
    );
    let whole = dir.join("whole.tally");
    let o = run(&dir.join("whole"), &["1000"], &dir, &whole);
    assert_eq!(String::from_utf8_lossy(&o.stdout), out);
    let t = sample_profile(&whole, &["--flat", "--direct-calls"]);
    assert_eq!(calls_of_main(&t).0, calls_of_main(&flat).0, "{t}");
}
