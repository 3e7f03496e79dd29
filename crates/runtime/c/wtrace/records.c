/*
 * records.c -- trace mode: the control records the runtime writes (module slots, Enter coded
 * against the stream's history, landings) and the entry points that write them. wtrace.h has
 * the overview.
 */
#include "wtrace.h"

/* ---- Control records ---------------------------------------------------------------------------- */

/* A varint: groups of 7 bits + a continuation bit, low groups first; appended at once (one
 * wt_bits for values below 2^56). */
static void wt_varint(struct wt_thread *t, uint64_t v) {
    if (v < WT_VARINT_MORE) { /* (the usual slots and function indices: one or two groups) */
        wt_bits(t, v, WT_VARINT_GROUP);
        return;
    }
    if (v < WT_VARINT_MORE * WT_VARINT_MORE) {
        wt_bits(t,
                (v & (WT_VARINT_MORE - 1)) | WT_VARINT_MORE |
                    (v >> TALLY_WTRACE_VARINT_BITS) << WT_VARINT_GROUP,
                2 * WT_VARINT_GROUP);
        return;
    }
    uint64_t code = 0;
    unsigned bits = 0;
    for (;;) {
        int more = v >= WT_VARINT_MORE;
        code |= ((v & (WT_VARINT_MORE - 1)) | (uint64_t)more << TALLY_WTRACE_VARINT_BITS) << bits;
        bits += WT_VARINT_GROUP;
        v >>= TALLY_WTRACE_VARINT_BITS;
        if (!more || bits == WT_VARINT_CHUNK)
            break;
    }
    wt_bits(t, code, bits);
    if (v && bits == WT_VARINT_CHUNK && (code >> (WT_VARINT_CHUNK - 1)) & 1)
        wt_varint(t, v);
}

/* Keeps a copy of module `m`'s tables under slot `s` (the lock is held, or given up on by a
 * signal handler: the list is pushed to atomically). */
static void wt_keep_tables(const struct tally_wtrace_module *m, uint32_t s) {
    uint32_t nf = m->funcs ? m->nfuncs : 0, ne = m->externs ? m->nexterns : 0;
    if (nf > WT_TABLE_MAX)
        nf = WT_TABLE_MAX;
    if (ne > WT_TABLE_MAX)
        ne = WT_TABLE_MAX;
    size_t size = sizeof(struct wt_mod) + ((size_t)nf + ne) * sizeof(void *);
    wt_busy++;
    void *p = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    wt_busy--;
    if (p == MAP_FAILED)
        return; /* (its external calls then have no resolution: the reader says so) */
    struct wt_mod *c = p;
    c->slot = s;
    c->nfuncs = nf;
    c->nexterns = ne;
    c->funcs = (const void **)(c + 1);
    c->externs = c->funcs + nf;
    for (uint32_t i = 0; i < nf; i++)
        c->funcs[i] = m->funcs[i];
    for (uint32_t k = 0; k < ne; k++)
        c->externs[k] = m->externs[k];
    c->next = __atomic_load_n(&wt.mods, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&wt.mods, &c->next, c, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
        ;
}

/* Assigns the module its slot and names it in the trace. */
__attribute__((noinline, cold)) uint32_t wt_module_h(struct tally_wtrace_module *m,
                                                      uint64_t hash) {
    uint32_t *slot = &m->slot;
    int held = wt_lock(0);
    uint32_t s = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!s) {
        s = __atomic_add_fetch(&wt.next_slot, 1, __ATOMIC_RELAXED);
        int saved = errno;
        wt_keep_tables(m, s);
        errno = saved;
        unsigned char chunk[8 + 12], *rec = chunk + 8; /* (the header's room: one write) */
        for (int k = 0; k < 4; k++)
            rec[k] = (unsigned char)(s >> (8 * k));
        for (int k = 0; k < 8; k++)
            rec[4 + k] = (unsigned char)(hash >> (8 * k));
        int saved_errno = errno;
        if (wring_size())
            wring_module(s, hash); /* written with the rings */
        else
            wt_chunk_locked_in(WT_MODULE_CHUNK, rec, 12, 1);
        errno = saved_errno;
        __atomic_store_n(slot, s, __ATOMIC_RELEASE);
    }
    wt_unlock(held);
    return s;
}
/* (`counters` null: a module whose slot another copy's call gave it, wtrace_ops.module.) */
static __attribute__((noinline, cold)) uint32_t wt_module(struct tally_wtrace_module *m,
                                                           const uint64_t *counters) {
    return wt_module_h(m, counters ? trace_module_hash(counters) : 0);
}

/* An Enter record in full: '0', kind 00, '0', the slot and the index. */
static __attribute__((noinline)) void wt_enter_full(struct wt_thread *t, uint32_t s, uint32_t function) {
    wt_bits(t, WT_ENTER_FULL, WT_ENTER_FULL_BITS);
    wt_varint(t, s);
    wt_varint(t, function);
}

