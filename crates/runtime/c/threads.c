/*
 * threads.c -- threads still running when the process ends (exit, quick_exit, _exit, a fatal
 * signal): their active frames are charged as the ending thread's are. docs/design/processes.md, "Fatal
 * signals and threads at exit".
 *
 * A thread's frame list is thread-local (`__tally_top`, one per image), so each thread charges its
 * own: the ending thread lists /proc/self/task and sends every other thread a real-time signal
 * (tgkill) whose handler -- installed at that moment, every signal blocked while it runs,
 * SA_RESTART -- charges the thread's records in every live copy of the runtime (each copy's
 * `cut` with no bound: all of them, and the list emptied so they are charged once), acknowledges
 * and waits until the profile is written, then returns to what the thread was doing. The ending
 * thread waits a bounded time (2 s) for the acknowledgements. A thread that blocks the signal
 * (its SigBlk in /proc/self/task/<tid>/status; the signal is chosen among the real-time signals
 * the program leaves at SIG_DFL as the one the fewest threads block), whose mask cannot be
 * read, that does not answer in time, or that cannot be listed (no /proc; past 4096 threads)
 * stays uncharged: its functions are then inconsistent in the report.
 *
 * A snapshot (snapshot.c) stops the threads the same way, but each charges its records without
 * emptying its list, says whether it was interrupted in counted code (an image with a runtime
 * copy: inside_counted_code), and takes its charges back once the snapshot is written; a
 * thread that blocks the signal or does not answer makes the snapshot wait for a later try.
 *
 * Everything here is async-signal-safe (it runs in the fatal-signal handler): getdents64 on a
 * descriptor, tgkill, nanosleep, atomics.
 */
#include "rt.h"

enum { IDLE, STOPPING, HOLDING, WRITTEN };

/* IDLE until the end (or a snapshot); STOPPING while threads charge; HOLDING while the profile
 * is written; WRITTEN. */
static int phase;
static int acks;           /* threads that charged their frames */
static char charge_lock;   /* one thread charges at a time (the increments are plain) */
/* A snapshot's stop (snapshot.c), not the end: threads charge without emptying their lists,
 * say whether they were stopped in an image's code, and take their charges back at WRITTEN. */
static int snapping;
static int caught;         /* a stopped thread was running code of an image with a runtime */
static int undone;         /* threads that took their charges back */

#define MAX_THREADS 4096

static long tids[MAX_THREADS];
static uint64_t masks[MAX_THREADS];
static char answered[MAX_THREADS]; /* tids[i] charged in this stop (a second signal is late) */

static void pause_1ms(void) {
    struct timespec ts = {0, 1000000};
    (void)nanosleep(&ts, 0);
}

/* Whether `pc` is in the code of an image with a live copy of the runtime: instrumented code
 * or the runtime itself, where a frame may be between calls or a count half-stored. Unknown
 * counts as inside. */
int inside_counted_code(uintptr_t pc) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (!pc)
        return 1;
    for (const struct tally_instance *in = r ? r->live : &tally__self; in; in = in->next) {
        if (in->text_n <= 0)
            return 1;
        for (int i = 0; i < in->text_n && i < 8; i++)
            if (pc >= in->text_lo[i] && pc < in->text_hi[i])
                return 1;
    }
    return 0;
}

/* Whether a thread was stopped, by the signal now handled (`info`, `uc`), where each of its
 * instrumented frames is at a call: blocked in a system call. A thread running user code --
 * instrumented or not: memcpy, or malloc, which instrumented code calls as a function that
 * always returns, so with no early exit where the frame could be charged -- may have a frame
 * between two counted points. Blocked means: the kernel interrupted the call for this signal,
 * to restart it after the handler (the instruction at pc is the system call, its number in
 * the register again: one of the calls that wait) or to return EINTR from it (the system call
 * just before pc). With `info`, also a thread that sent itself the signal (raise, kill: the
 * system call just before pc; a running thread signalled by another is handled there too, at
 * the end of whatever system call it made next, so the stopped threads pass no `info`). Not
 * told apart: a call that waits inside one that always returns (malloc
 * waiting for its lock), docs/design/processes.md "Snapshots". x86-64 and AArch64; elsewhere
 * never. */
