// ScalarEvolution's backedge-taken counts for tally's trip-count counters (Frenot & Pereira 2024's
// SESE counters; crates/llvm/src/counters/sese.rs). The C API has no ScalarEvolution.
//
// For the loop headed by a block, `tally_scev_trips` says whether ScalarEvolution knows the
// number of times the back edge will be taken, as a loop-invariant expression that is cheap
// to compute on loop entry, and how many operations computing it takes; `tally_scev_expand`
// computes it, zero-extended to i64, before the preheader's terminator (SCEVExpander).
//
// "Cheap" here: an expression of constants, values defined before the loop, `+`, `*`,
// extensions and truncations, `ptrtoint`, min/max and unsigned divisions by powers of two
// (a shift), at most MAX_OPS operations and at most 64 bits wide. Refused: any add-recurrence
// (an outer loop's induction variable would make the expander insert a new phi in the outer
// loop), a division by anything else (a hardware division on every loop entry), `vscale`.
// ScalarEvolution's count is exact for every exit of the loop ("exact", not a maximum):
// `getBackedgeTakenCount` returns "could not compute" when one exit's count is unknown.
#include "llvm-c/Core.h"
#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Module.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"

using namespace llvm;

namespace {
constexpr unsigned MAX_OPS = 12;

struct Scev {
    TargetLibraryInfoImpl tlii;
    TargetLibraryInfo tli;
    AssumptionCache ac;
    DominatorTree dt;
    LoopInfo li;
    ScalarEvolution se;

    explicit Scev(Function &f)
        : tlii(Triple(f.getParent()->getTargetTriple())), tli(tlii, &f), ac(f), dt(f), li(dt),
          se(f, tli, ac, dt, li) {}
};

// Operations needed to compute `s`, or -1 if it is not a cheap expression (see above).
int cost(const SCEV *s) {
    switch (s->getSCEVType()) {
    case scConstant:
    case scUnknown:
        return 0;
    case scTruncate:
    case scZeroExtend:
    case scSignExtend:
    case scPtrToInt: {
        int c = cost(cast<SCEVCastExpr>(s)->getOperand(0));
        return c < 0 ? -1 : c + 1;
    }
    case scUDivExpr: {
        auto *d = cast<SCEVUDivExpr>(s);
        auto *k = dyn_cast<SCEVConstant>(d->getRHS());
        if (!k || !k->getAPInt().isPowerOf2())
            return -1;
        int c = cost(d->getLHS());
        return c < 0 ? -1 : c + 1;
    }
    case scAddExpr:
    case scMulExpr:
    case scUMaxExpr:
    case scSMaxExpr:
    case scUMinExpr:
    case scSMinExpr:
    case scSequentialUMinExpr: {
        auto *n = cast<SCEVNAryExpr>(s);
        // An add or mul per extra operand; a compare and a select for min/max; and a freeze
        // more for the sequential umin.
        int per = s->getSCEVType() == scAddExpr || s->getSCEVType() == scMulExpr ? 1
                  : s->getSCEVType() == scSequentialUMinExpr                       ? 3
                                                                                   : 2;
        int total = per * static_cast<int>(n->getNumOperands() - 1);
        for (const SCEV *op : n->operands()) {
            int c = cost(op);
            if (c < 0)
                return -1;
            total += c;
            if (total > static_cast<int>(MAX_OPS))
                return -1;
        }
        return total;
    }
    default: // add-recurrences, vscale, could-not-compute
        return -1;
    }
}

// The loop headed by `header` and its backedge-taken count, if usable (see above).
const SCEV *trips(Scev &s, BasicBlock *header, Loop **out) {
    Loop *l = s.li.getLoopFor(header);
    if (!l || l->getHeader() != header || !l->getLoopPreheader())
        return nullptr;
    const SCEV *btc = s.se.getBackedgeTakenCount(l);
    if (isa<SCEVCouldNotCompute>(btc) || !btc->getType()->isIntegerTy() ||
        btc->getType()->getIntegerBitWidth() > 64 || !s.se.isLoopInvariant(btc, l))
        return nullptr;
    int c = cost(btc);
    if (c < 0 || c > static_cast<int>(MAX_OPS))
        return nullptr;
    *out = l;
    return btc;
}
} // namespace

extern "C" void *tally_scev_new(LLVMValueRef fn) {
    Function *f = unwrap<Function>(fn);
    if (!f || f->isDeclaration())
        return nullptr;
    return new Scev(*f);
}

