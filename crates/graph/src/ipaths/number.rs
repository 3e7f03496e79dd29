//! Numbering the observable paths of `G*_fn` (Melski & Reps 1998 §4, §5.1-§5.4, §5.6, §6.1-§6.2).
//!
//! - `ψ_v` (§5.2, equations (19)-(22)), a linear function `λx. a·x + b` ([`Lin`]) per vertex: given
//!   the number of valid completions from `Exit_P` it gives the number from `v`.
//!   `ψ_Exit = id`, `ψ_GExit = λx.1`, for a call vertex `c` of a direct call of `Q` with return
//!   site `r` `ψ_c = ψ_Entry_Q ∘ ψ_r`, for a summary edge `c -> r` `ψ_c = ψ_r`, and otherwise the
//!   sum over the successors. Functions are visited callees first, each one's vertices in
//!   reverse topological order of its DAG (and a block's segments last to first), so every `ψ`
//!   needed is known. In piecewise mode `Entry_P`'s only successor is the block `n0`; the other
//!   DAG START edges leave `GEntry_P`.
//! - `ρ_e` (§5.2.3, equation (24)) for each DAG edge: the sum of `ψ` of the targets of the
//!   edges before it out of the same vertex. Evaluated at `numValidCompsFromExit` it is the
//!   edge's value in context.
//! - `numUnbalRLPaths[Exit_P]` (§6.1.1, equations (33)-(34); piecewise only), callers first:
//!   `1` for `Exit_P -> Exit_global`, `ψ_r(numUnbalRLPaths[Exit_S])` for a return to `r` in `S`.
//! - The values of the interprocedural edges (§5.3 equation (27), §6.1.2 equation (35)): the
//!   edges out of `Entry_global` in order get the prefix sums of `ψ_Entry_P(1)` (and, piecewise,
//!   `ψ_GEntry_P(numUnbalRLPaths[Exit_P])`); the edges out of an `Exit_P` reached with no open
//!   call (piecewise) the prefix sums of `numUnbalRLPaths` of their targets. All other
//!   interprocedural edges are worth 0.
//!
//! The number of a path is defined by §4 equations (6) and (7): the sum over its edges of
//! `edgeValueInContext`, the number of valid completions of the prefix through the valid
//! successors before the edge taken. [`IpNumbering::path_number`] computes exactly that, with
//! `numValidComps` obtained from the `ψ` functions and the stack of §5.4 (Algorithms 5.1 and 6.1
//! compute the same sum with the `ρ` functions); [`IpNumbering::regenerate`] inverts it
//! (Algorithm 5.2; the piecewise case, "left as an exercise" in §6.3, is the same descent over
//! the valid successors). By Theorem 4.1 the numbering is dense: the observable paths get the
//! numbers `0 .. total`, each once.
//!
//! All arithmetic is checked `u128`; [`IpathError::Overflow`] names the function where a
//! coefficient or count left `u128`. Every value the instrumented program computes (a partial
//! sum of a path number, `numValidCompsFromExit` handed to a callee, `a·x` and `b` of an
//! increment) is at most the final path number or the number of paths, and the constants
//! `numUnbalRLPaths` are checked too, so the runtime can use 64-bit registers exactly when
//! [`IpNumbering::fits_u64`] holds; otherwise the instrumenter makes the set smaller
//! ([`IpNumbering::new_limited`] demotes call sites to summary edges, §8) or cuts edges as path
//! mode does.

use super::supergraph::{Function, Mode, SEdge, SiteKind, Supergraph, Vertex, Walk};
use super::{FnId, IpathError};
use crate::ids::{IdVec, NodeId};
use crate::paths::dag::{DagEdgeId, DagEdgeKind};

/// The linear function `λx. a·x + b`, written `<a, b>` in the paper.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Lin {
    /// The coefficient.
    pub a: u128,
    /// The constant.
    pub b: u128,
}

