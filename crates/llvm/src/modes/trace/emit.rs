//! Emitting one function's trace code: the entry, witnesses, `Back`, `Unwind` and `ret`
//! records of a traced function ([`WPlan`]'s [`FnPlan::emit`]), or the "lost" record of one
//! that cannot be traced ([`Untraced`]).

use super::callees::{extern_index, is_resume, own_address, writes_back};
use super::plan::WPlan;
use super::records::Rec;
use super::runtime::{acc_ptr, field_of, Runtime, LOST};
use crate::counters::apply::SiteAction;
use crate::counters::plan::TagTarget;
use crate::emit::build::{const_array, const_null, private_constant, remove_from_parent};
use crate::emit::Emitter;
use crate::ir::lower::Lowered;
use crate::ir::{self, Bb, Val};
use crate::modes::{EmitCx, Emitted, FnPlan};
use llvm_sys::prelude::*;
use llvm_sys::{LLVMLinkage, LLVMOpcode};
use tally_format::{Probe, WCallee, WtraceMeta};
use tally_graph::witness::{self, PlanKind};
use tally_graph::{EdgeId, IdVec};

impl FnPlan for WPlan {
    fn num_counters(&self) -> usize {
        0 // a trace build counts nothing
    }

    fn emit(&self, cx: &EmitCx) -> Emitted {
        let rt = Runtime::declare(cx.g);
        let em = Emitter::new(cx.g, cx.func);
        // 0. The function's own copy of the accumulator's word (an alloca in the entry block,
        // a register after mem2reg), unless control can land in it from elsewhere (`setjmp`,
        // landing pads, any `invoke` or `callbr`) or it is built at -O0 (`optnone`: no
        // mem2reg); without those, shared checks of room either way. The copy is written
        // through to the thread's word after every append, unless `--tally-trace-registers=on`
        // (then saved only before calls and `ret`: a fatal signal would leave the records since
        // the function's last call in its registers, out of the flight recorder's tail).
        let landings = cx.l.has_setjmp
            || cx.func.blocks().iter().any(|bb| {
                bb.instructions().iter().any(|v| {
                    matches!(
                        v.opcode(),
                        LLVMOpcode::LLVMInvoke
                            | LLVMOpcode::LLVMCallBr
                            | LLVMOpcode::LLVMLandingPad
                            | LLVMOpcode::LLVMResume
                    )
                })
            });
        let local = match cx.func.first_block().and_then(|b| b.first()) {
            Some(first)
                if (self.registers || self.through)
                    && !landings
                    && !cx.func.fn_has_attr(ir::attr_kind("optnone")) =>
            {
                em.at(first);
                Some(em.alloca(cx.g.i64t, "tally.acc"))
            }
            _ => None,
        };
        let rt = Rec {
            rt: &rt,
            local,
            through: !self.registers,
            shared: !landings,
            acc: std::cell::Cell::new(std::ptr::null_mut()),
            widest: Default::default(),
        };
        // 1. `Back` right after each unknown call, before any code the sites put at the end
        // of its block (the out-edge's witness follows the call's records).
        for call in self.calls.iter().flatten() {
            if self.floor
                || !writes_back(&call.callee)
                || is_resume(call.instr)
                || self.back_split.contains(&call.instr)
            {
                continue;
            }
            let after = if call.instr.opcode() == LLVMOpcode::LLVMCall {
                call.instr.next()
            } else {
                call.instr.successor(0).insertion_start()
            };
            if let Some(after) = after {
                em.at(after);
                rt.put_back(&em, call);
            }
        }
        // 2. Entry and witnesses.
        let mut log = Log {
            rec: &rt,
            function: cx.index,
            announced: self.announced,
            witness: &self.plan.witness,
            depth: (cx.l.has_setjmp || cx.l.has_landing_pads).then(std::ptr::null_mut),
            floor: self.floor,
        };
        crate::counters::apply::apply(cx.g, cx.func, cx.l, &self.sites, cx.base, &mut log);
        if let Some(paths) = &self.paths {
            paths.emit(&em, cx.l, &rt);
        }
        // 2b. `Back` of an unknown invoke with a shared normal destination: on a block of its
        // own between the invoke and whatever the sites put on the edge.
        for &invoke in &self.back_split {
            let nb = crate::emit::surgery::split_edge(&em, invoke, 0);
            if let Some(at) = nb.insertion_start() {
                em.at(at);
                let call = self.calls.iter().flatten().find(|c| c.instr == invoke);
                rt.put_back(&em, call.expect("a split invoke is a call site"));
            }
        }
        // 3. The direct flag immediately before each direct call (after any site code), and
        // the call site (numbered over the blocks' calls in order, as the metadata lists
        // them) before each direct and unknown call, for the flight recorder's call stack.
        for (site, call) in self.calls.iter().flatten().enumerate() {
            if self.floor {
                break;
            }
            let site = em.i32c(site as u64);
            match call.callee {
                WCallee::Direct(_) | WCallee::Extern { .. } => {
                    let callee = call.instr.called_value();
                    em.at(call.instr);
                    let acc = rt.acc_here(&em);
                    em.call(rt.rt.direct, &mut [acc, callee.0, site], call.instr);
                }
                WCallee::Unknown => {
                    em.at(call.instr);
                    let acc = rt.acc_here(&em);
                    em.call(rt.rt.call, &mut [acc, site], call.instr);
                }
                WCallee::Opaque => {}
            }
        }
        // 4. Landings, first thing where control lands: `setjmp`'s second return and landing
        // pads (`Unwind`: the traced activations above this one that the `longjmp` or the
        // exception abandoned, and the block landed at). And the depth of traced activations
        // at each `ret` (not at `resume`: the next landing counts the activation as abandoned).
        let depth_here = |depth: LLVMValueRef| em.load(cx.g.i32t, depth);
        for (i, n) in cx.l.nodes.iter().enumerate() {
            let Some(depth) = log.depth.filter(|_| !self.floor) else {
                break;
            };
            if let Some(sj) = n.after_setjmp {
                if let Some(next) = sj.next() {
                    em.at(next);
                    let d = depth_here(depth);
                    let ret = em.setjmp_ret(sj);
                    em.call(rt.rt.reentry, &mut [ret, d, em.i32c(i as u64)], sj);
                }
            } else if n.landing_pad {
                let pad = n
                    .instrs
                    .iter()
                    .find(|v| v.opcode() == LLVMOpcode::LLVMLandingPad);
                if let Some(next) = pad.and_then(|p| p.next()) {
                    em.at(next);
                    let d = depth_here(depth);
                    em.call(rt.rt.unwind, &mut [d, em.i32c(i as u64)], next);
                }
            }
        }
        for n in &cx.l.nodes {
            if let Some(term) = n
                .instrs
                .last()
                .filter(|t| t.opcode() == LLVMOpcode::LLVMRet)
            {
                if n.returns && !self.floor {
                    em.at(*term);
                    // Only a function some `Extern` site may call leaves its address: the
                    // linker resolves no other module's name to an internal one, so no
                    // caller's `tally.wtrace.back` looks for it (and one that is not traced
                    // can never find its own address there, whoever stored last).
                    let own = match em.func.linkage() {
                        LLVMLinkage::LLVMInternalLinkage | LLVMLinkage::LLVMPrivateLinkage => None,
                        _ => own_address(em.func),
                    }
                    .unwrap_or_else(|| const_null(cx.g.ptrt));
                    let acc = rt.acc_here(&em);
                    em.call(rt.rt.ret, &mut [acc, own], *term);
                }
            }
        }
        // 5. The function's fixed-size allocas of its original entry block first in its first
        // block: the inlined entry (`tally.wtrace.enter`) splits the block it is in, which
        // would leave them after it, dynamic (a frame that grows: deep recursion overflows).
        if let Some(orig) = cx.l.nodes.first().map(|n| n.start.parent()) {
            hoist_allocas(&em, orig);
        }
        // 6. The local accumulator is saved and loaded around calls and at `ret`.
        rt.save_and_load_around_calls(&em);
        // 7. And the appends' checks of room shared (which needs the loads in place).
        rt.hoist_checks(&em);
        // 8. One accumulator pointer where the entry's dominates.
        rt.share_acc(&em);
        if self.floor {
            // (Said in the metadata, so that the reader refuses the trace in one line.)
            return Emitted {
                split: self.sites.split(),
                tagged: self.sites.tagged(),
                wtrace: Some(untraced_meta(
                    "built with --tally-trace-floor, a measurement whose trace cannot be \
                     regenerated"
                        .into(),
                )),
                needs_mem2reg: true,
                ..Emitted::default()
            };
        }
        Emitted {
            split: self.sites.split(),
            tagged: self.sites.tagged(),
            wtrace: Some(WtraceMeta {
                calls: self
                    .calls
                    .iter()
                    .map(|cs| {
                        cs.iter()
                            .map(|c| match &c.callee {
                                WCallee::Extern { name, .. } => WCallee::Extern {
                                    name: name.clone(),
                                    index: c
                                        .instr
                                        .called_function()
                                        .and_then(|f| extern_index(cx.g.module, f))
                                        .expect("an external callee in the module's table"),
                                },
                                other => other.clone(),
                            })
                            .collect()
                    })
                    .collect(),
                witness: self
                    .plan
                    .witness
                    .values()
                    .iter()
                    .map(|w| w.map(|w| (w.value, w.bits)))
                    .collect(),
                read_bits: self.plan.read_bits.values().to_vec(),
                unwind: self
                    .unwind
                    .iter()
                    .filter(|(_, &u)| u)
                    .map(|(e, _)| e.into())
                    .collect(),
                branch: self.plan.kind == PlanKind::Branch,
                paths: self.paths.as_ref().map(|p| p.numbering),
                untraced: None,
            }),
            // (always-inline: the records' `tally.wtrace.put`)
            needs_mem2reg: true,
            ..Emitted::default()
        }
    }
}

