/*
 * home.c -- trace mode: one trace per process: every copy of the runtime in the process hands
 * its calls to the registry owner's copy, which writes the trace. wtrace.h has the overview.
 */
#include "wtrace.h"

/* ---- One trace per process (rt.h) ---------------------------------------------------------
 *
 * Every image tally links carries its own copy of this file, and instrumented code reaches its
 * own image's copy: its `__tally_wtrace_acc`, its entry points. A process still has one trace:
 * the registry owner's copy writes it, and every other copy hands each call that reaches it
 * over to the owner's (struct tally_trace_ops; decided at the copy's first call, trace_home_).
 * The accumulator that instrumented code appends to inline is then the owner's thread stream
 * in every image, because the owner sets every adopted copy's `__tally_wtrace_acc` with its
 * own (wt_set_acc: initial-exec thread-locals lie at a fixed offset from the thread pointer,
 * the same in every thread, so no call into another image is needed, also in a signal
 * handler); a copy that hands a call over takes the owner's pointer afterwards (a thread whose
 * stream was made before the copy was adopted). So a call from one image into another is a
 * call within one stream: announced by the caller's direct flag, resolved by address among
 * every image's functions (wt_write_resolutions), and modules and activations are numbered
 * once for the process. A copy whose object is dlclosed is forgotten (trace_leave). */

int trace_home_state; /* 0: not decided yet */
const struct tally_trace_ops *trace_home_ops;

#define WT_COPIES 64
static struct tally_trace_copy wt_copies[WT_COPIES]; /* acc_off 0: a free entry */
static uint32_t wt_ncopies;                          /* entries ever used (a bound) */

/* The calling thread's accumulator pointer, in this copy and every adopted one. */
void wt_set_acc(struct tally_wtrace_acc *p) {
    __tally_wtrace_acc = p;
    uint32_t n = __atomic_load_n(&wt_ncopies, __ATOMIC_ACQUIRE);
    char *tp = __builtin_thread_pointer();
    for (uint32_t i = 0; i < n; i++) {
        intptr_t off = __atomic_load_n(&wt_copies[i].acc_off, __ATOMIC_ACQUIRE);
        if (off)
            *(struct tally_wtrace_acc *volatile *)(void *)(tp + off) = p;
    }
}

int wtrace_inside(uintptr_t pc) {
    uint32_t n = __atomic_load_n(&wt_ncopies, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++) {
        const struct tally_trace_copy *c = &wt_copies[i];
        if (!__atomic_load_n(&c->acc_off, __ATOMIC_ACQUIRE))
            continue;
        for (int k = 0; k < c->n && k < TALLY_TRACE_IMAGE_RANGES; k++)
            if (pc >= c->lo[k] && pc < c->hi[k])
                return 1;
    }
    return 0;
}

/* ---- One trace per process: the owner's side, and the decision ------------------------------ */

static uint32_t wt_op_module(struct tally_wtrace_module *m, uint64_t hash) {
    return wt_module_h(m, hash);
}

static uint32_t wt_op_enter(struct tally_wtrace_module *m, uint32_t function, const void *self) {
    return __tally_wtrace_enter(m, 0, function, self);
}

static struct tally_wtrace_acc *wt_op_acc(void) {
    return __tally_wtrace_acc;
}

static int wt_op_adopt(const struct tally_trace_copy *c) {
    int held = wt_lock(0), r = -1;
    uint32_t n = __atomic_load_n(&wt_ncopies, __ATOMIC_RELAXED), i = 0;
    while (i < n && __atomic_load_n(&wt_copies[i].acc_off, __ATOMIC_RELAXED))
        i++;
    if (i < WT_COPIES && c->acc_off) {
        struct tally_trace_copy *e = &wt_copies[i];
        e->n = c->n;
        memcpy(e->lo, c->lo, sizeof e->lo);
        memcpy(e->hi, c->hi, sizeof e->hi);
        __atomic_store_n(&e->acc_off, c->acc_off, __ATOMIC_RELEASE);
        if (i == n)
            __atomic_store_n(&wt_ncopies, n + 1, __ATOMIC_RELEASE);
        r = 0;
    }
    wt_unlock(held);
    return r;
}

static void wt_op_forget(intptr_t acc_off) {
    int held = wt_lock(0);
    uint32_t n = __atomic_load_n(&wt_ncopies, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < n; i++)
        if (wt_copies[i].acc_off == acc_off)
            __atomic_store_n(&wt_copies[i].acc_off, 0, __ATOMIC_RELEASE);
    wt_unlock(held);
}

const struct tally_trace_ops wtrace_ops = {
    wt_op_module,           wt_op_enter,   __tally_wtrace_spill, __tally_wtrace_direct,
    __tally_wtrace_call,    wt_landing,    __tally_wtrace_ret,   tally_dump_trace,
    wt_op_acc,              wt_op_adopt,   wt_op_forget,         trace_naive_enter_h,
    __tally_trace_edge,
};

static intptr_t wt_acc_off(void) {
    return (char *)&__tally_wtrace_acc - (char *)__builtin_thread_pointer();
}

/* Decides, at this copy's first trace call, whether it writes the trace (it is the registry's
 * owner, or alone) or hands its calls to the owner's copy, which then adopts it. */
const struct tally_trace_ops *trace_home_(void) {
    struct tally_registry *r = ensure_registry();
    spin_lock(&reg_lock, 0);
    if (!__atomic_load_n(&trace_home_state, __ATOMIC_ACQUIRE)) {
        struct tally_instance *own = r ? r->owner : 0;
        const struct tally_trace_ops *o = 0;
        if (own && own != &tally__self && own->trace) {
            o = own->trace;
            struct tally_trace_copy c;
            memset(&c, 0, sizeof c);
            c.acc_off = wt_acc_off();
            c.n = image_ranges((uintptr_t)&trace_home_, c.lo, c.hi, TALLY_TRACE_IMAGE_RANGES);
            if (o->adopt(&c) != 0) {
                static const char msg[] =
                    "tally: too many images with traced code; the trace of the later ones may "
                    "not be exact\n";
                write_stderr(msg, sizeof msg - 1);
            }
        }
        trace_home_ops = o;
        __atomic_store_n(&trace_home_state, 1, __ATOMIC_RELEASE);
    }
    spin_unlock(&reg_lock);
    return trace_home_ops;
}

void trace_leave(void) {
    const struct tally_trace_ops *o = trace_home_ops;
    if (__atomic_load_n(&trace_home_state, __ATOMIC_ACQUIRE) && o) {
        o->forget(wt_acc_off());
        trace_home_ops = 0;
        __atomic_store_n(&trace_home_state, 0, __ATOMIC_RELEASE);
    }
}