impl Lin {
    /// `λx.0`.
    pub const ZERO: Lin = Lin { a: 0, b: 0 };
    /// `λx.x`.
    pub const ID: Lin = Lin { a: 1, b: 0 };
    /// `λx.b`.
    pub const fn constant(b: u128) -> Lin {
        Lin { a: 0, b }
    }
    /// `a·x + b`, `None` on overflow.
    pub fn eval(self, x: u128) -> Option<u128> {
        self.a.checked_mul(x)?.checked_add(self.b)
    }
    /// `self + other` (pointwise), `None` on overflow.
    pub fn checked_add(self, other: Lin) -> Option<Lin> {
        Some(Lin {
            a: self.a.checked_add(other.a)?,
            b: self.b.checked_add(other.b)?,
        })
    }
    /// `self ∘ inner`, `None` on overflow.
    pub fn compose(self, inner: Lin) -> Option<Lin> {
        Some(Lin {
            a: self.a.checked_mul(inner.a)?,
            b: self.a.checked_mul(inner.b)?.checked_add(self.b)?,
        })
    }
}

/// Checked arithmetic for the numbering, or saturating arithmetic that remembers it saturated
/// (for [`IpNumbering::new_limited`], which needs sizes even where they overflow).
#[derive(Clone, Debug, Default)]
struct Arith {
    saturate: bool,
    saturated: std::cell::Cell<bool>,
}

impl Arith {
    fn or_saturate<T>(&self, checked: Option<T>, saturated: impl FnOnce() -> T) -> Option<T> {
        match checked {
            Some(v) => Some(v),
            None if self.saturate => {
                self.saturated.set(true);
                Some(saturated())
            }
            None => None,
        }
    }
    fn add(&self, x: u128, y: u128) -> Option<u128> {
        self.or_saturate(x.checked_add(y), || x.saturating_add(y))
    }
    fn eval(&self, l: Lin, x: u128) -> Option<u128> {
        let sat = || l.a.saturating_mul(x).saturating_add(l.b);
        self.or_saturate(l.eval(x), sat)
    }
    fn lin_add(&self, l: Lin, m: Lin) -> Option<Lin> {
        let sat = || Lin {
            a: l.a.saturating_add(m.a),
            b: l.b.saturating_add(m.b),
        };
        self.or_saturate(l.checked_add(m), sat)
    }
    fn compose(&self, l: Lin, inner: Lin) -> Option<Lin> {
        let sat = || Lin {
            a: l.a.saturating_mul(inner.a),
            b: l.a.saturating_mul(inner.b).saturating_add(l.b),
        };
        self.or_saturate(l.compose(inner), sat)
    }
}

/// `G*_fn` with its numbering in one mode (module doc).
#[derive(Clone, Debug)]
pub struct IpNumbering {
    g: Supergraph,
    mode: Mode,
    psi_entry: Vec<Lin>,
    psi_gentry: Vec<Lin>,
    /// Per function, block and segment.
    psi_seg: Vec<IdVec<NodeId, Vec<Lin>>>,
    /// Per function and DAG edge.
    rho: Vec<IdVec<DagEdgeId, Lin>>,
    /// `numUnbalRLPaths[Exit_P]` (piecewise; 0 in context mode).
    nurl: Vec<u128>,
    /// Value of `Entry_global -> Entry_P` (roots).
    root_value: Vec<Option<u128>>,
    /// Value of `Entry_global -> GEntry_P` (piecewise).
    piece_value: Vec<Option<u128>>,
    /// Value of `Exit_P -> Exit_global` reached with no open call (piecewise).
    root_exit_value: Vec<u128>,
    /// Per caller and call site: value of the return edge reached with no open call.
    return_value: Vec<Vec<u128>>,
    total: u128,
    arith: Arith,
}

fn overflow(func: FnId) -> IpathError {
    IpathError::Overflow { func }
}

impl IpNumbering {
    /// Numbers the observable paths of `g` in `mode`.
    pub fn new(g: Supergraph, mode: Mode) -> Result<IpNumbering, IpathError> {
        Self::number(g, mode, false)
    }

