//! SESE counters on LLVM IR (Frenot & Pereira 2024, CC 2024): the LLVM side of
//! `tally_graph::sese`, used by `edge` mode with `--tally-sese=on`.
//!
//! **Candidates** ([`candidates`]) are found on the optimized IR by pattern and with
//! ScalarEvolution (`shim/scev.cpp`): in each natural loop that `SeseLoop::new` accepts and that has one back
//! edge (LLVM's loop-simplify form), a header phi `p` of integer or pointer type whose value on
//! the back edge is a chain `p + c1 + c2 + ...` of `add`/`sub` instructions with constants, or
//! of `getelementptr inbounds i8` with constant offsets for a pointer (Definition
//! 3.5's affine increments, restricted to one phi: a circuit through other phis is not
//! followed). By SSA, the chain's value on the back edge is the current iteration's `p` plus
//! `step = c1 + c2 + ...`, whatever blocks the increments sit in, so at every point of an
//! activation `p = init + step · (back edges taken)`: the counter measures the back edge (a
//! free chord for `place_edge_counters_sese`), and `p`, whose header dominates every exit, is
//! live on all of them. This is Theorem 3.10 read at the header instead of at the increments:
//! no control-equivalence condition is needed, and the rotated loops LLVM emits (the increment
//! in the header or the latch, which runs once more than the back edge) qualify. Where the
//! back-edge value is no such chain, ScalarEvolution may see the phi as an affine
//! add-recurrence `{init,+,step}` of the loop (a widened variable: an `add nsw` in a narrower
//! type and an extension); it is read at the phi. **Trip counts**: where ScalarEvolution knows
//! the backedge-taken count on entry as a cheap loop-invariant expression, it is computed before
//! the preheader's terminator and added at every exit (no variable, nothing in the loop).
//! Counters for loops that have several back edges are not built.
//!
//! **Profitability** ([`tally_graph::sese::Profit`]): per loop, of its affine and trip-count
//! candidates, the one whose estimated saving (the measured edge's increments) best exceeds
//! its cost (the exit code, the trip count's computation per entry), under the measured
//! frequencies or LLVM's static estimate; none if neither pays (`--tally-sese=all|trips`
//! skip the test).
//!
//! **Exactness.** One activation adds `k = (p - init) / step` to the back edge's counter at the
//! exit it leaves by, computed in the phi's N-bit type as the exact division `(±(p - init)) /
//! |step|` and zero-extended, which is exact when `k · |step| < 2^N`. The division is a shift
//! right by the step's trailing zeros and a multiplication by its odd part's inverse modulo
//! 2^N ([`ExactDiv`]), not a `udiv`: the instrumented IR is not optimized again, and a `udiv`
//! by a constant would stay a hardware division on every exit. That holds when every increment of
//! the chain is `nsw` (the values stay in the signed range, so `|p - init| < 2^N`), or every
//! increment is `nuw` with a non-negative constant (the values grow without wrapping); for a
//! 64-bit variable with step ±1 the count is exact modulo 2^64, like any counter. A pointer
//! chain of `inbounds` steps stays inside one object (its values differ by less than 2^63) and
//! is counted on `ptrtoint` values in i64. Other chains are refused. Loops the frame can end
//! inside (a member has an `EarlyExit` edge: `exit`, `longjmp`, an exception thrown by a call)
//! are refused whatever `flush_exact` says: the frame record does not reach the variable, so
//! the value would be lost when the frame is abandoned. Loops with a `setjmp` inside are refused by the graph crate (`ReentryInside`).
//! An exit edge must have a site of its own (end of its source, start of its target, or a
//! block splitting it), else the loop is refused.
//!
//! **Choice.** One counter per loop: of the header's candidate phis, the one the back end is
//! likeliest to keep anyway ([`survives`]: its value used after the loop, else a pointer);
//! then that or the trip count, by the profitability test.
//!
//! **Emission** ([`emit`]) runs before the counter plan is applied: first the trip counts are
//! expanded in the preheaders (the function is still the one ScalarEvolution answered about
//! when planning, so it answers the same), then every exit edge that
//! needs one gets its block (`surgery::split_edge`), then each counter's `init` is taken (the
//! phi's value on entry, or a new header phi carrying it when the entries disagree) and the
//! count is added to the back edge's counter at every exit. Where the back-edge value `last =
//! p + step` dominates the exit, the count is `(last - (init + step)) / step`: reading `p` there
//! would keep it live beside `last` (register copies in the loop). Phis are held by position
//! ([`ValRef`]) because splitting an edge rebuilds the phis of its target.

