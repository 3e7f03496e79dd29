/*
 * targets.c -- finding an indirect call's target among its candidates, for `--tally-pgo`'s
 * call targets (docs/pgo.md, "Call targets"; the instrumentation is tally-llvm's
 * module/call_targets.rs). The inlined code before each indirect call compares the callee with
 * the candidate it took last time; only a miss comes here. A call with many candidates whose
 * target changes from call to call (SQLite's `xSFunc`, among the 100 or so functions of its
 * type) would otherwise look through them at each miss: from 16 candidates on, the first miss
 * builds an open-addressing hash of the candidates' addresses, so a lookup takes a probe or
 * two. The hashes live in a static arena (no allocation: the instrumented code may run in a
 * signal handler); when it is full, lookups scan, and the counts are as exact either way.
 */
#include "rt.h"

#define HASHED_FROM 16

/* A hash: 2^bits slots, each a candidate's index + 1 or 0 (empty). */
struct target_index {
    uint32_t bits;
    uint32_t slot[];
};

static uint32_t arena[1u << 18]; /* 1 MiB */
static uint32_t arena_used;      /* words handed out */

static uint32_t slot_of(const void *p, uint32_t bits) {
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> (64 - bits));
}

static int32_t scan(const void *const *candidates, uint32_t k, const void *callee) {
    for (uint32_t i = 0; i < k; i++)
        if (candidates[i] == callee)
            return (int32_t)i;
    return -1;
}

/* The hash of the k candidates, made and published at *index; null when the arena is full. */
static struct target_index *build(const void *const *candidates, uint32_t k, void **index) {
    uint32_t bits = 1;
    while ((1u << bits) < 2 * k)
        bits++;
    uint32_t words = 1 + (1u << bits);
    uint32_t at = __atomic_load_n(&arena_used, __ATOMIC_RELAXED);
    do {
        if (words > sizeof arena / sizeof arena[0] - at)
            return 0;
    } while (!__atomic_compare_exchange_n(&arena_used, &at, at + words, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    struct target_index *ix = (struct target_index *)&arena[at];
    ix->bits = bits;
    uint32_t mask = (1u << bits) - 1;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t s = slot_of(candidates[i], bits);
        for (;; s = (s + 1) & mask) {
            uint32_t v = ix->slot[s];
            if (!v) {
                ix->slot[s] = i + 1;
                break;
            }
            if (candidates[v - 1] == candidates[i])
                break; /* the same address twice (folded functions): the first keeps it */
        }
    }
    void *none = 0;
    if (!__atomic_compare_exchange_n(index, &none, ix, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return (struct target_index *)none; /* another thread's came first (ours is left) */
    return ix;
}

int32_t __tally_call_target_find(const void *const *candidates, uint32_t k, const void *callee,
                                 void **index) {
    if (k < HASHED_FROM)
        return scan(candidates, k, callee);
    struct target_index *ix = __atomic_load_n(index, __ATOMIC_ACQUIRE);
    if (!ix)
        ix = build(candidates, k, index);
    if (!ix)
        return scan(candidates, k, callee);
    uint32_t mask = (1u << ix->bits) - 1;
    for (uint32_t s = slot_of(callee, ix->bits);; s = (s + 1) & mask) {
        uint32_t v = ix->slot[s];
        if (!v)
            return -1;
        if (candidates[v - 1] == callee)
            return (int32_t)(v - 1);
    }
}