/* An Enter record coded against the stream's history (bits.rs' EnterCoder, the same state and
 * the same updates): kind 3 alone for the predicted function (only the previous Enter changes:
 * instrumented code writes this case itself when it can, tally.h), kind 0 then '1' and a 4-bit
 * position among the recently entered, or the full record. Then `again` is `self` (or null)
 * when the function predicts itself. */
#define WT_HASH(key) (((key) * TALLY_WTRACE_ENTER_MUL) >> TALLY_WTRACE_ENTER_SHIFT)
/* The rest of an Enter that the short path below does not finish: the record when the word
 * has no room for it (`bits` of `code`), or the full record (`bits` 0), then the state.
 * Tail-called, so that the short path keeps everything in scratch registers. Returns the
 * thread's depth. */
static __attribute__((noinline, cold)) uint32_t wt_enter_rest(struct wt_thread *t, uint64_t key,
                                                              const void *self, uint64_t code,
                                                              unsigned bits) {
    if (bits)
        wt_bits(t, code, bits);
    else
        wt_enter_full(t, (uint32_t)(key >> 32), (uint32_t)key);
    t->e_next[WT_HASH(t->a.e_prev)] = key;
    t->a.e_prev = key;
    t->a.again = t->e_next[WT_HASH(key)] == key ? self : 0;
    return t->a.depth;
}
/* Returns the thread's depth. */
static inline __attribute__((always_inline)) uint32_t
wt_enter_record(struct wt_thread *t, uint32_t s, uint32_t function, const void *self) {
    uint64_t key = (uint64_t)s << 32 | function;
    uint64_t *pred = &t->e_next[WT_HASH(t->a.e_prev)];
    uint64_t code = WT_ENTER_PREDICTED; /* '0' then kind 11: the predicted function */
    unsigned bits = WT_CONTROL_BITS;
    if (*pred != key) {
        /* Move to front while looking: each kept key moves down one place up to `key`'s
         * (found: it comes out of its place) or to the end (new: the 16th falls off a full
         * list). */
        uint64_t *r = t->e_recent, carry = key;
        uint32_t at = 0, nr = t->e_nrecent;
        for (; at < nr; at++) {
            uint64_t cur = r[at];
            r[at] = carry;
            carry = cur;
            if (cur == key)
                break;
        }
        if (at >= nr) {
            if (nr < TALLY_WTRACE_RECENT) {
                r[nr] = carry;
                t->e_nrecent = nr + 1;
            }
            return wt_enter_rest(t, key, self, 0, 0);
        }
        code = WT_ENTER_RECENT((uint64_t)at); /* '0', kind 00, '1', the position */
        bits = WT_ENTER_RECENT_BITS;
    }
    uint64_t w = t->a.acc;
    if (__builtin_expect((w & ((1ull << bits) - 1)) != 0, 0))
        return wt_enter_rest(t, key, self, code, bits); /* (a full or closed word) */
    t->a.acc = w >> bits | code << (64 - bits);
    *pred = key;
    t->a.e_prev = key;
    t->a.again = t->e_next[WT_HASH(key)] == key ? self : 0;
    return t->a.depth;
}

/* An entry with a flight recorder: the shadow stack, the Enter record, and a synchronization
 * point when the current chunk is full (after Enter: the new chunk starts inside the
 * activation, at its entry). The accumulator is drained (padded to a byte) into the chunk. */
static __attribute__((noinline)) uint32_t
wt_enter_ring(struct wt_thread *t, uint32_t depth, int announced, struct tally_wtrace_module *m,
              const uint64_t *module_counters, uint32_t function) {
    if (t->ended)
        return depth;
    uint32_t s = __atomic_load_n(&m->slot, __ATOMIC_ACQUIRE);
    if (!s)
        s = wt_module(m, module_counters);
    wring_push(t->ring, depth, s, function);
    if (announced) /* (in full: the reader starts at any synchronization point) */
        wt_enter_full(t, s, function);
    if (wring_want_sync(t->ring, depth, t->n + (t->npend + wt_word_n(t->a.acc)) / 8)) {
        unsigned pad = wt_acc_drain(t);
        wt_flush(t, 0);
        wring_sync(t->ring, depth, pad);
    }
    return depth;
}

/* The slow path of an entry (the inline one: the direct flag names `self` and the module has
 * its slot, without a flight recorder): a live stream without a flight recorder here, with
 * few registers and no call on the way of an Enter coded against the stream; the rest (the
 * thread's first entry, an ended stream, a flight recorder) in wt_enter_other. */
static __attribute__((noinline)) uint32_t wt_enter_other(struct tally_wtrace_module *m,
                                                         const uint64_t *module_counters,
                                                         uint32_t function, const void *self);
