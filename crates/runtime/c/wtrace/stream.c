/*
 * stream.c -- trace mode: a thread's witness stream (Ball & Larus 1994 §4): the trace's lock and
 * state, chunks to the file, the making of a stream, and the accumulator's slow paths
 * (__tally_wtrace_spill). wtrace.h has the overview.
 */
#include "wtrace.h"

struct wt_state wt;

__thread struct wt_thread *wt_self TALLY_TLS_MODEL;

/* ---- Accumulator (the fast path's state) ---------------------------------------------------- */

/* What __tally_wtrace_acc points at while the thread has no stream: a closed word and
 * slow = 1, so instrumented code never writes it (every record takes __tally_wtrace_spill,
 * every entry, direct flag and call site the runtime). The first entry in a thread (always through
 * __tally_wtrace_enter, for slow = 1) points the thread at its stream's accumulator, or at
 * wt_no_memory when the stream cannot be mapped, so that the inline `ret`, which decrements
 * the depth without a test, never writes this shared one. */
/* The prediction table of the shared accumulators: no key, never written (no stream writes
 * an Enter through them). */
static uint64_t wt_no_keys[TALLY_WTRACE_ENTER_TABLE];
static struct tally_wtrace_acc wt_no_stream = {TALLY_WTRACE_CLOSED, 0, 0, 1, 0, 0, wt_no_keys, 0, 0, 0};
static __thread struct tally_wtrace_acc wt_no_memory TALLY_TLS_MODEL;
__thread struct tally_wtrace_acc *__tally_wtrace_acc
    TALLY_TLS_MODEL = &wt_no_stream;

/* (The thread-locals below: wtrace.h.) */
__thread unsigned wt_busy TALLY_TLS_MODEL;

/* Whether the calling thread holds the lock (a signal handler that interrupted its holder). */
int wt_lock_mine(void) {
    return owner_lock_mine(&wt.lock);
}

/* Takes the lock (owner_lock: its word is the holder's thread id); `bounded` (the end of the
 * process, possibly in a signal handler that interrupted its holder) gives up after a while
 * and goes on without it. A signal handler that interrupted this very thread's holder goes on
 * without it at once (waiting would never end): what it writes is whole chunks, one `write`
 * each, which cannot tear the holder's. Returns whether the lock is held. */
int wt_lock(int bounded) {
    wt_busy++;
    int held = owner_lock(&wt.lock, bounded);
    wt_busy--;
    return held;
}

/* Signal streams whose chunks this thread owes (they ended while it held the lock). */
__thread struct wt_thread *wt_sig_owed TALLY_TLS_MODEL;

/* Whether this thread is paying what it owes (wt_pay_owed does not run inside itself). */
__thread int wt_paying TALLY_TLS_MODEL;

void wt_unlock(int held) {
    if (held) {
        owner_unlock(&wt.lock);
        if (__atomic_load_n(&wt_sig_owed, __ATOMIC_RELAXED) && !wt_paying)
            wt_pay_owed();
    }
}

/* The lock's holder starts (1) or ends (0) writing a sequence of writes that a chunk written
 * in between would split (the file's opening and header, a flight recorder's dump, the
 * resolutions): a signal handler that interrupts it on its thread owes its chunks until the
 * unlock. Every other write is one whole chunk, which a handler's whole chunks cannot split. */
