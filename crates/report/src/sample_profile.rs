//! LLVM's probe-based sample profile from exact counts (`tally report --export
//! sample-profile`), for clang's `-fprofile-sample-use` (`tally cc --tally-use`).
//!
//! A build with `-fpseudo-probe-for-profiling` records which pseudo-probes every optimized
//! block holds (`tally_format::meta::probes`). Probe `id` of function `F` stands for one block
//! of `F`'s graph before optimization, so its exact count is the sum, over every copy of the
//! probe (unrolled, duplicated or inlined into any function of any module), of the exact count
//! of the block holding the copy. The head count is the count of probe 1, the entry block's.
//!
//! Two shapes. *Flat* (`text(_, false)`, `tally report --flat`): each function's record holds the counts of all its
//! probes wherever its code ran, as IR instrumentation PGO counts a function before inlining.
//! *Nested* (`text(_, true)`, [`Context`]): a function's record holds its out-of-line copy's
//! counts, and each copy of a callee inlined at one of its call sites is a record of its own,
//! indented under the call-site probe (` id: callee:total`), as AutoFDO writes the inline
//! instances of a sampled binary (Chen et al., CGO 2016, §3). A `--tally-pgo` build inlines
//! small callees before it counts (`tally_llvm`'s pre-inlining), so it knows the counts of
//! each inline instance: the loader can inline the same calls and weigh every copy with its
//! own counts (IR PGO's pre-inliner gives its optimized build the same), and merges a nested
//! record it does not inline back into the callee's own, so the nested profile loses nothing.
//! Each nested record says ` !Attributes: 2` (`ContextShouldBeInlined`, as llvm-profgen's
//! CSSPGO pre-inliner marks its decisions): such a profile turns on the loader's
//! `-sample-profile-use-preinliner`, and it inlines every call the training build inlined,
//! whatever its count, where it otherwise inlines only the hot ones and the very small
//! (docs/pgo.md measures both). So the loader applies each record where it stands (its
//! coverage check, `-sample-profile-check-record-coverage`, counts a record merged into its
//! callee as not applied), and the rebuild inlines what the training build inlined, as IR
//! PGO's pre-inliner repeats its decisions in its optimized build.
//! Each scope's call-site probe is `ScopeMeta::call_probe`. Only a profile whose every module
//! counted before optimization is nested: elsewhere optimization copied and dropped probes,
//! and only the flat sums can say which counts are exact.
//!
//! The text format is the one `llvm/include/llvm/ProfileData/SampleProfReader.h` documents, with
//! probe ids where line offsets would be (`llvm/test/Transforms/SampleProfile/Inputs/
//! pseudo-probe-profile.prof`): `name:total:head`, then ` id: count` per probe,
//! ` id: count name:count ...` per call-site probe of an indirect call that called something
//! (a `--tally-pgo` build's counted targets; its direct calls too when asked:
//! [`sample_profile_with`]), and ` !CFGChecksum: n`. Functions whose probes never ran are
//! listed with zero counts, so the loader knows them cold rather than unknown; in the
//! extensible binary format (`tally report --extbinary`, written by `llvm-profdata`) they are
//! named by the profile symbol list instead ([`SampleProfile::symbols`]) and have no record. What cannot be exact is left out and said:
//! a function whose counts the profile does not determine, and a name whose copies disagree
//! on the checksum (two static functions of one name, or one built with different flags).

use crate::Report;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;
use tally_format::{ProbeAt, ProbeDesc, ScopeMeta};

/// LLVM's `ContextShouldBeInlined` (`llvm/include/llvm/ProfileData/SampleProf.h`,
/// `ContextAttributeMask`), on every nested record: the training build inlined this call, so the
/// loader inlines it again (module doc).
const SHOULD_BE_INLINED: u32 = 2;

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

