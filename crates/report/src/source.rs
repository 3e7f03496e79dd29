//! The source-level model: line, branch and function counts computed from the exact
//! block and edge counts of [`analyze`](crate::analyze) and the lines, inline scopes and
//! branches the instrumenter recorded from the debug info (`tally_format::SourceMeta`).
//!
//! **How many times a line ran** is the number of times control *entered* the line's code,
//! which is gcov's definition (its line count is the count of the arcs entering the line's
//! blocks from other lines, plus the loops lying entirely on the line). Over one function's
//! graph, with the lines of each block in instruction order (consecutive repeats merged):
//!
//! - a block whose code for line L does not come first in the block enters L once per
//!   execution of the block (control reaches L from another line of the same block);
//! - a block whose first line is L enters L through each incoming edge whose source block
//!   ends on another line (or is EXIT, or has no line and is not reached only from L): that
//!   edge's count. An edge from a block ending on L *continues* the same execution of L;
//! - a loop made only of continuation edges of L (a `while (*p) p++;` on one line) enters L
//!   again each iteration: the count of its retreating (back) edge is added.
//!
//! The counts of every function (and of every linkonce copy, already summed by `analyze`) are
//! added per file and line. At -O0 this is gcov's count (the test `source_lines.rs` compares
//! every line with `llvm-cov gcov`). At -O2 the same definition counts *copies*: each copy of a
//! line the optimizer made (unrolling, inlining in several places, tail duplication) is entered
//! separately and the counts add up, so a loop that ran 1,024 times unrolled into two blocks of
//! 512 shows 1,024 when other lines separate the copies. What -O2 changes is documented in
//! `docs/source-lines.md`: lines whose code was deleted or merged have no count, code hoisted
//! out of a loop counts on its line once per loop entry, and copies that the optimizer did
//! not separate by other code (two copies of a line next to each other in one block) count
//! once.
//!
//! **Branches**: every conditional branch and switch of the optimized code, on the line of its
//! terminator, with the count of each outcome edge in successor order (for a `br`, true then
//! false; for a `switch`, the default first).
//!
//! **Functions**: per source function (`DISubprogram`), including functions inlined into
//! others, its count is its calls when it was emitted (the entry edge `e0`) plus, for every
//! inlined copy, the number of times control entered that copy's code (the same entry rule as
//! lines, applied to the code of the inline scope and the scopes inlined into it).

use crate::{FunctionReport, Report};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use tally_format::{LineRun, ModuleMeta, SourceFn, SourceMeta};

/// A module's file and source-function tables, shared by its functions.
#[derive(Clone, Debug, Default)]
pub struct Tables {
    /// `ModuleMeta::files`.
    pub files: Arc<Vec<String>>,
    /// `ModuleMeta::source_fns`.
    pub fns: Arc<Vec<SourceFn>>,
    /// `ModuleMeta::probe_descs` (what `SourceMeta::probes` names).
    pub probe_descs: Arc<Vec<tally_format::ProbeDesc>>,
    /// `ModuleMeta::probes_before_optimization`.
    pub probes_before_optimization: bool,
}

impl Tables {
    /// The tables of a module.
    pub fn of(m: &ModuleMeta) -> Tables {
        Tables {
            files: Arc::new(m.files.clone()),
            fns: Arc::new(m.source_fns.clone()),
            probe_descs: Arc::new(m.probe_descs.clone()),
            probes_before_optimization: m.probes_before_optimization,
        }
    }
}

/// A function's source facts as its metadata records them, with its module's tables.
#[derive(Clone, Debug, Default)]
pub struct FunctionSource {
    /// The module's tables.
    pub tables: Tables,
    /// The function's lines, scopes and branches.
    pub meta: Arc<SourceMeta>,
}

impl FunctionSource {
    /// The source facts of a function of a module with `tables`.
    pub fn new(tables: &Tables, meta: &SourceMeta) -> FunctionSource {
        FunctionSource {
            tables: tables.clone(),
            meta: Arc::new(meta.clone()),
        }
    }
}

/// A count that may be unknown (a function whose counts break the flow law, an edge vertex
/// mode leaves undetermined); sums saturate.
fn add(a: &mut Option<u64>, b: Option<u64>) {
    *a = match (*a, b) {
        (Some(x), Some(y)) => Some(x.saturating_add(y)),
        _ => None,
    };
}

