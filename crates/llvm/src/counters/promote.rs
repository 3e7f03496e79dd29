//! Counter promotion: in a loop without calls, a counter lives in a register and reaches memory
//! once per loop exit instead of once per iteration (the promotion LLVM's own instrumentation
//! does for `-fprofile-generate`; Ball & Larus 1994 §6.3 treats the same cost from the placement
//! side).
//!
//! Why it pays although a memory increment is a single x86 instruction: every iteration of a
//! loop increments at least one counter (each cycle of the graph holds a chord), and `add $1,
//! mem` in consecutive iterations forms a dependency chain through store-to-load forwarding of
//! about five cycles. A loop whose own work per iteration is shorter than that runs at the
//! counter's pace. In bzip2 (`docs/benchmarks.md`) this made `edge` slower in time than clang
//! -fprofile-generate, which promotes, although it executes far fewer instructions.
//!
//! After a function is instrumented, its final control-flow graph is searched for natural loops
//! (`tally_graph::loops`, Ball & Larus 1994 §5). A loop is promoted when
//!
//! - it is innermost: it contains no other loop's header. A counter is then loaded and stored
//!   once per entry of the loop, not once per entry of a whole nest: promoting whole call-free
//!   nests (tally before 2026-11-23) kept all of a nest's counters live across it and cost 10
//!   points of instructions on zlib and xz (zlib's `longest_match`, a nest entered once per
//!   input position, ran 23% more instructions);
//! - it touches at most 20 counters (LLVM's `max-counter-promotions-per-loop`; the hidden
//!   `--tally-promote-max=N`, [`DEFAULT_PROMOTE_MAX`](crate::DEFAULT_PROMOTE_MAX)),
//!   which bounds the loads and stores added on its entries and exits;
//! - it contains no call other than LLVM intrinsics (so no callee can read or write a counter,
//!   and no frame can end inside it: early exits happen at calls), and no `invoke`, `callbr` or
//!   `indirectbr`;
//! - every edge into it enters at its header, from a block ending in `br` or `switch`.
//!
//! With the hidden `--tally-promote-chain=N` (0, no limit, by default) only the counters
//! incremented on a cycle of the loop of at most N instructions are promoted
//! ([`shortest_cycles`]): on a longer cycle the increment's store-to-load latency hides under
//! the iteration's own work. Neither knob pays on the benchmark suite (docs/log/sese.md, twelfth
//! round): promotion's instruction cost is in loops of one or two counters on short cycles,
//! entered often for few iterations, the same loops whose time it saves when they run long.
//!
//! For every counter the loop touches (a load or store of a constant element of the module's
//! counter array), an `alloca` takes its place inside the loop; the counter is loaded into it at
//! the end of every block that enters the loop and stored back on every exit edge — at the
//! start of the exit's target when all of that block's predecessors are in the loop, else in a
//! block split onto the edge. mem2reg then turns the allocas into registers. Counts stay exact:
//! the loop is left only through its exits (no calls, so no `exit`, `longjmp` or exception
//! inside), and counters are per function, so nothing else touches them meanwhile — except
//! another thread running the same loop, which is why `--tally-atomic` builds are not promoted,
//! and a signal handler that calls `tally_write_profile()` while the loop runs, which sees the
//! counts as of the loop's entry. Functions built at `-O0` (`optnone`) are not promoted
//! either: mem2reg leaves them alone.

use crate::emit::surgery::split_edge;
use crate::emit::{Emitter, Globals};
use crate::ir::{self, Bb, Val};
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::LLVMOpcode;
use std::collections::HashMap;
use std::ffi::CString;
use tally_graph::{Cfg, Dfs, EdgeKind, Loops, NodeId};

