//! Fuzz-style property tests: no input makes `Profile::read` panic, and valid profiles
//! round-trip. The profiles hold modules of the modes with module-level facts or checked plans
//! too: a `trace` module (a witness plan, `tally_graph::witness`) and an `ipath` module (a set
//! numbered by `tally_graph::ipaths`), so that decoding and validating their metadata is
//! fuzzed as well.

use proptest::prelude::*;
use tally_format::abi;
use tally_format::profile::{BuildId, Profile, ProfileError, ProfileModule, Program, Run};
use tally_format::{
    BlockIdx, CounterIdx, EdgeIdx, FileIdx, FunctionMeta, FunctionModeMeta, IpathFunction,
    IpathMeta, Linkage, Loc, Mode, ModuleMeta, ModuleModeMeta, PathMeta, PathStorage, Probe,
    StoredKind, WtraceMeta,
};

fn function(name: &str, base: u32) -> FunctionMeta {
    // n0 -> n1, n0 -> n2, n1 -> n2, n2 -> EXIT, n1 -> EXIT (early exit)
    let mut f = FunctionMeta {
        name: name.into(),
        linkage: Linkage::Linkonce,
        loc: Loc {
            file: Some(FileIdx(0)),
            line: 10,
        },
        num_blocks: 3,
        edges: vec![
            (BlockIdx(0), BlockIdx(1), StoredKind::Flow),
            (BlockIdx(0), BlockIdx(2), StoredKind::Flow),
            (BlockIdx(1), BlockIdx(2), StoredKind::Flow),
            (BlockIdx(2), BlockIdx(3), StoredKind::Return),
            (BlockIdx(1), BlockIdx(3), StoredKind::EarlyExit),
        ],
        blocks: vec![
            Loc {
                file: Some(FileIdx(0)),
                line: 11,
            },
            Loc::default(),
            Loc {
                file: Some(FileIdx(0)),
                line: 13,
            },
        ],
        cfg_hash: 0,
        counter_base: CounterIdx(base),
        counters: vec![
            Probe::Edge(EdgeIdx(1)),
            Probe::Edge(EdgeIdx(5)),
            Probe::Block(BlockIdx(2)),
        ],
        mode_meta: Default::default(),
        source: Default::default(),
    };
    f.cfg_hash = f.cfg().unwrap().shape_hash();
    f
}

fn module(source: &str, nfun: u32, counters: &[u64]) -> ProfileModule {
    let functions: Vec<_> = (0..nfun)
        .map(|i| function(&format!("f{i}"), 3 * i))
        .collect();
    let num_counters = 3 * nfun;
    let meta = ModuleMeta {
        source: source.into(),
        producer: "tally fuzz".into(),
        mode: Mode::Edge,
        num_counters,
        files: vec![source.into()],
        functions,
        source_fns: vec![],
        skipped: vec![],
        mode_meta: Default::default(),
        oracle_for: None,
        probe_descs: Vec::new(),
        probes_before_optimization: false,
    };
    let cs = (0..num_counters as usize)
        .map(|i| counters.get(i).copied().unwrap_or(i as u64))
        .collect();
    ProfileModule::new(meta, cs)
}

/// A module of `mode` with one function of [`function`]'s graph and no counters, its facts
/// made from the graph (`facts`).
fn planned(
    source: &str,
    mode: Mode,
    facts: impl FnOnce(&tally_graph::Cfg) -> (FunctionModeMeta, ModuleModeMeta),
) -> ProfileModule {
    let mut f = function("p", 0);
    f.counters.clear();
    let (fm, mm) = facts(&f.cfg().unwrap());
    f.mode_meta = fm;
    let meta = ModuleMeta {
        source: source.into(),
        producer: "tally fuzz".into(),
        mode,
        num_counters: 0,
        files: vec![source.into()],
        functions: vec![f],
        source_fns: vec![],
        skipped: vec![],
        mode_meta: mm,
        oracle_for: None,
        probe_descs: Vec::new(),
        probes_before_optimization: false,
    };
    ProfileModule::new(meta, vec![])
}

/// Trace mode: the witness plan of the graph.
fn trace_module() -> ProfileModule {
    use tally_graph::witness::{witness_plan, FunctionInput};
    planned("t.c", Mode::Trace, |cfg| {
        let input = FunctionInput::without_calls(cfg.clone());
        let plan = witness_plan(&input, &tally_graph::IdVec::filled(cfg.num_edges(), 1.0));
        let w = WtraceMeta {
            calls: vec![vec![]; cfg.num_blocks()],
            witness: (plan.witness.values().iter())
                .map(|w| w.map(|w| (w.value, w.bits)))
                .collect(),
            read_bits: plan.read_bits.values().to_vec(),
            unwind: vec![],
            branch: false,
            paths: None,
            untraced: None,
        };
        (FunctionModeMeta::Trace(w), ModuleModeMeta::None)
    })
}

