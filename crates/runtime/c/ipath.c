/*
 * ipath.c -- the per-thread state of interprocedural path profiling (modes `ipath` and
 * `ipath-piecewise`, Melski & Reps 1998; the specification is tally_graph::ipaths::runtime).
 *
 * Instrumented code keeps a function's path register and `nvc` in its own frame and uses these
 * thread-locals only at direct calls (the caller's register and the handshake naming the
 * callee and its `nvc`), at entries (a root saves the interrupted path's register and `open`)
 * and at returns. Plain per-thread words: a signal handler that runs instrumented code enters
 * as a root and restores them when it returns.
 */
#include "rt.h"

__thread void *__tally_ipath_hand_fn;
__thread uint64_t __tally_ipath_hand_nvc;
__thread uint64_t __tally_ipath_reg;
__thread uint64_t __tally_ipath_open;

/* A root's return, as instrumented code did it before it was emitted inline (tally-llvm's
 * modes::ipath); kept for objects instrumented by earlier versions. */
uint64_t __tally_ipath_ret(uint64_t root, uint64_t reg, uint64_t saved_reg, uint64_t saved_open,
                           uint64_t root_exit_value) {
    if (!root) {
        __tally_ipath_reg = reg;
        return UINT64_MAX;
    }
    if (__tally_ipath_open == 0)
        reg += root_exit_value;
    __tally_ipath_reg = saved_reg;
    __tally_ipath_open = saved_open;
    return reg;
}