    /// The numbering, with saturating arithmetic if `saturate` (then never `Overflow`).
    fn number(g: Supergraph, mode: Mode, saturate: bool) -> Result<IpNumbering, IpathError> {
        let mut num = Self::empty(g, mode, saturate);
        let n = num.g.num_functions();
        for i in 0..n {
            let f = num.g.bottom_up()[i];
            num.number_function(f, |_| false).ok_or(overflow(f))?;
        }
        if mode == Mode::Piecewise {
            for i in (0..n).rev() {
                let f = num.g.bottom_up()[i];
                num.number_exit(f).ok_or(overflow(f))?;
            }
        }
        let mut sum = 0u128;
        for e in num.g.succs(Vertex::EntryGlobal, mode) {
            let (f, comps) = match e {
                SEdge::RootEntry(f) => {
                    num.root_value[f.index()] = Some(sum);
                    (f, num.arith.eval(num.psi_entry[f.index()], 1))
                }
                SEdge::PieceEntry(f) => {
                    num.piece_value[f.index()] = Some(sum);
                    let nurl = num.nurl[f.index()];
                    (f, num.arith.eval(num.psi_gentry[f.index()], nurl))
                }
                _ => unreachable!("Entry_global has only entry edges"),
            };
            sum = comps
                .and_then(|c| num.arith.add(sum, c))
                .ok_or(overflow(f))?;
        }
        num.total = sum;
        Ok(num)
    }

    /// The tables of `g`, all zero.
    fn empty(g: Supergraph, mode: Mode, saturate: bool) -> IpNumbering {
        let n = g.num_functions();
        let mut num = IpNumbering {
            psi_entry: vec![Lin::ZERO; n],
            psi_gentry: vec![Lin::ZERO; n],
            psi_seg: Vec::with_capacity(n),
            rho: Vec::with_capacity(n),
            nurl: vec![0; n],
            root_value: vec![None; n],
            piece_value: vec![None; n],
            root_exit_value: vec![0; n],
            return_value: g.functions().map(|f| vec![0; g.calls(f).len()]).collect(),
            total: 0,
            arith: Arith {
                saturate,
                saturated: Default::default(),
            },
            mode,
            g,
        };
        for f in num.g.functions() {
            let cfg = num.g.cfg(f);
            num.psi_seg.push(IdVec::from_vec(
                cfg.blocks()
                    .map(|b| vec![Lin::ZERO; num.g.block_sites(f, b).len() + 1])
                    .collect(),
            ));
            num.rho
                .push(IdVec::filled(num.g.dag(f).num_edges(), Lin::ZERO));
        }
        num
    }

