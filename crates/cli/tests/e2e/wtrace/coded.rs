//! The stream's encodings: range coding (`TALLY_TRACE_COMPRESS`), corrupt coded traces, the
//! register accumulator, long runs of records and of equal bits across buffers.

use super::*;

/// A loop of biased branches (one taken in 64, one in 1000, and a call's early return) under
/// `--tally-trace=bits`: the raw trace takes at least one bit per executed conditional branch,
/// the range-coded one (`TALLY_TRACE_COMPRESS=1`, trace format 6) less than one, and
/// regenerates block for block as `trace-naive` (`check_coded`, through `run_both_with`).
const BIASED: &str = r#"
#include <stdio.h>
__attribute__((noinline)) static unsigned step(unsigned s, int i) {
    if (i % 1000 == 999)
        return s * 3 + 1;
    return s + 1;
}
int main(int argc, char **argv) {
    (void)argv;
    unsigned s = 1, hits = 0;
    for (int i = 0; i < 30000 + argc; i++) {
        if ((i & 63) == 0) {
            hits++;
            printf("%u\n", hits);
        }
        s = step(s, i);
    }
    printf("%u %u\n", hits, s);
    return 0;
}
"#;

#[test]
fn range_coding_takes_under_one_bit_per_branch() {
    let dir = scratch("wtrace-biased-src");
    let src = dir.join("biased.c");
    std::fs::write(&src, BIASED).unwrap();
    let o = run_both_with(
        "biased",
        false,
        &single(&src, "-O2"),
        Some(0),
        &["--tally-trace=bits"],
        &[],
    );
    let o = assert_exact("biased", o);
    let per_branch = |trace: &str, prof: &str| {
        let bytes = std::fs::read(o.dir.join("trace").join(trace)).unwrap();
        let prof =
            tally_format::profile::Profile::read_file(o.dir.join("trace").join(prof)).unwrap();
        let s = tally_report::trace::stats::stats(&bytes, &prof, 0).unwrap();
        assert!(s.branches > 60_000, "{} branches", s.branches);
        s.file_bits as f64 / s.branches as f64
    };
    let (raw, coded) = (
        per_branch("prog.trace", "prog.tally"),
        per_branch("prog.ctrace", "prog.ctally"),
    );
    eprintln!("biased loop: {raw:.3} bits per branch raw, {coded:.3} range-coded");
    assert!(raw >= 1.0, "raw {raw}");
    assert!(coded < 1.0, "range-coded {coded}");
    assert!(coded < 0.5 * raw, "range-coded {coded}, raw {raw}");
}

/// A range-coded trace that is truncated or corrupt is refused in one line (exit status 2),
/// never a panic; a chunk claiming more than 64 KiB of stream is refused before decoding. The
/// same for a stream of words (the default file).
#[test]
fn corrupt_range_coded_traces_are_refused() {
    let shapes = repo().join("testdata/shapes/shapes.c");
    let o = assert_exact(
        "shapes-coded",
        run_both("shapes-coded", false, &single(&shapes, "-O2"), 0),
    );
    let dir = o.dir.join("trace");
    let good = std::fs::read(dir.join("prog.ctrace")).unwrap();
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    // the first thread chunk's offset and length (coded: { u32 thread, u32 length, u32 raw
    // bytes, coded bytes })
    let first_chunk = |b: &[u8]| -> (usize, usize) {
        let mut pos = 16;
        while u32_at(b, pos) >= 0xffff_fff0 {
            pos += 8 + u32_at(b, pos + 4) as usize;
        }
        (pos, u32_at(b, pos + 4) as usize)
    };
    // the file with its first thread chunk `by` bytes shorter (its length too)
    let shortened = |b: &[u8], by: usize| -> Vec<u8> {
        let (pos, len) = first_chunk(b);
        let mut cut = b[..pos + 8 + len - by].to_vec();
        cut[pos + 4..pos + 8].copy_from_slice(&((len - by) as u32).to_le_bytes());
        cut.extend_from_slice(&b[pos + 8 + len..]);
        cut
    };
    let (pos, len) = first_chunk(&good);
    assert!(len > 12, "chunk of {len} bytes");
    let trace = |bytes: &[u8], what: &str| -> (Option<i32>, String) {
        let path = dir.join(format!("bad-{what}.trace"));
        std::fs::write(&path, bytes).unwrap();
        let out = std::process::Command::new(tally())
            .args(["trace", "--limit", "5", "--profile"])
            .arg(dir.join("prog.ctally"))
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.contains("panicked"), "{what}: {err}");
        (out.status.code(), err)
    };
    let refused = |bytes: &[u8], what: &str, says: &str| {
        let (code, err) = trace(bytes, what);
        assert_eq!(code, Some(2), "{what}: {err}");
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
        assert!(err.contains(says), "{what}: {err}");
    };
    // bytes of the first thread chunk from `from` on, every `step`th flipped in turn: refused
    // (2), or read as a stream that regeneration reads as far as it can (0, or 1 when it stops
    // early and says where), never a panic or a hang
    let flipped = |b: &[u8], from: usize, step: usize, what: &str| {
        let (pos, len) = first_chunk(b);
        for k in (from..len).step_by(step) {
            let mut bad = b.to_vec();
            bad[pos + 8 + k] ^= 0x5a;
            let (code, err) = trace(&bad, what);
            assert!(matches!(code, Some(0..=2)), "{what} {k}: {code:?} {err}");
        }
    };
    // a flight recorder is never coded, nor a stream of words
    let ring = |b: &[u8], what: &str| {
        let mut ring = b.to_vec();
        ring[12] = 1;
        refused(&ring, what, "corrupt");
    };
    assert_eq!(trace(&good, "good").0, Some(0));
    // the file cut inside the chunk
    refused(&good[..pos + 8 + len / 2], "cut", "truncated");
    // the chunk's coded bytes cut: they run out
    refused(&shortened(&good, 3), "short", "does not decode");
    // bytes left over after the chunk's stream
    let mut long = good[..pos + 8 + len].to_vec();
    long[pos + 4..pos + 8].copy_from_slice(&(len as u32 + 2).to_le_bytes());
    long.extend_from_slice(&[0x55, 0xaa]);
    long.extend_from_slice(&good[pos + 8 + len..]);
    refused(&long, "long", "does not decode");
    // a chunk claiming more stream than a chunk holds
    let mut big = good.clone();
    big[pos + 8..pos + 12].copy_from_slice(&(65537u32).to_le_bytes());
    refused(&big, "big", "does not decode");
    ring(&good, "ring");
    flipped(&good, 12, 3, "flipped");
    // The same run's default file, a stream of words (format 9): a chunk that is not whole
    // words is refused; flipped bytes (a sentinel moved, a word emptied or filled) read as
    // another stream.
    let words = std::fs::read(dir.join("prog.trace")).unwrap();
    assert_eq!(
        &words[8..12],
        &tally_format::trace::WTRACE_VERSION_WORDS.to_le_bytes()
    );
    let len = first_chunk(&words).1;
    assert!(len >= 16 && len.is_multiple_of(8), "chunk of {len} bytes");
    refused(&shortened(&words, 3), "odd-words", "not whole 8-byte words");
    ring(&words, "words-ring");
    flipped(&words, 0, 5, "flipped-words");
}

