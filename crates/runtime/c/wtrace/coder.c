/*
 * coder.c -- trace mode: the range coder of the witness streams (TALLY_TRACE_COMPRESS, trace
 * format 8; tally_format::trace::rc decodes them). wtrace.h has the overview.
 */
#include "wtrace.h"

/* ---- Range coding (TALLY_TRACE_COMPRESS, trace format 6) ------------------------------------
 *
 * With TALLY_TRACE_COMPRESS=1 (and no flight recorder) every thread chunk's bytes are the
 * stream's bits range-coded (tally_format::trace_rc, which decodes them): an LZMA-style binary
 * range coder, each bit (least-significant first within a byte, the stream's order) coded with
 * a 12-bit probability picked by the stream's previous 16 bits (a table of 2^16, shift-4
 * update). The model (table and history) continues over the thread's chunks, the coder is
 * flushed at each chunk's end: chunk = { u32 raw bytes, coded bytes }, at most WT_RC_RAW raw
 * bytes. Everything lives in one mmap per thread (no malloc); coding a buffer is plain
 * computation on the thread's own memory, guarded by `busy` against the end of the process
 * (another thread's exit or a fatal signal) coding the same stream at the same time: the end
 * of the process gives up on a busy stream (its tail is lost, as a raw buffer being written
 * would be torn). */
static int wt_compress = -1; /* -1: not read yet */

/* TALLY_TRACE_COMPRESS: 1 or on codes the streams, 0, off or empty writes them raw. A flight
 * recorder's ring stays raw (its reader starts mid-stream). */
int wt_compressing(void) {
    int c = __atomic_load_n(&wt_compress, __ATOMIC_RELAXED);
    if (c >= 0)
        return c;
    const struct env_value *e = &env.trace_compress;
    c = 0;
    if (e->set && !e->too_long) {
        if (!strcmp(e->v, "1") || !strcmp(e->v, "on"))
            c = 1;
        else if (e->v[0] && strcmp(e->v, "0") && strcmp(e->v, "off")) {
            static const char msg[] =
                "tally: TALLY_TRACE_COMPRESS must be 1, on, 0 or off; the trace is written raw\n";
            write_stderr(msg, sizeof msg - 1);
        }
    }
    if (c && wring_size())
        c = 0;
    __atomic_store_n(&wt_compress, c, __ATOMIC_RELAXED);
    return c;
}

/* Whether streams are written as whole words (trace format 9): without a flight recorder and
 * without the range coder (which both take packed bytes), on a little-endian host (the file's
 * words are little-endian, the inline code stages native ones). */
int wt_words(void) {
    return __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && !wring_size() && !wt_compressing();
}

static void wt_rc_start(struct wt_rc *c) {
    c->low = 0;
    c->range = 0xffffffffu;
    c->cache = 0;
    c->cache_size = 1;
    c->raw = 0;
    c->out = 0;
}

void wt_rc_init(struct wt_rc *c) {
    for (size_t i = 0; i < (1u << WT_RC_BITS); i++)
        c->p[i] = 2048;
    c->hist = 0;
    wt_rc_start(c);
}

static inline void wt_rc_shift_low(struct wt_rc *c) {
    if ((uint32_t)c->low < 0xff000000u || (c->low >> 32) != 0) {
        unsigned char carry = (unsigned char)(c->low >> 32);
        unsigned char temp = c->cache;
        unsigned char *o = c->obuf + WT_RC_HEAD;
        do {
            o[c->out++] = (unsigned char)(temp + carry);
            temp = 0xff;
        } while (--c->cache_size != 0);
        c->cache = (unsigned char)(c->low >> 24);
    }
    c->cache_size++;
    c->low = (c->low & 0x00ffffffu) << 8;
}

/* Codes n raw bytes (the caller checked the room: at most 2 coded bytes per bit). The coder's
 * state is kept in locals (the output buffer's char stores would otherwise force it back to
 * memory after every bit). */
static void wt_rc_code(struct wt_rc *c, const unsigned char *b, size_t n) {
    uint32_t h = c->hist, range = c->range;
    uint64_t low = c->low;
    uint16_t *P = c->p;
    for (size_t i = 0; i < n; i++) {
        unsigned byte = b[i];
        for (unsigned k = 0; k < 8; k++, byte >>= 1) {
            unsigned bit = byte & 1;
            uint16_t *pp = &P[h & ((1u << WT_RC_BITS) - 1)];
            uint32_t p = *pp;
            uint32_t bound = (range >> 12) * p;
            if (!bit) {
                range = bound;
                *pp = (uint16_t)(p + ((4096 - p) >> 4));
            } else {
                low += bound;
                range -= bound;
                *pp = (uint16_t)(p - (p >> 4));
            }
            h = h << 1 | bit;
            if (range < (1u << 24)) {
                c->low = low;
                do {
                    range <<= 8;
                    wt_rc_shift_low(c);
                } while (range < (1u << 24));
                low = c->low;
            }
        }
    }
    c->hist = h;
    c->range = range;
    c->low = low;
    c->raw += n;
}

/* The chunk ends: the coder is flushed and the chunk written (the lock is held). */
static void wt_rc_end_locked(struct wt_rc *c, uint32_t tid) {
    if (!c->raw)
        return;
    for (int k = 0; k < 5; k++)
        wt_rc_shift_low(c);
    unsigned char *q = c->obuf + WT_RC_HEAD - 4;
    for (int k = 0; k < 4; k++)
        q[k] = (unsigned char)((uint32_t)c->raw >> (8 * k));
    wt_chunk_locked_in(tid, q, c->out + 4, 1); /* (obuf's first 8 bytes: the header's room) */
    wt_rc_start(c);
}

/* A range-coded stream's buffer goes to its coder; the chunk ends (is written) when full and
 * when `end` (the end of the stream, tally_dump_trace). `end` also bounds the waits (see wt_lock). */
void wt_rc_flush(struct wt_thread *t, int end) {
    struct wt_rc *c = t->rc;
    for (unsigned i = 0; __atomic_exchange_n(&c->busy, 1, __ATOMIC_ACQUIRE); i++) {
        if (end && i > 100000)
            return; /* (coded by another thread right now, or interrupted: the tail is lost) */
        sched_yield();
    }
    if (t->n) {
        if (c->raw + t->n > WT_RC_RAW || c->out + c->cache_size + 16 * t->n + 16 > WT_RC_OUT) {
            int held = wt_lock(end);
            wt_rc_end_locked(c, t->tid);
            wt_unlock(held);
        }
        wt_rc_code(c, t->buf, t->n);
        t->n = 0;
    }
    if (end || c->raw >= WT_RC_RAW) {
        int held = wt_lock(end);
        wt_rc_end_locked(c, t->tid);
        wt_unlock(held);
    }
    __atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
}
