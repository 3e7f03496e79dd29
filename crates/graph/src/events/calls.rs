//! Calls as queries, and per-call-site counters (Ball 1994 §4 and footnote 3).
//!
//! # Calls as queries
//!
//! All functions share the counter, so a query in a callee is exact only if every activation
//! suspended in a call has an exact contribution. §4 makes each call a query point: "immediately
//! before a call the event counter is incremented by the query increment for the call, and
//! immediately after the call the event counter is decremented by the same value". A call in
//! block `v` after `k` of `v`'s events has query increment `q = QueryInc(Within(v, k))`.
//! Every call that may run instrumented code or may not return must be a [`CallSite`]; calls
//! that do neither need nothing.
//!
//! Adjustments, per block with calls at offsets `k_1 <= ... <= k_m` ([`SiteAdjust`]):
//!
//! - before the first call `+q_1`; after the last call `-q_m`;
//! - between two calls, `-q_i` after the first and `+q_{i+1}` before the second merge into
//!   `+(k_{i+1} - k_i)` before the second (no code when no events lie between them);
//! - footnote 3, "incorporating [the increment or decrement] into the increment of nearby
//!   chords": `+q_1` is folded into the edge entering `v` when that is `v`'s only incoming edge,
//!   a `Flow` edge and an instrumented chord (it then runs exactly once before each execution of
//!   the first call); `-q_m` is folded into `v`'s outgoing edges when all of them, early exits
//!   aside, are instrumented chords (one of them runs after every normal completion of the last
//!   call, none when it does not return). A fold never adds code; it can turn a chord's
//!   increment to 0 and remove code.
//!
//! `after` runs on every path by which control stays in the frame after the call: for an
//! `invoke`, on both its normal and its unwind edge. The counter is exact at every call, so an
//! abandoned frame needs no correction (module doc of [`events`](super)); the `Reentry`
//! increments are unchanged, because a re-entered block has two incoming edges or a `Reentry`
//! one and never gets a fold.
//!
//! **Tail calls.** For a call that is its block's last event (`events_before = events[v]`) and
//! whose block's only normal successor is a `Return` edge, `after` plus that edge's increment is
//! always 0 (both are `±QueryInc(End(v))` or both 0), so the front end applies `before` only.
//!
//! # Queries between calls
//!
//! A point of a block with calls is named by its offset `k` and the number `j` of the block's
//! calls completed before it ([`CallPlan::query_inc`]): before the first call the query
//! increment is the plain plan's `QueryInc(Within(v, k))`, or `k - k_1` if `+q_1` was folded;
//! between calls `j` and `j + 1` it is `k - k_j`; after the last call it is the plain plan's
//! value, or `k - k_m` if `-q_m` was folded.
//!
//! # Per-call-site counters `cnt_{P,s}`
//!
//! §4 keeps for each call site `s` a global counter `cnt_{P,s}` of the events executed inside
//! the calls from `s`, callees included, and a local `Lcnt_{P,s}`. With one global counter the
//! runtime reads it immediately before the call (after `before`: exact) into the local, and
//! immediately after the call returns (before `after`: exact again) adds the difference,
//! [`inclusive_events`]. This needs no knowledge of the callee, so indirect calls work. As in
//! the paper, a call is reflected only when it terminates; a call that never returns (its
//! frame abandoned) adds nothing unless the runtime, abandoning the frame, adds `counter - L`
//! itself, which is exact then. Recursion through one site counts the inner calls again in the
//! outer ones (inclusive semantics).

use super::increments::{classify, instrumented, zero_chords};
use super::{edge_amount, node_amount, EdgeAction, EventError, EventPlan};
use crate::cfg::{Cfg, EdgeKind};
use crate::ids::{EdgeId, IdVec, NodeId};

/// A call inside a block, after `events_before` of the block's events (whether the call
/// instruction's own events come before or after it is the front end's choice).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct CallSite {
    /// The block containing the call.
    pub block: NodeId,
    /// Events of the block executed before the call.
    pub events_before: u64,
}

/// The counter adjustments of one call site. Zero means no code.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct SiteAdjust {
    /// Added immediately before the call; afterwards the counter is exact.
    pub before: i64,
    /// Added immediately after the call, on every path by which control stays in the frame.
    pub after: i64,
    /// The query increment of the call in the plain plan, `QueryInc(Within(block, events_before))`.
    pub query_inc: i64,
}

