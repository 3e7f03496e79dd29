//! A set function's code: entry, edges, call sites and returns.

use super::code::{runtime, Ip, Isolated, Record, Slots};
use super::IpathPlan;
use crate::emit::build::{const_null, i8_type, struct_type};
use crate::emit::frame::{frame_alloca, frame_exits, frame_plan, frame_push};
use crate::emit::sites::{direct_site, Realize};
use crate::emit::surgery::split_edge;
use crate::emit::Emitter;
use crate::ir::lower::EdgeIr;
use crate::ir::{self, Val};
use crate::modes::EmitCx;
use llvm_sys::{LLVMIntPredicate, LLVMOpcode};
use tally_graph::ipaths::{CallAction, EdgeAction, Lin};
use tally_graph::{EdgeId, NodeId};

/// The first instruction of `bb` that is neither a phi nor a landingpad.
fn first_non_phi(bb: ir::Bb) -> Val {
    let mut v = bb.first().expect("blocks have a terminator");
    while matches!(v.opcode(), LLVMOpcode::LLVMPHI | LLVMOpcode::LLVMLandingPad) {
        v = v.next().expect("blocks end with a terminator");
    }
    v
}

/// Piecewise, outside isolated functions: `open` saved before summary call `call` and restored
/// after it (a root abandoned inside never restored it).
fn save_open_around(p: &IpathPlan, ip: &Ip, em: &Emitter, call: Val, isolated: bool) {
    if !p.piecewise || isolated {
        return;
    }
    ip.store(ip.load(ip.rt.open), ip.s.call_open);
    let after = match call.next() {
        Some(next) => next,
        None => split_edge(em, call, 0)
            .terminator()
            .expect("split block has its branch"),
    };
    em.at(after);
    ip.store(ip.load(ip.s.call_open), ip.rt.open);
}