/// Promotes the counters of the innermost call-free loops of `func` that touch at most
/// `max_per_loop` counters (with `chain` > 0 only those on a cycle of at most `chain`
/// instructions). Returns how many counters were promoted (in how many loops), `(0, 0)` when
/// nothing was.
pub(crate) fn promote_loop_counters(
    g: &Globals,
    func: Val,
    chain: u32,
    max_per_loop: usize,
) -> (usize, usize) {
    if func.fn_has_attr(ir::attr_kind("optnone")) {
        return (0, 0);
    }
    let blocks = func.blocks();
    let index: HashMap<LLVMBasicBlockRef, usize> =
        blocks.iter().enumerate().map(|(i, b)| (b.0, i)).collect();
    let n = blocks.len();
    let exit = NodeId::new(n);
    let mut edges = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let Some(t) = b.terminator() else {
            return (0, 0);
        };
        let ns = t.num_successors();
        if t.opcode() == LLVMOpcode::LLVMRet {
            edges.push((NodeId::new(i), exit, EdgeKind::Return));
        }
        for k in 0..ns {
            let Some(&j) = index.get(&t.successor(k).0) else {
                return (0, 0);
            };
            edges.push((NodeId::new(i), NodeId::new(j), EdgeKind::Flow));
        }
    }
    let Ok(cfg) = Cfg::new(n, edges) else {
        return (0, 0);
    };
    let dfs = Dfs::compute(&cfg);
    let loops = Loops::compute(&cfg, &dfs);

    // Per block: whether it can be inside a promoted loop, and its counter accesses.
    let accesses: Vec<Option<Vec<(Val, u32, LLVMValueRef)>>> =
        blocks.iter().map(|b| block_accesses(g, *b)).collect();

    let innermost = |y: NodeId| {
        loops
            .nat_loop(y)
            .iter()
            .all(|m| *m == y || !loops.is_loop_entry(*m))
    };
    let em = Emitter::new(g, func);
    let b = em.b;
    let entry_first = blocks[0].first().expect("a block has its terminator");
    let (mut promoted, mut promoted_loops) = (0, 0);
    // Innermost natural loops are disjoint in reducible graphs; `taken` keeps overlapping
    // loops of irreducible ones from being promoted twice.
    let mut taken = vec![false; n];
    for &y in loops.entries() {
        let members = loops.nat_loop(y);
        if !innermost(y) || members.iter().any(|m| taken[m.index()]) {
            continue;
        }
        let mut inside = vec![false; n + 1];
        for m in members {
            inside[m.index()] = true;
        }
        if members.iter().any(|m| accesses[m.index()].is_none()) {
            continue;
        }
        // Single entry, at the header, from blocks ending in br or switch.
        let mut enter_from = Vec::new();
        let mut single_entry = true;
        for m in members {
            for &e in cfg.preds(*m) {
                let p = cfg.edge(e).src;
                if inside[p.index()] {
                    continue;
                }
                let plain = blocks
                    .get(p.index())
                    .and_then(|bb| bb.terminator())
                    .is_some_and(|t| {
                        matches!(t.opcode(), LLVMOpcode::LLVMBr | LLVMOpcode::LLVMSwitch)
                    });
                if *m != y || !plain {
                    single_entry = false;
                }
                if !enter_from.contains(&p) {
                    enter_from.push(p);
                }
            }
        }
        if !single_entry || enter_from.is_empty() {
            continue;
        }
        // The counters the loop touches, in the order of their first access (not by address:
        // the same input must give the same code).
        let mut slots: Vec<(LLVMValueRef, LLVMValueRef)> = Vec::new();
        let mut slot_of: HashMap<LLVMValueRef, usize> = HashMap::new();
        let mut uses = Vec::new();
        for m in members {
            for &(inst, op, ptr) in accesses[m.index()].as_ref().expect("checked above") {
                let key = *slot_of.entry(ptr).or_insert_with(|| {
                    slots.push((ptr, std::ptr::null_mut()));
                    slots.len() - 1
                });
                uses.push((inst, op, key));
            }
        }
        if slots.is_empty() || slots.len() > max_per_loop {
            continue;
        }
        if chain > 0 {
            // Only counters on a short cycle: a longer one hides the increment's latency.
            let cycle = shortest_cycles(&cfg, &blocks, y, &inside);
            let mut short = vec![false; slots.len()];
            for m in members {
                for &(_, _, ptr) in accesses[m.index()].as_ref().expect("checked above") {
                    short[slot_of[&ptr]] |= cycle[m.index()] <= u64::from(chain);
                }
            }
            let renumber: Vec<Option<usize>> = short
                .iter()
                .scan(0, |next, &keep| {
                    let k = keep.then_some(*next);
                    *next += usize::from(keep);
                    Some(k)
                })
                .collect();
            slots = slots
                .iter()
                .zip(&short)
                .filter_map(|(s, &keep)| keep.then_some(*s))
                .collect();
            uses = uses
                .into_iter()
                .filter_map(|(inst, op, key)| renumber[key].map(|k| (inst, op, k)))
                .collect();
        }
        if slots.is_empty() {
            continue;
        }
        for m in members {
            taken[m.index()] = true;
        }
        let empty = CString::default();
        for (ptr, slot) in slots.iter_mut() {
            em.at(entry_first);
            let name = CString::new("tally.promoted").expect("no NUL");
            // SAFETY: the builder is positioned in a live function and the operands are values of
            // the module (`crate::ir`'s module doc).
            *slot = unsafe { c::LLVMBuildAlloca(b, g.i64t, name.as_ptr()) };
            for p in &enter_from {
                em.at(blocks[p.index()].terminator().expect("checked above"));
                // SAFETY: the builder is positioned in a live function and the operands are values
                // of the module (`crate::ir`'s module doc).
                unsafe {
                    let v = c::LLVMBuildLoad2(b, g.i64t, *ptr, empty.as_ptr());
                    c::LLVMBuildStore(b, v, *slot);
                }
            }
        }
        for (inst, op, key) in uses {
            // SAFETY: the edited values belong to the live module, which only this crate changes
            // during `instrument` (`crate::ir`'s module doc).
            unsafe { c::LLVMSetOperand(inst.0, op, slots[key].1) };
        }
        // Stores on the exits.
        let mut stored_at: Vec<NodeId> = Vec::new();
        for m in members {
            let t = blocks[m.index()].terminator().expect("checked above");
            for k in 0..t.num_successors() {
                let target = t.successor(k);
                let tn = NodeId::new(index[&target.0]);
                if inside[tn.index()] {
                    continue;
                }
                let all_inside = cfg
                    .preds(tn)
                    .iter()
                    .all(|&e| inside[cfg.edge(e).src.index()]);
                let at = if all_inside {
                    if stored_at.contains(&tn) {
                        continue;
                    }
                    stored_at.push(tn);
                    target
                        .insertion_start()
                        .expect("a block has its terminator")
                } else {
                    let nb: Bb = split_edge(&em, t, k);
                    nb.terminator().expect("split block has its branch")
                };
                for (ptr, slot) in slots.iter() {
                    em.at(at);
                    // SAFETY: the builder is positioned in a live function and the operands are
                    // values of the module (`crate::ir`'s module doc).
                    unsafe {
                        let v = c::LLVMBuildLoad2(b, g.i64t, *slot, empty.as_ptr());
                        c::LLVMBuildStore(b, v, *ptr);
                    }
                }
            }
        }
        promoted += slots.len();
        promoted_loops += 1;
    }
    (promoted, promoted_loops)
}

