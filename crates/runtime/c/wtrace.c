/*
 * wtrace.c -- trace mode: witness tracing (Ball & Larus 1994 §4; tally_graph::witness). Each thread
 * packs its records into its own buffer (bits least-significant first, as
 * tally_graph::witness::bits), flushed in chunks tagged with the thread's number to the trace
 * file (tally_format::trace::read_witness_trace):
 *
 *   "TALLYWTR" u32 version (9, 8 or 7) u32 0, then chunks { u32 thread, u32 length, bytes }
 *
 * A chunk of thread 0xffffffff names a module: { u32 slot, u64 metadata hash }; `Enter`
 * records carry (slot, function index). A chunk of thread 0xfffffffd resolves a module's
 * external callees (written at the end, wt_write_resolutions); 0xfffffffc says a stream is a
 * signal handler's and 0xfffffffb that a stream was cut ("Signal handlers" below; the ids are
 * TALLY_WTRACE_*_CHUNK in tally.h). Control records: a prefix code,
 * `1` Back, `0` then a 2-bit kind (0 Enter, 1 landing, 2 End, 3 predicted Enter), and varints
 * of 7 bits + a continuation bit; an Enter is coded against the stream's history
 * (wt_enter_record), whose prediction (the previous Enter and the table, in the thread's
 * struct tally_wtrace_acc) instrumented code reads to write a predicted Enter itself (tally.h);
 * a landing has a 2-bit how:
 * 0 a longjmp's re-entry, 1 an exception's landing pad (both then varints: activations
 * abandoned, landing block), 2 "lost": control entered a function trace mode could not
 * instrument, where regeneration stops.
 * A thread's buffer is mmap'd on its first record and kept until the end of the process
 * (listed in wt.threads), where every stream gets its End and is flushed (wtrace_finish, from
 * trace_finish: exit, _exit, the fatal-signal path). With TALLY_TRACE_RING the full buffers go to
 * the thread's ring instead (wring.c: the flight recorder), written as a whole file at the end
 * and by tally_dump_trace().
 *
 * Modules (struct tally_wtrace_module, one per instrumented module): a module gets its slot at
 * the first entry of one of its functions, silent or not (wt_module), and the runtime copies
 * its tables then: its own functions' addresses and its external callees' addresses as it
 * resolves them. A direct call of an external callee is announced by the caller like a call
 * within the module (__tally_wtrace_direct: the address), so a traced callee writes no Enter;
 * when the trace is written (wtrace_finish; the flight recorder's dumps) each module's
 * external callees are resolved by address among every module's functions and written as a
 * resolution chunk (wt_write_resolutions), which the reader needs to know which calls enter
 * silently.
 *
 * The fast path (below, "Accumulator"): every record goes through the thread's inline word
 * (struct tally_wtrace_acc, first in the stream), which instrumented code reaches through the
 * initial-exec TLS pointer __tally_wtrace_acc and appends witnesses, Back and lost records to
 * at its top (`acc = acc >> bits | value << (64 - bits)`) while its low `bits` bits are zero:
 * up to 63 bits sit above a sentinel 1 (tally.h), so a function's copy is one register and
 * the check one `test` of a constant mask. When a record does not fit, the inline code
 * stages the word as it is (`stage`, below `stage_end`, ABI 11) and starts the word over with
 * the record; only when the stage is full (and with a flight recorder, whose stage has no
 * room) does it call __tally_wtrace_spill. A stream of words (trace format 9, the default:
 * wt_words) is staged into its buffer itself, whose words go to the file as they are (the
 * reader unpacks them, tally_format::trace::unpack_words): wt_unstage just counts them into
 * `n`, and the spill comes when the buffer is full. Otherwise (a flight recorder, the range
 * coder: format 7's packed bytes) the stage is the thread's `stage` array, and the staged
 * words are the stream's bits between the packer and the word: wt_unstage moves them to the
 * packer (`pend`, fewer than 64 bits), whose full words go to the buffer (8 bytes,
 * least-significant first: the same bytes as bit by bit), before anything else leaves the
 * word. The runtime's own records (wt_bits) go into the word too, a full word to the stage.
 * The pointer is never null: until the
 * thread has a stream it points at wt_no_stream, whose closed word (TALLY_WTRACE_CLOSED: no
 * room for any record) sends every record to the slow path (which makes the stream); an
 * ended stream (process end, fork child) is closed too. Instrumented code checks room once
 * for several appends where it can (a check after each call that may write records and at
 * loop heads: tally-llvm's Rec::hoist_checks), so nothing else may write to the word between
 * a check and its appends.
 */
#include "rt.h"