    /// Like [`IpNumbering::new`] on [`Supergraph::new`]`(functions)`, but if the number of
    /// paths exceeds `limit` (or `u128`), direct call sites are demoted to summary edges (§8)
    /// until it fits, and if demoting every call is not enough, functions are cut like path
    /// mode. The search, like [`number_paths_limited`](crate::paths::number_paths_limited)'s,
    /// is a heuristic with thresholds `θ = limit, limit/4, limit/16, ..., 0`: one pass per `θ`
    /// visits the functions callees first and, while a function's `ψ_Entry(1)` (saturating)
    /// exceeds `θ`, demotes its remaining direct calls of the largest callees (at least half
    /// the largest); the first `θ` whose result fits is taken. If even `θ = 0` (every call a
    /// summary edge) does not fit, each function is cut to `limit / (2 · functions)` paths by
    /// `number_paths_limited`, its calls still direct, and the search runs again; if it ends
    /// with every call a summary edge once more, the cut functions are numbered as they are,
    /// [`IpathError::LimitUnreachable`] if that does not fit either.
    pub fn new_limited(
        functions: Vec<Function>,
        mode: Mode,
        limit: u128,
    ) -> Result<IpNumbering, IpathError> {
        let n = functions.len().max(1) as u128;
        let mut g = Supergraph::new(functions)?;
        if let Ok(num) = IpNumbering::new(g.clone(), mode) {
            if num.total <= limit {
                return Ok(num);
            }
        }
        // Fix today's recursive call sites, so that demoting others cannot make a DFS pick
        // other back edges.
        let recursive: Vec<(FnId, u32)> = g
            .functions()
            .flat_map(|f| (0..g.calls(f).len() as u32).map(move |s| (f, s)))
            .filter(|&(f, s)| matches!(g.site_kind(f, s), SiteKind::Recursive(_)))
            .collect();
        g.demote(recursive);
        let fits = |h: Supergraph| -> Result<Result<IpNumbering, u128>, IpathError> {
            let mut num = IpNumbering::number(h, mode, true)?;
            if num.arith.saturated.get() || num.total > limit {
                return Ok(Err(num.total));
            }
            num.arith.saturate = false;
            Ok(Ok(num))
        };
        let share = (limit / (2 * n)).max(1);
        let mut cut_first = false;
        let mut theta = limit;
        loop {
            let mut h = g.clone();
            h.demote(Self::limit_pass(&g, mode, theta));
            if let Ok(num) = fits(h.clone())? {
                return Ok(num);
            }
            if theta > 0 {
                theta /= 4;
                continue;
            }
            if !cut_first {
                // Not even every call a summary edge fits: some function's own paths are
                // too many, and demoting calls cannot help it. Cut those functions (path
                // mode's way) with their calls still direct and search again, so that the
                // calls that fit stay direct (without this, SQLite's amalgamation ended
                // with every call demoted: no path crossed a call).
                cut_first = true;
                for f in g.functions().collect::<Vec<_>>() {
                    if let Ok(nd) = crate::paths::number_paths_limited(g.cfg(f), share) {
                        let cuts: Vec<_> = nd.dag().cuts().collect();
                        if !cuts.is_empty() {
                            g.cut(f, &cuts)?;
                        }
                    }
                }
                theta = limit;
                continue;
            }
            // Every call is a summary edge: what is left is intraprocedural.
            for f in h.functions().collect::<Vec<_>>() {
                if let Ok(nd) = crate::paths::number_paths_limited(h.cfg(f), share) {
                    let cuts: Vec<_> = nd.dag().cuts().collect();
                    if !cuts.is_empty() {
                        h.cut(f, &cuts)?;
                    }
                }
            }
            return match fits(h)? {
                Ok(num) => Ok(num),
                Err(fewest) => Err(IpathError::LimitUnreachable { limit, fewest }),
            };
        }
    }

    /// The direct call sites one pass of [`IpNumbering::new_limited`] demotes for `theta`.
    fn limit_pass(g: &Supergraph, mode: Mode, theta: u128) -> Vec<(FnId, u32)> {
        let mut num = IpNumbering::empty(g.clone(), mode, true);
        let mut extra = std::collections::HashSet::new();
        for &f in g.bottom_up() {
            loop {
                num.number_function(f, |s| extra.contains(&(f, s)));
                let size = |num: &IpNumbering, q: FnId| {
                    let entry = num.arith.eval(num.psi_entry[q.index()], 1);
                    let gentry = num.arith.eval(num.psi_gentry[q.index()], 1);
                    entry
                        .zip(gentry)
                        .map_or(u128::MAX, |(a, b)| a.saturating_add(b))
                };
                if size(&num, f) <= theta {
                    break;
                }
                let cands: Vec<(u128, u32)> = (0..g.calls(f).len() as u32)
                    .filter(|&s| !extra.contains(&(f, s)))
                    .filter_map(|s| match g.site_kind(f, s) {
                        SiteKind::Direct(q) => Some((size(&num, q), s)),
                        _ => None,
                    })
                    .collect();
                let Some(most) = cands.iter().map(|c| c.0).max() else {
                    break;
                };
                extra.extend(
                    cands
                        .iter()
                        .filter(|c| c.0 >= most / 2)
                        .map(|&(_, s)| (f, s)),
                );
            }
        }
        extra.into_iter().collect()
    }

