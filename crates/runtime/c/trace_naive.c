/*
 * trace_naive.c -- trace-naive mode: a full control-flow trace (every edge), the oracle for path
 * profiles and witness traces; the trace file's opening, shared with wtrace/.
 */
#include "rt.h"

/* ------------------------------------------------------------------------------------------ */
/* Trace mode: a full control-flow trace, the oracle for path profiles                        */
/* ------------------------------------------------------------------------------------------ */

/* Trace file: "TALLYTRC", u32 version (1), u32 0, then 24-byte records
 * { u64 activation, u64 (kind << 56) | value, u64 module hash }:
 * kind 0 = a function was entered (value = its index in the module metadata),
 * kind 1 = an edge was taken (value = edge id; the activation's function). */
static struct {
    uint32_t lock;
    int fd;        /* 0: not opened yet; -1: failed or off */
    size_t n;
    uint64_t next_act;
    unsigned char buf[1 << 16];
    char path[PATH_CAP];
} trace;

static void trace_flush_locked(void) {
    if (trace.fd > 0 && trace.n) {
        if (write_all(trace.fd, trace.buf, trace.n) != 0) {
            static const char msg[] = "tally: cannot write the trace file\n";
            write_stderr(msg, sizeof msg - 1);
            trace.fd = -1;
        }
    }
    trace.n = 0;
}

/* Opens the trace file (TALLY_TRACE, default <program>.trace) as open_target says, into
 * `path` (PATH_CAP bytes); a new file is renamed into place at once, so the trace is written
 * under its final name. Returns the descriptor (> 0) or -1 (off, refused or failed; reported).
 * Shared by trace-naive and witness tracing (wtrace/). */
int trace_open_file(char *path) {
    char line[PATH_CAP + 256];
    char tmp[PATH_CAP + 64];
    int err = build_path_for(path, PATH_CAP, &env.trace, ".trace", 0, 0);
    if (err == 1)
        return -1;
    if (err) {
        report_line(line, sizeof line, "cannot open the trace file", path, strerror(err));
        return -1;
    }
    if (!secure_target_ok()) {
        report_line(line, sizeof line, "not writing the trace file", path, secure_refusal);
        return -1;
    }
    const char *why;
    int fd = open_target(path, tmp, sizeof tmp, &err, &why);
    if (fd == OPEN_REFUSED) {
        report_line(line, sizeof line, "not writing the trace file", path, why);
        return -1;
    }
    if (fd >= 0 && tmp[0] && rename(tmp, path) != 0) {
        err = errno;
        (void)unlink(tmp);
        (void)close(fd);
        fd = -2;
    }
    if (fd < 0) {
        report_line(line, sizeof line, "cannot open the trace file", path, strerror(err));
        return -1;
    }
    return fd == 0 ? dup(fd) : fd;
}

static void trace_open(void) {
    trace.fd = trace_open_file(trace.path);
    if (trace.fd > 0) {
        memcpy(trace.buf, "TALLYTRC\x01\0\0\0\0\0\0\0", 16);
        trace.n = 16;
    }
}

static void trace_append_locked(uint64_t a, uint64_t b, uint64_t c) {
    if (trace.fd == 0)
        trace_open();
    if (trace.fd > 0) {
        if (trace.n + 24 > sizeof trace.buf)
            trace_flush_locked();
        uint64_t w[3] = {a, b, c};
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 8; k++)
                trace.buf[trace.n++] = (unsigned char)(w[i] >> (8 * k));
    }
}

/* The lock holds the holder's kernel thread id, so that a signal handler that interrupted its
 * own thread's holder neither waits for ever nor writes into the record being written: its
 * records go to the thread's side buffer (mmap'd once), which the holder appends right after
 * the record it was writing -- the order of the events, the interrupted edge being taken
 * before the handler ran. */
struct tn_side {
    uint32_t n, cap;
    uint64_t r[][3];
};
#define TN_SIDE_BYTES (1u << 20)
static __thread struct tn_side *tn_side TALLY_TLS_MODEL;
static uint64_t tn_lost; /* records of handlers that did not fit (reported at the end) */

