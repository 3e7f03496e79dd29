//! Context cuts: direct calls an instrumenter may make summary edges so that the paths of a
//! callee's loops are counted in an array of its own rather than in a hash table under its
//! caller's context (tally's storage policy for the interprocedural path modes; Melski & Reps
//! 1998's Transformation 3, which it applies to recursive calls and calls leaving the set, applied
//! to calls of the set chosen by their cost).
//!
//! # Why
//!
//! A function that may be a root counts the paths of its own range
//! ([`IpNumbering::own_paths`]) in an array when the range is small (at most path mode's
//! [`ARRAY_PATHS`](crate::paths::ARRAY_PATHS)); every other path goes to the set's hash table,
//! an inline probe of about eight instructions instead of one increment. A context path that
//! restarts at a back edge of a directly called function `q` keeps the pending calls (§3.4), so
//! it lies in the range of the root `R` whose activation made those calls: when `R`'s range is
//! large (zlib's `deflate_slow`, 2·10^8 paths, calls `longest_match`) every iteration of `q`'s
//! loops is hashed, and its `reg` increments are `a·nvc + b` rather than constants. In
//! piecewise mode the pieces after a restart start at `GEntry_q` and lie in `q`'s own range,
//! which the ways back into its callers make large (zlib's `longest_match`: 15170).
//!
//! # Which calls
//!
//! Direct call site `f -> q` (after [`IpNumbering::new_limited`]'s demotions) is named when
//!
//! - `q` *loops*: it or a function it calls directly (transitively) restarts a path at a back
//!   or cut edge;
//! - the paths are many (hashed, and so many that a run sees few of them): the largest own
//!   range of a root whose activations can reach `f` through direct calls (`f`'s own if it may
//!   be a root) exceeds `context_paths`, or, piecewise, `q`'s own range does (tally: 2^16;
//!   a set whose ranges are below it keeps every call, hashed or not);
//! - and `q` would fit as a root: `ψ_Entry_q(1)` (piecewise plus `ψ_GEntry_q(1)`) is at most
//!   the array threshold, so that cutting the call moves `q`'s paths into an array.
//!
//! A cut call is a summary edge: the caller's path goes on across it and `q` starts a path of
//! its own, as for a call through a pointer. What is lost is the calling context of the paths
//! through `q` entered by that call (the caller's path prefix before it, and the caller's path
//! after `q`'s return), which is why the rule cuts only where the hash table would otherwise
//! count each of `q`'s iterations.
//!
//! # Where it pays
//!
//! The rule above looks at path counts only, and names calls whose callee rarely loops: on
//! bzip2 it cut `add_pair_to_block` (a run-length loop of one iteration per call, mostly)
//! and `mainGtU` (whose loop is reached after twelve early returns), which cost every
//! crossing path run of the program (45.7% of the runs) and saved nothing
//! (docs/log/ipaths.md). A cut saves the table probe of each of `q`'s restarts (each iteration
//! of its loops) and loses the context of about one path per call, so
//! [`IpNumbering::context_cuts_where`] also asks that the callee be hot: its estimated
//! restarts per call ([`IpNumbering::restarts_per_call`]: the executions of its back and cut
//! edges per call, plus each direct call's block frequency times the callee's restarts)
//! reach a threshold ([`Heat`]). The weights are data (the instrumenter passes LLVM's static
//! estimate, `BlockFrequencyInfo` times `BranchProbabilityInfo` per call, or a measured
//! profile's counts divided by the function's calls), so the rule stays pure.

use super::runtime::{CallAction, EdgeAction};
use super::supergraph::{Mode, Vertex};
use super::{FnId, IpNumbering, IpathError};
use crate::ids::{EdgeId, IdVec};

impl IpNumbering {
    /// The direct call sites `(caller, site)` to cut (module doc): where the paths are more
    /// than `context_paths` (at least the array threshold) and the callee would fit an array
    /// of `array_paths`; empty when none qualifies. Cutting them and numbering again
    /// may qualify others (ranges shrink, a callee becomes a root): an instrumenter repeats
    /// until this is empty, which ends since each round removes direct calls.
    pub fn context_cuts(
        &self,
        array_paths: u128,
        context_paths: u128,
    ) -> Result<Vec<(FnId, u32)>, IpathError> {
        self.context_cuts_where(array_paths, context_paths, None)
    }

