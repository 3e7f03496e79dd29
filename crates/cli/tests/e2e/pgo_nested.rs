//! Nested sample profiles (`tally report --export sample-profile` without `--flat`, what `tally
//! cc --tally-use` hands clang; docs/pgo.md): each callee the training build's pre-inlining
//! inlined is a record of its own under its call-site probe.
//!
//! - On a small program that counts its own branch outcomes per call site, the loader inlines
//!   both calls of a small function and weighs each copy's branches with that call site's
//!   counts, where the flat profile gives both copies the sum.
//! - On Lua ([`check_lua`], from `pgo::exact_counts_train_clangs_sample_profile_loader`'s
//!   training run): summing every record of each function gives the flat profile exactly; each
//!   top-level head is the entry count of the function's own out-of-line body; with the loader's
//!   inlining off (it then merges every nested record back into its callee), the entry counts it
//!   attaches are the flat profile's heads; with it on, it inlines more than 100 call sites to
//!   match their records, applies every record (the coverage check is silent) and the program
//!   prints what it printed.
//! - A call the training build inlined and the loader cannot (a function of other target
//!   attributes whose callee calls the SSE2 intrinsics' wrappers, as zstd's `_bmi2` decoders
//!   call `ZSTD_copy16`) is written as its callee's own record, which the loader applies; an
//!   `always_inline` one stays nested, and the loader inlines it.

use crate::pgo::{assert_heads_attached, export, heads, tally_cc, train_small};
use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Every function's probe counts summed over all its records, top-level and nested, of a text
/// sample profile: `name -> probe id -> count`.
fn flatten(text: &str) -> BTreeMap<String, BTreeMap<u32, u64>> {
    let mut out: BTreeMap<String, BTreeMap<u32, u64>> = BTreeMap::new();
    // The record open at each depth.
    let mut stack: Vec<String> = Vec::new();
    for l in text.lines() {
        let depth = l.len() - l.trim_start().len();
        let l = l.trim_start();
        if depth == 0 {
            let name = l.rsplitn(3, ':').nth(2).unwrap().to_string();
            out.entry(name.clone()).or_default();
            stack = vec![name];
            continue;
        }
        if l.starts_with('!') {
            continue;
        }
        let (id, rest) = l.split_once(": ").unwrap();
        let id: u32 = id.parse().unwrap();
        stack.truncate(depth);
        // A body line's count, followed by call targets on an indirect call's line.
        match rest.split(' ').next().unwrap().parse::<u64>() {
            Ok(c) => {
                let f = out.entry(stack[depth - 1].clone()).or_default();
                *f.entry(id).or_default() += c;
            }
            Err(_) => {
                let (callee, _total) = rest.rsplit_once(':').unwrap();
                stack.push(callee.to_string());
            }
        }
    }
    out.retain(|_, probes| {
        probes.retain(|_, c| *c > 0);
        !probes.is_empty()
    });
    out
}

/// `tally report --export sample-profile` (nested).
fn export_nested(dir: &Path, prof: &Path) -> String {
    let o = Command::new(tally())
        .args(["report", "--export", "sample-profile"])
        .arg(prof)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// The nested checks on Lua's training profile `prof` (pre-inlined `edge` build), whose flat
/// profile is `flat` and JSON report `report`; `early`: the functions an early exit left.
pub(crate) fn check_lua(dir: &Path, prof: &Path, flat: &str, report: &Value, early: &[String]) {
    let nested = export_nested(dir, prof);
    let inlined = nested
        .lines()
        .filter(|l| l.starts_with(' ') && !l.trim_start().starts_with('!'))
        .filter(|l| {
            l.split_once(": ")
                .is_some_and(|(_, r)| r.split(' ').next().unwrap().parse::<u64>().is_err())
        })
        .count();
    assert!(inlined > 100, "{inlined} nested records");
    assert_eq!(
        flatten(&nested),
        flatten(flat),
        "the nested profile's records do not add up to the flat profile"
    );
    // Top-level heads: the out-of-line body's entries.
    let own: BTreeMap<&str, u64> = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let n = f["name"].as_str().unwrap();
            (n, f["entry_count"].as_u64().unwrap())
        })
        .collect();
    let mut checked = 0;
    for (name, &(_, head)) in &heads(&nested) {
        if let Some(&e) = own.get(name.as_str()) {
            assert_eq!(
                head, e,
                "{name}: top-level head against the out-of-line entries"
            );
            checked += 1;
        }
    }
    assert!(checked > 500, "{checked} heads checked");

    let rebuild = |extra: &[&str], out: &str| {
        let mut args = vec![
            "cc".to_string(),
            format!("--tally-use={}", prof.display()),
            "-mllvm".into(),
            "-print-after=sample-profile".into(),
        ];
        args.extend(extra.iter().map(|e| e.to_string()));
        args.extend(lua_args(&["-O2"]));
        args.extend(["-o".into(), out.into()]);
        let o = Command::new(tally())
            .args(&args)
            .current_dir(dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(
            o.status.success(),
            "{}",
            &err[err.len().saturating_sub(2000)..]
        );
        err
    };
    // Inlining off: every nested record merged back, so the loader attaches the flat heads.
    let err = rebuild(&["-mllvm", "-disable-sample-loader-inlining"], "lua-merged");
    assert_heads_attached(" (merged back)", &err, &heads(flat), early);
    // Inlining on: every nested record says the training build inlined its call
    // (`!Attributes: 2`), so the loader inlines each of them again and applies every record
    // (`-sample-profile-check-record-coverage=100` is silent; without the attribute it merged
    // the records of the calls it found too cold into their callees, and counted them unused in
    // 51 functions), and the rebuilt program prints what the trained one printed.
    let err = rebuild(
        &[
            "-Rpass=sample-profile-inline",
            "-mllvm",
            "-sample-profile-check-record-coverage=100",
        ],
        "lua-nested",
    );
    let replayed = err.matches("to match profiling context").count();
    let partly = err.matches("available profile records").count();
    eprintln!(
        "pgo nested: the loader inlined {replayed} call sites to match their records; \
         {partly} functions had records it did not apply"
    );
    assert!(
        replayed > 100,
        "{replayed} call sites inlined by the loader"
    );
    assert_eq!(partly, 0, "records left unused:\n{}", {
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("available profile records"))
            .collect();
        lines.join("\n")
    });
    let script = repo().join("testdata/lua/small.lua");
    let run = |exe: &str| {
        Command::new(dir.join(exe))
            .arg(&script)
            .current_dir(dir)
            .output()
            .unwrap()
            .stdout
    };
    assert_eq!(run("lua-nested"), run("lua-merged"));
}

