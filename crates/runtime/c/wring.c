/*
 * wring.c -- the witness trace's flight recorder (TALLY_TRACE_RING=SIZE): each
 * thread keeps only the last SIZE bytes of its witness stream (wtrace/) in an mmap'd ring,
 * written as a trace file when the process ends (exit, _exit, a fatal signal, abort) or when
 * the program calls tally_dump_trace().
 *
 * The stream is a bit stream that regeneration can only read from its start, so the ring is a
 * sequence of *chunks*, each starting at a synchronization point: at a function entry (after
 * its Enter record, if any), once the current chunk holds SIZE/8 stream bytes, the stream is padded to
 * a byte and a new chunk begins with a Sync header: the thread's traced activations, bottom
 * first, as (module slot, function index, call site), from a per-thread shadow stack that
 * __tally_wtrace_enter/_ret/_direct/_call keep (the site is the function's call instruction
 * number, counted over its blocks in order as the metadata lists them). Regeneration resumes
 * there: the callers in their calls, the top activation at its entry. Bytes older than the
 * oldest chunk whose start is still in the ring are dropped.
 *
 * File (tally_format::trace::read_witness_trace), rewritten from its start at each dump:
 *   "TALLYWTR" u32 version (7) u32 flags (1: ring), module and resolution chunks as in
 *   wtrace/file.c, then per
 *   thread its chunks oldest first { u32 thread, u32 length, u32 bits, sync, stream bytes }
 *   (`bits`: stream bits after the sync header; sync: LEB128 count, then per activation
 *   LEB128 slot, function index, site + 1 (0: none)), then per thread a stack chunk
 *   { u32 0xfffffffe, u32 length, u32 thread, u32 depth, depth' x { u32 slot, index, site + 1 } }
 *   (the activations at the dump, bottom first; depth' = min(depth, WR_FRAMES)).
 * Async-signal-safe: no malloc, no stdio; the ring's owner publishes `lost` (below which bytes
 * may be overwritten) before it overwrites, so a dump in a handler that interrupted it never
 * writes torn chunks of that thread.
 */
#include "rt.h"

#define WR_CHUNKS 64    /* chunk descriptors per thread (older chunks are dropped) */
#define WR_FRAMES 1024  /* shadow stack: deeper activations are not recorded (no sync there) */
#define WR_MIN 1024     /* smallest ring */
#define WR_MAX (1u << 28) /* a chunk's bit count fits a u32 */
#define WR_STACK_CHUNK 0xfffffffeu
#define WR_MODS 4096    /* module slots whose hashes are kept */

struct wr_frame {
    uint32_t slot, index, site; /* site: UINT32_MAX until the activation makes a call */
};

struct wr_chunk {
    uint64_t start; /* absolute offset of its sync header */
    uint64_t end;   /* absolute end of its stream bytes */
    uint32_t sync;  /* bytes of the sync header */
    uint32_t pad;   /* padding bits at the end (set when the next chunk starts) */
};

struct wr_ring {
    uint64_t w;    /* bytes stored so far (absolute) */
    uint64_t lost; /* bytes below this absolute offset may be overwritten */
    uint64_t head; /* chunks started so far: chunk i is chunks[i % WR_CHUNKS] */
    uint64_t size; /* ring bytes */
    unsigned char *bytes;
    struct wr_chunk chunks[WR_CHUNKS];
    struct wr_frame frames[WR_FRAMES];
};

static struct {
    int parsed; /* 0: not yet; 1: done */
    uint32_t lock;
    uint64_t size;               /* 0: off */
    uint64_t hashes[WR_MODS + 1]; /* by module slot */
} wr;

