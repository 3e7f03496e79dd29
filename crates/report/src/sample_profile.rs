//! LLVM's probe-based sample profile from exact counts (`tally report --export
//! sample-profile`), for clang's `-fprofile-sample-use` (`tally cc --tally-use`).
//!
//! A build with `-fpseudo-probe-for-profiling` records which pseudo-probes every optimized
//! block holds (`tally_format::meta::probes`). Probe `id` of function `F` stands for one block
//! of `F`'s graph before optimization, so its exact count is the sum, over every copy of the
//! probe (unrolled, duplicated or inlined into any function of any module), of the exact count
//! of the block holding the copy. The profile is flat: each function's record holds the counts
//! of all its probes wherever its code ran, as IR instrumentation PGO counts a function before
//! inlining; the head count is the count of probe 1, the entry block's.
//!
//! The text format is the one `llvm/include/llvm/ProfileData/SampleProfReader.h` documents, with
//! probe ids where line offsets would be (`llvm/test/Transforms/SampleProfile/Inputs/
//! pseudo-probe-profile.prof`): `name:total:head`, then ` id: count` per probe and
//! ` !CFGChecksum: n`. Functions whose probes never ran are listed with zero counts, so the
//! loader knows them cold rather than unknown; in the extensible binary format (`tally report
//! --extbinary`, written by `llvm-profdata`) they are named by the profile symbol list instead
//! ([`SampleProfile::symbols`]) and have no record. What cannot be exact is left out and said:
//! a function whose counts the profile does not determine, and a name whose copies disagree
//! on the checksum (two static functions of one name, or one built with different flags).

use crate::Report;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// The copies of one function's probes in one inline instance (an out-of-line copy, or one
/// inlined call): probe id -> summed count.
#[derive(Default)]
struct Instance {
    probes: BTreeMap<u32, u64>,
    /// Some block of the instance holding a probe ran.
    ran: bool,
    /// For an out-of-line copy (the function's own body, scope `s0`): its exact entry count.
    entries: Option<u64>,
    /// Instrumented before optimization (`--tally-pgo`): only the inliner copied the function
    /// (`tally_llvm`'s pre-inlining), and a probe missing from the copy is one of a block the
    /// inliner left out because the call's arguments make it unreachable: it ran 0 times in
    /// this copy.
    whole: bool,
}

/// One function's instances, and its checksum.
struct Owner {
    name: String,
    checksum: u64,
    instances: Vec<Instance>,
}

impl Owner {
    /// The exact counts: a probe's sum is exact when every instance that ran holds a counted
    /// copy of it or is [`Instance::whole`] without one (an optimized instance without one lost
    /// it to optimization, and its executions went uncounted); the others are left for the
    /// loader to infer. Also the number left out.
    fn exact(&self) -> (BTreeMap<u32, u64>, usize) {
        let mut sums: BTreeMap<u32, u64> = BTreeMap::new();
        for i in &self.instances {
            for (&id, &c) in &i.probes {
                let e = sums.entry(id).or_insert(0);
                *e = e.saturating_add(c);
            }
        }
        let before = sums.len();
        sums.retain(|id, _| {
            self.instances
                .iter()
                .all(|i| !i.ran || i.whole || i.probes.contains_key(id))
        });
        let lost = before - sums.len();
        (sums, lost)
    }

    /// The head count (entries): probe 1's exact count (the entry block's) when it has one; else
    /// a lower bound, `false`: the out-of-line copies' exact entry counts plus the probe-1 counts
    /// of the inlined copies that kept the probe.
    fn head(&self, exact: &BTreeMap<u32, u64>) -> (u64, bool) {
        if let Some(&c) = exact.get(&1) {
            return (c, true);
        }
        let bound = self.instances.iter().fold(0u64, |a, i| {
            let c = i.probes.get(&1).copied().or(i.entries).unwrap_or(0);
            a.saturating_add(c)
        });
        (bound, false)
    }
}

/// One function's record.
struct Record {
    name: String,
    total: u64,
    head: u64,
    probes: BTreeMap<u32, u64>,
    checksum: u64,
    ran: bool,
}

/// A sample profile and what was left out of it.
pub struct SampleProfile {
    records: Vec<Record>,
    /// Functions in it.
    pub functions: usize,
    /// Functions in it that ran.
    pub executed: usize,
    /// Probes left out because a copy of them that ran has no exact count: optimization removed
    /// it in a module whose probes were added after optimization (the loader infers their
    /// counts).
    pub lost_probes: usize,
    /// Functions whose head count is a lower bound: an inlined copy that ran lost its entry
    /// probe (the loader's flow inference, `-fsample-profile-use-profi`, sets their entry
    /// counts).
    pub inexact_heads: Vec<String>,
    /// One line per function left out, saying why.
    pub left_out: Vec<String>,
    /// Modules whose probes were added after optimization (a build with
    /// `-fpseudo-probe-for-profiling` but not `--tally-pgo`): their probe sums are exact only
    /// where optimization kept every copy of a probe, and are lower bounds elsewhere.
    pub late_modules: usize,
}