    /// `ψ` and `ρ` for the vertices and edges of `f`; `None` on overflow.
    /// Direct call sites for which `summary` holds are taken as summary edges.
    fn number_function(&mut self, f: FnId, summary: impl Fn(u32) -> bool) -> Option<()> {
        let g = &self.g;
        let dag = g.dag(f);
        let psi_of = |psi_seg: &Vec<IdVec<NodeId, Vec<Lin>>>, v: Vertex| match v {
            Vertex::Seg { func, block, seg } => psi_seg[func.index()][block][seg as usize],
            Vertex::Exit(_) => Lin::ID,
            Vertex::GExit(_) => Lin::constant(1),
            _ => unreachable!("DAG edges end at segments, Exit or GExit"),
        };
        for &v in dag.topo_order().iter().rev() {
            if v == dag.end() {
                continue;
            }
            if v == dag.start() {
                for vertex in [Vertex::Entry(f), Vertex::GEntry(f)] {
                    let mut sum = Lin::ZERO;
                    for &d in dag.succs(v) {
                        if g.dag_source(f, d, self.mode) != vertex {
                            continue;
                        }
                        self.rho[f.index()][d] = sum;
                        sum = self
                            .arith
                            .lin_add(sum, psi_of(&self.psi_seg, g.dag_target(f, d)))?;
                    }
                    match vertex {
                        Vertex::Entry(_) => self.psi_entry[f.index()] = sum,
                        _ => self.psi_gentry[f.index()] = sum,
                    }
                }
                continue;
            }
            let mut sum = Lin::ZERO;
            for &d in dag.succs(v) {
                self.rho[f.index()][d] = sum;
                sum = self
                    .arith
                    .lin_add(sum, psi_of(&self.psi_seg, g.dag_target(f, d)))?;
            }
            let sites = g.block_sites(f, v);
            let segs = &mut self.psi_seg[f.index()][v];
            segs[sites.len()] = sum;
            for i in (0..sites.len()).rev() {
                segs[i] = match g.site_kind(f, sites[i]) {
                    SiteKind::Direct(q) if !summary(sites[i]) => {
                        let call = self.arith.compose(self.psi_entry[q.index()], segs[i + 1])?;
                        if g.has_abandon(f, sites[i]) {
                            self.arith.lin_add(call, Lin::constant(1))?
                        } else {
                            call
                        }
                    }
                    _ => segs[i + 1],
                };
            }
        }
        Some(())
    }

    /// `numUnbalRLPaths[Exit_f]` and the values of the edges out of `Exit_f` (piecewise).
    fn number_exit(&mut self, f: FnId) -> Option<()> {
        let mut sum = 0u128;
        for e in self.g.succs(Vertex::Exit(f), self.mode) {
            let comps = match e {
                SEdge::RootExit(_) => {
                    self.root_exit_value[f.index()] = sum;
                    1
                }
                SEdge::Return { func, site } => {
                    self.return_value[func.index()][site as usize] = sum;
                    let psi_r = self.psi(self.g.return_vertex(func, site));
                    self.arith.eval(psi_r, self.nurl[func.index()])?
                }
                _ => unreachable!("Exit_P has only return edges"),
            };
            sum = self.arith.add(sum, comps)?;
        }
        self.nurl[f.index()] = sum;
        Some(())
    }

