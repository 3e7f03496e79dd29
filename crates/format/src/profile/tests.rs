//! Tests of the profile container: layout, refusals, merging ids, files.

use super::*;
use crate::meta::{BlockIdx as B, FunctionMeta, Linkage, Loc, Mode, Probe, StoredKind};

mod adding;
mod versions;

fn meta(source: &str, num_counters: u32) -> ModuleMeta {
    ModuleMeta {
        source: source.into(),
        producer: "tally test".into(),
        mode: Mode::Edge,
        num_counters,
        files: vec![source.into()],
        functions: vec![],
        source_fns: vec![],
        skipped: vec![],
        mode_meta: Default::default(),
        oracle_for: None,
        probe_descs: Vec::new(),
        probes_before_optimization: false,
    }
}

/// A metadata blob with one real function: n0 -> n1 -> EXIT, counter on e1.
fn meta_with_function() -> ModuleMeta {
    let mut f = FunctionMeta {
        name: "f".into(),
        linkage: Linkage::External,
        loc: Loc {
            file: Some(crate::meta::FileIdx(0)),
            line: 3,
        },
        num_blocks: 2,
        edges: vec![
            (B(0), B(1), StoredKind::Flow),
            (B(1), B(2), StoredKind::Return),
        ],
        blocks: vec![Loc::default(); 2],
        cfg_hash: 0,
        counter_base: crate::meta::CounterIdx(0),
        counters: vec![Probe::Edge(crate::meta::EdgeIdx(1))],
        mode_meta: Default::default(),
        source: Default::default(),
    };
    f.cfg_hash = f.cfg().unwrap().shape_hash();
    ModuleMeta {
        functions: vec![f],
        ..meta("f.c", 1)
    }
}

fn sample() -> Profile {
    Profile {
        delta: false,
        pid: 4242,
        program: Default::default(),
        modules: vec![
            ProfileModule::new(meta("a.c", 3), vec![1, 2, u64::MAX]),
            ProfileModule::new(meta_with_function(), vec![7]),
            ProfileModule::new(meta("empty.c", 0), vec![]),
        ],
        unfinished: false,
        raced: false,
        signal: None,
        run: None,
    }
}

fn with_program(program: Program) -> Profile {
    Profile {
        program,
        ..sample()
    }
}

fn err(bytes: &[u8]) -> String {
    Profile::read(bytes).unwrap_err().to_string()
}

#[test]
fn roundtrip() {
    let p = sample();
    let bytes = p.write();
    assert_eq!(bytes.len() % 8, 0);
    assert_eq!(Profile::read(&bytes).unwrap(), p);
}

#[test]
fn layout() {
    let m = meta("a.c", 2);
    let blob = m.encode();
    let p = Profile {
        delta: false,
        pid: 9,
        program: Default::default(),
        modules: vec![ProfileModule::new(m, vec![5, 6])],
        unfinished: false,
        raced: false,
        signal: None,
        run: None,
    };
    let b = p.write();
    assert_eq!(&b[0..8], b"TALLYPRF");
    assert_eq!(&b[8..12], &4u32.to_le_bytes());
    assert_eq!(&b[12..16], &0u32.to_le_bytes());
    assert_eq!(&b[16..24], &1u64.to_le_bytes());
    assert_eq!(&b[24..32], &9u64.to_le_bytes());
    // The program record: unknown program, 16 bytes.
    assert_eq!(&b[32..48], &[0u8; 16]);
    assert_eq!(&b[48..56], b"TALLYMOD");
    assert_eq!(&b[56..64], &fnv64(&blob).to_le_bytes());
    assert_eq!(&b[64..72], &(blob.len() as u64).to_le_bytes());
    assert_eq!(&b[72..80], &2u64.to_le_bytes());
    assert_eq!(&b[80..88], &0u64.to_le_bytes());
    let c = 88 + blob.len().next_multiple_of(8);
    assert_eq!(&b[88..88 + blob.len()], &blob[..]);
    assert!(b[88 + blob.len()..c].iter().all(|&x| x == 0));
    assert_eq!(&b[c..c + 8], &5u64.to_le_bytes());
    assert_eq!(&b[c + 8..c + 16], &6u64.to_le_bytes());
    let mut sum = Fnv64::new();
    sum.write(&b[c..c + 16]);
    assert_eq!(&b[c + 16..c + 24], &sum.finish().to_le_bytes());
    assert_eq!(&b[c + 24..c + 32], b"TALLYEND");
    assert_eq!(&b[c + 32..c + 40], &((c + 40) as u64).to_le_bytes());
    assert_eq!(b.len(), c + 40);
}