/// A conditional branch or switch on a line: the count of each outcome, in successor order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchCounts {
    /// Outcome counts; `None` when undetermined.
    pub outcomes: Vec<Option<u64>>,
}

/// One source line that has code.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LineCounts {
    /// How many times the line ran (see the module doc); `None` when undetermined.
    pub count: Option<u64>,
    /// Its branches.
    pub branches: Vec<BranchCounts>,
}

/// The lines of one file that have code.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FileCounts {
    /// Lines by number.
    pub lines: BTreeMap<u32, LineCounts>,
}

/// A source function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFunction {
    /// Source name.
    pub name: String,
    /// Linkage name (empty for C functions whose debug info has none).
    pub linkage_name: String,
    /// Demangled linkage name, or the source name.
    pub demangled: String,
    /// Where it is defined.
    pub file: Option<String>,
    /// Line of the definition.
    pub line: u32,
    /// Calls of the emitted function plus entries of its inlined copies.
    pub count: Option<u64>,
    /// Emitted (instrumented) copies of the function.
    pub emitted: usize,
    /// Inlined copies.
    pub inlined: usize,
    /// Its lines with code (in its own file).
    pub lines: BTreeSet<u32>,
}

impl SourceFunction {
    /// The name tools should show: demangled, else the source name.
    pub fn display_name(&self) -> &str {
        if self.demangled.is_empty() {
            &self.name
        } else {
            &self.demangled
        }
    }

    /// A name unique per definition, for tools that key on it (LCOV, Cobertura): the linkage
    /// name, else the source name.
    pub fn symbol(&self) -> &str {
        if self.linkage_name.is_empty() {
            &self.name
        } else {
            &self.linkage_name
        }
    }
}

/// Line, branch and function totals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Coverage {
    /// Lines with code.
    pub lines: usize,
    /// Lines that ran.
    pub lines_hit: usize,
    /// Branch outcomes.
    pub branches: usize,
    /// Branch outcomes taken at least once.
    pub branches_hit: usize,
    /// Source functions.
    pub functions: usize,
    /// Source functions that ran.
    pub functions_hit: usize,
    /// Lines, branch outcomes and functions whose count is unknown (not among the hit ones:
    /// `trace-naive` counts nothing in its profile, `vertex` leaves some edges undetermined).
    pub unknown: [usize; 3],
}

impl Coverage {
    fn add(&mut self, o: &Coverage) {
        for (a, b) in self.unknown.iter_mut().zip(o.unknown) {
            *a += b;
        }
        self.lines += o.lines;
        self.lines_hit += o.lines_hit;
        self.branches += o.branches;
        self.branches_hit += o.branches_hit;
        self.functions += o.functions;
        self.functions_hit += o.functions_hit;
    }
}

/// Percentage with one decimal, `-` for nothing to cover.
pub fn percent(hit: usize, total: usize) -> String {
    if total == 0 {
        "-".into()
    } else {
        format!("{:.1}%", hit as f64 * 100.0 / total as f64)
    }
}

/// The source-level model of a report.
#[derive(Clone, Debug, Default)]
pub struct SourceModel {
    /// Files by path.
    pub files: BTreeMap<String, FileCounts>,
    /// Source functions, by file, line and name.
    pub functions: Vec<SourceFunction>,
}

fn hit(c: Option<u64>) -> bool {
    c.is_some_and(|c| c > 0)
}

impl SourceModel {
    /// The totals of one file (its lines and branches, and the functions defined in it).
    pub fn file_coverage(&self, path: &str) -> Coverage {
        let mut c = Coverage::default();
        if let Some(f) = self.files.get(path) {
            for l in f.lines.values() {
                c.lines += 1;
                c.lines_hit += usize::from(hit(l.count));
                c.unknown[0] += usize::from(l.count.is_none());
                for b in &l.branches {
                    c.branches += b.outcomes.len();
                    c.branches_hit += b.outcomes.iter().filter(|&&o| hit(o)).count();
                    c.unknown[1] += b.outcomes.iter().filter(|o| o.is_none()).count();
                }
            }
        }
        for func in self.functions_in(path) {
            c.functions += 1;
            c.functions_hit += usize::from(hit(func.count));
            c.unknown[2] += usize::from(func.count.is_none());
        }
        c
    }

    /// The totals of every file.
    pub fn total(&self) -> Coverage {
        let mut c = Coverage::default();
        for path in self.files.keys() {
            c.add(&self.file_coverage(path));
        }
        c
    }