    /// The supergraph.
    pub fn graph(&self) -> &Supergraph {
        &self.g
    }
    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// The number of observable paths: `numValidComps([ε : Entry_global])`.
    pub fn total(&self) -> u128 {
        self.total
    }
    /// True if every path number, and every value the instrumented program computes, fits in
    /// a `u64` (module doc). Besides the total this checks `numUnbalRLPaths`, the one constant
    /// the program loads that is not bounded by the number of paths (it can exceed it where
    /// the paths from `GEntry_P` never reach `Exit_P`).
    pub fn fits_u64(&self) -> bool {
        self.total <= 1u128 << 64 && self.nurl.iter().all(|&n| n <= u128::from(u64::MAX))
    }
    /// `ψ_v`. `Entry_global` and `Exit_global` have none (`λx.total` and `λx.1` are returned).
    pub fn psi(&self, v: Vertex) -> Lin {
        match v {
            Vertex::EntryGlobal => Lin::constant(self.total),
            Vertex::ExitGlobal => Lin::constant(1),
            Vertex::Entry(f) => self.psi_entry[f.index()],
            Vertex::GEntry(f) => self.psi_gentry[f.index()],
            Vertex::Exit(_) => Lin::ID,
            Vertex::GExit(_) => Lin::constant(1),
            Vertex::Seg { func, block, seg } => self.psi_seg[func.index()][block][seg as usize],
        }
    }
    /// `ρ` of `Abandon` `c -> GExit_f` of direct call site `site` of `f`: `ψ_Entry_Q ∘ ψ_r`,
    /// the completions through the call edge before it.
    pub fn abandon_rho(&self, f: FnId, site: u32) -> Result<Lin, IpathError> {
        let SiteKind::Direct(q) = self.g.site_kind(f, site) else {
            return Ok(Lin::ZERO);
        };
        self.psi_entry[q.index()]
            .compose(self.psi(self.g.return_vertex(f, site)))
            .ok_or(overflow(f))
    }
    /// `ρ_d` of DAG edge `d` of `f`.
    pub fn rho(&self, f: FnId, d: DagEdgeId) -> Lin {
        self.rho[f.index()][d]
    }
    /// `numUnbalRLPaths[Exit_f]` (piecewise; 0 in context mode).
    pub fn num_unbal_rl_paths(&self, f: FnId) -> u128 {
        self.nurl[f.index()]
    }
    /// The value of `Entry_global -> Entry_f`, `None` if `f` is not a root (equation (27)).
    pub fn root_value(&self, f: FnId) -> Option<u128> {
        self.root_value[f.index()]
    }
    /// The value of `Entry_global -> GEntry_f` (piecewise; `None` in context mode).
    pub fn piece_value(&self, f: FnId) -> Option<u128> {
        self.piece_value[f.index()]
    }
    /// The numbers of the paths that start at `f`'s own edges out of `Entry_global`
    /// (`Entry_global -> Entry_f`, piecewise also `Entry_global -> GEntry_f`), one range:
    /// `Entry_global`'s edges are ordered function by function, and each function's root edge
    /// directly precedes its piecewise one. Empty when `f` has neither. A function that makes
    /// and receives no direct call (an *isolated* one) counts exactly these paths, and no other
    /// function counts any of them: its paths never leave it, and it is always entered as a
    /// root (or after a restart, `GEntry_f`), so such a function can count `p - start` in an
    /// array of `end - start` counters instead of a hash table.
    pub fn own_paths(&self, f: FnId) -> std::ops::Range<u128> {
        let i = f.index();
        let root = self.root_value[i].map(|v| (v, self.psi_entry[i].eval(1)));
        let piece = self.piece_value[i].map(|v| (v, self.psi_gentry[i].eval(self.nurl[i])));
        let start = root.or(piece).map_or(0, |(v, _)| v);
        let end = [root, piece]
            .into_iter()
            .flatten()
            .map(|(v, n)| v + n.unwrap_or(0))
            .max()
            .unwrap_or(start);
        start..end
    }
    /// The value of `Exit_f -> Exit_global` reached with no open call (piecewise, eq. (35)).
    pub fn root_exit_value(&self, f: FnId) -> u128 {
        self.root_exit_value[f.index()]
    }
    /// The value of the return edge of direct call site `site` of `f` reached with no open call
    /// (piecewise, equation (35)).
    pub fn return_value(&self, f: FnId, site: u32) -> u128 {
        self.return_value[f.index()][site as usize]
    }