use crate::emit::sites::{direct_site, Realize};
use crate::emit::surgery::split_edge;
use crate::emit::{cname, Emitter, Globals};
use crate::ir::lower::{EdgeIr, Lowered};
use crate::ir::{Bb, Val};
use crate::options::Sese;
use crate::shim::Scev;
use llvm_sys::core as c;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMOpcode, LLVMTypeKind};
use std::collections::HashMap;
use tally_graph::dom::Dominators;
use tally_graph::sese::{
    mask, trip_count_setup, AffineExit, CostModel, CounterKind, ExactDiv, Increment, LoopShape,
    Profit, SeseCounter, SeseKind, SeseLoop,
};
use tally_graph::{Dfs, EdgeId, IdVec, Loops, NodeId};

/// At most this many increments in one chain.
const MAX_CHAIN: usize = 16;

/// What the search found in one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SeseStats {
    /// Natural loops of the function's graph.
    pub loops: usize,
    /// SESE counters found (accepted by the graph crate and the checks above).
    pub candidates: usize,
    /// Of the candidates, loops whose backedge-taken count ScalarEvolution knows on entry.
    pub trip_counts: usize,
    /// Loops with a candidate that the profitability test refused.
    pub unprofitable: usize,
    /// Edge counters replaced (no increment in the loop).
    pub replaced: usize,
    /// Of those, trip-count counters.
    pub replaced_trips: usize,
    /// Of those, affine variables only ScalarEvolution found (not the chain pattern).
    pub replaced_scev: usize,
}

/// A value that survives edge splitting: a phi by its block and position among the phis.
#[derive(Clone, Copy, Debug)]
enum ValRef {
    Plain(Val),
    Phi(Bb, usize),
}

impl ValRef {
    fn of(v: Val) -> ValRef {
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        if unsafe { c::LLVMIsAInstruction(v.0) }.is_null() || v.opcode() != LLVMOpcode::LLVMPHI {
            return ValRef::Plain(v);
        }
        let bb = v.parent();
        let i = bb
            .phis()
            .iter()
            .position(|&p| p == v)
            .expect("a phi is in its block");
        ValRef::Phi(bb, i)
    }
    fn get(self) -> Val {
        match self {
            ValRef::Plain(v) => v,
            ValRef::Phi(bb, i) => bb.phis()[i],
        }
    }
}

/// A SESE counter found on the IR: an affine variable or a trip count.
pub(crate) struct Candidate {
    /// The graph's view: loop, increments, measured edge, exits.
    pub counter: SeseCounter,
    /// The loop header's IR block.
    header: Bb,
    /// The IR blocks of the loop.
    loop_bbs: Vec<Bb>,
    /// The affine variable, or `None` for a trip count (ScalarEvolution's backedge-taken
    /// count, computed in the preheader by `shim/scev.cpp`).
    var: Option<Affine>,
}

impl Candidate {
    /// A trip-count counter (no variable).
    pub(crate) fn is_trip_count(&self) -> bool {
        self.var.is_none()
    }
    /// An affine variable only ScalarEvolution found.
    pub(crate) fn is_scev_affine(&self) -> bool {
        self.var.as_ref().is_some_and(|v| v.by_scev)
    }
}

/// An affine variable: the header phi and its chain.
struct Affine {
    /// The header phi.
    phi: ValRef,
    /// The sum of the increments.
    step: i64,
    /// The value on the back edge (`phi + step`), and per exit of `counter.add_at` whether it
    /// is available there (its block dominates the exit's source).
    last: Val,
    last_at: Vec<bool>,
    /// Found by ScalarEvolution, not by the chain pattern.
    by_scev: bool,
}

/// One increment of a chain: the constant and whether the instruction has `nsw` / `nuw`.
pub(crate) struct Link {
    inst: Val,
    step: i64,
    nsw: bool,
    nuw: bool,
}

/// `v = u + C` or `v = u - C` with a constant `C`: `(u, C as added, nsw, nuw)`.
pub(crate) fn affine_step(v: Val) -> Option<(Val, Link)> {
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    if unsafe { c::LLVMIsAInstruction(v.0) }.is_null() {
        return None;
    }
    let op = v.opcode();
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let konst = |x: Val| !unsafe { c::LLVMIsAConstantInt(x.0) }.is_null();
    let sext = |x: Val| unsafe { c::LLVMConstIntGetSExtValue(x.0) };
    if op == LLVMOpcode::LLVMGetElementPtr {
        return gep_step(v);
    }
    let (u, step) = match op {
        LLVMOpcode::LLVMAdd if konst(v.operand(1)) => (v.operand(0), sext(v.operand(1))),
        LLVMOpcode::LLVMAdd if konst(v.operand(0)) => (v.operand(1), sext(v.operand(0))),
        LLVMOpcode::LLVMSub if konst(v.operand(1)) => {
            (v.operand(0), sext(v.operand(1)).checked_neg()?)
        }
        _ => return None,
    };
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let (nsw, nuw) = unsafe { (c::LLVMGetNSW(v.0) != 0, c::LLVMGetNUW(v.0) != 0) };
    // `sub nuw x, C` subtracts without wrapping: not an unsigned-growing increment.
    let nuw = nuw && op == LLVMOpcode::LLVMAdd;
    Some((
        u,
        Link {
            inst: v,
            step,
            nsw,
            nuw,
        },
    ))
}