int stopped_in_syscall(const siginfo_t *info, void *uc) {
    uintptr_t pc = interrupted_pc(uc);
    if (!pc)
        return 0;
#if defined(__x86_64__)
    const mcontext_t *mc = &((ucontext_t *)uc)->uc_mcontext;
    long ret = (long)mc->gregs[REG_RAX];
    const unsigned char *at = (const unsigned char *)pc;
    int at_sys = at[0] == 0x0f && at[1] == 0x05;
    int after_sys = (pc & 4095) >= 2 && at[-2] == 0x0f && at[-1] == 0x05;
#elif defined(__aarch64__)
    const mcontext_t *mc = &((ucontext_t *)uc)->uc_mcontext;
    long ret = (long)mc->regs[0];
    long nr = (long)mc->regs[8];
    const uint32_t *at = (const uint32_t *)pc;
    int at_sys = (pc & 3) == 0 && at[0] == 0xd4000001u;
    int after_sys = (pc & 3) == 0 && (pc & 4095) >= 4 && at[-1] == 0xd4000001u;
#else
    (void)info;
    return 0;
#endif
#if defined(__x86_64__) || defined(__aarch64__)
    if (after_sys && ret == -EINTR)
        return 1;
    if (after_sys && info && info->si_pid == getpid() &&
        (info->si_code == SI_TKILL || info->si_code == SI_USER))
        return 1;
    if (!at_sys)
        return 0;
#if defined(__x86_64__)
    long nr = ret; /* restarting: the kernel put the call's number back */
#endif
    static const long waits[] = {
        SYS_read, SYS_write, SYS_readv, SYS_writev, SYS_pread64, SYS_pwrite64, SYS_futex,
        SYS_nanosleep, SYS_clock_nanosleep, SYS_restart_syscall, SYS_connect, SYS_accept,
        SYS_accept4, SYS_sendto, SYS_recvfrom, SYS_sendmsg, SYS_recvmsg, SYS_recvmmsg,
        SYS_sendmmsg, SYS_wait4, SYS_waitid, SYS_fcntl, SYS_flock, SYS_rt_sigtimedwait,
        SYS_rt_sigsuspend, SYS_pselect6, SYS_ppoll, SYS_epoll_pwait, SYS_semtimedop, SYS_msgrcv,
        SYS_msgsnd, SYS_openat,
#ifdef SYS_poll
        SYS_poll, SYS_select, SYS_pause, SYS_epoll_wait,
#endif
    };
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++)
        if (nr == waits[i])
            return 1;
    return 0;
#endif
}

/* This thread's index in tids[], or -1. */
static int my_index(void) {
    long self = syscall(SYS_gettid);
    for (int i = 0; i < MAX_THREADS && tids[i]; i++)
        if (tids[i] == self)
            return i;
    return -1;
}

/* Runs on each other thread. */
static void on_stop(int sig, siginfo_t *info, void *uc) {
    (void)sig;
    int saved_errno = errno;
    if (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != STOPPING || info->si_pid != getpid()) {
        errno = saved_errno;
        return; /* late (the profile is written) or not sent by the runtime */
    }
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    int snap = __atomic_load_n(&snapping, __ATOMIC_ACQUIRE), charged = 0;
    int me = snap ? my_index() : -1;
    if (snap && (me < 0 || answered[me])) {
        errno = saved_errno;
        return; /* not listed, or a second signal of this stop */
    }
    if (!spin_lock(&charge_lock, 1)) {
        errno = saved_errno;
        return;
    }
    if (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) == STOPPING) {
        if (snap) {
            answered[me] = 1;
            /* (Not `info`: this signal comes from the snapshot, not from the thread itself.) */
            if (inside_counted_code(interrupted_pc(uc)) || !stopped_in_syscall(0, uc))
                __atomic_store_n(&caught, 1, __ATOMIC_RELEASE);
            for (struct tally_instance *in = r ? r->live : &tally__self; in; in = in->next)
                in->snap_charge(1);
            charged = 1;
        } else if (r) {
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
    if (charged) { /* a snapshot's: the frames go on */
        spin_lock(&charge_lock, 0);
        for (struct tally_instance *in = r ? r->live : &tally__self; in; in = in->next)
            in->snap_charge(-1);
        __atomic_add_fetch(&undone, 1, __ATOMIC_ACQ_REL);
        spin_unlock(&charge_lock);
    }
    errno = saved_errno;
}

struct dirent64_head {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* The thread's blocked signals (SigBlk: in /proc/self/task/<tid>/status); all of them when
 * it cannot be read. */
static uint64_t blocked_of(long tid) {
    char path[64], buf[2048];
    size_t n = put_str(path, 0, sizeof path, "/proc/self/task/");
    n = put_u64(path, n, sizeof path, (uint64_t)tid);
    (void)put_str(path, n, sizeof path, "/status");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ~(uint64_t)0;
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = 0;
    const char *p = strstr(buf, "\nSigBlk:");
    if (!p)
        return ~(uint64_t)0;
    p += 8;
    while (*p == ' ' || *p == '\t')
        p++;
    uint64_t m = 0;
    int digits = 0;
    for (;; p++, digits++) {
        int d = *p >= '0' && *p <= '9'   ? *p - '0'
                : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                                         : -1;
        if (d < 0)
            break;
        m = m << 4 | (uint64_t)d;
    }
    return digits ? m : ~(uint64_t)0;
}

int is_stop_handler(const struct sigaction *k) {
    return (k->sa_flags & SA_SIGINFO) && k->sa_sigaction == on_stop;
}

/* A real-time signal the program leaves at SIG_DFL: nothing of the program's is sent on it
 * (it would end the process) except to a thread that blocks it (sigwait, signalfd), and such a
 * thread is never sent it here. Of those, the one the fewest of the `count` threads block,
 * highest first. Its action is on_stop from then on (it stays installed: a late signal must
 * find it). */
static int pick_signal(int count) {
    int best = 0, best_blockers = count + 1;
    for (int sig = SIGRTMAX; sig >= SIGRTMIN && sig <= 64; sig--) {
        struct sigaction k;
        if (sigaction(sig, 0, &k) != 0)
            continue;
        if (is_stop_handler(&k))
            return sig;
        if (k.sa_handler != SIG_DFL)
            continue;
        int blockers = 0;
        for (int i = 0; i < count; i++)
            blockers += (int)((masks[i] >> (sig - 1)) & 1);
        if (blockers < best_blockers) {
            best = sig;
            best_blockers = blockers;
        }
    }
    if (!best || best_blockers == count)
        return 0;
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = on_stop;
    a.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&a.sa_mask);
    return sigaction(best, &a, 0) == 0 ? best : 0;
}

/* Lists the other threads (up to MAX_THREADS) into tids[]; returns how many. */
static int list_threads(long self) {
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    static char buf[4096];
    int count = 0;
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
            if (*p || tid <= 0 || tid == self || count == MAX_THREADS)
                continue;
            tids[count++] = tid;
        }
    }
    close(fd);
    return count;
}

