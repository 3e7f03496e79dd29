/*
 * file.c -- trace mode: the end of the trace: the resolution of external callees, the flight
 * recorder's dumps (tally_dump_trace), every stream's End (wtrace_finish), fork children.
 * wtrace.h has the overview.
 */
#include "wtrace.h"

/* ---- Resolution of external callees ------------------------------------------------------- */

struct wt_addr {
    const void *addr; /* null: a free entry */
    uint32_t slot, index;
};

static size_t wt_hash(const void *a, size_t cap) {
    return (size_t)(((uint64_t)(uintptr_t)a >> 4) * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
}

/* The traced function at address `a` among the modules with a slot: through the table `tab`
 * (`cap` entries), or by a scan of every module when there is none. */
static int wt_lookup(const struct wt_addr *tab, size_t cap, const void *a, uint32_t *slot,
                     uint32_t *index) {
    if (!a)
        return 0;
    if (tab) {
        for (size_t h = wt_hash(a, cap);; h = (h + 1) & (cap - 1)) {
            if (!tab[h].addr)
                return 0;
            if (tab[h].addr == a) {
                *slot = tab[h].slot;
                *index = tab[h].index;
                return 1;
            }
        }
    }
    for (const struct wt_mod *m = wt.mods; m; m = m->next)
        for (uint32_t i = 0; i < m->nfuncs; i++)
            if (m->funcs[i] == a) {
                *slot = m->slot;
                *index = i;
                return 1;
            }
    return 0;
}

static void wt_put32(unsigned char *p, uint32_t v) {
    for (int k = 0; k < 4; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

/* One resolution chunk per module with a slot, { u32 0xfffffffd, u32 length, u32 slot, u32 n,
 * n x { u32 slot' (0: none), u32 index } }: the module's external callee k is function `index`
 * of module `slot'` (found by its address among every module's own functions), or no traced
 * function. Written with the lock held (or given up on); no malloc (the address table is
 * mmap'd; without it, a scan). Returns 0 or -1 and adds the bytes to *pos. */
static int wt_write_resolutions(int fd, uint64_t *pos) {
    uint64_t total = 0;
    for (const struct wt_mod *m = wt.mods; m; m = m->next)
        total += m->nfuncs;
    size_t cap = 64;
    while (cap < 2 * total)
        cap <<= 1;
    struct wt_addr *tab =
        mmap(0, cap * sizeof *tab, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tab == MAP_FAILED)
        tab = 0;
    for (const struct wt_mod *m = wt.mods; m && tab; m = m->next)
        for (uint32_t i = 0; i < m->nfuncs; i++) {
            const void *a = m->funcs[i];
            if (!a)
                continue;
            size_t h = wt_hash(a, cap);
            while (tab[h].addr && tab[h].addr != a)
                h = (h + 1) & (cap - 1);
            if (!tab[h].addr) /* (the first module keeps an address two functions share) */
                tab[h] = (struct wt_addr){a, m->slot, i};
        }
    int bad = 0;
    for (const struct wt_mod *m = wt.mods; m && !bad; m = m->next) {
        unsigned char buf[16 + 8 * 64];
        wt_put32(buf, WT_RESOLVE_CHUNK);
        wt_put32(buf + 4, 8 + 8 * m->nexterns);
        wt_put32(buf + 8, m->slot);
        wt_put32(buf + 12, m->nexterns);
        size_t n = 16;
        for (uint32_t k = 0; k < m->nexterns && !bad; k++) {
            uint32_t slot = 0, index = 0;
            if (!wt_lookup(tab, cap, m->externs[k], &slot, &index))
                slot = index = 0;
            wt_put32(buf + n, slot);
            wt_put32(buf + n + 4, index);
            n += 8;
            if (n == sizeof buf) {
                bad = write_all(fd, buf, n) != 0;
                n = 0;
            }
        }
        if (!bad && n)
            bad = write_all(fd, buf, n) != 0;
        *pos += 16 + 8 * (uint64_t)m->nexterns;
    }
    if (tab)
        munmap(tab, cap * sizeof *tab);
    return bad ? -1 : 0;
}

/* The flight recorder's file: every thread's ring as it is now, with the bytes and bits it
 * has not moved to the ring yet (read without synchronization from threads still running:
 * their newest chunk may come out torn; a function that keeps the accumulator in registers
 * between calls has its latest bits there), from the file's start. The lock is held (or
 * given up on). */
static void wt_dump_locked_(void);
static void wt_dump_locked(void) {
    wt_multi(1);
    wt_dump_locked_();
    wt_multi(0);
}
static void wt_dump_locked_(void) {
    if (wt.fd == 0)
        wt.fd = trace_open_file(wt.path);
    if (wt.fd <= 0)
        return;
    int saved_errno = errno;
    uint64_t pos = 0;
    int bad = wring_dump_begin(wt.fd, wt.next_slot, &pos);
    if (!bad)
        bad = wt_write_resolutions(wt.fd, &pos);
    for (struct wt_thread *t = __atomic_load_n(&wt.threads, __ATOMIC_ACQUIRE); t && !bad;
         t = t->next) {
        uint64_t lo = t->end_lo, hi = t->end_hi;
        unsigned n = t->ended ? t->end_n : wt_pending(t, t->a.acc, &lo, &hi);
        if (t->ring)
            bad = wring_dump_thread(wt.fd, t->tid, t->ring, t->a.depth, t->buf, t->n, lo, hi, n,
                                    &pos);
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
    const struct tally_trace_ops *o;
    if (!t && __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE) && (o = trace_home())) {
        o->dump(); /* (a registry: never the first thing to make one) */
        return;
    }
    if (t && !t->ended)
        wt_unstage(t); /* (no flight recorder: the staged words into the buffer) */
    if (t && t->rc) {
        if (!t->ended)
            wt_flush(t, 1); /* codes the buffer and ends the chunk */
        return;
    }
    int held = wt_lock(1);
    if (wring_size() && __atomic_load_n(&wt.threads, __ATOMIC_ACQUIRE))
        wt_dump_locked(); /* (no stream: not a trace build, or nothing traced yet) */
    else if (t && !t->ended && t->n) {
        wt_chunk_locked_in(t->tid, t->buf, t->n, 1);
        t->n = 0;
        if (t->words)
            wt_words_restart(t);
    }
    wt_unlock(held);
}

/* Every stream ends (End, padded to a byte) and is flushed (with a flight recorder: into its
 * ring, then the rings are written). Threads still running at this point (a crash) may lose
 * what they write afterwards; threads that ended earlier end here.
 *
 * A ring's stream gets no End and no padding: its buffer and accumulator stay as they are for
 * the dump, whose last chunk counts its bits exactly, so the stream ends where the thread's
 * last record does, and a record the thread had not written yet (a fault between
 * a branch and its witness, or inside a path whose number comes at its end) reads as the end
 * of the stream, never as End's bits. A full stream is read up to its End, found by its last
 * set bit (End is value 4 in 3 bits, then zero padding: records_end in
 * crates/graph/src/witness/code.rs), for the same reason. */
void wtrace_finish(void) {
    int any = 0;
    for (struct wt_thread *t = __atomic_load_n(&wt.threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        if (t->ended) {
            if (t->sig_owed) { /* (a signal stream whose thread has not written it yet) */
                t->sig_owed = 0;
                wt_sig_write(t);
                any = 1;
            }
            continue;
        }
        if (t->ring) {
            /* Its buffer and the accumulator's bits stay where the dump finds them; the
             * inline code takes the slow path from now on, which drops every record. */
            t->end_n = wt_pending(t, t->a.acc, &t->end_lo, &t->end_hi);
            wt_close(t);
            t->ended = 1;
            any = 1;
            continue;
        }
        wt_bits(t, WT_END, WT_CONTROL_BITS); /* End: '0' then kind 10 */
        wt_acc_end(t);
        t->ended = 1;
        if (t->sig_active) /* (a handler that ends the process) */
            wt_sig_note(t);
        wt_flush(t, 1);
        any = 1;
    }
    if (any && wring_size() && wt.fd >= 0) {
        int held = wt_lock(1);
        wt_dump_locked();
        wt_unlock(held);
    } else if ((any || (wt.threads && !wt.resolved)) && wt.fd > 0) {
        /* The resolution of every module's external callees, once every stream has ended
         * (also when all had ended before: a siglongjmp out of a signal handler, wt_sig_left). */
        wt.resolved = 1;
        int held = wt_lock(1);
        uint64_t pos = 0;
        int saved_errno = errno;
        wt_multi(1);
        int bad = wt.fd > 0 && wt_write_resolutions(wt.fd, &pos) != 0;
        wt_multi(0);
        if (bad) {
            static const char msg[] = "tally: cannot write the trace file\n";
            write_stderr(msg, sizeof msg - 1);
            wt.fd = -1;
        }
        errno = saved_errno;
        wt_unlock(held);
    }
}

/* In a fork child: the trace belongs to the parent; the child writes nothing. */
void wtrace_forked(void) {
    if (wt.fd > 0)
        (void)close(wt.fd);
    wt.fd = -1;
    wt_sig_owed = 0;
    for (struct wt_thread *t = wt.threads; t; t = t->next) {
        t->n = 0;
        t->ended = 1;
        t->sig_owed = 0;
        t->a.stage = t->words ? (uint64_t *)(void *)t->buf : t->stage;
        wt_close(t);
    }
    __atomic_store_n(&wt.lock, 0, __ATOMIC_RELEASE);
}
