/*
 * wtrace.c -- trace mode: witness tracing (paper 000 §4; tally_graph::witness). Each thread
 * packs its records into its own buffer (bits least-significant first, as
 * tally_graph::witness::bits), flushed in chunks tagged with the thread's number to the trace
 * file (tally_format::trace::read_witness_trace):
 *
 *   "TALLYWTR" u32 version (1) u32 0, then chunks { u32 thread, u32 length, bytes }
 *
 * A chunk of thread 0xffffffff names a module: { u32 slot, u64 metadata hash }; `Enter`
 * records carry (slot, function index). Control records: 2-bit kind (0 Enter, 1 Back,
 * 2 landing, 3 End) and varints of 7 bits + a continuation bit; a landing has one bit, 0 for a
 * longjmp re-entry (then varints: activations abandoned, landing block), 1 for a landing
 * regeneration does not follow (a landing pad).
 * A thread's buffer is mmap'd on its first record and kept until the end of the process
 * (listed in wt.threads), where every stream gets its End and is flushed (wtrace_finish, from
 * trace_finish: exit, _exit, the fatal-signal path). With TALLY_TRACE_RING the full buffers go to
 * the thread's ring instead (wring.c: the flight recorder), written as a whole file at the end
 * and by tally_dump_trace().
 */
#include "rt.h"

#define WT_BUF 4096
#define WT_MODULE_CHUNK 0xffffffffu

struct wt_thread {
    struct wt_thread *next; /* every stream, for the end of the process */
    const void *direct;     /* the callee a traced direct call site is about to enter */
    uint32_t depth;         /* traced activations (entries minus returns): for Unwind */
    uint32_t tid;
    int ended;
    struct wr_ring *ring; /* the flight recorder's ring and shadow stack, or null */
    uint64_t acc; /* bits not yet in buf, least-significant first */
    unsigned nacc;
    size_t n;
    unsigned char buf[WT_BUF];
};

static struct {
    uint32_t lock; /* the file, the list, the slots */
    int fd;        /* 0: not opened yet; -1: failed, off or a fork child */
    uint32_t next_tid;
    uint32_t next_slot;
    struct wt_thread *threads;
    char path[PATH_CAP];
} wt;

/* The thread's stream and state: one TLS pointer (the buffer is mmap'd). */
static __thread struct wt_thread *wt_self __attribute__((tls_model("initial-exec")));

/* Spins for the lock; `bounded` (the end of the process, possibly in a signal handler that
 * interrupted its holder) gives up after a while and goes on without it. Returns whether
 * the lock is held. */
static int wt_lock(int bounded) {
    for (unsigned i = 0; __atomic_exchange_n(&wt.lock, 1, __ATOMIC_ACQUIRE); i++) {
        if (bounded && i > 100000)
            return 0;
        sched_yield();
    }
    return 1;
}

static void wt_unlock(int held) {
    if (held)
        __atomic_store_n(&wt.lock, 0, __ATOMIC_RELEASE);
}

/* Writes one chunk; the lock is held (or given up on). */
static void wt_chunk_locked(uint32_t tid, const unsigned char *bytes, size_t n) {
    if (wt.fd == 0) {
        wt.fd = trace_open_file(wt.path);
        if (wt.fd > 0 && write_all(wt.fd, "TALLYWTR\x01\0\0\0\0\0\0\0", 16) != 0)
            wt.fd = -1;
    }
    if (wt.fd <= 0)
        return;
    unsigned char head[8];
    for (int k = 0; k < 4; k++) {
        head[k] = (unsigned char)(tid >> (8 * k));
        head[4 + k] = (unsigned char)((uint32_t)n >> (8 * k));
    }
    if (write_all(wt.fd, head, 8) != 0 || write_all(wt.fd, bytes, n) != 0) {
        static const char msg[] = "tally: cannot write the trace file\n";
        write_stderr(msg, sizeof msg - 1);
        wt.fd = -1;
    }
}

static void wt_flush(struct wt_thread *t, int bounded) {
    if (t->ring) {
        wring_bytes(t->ring, t->buf, t->n);
        t->n = 0;
        return;
    }
    int saved_errno = errno;
    int held = wt_lock(bounded);
    if (t->n)
        wt_chunk_locked(t->tid, t->buf, t->n);
    t->n = 0;
    wt_unlock(held);
    errno = saved_errno;
}

