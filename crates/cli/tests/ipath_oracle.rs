//! Interprocedural path counts (modes `ipath` and `ipath-piecewise`, paper 004) against the
//! trace oracle (issue 18, second target): the same program built in `trace-naive` mode
//! (every edge taken, per activation) and in an ipath mode, run on the same input. For every
//! module with an interprocedural set, the trace is turned into the reference cutter's
//! execution model (`tally_graph::ipaths::cutter`: `Enter`, `Edge`, `Call(site)`, `Resume` of
//! the set's activations) and cut by the paper's definitions (§3.4 context paths, §6
//! piecewise paths) with the numbering the reader rebuilds from the module's metadata; the
//! path counts must equal the ipath profile's, number for number.
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
//! Abandoned activations (paper 004 §9.2): an edge of an activation with activations above it
//! on the real stack (an exception landed, or a `longjmp` whose `Reentry` edge it is) or the end
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
//! single-threaded programs (trace-naive's records of concurrent threads interleave).

mod support;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use support::*;
use tally_format::profile::{PathEntryKind, Profile};
use tally_format::trace::TraceRecord;
use tally_graph::ipaths::supergraph::SiteKind;
use tally_graph::ipaths::{cut_execution, Callee, Event, FnId, IpNumbering, SEdge, Supergraph};
use tally_graph::paths::DagEdgeKind;
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

/// One module's set: its numbering and the events of its activations.
struct SetRun {
    source: String,
    num: IpNumbering,
    /// (trace-naive module hash, function index) -> FnId.
    ids: HashMap<(u64, u32), FnId>,
    events: Vec<Event>,
    stack: Vec<SetAct>,
    /// Table owner and its counts in the ipath profile.
    counts: BTreeMap<u128, u64>,
}