#[test]
fn empty() {
    assert_eq!(
        err(b""),
        "empty profile (0 bytes): the program wrote nothing"
    );
}

#[test]
fn bad_magic() {
    assert_eq!(
        err(b"hello world, this is not it"),
        "not a tally profile (bad magic)"
    );
    assert_eq!(err(b"TALLYMD\0xxxx"), "not a tally profile (bad magic)");
    assert_eq!(err(b"X"), "not a tally profile (bad magic)");
}

#[test]
fn short_magic_is_truncated() {
    assert_eq!(
        err(b"TALLY"),
        "truncated profile: the header at byte 0 needs 32 bytes but the file has 5 bytes"
    );
}

#[test]
fn version() {
    let mut b = sample().write();
    b[8..12].copy_from_slice(&7u32.to_le_bytes());
    assert_eq!(
        err(&b),
        "profile container version 7 is not supported (this tally reads versions 2 to 5)"
    );
}

/// A record naming its metadata file (`TALLYREF`) exists from version 5 on: in a version-4
/// profile it is a bad module record.
#[test]
fn ref_records_need_version_5() {
    let mut b = sample().write();
    let at = b
        .windows(8)
        .position(|w| w == crate::abi::MODULE_MAGIC)
        .unwrap();
    b[at..at + 8].copy_from_slice(crate::abi::REF_MAGIC);
    assert!(
        err(&b).starts_with("corrupt profile: module record #0 at byte"),
        "{}",
        err(&b)
    );
}

#[test]
fn flags() {
    let mut b = sample().write();
    b[12] = 0x10;
    assert_eq!(
        err(&b),
        "profile flags 0x10 are not supported (this tally reads flags 1 (unfinished), 2 (raced), 4 (fatal signal, its number in 0xff00), 8 (a snapshot's part))"
    );
    // A signal number needs its flag, and the flag a number.
    for bad in [0x0b00u32, PROFILE_SIGNALED] {
        b[12..16].copy_from_slice(&bad.to_le_bytes());
        assert!(err(&b).contains("are not supported"), "{bad:#x}");
    }
}

/// Parts of a process that took snapshots (the delta flag) add modulo 2^64: an early exit's
/// change of -1 (two's complement) and a later +3 make 2; other sums still refuse to overflow.
#[test]
fn parts_add_with_wrapping() {
    let mut part = sample();
    part.delta = true;
    for m in &mut part.modules {
        m.counters.fill(u64::MAX); // -1
    }
    let mut later = sample();
    later.delta = true;
    for m in &mut later.modules {
        m.counters.fill(3);
    }
    assert_eq!(
        part.add_same_build(&later.write(), true).unwrap(),
        Added::Added
    );
    assert!(part
        .modules
        .iter()
        .all(|m| m.counters.iter().all(|&c| c == 2)));
    assert!(part.delta);
    let mut whole = sample();
    for m in &mut whole.modules {
        m.counters.fill(u64::MAX);
    }
    assert!(whole.add_same_build(&sample().write(), true).is_err());
}

/// The raced and fatal-signal flags read back as written, alone, together, with the
/// continuous flag (a merge), and survive `add_same_build`.
#[test]
fn raced_and_signal_flags_round_trip() {
    for (raced, signal, unfinished) in [
        (true, None, false),
        (false, Some(11), false),
        (true, Some(8), false),
        (true, Some(6), true),
    ] {
        let mut p = sample();
        p.raced = raced;
        p.signal = signal;
        p.unfinished = unfinished;
        let b = p.write();
        let flags = u32::from_le_bytes(b[12..16].try_into().unwrap());
        assert_eq!(flags, p.header_flags());
        let q = Profile::read(&b).unwrap();
        assert_eq!(
            (q.raced, q.signal, q.unfinished),
            (raced, signal, unfinished)
        );
        let mut sum = sample();
        for m in &mut sum.modules {
            m.counters.fill(0);
        }
        assert_eq!(sum.add_same_build(&b, true).unwrap(), Added::Added);
        assert_eq!((sum.raced, sum.signal), (raced, signal));
    }
    let mut p = sample();
    p.signal = Some(11);
    let flags = p.header_flags();
    assert_eq!(flags, PROFILE_SIGNALED | (11 << PROFILE_SIGNAL_SHIFT));
}

#[test]
fn truncated_everywhere() {
    let b = sample().write();
    for len in 1..b.len() {
        let e = Profile::read(&b[..len]).unwrap_err();
        assert!(matches!(e, ProfileError::Truncated(_)), "length {len}: {e}");
    }
}

