//! Tests of the profile container: older versions, checksums, continuous profiles, the program
//! record.

use super::*;

/// The bytes of `p` in container version 3: no program record.
fn write_v3(p: &Profile) -> Vec<u8> {
    let mut b = p.write();
    b[8..12].copy_from_slice(&3u32.to_le_bytes());
    let program = PROGRAM_HEADER_LEN
        + (p.program.path.len() + program_id_len(&p.program)).next_multiple_of(8);
    b.drain(HEADER_LEN..HEADER_LEN + program);
    let n = b.len();
    b[n - 8..].copy_from_slice(&(n as u64).to_le_bytes());
    b
}

fn program_id_len(p: &Program) -> usize {
    match &p.build_id {
        BuildId::None => 0,
        BuildId::Gnu(b) => b.len(),
        BuildId::Modules(_) => 8,
    }
}

/// Bytes before the first module record of `p`.
fn modules_at(p: &Profile) -> usize {
    HEADER_LEN
        + PROGRAM_HEADER_LEN
        + (p.program.path.len() + program_id_len(&p.program)).next_multiple_of(8)
}

/// The bytes of `p` in container version 2: no program record, no checksums.
fn write_v2(p: &Profile) -> Vec<u8> {
    let mut b = write_v3(p);
    b[8..12].copy_from_slice(&2u32.to_le_bytes());
    // Each module record ends with its checksum: cut them out, last first.
    let mut ends = Vec::new();
    let mut at = HEADER_LEN;
    for m in &p.modules {
        at += MODULE_HEADER_LEN
            + m.meta_blob.len().next_multiple_of(8)
            + 8 * m.counters.len()
            + PATH_ENTRY_LEN * m.paths.len();
        ends.push(at);
        at += CHECKSUM_LEN;
    }
    for &e in ends.iter().rev() {
        b.drain(e..e + CHECKSUM_LEN);
    }
    let n = b.len();
    b[n - 8..].copy_from_slice(&(n as u64).to_le_bytes());
    b
}

#[test]
fn a_flipped_counter_byte_is_refused() {
    let p = sample();
    let b = p.write();
    // Module #1 (f.c): its one counter follows its header and padded blob.
    let m0 = MODULE_HEADER_LEN + p.modules[0].meta_blob.len().next_multiple_of(8) + 3 * 8 + 8;
    let c =
        modules_at(&p) + m0 + MODULE_HEADER_LEN + p.modules[1].meta_blob.len().next_multiple_of(8);
    assert_eq!(&b[c..c + 8], &7u64.to_le_bytes());
    let mut bad = b.clone();
    bad[c + 7] ^= 0x80;
    let e = err(&bad);
    assert!(
        e.starts_with("corrupt profile: module record #1 (f.c) counter checksum mismatch (stored "),
        "{e}"
    );
    assert!(!e.contains('\n'));
    // The checksum itself damaged: refused as well.
    let mut bad = b.clone();
    bad[c + 8] ^= 1;
    assert!(matches!(
        Profile::read(&bad),
        Err(ProfileError::ChecksumMismatch { index: 1, .. })
    ));
}

#[test]
fn a_flipped_path_entry_is_refused() {
    let mut m = sample().modules[1].clone();
    m.paths.push(PathEntry {
        function: 0,
        kind: PathEntryKind::Lost,
        path: 0,
        count: 5,
    });
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
    let b = p.write();
    assert_eq!(Profile::read(&b).unwrap(), p);
    let mut bad = b.clone();
    let n = bad.len();
    bad[n - TRAILER_LEN - CHECKSUM_LEN - 8] ^= 4; // the entry's count
    assert!(matches!(
        Profile::read(&bad),
        Err(ProfileError::ChecksumMismatch { index: 0, .. })
    ));
}

#[test]
fn version_2_without_checksums_is_still_read() {
    let p = sample();
    let v2 = write_v2(&p);
    assert_eq!(
        v2.len(),
        p.write().len() - PROGRAM_HEADER_LEN - 3 * CHECKSUM_LEN
    );
    assert_eq!(Profile::read(&v2).unwrap(), p);
}

/// `p` as an unfinished continuous profile: the flag, a padding record of `pad` bytes
/// before every module record, the checksums wrong, no trailer and `tail` after the last
/// record (what the runtime leaves when it is killed).
fn continuous_bytes(p: &Profile, pad: usize, tail: &[u8]) -> Vec<u8> {
    let finished = p.write();
    let mut out = finished[..HEADER_LEN].to_vec();
    out[12..16].copy_from_slice(&PROFILE_CONTINUOUS.to_le_bytes());
    let mut at = HEADER_LEN;
    let prog_end = {
        let path_len = u64::from_le_bytes(finished[at..at + 8].try_into().unwrap());
        let id_len = u32::from_le_bytes(finished[at + 12..at + 16].try_into().unwrap());
        at + PROGRAM_HEADER_LEN + (path_len as usize + id_len as usize).next_multiple_of(8)
    };
    out.extend_from_slice(&finished[at..prog_end]);
    at = prog_end;
    for m in &p.modules {
        out.extend_from_slice(PAD_MAGIC);
        out.extend_from_slice(&(pad as u64).to_le_bytes());
        out.resize(out.len() + pad - 16, 0);
        let len = MODULE_HEADER_LEN
            + m.meta_blob.len().next_multiple_of(8)
            + 8 * m.counters.len()
            + CHECKSUM_LEN;
        out.extend_from_slice(&finished[at..at + len - CHECKSUM_LEN]);
        out.extend_from_slice(&0xdead_beefu64.to_le_bytes());
        at += len;
    }
    out.extend_from_slice(tail);
    out
}