/// A small function inlined at two call sites whose branches go opposite ways; the program
/// counts each call site's outcomes and prints them.
const CONTEXTS: &str = r#"#include <stdio.h>
#include <stdlib.h>
static unsigned long low[2], high[2];
static int clamp(int site, int x, int lo, int hi) {
    if (x < lo) {
        low[site]++;
        return lo;
    }
    if (x > hi) {
        high[site]++;
        return hi;
    }
    return x;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    long s = 0;
    for (int i = 0; i < n; i++) {
        s += clamp(0, i % 100, 10, 90);
        s += clamp(1, i % 100, 90, 95);
    }
    printf("%d %lu %lu %lu %lu %ld\n", n, low[0], high[0], low[1], high[1], s);
    return 0;
}
"#;

#[test]
fn nested_records_give_each_inlined_copy_its_own_counts() {
    let dir = scratch("pgo-nested");
    let cc = |args: &[&str]| tally_cc(&dir, args);
    let (prof, out, c) = train_small(&dir, "contexts", CONTEXTS, &[]);
    let (n, low, high) = (c[0], [c[1], c[3]], [c[2], c[4]]);
    let nested = export_nested(&dir, &prof);
    let sites = nested
        .lines()
        .filter(|l| l.starts_with(' ') && l.contains(": _ZL5clamp"))
        .count();
    assert_eq!(sites, 2, "both calls nested:\n{nested}");
    // Each inlined copy's branches, as the loader weighs them: (x < lo) taken `low` times of
    // n, then (x > hi) `high` times of the rest.
    let weights = |site: usize| {
        [
            (low[site], n - low[site]),
            (high[site], n - low[site] - high[site]),
        ]
    };
    let w = |(t, f): (u64, u64)| format!("!{{!\"branch_weights\", i32 {t}, i32 {f}}}");
    let dump = |flat: bool| {
        let mut args = vec!["--tally-use=train.tally", "-O2", "contexts.c", "-o"];
        args.push(if flat { "flat" } else { "fast" });
        if flat {
            args.push("--tally-use-flat");
        }
        args.extend([
            "-mllvm",
            "-print-after=sample-profile",
            "-mllvm",
            "-print-module-scope",
        ]);
        cc(&args)
    };
    let nested_dump = dump(false);
    for site in 0..2 {
        for pair in weights(site) {
            assert!(
                nested_dump.contains(&w(pair)),
                "call site {site}: no {} in the loader's output",
                w(pair)
            );
        }
    }
    // The flat profile gives both copies the sums: neither call site's own outcomes.
    let flat_dump = dump(true);
    let sum = (low[0] + low[1], 2 * n - low[0] - low[1]);
    assert!(
        flat_dump.contains(&w(sum)),
        "no {} in the flat build",
        w(sum)
    );
    assert!(!flat_dump.contains(&w(weights(0)[0])));
    let fast = Command::new(dir.join("fast")).arg("1000").output().unwrap();
    assert_eq!(String::from_utf8(fast.stdout).unwrap(), out);
}