#[test]
fn truncated_counters_message() {
    let b = Profile {
        delta: false,
        pid: 1,
        program: Default::default(),
        modules: vec![ProfileModule::new(meta("a.c", 2), vec![5, 6])],
        unfinished: false,
        raced: false,
        signal: None,
        run: None,
    }
    .write();
    let cut = b.len() - 16 - 8 - 4;
    let counters_at = b.len() - 16 - 8 - 16;
    assert_eq!(
        err(&b[..cut]),
        format!(
            "truncated profile: the module counters at byte {counters_at} needs 16 bytes but the file has {cut} bytes"
        )
    );
}

#[test]
fn huge_lengths_are_truncation_not_panic() {
    let mut b = sample().write();
    // module_count = u64::MAX
    b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        Profile::read(&b),
        Err(ProfileError::BadModuleMagic { .. })
    ));
    let mut b = sample().write();
    // meta_len of module 0 = u64::MAX
    b[64..72].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(err(&b).starts_with(
        "truncated profile: the module metadata at byte 88 needs 18446744073709551615 bytes"
    ));
    let mut b = sample().write();
    // num_counters of module 0 = u64::MAX / 4
    b[72..80].copy_from_slice(&(u64::MAX / 4).to_le_bytes());
    assert!(err(&b).starts_with("truncated profile: the module counters at byte"));
    let mut b = sample().write();
    b[64..72].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
    assert!(matches!(Profile::read(&b), Err(ProfileError::Truncated(_))));
}

#[test]
fn missing_trailer() {
    let mut b = sample().write();
    let n = b.len();
    b[n - 16..n - 8].copy_from_slice(b"TALLYXXX");
    assert_eq!(
        err(&b),
        format!("truncated profile: no TALLYEND trailer at byte {}", n - 16)
    );
}

#[test]
fn wrong_total_length() {
    let mut b = sample().write();
    let n = b.len();
    b[n - 8..].copy_from_slice(&1000u64.to_le_bytes());
    assert_eq!(
        err(&b),
        format!(
            "truncated profile: the trailer records a length of 1000 bytes but the profile ends at byte {n}"
        )
    );
}

#[test]
fn fewer_modules_than_declared() {
    let mut b = sample().write();
    b[16..24].copy_from_slice(&4u64.to_le_bytes());
    let n = b.len();
    assert_eq!(
        err(&b),
        format!(
            "corrupt profile: module record #3 at byte {} has a bad magic",
            n - 16
        )
    );
}

#[test]
fn bad_module_magic() {
    let mut b = sample().write();
    b[48] = b'X';
    assert_eq!(
        err(&b),
        "corrupt profile: module record #0 at byte 48 has a bad magic"
    );
}

#[test]
fn hash_mismatch() {
    let p = sample();
    let mut b = p.write();
    b[56] ^= 1;
    let h = p.modules[0].hash;
    assert_eq!(
        err(&b),
        format!(
            "corrupt profile: module record #0 metadata hash mismatch (stored {:016x}, computed {h:016x})",
            h ^ 1
        )
    );
}

#[test]
fn metadata_does_not_decode() {
    // A version this reader does not know (the next one).
    let future = crate::meta::META_VERSION + 1;
    let mut blob = b"TALLYMD\0".to_vec();
    blob.extend_from_slice(&future.to_le_bytes());
    let p = Profile {
        delta: false,
        pid: 1,
        program: Default::default(),
        modules: vec![ProfileModule {
            hash: fnv64(&blob),
            meta: meta("x.c", 0),
            meta_blob: blob,
            counters: vec![],
            paths: vec![],
        }],
        unfinished: false,
        raced: false,
        signal: None,
        run: None,
    };
    assert_eq!(
        err(&p.write()),
        format!(
            "corrupt profile: module record #0 metadata: metadata version {future} is not supported (this tally reads version {})",
            crate::meta::META_VERSION
        )
    );
    let blob = b"garbage!".to_vec();
    let p = Profile {
        delta: false,
        pid: 1,
        program: Default::default(),
        modules: vec![ProfileModule {
            hash: fnv64(&blob),
            meta: meta("x.c", 0),
            meta_blob: blob,
            counters: vec![],
            paths: vec![],
        }],
        unfinished: false,
        raced: false,
        signal: None,
        run: None,
    };
    assert_eq!(
        err(&p.write()),
        "corrupt profile: module record #0 metadata: not tally metadata (bad magic)"
    );
}

#[test]
fn counter_count() {
    let mut m = ProfileModule::new(meta("a.c", 3), vec![1, 2, 3]);
    m.counters.push(4);
    let p = Profile {
        delta: false,
        pid: 1,
        program: Default::default(),
        modules: vec![m],
        unfinished: false,
        raced: false,
        signal: None,
        run: None,
    };
    assert_eq!(
        err(&p.write()),
        "corrupt profile: module record #0 (a.c) has 4 counters but its metadata declares 3"
    );
}