/// An `ipath` module: the function alone in its set, owning the path table.
fn ipath_module() -> ProfileModule {
    use tally_graph::ipaths::{IpNumbering, Mode as IpMode};
    planned("i.c", Mode::Ipath, |cfg| {
        let set = IpathFunction {
            function: 0,
            from_outside: true,
            calls: vec![],
            cuts: vec![],
            array: None,
        };
        let limit = 1 << 40;
        let num =
            IpNumbering::new_limited(vec![set.to_function(cfg.clone())], IpMode::Context, limit)
                .unwrap();
        let pm = PathMeta {
            cuts: vec![],
            num_paths: num.total(),
            storage: PathStorage::Hash { table: 0 },
            numbering: num.fingerprint(),
        };
        let ip = IpathMeta {
            functions: vec![set],
            limit,
            total: num.total(),
            fingerprint: num.fingerprint(),
            table_owner: 0,
        };
        (FunctionModeMeta::Path(pm), ModuleModeMeta::Ipath(ip))
    })
}

fn valid(counters: &[u64], pid: u64) -> Profile {
    Profile {
        delta: false,
        pid,
        program: Program {
            path: b"/usr/bin/prog".to_vec(),
            build_id: BuildId::Gnu((0..20).collect()),
        },
        modules: vec![
            module("a.c", 2, counters),
            module("bb.cc", 1, counters),
            module("empty.c", 0, counters),
            trace_module(),
            ipath_module(),
        ],
        unfinished: false,
        raced: false,
        signal: None,
        run: None,
    }
}

