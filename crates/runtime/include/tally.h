/*
 * tally.h -- the C ABI between code instrumented by `tally cc` / `tally c++` and the tally
 * runtime (libtally_rt.a). See ARCHITECTURE.md, "Runtime ABI" and "Profile container".
 *
 * Programs normally never include this header: the instrumenter emits the descriptors, the
 * frame records and the calls itself. Include it to call tally_write_profile() or
 * tally_reset_counters() by hand.
 *
 * Environment:
 *   TALLY_PROFILE=path   where the profile is written; "%p" expands to the pid, "%%" to "%".
 *                        Default: "<basename of the executable>.tally" in the current directory.
 *   TALLY_PROFILE=off    write nothing.
 */
#ifndef TALLY_H
#define TALLY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this ABI; struct tally_module.abi_version must equal it. */
#define TALLY_ABI_VERSION 6

/* Value of struct tally_frame.site meaning "no early-exit counter". */
#define TALLY_NO_SITE ((uint64_t *)0)

/* struct tally_module.flags: the module counts events (events mode); counter 0 receives the
 * exiting thread's total at exit. */
#define TALLY_MODULE_EVENTS 1u

/* One per instrumented module (translation unit); emitted by the instrumenter. */
struct tally_module {
    uint32_t abi_version;      /* TALLY_ABI_VERSION */
    uint32_t flags;            /* 0 */
    uint64_t hash;             /* FNV-1a 64 of the metadata blob */
    const uint8_t *meta;       /* metadata blob (tally-format meta) */
    uint64_t meta_len;
    uint64_t *counters;        /* the module's counter array */
    uint64_t num_counters;
    struct tally_path_table *path_tables; /* hashed path counters (path mode), or NULL */
    uint64_t num_path_tables;
    struct tally_module *next; /* owned by the runtime */
};

/* Path counters of one function with too many paths for an array (path mode). Instrumented
 * code looks a path up in the function's *home table* only: TALLY_PATH_HOME_SLOTS slots of
 * {path, count} in a zero-initialized array of the module (a slot whose count is 0 is free:
 * the path it names has not run since it got there, so bumping it there, as instrumented code
 * does for path 0 in a fresh slot, or giving it to another path loses nothing), the path's slot
 * being h = (path * 0x9E3779B97F4A7C15) >> (64 - TALLY_PATH_HOME_BITS); a constant address
 * and, for a path number known at compile time, a constant slot. When the key matches it bumps
 * the count; anything else goes to __tally_path_count, which takes the lock (with
 * --tally-atomic every count goes there): it claims an empty home slot, or counts the path in
 * the runtime's overflow hash table (`slots`, with the last-path cache of Ball & Larus 1996)
 * and gives the home slot to it once it has run clearly more often than the occupant. A path
 * may thus have counts in both places; profiles list both entries, which add up. */
#define TALLY_PATH_HOME_BITS 10
#define TALLY_PATH_HOME_SLOTS (1u << TALLY_PATH_HOME_BITS)
struct tally_path_table {
    uint64_t *slots;           /* overflow: 2 * capacity words {path + 1, count} (a read-only
                                * empty slot of the module until the first overflow) */
    uint64_t capacity;         /* a power of two; 0 before the first overflow */
    uint64_t used;             /* occupied overflow slots */
    uint64_t lost;             /* increments dropped because memory ran out */
    uint64_t last_path;        /* the last path counted in the overflow table ... */
    uint64_t *last_count;      /* ... and its count */
    uint32_t function;         /* index of the function in the module's metadata */
    uint32_t lock;             /* spin lock */
    uint64_t *home;            /* 2 * TALLY_PATH_HOME_SLOTS words {path, count}, in the module */
    uint64_t home_claims;      /* home slots the runtime gave a path (0: only path 0, whose
                                * home is slot 0, can have counted, inline) */
};

/* What a frame record's site points at, with its low bit set, in a function whose paths are
 * hashed: the path the frame is on if it ends in the current block. Lives in the frame. */
struct tally_path_site {
    struct tally_path_table *table;
    uint64_t path;
};

/* A frame record: an alloca in each instrumented frame that needs one, linked through
 * __tally_top (innermost first; addresses strictly increase along `prev`). */
struct tally_frame {
    struct tally_frame *prev;
    uint64_t *site;            /* the early-exit counter of the block executing a call;
                                  TALLY_NO_SITE = none; with the low bit set, a
                                  struct tally_path_site * (path mode, hashed paths) */
};

/* The innermost frame record of the calling thread (initial-exec TLS). */
extern __thread struct tally_frame *__tally_top __attribute__((tls_model("initial-exec")));

/* Registers a module (called by each instrumented module's constructor). The first successful
 * registration installs the exit handler, which charges the calling thread's frame records
 * and writes the profile. */
void __tally_register(struct tally_module *m);

/* Removes a module before its memory goes away (e.g. from a destructor of a dlclose'd object).
 * Optional: modules that live until exit need not call it. */
void __tally_unregister(struct tally_module *m);

/* Trace mode (the oracle of path profiles): a new activation of function `function` of the module
 * whose counter array is `module_counters`; returns the activation's id. */
uint64_t __tally_trace_enter(const uint64_t *module_counters, uint32_t function);
/* Trace mode: activation `act` took edge `edge`. */
void __tally_trace_edge(uint64_t act, uint32_t edge);
/* Trace mode: after setjmp; logs the re-entry edge when ret != 0. */
void __tally_trace_reentry(uint64_t act, uint32_t edge, int32_t ret);

/* Adds 1 to the count of `path` in `t` (path mode, functions with hashed path counters). */
void __tally_path_count(struct tally_path_table *t, uint64_t path);

/* Called first thing in a landing pad of the frame owning `f`: charges every record above `f`
 * (frames discarded by the unwinder) and makes `f` the innermost record. */
void __tally_unwound(struct tally_frame *f);

/* Called right after every setjmp/sigsetjmp call in the frame owning `f`, with setjmp's result.
 * When ret != 0, charges every record above `f` and `f` itself, and makes `f` innermost. */
void __tally_longjmp_landed(int32_t ret, struct tally_frame *f);

/* Events mode (--tally-mode=events): the exact number of events this thread has executed, at
 * the point of the call (calls from instrumented code are replaced by inline code that adds
 * the query increment of the call site). */
uint64_t tally_events(void);

/* Events mode: called instead of raising SIGTRAP when TALLY_STOP_AT=N is reached, with the
 * exact count (>= N) and a description of the point. */
typedef void (*tally_stop_handler)(uint64_t count, const char *where);
void tally_events_on_stop(tally_stop_handler handler);

/* Instrumentation internals of events mode. */
extern __thread int64_t __tally_ev_left __attribute__((tls_model("initial-exec")));
extern __thread int64_t __tally_ev_limit __attribute__((tls_model("initial-exec")));
/* Checked chords call this when `left` reaches 0 (see runtime.c): it stops the thread when its
 * exact count (limit - left + query_inc) reached TALLY_STOP_AT, else returns. */
#define TALLY_EV_SLACK (1LL << 24)
#define TALLY_EV_NO_LIMIT (1LL << 62)
void __tally_events_check(const char *where, int64_t query_inc);

/* Writes a profile of the current counter values now (e.g. before _exit or execve). Does not
 * touch the frame records. Safe to call from several threads. */
void tally_write_profile(void);

/* Sets every counter of every registered module to zero. */
void tally_reset_counters(void);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_H */