/// Instruments one function of the set.
pub(super) fn emit(cx: &EmitCx, p: &IpathPlan) {
    let (g, l, func) = (cx.g, cx.l, cx.func);
    let em = crate::modes::path::emitter_at_entry(g, func);
    let alloca = |name: &str| em.alloca(g.i64t, name);
    let s = Slots {
        reg: alloca("tally.ip.reg"),
        nvc: alloca("tally.ip.nvc"),
        on_entry: alloca("tally.ip.on_entry"),
        root: alloca("tally.ip.root"),
        saved_reg: alloca("tally.ip.saved_reg"),
        saved_open: alloca("tally.ip.saved_open"),
        call_open: alloca("tally.ip.call_open"),
        own_open: alloca("tally.ip.open"),
    };
    let record = l.may_end_early().then(|| {
        let rec = frame_alloca(&em);
        let site_ty = struct_type(g, &[g.ptrt, g.i64t]);
        let site = em.alloca(site_ty, "tally.ip.site");
        Record { rec, site, site_ty }
    });
    // An isolated function with an array keeps `reg` relative to the array's first path:
    // every value it holds is then a small number (the counter index), as in path mode.
    let bias = match (p.isolated, p.array) {
        (true, Some(a)) => u128::from(a.first),
        _ => 0,
    };
    let isolated = match (p.isolated, p.plan.entry.root_value) {
        (true, Some(root_value)) => Some(Isolated {
            root_value: root_value.wrapping_sub(bias),
            open: s.own_open,
        }),
        _ => None,
    };
    let last_alloca = Val(record.as_ref().map_or(s.own_open, |r| r.site));
    let (table, home) = crate::module::path_table(g, 0, p.owner);
    if p.path_meta.is_some() {
        for bank in 1..p.banks {
            crate::module::path_table(g, bank, p.owner);
        }
    }
    let ip = Ip {
        em: &em,
        s,
        rt: runtime(g),
        table,
        home,
        root_exit: p.plan.entry.root_exit_value,
        can_be_root: p.plan.entry.root_value.is_some(),
        isolated,
        array_offset: p.array.filter(|_| isolated.is_some()).map(|_| cx.base),
        array_checked: p
            .array
            .filter(|_| isolated.is_none())
            .map(|a| (a.first, u64::from(a.len), em.counter_ptr(cx.base))),
        piecewise: p.piecewise,
        banks: p.banks,
        bias,
    };

    // The frame record first (§9.2: the stack of pending paths): pushed where path mode pushes
    // it, popped at returns, told where an exception or a longjmp landed. Then what must
    // precede every call site's code at a block's start: piecewise, `open` restored at landing
    // pads (the exception left it as the abandoned activations had it), and the restart at
    // re-entries.
    if let Some(r) = &record {
        let (at, pops) = frame_plan(l);
        em.at(l.nodes[at.index()].start);
        frame_push(&em, r.rec, None);
        let f0 = em.struct_gep(r.site_ty, r.site, 0);
        em.store(ip.table, f0);
        frame_exits(&em, l, r.rec, &pops);
        for node in &l.nodes {
            if node.landing_pad && p.piecewise && isolated.is_none() {
                em.at(node.start);
                ip.store(ip.load(ip.s.call_open), ip.rt.open);
            }
        }
        for (e, &act) in p.plan.edges.iter() {
            if l.edges[e.index()] == EdgeIr::Reentry {
                let node = &l.nodes[l.cfg.edge(e).dst.index()];
                let sj = node.after_setjmp.expect("a re-entry follows a setjmp call");
                em.at(node.start);
                ip.reentry(act, sj);
            }
        }
    }

    // Call sites: their code sits right before and right after the call, so code placed
    // later at a block's start or end stays outside it.
    // The node and value of the path site the last summary call stored: the following summary
    // calls of the node up to a direct call store the same (`reg` does not change inside a
    // node, and `abandon` is that of the whole run), so only the first of a run stores.
    let mut stored: Option<(NodeId, Lin)> = None;
    for (site, (&call, act)) in p.sites.iter().zip(&p.plan.calls).enumerate() {
        em.at(call);
        let node = p.site_nodes[site];
        if stored.is_some_and(|(n, _)| n != node) {
            stored = None;
        }
        match *act {
            CallAction::Summary { abandon } => {
                // An isolated function cleared the handshake at its entry and sets none.
                if isolated.is_none() {
                    em.store(const_null(g.ptrt), ip.rt.hand_fn);
                }
                if p.tail_ret[site] {
                    continue; // the activation has returned
                }
                if let (Some(l), Some(r)) = (abandon, &record) {
                    if stored == Some((node, l)) {
                        save_open_around(p, &ip, &em, call, isolated.is_some());
                        continue;
                    }
                    stored = Some((node, l));
                    // The path that ends if the activation is abandoned in this call.
                    let nvc = ip.nvc();
                    let v = ip.add(ip.load(ip.s.reg), ip.lin(l, nvc));
                    if let Some(offset) = ip.array_offset {
                        // Its counter, as path mode's array sites.
                        em.store(ip.counter_of(v, offset), em.field(r.rec, 1));
                        save_open_around(p, &ip, &em, call, isolated.is_some());
                        continue;
                    }
                    let f1 = em.struct_gep(r.site_ty, r.site, 1);
                    ip.store(v, f1);
                    let one = em.i64c(1);
                    let tagged = em.gep(i8_type(g), r.site, &[one]);
                    em.store(tagged, em.field(r.rec, 1));
                }
                save_open_around(p, &ip, &em, call, isolated.is_some());
            }
            CallAction::Direct {
                psi_r,
                unmatched_value,
                unmatched_nvc,
                clears_site,
                ..
            } => {
                stored = None;
                if let (true, Some(r)) = (clears_site, &record) {
                    em.store(const_null(g.ptrt), em.field(r.rec, 1));
                }
                let (callee, named) = p.callees[site].expect("direct sites name their callee");
                ip.store(ip.load(ip.s.reg), ip.rt.reg);
                if named {
                    ip.store(callee.0, ip.rt.hand_fn);
                }
                let nvc = ip.load(ip.s.nvc);
                ip.store(ip.lin(psi_r, nvc), ip.rt.hand_nvc);
                if p.piecewise {
                    let o = ip.add(ip.load(ip.rt.open), ip.k(1));
                    ip.store(o, ip.rt.open);
                }
                em.at(call.next().expect("a call is not a terminator"));
                ip.store(ip.load(ip.rt.reg), ip.s.reg);
                if named {
                    em.store(const_null(g.ptrt), ip.rt.hand_fn);
                }
                if p.piecewise {
                    let o = ip.load(ip.rt.open);
                    let zero = em.icmp(LLVMIntPredicate::LLVMIntEQ, o, ip.k(0));
                    let r = ip.load(ip.s.reg);
                    let r2 = ip.add(r, ip.k(unmatched_value));
                    ip.store(ip.select(zero, r2, r), ip.s.reg);
                    let n = ip.select(zero, ip.k(unmatched_nvc), ip.load(ip.s.nvc));
                    ip.store(n, ip.s.nvc);
                    let o1 = em.sub(o, ip.k(1));
                    ip.store(ip.select(zero, ip.k(0), o1), ip.rt.open);
                }
            }
        }
    }

    // Edge actions. Those at the start of a block first, as path mode does: in a block whose
    // only instruction is its terminator the start and the end are the same point.
    let at_start = |e: EdgeId| matches!(direct_site(l, e), Some(Realize::NodeStart(_)));
    let edges = || p.plan.edges.iter().map(|(e, &a)| (e, a));
    let in_order = edges()
        .filter(|&(e, _)| at_start(e))
        .chain(edges().filter(|&(e, _)| !at_start(e)));
    for (e, act) in in_order {
        let runtime = matches!(l.edges[e.index()], EdgeIr::EarlyExit | EdgeIr::Reentry);
        if act == EdgeAction::None || runtime {
            continue;
        }
        let at = match direct_site(l, e).expect("checked by ineligible") {
            Realize::NodeEnd(n) => l.nodes[n.index()].end,
            Realize::NodeStart(n) => first_non_phi(l.nodes[n.index()].start.parent()),
            Realize::Split(_) => {
                let EdgeIr::Succ { term, index, .. } = l.edges[e.index()] else {
                    unreachable!("only terminator edges are split")
                };
                split_edge(&em, term, index)
                    .terminator()
                    .expect("split block has its branch")
            }
            other => unreachable!("edge {e} realized as {other:?}"),
        };
        em.at(at);
        ip.edge(act, at);
    }

    // The entry, right after the allocas: take the handshake or start a root path.
    em.at(last_alloca
        .next()
        .expect("the allocas precede the entry code"));
    let act = p.plan.entry;
    if let Some(i) = isolated {
        // Always a root, and it leaves the thread's register and `open` alone: no handshake
        // to take, nothing to save. The handshake is cleared (as a summary call would), so
        // that a stale one (a signal between a direct call's store and its entry) is not
        // taken by a function this one calls.
        em.store(const_null(g.ptrt), ip.rt.hand_fn);
        if p.piecewise {
            ip.store(ip.k(1), ip.s.nvc);
            ip.store(ip.k(1), i.open);
        }
        let r = ip.add(ip.k(i.root_value), ip.lin(act.start, ip.k(1)));
        ip.store(r, ip.s.reg);
        return;
    }
    if !ip.can_be_root {
        // Only ever entered by direct calls, which leave the handshake unnamed: take it.
        let nvc = ip.load(ip.rt.hand_nvc);
        let reg = ip.load(ip.rt.reg);
        ip.store(nvc, ip.s.nvc);
        ip.store(reg, ip.s.on_entry);
        let r = ip.add(reg, ip.lin(act.start, nvc));
        ip.store(r, ip.s.reg);
        return;
    }
    let hf = em.load(g.ptrt, ip.rt.hand_fn);
    let taken = em.icmp(LLVMIntPredicate::LLVMIntEQ, hf, func.0);
    let hn = ip.load(ip.rt.hand_nvc);
    let treg = ip.load(ip.rt.reg);
    let topen = ip.load(ip.rt.open);
    let nvc = ip.select(taken, hn, ip.k(1));
    let reg = ip.select(taken, treg, ip.k(act.root_value.unwrap_or(0)));
    let notaken = em.not(taken);
    let root = em.zext(notaken, g.i64t);
    ip.store(root, ip.s.root);
    ip.store(treg, ip.s.saved_reg);
    ip.store(topen, ip.s.saved_open);
    let hf2 = ip.select(taken, const_null(g.ptrt), hf);
    em.store(hf2, ip.rt.hand_fn);
    ip.store(ip.select(taken, topen, ip.k(1)), ip.rt.open);
    ip.store(nvc, ip.s.nvc);
    ip.store(reg, ip.s.on_entry);
    let r = ip.add(reg, ip.lin(act.start, nvc));
    ip.store(r, ip.s.reg);
}
