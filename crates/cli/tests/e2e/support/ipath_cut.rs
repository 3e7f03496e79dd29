//! The trace oracle for interprocedural path counts (modes `ipath` and `ipath-piecewise`,
//! Melski & Reps 1998), shared by `ipath_oracle.rs` and (per thread) `ipath_threads.rs`: a
//! `trace-naive` trace (every edge taken, per activation) is turned into the reference
//! cutter's execution model (`tally_graph::ipaths::cutter`: `Enter`, `Edge`, `Call(site)`,
//! `Resume`, `Unwind` of the set's activations), to be cut by the paper's definitions (§3.4
//! context paths, §6 piecewise paths) with the numbering the reader rebuilds from the module's
//! metadata.
//!
//! The conversion: the set is the module's (`IpathMeta`), functions matched between the two
//! builds by name and graph hash (same sources and flags, so the same graphs). The trace's
//! activations form the real call stack. Activations of functions outside the set are
//! invisible to the cutter: a set function they enter is a callback inside the pending unknown
//! call of the innermost set activation, or a new root when no set activation is active. A set
//! function entered while the innermost set activation is itself the caller (the top of the
//! real stack) is attributed to that block's next site that can call it: an `Internal` site
//! calling it if the block has one left, else its unknown site. Before a set activation leaves
//! a block, the block's remaining sites are called and resumed (calls into code the trace does
//! not see).
//!
//! Abandoned activations (Melski & Reps 1998 §9.2): an edge of an activation with activations above
//! it on the real stack (an exception landed, or a `longjmp` whose `Reentry` edge it is) or the end
//! of the trace (`exit`) abandons those above it: each set gets `Unwind(k)`, `k` its
//! activations that remain, after its innermost abandoned activation (or the one a `longjmp`
//! re-enters) is left pending at a call: its pending call, or the next call of its block (the
//! call the trace does not see that ended it), a direct call whose callee returned being over.
//! A `Reentry` edge is the re-entered activation's next event, without calling the block's
//! remaining sites.
//!
//! A set function that tail-calls (`return f(x)`, call marked `tail`) another function is
//! reached by summary edges only (the instrumenter's rule), so a function its tail call enters
//! is a callback inside its caller's pending unknown call, as the conversion sees it. Only
//! single-threaded streams: trace-naive's records of concurrent threads interleave, so
//! `ipath_threads.rs` splits them per thread first and [`cut_thread`] converts each from a
//! fresh stack (a thread starts with no pending path).

// Each test uses part of it.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use tally_format::profile::{PathEntryKind, Profile};
use tally_format::trace::TraceRecord;
use tally_graph::ipaths::supergraph::SiteKind;
use tally_graph::ipaths::{cut_execution, Callee, Event, FnId, IpNumbering, SEdge, Supergraph};
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

/// One module's set: its numbering, the events of its activations and the counts.
pub struct SetRun {
    pub source: String,
    pub num: IpNumbering,
    /// (trace-naive module hash, function index) -> FnId.
    ids: HashMap<(u64, u32), FnId>,
    pub events: Vec<Event>,
    stack: Vec<SetAct>,
    /// The ipath profile's counts (the table owner's entries), by path number.
    pub counts: BTreeMap<u128, u64>,
    /// The cut trace's counts, threads added ([`cut_thread`]).
    pub oracle: BTreeMap<u128, u64>,
    /// Path runs that cross a call or a return ([`cut_thread`]).
    pub crossing: u64,
}

impl SetRun {
    pub fn g(&self) -> &Supergraph {
        self.num.graph()
    }

    /// Resumes the pending call of the top activation, if any.
    fn resume(&mut self) {
        if let Some(a) = self.stack.last_mut() {
            if a.pending.take().is_some() {
                a.done += 1;
                self.events.push(Event::Resume);
            }
        }
    }