    /// The functions defined in a file.
    pub fn functions_in<'a>(&'a self, path: &'a str) -> impl Iterator<Item = &'a SourceFunction> {
        self.functions
            .iter()
            .filter(move |f| f.file.as_deref() == Some(path))
    }

    /// Every line with its file, hottest first (then by file and line); unknown counts last.
    pub fn hottest_lines(&self) -> Vec<(&str, u32, &LineCounts)> {
        let mut v: Vec<(&str, u32, &LineCounts)> = self
            .files
            .iter()
            .flat_map(|(p, f)| f.lines.iter().map(move |(&n, l)| (p.as_str(), n, l)))
            .collect();
        v.sort_by(|a, b| {
            b.2.count
                .map(|c| c as u128 + 1)
                .cmp(&a.2.count.map(|c| c as u128 + 1))
                .then(a.0.cmp(b.0))
                .then(a.1.cmp(&b.1))
        });
        v
    }
}

/// Computes the source-level model of a report.
pub fn model(r: &Report) -> SourceModel {
    let mut b = Builder::default();
    // A fixed order, so that the branches of a line are listed the same way every time.
    let mut hosts: Vec<&FunctionReport> = r.functions.iter().collect();
    hosts.sort_by(|a, b| a.module.cmp(&b.module).then(a.name.cmp(&b.name)));
    for f in hosts {
        b.function(f);
    }
    let mut functions: Vec<SourceFunction> = b.functions.into_values().collect();
    functions.sort_by(|a, b| {
        a.file
            .cmp(&b.file)
            .then(a.line.cmp(&b.line))
            .then(a.symbol().cmp(b.symbol()))
    });
    SourceModel {
        files: b.files,
        functions,
    }
}

/// Key of a source function: symbol, file, line.
type FnKey = (String, Option<String>, u32);

#[derive(Default)]
struct Builder {
    files: BTreeMap<String, FileCounts>,
    functions: HashMap<FnKey, SourceFunction>,
}

/// A line within one function: (file index, line).
type LineKey = (Option<u32>, u32);

fn line_key(r: &LineRun) -> LineKey {
    (r.loc.file.map(|f| f.0), r.loc.line)
}

/// One function's graph as the model needs it.
struct Graph {
    blocks: Vec<Option<u64>>,
    /// (from, to, count) by edge id; `None` ends are EXIT.
    edges: Vec<(Option<usize>, Option<usize>, Option<u64>)>,
    /// Incoming edge ids per block.
    preds: Vec<Vec<usize>>,
    /// The line runs of each block, the definition's line first in the entry block.
    lines: Vec<Vec<LineRun>>,
}

/// A term of a line's count ([`line_terms`]): the count of a block times a number, or of an
/// edge. A line's count is the sum of its terms, which makes it linear in the function's
/// block and edge counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Term {
    /// `times` the count of block `block`.
    Block {
        /// Block id.
        block: u32,
        /// Stretches of the line's code in the block that follow other code.
        times: u64,
    },
    /// The count of edge `edge`.
    Edge(u32),
}

/// The sum of `terms` over a function's counts (`None` when one of them is undetermined).
pub fn eval(terms: &[Term], f: &FunctionReport) -> Option<u64> {
    let mut total = Some(0);
    for t in terms {
        let c = match *t {
            Term::Block { block, times } => f
                .blocks
                .get(block as usize)
                .and_then(|b| b.count)
                .map(|c| c.saturating_mul(times)),
            Term::Edge(e) => f.edges.get(e as usize).and_then(|e| e.count),
        };
        add(&mut total, c);
        total?;
    }
    total
}

/// How each line of a function's code counts, as [`model`] counts it: per (file, line), the
/// terms of its count. Depends on the graph and the metadata only, so a caller that counts the
/// lines of many runs of one build ([`crate::dataset`]) computes it once per function and
/// [`eval`]s it per run. Lines without a file are left out, as in the model.
pub fn line_terms(f: &FunctionReport) -> Vec<(String, u32, Vec<Term>)> {
    let Some((g, called_at)) = Graph::of(f) else {
        return Vec::new();
    };
    let files = &f.source.tables.files;
    g.line_terms(&called_at)
        .into_iter()
        .filter_map(|((file, line), terms)| {
            let path = file.and_then(|i| files.get(i as usize).cloned())?;
            Some((path, line, terms))
        })
        .collect()
}