// Operations computing the trip count of the loop headed by `bb` (plus one when it is
// narrower than 64 bits: the zero extension), or -1 when there is no usable count.
extern "C" int tally_scev_trips(void *h, LLVMBasicBlockRef bb) {
    auto *s = static_cast<Scev *>(h);
    Loop *l = nullptr;
    const SCEV *btc = trips(*s, unwrap(bb), &l);
    if (!btc)
        return -1;
    return cost(btc) + (btc->getType()->getIntegerBitWidth() < 64 ? 1 : 0);
}

// Computes the trip count of the loop headed by `bb` as an i64, before its preheader's
// terminator; null when `tally_scev_trips` says -1.
extern "C" LLVMValueRef tally_scev_expand(void *h, LLVMBasicBlockRef bb) {
    auto *s = static_cast<Scev *>(h);
    Loop *l = nullptr;
    const SCEV *btc = trips(*s, unwrap(bb), &l);
    if (!btc)
        return nullptr;
    Function *f = l->getHeader()->getParent();
    const DataLayout &dl = f->getParent()->getDataLayout();
    const SCEV *wide = s->se.getNoopOrZeroExtend(btc, Type::getInt64Ty(f->getContext()));
    SCEVExpander exp(s->se, dl, "tally.trips");
    Value *v = exp.expandCodeFor(wide, nullptr, l->getLoopPreheader()->getTerminator());
    return wrap(v);
}

extern "C" void tally_scev_free(void *h) { delete static_cast<Scev *>(h); }

// For a phi of the header of its loop: 1 if ScalarEvolution sees it as an affine
// add-recurrence {init,+,step} of that loop with a constant step that fits in 64 bits (an
// induction variable the pattern of crates/llvm/src/counters/sese.rs may miss: a back-edge value
// through other phis, `or disjoint`, a widened or rewritten variable), with the step and the
// recurrence's no-wrap flags; `*bounded` is 1 when its values lie in a range (signed or
// unsigned; the recurrence's, or the union of the phi's incoming values') whose size plus
// |step| is below 2^N: a constant step cannot jump over the rest, so
// the recurrence never wraps and `k * |step|` (k back edges) stays below 2^N (a variable widened
// from a narrower `nsw` one, whose range the extension bounds, has no flag of its own); else 0.
extern "C" int tally_scev_affine(void *h, LLVMValueRef phi, int64_t *step, int *nsw, int *nuw,
                                 int *bounded) {
    auto *s = static_cast<Scev *>(h);
    auto *p = dyn_cast<PHINode>(unwrap(phi));
    if (!p || !s->se.isSCEVable(p->getType()))
        return 0;
    Loop *l = s->li.getLoopFor(p->getParent());
    if (!l || l->getHeader() != p->getParent())
        return 0;
    auto *ar = dyn_cast<SCEVAddRecExpr>(s->se.getSCEV(p));
    if (!ar || ar->getLoop() != l || !ar->isAffine())
        return 0;
    auto *k = dyn_cast<SCEVConstant>(ar->getStepRecurrence(s->se));
    if (!k || k->getAPInt().getSignificantBits() > 64)
        return 0;
    *step = k->getAPInt().getSExtValue();
    *nsw = ar->hasNoSignedWrap() ? 1 : 0;
    *nuw = ar->hasNoUnsignedWrap() ? 1 : 0;
    unsigned w = s->se.getTypeSizeInBits(ar->getType());
    APInt mag = k->getAPInt().abs().zext(w + 1);
    APInt limit = APInt::getOneBitSet(w + 1, w);
    auto small = [&](const ConstantRange &r) {
        if (r.isFullSet())
            return false;
        APInt size = (r.getUpper() - r.getLower()).zext(w + 1); // modulo 2^w: wrapped ranges too
        return (size + mag).ult(limit);
    };
    // The phi's values are its incoming values: their ranges' union bounds it too (tighter
    // than the recurrence's own range when the back-edge value is an extension).
    ConstantRange sr = ConstantRange::getEmpty(w), ur = ConstantRange::getEmpty(w);
    for (Value *in : p->incoming_values()) {
        const SCEV *v = s->se.getSCEV(in);
        sr = sr.unionWith(s->se.getSignedRange(v));
        ur = ur.unionWith(s->se.getUnsignedRange(v));
    }
    *bounded = small(s->se.getSignedRange(ar)) || small(s->se.getUnsignedRange(ar)) || small(sr) ||
                       small(ur)
                   ? 1
                   : 0;
    return 1;
}