/// An [`EventPlan`] with calls made exact (§4), adjustments folded into chords (footnote 3).
///
/// Invariants: `block_sites[v]` lists the sites of `v` by offset (ties by input order); the
/// increments differ from the plain plan's only on the edges named by `folded_entry` and on the
/// outgoing edges of blocks with `folded_exits`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CallPlan {
    events: IdVec<NodeId, u64>,
    plain_start: IdVec<NodeId, i64>,
    increment: IdVec<EdgeId, i64>,
    action: IdVec<EdgeId, EdgeAction>,
    offsets: Vec<u64>,
    sites: Vec<SiteAdjust>,
    block_sites: IdVec<NodeId, Vec<usize>>,
    folded_entry: IdVec<NodeId, Option<EdgeId>>,
    folded_exits: IdVec<NodeId, bool>,
    start: IdVec<NodeId, i64>,
    end: IdVec<NodeId, i64>,
}

impl CallPlan {
    /// Adjusts `plan` (computed for `cfg`) for the call sites `sites`.
    pub fn compute(
        cfg: &Cfg,
        plan: &EventPlan,
        sites: &[CallSite],
    ) -> Result<CallPlan, EventError> {
        if plan.events.len() != cfg.num_nodes() {
            return Err(EventError::EventCountMismatch {
                expected: cfg.num_nodes(),
                found: plan.events.len(),
            });
        }
        if plan.increment.len() != cfg.num_edges() {
            return Err(EventError::EdgeCountMismatch {
                expected: cfg.num_edges(),
                found: plan.increment.len(),
            });
        }
        let mut block_sites: IdVec<NodeId, Vec<usize>> = IdVec::filled(cfg.num_nodes(), Vec::new());
        for (i, s) in sites.iter().enumerate() {
            if s.block.index() >= cfg.num_blocks() {
                return Err(EventError::NotABlock { node: s.block });
            }
            let events = plan.events[s.block];
            if s.events_before > events {
                return Err(EventError::PastEnd {
                    node: s.block,
                    events_before: s.events_before,
                    events,
                });
            }
            block_sites[s.block].push(i);
        }
        let offsets: Vec<u64> = sites.iter().map(|s| s.events_before).collect();
        let mut adjust = Vec::with_capacity(sites.len());
        for s in sites {
            let query_inc = i128::from(plan.start[s.block]) + i128::from(s.events_before);
            adjust.push(SiteAdjust {
                before: 0,
                after: 0,
                query_inc: node_amount(query_inc, s.block)?,
            });
        }
        let mut inc: Vec<i128> = plan.increment.values().iter().map(|&x| x.into()).collect();
        let mut folded_entry = IdVec::filled(cfg.num_nodes(), None);
        let mut folded_exits = IdVec::filled(cfg.num_nodes(), false);
        let is_add = |e: EdgeId| matches!(plan.action[e], EdgeAction::Add(_));
        for v in cfg.blocks() {
            let list = &mut block_sites[v];
            list.sort_by_key(|&i| (offsets[i], i));
            let (Some(&first), Some(&last)) = (list.first(), list.last()) else {
                continue;
            };
            // Before the first call.
            match cfg.preds(v) {
                &[e] if cfg.edge(e).kind == EdgeKind::Flow && is_add(e) => {
                    inc[e.index()] += i128::from(adjust[first].query_inc);
                    folded_entry[v] = Some(e);
                }
                _ => adjust[first].before = adjust[first].query_inc,
            }
            // Between calls.
            for pair in list.windows(2) {
                let gap = i128::from(offsets[pair[1]]) - i128::from(offsets[pair[0]]);
                adjust[pair[1]].before = node_amount(gap, v)?;
            }
            // After the last call.
            let mut outs = cfg
                .succs(v)
                .iter()
                .copied()
                .filter(|&f| cfg.edge(f).kind != EdgeKind::EarlyExit);
            if outs.clone().all(is_add) {
                for f in outs.by_ref() {
                    inc[f.index()] -= i128::from(adjust[last].query_inc);
                }
                folded_exits[v] = true;
            } else {
                adjust[last].after = -adjust[last].query_inc;
            }
        }

        let mut increment = Vec::with_capacity(cfg.num_edges());
        let mut action = Vec::with_capacity(cfg.num_edges());
        for (e, edge) in cfg.edges() {
            let x = edge_amount(inc[e.index()], e)?;
            increment.push(x);
            action.push(classify(edge.kind, plan.in_tree[e], x));
        }
        let mut out = CallPlan {
            events: plan.events.clone(),
            plain_start: plan.start.clone(),
            increment: IdVec::from_vec(increment),
            action: IdVec::from_vec(action),
            offsets,
            sites: adjust,
            block_sites,
            folded_entry,
            folded_exits,
            start: plan.start.clone(),
            end: plan.end.clone(),
        };
        for v in cfg.blocks() {
            let calls = out.block_sites[v].len();
            out.start[v] = out.query_inc(v, 0, 0)?;
            out.end[v] = out.query_inc(v, out.events[v], calls)?;
        }
        Ok(out)
    }