impl Graph {
    /// The graph of a function with source metadata that fits it, and the call sites of the
    /// inline scopes enclosing each scope; `None` when its metadata has no lines for it.
    fn of(f: &FunctionReport) -> Option<(Graph, Vec<Vec<LineKey>>)> {
        let src = &f.source;
        let meta = &*src.meta;
        if meta.lines.is_empty() || meta.lines.len() != f.blocks.len() || meta.scopes.is_empty() {
            return None;
        }
        let n = f.blocks.len();
        let mut preds = vec![Vec::new(); n];
        let mut edges = Vec::with_capacity(f.edges.len());
        for (i, e) in f.edges.iter().enumerate() {
            let to = e.to.map(|t| t as usize).filter(|&t| t < n);
            let from = e.from.map(|t| t as usize).filter(|&t| t < n);
            if let Some(t) = to {
                preds[t].push(i);
            }
            edges.push((from, to, e.count));
        }
        // The definition's line belongs to the entry block, as in gcov: it counts the calls.
        let mut block_lines = meta.lines.clone();
        let own = meta.scopes[0]
            .func
            .and_then(|i| src.tables.fns.get(i.index()));
        if let Some(sf) = own.filter(|sf| sf.loc.line > 0) {
            let def = LineRun {
                loc: sf.loc,
                scope: tally_format::ScopeIdx(0),
            };
            if block_lines[0].first().map(line_key) != Some(line_key(&def)) {
                block_lines[0].insert(0, def);
            }
        }
        // The call sites of the inline scopes enclosing each scope.
        let mut called_at: Vec<Vec<LineKey>> = Vec::with_capacity(meta.scopes.len());
        for (i, sc) in meta.scopes.iter().enumerate() {
            let mut c = if i == 0 {
                Vec::new()
            } else {
                called_at
                    .get(sc.parent.index())
                    .cloned()
                    .unwrap_or_default()
            };
            if i > 0 {
                if c.len() >= MAX_INLINE_DEPTH {
                    c.remove(0);
                }
                c.push((sc.call.file.map(|f| f.0), sc.call.line));
            }
            called_at.push(c);
        }
        let g = Graph {
            blocks: f.blocks.iter().map(|b| b.count).collect(),
            edges,
            preds,
            lines: block_lines,
        };
        Some((g, called_at))
    }

    /// The terms of each line's count (the module doc's rules).
    fn line_terms(&self, called_at: &[Vec<LineKey>]) -> BTreeMap<LineKey, Vec<Term>> {
        let back = self.retreating();
        let mut terms: BTreeMap<LineKey, Vec<Term>> = BTreeMap::new();
        let mut arcs: BTreeMap<LineKey, Vec<(usize, usize, usize)>> = BTreeMap::new();
        // The lines a run holds code of: its own, and those of the calls it was inlined from
        // (code inlined from a call on a line is part of that line's execution).
        let keys_of = |r: &LineRun| {
            let mut k = vec![line_key(r)];
            if let Some(c) = called_at.get(r.scope.index()) {
                k.extend(c.iter().copied());
            }
            k
        };
        for (b, runs) in self.lines.iter().enumerate() {
            for (k, found) in stretches(runs, &keys_of) {
                let part = |r: &LineRun| keys_of(r).contains(&k);
                self.enter(
                    b,
                    found,
                    &part,
                    terms.entry(k).or_default(),
                    arcs.entry(k).or_default(),
                );
            }
        }
        // A loop of the line's own code (not of a function inlined from it) enters it again
        // each iteration.
        let holds = |b: usize, k: LineKey| self.lines[b].iter().any(|r| line_key(r) == k);
        for (k, cont) in &arcs {
            if !cont.iter().any(|&(_, _, e)| back[e]) {
                continue;
            }
            let comp = components(cont);
            for &(u, b, e) in cont {
                if back[e] && holds(b, *k) && comp.get(&u) == comp.get(&b) {
                    if let Some(t) = terms.get_mut(k) {
                        t.push(Term::Edge(e as u32));
                    }
                }
            }
        }
        terms
    }

    /// The sum of `terms` over this graph's counts.
    fn eval(&self, terms: &[Term]) -> Option<u64> {
        let mut total = Some(0);
        for t in terms {
            let c = match *t {
                Term::Block { block, times } => {
                    self.blocks[block as usize].map(|c| c.saturating_mul(times))
                }
                Term::Edge(e) => self.edges[e as usize].2,
            };
            add(&mut total, c);
        }
        total
    }

