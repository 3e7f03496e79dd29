/*
 * handlers.c -- trace mode: signal handlers on witness streams of their own (docs/design/trace.md,
 * "Signal handlers in witness traces"). wtrace.h has the overview.
 */
#include "wtrace.h"

/* ---- Signal handlers ---------------------------------------------------------------------------
 *
 * A traced signal handler that interrupts traced code cannot write to the thread's stream: the
 * interrupted function may be between a check of room and its appends, or hold the word in a
 * register, and the reader would find the handler's records where the interrupted activation's
 * witnesses belong. So the wrapper of the program's handlers (signals.c, while the process
 * traces) runs such a handler on a stream of its own (wtrace_signal): a stream like a thread's,
 * with its own number, starting with the handler's Enter and ending with End when the handler
 * returns; the thread's stream goes on as if nothing had run. Its depth starts at the
 * interrupted depth, so a landing (a siglongjmp out of the handler, an exception) at or below
 * it belongs to the interrupted code: the handler's stream ends there (End). When the
 * interrupted code was in a call of the program's (wtrace_signal says when), the landing's
 * Unwind goes to its stream as after a longjmp out of that call; else the interrupted
 * activation was left at an unknown point between two records, and its stream ends too (End,
 * and a WT_CUT_CHUNK naming it: the reader says that regeneration is not exact past its last
 * record); the thread writes no more. Each signal stream is described by a WT_SIGNAL_CHUNK
 * (its number, the interrupted stream's, the signal) written before it.
 *
 * A signal stream's memory is kept for the thread's next handler (wt_sig_free). Its chunks are
 * written when the handler returns (whole chunks, one write each, also while its thread holds
 * the lock writing a chunk of its own, one write too), unless the handler interrupted this
 * thread while it held the lock for a sequence of writes that must not be split (wt_multi):
 * then they are owed, and written when the thread releases the lock (wt_pay_owed) or at the
 * end of the process. With a flight recorder the stream records nothing (wt_mute). */

static __thread struct wt_thread *wt_sig_free TALLY_TLS_MODEL;