    /// Calls and resumes the top activation's sites of its block up to (not including)
    /// position `upto`, then calls site `upto` if `call` (left pending).
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
            let internal_left = (a.done..sites.len()).find(|&i| {
                callee(sites[i]) == Callee::Internal(f)
                    && !(i == a.done && a.pending.is_some_and(|(_, entered)| entered))
            });
            let site = if caller_is_top {
                match internal_left {
                    Some(i) => Some(i),
                    None if pending_unknown => None,
                    None => (a.done..sites.len()).find(|&i| callee(sites[i]) == Callee::Unknown),
                }
            } else if pending_unknown {
                None
            } else {
                (a.done..sites.len()).find(|&i| callee(sites[i]) == Callee::Unknown)
            };
            match site {
                // A callback inside the pending unknown call.
                None if pending_unknown => {}
                None => {
                    return Err(format!(
                        "{f} entered while {} is at {} with no site that can call it",
                        a.func, a.block
                    ))
                }
                Some(i) => {
                    let same = a.pending.is_some() && i == a.done;
                    if !same {
                        self.advance(i, true);
                    }
                }
            }
            let a = self.stack.last_mut().expect("checked");
            if let Some(p) = a.pending.as_mut() {
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

    /// The activations of this set above real-stack position `keep_below` are abandoned (an
    /// exit, a longjmp or an exception: `Unwind`); with `reentry`, the landing activation (the
    /// top that remains) is re-entered by a longjmp. Each abandoned activation, and a
    /// re-entered one, is left pending at a call: the top one at the next call of its block
    /// (its callee is not in the trace) unless its pending call's callee is still above it.
    fn abandon(&mut self, keep: usize, reentry: bool) {
        let g = self.num.graph();
        if self.stack.len() <= keep && !reentry {
            return;
        }
        if let Some(a) = self.stack.last_mut() {
            // A direct callee that returned: its call is over.
            let direct_done = a.pending.is_some_and(|(s, entered)| {
                entered && matches!(g.site_kind(a.func, s), SiteKind::Direct(_))
            });
            if direct_done {
                a.pending = None;
                a.done += 1;
                self.events.push(Event::Resume);
            }
            if a.pending.is_none() {
                let done = a.done;
                self.advance(done, true);
            }
        }
        if self.stack.len() > keep {
            self.events.push(Event::Unwind(keep as u32));
            self.stack.truncate(keep);
        }
    }

    /// The top activation takes its re-entry edge `e` (a longjmp landed in it).
    fn reentry(&mut self, e: EdgeId) {
        let g = self.num.graph();
        let a = self.stack.last_mut().expect("a re-entered set activation");
        a.block = g.cfg(a.func).edge(e).dst;
        a.done = 0;
        a.pending = None;
        self.events.push(Event::Edge(e));
    }

    fn edge(&mut self, e: EdgeId) {
        let n = self
            .stack
            .last()
            .map_or(0, |a| self.g().block_sites(a.func, a.block).len());
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
}

/// The ipath profile's sets, with their numbering and counts.
pub fn sets(ipath: &Profile, naive: &Profile) -> Vec<SetRun> {
    let mut out = Vec::new();
    for m in &ipath.modules {
        let Some(ip) = m.meta.ipath() else { continue };
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
        assert_eq!(num.total(), ip.total);
        assert_eq!(num.fingerprint(), ip.fingerprint);
        let nm = naive
            .modules
            .iter()
            .find(|n| n.meta.source == m.meta.source)
            .unwrap_or_else(|| panic!("{}: not in the trace-naive build", m.meta.source));
        let mut ids = HashMap::new();
        for (i, f) in ip.functions.iter().enumerate() {
            let fm = &m.meta.functions[f.function as usize];
            let (ni, nf) = nm
                .meta
                .functions
                .iter()
                .enumerate()
                .find(|(_, x)| x.name == fm.name)
                .unwrap_or_else(|| panic!("{}: not in the trace-naive build", fm.name));
            assert_eq!(
                nf.cfg_hash, fm.cfg_hash,
                "{}: another graph in the trace-naive build",
                fm.name
            );
            ids.insert((nm.hash, ni as u32), FnId::new(i));
        }
        let counts = module_counts(m);
        out.push(SetRun {
            source: m.meta.source.clone(),
            num,
            ids,
            events: Vec::new(),
            stack: Vec::new(),
            counts,
            oracle: BTreeMap::new(),
            crossing: 0,
        });
    }
    out
}

/// Converts `trace` (one thread's records, in order) into the cutter's executions of each
/// set (module doc), appended to their `events`.
pub fn convert(trace: &[TraceRecord], naive: &Profile, sets: &mut [SetRun]) {
    // Every function's graph, to see where activations outside the sets return.
    let cfgs = tally_report::trace_naive::function_cfgs(naive).unwrap();
    // The real stack: activation id, function and, for set activations, the set's index.
    let mut real: Vec<(u64, (u64, u32), Option<usize>)> = Vec::new();
    let mut set_of: HashMap<(u64, u32), usize> = HashMap::new();
    for (si, s) in sets.iter().enumerate() {
        for k in s.ids.keys() {
            set_of.insert(*k, si);
        }
    }
    let mut act_set: HashMap<u64, usize> = HashMap::new();
    for (at, r) in trace.iter().enumerate() {
        match *r {
            TraceRecord::Enter {
                act,
                module,
                function,
            } => {
                let si = set_of.get(&(module, function)).copied();
                if let Some(si) = si {
                    let s = &mut sets[si];
                    let f = s.ids[&(module, function)];
                    let caller_is_top = match (real.last(), s.stack.last()) {
                        (Some(&(top, _, _)), Some(a)) => top == a.act,
                        _ => false,
                    };
                    s.enter(act, f, caller_is_top)
                        .unwrap_or_else(|e| panic!("{}: record {at}: {e}", s.source));
                    act_set.insert(act, si);
                }
                real.push((act, (module, function), si));
            }
            TraceRecord::Edge { act, edge } => {
                let pos = real.iter().position(|r| r.0 == act).unwrap_or_else(|| {
                    panic!("record {at}: an edge of activation {act}, which is not active")
                });
                let e = EdgeId::new(edge as usize);
                let reentry = cfgs[&real[pos].1].1.edge(e).kind == EdgeKind::Reentry;
                if real.len() > pos + 1 || reentry {
                    // Activations above this one were abandoned (exit, longjmp, exception), and
                    // with a re-entry edge a longjmp landed in it.
                    for (si, s) in sets.iter_mut().enumerate() {
                        let keep = real[..=pos].iter().filter(|r| r.2 == Some(si)).count();
                        s.abandon(keep, reentry && act_set.get(&act) == Some(&si));
                    }
                    for (a, _, _) in real.drain(pos + 1..) {
                        act_set.remove(&a);
                    }
                }
                let Some(&si) = act_set.get(&act) else {
                    // An activation outside the sets ends at its Return edge.
                    let key = real.last().expect("checked").1;
                    if cfgs[&key].1.edge(e).kind == EdgeKind::Return {
                        real.pop();
                    }
                    continue;
                };
                let s = &mut sets[si];
                assert_eq!(
                    s.stack.last().map(|a| a.act),
                    Some(act),
                    "{}: record {at}: an edge of a set activation that is not the innermost",
                    s.source
                );
                if reentry {
                    s.reentry(e);
                    continue;
                }
                let f = s.stack.last().unwrap().func;
                let kind = s.g().cfg(f).edge(e).kind;
                s.edge(e);
                if kind == EdgeKind::Return {
                    real.pop();
                    act_set.remove(&act);
                }
            }
        }
    }
    // The activations left when the trace ends were abandoned by exit.
    for s in sets.iter_mut() {
        s.abandon(0, false);
    }
}

/// The path counts of a module's set (its table owner's entries and the isolated functions'
/// arrays), by number.
fn module_counts(m: &tally_format::profile::ProfileModule) -> BTreeMap<u128, u64> {
    let ip = m.meta.ipath().expect("a module with a set");
    let mut counts = BTreeMap::new();
    for e in m.paths.iter().filter(|e| e.function == ip.table_owner) {
        if e.kind == PathEntryKind::Lost {
            assert_eq!(e.count, 0, "{}: lost increments", m.meta.source);
            continue;
        }
        *counts.entry(u128::from(e.path)).or_insert(0u64) += e.count;
    }
    for (number, count) in ip.array_counts(&m.meta.functions, &m.counters) {
        *counts.entry(number).or_insert(0u64) += count;
    }
    counts
}

/// Every set's path counts in an ipath profile, by module source.
pub fn path_counts(p: &Profile) -> BTreeMap<String, BTreeMap<u128, u64>> {
    p.modules
        .iter()
        .filter(|m| m.meta.ipath().is_some())
        .map(|m| (m.meta.source.clone(), module_counts(m)))
        .collect()
}

/// Converts and cuts one thread's records (in order, from a fresh stack) into every set's
/// `oracle` and `crossing`.
pub fn cut_thread(what: &str, records: &[TraceRecord], naive: &Profile, sets: &mut [SetRun]) {
    for s in sets.iter_mut() {
        s.events.clear();
        s.stack.clear();
    }
    convert(records, naive, sets);
    for s in sets.iter_mut() {
        let cut = cut_execution(s.g(), s.num.mode(), &s.events)
            .unwrap_or_else(|e| panic!("{what} {}: {e}", s.source));
        for (n, c) in cut.counts(&s.num).unwrap() {
            *s.oracle.entry(n).or_insert(0) += c;
        }
        s.crossing += cut.paths.iter().filter(|p| crosses(p)).count() as u64;
    }
}

/// Whether a path crosses a call (a call or return edge of the supergraph).
pub fn crosses(p: &[SEdge]) -> bool {
    p.iter()
        .any(|e| matches!(e, SEdge::Call { .. } | SEdge::Return { .. }))
}

/// Panics naming the first path numbers whose counts differ between the `oracle` and the
/// profile (`got`), if any do.
pub fn assert_same_paths(what: &str, oracle: &BTreeMap<u128, u64>, got: &BTreeMap<u128, u64>) {
    if oracle == got {
        return;
    }
    let keys: std::collections::BTreeSet<u128> = oracle.keys().chain(got.keys()).copied().collect();
    let diff: Vec<_> = keys
        .into_iter()
        .filter(|k| oracle.get(k) != got.get(k))
        .map(|k| (k, oracle.get(&k), got.get(&k)))
        .take(20)
        .collect();
    panic!("{what}: path counts differ (number, oracle, profile): {diff:?}");
}