    /// Edges that go back to a block on the depth-first search stack (from `n0`).
    fn retreating(&self) -> Vec<bool> {
        let n = self.blocks.len();
        let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, &(from, to, _)) in self.edges.iter().enumerate() {
            if let (Some(a), Some(_)) = (from, to) {
                succs[a].push(i);
            }
        }
        let mut back = vec![false; self.edges.len()];
        let mut state = vec![0u8; n]; // 0 new, 1 on stack, 2 done
        if n == 0 {
            return back;
        }
        let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
        state[0] = 1;
        while let Some(&mut (v, ref mut k)) = stack.last_mut() {
            if let Some(&e) = succs[v].get(*k) {
                *k += 1;
                let w = self.edges[e].1.expect("successor edges have a target");
                match state[w] {
                    0 => {
                        state[w] = 1;
                        stack.push((w, 0));
                    }
                    1 => back[e] = true,
                    _ => {}
                }
            } else {
                state[v] = 2;
                stack.pop();
            }
        }
        back
    }

    /// Whether a block ends in code for which `inside` holds; a block without lines does when
    /// all its predecessors do (a bare jump between two parts of one line continues it).
    fn ends_in(&self, b: usize, inside: &dyn Fn(&LineRun) -> bool) -> bool {
        if let Some(r) = self.lines[b].last() {
            return inside(r);
        }
        !self.preds[b].is_empty()
            && self.preds[b].iter().all(|&e| {
                self.edges[e]
                    .0
                    .and_then(|u| self.lines[u].last())
                    .is_some_and(inside)
            })
    }

    /// Entries into some code (a line with the code inlined from it, or an inline scope)
    /// in block `b`, as terms, given what [`stretches`] found there: the block's count for each of the
    /// `restarts` stretches that follow other code (two copies of a line in one unrolled
    /// block count twice), and, when a stretch starts the block, the count of each incoming
    /// edge from a block that does not end in `part` code. Continuation edges (from a block
    /// ending in it) are returned as `(from, to, edge)` for the caller's loop rule.
    fn enter(
        &self,
        b: usize,
        (restarts, starts): (u64, bool),
        part: &dyn Fn(&LineRun) -> bool,
        terms: &mut Vec<Term>,
        continuations: &mut Vec<(usize, usize, usize)>,
    ) {
        if restarts > 0 {
            terms.push(Term::Block {
                block: b as u32,
                times: restarts,
            });
        }
        if starts {
            for &e in &self.preds[b] {
                match self.edges[e].0 {
                    Some(u) if self.ends_in(u, part) => continuations.push((u, b, e)),
                    _ => terms.push(Term::Edge(e as u32)),
                }
            }
        }
    }
}

/// One pass over a block's runs: for each key (a line, an inline scope) that `keys_of` gives
/// a run, how many stretches of runs holding it start after other code, and whether one
/// starts the block. Linear in the runs times the keys per run.
fn stretches<K: Ord + Copy>(
    runs: &[LineRun],
    keys_of: &dyn Fn(&LineRun) -> Vec<K>,
) -> BTreeMap<K, (u64, bool)> {
    let mut out: BTreeMap<K, (u64, bool)> = BTreeMap::new();
    let mut prev: Vec<K> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let mut cur = keys_of(r);
        cur.sort_unstable();
        cur.dedup();
        for k in &cur {
            let e = out.entry(*k).or_default();
            if prev.binary_search(k).is_err() {
                if i == 0 {
                    e.1 = true;
                } else {
                    e.0 += 1;
                }
            }
        }
        prev = cur;
    }
    out
}

/// Inline chains longer than this are cut (outermost scopes dropped), so that crafted
/// metadata cannot make the chains grow with the square of the scopes.
const MAX_INLINE_DEPTH: usize = 64;

