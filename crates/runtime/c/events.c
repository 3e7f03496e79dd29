/*
 * events.c -- events mode (Ball 1994): the per-thread event countdown, exact on-line queries and
 * TALLY_STOP_AT.
 */
#include "rt.h"

/* ------------------------------------------------------------------------------------------ */
/* Events mode: the per-thread event countdown, queries, TALLY_STOP_AT                        */
/* ------------------------------------------------------------------------------------------ */

/* The exact event count of a thread is __tally_ev_limit - __tally_ev_left (plus the query
 * increment of the point, which instrumented code adds itself). Instrumented code subtracts
 * increments from `left` and, on its checked chords, calls __tally_events_check when the new
 * `left` is <= 0 (<= q - TALLY_EV_SLACK at the rare points whose query increment q exceeds
 * TALLY_EV_SLACK): a test x86 reads off the flags of the subtraction itself. With
 * TALLY_STOP_AT=N the limit is set TALLY_EV_SLACK events short of N, so every checked point whose
 * exact count (count + q, q <= TALLY_EV_SLACK) reaches N calls the runtime, which decides
 * exactly; the points checked in between (at most TALLY_EV_SLACK events' worth) return at once.
 * Without a pending stop the limit is TALLY_EV_NO_LIMIT (2^62), so that `left` stays far from
 * both ends of int64_t whatever the (possibly negative) increments and a check's signed `jle`
 * after the subtraction never sees an overflow. */
__thread int64_t __tally_ev_left TALLY_TLS_MODEL = TALLY_EV_NO_LIMIT;
__thread int64_t __tally_ev_limit TALLY_TLS_MODEL = TALLY_EV_NO_LIMIT;
/* N of TALLY_STOP_AT for this thread, 0 when none is pending. */
static __thread int64_t stop_target TALLY_TLS_MODEL;

static tally_stop_handler stop_handler;
int stop_checked;

uint64_t tally_events(void) {
    return (uint64_t)(__tally_ev_limit - __tally_ev_left);
}

void tally_events_on_stop(tally_stop_handler h) {
    __atomic_store_n(&stop_handler, h, __ATOMIC_RELEASE);
}

/* Sets the calling thread's limit to `limit`, keeping its count. */
static void set_limit(int64_t limit) {
    int64_t count = __tally_ev_limit - __tally_ev_left;
    __tally_ev_limit = limit;
    __tally_ev_left = limit - count;
}

/* TALLY_STOP_AT=N: the (main) thread stops at the first checked point where its exact count is
 * >= N. Parsed from the environment snapshot at the first registration of an events module;
 * a value that is not a whole number in 1..INT64_MAX/2 is ignored with one line on stderr. */
void read_stop_at(void) {
    if (!env.stop_at.set)
        return;
    const char *s = env.stop_at.v;
    const char *why = 0;
    uint64_t n = 0;
    if (env.stop_at.too_long || !*s)
        why = "not a whole number";
    for (; !why && *s; s++) {
        if (*s < '0' || *s > '9')
            why = "not a whole number";
        else if (n > (UINT64_MAX - 9) / 10)
            why = "out of range";
        else
            n = n * 10 + (uint64_t)(*s - '0');
    }
    if (!why && (n == 0 || n > (uint64_t)INT64_MAX / 2))
        why = "out of range";
    if (why) {
        char line[256];
        size_t k = put_str(line, 0, 200, "tally: ignoring TALLY_STOP_AT=");
        k = put_str(line, k, 200, env.stop_at.v);
        if (env.stop_at.too_long || k >= 199)
            k = put_str(line, k, sizeof line, "...");
        k = put_str(line, k, sizeof line, ": ");
        k = put_str(line, k, sizeof line, why);
        k = put_str(line, k, sizeof line,
                    strcmp(why, "out of range") == 0 ? " (1 to 4611686018427387903)\n" : "\n");
        write_stderr(line, k);
        return;
    }
    stop_target = (int64_t)n;
    set_limit((int64_t)n - TALLY_EV_SLACK);
}

void __tally_events_check(const char *where, int64_t query_inc) {
    int64_t exact = __tally_ev_limit - __tally_ev_left + query_inc;
    if (stop_target == 0 || exact < stop_target)
        return; /* armed early (TALLY_EV_SLACK) or no stop pending: not there yet */
    int saved_errno = errno;
    uint64_t count = (uint64_t)exact;
    /* Never again in this thread: the count is kept, the limit lifted. */
    stop_target = 0;
    set_limit(TALLY_EV_NO_LIMIT);
    char line[4096 + 128];
    size_t n = put_str(line, 0, sizeof line, "tally: TALLY_STOP_AT reached: ");
    n = put_u64(line, n, sizeof line, count);
    n = put_str(line, n, sizeof line, " events at ");
    n = put_str(line, n, sizeof line, where ? where : "?");
    n = put_str(line, n, sizeof line, "\n");
    write_stderr(line, n);
    tally_stop_handler h = __atomic_load_n(&stop_handler, __ATOMIC_ACQUIRE);
    errno = saved_errno;
    if (h)
        h(count, where);
    else
        raise(SIGTRAP);
}
