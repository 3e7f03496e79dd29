//! Bad input to `tally report` and `tally merge`: empty, truncated, corrupt, foreign and
//! missing files, and profiles of different builds, each give exit status 2 and exactly one
//! line on stderr, never a panic.

use crate::support::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds a small program in `mode`, runs it, and returns its profile.
fn profile(dir: &Path, name: &str, mode: &'static str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let bin = dir.join(name);
    build(
        Variant::Tally(mode),
        false,
        &["-O2", c.to_str().unwrap()],
        &bin,
        dir,
    );
    let prof = dir.join(format!("{name}.tally"));
    let out = run(&bin, &[], dir, &prof);
    assert!(out.status.success());
    prof
}

const SRC: &str = "#include <stdio.h>\nint main(void){int s=0; for(int i=0;i<10;i++) if(i&1) s+=i; printf(\"%d\\n\", s); return 0;}\n";
const SRC2: &str = "#include <stdio.h>\nint main(void){int s=0; for(int i=0;i<20;i++) if(i%3) s+=i; printf(\"%d\\n\", s); return 0;}\n";

/// Runs tally with `args`; asserts exit status 2 and a single stderr line containing `want`.
fn refused(args: &[&str], want: &str) {
    let o = Command::new(tally()).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(2),
        "tally {args:?}: status; stderr: {err}"
    );
    assert_eq!(
        err.lines().count(),
        1,
        "tally {args:?}: want one line, got: {err}"
    );
    assert!(err.starts_with("tally: error: "), "tally {args:?}: {err}");
    assert!(
        err.matches("(os error").count() <= 1,
        "tally {args:?}: the cause is repeated: {err}"
    );
    assert!(
        err.contains(want),
        "tally {args:?}: {err:?} does not mention {want:?}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn broken_profiles_are_refused_with_one_line() {
    let dir = scratch("broken");
    let good = profile(&dir, "good", "edge", SRC);
    let bytes = std::fs::read(&good).unwrap();
    let p = |n: &str, b: &[u8]| {
        let f = dir.join(n);
        std::fs::write(&f, b).unwrap();
        f.to_str().unwrap().to_string()
    };
    refused(&["report", &p("empty.tally", b"")], "empty");
    refused(
        &["report", &p("text.tally", b"hello world, not a profile\n")],
        "not a tally profile",
    );
    refused(
        &["report", &p("trunc.tally", &bytes[..bytes.len() / 2])],
        "truncated",
    );
    refused(
        &["report", &p("trunc2.tally", &bytes[..bytes.len() - 3])],
        "truncated",
    );
    let mut flipped = bytes.clone();
    // Inside the first module's metadata blob (padding bytes are not checked).
    let mid = modules_at(&bytes) + tally_format::abi::MODULE_HEADER_LEN + 8;
    flipped[mid] ^= 0x55;
    refused(&["report", &p("flip.tally", &flipped)], "");
    let mut extra = bytes.clone();
    extra.extend_from_slice(b"garbage");
    refused(&["report", &p("extra.tally", &extra)], "");
    refused(
        &["report", dir.join("missing.tally").to_str().unwrap()],
        "missing.tally",
    );
    // An ELF binary is a foreign file too.
    refused(
        &["report", tally().to_str().unwrap()],
        "not a tally profile",
    );

    // Every truncation length and every single-byte corruption: status 2 or success, never a
    // crash (a flipped counter byte can still be a valid profile).
    for cut in (0..bytes.len()).step_by(7) {
        let f = p("cut.tally", &bytes[..cut]);
        let o = Command::new(tally()).args(["report", &f]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "cut at {cut}");
    }
    for i in (0..bytes.len()).step_by(3) {
        let mut b = bytes.clone();
        b[i] = b[i].wrapping_add(1 + (i % 200) as u8);
        let f = p("corrupt.tally", &b);
        let o = Command::new(tally()).args(["report", &f]).output().unwrap();
        let code = o.status.code();
        assert!(
            code == Some(0) || code == Some(2),
            "byte {i}: {code:?} {}",
            String::from_utf8_lossy(&o.stderr)
        );
        if code == Some(2) {
            assert_eq!(
                String::from_utf8_lossy(&o.stderr).lines().count(),
                1,
                "byte {i}"
            );
        }
    }
}