/// Run records (container version 5) of every shape: any times and status, host names and
/// labels of every length up to their bounds.
fn run() -> impl Strategy<Value = Run> {
    (
        any::<u64>(),
        any::<u64>(),
        prop::option::of(any::<i32>()),
        prop::collection::vec(any::<u8>(), 0..=abi::RUN_HOST_MAX as usize),
        prop::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(start_ns, end_ns, exit_status, host, labels)| Run {
            snapshot: None,
            start_ns,
            end_ns,
            exit_status,
            host,
            labels,
        })
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip { at: usize, xor: u8 },
    Set { at: usize, byte: u8 },
    SetU64 { at: usize, value: u64 },
    Insert { at: usize, bytes: Vec<u8> },
    Remove { at: usize, len: usize },
    Truncate { len: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let special = prop_oneof![
        Just(0u64),
        Just(1u64),
        Just(7u64),
        Just(u64::MAX),
        Just(u64::MAX / 8),
        Just(u64::MAX - 7),
        Just(1u64 << 32),
        any::<u64>(),
    ];
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, xor)| Mutation::Flip { at, xor }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        (any::<usize>(), special).prop_map(|(at, value)| Mutation::SetU64 { at, value }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..24))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Mutation::Remove { at, len }),
        any::<usize>().prop_map(|len| Mutation::Truncate { len }),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len();
    match *m {
        Mutation::Flip { at, xor } if n > 0 => bytes[at % n] ^= xor,
        Mutation::Set { at, byte } if n > 0 => bytes[at % n] = byte,
        Mutation::SetU64 { at, value } if n >= 8 => {
            // Mostly hit the 8-aligned fields of the container.
            let at = (at % (n / 8)) * 8;
            bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        Mutation::Insert { at, bytes: ref ins } => {
            let at = at % (n + 1);
            bytes.splice(at..at, ins.iter().copied());
        }
        Mutation::Remove { at, len } if n > 0 => {
            let at = at % n;
            let end = (at + len).min(n);
            bytes.drain(at..end);
        }
        Mutation::Truncate { len } => bytes.truncate(len % (n + 1)),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn mutated_profiles_never_panic(
        counters in prop::collection::vec(any::<u64>(), 0..8),
        pid in any::<u64>(),
        run in prop::option::of(run()),
        muts in prop::collection::vec(mutation(), 1..5),
    ) {
        let mut bytes = Profile { run, ..valid(&counters, pid) }.write();
        for m in &muts {
            apply(&mut bytes, m);
        }
        match Profile::read(&bytes) {
            Ok(p) => {
                // Whatever was accepted writes back to bytes that read back the same
                // (padding bytes are not kept).
                let again = p.write();
                prop_assert_eq!(again.len(), bytes.len());
                prop_assert_eq!(Profile::read(&again).unwrap(), p);
            }
            Err(e) => {
                let s = e.to_string();
                prop_assert!(!s.is_empty() && !s.contains('\n'));
            }
        }
    }

    /// Container version 3: any change to a counter or to a module's checksum is refused,
    /// naming the module, instead of being reported as a count.
    #[test]
    fn every_changed_counter_byte_is_refused(
        counters in prop::collection::vec(any::<u64>(), 0..8),
        which in any::<prop::sample::Index>(),
        xor in 1u8..,
    ) {
        let p = valid(&counters, 1);
        let mut bytes = p.write();
        // (module index, byte range of its counters and checksum)
        let mut spans = Vec::new();
        let mut at = abi::HEADER_LEN + abi::PROGRAM_HEADER_LEN + (13usize + 20).next_multiple_of(8);
        for (i, m) in p.modules.iter().enumerate() {
            at += abi::MODULE_HEADER_LEN + m.meta_blob.len().next_multiple_of(8);
            let len = 8 * m.counters.len() + abi::CHECKSUM_LEN;
            spans.extend((at..at + len).map(|b| (i, b)));
            at += len;
        }
        let (module, byte) = spans[which.index(spans.len())];
        bytes[byte] ^= xor;
        match Profile::read(&bytes) {
            Err(ProfileError::ChecksumMismatch { index, .. }) => prop_assert_eq!(index, module),
            other => prop_assert!(false, "byte {}: {:?}", byte, other),
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Profile::read(&bytes);
        let mut with_magic = b"TALLYPRF\x01\0\0\0".to_vec();
        with_magic.extend_from_slice(&bytes);
        let _ = Profile::read(&with_magic);
    }

    #[test]
    fn valid_profiles_roundtrip(
        counters in prop::collection::vec(any::<u64>(), 0..8),
        pid in any::<u64>(),
        run in prop::option::of(run()),
    ) {
        let p = Profile { run, ..valid(&counters, pid) };
        let bytes = p.write();
        prop_assert_eq!(Profile::read(&bytes).unwrap(), p);
    }

    #[test]
    fn every_truncation_is_an_error(cut in any::<usize>()) {
        let bytes = valid(&[1, 2, 3], 77).write();
        let cut = cut % bytes.len();
        let truncated = matches!(Profile::read(&bytes[..cut]), Err(ProfileError::Truncated(_)) | Err(ProfileError::Empty));
        prop_assert!(truncated);
    }
}

/// `p` (a run's profile, with a run record without strings) as the runtime writes it under
/// `TALLY_META=shared` (container version 5): each module a `TALLYREF` record with its counters
/// sparse and its metadata in `dir/<hash>.tallymeta`.
fn shared(p: &Profile, dir: &std::path::Path) -> Vec<u8> {
    let inline = p.write();
    // The header, program record and run record are the inline profile's.
    let head = abi::HEADER_LEN
        + abi::PROGRAM_HEADER_LEN
        + (13usize + 20).next_multiple_of(8)
        + abi::RUN_HEADER_LEN;
    let mut b = inline[..head].to_vec();
    assert_eq!(b[8..12], abi::PROFILE_VERSION_RUN.to_le_bytes());
    for m in &p.modules {
        let mut file = abi::META_FILE_MAGIC.to_vec();
        for w in [
            u64::from(abi::META_FILE_VERSION),
            m.hash,
            m.meta_blob.len() as u64,
        ] {
            file.extend_from_slice(&w.to_le_bytes());
        }
        file.extend_from_slice(&m.meta_blob);
        std::fs::write(dir.join(format!("{:016x}.tallymeta", m.hash)), file).unwrap();
        b.extend_from_slice(abi::REF_MAGIC);
        for w in [m.hash, m.meta_blob.len() as u64, m.counters.len() as u64, 0] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        let start = b.len();
        for g in m.counters.chunks(abi::SPARSE_GROUP as usize) {
            let mask = g
                .iter()
                .enumerate()
                .filter(|(_, &c)| c != 0)
                .fold(0u64, |m, (i, _)| m | 1 << i);
            b.extend_from_slice(&mask.to_le_bytes());
            for &c in g.iter().filter(|&&c| c != 0) {
                b.extend_from_slice(&c.to_le_bytes());
            }
        }
        let sum = tally_graph::hash::fnv64(&b[start..]);
        b.extend_from_slice(&sum.to_le_bytes());
    }
    b.extend_from_slice(abi::TRAILER_MAGIC);
    let total = b.len() as u64 + 8;
    b.extend_from_slice(&total.to_le_bytes());
    b
}

/// A profile whose first module has 90 counters (two sparse groups, the second partial).
fn valid_many(counters: &[u64], pid: u64) -> Profile {
    let mut p = valid(counters, pid);
    p.modules.insert(0, module("many.c", 30, counters));
    p.run = Some(Run {
        start_ns: 1,
        end_ns: 2,
        exit_status: Some(0),
        ..Run::default()
    });
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    /// A `TALLY_META=shared` profile reads back, with its metadata files, as the profile.
    #[test]
    fn shared_profiles_roundtrip(
        counters in prop::collection::vec(prop_oneof![Just(0u64), any::<u64>()], 0..90),
        pid in any::<u64>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let p = valid_many(&counters, pid);
        let bytes = shared(&p, dir.path());
        prop_assert_eq!(Profile::read_at(&bytes, Some(dir.path())).unwrap(), p);
    }

    /// Mutated `TALLY_META=shared` profiles never panic: read, or refused in one line.
    #[test]
    fn mutated_shared_profiles_never_panic(
        counters in prop::collection::vec(prop_oneof![Just(0u64), any::<u64>()], 0..90),
        muts in prop::collection::vec(mutation(), 1..5),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = shared(&valid_many(&counters, 5), dir.path());
        for m in &muts {
            apply(&mut bytes, m);
        }
        if let Err(e) = Profile::read_at(&bytes, Some(dir.path())) {
            let s = e.to_string();
            prop_assert!(!s.is_empty() && !s.contains('\n'));
        }
    }
}