/// The exact count of a call (its call-site probe) and of each of its targets that it called
/// (`--tally-pgo`: an indirect call's `tally_format::CallTargets`, or a direct call's one
/// callee, `tally_format::DirectCall`), summed over the call's copies.
#[derive(Default)]
struct CallLine {
    count: u64,
    targets: BTreeMap<String, u64>,
}

impl CallLine {
    fn add(&mut self, count: u64, targets: &[(&str, u64)]) {
        self.count = self.count.saturating_add(count);
        for &(name, c) in targets {
            // A name is allocated once per call line, not once per copy of the call.
            match self.targets.get_mut(name) {
                Some(e) => *e = e.saturating_add(c),
                None => {
                    self.targets.insert(name.to_string(), c);
                }
            }
        }
    }

    /// ` id: count name:count ...`, the targets by descending count (as LLVM writes them).
    fn write(&self, text: &mut String, pad: &str, id: u32) {
        let mut t: Vec<(&String, &u64)> = self.targets.iter().filter(|t| *t.1 > 0).collect();
        t.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let _ = write!(text, "{pad}{id}: {}", self.count);
        for (name, c) in t {
            let _ = write!(text, " {name}:{c}");
        }
        text.push('\n');
    }

    fn called(&self) -> bool {
        self.targets.values().any(|&c| c > 0)
    }
}

/// One function's instances, and its checksum.
struct Owner {
    name: String,
    checksum: u64,
    instances: Vec<Instance>,
    /// Its calls that called a target, by call-site probe id.
    calls: BTreeMap<u32, CallLine>,
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

/// One function's counts in one calling context: its out-of-line copies (a top-level record),
/// or its copies inlined at one call site of its caller's context (a nested record).
#[derive(Default)]
struct Context {
    /// Probe id -> count.
    probes: BTreeMap<u32, u64>,
    /// The callees inlined here: (call-site probe id, callee GUID) -> their counts there.
    calls: BTreeMap<(u32, u64), Context>,
    /// Its calls that called a target, by call-site probe id.
    targets: BTreeMap<u32, CallLine>,
}

impl Context {
    /// The context a path of (call-site probe, callee GUID) steps leads to, made on first use.
    fn at(&mut self, path: &[(u32, u64)]) -> &mut Context {
        path.iter()
            .fold(self, |c, &step| c.calls.entry(step).or_default())
    }

    /// Drops the nested records of `guids` (wherever they are).
    fn drop_calls(&mut self, guids: &BTreeMap<u64, (String, String)>) {
        self.calls.retain(|(_, g), _| !guids.contains_key(g));
        for c in self.calls.values_mut() {
            c.drop_calls(guids);
        }
    }

    /// Its count with those of the callees inlined in it, as LLVM's `FunctionSamples` totals
    /// them.
    fn total(&self) -> u64 {
        let own = self.probes.values().fold(0u64, |a, &c| a.saturating_add(c));
        self.calls
            .values()
            .fold(own, |a, c| a.saturating_add(c.total()))
    }