#[test]
fn unfinished_continuous_profiles_are_read() {
    let p = sample();
    let want = Profile {
        unfinished: true,
        raced: false,
        signal: None,
        ..p.clone()
    };
    for (pad, tail) in [
        (16, &b""[..]),
        (4096, &b"TALLYPAD\x10"[..]),
        (40, &[7u8; 13][..]),
    ] {
        let bytes = continuous_bytes(&p, pad, tail);
        assert_eq!(Profile::read(&bytes).unwrap(), want, "pad {pad}");
    }
    // The writer keeps the flag (the reader ignores its checksums and trailer anyway).
    assert_eq!(Profile::read(&want.write()).unwrap(), want);
}

#[test]
fn bad_continuous_profiles_are_refused() {
    let p = sample();
    // Padding only in continuous profiles.
    let mut bytes = continuous_bytes(&p, 16, b"");
    bytes[12..16].copy_from_slice(&PROFILE_FLAGS.to_le_bytes());
    assert!(err(&bytes).contains("bad magic"), "{}", err(&bytes));
    // A padding record with a bad length, or with non-zero bytes.
    let at = HEADER_LEN + PROGRAM_HEADER_LEN;
    for (off, byte) in [(8, 17u8), (8, 8), (16, 1)] {
        let mut bytes = continuous_bytes(&p, 24, b"");
        bytes[at + off] = byte;
        assert!(
            err(&bytes).contains("bad padding record"),
            "{}",
            err(&bytes)
        );
    }
    // A module cut short.
    let bytes = continuous_bytes(&p, 16, b"");
    assert!(err(&bytes[..bytes.len() - 9]).starts_with("truncated profile"));
    // The flag in an old container, or unknown flags.
    let mut old = write_v3(&p);
    old[12..16].copy_from_slice(&PROFILE_CONTINUOUS.to_le_bytes());
    assert!(err(&old).contains("flags 0x1 are not supported"));
    let mut other = p.write();
    other[12..16].copy_from_slice(&0x10u32.to_le_bytes());
    assert!(err(&other).contains("flags 0x10 are not supported"));
    let mut old = write_v3(&p);
    old[12..16].copy_from_slice(&PROFILE_RACED.to_le_bytes());
    assert!(err(&old).contains("flags 0x2 are not supported"));
}

#[test]
fn the_program_round_trips() {
    for build_id in [
        BuildId::None,
        BuildId::Gnu(vec![0xab; 20]),
        BuildId::Gnu(vec![1; 64]),
        BuildId::Modules(0x0123_4567_89ab_cdef),
    ] {
        for path in [
            &b""[..],
            b"/x",
            b"/usr/local/bin/some-program",
            &[0xff; 4096],
        ] {
            let p = with_program(Program {
                path: path.to_vec(),
                build_id: build_id.clone(),
            });
            let b = p.write();
            assert_eq!(b.len() % 8, 0);
            assert_eq!(Profile::read(&b).unwrap(), p);
            assert_eq!(modules_at(&p) % 8, 0);
            assert_eq!(&b[modules_at(&p)..modules_at(&p) + 8], b"TALLYMOD");
        }
    }
    assert_eq!(BuildId::Gnu(vec![0xab, 1]).hex(), "ab01");
    assert_eq!(BuildId::Modules(0xabc).hex(), "0000000000000abc");
}

#[test]
fn version_3_is_read_with_an_unknown_program() {
    let p = with_program(Program {
        path: b"/bin/prog".to_vec(),
        build_id: BuildId::Gnu(vec![7; 20]),
    });
    let v3 = write_v3(&p);
    let read = Profile::read(&v3).unwrap();
    assert!(read.program.is_unknown());
    assert_eq!(read.modules, p.modules);
    let v2 = write_v2(&p);
    assert_eq!(Profile::read(&v2).unwrap(), read);
}

#[test]
fn a_bad_program_record_is_refused() {
    let p = with_program(Program {
        path: b"/bin/prog".to_vec(),
        build_id: BuildId::Modules(5),
    });
    let b = p.write();
    let mut bad = b.clone();
    bad[40..44].copy_from_slice(&9u32.to_le_bytes()); // kind
    assert_eq!(
        err(&bad),
        "corrupt profile: bad program record (bad build id kind or length)"
    );
    let mut bad = b.clone();
    bad[32..40].copy_from_slice(&4097u64.to_le_bytes()); // path length
    assert_eq!(
        err(&bad),
        "corrupt profile: bad program record (path too long)"
    );
    let mut bad = b.clone();
    bad[44..48].copy_from_slice(&65u32.to_le_bytes()); // id length
    assert_eq!(
        err(&bad),
        "corrupt profile: bad program record (build id too long)"
    );
    let mut bad = b.clone();
    bad[44..48].copy_from_slice(&7u32.to_le_bytes()); // a module id of 7 bytes
    assert!(err(&bad).starts_with("corrupt profile"));
}
