//! The mutations: one to three subtle faults in valid metadata (indices out of range, wrong
//! lengths, inconsistent mode facts, bad plans), most followed by recomputing the graph hash.

use super::*;

pub(crate) fn rehash(f: &mut FunctionMeta) {
    if let Ok(cfg) = f.cfg() {
        f.cfg_hash = cfg.shape_hash();
    }
}

pub(crate) fn some_edge(rng: &mut Rng, f: &FunctionMeta) -> EdgeIdx {
    let n = f.edges.len() as u32 + 1;
    EdgeIdx(wild(rng, n))
}

/// One mutation of a function's mode facts (stored fields `p`; the function has `edges` edges,
/// `nb` blocks, `nc` counters and `nblocks` block locations; its module `nfun` functions).
pub(crate) fn mode_parts(
    rng: &mut Rng,
    p: &mut ModeParts,
    edges: u32,
    nb: u32,
    nfun: u32,
    nc: u32,
    nblocks: usize,
) {
    let some_edge = |rng: &mut Rng| EdgeIdx(wild(rng, edges));
    match rng.below(18) + 10 {
        10 => {
            let e = some_edge(rng);
            p.zero_edges.push(e);
        }
        11 => {
            let e = some_edge(rng);
            p.unknown_edges.push(e);
        }
        12 => {
            let e = some_edge(rng);
            match &mut p.paths {
                Some(pm) => pm.cuts.push(e),
                None => p.zero_edges.push(e),
            }
        }
        13 => {
            if let Some(pm) = &mut p.paths {
                pm.cuts.pop();
            }
        }
        14 => {
            if let Some(pm) = &mut p.paths {
                pm.num_paths = match rng.below(3) {
                    0 => u128::MAX,
                    1 => pm.num_paths + 1,
                    _ => pm.num_paths.saturating_sub(1),
                };
            }
        }
        15 => {
            if let Some(pm) = &mut p.paths {
                pm.numbering ^= 1 << rng.below(64);
            }
        }
        16 => {
            if let Some(pm) = &mut p.paths {
                pm.storage = match pm.storage {
                    PathStorage::Array => PathStorage::Hash {
                        table: wild(rng, nfun),
                    },
                    PathStorage::Hash { .. } if rng.percent(50) => PathStorage::Array,
                    PathStorage::Hash { .. } => PathStorage::Hash {
                        table: wild(rng, 2),
                    },
                };
            }
        }
        17 => {
            p.paths = match p.paths.take() {
                Some(_) => None,
                None => Some(PathMeta {
                    cuts: vec![],
                    num_paths: rng.below(5) as u128,
                    storage: PathStorage::Array,
                    numbering: rng.next_u64(),
                }),
            }
        }
        18 => {
            if let Some(e) = &mut p.events {
                let n = rng.below(e.per_block.len() + 2);
                e.per_block.resize(n, 1);
            }
        }
        19 => {
            if let Some(c) = p.events.as_mut().and_then(|e| e.calls.first_mut()) {
                c.block = BlockIdx(wild(rng, nb));
            }
        }
        20 => {
            if let Some(e) = &mut p.events {
                let c = CounterIdx(wild(rng, nc));
                match e.calls.first_mut() {
                    Some(call) if rng.percent(50) => call.counter = c,
                    _ => e.inclusive = c,
                }
            }
        }
        21 => {
            p.events = match p.events.take() {
                Some(_) => None,
                None => Some(EventMeta {
                    per_block: vec![1; nblocks],
                    inclusive: CounterIdx(0),
                    calls: vec![],
                }),
            }
        }
        22 => {
            if let Some(w) = &mut p.wtrace {
                let i = rng.below(w.witness.len().max(1));
                if let Some(x) = w.witness.get_mut(i) {
                    *x = rng.percent(70).then(|| (wild(rng, 4), rng.below(34) as u8));
                }
            }
        }
        23 => {
            if let Some(w) = &mut p.wtrace {
                if rng.percent(50) {
                    w.witness.pop();
                } else {
                    w.witness.push(None);
                }
            }
        }
        24 => {
            if let Some(w) = &mut p.wtrace {
                let i = rng.below(w.read_bits.len() + 1);
                match w.read_bits.get_mut(i) {
                    Some(b) => *b = rng.below(40) as u8,
                    None => w.read_bits.push(1),
                }
            }
        }
        25 => {
            let e = some_edge(rng);
            if let Some(w) = &mut p.wtrace {
                w.unwind.push(e);
            }
        }
        26 => {
            p.wtrace = match p.wtrace.take() {
                Some(mut w) if rng.percent(50) => {
                    w.untraced = w.untraced.xor(Some("fuzz".into()));
                    Some(w)
                }
                Some(_) => None,
                None => Some(WtraceMeta {
                    calls: vec![vec![]; nblocks],
                    witness: vec![None; edges as usize],
                    read_bits: vec![0; nblocks + 1],
                    unwind: vec![],
                    branch: false,
                    paths: None,
                    untraced: None,
                }),
            }
        }
        27 => {
            if let Some(w) = &mut p.wtrace {
                if rng.percent(50) {
                    w.branch = !w.branch;
                } else {
                    w.paths = w.paths.xor(Some(rng.next_u64()));
                }
            }
        }
        _ => unreachable!("18 cases"),
    }
}