/// Moves the allocas of constant size in block `orig` and in the function's first block to the
/// start of the first block, in order.
pub(super) fn hoist_allocas(em: &Emitter, orig: Bb) {
    let Some(first) = em.func.first_block() else {
        return;
    };
    let blocks = if first == orig {
        vec![first]
    } else {
        vec![first, orig]
    };
    let allocas: Vec<Val> = blocks
        .iter()
        .flat_map(|bb| bb.instructions())
        .filter(|v| v.opcode() == LLVMOpcode::LLVMAlloca && v.operand(0).is_constant_int())
        .collect();
    let Some(at) = first.first() else { return };
    for a in allocas {
        if a == at {
            continue;
        }
        em.at(at);
        remove_from_parent(a);
        em.insert(a);
    }
}

/// A function trace mode cannot trace: it writes a "lost" record at entry, which regeneration
/// reads as "not exact past this point" (its callers treat it as an unknown callee).
pub(super) struct Untraced(pub(super) String);

impl FnPlan for Untraced {
    fn num_counters(&self) -> usize {
        0
    }

    fn emit(&self, cx: &EmitCx) -> Emitted {
        let rt = Runtime::declare(cx.g);
        let em = Emitter::new(cx.g, cx.func);
        if let Some(first) = cx.l.nodes.first().map(|n| n.start) {
            em.at(first);
            Rec {
                rt: &rt,
                local: None,
                through: false,
                shared: false,
                acc: std::cell::Cell::new(std::ptr::null_mut()),
                widest: Default::default(),
            }
            .put_const(&em, LOST, first);
        }
        Emitted {
            wtrace: Some(untraced_meta(self.0.clone())),
            needs_mem2reg: true,
            ..Emitted::default()
        }
    }
}