void wt_multi(int on) {
    __atomic_store_n(&wt.multi, on, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Writes one chunk; the lock is held (or given up on). With `room` the 8 bytes before `bytes`
 * are free (a stream's buffer): the header goes there, and the chunk out in one write. */
static void wt_chunk_locked_in_(uint32_t tid, unsigned char *bytes, size_t n, int room);
void wt_chunk_locked_in(uint32_t tid, unsigned char *bytes, size_t n, int room) {
    wt_busy++;
    wt_chunk_locked_in_(tid, bytes, n, room);
    wt_busy--;
}
static void wt_chunk_locked_in_(uint32_t tid, unsigned char *bytes, size_t n, int room) {
    if (wt.fd == 0) {
        wt_multi(1);
        int fd = trace_open_file(wt.path);
        unsigned char head[16] = "TALLYWTR";
        head[8] = wt_compressing() ? TALLY_WTRACE_VERSION_CODED
                  : wt_words()       ? TALLY_WTRACE_VERSION_WORDS
                                     : TALLY_WTRACE_VERSION;
        if (fd > 0 && write_all(fd, head, 16) != 0)
            fd = -1;
        wt.fd = fd;
        wt_multi(0);
    }
    if (wt.fd <= 0)
        return;
    unsigned char own[8], *head = room ? bytes - 8 : own;
    for (int k = 0; k < 4; k++) {
        head[k] = (unsigned char)(tid >> (8 * k));
        head[4 + k] = (unsigned char)((uint32_t)n >> (8 * k));
    }
    if (room ? write_all(wt.fd, head, 8 + n) != 0
             : write_all(wt.fd, head, 8) != 0 || write_all(wt.fd, bytes, n) != 0) {
        static const char msg[] = "tally: cannot write the trace file\n";
        write_stderr(msg, sizeof msg - 1);
        wt.fd = -1;
    }
}
_Static_assert(offsetof(struct wt_thread, buf) == offsetof(struct wt_thread, head) + 8,
               "a stream's chunk header right before its buffer");
_Static_assert(offsetof(struct wt_thread, buf) % 8 == 0 && WT_BUF % 8 == 0,
               "a stream of words stages into its buffer");

/* A stream of words whose buffer was written: the inline code stages from its start again
 * (nowhere once the stream is closed). */
void wt_words_restart(struct wt_thread *t) {
    t->a.stage = (uint64_t *)(void *)t->buf;
    t->a.stage_end = t->ended ? t->a.stage : t->a.stage + WT_BUF / 8;
}

__attribute__((noinline, cold)) void wt_flush(struct wt_thread *t, int bounded) {
    if (t->words)
        wt_words_sync(t);
    if (t->ring) {
        wring_bytes(t->ring, t->buf, t->n);
        t->n = 0;
        return;
    }
    int saved_errno = errno;
    if (t->rc) {
        wt_rc_flush(t, bounded);
        errno = saved_errno;
        return;
    }
    int held = wt_lock(bounded);
    if (t->n)
        wt_chunk_locked_in(t->tid, t->buf, t->n, 1);
    t->n = 0;
    if (t->words)
        wt_words_restart(t);
    wt_unlock(held);
    errno = saved_errno;
}

/* The thread's bits not yet in its buffer: the packer's, then the inline word's (at most 126:
 * `*hi` gets what does not fit in `*lo`). Returns how many. */
unsigned wt_pending(const struct wt_thread *t, uint64_t w, uint64_t *lo, uint64_t *hi) {
    unsigned p = t->npend, n = wt_word_n(w);
    uint64_t bits = wt_word_bits(w);
    *lo = t->pend | (n && p < 64 ? bits << p : 0);
    *hi = p && n && p + n > 64 ? bits >> (64 - p) : 0;
    return p + n;
}

/* The thread's stream, made on its first call. When it cannot be mapped the thread never
 * tries again: its accumulator pointer stays wt_no_memory, so that the pointer a function
 * loads once after its entry (a written-through copy, tally-llvm's Rec::acc) is the thread's
 * for good. */
__thread int wt_gave_up TALLY_TLS_MODEL;
/* A stream's state as new, in `t` (mapped zeroed, or a signal stream used before: everything
 * the stream's records change is set again). Returns `t`. */
struct wt_thread *wt_init(struct wt_thread *t) {
    t->a = (struct tally_wtrace_acc){TALLY_WTRACE_EMPTY, 0, 0, 0, 0, 0, t->e_next, 0, 0, 0};
    t->a.stage = t->stage;
    t->a.stage_end = t->stage; /* (room below, for a stream without a flight recorder) */
    t->rdirect = 0;
    t->ended = 0;
    t->pend = 0;
    t->npend = 0;
    t->end_lo = t->end_hi = 0;
    t->end_n = 0;
    t->n = 0;
    t->words = 0;
    t->sig_muted = 0;
    memset(t->e_next, 0, sizeof t->e_next);
    t->e_nrecent = 0;
    t->cap = WT_BUF_SMALL;
    if (wring_size()) {
        if (!t->ring)
            t->ring = wring_new();
        t->ended = !t->ring; /* no ring, no stream (a full stream would corrupt the file) */
        if (t->ended)
            t->a.acc = TALLY_WTRACE_CLOSED;
        else
            t->a.slow = 1; /* entries, direct flags and call sites keep the shadow stack */
    } else if (wt_compressing()) {
        wt_busy++;
        void *q = t->rc ? (void *)t->rc
                        : mmap(0, sizeof *t->rc, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        wt_busy--;
        if (q == MAP_FAILED) {
            t->ended = 1; /* no coder, no stream (a raw one would corrupt the file) */
            t->a.acc = TALLY_WTRACE_CLOSED;
        } else {
            t->rc = q;
            wt_rc_init(t->rc);
        }
    }
    if (!t->ring && !t->ended)
        t->a.stage_end = t->stage + WT_STAGE;
    if (!t->ring && !t->rc)
        t->cap = WT_BUF;
    if (!t->ring && !t->rc && !t->ended && wt_words()) {
        t->words = 1;
        wt_words_restart(t);
    }
    t->tid = __atomic_add_fetch(&wt.next_tid, 1, __ATOMIC_RELAXED);
    return t;
}

/* A new stream's memory, zeroed, or null. */
struct wt_thread *wt_map(void) {
    wt_busy++;
    void *p = mmap(0, sizeof(struct wt_thread), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    wt_busy--;
    return p == MAP_FAILED ? 0 : p;
}

/* A stream made by wt_init goes on the list of every stream (for the end of the process;
 * pushed atomically: a signal handler may make one while its thread holds the lock). */
void wt_publish(struct wt_thread *t) {
    t->next = __atomic_load_n(&wt.threads, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&wt.threads, &t->next, t, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
        ;
}

struct wt_thread *wt_get(void) {
    struct wt_thread *t = wt_self;
    if (t || wt_gave_up)
        return t;
    t = wt_map();
    if (!t) {
        wt_gave_up = 1;
        wt_no_memory =
            (struct tally_wtrace_acc){TALLY_WTRACE_CLOSED, 0, 0, 1, 0, 0, wt_no_keys, 0, 0, 0};
        wt_set_acc(&wt_no_memory);
        return 0;
    }
    wt_init(t);
    wt_publish(t);
    wt_self = t;
    wt_set_acc(&t->a);
    if (t->tid == 1) /* (the process's first stream: it traces from now on) */
        signals_trace_started();
    return t;
}

/* ---- Accumulator ------------------------------------------------------------------------------ */

/* Appends the accumulator's low `bytes` bytes to the buffer, flushing it when full. */
void wt_acc_bytes(struct wt_thread *t, uint64_t w, unsigned bytes) {
    for (unsigned k = 0; k < bytes; k++) {
        t->buf[t->n++] = (unsigned char)(w >> (8 * k));
        if (t->n >= t->cap)
            wt_flush(t, 0);
    }
}

/* The words the inline code staged go to the packer, in order (they precede the inline word's
 * bits): first thing wherever the runtime adds to the stream. A loop over registers while the
 * buffer has room for a word per staged word (each gives the packer fewer than 64 bits). */
__attribute__((noinline)) void wt_unstage_words(struct wt_thread *t, uint64_t *end) {
    uint64_t *w = t->stage;
    while (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && w < end) {
        size_t room = t->n < t->cap ? (t->cap - t->n) / 8 : 0, left = (size_t)(end - w);
        uint64_t *stop = w + (left < room ? left : room);
        uint64_t pend = t->pend;
        unsigned np = t->npend;
        unsigned char *out = t->buf + t->n;
        for (; w < stop; w++) {
            /* (Branch-free but for a full word: the sentinel's position t, the k = 63 - t bits
             * above it; a word of 0, never staged, counts as empty.) */
            uint64_t x = *w;
            unsigned t = (unsigned)__builtin_ctzll(x | 1ull << 63), k = 63 - t;
            uint64_t bits = x >> t >> 1;
            pend |= bits << np; /* (np < 64) */
            np += k;
            if (np >= 64) {
                memcpy(out, &pend, 8); /* least-significant byte first */
                out += 8;
                np -= 64;
                pend = bits >> (k - np); /* (0 when np is: bits < 2^k, k < 64) */
            }
        }
        t->pend = pend;
        t->npend = np;
        t->n = (size_t)(out - t->buf);
        if (t->n + 8 > t->cap) /* (the flush empties the buffer: the loop goes on) */
            wt_flush(t, 0);
    }
    for (; w < end; w++) { /* (big-endian) */
        unsigned n = wt_word_n(*w);
        if (n)
            wt_pack(t, wt_word_bits(*w), n);
    }
    t->a.stage = t->stage;
}

/* A stream of words: word `w` (bits above a sentinel) is staged like the inline code does,
 * after the buffer is written when full. */
void wt_words_put(struct wt_thread *t, uint64_t w) {
    if (t->a.stage >= t->a.stage_end) {
        wt_flush(t, 0);
        if (t->a.stage >= t->a.stage_end)
            return; /* (closed meanwhile: dropped like any record) */
    }
    *t->a.stage++ = w;
}

/* The stream takes no more records: the inline code's word has no room and staging none, so
 * every record goes to the slow path, which drops it. */
void wt_close(struct wt_thread *t) {
    t->a.acc = TALLY_WTRACE_CLOSED;
    t->a.stage_end = t->a.stage;
}

/* The pending bits, padded to a byte, go to the buffer (a flight recorder's chunk ends, the
 * stream ends); returns the padding bits. */
unsigned wt_acc_drain(struct wt_thread *t) {
    if (t->ended)
        return 0;
    wt_take_word(t);
    unsigned pad = (8 - t->npend % 8) % 8;
    if (pad)
        wt_pack(t, 0, pad);
    wt_acc_bytes(t, t->pend, t->npend / 8);
    t->pend = 0;
    t->npend = 0;
    return pad;
}

/* The stream ends: its pending bits, padded to a byte, go to the buffer; the inline code
 * takes the slow path from now on, which drops every record. */
void wt_acc_end(struct wt_thread *t) {
    wt_acc_drain(t);
    wt_close(t);
    t->a.again = 0;
}

/* The slow path's rare cases: the thread's first record (it gets its stream), an ended
 * stream (the record is dropped), a width above 32 (ignored). */
static __attribute__((noinline, cold)) void wt_spill_rare(uint64_t value, uint64_t bits) {
    const struct tally_trace_ops *o;
    if (!wt_self && (o = trace_home())) {
        o->spill(value, bits);
        __tally_wtrace_acc = o->acc();
        return;
    }
    struct wt_thread *t = wt_get();
    if (!t || t->ended) {
        if (t)
            wt_close(t); /* (a signal handler may have ended the stream mid-record) */
        return;
    }
    if (bits > 32)
        return;
    wt_take_word(t);
    if (bits) /* (into the emptied word) */
        t->a.acc = TALLY_WTRACE_EMPTY >> bits | (value & ((1ull << bits) - 1)) << (64 - bits);
}

/* The word's bits go to the packer and the record into the emptied word (so the packer
 * takes one append); with `bits` 0 (a shared check of room) the word is just emptied. A leaf
 * while the buffer has room for a word (no call, few registers: it runs every 63 bits or so),
 * else, and for the rare cases, wt_spill_rare. A stream of words comes here only when its
 * buffer is full (its stage is the buffer, which may end right where `stage` begins), so
 * always to wt_spill_rare. */
void __tally_wtrace_spill(uint64_t value, uint64_t bits) {
    struct wt_thread *t = wt_self;
    if (__builtin_expect(!t || t->ended || bits > 32 || t->n + 8 >= t->cap, 0) || t->words ||
        t->a.stage != t->stage ||
        __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__) {
        wt_spill_rare(value, bits);
        return;
    }
    uint64_t w = t->a.acc;
    unsigned n = wt_word_n(w);
    if (n) {
        uint64_t x = w >> (64 - n), acc = t->pend | x << t->npend;
        unsigned q = t->npend + n;
        if (q >= 64) {
            memcpy(t->buf + t->n, &acc, 8); /* least-significant byte first */
            t->n += 8;
            q -= 64;
            acc = q ? x >> (n - q) : 0;
        }
        t->pend = acc;
        t->npend = q;
    }
    t->a.acc = bits ? TALLY_WTRACE_EMPTY >> bits | (value & ((1ull << bits) - 1)) << (64 - bits)
                    : TALLY_WTRACE_EMPTY;
}
