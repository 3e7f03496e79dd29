//! The tables regeneration looks up, built once per function ([`Tables::new`]): per block how it
//! is left (for a predicate, its hops by witness value: Ball & Larus 1994 §4.1, Fig. 14's
//! choice by `wit`), per edge what traversing it does.

use super::*;

impl Tables {
    /// `index_limit`: a predicate's hops are indexed by value where its values span at most
    /// `max(index_limit, 4 * choices)` (0: only where they are `0..choices`, searched otherwise).
    pub(super) fn new(t: &Traced, base: u32, index_limit: usize) -> Tables {
        let cfg = &t.input.cfg;
        // (A path-number plan has no witnesses to choose by: no witness sets to compute.)
        let table = if t.plan.kind == PlanKind::Paths {
            IdVec::filled(cfg.num_nodes(), Vec::new())
        } else {
            choice_table(&t.input, &t.plan)
        };
        // (A path-number plan that does not number is refused by `check_plan`; here it is
        // read as a plan without witnesses, which regeneration reports where it goes wrong.)
        let numbered = (t.plan.kind == PlanKind::Paths)
            .then(|| crate::witness::paths::paths_plan(&t.input).ok())
            .flatten();
        let mut callees = Vec::new();
        let mut choice = Vec::new();
        let edges = cfg
            .edges()
            .map(|(e, edge)| EdgeAct {
                dst: edge.dst,
                ret: edge.kind == EdgeKind::Return,
                witness: t.plan.witness[e].map(|w| (w.value, w.bits)),
            })
            .collect();
        let edges: IdVec<EdgeId, EdgeAct> = IdVec::from_vec(edges);
        let pacts = match &numbered {
            None => Vec::new(),
            Some(nd) => {
                let dag = nd.dag();
                cfg.edges()
                    .map(|(e, _)| {
                        let mut act = PathAct {
                            pval: 0,
                            pnum: 1,
                            pend: false,
                            pnext: 0,
                        };
                        match dag.image(e) {
                            CfgImage::Kept(d) => {
                                act.pval = nd.val(d) as u64;
                                act.pnum = nd.num_paths(dag.edge(d).dst) as u64;
                                act.pend = dag.edge(d).dst == dag.end();
                            }
                            CfgImage::Back { end, start } | CfgImage::Cut { end, start } => {
                                act.pval = nd.val(end) as u64;
                                act.pend = true;
                                act.pnext = nd.val(start) as u64;
                            }
                            _ => {}
                        }
                        act
                    })
                    .collect()
            }
        };
        let pacts: IdVec<EdgeId, PathAct> = IdVec::from_vec(pacts);
        let act = |e: EdgeId| edges[e];
        let mut blocks = Vec::with_capacity(cfg.num_nodes());
        for v in cfg.nodes() {
            let start = callees.len() as u32;
            callees.extend(t.input.calls[v].iter().map(|c| c.callee));
            let sites = start..callees.len() as u32;
            let mut outs = t.input.normal_succs(v);
            let leave = match (outs.next(), outs.next()) {
                (None, _) => Leave::None,
                (Some(e), None) => Leave::One(e, act(e)),
                (Some(_), Some(_)) if numbered.is_some() => {
                    let start = choice.len() as u32;
                    choice.extend(t.input.normal_succs(v));
                    Leave::Path {
                        start,
                        len: choice.len() as u32 - start,
                    }
                }
                (Some(_), Some(_)) => Leave::Choice,
            };
            let resume = cfg
                .succs(v)
                .iter()
                .copied()
                .find(|&e| t.input.unwind[e] && cfg.edge(e).kind == EdgeKind::Return);
            blocks.push(BlockTab {
                sites,
                leave,
                resume,
            });
        }
        // The fast walk's tables: `blocks[..].leave` with each edge's action a `Hop`, and each
        // predicate's choices (witness value -> out-edge) from the choice table.
        let hop = |e: EdgeId| {
            let a = edges[e];
            let mut flags = 0;
            if a.witness.is_some() {
                flags |= HOP_WITNESS;
            }
            if a.ret {
                flags |= HOP_RET;
            }
            // (Opaque sites do nothing in regeneration: the walk passes through them.)
            if !a.ret && t.input.is_call_vertex(a.dst) {
                flags |= HOP_STOP;
            }
            let (wval, wbits) = a.witness.unwrap_or((0, 0));
            Hop {
                next: OTHER,
                edge: e,
                dst: a.dst,
                slot: base + e.index() as u32,
                wval,
                wbits,
                flags,
            }
        };
        const OTHER: Walk = Walk {
            start: 0,
            len: 0,
            bits: 0,
            kind: WalkKind::Other,
        };
        let mut walk = Vec::with_capacity(blocks.len());
        let mut hops = Vec::new();
        let mut hop_values = Vec::new();
        for (v, b) in cfg.nodes().zip(&blocks) {
            let start = hops.len() as u32;
            let w = match b.leave {
                Leave::One(e, _) => {
                    hops.push(hop(e));
                    hop_values.push(0);
                    Walk {
                        start,
                        len: 1,
                        bits: 0,
                        kind: WalkKind::One,
                    }
                }
                Leave::Choice => {
                    // (value, out-edge), sorted by value.
                    let c = &table[v];
                    let bits = t.plan.read_bits[v];
                    let len = c.len();
                    let dense = c.iter().enumerate().all(|(i, &(x, _))| x as usize == i);
                    // Indexed by value where the values span a small range (holes: hops
                    // marked `HOP_NONE`), searched otherwise.
                    let span = c.last().map_or(0, |&(x, _)| x as usize + 1);
                    if dense || (index_limit > 0 && span <= (4 * len).max(index_limit)) {
                        let none = Hop {
                            next: OTHER,
                            edge: EdgeId::new(0),
                            dst: NodeId::new(0),
                            slot: 0,
                            wval: 0,
                            wbits: 0,
                            flags: HOP_NONE,
                        };
                        hops.resize(start as usize + span, none);
                        hop_values.resize(start as usize + span, 0);
                        for &(x, e) in c {
                            hops[start as usize + x as usize] = hop(e);
                        }
                        Walk {
                            start,
                            len: span as u32,
                            bits,
                            kind: WalkKind::Dense,
                        }
                    } else {
                        hops.extend(c.iter().map(|&(_, e)| hop(e)));
                        hop_values.extend(c.iter().map(|&(x, _)| x));
                        Walk {
                            start,
                            len: len as u32,
                            bits,
                            kind: WalkKind::Sparse,
                        }
                    }
                }
                Leave::None | Leave::Path { .. } => Walk {
                    start,
                    len: 0,
                    bits: 0,
                    kind: WalkKind::Other,
                },
            };
            walk.push(w);
        }
        for h in &mut hops {
            if h.flags & (HOP_NONE | HOP_RET) == 0 {
                h.next = walk[h.dst.index()];
            }
        }
        let paths = numbered.map(|nd| {
            let bits = crate::witness::paths::path_bits(nd.total());
            let entry = match nd.dag().image(cfg.entry_edge()) {
                CfgImage::Start(d) => nd.val(d) as u64,
                _ => 0,
            };
            (nd, bits, entry)
        });
        Tables {
            paths,
            blocks: IdVec::from_vec(blocks),
            callees,
            choice,
            edges,
            pacts,
            walk,
            hops,
            hop_values,
        }
    }

    /// The hop of predicate `w` that witness `value` chooses.
    #[inline(always)]
    pub(super) fn pick(&self, w: Walk, value: u32) -> Option<&Hop> {
        let (start, len) = (w.start as usize, w.len as usize);
        if w.kind == WalkKind::Dense {
            return ((value as usize) < len)
                .then(|| &self.hops[start + value as usize])
                .filter(|h| h.flags & HOP_NONE == 0);
        }
        let values = &self.hop_values[start..start + len];
        let i = if len <= 8 {
            values.iter().position(|&v| v == value)
        } else {
            values.binary_search(&value).ok()
        };
        i.map(|i| &self.hops[start + i])
    }
}