impl SetRun {
    fn g(&self) -> &Supergraph {
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
fn sets(ipath: &Profile, naive: &Profile) -> Vec<SetRun> {
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
        let mut counts = BTreeMap::new();
        for e in m.paths.iter().filter(|e| e.function == ip.table_owner) {
            if e.kind == PathEntryKind::Lost {
                assert_eq!(e.count, 0, "{}: lost increments", m.meta.source);
                continue;
            }
            *counts.entry(u128::from(e.path)).or_insert(0u64) += e.count;
        }
        out.push(SetRun {
            source: m.meta.source.clone(),
            num,
            ids,
            events: Vec::new(),
            stack: Vec::new(),
            counts,
        });
    }
    out
}

/// Converts `trace` into the cutter's executions of each set (module doc).
fn convert(trace: &[TraceRecord], naive: &Profile, sets: &mut [SetRun]) {
    // Every function's graph, to see where activations outside the sets return.
    let mut cfgs: HashMap<(u64, u32), tally_graph::Cfg> = HashMap::new();
    for m in &naive.modules {
        for (i, f) in m.meta.functions.iter().enumerate() {
            cfgs.insert((m.hash, i as u32), f.cfg().unwrap());
        }
    }
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
                let reentry = cfgs[&real[pos].1].edge(e).kind == EdgeKind::Reentry;
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
                    if cfgs[&key].edge(e).kind == EdgeKind::Return {
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

/// What [`check`] compared.
struct Compared {
    /// Modules with a set.
    sets: usize,
    /// Path runs (equal in both).
    runs: u64,
    /// Of those, runs of paths that cross a call or a return.
    crossing: u64,
    /// Runs of paths that end where a frame was abandoned (§9.2: `c -> GExit_P` at a direct
    /// call, or a block's early-exit edge), and of those the ones that cross a call.
    abandoned: u64,
    abandoned_crossing: u64,
    /// Runs of paths that start at a re-entry (`longjmp` came back).
    reentered: u64,
}

/// Builds `args` in trace-naive and `mode`, runs both with `run_args`, converts and cuts the
/// trace per set and compares with the profile.
fn check(
    name: &str,
    args: &[String],
    run_args: &[&str],
    status: i32,
    mode: &'static str,
) -> Compared {
    let dir = scratch(&format!("ipath-oracle-{name}-{mode}"));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let cxx = a.iter().any(|x| x.ends_with(".cpp"));
    let mut outs = Vec::new();
    for m in ["trace-naive", mode] {
        let vdir = dir.join(m);
        std::fs::create_dir_all(&vdir).unwrap();
        build(Variant::Tally(m), cxx, &a, &vdir.join("prog"), &dir);
        let out = std::process::Command::new("./prog")
            .args(run_args)
            .current_dir(&vdir)
            .env("TALLY_PROFILE", vdir.join("prog.tally"))
            .env("TALLY_TRACE", vdir.join("prog.trace"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(status), "{name} {m}");
        outs.push(out.stdout);
    }
    assert_eq!(outs[0], outs[1], "{name}: outputs differ");
    let naive = Profile::read_file(dir.join("trace-naive/prog.tally")).unwrap();
    let ipath = Profile::read_file(dir.join(mode).join("prog.tally")).unwrap();
    let trace = tally_format::trace::read_trace(
        &std::fs::read(dir.join("trace-naive/prog.trace")).unwrap(),
    )
    .unwrap();
    let mut sets = sets(&ipath, &naive);
    convert(&trace, &naive, &mut sets);
    let (mut runs, mut crossing) = (0, 0);
    let (mut abandoned, mut abandoned_crossing, mut reentered) = (0, 0, 0);
    for s in &sets {
        let cut = cut_execution(s.g(), s.num.mode(), &s.events)
            .unwrap_or_else(|e| panic!("{name} {mode} {}: {e}", s.source));
        let oracle = cut.counts(&s.num).unwrap();
        if oracle != s.counts {
            let keys: std::collections::BTreeSet<u128> =
                oracle.keys().chain(s.counts.keys()).copied().collect();
            let diff: Vec<(u128, Option<u64>, Option<u64>)> = keys
                .into_iter()
                .filter(|k| oracle.get(k) != s.counts.get(k))
                .map(|k| (k, oracle.get(&k).copied(), s.counts.get(&k).copied()))
                .take(20)
                .collect();
            panic!(
                "{name} {mode} {}: path counts differ (number, oracle, profile): {diff:?}",
                s.source
            );
        }
        runs += oracle.values().sum::<u64>();
        // Path runs that cross a call (a call or return edge of the supergraph).
        let crosses = |p: &Vec<SEdge>| {
            p.iter()
                .any(|e| matches!(e, SEdge::Call { .. } | SEdge::Return { .. }))
        };
        crossing += cut.paths.iter().filter(|p| crosses(p)).count() as u64;
        let g = s.g();
        let kind = |e: &SEdge| match *e {
            SEdge::Intra { func, dag } => Some(g.dag(func).edge(dag).kind),
            _ => None,
        };
        for p in &cut.paths {
            let last = p.len().checked_sub(2).map(|i| &p[i]);
            let ends_abandoned = matches!(last, Some(SEdge::Abandon { .. }))
                || matches!(last.and_then(kind), Some(DagEdgeKind::EarlyExit(_)));
            if ends_abandoned {
                abandoned += 1;
                abandoned_crossing += u64::from(crosses(p));
            }
            reentered += u64::from(
                p.iter()
                    .any(|e| matches!(kind(e), Some(DagEdgeKind::ReentryStart(_)))),
            );
        }
    }
    Compared {
        sets: sets.len(),
        runs,
        crossing,
        abandoned,
        abandoned_crossing,
        reentered,
    }
}

fn single(file: &Path, opt: &str) -> Vec<String> {
    vec![opt.into(), "-g".into(), file.display().to_string()]
}

/// calls.c (direct calls, recursion, mutual recursion, calls through pointers, a qsort
/// callback, an `exit`ing function), the early-exit C programs and the shapes, at -O0 and -O2.
#[test]
fn ipath_counts_equal_the_cut_trace_on_test_programs() {
    let mut programs: Vec<(PathBuf, i32)> = vec![(repo().join("testdata/ipath/calls.c"), 0)];
    for l in std::fs::read_to_string(repo().join("testdata/early/EXPECTED"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        let mut it = l.split_whitespace();
        let f = it.next().unwrap();
        if f.ends_with(".c") {
            programs.push((
                repo().join("testdata/early").join(f),
                it.next().unwrap().parse().unwrap(),
            ));
        }
    }
    for f in ["shapes.c", "manypaths.c"] {
        programs.push((repo().join("testdata/shapes").join(f), 0));
    }
    let (mut runs, mut crossing) = (0, 0);
    for (file, status) in &programs {
        for opt in ["-O0", "-O2"] {
            for mode in ["ipath", "ipath-piecewise"] {
                let name = format!("{}{opt}", file.file_name().unwrap().to_str().unwrap());
                let c = check(&name, &single(file, opt), &[], *status, mode);
                eprintln!(
                    "{name} {mode}: {} sets, {} path runs equal, {} of them across calls",
                    c.sets, c.runs, c.crossing
                );
                if name.starts_with("calls.c") {
                    assert!(
                        c.crossing >= 20,
                        "{name} {mode}: too few paths across calls"
                    );
                }
                runs += c.runs;
                crossing += c.crossing;
            }
        }
    }
    assert!(runs > 100_000 && crossing > 1000, "too little compared");
}

/// Paths cut short (paper 004 §9.2), both modes, -O0 and -O2: early.c (`exit` deep in a chain
/// of static functions called directly, `longjmp` across such a chain, `longjmp` back into a
/// function waiting in a direct call) and throw.cpp (an exception through such a chain and a
/// destructor, caught higher up). Every path count equals the cut trace's, and paths that end
/// where a frame was abandoned, cross a call on the way, and start after a `longjmp` are among
/// them: before the set took functions that may end early, none of these functions had paths.
#[test]
fn ipath_counts_equal_the_cut_trace_when_frames_are_abandoned() {
    let dir = repo().join("testdata/ipath");
    for (file, status) in [("early.c", 3), ("throw.cpp", 0)] {
        for opt in ["-O0", "-O2"] {
            for mode in ["ipath", "ipath-piecewise"] {
                let name = format!("{file}{opt}");
                let c = check(&name, &single(&dir.join(file), opt), &[], status, mode);
                eprintln!(
                    "{name} {mode}: {} path runs equal, {} across calls; {} end in an abandoned \
                     frame ({} of them across calls), {} start at a re-entry",
                    c.runs, c.crossing, c.abandoned, c.abandoned_crossing, c.reentered
                );
                assert!(
                    c.abandoned >= 10 && c.abandoned_crossing >= 5,
                    "{name} {mode}: too few abandoned paths"
                );
                if file == "early.c" {
                    assert!(c.reentered >= 5, "{name} {mode}: too few re-entries");
                }
            }
        }
    }
}

/// Both modes on a real program built from `args` and run with `run_args`: at least `sets`
/// sets, `runs` path runs and `crossing` runs across calls must be compared.
fn real_program(
    name: &str,
    args: &[String],
    run_args: &[&str],
    sets: usize,
    runs: u64,
    crossing: u64,
) {
    for mode in ["ipath", "ipath-piecewise"] {
        let c = check(name, args, run_args, 0, mode);
        eprintln!(
            "{name} {mode}: {} sets, {} path runs equal, {} of them across calls",
            c.sets, c.runs, c.crossing
        );
        assert!(
            c.sets >= sets && c.runs > runs && c.crossing > crossing,
            "{name} {mode}: too little compared"
        );
    }
}

/// Lua on a small script.
#[test]
fn ipath_counts_equal_the_cut_trace_on_lua() {
    let script = repo().join("testdata/lua/small.lua");
    real_program(
        "lua",
        &lua_args(&["-O2"]),
        &[script.to_str().unwrap()],
        10,
        1000,
        100,
    );
}

/// SQLite (the amalgamation and the driver: two sets) on the driver's smallest workload.
/// Ignored by default: trace-naive writes a 300 MB trace there and the test takes about 7
/// minutes (2026-11-24: 196458 path runs equal in both modes, 7604 / 5295 across calls).
#[test]
#[ignore = "trace-naive writes a 300 MB trace; run with --ignored"]
fn ipath_counts_equal_the_cut_trace_on_sqlite() {
    real_program("sqlite", &sqlite_args(&[]), &["1"], 1, 1000, 100);
}