static struct wt_thread *wt_get(void) {
    struct wt_thread *t = wt_self;
    if (t)
        return t;
    void *p = mmap(0, sizeof *t, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    t = p;
    if (wring_size()) {
        t->ring = wring_new();
        t->ended = !t->ring; /* no ring, no stream (a full stream would corrupt the file) */
    }
    t->tid = __atomic_add_fetch(&wt.next_tid, 1, __ATOMIC_RELAXED);
    int held = wt_lock(0);
    t->next = wt.threads;
    wt.threads = t;
    wt_unlock(held);
    wt_self = t;
    return t;
}

static void wt_bits(struct wt_thread *t, uint64_t v, unsigned bits) {
    t->acc |= (v & ((1ull << bits) - 1)) << t->nacc;
    t->nacc += bits;
    while (t->nacc >= 8) {
        t->buf[t->n++] = (unsigned char)t->acc;
        t->acc >>= 8;
        t->nacc -= 8;
        if (t->n == WT_BUF)
            wt_flush(t, 0);
    }
}

static void wt_varint(struct wt_thread *t, uint64_t v) {
    for (;;) {
        int more = v >= 0x80;
        wt_bits(t, v & 0x7f, 7);
        wt_bits(t, (uint64_t)more, 1);
        v >>= 7;
        if (!more)
            return;
    }
}

/* The thread's stream, or null when it cannot or must not write. */
static struct wt_thread *wt_stream(void) {
    struct wt_thread *t = wt_get();
    return t && !t->ended ? t : 0;
}

/* Assigns the module its slot and names it in the trace. */
static uint32_t wt_module(uint32_t *slot, const uint64_t *counters) {
    int held = wt_lock(0);
    uint32_t s = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!s) {
        s = ++wt.next_slot;
        uint64_t hash = trace_module_hash(counters);
        unsigned char rec[12];
        for (int k = 0; k < 4; k++)
            rec[k] = (unsigned char)(s >> (8 * k));
        for (int k = 0; k < 8; k++)
            rec[4 + k] = (unsigned char)(hash >> (8 * k));
        int saved_errno = errno;
        if (wring_size())
            wring_module(s, hash); /* written with the rings */
        else
            wt_chunk_locked(WT_MODULE_CHUNK, rec, sizeof rec);
        errno = saved_errno;
        __atomic_store_n(slot, s, __ATOMIC_RELEASE);
    }
    wt_unlock(held);
    return s;
}

static void wt_enter_record(struct wt_thread *t, uint32_t s, uint32_t function) {
    wt_bits(t, 0, 2);
    wt_varint(t, s);
    wt_varint(t, function);
}

/* An entry with a flight recorder: the shadow stack, the Enter record, and a synchronization
 * point when the current chunk is full (after Enter: the new chunk starts inside the
 * activation, at its entry). */
static uint32_t wt_enter_ring(struct wt_thread *t, uint32_t depth, int announced, uint32_t *slot,
                              const uint64_t *module_counters, uint32_t function) {
    if (t->ended)
        return depth;
    uint32_t s = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!s)
        s = wt_module(slot, module_counters);
    wring_push(t->ring, depth, s, function);
    if (announced)
        wt_enter_record(t, s, function);
    if (wring_want_sync(t->ring, depth, t->n)) {
        unsigned pad = t->nacc ? 8 - t->nacc : 0;
        if (pad)
            wt_bits(t, 0, pad);
        wt_flush(t, 0);
        wring_sync(t->ring, depth, pad);
    }
    return depth;
}

uint32_t __tally_wtrace_enter(uint32_t *slot, const uint64_t *module_counters, uint32_t function,
                              const void *self) {
    struct wt_thread *t = wt_get();
    if (!t)
        return 0;
    uint32_t depth = ++t->depth;
    int announced = t->direct != self;
    if (!announced)
        t->direct = 0;
    if (t->ring)
        return wt_enter_ring(t, depth, announced, slot, module_counters, function);
    if (!announced || t->ended)
        return depth;
    uint32_t s = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!s)
        s = wt_module(slot, module_counters);
    wt_enter_record(t, s, function);
    return depth;
}

void __tally_wtrace_ret(void) {
    struct wt_thread *t = wt_self;
    if (t)
        t->depth--;
}

