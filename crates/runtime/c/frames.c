/*
 * frames.c -- the shadow stack of frame records and the charging of early-exit counters of frames
 * abandoned by exit(), longjmp or C++ unwinding (Ball & Larus 1994, sec. 3.2, Fig. 7).
 */
#include "rt.h"

/* ------------------------------------------------------------------------------------------ */
/* The shadow stack                                                                           */
/* ------------------------------------------------------------------------------------------ */

__thread struct tally_frame *__tally_top TALLY_TLS_MODEL = 0;

#ifdef TALLY_DYNAMIC_TLS
struct tls_find {
    uintptr_t addr;
    void *data;
};

static int tls_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct tls_find *f = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && f->addr >= lo && f->addr - lo < ph->p_memsz) {
            f->data = info->dlpi_tls_data;
            return 1;
        }
    }
    return 0;
}

/* The calling thread's block of this image's thread-locals, or NULL (see rt.h). */
static char *tls_block_soft(void) {
    struct tls_find f = {(uintptr_t)&tls_cb, 0};
    int saved_errno = errno;
    (void)dl_iterate_phdr(tls_cb, &f);
    errno = saved_errno;
    return f.data;
}

static intptr_t top_off, ev_left_off, ev_limit_off;
static int tls_offsets; /* 1: the offsets above are known */

void tls_soft_init(void) {
    if (__atomic_load_n(&tls_offsets, __ATOMIC_ACQUIRE))
        return;
    char *top = (char *)&__tally_top; /* allocates this thread's block: the next call finds it */
    char *left = (char *)&__tally_ev_left, *limit = (char *)&__tally_ev_limit;
    __asm__ volatile("" : : "r"(top), "r"(left), "r"(limit) : "memory"); /* before the walk */
    char *b = tls_block_soft();
    if (!b)
        return;
    top_off = top - b;
    ev_left_off = left - b;
    ev_limit_off = limit - b;
    __atomic_store_n(&tls_offsets, 1, __ATOMIC_RELEASE);
}

struct tally_frame **top_slot_soft(void) {
    char *b = __atomic_load_n(&tls_offsets, __ATOMIC_ACQUIRE) ? tls_block_soft() : 0;
    return b ? (struct tally_frame **)(void *)(b + top_off) : 0;
}

uint64_t events_total_soft(void) {
    char *b = __atomic_load_n(&tls_offsets, __ATOMIC_ACQUIRE) ? tls_block_soft() : 0;
    if (!b)
        return 0;
    return (uint64_t)(*(int64_t *)(void *)(b + ev_limit_off) -
                      *(int64_t *)(void *)(b + ev_left_off));
}
#else
void tls_soft_init(void) {}

struct tally_frame **top_slot_soft(void) {
    return &__tally_top;
}

uint64_t events_total_soft(void) {
    return tally_events();
}
#endif




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

/* Whether the path site a (stale or corrupt) record names can be read: its table is checked
 * only after that (a stale record's odd site may point anywhere). */
static int path_site_readable(const struct tally_path_site *ps) {
    uintptr_t p = (uintptr_t)ps, q = p + sizeof *ps - 1;
    return ps && q > p && probe_chunk(p & ~(CHUNK - 1)) && probe_chunk(q & ~(CHUNK - 1));
}

/* Charges a frame record's site: a counter, or (low bit set) a hashed path. Invalid sites are
 * passed over. */
static void charge_site(uint64_t *site) {
    uintptr_t a = (uintptr_t)site;
    if (a & TALLY_SITE_PATH_TAG) {
        const struct tally_path_site *ps =
            (const struct tally_path_site *)(a & ~(uintptr_t)TALLY_SITE_PATH_TAG);
        if ((a & 6) == 0 && path_site_readable(ps) && is_path_table(ps->table))
            count_path(ps->table, ps->path);
    } else if (site != TALLY_NO_SITE && is_counter(site)) {
        /* Atomic: other threads may be incrementing it (atomic builds lose nothing here). */
        __atomic_fetch_add(site, 1, __ATOMIC_RELAXED);
    }
}



/* Takes back a charge_site (after a failed exec, exec.c). */
static void uncharge_site(uint64_t *site) {
    uintptr_t a = (uintptr_t)site;
    if (a & TALLY_SITE_PATH_TAG) {
        const struct tally_path_site *ps =
            (const struct tally_path_site *)(a & ~(uintptr_t)TALLY_SITE_PATH_TAG);
        if ((a & 6) == 0 && path_site_readable(ps) && is_path_table(ps->table))
            uncount_path(ps->table, ps->path);
    } else if (site != TALLY_NO_SITE && is_counter(site)) {
        __atomic_fetch_sub(site, 1, __ATOMIC_RELAXED);
    }
}

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
int walk(struct tally_frame *r, uintptr_t above, const struct tally_frame *end,
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
        if (charge > 0)
            charge_site(r->site);
        else if (charge < 0)
            uncharge_site(r->site);
        above = a;
        r = prev;
    }
}