/* The thread's lists of signal streams (only the thread and its handlers use them). */
static struct wt_thread *wt_sig_pop(struct wt_thread **list) {
    struct wt_thread *h = __atomic_load_n(list, __ATOMIC_ACQUIRE);
    while (h && !__atomic_compare_exchange_n(list, &h, h->sig_link, 1, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE))
        ;
    return h;
}
static void wt_sig_push(struct wt_thread **list, struct wt_thread *t) {
    t->sig_link = __atomic_load_n(list, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(list, &t->sig_link, t, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
        ;
}

/* Whether the process traces (a stream was made): the condition for signal streams, asked by
 * signals.c before it wraps a handler. */
int wtrace_signal_streams(void) {
    return __atomic_load_n(&wt.next_tid, __ATOMIC_RELAXED) != 0;
}

/* A flight recorder's signal stream: it records nothing (an ended stream whose closed word
 * sends every record to the slow path, which drops it, while entries and returns keep its
 * depth), and is never written, so the interrupted thread's ring stays exact; the handler's own
 * blocks are not in the recorder. */
static void wt_mute(struct wt_thread *t) {
    t->a = (struct tally_wtrace_acc){TALLY_WTRACE_CLOSED, 0, 0, 1, 0, 0, t->e_next, 0, 0, 0};
    t->a.stage = t->a.stage_end = t->stage;
    t->ended = 1;
    t->n = 0;
    t->sig_muted = 1;
}

/* A stream for a handler, made current; null when there is none (no memory, the thread's
 * stream ended: a muted one included, whose nested handlers run on it). */
static struct wt_thread *wt_sig_begin(int sig, int in_call) {
    struct wt_thread *p = wt_self;
    if ((p && p->ended) || wt_gave_up)
        return 0;
    struct wt_thread *t = wt_sig_pop(&wt_sig_free);
    int fresh = !t;
    if (fresh && !(t = wt_map()))
        return 0;
    if (wring_size()) {
        wt_mute(t); /* (never on wt.threads: nothing to write at the end) */
    } else {
        wt_init(t);
        if (fresh)
            wt_publish(t);
    }
    t->sig_parent = p;
    t->sig_pacc = __tally_wtrace_acc;
    t->sig_base = p ? p->a.depth : 0;
    t->a.depth = t->sig_base;
    t->sig_number = (uint32_t)sig;
    t->sig_in_call = in_call;
    t->sig_owed = 0;
    t->sig_active = 1;
    wt_self = t;
    wt_set_acc(&t->a);
    return t;
}

/* A small chunk (`n` <= 12 bytes) in one write. */
static void wt_note(uint32_t kind, const uint32_t *v, unsigned n) {
    unsigned char chunk[8 + 12];
    for (unsigned i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            chunk[8 + 4 * i + k] = (unsigned char)(v[i] >> (8 * k));
    int held = wt_lock(1);
    wt_chunk_locked_in(kind, chunk + 8, 4 * n, 1);
    wt_unlock(held);
}

/* What a signal stream is (WT_SIGNAL_CHUNK). */
void wt_sig_note(const struct wt_thread *t) {
    uint32_t v[3] = {t->tid, t->sig_parent ? t->sig_parent->tid : 0, t->sig_number};
    wt_note(WT_SIGNAL_CHUNK, v, 3);
}

/* An ended signal stream's chunks: what it is, then its stream (a range-coded one's chunk
 * ends with it). */
void wt_sig_write(struct wt_thread *t) {
    wt_sig_note(t);
    wt_flush(t, 1);
}

/* The handler's stream `t` ends (End) and the interrupted code's stream is current again; its
 * chunks are written, or owed while this thread holds the lock for a sequence of writes
 * (wt_multi: owing at every interrupted write made the streams owed while paying grow without
 * bound under a signal storm). */
static void wt_sig_end(struct wt_thread *t) {
    int saved_errno = errno;
    if (!t->ended) {
        wt_bits(t, WT_END, WT_CONTROL_BITS); /* End: '0' then kind 10 */
        wt_acc_end(t);
        t->ended = 1;
    }
    t->sig_active = 0;
    wt_self = t->sig_parent;
    wt_set_acc(t->sig_pacc);
    if (t->sig_muted) {
        wt_sig_push(&wt_sig_free, t);
    } else if (wt_lock_mine() && __atomic_load_n(&wt.multi, __ATOMIC_RELAXED)) {
        t->sig_owed = 1;
        wt_sig_push(&wt_sig_owed, t);
    } else {
        wt_sig_write(t);
        wt_sig_push(&wt_sig_free, t);
    }
    errno = saved_errno;
}

/* The streams this thread owes are written (it just released the lock). */
void wt_pay_owed(void) {
    wt_paying = 1;
    struct wt_thread *t;
    while ((t = __atomic_exchange_n(&wt_sig_owed, 0, __ATOMIC_ACQ_REL))) {
        while (t) {
            struct wt_thread *next = t->sig_link;
            if (t->sig_owed) {
                t->sig_owed = 0;
                wt_sig_write(t);
            }
            wt_sig_push(&wt_sig_free, t);
            t = next;
        }
    }
    wt_paying = 0;
}

/* A landing at `depth`, at or below the base of the handler's stream `t`: the handler was
 * left (siglongjmp, an exception). Its stream ends, and so does each interrupted stream whose
 * code the landing abandoned between two records (a lost record, then End), up to the stream
 * the landing is in. Returns that stream (it may have ended), or null. */
struct wt_thread *wt_sig_left(struct wt_thread *t, uint32_t depth) {
    while (t && t->sig_active && depth <= t->sig_base) {
        struct wt_thread *p = t->sig_parent;
        int in_call = t->sig_in_call;
        wt_sig_end(t);
        if (p && !p->ended && !in_call && p->ring) {
            /* A flight recorder's stream ends where the handler interrupted it, as at a
             * crash: no End, its pending bits kept for the dump, which reads to its last bit. */
            p->end_n = wt_pending(p, p->a.acc, &p->end_lo, &p->end_hi);
            wt_close(p);
            p->ended = 1;
        } else if (p && !p->ended && !in_call) {
            int saved_errno = errno;
            wt_bits(p, WT_END, WT_CONTROL_BITS); /* End */
            wt_acc_end(p);
            p->ended = 1;
            wt_note(WT_CUT_CHUNK, &p->tid, 1);
            if (!p->sig_active)
                wt_flush(p, 1);
            errno = saved_errno;
        }
        t = p;
    }
    return t;
}

/* Runs the program's handler `v` for `sig` on a stream of its own. The interrupted code was
 * in a call of the program's -- so that a landing below the handler writes its Unwind as after
 * a longjmp from that call -- when the interrupted instruction `pc` is outside the traced
 * image (`inside` 0), the runtime was not calling the system itself, the thread's last direct
 * call announced an untraced callee, and either `pc` lies within 1 KiB of that callee (a
 * blocking `read`, `pause`, `sigsuspend`, ...: libc's wrappers make the system call
 * themselves) or the process sent the signal itself (`raise`, `abort`, `kill` of itself).
 * Anything else (an intrinsic's `memcpy`, a call through a pointer) counts as between two
 * records, so such a landing cuts the interrupted stream (wt_sig_left). */
void wtrace_signal(const struct sigaction *v, int sig, siginfo_t *info, void *uc, uintptr_t pc,
                   int inside) {
    int saved_errno = errno;
    struct wt_thread *p = wt_self;
    uintptr_t callee = p ? (uintptr_t)(p->ring ? p->rdirect : p->a.direct) : 0;
    int in_call = !inside && !wt_busy && callee &&
                  (pc - callee < 1024 ||
                   (info && (info->si_code == SI_TKILL || info->si_code == SI_USER) &&
                    info->si_pid == getpid()));
    struct wt_thread *t = wt_sig_begin(sig, in_call);
    errno = saved_errno;
    if (v->sa_flags & SA_SIGINFO)
        v->sa_sigaction(sig, info, uc);
    else
        v->sa_handler(sig);
    if (t && wt_self == t && t->sig_active)
        wt_sig_end(t);
}