/// `v = getelementptr inbounds i8, ptr u, iN C`: `(u, C)`, taken as `nsw` (an `inbounds` chain
/// stays within one allocated object, so its values differ by less than 2^63).
fn gep_step(v: Val) -> Option<(Val, Link)> {
    // SAFETY: constants and types are made in the live module's context from its values
    // (`crate::ir`'s module doc).
    unsafe {
        let ctx = c::LLVMGetTypeContext(c::LLVMTypeOf(v.0));
        if v.num_operands() != 2
            || c::LLVMIsInBounds(v.0) == 0
            || c::LLVMGetGEPSourceElementType(v.0) != c::LLVMInt8TypeInContext(ctx)
            || c::LLVMIsAConstantInt(v.operand(1).0).is_null()
        {
            return None;
        }
        let step = c::LLVMConstIntGetSExtValue(v.operand(1).0);
        Some((
            v.operand(0),
            Link {
                inst: v,
                step,
                nsw: true,
                nuw: false,
            },
        ))
    }
}

/// The SESE counters of one function (at most one per loop, each allowed in its loop and
/// passing the profitability test, [`tally_graph::sese::CostModel::allows`] and
/// [`tally_graph::sese::Profit`]), and the statistics of the search. `weights` are the
/// edge frequencies the test uses (measured or LLVM's estimate; `None`: the estimate is
/// computed here); `promotes`: counter promotion runs after instrumentation.
pub(crate) fn candidates(
    l: &Lowered,
    weights: Option<&IdVec<EdgeId, f64>>,
    choice: Sese,
    promotes: bool,
) -> (Vec<Candidate>, SeseStats) {
    let cfg = &l.cfg;
    let dfs = Dfs::compute(cfg);
    let loops = Loops::compute(cfg, &dfs);
    let doms = Dominators::compute(cfg, &dfs);
    let mut stats = SeseStats {
        loops: loops.entries().len(),
        ..SeseStats::default()
    };
    if loops.entries().is_empty() {
        return (Vec::new(), stats);
    }
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let func = Val(unsafe { c::LLVMGetBasicBlockParent(l.nodes[0].start.parent().0) });
    let estimate;
    let freq = match weights {
        Some(w) => w,
        None => {
            estimate = crate::ir::estimate::estimated_weights(func, l);
            &estimate
        }
    };
    let scev = Scev::new(func);
    let model = CostModel::default();
    // Paid once per call of the function (`CostModel::per_call`).
    let per_call = model.per_call_entry(freq[cfg.entry_edge()]);
    // Instruction -> vertex; IR block -> the vertex holding its terminator.
    let mut vertex_of: HashMap<Val, NodeId> = HashMap::new();
    let mut last_vertex: HashMap<Bb, NodeId> = HashMap::new();
    for (i, n) in l.nodes.iter().enumerate() {
        for &v in &n.instrs {
            vertex_of.insert(v, NodeId::new(i));
        }
        if let Some(&t) = n.instrs.last() {
            last_vertex.insert(t.parent(), NodeId::new(i));
        }
    }
    let mut out = Vec::new();
    for &h in loops.entries() {
        let Ok(lp) = SeseLoop::new(cfg, &loops, &doms, h) else {
            continue;
        };
        if !lp.early_exits.is_empty() {
            continue; // the frame may end inside: the value would be lost (module doc)
        }
        // Every exit needs a place for code.
        let direct = |e: EdgeId| {
            matches!(l.edges[e.index()], EdgeIr::Succ { .. })
                && matches!(
                    direct_site(l, e),
                    Some(Realize::NodeEnd(_) | Realize::NodeStart(_) | Realize::Split(_))
                )
        };
        if !lp.exits.iter().all(|&e| direct(e)) {
            continue;
        }
        let split = |e: EdgeId| matches!(direct_site(l, e), Some(Realize::Split(_)));
        let header_bb = l.nodes[h.index()].start.parent();
        let loop_bbs: Vec<Bb> = lp
            .members
            .iter()
            .map(|&m| l.nodes[m.index()].start.parent())
            .collect();
        let in_loop = |bb: Bb| last_vertex.get(&bb).is_some_and(|&n| lp.contains(n));
        let shape = LoopShape {
            promoted: promotes && promoted(&lp, &loops, &loop_bbs),
            pressure: loop_pressure(header_bb, &loop_bbs, &lp, cfg),
            function_blocks: l.nodes.len(),
            exits: lp.exits.len(),
        };
        // The affine variable the back end is least likely to drop.
        let affine = header_bb
            .phis()
            .into_iter()
            .filter_map(|phi| candidate(&lp, phi, scev.as_ref(), &in_loop, &vertex_of, &doms, l))
            .max_by_key(|(c, _)| survives(c, &in_loop))
            .map(|(var, counter)| {
                let keep = survives(&var, &in_loop) == 0;
                let div = ExactDiv::new(var.step.unsigned_abs(), width_of(var.phi.get()))
                    .expect("candidates have 0 < |step| < 2^(width-1)");
                let init_const = init_is_constant(var.phi.get(), &loop_bbs);
                let exits: Vec<(f64, f64)> = lp
                    .exits
                    .iter()
                    .zip(&var.last_at)
                    .map(|(&e, &use_last)| {
                        let code = AffineExit {
                            negate: var.step < 0,
                            shift: div.shift > 0,
                            multiply: div.mul != 1,
                            extend: div.width < 64,
                            adjust: use_last && !init_const,
                            split: split(e),
                        };
                        (freq[e], model.affine_exit(&code))
                    })
                    .collect();
                let profit = Profit::new(&model, freq[counter.measured], keep, &exits, &[per_call]);
                (Some(var), counter, profit)
            });
        // The trip count, if ScalarEvolution knows it on entry.
        let trips = scev.as_ref().and_then(|s| {
            let ops = s.trips(header_bb)?;
            let counter = SeseCounter::trip_count(&lp).ok()?;
            let exits: Vec<(f64, f64)> = lp
                .exits
                .iter()
                .map(|&e| (freq[e], model.trip_count_exit(split(e))))
                .collect();
            let entries: Vec<(f64, f64)> = lp
                .entries
                .iter()
                .map(|&e| (freq[e], trip_count_setup(ops)))
                .chain([per_call])
                .collect();
            let profit = Profit::new(&model, freq[counter.measured], false, &exits, &entries);
            Some((None, counter, profit))
        });
        let found = affine.is_some() || trips.is_some();
        stats.candidates += usize::from(found);
        stats.trip_counts += usize::from(trips.is_some());
        let net = |p: &Profit| p.saved - model.margin * p.paid;
        let best = match choice {
            Sese::All => affine.or(trips),
            Sese::Trips => trips.or(affine),
            Sese::On | Sese::Off => [affine, trips]
                .into_iter()
                .flatten()
                .filter(|(var, _, _)| {
                    let kind = match var {
                        Some(_) => CounterKind::Affine,
                        None => CounterKind::TripCount,
                    };
                    model.allows(kind, shape)
                })
                .filter(|(_, _, p)| p.pays(&model))
                .max_by(|a, b| net(&a.2).total_cmp(&net(&b.2))),
        };
        match best {
            Some((var, counter, _)) => out.push(Candidate {
                counter,
                header: header_bb,
                loop_bbs,
                var,
            }),
            None => stats.unprofitable += usize::from(found),
        }
    }
    (out, stats)
}