/* A stream's buffer: 64 KiB written to the file at once (a raw stream), 4 KiB moved at once to
 * a flight recorder's ring or the range coder (their bounds: the ring's sizes, WT_RC_OUT). */
#define WT_BUF 65536
#define WT_BUF_SMALL 4096
#define WT_STAGE 64 /* words staged inline (tally_wtrace_acc.stage) */
#define WT_MODULE_CHUNK TALLY_WTRACE_MODULE_CHUNK

struct wt_thread {
    /* The fast path's state: the inline word (closed once ended), the direct flag (the callee
     * a traced direct call site is about to enter) and the depth (traced activations: entries
     * minus returns, for Unwind and the flight recorder), `slow` set with a flight recorder. */
    struct tally_wtrace_acc a;
    struct wt_thread *next; /* every stream, for the end of the process */
    const void *rdirect;    /* with a flight recorder: the direct flag (a.direct stays null) */
    uint32_t tid;
    int ended;
    struct wr_ring *ring; /* the flight recorder's ring and shadow stack, or null */
    uint64_t pend;        /* bits taken from the inline word, not yet a full word of the */
    unsigned npend;       /* buffer: how many (< 64), least-significant first */
    uint64_t end_lo, end_hi; /* a ring's stream once ended: its pending bits (wt_pending), */
    unsigned end_n;          /* how many (the dump writes them exactly, wtrace_finish) */
    struct wt_rc *rc;     /* with TALLY_TRACE_COMPRESS: the stream's range coder, or null */
    /* A signal handler's stream (wtrace_signal, "Signal handlers" below): the stream and the
     * accumulator pointer of the code it interrupted, that code's depth (this stream's
     * activations are the ones above it), whether the stream is in use, and whether its
     * chunks are owed (written by its thread when it next releases the lock: the handler
     * interrupted the lock's holder in a sequence of writes, wt_multi). */
    struct wt_thread *sig_parent;
    struct tally_wtrace_acc *sig_pacc;
    struct wt_thread *sig_link; /* the thread's free or owed signal streams */
    uint32_t sig_base, sig_number; /* (and the signal) */
    int sig_active, sig_owed;
    int sig_in_call; /* the interrupted code was in a call of the program's (wtrace_signal) */
    int sig_muted;   /* with a flight recorder: the handler's stream records nothing */
    int words;            /* a stream of whole words (trace format 9, below): the inline code
                           * stages straight into `buf`, whose first `n` bytes are written */
    /* Enter's code (trace format 7, tally_graph::witness::bits::EnterCoder, over keys
     * slot << 32 | index): the function that followed each function's Enter last time, hashed
     * by that function (a.e_next points here; the previous Enter's key is a.e_prev); the 16
     * most recently entered, first first. */
    uint64_t e_next[TALLY_WTRACE_ENTER_TABLE];
    uint64_t e_recent[16];
    uint32_t e_nrecent;
    size_t n;
    size_t cap;              /* the buffer is moved on when it holds this much (WT_BUF or _SMALL) */
    unsigned char head[8];   /* a raw chunk's header, written with the buffer in one call */
    unsigned char buf[WT_BUF];
    uint64_t stage[WT_STAGE]; /* full words the inline code staged (a.stage, a.stage_end) */
};

/* A module with a slot: copies of its tables (taken when it got the slot, so that a module
 * dlclosed since is never read), for the resolution chunks. */
struct wt_mod {
    struct wt_mod *next;
    uint32_t slot, nfuncs, nexterns;
    const void **funcs;   /* [nfuncs] */
    const void **externs; /* [nexterns] */
};

#define WT_RESOLVE_CHUNK TALLY_WTRACE_RESOLVE_CHUNK
#define WT_SIGNAL_CHUNK TALLY_WTRACE_SIGNAL_CHUNK /* {u32 stream, u32 interrupted or 0, u32 signal} */
#define WT_CUT_CHUNK TALLY_WTRACE_CUT_CHUNK /* {u32 stream}: left between two records (wt_sig_left) */
#define WT_TABLE_MAX (1u << 24) /* entries of a module's table taken (a bound on bad input) */

static struct {
    uint32_t lock; /* the file, the lists, the slots: 0, or the holder's kernel thread id */
    int multi;     /* the holder writes a sequence of writes that must not be split (below) */
    int fd;        /* 0: not opened yet; -1: failed, off or a fork child */
    uint32_t next_tid;
    uint32_t next_slot;
    struct wt_thread *threads;
    struct wt_mod *mods;
    int resolved; /* the resolutions were written by wtrace_finish */
    char path[PATH_CAP];
} wt;

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
#define WT_RC_BITS 16
#define WT_RC_RAW 65536u                           /* raw bytes per chunk, at most */
#define WT_RC_OUT (WT_RC_RAW * 2 + 16 * WT_BUF_SMALL + 64) /* coded bytes: the worst case and a margin */
#define WT_RC_HEAD 12                              /* u32 thread, u32 length, u32 raw bytes */