/// Writes the entry record and the witnesses.
pub(super) struct Log<'a> {
    rec: &'a Rec<'a>,
    function: u32,
    /// Use `tally.wtrace.enter.again` ([`may_be_announced`](super::callees::may_be_announced)).
    announced: bool,
    witness: &'a IdVec<EdgeId, Option<witness::Witness>>,
    /// Functions with `setjmp`: the alloca keeping the activation's depth (set by `enter`).
    depth: Option<LLVMValueRef>,
    /// `--tally-trace-floor`: no entry, only the accumulator pointer.
    floor: bool,
}

impl Log<'_> {
    fn put(&self, em: &Emitter, e: EdgeId, near: Val) {
        if let Some(w) = self.witness[e].filter(|w| w.bits > 0) {
            // The value is masked here, at compile time.
            let bits = u64::from(w.bits);
            let value = u64::from(w.value) & ((1u64 << bits) - 1);
            self.rec.put_const(em, (value, bits), near);
        }
    }
}

impl SiteAction for Log<'_> {
    fn enter(&mut self, em: &Emitter, entry_first: Val) {
        let own = own_address(em.func);
        // (A null `self`, always announced, goes to the runtime; see `inline_fns`.)
        let enter = match own {
            _ if self.floor => self.rec.rt.enter_floor,
            Some(_) if self.announced => self.rec.rt.enter_again,
            Some(_) => self.rec.rt.enter_inline,
            None => self.rec.rt.enter,
        };
        let mut args = [
            self.rec.rt.slot,
            em.g.counters,
            em.i32c(u64::from(self.function)),
            own.unwrap_or_else(|| const_null(em.g.ptrt)),
        ];
        {
            let call = em.call_instr(enter, &mut args, entry_first);
            // The inline entries return the accumulator pointer (no second TLS load after
            // them); the runtime's returns the depth.
            let inline = own.is_some() || self.floor;
            let acc = if inline { call } else { acc_ptr(em) };
            if self.rec.local.is_some() {
                self.rec.acc.set(acc);
            }
            if self.depth.is_some() {
                let depth = if inline {
                    let at = field_of(em, acc, "depth");
                    em.load(em.g.i32t, at)
                } else {
                    call
                };
                let slot = em.alloca(em.g.i32t, "tally.depth");
                em.store(depth, slot);
                self.depth = Some(slot);
            }
        }
    }

    fn at_site(&self, em: &Emitter, probe: Probe, _idx: u64) {
        let Probe::Edge(e) = probe else {
            unreachable!("trace mode witnesses edges, not {probe:?}")
        };
        let bb = em.insert_block();
        let near = bb
            .terminator()
            .or_else(|| bb.first())
            .unwrap_or(Val(std::ptr::null_mut()));
        self.put(em, e.edge(), near);
    }

    fn at_reentry(&self, _em: &Emitter, _probe: Probe, _idx: u64, _sj: Val) {
        // Re-entry edges carry no witness (the landing writes its own record).
    }

    fn at_tag_target(&self, em: &Emitter, l: &Lowered, t: &TagTarget, tag: LLVMValueRef, _: u64) {
        // The witness of incoming edge `tag`, from constant tables (width 0: nothing).
        let g = em.g;
        let start = l.nodes[t.node.index()].start;
        let preds = l.cfg.preds(t.node);
        let table = |f: &dyn Fn(Option<witness::Witness>) -> u64| {
            let vals: Vec<LLVMValueRef> = preds
                .iter()
                .map(|&e| em.i32c(f(self.witness[e].filter(|w| w.bits > 0))))
                .collect();
            let arr = const_array(g.i32t, &vals);
            private_constant(g, "__tally_wtrace_preds", arr)
        };
        let values = table(&|w| w.map_or(0, |w| u64::from(w.value)));
        let widths = table(&|w| w.map_or(0, |w| u64::from(w.bits)));
        {
            let v = em.load(g.i32t, tag);
            let load = |table| {
                let p = em.inbounds_gep(g.i32t, table, &[v]);
                em.load(g.i32t, p)
            };
            // (Table values are below 2^width; width 0 appends nothing.)
            let (value, bits) = (load(values), load(widths));
            let value = em.zext(value, g.i64t);
            let bits = em.zext(bits, g.i64t);
            let widest = preds
                .iter()
                .filter_map(|&e| self.witness[e].map(|w| u64::from(w.bits)))
                .max()
                .unwrap_or(0);
            self.rec.widest.borrow_mut().insert(bits, widest);
            self.rec.put(em, value, bits, start);
        }
    }
}

/// The metadata of a function whose trace cannot be regenerated, and why: no plan, no calls.
pub(super) fn untraced_meta(why: String) -> WtraceMeta {
    WtraceMeta {
        calls: Vec::new(),
        witness: Vec::new(),
        read_bits: Vec::new(),
        unwind: Vec::new(),
        branch: false,
        paths: None,
        untraced: Some(why),
    }
}
