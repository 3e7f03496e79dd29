//! The trace oracle for interprocedural path counts, per thread: a `trace-naive` trace split
//! into one record stream per thread (by the caller, who knows how its program's threads take
//! turns), each stream turned into the reference cutter's execution of every module's set
//! (`tally_graph::ipaths::cutter`: `Enter`, `Edge`, `Call(site)`, `Resume`) and cut by the
//! paper's definitions with the numbering the reader rebuilds from the metadata; the counts of
//! all threads are added. The conversion is the one `ipath_oracle.rs` documents (the trace's
//! activations form the real call stack; activations outside the set are invisible; a set
//! function entered under one of them is a callback inside the innermost set activation's
//! pending unknown call, or a root; entered from a set activation's block, it is attributed to
//! the block's next site that can call it), done here per thread with fresh stacks, because a
//! thread starts with no pending path. Written for `ipath_threads.rs`: programs whose set
//! activations all return (no `exit`/`longjmp` through them) and without tail calls into the
//! set.

use std::collections::{BTreeMap, HashMap};
use tally_format::profile::{PathEntryKind, Profile};
use tally_format::trace::TraceRecord;
use tally_graph::ipaths::{cut_execution, Callee, Event, FnId, IpNumbering, SEdge};
use tally_graph::{EdgeId, EdgeKind, NodeId};

/// A set activation being converted.
struct SetAct {
    act: u64,
    func: FnId,
    block: NodeId,
    /// Sites of `block` already called (and resumed, but for `pending`).
    done: usize,
    /// The site called and not yet resumed, and whether a callee entered it.
    pending: Option<(u32, bool)>,
}

/// One module's set: its numbering and, per thread being converted, its events.
pub struct SetCut {
    pub source: String,
    pub num: IpNumbering,
    /// (trace-naive module hash, function index) -> FnId.
    ids: HashMap<(u64, u32), FnId>,
    events: Vec<Event>,
    stack: Vec<SetAct>,
    /// The ipath profile's counts (table owner's entries).
    pub profile: BTreeMap<u128, u64>,
    /// The cut trace's counts, all threads added.
    pub oracle: BTreeMap<u128, u64>,
    /// Path runs that cross a call or a return.
    pub crossing: u64,
}

impl SetCut {
    fn resume(&mut self) {
        if let Some(a) = self.stack.last_mut() {
            if a.pending.take().is_some() {
                a.done += 1;
                self.events.push(Event::Resume);
            }
        }
    }

    /// Calls and resumes the top activation's sites before `upto`, then calls `upto` if
    /// `call` (left pending).
    fn advance(&mut self, upto: usize, call: bool) {
        self.resume();
        let g = self.num.graph();
        let Some(a) = self.stack.last_mut() else {
            return;
        };
        let sites = g.block_sites(a.func, a.block);
        while a.done < upto {
            self.events.push(Event::Call(sites[a.done]));
            self.events.push(Event::Resume);
            a.done += 1;
        }
        if call {
            self.events.push(Event::Call(sites[upto]));
            a.pending = Some((sites[upto], false));
        }
    }

    fn enter(&mut self, act: u64, f: FnId, caller_is_top: bool) -> Result<(), String> {
        let g = self.num.graph();
        if let Some(a) = self.stack.last() {
            let sites = g.block_sites(a.func, a.block);
            let callee = |s: u32| g.calls(a.func)[s as usize].callee;
            let pending_unknown = a.pending.is_some_and(|(s, _)| callee(s) == Callee::Unknown);
            let unknown_left = (a.done..sites.len()).find(|&i| callee(sites[i]) == Callee::Unknown);
            let site = if caller_is_top {
                let internal = (a.done..sites.len()).find(|&i| {
                    callee(sites[i]) == Callee::Internal(f)
                        && !(i == a.done && a.pending.is_some_and(|(_, entered)| entered))
                });
                internal.or(if pending_unknown { None } else { unknown_left })
            } else if pending_unknown {
                None
            } else {
                unknown_left
            };
            match site {
                None if pending_unknown => {}
                None => {
                    return Err(format!(
                        "{f} entered while {} is at {} with no site that can call it",
                        a.func, a.block
                    ))
                }
                Some(i) => {
                    if !(a.pending.is_some() && i == a.done) {
                        self.advance(i, true);
                    }
                }
            }
            if let Some(p) = self.stack.last_mut().and_then(|a| a.pending.as_mut()) {
                p.1 = true;
            }
        }
        self.events.push(Event::Enter(f));
        self.stack.push(SetAct {
            act,
            func: f,
            block: NodeId::new(0),
            done: 0,
            pending: None,
        });
        Ok(())
    }

    fn edge(&mut self, e: EdgeId) {
        let n = self
            .stack
            .last()
            .map_or(0, |a| self.num.graph().block_sites(a.func, a.block).len());
        self.advance(n, false);
        let g = self.num.graph();
        let a = self.stack.last_mut().expect("an edge of a set activation");
        let edge = g.cfg(a.func).edge(e);
        self.events.push(Event::Edge(e));
        if edge.kind == EdgeKind::Return {
            self.stack.pop();
        } else {
            a.block = edge.dst;
            a.done = 0;
        }
    }

    /// Cuts the events of the thread just converted and adds its paths to `oracle`.
    fn finish_thread(&mut self, what: &str) {
        assert!(
            self.stack.is_empty(),
            "{what} {}: a thread ends inside a set activation",
            self.source
        );
        let events = std::mem::take(&mut self.events);
        let cut = cut_execution(self.num.graph(), self.num.mode(), &events)
            .unwrap_or_else(|e| panic!("{what} {}: {e}", self.source));
        for (n, c) in cut.counts(&self.num).unwrap() {
            *self.oracle.entry(n).or_insert(0) += c;
        }
        self.crossing += cut
            .paths
            .iter()
            .filter(|p| {
                p.iter()
                    .any(|e| matches!(e, SEdge::Call { .. } | SEdge::Return { .. }))
            })
            .count() as u64;
    }
}