/// Special files are refused by every reader before it reads a byte:
/// `tally report /dev/zero` used to read until the OOM killer ended it.
#[test]
fn special_files_are_refused_at_once() {
    let dir = scratch("broken-special");
    let good = profile(&dir, "good", "edge", SRC);
    let good = good.to_str().unwrap();
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // The size bound is shown by tally-format's `a_profile_over_the_bound_is_refused`: a file
    // over 4 GiB cannot be made under scripts/test.sh's `ulimit -f` (SIGXFSZ).
    let dirpath = dir.to_str().unwrap();
    let cases: [(&str, &str); 3] = [
        ("/dev/zero", "not a regular file (a character device)"),
        (fifo.to_str().unwrap(), "not a regular file (a FIFO)"),
        (dirpath, "not a regular file (a directory)"),
    ];
    for (input, want) in cases {
        let started = std::time::Instant::now();
        refused(&["report", input], want);
        refused(&["report", good, input], want);
        refused(&["paths", input], want);
        refused(&["placements", input], want);
        let out = dir.join("merged.tally");
        refused(&["merge", "-o", out.to_str().unwrap(), good, input], want);
        assert!(!out.exists());
        let c = dir.join("w.c");
        std::fs::write(&c, SRC).unwrap();
        refused(
            &[
                "cc",
                &format!("--tally-weights={input}"),
                "-c",
                c.to_str().unwrap(),
                "-o",
                dir.join("w.o").to_str().unwrap(),
            ],
            want,
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{input}: not refused at once"
        );
    }
}

/// Where the module records of a version-4 or 5 profile start: after the header, the program
/// record (`u64 path_len, u32 kind, u32 id_len`, path, id, padding) and, in version 5, the run
/// record (`u64 start, u64 end, u32 kind, i32 status, u32 host_len, u32 labels_len`, strings,
/// padding).
fn modules_at(bytes: &[u8]) -> usize {
    use tally_format::abi;
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let h = abi::HEADER_LEN;
    let path = u64::from_le_bytes(bytes[h..h + 8].try_into().unwrap()) as usize;
    let id = u32_at(h + 12);
    let run = h + abi::PROGRAM_HEADER_LEN + (path + id).next_multiple_of(8);
    if u32_at(8) < abi::PROFILE_VERSION_RUN as usize {
        return run;
    }
    run + abi::RUN_HEADER_LEN + (u32_at(run + 24) + u32_at(run + 28)).next_multiple_of(8)
}

/// A damaged counter is refused (container version 3 checksums each module's counts), not
/// reported: flipping the top bit of a counter used to give counts near 1.6e19 and exit 0.
#[test]
fn a_flipped_counter_byte_is_refused() {
    use tally_format::abi;
    let dir = scratch("flipped-counter");
    let good = profile(&dir, "good", "edge", SRC);
    let bytes = std::fs::read(&good).unwrap();
    let prof = tally_format::profile::Profile::read(&bytes).unwrap();
    let m = &prof.modules[0];
    assert!(!m.counters.is_empty());
    let first = modules_at(&bytes) + abi::MODULE_HEADER_LEN + m.meta_blob.len().next_multiple_of(8);
    assert_eq!(&bytes[first..first + 8], &m.counters[0].to_le_bytes());
    let mut bad = bytes.clone();
    bad[first + 7] ^= 0x80;
    let f = dir.join("flipped.tally");
    std::fs::write(&f, &bad).unwrap();
    refused(
        &["report", f.to_str().unwrap()],
        "counter checksum mismatch",
    );
    refused(&["report", f.to_str().unwrap()], "flipped.tally");
    refused(&["report", f.to_str().unwrap()], "good.c");
    let out = dir.join("m.tally");
    refused(
        &["merge", "-o", out.to_str().unwrap(), f.to_str().unwrap()],
        "counter checksum mismatch",
    );
}

#[test]
fn profiles_of_different_builds_are_refused() {
    let dir = scratch("different-builds");
    let a = profile(&dir, "a", "edge", SRC);
    let b = profile(&dir, "b", "edge", SRC2);
    let c = profile(&dir, "c", "edges-naive", SRC);
    let (a, b, c) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    );
    refused(&["report", a, b], "different build");
    refused(&["report", a, c], "different build");
    let out = dir.join("m.tally");
    refused(
        &["merge", "-o", out.to_str().unwrap(), a, b],
        "different build",
    );
    // The same build twice adds up.
    let o = Command::new(tally())
        .args(["merge", "-o", out.to_str().unwrap(), a, a])
        .output()
        .unwrap();
    assert!(o.status.success());
    let one = report_json(Path::new(a));
    let two = report_json(&out);
    let e1 = one["functions"][0]["entry_count"].as_u64().unwrap();
    let e2 = two["functions"][0]["entry_count"].as_u64().unwrap();
    assert_eq!((e1, e2), (1, 2));
}

