//! SESE counters: program variables that replace edge counters inside loops, after Frenot &
//! Pereira, *Reducing the Overhead of Exact Profiling by Reusing Affine Variables* (CC 2024,
//! cited as Frenot & Pereira 2024), on top of the chord placement of Ball & Larus 1994 §3.2.
//!
//! A loop-header phi whose circuit holds only phis and constant increments `u + c` in
//! control-equivalent blocks (Definition 3.5) tells, when the loop is left, how often its
//! increments ran: `(last - init) / step`, `step` being the sum of the constants (Theorem
//! 3.10). That frequency is the count of an edge of the loop, which therefore needs no counter
//! (Theorem 3.11). Here, as data and with no LLVM:
//!
//! - [`SeseLoop`]: a reducible natural loop (Definition 3.1) of a [`Cfg`] with its header,
//!   members, entry edges, exit edges and early exits;
//! - [`SeseCounter`]: what a front end found in such a loop: either an affine variable
//!   ([`SeseKind::Affine`]: one increment, the induction variable of §3, or several constant
//!   increments in control-equivalent blocks) or a trip count known on entry
//!   ([`SeseKind::TripCount`], what ScalarEvolution's backedge-taken count gives), the edge
//!   whose count it yields, and the edges where its value is added to that edge's count;
//! - [`place_edge_counters_sese`]: the edge placement of Ball & Larus 1994 with the measured edges
//!   made *free* chords (kept out of the spanning tree, carrying no increment);
//! - [`recover`]: every edge count from the incremented chords' counters and the SESE values.
//!
//! **Control equivalence per activation.** Definition 3.2 asks the increments' blocks to form a
//! SESE region. What exactness needs is weaker and checkable on the graph alone: in every
//! *activation* of the loop (entered at the header from outside, left by an exit edge or, when
//! the frame ends inside, by an early-exit edge), each increment block runs as often as the
//! measured edge. Activations are the flows of the loop's subgraph closed by a virtual vertex
//! `X` (exits go to `X`, `X -> header` is the entry); since that graph is strongly connected,
//! their span is its whole cycle space, and a linear functional of the counts (count of a block
//! minus count of the edge) vanishes on all of them iff it is a coboundary: iff there is a
//! potential `p` with `w(a -> b) = p(b) - p(a)` on every edge. [`SeseLoop::equivalent`] checks
//! exactly that. An increment is modelled as running on entry to its block, before any call of
//! the block that may end the frame (the front end cuts blocks at such calls).
//!
//! **When the value arrives.** A SESE counter's value exists only when the loop is left: it is
//! added at each exit edge ([`SeseCounter::add_at`]), so at any point outside the loop every
//! count is exact. If the frame can end inside the loop (a member has an `EarlyExit` edge,
//! [`SeseCounter::may_end_inside`]), the value must also be added when the frame is abandoned
//! (the frame record must reach the variable); that is exact only when the equivalence also
//! holds for activations ended by early exits ([`SeseCounter::flush_exact`]). A trip-count
//! counter's value is known on entry (computed there) but, like an affine value, added on the
//! exit edges, so that every count is exact outside the loop and none runs ahead inside it; it
//! is only offered for loops the frame cannot leave early. [`cost`](CostModel) is the
//! per-loop profitability test (a counter is used only where it is expected to save more
//! instructions than its exit code costs).

use crate::cfg::{Cfg, EdgeKind};
use crate::dfs::Dfs;
use crate::dom::Dominators;
use crate::ids::{EdgeId, IdVec, NodeId};
use crate::loops::Loops;
use crate::mst::{max_spanning_tree, max_spanning_tree_exits_in_tree, TreeClass, UnionFind};
use crate::placement::EdgePlacement;
use crate::propagate::{propagate, FlowError};
use thiserror::Error;

mod cost;
mod exact_div;
#[cfg(test)]
mod tests;

pub use cost::{trip_count_setup, AffineExit, CostModel, CounterKind, LoopShape, Profit};
pub use exact_div::{mask, ExactDiv};

