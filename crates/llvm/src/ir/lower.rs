//! Lowering an optimized LLVM function to a [`Cfg`] (Ball & Larus 1994 §2, with the
//! early-termination edges of §3.2 / Fig. 7), plus the IR positions needed to instrument each
//! vertex and edge.
//!
//! Vertices are the IR blocks in layout order, except that a block is cut after every call to a
//! `setjmp`-like function: the code after the call becomes a vertex of its own, entered by a
//! `Flow` fall-through edge (first return) and a `Reentry` edge from EXIT (return via
//! `longjmp`). Every vertex containing a call that may leave the frame without returning gets
//! an `EarlyExit` edge. Ids are assigned deterministically from the IR, so every mode built from
//! the same source and flags sees the same graph.

use crate::ir::ends::{may_end_frame, AttrKinds, NeverEndsCaller, SETJMP_NAMES};
use crate::ir::{self, Bb, SrcPos, Val};
use llvm_sys::{LLVMOpcode, LLVMTailCallKind};
use std::collections::HashMap;
use tally_graph::{Cfg, EdgeKind, NodeId};

/// IR facts about one vertex (a block, or the part of a block after a setjmp call).
#[derive(Clone, Debug)]
pub(crate) struct NodeIr {
    /// Code "at the start of the vertex" is inserted before this instruction.
    pub start: Val,
    /// Code "at the end of the vertex" is inserted before this instruction: the terminator, the
    /// `tail` call preceding a `ret` (so it stays a tail call), or the setjmp call that ends
    /// the vertex.
    pub end: Val,
    /// The first call of the vertex that may end the frame early.
    pub first_site: Option<Val>,
    /// Calls marked `tail` that stay sites (their marker must be dropped: the runtime reads the
    /// frame record while they run).
    pub tail_sites: Vec<Val>,
    /// The setjmp call this vertex follows, if any.
    pub after_setjmp: Option<Val>,
    /// The vertex starts a landing pad.
    pub landing_pad: bool,
    /// The vertex ends the function normally (`ret` / `resume`): the frame record is popped.
    pub returns: bool,
    /// Source position of the vertex.
    pub pos: SrcPos,
    /// The IR instructions of the vertex, as lowered (before any instrumentation).
    pub instrs: Vec<Val>,
}

/// IR facts about one edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EdgeIr {
    /// `EXIT -> entry`.
    Entry,
    /// Successor `index` of terminator `term`; `splittable` when a block can be inserted on it.
    Succ {
        term: Val,
        index: u32,
        splittable: bool,
    },
    /// From the part of a block before a setjmp call to the part after it.
    Fallthrough,
    /// From the part of a block before a pseudo-probe that follows calls that may end the frame
    /// to the part from the probe on: counted at the probe, after the calls returned.
    AfterCalls,
    /// `ret` / `resume`.
    Return,
    /// Frame abandoned inside the vertex.
    EarlyExit,
    /// Second return of the setjmp call that starts the vertex.
    Reentry,
}

/// A function lowered to a graph.
pub(crate) struct Lowered {
    pub cfg: Cfg,
    pub nodes: Vec<NodeIr>,
    pub edges: Vec<EdgeIr>,
    pub has_landing_pads: bool,
    pub has_setjmp: bool,
}

impl Lowered {
    /// The function may end early (an early-exit edge, a landing pad or a setjmp): edge, vertex
    /// and path modes keep a frame record for it, or derive its early exits.
    pub(crate) fn may_end_early(&self) -> bool {
        self.cfg.edges().any(|(_, e)| e.kind == EdgeKind::EarlyExit)
            || self.has_landing_pads
            || self.has_setjmp
    }
}

/// Why a function is left uninstrumented.
pub(crate) type Skip = String;

/// A call to a function of [`SETJMP_NAMES`] that returns an integer (a declaration such as
/// `void vfork ();` gives no second return to tell apart, and is left an ordinary call).
fn is_setjmp(call: Val) -> bool {
    call.called_function()
        .is_some_and(|f| SETJMP_NAMES.contains(&f.name().as_str()))
        // SAFETY: `call` is a live instruction.
        && unsafe {
            llvm_sys::core::LLVMGetTypeKind(llvm_sys::core::LLVMTypeOf(call.0))
                == llvm_sys::LLVMTypeKind::LLVMIntegerTypeKind
        }
}

fn is_tail_marked(v: Val) -> bool {
    v.opcode() == LLVMOpcode::LLVMCall
        && matches!(
            v.tail_kind(),
            LLVMTailCallKind::LLVMTailCallKindTail | LLVMTailCallKind::LLVMTailCallKindMustTail
        )
}

