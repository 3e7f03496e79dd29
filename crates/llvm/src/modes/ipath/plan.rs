//! The set of functions and their numbering: the [`super::ModulePlan`] of a module.

use super::{IpathPlan, ModulePlan, CONTEXT_CUT_PATHS, LIMIT, MAX_BANKS, SET_PER_BANK};
use crate::emit::sites::direct_site;
use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::Val;
use crate::options::{IpathCuts, HOT_RESTARTS};
use llvm_sys::prelude::*;
use llvm_sys::{LLVMLinkage, LLVMOpcode, LLVMTailCallKind};
use std::collections::HashMap;
use tally_format::{IpathArray, IpathCall, IpathFunction, IpathMeta, PathMeta, PathStorage};
use tally_graph::ipaths::{CallAction, FnId, FunctionPlan, Heat, IpNumbering, Mode};
use tally_graph::{EdgeId, IdVec, NodeId};

/// The call instructions of a function that are call sites, in site order.
fn call_insts(l: &Lowered) -> Vec<(NodeId, u32, Val)> {
    let mut out = Vec::new();
    for (i, node) in l.nodes.iter().enumerate() {
        for (pos, &v) in node.instrs.iter().enumerate() {
            let is_call = matches!(v.opcode(), LLVMOpcode::LLVMCall | LLVMOpcode::LLVMInvoke);
            if is_call
                && !v.calls_inline_asm()
                && v.called_function().is_none_or(|f| f.intrinsic_id() == 0)
            {
                out.push((NodeId::new(i), pos as u32, v));
            }
        }
    }
    out
}

/// Why function `l` cannot be in the set, if it cannot.
pub(super) fn ineligible(l: &Lowered) -> Option<&'static str> {
    for node in &l.nodes {
        for &v in &node.instrs {
            if v.opcode() == LLVMOpcode::LLVMCallBr {
                return Some("it has a callbr");
            }
            if v.opcode() == LLVMOpcode::LLVMCall
                && v.tail_kind() == LLVMTailCallKind::LLVMTailCallKindMustTail
            {
                return Some("it has a musttail call");
            }
        }
    }
    for (e, _) in l.cfg.edges() {
        if let EdgeIr::Succ { .. } = l.edges[e.index()] {
            if direct_site(l, e).is_none() {
                return Some("an edge can be neither split nor placed at one of its ends");
            }
        }
    }
    None
}

fn is_local(f: Val) -> bool {
    matches!(
        f.linkage(),
        LLVMLinkage::LLVMInternalLinkage | LLVMLinkage::LLVMPrivateLinkage
    )
}

fn num_uses(f: Val) -> usize {
    f.users().len()
}

/// The estimated executions of each edge of `l`'s graph per call of the function, for the
/// cut rule's heat ([`tally_graph::ipaths::Heat`]): measured counts (`--tally-weights`)
/// divided by the function's calls when the profile has the function, else LLVM's static
/// estimate ([`crate::ir::estimate`]). Must run before the function is changed.
fn call_weights(
    fv: Val,
    l: &Lowered,
    measured: Option<&crate::options::Weights>,
) -> IdVec<EdgeId, f64> {
    let counts = measured
        .and_then(|w| w.get(&(fv.name(), l.cfg.shape_hash())))
        .filter(|c| c.len() == l.cfg.num_edges());
    match counts {
        Some(c) => {
            let calls = c[l.cfg.entry_edge().index()];
            IdVec::from_vec(
                c.iter()
                    .map(|&x| {
                        if calls == 0 {
                            0.0
                        } else {
                            x as f64 / calls as f64
                        }
                    })
                    .collect(),
            )
        }
        None => crate::ir::estimate::estimated_weights(fv, l),
    }
}