/// The strongly connected component of every block the arcs name (Kosaraju, iterative):
/// an arc `from -> to` lies on a loop of the arcs exactly when both ends share a component.
/// Linear in the arcs, whatever a crafted profile holds.
fn components(arcs: &[(usize, usize, usize)]) -> HashMap<usize, usize> {
    let mut succ: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut pred: HashMap<usize, Vec<usize>> = HashMap::new();
    for &(u, v, _) in arcs {
        succ.entry(u).or_default().push(v);
        pred.entry(v).or_default().push(u);
        succ.entry(v).or_default();
        pred.entry(u).or_default();
    }
    let mut nodes: Vec<usize> = succ.keys().copied().collect();
    nodes.sort_unstable();
    // First pass: finishing order on the arcs.
    let mut order = Vec::with_capacity(nodes.len());
    let mut seen: std::collections::HashSet<usize> = Default::default();
    for &n in &nodes {
        if !seen.insert(n) {
            continue;
        }
        let mut stack = vec![(n, 0usize)];
        while let Some(&mut (v, ref mut i)) = stack.last_mut() {
            let next = succ[&v].get(*i).copied();
            *i += 1;
            match next {
                Some(w) if seen.insert(w) => stack.push((w, 0)),
                Some(_) => {}
                None => {
                    order.push(v);
                    stack.pop();
                }
            }
        }
    }
    // Second pass: components on the reversed arcs, in reverse finishing order.
    let mut comp: HashMap<usize, usize> = HashMap::new();
    for &n in order.iter().rev() {
        if comp.contains_key(&n) {
            continue;
        }
        let c = comp.len();
        comp.insert(n, c);
        let mut work = vec![n];
        while let Some(v) = work.pop() {
            for &w in &pred[&v] {
                if let std::collections::hash_map::Entry::Vacant(slot) = comp.entry(w) {
                    slot.insert(c);
                    work.push(w);
                }
            }
        }
    }
    comp
}

impl Builder {
    fn function(&mut self, f: &FunctionReport) {
        let Some((g, called_at)) = Graph::of(f) else {
            return;
        };
        let src = &f.source;
        let meta = &*src.meta;
        let files = &src.tables.files;
        let file_name = |i: Option<u32>| i.and_then(|i| files.get(i as usize).cloned());

        // Lines.
        for ((file, line), terms) in g.line_terms(&called_at) {
            let Some(path) = file_name(file) else {
                continue;
            };
            let l = self
                .files
                .entry(path)
                .or_default()
                .lines
                .entry(line)
                .or_insert(LineCounts {
                    count: Some(0),
                    branches: Vec::new(),
                });
            add(&mut l.count, g.eval(&terms));
        }

        // Branches.
        for br in &meta.branches {
            let Some(path) = file_name(br.loc.file.map(|f| f.0)) else {
                continue;
            };
            let outcomes = br
                .edges
                .iter()
                .map(|e| g.edges.get(e.index()).and_then(|x| x.2))
                .collect();
            self.files
                .entry(path)
                .or_default()
                .lines
                .entry(br.loc.line)
                .or_insert(LineCounts {
                    count: Some(0),
                    branches: Vec::new(),
                })
                .branches
                .push(BranchCounts { outcomes });
        }

        // Functions: the emitted one, then every inlined copy.
        let scopes = &meta.scopes;
        // Scopes enclosing each scope, itself included (parents come first, so this is a
        // single pass).
        let mut chains: Vec<Vec<usize>> = Vec::with_capacity(scopes.len());
        for (i, s) in scopes.iter().enumerate() {
            let mut c = if i == 0 {
                Vec::new()
            } else {
                chains.get(s.parent.index()).cloned().unwrap_or_default()
            };
            if c.len() >= MAX_INLINE_DEPTH {
                c.remove(0);
            }
            c.push(i);
            chains.push(c);
        }
        let within =
            |r: &LineRun, s: usize| chains.get(r.scope.index()).is_some_and(|c| c.contains(&s));
        if let Some(func) = self.source_fn(src, scopes[0].func.map(|x| x.index())) {
            func.emitted += 1;
            let calls = if f.inconsistent.is_some() {
                None
            } else {
                f.edges.first().and_then(|e| e.count)
            };
            add(&mut func.count, calls);
        }
        // Entries into each inline scope (its code and the code inlined into it).
        let mut totals: Vec<Option<Vec<Term>>> = vec![None; scopes.len()];
        let mut cont = Vec::new();
        let scopes_of = |r: &LineRun| chains.get(r.scope.index()).cloned().unwrap_or_default();
        for (b, runs) in meta.lines.iter().enumerate() {
            for (s, found) in stretches(runs, &scopes_of) {
                if s == 0 {
                    continue;
                }
                let terms = totals[s].get_or_insert_with(Vec::new);
                g.enter(b, found, &|r| within(r, s), terms, &mut cont);
            }
        }
        for (s, terms) in totals.into_iter().enumerate().skip(1) {
            let Some(terms) = terms else { continue };
            let total = g.eval(&terms);
            if let Some(func) = self.source_fn(src, scopes[s].func.map(|x| x.index())) {
                func.inlined += 1;
                add(&mut func.count, total);
            }
        }
        // The lines of each source function: those of the code of its scopes.
        let mut own: BTreeSet<(usize, Option<u32>, u32)> = BTreeSet::new();
        for r in g.lines.iter().flatten() {
            if let Some(sf) = scopes.get(r.scope.index()).and_then(|s| s.func) {
                own.insert((sf.index(), r.loc.file.map(|f| f.0), r.loc.line));
            }
        }
        for (sf, file, line) in own {
            let path = file_name(file);
            if let Some(func) = self.source_fn(src, Some(sf)) {
                if func.file == path {
                    func.lines.insert(line);
                }
            }
        }
    }