/// Why a loop or a counter cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SeseError {
    /// The block is the target of no back edge.
    #[error("{0} is not a loop header")]
    NotALoop(NodeId),
    /// The header does not dominate a member: the loop is irreducible (Definition 3.1).
    #[error("the loop of {header} is irreducible: it does not dominate {member}")]
    Irreducible {
        /// The loop header.
        header: NodeId,
        /// A member it does not dominate.
        member: NodeId,
    },
    /// An edge from outside the loop enters it elsewhere than at the header (from code the
    /// search from the entry does not reach, but a re-entry edge does).
    #[error("edge {edge} enters the loop of {header} elsewhere than at its header")]
    SideEntry {
        /// The loop header.
        header: NodeId,
        /// The entering edge.
        edge: EdgeId,
    },
    /// The header is the function's entry: the loop has no entry edge to add a value on.
    #[error("the loop header {0} is the function entry")]
    HeaderIsEntry(NodeId),
    /// Control can come back into the loop through a `Reentry` edge (a `setjmp` inside): the
    /// variable's value there is unknown.
    #[error("block {0} of the loop is a re-entry point")]
    ReentryInside(NodeId),
    /// The loop has no exit edge and no early exit: it is never left.
    #[error("the loop of {0} is never left")]
    NoExit(NodeId),
    /// An increment block is not in the loop.
    #[error("increment block {block} is not in the loop of {header}")]
    OutsideLoop {
        /// The loop header.
        header: NodeId,
        /// The block.
        block: NodeId,
    },
    /// No increments, or constants that sum to zero (Theorem 3.9 asks for at least one).
    #[error("the increments of the counter at {0} sum to zero")]
    ZeroStep(NodeId),
    /// An increment block is not control equivalent to the others (Definition 3.5, item 2):
    /// the paper's Fig. 5 (`nonSESE`).
    #[error(
        "increment block {block} is not control equivalent to {other} in the loop of {header}"
    )]
    NotControlEquivalent {
        /// The loop header.
        header: NodeId,
        /// The offending block.
        block: NodeId,
        /// The block or edge source it was compared with.
        other: NodeId,
    },
    /// No edge of the loop runs as often as the increments (the frequency is a combination
    /// of edge counts, Fig. 8 b/c of the paper; not supported).
    #[error("no edge of the loop of {0} runs as often as its increments")]
    NoMeasuredEdge(NodeId),
    /// A trip-count counter needs exactly one back edge.
    #[error("the loop of {0} has several back edges")]
    SeveralLatches(NodeId),
    /// A trip-count counter is added on entry, so the frame must not end inside the loop.
    #[error("the frame may end inside the loop of {0}")]
    EndsInside(NodeId),
    /// `last - init` is not a multiple of the step, or gives a negative or oversized count.
    #[error("({last} - {init}) / {step} is not a count")]
    BadValue {
        /// Value on entry.
        init: i128,
        /// Value on exit.
        last: i128,
        /// The step.
        step: i64,
    },
    /// The runtime values do not have the placement's shape.
    #[error("expected {expected} values, got {found}")]
    Shape {
        /// Expected number.
        expected: usize,
        /// Number given.
        found: usize,
    },
    /// The recovered counts violate the flow law.
    #[error(transparent)]
    Flow(#[from] FlowError),
}

/// A reducible natural loop (Frenot & Pereira 2024 Definition 3.1; Ball & Larus 1994 §5 for
/// `nat-loop`).
///
/// Invariants: `header` dominates every member; `members` is sorted and holds `header`;
/// `entries` are the structural edges from non-members to `header`, and no structural edge
/// from a non-member enters another member; `exits` are
/// `loop-exits(header)`; `early_exits` the `EarlyExit` edges of members; `latches` the
/// structural edges from members to `header`; no member is the target of a `Reentry` edge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeseLoop {
    /// The loop header (the block of the phi).
    pub header: NodeId,
    /// The blocks of the loop, sorted.
    pub members: Vec<NodeId>,
    /// Edges entering the loop (all go to the header).
    pub entries: Vec<EdgeId>,
    /// Structural edges leaving the loop.
    pub exits: Vec<EdgeId>,
    /// `EarlyExit` edges of members: the frame may end inside the loop.
    pub early_exits: Vec<EdgeId>,
    /// Edges from members back to the header.
    pub latches: Vec<EdgeId>,
    in_loop: IdVec<NodeId, bool>,
}