/// The sample profile of a report; `None` when the profile holds no pseudo-probes (the program
/// was not built with `-fpseudo-probe-for-profiling`).
pub fn sample_profile(r: &Report) -> Option<SampleProfile> {
    // GUID -> its instances; GUIDs whose counts cannot be exact, and why.
    let mut owners: HashMap<u64, Owner> = HashMap::new();
    let mut unknown: BTreeMap<u64, (String, String)> = BTreeMap::new();
    let mut any = false;
    for f in &r.functions {
        let probes = &f.source.meta.probes;
        let descs = &f.source.tables.probe_descs;
        // (owner GUID, scope) -> index in the owner's instances, for this function.
        let mut here: HashMap<(u64, u32), usize> = HashMap::new();
        for (b, list) in probes.iter().enumerate() {
            let count = f.blocks.get(b).and_then(|bc| bc.count);
            // Every probe of a block runs as often as the block is entered: a later probe (of
            // a block merged into this one, or of an inlined callee) follows no call that may
            // end the frame, where tally's lowering starts a new block (`META_VERSION` 13).
            for at in list {
                any = true;
                let Some(d) = descs.get(at.desc as usize) else {
                    continue;
                };
                if d.name.is_empty() || d.name.contains(|c: char| c == ':' || c.is_whitespace()) {
                    let why = "no name the text format can hold".to_string();
                    let name = format!("GUID {:#x} {:?}", d.guid, d.name);
                    unknown.entry(d.guid).or_insert_with(|| (name, why));
                    continue;
                }
                let owner = owners.entry(d.guid).or_insert_with(|| Owner {
                    name: d.name.clone(),
                    checksum: d.checksum,
                    instances: Vec::new(),
                });
                if owner.checksum != d.checksum {
                    let why = "its copies have different checksums".to_string();
                    unknown
                        .entry(d.guid)
                        .or_insert_with(|| (owner.name.clone(), why));
                }
                let i = *here.entry((d.guid, at.scope.0)).or_insert_with(|| {
                    let own = at.scope.0 == 0 && f.name == owner.name;
                    owner.instances.push(Instance {
                        entries: own.then_some(f.entry_count),
                        whole: f.source.tables.probes_before_optimization,
                        ..Instance::default()
                    });
                    owner.instances.len() - 1
                });
                let inst = &mut owner.instances[i];
                match count.filter(|_| f.inconsistent.is_none()) {
                    Some(c) => {
                        let e = inst.probes.entry(at.id).or_insert(0);
                        *e = e.saturating_add(c);
                        inst.ran |= c > 0;
                    }
                    None => {
                        let why = format!("the counts of {} are not known", f.name);
                        unknown
                            .entry(d.guid)
                            .or_insert_with(|| (owner.name.clone(), why));
                    }
                }
            }
        }
    }
    if !any {
        return None;
    }
    let late_modules = r
        .functions
        .iter()
        .filter(|f| !f.source.meta.probes.is_empty() && !f.source.tables.probes_before_optimization)
        .map(|f| f.module.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let mut left_out = Vec::new();
    for (guid, (name, why)) in &unknown {
        owners.remove(guid);
        left_out.push(format!("{name}: {why}"));
    }
    let mut sorted: Vec<Owner> = owners.into_values().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut records = Vec::with_capacity(sorted.len());
    let (mut executed, mut lost_probes, mut inexact_heads) = (0, 0, Vec::new());
    for owner in sorted {
        let (probes, lost) = owner.exact();
        lost_probes += lost;
        let total = probes.values().fold(0u64, |a, &c| a.saturating_add(c));
        let (head, exact) = owner.head(&probes);
        let ran = owner.instances.iter().any(|i| i.ran);
        if !exact && ran {
            inexact_heads.push(owner.name.clone());
        }
        executed += usize::from(ran);
        records.push(Record {
            name: owner.name,
            total,
            head,
            probes,
            checksum: owner.checksum,
            ran,
        });
    }
    Some(SampleProfile {
        functions: records.len(),
        records,
        executed,
        lost_probes,
        inexact_heads,
        left_out,
        late_modules,
    })
}

impl SampleProfile {
    /// The profile in LLVM's text format; `never_run`: with the functions that never ran, as
    /// records of zero counts (the text format has no symbol list to name them).
    pub fn text(&self, never_run: bool) -> String {
        let mut text = String::new();
        for r in self.records.iter().filter(|r| never_run || r.ran) {
            let _ = writeln!(text, "{}:{}:{}", r.name, r.total, r.head);
            for (id, c) in &r.probes {
                let _ = writeln!(text, " {id}: {c}");
            }
            let _ = writeln!(text, " !CFGChecksum: {}", r.checksum);
        }
        text
    }

    /// The profile symbol list: every function of the build the profile knows, one name per
    /// line (`llvm-profdata merge --prof-sym-list`), so that the loader takes the ones without
    /// a record as cold, not as new code.
    pub fn symbols(&self) -> String {
        self.records
            .iter()
            .map(|r| format!("{}\n", r.name))
            .collect()
    }
}