/// One subtle mutation of a module's metadata (and sometimes its counters or path entries).
pub(crate) fn mutate(rng: &mut Rng, m: &mut ProfileModule) {
    let meta = &mut m.meta;
    let nf = meta.functions.len();
    if nf == 0 || rng.percent(10) {
        match rng.below(6) {
            0 => meta.num_counters = wild(rng, meta.num_counters),
            1 => {
                // Toggle the event kind; two modes' facts are refused in one line.
                let (kind, ip) = match std::mem::take(&mut meta.mode_meta) {
                    ModuleModeMeta::None => (Some("insns".to_string()), None),
                    ModuleModeMeta::Events { .. } => (None, None),
                    ModuleModeMeta::Ipath(ip) => (Some("insns".to_string()), Some(ip)),
                };
                meta.mode_meta = match ModuleModeMeta::from_parts(kind, ip.clone()) {
                    Ok(mm) => mm,
                    Err(e) => {
                        assert_one_line(&e.to_string());
                        ModuleModeMeta::Ipath(ip.expect("only a set conflicts"))
                    }
                };
            }
            2 => meta.mode = rng.pick(&MODES).expect("modes"),
            3 => meta.files.clear(),
            4 => {
                // The interprocedural set: its numbering, total, owner or a call site.
                if let Some(ip) = meta.ipath_mut() {
                    match rng.below(5) {
                        0 => ip.fingerprint ^= 1 << rng.below(64),
                        1 => ip.total = ip.total.wrapping_add(1),
                        2 => ip.table_owner = wild(rng, nf as u32),
                        3 => {
                            if let Some(c) =
                                ip.functions.iter_mut().flat_map(|f| &mut f.calls).next()
                            {
                                c.callee = c.callee.map_or(Some(wild(rng, nf as u32)), |_| None);
                            }
                        }
                        _ => {
                            if let Some(f) = ip.functions.first_mut() {
                                f.function = wild(rng, nf as u32);
                            }
                        }
                    }
                }
            }
            _ => m.counters.push(7),
        }
        return;
    }
    let fi = rng.below(nf);
    let nfun = nf as u32;
    let f = &mut meta.functions[fi];
    let nb = f.num_blocks;
    if rng.percent(25) {
        mutate_source(rng, &mut f.source, nb, f.edges.len() as u32 + 1);
        return;
    }
    match rng.below(32) {
        0 => {
            let i = rng.below(f.edges.len().max(1));
            if let Some(e) = f.edges.get_mut(i) {
                e.0 = BlockIdx(wild(rng, nb));
            }
        }
        1 => {
            let i = rng.below(f.edges.len().max(1));
            if let Some(e) = f.edges.get_mut(i) {
                e.1 = BlockIdx(wild(rng, nb));
            }
        }
        2 => {
            let i = rng.below(f.edges.len().max(1));
            if let Some(e) = f.edges.get_mut(i) {
                e.2 = rng
                    .pick(&[
                        StoredKind::Flow,
                        StoredKind::Return,
                        StoredKind::EarlyExit,
                        StoredKind::Reentry,
                    ])
                    .expect("kinds");
            }
        }
        3 => {
            let n = rng.below(f.blocks.len() + 2);
            f.blocks.resize(n, Loc::default());
        }
        4 => f.num_blocks = wild(rng, nb),
        5 => f.loc.file = Some(FileIdx(wild(rng, 1))),
        6 => {
            if let Some(l) = f.blocks.get_mut(rng.below(nb as usize)) {
                l.file = Some(FileIdx(wild(rng, 1)));
            }
        }
        7 => f.counter_base = CounterIdx(wild(rng, f.counter_base.0)),
        8 => {
            let at = rng.below(f.counters.len() + 1);
            let p = match rng.below(5) {
                0 => Probe::Edge(some_edge(rng, f)),
                1 => Probe::Block(BlockIdx(wild(rng, nb))),
                2 => Probe::Path(u64::from(wild(rng, 4))),
                3 => Probe::Events,
                _ => match f.counters.first() {
                    Some(&p) => p, // a duplicate
                    None => Probe::Edge(EdgeIdx(0)),
                },
            };
            if at < f.counters.len() && rng.percent(50) {
                f.counters[at] = p;
            } else {
                f.counters.insert(at.min(f.counters.len()), p);
            }
        }
        9 => {
            let n = rng.below(f.counters.len() + 1);
            f.counters.truncate(n);
        }
        10..=27 => {
            // The mode facts, as the optional fields they are stored as: any combination can
            // be written; two modes' at once is refused in one line (and not applied).
            let before = f.mode_meta.clone();
            let mut p = std::mem::take(&mut f.mode_meta).into_parts();
            let nc = f.counters.len() as u32;
            let nblocks = f.blocks.len();
            mode_parts(rng, &mut p, f.edges.len() as u32 + 1, nb, nfun, nc, nblocks);
            f.mode_meta = match FunctionModeMeta::from_parts(p) {
                Ok(mm) => mm,
                Err(e) => {
                    assert_one_line(&e.to_string());
                    before
                }
            };
        }
        28 => f.name = format!("bad\nname{fi}"),
        29 => {
            // A counter value from anywhere: inconsistent counts, overflows.
            let i = rng.below(m.counters.len().max(1));
            if let Some(c) = m.counters.get_mut(i) {
                *c = wild_count(rng);
            }
            return;
        }
        30 => {
            // Path entries naming other paths, other functions, huge counts.
            let function = rng.below(nf + 1) as u32;
            m.paths.push(PathEntry {
                function,
                kind: if rng.percent(80) {
                    PathEntryKind::Count
                } else {
                    PathEntryKind::Lost
                },
                path: wild_count(rng),
                count: wild_count(rng),
            });
            return;
        }
        _ => {
            // Another function's counters, or its name and graph (a linkonce twin).
            let other = meta.functions[rng.below(nf)].clone();
            let f = &mut meta.functions[fi];
            if rng.percent(50) {
                f.counter_base = other.counter_base;
            } else {
                f.name = other.name;
                f.linkage = Linkage::Linkonce;
            }
        }
    }
    if rng.percent(80) {
        rehash(&mut meta.functions[fi]);
    }
}