impl SeseLoop {
    /// The loop of `header`, if it is a reducible natural loop that can carry a SESE counter.
    pub fn new(
        cfg: &Cfg,
        loops: &Loops,
        doms: &Dominators,
        header: NodeId,
    ) -> Result<SeseLoop, SeseError> {
        if !loops.is_loop_entry(header) {
            return Err(SeseError::NotALoop(header));
        }
        if header == cfg.entry() {
            return Err(SeseError::HeaderIsEntry(header));
        }
        let members = loops.nat_loop(header).to_vec();
        let mut in_loop = IdVec::filled(cfg.num_nodes(), false);
        for &m in &members {
            if !doms.dominates(header, m) {
                return Err(SeseError::Irreducible { header, member: m });
            }
            if cfg.reentry(m).is_some() {
                return Err(SeseError::ReentryInside(m));
            }
            in_loop[m] = true;
        }
        // Entries from outside, reachable or not: code reached only through a re-entry edge
        // is dead to the search and to dominance, yet it runs.
        let mut entries = Vec::new();
        for &m in &members {
            for &e in cfg.preds(m) {
                let edge = cfg.edge(e);
                if edge.kind.is_structural() && !in_loop[edge.src] {
                    if m != header {
                        return Err(SeseError::SideEntry { header, edge: e });
                    }
                    entries.push(e);
                }
            }
        }
        let (mut early_exits, mut latches) = (Vec::new(), Vec::new());
        for &m in &members {
            for &e in cfg.succs(m) {
                let edge = cfg.edge(e);
                if edge.kind == EdgeKind::EarlyExit {
                    early_exits.push(e);
                } else if edge.kind.is_structural() && edge.dst == header {
                    latches.push(e);
                }
            }
        }
        early_exits.sort_unstable();
        latches.sort_unstable();
        let exits = loops.loop_exits(header).to_vec();
        if exits.is_empty() && early_exits.is_empty() {
            return Err(SeseError::NoExit(header));
        }
        Ok(SeseLoop {
            header,
            members,
            entries,
            exits,
            early_exits,
            latches,
            in_loop,
        })
    }

    /// Every loop of `cfg` that [`SeseLoop::new`] accepts, by header id.
    pub fn all(cfg: &Cfg) -> Vec<SeseLoop> {
        let dfs = Dfs::compute(cfg);
        let loops = Loops::compute(cfg, &dfs);
        let doms = Dominators::compute(cfg, &dfs);
        loops
            .entries()
            .iter()
            .filter_map(|&h| SeseLoop::new(cfg, &loops, &doms, h).ok())
            .collect()
    }

    /// True if `n` is a block of the loop.
    pub fn contains(&self, n: NodeId) -> bool {
        self.in_loop[n]
    }

    /// True if, in every activation of the loop, the weighted sum `Σ w(e) · count(e)` over the
    /// loop's edges is zero (see the module doc). `w_entry` weighs the entry into the header.
    /// With `early` false, only activations that leave through exit edges are considered.
    fn balanced(&self, cfg: &Cfg, early: bool, w: impl Fn(EdgeId) -> i64, w_entry: i64) -> bool {
        // The loop's edges, sources and targets mapped into the loop with EXIT standing for X.
        let x = cfg.exit();
        let mut edges: Vec<(NodeId, NodeId, i64)> = vec![(x, self.header, w_entry)];
        for &m in &self.members {
            for &e in cfg.succs(m) {
                let edge = cfg.edge(e);
                let keep = edge.kind.is_structural() || (early && edge.kind == EdgeKind::EarlyExit);
                if keep {
                    let dst = if self.in_loop[edge.dst] { edge.dst } else { x };
                    edges.push((m, dst, w(e)));
                }
            }
        }
        // A potential by search over the undirected graph, then a check of every edge.
        let mut adj: IdVec<NodeId, Vec<usize>> = IdVec::filled(cfg.num_nodes(), Vec::new());
        for (i, &(s, d, _)) in edges.iter().enumerate() {
            adj[s].push(i);
            adj[d].push(i);
        }
        let mut pot: IdVec<NodeId, Option<i128>> = IdVec::filled(cfg.num_nodes(), None);
        pot[x] = Some(0);
        let mut stack = vec![x];
        while let Some(v) = stack.pop() {
            let pv = pot[v].unwrap_or(0);
            for &i in &adj[v] {
                let (s, d, wt) = edges[i];
                let (other, p) = if s == v {
                    (d, pv + i128::from(wt))
                } else {
                    (s, pv - i128::from(wt))
                };
                if pot[other].is_none() {
                    pot[other] = Some(p);
                    stack.push(other);
                }
            }
        }
        edges.iter().all(|&(s, d, wt)| match (pot[s], pot[d]) {
            (Some(ps), Some(pd)) => pd - ps == i128::from(wt),
            _ => true,
        })
    }

    /// Weight of "the count of block `b`" in [`SeseLoop::balanced`]: its incoming loop edges,
    /// and the entry if `b` is the header.
    fn block_weight(&self, cfg: &Cfg, b: NodeId, e: EdgeId) -> i64 {
        i64::from(cfg.edge(e).dst == b && self.in_loop[b])
    }