/// Whether `promote` will keep the loop's counters in registers: it is innermost and calls nothing
/// but intrinsics (`crate::counters::promote`'s conditions, less its counter limit and entry
/// checks: an estimate for the cost model, not a promise).
fn promoted(lp: &SeseLoop, loops: &Loops, loop_bbs: &[Bb]) -> bool {
    let innermost = lp
        .members
        .iter()
        .all(|&m| m == lp.header || !loops.is_loop_entry(m));
    innermost
        && loop_bbs.iter().all(|bb| {
            bb.instructions().iter().all(|i| {
                !i.is_call_like()
                    || (i.opcode() == LLVMOpcode::LLVMCall
                        && !i.calls_inline_asm()
                        && i.called_function().is_some_and(|f| f.intrinsic_id() != 0))
            })
        })
}

/// The loop's register pressure as [`LoopShape::pressure`] counts it: the header's phis, the
/// values (arguments, instructions) defined outside and used inside, and the cyclomatic
/// number of the loop's own edges (the most counters `edge` puts in it).
fn loop_pressure(header: Bb, loop_bbs: &[Bb], lp: &SeseLoop, cfg: &tally_graph::Cfg) -> usize {
    let mut outside: std::collections::HashSet<LLVMValueRef> = std::collections::HashSet::new();
    let mut blocks = loop_bbs.to_vec();
    blocks.sort_by_key(|b| b.0 as usize);
    blocks.dedup(); // a block split at calls is several vertices
    for bb in &blocks {
        for i in bb.instructions() {
            for k in 0..i.num_operands() {
                let v = i.operand(k);
                // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the
                // calls only read them.
                let inst = !unsafe { c::LLVMIsAInstruction(v.0) }.is_null();
                let arg = !unsafe { c::LLVMIsAArgument(v.0) }.is_null();
                if (arg || (inst && !loop_bbs.contains(&v.parent())))
                    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc);
                    // the calls only read them.
                    && unsafe { c::LLVMGetTypeKind(c::LLVMTypeOf(v.0)) }
                        != LLVMTypeKind::LLVMLabelTypeKind
                {
                    outside.insert(v.0);
                }
            }
        }
    }
    let inner = lp
        .members
        .iter()
        .flat_map(|&m| cfg.succs(m).iter())
        .filter(|&&e| lp.contains(cfg.edge(e).dst))
        .count();
    header.phis().len() + outside.len() + (inner + 1).saturating_sub(lp.members.len())
}