/// The call a `ret` returns the result of, if it is marked `tail`/`musttail` and sits right
/// before the `ret`.
fn tail_call_before_ret(term: Val) -> Option<Val> {
    let prev = term.prev()?;
    if !is_tail_marked(prev) {
        return None;
    }
    if term.num_operands() == 1 && term.operand(0) != prev {
        return None;
    }
    Some(prev)
}

/// Position of the first instruction with a line that is code ([`ir::is_not_code`]: a loop
/// header's PHIs carry the line of an assignment before the loop).
fn first_pos(instrs: &[Val]) -> SrcPos {
    for v in instrs.iter().filter(|v| !ir::is_not_code(**v)) {
        if let Some(loc) = v.debug_loc() {
            let p = ir::location_pos(loc);
            if p.line != 0 {
                return p;
            }
        }
    }
    SrcPos::default()
}

/// Position of the last instruction with a line that is code.
fn last_line(instrs: &[Val]) -> Option<SrcPos> {
    instrs
        .iter()
        .rev()
        .filter(|v| !ir::is_not_code(**v))
        .find_map(|v| {
            let p = ir::location_pos(v.debug_loc()?);
            (p.line != 0).then_some(p)
        })
}

/// One vertex under construction: the IR block and the instruction range it covers.
struct Seg {
    bb: Bb,
    /// Instructions of the segment (PHIs and landingpad included for the first segment).
    instrs: Vec<Val>,
    after_setjmp: Option<Val>,
    /// The segment starts at a pseudo-probe that follows a call that may end the frame.
    at_probe: bool,
    /// True for the last segment of its block (the one holding the terminator).
    last: bool,
}

