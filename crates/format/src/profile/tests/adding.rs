//! Tests of adding runs of the same build.

use super::*;

/// A second run of `sample()`'s build: other counts, a lost-increments entry.
fn second_run() -> Profile {
    let mut p = sample();
    p.pid = 7;
    p.modules[0].counters = vec![10, 20, 0];
    p.modules[1].counters = vec![3];
    p.modules[1].paths.push(PathEntry {
        function: 0,
        kind: PathEntryKind::Lost,
        path: 0,
        count: 5,
    });
    p
}

#[test]
fn adding_a_run_of_the_same_build_adds_every_count() {
    let mut sum = sample();
    let other = second_run();
    assert_eq!(
        sum.add_same_build(&other.write(), true).unwrap(),
        Added::Added
    );
    // What adding the decoded profiles module by module gives.
    let mut expected = sample();
    for (a, b) in expected.modules.iter_mut().zip(&other.modules) {
        a.add(b.counters.iter().copied(), &b.paths, false).unwrap();
    }
    assert_eq!(sum.modules, expected.modules);
    assert_eq!(sum.modules[0].counters, vec![11, 22, u64::MAX]);
    assert_eq!(sum.modules[1].paths.len(), 1);
    assert_eq!(sum.pid, 4242);
    // Twice: the entries of the same function's losses become one.
    sum.add_same_build(&second_run().write(), false).unwrap();
    assert_eq!(sum.modules[1].paths[0].count, 10);
}

/// Modules are matched by hash, not position: a run that lists them in another order, or
/// holds only some of them, adds to the modules it has.
#[test]
fn adding_matches_modules_by_hash() {
    let mut sum = sample();
    let mut other = second_run();
    other.modules.reverse();
    other.modules.remove(0); // empty.c
    let known = sum.add_known_modules(&other.write(), false).unwrap();
    assert_eq!(
        known.map(|k| (k.at, k.delta, k.part)),
        Some((vec![1, 0], false, None))
    );
    assert_eq!(sum.modules[0].counters, vec![11, 22, u64::MAX]);
    assert_eq!(sum.modules[1].counters, vec![10]);
    assert_eq!(sum.modules.len(), 3);
}

#[test]
fn adding_refuses_overflow_corruption_and_other_builds_unchanged() {
    let before = sample();
    let mut sum = sample();
    // a.c's third counter is u64::MAX: adding 1 overflows.
    let mut over = sample();
    over.modules[0].counters = vec![0, 0, 1];
    assert!(matches!(
        sum.add_same_build(&over.write(), false),
        Err(ProfileError::Overflow { index: 0 })
    ));
    assert_eq!(sum, before);
    // A damaged count (the last module's last path entry): the checksum error, nothing
    // added.
    let one = |p: Profile| Profile {
        modules: vec![p.modules[1].clone()],
        ..p
    };
    let mut one_sum = one(sample());
    let mut bad = one(second_run()).write();
    let n = bad.len();
    bad[n - TRAILER_LEN - CHECKSUM_LEN - 8] ^= 4;
    assert!(matches!(
        one_sum.add_same_build(&bad, false),
        Err(ProfileError::ChecksumMismatch { index: 0, .. })
    ));
    assert_eq!(one_sum, one(sample()));
    // Another build: a module the sum does not have, or one module's metadata changed.
    let mut more = sample();
    more.modules
        .push(ProfileModule::new(meta("c.c", 1), vec![1]));
    assert_eq!(
        sum.add_same_build(&more.write(), false).unwrap(),
        Added::OtherBuild
    );
    let mut changed = sample();
    changed.modules[0] = ProfileModule::new(meta("b.c", 3), vec![1, 2, 3]);
    assert_eq!(
        sum.add_same_build(&changed.write(), false).unwrap(),
        Added::OtherBuild
    );
    // Another program, when the program must match.
    let named = with_program(Program {
        path: b"/bin/x".to_vec(),
        build_id: BuildId::None,
    });
    assert_eq!(
        sum.add_same_build(&named.write(), true).unwrap(),
        Added::OtherBuild
    );
    assert_eq!(sum, before);
    // Without the program check it adds, and the sum names no program.
    let mut named_sum = Profile {
        program: named.program.clone(),
        ..second_run()
    };
    assert_eq!(
        named_sum.add_same_build(&sample().write(), false).unwrap(),
        Added::Added
    );
    assert!(named_sum.program.is_unknown());
}

/// `load_same_build` puts another run of the same modules in place of this one (counts, path
/// entries, pid, flags), in any module order; a run with fewer modules, or a corrupt one,
/// leaves the profile as it was.
#[test]
fn loading_a_run_of_the_same_build_replaces_the_counts() {
    let mut p = sample();
    let mut other = second_run();
    other.raced = true;
    let want = other.clone();
    other.modules.reverse();
    assert!(p.load_same_build(&other.write()).unwrap());
    assert_eq!(p, want);
    let before = p.clone();
    let mut fewer = second_run();
    fewer.modules.remove(0);
    assert!(!p.load_same_build(&fewer.write()).unwrap());
    let bytes = sample().write();
    assert!(p.load_same_build(&bytes[..bytes.len() - 1]).is_err());
    assert_eq!(p, before);
}