    /// True if, in every activation of the loop (including those the frame ends inside, when
    /// `early`), block `b` runs exactly as often as edge `m` is taken.
    pub fn equivalent(&self, cfg: &Cfg, b: NodeId, m: EdgeId, early: bool) -> bool {
        let w = |e: EdgeId| self.block_weight(cfg, b, e) - i64::from(e == m);
        self.balanced(cfg, early, w, i64::from(b == self.header))
    }

    /// True if, in every activation of the loop, blocks `a` and `b` run equally often.
    pub fn blocks_equivalent(&self, cfg: &Cfg, a: NodeId, b: NodeId, early: bool) -> bool {
        let w = |e: EdgeId| self.block_weight(cfg, a, e) - self.block_weight(cfg, b, e);
        self.balanced(
            cfg,
            early,
            w,
            i64::from(a == self.header) - i64::from(b == self.header),
        )
    }

    /// The structural edges with both ends in the loop, in id order.
    pub fn inner_edges<'a>(&'a self, cfg: &'a Cfg) -> impl Iterator<Item = EdgeId> + 'a {
        self.members.iter().flat_map(move |&m| {
            cfg.succs(m).iter().copied().filter(move |&e| {
                let edge = cfg.edge(e);
                edge.kind.is_structural() && self.in_loop[edge.dst]
            })
        })
    }
}

/// A constant increment `v = u + step` of the counter's variable, in `block`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Increment {
    /// The block of the increment (in the loop).
    pub block: NodeId,
    /// The constant added.
    pub step: i64,
}

/// Where a counter's value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeseKind {
    /// A header phi whose circuit holds only phis and constant increments in control-equivalent
    /// blocks (Definition 3.5): the induction variable of a counted loop (one increment) or a
    /// variable changed only by constants in control-equivalent blocks (several). Its value
    /// `(last - init) / step` is added on every exit edge.
    Affine {
        /// The increments, one per block, in block order.
        increments: Vec<Increment>,
    },
    /// The backedge-taken count, known when the loop is entered (ScalarEvolution): computed
    /// on entry, added on every exit edge; nothing runs inside the loop. Modelled as a
    /// variable with init 0 and step 1.
    TripCount,
}

/// A counter that replaces the edge counter of `measured` in the loop of `header`.
///
/// The variable's `init` is a run-time value: the header phi's incoming value on the loop's
/// entry edges ([`SeseLoop::entries`]), which the front end saves there; `last` is its value on
/// the edge the loop is left by. Per activation the measured edge's count grows by
/// [`SeseCounter::count`]`(init, last)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeseCounter {
    /// The loop header (the block of the phi).
    pub header: NodeId,
    /// Where the value comes from.
    pub kind: SeseKind,
    /// The edge of the loop whose count the value gives (taken once per increment circuit).
    pub measured: EdgeId,
    /// The edges on which the value is added to `measured`'s count: the loop's exit edges.
    pub add_at: Vec<EdgeId>,
    /// The frame may end inside the loop (a member has an `EarlyExit` edge): the value must
    /// also be added when the frame is abandoned there, or the loop kept out.
    pub may_end_inside: bool,
    /// Adding `(current - init) / step` when the frame is abandoned inside the loop is exact
    /// (the equivalence holds for activations ended by early exits too). Always true when
    /// `may_end_inside` is false.
    pub flush_exact: bool,
}