/// A function of other target attributes (`sse3`, which every x86-64 processor has) calls a
/// copy loop whose 16-byte copies go through the SSE2 intrinsics' wrappers; the program counts
/// its copies and short copies and prints them.
const WIDE: &str = r#"#include <emmintrin.h>
#include <stdio.h>
#include <stdlib.h>
static unsigned long copies, shorts;
static void copy16(void *d, const void *s) {
    copies++;
    _mm_storeu_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
}
static void copy_n(unsigned char *d, const unsigned char *s, int n) {
    if (n < 16) {
        shorts++;
        while (n--) *d++ = *s++;
        return;
    }
    for (int i = 0; i + 16 <= n; i += 16) copy16(d + i, s + i);
}
__attribute__((target("sse3"))) static unsigned long run(unsigned char *buf, int n) {
    unsigned long s = 0;
    for (int i = 0; i < n; i++) {
        int len = (i * 7) % 64;
        copy_n(buf + 4096, buf + (i % 1024), len);
        s += buf[4096 + (len ? len - 1 : 0)];
    }
    return s;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    unsigned char *buf = calloc(8192, 1);
    for (int i = 0; i < 4096; i++) buf[i] = (unsigned char)(i * 31);
    unsigned long s = run(buf, n);
    printf("%d %lu %lu %lu\n", n, copies, shorts, s);
    return 0;
}
"#;

#[test]
fn a_call_the_loader_cannot_inline_again_is_its_callees_own_record() {
    let dir = scratch("pgo-reinline");
    let (prof, out, c) = train_small(&dir, "wide", WIDE, &[]);
    let (copies, shorts) = (c[1], c[2]);
    let nested = export_nested(&dir, &prof);
    let h = heads(&nested);
    let head = |f: &str| {
        h.iter()
            .find(|(n, _)| n.contains(f))
            .map(|(_, &(_, head))| head)
            .unwrap_or_else(|| panic!("no record of {f}:\n{nested}"))
    };
    // The training build inlined copy_n into run, and copy16 into copy_n first. The loader
    // inlines copy_n again from its nested record, but not copy16 (run's features are not
    // copy16's, and copy16 still calls the wrappers then): its counts are its own record's.
    assert!(
        nested
            .lines()
            .any(|l| l.starts_with(' ') && l.contains(": _ZL6copy_n")),
        "copy_n nested under run:\n{nested}"
    );
    assert!(
        !nested
            .lines()
            .any(|l| l.starts_with(' ') && l.contains(": _ZL6copy16")),
        "copy16 nested:\n{nested}"
    );
    assert_eq!(head("_ZL6copy16"), copies, "copy16's head:\n{nested}");
    assert_eq!(
        flatten(&nested),
        flatten(&export(&dir, &prof).0),
        "the nested profile's records do not add up to the flat profile"
    );
    // The loader applies every record (it merged copy16's nested record into copy16's own and
    // said 17 of 18 before), and weighs copy_n's `n < 16` with the program's own count.
    let err = rebuild_wide(&dir, &["-mllvm", "-print-after=sample-profile"]);
    assert!(
        !err.contains("available profile records"),
        "records left unused:\n{}",
        err.lines()
            .filter(|l| l.contains("available profile records"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let w = format!(
        "!{{!\"branch_weights\", i32 {shorts}, i32 {}}}",
        c[0] - shorts
    );
    assert!(err.contains(&w), "no {w} in the loader's output");
    let fast = Command::new(dir.join("fast")).arg("1000").output().unwrap();
    assert_eq!(String::from_utf8(fast.stdout).unwrap(), out);

    // `always_inline`, the same callee is inlined whatever the attributes: it stays nested,
    // and the loader inlines it there and applies every record.
    let forced = WIDE.replace(
        "static void copy16",
        "__attribute__((always_inline)) static inline void copy16",
    );
    let dir = scratch("pgo-reinline-forced");
    let (prof, out, _) = train_small(&dir, "wide", &forced, &[]);
    let nested = export_nested(&dir, &prof);
    assert!(
        nested
            .lines()
            .any(|l| l.starts_with("  ") && l.contains(": _ZL6copy16")),
        "copy16 nested under copy_n:\n{nested}"
    );
    let err = rebuild_wide(&dir, &[]);
    assert!(!err.contains("available profile records"), "{err}");
    let fast = Command::new(dir.join("fast")).arg("1000").output().unwrap();
    assert_eq!(String::from_utf8(fast.stdout).unwrap(), out);
}

/// `wide.c` rebuilt from `train.tally` into `fast` with the loader's coverage check and `extra`:
/// the compiler's stderr.
fn rebuild_wide(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "--tally-use=train.tally",
        "-O2",
        "wide.c",
        "-o",
        "fast",
        "-mllvm",
        "-sample-profile-check-record-coverage=100",
    ];
    args.extend(extra);
    tally_cc(dir, &args)
}