    /// A fingerprint of the numbering (FNV-1a 64 over the mode, the total, each function's
    /// call-site kinds, `ψ_Entry`, `ψ_GEntry`, `numUnbalRLPaths`, root values and every `ρ`):
    /// the instrumenter stores it and the reader, renumbering from the same description,
    /// compares, as path mode does with [`NumberedDag::fingerprint`](crate::paths::NumberedDag::fingerprint).
    pub fn fingerprint(&self) -> u64 {
        let mut h = crate::hash::Fnv64::new();
        h.write_u64(u64::from(self.mode == Mode::Piecewise));
        h.write(&self.total.to_le_bytes());
        for f in self.g.functions() {
            let i = f.index();
            h.write_u64(self.g.calls(f).len() as u64);
            for s in 0..self.g.calls(f).len() as u32 {
                let (tag, q) = match self.g.site_kind(f, s) {
                    SiteKind::Direct(q) => (0, q.index() as u64),
                    SiteKind::Recursive(q) => (1, q.index() as u64),
                    SiteKind::Unknown => (2, 0),
                };
                h.write_u64(tag);
                h.write_u64(q);
            }
            for l in [self.psi_entry[i], self.psi_gentry[i]] {
                h.write(&l.a.to_le_bytes());
                h.write(&l.b.to_le_bytes());
            }
            h.write(&self.nurl[i].to_le_bytes());
            h.write(&self.root_value[i].map_or(u128::MAX, |v| v).to_le_bytes());
            h.write_u64(self.rho[i].len() as u64);
            for (_, l) in self.rho[i].iter() {
                h.write(&l.a.to_le_bytes());
                h.write(&l.b.to_le_bytes());
            }
        }
        h.finish()
    }

    /// The number of the observable path `path` (module doc): the sum of `edgeValueInContext`.
    pub fn path_number(&self, path: &[SEdge]) -> Result<u128, IpathError> {
        let mut w = NumWalk::new(self);
        let mut sum = 0u128;
        for (i, &e) in path.iter().enumerate() {
            let opts = w.options(self).ok_or(overflow(w.func()))?;
            let Some(&(_, val, _)) = opts.iter().find(|o| o.0 == e) else {
                return Err(IpathError::NotAPath { at: i });
            };
            sum = sum.checked_add(val).ok_or(overflow(w.func()))?;
            w.step(self, e).ok_or(overflow(w.func()))?;
        }
        if w.walk.at == Vertex::ExitGlobal {
            Ok(sum)
        } else {
            Err(IpathError::NotAPath { at: path.len() })
        }
    }

    /// The observable path numbered `number` (Algorithm 5.2 and its piecewise analogue).
    pub fn regenerate(&self, number: u128) -> Result<Vec<SEdge>, IpathError> {
        if number >= self.total {
            return Err(IpathError::NumberOutOfRange {
                number,
                paths: self.total,
            });
        }
        let mut w = NumWalk::new(self);
        let mut rem = number;
        let mut path = Vec::new();
        while w.walk.at != Vertex::ExitGlobal {
            let opts = w.options(self).ok_or(overflow(w.func()))?;
            let Some(&(e, val, _)) = opts
                .iter()
                .find(|&&(_, val, comps)| val <= rem && rem - val < comps)
            else {
                return Err(IpathError::NotAPath { at: path.len() });
            };
            rem -= val;
            path.push(e);
            w.step(self, e).ok_or(overflow(w.func()))?;
        }
        Ok(path)
    }