    /// The adjustments of every call site, in input order.
    pub fn sites(&self) -> &[SiteAdjust] {
        &self.sites
    }

    /// The sites of block `v` (indices into the input) in execution order.
    pub fn block_sites(&self, v: NodeId) -> &[usize] {
        &self.block_sites[v]
    }

    /// The edge that carries `+q` of `v`'s first call, if that was folded (footnote 3).
    pub fn folded_entry(&self, v: NodeId) -> Option<EdgeId> {
        self.folded_entry[v]
    }

    /// True if `v`'s outgoing edges carry `-q` of its last call (footnote 3), or if `v` has
    /// calls and no outgoing edge but early exits, so that nothing runs after its calls.
    pub fn folded_exits(&self, v: NodeId) -> bool {
        self.folded_exits[v]
    }

    /// The increment of edge `e` with the folds: what [`CallPlan::action`] adds, or for an
    /// `EarlyExit` edge the plain plan's value.
    pub fn increment(&self, e: EdgeId) -> i64 {
        self.increment[e]
    }

    /// What the program does when `e` is traversed.
    pub fn action(&self, e: EdgeId) -> EdgeAction {
        self.action[e]
    }

    /// The edges that carry code, with their non-zero increments, in id order.
    pub fn instrumented(&self) -> impl Iterator<Item = (EdgeId, i64)> + '_ {
        instrumented(&self.action)
    }

    /// The chords whose increment (after folding) is 0, in id order.
    pub fn zero_chords(&self) -> impl Iterator<Item = EdgeId> + '_ {
        zero_chords(&self.action)
    }

    /// The query increment at the start of block `v` (before its events and calls).
    ///
    /// # Panics
    /// If `v` is not a vertex of the plan's graph.
    pub fn query_start(&self, v: NodeId) -> i64 {
        self.start[v]
    }

    /// The query increment at the end of block `v` (after its events and calls).
    ///
    /// # Panics
    /// If `v` is not a vertex of the plan's graph.
    pub fn query_end(&self, v: NodeId) -> i64 {
        self.end[v]
    }

    /// The query increment inside `block` after `events_before` of its events and `calls_done`
    /// of its calls (at a call, `calls_done` counts the calls before it: the query increment
    /// there is 0 once its `before` has been applied).
    pub fn query_inc(
        &self,
        block: NodeId,
        events_before: u64,
        calls_done: usize,
    ) -> Result<i64, EventError> {
        let (Some(&events), Some(list)) = (
            self.events.values().get(block.index()),
            self.block_sites.values().get(block.index()),
        ) else {
            return Err(EventError::NotABlock { node: block });
        };
        if events_before > events {
            return Err(EventError::PastEnd {
                node: block,
                events_before,
                events,
            });
        }
        let k = |j: usize| list.get(j).map(|&i| self.offsets[i]);
        let lo = if calls_done == 0 {
            Some(0)
        } else {
            k(calls_done - 1)
        };
        let hi = if calls_done == list.len() {
            Some(events)
        } else {
            k(calls_done)
        };
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return Err(self.not_between(block, events_before, calls_done));
        };
        if events_before < lo || events_before > hi {
            return Err(self.not_between(block, events_before, calls_done));
        }
        let plain = i128::from(self.plain_start[block]) + i128::from(events_before);
        let since_call = i128::from(events_before) - i128::from(lo);
        let value = if list.is_empty() {
            plain
        } else if calls_done == 0 {
            match self.folded_entry[block] {
                Some(_) => i128::from(events_before) - i128::from(hi),
                None => plain,
            }
        } else if calls_done < list.len() || self.folded_exits[block] {
            since_call
        } else {
            plain
        };
        node_amount(value, block)
    }

    fn not_between(&self, node: NodeId, events_before: u64, calls_done: usize) -> EventError {
        EventError::NotBetweenCalls {
            node,
            events_before,
            calls_done,
            calls: self.block_sites[node].len(),
        }
    }
}

/// §4: the events executed inside one call, callees included, from the counter read
/// immediately before the call (after its `before` adjustment) and immediately after it
/// returns (before its `after` adjustment). The counter wraps, so this is a wrapping
/// difference; `cnt_{P,s}` accumulates it with a wrapping add.
pub fn inclusive_events(before: u64, after: u64) -> u64 {
    after.wrapping_sub(before)
}