#[test]
fn inconsistent_counts_name_the_function() {
    // Forge a profile whose counters violate the flow law in `main` only: take a valid edge
    // profile and claim `main` was never called although its blocks ran. The report names
    // `main` on stderr, still reports `add` exactly, and exits with status 3.
    const TWO: &str = "#include <stdio.h>\n__attribute__((noinline)) int add(int a, int b){return a+b;}\nint main(void){int s=0; for(int i=0;i<10;i++) if(i&1) s=add(s,i); printf(\"%d\\n\", s); return 0;}\n";
    let dir = scratch("inconsistent");
    let good = profile(&dir, "g", "edges-naive", TWO);
    let prof = tally_format::profile::Profile::read_file(&good).unwrap();
    let mut bad = prof.clone();
    let m = &mut bad.modules[0];
    let f = m.meta.functions.iter().find(|f| f.name == "main").unwrap();
    // e0 (calls of main) is counted directly in edges-naive.
    let idx = f
        .counters
        .iter()
        .position(|p| *p == tally_format::Probe::Edge(tally_format::EdgeIdx(0)))
        .unwrap()
        + f.counter_base.index();
    m.counters[idx] = 0;
    let path = dir.join("bad.tally");
    std::fs::write(&path, bad.write()).unwrap();
    for format in ["text", "json"] {
        let o = Command::new(tally())
            .args(["report", "--format", format, path.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{format}: {err}");
        let named: Vec<_> = err
            .lines()
            .filter(|l| l.contains("function main"))
            .collect();
        assert_eq!(named.len(), 1, "{err}");
        assert!(err.contains("--tally-atomic"), "{err}");
        assert_eq!(err.lines().count(), 2, "{err}");
        if format == "json" {
            let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let fs = doc["functions"].as_array().unwrap();
            let by = |n: &str| fs.iter().find(|f| f["name"] == n).unwrap();
            assert!(by("main")["inconsistent"].is_string());
            assert!(by("add").get("inconsistent").is_none());
            assert_eq!(by("add")["entry_count"], 5, "add is still exact");
        } else {
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.contains("INCONSISTENT"), "{out}");
        }
    }
}

/// Metadata whose hash is right but whose content is not (the metadata contract): each case once
/// made `tally report` panic or would have mislabelled paths; now each is refused on one line that
/// names the module and the function, with status 2.
#[test]
fn inconsistent_metadata_is_refused_with_one_line() {
    use tally_format::profile::{Profile, ProfileModule};
    use tally_format::{BlockIdx, ModuleMeta};
    let dir = scratch("bad-metadata");
    let forged = |name: &str, good: &Path, edit: &dyn Fn(&mut ModuleMeta)| {
        let mut p = Profile::read_file(good).unwrap();
        let m = &mut p.modules[0];
        edit(&mut m.meta);
        let mut forged = ProfileModule::new(m.meta.clone(), m.counters.clone());
        forged.paths = std::mem::take(&mut m.paths);
        *m = forged;
        let path = dir.join(name);
        std::fs::write(&path, p.write()).unwrap();
        path.to_str().unwrap().to_string()
    };
    let main = |m: &mut ModuleMeta| -> usize {
        m.functions.iter().position(|f| f.name == "main").unwrap()
    };
    let want = |src: &str, what: &str| format!("{src}, function main: {what}");

    let edge = profile(&dir, "e", "edge", SRC);
    let f = forged("endpoint.tally", &edge, &|m| {
        let i = main(m);
        m.functions[i].edges[0].1 = BlockIdx(u32::MAX);
    });
    refused(
        &["report", &f],
        &want("e.c", "edge e1 names vertex n4294967295"),
    );

    let events = profile(&dir, "ev", "events", SRC);
    let f = forged("callsite.tally", &events, &|m| {
        let i = main(m);
        m.functions[i].events_mut().unwrap().calls[0].block = BlockIdx(999);
    });
    refused(
        &["report", &f],
        &want("ev.c", "call site #0 is in block n999 but it has"),
    );
    let f = forged("perblock.tally", &events, &|m| {
        let i = main(m);
        m.functions[i].events_mut().unwrap().per_block.pop();
    });
    refused(&["report", &f], &want("ev.c", "its events list"));

    let paths = profile(&dir, "p", "path", SRC);
    let f = forged("numbering.tally", &paths, &|m| {
        let i = main(m);
        m.functions[i].paths_mut().unwrap().numbering ^= 1;
    });
    refused(&["report", &f], "path numbering");
    refused(&["paths", &f], "path numbering");
}