    /// The model's entry for source function `i` of a function's module.
    fn source_fn(&mut self, src: &FunctionSource, i: Option<usize>) -> Option<&mut SourceFunction> {
        let sf = src.tables.fns.get(i?)?;
        let file = sf
            .loc
            .file
            .and_then(|f| src.tables.files.get(f.index()).cloned());
        let symbol = if sf.linkage_name.is_empty() {
            sf.name.clone()
        } else {
            sf.linkage_name.clone()
        };
        let key = (symbol, file.clone(), sf.loc.line);
        Some(self.functions.entry(key).or_insert_with(|| SourceFunction {
            name: sf.name.clone(),
            linkage_name: sf.linkage_name.clone(),
            demangled: if sf.linkage_name.is_empty() {
                sf.name.clone()
            } else {
                crate::demangle(&sf.linkage_name)
            },
            file,
            line: sf.loc.line,
            count: Some(0),
            emitted: 0,
            inlined: 0,
            lines: BTreeSet::new(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BlockCount, EdgeCount};
    use tally_format::{FileIdx, Loc, Mode, ScopeIdx, ScopeMeta, SourceFnIdx};

    fn run(line: u32, scope: u32) -> LineRun {
        LineRun {
            loc: Loc {
                file: Some(FileIdx(0)),
                line,
            },
            scope: ScopeIdx(scope),
        }
    }

    /// `main` (line 1) with blocks n0 -> n1 (a self loop) -> n2 -> EXIT, given block counts,
    /// the loop's count and each block's lines; `f` (line 20) inlined at line 5 is scope s1.
    fn report(counts: [u64; 3], loops: u64, lines: Vec<Vec<LineRun>>) -> Report {
        let edges = [
            (None, Some(0), counts[0]),
            (Some(0), Some(1), counts[0]),
            (Some(1), Some(1), loops),
            (Some(1), Some(2), counts[0]),
            (Some(2), None, counts[0]),
        ];
        let fns = vec![
            SourceFn {
                name: "main".into(),
                linkage_name: String::new(),
                loc: Loc {
                    file: Some(FileIdx(0)),
                    line: 1,
                },
            },
            SourceFn {
                name: "f".into(),
                linkage_name: String::new(),
                loc: Loc {
                    file: Some(FileIdx(0)),
                    line: 20,
                },
            },
        ];
        let meta = SourceMeta {
            scopes: vec![
                ScopeMeta {
                    func: Some(SourceFnIdx(0)),
                    parent: ScopeIdx(0),
                    call: Loc::default(),
                    call_probe: 0,
                    top_level: false,
                },
                ScopeMeta {
                    func: Some(SourceFnIdx(1)),
                    parent: ScopeIdx(0),
                    call: Loc {
                        file: Some(FileIdx(0)),
                        line: 5,
                    },
                    call_probe: 0,
                    top_level: false,
                },
            ],
            lines,
            branches: vec![],
            probes: vec![],
            call_targets: vec![],
            direct_calls: vec![],
        };
        let tables = Tables {
            files: Arc::new(vec!["/t.c".into()]),
            fns: Arc::new(fns),
            probe_descs: Arc::default(),
            probes_before_optimization: false,
        };
        let f = FunctionReport {
            name: "main".into(),
            demangled: "main".into(),
            file: Some("/t.c".into()),
            line: 1,
            module: "/t.c".into(),
            mode: Mode::Edge,
            cfg_hash: 0,
            entry_count: counts[0],
            block_executions: 0,
            blocks: (0..3)
                .map(|i| BlockCount {
                    id: i,
                    count: Some(counts[i as usize]),
                    file: None,
                    line: 0,
                })
                .collect(),
            edges: edges
                .iter()
                .enumerate()
                .map(|(i, &(from, to, c))| EdgeCount {
                    id: i as u32,
                    from,
                    to,
                    kind: "flow",
                    count: Some(c),
                })
                .collect(),
            counters: 0,
            copies: 1,
            paths: None,
            events: None,
            inconsistent: None,
            source: FunctionSource::new(&tables, &meta),
            call_targets: vec![],
        };
        Report {
            program: Default::default(),
            modes: vec![Mode::Edge],
            modules: vec!["/t.c".into()],
            functions: vec![f],
            skipped: vec![],
            counters: 0,
            counter_sum: 0,
            path_entry_sum: 0,
            events: None,
            unfinished: false,
            raced: false,
            signal: None,
            delta: false,
            ipaths: Vec::new(),
        }
    }

    fn line(m: &SourceModel, n: u32) -> Option<u64> {
        m.files["/t.c"].lines[&n].count
    }

    #[test]
    fn copies_of_a_line_in_one_block_add_up() {
        // n1 runs 512 times and holds two copies of lines 7 and 8 (unrolled by two).
        let m = model(&report(
            [1, 512, 1],
            511,
            vec![
                vec![run(6, 0)],
                vec![run(7, 0), run(8, 0), run(7, 0), run(8, 0), run(6, 0)],
                vec![run(9, 0)],
            ],
        ));
        assert_eq!(line(&m, 7), Some(1024));
        assert_eq!(line(&m, 8), Some(1024));
        // Line 6: once in n0, then once per execution of n1, where it follows line 8.
        assert_eq!(line(&m, 6), Some(513));
        assert_eq!(line(&m, 1), Some(1), "the definition line counts the calls");
    }

    #[test]
    fn code_inlined_from_a_line_belongs_to_it() {
        // Line 5 calls f, inlined (s1: lines 21, 22) between two parts of line 5.
        let m = model(&report(
            [3, 3, 3],
            0,
            vec![
                vec![run(4, 0)],
                vec![run(5, 0), run(21, 1), run(22, 1), run(5, 0)],
                vec![run(9, 0)],
            ],
        ));
        assert_eq!(
            line(&m, 5),
            Some(3),
            "entered once per execution, not twice"
        );
        assert_eq!(line(&m, 21), Some(3));
        let f = m.functions.iter().find(|f| f.name == "f").unwrap();
        assert_eq!((f.count, f.emitted, f.inlined), (Some(3), 0, 1));
        assert_eq!(f.lines.iter().copied().collect::<Vec<_>>(), vec![21, 22]);
        let main = m.functions.iter().find(|f| f.name == "main").unwrap();
        assert_eq!((main.count, main.emitted), (Some(3), 1));
    }

    #[test]
    fn unknown_counts_stay_unknown() {
        let mut r = report([2, 2, 2], 0, vec![vec![run(4, 0)], vec![run(5, 0)], vec![]]);
        r.functions[0].blocks[1].count = None;
        r.functions[0].edges[1].count = None;
        let m = model(&r);
        assert_eq!(line(&m, 5), None);
        assert_eq!(line(&m, 4), Some(2));
    }

    #[test]
    fn deep_inline_chains_and_long_blocks_stay_bounded() {
        // 20,000 nested inline scopes (each inlined into the previous, all from line 5) and
        // a block of 20,000 runs alternating between them: chains are cut at
        // MAX_INLINE_DEPTH and every block is read in one pass, so this ends at once (the
        // chains alone would otherwise hold 200 million entries).
        const N: u32 = 20_000;
        let mut r = report([1, 1, 1], 0, vec![vec![run(4, 0)], vec![], vec![run(9, 0)]]);
        let mut meta = (*r.functions[0].source.meta).clone();
        for i in 2..N {
            meta.scopes.push(ScopeMeta {
                func: Some(SourceFnIdx(1)),
                parent: ScopeIdx(i - 1),
                call: Loc {
                    file: Some(FileIdx(0)),
                    line: 5,
                },
                call_probe: 0,
                top_level: false,
            });
        }
        meta.lines[1] = (0..N).map(|i| run(10 + i % 7, i)).collect();
        r.functions[0].source.meta = Arc::new(meta);
        let m = model(&r);
        assert_eq!(line(&m, 4), Some(1));
        assert!(m.files["/t.c"].lines.len() > 7);
    }
}