/// The width in bits a variable is counted in (pointers as i64).
fn width_of(v: Val) -> u32 {
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let ty = unsafe { c::LLVMTypeOf(v.0) };
    match unsafe { c::LLVMGetTypeKind(ty) } {
        LLVMTypeKind::LLVMIntegerTypeKind => unsafe { c::LLVMGetIntTypeWidth(ty) },
        _ => 64,
    }
}

/// The phi's entry values are one constant (then `init + step` at an exit folds away).
fn init_is_constant(phi: Val, loop_bbs: &[Bb]) -> bool {
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let n = unsafe { c::LLVMCountIncoming(phi.0) };
    let outside: Vec<LLVMValueRef> = (0..n)
        .filter(|&i| !loop_bbs.contains(&Bb(unsafe { c::LLVMGetIncomingBlock(phi.0, i) })))
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        .map(|i| unsafe { c::LLVMGetIncomingValue(phi.0, i) })
        .collect();
    outside.windows(2).all(|w| w[0] == w[1])
        && outside
            .first()
            // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the
            // calls only read them.
            .is_some_and(|&v| !unsafe { c::LLVMIsAConstant(v) }.is_null())
}

/// How likely the back end keeps the candidate's variable in the loop anyway, so that reading
/// it at the exits costs no register: 2 if its value is already used after the loop, 1 for a
/// pointer (an address, kept by loop strength reduction), 0 for an integer used only inside,
/// which LSR often replaces by a pointer induction variable — reading it at an exit then keeps
/// an extra increment in every iteration (Lua's `traversestrongtable`, bench/NOTES.md).
fn survives(c: &Affine, in_loop: &dyn Fn(Bb) -> bool) -> u8 {
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let used_outside = |v: Val| unsafe {
        let mut u = c::LLVMGetFirstUse(v.0);
        while !u.is_null() {
            let user = c::LLVMGetUser(u);
            if c::LLVMIsAInstruction(user).is_null() || !in_loop(Val(user).parent()) {
                return true;
            }
            u = c::LLVMGetNextUse(u);
        }
        false
    };
    let phi = c.phi.get();
    if used_outside(phi) || used_outside(c.last) {
        2
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    } else if unsafe { c::LLVMGetTypeKind(c::LLVMTypeOf(phi.0)) }
        == LLVMTypeKind::LLVMPointerTypeKind
    {
        1
    } else {
        0
    }
}

/// The chain of constant additions from `phi` to its back-edge value `last`, if it is one.
fn chain(phi: Val, last: Val) -> Option<Vec<Link>> {
    let mut links = Vec::new();
    let mut cur = last;
    while cur != phi {
        if links.len() == MAX_CHAIN {
            return None;
        }
        let (u, link) = affine_step(cur)?;
        links.push(link);
        cur = u;
    }
    Some(links)
}