void __tally_wtrace_put(uint32_t value, uint32_t bits) {
    struct wt_thread *t = wt_stream();
    if (t && bits && bits <= 32)
        wt_bits(t, value, bits);
}

void __tally_wtrace_direct(const void *callee, uint32_t site) {
    struct wt_thread *t = wt_get();
    if (t) {
        t->direct = callee;
        if (t->ring)
            wring_site(t->ring, t->depth, site);
    }
}

void __tally_wtrace_call(uint32_t site) {
    struct wt_thread *t = wt_self;
    if (t && t->ring)
        wring_site(t->ring, t->depth, site);
}

void __tally_wtrace_back(void) {
    struct wt_thread *t = wt_stream();
    if (t)
        wt_bits(t, 1, 2);
}

void __tally_wtrace_lost(void) {
    struct wt_thread *t = wt_stream();
    if (t)
        wt_bits(t, 2 | 1 << 2, 3); /* kind 2, how 1: not followed */
}

void __tally_wtrace_reentry(int32_t ret, uint32_t depth, uint32_t block) {
    if (ret == 0)
        return;
    struct wt_thread *t = wt_get();
    if (!t)
        return;
    uint32_t abandoned = t->depth - depth;
    t->depth = depth;
    if (!t->ended) {
        wt_bits(t, 2, 3); /* kind 2, how 0: re-entry */
        wt_varint(t, abandoned);
        wt_varint(t, block);
    }
}

/* The flight recorder's file: every thread's ring as it is now, with the bytes and bits it
 * has not moved to the ring yet (read without synchronization from threads still running:
 * their newest chunk may come out torn), from the file's start. The lock is held (or given
 * up on). */
static void wt_dump_locked(void) {
    if (wt.fd == 0)
        wt.fd = trace_open_file(wt.path);
    if (wt.fd <= 0)
        return;
    int saved_errno = errno;
    uint64_t pos = 0;
    int bad = wring_dump_begin(wt.fd, wt.next_slot, &pos);
    for (struct wt_thread *t = __atomic_load_n(&wt.threads, __ATOMIC_ACQUIRE); t && !bad;
         t = t->next) {
        if (t->ring)
            bad = wring_dump_thread(wt.fd, t->tid, t->ring, t->depth, t->buf, t->n, t->acc,
                                    t->nacc, &pos);
    }
    if (bad || ftruncate(wt.fd, (off_t)pos) != 0) {
        static const char msg[] = "tally: cannot write the trace file\n";
        write_stderr(msg, sizeof msg - 1);
        wt.fd = -1;
    }
    errno = saved_errno;
}

void tally_dump_trace(void) {
    struct wt_thread *t = wt_self;
    int held = wt_lock(1);
    if (wring_size() && __atomic_load_n(&wt.threads, __ATOMIC_ACQUIRE))
        wt_dump_locked(); /* (no stream: not a trace build, or nothing traced yet) */
    else if (t && !t->ended && t->n)
        wt_chunk_locked(t->tid, t->buf, t->n), t->n = 0;
    wt_unlock(held);
}

/* Every stream ends (End, padded to a byte) and is flushed (with a flight recorder: into its
 * ring, then the rings are written). Threads still running at this point (a crash) may lose
 * what they write afterwards; threads that ended earlier end here. */
void wtrace_finish(void) {
    int any = 0;
    for (struct wt_thread *t = __atomic_load_n(&wt.threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        if (t->ended)
            continue;
        wt_bits(t, 3, 2);
        if (t->nacc)
            wt_bits(t, 0, 8 - t->nacc);
        t->ended = 1;
        wt_flush(t, 1);
        any = 1;
    }
    if (any && wring_size() && wt.fd >= 0) {
        int held = wt_lock(1);
        wt_dump_locked();
        wt_unlock(held);
    }
}

/* In a fork child: the trace belongs to the parent; the child writes nothing. */
void wtrace_forked(void) {
    if (wt.fd > 0)
        (void)close(wt.fd);
    wt.fd = -1;
    for (struct wt_thread *t = wt.threads; t; t = t->next) {
        t->n = 0;
        t->ended = 1;
    }
    __atomic_store_n(&wt.lock, 0, __ATOMIC_RELEASE);
}