/// Builds the set, numbers it and plans each member.
pub(super) fn plan_module(
    funcs: &[(Val, &Lowered)],
    piecewise: bool,
    cuts: IpathCuts,
    weights: Option<&crate::options::Weights>,
) -> ModulePlan {
    let members: Vec<usize> = (0..funcs.len())
        .filter(|&i| ineligible(funcs[i].1).is_none())
        .collect();
    let fn_of: HashMap<LLVMValueRef, usize> = members
        .iter()
        .enumerate()
        .map(|(k, &i)| (funcs[i].0 .0, k))
        .collect();
    // Functions that end with a `tail` call after their return's code: whatever that call
    // does (call back into the set, exit, longjmp) happens after the activation has returned
    // (trace modes log the return first), while its caller would still wait in a direct call.
    // Such functions, and those with landing pads (a `resume` leaves through the caller), are
    // only ever called by summary edges: the caller's path waits at the call, and the callee
    // is a root.
    let tail_ret: Vec<bool> = members
        .iter()
        .map(|&i| {
            let l = funcs[i].1;
            call_insts(l).iter().any(|&(n, _, v)| {
                let node = &l.nodes[n.index()];
                node.returns && node.end == v
            })
        })
        .collect();
    let mut direct_uses = vec![0usize; members.len()];
    let mut sites = Vec::with_capacity(members.len());
    let mut metas = Vec::with_capacity(members.len());
    for &i in &members {
        let (_, l) = funcs[i];
        let insts = call_insts(l);
        let mut calls = Vec::with_capacity(insts.len());
        for &(n, pos, v) in &insts {
            let node = &l.nodes[n.index()];
            let ends_return = node.returns && node.end == v;
            let invoke = v.opcode() == LLVMOpcode::LLVMInvoke;
            let callee = v
                .called_function()
                .filter(|&f| is_local(f) && !ends_return && !invoke)
                .and_then(|f| fn_of.get(&f.0).copied())
                .filter(|&k| !funcs[members[k]].1.has_landing_pads && !tail_ret[k]);
            if let Some(k) = callee {
                direct_uses[k] += 1;
            }
            calls.push(IpathCall {
                block: n.into(),
                position: pos,
                callee: callee.map(|k| k as u32),
                context_cut: None,
            });
        }
        sites.push(insts);
        metas.push(calls);
    }
    let mut ip_functions = Vec::with_capacity(members.len());
    for (k, &i) in members.iter().enumerate() {
        ip_functions.push(IpathFunction {
            function: i as u32,
            from_outside: false,
            calls: std::mem::take(&mut metas[k]),
            cuts: Vec::new(),
            array: None,
        });
    }
    let mut out = ModulePlan {
        plans: Vec::new(),
        failure: None,
        meta: None,
    };
    let Some(&owner) = members.first() else {
        return out;
    };
    let mode = if piecewise {
        Mode::Piecewise
    } else {
        Mode::Context
    };
    // Number the set; then cut the calls that `context_cuts` names and number it again, until
    // it names none (each round only removes direct calls, so this ends).
    let heat_weights: Vec<IdVec<EdgeId, f64>> = match cuts {
        IpathCuts::Hot => members
            .iter()
            .map(|&i| call_weights(funcs[i].0, funcs[i].1, weights))
            .collect(),
        IpathCuts::All | IpathCuts::Off => Vec::new(),
    };
    let num = loop {
        for (k, f) in ip_functions.iter_mut().enumerate() {
            let fv = funcs[members[k]].0;
            f.from_outside = !is_local(fv) || num_uses(fv) != direct_uses[k];
        }
        let functions = ip_functions
            .iter()
            .zip(&members)
            .map(|(f, &i)| f.to_function(funcs[i].1.cfg.clone()))
            .collect();
        let num = match IpNumbering::new_limited(functions, mode, LIMIT) {
            Ok(n) if n.fits_u64() => n,
            Ok(_) => {
                out.failure = Some("the numbering does not fit 64 bits".into());
                return out;
            }
            Err(e) => {
                out.failure = Some(e.to_string());
                return out;
            }
        };
        let found = match cuts {
            IpathCuts::Off => Ok(Vec::new()),
            IpathCuts::All => num.context_cuts(crate::modes::path::ARRAY_PATHS, CONTEXT_CUT_PATHS),
            IpathCuts::Hot => num.context_cuts_where(
                crate::modes::path::ARRAY_PATHS,
                CONTEXT_CUT_PATHS,
                Some(&Heat {
                    weights: &heat_weights,
                    min_restarts: HOT_RESTARTS,
                }),
            ),
        };
        let cut = match found {
            Ok(c) => c,
            Err(e) => {
                out.failure = Some(e.to_string());
                return out;
            }
        };
        if cut.is_empty() {
            break num;
        }
        for (f, site) in cut {
            let call = &mut ip_functions[f.index()].calls[site as usize];
            let q = call.callee.take().expect("context cuts are direct calls");
            call.context_cut = Some(q);
            direct_uses[q as usize] -= 1;
        }
    };
    let mut plans = Vec::with_capacity(members.len());
    for k in 0..members.len() {
        match num.plan(FnId::new(k)) {
            Ok(p) => plans.push(p),
            Err(e) => {
                out.failure = Some(e.to_string());
                return out;
            }
        }
    }
    let linked = linked(&plans);
    let can_be_root: Vec<bool> = plans.iter().map(|p| p.entry.root_value.is_some()).collect();
    // Functions that may be roots and have few paths of their own (path mode's threshold)
    // count those in the counter array: the range of their own root (and `GEntry`) edges. An
    // isolated function counts no other path; any other one checks the range first (its
    // activations under another root, and its callees under it, count in the table).
    for (k, f) in ip_functions.iter_mut().enumerate() {
        let r = num.own_paths(FnId::new(k));
        let len = r.end - r.start;
        if can_be_root[k] && len > 0 && len <= crate::modes::path::ARRAY_PATHS {
            f.array = Some(IpathArray {
                first: r.start as u64,
                len: len as u32,
            });
        }
    }
    // The set's path tables: one per `SET_PER_BANK` functions, a power of two up to
    // `MAX_BANKS` (each has a home table of `PATH_HOME_SLOTS` slots, 16 KiB).
    let banks = (members.len() / SET_PER_BANK)
        .next_power_of_two()
        .clamp(1, MAX_BANKS) as u32;
    for ((k, &i), plan) in members.iter().enumerate().zip(plans) {
        let callees = ip_functions[k]
            .calls
            .iter()
            .map(|c| {
                c.callee
                    .map(|q| (funcs[members[q as usize]].0, can_be_root[q as usize]))
            })
            .collect();
        out.plans.push((
            i,
            Box::new(IpathPlan {
                plan,
                sites: sites[k].iter().map(|s| s.2).collect(),
                site_nodes: sites[k].iter().map(|s| s.0).collect(),
                tail_ret: sites[k]
                    .iter()
                    .map(|&(n, _, v)| {
                        let node = &funcs[i].1.nodes[n.index()];
                        node.returns && node.end == v
                    })
                    .collect(),
                callees,
                owner: owner as u32,
                piecewise,
                path_meta: (i == owner).then(|| PathMeta {
                    cuts: Vec::new(),
                    num_paths: num.total(),
                    storage: PathStorage::Hash { table: 0 },
                    numbering: num.fingerprint(),
                }),
                isolated: !linked[k],
                array: ip_functions[k].array,
                banks,
            }),
        ));
    }
    out.meta = Some(IpathMeta {
        functions: ip_functions,
        limit: LIMIT,
        total: num.total(),
        fingerprint: num.fingerprint(),
        table_owner: owner as u32,
    });
    out
}

/// Per function of the set: it makes or receives a direct call (in its plan: the numbering
/// may have demoted the call sites it was given).
fn linked(plans: &[FunctionPlan]) -> Vec<bool> {
    let mut linked = vec![false; plans.len()];
    for (k, plan) in plans.iter().enumerate() {
        for act in &plan.calls {
            if let CallAction::Direct { callee, .. } = *act {
                linked[k] = true;
                linked[callee.index()] = true;
            }
        }
    }
    linked
}