/* struct tally_instance's snap_charge (snapshot.c): this thread's records in this image charged
 * (dir 1) or taken back (dir -1), as at the end but the list left as it is. From a signal
 * handler: the thread-local is found the async-signal-safe way. */
void snap_charge_self(int dir) {
    struct tally_frame **top = top_slot_soft();
    if (!top)
        return;
    struct walker w = {0, 0, 0};
    walk(*top, 0, 0, &w, dir);
}

/* The common part of __tally_unwound (lj = 0) and __tally_longjmp_landed (lj = 1, ret != 0).
 * `top` is the list head at entry, or NULL when the records above `f` must not be read. */
/* This copy's part of a landing in another image (a landing pad or a longjmp target whose
 * record is at `f`): this thread's records in this image that lie below `f` belong to frames
 * the unwinder or longjmp discarded. They are charged and leave the list, which then starts at
 * the first record at or above `f` (frames still live). An invalid record ends the walk and
 * empties the list (the frames above re-link it when they return: a pop restores `prev`). */
void cut_self(uintptr_t f) {
    /* UINTPTR_MAX: every record, from the stop signal's handler (threads.c). */
    struct tally_frame **slot = f == UINTPTR_MAX ? top_slot_soft() : &__tally_top;
    if (!slot)
        return;
    struct tally_frame *r = *slot;
    struct walker w = {0, 0, 0};
    uintptr_t above = 0;
    for (unsigned n = 0; r && (uintptr_t)r < f; n++) {
        uintptr_t a = (uintptr_t)r;
        if (n >= WALK_CAP || a <= above || (a & 7) != 0 || !record_readable(&w, a)) {
            r = 0;
            break;
        }
        struct tally_frame *prev = r->prev;
        charge_site(r->site);
        above = a;
        r = prev;
    }
    *slot = r;
}

/* Frames of other images discarded by a landing at `f` (exceptions and longjmp cross library
 * boundaries): every other live copy cuts its own list. */
void cut_others(uintptr_t f) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (!r || !r->live || (r->live == &tally__self && !tally__self.next))
        return;
    if (!spin_lock(&r->lock, 1))
        return;
    for (struct tally_instance *in = r->live; in; in = in->next)
        if (in != &tally__self)
            in->cut(f);
    spin_unlock(&r->lock);
}

static void landed_common(struct tally_frame *f, int lj, struct tally_frame *top, struct walker *w) {
    int saved_errno = errno;
    if (top && top != f && walk(top, 0, f, w, 0))
        walk(top, 0, f, w, 1);
    if (lj && f && ((uintptr_t)f & 7) == 0) {
        charge_site(f->site);
    }
    __tally_top = f;
    if (f)
        cut_others((uintptr_t)f);
    errno = saved_errno;
}

#if defined(__x86_64__) && defined(__linux__)

/*
 * On entry to __tally_unwound / __tally_longjmp_landed the records to charge belong to frames
 * that are already gone: they sit in dead stack memory *below* the caller's stack pointer,
 * exactly where this function's own frame would go. So the entry points are written in
 * assembly, touch no thread-local and use no stack before they have switched to another one:
 * the image's scratch stack (64 KiB in .bss, taken with an xchg), or, when it is busy (another
 * thread, or a signal handler landing inside a landing), a fresh anonymous mapping (mmap and
 * munmap by `syscall`, no stack needed). There tally__landed_scratch(f, lj, sp) reads the list
 * head and validates every record (below sp, above the head, readable). If the mapping fails
 * it runs on the current stack without reading the records above `f` (tally__landed_plain).
 * Reading no thread-local here is what lets a shared object's copy use general-dynamic TLS
 * (TALLY_TLS_MODEL): its address may take a call to __tls_get_addr.
 * (Remaining window: a signal delivered between the landing and the switch builds its frame
 * below sp and may overwrite such records; validation then stops the walk, no crash.)
 */

#define TALLY_STR2(x) #x
#define TALLY_STR(x) TALLY_STR2(x)
#define TALLY_MAX_SPAN 0x10000000 /* 256 MiB: records farther below f are not walked */

#if defined(__CET__) && (__CET__ & 1)
#define TALLY_ENDBR "endbr64\n"
#else
#define TALLY_ENDBR ""
#endif

HIDDEN __attribute__((used)) void tally__landed_scratch(struct tally_frame *f, int lj,
                                                        uintptr_t sp);
HIDDEN __attribute__((used)) void tally__landed_plain(struct tally_frame *f, int lj);

/* This image's scratch stack for landings: while it is free (tally__scratch_lock 0), a landing
 * runs its C code there and touches no dead stack at all, so the records of every image's
 * discarded frames (cut_others) are read intact. Taken by an xchg in the entry; a landing
 * that finds it busy maps a stack of the same size for the time of the landing. */
