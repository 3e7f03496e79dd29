//! Issue 14, point 9 (first part): a profile names the program that wrote it, and
//! `tally merge --by-program` merges a directory of profiles of several programs into one
//! profile per program, listing the inputs it cannot read.

mod support;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::*;
use tally_format::profile::{BuildId, Profile};

const ONE: &str = r#"#include <stdlib.h>
static int f(int n) { int s = 0; for (int i = 0; i < n; i++) s += i % 3 ? i : 1; return s; }
int main(int argc, char **argv) { return f(atoi(argv[1])) == -1; }
"#;

const TWO: &str = r#"#include <stdlib.h>
static int g(int n) { return n < 2 ? n : g(n - 1) + g(n - 2); }
int main(int argc, char **argv) { (void)argc; return g(atoi(argv[1])) < 0; }
"#;

fn sum(a: &mut Vec<Vec<u64>>, p: &Profile) {
    if a.is_empty() {
        a.extend(p.modules.iter().map(|m| vec![0; m.counters.len()]));
    }
    for (s, m) in a.iter_mut().zip(&p.modules) {
        for (x, y) in s.iter_mut().zip(&m.counters) {
            *x += y;
        }
    }
}

fn counters(p: &Profile) -> Vec<Vec<u64>> {
    p.modules.iter().map(|m| m.counters.clone()).collect()
}

#[test]
fn profiles_name_their_program_and_merge_by_program() {
    let dir = scratch("merge-by-program");
    std::fs::write(dir.join("one.c"), ONE).unwrap();
    std::fs::write(dir.join("two.c"), TWO).unwrap();
    build(
        Variant::Tally("edge"),
        false,
        &["-O1", "one.c"],
        &dir.join("one"),
        &dir,
    );
    // Without a GNU build-id note the build id is the hash of the module hashes.
    build(
        Variant::Tally("edge"),
        false,
        &["-O1", "-Wl,--build-id=none", "two.c"],
        &dir.join("two"),
        &dir,
    );
    let runs = dir.join("runs");
    std::fs::create_dir(&runs).unwrap();
    let mut expected: BTreeMap<&str, Vec<Vec<u64>>> = BTreeMap::new();
    let mut seen = 0;
    for (prog, args) in [
        ("one", "5"),
        ("two", "6"),
        ("one", "7"),
        ("one", "9"),
        ("two", "3"),
    ] {
        let before: Vec<PathBuf> = std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let o = Command::new(dir.join(prog))
            .arg(args)
            .current_dir(&dir)
            .env("TALLY_PROFILE", runs.join("%p.tally"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{prog} {args}: {o:?}");
        let new: Vec<PathBuf> = std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| !before.contains(p))
            .collect();
        assert_eq!(new.len(), 1, "{new:?}");
        seen += 1;
        let p = Profile::read_file(&new[0]).unwrap();
        let exe = std::fs::canonicalize(dir.join(prog)).unwrap();
        assert_eq!(p.program.path, exe.as_os_str().as_encoded_bytes(), "{prog}");
        match (prog, &p.program.build_id) {
            ("one", BuildId::Gnu(id)) => assert!(!id.is_empty()),
            ("two", BuildId::Modules(h)) => assert_eq!(*h, p.modules_build_id()),
            other => panic!("unexpected build id {other:?}"),
        }
        sum(expected.entry(prog).or_default(), &p);
    }
    assert_eq!(seen, 5);

    // The report names the program.
    let one_run = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let r = report_json(&one_run);
    assert!(
        r["program"]["path"].as_str().unwrap().starts_with('/'),
        "{}",
        r["program"]
    );

    // Unreadable inputs: listed, exit status 2, the rest merged.
    std::fs::write(runs.join("bad.tally"), b"not a profile").unwrap();
    std::fs::write(runs.join("empty.tally"), b"").unwrap();
    std::fs::write(runs.join("notes.txt"), b"not an input").unwrap();
    let out = dir.join("merged");
    let o = Command::new(tally())
        .args(["merge", "--by-program", "-o"])
        .arg(&out)
        .arg(&runs)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        !stderr.contains('\r'),
        "no progress line off a terminal: {stderr:?}"
    );
    let skipped: Vec<&str> = stderr.lines().filter(|l| l.contains("skipping")).collect();
    assert_eq!(skipped.len(), 2, "{stderr}");
    assert!(
        skipped[0].contains("bad.tally: not a tally profile"),
        "{stderr}"
    );
    assert!(
        skipped[1].contains("empty.tally: empty profile"),
        "{stderr}"
    );
    assert!(
        stderr.contains("2 of 7 profile(s) could not be merged"),
        "{stderr}"
    );

    let mut outputs: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    outputs.sort();
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    for (file, prog) in outputs.iter().zip(["one", "two"]) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&format!("{prog}-")) && name.ends_with(".tally"),
            "{name}"
        );
        let m = Profile::read_file(file).unwrap();
        assert_eq!(counters(&m), expected[prog], "{prog}");
        let exe = std::fs::canonicalize(dir.join(prog)).unwrap();
        assert_eq!(m.program.path, exe.as_os_str().as_encoded_bytes());
        assert!(name.contains(&m.program.build_id.hex()[..12]), "{name}");
    }

    // Plain merge keeps the program of its inputs; different programs are still refused.
    let ones: Vec<PathBuf> = outputs[..1].to_vec();
    let single = dir.join("single.tally");
    let o = Command::new(tally())
        .args(["merge", "-o"])
        .arg(&single)
        .args(&ones)
        .arg(&outputs[0])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let m = Profile::read_file(&single).unwrap();
    assert_eq!(m.program, Profile::read_file(&outputs[0]).unwrap().program);
    let o = Command::new(tally())
        .args(["merge", "-o"])
        .arg(dir.join("mixed.tally"))
        .args(&outputs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(Path::new(&dir.join("mixed.tally")).metadata().is_err());

    // On a terminal (util-linux `script` gives the command a pseudo-terminal) merging many
    // profiles shows a progress line; off a terminal it does not (checked above).
    let cmd = format!(
        "{} merge --by-program -o {} {}",
        tally().display(),
        dir.join("tty-merged").display(),
        runs.display()
    );
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("util-linux script");
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(shown.contains("tally: merging"), "{shown:?}");
    assert!(shown.contains("/7 profiles"), "{shown:?}");
}