/// One mutation of a function's source lines.
pub(crate) fn mutate_source(rng: &mut Rng, s: &mut SourceMeta, nb: u32, ne: u32) {
    let ns = s.scopes.len() as u32;
    match rng.below(10) {
        0 => {
            let n = rng.below(s.lines.len() + 2);
            s.lines.resize(n, Vec::new());
        }
        1 => s.scopes.clear(),
        2 => {
            if let Some(sc) = s.scopes.last_mut() {
                sc.parent = ScopeIdx(wild(rng, ns));
            }
        }
        3 => {
            if let Some(sc) = s.scopes.first_mut() {
                sc.func = Some(SourceFnIdx(wild(rng, SOURCE_FNS as u32)));
            }
        }
        4 => {
            if let Some(r) = s.lines.iter_mut().flatten().next() {
                r.scope = ScopeIdx(wild(rng, ns));
            }
        }
        5 => {
            if let Some(r) = s.lines.iter_mut().flatten().next() {
                r.loc.line = if rng.percent(50) { 0 } else { u32::MAX };
            }
        }
        6 => {
            if let Some(r) = s.lines.iter_mut().flatten().next() {
                r.loc.file = Some(FileIdx(wild(rng, 1)));
            }
        }
        7 => {
            if let Some(b) = s.branches.first_mut() {
                match rng.below(3) {
                    0 => b.edges.truncate(1),
                    1 => b.edges.push(EdgeIdx(wild(rng, ne))),
                    _ => b.scope = ScopeIdx(wild(rng, ns)),
                }
            }
        }
        8 => s.branches.push(BranchMeta {
            loc: Loc {
                file: Some(FileIdx(0)),
                line: wild(rng, 10),
            },
            scope: ScopeIdx(0),
            edges: (0..rng.below(4)).map(|_| EdgeIdx(wild(rng, ne))).collect(),
        }),
        _ => {
            // A line run in a block that may not exist.
            let b = wild(rng, nb) as usize;
            if let Some(runs) = s.lines.get_mut(b) {
                runs.push(LineRun {
                    loc: Loc {
                        file: Some(FileIdx(0)),
                        line: wild(rng, 10).max(1),
                    },
                    scope: ScopeIdx(wild(rng, ns)),
                });
            }
        }
    }
}