/// The counter of header phi `phi`, if it is one (see the module doc).
#[allow(clippy::too_many_arguments)]
fn candidate(
    lp: &SeseLoop,
    phi: Val,
    scev: Option<&Scev>,
    in_loop: &dyn Fn(Bb) -> bool,
    vertex_of: &HashMap<Val, NodeId>,
    doms: &Dominators,
    l: &Lowered,
) -> Option<(Affine, SeseCounter)> {
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let ty = unsafe { c::LLVMTypeOf(phi.0) };
    let width = match unsafe { c::LLVMGetTypeKind(ty) } {
        LLVMTypeKind::LLVMIntegerTypeKind => unsafe { c::LLVMGetIntTypeWidth(ty) },
        // Pointers of address space 0 are compared as i64 (`ptrtoint`).
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        LLVMTypeKind::LLVMPointerTypeKind if unsafe { c::LLVMGetPointerAddressSpace(ty) } == 0 => {
            64
        }
        _ => return None,
    };
    if !(8..=64).contains(&width) {
        return None;
    }
    let [latch] = lp.latches[..] else {
        return None;
    };
    // The value on the back edge (the only incoming entry from inside the loop).
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let n = unsafe { c::LLVMCountIncoming(phi.0) };
    let mut last: Option<Val> = None;
    for i in 0..n {
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        let b = Bb(unsafe { c::LLVMGetIncomingBlock(phi.0, i) });
        let v = Val(unsafe { c::LLVMGetIncomingValue(phi.0, i) });
        if in_loop(b) {
            if last.is_some() {
                return None;
            }
            last = Some(v);
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        } else if unsafe { c::LLVMIsUndef(v.0) != 0 || !c::LLVMIsAPoisonValue(v.0).is_null() } {
            return None; // no value on entry to subtract
        }
    }
    let last = last?;
    let half = 1i128 << (width - 1);
    let (step, increments, by_scev) = match chain(phi, last) {
        Some(links) => {
            let step: i64 = links.iter().try_fold(0i64, |s, k| s.checked_add(k.step))?;
            if step == 0 || i128::from(step).abs() >= half {
                return None;
            }
            let nonneg = links.iter().all(|k| k.step >= 0);
            let no_wrap = links.iter().all(|k| k.nsw)
                || (nonneg && links.iter().all(|k| k.nuw))
                || (width == 64 && step.abs() == 1);
            if !no_wrap {
                return None;
            }
            let mut increments = Vec::new();
            for k in links.iter().rev() {
                let block = *vertex_of.get(&k.inst)?;
                increments.push(Increment {
                    block,
                    step: k.step,
                });
            }
            (step, increments, false)
        }
        None => {
            // Not a chain of constant additions: ScalarEvolution may still see an affine
            // add-recurrence {init,+,step} of this loop (module doc), with the same rule for
            // wrapping on its no-wrap flags. Its increments are taken as one at the latch.
            let (step, no_wrap) = scev?.affine(phi)?;
            if step == 0 || i128::from(step).abs() >= half {
                return None;
            }
            if !(no_wrap || (width == 64 && step.abs() == 1)) {
                return None;
            }
            let block = l.cfg.edge(latch).src;
            (step, vec![Increment { block, step }], true)
        }
    };
    // The back-edge value is read at the exits it dominates (a chain's `phi + step`); a
    // recurrence ScalarEvolution found is read at the phi.
    let last_block = vertex_of.get(&last).copied();
    let last_at = lp
        .exits
        .iter()
        .map(|&e| !by_scev && last_block.is_some_and(|b| doms.dominates(b, l.cfg.edge(e).src)))
        .collect();
    Some((
        Affine {
            phi: ValRef::of(phi),
            step,
            last,
            last_at,
            by_scev,
        },
        SeseCounter {
            header: lp.header,
            kind: SeseKind::Affine { increments },
            measured: latch,
            add_at: lp.exits.clone(),
            may_end_inside: false,
            flush_exact: true,
        },
    ))
}