/// The three ways a function keeps the accumulator: written through (the default: a register
/// copy stored to the thread's word after every record), `--tally-trace-registers=on` (stored
/// only at calls and returns) and `--tally-trace-write-through=off` (every record appended to
/// the thread's word in memory). The trace is the same bit stream, so each regenerates equal
/// to the oracle block for block; and the flags change the code (the `.text` sections differ
/// from the default build's).
#[test]
fn register_accumulator_regenerates_exactly() {
    let picked = ["shapes.c", "exit_nested.c", "recursion.c"];
    let cases: Vec<(PathBuf, i32)> = early_and_shapes()
        .into_iter()
        .filter(|(f, _)| picked.iter().any(|p| f.ends_with(p)))
        .collect();
    assert_eq!(cases.len(), picked.len(), "{cases:?}");
    for (src, status) in cases {
        let base = src.file_name().unwrap().to_str().unwrap().to_string();
        for (n, flags) in [
            ("default", &[][..]),
            ("registers", &["--tally-trace-registers=on"][..]),
            ("memory", &["--tally-trace-write-through=off"][..]),
        ] {
            let o = run_both_with(
                &format!("{base}-{n}"),
                false,
                &single(&src, "-O2"),
                Some(status),
                flags,
                &[],
            );
            assert!(o.stopped.is_empty(), "{base} {n}: {:?}", o.stopped);
            assert!(
                o.oracle.len() > 10 && o.regenerated == o.oracle,
                "{base} {n}: {}",
                first_difference(&o.regenerated, &o.oracle)
            );
        }
        // The code (`.text`, which does not depend on the build directory) differs.
        let text = |n: &str| {
            let dir = scratch_path(&format!("wtrace-{base}-{n}"));
            let out = dir.join("text.bin");
            let st = std::process::Command::new("objcopy")
                .args(["-O", "binary", "--only-section=.text"])
                .arg(dir.join("trace/prog"))
                .arg(&out)
                .status()
                .unwrap();
            assert!(st.success(), "objcopy");
            std::fs::read(out).unwrap()
        };
        for n in ["registers", "memory"] {
            assert!(
                text("default") != text(n),
                "{base}: the {n} build has the default's code"
            );
        }
    }
}

/// Twenty-four switches in a row, no call and no loop between them: more witness bits than one
/// shared check of room covers (`Rec::hoist_checks` puts another check where a path would pass
/// 32 bits). Block for block as `trace-naive`, the word in memory and in registers.
const WIDE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
volatile unsigned g[4];
#define SW(k)                                \
    switch ((h >> (2 * (k))) & 3) {          \
    case 0: g[0] = (k); break;               \
    case 1: g[1] = (k) + 1; break;           \
    case 2: g[2] = (k) + 2; break;           \
    default: g[3] = (k) + 3; break;          \
    }
