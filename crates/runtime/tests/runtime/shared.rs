//! `TALLY_META=shared` (write.c, `meta_file` and `out_module_ref`): each module's metadata goes
//! once into `<hash>.tallymeta` next to the profile, and the profile's records name it and hold
//! their counters sparse. Read back, such a profile is the inline profile of the same run; the
//! runtime never writes through a link or over a file that is not its own, and falls back to
//! the inline record instead.

use super::*;
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use tally_format::profile::Profile;

/// Two modules, counters set at the edges of the sparse groups (0, 63, 64, 127, the last of a
/// partial group), with every number of significant bytes, most left zero.
fn program(env: &Env) -> (PathBuf, Module, Module) {
    let a = Module::new("a", "a.c", 200, 101);
    let b = Module::new("b", "b.c", 3, 102);
    let src = format!(
        "{}{}{}\nint main(void) {{\n  printf(\"pid %d\\n\", (int)getpid());\n  \
         unsigned at[] = {{0, 1, 62, 63, 64, 65, 127, 128, 150, 191, 192, 199}};\n  \
         for (unsigned i = 0; i < sizeof at / sizeof at[0]; i++)\n    \
         a_ctr[at[i]] = i == 11 ? UINT64_MAX : (uint64_t)1 << (5 * i);\n  \
         b_ctr[2] = 7;\n  return 3;\n}}\n",
        prelude(),
        a.c,
        b.c
    );
    let exe = env.build("prog", &[("prog.c", src)]);
    (exe, a, b)
}

fn meta_name(m: &Module) -> String {
    format!("{:016x}.tallymeta", m.hash)
}

