//! Instrumenting real clang-19 output in every mode yields modules that verify, with plans
//! that match the graph (checked against the embedded metadata).

use std::path::Path;
use std::process::Command;
use tally_format::{Mode, ModuleMeta, Probe};

fn clang_bitcode(src: &str, lang: &str, opt: &str, dir: &Path) -> Vec<u8> {
    let ext = if lang == "c++" { "cpp" } else { "c" };
    let file = dir.join(format!("t.{ext}"));
    std::fs::write(&file, src).unwrap();
    let out = dir.join("t.bc");
    let clang = if lang == "c++" {
        "clang++-19"
    } else {
        "clang-19"
    };
    let st = Command::new(clang)
        .args([opt, "-g", "-c", "-emit-llvm"])
        .arg(&file)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("clang-19 runs");
    assert!(st.success());
    std::fs::read(out).unwrap()
}

const C_SRC: &str = r#"
#include <setjmp.h>
#include <stdlib.h>
#include <stdio.h>
static jmp_buf jb;
int g;
__attribute__((noinline)) void deep(int x) { if (x > 3) longjmp(jb, x); if (x == -1) exit(3); g += x; }
int sw(int x) {
  switch (x) { case 1: case 2: return 10; case 3: return 7; case 4: g++; /* fallthrough */ default: return 1; }
}
int loops(int n) {
  int s = 0;
  for (int i = 0; i < n; i++) {
    if (i % 3 == 0) s += sw(i); else if (i % 5 == 0) continue; else s ^= i;
    for (int j = 0; j < i; j++) { if (j == 7) break; s += j; }
  }
  return s;
}
int jumper(int n) {
  volatile int tries = 0;
  if (setjmp(jb) != 0) { tries++; if (tries > 3) return tries; }
  for (int i = 0; i < n; i++) deep(i);
  return 0;
}
int main(int argc, char **argv) { printf("%d %d\n", loops(argc * 20), jumper(argc + 5)); return 0; }
"#;

const CXX_SRC: &str = r#"
#include <vector>
#include <string>
#include <stdexcept>
struct Guard { int *p; ~Guard() { ++*p; } };
int counter;
__attribute__((noinline)) void thrower(int i) { if (i % 7 == 3) throw std::runtime_error("x"); }
__attribute__((noinline)) int middle(int i) { Guard g{&counter}; thrower(i); return i; }
int run(int n) {
  std::vector<std::string> v;
  int caught = 0;
  for (int i = 0; i < n; i++) {
    try { v.push_back(std::to_string(middle(i))); } catch (const std::exception &e) { caught++; }
  }
  return caught + (int)v.size();
}
int main(int argc, char **) { return run(argc * 30) > 0 ? 0 : 1; }
"#;

fn check(src: &str, lang: &str) {
    let dir = tempfile::tempdir().unwrap();
    for opt in ["-O0", "-O2"] {
        let bc = clang_bitcode(src, lang, opt, dir.path());
        let mut hashes = Vec::new();
        let mut modes = 0;
        for mode in Mode::all() {
            modes += 1;
            let out = tally_llvm::instrument(
                &bc,
                &tally_llvm::Options {
                    mode,
                    source: "t".into(),
                    weighting: tally_llvm::Weighting::Estimate,
                    ..Default::default()
                },
            )
            .unwrap_or_else(|e| panic!("{lang} {opt} {mode:?}: {e}"));
            let meta = ModuleMeta::decode(&out.meta.encode()).unwrap();
            assert!(meta.functions.len() >= 2, "{lang} {opt}");
            for f in &meta.functions {
                let cfg = f.cfg().unwrap();
                match mode {
                    Mode::BlocksNaive => assert_eq!(f.counters.len(), cfg.num_blocks()),
                    Mode::EdgesNaive => {
                        let early = cfg
                            .edges()
                            .filter(|(_, e)| e.kind == tally_graph::EdgeKind::EarlyExit)
                            .count();
                        assert!(f.counters.len() >= cfg.num_edges() - early, "{}", f.name);
                    }
                    Mode::TraceNaive => {
                        assert!(f.counters.is_empty(), "a trace build counts nothing")
                    }
                    Mode::Trace => {
                        assert!(f.counters.is_empty(), "a trace build counts nothing");
                        assert!(f.wtrace().is_some(), "{}: trace metadata", f.name);
                    }
                    Mode::Events | Mode::EventsNaive => {
                        let e = f.events().expect("events metadata");
                        assert_eq!(e.per_block.len(), cfg.num_blocks());
                        assert_eq!(f.counters.len(), 1 + e.calls.len());
                    }
                    Mode::Path => {
                        assert!(
                            f.paths().is_some()
                                || f.counters.iter().all(|p| matches!(p, Probe::Edge(_)))
                        );
                    }
                    Mode::Ipath | Mode::IpathPiecewise => {
                        // In the set (no counters) or edge counters.
                        let ip = meta.ipath();
                        let member = ip.is_some_and(|ip| {
                            ip.functions
                                .iter()
                                .any(|m| meta.functions[m.function as usize].name == f.name)
                        });
                        assert!(
                            (member && f.counters.is_empty())
                                || (!member
                                    && f.counters.iter().all(|p| matches!(p, Probe::Edge(_))))
                        );
                    }
                    Mode::Edge | Mode::Vertex => {
                        // chords: |E| - |V| + components, never more than all edges
                        assert!(f.counters.len() <= cfg.num_edges());
                        assert!(f.counters.iter().all(|p| matches!(p, Probe::Edge(_))));
                    }
                }
            }
            hashes.push(
                meta.functions
                    .iter()
                    .map(|f| (f.name.clone(), f.cfg_hash))
                    .collect::<Vec<_>>(),
            );
        }
        assert_eq!(
            modes,
            tally_format::mode::MODES.len(),
            "every mode was checked"
        );
        assert!(
            hashes.windows(2).all(|w| w[0] == w[1]),
            "graphs differ between modes"
        );
    }
}

#[test]
fn c_program_all_modes_verify() {
    check(C_SRC, "c");
}

#[test]
fn cxx_program_all_modes_verify() {
    check(CXX_SRC, "c++");
}

/// Jump optimization (Ball & Larus 1994 §6.3): weighing split edges by `1 + jump_cost` moves
/// counters off edges that need a new block and a jump. On the shapes test program it must leave
/// fewer counters on split edges than ignoring jumps does, with the same number of counters (every
/// spanning tree has the same number of chords).
#[test]
fn jump_cost_moves_counters_off_split_edges() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/shapes/shapes.c"),
    )
    .unwrap();
    let bc = clang_bitcode(&src, "c", "-O2", dir.path());
    let stats = |jump_cost: f64| {
        tally_llvm::instrument(
            &bc,
            &tally_llvm::Options {
                mode: Mode::Edge,
                source: "t".into(),
                weighting: tally_llvm::Weighting::Estimate,
                jump_cost,
                promote: false,
                ..Default::default()
            },
        )
        .unwrap()
        .stats
    };
    let (with, without) = (stats(tally_llvm::DEFAULT_JUMP_COST), stats(0.0));
    assert_eq!(with.counters, without.counters);
    assert!(
        with.split < without.split,
        "split counters: {} with jump optimization, {} without",
        with.split,
        without.split
    );
}