struct wt_rc {
    uint32_t busy;
    uint32_t hist;       /* the stream's last bits, the latest lowest */
    uint64_t low;        /* the coder (LZMA's rc_encoder) */
    uint32_t range;
    unsigned char cache;
    uint64_t cache_size; /* pending bytes: the cache and cache_size - 1 bytes 0xff */
    size_t raw;          /* raw bytes in this chunk */
    size_t out;          /* coded bytes in this chunk (after the header) */
    uint16_t p[1u << WT_RC_BITS];
    unsigned char obuf[WT_RC_HEAD + WT_RC_OUT];
};

static int wt_compress = -1; /* -1: not read yet */

/* TALLY_TRACE_COMPRESS: 1 or on codes the streams, 0, off or empty writes them raw. A flight
 * recorder's ring stays raw (its reader starts mid-stream). */
static int wt_compressing(void) {
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
static int wt_words(void) {
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

static void wt_rc_init(struct wt_rc *c) {
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
static void wt_chunk_locked_in(uint32_t tid, unsigned char *bytes, size_t n, int room);
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

/* The thread's stream and state: one TLS pointer (the buffer is mmap'd). */
static __thread struct wt_thread *wt_self TALLY_TLS_MODEL;

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
static void wt_set_acc(struct tally_wtrace_acc *p) {
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

/* Nonzero while the runtime calls the system (write, mmap, ...) for this thread: a signal that
 * comes then did not interrupt a call of the program's (wtrace_signal). */
static __thread unsigned wt_busy TALLY_TLS_MODEL;

/* Whether the calling thread holds the lock (a signal handler that interrupted its holder). */
static int wt_lock_mine(void) {
    return owner_lock_mine(&wt.lock);
}

/* Takes the lock (owner_lock: its word is the holder's thread id); `bounded` (the end of the
 * process, possibly in a signal handler that interrupted its holder) gives up after a while
 * and goes on without it. A signal handler that interrupted this very thread's holder goes on
 * without it at once (waiting would never end): what it writes is whole chunks, one `write`
 * each, which cannot tear the holder's. Returns whether the lock is held. */
static void wt_pay_owed(void);
static int wt_lock(int bounded) {
    wt_busy++;
    int held = owner_lock(&wt.lock, bounded);
    wt_busy--;
    return held;
}

/* Signal streams whose chunks this thread owes (they ended while it held the lock). */
static __thread struct wt_thread *wt_sig_owed TALLY_TLS_MODEL;

/* Whether this thread is paying what it owes (wt_pay_owed does not run inside itself). */
static __thread int wt_paying TALLY_TLS_MODEL;

static void wt_unlock(int held) {
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
static void wt_multi(int on) {
    __atomic_store_n(&wt.multi, on, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Writes one chunk; the lock is held (or given up on). With `room` the 8 bytes before `bytes`
 * are free (a stream's buffer): the header goes there, and the chunk out in one write. */
static void wt_chunk_locked_in_(uint32_t tid, unsigned char *bytes, size_t n, int room);
static void wt_chunk_locked_in(uint32_t tid, unsigned char *bytes, size_t n, int room) {
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

/* A range-coded stream's buffer goes to its coder; the chunk ends (is written) when full and
 * when `end` (the end of the stream, tally_dump_trace). `end` also bounds the waits (see wt_lock). */
static void wt_rc_flush(struct wt_thread *t, int end) {
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

/* A stream of words: the staged words are the buffer's next bytes (`n` catches up). */
static inline void wt_words_sync(struct wt_thread *t) {
    t->n = (size_t)((unsigned char *)t->a.stage - t->buf);
}
/* A stream of words whose buffer was written: the inline code stages from its start again
 * (nowhere once the stream is closed). */
static void wt_words_restart(struct wt_thread *t) {
    t->a.stage = (uint64_t *)(void *)t->buf;
    t->a.stage_end = t->ended ? t->a.stage : t->a.stage + WT_BUF / 8;
}

static __attribute__((noinline, cold)) void wt_flush(struct wt_thread *t, int bounded) {
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

/* The inline word (tally.h): up to 63 bits above a sentinel 1. How many it holds (0-63; a
 * closed word reads as 63, which only the paths that check `ended` first ever see). */
static inline unsigned wt_word_n(uint64_t w) {
    return w ? 63u - (unsigned)__builtin_ctzll(w) : 0;
}
/* Its bits, least-significant first. */
static inline uint64_t wt_word_bits(uint64_t w) {
    unsigned n = wt_word_n(w);
    return n ? w >> (64 - n) : 0;
}
/* The thread's bits not yet in its buffer: the packer's, then the inline word's (at most 126:
 * `*hi` gets what does not fit in `*lo`). Returns how many. */
static unsigned wt_pending(const struct wt_thread *t, uint64_t w, uint64_t *lo, uint64_t *hi) {
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
static __thread int wt_gave_up TALLY_TLS_MODEL;
/* A stream's state as new, in `t` (mapped zeroed, or a signal stream used before: everything
 * the stream's records change is set again). Returns `t`. */
static struct wt_thread *wt_init(struct wt_thread *t) {
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
static struct wt_thread *wt_map(void) {
    wt_busy++;
    void *p = mmap(0, sizeof(struct wt_thread), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    wt_busy--;
    return p == MAP_FAILED ? 0 : p;
}

/* A stream made by wt_init goes on the list of every stream (for the end of the process;
 * pushed atomically: a signal handler may make one while its thread holds the lock). */
static void wt_publish(struct wt_thread *t) {
    t->next = __atomic_load_n(&wt.threads, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&wt.threads, &t->next, t, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
        ;
}

static struct wt_thread *wt_get(void) {
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
static void wt_acc_bytes(struct wt_thread *t, uint64_t w, unsigned bytes) {
    for (unsigned k = 0; k < bytes; k++) {
        t->buf[t->n++] = (unsigned char)(w >> (8 * k));
        if (t->n >= t->cap)
            wt_flush(t, 0);
    }
}

/* The packer's full word `w` goes to the buffer (flushed when full). */
static inline __attribute__((always_inline)) void wt_word(struct wt_thread *t, uint64_t w) {
    if (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && t->n + 8 <= t->cap) {
        memcpy(t->buf + t->n, &w, 8); /* least-significant byte first */
        t->n += 8;
        if (__builtin_expect(t->n >= t->cap, 0))
            wt_flush(t, 0);
    } else {
        wt_acc_bytes(t, w, 8);
    }
}

/* Appends the low `bits` (1-64) bits of v (masked) to the packer; a full word goes to the
 * buffer. */
static inline __attribute__((always_inline)) void wt_pack(struct wt_thread *t, uint64_t v,
                                                          unsigned bits) {
    unsigned n = t->npend + bits;
    uint64_t acc = t->pend | v << t->npend;
    if (n >= 64) {
        wt_word(t, acc);
        n -= 64;
        acc = n ? v >> (bits - n) : 0;
    }
    t->pend = acc;
    t->npend = n;
}

/* The words the inline code staged go to the packer, in order (they precede the inline word's
 * bits): first thing wherever the runtime adds to the stream. A loop over registers while the
 * buffer has room for a word per staged word (each gives the packer fewer than 64 bits). */
static __attribute__((noinline)) void wt_unstage_words(struct wt_thread *t, uint64_t *end) {
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
static inline __attribute__((always_inline)) void wt_unstage(struct wt_thread *t) {
    if (t->words)
        wt_words_sync(t);
    else if (t->a.stage != t->stage)
        wt_unstage_words(t, t->a.stage);
}

/* A stream of words: word `w` (bits above a sentinel) is staged like the inline code does,
 * after the buffer is written when full. */
static void wt_words_put(struct wt_thread *t, uint64_t w) {
    if (t->a.stage >= t->a.stage_end) {
        wt_flush(t, 0);
        if (t->a.stage >= t->a.stage_end)
            return; /* (closed meanwhile: dropped like any record) */
    }
    *t->a.stage++ = w;
}

/* The stream takes no more records: the inline code's word has no room and staging none, so
 * every record goes to the slow path, which drops it. */
static void wt_close(struct wt_thread *t) {
    t->a.acc = TALLY_WTRACE_CLOSED;
    t->a.stage_end = t->a.stage;
}

/* The inline word's bits go to the packer: the word is empty again. */
static inline __attribute__((always_inline)) void wt_take_word(struct wt_thread *t) {
    wt_unstage(t);
    uint64_t w = t->a.acc;
    unsigned n = wt_word_n(w);
    if (n && t->words)
        wt_words_put(t, w);
    else if (n)
        wt_pack(t, wt_word_bits(w), n);
    t->a.acc = TALLY_WTRACE_EMPTY;
}

/* Appends the low `bits` (<= 64) bits of v to a live stream, after the inline word's. */
static inline __attribute__((always_inline)) void wt_bits(struct wt_thread *t, uint64_t v,
                                                          unsigned bits) {
    if (!bits || bits > 64 || t->ended)
        return; /* (ended meanwhile, by another thread's exit) */
    if (bits < 64)
        v &= (1ull << bits) - 1;
    uint64_t w = t->a.acc;
    for (;;) {
        unsigned room = 63 - wt_word_n(w);
        if (bits <= room) {
            t->a.acc = w >> bits | v << (64 - bits);
            return;
        }
        if (room) { /* the word's last `room` bits: the record's first */
            w = w >> room | v << (64 - room);
            v >>= room;
            bits -= room;
        }
        if (t->a.stage < t->a.stage_end) {
            *t->a.stage++ = w;
        } else if (t->words) {
            wt_words_put(t, w);
        } else {
            wt_unstage(t);
            wt_pack(t, wt_word_bits(w), 63);
        }
        w = TALLY_WTRACE_EMPTY;
    }
}

/* The pending bits, padded to a byte, go to the buffer (a flight recorder's chunk ends, the
 * stream ends); returns the padding bits. */
static unsigned wt_acc_drain(struct wt_thread *t) {
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
static void wt_acc_end(struct wt_thread *t) {
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

/* ---- Control records ---------------------------------------------------------------------------- */

/* A varint: groups of 7 bits + a continuation bit, low groups first; appended at once (one
 * wt_bits for values below 2^56). */
static void wt_varint(struct wt_thread *t, uint64_t v) {
    if (v < 0x80) { /* (the usual slots and function indices: one or two groups) */
        wt_bits(t, v, 8);
        return;
    }
    if (v < 0x4000) {
        wt_bits(t, (v & 0x7f) | 0x80 | (v >> 7) << 8, 16);
        return;
    }
    uint64_t code = 0;
    unsigned bits = 0;
    for (;;) {
        int more = v >= 0x80;
        code |= ((v & 0x7f) | (uint64_t)more << 7) << bits;
        bits += 8;
        v >>= 7;
        if (!more || bits == 56)
            break;
    }
    wt_bits(t, code, bits);
    if (v && bits == 56 && (code >> 55) & 1)
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
static __attribute__((noinline, cold)) uint32_t wt_module_h(struct tally_wtrace_module *m,
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
    wt_bits(t, 0, 4);
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
    uint64_t code = 6; /* '0' then kind 11: the predicted function */
    unsigned bits = 3;
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
            if (nr < 16) {
                r[nr] = carry;
                t->e_nrecent = nr + 1;
            }
            return wt_enter_rest(t, key, self, 0, 0);
        }
        code = 8 | (uint64_t)at << 4; /* '0', kind 00, '1', the position */
        bits = 8;
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
 * after the activations above it were abandoned: an Unwind record (kind 2, then how in 2 bits:
 * 0 a longjmp's re-entry, 1 an exception's landing pad; then the abandoned count and the
 * block). The thread's depth (and so the flight recorder's shadow stack) is that of the
 * landing activation again. */
static struct wt_thread *wt_sig_left(struct wt_thread *t, uint32_t depth);
static void wt_landing(uint32_t how, uint32_t depth, uint32_t block) {
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
        wt_bits(t, 2 | how << 3, 5); /* '0', kind 01, how */
        wt_varint(t, abandoned);
        wt_varint(t, block);
    }
}

void __tally_wtrace_reentry(int32_t ret, uint32_t depth, uint32_t block) {
    if (ret != 0)
        wt_landing(0, depth, block);
}

void __tally_wtrace_unwind(uint32_t depth, uint32_t block) {
    int saved_errno = errno;
    wt_landing(1, depth, block);
    errno = saved_errno;
}

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
static void wt_sig_note(const struct wt_thread *t) {
    uint32_t v[3] = {t->tid, t->sig_parent ? t->sig_parent->tid : 0, t->sig_number};
    wt_note(WT_SIGNAL_CHUNK, v, 3);
}

/* An ended signal stream's chunks: what it is, then its stream (a range-coded one's chunk
 * ends with it). */
static void wt_sig_write(struct wt_thread *t) {
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
        wt_bits(t, 4, 3); /* End: '0' then kind 10 */
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
static void wt_pay_owed(void) {
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
static struct wt_thread *wt_sig_left(struct wt_thread *t, uint32_t depth) {
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
            wt_bits(p, 4, 3); /* End */
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
 * crates/report/src/wtrace.rs), for the same reason. */
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
        wt_bits(t, 4, 3); /* End: '0' then kind 10 */
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
