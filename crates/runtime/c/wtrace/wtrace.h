/*
 * wtrace/wtrace.h -- trace mode's runtime: witness tracing (Ball & Larus 1994 §4;
 * tally_graph::witness), what its files share. Each thread
 * packs its records into its own buffer (bits least-significant first, as
 * tally_graph::witness::code), flushed in chunks tagged with the thread's number to the trace
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
 *
 * The files (each keeps its banner's long comment):
 *   coder.c     range coding of the streams (TALLY_TRACE_COMPRESS);
 *   stream.c    a thread's stream: the lock, chunks to the file, the stream's making, the
 *               accumulator's slow paths and __tally_wtrace_spill;
 *   records.c   the runtime's control records: modules, Enter, landings (the entry points);
 *   handlers.c  signal handlers on streams of their own;
 *   file.c      the resolution of external callees, the flight recorder's dumps, the end;
 *   home.c      one trace per process: every copy of the runtime hands its calls to the owner's.
 * This header holds the state they share, and the always-inlined appends of the fast path
 * (wt_bits and its helpers), so that every caller keeps them inline. Its names that are
 * global symbols carry the tally__ prefix (rt.h) and hidden visibility.
 */
#ifndef TALLY_WTRACE_H
#define TALLY_WTRACE_H

#include "rt.h"

/* The witness record code (tally.h's TALLY_WTRACE_*, tally_graph::witness::code): a control
 * record's head is `0` then its kind, least-significant first, WT_CONTROL_BITS wide. */
#define WT_CONTROL(kind) ((kind) << TALLY_WTRACE_BACK_BITS)
#define WT_CONTROL_BITS (TALLY_WTRACE_BACK_BITS + TALLY_WTRACE_KIND_BITS)
#define WT_END WT_CONTROL(TALLY_WTRACE_KIND_END)
#define WT_ENTER_PREDICTED WT_CONTROL(TALLY_WTRACE_KIND_PREDICTED)
/* An Enter of the function at position `at` (uint64_t) among the recently entered. */
#define WT_ENTER_RECENT(at)                                                                    \
    (WT_CONTROL(TALLY_WTRACE_KIND_ENTER) | 1u << WT_CONTROL_BITS | (at) << (WT_CONTROL_BITS + 1))
#define WT_ENTER_RECENT_BITS (WT_CONTROL_BITS + 1 + TALLY_WTRACE_RECENT_BITS)
/* An Enter in full: its head, then the slot and the index as varints. */
#define WT_ENTER_FULL WT_CONTROL(TALLY_WTRACE_KIND_ENTER)
#define WT_ENTER_FULL_BITS (WT_CONTROL_BITS + 1)
/* A landing's head with how `how` (TALLY_WTRACE_HOW_*), then its operands as varints. */
#define WT_LANDING(how) (WT_CONTROL(TALLY_WTRACE_KIND_LANDING) | (how) << WT_CONTROL_BITS)
#define WT_LANDING_BITS (WT_CONTROL_BITS + TALLY_WTRACE_HOW_BITS)
/* A varint's group: TALLY_WTRACE_VARINT_BITS data bits, then the continuation bit (MORE). */
#define WT_VARINT_MORE (1u << TALLY_WTRACE_VARINT_BITS)
#define WT_VARINT_GROUP (TALLY_WTRACE_VARINT_BITS + 1)
#define WT_VARINT_CHUNK (7 * WT_VARINT_GROUP) /* bits of a varint appended at once, at most */

/* Shared names, prefixed (rt.h). */
#define wt tally__wt
#define wt_self tally__wt_self
#define wt_busy tally__wt_busy
#define wt_gave_up tally__wt_gave_up
#define wt_sig_owed tally__wt_sig_owed
#define wt_paying tally__wt_paying
#define wt_compressing tally__wt_compressing
#define wt_words tally__wt_words
#define wt_rc_init tally__wt_rc_init
#define wt_rc_flush tally__wt_rc_flush
#define wt_lock tally__wt_lock
#define wt_unlock tally__wt_unlock
#define wt_lock_mine tally__wt_lock_mine
#define wt_multi tally__wt_multi
#define wt_chunk_locked_in tally__wt_chunk_locked_in
#define wt_flush tally__wt_flush
#define wt_words_restart tally__wt_words_restart
#define wt_pending tally__wt_pending
#define wt_init tally__wt_init
#define wt_map tally__wt_map
#define wt_publish tally__wt_publish
#define wt_get tally__wt_get
#define wt_acc_bytes tally__wt_acc_bytes
#define wt_unstage_words tally__wt_unstage_words
#define wt_words_put tally__wt_words_put
#define wt_close tally__wt_close
#define wt_acc_drain tally__wt_acc_drain
#define wt_acc_end tally__wt_acc_end
#define wt_module_h tally__wt_module_h
#define wt_landing tally__wt_landing
#define wt_pay_owed tally__wt_pay_owed
#define wt_sig_left tally__wt_sig_left
#define wt_sig_write tally__wt_sig_write
#define wt_sig_note tally__wt_sig_note
#define wt_set_acc tally__wt_set_acc
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
    /* Enter's code (trace format 7, tally_graph::witness::code::EnterCoder, over keys
     * slot << 32 | index): the function that followed each function's Enter last time, hashed
     * by that function (a.e_next points here; the previous Enter's key is a.e_prev); the 16
     * most recently entered, first first. */
    uint64_t e_next[TALLY_WTRACE_ENTER_TABLE];
    uint64_t e_recent[TALLY_WTRACE_RECENT];
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