    /// `path` as text: `f0:n1 -> f0:n2 (call f1) f1:n0 ... -> ret f0:n3 ...`, for messages.
    pub fn describe(&self, path: &[SEdge]) -> String {
        let mut out = String::new();
        for &e in path {
            let part = match e {
                SEdge::RootEntry(f) => format!("[enter {f}]"),
                SEdge::PieceEntry(f) => format!("[start in {f}]"),
                SEdge::RootExit(f) => format!("[leave {f}]"),
                SEdge::GExitEnd(_) => "[end]".to_string(),
                SEdge::Intra { func, dag } => {
                    let d = self.g.dag(func);
                    let kind = d.edge(dag).kind;
                    let dst = d.edge(dag).dst;
                    match kind {
                        DagEdgeKind::Start => format!("{func}:{dst}"),
                        _ if d.is_block(dst) => format!("-{kind}-> {func}:{dst}"),
                        _ => format!("-{kind}->"),
                    }
                }
                SEdge::Call { func, site } => format!("(call {func}#{site}"),
                SEdge::Return { func, site } => format!("ret {func}#{site})"),
                SEdge::Summary { func, site } => format!("(summary {func}#{site})"),
                SEdge::Abandon { func, site } => format!("(abandoned before {func}#{site})"),
            };
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&part);
        }
        out
    }
}

/// A path prefix with `numValidCompsFromExit` and its stack (§5.4).
#[derive(Clone, Debug)]
struct NumWalk {
    walk: Walk,
    nvc: u128,
    saved: Vec<u128>,
}

impl NumWalk {
    fn new(_num: &IpNumbering) -> NumWalk {
        NumWalk {
            walk: Walk::new(),
            nvc: 1,
            saved: Vec::new(),
        }
    }

    /// The function of the last vertex (for error messages; `f0` at the global vertices).
    fn func(&self) -> FnId {
        match self.walk.at {
            Vertex::Entry(f)
            | Vertex::GEntry(f)
            | Vertex::Exit(f)
            | Vertex::GExit(f)
            | Vertex::Seg { func: f, .. } => f,
            _ => FnId::new(0),
        }
    }

    /// `numValidComps` of the prefix.
    fn completions(&self, num: &IpNumbering) -> Option<u128> {
        num.psi(self.walk.at).eval(self.nvc)
    }

    /// Extends the prefix by `e` (a valid successor), updating `numValidCompsFromExit`.
    fn step(&mut self, num: &IpNumbering, e: SEdge) -> Option<()> {
        let g = num.graph();
        match e {
            SEdge::RootEntry(_) => {
                self.saved.push(self.nvc);
                self.nvc = 1;
            }
            SEdge::PieceEntry(f) => self.nvc = num.nurl[f.index()],
            SEdge::Call { func, site } => {
                self.saved.push(self.nvc);
                self.nvc = num.psi(g.return_vertex(func, site)).eval(self.nvc)?;
            }
            SEdge::Return { func, .. } => {
                if self.walk.open.is_empty() {
                    // An unmatched return into `S`: the completions from `Exit_S` are all its
                    // unbalanced-right-left ones (§6.1.1). Algorithm 6.1 as printed sets
                    // `ψ_r(numUnbalRLPaths[Exit_S])`, the completions from `r` instead; that
                    // breaks density as soon as an edge of `S` has a `ρ` with a non-zero
                    // coefficient (the property tests find it), so it is read as an erratum.
                    self.nvc = num.nurl[func.index()];
                } else {
                    self.nvc = self.saved.pop()?;
                }
            }
            SEdge::RootExit(_) => {
                self.saved.pop();
            }
            _ => {}
        }
        self.walk.step(g, e);
        Some(())
    }

    /// The valid successors with `edgeValueInContext` and the completions of the extended
    /// prefix (equation (6)).
    fn options(&self, num: &IpNumbering) -> Option<Vec<(SEdge, u128, u128)>> {
        let mut out = Vec::new();
        let mut sum = 0u128;
        for e in self.walk.valid_succs(num.graph(), num.mode) {
            let mut next = self.clone();
            next.step(num, e)?;
            let comps = next.completions(num)?;
            out.push((e, sum, comps));
            sum = sum.checked_add(comps)?;
        }
        Some(out)
    }
}