/// Emits the counters `used` (candidate, function-relative counter index) of one function.
/// Runs before the counter plan is applied.
pub(crate) fn emit(g: &Globals, func: Val, l: &Lowered, base: u64, used: &[(&Candidate, usize)]) {
    if used.is_empty() {
        return;
    }
    log_measured_edges(func, used);
    let em = Emitter::new(g, func);
    // 0. The trip counts, in the preheaders, while the function is still the one
    //    ScalarEvolution was asked about when planning (the same answers, module doc).
    let scev = used
        .iter()
        .any(|(c, _)| c.var.is_none())
        .then(|| Scev::new(func).expect("a function with loops has a body"));
    let trips: Vec<Option<ValRef>> = used
        .iter()
        .map(|(cand, _)| {
            let s = scev.as_ref().filter(|_| cand.var.is_none())?;
            let v = s
                .expand(cand.header)
                .expect("ScalarEvolution gives the trip count it gave when planning");
            Some(ValRef::of(v))
        })
        .collect();
    drop(scev);
    // 1. Where each exit's code goes; splitting rebuilds phis, so all splits come first.
    let mut split: HashMap<EdgeId, Val> = HashMap::new();
    let mut points: Vec<Vec<Val>> = Vec::new();
    for (cand, _) in used {
        let mut at = Vec::new();
        for &e in &cand.counter.add_at {
            let p = match direct_site(l, e) {
                Some(Realize::NodeEnd(n)) => l.nodes[n.index()].end,
                Some(Realize::NodeStart(n)) => l.nodes[n.index()].start,
                Some(Realize::Split(_)) => *split.entry(e).or_insert_with(|| {
                    let EdgeIr::Succ { term, index, .. } = l.edges[e.index()] else {
                        unreachable!("candidates exit by terminator edges")
                    };
                    split_edge(&em, term, index)
                        .terminator()
                        .expect("split block has its branch")
                }),
                _ => unreachable!("candidates have direct exit sites"),
            };
            at.push(p);
        }
        points.push(at);
    }
    // 2. Per counter: init, then the count at each exit.
    for (((cand, idx), at), trips) in used.iter().zip(points).zip(trips) {
        let counter = em.counter_ptr(base + *idx as u64);
        let Some(var) = &cand.var else {
            // A trip count: the same value at every exit.
            let k = trips.expect("trip counts are expanded").get();
            for &p in &at {
                em.at(p);
                em.add_to(counter, k.0);
            }
            continue;
        };
        let phi = var.phi.get();
        let init = init_value(&em, cand, phi);
        for (&p, &use_last) in at.iter().zip(&var.last_at) {
            em.at(p);
            // After the increments, `last - (init + step)` rather than `phi - init`: the
            // phi need not stay live next to `last` (rotated loops exit after the
            // increment; keeping both costs the register allocator copies in the loop).
            let now = if use_last { var.last } else { phi };
            let k = back_edges(&em, var, init, now, use_last);
            em.add_to(counter, k);
        }
    }
}

/// With `TALLY_SESE_EDGES=<file>` in the environment (a benchmark diagnostic, see
/// `bench/run`): appends one line `<source file>\t<function>\t<edge id>` per SESE counter
/// used, so that the dynamic increments they removed (their edges' counts in a report) can be
/// told apart from the counters' sum. One `write` per function on a file opened for appending.
fn log_measured_edges(func: Val, used: &[(&Candidate, usize)]) {
    use std::io::Write;
    let Some(path) = std::env::var_os("TALLY_SESE_EDGES") else {
        return;
    };
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them; LLVM returned the pointer with its length.
    let module = unsafe {
        let m = c::LLVMGetGlobalParent(func.0);
        let mut len = 0;
        let p = c::LLVMGetSourceFileName(m, &mut len);
        String::from_utf8_lossy(std::slice::from_raw_parts(p.cast::<u8>(), len)).into_owned()
    };
    let name = func.name();
    let text: String = used
        .iter()
        .map(|(cand, _)| format!("{module}\t{name}\t{}\n", cand.counter.measured.index()))
        .collect();
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
    {
        let _ = f.write_all(text.as_bytes());
    }
}

/// The phi's value on loop entry: its incoming value from outside the loop when all entries
/// agree, else a new header phi that takes the entries' values and keeps its own on the back
/// edges.
fn init_value(em: &Emitter, cand: &Candidate, phi: Val) -> Val {
    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls only
    // read them.
    let n = unsafe { c::LLVMCountIncoming(phi.0) };
    let incoming: Vec<(LLVMValueRef, LLVMBasicBlockRef)> = (0..n)
        .map(|i| unsafe {
            (
                c::LLVMGetIncomingValue(phi.0, i),
                c::LLVMGetIncomingBlock(phi.0, i),
            )
        })
        .collect();
    let outside: Vec<LLVMValueRef> = incoming
        .iter()
        .filter(|(_, bb)| !cand.loop_bbs.contains(&Bb(*bb)))
        .map(|(v, _)| *v)
        .collect();
    if outside.windows(2).all(|w| w[0] == w[1]) {
        return Val(outside[0]);
    }
    let name = cname("tally.sese.init");
    // SAFETY: the builder is positioned in a live function and the operands are values of the
    // module (`crate::ir`'s module doc); the edited values belong to the live module, which only
    // this crate changes during `instrument` (`crate::ir`'s module doc); arrays passed live through
    // the call with their lengths.
    unsafe {
        em.at(phi);
        let new = c::LLVMBuildPhi(em.b, c::LLVMTypeOf(phi.0), name.as_ptr());
        let (mut vals, mut bbs): (Vec<_>, Vec<_>) = incoming
            .iter()
            .map(|&(v, bb)| {
                if cand.loop_bbs.contains(&Bb(bb)) {
                    (new, bb)
                } else {
                    (v, bb)
                }
            })
            .unzip();
        c::LLVMAddIncoming(new, vals.as_mut_ptr(), bbs.as_mut_ptr(), n);
        Val(new)
    }
}

