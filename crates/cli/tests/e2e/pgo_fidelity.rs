//! Fidelity of the PGO loop (docs/pgo.md, "Fidelity"): what clang's sample-profile loader
//! attaches from tally's profile is the truth.
//!
//! - Entry counts against clang's own exact profile: each C test program (`testdata/demo`,
//!   `testdata/threads`, the C programs of `testdata/early`) is trained once with `tally cc
//!   --tally-pgo` and once with clang's IR PGO (`-fprofile-generate`, with atomic counter
//!   updates, which threads need, and without the pre-inliner, which would count a function
//!   inlined there into its caller), on the same input. The entry count the loader attaches to
//!   each function (`tally cc --tally-use`, from the flat profile and from the nested one with
//!   the loader's inlining off, which merges every inline instance's record into its callee's)
//!   equals the one `-fprofile-use` attaches, up to the
//!   loader's `+1`, in every function that ran and no `exit` or `longjmp` left early: there the
//!   two loaders' flow inference parts from the exact count, each in its own way.
//! - A training build without `-g` places probes as the rebuild does (which tracks locations
//!   without `-g`): its profile is the one of a build with `-g`.

use crate::pgo::{assert_same_profile, entry_counts, export, left_early};
use crate::support::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Runs `cmd` in `dir`, asserting success; its stderr.
fn ok(cmd: &mut Command, dir: &Path) -> String {
    let o = cmd.current_dir(dir).output().unwrap();
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The entry counts clang's IR PGO attaches to `src`'s functions, trained on `args`; `None`
/// when the program wrote no profile (`_exit` skips IR PGO's writer).
fn ir_pgo(dir: &Path, src: &Path, flags: &[&str], args: &[&str]) -> Option<BTreeMap<String, u64>> {
    let common = [
        "-funique-internal-linkage-names", // the names pseudo-probe builds give statics
        "-mllvm",
        "-disable-preinline",
    ];
    ok(
        Command::new("clang-19")
            .args(flags)
            .args(common)
            .args(["-fprofile-generate", "-fprofile-update=atomic"])
            .arg(src)
            .args(["-o", "irgen"]),
        dir,
    );
    let raw = dir.join("ir.profraw");
    let _ = std::fs::remove_file(&raw);
    Command::new(dir.join("irgen"))
        .args(args)
        .env("LLVM_PROFILE_FILE", &raw)
        .current_dir(dir)
        .output()
        .unwrap();
    if !raw.exists() {
        return None;
    }
    ok(
        Command::new("llvm-profdata-19").args(["merge", "-o", "ir.profdata", "ir.profraw"]),
        dir,
    );
    let dump = ok(
        Command::new("clang-19")
            .args(flags)
            .args(common)
            .args(["-fprofile-use=ir.profdata", "-c", "-o", "/dev/null"])
            .args(["-mllvm", "-print-after=pgo-instr-use"])
            .arg(src),
        dir,
    );
    Some(entry_counts(&dump))
}

#[test]
fn the_loaders_entry_counts_are_ir_pgos_on_the_test_programs() {
    let input = repo().join("testdata/demo/input.txt");
    let mut programs = vec![
        (
            repo().join("testdata/demo/wordfreq.c"),
            vec![input.to_str().unwrap().to_string()],
        ),
        (repo().join("testdata/threads/calls.c"), vec![]),
        (repo().join("testdata/threads/workers.c"), vec![]),
    ];
    for (src, _) in early_programs() {
        if src.extension().is_some_and(|e| e == "c") {
            programs.push((src, vec![]));
        }
    }
    let flags = ["-g", "-O2", "-pthread"];
    let (mut compared, mut early_skipped, mut no_ir) = (0, 0, Vec::new());
    for (src, args) in &programs {
        let name = src.file_stem().unwrap().to_str().unwrap().to_string();
        let dir = scratch(&format!("fidelity-{name}"));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let Some(ir) = ir_pgo(&dir, src, &flags, &args) else {
            no_ir.push(name);
            continue;
        };
        // The training build, and one without pre-inlining: the same profile (a probe's count
        // does not depend on which copies of it inlining made), and the functions an early exit
        // left are known by their own graphs.
        let mut profiles = Vec::new();
        for (out, inline) in [("tgen", "on"), ("tgen-whole", "off")] {
            ok(
                Command::new(tally())
                    .args(["cc", "--tally-pgo"])
                    .arg(format!("--tally-pgo-inline={inline}"))
                    .args(flags)
                    .arg(src)
                    .args(["-o", out]),
                &dir,
            );
            let prof = dir.join(format!("{out}.tally"));
            run(&dir.join(out), &args, &dir, &prof);
            profiles.push(prof);
        }
        let prof = &profiles[0];
        assert_same_profile(&name, &export(&dir, prof).0, &export(&dir, &profiles[1]).0);
        let early = left_early(&report_json(&profiles[1]));
        // The flat profile, and the nested one with the loader's inlining off: it then merges
        // each inline instance's record into its callee's, and attaches whole-function entry
        // counts, as IR PGO does without its pre-inliner.
        for variant in [
            &["--tally-use-flat"][..],
            &["-mllvm", "-disable-sample-loader-inlining"][..],
        ] {
            let dump = ok(
                Command::new(tally())
                    .arg("cc")
                    .arg(format!("--tally-use={}", prof.display()))
                    .args(variant)
                    .args(flags)
                    .args(["-c", "-o", "/dev/null"])
                    .args(["-mllvm", "-print-after=sample-profile"])
                    .arg(src),
                &dir,
            );
            let loader = entry_counts(&dump);
            for (f, &want) in ir.iter().filter(|(_, &c)| c > 0) {
                if early.contains(f) {
                    early_skipped += 1;
                    continue;
                }
                let got = loader.get(f).copied();
                assert!(
                    got == Some(want) || got == Some(want + 1),
                    "{name} {variant:?}: {f}: the sample loader attached {got:?} from tally's \
                     profile, -fprofile-use {want} from IR PGO's"
                );
                compared += 1;
            }
        }
    }
    eprintln!(
        "fidelity: {compared} entry counts (flat and nested profiles) equal IR PGO's; \
         {early_skipped} comparisons of functions left early skipped; no IR PGO profile from {no_ir:?}"
    );
    assert!(compared >= 50, "only {compared} entry counts compared");
    assert!(no_ir.len() <= 1, "no IR PGO profile from {no_ir:?}");
}

#[test]
fn a_training_build_without_g_places_probes_as_the_rebuild_does() {
    let dir = scratch("fidelity-nog");
    let src = repo().join("testdata/early/recursion.c");
    let mut texts = Vec::new();
    for g in [None, Some("-g")] {
        let out = if g.is_some() { "with-g" } else { "without-g" };
        ok(
            Command::new(tally())
                .args(["cc", "--tally-pgo", "-O2"])
                .args(g)
                .arg(&src)
                .args(["-o", out]),
            &dir,
        );
        let prof = dir.join(format!("{out}.tally"));
        run(&dir.join(out), &[], &dir, &prof);
        texts.push(export(&dir, &prof).0);
    }
    // recursion.c's deepest frame calls exit() from a block of its own: without locations, the
    // probe pass put that block's probe after the call, and the profile lost its one count.
    assert!(texts[0].contains("\n 5: 1\n"), "{}", texts[0]);
    assert_eq!(
        texts[0], texts[1],
        "the profiles without and with -g differ"
    );
}

/// A two-way branch of the loader's output whose successors each have it as their only
/// predecessor and hold a probe of the function: the weights the loader gave it, and the
/// exact counts of the two probes.
pub(crate) struct Weighed {
    pub function: String,
    pub weights: Option<Vec<u64>>,
    pub counts: [u64; 2],
    /// The weights are the source's `__builtin_expect` (`!"expected"`), which the loader keeps.
    pub expected: bool,
}

/// The two-way branches of an IR dump (`-print-after=sample-profile`) that can be matched with
/// the probes of `profile` (a text sample profile), in functions it has.
pub(crate) fn weighed_branches(dump: &str, profile: &str) -> Vec<Weighed> {
    let mut counts: BTreeMap<&str, BTreeMap<u32, u64>> = BTreeMap::new();
    let mut cur = "";
    for l in profile.lines() {
        if let Some(rest) = l.strip_prefix(' ') {
            if let Some((id, c)) = rest.split_once(": ").filter(|_| !rest.starts_with('!')) {
                let e = counts.entry(cur).or_default();
                // (An indirect call's line goes on with its targets.)
                let c = c.split(' ').next().unwrap();
                e.insert(id.parse().unwrap(), c.parse().unwrap());
            }
        } else {
            cur = l.rsplitn(3, ':').nth(2).unwrap();
        }
    }
    let mut out = Vec::new();
    for module in dump.split("*** IR Dump After").skip(1) {
        let weights: BTreeMap<&str, &str> = module
            .lines()
            .filter_map(|l| {
                l.strip_prefix('!')?
                    .split_once(" = !{!\"branch_weights\", ")
            })
            .collect();
        let mut lines = module.lines();
        while let Some(l) = lines.next() {
            let Some(name) = l
                .strip_prefix("define ")
                .and_then(|d| d.split('@').nth(1))
                .and_then(|r| r.split('(').next())
                .map(|n| n.trim_matches('"'))
            else {
                continue;
            };
            // The function's blocks: label -> (predecessors, its first own probe); branches.
            let mut blocks: BTreeMap<String, (usize, Option<u32>)> = BTreeMap::new();
            let mut branches = Vec::new();
            let (mut label, mut guid) = (String::from("entry"), None);
            for l in lines.by_ref().take_while(|l| *l != "}") {
                if let Some((lab, rest)) = l.split_once(':').filter(|(a, _)| {
                    !a.starts_with(' ') && a.chars().all(|c| c.is_alphanumeric() || c == '.')
                }) {
                    label = lab.to_string();
                    let preds = rest
                        .split("; preds = ")
                        .nth(1)
                        .map_or(0, |p| p.split(',').count());
                    blocks.insert(label.clone(), (preds, None));
                    continue;
                }
                if let Some(p) = l.split("@llvm.pseudoprobe(i64 ").nth(1) {
                    let mut it = p.split(", i64 ");
                    let (g, id) = (it.next().unwrap(), it.next().unwrap());
                    let g = *guid.get_or_insert(g.to_string()) == g;
                    let b = blocks.entry(label.clone()).or_insert((0, None));
                    if g && b.1.is_none() {
                        b.1 = id.split(',').next().and_then(|i| i.parse().ok());
                    }
                }
                if let Some(br) = l.trim_start().strip_prefix("br i1 ") {
                    let targets: Vec<&str> = br
                        .split("label %")
                        .skip(1)
                        .map(|t| t.split([',', ' ']).next().unwrap())
                        .collect();
                    let prof = br
                        .split("!prof !")
                        .nth(1)
                        .map(|k| k.split([',', ' ']).next().unwrap());
                    branches.push((targets[0].to_string(), targets[1].to_string(), prof));
                }
            }
            let Some(own) = counts.get(name) else {
                continue;
            };
            for (a, b, prof) in branches {
                let (Some(&(1, Some(pa))), Some(&(1, Some(pb)))) = (blocks.get(&a), blocks.get(&b))
                else {
                    continue;
                };
                let w = prof.and_then(|k| weights.get(k)).copied();
                out.push(Weighed {
                    function: name.to_string(),
                    expected: w.is_some_and(|w| w.contains("!\"expected\"")),
                    weights: w.map(|w| {
                        w.trim_end_matches('}')
                            .split(", ")
                            .filter_map(|x| x.strip_prefix("i32 ")?.parse().ok())
                            .collect()
                    }),
                    counts: [pa, pb].map(|p| own.get(&p).copied().unwrap_or(0)),
                });
            }
        }
    }
    out
}

/// `f`'s `do { } while (0)` blocks are merged by the early simplification into the block that
/// calls `maybe`, which a `longjmp` leaves in 4 of 10 calls: their probes follow the call.
const MERGED: &str = r#"#include <setjmp.h>
#include <stdio.h>
static jmp_buf jb;
static int after;
__attribute__((noinline)) static void maybe(int i) {
    if (i % 3 == 0) longjmp(jb, 1);
}
__attribute__((noinline)) static int f(int i) {
    maybe(i);
    do {
        after++;
    } while (0);
    return after;
}
int main(void) {
    volatile int i;
    for (i = 0; i < 10; i++)
        if (setjmp(jb) == 0) f(i);
    printf("%d\n", after);
    return 0;
}
"#;

/// A block's count is how often it was entered, which is the count of the probe at its start;
/// a probe merged in after a call that left the function ran fewer times (here 6, not 10): the
/// lowering starts a vertex at it, so its count is the number of times the call returned.
#[test]
fn probes_after_a_call_that_left_the_function_count_its_returns() {
    let dir = scratch("fidelity-merged");
    std::fs::write(dir.join("merged.c"), MERGED).unwrap();
    ok(
        Command::new(tally()).args(["cc", "--tally-pgo", "-O2", "merged.c", "-o", "merged"]),
        &dir,
    );
    let prof = dir.join("merged.tally");
    let o = run(&dir.join("merged"), &[], &dir, &prof);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "6\n");
    let (text, said) = export(&dir, &prof);
    let f: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("_ZL1fi"))
        .take_while(|l| !l.starts_with(" !CFGChecksum"))
        .collect();
    assert_eq!(f[1..], [" 1: 10", " 3: 6", " 4: 6"], "{text}");
    assert!(
        said.contains(" 0 probes left to the loader's inference"),
        "{said}"
    );
}