static void trace_side_put(uint64_t a, uint64_t b, uint64_t c) {
    struct tn_side *sd = tn_side;
    if (!sd) {
        void *p = mmap(0, TN_SIDE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            __atomic_add_fetch(&tn_lost, 1, __ATOMIC_RELAXED);
            return;
        }
        sd = p;
        sd->cap = (TN_SIDE_BYTES - sizeof *sd) / sizeof sd->r[0];
        tn_side = sd;
    }
    uint32_t n = __atomic_load_n(&sd->n, __ATOMIC_ACQUIRE);
    if (n >= sd->cap) {
        __atomic_add_fetch(&tn_lost, 1, __ATOMIC_RELAXED);
        return;
    }
    sd->r[n][0] = a;
    sd->r[n][1] = b;
    sd->r[n][2] = c;
    __atomic_store_n(&sd->n, n + 1, __ATOMIC_RELEASE);
}

/* The side buffer's records follow (the lock is held). */
static void trace_side_drain_locked(void) {
    struct tn_side *sd = tn_side;
    if (!sd)
        return;
    for (uint32_t i = 0;;) {
        uint32_t n = __atomic_load_n(&sd->n, __ATOMIC_ACQUIRE);
        if (i < n) {
            trace_append_locked(sd->r[i][0], sd->r[i][1], sd->r[i][2]);
            i++;
        } else if (__atomic_compare_exchange_n(&sd->n, &n, 0, 0, __ATOMIC_ACQ_REL,
                                               __ATOMIC_ACQUIRE)) {
            return;
        }
    }
}

static void trace_record(uint64_t a, uint64_t b, uint64_t c) {
    int saved_errno = errno;
    if (!owner_lock(&trace.lock, 0)) {
        trace_side_put(a, b, c);
        errno = saved_errno;
        return;
    }
    trace_append_locked(a, b, c);
    trace_side_drain_locked();
    owner_unlock(&trace.lock);
    errno = saved_errno;
}

uint64_t trace_module_hash(const uint64_t *counters) {
    for (const struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); m;
         m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE))
        if (m->counters == counters)
            return m->hash;
    return 0;
}

uint64_t trace_naive_enter_h(uint64_t hash, uint32_t function) {
    uint64_t act = __atomic_add_fetch(&trace.next_act, 1, __ATOMIC_RELAXED);
    trace_record(act, (uint64_t)function, hash);
    return act;
}

/* (A copy that is not the registry owner hands its records to the owner's: one trace file and
 * one numbering of activations per process, rt.h's "One trace per process".) */
uint64_t __tally_trace_enter(const uint64_t *module_counters, uint32_t function) {
    const struct tally_trace_ops *o = trace_home();
    uint64_t hash = trace_module_hash(module_counters);
    return o ? o->tn_enter(hash, function) : trace_naive_enter_h(hash, function);
}

void __tally_trace_edge(uint64_t act, uint32_t edge) {
    const struct tally_trace_ops *o = trace_home();
    if (o)
        o->tn_edge(act, edge);
    else
        trace_record(act, (1ull << 56) | edge, 0);
}

void __tally_trace_reentry(uint64_t act, uint32_t edge, int32_t ret) {
    if (ret != 0)
        __tally_trace_edge(act, edge);
}

void trace_finish(void) {
    wtrace_finish();
    int held = owner_lock(&trace.lock, 1); /* (bounded: maybe a handler that interrupted it) */
    if (held)
        trace_side_drain_locked();
    trace_flush_locked();
    uint64_t lost = __atomic_exchange_n(&tn_lost, 0, __ATOMIC_RELAXED);
    if (lost && trace.fd > 0) {
        static const char msg[] =
            "tally: the trace misses records of signal handlers (a side buffer was full)\n";
        write_stderr(msg, sizeof msg - 1);
    }
    if (held)
        owner_unlock(&trace.lock);
}

/* In a fork child (the registry owner's pthread_atfork handler): the trace belongs to the
 * parent, whose unflushed records the child inherited and the parent will write itself. The
 * child traces nothing (its copy of the descriptor is closed, the inherited buffer dropped), so
 * the parent's trace stays the exact record of the parent. */
void trace_forked(void) {
    wtrace_forked();
    if (trace.fd > 0)
        (void)close(trace.fd);
    trace.fd = -1;
    trace.n = 0;
    thread_id_forget(); /* (the child's own id, when it needs it) */
    if (tn_side)
        tn_side->n = 0;
    __atomic_store_n(&trace.lock, 0, __ATOMIC_RELEASE);
}