/// Events mode: the trip counts of `cands` (`None` for an affine variable), expanded before
/// their preheaders' terminators. Must run while the function is still the one
/// ScalarEvolution was asked about when planning (as in [`emit`]).
pub(crate) fn expand_trip_counts(func: Val, cands: &[&Candidate]) -> Vec<Option<Val>> {
    let scev = cands
        .iter()
        .any(|c| c.var.is_none())
        .then(|| Scev::new(func).expect("a function with loops has a body"));
    cands
        .iter()
        .map(|cand| {
            let s = scev.as_ref().filter(|_| cand.var.is_none())?;
            Some(
                s.expand(cand.header)
                    .expect("ScalarEvolution gives the trip count it gave when planning"),
            )
        })
        .collect()
}

/// Events mode: the back edges taken by the current activation of a *copy* of `cand`'s loop,
/// as an `i64` at the builder's position, on exit `exit` (an index into `counter.add_at`) of
/// the copy. `map` gives the copy's value of a value of the original loop (the identity
/// outside it); `init` is the variable's value on entry (the copy has one entry); `trips` the
/// expanded trip count of a trip-count candidate. The same arithmetic as [`emit`]: the exact
/// division of `phi - init` (or `last - (init + step)`) by `step`.
pub(crate) fn back_edges_in_copy(
    em: &Emitter,
    cand: &Candidate,
    exit: usize,
    map: &dyn Fn(Val) -> Val,
    trips: Option<Val>,
) -> LLVMValueRef {
    let Some(var) = &cand.var else {
        return trips.expect("trip counts are expanded").0;
    };
    let phi = var.phi.get();
    let init = {
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        let n = unsafe { c::LLVMCountIncoming(phi.0) };
        (0..n)
            .find(|&i| {
                !cand
                    .loop_bbs
                    // SAFETY: the handles are live values of the module (`crate::ir`'s module doc);
                    // the calls only read them.
                    .contains(&Bb(unsafe { c::LLVMGetIncomingBlock(phi.0, i) }))
            })
            .map(|i| Val(unsafe { c::LLVMGetIncomingValue(phi.0, i) }))
            .expect("a header phi has an entry from outside the loop")
    };
    let use_last = var.last_at[exit];
    let now = if use_last { map(var.last) } else { map(phi) };
    back_edges(em, var, init, now, use_last)
}

/// The back edges a loop took, as an `i64` at the builder's position: `(now - init) / step`,
/// or `(now - (init + step)) / step` when `now` is the variable's value after the increments
/// (`use_last`), by the exact division of the module doc (a shift and a multiplication).
fn back_edges(em: &Emitter, var: &Affine, init: Val, now: Val, use_last: bool) -> LLVMValueRef {
    let b = em.b;
    let empty = cname("");
    let phi = var.phi.get();
    let pointer =
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        unsafe { c::LLVMGetTypeKind(c::LLVMTypeOf(phi.0)) } == LLVMTypeKind::LLVMPointerTypeKind;
    let ty = if pointer {
        em.g.i64t
    } else {
        // SAFETY: the handles are live values of the module (`crate::ir`'s module doc); the calls
        // only read them.
        unsafe { c::LLVMTypeOf(phi.0) }
    };
    let width = unsafe { c::LLVMGetIntTypeWidth(ty) };
    let div = ExactDiv::new(var.step.unsigned_abs(), width)
        .expect("candidates have 0 < |step| < 2^(width-1)");
    // SAFETY: the builder is positioned in a live function and the operands are values of the
    // module (`crate::ir`'s module doc).
    unsafe {
        let (mut now, mut start) = (now.0, init.0);
        if pointer {
            now = c::LLVMBuildPtrToInt(b, now, ty, empty.as_ptr());
            start = c::LLVMBuildPtrToInt(b, start, ty, empty.as_ptr());
        }
        if use_last {
            let step = c::LLVMConstInt(ty, var.step as u64 & mask(width), 0);
            start = c::LLVMBuildAdd(b, start, step, empty.as_ptr());
        }
        let mut d = c::LLVMBuildSub(b, now, start, empty.as_ptr());
        if var.step < 0 {
            d = c::LLVMBuildNeg(b, d, empty.as_ptr());
        }
        let mut k = d;
        if div.shift > 0 {
            let t = c::LLVMConstInt(ty, u64::from(div.shift), 0);
            k = c::LLVMBuildLShr(b, k, t, empty.as_ptr());
        }
        if div.mul != 1 {
            let m = c::LLVMConstInt(ty, div.mul, 0);
            k = c::LLVMBuildMul(b, k, m, empty.as_ptr());
        }
        if width < 64 {
            k = c::LLVMBuildZExt(b, k, em.g.i64t, empty.as_ptr());
        }
        k
    }
}