/* TALLY_TRACE_RING: a size in bytes with an optional K, M or G suffix (powers of 1024). */
static uint64_t wr_parse(const char *s, int *ok) {
    uint64_t v = 0;
    int digits = 0;
    *ok = 0;
    for (; *s >= '0' && *s <= '9'; s++, digits++) {
        if (v > WR_MAX)
            return 0;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (!digits)
        return 0;
    if (*s == 'k' || *s == 'K')
        v <<= 10, s++;
    else if (*s == 'm' || *s == 'M')
        v <<= 20, s++;
    else if (*s == 'g' || *s == 'G')
        v <<= 30, s++;
    if (*s || v < WR_MIN || v > WR_MAX)
        return 0;
    *ok = 1;
    return v;
}

uint64_t wring_size(void) {
    if (__atomic_load_n(&wr.parsed, __ATOMIC_ACQUIRE))
        return wr.size;
    while (__atomic_exchange_n(&wr.lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    if (!wr.parsed) {
        if (env.trace_ring.set && (env.trace_ring.v[0] || env.trace_ring.too_long)) {
            int ok;
            uint64_t v = wr_parse(env.trace_ring.v, &ok);
            if (ok) {
                wr.size = v;
            } else {
                static const char msg[] =
                    "tally: TALLY_TRACE_RING must be a size from 1K to 256M (bytes, or with a K, M "
                    "or G suffix); the flight recorder is off\n";
                write_stderr(msg, sizeof msg - 1);
            }
        }
        __atomic_store_n(&wr.parsed, 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&wr.lock, 0, __ATOMIC_RELEASE);
    return wr.size;
}

struct wr_ring *wring_new(void) {
    uint64_t size = wring_size();
    size_t head = (sizeof(struct wr_ring) + 4095) & ~(size_t)4095;
    void *p = mmap(0, head + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    struct wr_ring *r = p;
    r->size = size;
    r->bytes = (unsigned char *)p + head;
    return r;
}

void wring_module(uint32_t slot, uint64_t hash) {
    if (slot <= WR_MODS)
        __atomic_store_n(&wr.hashes[slot], hash, __ATOMIC_RELEASE);
}

/* ---- the shadow stack ---------------------------------------------------------------------- */

void wring_push(struct wr_ring *r, uint32_t depth, uint32_t slot, uint32_t index) {
    if (depth >= 1 && depth <= WR_FRAMES) {
        struct wr_frame *f = &r->frames[depth - 1];
        f->slot = slot;
        f->index = index;
        f->site = UINT32_MAX;
    }
}

void wring_site(struct wr_ring *r, uint32_t depth, uint32_t site) {
    if (depth >= 1 && depth <= WR_FRAMES)
        r->frames[depth - 1].site = site;
}

/* ---- the ring ------------------------------------------------------------------------------ */

static void wr_store(struct wr_ring *r, const unsigned char *p, size_t n) {
    uint64_t nw = r->w + n;
    if (nw > r->size)
        __atomic_store_n(&r->lost, nw - r->size, __ATOMIC_RELEASE);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    for (size_t done = 0; done < n;) {
        size_t at = (size_t)((r->w + done) % r->size);
        size_t k = n - done;
        if (k > r->size - at)
            k = (size_t)(r->size - at);
        memcpy(r->bytes + at, p + done, k);
        done += k;
    }
    __atomic_store_n(&r->w, nw, __ATOMIC_RELEASE);
}

void wring_bytes(struct wr_ring *r, const unsigned char *p, size_t n) {
    if (!r->head || !n)
        return; /* nothing before the first synchronization point */
    wr_store(r, p, n);
    __atomic_store_n(&r->chunks[(r->head - 1) % WR_CHUNKS].end, r->w, __ATOMIC_RELEASE);
}

static size_t wr_leb(unsigned char *out, uint64_t v) {
    size_t n = 0;
    do {
        unsigned char b = v & 0x7f;
        v >>= 7;
        out[n++] = b | (v ? 0x80 : 0);
    } while (v);
    return n;
}

/* Bytes of the sync header of `depth` activations. */
static size_t wr_sync_len(const struct wr_ring *r, uint32_t depth) {
    unsigned char tmp[16];
    size_t len = wr_leb(tmp, depth);
    for (uint32_t i = 0; i < depth; i++) {
        const struct wr_frame *f = &r->frames[i];
        len += wr_leb(tmp, f->slot) + wr_leb(tmp, f->index) + wr_leb(tmp, (uint32_t)(f->site + 1u));
    }
    return len;
}

/* Whether an entry at `depth` starts a chunk: there is none yet, or the current one holds a
 * chunk's worth (`buffered`: bytes of the stream not yet in the ring); and the activations
 * are recorded and their sync header small enough (SIZE/4). */
int wring_want_sync(const struct wr_ring *r, uint32_t depth, size_t buffered) {
    if (depth > WR_FRAMES)
        return 0;
    if (r->head) {
        const struct wr_chunk *c = &r->chunks[(r->head - 1) % WR_CHUNKS];
        if (r->w + buffered - c->start - c->sync < r->size / 8) /* stream bytes only */
            return 0;
    }
    return wr_sync_len(r, depth) <= r->size / 4;
}

/* Starts a chunk (wring_want_sync said so): the stream so far is in the ring, padded with
 * `pad` bits; `depth` activations are on the stack, the top one just entered. */
void wring_sync(struct wr_ring *r, uint32_t depth, unsigned pad) {
    unsigned char tmp[16];
    size_t len = wr_sync_len(r, depth);
    if (r->head)
        r->chunks[(r->head - 1) % WR_CHUNKS].pad = pad;
    uint64_t start = r->w;
    wr_store(r, tmp, wr_leb(tmp, depth));
    for (uint32_t i = 0; i < depth; i++) {
        const struct wr_frame *f = &r->frames[i];
        wr_store(r, tmp, wr_leb(tmp, f->slot));
        wr_store(r, tmp, wr_leb(tmp, f->index));
        wr_store(r, tmp, wr_leb(tmp, (uint32_t)(f->site + 1u)));
    }
    struct wr_chunk *c = &r->chunks[r->head % WR_CHUNKS];
    c->start = start;
    c->sync = (uint32_t)len;
    c->pad = 0;
    c->end = r->w;
    __atomic_store_n(&r->head, r->head + 1, __ATOMIC_RELEASE);
}

/* ---- the dump ------------------------------------------------------------------------------ */

static void wr_u32(unsigned char *p, uint32_t v) {
    for (int k = 0; k < 4; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

/* Writes `n` bytes at absolute offset `from` of the ring; returns 0 or -1. */
static int wr_write_ring(int fd, const struct wr_ring *r, uint64_t from, uint64_t n) {
    while (n) {
        size_t at = (size_t)(from % r->size);
        uint64_t k = n;
        if (k > r->size - at)
            k = r->size - at;
        if (write_all(fd, r->bytes + at, (size_t)k) != 0)
            return -1;
        from += k;
        n -= k;
    }
    return 0;
}

/* The file's header and module chunks; returns 0 or -1 and adds the bytes to *pos. */
int wring_dump_begin(int fd, uint32_t modules, uint64_t *pos) {
    if (lseek(fd, 0, SEEK_SET) != 0)
        return -1;
    unsigned char head[16] = "TALLYWTR";
    head[8] = TALLY_WTRACE_VERSION;
    head[12] = 1; /* flags: a ring */
    if (write_all(fd, head, 16) != 0)
        return -1;
    *pos = 16;
    for (uint32_t s = 1; s <= modules && s <= WR_MODS; s++) {
        unsigned char rec[20];
        uint64_t h = __atomic_load_n(&wr.hashes[s], __ATOMIC_ACQUIRE);
        wr_u32(rec, 0xffffffffu);
        wr_u32(rec + 4, 12);
        wr_u32(rec + 8, s);
        wr_u32(rec + 12, (uint32_t)h);
        wr_u32(rec + 16, (uint32_t)(h >> 32));
        if (write_all(fd, rec, sizeof rec) != 0)
            return -1;
        *pos += sizeof rec;
    }
    return 0;
}

/* One thread's chunks (its stream not yet in the ring: `buf`/`n` bytes, then `nacc` (< 128) bits
 * of `lo` and then `hi`) and its stack chunk (`depth` activations). Returns 0 or -1, adds to
 * *pos. */
int wring_dump_thread(int fd, uint32_t tid, const struct wr_ring *r, uint32_t depth,
                      const unsigned char *buf, size_t n, uint64_t lo, uint64_t hi,
                      unsigned nacc, uint64_t *pos) {
    if (nacc > 127)
        nacc = 0;
    uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
    uint64_t lost = __atomic_load_n(&r->lost, __ATOMIC_ACQUIRE);
    uint64_t first = head > WR_CHUNKS ? head - WR_CHUNKS : 0;
    while (first < head && r->chunks[first % WR_CHUNKS].start < lost)
        first++;
    for (uint64_t i = first; i < head; i++) {
        const struct wr_chunk *c = &r->chunks[i % WR_CHUNKS];
        int last = i + 1 == head;
        uint64_t end = __atomic_load_n(&c->end, __ATOMIC_ACQUIRE);
        if (end < c->start + c->sync || end - c->start > r->size)
            break;
        uint64_t data = end - c->start - c->sync;
        uint64_t bits = data * 8 - (last ? 0 : c->pad);
        uint64_t extra = 0;
        unsigned char tail[16];
        unsigned tail_n = (nacc + 7) / 8; /* nacc < 128 */
        for (unsigned k = 0; k < 8; k++) {
            tail[k] = (unsigned char)(lo >> (8 * k));
            tail[8 + k] = (unsigned char)(hi >> (8 * k));
        }
        if (last) {
            bits += (uint64_t)n * 8 + nacc;
            extra = n + tail_n;
        }
        uint64_t len = 4 + (end - c->start) + extra;
        if (len > 0xffffffffu)
            break;
        unsigned char h[12];
        wr_u32(h, tid);
        wr_u32(h + 4, (uint32_t)len);
        wr_u32(h + 8, (uint32_t)bits);
        if (write_all(fd, h, 12) != 0 || wr_write_ring(fd, r, c->start, end - c->start) != 0)
            return -1;
        if (last && ((n && write_all(fd, buf, n) != 0) || (tail_n && write_all(fd, tail, tail_n) != 0)))
            return -1;
        *pos += 8 + len;
    }
    uint32_t shown = depth > WR_FRAMES ? WR_FRAMES : depth;
    unsigned char h[16];
    wr_u32(h, WR_STACK_CHUNK);
    wr_u32(h + 4, 8 + 12 * shown);
    wr_u32(h + 8, tid);
    wr_u32(h + 12, depth);
    if (write_all(fd, h, 16) != 0)
        return -1;
    for (uint32_t i = 0; i < shown; i++) {
        unsigned char f[12];
        wr_u32(f, r->frames[i].slot);
        wr_u32(f + 4, r->frames[i].index);
        wr_u32(f + 8, r->frames[i].site + 1);
        if (write_all(fd, f, 12) != 0)
            return -1;
    }
    *pos += 16 + 12 * (uint64_t)shown;
    return 0;
}
