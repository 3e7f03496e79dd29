/*
 * threads.c -- threads still running when the process ends (exit, quick_exit, _exit, a fatal
 * signal): their active frames are charged as the ending thread's are. ARCHITECTURE.md, "Fatal
 * signals and threads at exit".
 *
 * A thread's frame list is thread-local (`__tally_top`, one per image), so each thread charges its
 * own: the ending thread lists /proc/self/task and sends every other thread a real-time signal
 * (tgkill) whose handler -- installed at that moment, every signal blocked while it runs,
 * SA_RESTART -- charges the thread's records in every live copy of the runtime (each copy's
 * `cut` with no bound: all of them, and the list emptied so they are charged once), acknowledges
 * and waits until the profile is written, then returns to what the thread was doing. The ending
 * thread waits a bounded time for the acknowledgements: a thread that blocks the signal, or
 * that cannot be listed (no /proc), stays uncharged.
 *
 * Everything here is async-signal-safe (it runs in the fatal-signal handler): getdents64 on a
 * descriptor, tgkill, nanosleep, atomics.
 */
#include "rt.h"

enum { IDLE, STOPPING, HOLDING, WRITTEN };

/* IDLE until the end; STOPPING while threads charge; HOLDING while the profile is written;
 * WRITTEN. */
static int phase;
static int acks;           /* threads that charged their frames */
static char charge_lock;   /* one thread charges at a time (the increments are plain) */
static int stop_sig;       /* the signal used, 0 if none */

static void pause_1ms(void) {
    struct timespec ts = {0, 1000000};
    (void)nanosleep(&ts, 0);
}

/* Runs on each other thread. */
static void on_stop(int sig, siginfo_t *info, void *uc) {
    (void)sig;
    (void)uc;
    int saved_errno = errno;
    if (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != STOPPING || info->si_pid != getpid()) {
        errno = saved_errno;
        return; /* late (the profile is written) or not sent by the runtime */
    }
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (!spin_lock(&charge_lock, 1)) {
        errno = saved_errno;
        return;
    }
    if (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) == STOPPING) {
        if (r) {
            for (struct tally_instance *in = r->live; in; in = in->next)
                in->cut(UINTPTR_MAX);
        } else {
            cut_self(UINTPTR_MAX);
        }
        __atomic_add_fetch(&acks, 1, __ATOMIC_ACQ_REL);
    }
    spin_unlock(&charge_lock);
    /* Held until the profile is written (bounded: 10 s), so nothing it does after is counted. */
    for (int i = 0; i < 10000 && __atomic_load_n(&phase, __ATOMIC_ACQUIRE) != WRITTEN; i++)
        pause_1ms();
    errno = saved_errno;
}

/* A real-time signal the program leaves at SIG_DFL (so nothing of the program's is sent on
 * it: with SIG_DFL it would end the process), highest first; its action is on_stop from now on
 * (it stays installed: a thread that had it blocked may take it after the end). */
static int pick_signal(void) {
    for (int sig = SIGRTMAX; sig >= SIGRTMIN; sig--) {
        struct sigaction k;
        if (sigaction(sig, 0, &k) != 0)
            continue;
        if (k.sa_flags & SA_SIGINFO) {
            if (k.sa_sigaction == on_stop)
                return sig;
            continue;
        }
        if (k.sa_handler != SIG_DFL)
            continue;
        struct sigaction a;
        memset(&a, 0, sizeof a);
        a.sa_sigaction = on_stop;
        a.sa_flags = SA_SIGINFO | SA_RESTART;
        sigfillset(&a.sa_mask);
        if (sigaction(sig, &a, 0) == 0)
            return sig;
    }
    return 0;
}

struct dirent64_head {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* Before the ending thread settles: every other thread charges its frames and waits. */
void stop_threads(void) {
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    long self = syscall(SYS_gettid);
    pid_t pid = getpid();
    int sent = 0;
    static char buf[4096];
    __atomic_store_n(&phase, STOPPING, __ATOMIC_RELEASE);
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (long pos = 0; pos + (long)sizeof(struct dirent64_head) <= n;) {
            struct dirent64_head *d = (struct dirent64_head *)(buf + pos);
            if (d->reclen == 0 || pos + d->reclen > n)
                break;
            pos += d->reclen;
            long tid = 0;
            const char *p = d->name;
            for (; *p >= '0' && *p <= '9' && tid < (1L << 40); p++)
                tid = tid * 10 + (*p - '0');
            if (*p || tid <= 0 || tid == self)
                continue;
            if (!stop_sig && !(stop_sig = pick_signal()))
                break;
            if (syscall(SYS_tgkill, (long)pid, tid, (long)stop_sig) == 0)
                sent++;
        }
    }
    close(fd);
    /* Bounded: 2 s for every thread to answer (one that blocks the signal never does). */
    for (int i = 0; i < 2000 && __atomic_load_n(&acks, __ATOMIC_ACQUIRE) < sent; i++)
        pause_1ms();
    /* Late answers charge nothing from here on. */
    spin_lock(&charge_lock, 1);
    __atomic_store_n(&phase, HOLDING, __ATOMIC_RELEASE);
    spin_unlock(&charge_lock);
}

/* After the profile is written: the other threads go on. */
void release_threads(void) {
    __atomic_store_n(&phase, WRITTEN, __ATOMIC_RELEASE);
}
