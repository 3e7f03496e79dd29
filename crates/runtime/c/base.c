/*
 * base.c -- small helpers shared by every file: formatting into fixed buffers, stderr, spin locks.
 */
#include "rt.h"

/* ------------------------------------------------------------------------------------------ */
/* Small helpers (no stdio: they may run at exit, in odd states)                              */
/* ------------------------------------------------------------------------------------------ */

size_t put_str(char *dst, size_t pos, size_t cap, const char *s) {
    while (*s && pos + 1 < cap)
        dst[pos++] = *s++;
    dst[pos < cap ? pos : cap - 1] = 0;
    return pos;
}

size_t put_u64(char *dst, size_t pos, size_t cap, uint64_t v) {
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

void write_stderr(const char *s, size_t n) {
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


void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Takes the registry lock. With `bounded`, gives up after a while (returns 0) rather than
 * deadlock, e.g. when exit() is called from a signal handler that interrupted a registration. */
int spin_lock(char *lock, int bounded) {
    unsigned spins = 0;
    while (__atomic_test_and_set(lock, __ATOMIC_ACQUIRE)) {
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

void spin_unlock(char *lock) {
    __atomic_clear(lock, __ATOMIC_RELEASE);
}

static __thread uint32_t tid_cache TALLY_TLS_MODEL;

uint32_t thread_id(void) {
    uint32_t me = tid_cache;
    if (!me) {
        me = (uint32_t)syscall(SYS_gettid);
        tid_cache = me;
    }
    return me;
}

void thread_id_forget(void) {
    tid_cache = 0;
}

int owner_lock(uint32_t *word, int bounded) {
    uint32_t me = thread_id(), cur = 0;
    for (unsigned i = 0;
         !__atomic_compare_exchange_n(word, &cur, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
         i++, cur = 0) {
        if (cur == me || (bounded && i > 100000))
            return 0;
        sched_yield();
    }
    return 1;
}

int owner_lock_mine(const uint32_t *word) {
    return __atomic_load_n(word, __ATOMIC_ACQUIRE) == thread_id();
}

void owner_unlock(uint32_t *word) {
    __atomic_store_n(word, 0, __ATOMIC_RELEASE);
}

int each_note(const struct dl_phdr_info *info, int (*fn)(const struct note *n, void *arg),
              void *arg) {
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_memsz;
        while (p + 12 <= end) {
            struct note n;
            memcpy(&n.namesz, p, 4);
            memcpy(&n.descsz, p + 4, 4);
            memcpy(&n.type, p + 8, 4);
            n.name = p + 12;
            n.desc = n.name + ((n.namesz + 3) & ~3u);
            if (n.desc > end || n.desc + ((n.descsz + 3) & ~3u) > end)
                break;
            if (fn(&n, arg))
                return 1;
            p = n.desc + ((n.descsz + 3) & ~3u);
        }
    }
    return 0;
}