impl SeseCounter {
    /// An affine counter of `lp` with the given increments (Definition 3.5; Theorem 3.10).
    /// Increments in the same block are merged. The measured edge is, among the loop's edges
    /// taken as often as every increment block in every completed activation, one that stays
    /// so when the frame ends inside the loop if there is one, then the heaviest under
    /// `weights` (ties: lowest id): the edge a chord placement would most like to keep
    /// uncounted.
    pub fn affine(
        cfg: &Cfg,
        lp: &SeseLoop,
        increments: &[Increment],
        weights: &IdVec<EdgeId, f64>,
    ) -> Result<SeseCounter, SeseError> {
        let header = lp.header;
        let mut incs: Vec<Increment> = Vec::new();
        for inc in increments {
            if !lp.contains(inc.block) {
                return Err(SeseError::OutsideLoop {
                    header,
                    block: inc.block,
                });
            }
            match incs.iter_mut().find(|i| i.block == inc.block) {
                Some(i) => i.step = i.step.saturating_add(inc.step),
                None => incs.push(*inc),
            }
        }
        incs.retain(|i| i.step != 0);
        incs.sort_by_key(|i| i.block);
        let step: i128 = incs.iter().map(|i| i128::from(i.step)).sum();
        if incs.is_empty() || step == 0 || i64::try_from(step).is_err() {
            return Err(SeseError::ZeroStep(header));
        }
        let first = incs[0].block;
        for inc in &incs[1..] {
            if !lp.blocks_equivalent(cfg, first, inc.block, false) {
                return Err(SeseError::NotControlEquivalent {
                    header,
                    block: inc.block,
                    other: first,
                });
            }
        }
        // Candidates ranked by (exact when the frame ends inside, weight), ties by lowest id.
        let may_end_inside = !lp.early_exits.is_empty();
        let mut best: Option<(bool, EdgeId)> = None;
        for e in lp.inner_edges(cfg) {
            if !lp.equivalent(cfg, first, e, false) {
                continue;
            }
            let flush =
                !may_end_inside || incs.iter().all(|i| lp.equivalent(cfg, i.block, e, true));
            let better = match best {
                None => true,
                Some((bf, b)) => (flush, weights[e])
                    .partial_cmp(&(bf, weights[b]))
                    .is_some_and(|o| o.is_gt()),
            };
            if better {
                best = Some((flush, e));
            }
        }
        let (flush_exact, measured) = best.ok_or(SeseError::NoMeasuredEdge(header))?;
        Ok(SeseCounter {
            header,
            kind: SeseKind::Affine { increments: incs },
            measured,
            add_at: lp.exits.clone(),
            may_end_inside,
            flush_exact,
        })
    }

    /// A trip-count counter of `lp`: its one back edge is taken `trips` times per activation,
    /// `trips` being known on entry and added at the exits. The frame must not be able to end
    /// inside the loop.
    pub fn trip_count(lp: &SeseLoop) -> Result<SeseCounter, SeseError> {
        let header = lp.header;
        if !lp.early_exits.is_empty() {
            return Err(SeseError::EndsInside(header));
        }
        let [measured] = lp.latches[..] else {
            return Err(SeseError::SeveralLatches(header));
        };
        Ok(SeseCounter {
            header,
            kind: SeseKind::TripCount,
            measured,
            add_at: lp.exits.clone(),
            may_end_inside: false,
            flush_exact: true,
        })
    }

    /// The sum of the constant increments (1 for a trip count).
    pub fn step(&self) -> i64 {
        match &self.kind {
            SeseKind::Affine { increments } => increments.iter().map(|i| i.step).sum(),
            SeseKind::TripCount => 1,
        }
    }

    /// The count one activation adds to the measured edge: `(last - init) / step` (Theorem
    /// 3.10), checked to be an exact, non-negative 64-bit count.
    pub fn count(&self, init: i128, last: i128) -> Result<u64, SeseError> {
        let step = self.step();
        let bad = || SeseError::BadValue { init, last, step };
        let diff = last.checked_sub(init).ok_or_else(bad)?;
        if diff % i128::from(step) != 0 {
            return Err(bad());
        }
        u64::try_from(diff / i128::from(step)).map_err(|_| bad())
    }
}

/// An edge placement in which some chords are free: their counts come from SESE counters.
///
/// Invariants: `placement.chords` are the non-tree edges; every free edge is a chord; the
/// incremented chords (`chords` minus free) number exactly |free| fewer than the chords of the
/// same placement without SESE counters (each free edge displaces no other counter).
#[derive(Clone, Debug, PartialEq)]
pub struct SesePlacement {
    /// The spanning tree and all its chords, free ones included.
    pub placement: EdgePlacement,
    /// `(edge, counter)`: the free chords and the index, in the counters given to
    /// [`place_edge_counters_sese`], of the counter that provides each one's count.
    pub free: Vec<(EdgeId, usize)>,
    /// Indices of counters not used: their edge's count already follows from the other free
    /// edges' (a second counter of the same circuit), so they would save nothing.
    pub unused: Vec<usize>,
}

impl SesePlacement {
    /// The chords that carry an increment (or are counted by the runtime), in id order.
    pub fn incremented(&self) -> impl Iterator<Item = EdgeId> + '_ {
        self.placement
            .chords
            .iter()
            .copied()
            .filter(|e| !self.free.iter().any(|&(f, _)| f == *e))
    }
}

