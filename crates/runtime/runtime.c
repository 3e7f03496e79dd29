/*
 * runtime.c -- the tally runtime (libtally_rt.a), linked into every program built by `tally cc`.
 *
 * It keeps the list of registered modules, charges the early-exit counters of abandoned frames
 * (Ball & Larus 1994, sec. 3.2, Fig. 7: exit(), longjmp and C++ unwinding), and writes the
 * profile container described in ARCHITECTURE.md ("Profile container") when the program exits.
 *
 * Rules this file keeps: C11 + libc only; never crash on a corrupt frame list; never call exit;
 * never change errno or the exit status; never use the program's malloc (path tables are mmap'd).
 */
#define _GNU_SOURCE
#include "tally.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* rename */
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define TALLY_BIG_ENDIAN 1
#else
#define TALLY_BIG_ENDIAN 0
#endif

#define HIDDEN __attribute__((visibility("hidden")))

/* ------------------------------------------------------------------------------------------ */
/* The shadow stack                                                                           */
/* ------------------------------------------------------------------------------------------ */

__thread struct tally_frame *__tally_top __attribute__((tls_model("initial-exec"))) = 0;

/* Longest frame list the runtime walks (a list is acyclic since addresses strictly increase;
 * the cap only bounds the time spent on garbage). */
#define WALK_CAP (1u << 22)

/* Granularity of readability probes. Every page size is a multiple of it. */
#define CHUNK ((uintptr_t)4096)

/* Size of the kernel's sigset_t, for the rt_sigprocmask readability probe. */
#if defined(__mips__)
#define KSIGSET_SIZE 16
#else
#define KSIGSET_SIZE 8
#endif

/* ------------------------------------------------------------------------------------------ */
/* Small helpers (no stdio: they may run at exit, in odd states)                              */
/* ------------------------------------------------------------------------------------------ */

static size_t put_str(char *dst, size_t pos, size_t cap, const char *s) {
    while (*s && pos + 1 < cap)
        dst[pos++] = *s++;
    dst[pos < cap ? pos : cap - 1] = 0;
    return pos;
}

static size_t put_u64(char *dst, size_t pos, size_t cap, uint64_t v) {
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n && pos + 1 < cap)
        dst[pos++] = tmp[--n];
    dst[pos < cap ? pos : cap - 1] = 0;
    return pos;
}

