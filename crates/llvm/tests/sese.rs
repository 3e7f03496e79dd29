//! SESE counters on LLVM IR (`--tally-sese`, `crates/llvm/src/counters/sese.rs`): a counted
//! loop keeps no counter increment inside it; its back edge's count is added once, at the exit, from the induction
//! variable (`all`: affine variables preferred, no profitability test) or from the trip count
//! computed before the loop (`trips`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use tally_format::Mode;
use tally_llvm::Sese;

const SRC: &str = "void zero(int *a, int n) { for (int i = 0; i < n; i++) a[i] = 0; }\n\
int twelve(int n) { int s = 0; for (int i = 0; i < n; i += 12) s ^= i * i; return s; }\n";

/// The text IR of function `name` instrumented in edge mode (no promotion: a promoted counter
/// would leave the loop body too, hiding what this test is about), and the module's statistics.
fn instrumented(dir: &Path, sese: Sese, name: &str) -> (String, tally_llvm::Stats) {
    instrumented_in(dir, Mode::Edge, sese, name)
}

/// [`instrumented`] in `mode`.
fn instrumented_in(dir: &Path, mode: Mode, sese: Sese, name: &str) -> (String, tally_llvm::Stats) {
    let src = dir.join("z.c");
    std::fs::write(&src, SRC).unwrap();
    let bc = dir.join("z.bc");
    // -fno-builtin: else the loop becomes a memset call.
    let st = Command::new("clang-19")
        .args(["-O1", "-fno-builtin", "-c", "-emit-llvm"])
        .arg(&src)
        .arg("-o")
        .arg(&bc)
        .status()
        .expect("clang-19 runs");
    assert!(st.success());
    let out = tally_llvm::instrument(
        &std::fs::read(&bc).unwrap(),
        &tally_llvm::Options {
            mode,
            source: "z.c".into(),
            promote: false,
            sese,
            ..Default::default()
        },
    )
    .unwrap();
    let inst = dir.join(format!("{mode:?}-{sese:?}.bc"));
    std::fs::write(&inst, &out.bitcode).unwrap();
    let dis = Command::new("llvm-dis-19")
        .arg(&inst)
        .arg("-o")
        .arg("-")
        .output()
        .expect("llvm-dis-19 runs");
    assert!(dis.status.success());
    let text = String::from_utf8(dis.stdout).unwrap();
    let start = text
        .find(&format!(" @{name}("))
        .and_then(|i| text[..i].rfind("define "))
        .unwrap_or_else(|| panic!("{name} is defined"));
    let end = start + text[start..].find("\n}").unwrap();
    (text[start..end].to_string(), out.stats)
}

/// The blocks of a function's text IR by label (the entry block is ""), with their successors.
fn blocks(f: &str) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
    let mut out: BTreeMap<String, (Vec<String>, Vec<String>)> = BTreeMap::new();
    let mut cur = String::new();
    for line in f.lines().skip(1) {
        if let Some((label, _)) = line.split_once(':').filter(|_| !line.starts_with(' ')) {
            cur = label.trim().to_string();
            continue;
        }
        let entry = out.entry(cur.clone()).or_default();
        entry.0.push(line.to_string());
        for (i, _) in line.match_indices("label %") {
            let rest = &line[i + 7..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '.' || *c == '_')
                .collect();
            entry.1.push(name);
        }
    }
    out
}

/// Labels of the blocks that lie on a cycle.
fn on_cycles(b: &BTreeMap<String, (Vec<String>, Vec<String>)>) -> BTreeSet<String> {
    let reaches = |from: &str, to: &str| {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<String> = b[from].1.clone();
        while let Some(x) = stack.pop() {
            if x == to {
                return true;
            }
            if seen.insert(x.clone()) {
                stack.extend(b.get(&x).map(|v| v.1.clone()).unwrap_or_default());
            }
        }
        false
    };
    b.keys().filter(|k| reaches(k, k)).cloned().collect()
}

fn counter_refs(lines: &[String]) -> usize {
    lines
        .iter()
        .filter(|l| l.contains("@__tally_counters"))
        .count()
}

/// The blocks outside cycles that update a counter with a computed (non-constant) value: the
/// SESE exits' additions.
fn sese_adds(
    b: &BTreeMap<String, (Vec<String>, Vec<String>)>,
    cyc: &BTreeSet<String>,
) -> Vec<String> {
    b.iter()
        .filter(|(k, (lines, _))| {
            !cyc.contains(*k)
                && counter_refs(lines) > 0
                && lines.iter().any(|l| l.contains(" sub "))
        })
        .map(|(k, _)| k.clone())
        .collect()
}