/// glibc's `tolower`, of which a module at -O2 holds an `available_externally` copy; its address
/// taken, the copy stays one (`localize.rs`), and the calls through the pointer run glibc's.
const EXTERN_INLINE: &str = r#"#include <ctype.h>
#include <stdio.h>

int (*volatile conv)(int) = tolower;

int main(int argc, char **argv) {
    const char *s = argc > 1 ? argv[1] : "Hello, World";
    unsigned h = 0;
    for (int r = 0; r < 100; r++)
        for (const char *p = s; *p; p++)
            h = h * 31 + (unsigned)(tolower)((unsigned char)*p) + (unsigned)conv(*p);
    printf("%u\n", h);
    return 0;
}
"#;

/// Pre-inlining leaves alone what tally does not count: inlined into `main`, the copy of
/// `tolower` above would count the direct calls (1,200) and not the 1,200 through the pointer,
/// and its record would say 1,200. Fenced from the inliner, it is left out of the profile as
/// without pre-inlining: the two profiles are the same.
#[test]
fn pre_inlining_leaves_uncounted_copies_alone() {
    let dir = scratch("fidelity-extern-inline");
    std::fs::write(dir.join("lower.c"), EXTERN_INLINE).unwrap();
    let mut texts = Vec::new();
    for inline in ["on", "off"] {
        let out = format!("lower-{inline}");
        ok(
            Command::new(tally())
                .args(["cc", "--tally-pgo", "-O2", "lower.c", "-o", &out])
                .arg(format!("--tally-pgo-inline={inline}")),
            &dir,
        );
        let prof = dir.join(format!("{out}.tally"));
        let o = run(&dir.join(&out), &[], &dir, &prof);
        assert_eq!(String::from_utf8_lossy(&o.stdout), "3041803616\n");
        texts.push(export(&dir, &prof).0);
    }
    assert!(
        texts[0].lines().any(|l| l.starts_with("main:")),
        "{}",
        texts[0]
    );
    // No record of it, top-level or inlined (the call through the pointer names it as a
    // target: ` 12: 1200 tolower:1200`).
    let record = |l: &str| {
        let l = l.trim_start();
        l.starts_with("tolower:")
            || l.split_once(": ")
                .is_some_and(|(_, r)| r.starts_with("tolower:"))
    };
    assert!(!texts[0].lines().any(record), "{}", texts[0]);
    assert_eq!(texts[0], texts[1]);
}