    /// Writes the probes and nested records at `depth` (the record's own line is written by
    /// the caller).
    fn write(
        &self,
        text: &mut String,
        depth: usize,
        checksum: u64,
        names: &HashMap<u64, (String, u64)>,
    ) {
        let pad = " ".repeat(depth);
        for (id, c) in &self.probes {
            let _ = writeln!(text, "{pad}{id}: {c}");
        }
        for (&id, line) in self.targets.iter().filter(|(_, l)| l.called()) {
            line.write(text, &pad, id);
        }
        for (&(probe, guid), callee) in &self.calls {
            let total = callee.total();
            let Some((name, sum)) = names.get(&guid).filter(|_| total > 0) else {
                continue;
            };
            let _ = writeln!(text, "{pad}{probe}: {name}:{total}");
            callee.write(text, depth + 1, *sum, names);
        }
        let _ = writeln!(text, "{pad}!CFGChecksum: {checksum}");
        if depth > 1 {
            let _ = writeln!(text, "{pad}!Attributes: {SHOULD_BE_INLINED}");
        }
    }
}

/// The call an inlined copy's entry probe counts: (caller's GUID, call-site probe id), when
/// `at` is probe 1 in an inline scope whose call has a probe id and whose caller is known.
fn inlined_call(scopes: &[ScopeMeta], guids: &[Option<u64>], at: &ProbeAt) -> Option<(u64, u32)> {
    let s = scopes
        .get(at.scope.0 as usize)
        .filter(|_| at.id == 1 && at.scope.0 != 0)?;
    let caller = (*guids.get(s.parent.0 as usize)?)?;
    (s.call_probe != 0).then_some((caller, s.call_probe))
}

/// Where the copy of a probe of function `guid` in inline scope `s` goes in a nested profile:
/// the root record's GUID and the (call-site probe, callee GUID) steps from it down to the copy.
/// The chain of scopes is followed outwards as far as each step can be named: a scope whose
/// call has no probe id (SimplifyCFG merged two calls' locations), or a callee without debug
/// info (its probes have no location, or the call's), ends it there, and the copy is counted as
/// if that scope's function had run out of line: the flat profile's sum, for that context.
/// So does a scope the rebuild's loader will not inline ([`ScopeMeta::top_level`]): the loader
/// would merge its record into its function's own. `guids[s]`: the GUID of scope `s`'s
/// function, from the probes in it. Also whether the chain was followed as far as it is meant
/// to go: to the function's own body or to such a scope.
fn place(
    scopes: &[ScopeMeta],
    guids: &[Option<u64>],
    s: usize,
    guid: u64,
) -> (u64, Vec<(u32, u64)>, bool) {
    let mut path = Vec::new();
    let (mut cur, mut cur_guid) = (s, guid);
    let mut apart = false;
    if guids.get(s).copied().flatten() == Some(guid) {
        while cur != 0 {
            let Some(scope) = scopes.get(cur) else { break };
            if scope.top_level {
                apart = true;
                break;
            }
            let parent = scope.parent.0 as usize;
            let Some(parent_guid) = guids.get(parent).copied().flatten() else {
                break;
            };
            if scope.call_probe == 0 || parent >= cur {
                break;
            }
            path.push((scope.call_probe, cur_guid));
            (cur, cur_guid) = (parent, parent_guid);
        }
    }
    path.reverse();
    let whole = apart || (cur == 0 && guids.first().copied().flatten() == Some(cur_guid));
    (cur_guid, path, whole)
}

/// One function's record.
struct Record {
    name: String,
    total: u64,
    head: u64,
    probes: BTreeMap<u32, u64>,
    calls: BTreeMap<u32, CallLine>,
    checksum: u64,
    ran: bool,
    /// Its nested record (a nested profile only): its out-of-line counts and inline instances.
    nested: Option<Context>,
}

/// A sample profile and what was left out of it.
pub struct SampleProfile {
    records: Vec<Record>,
    /// GUID -> name and checksum, for the nested records.
    names: HashMap<u64, (String, u64)>,
    /// Every module counted before optimization: the nested shape is available ([`SampleProfile::text`]).
    pub nested: bool,
    /// Copies of probes in an inline instance that ran and whose call site cannot be named
    /// (`place`): the nested shape counts them in their function's own record.
    pub unplaced: usize,
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
    sample_profile_with(r, false)
}

/// [`sample_profile`], with the lines of direct calls when `direct_calls` (`tally report
/// --export sample-profile --direct-calls`): ` id: count callee:count` at each call-site probe
/// of a call a `--tally-pgo` build's pre-inlining left (`tally_format::DirectCall`), and, in the
/// flat records, of each call it inlined (the inlined copy's entry count, as `llvm-profdata`
/// flattens a nested profile). Left out by default: the rebuild measured no better with them,
/// and the loader then merges some nested records it does not inline otherwise (docs/pgo.md,
/// "Direct calls").
pub fn sample_profile_with(r: &Report, direct_calls: bool) -> Option<SampleProfile> {
    // GUID -> its instances; GUIDs whose counts cannot be exact, and why.
    let mut owners: HashMap<u64, Owner> = HashMap::new();
    let mut unknown: BTreeMap<u64, (String, String)> = BTreeMap::new();
    // Root GUID -> its nested record; `None` once a module counted after optimization.
    let mut nested: Option<HashMap<u64, Context>> = Some(HashMap::new());
    let mut unplaced = 0;
    let mut any = false;
    // Per module (its shared descriptor table): function name -> its own GUID, built once.
    let mut own_guids: HashMap<*const Vec<ProbeDesc>, HashMap<&str, u64>> = HashMap::new();
    for f in &r.functions {
        let probes = &f.source.meta.probes;
        let descs = &f.source.tables.probe_descs;
        // The GUID of each inline scope's function: that of the probes in it; `s0`'s is the
        // function's own (a callee without debug info leaves probes there too).
        let scopes = &f.source.meta.scopes;
        let mut scope_guids: Vec<Option<u64>> = vec![None; scopes.len().max(1)];
        scope_guids[0] = own_guids
            .entry(Arc::as_ptr(descs))
            .or_insert_with(|| {
                let mut m = HashMap::new();
                for d in descs.iter() {
                    m.entry(d.name.as_str()).or_insert(d.guid); // the first, as a scan finds
                }
                m
            })
            .get(f.name.as_str())
            .copied();
        for at in probes.iter().flatten() {
            let (Some(d), Some(g)) = (
                descs.get(at.desc as usize),
                scope_guids.get_mut(at.scope.0 as usize),
            ) else {
                continue;
            };
            g.get_or_insert(d.guid);
        }
        if !f.source.tables.probes_before_optimization && !probes.is_empty() {
            nested = None;
        }
        // (owner GUID, scope) -> index in the owner's instances, for this function.
        let mut here: HashMap<(u64, u32), usize> = HashMap::new();
        // The calls the training build inlined: ((caller GUID, call-site probe), callee, count).
        let mut inlined: Vec<((u64, u32), String, u64)> = Vec::new();
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
                    calls: BTreeMap::new(),
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
                        // The entry probe of an inlined copy counts the calls it replaced
                        // (exactly in a module counted before optimization).
                        let whole = f.source.tables.probes_before_optimization;
                        if let Some(call) =
                            inlined_call(scopes, &scope_guids, at).filter(|_| direct_calls && whole)
                        {
                            inlined.push((call, d.name.clone(), c));
                        }
                        if let Some(roots) = nested.as_mut() {
                            let s = at.scope.0 as usize;
                            let (root, path, whole) = place(scopes, &scope_guids, s, d.guid);
                            unplaced += usize::from(!whole && c > 0);
                            let e = roots.entry(root).or_default().at(&path);
                            let e = e.probes.entry(at.id).or_insert(0);
                            *e = e.saturating_add(c);
                        }
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
        // In the flat records, a call the training build inlined is a call like the others
        // (as `llvm-profdata` flattens a nested profile); the nested ones write the copy.
        for ((caller, probe), callee, c) in inlined {
            if let Some(owner) = owners.get_mut(&caller) {
                owner
                    .calls
                    .entry(probe)
                    .or_default()
                    .add(c, &[(&callee, c)]);
            }
        }
        // Its calls' lines, under the call-site probe of the function whose scope holds the
        // call: an indirect call's counted targets, and a direct call's callee when asked (every
        // entry of the call's block calls it once).
        let indirect = f.source.meta.call_targets.iter().zip(&f.call_targets);
        let indirect = indirect.map(|(t, c)| (t.block, t.scope, t.probe, &t.targets[..], Some(c)));
        let direct = f.source.meta.direct_calls.iter().filter(|_| direct_calls);
        let direct = direct.map(|d| {
            (
                d.block,
                d.scope,
                d.probe,
                std::slice::from_ref(&d.callee),
                None,
            )
        });
        for (block, scope, probe, names, counts) in indirect.chain(direct) {
            let count = f.blocks.get(block as usize).and_then(|b| b.count);
            let (Some(count), Some(Some(guid))) = (
                count.filter(|_| f.inconsistent.is_none()),
                scope_guids.get(scope.0 as usize).copied(),
            ) else {
                continue;
            };
            let targets: Vec<(&str, u64)> = match counts {
                Some(c) => names
                    .iter()
                    .map(String::as_str)
                    .zip(c.iter().copied())
                    .collect(),
                None => names.iter().map(|n| (n.as_str(), count)).collect(),
            };
            if let Some(owner) = owners.get_mut(&guid) {
                owner.calls.entry(probe).or_default().add(count, &targets);
            }
            if let Some(roots) = nested.as_mut() {
                let (root, path, _) = place(scopes, &scope_guids, scope.0 as usize, guid);
                let c = roots.entry(root).or_default().at(&path);
                c.targets.entry(probe).or_default().add(count, &targets);
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
    if let Some(roots) = nested.as_mut() {
        for c in roots.values_mut() {
            c.drop_calls(&unknown);
        }
    }
    let names: HashMap<u64, (String, u64)> = owners
        .iter()
        .map(|(&g, o)| (g, (o.name.clone(), o.checksum)))
        .collect();
    let is_nested = nested.is_some();
    let mut sorted: Vec<(u64, Owner)> = owners.into_iter().collect();
    sorted.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    let mut records = Vec::with_capacity(sorted.len());
    let (mut executed, mut lost_probes, mut inexact_heads) = (0, 0, Vec::new());
    for (guid, owner) in sorted {
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
            calls: owner.calls,
            checksum: owner.checksum,
            ran,
            nested: nested
                .as_mut()
                .map(|roots| roots.remove(&guid).unwrap_or_default()),
        });
    }
    Some(SampleProfile {
        functions: records.len(),
        records,
        names,
        nested: is_nested,
        unplaced,
        executed,
        lost_probes,
        inexact_heads,
        left_out,
        late_modules,
    })
}

impl SampleProfile {
    /// The profile in LLVM's text format; `never_run`: with the functions that never ran, as
    /// records of zero counts (the text format has no symbol list to name them); `nested`: with
    /// the inline instances as nested records (module doc) when [`SampleProfile::nested`],
    /// flat otherwise.
    pub fn text(&self, never_run: bool, nested: bool) -> String {
        let mut text = String::new();
        for r in self.records.iter().filter(|r| never_run || r.ran) {
            if let Some(c) = r.nested.as_ref().filter(|_| nested) {
                let head = c.probes.get(&1).copied().unwrap_or(0);
                let _ = writeln!(text, "{}:{}:{}", r.name, c.total(), head);
                c.write(&mut text, 1, r.checksum, &self.names);
                continue;
            }
            let _ = writeln!(text, "{}:{}:{}", r.name, r.total, r.head);
            for (id, c) in &r.probes {
                let _ = writeln!(text, " {id}: {c}");
            }
            for (&id, line) in r.calls.iter().filter(|(_, l)| l.called()) {
                line.write(&mut text, " ", id);
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

#[cfg(test)]
mod tests {
    use super::*;
    use tally_format::{Loc, ScopeIdx};

    /// A scope inlined at call-site probe `call_probe` of scope `parent`.
    fn scope(parent: u32, call_probe: u32) -> ScopeMeta {
        ScopeMeta {
            func: None,
            parent: ScopeIdx(parent),
            call: Loc::default(),
            call_probe,
            top_level: false,
        }
    }

    /// `s0` (GUID 10) <- s1 (GUID 20, at probe 3) <- s2 (GUID 30, at probe 7 of s1), and s3
    /// (GUID 40) inlined at a call without a probe id, s4 (GUID 50, at probe 2 of s3).
    fn scopes() -> (Vec<ScopeMeta>, Vec<Option<u64>>) {
        let s = vec![
            scope(0, 0),
            scope(0, 3),
            scope(1, 7),
            scope(0, 0),
            scope(3, 2),
        ];
        let g = vec![Some(10), Some(20), Some(30), Some(40), Some(50)];
        (s, g)
    }

    #[test]
    fn a_copy_is_placed_under_its_chain_of_call_sites() {
        let (s, g) = scopes();
        assert_eq!(place(&s, &g, 0, 10), (10, vec![], true));
        assert_eq!(place(&s, &g, 1, 20), (10, vec![(3, 20)], true));
        assert_eq!(place(&s, &g, 2, 30), (10, vec![(3, 20), (7, 30)], true));
    }

    #[test]
    fn a_chain_ends_at_a_call_site_that_cannot_be_named() {
        let (s, g) = scopes();
        // s3's call has no probe id: its copy counts as its function's own.
        assert_eq!(place(&s, &g, 3, 40), (40, vec![], false));
        // s4 stays nested under s3's function, whose copy is then taken as out of line.
        assert_eq!(place(&s, &g, 4, 50), (40, vec![(2, 50)], false));
        // A probe of another function than its scope's (a callee without debug info left it
        // without a location): its function's own record.
        assert_eq!(place(&s, &g, 0, 99), (99, vec![], false));
        assert_eq!(place(&s, &g, 2, 99), (99, vec![], false));
        // A scope whose function is unknown ends the chain below it.
        let mut g = g;
        g[1] = None;
        assert_eq!(place(&s, &g, 2, 30), (30, vec![], false));
    }

    #[test]
    fn an_instance_the_loader_will_not_inline_roots_its_own_record() {
        let (mut s, g) = scopes();
        s[1].top_level = true;
        // s1's copy goes to its function's own record, and s2 under it there.
        assert_eq!(place(&s, &g, 1, 20), (20, vec![], true));
        assert_eq!(place(&s, &g, 2, 30), (20, vec![(7, 30)], true));
        assert_eq!(place(&s, &g, 0, 10), (10, vec![], true));
        // Below it, a scope the loader will not inline into s1's function.
        let (mut s, g) = scopes();
        s[2].top_level = true;
        assert_eq!(place(&s, &g, 2, 30), (30, vec![], true));
        assert_eq!(place(&s, &g, 1, 20), (10, vec![(3, 20)], true));
    }

    #[test]
    fn totals_include_the_inlined_callees() {
        let mut root = Context::default();
        root.probes.insert(1, 5);
        root.at(&[(3, 20)]).probes.insert(1, 4);
        root.at(&[(3, 20), (7, 30)]).probes.insert(2, 2);
        root.at(&[(4, 20)]).probes.insert(1, 1);
        assert_eq!(root.total(), 12);
        assert_eq!(root.calls.len(), 2);
        let names: HashMap<u64, (String, u64)> = [(20, ("g".into(), 2)), (30, ("h".into(), 3))]
            .into_iter()
            .collect();
        let mut text = String::new();
        root.write(&mut text, 1, 1, &names);
        assert_eq!(
            text,
            " 1: 5\n 3: g:6\n  1: 4\n  7: h:2\n   2: 2\n   !CFGChecksum: 3\n   !Attributes: 2\n  \
             !CFGChecksum: 2\n  !Attributes: 2\n 4: g:1\n  1: 1\n  !CFGChecksum: 2\n  \
             !Attributes: 2\n !CFGChecksum: 1\n"
        );
        // A callee whose records are dropped (its counts cannot be exact) goes everywhere.
        let unknown: BTreeMap<u64, (String, String)> =
            [(30, (String::new(), String::new()))].into_iter().collect();
        root.drop_calls(&unknown);
        assert_eq!(root.total(), 10);
    }
}