static void write_stderr(const char *s, size_t n) {
    while (n) {
        ssize_t r = write(2, s, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        if (r == 0)
            return;
        s += r;
        n -= (size_t)r;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Module registry                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* Modules in registration order. Mutated under reg_lock; read lock-free with acquire loads
 * (a module is fully initialised before it is published with a release store). */
static struct tally_module *reg_head;
static struct tally_module *reg_tail;
static char reg_lock;
static int exit_installed;
static int exit_done;

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Takes the registry lock. With `bounded`, gives up after a while (returns 0) rather than
 * deadlock, e.g. when exit() is called from a signal handler that interrupted a registration. */
static int lock_registry(int bounded) {
    unsigned spins = 0;
    while (__atomic_test_and_set(&reg_lock, __ATOMIC_ACQUIRE)) {
        if (++spins < 1000) {
            cpu_relax();
        } else {
            if (bounded && spins > 1000 + 20000)
                return 0;
            sched_yield();
        }
    }
    return 1;
}

static void unlock_registry(void) {
    __atomic_clear(&reg_lock, __ATOMIC_RELEASE);
}

static int is_path_table(const struct tally_path_table *t);
static void trace_finish(void);
static void count_path(struct tally_path_table *t, uint64_t path);

/* True when `p` points at a counter of a registered module (8-aligned, inside its array). */
static int is_counter(const uint64_t *p) {
    uintptr_t a = (uintptr_t)p;
    if (!p || (a & 7) != 0)
        return 0;
    for (const struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); m;
         m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE)) {
        uintptr_t lo = (uintptr_t)m->counters;
        if (lo && a >= lo && m->num_counters <= (UINTPTR_MAX - lo) / 8 &&
            a < lo + m->num_counters * 8)
            return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Hashed path counters (path mode)                                                           */
/* ------------------------------------------------------------------------------------------ */

static int is_path_table(const struct tally_path_table *t) {
    uintptr_t a = (uintptr_t)t;
    if (!t || (a & 7) != 0)
        return 0;
    for (const struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); m;
         m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE)) {
        uintptr_t lo = (uintptr_t)m->path_tables;
        uintptr_t sz = sizeof(struct tally_path_table);
        if (lo && a >= lo && m->num_path_tables <= (UINTPTR_MAX - lo) / sz &&
            a < lo + m->num_path_tables * sz && (a - lo) % sz == 0)
            return 1;
    }
    return 0;
}

static void table_lock(struct tally_path_table *t) {
    while (__atomic_exchange_n(&t->lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}

static void table_unlock(struct tally_path_table *t) {
    __atomic_store_n(&t->lock, 0, __ATOMIC_RELEASE);
}

static uint64_t slot_of(uint64_t path, uint64_t capacity) {
    return (path * 0x9E3779B97F4A7C15ull) >> 32 & (capacity - 1);
}

/* The count word of `path` in `slots` (capacity a power of two), inserting it if `insert`. */
static uint64_t *find_slot(uint64_t *slots, uint64_t capacity, uint64_t path, int insert,
                           uint64_t *used) {
    for (uint64_t i = slot_of(path, capacity), n = 0; n < capacity; n++, i = (i + 1) & (capacity - 1)) {
        uint64_t k = slots[2 * i];
        if (k == path + 1)
            return &slots[2 * i + 1];
        if (k == 0) {
            if (!insert)
                return 0;
            slots[2 * i] = path + 1;
            (*used)++;
            return &slots[2 * i + 1];
        }
    }
    return 0;
}

/* Doubles the table (at least 256 slots). The memory comes from mmap, never from the
 * program's malloc, so that counting paths cannot change the program's heap layout (and with it
 * the behaviour of code that looks at addresses). Old arrays are never unmapped: a stale cached
 * pointer into one stays valid memory. Returns 0 when out of memory. */
static int grow(struct tally_path_table *t) {
    uint64_t cap = t->capacity ? t->capacity * 2 : 256;
    if (cap > (UINT64_MAX / 16) || cap * 16 > SIZE_MAX)
        return 0;
    void *mem = mmap(0, (size_t)cap * 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return 0;
    uint64_t *slots = mem;
    uint64_t used = 0;
    for (uint64_t i = 0; i < t->capacity; i++) {
        uint64_t k = t->slots[2 * i];
        if (k) {
            uint64_t *c = find_slot(slots, cap, k - 1, 1, &used);
            if (c)
                *c = t->slots[2 * i + 1];
        }
    }
    /* Counting holds the lock; a profile written meanwhile by another thread reads the table
     * without it, so the new slots are published before the capacity that indexes them. */
    __atomic_store_n(&t->slots, slots, __ATOMIC_RELEASE);
    __atomic_store_n(&t->capacity, cap, __ATOMIC_RELEASE);
    t->used = used;
    t->last_count = 0;
    return 1;
}

/* The count word of `path` in the overflow table, inserted if missing (growing the table);
 * NULL when memory ran out. Takes the last-path cache first. */
static uint64_t *overflow_count(struct tally_path_table *t, uint64_t path) {
    if (t->last_count && t->last_path == path)
        return t->last_count;
    if ((t->used + 1) * 4 > t->capacity * 3 && !grow(t))
        return t->capacity ? find_slot(t->slots, t->capacity, path, 0, &t->used) : 0;
    uint64_t *c = find_slot(t->slots, t->capacity, path, 1, &t->used);
    if (c) {
        t->last_path = path;
        t->last_count = c;
    }
    return c;
}

static uint64_t home_slot(uint64_t path) {
    return (path * 0x9E3779B97F4A7C15ull) >> (64 - TALLY_PATH_HOME_BITS);
}

static void count_path(struct tally_path_table *t, uint64_t path) {
    table_lock(t);
    uint64_t *home = t->home ? &t->home[2 * home_slot(path)] : 0;
    if (home && (home[1] == 0 || home[0] == path)) {
        if (home[1] == 0) { /* a free home slot (count 0) is claimed */
            home[0] = path;
            t->home_claims++;
        }
        home[1]++;
        table_unlock(t);
        return;
    }
    uint64_t *c = overflow_count(t, path);
    if (!c) {
        t->lost++;
        table_unlock(t);
        return;
    }
    (*c)++;
    /* The home slot goes to the path that runs more: once this path has counted clearly more
     * in the overflow table than the occupant at home, the occupant's home count moves to its
     * overflow entry and this path takes the slot with a count of 0 (its earlier counts stay
     * in the overflow table, so every total is unchanged). */
    if (home && *c > 2 * home[1] + 16) {
        uint64_t *o = overflow_count(t, home[0]);
        if (o) {
            *o += home[1];
            home[0] = path;
            home[1] = 0;
        }
    }
    table_unlock(t);
}

void __tally_path_count(struct tally_path_table *t, uint64_t path) {
    int saved_errno = errno;
    if (t)
        count_path(t, path);
    errno = saved_errno;
}

/* ------------------------------------------------------------------------------------------ */
/* Events mode: the per-thread event countdown, queries, TALLY_STOP_AT                        */
/* ------------------------------------------------------------------------------------------ */

/* The exact event count of a thread is __tally_ev_limit - __tally_ev_left (plus the query
 * increment of the point, which instrumented code adds itself). Instrumented code subtracts
 * increments from `left` and, on its checked chords, calls __tally_events_check when the new
 * `left` is <= 0 (<= q - TALLY_EV_SLACK at the rare points whose query increment q exceeds
 * TALLY_EV_SLACK): a test x86 reads off the flags of the subtraction itself. With
 * TALLY_STOP_AT=N the limit is set TALLY_EV_SLACK events short of N, so every checked point whose
 * exact count (count + q, q <= TALLY_EV_SLACK) reaches N calls the runtime, which decides
 * exactly; the points checked in between (at most TALLY_EV_SLACK events' worth) return at once.
 * Without a pending stop the limit is TALLY_EV_NO_LIMIT (2^62), so that `left` stays far from
 * both ends of int64_t whatever the (possibly negative) increments and a check's signed `jle`
 * after the subtraction never sees an overflow. */
__thread int64_t __tally_ev_left __attribute__((tls_model("initial-exec"))) = TALLY_EV_NO_LIMIT;
__thread int64_t __tally_ev_limit __attribute__((tls_model("initial-exec"))) = TALLY_EV_NO_LIMIT;
/* N of TALLY_STOP_AT for this thread, 0 when none is pending. */
static __thread int64_t stop_target __attribute__((tls_model("initial-exec")));

static tally_stop_handler stop_handler;
static int stop_checked;

uint64_t tally_events(void) {
    return (uint64_t)(__tally_ev_limit - __tally_ev_left);
}

void tally_events_on_stop(tally_stop_handler h) {
    __atomic_store_n(&stop_handler, h, __ATOMIC_RELEASE);
}

/* Sets the calling thread's limit to `limit`, keeping its count. */
static void set_limit(int64_t limit) {
    int64_t count = __tally_ev_limit - __tally_ev_left;
    __tally_ev_limit = limit;
    __tally_ev_left = limit - count;
}

/* TALLY_STOP_AT=N: the (main) thread stops at the first checked point where its exact count is
 * >= N. Read at the first module registration, before main. */
static void read_stop_at(void) {
    const char *s = getenv("TALLY_STOP_AT");
    if (!s || !*s)
        return;
    uint64_t n = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (n > (UINT64_MAX - 9) / 10)
            return;
        n = n * 10 + (uint64_t)(*s - '0');
    }
    if (*s || n == 0 || n > (uint64_t)INT64_MAX / 2)
        return;
    stop_target = (int64_t)n;
    set_limit((int64_t)n - TALLY_EV_SLACK);
}

void __tally_events_check(const char *where, int64_t query_inc) {
    int64_t exact = __tally_ev_limit - __tally_ev_left + query_inc;
    if (stop_target == 0 || exact < stop_target)
        return; /* armed early (TALLY_EV_SLACK) or no stop pending: not there yet */
    int saved_errno = errno;
    uint64_t count = (uint64_t)exact;
    /* Never again in this thread: the count is kept, the limit lifted. */
    stop_target = 0;
    set_limit(TALLY_EV_NO_LIMIT);
    char line[4096 + 128];
    size_t n = put_str(line, 0, sizeof line, "tally: TALLY_STOP_AT reached: ");
    n = put_u64(line, n, sizeof line, count);
    n = put_str(line, n, sizeof line, " events at ");
    n = put_str(line, n, sizeof line, where ? where : "?");
    n = put_str(line, n, sizeof line, "\n");
    write_stderr(line, n);
    tally_stop_handler h = __atomic_load_n(&stop_handler, __ATOMIC_ACQUIRE);
    errno = saved_errno;
    if (h)
        h(count, where);
    else
        raise(SIGTRAP);
}

static void exit_handler(void);

void __tally_register(struct tally_module *m) {
    int saved_errno = errno;
    if (!m) {
        static const char msg[] = "tally: ignoring a null module descriptor\n";
        write_stderr(msg, sizeof msg - 1);
        errno = saved_errno;
        return;
    }
    if (m->abi_version != TALLY_ABI_VERSION) {
        char line[160];
        size_t n = put_str(line, 0, sizeof line, "tally: ignoring a module descriptor with ABI version ");
        n = put_u64(line, n, sizeof line, m->abi_version);
        n = put_str(line, n, sizeof line, " (this runtime implements version ");
        n = put_u64(line, n, sizeof line, TALLY_ABI_VERSION);
        n = put_str(line, n, sizeof line, ")\n");
        write_stderr(line, n);
        errno = saved_errno;
        return;
    }
    lock_registry(0);
    for (struct tally_module *p = reg_head; p; p = p->next) {
        if (p == m) { /* registered twice: keep the first */
            unlock_registry();
            errno = saved_errno;
            return;
        }
    }
    __atomic_store_n(&m->next, (struct tally_module *)0, __ATOMIC_RELAXED);
    if (reg_tail)
        __atomic_store_n(&reg_tail->next, m, __ATOMIC_RELEASE);
    else
        __atomic_store_n(&reg_head, m, __ATOMIC_RELEASE);
    reg_tail = m;
    unlock_registry();
    if (!__atomic_exchange_n(&exit_installed, 1, __ATOMIC_ACQ_REL))
        (void)atexit(exit_handler);
    if ((m->flags & TALLY_MODULE_EVENTS) && !__atomic_exchange_n(&stop_checked, 1, __ATOMIC_ACQ_REL))
        read_stop_at();
    errno = saved_errno;
}

void __tally_unregister(struct tally_module *m) {
    if (!m)
        return;
    lock_registry(0);
    struct tally_module *prev = 0;
    for (struct tally_module *p = reg_head; p; prev = p, p = p->next) {
        if (p != m)
            continue;
        struct tally_module *next = p->next;
        if (prev)
            __atomic_store_n(&prev->next, next, __ATOMIC_RELEASE);
        else
            __atomic_store_n(&reg_head, next, __ATOMIC_RELEASE);
        if (reg_tail == p)
            reg_tail = prev;
        break;
    }
    unlock_registry();
}

void tally_reset_counters(void) {
    for (const struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); m;
         m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE)) {
        if (m->counters && m->num_counters && m->num_counters <= SIZE_MAX / sizeof(uint64_t))
            memset(m->counters, 0, (size_t)m->num_counters * sizeof(uint64_t));
        for (uint64_t i = 0; m->path_tables && i < m->num_path_tables; i++) {
            struct tally_path_table *t = &m->path_tables[i];
            table_lock(t);
            for (uint64_t j = 0; j < t->capacity; j++)
                t->slots[2 * j + 1] = 0;
            for (uint64_t j = 0; t->home && j < TALLY_PATH_HOME_SLOTS; j++)
                t->home[2 * j + 1] = 0;
            t->lost = 0;
            table_unlock(t);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Walking frame records                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* Returns whether the CHUNK-sized block at `c` is readable, without touching it: the kernel
 * copies the "new mask" of rt_sigprocmask before it rejects the invalid `how`, so the call
 * fails with EFAULT for unreadable memory and EINVAL otherwise, and changes nothing. */
static int probe_chunk(uintptr_t c) {
    if (c < CHUNK)
        return 0;
    long r = syscall(SYS_rt_sigprocmask, -1, (void *)c, (void *)0, (size_t)KSIGSET_SIZE);
    return r == -1 && errno == EINVAL;
}

/* Charges a frame record's site: a counter, or (low bit set) a hashed path. Invalid sites are
 * passed over. */
static void charge_site(uint64_t *site) {
    uintptr_t a = (uintptr_t)site;
    if (a & 1) {
        const struct tally_path_site *ps = (const struct tally_path_site *)(a & ~(uintptr_t)1);
        if ((a & 6) == 0 && ps && is_path_table(ps->table))
            count_path(ps->table, ps->path);
    } else if (site != TALLY_NO_SITE && is_counter(site)) {
        (*site)++;
    }
}

struct walker {
    uintptr_t ok_lo, ok_hi; /* known readable: [ok_lo, ok_hi) */
    uintptr_t good_chunk;   /* the last chunk that passed a probe (0: none) */
};

static int chunk_ok(struct walker *w, uintptr_t c) {
    if (c == w->good_chunk)
        return 1;
    if (!probe_chunk(c))
        return 0;
    w->good_chunk = c;
    return 1;
}

static int record_readable(struct walker *w, uintptr_t a) {
    uintptr_t b = a + sizeof(struct tally_frame);
    if (a >= w->ok_lo && b <= w->ok_hi)
        return 1;
    return chunk_ok(w, a & ~(CHUNK - 1)) && chunk_ok(w, (b - 1) & ~(CHUNK - 1));
}

/* Walks the records from `r` up the `prev` chain. A record is valid when its address is
 * 8-aligned, above `above` and above the previous record (the stack grows down), not past `end`,
 * and readable. Stops before `end` (returning 1), at the first invalid record, at NULL or after
 * WALK_CAP records. With `charge`, adds 1 to the site counter of every
 * valid record passed. Without `end`, returns 1 when the walk ended at NULL. */
static int walk(struct tally_frame *r, uintptr_t above, const struct tally_frame *end,
                struct walker *w, int charge) {
    for (unsigned n = 0;; n++) {
        if (r == end)
            return 1;
        if (!r)
            return 0;
        uintptr_t a = (uintptr_t)r;
        if (n >= WALK_CAP || a <= above || (a & 7) != 0 || a > UINTPTR_MAX - 2 * sizeof *r)
            return 0;
        if (end && a > (uintptr_t)end)
            return 0;
        if (!record_readable(w, a))
            return 0;
        struct tally_frame *prev = r->prev;
        /* A record whose site is not (yet) a counter -- instrumented code sets it only before
         * the first call that may end the frame -- is passed over, not charged. */
        if (charge)
            charge_site(r->site);
        above = a;
        r = prev;
    }
}

/* The common part of __tally_unwound (lj = 0) and __tally_longjmp_landed (lj = 1, ret != 0).
 * `top` is the list head at entry, or NULL when the records above `f` must not be read. */
static void landed_common(struct tally_frame *f, int lj, struct tally_frame *top, struct walker *w) {
    if (top && top != f && walk(top, 0, f, w, 0))
        walk(top, 0, f, w, 1);
    if (lj && f && ((uintptr_t)f & 7) == 0) {
        charge_site(f->site);
    }
    __tally_top = f;
}

#if defined(__x86_64__) && defined(__linux__)

/*
 * On entry to __tally_unwound / __tally_longjmp_landed the records to charge belong to frames
 * that are already gone: they sit in dead stack memory *below* the caller's stack pointer,
 * exactly where this function's own frame would go. So the entry points are written in
 * assembly and use no stack until they have moved the stack pointer below the lowest record
 * (the list head): they check the head is 8-aligned, below `f` and below the stack pointer,
 * probe (rt_sigprocmask, see probe_chunk) that every 4 KiB chunk from a scratch area below the
 * head up to the stack pointer is readable -- [sp, f] is the caller's live stack -- and only
 * then switch to the scratch area and call tally__landed_switched(f, lj, top). Otherwise they
 * call it on the current stack with top = NULL, which charges nothing above `f`.
 * (Remaining window: a signal delivered between the landing and the switch builds its frame
 * below sp and may overwrite such records; validation then stops the walk, no crash.)
 */

#define TALLY_STR2(x) #x
#define TALLY_STR(x) TALLY_STR2(x)
/* The switched stack pointer is (top - 128) & -16; the 4096 bytes below it are probed too.
 * Plain numbers, because they are pasted into the assembly below. */
#define TALLY_GAP 128            /* gap between the lowest record and the switched stack */
#define TALLY_SCRATCH_GAP 4224   /* 4096 + TALLY_GAP: lowest probed byte, below top */
#define TALLY_MIN_TOP 8320       /* TALLY_SCRATCH_GAP + 4096: smaller heads are not walked */
#define TALLY_MAX_SPAN 0x10000000 /* 256 MiB: records farther below f are not walked */

#if defined(__CET__) && (__CET__ & 1)
#define TALLY_ENDBR "endbr64\n"
#else
#define TALLY_ENDBR ""
#endif

HIDDEN __attribute__((used)) void tally__landed_switched(struct tally_frame *f, int lj,
                                                         struct tally_frame *top);

HIDDEN __attribute__((used)) void tally__landed_switched(struct tally_frame *f, int lj,
                                                         struct tally_frame *top) {
    /* When top != NULL, [top, f + 1) was verified readable by the caller; with top == NULL
     * no record above f is read. */
    struct walker w = {0, 0, 0};
    if (top) {
        w.ok_lo = (uintptr_t)top;
        w.ok_hi = (uintptr_t)(f + 1);
    }
    landed_common(f, lj, top, &w);
}

__asm__(
    ".text\n"
    ".p2align 4\n"
    ".globl __tally_unwound\n"
    ".type __tally_unwound,@function\n"
    "__tally_unwound:\n"
    ".cfi_startproc\n"
    TALLY_ENDBR
    "    xorl %esi, %esi\n"
    "    jmp .Ltally_landed_common\n"
    ".cfi_endproc\n"
    ".size __tally_unwound, .-__tally_unwound\n"

    ".p2align 4\n"
    ".globl __tally_longjmp_landed\n"
    ".type __tally_longjmp_landed,@function\n"
    "__tally_longjmp_landed:\n"
    ".cfi_startproc\n"
    TALLY_ENDBR
    "    testl %edi, %edi\n"
    "    jnz 1f\n"
    "    ret\n"
    "1:  movq %rsi, %rdi\n"
    "    movl $1, %esi\n"
    "    jmp .Ltally_landed_common\n"
    ".cfi_endproc\n"
    ".size __tally_longjmp_landed, .-__tally_longjmp_landed\n"

    /* rdi = f, esi = lj. Only caller-saved registers are used; no stack until the switch. */
    ".p2align 4\n"
    ".type tally__landed_entry,@function\n"
    "tally__landed_entry:\n"
    ".Ltally_landed_common:\n"
    ".cfi_startproc\n"
    "    movq __tally_top@gottpoff(%rip), %rax\n"
    "    movq %fs:(%rax), %rdx\n"              /* rdx = top */
    "    testq $7, %rdi\n"
    "    jnz .Ltally_plain\n"
    "    testq $7, %rdx\n"
    "    jnz .Ltally_plain\n"
    "    cmpq %rdi, %rdx\n"
    "    jae .Ltally_plain\n"                  /* top >= f (or NULL f): nothing above f */
    "    leaq 16(%rdx), %rax\n"
    "    cmpq %rsp, %rax\n"
    "    ja .Ltally_plain\n"                   /* a dead record must lie below sp */
    "    movq %rdi, %rax\n"
    "    subq %rdx, %rax\n"
    "    cmpq $" TALLY_STR(TALLY_MAX_SPAN) ", %rax\n"
    "    ja .Ltally_plain\n"
    "    cmpq $" TALLY_STR(TALLY_MIN_TOP) ", %rdx\n"
    "    jb .Ltally_plain\n"
    "    movq %rdi, %r9\n"
    "    orq %rsi, %r9\n"                      /* r9 = f | lj (f is 8-aligned) */
    "    leaq -" TALLY_STR(TALLY_SCRATCH_GAP) "(%rdx), %r8\n"
    "    andq $-4096, %r8\n"                   /* r8 = first chunk to probe */
    "2:  cmpq %rsp, %r8\n"
    "    jae 3f\n"
    "    movl $14, %eax\n"                     /* SYS_rt_sigprocmask */
    "    movl $-1, %edi\n"                     /* invalid `how` */
    "    movq %r8, %rsi\n"
    "    xorl %edx, %edx\n"
    "    movl $8, %r10d\n"
    "    syscall\n"
    "    cmpq $-22, %rax\n"                    /* -EINVAL: readable */
    "    jne 4f\n"
    "    addq $4096, %r8\n"
    "    jmp 2b\n"
    "4:  movq %r9, %rdi\n"                     /* not readable: no walk */
    "    andq $-8, %rdi\n"
    "    movl %r9d, %esi\n"
    "    andl $7, %esi\n"
    "    jmp .Ltally_plain\n"
    "3:  movq %r9, %rdi\n"
    "    andq $-8, %rdi\n"                     /* rdi = f */
    "    movl %r9d, %esi\n"
    "    andl $7, %esi\n"                      /* esi = lj */
    "    movq __tally_top@gottpoff(%rip), %rax\n"
    "    movq %fs:(%rax), %rdx\n"              /* rdx = top */
    "    leaq -" TALLY_STR(TALLY_GAP) "(%rdx), %rax\n"
    "    andq $-16, %rax\n"
    "    movq %rsp, %rcx\n"
    "    movq %rax, %rsp\n"                    /* switch below the lowest record */
    ".cfi_def_cfa %rcx, 8\n"
    "    pushq %rcx\n"
    ".cfi_escape 0x0f, 0x05, 0x77, 0x00, 0x06, 0x23, 0x08\n" /* CFA = *(rsp) + 8 */
    "    subq $8, %rsp\n"
    ".cfi_escape 0x0f, 0x05, 0x77, 0x08, 0x06, 0x23, 0x08\n" /* CFA = *(rsp + 8) + 8 */
    "    call tally__landed_switched\n"
    "    movq 8(%rsp), %rsp\n"
    ".cfi_def_cfa %rsp, 8\n"
    "    ret\n"
    ".Ltally_plain:\n"
    "    xorl %edx, %edx\n"
    "    jmp tally__landed_switched\n"
    ".cfi_endproc\n"
    ".size tally__landed_entry, .-tally__landed_entry\n");

#else /* portable fallback */

/* Best effort: this C code's own frame may overwrite records of discarded frames before they
 * are read (they lie in dead stack below the caller); validation keeps that from crashing. */
void __tally_unwound(struct tally_frame *f) {
    int saved_errno = errno;
    struct walker w = {(uintptr_t)__builtin_frame_address(0), (uintptr_t)(f + 1), 0};
    landed_common(f, 0, __tally_top, &w);
    errno = saved_errno;
}

void __tally_longjmp_landed(int32_t ret, struct tally_frame *f) {
    if (ret == 0)
        return;
    int saved_errno = errno;
    struct walker w = {(uintptr_t)__builtin_frame_address(0), (uintptr_t)(f + 1), 0};
    landed_common(f, 1, __tally_top, &w);
    errno = saved_errno;
}

#endif

/* ------------------------------------------------------------------------------------------ */
/* Writing the profile                                                                        */
/* ------------------------------------------------------------------------------------------ */

#define PATH_CAP 4096

/* Static state of the writer; used only under reg_lock (or after failing to take it). */
static struct {
    int fd;
    int err; /* errno of the first failure, 0 if none */
    uint64_t total;
    size_t n;
    unsigned char buf[8192];
    char path[PATH_CAP];
    char tmp[PATH_CAP + 32];
    char line[PATH_CAP + 256];
} out;

static int write_all(int fd, const void *p, size_t n) {
    const unsigned char *s = p;
    while (n) {
        ssize_t r = write(fd, s, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno ? errno : EIO;
        }
        if (r == 0)
            return EIO;
        s += r;
        n -= (size_t)r;
    }
    return 0;
}

static void out_flush(void) {
    if (!out.err && out.n)
        out.err = write_all(out.fd, out.buf, out.n);
    out.n = 0;
}

static void out_bytes(const void *p, uint64_t len) {
    if (out.err)
        return;
    out.total += len;
    if (len > sizeof out.buf - out.n) {
        out_flush();
        if (out.err)
            return;
        if (len >= sizeof out.buf) {
            if (len > SIZE_MAX) {
                out.err = EOVERFLOW;
                return;
            }
            out.err = write_all(out.fd, p, (size_t)len);
            return;
        }
    }
    memcpy(out.buf + out.n, p, (size_t)len);
    out.n += (size_t)len;
}

static void out_u32(uint32_t v) {
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    out_bytes(b, 4);
}

static void out_u64(uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    out_bytes(b, 8);
}

/* Home slots of table `t` that may hold a count: all of them once the runtime has claimed
 * one, else only slot 0 (path 0's home, the one path instrumented code can count in a slot the
 * runtime never gave out). Keeps the profile writer off the home tables of functions that
 * never ran. */
static uint64_t home_scan(const struct tally_path_table *t) {
    return !t->home ? 0 : t->home_claims ? TALLY_PATH_HOME_SLOTS : 1;
}

/* An upper bound of the path entries a module writes (out_path_entries pads up to it): per
 * table, its home slots in use, the overflow slots in use, and one loss entry. Cheaper than
 * counting the non-zero entries, which would walk every table twice. */
static uint64_t path_entries(const struct tally_module *m) {
    uint64_t n = 0;
    for (uint64_t i = 0; m->path_tables && i < m->num_path_tables; i++) {
        const struct tally_path_table *t = &m->path_tables[i];
        uint64_t home = t->home_claims + 1;
        n += (home < TALLY_PATH_HOME_SLOTS ? home : TALLY_PATH_HOME_SLOTS) + t->used + 1;
    }
    return n;
}

static void out_path_entries(const struct tally_module *m, uint64_t limit) {
    uint64_t n = 0;
    for (uint64_t i = 0; m->path_tables && i < m->num_path_tables; i++) {
        const struct tally_path_table *t = &m->path_tables[i];
        for (int pass = 0; pass < 2; pass++) {
            /* Overflow keys are path + 1 (0: empty), home keys the path (count 0: free). */
            const uint64_t *w = pass ? t->home : t->slots;
            uint64_t cap = pass ? home_scan(t) : t->capacity;
            for (uint64_t j = 0; j < cap && n < limit; j++) {
                uint64_t k = w[2 * j], v = w[2 * j + 1];
                if ((pass || k != 0) && v != 0) {
                    out_u32(t->function);
                    out_u32(0);
                    out_u64(pass ? k : k - 1);
                    out_u64(v);
                    n++;
                }
            }
        }
        if (t->lost && n < limit) {
            out_u32(t->function);
            out_u32(1);
            out_u64(0);
            out_u64(t->lost);
            n++;
        }
    }
    for (; n < limit; n++) { /* fewer than the bound: pad with empty losses */
        out_u32(0);
        out_u32(1);
        out_u64(0);
        out_u64(0);
    }
}

static void out_module(const struct tally_module *m) {
    static const unsigned char zeros[8];
    uint64_t entries = path_entries(m);
    out_bytes("TALLYMOD", 8);
    out_u64(m->hash);
    out_u64(m->meta_len);
    out_u64(m->num_counters);
    out_u64(entries);
    out_bytes(m->meta, m->meta_len);
    out_bytes(zeros, (8 - (m->meta_len & 7)) & 7);
    if (m->num_counters > UINT64_MAX / 8) {
        out.err = EOVERFLOW;
        return;
    }
    if (!TALLY_BIG_ENDIAN) {
        out_bytes(m->counters, m->num_counters * 8);
    } else {
        for (uint64_t i = 0; i < m->num_counters && !out.err; i++)
            out_u64(m->counters[i]);
    }
    out_path_entries(m, entries);
}

/* Builds an output path into dst: the value of environment variable `var` with %p and %%
 * expanded, or "<basename of the executable><suffix>". Returns 0 (ok), 1 (var=off) or an
 * errno. */
static int build_path_for(char *dst, size_t cap, const char *var, const char *suffix) {
    size_t n = 0;
    const char *env = getenv(var);
    if (env && *env) {
        if (strcmp(env, "off") == 0)
            return 1;
        for (const char *s = env; *s; s++) {
            if (s[0] == '%' && s[1] == 'p') {
                n = put_u64(dst, n, cap, (uint64_t)getpid());
                s++;
            } else if (s[0] == '%' && s[1] == '%') {
                n = put_str(dst, n, cap, "%");
                s++;
            } else {
                char c[2] = {*s, 0};
                n = put_str(dst, n, cap, c);
            }
            if (n + 1 >= cap)
                return ENAMETOOLONG;
        }
        return 0;
    }
    char exe[PATH_CAP];
    const char *base = 0;
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        static const char deleted[] = " (deleted)";
        size_t dl = sizeof deleted - 1;
        if ((size_t)len > dl && strcmp(exe + len - dl, deleted) == 0)
            exe[len - dl] = 0;
        const char *slash = strrchr(exe, '/');
        base = slash ? slash + 1 : exe;
    }
    if (!base || !*base)
        base = program_invocation_short_name;
    if (!base || !*base)
        base = "program";
    n = put_str(dst, n, cap, base);
    n = put_str(dst, n, cap, suffix);
    if (n + 1 >= cap)
        return ENAMETOOLONG;
    return 0;
}

/* Builds the profile path into out.path. Returns 0 (ok), 1 (TALLY_PROFILE=off) or an errno. */
static int build_path(void) {
    return build_path_for(out.path, sizeof out.path, "TALLY_PROFILE", ".tally");
}

static void report_failure(const char *path, int err) {
    size_t n = put_str(out.line, 0, sizeof out.line, "tally: cannot write profile ");
    n = put_str(out.line, n, sizeof out.line, path);
    n = put_str(out.line, n, sizeof out.line, ": ");
    n = put_str(out.line, n, sizeof out.line, strerror(err));
    if (n + 2 > sizeof out.line)
        n = sizeof out.line - 2;
    out.line[n++] = '\n';
    write_stderr(out.line, n);
}

/* Writes the profile. The caller holds reg_lock (or could not get it) and preserves errno. */
static void write_profile_locked(void) {
    int err = build_path();
    if (err == 1)
        return;
    if (err) {
        report_failure(out.path, err);
        return;
    }
    size_t n = put_str(out.tmp, 0, sizeof out.tmp, out.path);
    n = put_str(out.tmp, n, sizeof out.tmp, ".tmp.");
    n = put_u64(out.tmp, n, sizeof out.tmp, (uint64_t)getpid());
    (void)n;

    int fd;
    do {
        fd = open(out.tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        report_failure(out.path, errno);
        return;
    }
    out.fd = fd;
    out.err = 0;
    out.total = 0;
    out.n = 0;

    uint64_t count = 0;
    for (const struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); m;
         m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE))
        count++;

    out_bytes("TALLYPRF", 8);
    out_u32(2);
    out_u32(0);
    out_u64(count);
    out_u64((uint64_t)getpid());
    uint64_t written = 0;
    for (const struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE);
         m && written < count; m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE), written++)
        out_module(m);
    if (written != count && !out.err)
        out.err = EAGAIN; /* the list changed under us (only without the lock) */
    out_bytes("TALLYEND", 8);
    out_u64(out.total + 8);
    out_flush();

    err = out.err;
    if (close(fd) != 0 && !err && errno != EINTR)
        err = errno;
    if (!err && rename(out.tmp, out.path) != 0)
        err = errno;
    if (err) {
        (void)unlink(out.tmp);
        report_failure(out.path, err);
    }
}

