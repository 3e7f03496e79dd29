//! Counter plans: which edge or block each counter of a function measures, and where in the IR its
//! increment goes. The modes that count edges or blocks (`modes::edge` and `modes::vertex` through
//! [`crate::counters::place`], `modes::naive`, and `modes::trace_naive`, which logs the same sites)
//! choose the measured edges; [`Plan::for_edges`] turns them into counters with sites
//! ([`crate::emit::sites`]), counting the targets of edges that have no site of their own with
//! predecessor tags: every incoming edge of the target stores its index in a per-target frame slot,
//! and the target increments `counter[base + tag]`.

use crate::emit::sites::{direct_site, Realize};
use crate::ir::lower::Lowered;
use tally_format::Probe;
use tally_graph::{EdgeId, NodeId};

/// A vertex counted through predecessor tags.
#[derive(Clone, Debug)]
pub(crate) struct TagTarget {
    /// The vertex.
    pub node: NodeId,
    /// Function-relative index of the counter of its first incoming edge; incoming edge `j`
    /// (in `cfg.preds(node)` order) has counter `first_counter + j`.
    pub first_counter: usize,
}

/// The counter plan of one function.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Counter `i` (function-relative) measures `counters[i].0` and is realized as `.1`.
    pub counters: Vec<(Probe, Realize)>,
    /// Vertices counted through tags.
    pub tag_targets: Vec<TagTarget>,
    /// The function keeps a shadow-stack frame record (edge mode, may end early).
    pub shadow: bool,
    /// `vertex` mode: chords left without a counter (Fig. 11), taken as 0 by Fig. 8.
    pub zero_edges: Vec<EdgeId>,
    /// `vertex` mode: edges whose count is not determined.
    pub unknown_edges: Vec<EdgeId>,
}

impl Plan {
    /// One counter at the start of every block (the "redundant" placement of Ball & Larus 1994
    /// §6.1).
    pub(crate) fn for_blocks(l: &Lowered) -> Plan {
        Plan {
            counters: l
                .cfg
                .blocks()
                .map(|n| (Probe::Block(n.into()), Realize::NodeStart(n)))
                .collect(),
            tag_targets: Vec::new(),
            shadow: false,
            zero_edges: Vec::new(),
            unknown_edges: Vec::new(),
        }
    }

    /// A counter for each of the `measured` edges, at its site or through its target's tags.
    pub(crate) fn for_edges(l: &Lowered, measured: &[EdgeId], shadow: bool) -> Plan {
        let cfg = &l.cfg;
        // Targets that need tags: every measured edge without a direct site.
        let mut tag_nodes: Vec<NodeId> = measured
            .iter()
            .filter(|&&e| direct_site(l, e).is_none())
            .map(|&e| cfg.edge(e).dst)
            .collect();
        tag_nodes.sort();
        tag_nodes.dedup();

        let mut counters: Vec<(Probe, Realize)> = Vec::new();
        for &e in measured {
            if tag_nodes.contains(&cfg.edge(e).dst) {
                continue; // counted with the target's tags below
            }
            let r = direct_site(l, e).expect("edges without a direct site are tagged");
            counters.push((Probe::Edge(e.into()), r));
        }
        let mut tag_targets = Vec::new();
        for &node in &tag_nodes {
            tag_targets.push(TagTarget {
                node,
                first_counter: counters.len(),
            });
            for &e in cfg.preds(node) {
                counters.push((Probe::Edge(e.into()), Realize::Tagged { target: node }));
            }
        }
        Plan {
            counters,
            tag_targets,
            shadow,
            zero_edges: Vec::new(),
            unknown_edges: Vec::new(),
        }
    }

    /// Counters placed on split edges (each costs a jump besides the increment).
    pub(crate) fn split(&self) -> usize {
        self.counters
            .iter()
            .filter(|(_, r)| matches!(r, Realize::Split(_)))
            .count()
    }

    /// Counters incremented through predecessor tags.
    pub(crate) fn tagged(&self) -> usize {
        self.counters
            .iter()
            .filter(|(_, r)| matches!(r, Realize::Tagged { .. }))
            .count()
    }
}