/* The trace's shared state (stream.c). */
struct wt_state {
    uint32_t lock; /* the file, the lists, the slots: 0, or the holder's kernel thread id */
    int multi;     /* the holder writes a sequence of writes that must not be split (below) */
    int fd;        /* 0: not opened yet; -1: failed, off or a fork child */
    uint32_t next_tid;
    uint32_t next_slot;
    struct wt_thread *threads;
    struct wt_mod *mods;
    int resolved; /* the resolutions were written by wtrace_finish */
    char path[PATH_CAP];
};
extern struct wt_state wt HIDDEN;

/* The range coder's state (coder.c). */
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

/* ---- Shared state ----------------------------------------------------------------------- */

/* The thread's stream and state: one TLS pointer (the buffer is mmap'd; stream.c). */
extern __thread struct wt_thread *wt_self TALLY_TLS_MODEL HIDDEN;
/* Nonzero while the runtime calls the system (write, mmap, ...) for this thread: a signal that
 * comes then did not interrupt a call of the program's (wtrace_signal). */
extern __thread unsigned wt_busy TALLY_TLS_MODEL HIDDEN;
/* The thread's stream could not be mapped: it never tries again (wt_get). */
extern __thread int wt_gave_up TALLY_TLS_MODEL HIDDEN;
/* Signal streams whose chunks this thread owes (they ended while it held the lock). */
extern __thread struct wt_thread *wt_sig_owed TALLY_TLS_MODEL HIDDEN;
/* Whether this thread is paying what it owes (wt_pay_owed does not run inside itself). */
extern __thread int wt_paying TALLY_TLS_MODEL HIDDEN;

/* ---- coder.c ----------------------------------------------------------------------------- */

HIDDEN int wt_compressing(void);
HIDDEN int wt_words(void);
HIDDEN void wt_rc_init(struct wt_rc *c);
HIDDEN void wt_rc_flush(struct wt_thread *t, int end);

/* ---- stream.c ---------------------------------------------------------------------------- */

HIDDEN int wt_lock_mine(void);
HIDDEN int wt_lock(int bounded);
HIDDEN void wt_unlock(int held);
HIDDEN void wt_multi(int on);
HIDDEN void wt_chunk_locked_in(uint32_t tid, unsigned char *bytes, size_t n, int room);
HIDDEN void wt_words_restart(struct wt_thread *t);
HIDDEN __attribute__((noinline, cold)) void wt_flush(struct wt_thread *t, int bounded);
HIDDEN unsigned wt_pending(const struct wt_thread *t, uint64_t w, uint64_t *lo, uint64_t *hi);
HIDDEN struct wt_thread *wt_init(struct wt_thread *t);
HIDDEN struct wt_thread *wt_map(void);
HIDDEN void wt_publish(struct wt_thread *t);
HIDDEN struct wt_thread *wt_get(void);
HIDDEN void wt_acc_bytes(struct wt_thread *t, uint64_t w, unsigned bytes);
HIDDEN __attribute__((noinline)) void wt_unstage_words(struct wt_thread *t, uint64_t *end);
HIDDEN void wt_words_put(struct wt_thread *t, uint64_t w);
HIDDEN void wt_close(struct wt_thread *t);
HIDDEN unsigned wt_acc_drain(struct wt_thread *t);
HIDDEN void wt_acc_end(struct wt_thread *t);

/* ---- records.c --------------------------------------------------------------------------- */

HIDDEN __attribute__((noinline, cold)) uint32_t wt_module_h(struct tally_wtrace_module *m,
                                                            uint64_t hash);
HIDDEN void wt_landing(uint32_t how, uint32_t depth, uint32_t block);

/* ---- handlers.c -------------------------------------------------------------------------- */

HIDDEN void wt_pay_owed(void);
HIDDEN struct wt_thread *wt_sig_left(struct wt_thread *t, uint32_t depth);
HIDDEN void wt_sig_note(const struct wt_thread *t);
HIDDEN void wt_sig_write(struct wt_thread *t);

/* ---- home.c ------------------------------------------------------------------------------ */

HIDDEN void wt_set_acc(struct tally_wtrace_acc *p);

/* ---- The appends (stream.c's, inline everywhere) ----------------------------------------- */

/* A stream of words: the staged words are the buffer's next bytes (`n` catches up). */
static inline void wt_words_sync(struct wt_thread *t) {
    t->n = (size_t)((unsigned char *)t->a.stage - t->buf);
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

static inline __attribute__((always_inline)) void wt_unstage(struct wt_thread *t) {
    if (t->words)
        wt_words_sync(t);
    else if (t->a.stage != t->stage)
        wt_unstage_words(t, t->a.stage);
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

#endif /* TALLY_WTRACE_H */