#[test]
fn modules_build_id_ignores_order() {
    let mut p = sample();
    let a = p.modules_build_id();
    p.modules.reverse();
    assert_eq!(p.modules_build_id(), a);
    p.modules.pop();
    assert_ne!(p.modules_build_id(), a);
}

#[test]
fn trailing_garbage() {
    let mut b = sample().write();
    let n = b.len();
    b.extend_from_slice(b"xyz");
    assert_eq!(
        err(&b),
        format!("corrupt profile: 3 bytes of trailing garbage after the trailer at byte {n}")
    );
}

#[test]
fn io_error() {
    let e = Profile::read_file("/nonexistent/dir/p.tally").unwrap_err();
    assert!(matches!(e, ProfileError::Io { .. }));
    assert!(e
        .to_string()
        .starts_with("cannot read profile /nonexistent/dir/p.tally: "));
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn file_roundtrip() {
    let dir = std::env::temp_dir().join(format!("tally-format-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.tally");
    let p = sample();
    p.write_file(&path).unwrap();
    assert_eq!(Profile::read_file(&path).unwrap(), p);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The size bound: a profile one byte over it is refused with one line, one at the bound is
/// read (the bound tested is small; `read_file` uses [`MAX_PROFILE_BYTES`]).
#[test]
fn a_profile_over_the_bound_is_refused() {
    let dir = std::env::temp_dir().join(format!("tally-format-bound-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.tally");
    let p = sample();
    p.write_file(&path).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(Profile::read_file_bounded(&path, len).unwrap(), p);
    let e = Profile::read_file_bounded(&path, len - 1).unwrap_err();
    assert!(matches!(e, ProfileError::TooLarge { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("{len} bytes is more than the {}", len - 1)),
        "{msg}"
    );
    assert!(!msg.contains('\n'));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_message_is_one_line() {
    let b = sample().write();
    let mut inputs: Vec<Vec<u8>> = vec![vec![], b"nope".to_vec(), b[..b.len() - 1].to_vec()];
    for i in 0..b.len() {
        let mut m = b.clone();
        m[i] ^= 0x55;
        inputs.push(m);
    }
    for input in inputs {
        if let Err(e) = Profile::read(&input) {
            let s = e.to_string();
            assert!(!s.contains('\n') && !s.is_empty(), "{s:?}");
        }
    }
}

/// The run record (version 5) round-trips, and a bad one is refused in one line.
#[test]
fn run_records() {
    let run = Run {
        snapshot: None,
        start_ns: 1_700_000_000_000_000_000,
        end_ns: 1_700_000_001_000_000_000,
        exit_status: Some(-1),
        host: b"builder".to_vec(),
        labels: b"suite=a,shard".to_vec(),
    };
    let p = Profile {
        run: Some(run.clone()),
        ..sample()
    };
    let b = p.write();
    assert_eq!(b[8..12], PROFILE_VERSION_RUN.to_le_bytes());
    assert_eq!(Profile::read(&b).unwrap(), p);
    assert_eq!(
        run.label_pairs(),
        vec![
            ("suite".into(), "a".into()),
            ("shard".into(), String::new())
        ]
    );
    // The record starts after the header and the (empty) program record.
    let at = HEADER_LEN + PROGRAM_HEADER_LEN;
    let bad = |off: usize, v: u32| {
        let mut c = b.clone();
        c[at + off..at + off + 4].copy_from_slice(&v.to_le_bytes());
        err(&c)
    };
    assert_eq!(
        bad(16, 7),
        "corrupt profile: bad run record (bad exit status kind)"
    );
    // A snapshot's part: its number is the status; number 0 is not one.
    let part = Profile {
        delta: true,
        run: Some(Run {
            snapshot: Some(3),
            exit_status: None,
            ..run.clone()
        }),
        ..sample()
    };
    let pb = part.write();
    assert_eq!(Profile::read(&pb).unwrap(), part);
    let mut zero = pb.clone();
    zero[at + 20..at + 24].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(
        err(&zero),
        "corrupt profile: bad run record (bad exit status kind)"
    );
    assert_eq!(
        bad(24, 300),
        "corrupt profile: bad run record (host name or labels too long)"
    );
    let mut c = b.clone();
    c[at + RUN_HEADER_LEN + 7 + 13] = 1; // the padding after "builder" and the labels
    assert_eq!(
        err(&c),
        "corrupt profile: bad run record (non-zero padding)"
    );
}