/* Sends `stop_sig` to each of the `count` listed threads that does not block it, waits (2 s at
 * most) for their answers, and lets late answers charge nothing; returns how many were sent it. */
static int send_and_hold(int count, int stop_sig) {
    pid_t pid = getpid();
    int sent = 0;
    __atomic_store_n(&phase, STOPPING, __ATOMIC_RELEASE);
    for (int i = 0; i < count; i++) {
        if ((masks[i] >> (stop_sig - 1)) & 1)
            continue; /* it blocks the signal (or its mask is unknown): left uncharged */
        if (syscall(SYS_tgkill, (long)pid, tids[i], (long)stop_sig) == 0)
            sent++;
    }
    for (int i = 0; i < 2000 && __atomic_load_n(&acks, __ATOMIC_ACQUIRE) < sent; i++)
        pause_1ms();
    spin_lock(&charge_lock, 1);
    __atomic_store_n(&phase, HOLDING, __ATOMIC_RELEASE);
    spin_unlock(&charge_lock);
    return sent;
}

/* Taken by the end for good, by a snapshot for its stop: one stop at a time. */
static char stop_lock;

/* Before the ending thread settles: every other thread charges its frames and waits. */
void stop_threads(void) {
    (void)spin_lock(&stop_lock, 1); /* a snapshot's stop ends within seconds */
    long self = syscall(SYS_gettid);
    int count = list_threads(self);
    if (!count)
        return;
    for (int i = 0; i < count; i++)
        masks[i] = blocked_of(tids[i]);
    int stop_sig = pick_signal(count);
    if (!stop_sig)
        return;
    (void)send_and_hold(count, stop_sig);
}

/* After the profile is written: the other threads go on. */
void release_threads(void) {
    __atomic_store_n(&phase, WRITTEN, __ATOMIC_RELEASE);
}

/* A snapshot's stop (snapshot.c): every other thread charges its frames as at the end, keeping
 * its list, and waits. Returns 1 when every thread did, none of them stopped in counted code
 * (where a frame may be between calls); 0 otherwise, and then also when the stop could not
 * start at all (the end is under way: release_snapshot_threads is not called then, -1). */
int stop_snapshot_threads(void) {
    if (__atomic_test_and_set(&stop_lock, __ATOMIC_ACQUIRE))
        return -1;
    long self = syscall(SYS_gettid);
    int count = list_threads(self);
    if (count < MAX_THREADS)
        tids[count] = 0;
    memset(answered, 0, sizeof answered);
    __atomic_store_n(&acks, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&undone, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&caught, 0, __ATOMIC_RELEASE);
    if (!count)
        return 1;
    if (count >= MAX_THREADS)
        return 0;
    for (int i = 0; i < count; i++)
        masks[i] = blocked_of(tids[i]);
    int stop_sig = pick_signal(count);
    if (!stop_sig)
        return 0;
    for (int i = 0; i < count; i++)
        if ((masks[i] >> (stop_sig - 1)) & 1)
            return 0; /* a thread that cannot be stopped */
    __atomic_store_n(&snapping, 1, __ATOMIC_RELEASE);
    int sent = send_and_hold(count, stop_sig);
    return sent == count && __atomic_load_n(&acks, __ATOMIC_ACQUIRE) == count &&
           !__atomic_load_n(&caught, __ATOMIC_ACQUIRE);
}

/* After a snapshot (written or not): the stopped threads take their charges back and go on. */
void release_snapshot_threads(void) {
    int charged = __atomic_load_n(&acks, __ATOMIC_ACQUIRE);
    __atomic_store_n(&phase, WRITTEN, __ATOMIC_RELEASE);
    for (int i = 0; i < 2000 && __atomic_load_n(&undone, __ATOMIC_ACQUIRE) < charged; i++)
        pause_1ms();
    __atomic_store_n(&snapping, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&phase, IDLE, __ATOMIC_RELEASE);
    __atomic_clear(&stop_lock, __ATOMIC_RELEASE);
}