/// For every block of the loop headed by `y` (`inside` its members), the instructions of the
/// shortest cycle of the loop through it and its header (every cycle of an innermost loop goes
/// through its header), counting each block's instructions without phis and debug intrinsics;
/// `u64::MAX` outside the loop or where no cycle exists.
fn shortest_cycles(cfg: &Cfg, blocks: &[Bb], y: NodeId, inside: &[bool]) -> Vec<u64> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = blocks.len();
    let size: Vec<u64> = blocks.iter().map(|&b| block_size(b)).collect();
    // Dijkstra from `y` forwards (`d[v]`: the blocks after `y` up to `v`, `v` included) and
    // backwards (`d[v]`: the blocks after `v` up to `y`, `y` included); index n is "back at
    // y", so a cycle through `v` is `forward[v] + backward[v]` and through `y` `forward[n]`.
    let run = |forward: bool| {
        let mut d = vec![u64::MAX; n + 1];
        let mut heap = BinaryHeap::new();
        d[y.index()] = 0;
        heap.push(Reverse((0u64, y.index())));
        while let Some(Reverse((dv, v))) = heap.pop() {
            if dv > d[v] || v == n {
                continue;
            }
            let es = if forward {
                cfg.succs(NodeId::new(v))
            } else {
                cfg.preds(NodeId::new(v))
            };
            for &e in es {
                let ed = cfg.edge(e);
                let w = if forward { ed.dst } else { ed.src };
                if w.index() >= n || !inside[w.index()] {
                    continue;
                }
                // Forwards a step adds the block entered, backwards the block left.
                let add = if forward { size[w.index()] } else { size[v] };
                let to = if w == y { n } else { w.index() };
                let nd = dv.saturating_add(add);
                if nd < d[to] {
                    d[to] = nd;
                    heap.push(Reverse((nd, to)));
                }
            }
        }
        d
    };
    let (from, to) = (run(true), run(false));
    (0..n)
        .map(|v| {
            if v == y.index() {
                from[n]
            } else if from[v] == u64::MAX || to[v] == u64::MAX {
                u64::MAX
            } else {
                from[v] + to[v]
            }
        })
        .collect()
}