#[test]
fn shared_metadata_reads_as_the_inline_profile() {
    let env = Env::new();
    let (exe, a, b) = program(&env);
    let out = env.run_ok(&exe, &[], &[("TALLY_PROFILE", "inline.tally")], 3);
    let inline = env.profile("inline.tally");
    let pid = pid_of(&out);
    assert_eq!(inline.pid, pid);
    let out = env.run_ok(
        &exe,
        &[],
        &[("TALLY_PROFILE", "shared.tally"), ("TALLY_META", "shared")],
        3,
    );
    let shared = env.profile("shared.tally");
    assert_eq!(shared.pid, pid_of(&out));
    // The same run, inline or shared (the run records differ by their times).
    let (mut inline, mut shared) = (inline, shared);
    let (x, y) = (inline.run.take().unwrap(), shared.run.take().unwrap());
    assert_eq!(
        (x.exit_status, x.host, x.labels),
        (y.exit_status, y.host, y.labels)
    );
    assert_eq!(Profile { pid, ..shared }, inline);
    let counters = counters_of(&inline, &[&a, &b]);
    assert_eq!(counters[0].iter().filter(|&&c| c != 0).count(), 12);
    assert_eq!(counters[1], vec![0, 0, 7]);
    // The metadata files, named by module hash, hold exactly the blobs.
    for m in [&a, &b] {
        let f = std::fs::read(env.path().join(meta_name(m))).unwrap();
        assert_eq!(&f[..8], b"TALLYMTA");
        assert_eq!(&f[32..], m.blob.as_slice());
    }
    let len = |f: &str| std::fs::metadata(env.path().join(f)).unwrap().len();
    assert!(
        len("shared.tally") < len("inline.tally") / 2,
        "{} vs {}",
        len("shared.tally"),
        len("inline.tally")
    );
    // Without its metadata file, the profile is refused in one line naming the file.
    std::fs::rename(env.path().join(meta_name(&b)), env.path().join("b.moved")).unwrap();
    let e = Profile::read_file(env.path().join("shared.tally"))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&meta_name(&b)) && !e.contains('\n'), "{e}");
    // Nor does a file of another module under its name pass.
    std::fs::copy(
        env.path().join(meta_name(&a)),
        env.path().join(meta_name(&b)),
    )
    .unwrap();
    let e = Profile::read_file(env.path().join("shared.tally"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not") && e.contains(&meta_name(&b)), "{e}");
    // Bytes alone (no directory) say where the metadata is.
    let bytes = std::fs::read(env.path().join("shared.tally")).unwrap();
    let e = Profile::read(&bytes).unwrap_err().to_string();
    assert!(e.contains("TALLY_META=shared"), "{e}");
}

#[test]
fn shared_metadata_is_reused_never_written_through_a_link_or_over_a_stranger() {
    let env = Env::new();
    let (exe, a, b) = program(&env);
    let run = |name: &str| {
        env.run_ok(
            &exe,
            &[],
            &[("TALLY_PROFILE", name), ("TALLY_META", "shared")],
            3,
        );
    };
    run("first.tally");
    let a_meta = env.path().join(meta_name(&a));
    let ino = std::fs::metadata(&a_meta).unwrap().ino();
    // A second run reuses the file: not rewritten.
    run("second.tally");
    assert_eq!(std::fs::metadata(&a_meta).unwrap().ino(), ino);
    // b's name taken by a symbolic link to a victim: the link and the victim are left alone and
    // b's record carries its metadata itself.
    let b_meta = env.path().join(meta_name(&b));
    std::fs::remove_file(&b_meta).unwrap();
    std::fs::write(env.path().join("victim"), b"keep").unwrap();
    std::os::unix::fs::symlink("victim", &b_meta).unwrap();
    run("third.tally");
    assert_eq!(std::fs::read(env.path().join("victim")).unwrap(), b"keep");
    assert!(std::fs::symlink_metadata(&b_meta)
        .unwrap()
        .file_type()
        .is_symlink());
    std::fs::remove_file(&b_meta).unwrap();
    let third = env.profile("third.tally");
    assert_eq!(counters_of(&third, &[&a, &b])[1], vec![0, 0, 7]);
    // A regular file of the wrong size under the name: left alone, the record is inline.
    std::fs::write(&b_meta, b"not metadata").unwrap();
    run("fourth.tally");
    assert_eq!(std::fs::read(&b_meta).unwrap(), b"not metadata");
    std::fs::remove_file(&b_meta).unwrap();
    assert_eq!(
        counters_of(&env.profile("fourth.tally"), &[&a, &b])[1],
        vec![0, 0, 7]
    );
    // A directory under the name: the same.
    std::fs::create_dir(&b_meta).unwrap();
    run("fifth.tally");
    std::fs::remove_dir(&b_meta).unwrap();
    assert_eq!(
        counters_of(&env.profile("fifth.tally"), &[&a, &b])[1],
        vec![0, 0, 7]
    );
    // No temporary file is left behind.
    assert!(env
        .files_ending(".tallymeta")
        .iter()
        .all(|f| !f.contains(".tmp.")));
}

/// `%m` profiles (merged across runs by the runtime) and profiles written into a FIFO or
/// device stay self-contained: `TALLY_META=shared` applies to a profile file of one run.
#[test]
fn merged_profiles_stay_self_contained() {
    let env = Env::new();
    let (exe, a, b) = program(&env);
    for _ in 0..2 {
        env.run_ok(
            &exe,
            &[],
            &[("TALLY_PROFILE", "m.%m.tally"), ("TALLY_META", "shared")],
            3,
        );
    }
    assert!(env.files_ending(".tallymeta").is_empty());
    let merged: Vec<String> = env
        .files_ending(".tally")
        .into_iter()
        .filter(|f| f.starts_with("m."))
        .collect();
    assert_eq!(merged.len(), 1, "{merged:?}");
    let bytes = std::fs::read(env.path().join(&merged[0])).unwrap();
    let p = Profile::read(&bytes).expect("reads without its directory");
    assert_eq!(counters_of(&p, &[&a, &b])[1], vec![0, 0, 14]);
}
