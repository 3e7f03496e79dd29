//! Hashed path counts: the home table and the overflow table.

use super::*;

/// Hashed path counts (path mode) through the home tables and the overflow table, driven the
/// way instrumented code drives them: look the path up in its home slot, bump the count when
/// the key matches, call `__tally_path_count` otherwise. 3000 distinct paths (more than the
/// 1024 home slots, so home slots collide and paths overflow), a few of them hot so that they
/// take home slots from cold occupants, path 0 counted inline in its fresh slot without the
/// runtime, and a second table that never runs. The program prints what it counted; the
/// profile's entries for each path, added up, must say exactly that.
#[test]
fn hashed_path_counts_are_exact_through_home_and_overflow() {
    use tally_format::{BlockIdx as B, CounterIdx, FileIdx, FunctionMeta, Linkage, Loc};
    use tally_format::{PathMeta, PathStorage, StoredKind};
    let env = Env::new();
    let function = |name: &str, table: u32| FunctionMeta {
        name: name.into(),
        linkage: Linkage::External,
        loc: Loc {
            file: Some(FileIdx(0)),
            line: 1,
        },
        num_blocks: 1,
        edges: vec![(B(0), B(1), StoredKind::Return)],
        blocks: vec![Loc {
            file: Some(FileIdx(0)),
            line: 1,
        }],
        cfg_hash: 0,
        counter_base: CounterIdx(0),
        counters: vec![],
        mode_meta: tally_format::FunctionModeMeta::Path(PathMeta {
            cuts: vec![],
            num_paths: 1 << 40,
            storage: PathStorage::Hash { table },
            numbering: 0, // the profile is read, never reported
        }),
        source: Default::default(),
    };
    let f = |name: &str, table: u32| {
        let mut f = function(name, table);
        f.cfg_hash = f.cfg().unwrap().shape_hash();
        f
    };
    let mut m = Module::new("m", "paths.c", 0, 101);
    m.meta.mode = tally_format::Mode::Path;
    m.meta.functions = vec![f("busy", 0), f("idle", 1)];
    m.blob = m.meta.encode();
    m.hash = tally_graph::hash::fnv64(&m.blob);
    let bytes: Vec<String> = m.blob.iter().map(|b| format!("0x{b:02x}")).collect();
    let src = format!(
        r#"{prelude}
static const uint64_t empty_slot[2];
static uint64_t home[2][2 * TALLY_PATH_HOME_SLOTS];
static struct tally_path_table tables[2] = {{
    {{ .slots = (uint64_t *)empty_slot, .function = 0, .home = home[0] }},
    {{ .slots = (uint64_t *)empty_slot, .function = 1, .home = home[1] }},
}};
static const uint8_t m_meta[] = {{ {bytes} }};
struct tally_module m_mod = {{ TALLY_ABI_VERSION, 0, 0x{hash:016x}ULL, m_meta, sizeof m_meta,
    0, 0, tables, 2, 0 }};
__attribute__((constructor(101))) static void m_register(void) {{ __tally_register(&m_mod); }}

static void probe(struct tally_path_table *t, uint64_t p) {{
    uint64_t *slot = &t->home[2 * ((p * TALLY_PATH_HASH_MUL) >> (64 - TALLY_PATH_HOME_BITS))];
    if (slot[0] == p)
        slot[1]++;
    else
        __tally_path_count(t, p);
}}

#define N 3000
static uint64_t expect[N];
static uint64_t path_of(unsigned i) {{ return i ? (uint64_t)i * 0x5851F42D4C957F2Dull >> 24 : 0; }}

int main(void) {{
    uint64_t x = 1;
    for (int round = 0; round < 40; round++) {{
        for (unsigned i = 0; i < N; i++) {{ /* every path a few times */
            if ((i + round) % 7 == 0) {{ probe(&tables[0], path_of(i)); expect[i]++; }}
        }}
        for (int k = 0; k < 5000; k++) {{ /* a hot set, skewed */
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            unsigned i = (unsigned)((x >> 33) % 97) * (unsigned)((x >> 20) % 3 + 1) % N;
            probe(&tables[0], path_of(i));
            expect[i]++;
        }}
    }}
    for (unsigned i = 0; i < N; i++)
        if (expect[i])
            printf("%llu %llu\n", (unsigned long long)path_of(i), (unsigned long long)expect[i]);
    return 0;
}}
"#,
        prelude = prelude(),
        bytes = bytes.join(","),
        hash = m.hash,
    );
    let exe = env.build("prog", &[("prog.c", src)]);
    let out = env.run_ok(&exe, &[], &[], 0);
    let want: std::collections::BTreeMap<u64, u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (p, c) = l.split_once(' ').unwrap();
            (p.parse().unwrap(), c.parse().unwrap())
        })
        .collect();
    assert!(
        want.len() > 2000 && want.contains_key(&0),
        "the test counts paths"
    );
    let p = env.profile("prog.tally");
    assert_eq!(p.modules.len(), 1);
    let mut got = std::collections::BTreeMap::new();
    let mut entries = 0;
    for e in &p.modules[0].paths {
        match e.kind {
            tally_format::profile::PathEntryKind::Count => {
                assert_eq!(e.function, 0, "the idle function counted nothing");
                *got.entry(e.path).or_insert(0u64) += e.count;
                entries += 1;
            }
            tally_format::profile::PathEntryKind::Lost => assert_eq!(e.count, 0, "nothing lost"),
        }
    }
    assert_eq!(got, want, "path counts, home and overflow entries added");
    assert!(
        entries > want.len(),
        "some paths have both a home and an overflow entry (slots changed hands)"
    );
}