/// A block's instructions as promotion's cycle length counts them: without phis and calls of
/// debug intrinsics.
fn block_size(bb: Bb) -> u64 {
    bb.instructions()
        .into_iter()
        .filter(|i| match i.opcode() {
            LLVMOpcode::LLVMPHI => false,
            LLVMOpcode::LLVMCall => !i
                .called_function()
                .is_some_and(|f| f.name().starts_with("llvm.dbg.")),
            _ => true,
        })
        .count() as u64
}

/// The counter loads and stores of a block as (instruction, pointer operand index, pointer), or
/// `None` if the block contains something a promoted loop must not: a call that is not an
/// intrinsic, or an `invoke`, `callbr` or `indirectbr`.
fn block_accesses(g: &Globals, bb: Bb) -> Option<Vec<(Val, u32, LLVMValueRef)>> {
    let mut out = Vec::new();
    for i in bb.instructions() {
        match i.opcode() {
            LLVMOpcode::LLVMCall
                if i.calls_inline_asm()
                    || i.called_function().is_none_or(|f| f.intrinsic_id() == 0) =>
            {
                return None;
            }
            LLVMOpcode::LLVMInvoke | LLVMOpcode::LLVMCallBr | LLVMOpcode::LLVMIndirectBr => {
                return None
            }
            LLVMOpcode::LLVMLoad => {
                let p = i.operand(0).0;
                // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the
                // calls only read them.
                if is_counter(g, p) && unsafe { c::LLVMTypeOf(i.0) } == g.i64t {
                    out.push((i, 0, p));
                }
            }
            LLVMOpcode::LLVMStore => {
                let p = i.operand(1).0;
                let v = i.operand(0).0;
                // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the
                // calls only read them.
                if is_counter(g, p) && unsafe { c::LLVMTypeOf(v) } == g.i64t {
                    out.push((i, 1, p));
                }
            }
            _ => {}
        }
    }
    Some(out)
}

/// Whether `p` is the counter array or a constant element pointer into it.
fn is_counter(g: &Globals, p: LLVMValueRef) -> bool {
    if p == g.counters {
        return true;
    }
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    unsafe {
        !c::LLVMIsAConstantExpr(p).is_null()
            && c::LLVMGetConstOpcode(p) == LLVMOpcode::LLVMGetElementPtr
            && c::LLVMGetOperand(p, 0) == g.counters
    }
}
