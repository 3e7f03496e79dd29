//! `TALLY_META=shared` (docs/design/profile.md, "Shared metadata"): a run's profile names its
//! modules' metadata files (written once per build next to it) and holds its counters sparse.
//! On the demo program in every counting mode and on SQLite, the profiles of the same runs
//! written inline and shared merge into the same bytes, and so does the dataset `tally export`
//! makes of the shared ones; a shared profile is a fraction of the inline one's size; a profile
//! whose metadata file is gone is refused in one line naming the file.

use crate::support::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Runs `bin args` (stdin from `input` when given) writing `profile`, shared or inline.
fn run_to(bin: &Path, args: &[&str], input: Option<&Path>, profile: &Path, shared: bool) {
    let mut c = Command::new(bin);
    c.args(args)
        .stdout(Stdio::null())
        .env("TALLY_PROFILE", profile)
        .env_remove("TALLY_META");
    if let Some(i) = input {
        c.stdin(std::fs::File::open(i).unwrap());
    }
    if shared {
        c.env("TALLY_META", "shared");
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}: {o:?}", bin.display());
}

/// `tally merge -o OUT profiles...` in `dir`; the merged bytes.
fn merged(dir: &Path, out: &str, profiles: &[PathBuf]) -> Vec<u8> {
    let mut args = vec!["merge".to_string(), "-o".into(), out.into()];
    args.extend(profiles.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    tally_ok(dir, &args);
    std::fs::read(dir.join(out)).unwrap()
}

fn size(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum()
}

/// The runs of one build, written inline into `dir` and shared into `dir/shared/`: the merges
/// are the same bytes, and so is the merge of the shared runs' dataset. Returns the sizes of
/// the inline and the shared profiles.
fn same_runs(
    dir: &Path,
    name: &str,
    runs: &[(Vec<&str>, Option<PathBuf>)],
    bin: &Path,
) -> (u64, u64) {
    let shared_dir = dir.join(format!("shared-{name}"));
    std::fs::create_dir_all(&shared_dir).unwrap();
    let (mut inline, mut shared) = (Vec::new(), Vec::new());
    for (i, (args, input)) in runs.iter().enumerate() {
        let p = dir.join(format!("{name}-{i}.tally"));
        run_to(bin, args, input.as_deref(), &p, false);
        inline.push(p);
        let s = shared_dir.join(format!("{name}-{i}.tally"));
        run_to(bin, args, input.as_deref(), &s, true);
        // Every record names its metadata file (a live module's, and the saved record of a
        // module whose image's destructors ran before the profile was written).
        let bytes = std::fs::read(&s).unwrap();
        assert!(
            !bytes.windows(8).any(|w| w == b"TALLYMOD"),
            "{name}: a record holds its metadata"
        );
        shared.push(s);
    }
    let want = merged(dir, &format!("{name}.inline.tally"), &inline);
    let got = merged(dir, &format!("{name}.shared.tally"), &shared);
    assert!(
        want == got,
        "{name}: the shared runs merge into other bytes"
    );
    // The dataset of the shared runs reads back as the same merge.
    let ds = format!("ds-{name}");
    let mut args = vec!["export".to_string(), "-o".into(), ds.clone()];
    args.extend(shared.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    tally_ok(dir, &args);
    let back = merged(dir, &format!("{name}.dataset.tally"), &[dir.join(&ds)]);
    assert!(
        want == back,
        "{name}: the dataset of the shared runs reads back as other bytes"
    );
    (size(&inline), size(&shared))
}

#[test]
fn shared_metadata_profiles_merge_into_the_inline_ones_bytes() {
    let dir = scratch("shared-meta-modes");
    let src = repo().join("testdata/demo/wordfreq.c");
    let inputs = demo_inputs(&dir);
    for mode in COUNTING {
        let bin = dir.join(format!("wordfreq-{mode}"));
        build(
            Variant::Tally(mode),
            false,
            &["-O2", "-g", src.to_str().unwrap()],
            &bin,
            &dir,
        );
        let runs: Vec<_> = inputs.iter().map(|i| (vec![], Some(i.clone()))).collect();
        let (inline, shared) = same_runs(&dir, mode, &runs, &bin);
        eprintln!("{mode}: inline {inline} bytes, shared {shared} bytes");
        assert!(shared < inline, "{mode}: {shared} >= {inline}");
    }
    // A profile without its metadata file: one line naming the file, exit 2.
    let lone = dir.join("lone");
    std::fs::create_dir_all(&lone).unwrap();
    std::fs::copy(
        dir.join("shared-edge/edge-0.tally"),
        lone.join("edge-0.tally"),
    )
    .unwrap();
    let o = Command::new(tally())
        .args(["report", "lone/edge-0.tally"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.lines().count() == 1 && err.contains("lone/") && err.contains(".tallymeta"),
        "{err}"
    );
}

#[test]
fn shared_metadata_sqlite_runs_are_a_small_fraction_and_exact() {
    let dir = scratch("shared-meta-sqlite");
    let args = sqlite_args(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let bin = dir.join("sqlite");
    build(Variant::Tally("edge"), false, &args, &bin, &dir);
    let runs = vec![(vec!["1"], None), (vec!["3"], None)];
    let (inline, shared) = same_runs(&dir, "sqlite", &runs, &bin);
    eprintln!("sqlite: inline {inline} bytes, shared {shared} bytes");
    // Measured: 2.2 MB inline, 79 kB shared per run (docs/profile-size.md).
    assert!(shared * 10 < inline, "{shared} vs {inline}");
}

/// A program and a shared library, both built with `tally cc`: at exit the library's
/// destructors save the modules' records before the profile is written, and those records
/// name their metadata files too.
#[test]
fn shared_metadata_of_a_program_and_its_shared_library() {
    let dir = scratch("shared-meta-shlib");
    std::fs::write(
        dir.join("lib.c"),
        "int step(int x) { return x % 2 ? 3 * x + 1 : x / 2; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("main.c"),
        "#include <stdio.h>\nint step(int);\nint main(int argc, char **argv) {\n  \
         (void)argv;\n  int n = 0, x = 7 * argc;\n  while (x != 1) { x = step(x); n++; }\n  \
         printf(\"%d\\n\", n);\n  return 0;\n}\n",
    )
    .unwrap();
    let cc = |args: &[&str]| {
        let o = Command::new(tally())
            .arg("cc")
            .args(args)
            .current_dir(&dir)
            .env("TALLY_MODE", "edge")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    cc(&["-O2", "-fPIC", "-shared", "lib.c", "-o", "libstep.so"]);
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    cc(&["-O2", "main.c", "-L.", "-lstep", &rpath, "-o", "collatz"]);
    let runs = vec![(vec!["a"], None), (vec!["a", "b", "c"], None)];
    let (inline, shared) = same_runs(&dir, "shlib", &runs, &dir.join("collatz"));
    eprintln!("shlib: inline {inline} bytes, shared {shared} bytes");
    assert!(shared < inline, "{shared} >= {inline}");
}