#[test]
fn counted_loop_has_no_increment_inside_and_one_add_at_the_exit() {
    let dir = tempfile::tempdir().unwrap();
    let (on, stats) = instrumented(dir.path(), Sese::All, "zero");
    assert_eq!(
        (stats.loops, stats.sese_candidates, stats.sese_replaced),
        (2, 2, 2)
    );
    let b = blocks(&on);
    let cyc = on_cycles(&b);
    assert!(!cyc.is_empty(), "the loop is still there:\n{on}");
    for k in &cyc {
        assert_eq!(
            counter_refs(&b[k].0),
            0,
            "loop block {k} touches a counter:\n{on}"
        );
    }
    // One count added, outside the loop; a step of 1 needs no division at all.
    assert_eq!(sese_adds(&b, &cyc).len(), 1, "{on}");
    for op in [" udiv ", " lshr ", " mul "] {
        assert!(!on.contains(op), "{op} in\n{on}");
    }

    // Without SESE counters the loop increments a counter (the test can fail).
    let (off, stats) = instrumented(dir.path(), Sese::Off, "zero");
    assert_eq!(stats.sese_replaced, 0);
    let b = blocks(&off);
    let inside: usize = on_cycles(&b).iter().map(|k| counter_refs(&b[k].0)).sum();
    assert!(inside > 0, "{off}");
}

/// Vertex mode takes the SESE counters too: with `all`, the counted loop of `zero` keeps no
/// increment inside; with `off` it does (the test can fail).
#[test]
fn vertex_mode_counted_loop_has_no_increment_inside() {
    let dir = tempfile::tempdir().unwrap();
    let (on, stats) = instrumented_in(dir.path(), Mode::Vertex, Sese::All, "zero");
    assert_eq!((stats.sese_candidates, stats.sese_replaced), (2, 2), "{on}");
    let b = blocks(&on);
    let cyc = on_cycles(&b);
    assert!(!cyc.is_empty(), "the loop is still there:\n{on}");
    let inside: usize = cyc.iter().map(|k| counter_refs(&b[k].0)).sum();
    assert_eq!(inside, 0, "{on}");
    assert_eq!(sese_adds(&b, &cyc).len(), 1, "{on}");
    let (off, stats) = instrumented_in(dir.path(), Mode::Vertex, Sese::Off, "zero");
    assert_eq!(stats.sese_replaced, 0);
    let b = blocks(&off);
    let inside: usize = on_cycles(&b).iter().map(|k| counter_refs(&b[k].0)).sum();
    assert!(inside > 0, "{off}");
}

/// `i += 12` in i32: the count `(i - 0) / 12` is `(d >> 2) * 0xAAAAAAAB` (3's inverse modulo
/// 2^32), with no hardware division (the instrumented IR is not optimized again).
#[test]
fn exit_count_divides_by_shift_and_inverse() {
    let dir = tempfile::tempdir().unwrap();
    let (on, _) = instrumented(dir.path(), Sese::All, "twelve");
    let b = blocks(&on);
    let cyc = on_cycles(&b);
    let adds = sese_adds(&b, &cyc);
    assert_eq!(adds.len(), 1, "{on}");
    let lines = &b[&adds[0]].0;
    assert!(!on.contains(" udiv "), "{on}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" lshr i32 ") && l.ends_with(", 2")),
        "{on}"
    );
    // 0xAAAAAAAB as a signed i32.
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" mul i32 ") && l.ends_with(", -1431655765")),
        "{on}"
    );
}

/// A trip count (`trips`): ScalarEvolution's backedge-taken count of `zero`'s loop, `n - 1`, is
/// computed before the loop and added at its exit: no counter inside the loop, no subtraction
/// at the exit (the affine variable is not read), the added value defined outside the loop.
#[test]
fn trip_count_is_computed_before_the_loop_and_added_at_the_exit() {
    let dir = tempfile::tempdir().unwrap();
    let (on, stats) = instrumented(dir.path(), Sese::Trips, "zero");
    // `twelve`'s count divides by 12 (a hardware division): it keeps its affine variable.
    assert_eq!((stats.sese_replaced, stats.sese_trips), (2, 1), "{on}");
    let b = blocks(&on);
    let cyc = on_cycles(&b);
    for k in &cyc {
        assert_eq!(counter_refs(&b[k].0), 0, "loop block {k}:\n{on}");
    }
    assert!(sese_adds(&b, &cyc).is_empty(), "an affine exit in\n{on}");
    // The value added outside the loop is not a constant 1 (a plain increment).
    let adds: Vec<&String> = b
        .iter()
        .filter(|(k, _)| !cyc.contains(*k))
        .flat_map(|(_, (lines, _))| lines)
        .filter(|l| l.contains(" = add i64 ") && !l.ends_with(", 1"))
        .collect();
    assert!(!adds.is_empty(), "{on}");
}