/// The path counts of a module's set (its table owner's entries), by number.
fn module_counts(m: &tally_format::profile::ProfileModule) -> BTreeMap<u128, u64> {
    let ip = m.meta.ipath.as_ref().expect("a module with a set");
    let mut counts = BTreeMap::new();
    for e in m.paths.iter().filter(|e| e.function == ip.table_owner) {
        if e.kind == PathEntryKind::Lost {
            assert_eq!(e.count, 0, "{}: lost increments", m.meta.source);
            continue;
        }
        *counts.entry(u128::from(e.path)).or_insert(0u64) += e.count;
    }
    counts
}

/// Every set's path counts in an ipath profile, by module source.
pub fn path_counts(p: &Profile) -> BTreeMap<String, BTreeMap<u128, u64>> {
    p.modules
        .iter()
        .filter(|m| m.meta.ipath.is_some())
        .map(|m| (m.meta.source.clone(), module_counts(m)))
        .collect()
}

/// The sets of the ipath profile, matched with the trace-naive build's functions.
pub fn sets(ipath: &Profile, naive: &Profile) -> Vec<SetCut> {
    let mut out = Vec::new();
    for m in &ipath.modules {
        let Some(ip) = &m.meta.ipath else { continue };
        let mode = match m.meta.mode {
            tally_format::Mode::IpathPiecewise => tally_graph::ipaths::Mode::Piecewise,
            _ => tally_graph::ipaths::Mode::Context,
        };
        let functions = ip
            .functions
            .iter()
            .map(|f| f.to_function(m.meta.functions[f.function as usize].cfg().unwrap()))
            .collect();
        let num = IpNumbering::new_limited(functions, mode, ip.limit).unwrap();
        assert_eq!((num.total(), num.fingerprint()), (ip.total, ip.fingerprint));
        let nm = naive
            .modules
            .iter()
            .find(|n| n.meta.source == m.meta.source)
            .unwrap_or_else(|| panic!("{}: not in the trace-naive build", m.meta.source));
        let mut ids = HashMap::new();
        for (i, f) in ip.functions.iter().enumerate() {
            let fm = &m.meta.functions[f.function as usize];
            let ni = nm
                .meta
                .functions
                .iter()
                .position(|x| x.name == fm.name && x.cfg_hash == fm.cfg_hash)
                .unwrap_or_else(|| panic!("{}: not in the trace-naive build", fm.name));
            ids.insert((nm.hash, ni as u32), FnId::new(i));
        }
        let profile = module_counts(m);
        out.push(SetCut {
            source: m.meta.source.clone(),
            num,
            ids,
            events: Vec::new(),
            stack: Vec::new(),
            profile,
            oracle: BTreeMap::new(),
            crossing: 0,
        });
    }
    out
}

/// Converts and cuts one thread's records (in order, from a fresh stack) into every set's
/// `oracle`.
pub fn cut_thread(what: &str, records: &[TraceRecord], naive: &Profile, sets: &mut [SetCut]) {
    let mut cfgs: HashMap<(u64, u32), tally_graph::Cfg> = HashMap::new();
    for m in &naive.modules {
        for (i, f) in m.meta.functions.iter().enumerate() {
            cfgs.insert((m.hash, i as u32), f.cfg().unwrap());
        }
    }
    let mut set_of: HashMap<(u64, u32), usize> = HashMap::new();
    for (si, s) in sets.iter().enumerate() {
        for k in s.ids.keys() {
            set_of.insert(*k, si);
        }
    }
    // The real stack: activation, function, set index of set activations.
    let mut real: Vec<(u64, (u64, u32), Option<usize>)> = Vec::new();
    for (at, r) in records.iter().enumerate() {
        match *r {
            TraceRecord::Enter {
                act,
                module,
                function,
            } => {
                let si = set_of.get(&(module, function)).copied();
                if let Some(si) = si {
                    let s = &mut sets[si];
                    let caller_is_top = match (real.last(), s.stack.last()) {
                        (Some(&(top, _, _)), Some(a)) => top == a.act,
                        _ => false,
                    };
                    let f = s.ids[&(module, function)];
                    s.enter(act, f, caller_is_top)
                        .unwrap_or_else(|e| panic!("{what} {}: record {at}: {e}", s.source));
                }
                real.push((act, (module, function), si));
            }
            TraceRecord::Edge { act, edge } => {
                assert!(
                    real.iter().any(|r| r.0 == act),
                    "{what}: record {at}: an edge of activation {act}, not active in this thread"
                );
                while real.last().is_some_and(|r| r.0 != act) {
                    let (a, _, si) = real.pop().unwrap();
                    assert!(
                        si.is_none(),
                        "{what}: set activation {a} abandoned (record {at})"
                    );
                }
                let &(_, key, si) = real.last().expect("checked");
                let e = EdgeId::new(edge as usize);
                if let Some(si) = si {
                    let s = &mut sets[si];
                    assert_eq!(
                        s.stack.last().map(|a| a.act),
                        Some(act),
                        "{what} {}: record {at}: an edge of a set activation not innermost",
                        s.source
                    );
                    s.edge(e);
                }
                if cfgs[&key].edge(e).kind == EdgeKind::Return {
                    real.pop();
                }
            }
        }
    }
    assert!(
        real.is_empty(),
        "{what}: the thread's trace ends with {} activations",
        real.len()
    );
    for s in sets.iter_mut() {
        s.finish_thread(what);
    }
}
