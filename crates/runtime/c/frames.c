/*
 * frames.c -- the shadow stack of frame records and the charging of early-exit counters of frames
 * abandoned by exit(), longjmp or C++ unwinding (Ball & Larus 1994, sec. 3.2, Fig. 7).
 */
#include "rt.h"

/* ------------------------------------------------------------------------------------------ */
/* The shadow stack                                                                           */
/* ------------------------------------------------------------------------------------------ */

__thread struct tally_frame *__tally_top __attribute__((tls_model("initial-exec"))) = 0;




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

/* The common part of __tally_unwound (lj = 0) and __tally_longjmp_landed (lj = 1, ret != 0).
 * `top` is the list head at entry, or NULL when the records above `f` must not be read. */
/* This copy's part of a landing in another image (a landing pad or a longjmp target whose
 * record is at `f`): this thread's records in this image that lie below `f` belong to frames
 * the unwinder or longjmp discarded. They are charged and leave the list, which then starts at
 * the first record at or above `f` (frames still live). An invalid record ends the walk and
 * empties the list (the frames above re-link it when they return: a pop restores `prev`). */
void cut_self(uintptr_t f) {
    struct tally_frame *r = __tally_top;
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
    __tally_top = r;
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
HIDDEN __attribute__((used)) void tally__landed_scratch(struct tally_frame *f, int lj,
                                                        struct tally_frame *top, uintptr_t sp);

/* This image's scratch stack for landings: while it is free (tally__scratch_lock 0), a landing
 * runs its C code there and touches no dead stack at all, so the records of every image's
 * discarded frames (cut_others) are read intact. Taken by an xchg in the entry; a landing
 * that finds it busy (another thread, or a signal handler landing inside a landing) takes the
 * switch below its own list's head. */
#define TALLY_SCRATCH_BYTES 65536
HIDDEN __attribute__((used, aligned(64))) unsigned char tally__scratch[TALLY_SCRATCH_BYTES];
HIDDEN __attribute__((used)) unsigned char tally__scratch_lock;

/* `sp` is the caller's stack pointer at the call: the records above `f` must lie below it
 * (dead stack), as the entry's own checks require on the other path. */
HIDDEN __attribute__((used)) void tally__landed_scratch(struct tally_frame *f, int lj,
                                                        struct tally_frame *top, uintptr_t sp) {
    struct walker w = {0, 0, 0}; /* nothing known readable: every record is probed */
    uintptr_t a = (uintptr_t)f, t = (uintptr_t)top;
    if ((a & 7) || (t & 7) || t >= a || t > sp - sizeof(struct tally_frame) ||
        a - t > TALLY_MAX_SPAN)
        top = 0; /* nothing above f is read */
    landed_common(f, lj, top, &w);
}

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
    "    jnz .Ltally_below\n"                  /* scratch stack busy */
    "    movq __tally_top@gottpoff(%rip), %rax\n"
    "    movq %fs:(%rax), %rdx\n"              /* rdx = top (validated in C) */
    "    leaq tally__scratch+" TALLY_STR(TALLY_SCRATCH_BYTES) "(%rip), %rax\n"
    "    movq %rsp, %rcx\n"                    /* rcx = sp, the 4th argument */
    "    movq %rax, %rsp\n"                    /* switch to the scratch stack */
    ".cfi_def_cfa %rcx, 8\n"
    "    pushq %rcx\n"
    ".cfi_escape 0x0f, 0x05, 0x77, 0x00, 0x06, 0x23, 0x08\n" /* CFA = *(rsp) + 8 */
    "    subq $8, %rsp\n"
    ".cfi_escape 0x0f, 0x05, 0x77, 0x08, 0x06, 0x23, 0x08\n" /* CFA = *(rsp + 8) + 8 */
    "    call tally__landed_scratch\n"
    "    movq 8(%rsp), %rsp\n"
    ".cfi_def_cfa %rsp, 8\n"
    "    movb $0, tally__scratch_lock(%rip)\n"  /* after leaving it */
    "    ret\n"
    ".Ltally_below:\n"
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