__attribute__((noinline)) static void wide(unsigned long long h) {
    SW(0) SW(1) SW(2) SW(3) SW(4) SW(5) SW(6) SW(7) SW(8) SW(9) SW(10) SW(11)
    SW(12) SW(13) SW(14) SW(15) SW(16) SW(17) SW(18) SW(19) SW(20) SW(21) SW(22) SW(23)
}
int main(int argc, char **argv) {
    unsigned long long h = 88172645463325252ull + (unsigned)argc;
    int n = argc > 1 ? atoi(argv[1]) : 3000;
    for (int i = 0; i < n; i++) {
        h ^= h << 13, h ^= h >> 7, h ^= h << 17;
        wide(h);
    }
    printf("%u %u %u %u\n", g[0], g[1], g[2], g[3]);
    return 0;
}
"#;

#[test]
fn long_runs_of_records_without_calls_regenerate_exactly() {
    let dir = scratch("wtrace-wide-src");
    let src = dir.join("wide.c");
    std::fs::write(&src, WIDE).unwrap();
    for (name, flags) in [
        ("wide-memory", &[][..]),
        ("wide-registers", &["--tally-trace-registers=on"][..]),
    ] {
        let o = run_both_with(name, false, &single(&src, "-O2"), Some(0), flags, &[]);
        let o = assert_exact(name, o);
        assert!(
            o.oracle.len() > 3000 * 48,
            "{name}: {} blocks",
            o.oracle.len()
        );
    }
}

/// Two loops whose witnesses (and branch outcomes) repeat for 700,000 iterations: long runs
/// of equal bits.
const RUNS: &str = r#"
#include <stdio.h>
volatile unsigned sink;
__attribute__((noinline)) static void up(int n) {
#pragma clang loop unroll(disable)
    for (int i = 0; i < n; i++)
        sink += (unsigned)i;
}
__attribute__((noinline)) static void down(int n) {
    int i = n;
#pragma clang loop unroll(disable)
    do
        sink ^= (unsigned)i;
    while (--i > 0);
}
int main(int argc, char **argv) {
    (void)argv;
    int n = 700000 + argc;
    up(n);
    down(n);
    printf("%u\n", sink);
    return 0;
}
"#;

/// A stream of words (trace format 9) whose 64 KiB buffers fill inside long runs of equal
/// bits: a full word of 63 zeros has the closed word's value (1), one of 63 ones is all ones.
/// Both kinds cross buffer boundaries (counted in the file), the words unpack bit for bit to
/// the range-coded run's stream, and the trace's block and edge counts equal `edges-naive`'s.
#[test]
fn long_runs_of_equal_bits_cross_buffers_exactly() {
    let src = scratch("wtrace-runs-src").join("runs.c");
    std::fs::write(&src, RUNS).unwrap();
    let (mut zeros, mut ones) = (0u64, 0u64);
    for (name, flags) in [
        ("runs-witness", &[][..]),
        ("runs-bits", &["--tally-trace=bits"][..]),
    ] {
        let dir = scratch(&format!("wtrace-{name}"));
        let args = single(&src, "-O2");
        let run = Run {
            name,
            cxx: false,
            args: &args,
            status: Some(0),
            trace_flags: flags,
            run_args: &[],
        };
        run.build_and_run(&dir, ["trace", "edges-naive"]);
        let t = dir.join("trace");
        let bytes = std::fs::read(t.join("prog.trace")).unwrap();
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
        let mut pos = 16;
        while pos < bytes.len() {
            let (thread, len) = (u32_at(pos), u32_at(pos + 4) as usize);
            if thread < 0xffff_fff0 {
                for w in bytes[pos + 8..pos + 8 + len].chunks_exact(8) {
                    match u64::from_le_bytes(w.try_into().unwrap()) {
                        1 => zeros += 1,
                        u64::MAX => ones += 1,
                        _ => {}
                    }
                }
            }
            pos += 8 + len;
        }
        let words = tally_format::trace::read_witness_trace(&bytes).unwrap();
        let coded = std::fs::read(t.join("prog.ctrace")).unwrap();
        let coded = tally_format::trace::read_witness_trace(&coded).unwrap();
        assert!(words.words && coded.coded, "{name}: formats 9 and 8");
        assert!(
            words.threads == coded.threads,
            "{name}: the words unpack to other bits than the coded stream"
        );
        let o = trace_report_json(&t);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{name}: {err}");
        let traced: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let oracle = report_json(&dir.join("edges-naive/prog.tally"));
        assert_same_counts(name, "trace", &traced, "edges-naive", &oracle, Edges::All);
    }
    // (8192 words fill a buffer: each kind spans at least one boundary)
    assert!(
        zeros > 8192 && ones > 8192,
        "{zeros} words of 63 zeros, {ones} of 63 ones"
    );
}