uint32_t __tally_wtrace_enter(struct tally_wtrace_module *m, const uint64_t *module_counters,
                              uint32_t function, const void *self) {
    struct wt_thread *t = wt_self;
    if (__builtin_expect(!t || t->ring || t->ended, 0))
        return wt_enter_other(m, module_counters, function, self);
    uint32_t depth = ++t->a.depth;
    uint32_t s = __atomic_load_n(&m->slot, __ATOMIC_ACQUIRE);
    if (__builtin_expect(!s, 0))
        s = wt_module(m, module_counters);
    if (self && t->a.direct == self) {
        t->a.direct = 0; /* announced */
        return depth;
    }
    return wt_enter_record(t, s, function, self);
}
static __attribute__((noinline)) uint32_t wt_enter_other(struct tally_wtrace_module *m,
                                                         const uint64_t *module_counters,
                                                         uint32_t function, const void *self) {
    const struct tally_trace_ops *o;
    if (!wt_self && (o = trace_home())) {
        if (!__atomic_load_n(&m->slot, __ATOMIC_ACQUIRE))
            o->module(m, trace_module_hash(module_counters));
        uint32_t depth = o->enter(m, function, self);
        __tally_wtrace_acc = o->acc();
        return depth;
    }
    struct wt_thread *t = wt_get();
    if (!t)
        return 0;
    uint32_t depth = ++t->a.depth;
    const void **flag = t->ring ? &t->rdirect : &t->a.direct;
    int announced = !self || *flag != self;
    if (!announced)
        *flag = 0;
    if (t->ring)
        return wt_enter_ring(t, depth, announced, m, module_counters, function);
    if (t->ended)
        return depth;
    /* Every module that runs gets its slot, also one entered only silently: its functions are
     * named by the resolution of other modules' external calls. */
    uint32_t s = __atomic_load_n(&m->slot, __ATOMIC_ACQUIRE);
    if (!s)
        s = wt_module(m, module_counters);
    if (announced)
        wt_enter_record(t, s, function, self);
    return depth;
}

/* (Instrumented code decrements the depth inline; kept for objects of earlier builds.) */
void __tally_wtrace_ret(void) {
    struct wt_thread *t = wt_self;
    const struct tally_trace_ops *o;
    if (t)
        t->a.depth--;
    else if ((o = trace_home()))
        o->ret();
}

/* The slow path of the inline direct flag (slow set: a flight recorder, or no stream yet). */
void __tally_wtrace_direct(const void *callee, uint32_t site) {
    const struct tally_trace_ops *o;
    if (!wt_self && (o = trace_home())) {
        o->direct(callee, site);
        __tally_wtrace_acc = o->acc();
        return;
    }
    struct wt_thread *t = wt_get();
    if (!t)
        return;
    if (t->ring) {
        t->rdirect = callee;
        wring_site(t->ring, t->a.depth, site);
    } else {
        t->a.direct = callee;
    }
}

/* The slow path of an unknown call site (slow set): the flight recorder's shadow stack. */
void __tally_wtrace_call(uint32_t site) {
    struct wt_thread *t = wt_self;
    const struct tally_trace_ops *o;
    if (!t && (o = trace_home()))
        o->call(site);
    else if (t && t->ring)
        wring_site(t->ring, t->a.depth, site);
}

/* Control landed in the activation at `depth` (kept in its frame since its entry), at `block`,
 * after the activations above it were abandoned: an Unwind record (kind 1, then how in 2 bits:
 * 0 a longjmp's re-entry, 1 an exception's landing pad; then the abandoned count and the
 * block). The thread's depth (and so the flight recorder's shadow stack) is that of the
 * landing activation again. */
void wt_landing(uint32_t how, uint32_t depth, uint32_t block) {
    const struct tally_trace_ops *o;
    if (!wt_self && (o = trace_home())) {
        o->landing(how, depth, block);
        __tally_wtrace_acc = o->acc();
        return;
    }
    struct wt_thread *t = wt_get();
    if (!t)
        return;
    if (t->sig_active && depth <= t->sig_base && !(t = wt_sig_left(t, depth)))
        return;
    uint32_t abandoned = t->a.depth - depth;
    t->a.depth = depth;
    if (!t->ended) {
        wt_bits(t, WT_LANDING(how), WT_LANDING_BITS); /* '0', kind 01, how */
        wt_varint(t, abandoned);
        wt_varint(t, block);
    }
}

void __tally_wtrace_reentry(int32_t ret, uint32_t depth, uint32_t block) {
    if (ret != 0)
        wt_landing(TALLY_WTRACE_HOW_REENTRY, depth, block);
}

void __tally_wtrace_unwind(uint32_t depth, uint32_t block) {
    int saved_errno = errno;
    wt_landing(TALLY_WTRACE_HOW_UNWIND, depth, block);
    errno = saved_errno;
}