    /// [`context_cuts`](Self::context_cuts), keeping only the calls whose callee is hot
    /// (module doc, "Where it pays"): with `heat`, a call qualifies only when the callee's
    /// estimated restarts per call ([`restarts_per_call`](Self::restarts_per_call)) are at
    /// least `heat.min_restarts`.
    pub fn context_cuts_where(
        &self,
        array_paths: u128,
        context_paths: u128,
        heat: Option<&Heat<'_>>,
    ) -> Result<Vec<(FnId, u32)>, IpathError> {
        let restarts = match heat {
            Some(h) => Some(self.restarts_per_call(h.weights)?),
            None => None,
        };
        let g = self.graph();
        let n = g.functions().len();
        let plans = g
            .functions()
            .map(|f| self.plan(f))
            .collect::<Result<Vec<_>, _>>()?;
        let own = |f: usize| {
            let r = self.own_paths(FnId::new(f));
            r.end - r.start
        };
        let direct: Vec<Vec<(u32, usize)>> = plans
            .iter()
            .map(|p| {
                p.calls
                    .iter()
                    .enumerate()
                    .filter_map(|(s, a)| match *a {
                        CallAction::Direct { callee, .. } => Some((s as u32, callee.index())),
                        CallAction::Summary { .. } => None,
                    })
                    .collect()
            })
            .collect();
        // The direct call graph is acyclic (recursive sites are summary edges), so both
        // propagations below reach their fixpoint within `n` rounds.
        let mut loops: Vec<bool> = plans
            .iter()
            .map(|p| {
                p.edges.iter().any(|(_, a)| {
                    matches!(
                        a,
                        EdgeAction::ContextRestart { .. } | EdgeAction::PieceRestart { .. }
                    )
                })
            })
            .collect();
        let mut ctx: Vec<u128> = (0..n)
            .map(|f| match plans[f].entry.root_value {
                Some(_) => own(f),
                None => 0,
            })
            .collect();
        for _ in 0..=n {
            let mut changed = false;
            for f in 0..n {
                for &(_, q) in &direct[f] {
                    if loops[q] && !loops[f] {
                        loops[f] = true;
                        changed = true;
                    }
                    if ctx[q] < ctx[f] {
                        ctx[q] = ctx[f];
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let piecewise = self.mode() == Mode::Piecewise;
        let root_size = |q: usize| {
            let q = FnId::new(q);
            let entry = self.psi(Vertex::Entry(q)).eval(1).unwrap_or(u128::MAX);
            if piecewise {
                let gentry = self.psi(Vertex::GEntry(q)).eval(1).unwrap_or(u128::MAX);
                entry.saturating_add(gentry)
            } else {
                entry
            }
        };
        let mut out = Vec::new();
        for f in 0..n {
            for &(s, q) in &direct[f] {
                let hashed = ctx[f] > context_paths || (piecewise && own(q) > context_paths);
                let hot = restarts
                    .as_ref()
                    .is_none_or(|r| heat.is_some_and(|h| r[q] >= h.min_restarts));
                if loops[q] && hashed && hot && root_size(q) <= array_paths {
                    out.push((FnId::new(f), s));
                }
            }
        }
        Ok(out)
    }

    /// Every function's estimated restarts per call: how often a path of the function or of
    /// a function it calls directly (transitively) ends at a back or cut edge, per entry of
    /// the function. `weights[f][e]` is the estimated executions of edge `e` of `f`'s graph
    /// per call of `f` (any non-negative estimate: a static frequency estimate, or measured
    /// counts divided by the function's calls); a direct call contributes its block's
    /// frequency (the sum of the block's incoming edges) times the callee's restarts per
    /// call. Weights that are not finite or are negative count as 0; a function whose
    /// weights do not match its graph's edges is an error.
    pub fn restarts_per_call(
        &self,
        weights: &[IdVec<EdgeId, f64>],
    ) -> Result<Vec<f64>, IpathError> {
        let g = self.graph();
        let n = g.functions().len();
        if weights.len() != n {
            return Err(IpathError::Weights {
                func: FnId::new(weights.len().min(n)),
            });
        }
        let w = |f: usize, e: EdgeId| {
            let x = weights[f][e];
            if x.is_finite() && x > 0.0 {
                x
            } else {
                0.0
            }
        };
        let mut own = vec![0.0_f64; n];
        // `(block frequency, callee)` of every direct call.
        let mut direct: Vec<Vec<(f64, usize)>> = vec![Vec::new(); n];
        for f in g.functions() {
            let k = f.index();
            let cfg = g.cfg(f);
            if weights[k].len() != cfg.num_edges() {
                return Err(IpathError::Weights { func: f });
            }
            let plan = self.plan(f)?;
            for (e, a) in plan.edges.iter() {
                if matches!(
                    a,
                    EdgeAction::ContextRestart { .. } | EdgeAction::PieceRestart { .. }
                ) {
                    own[k] += w(k, e);
                }
            }
            for (s, a) in plan.calls.iter().enumerate() {
                if let CallAction::Direct { callee, .. } = *a {
                    let block = g.calls(f)[s].block;
                    let freq: f64 = cfg.preds(block).iter().map(|&e| w(k, e)).sum();
                    direct[k].push((freq, callee.index()));
                }
            }
        }
        // The direct call graph is acyclic: `n` rounds reach the fixpoint.
        let mut r = own.clone();
        for _ in 0..=n {
            let next: Vec<f64> = (0..n)
                .map(|f| own[f] + direct[f].iter().map(|&(b, q)| b * r[q]).sum::<f64>())
                .collect();
            if next == r {
                break;
            }
            r = next;
        }
        Ok(r)
    }
}

/// How hot a callee must be for [`IpNumbering::context_cuts_where`] to cut a call to it.
#[derive(Copy, Clone, Debug)]
pub struct Heat<'w> {
    /// Per function (by [`FnId`] index), the estimated executions of each edge of its graph
    /// per call of the function.
    pub weights: &'w [IdVec<EdgeId, f64>],
    /// The least estimated restarts per call of the callee
    /// ([`IpNumbering::restarts_per_call`]) for which a call is cut.
    pub min_restarts: f64,
}