/// Lowers `f` (a defined function) to its graph.
pub(crate) fn lower(f: Val, kinds: &AttrKinds, safe: &NeverEndsCaller) -> Result<Lowered, Skip> {
    if f.fn_has_attr(kinds.naked) {
        return Err("naked function".into());
    }
    let blocks = f.blocks();
    let mut segs: Vec<Seg> = Vec::new();
    let mut first_node: HashMap<Bb, usize> = HashMap::new();
    let mut has_landing_pads = false;
    let mut has_setjmp = false;
    // A build with pseudo-probes: its calls carry call-site probe ids too.
    let probed = blocks.iter().any(|bb| {
        bb.instructions()
            .into_iter()
            .any(crate::ir::probes::is_probe)
    });
    for &bb in &blocks {
        let instrs = bb.instructions();
        let Some(&term) = instrs.last() else {
            return Err("block without instructions".into());
        };
        if !matches!(
            term.opcode(),
            LLVMOpcode::LLVMRet
                | LLVMOpcode::LLVMBr
                | LLVMOpcode::LLVMSwitch
                | LLVMOpcode::LLVMIndirectBr
                | LLVMOpcode::LLVMInvoke
                | LLVMOpcode::LLVMUnreachable
                | LLVMOpcode::LLVMCallBr
                | LLVMOpcode::LLVMResume
        ) {
            return Err(format!("unsupported terminator {:?}", term.opcode()));
        }
        first_node.insert(bb, segs.len());
        let mut cur: Vec<Val> = Vec::new();
        let mut after: Option<Val> = None;
        let (mut at_probe, mut may_end) = (false, false);
        for &v in &instrs {
            match v.opcode() {
                LLVMOpcode::LLVMCatchPad | LLVMOpcode::LLVMCleanupPad => {
                    return Err("funclet-based exception handling".into())
                }
                LLVMOpcode::LLVMLandingPad => has_landing_pads = true,
                _ => {}
            }
            // A pseudo-probe after a call that may end the frame (blocks merged by the early
            // simplification) starts a vertex: it runs as often as the calls before it return,
            // not as often as the block is entered (docs/pgo.md). So does a call with a
            // call-site probe, whose count is the number of calls (a sample profile's call
            // lines, `tally_format::DirectCall`).
            if may_end
                && (crate::ir::probes::is_probe(v)
                    || (probed && crate::ir::probes::has_call_probe(v)))
            {
                segs.push(Seg {
                    bb,
                    instrs: std::mem::take(&mut cur),
                    after_setjmp: after.take(),
                    at_probe,
                    last: false,
                });
                (at_probe, may_end) = (true, false);
            }
            cur.push(v);
            may_end |= v.is_call_like() && may_end_frame(v, kinds, safe);
            if v.is_call_like() && is_setjmp(v) {
                if v.opcode() != LLVMOpcode::LLVMCall {
                    return Err("setjmp called through invoke".into());
                }
                has_setjmp = true;
                segs.push(Seg {
                    bb,
                    instrs: std::mem::take(&mut cur),
                    after_setjmp: after,
                    at_probe,
                    last: false,
                });
                after = Some(v);
                (at_probe, may_end) = (false, false);
            }
        }
        segs.push(Seg {
            bb,
            instrs: cur,
            after_setjmp: after,
            at_probe,
            last: true,
        });
    }

    let num_blocks = segs.len();
    let exit = NodeId::new(num_blocks);
    let mut nodes = Vec::with_capacity(num_blocks);
    let mut edge_list: Vec<(NodeId, NodeId, EdgeKind)> = Vec::new();
    let mut edges = vec![EdgeIr::Entry];

    let mut last_pos = SrcPos::default();
    for (i, seg) in segs.iter().enumerate() {
        let me = NodeId::new(i);
        let term = *seg.instrs.last().expect("a segment is never empty");
        // Start: first instruction that is neither PHI nor landingpad (first segment), or the
        // instruction after the setjmp call, or the probe a split starts at.
        let start = if seg.after_setjmp.is_some() || seg.at_probe {
            seg.instrs[0]
        } else {
            seg.bb
                .insertion_start()
                .ok_or_else(|| "block without a non-PHI instruction".to_string())?
        };
        // Split before a probe: the segment's every instruction is its body.
        let split_before_probe = segs.get(i + 1).is_some_and(|n| n.at_probe && !seg.last);
        let (end, body_end) = if split_before_probe {
            (term, seg.instrs.len())
        } else if !seg.last {
            (term, seg.instrs.len() - 1)
        } else if term.opcode() == LLVMOpcode::LLVMRet {
            match tail_call_before_ret(term) {
                Some(tc) => (tc, seg.instrs.len() - 2),
                None => (term, seg.instrs.len() - 1),
            }
        } else if term.opcode() == LLVMOpcode::LLVMInvoke {
            // The invoke itself is a call of the vertex.
            (term, seg.instrs.len())
        } else {
            (term, seg.instrs.len() - 1)
        };
        let body = &seg.instrs[..body_end];
        let mut first_site = None;
        let mut tail_sites = Vec::new();
        for &v in body {
            if v.is_call_like() && may_end_frame(v, kinds, safe) {
                if first_site.is_none() {
                    first_site = Some(v);
                }
                if is_tail_marked(v) {
                    tail_sites.push(v);
                }
            }
        }
        let landing_pad = seg.after_setjmp.is_none() && !seg.at_probe && seg.bb.is_landing_pad();
        let returns =
            seg.last && matches!(term.opcode(), LLVMOpcode::LLVMRet | LLVMOpcode::LLVMResume);

        if seg.after_setjmp.is_some() {
            edge_list.push((exit, me, EdgeKind::Reentry));
            edges.push(EdgeIr::Reentry);
        }
        if split_before_probe {
            edge_list.push((me, NodeId::new(i + 1), EdgeKind::Flow));
            edges.push(EdgeIr::AfterCalls);
        } else if !seg.last {
            edge_list.push((me, NodeId::new(i + 1), EdgeKind::Flow));
            edges.push(EdgeIr::Fallthrough);
        } else {
            let op = term.opcode();
            for k in 0..term.num_successors() {
                let succ = term.successor(k);
                let Some(&t) = first_node.get(&succ) else {
                    return Err("successor outside the function".into());
                };
                let splittable = match op {
                    LLVMOpcode::LLVMBr | LLVMOpcode::LLVMSwitch => true,
                    LLVMOpcode::LLVMInvoke => k == 0,
                    _ => false,
                };
                edge_list.push((me, NodeId::new(t), EdgeKind::Flow));
                edges.push(EdgeIr::Succ {
                    term,
                    index: k,
                    splittable,
                });
            }
            if returns {
                edge_list.push((me, exit, EdgeKind::Return));
                edges.push(EdgeIr::Return);
            }
        }
        if first_site.is_some() {
            edge_list.push((me, exit, EdgeKind::EarlyExit));
            edges.push(EdgeIr::EarlyExit);
        }
        nodes.push(NodeIr {
            start,
            end,
            first_site,
            tail_sites,
            after_setjmp: seg.after_setjmp,
            landing_pad,
            returns,
            instrs: seg.instrs.clone(),
            pos: {
                // A vertex without any located instruction (a dispatch block made of an
                // indirectbr, say) is shown at the last line before it in layout order, as a
                // line table would.
                let p = first_pos(&seg.instrs);
                if p.line != 0 {
                    last_pos = last_line(&seg.instrs).unwrap_or_else(|| p.clone());
                    p
                } else {
                    last_pos.clone()
                }
            },
        });
    }
    let cfg = Cfg::new(num_blocks, edge_list).map_err(|e| format!("bad graph: {e}"))?;
    debug_assert_eq!(cfg.num_edges(), edges.len());
    Ok(Lowered {
        cfg,
        nodes,
        edges,
        has_landing_pads,
        has_setjmp,
    })
}