void tally_write_profile(void) {
    int saved_errno = errno;
    trace_finish();
    /* Events modules: counter 0 receives the exiting thread's exact total. */
    for (struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); m;
         m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE))
        if ((m->flags & TALLY_MODULE_EVENTS) && m->counters && m->num_counters)
            m->counters[0] = tally_events();
    int locked = lock_registry(1);
    write_profile_locked();
    if (locked)
        unlock_registry();
    errno = saved_errno;
}

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

static void trace_record(uint64_t a, uint64_t b, uint64_t c) {
    int saved_errno = errno;
    while (__atomic_exchange_n(&trace.lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    if (trace.fd == 0) {
        int err = build_path_for(trace.path, sizeof trace.path, "TALLY_TRACE", ".trace");
        if (err) {
            trace.fd = -1;
        } else {
            int fd;
            do {
                fd = open(trace.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
            } while (fd < 0 && errno == EINTR);
            trace.fd = fd < 0 ? -1 : (fd == 0 ? dup(fd) : fd);
            if (trace.fd > 0) {
                memcpy(trace.buf, "TALLYTRC\x01\0\0\0\0\0\0\0", 16);
                trace.n = 16;
            } else {
                static const char msg[] = "tally: cannot open the trace file\n";
                write_stderr(msg, sizeof msg - 1);
            }
        }
    }
    if (trace.fd > 0) {
        if (trace.n + 24 > sizeof trace.buf)
            trace_flush_locked();
        uint64_t w[3] = {a, b, c};
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 8; k++)
                trace.buf[trace.n++] = (unsigned char)(w[i] >> (8 * k));
    }
    __atomic_store_n(&trace.lock, 0, __ATOMIC_RELEASE);
    errno = saved_errno;
}

static uint64_t module_hash_of(const uint64_t *counters) {
    for (const struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); m;
         m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE))
        if (m->counters == counters)
            return m->hash;
    return 0;
}