#define TALLY_SCRATCH_BYTES 65536
HIDDEN __attribute__((used, aligned(64))) unsigned char tally__scratch[TALLY_SCRATCH_BYTES];
HIDDEN __attribute__((used)) unsigned char tally__scratch_lock;

/* `sp` is the caller's stack pointer at the call: the records above `f` must lie below it
 * (dead stack) and above the head; every one is probed before it is read. */
HIDDEN __attribute__((used)) void tally__landed_scratch(struct tally_frame *f, int lj,
                                                        uintptr_t sp) {
    struct walker w = {0, 0, 0}; /* nothing known readable: every record is probed */
    struct tally_frame *top = __tally_top;
    uintptr_t a = (uintptr_t)f, t = (uintptr_t)top;
    if ((a & 7) || (t & 7) || t >= a || t > sp - sizeof(struct tally_frame) ||
        a - t > TALLY_MAX_SPAN)
        top = 0; /* nothing above f is read */
    landed_common(f, lj, top, &w);
}

/* No stack could be had: nothing above `f` is read (its frame may have overwritten them). */
HIDDEN __attribute__((used)) void tally__landed_plain(struct tally_frame *f, int lj) {
    struct walker w = {0, 0, 0};
    landed_common(f, lj, 0, &w);
}

__asm__(
    ".text\n"
    ".p2align 4\n"
    ".globl __tally_unwound\n"
    ".hidden __tally_unwound\n"
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
    ".hidden __tally_longjmp_landed\n"
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
    "    movl $1, %eax\n"
    "    xchgb %al, tally__scratch_lock(%rip)\n"
    "    testb %al, %al\n"
    "    jnz .Ltally_map\n"                    /* scratch stack busy */
    "    leaq tally__scratch+" TALLY_STR(TALLY_SCRATCH_BYTES) "(%rip), %rax\n"
    "    movq %rsp, %rdx\n"                    /* rdx = sp, the 3rd argument */
    "    movq %rax, %rsp\n"                    /* switch to the scratch stack */
    ".cfi_def_cfa %rdx, 8\n"
    "    pushq %rdx\n"
    ".cfi_escape 0x0f, 0x05, 0x77, 0x00, 0x06, 0x23, 0x08\n" /* CFA = *(rsp) + 8 */
    "    subq $8, %rsp\n"
    ".cfi_escape 0x0f, 0x05, 0x77, 0x08, 0x06, 0x23, 0x08\n" /* CFA = *(rsp + 8) + 8 */
    "    call tally__landed_scratch\n"
    "    movq 8(%rsp), %rsp\n"
    ".cfi_def_cfa %rsp, 8\n"
    "    movb $0, tally__scratch_lock(%rip)\n"  /* after leaving it */
    "    ret\n"
    ".Ltally_map:\n"
    "    movq %rdi, %xmm0\n"                   /* f and lj survive the syscall in xmm0/xmm1 */
    "    movq %rsi, %xmm1\n"
    "    movl $9, %eax\n"                      /* SYS_mmap */
    "    xorl %edi, %edi\n"
    "    movl $" TALLY_STR(TALLY_SCRATCH_BYTES) ", %esi\n"
    "    movl $3, %edx\n"                      /* PROT_READ | PROT_WRITE */
    "    movl $0x22, %r10d\n"                  /* MAP_PRIVATE | MAP_ANONYMOUS */
    "    movq $-1, %r8\n"
    "    xorl %r9d, %r9d\n"
    "    syscall\n"
    "    movq %xmm0, %rdi\n"
    "    movq %xmm1, %rsi\n"
    "    cmpq $-4096, %rax\n"
    "    ja .Ltally_plain\n"                   /* -errno: no stack to switch to */
    "    leaq " TALLY_STR(TALLY_SCRATCH_BYTES) "(%rax), %rcx\n"
    "    movq %rsp, %rdx\n"                    /* rdx = sp, the 3rd argument */
    "    movq %rcx, %rsp\n"                    /* switch to the mapped stack */
    ".cfi_def_cfa %rdx, 8\n"
    "    pushq %rdx\n"
    ".cfi_escape 0x0f, 0x05, 0x77, 0x00, 0x06, 0x23, 0x08\n" /* CFA = *(rsp) + 8 */
    "    pushq %rax\n"                         /* the mapping, to unmap */
    ".cfi_escape 0x0f, 0x05, 0x77, 0x08, 0x06, 0x23, 0x08\n" /* CFA = *(rsp + 8) + 8 */
    "    call tally__landed_scratch\n"
    "    movq (%rsp), %rdi\n"
    "    movq 8(%rsp), %rsp\n"                 /* back on the caller's stack */
    ".cfi_def_cfa %rsp, 8\n"
    "    movl $11, %eax\n"                     /* SYS_munmap */
    "    movl $" TALLY_STR(TALLY_SCRATCH_BYTES) ", %esi\n"
    "    syscall\n"
    "    ret\n"
    ".Ltally_plain:\n"
    "    jmp tally__landed_plain\n"
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