#[cfg(test)]
mod tests {
    use super::super::fig1::{self, B, C, R};
    use super::*;

    fn call_plan(events: &IdVec<NodeId, u64>, sites: &[CallSite]) -> CallPlan {
        match CallPlan::compute(&fig1::cfg(), &fig1::plan(events), sites) {
            Ok(p) => p,
            Err(err) => panic!("{err}"),
        }
    }

    #[test]
    fn figure_1_call_in_b() {
        // §4's example: B calls X. The query increment of the call is QueryInc(B) = -R -C;
        // B's only incoming edge y is a chord, so +q folds into it (y: +P +Q +B), and B's
        // only successor is a tree edge, so -q stays after the call.
        let site = |ev: &IdVec<NodeId, u64>| CallSite {
            block: B,
            events_before: ev[B],
        };
        let s = |f: &dyn Fn(&CallPlan) -> i64| fig1::symbolic(|ev| f(&call_plan(ev, &[site(ev)])));
        assert_eq!(s(&|p| p.sites()[0].query_inc), "-R -C");
        assert_eq!(s(&|p| p.sites()[0].before), "0");
        assert_eq!(s(&|p| p.sites()[0].after), "+R +C");
        assert_eq!(s(&|p| p.increment(fig1::Y)), "+P +Q +B");
        assert_eq!(s(&|p| p.query_start(B)), "-B");
        assert_eq!(s(&|p| p.query_end(B)), "-R -C");
        let p = call_plan(&fig1::powers(), &[site(&fig1::powers())]);
        assert_eq!(p.folded_entry(B), Some(fig1::Y));
        assert!(!p.folded_exits(B));
    }

    #[test]
    fn calls_in_r_merge_and_stay_explicit() {
        // R has two incoming edges (no entry fold); its successors are a tree edge and z.
        // Two calls after 3 and 10 of R's 16 events: +q1, then +7 between, then -q2.
        let events = fig1::powers();
        let sites = [
            CallSite {
                block: R,
                events_before: 10,
            },
            CallSite {
                block: R,
                events_before: 3,
            },
        ];
        let p = call_plan(&events, &sites);
        let q_start = -32 - 16; // QueryInc(Start(R)) = -C -R
        assert_eq!(p.block_sites(R), &[1, 0]);
        assert_eq!(p.sites()[1].before, q_start + 3);
        assert_eq!(p.sites()[0].before, 7);
        assert_eq!(p.sites()[0].after, -(q_start + 10));
        assert_eq!(p.sites()[1].after, 0);
        assert_eq!(p.query_inc(R, 5, 1), Ok(2));
        assert_eq!(p.query_inc(R, 12, 2), Ok(q_start + 12));
        assert!(matches!(
            p.query_inc(R, 5, 2),
            Err(EventError::NotBetweenCalls { .. })
        ));
        assert!(matches!(
            p.query_inc(R, 1, 3),
            Err(EventError::NotBetweenCalls { .. })
        ));
        // C's only successor is a tree edge: nothing folds there.
        let p = call_plan(
            &events,
            &[CallSite {
                block: C,
                events_before: 0,
            }],
        );
        assert_eq!(p.folded_entry(C), None);
        assert!(!p.folded_exits(C));
    }

    #[test]
    fn tail_call_adjustments_cancel() {
        // A call as the last event of EXIT-block n6, whose only successor is the Return edge.
        let g = fig1::cfg();
        for events in [fig1::powers(), IdVec::filled(8, 0)] {
            let site = CallSite {
                block: fig1::X,
                events_before: events[fig1::X],
            };
            let p = call_plan(&events, &[site]);
            let ret = g.succs(fig1::X)[0];
            assert_eq!(p.sites()[0].after + p.action(ret).amount(), 0);
        }
    }

    #[test]
    fn bad_sites_are_errors() {
        let g = fig1::cfg();
        let plan = fig1::plan(&fig1::powers());
        let exit = CallSite {
            block: g.exit(),
            events_before: 0,
        };
        assert_eq!(
            CallPlan::compute(&g, &plan, &[exit]),
            Err(EventError::NotABlock { node: g.exit() })
        );
        let past = CallSite {
            block: B,
            events_before: 9,
        };
        assert_eq!(
            CallPlan::compute(&g, &plan, &[past]),
            Err(EventError::PastEnd {
                node: B,
                events_before: 9,
                events: 8
            })
        );
    }

    #[test]
    fn inclusive_events_wrap() {
        assert_eq!(inclusive_events(5, 12), 7);
        assert_eq!(inclusive_events(u64::MAX - 1, 3), 5);
    }
}