uint64_t __tally_trace_enter(const uint64_t *module_counters, uint32_t function) {
    uint64_t act = __atomic_add_fetch(&trace.next_act, 1, __ATOMIC_RELAXED);
    trace_record(act, (uint64_t)function, module_hash_of(module_counters));
    return act;
}

void __tally_trace_edge(uint64_t act, uint32_t edge) {
    trace_record(act, (1ull << 56) | edge, 0);
}

void __tally_trace_reentry(uint64_t act, uint32_t edge, int32_t ret) {
    if (ret != 0)
        __tally_trace_edge(act, edge);
}

static void trace_finish(void) {
    while (__atomic_exchange_n(&trace.lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    trace_flush_locked();
    __atomic_store_n(&trace.lock, 0, __ATOMIC_RELEASE);
}

static void exit_handler(void) {
    if (__atomic_exchange_n(&exit_done, 1, __ATOMIC_ACQ_REL))
        return;
    int saved_errno = errno;
    /* Every frame record still on this thread's list belongs to a frame that exit() abandons;
     * all of them lie above this function's frame. */
    struct walker w = {0, 0, 0};
    walk(__tally_top, (uintptr_t)__builtin_frame_address(0), 0, &w, 1);
    trace_finish();
    /* Events modules: counter 0 receives the exiting thread's exact total. */
    for (struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); m;
         m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE))
        if ((m->flags & TALLY_MODULE_EVENTS) && m->counters && m->num_counters)
            m->counters[0] = tally_events();
    int locked = lock_registry(1);
    write_profile_locked();
    if (locked)
        unlock_registry();
    errno = saved_errno;
}