/// Edge-counter placement of Ball & Larus 1994 §3.2 with the measured edges of `counters` made free
/// chords (Theorem 3.11): a counter is used when its edge, removed from the graph with the
/// edges of the counters used before it, leaves the tree-eligible edges as connected as before
/// (so a spanning tree avoiding it costs no extra counter); then the tree is the maximum
/// spanning tree of the remaining edges under `weights`, `unsplittable` edges forced in.
pub fn place_edge_counters_sese(
    cfg: &Cfg,
    weights: &IdVec<EdgeId, f64>,
    unsplittable: impl Fn(EdgeId) -> bool,
    counters: &[SeseCounter],
) -> SesePlacement {
    place_sese(cfg, weights, unsplittable, counters, false)
}

/// [`place_edge_counters_sese`] with every `EarlyExit` edge in the tree, like
/// [`place_edge_counters_exits_in_tree`](crate::placement::place_edge_counters_exits_in_tree):
/// the early exits' counts are derived by the flow law, with no frame record. Exact only with
/// counters whose loop the frame cannot end inside (`!may_end_inside`): their values are all
/// added whenever the frame ends, since it ends outside their loops; others are left unused.
pub fn place_edge_counters_sese_exits_in_tree(
    cfg: &Cfg,
    weights: &IdVec<EdgeId, f64>,
    unsplittable: impl Fn(EdgeId) -> bool,
    counters: &[SeseCounter],
) -> SesePlacement {
    place_sese(cfg, weights, unsplittable, counters, true)
}

fn place_sese(
    cfg: &Cfg,
    weights: &IdVec<EdgeId, f64>,
    unsplittable: impl Fn(EdgeId) -> bool,
    counters: &[SeseCounter],
    exits_in_tree: bool,
) -> SesePlacement {
    let eligible = |e: EdgeId| {
        matches!(
            cfg.edge(e).kind,
            EdgeKind::Entry | EdgeKind::Flow | EdgeKind::Return
        )
    };
    let components = |excluded: &[EdgeId]| {
        let mut sets = UnionFind::new(cfg.num_nodes());
        let mut n = cfg.num_nodes();
        for (e, edge) in cfg.edges() {
            if eligible(e)
                && !excluded.contains(&e)
                && sets.union(edge.src.index(), edge.dst.index())
            {
                n -= 1;
            }
        }
        n
    };
    let base = components(&[]);
    let mut free: Vec<(EdgeId, usize)> = Vec::new();
    let mut unused = Vec::new();
    let mut excluded: Vec<EdgeId> = Vec::new();
    for (k, c) in counters.iter().enumerate() {
        excluded.push(c.measured);
        if (exits_in_tree && c.may_end_inside)
            || excluded[..excluded.len() - 1].contains(&c.measured)
            || components(&excluded) != base
        {
            excluded.pop();
            unused.push(k);
        } else {
            free.push((c.measured, k));
        }
    }
    let class = |e| {
        if excluded.contains(&e) {
            TreeClass::Excluded
        } else if unsplittable(e) {
            TreeClass::Forced
        } else {
            TreeClass::Weighted(weights[e])
        }
    };
    let tree = if exits_in_tree {
        max_spanning_tree_exits_in_tree(cfg, class)
    } else {
        max_spanning_tree(cfg, class)
    };
    let chords = tree.chords().collect();
    free.sort_unstable();
    SesePlacement {
        placement: EdgePlacement { tree, chords },
        free,
        unused,
    }
}

/// Every edge count from what the runtime holds when the function's frames are all finished:
/// `chord_values[e]` for each incremented chord `e` (other entries are ignored) and
/// `sese_values[k]` for counter `k` (the sum over its activations of the counts it added).
/// Ball & Larus 1994 Fig. 6 then derives the tree edges.
pub fn recover(
    cfg: &Cfg,
    placement: &SesePlacement,
    chord_values: &IdVec<EdgeId, u64>,
    sese_values: &[u64],
) -> Result<IdVec<EdgeId, u64>, SeseError> {
    if chord_values.len() != cfg.num_edges() {
        return Err(SeseError::Shape {
            expected: cfg.num_edges(),
            found: chord_values.len(),
        });
    }
    let mut measured = IdVec::filled(cfg.num_edges(), None);
    for e in placement.incremented() {
        measured[e] = Some(chord_values[e]);
    }
    for &(e, k) in &placement.free {
        let v = *sese_values.get(k).ok_or(SeseError::Shape {
            expected: k + 1,
            found: sese_values.len(),
        })?;
        measured[e] = Some(v);
    }
    Ok(propagate(cfg, &measured)?)
}
