// LLVM's static estimate of block and edge frequencies (BranchProbabilityInfo x
// BlockFrequencyInfo), which the C API does not expose. BranchProbabilityInfo implements the
// branch-prediction heuristics of Ball & Larus, "Branch prediction for free" (PLDI 1993), and
// Wu & Larus (MICRO 1994): loop back edges and exits, pointer and zero comparisons, calls to
// cold or noreturn functions, unreachable code, floating-point comparisons, __builtin_expect.
// Read-only: it builds the analyses on the function as it is and changes nothing.
#include "llvm-c/Core.h"
#include "llvm/Analysis/BlockFrequencyInfo.h"
#include "llvm/Analysis/BranchProbabilityInfo.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/PostDominators.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Module.h"
#include "llvm/TargetParser/Triple.h"

using namespace llvm;

namespace {
struct Estimate {
    DominatorTree dt;
    PostDominatorTree pdt;
    LoopInfo li;
    TargetLibraryInfoImpl tlii;
    TargetLibraryInfo tli;
    BranchProbabilityInfo bpi;
    BlockFrequencyInfo bfi;
    double entry;

    explicit Estimate(Function &f)
        : dt(f), pdt(f), li(dt), tlii(Triple(f.getParent()->getTargetTriple())), tli(tlii, &f),
          bpi(f, li, &tli, &dt, &pdt), bfi(f, bpi, li) {
        entry = static_cast<double>(bfi.getEntryFreq().getFrequency());
        if (entry <= 0)
            entry = 1;
    }
};
} // namespace

extern "C" void *tally_freq_new(LLVMValueRef fn) {
    Function *f = unwrap<Function>(fn);
    if (!f || f->isDeclaration())
        return nullptr;
    return new Estimate(*f);
}

// Executions of `bb` per entry of the function.
extern "C" double tally_freq_block(void *h, LLVMBasicBlockRef bb) {
    auto *e = static_cast<Estimate *>(h);
    return static_cast<double>(e->bfi.getBlockFreq(unwrap(bb)).getFrequency()) / e->entry;
}

// Probability that `bb` leaves through its successor number `succ`.
extern "C" double tally_freq_succ_prob(void *h, LLVMBasicBlockRef bb, unsigned succ) {
    auto *e = static_cast<Estimate *>(h);
    BranchProbability p = e->bpi.getEdgeProbability(unwrap(bb), succ);
    return static_cast<double>(p.getNumerator()) / static_cast<double>(p.getDenominator());
}

extern "C" void tally_freq_free(void *h) { delete static_cast<Estimate *>(h); }
