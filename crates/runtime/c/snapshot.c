/*
 * snapshot.c -- snapshots of a long-running process (docs/design/processes.md, "Snapshots"):
 * with TALLY_SNAPSHOT_INTERVAL=<seconds> and/or TALLY_SNAPSHOT_SIGNAL=<signal>, the process
 * writes, every interval and at each such signal, the counts since its previous snapshot as a
 * profile of its own ("<profile>.s<N>.tally"), and at its end the counts since the last one
 * (the usual file). The parts add up, counter by counter, to the profile the process would
 * have written without snapshots.
 *
 * Each part is exact, as the profile written at an end is: every thread is stopped as at the
 * end (threads.c) and its active frames are charged at their call sites (Ball & Larus 1994,
 * sec. 3.2), but the charges are taken back once the part is written, so the frames go on. A
 * part is thus the difference of two "as if the process ended here" profiles: its early-exit
 * counts are the change in the number of frames waiting at each call (negative when more
 * waited at the start), which the header flag TALLY_PROFILE_DELTA tells readers; every other
 * count is the number of times it happened between the two snapshots. Write, zero the
 * counters, take the charges back: the counters then hold minus the charges, and the next part
 * is exactly the difference.
 *
 * A snapshot is taken only where it can be exact: every thread must be stopped blocked in a
 * system call (threads.c stopped_in_syscall: then each of its frames is at a call; one running
 * code, instrumented or not, may have a frame between two counted points), and answer. The
 * thread the signal interrupted is looked at first: the others are stopped only when it is
 * blocked (a running thread signalled is handled at its next system call, where it may wait).
 * A try that fails is repeated about every millisecond, after 100 tries every 10 ms (one
 * stderr line once a second of tries failed); the counts stay in the counters for the next
 * part. A part that cannot be written (reported in one line) ends the snapshots: the counts
 * go to the end's profile. The timer is a POSIX timer on a
 * real-time signal the program leaves at SIG_DFL; its handler takes the snapshot on the thread
 * it interrupts.
 *
 * Not supported (one line, no snapshots): modules not TALLY_MODULE_DIFFABLE (modes other than
 * edge and edges-naive), continuous mode and merged profiles (%m).
 */
#include "rt.h"

int snap_signal;

static int tick_sig;          /* the timer's signal, 0 if none */
static timer_t timer;
static int have_timer;
static uint64_t interval_ns;  /* 0: on the signal only */
static unsigned failures;     /* tries in a row that could not be exact */
static int off;               /* set once snapshots cannot be taken */
static char taking;           /* one snapshot at a time */

/* "tally: <what>: <reason>\n" on stderr. */
static void snap_report(const char *what, const char *reason) {
    char line[512];
    size_t n = put_str(line, 0, sizeof line, "tally: ");
    n = put_str(line, n, sizeof line, what);
    n = put_str(line, n, sizeof line, ": ");
    n = put_str(line, n, sizeof line, reason);
    if (n + 2 > sizeof line)
        n = sizeof line - 2;
    line[n++] = '\n';
    write_stderr(line, n);
}

/* TALLY_SNAPSHOT_SIGNAL: a name (HUP, USR1, SIGUSR2, ...) or a number; 0 if not a signal. */
static int parse_signal(const char *s) {
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
                 {"USR2", SIGUSR2}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM},
                 {"CONT", SIGCONT}, {"WINCH", SIGWINCH}, {"URG", SIGURG}, {"IO", SIGIO},
                 {"PWR", SIGPWR}};
    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0)
            return names[i].sig;
    int n = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || n > 64)
            return 0;
        n = n * 10 + (*p - '0');
    }
    return n > 0 && n <= SIGRTMAX && n != SIGKILL && n != SIGSTOP ? n : 0;
}

/* TALLY_SNAPSHOT_INTERVAL: seconds, with up to 9 decimals; 0 if not a positive number. */
static uint64_t parse_interval(const char *s) {
    uint64_t sec = 0, frac = 0, scale = 1000000000ull;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (sec > 1000000000ull)
            return 0;
        sec = sec * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(*p - '0') * scale;
            }
    if (*p || p == s)
        return 0;
    return sec * 1000000000ull + frac;
}

/* Monotonic time in nanoseconds. */
static uint64_t now_mono_ns(void) {
    struct timespec ts = {0, 0};
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Arms the timer for the next try: the interval after a snapshot, a short wait after a try
 * that could not be exact. */
static void arm(int ok) {
    static uint64_t deferred_since; /* when the first of the failed tries in a row was */
    static int told;                /* whether this deferral was reported */
    if (!have_timer)
        return;
    uint64_t ns;
    if (ok) {
        failures = 0;
        told = 0;
        ns = interval_ns;
    } else {
        uint64_t now = now_mono_ns();
        if (!failures++)
            deferred_since = now;
        /* About every millisecond for the first 100 tries, then every 10 ms (at most the
         * interval), each wait drawn from [w/2, 3w/2): a thread that sleeps as often as the
         * tries come (a loop around a 1 ms nanosleep) would otherwise be found awake, between
         * its sleep's end and its next one, by every try (seen on a loaded machine). */
        uint64_t cap = interval_ns && interval_ns < 10000000 ? interval_ns : 10000000;
        uint64_t w = failures <= 100 ? 1000000 : cap;
        ns = w / 2 + (uint64_t)((failures * 2654435761u) % 1024u) * w / 1024;
        if (!told && now - deferred_since >= 1000000000ull) {
            told = 1;
            snap_report("snapshot deferred",
                        "tries for a second found a thread running (a snapshot waits until "
                        "every thread is blocked in a system call)");
        }
    }
    if (!ns)
        return;
    struct itimerspec it;
    memset(&it, 0, sizeof it);
    it.it_value.tv_sec = (time_t)(ns / 1000000000ull);
    it.it_value.tv_nsec = (long)(ns % 1000000000ull);
    (void)timer_settime(timer, 0, &it, 0);
}

/* Whether every module counts in edge counters (TALLY_MODULE_DIFFABLE), and not in the file
 * (continuous mode). */
static int supported_locked(const struct tally_registry *r) {
    if (r->cont)
        return 0;
    for (const struct tally_instance *in = r->live; in; in = in->next)
        for (const struct tally_module *m = __atomic_load_n(in->modules, __ATOMIC_ACQUIRE); m;
             m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE))
            if (!(m->flags & TALLY_MODULE_DIFFABLE) || m->num_path_tables)
                return 0;
    return 1;
}

/* Writes the part and zeroes the counters; returns whether it was written. */
static int write_part_locked(struct tally_registry *r) {
    struct timespec ts = {0, 0};
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    struct tally_parts *s = &r->parts;
    s->now_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    __atomic_store_n(&s->writing, s->seq + 1, __ATOMIC_RELEASE);
    int err = write_profile_locked();
    __atomic_store_n(&s->writing, 0, __ATOMIC_RELEASE);
    if (err) {
        /* Reported there (or TALLY_PROFILE=off, or %m: a merged profile has no parts): no more
         * snapshots, and the counts stay for the end's profile. */
        off = 1;
        return 0;
    }
    s->seq++;
    s->from_ns = s->now_ns;
    reset_locked(r);
    return 1;
}

/* Takes a snapshot on this thread, stopped where `info` and `uc` say. */
static void take(const siginfo_t *info, void *uc) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (!r || off || !own_process() || __atomic_load_n(&r->exit_done, __ATOMIC_ACQUIRE))
        return;
    if (__atomic_test_and_set(&taking, __ATOMIC_ACQUIRE))
        return; /* another thread is taking one (it arms the timer) */
    int ok = 0;
    /* The registry lock is only tried: this handler may have interrupted its holder. */
    int here = !inside_counted_code(interrupted_pc(uc)) && stopped_in_syscall(info, uc);
    if (here && !__atomic_test_and_set(&r->lock, __ATOMIC_ACQUIRE)) {
        if (!supported_locked(r)) {
            off = 1;
            snap_report("no snapshots", "they need edge counters (modes edge and edges-naive, "
                                        "not continuous mode)");
        } else {
            int stopped = stop_snapshot_threads();
            if (stopped >= 0) {
                for (struct tally_instance *in = r->live; in; in = in->next)
                    in->snap_charge(1);
                if (stopped == 1)
                    ok = write_part_locked(r);
                for (struct tally_instance *in = r->live; in; in = in->next)
                    in->snap_charge(-1);
                release_snapshot_threads();
            }
        }
        spin_unlock(&r->lock);
    }
    if (!off)
        arm(ok);
    __atomic_clear(&taking, __ATOMIC_RELEASE);
}

static void on_snapshot(int sig, siginfo_t *info, void *uc) {
    (void)sig;
    int saved_errno = errno;
    take(info, uc);
    errno = saved_errno;
}

static int install(int sig) {
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = on_snapshot;
    a.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&a.sa_mask);
    return sigaction(sig, &a, 0);
}

/* The lowest real-time signal the program leaves at SIG_DFL (threads.c picks from the top). */
static int free_rt_signal(void) {
    for (int sig = SIGRTMIN; sig <= SIGRTMAX && sig <= 64; sig++) {
        struct sigaction k;
        if (sigaction(sig, 0, &k) == 0 && k.sa_handler == SIG_DFL)
            return sig;
    }
    return 0;
}

void snapshots_init(void) {
    int saved_errno = errno;
    int want_sig = env.snap_signal.set && env.snap_signal.v[0];
    int want_int = env.snap_interval.set && env.snap_interval.v[0];
    if (!want_sig && !want_int)
        return;
    if (want_sig) {
        int sig = parse_signal(env.snap_signal.v);
        struct sigaction k;
        if (!sig)
            snap_report("no snapshots on a signal", "TALLY_SNAPSHOT_SIGNAL is not a signal");
        else if (sigaction(sig, 0, &k) != 0 || k.sa_handler != SIG_DFL)
            snap_report("no snapshots on a signal",
                        "the program handles or ignores TALLY_SNAPSHOT_SIGNAL");
        else if (install(sig) == 0)
            snap_signal = sig;
    }
    if (want_int) {
        interval_ns = parse_interval(env.snap_interval.v);
        if (!interval_ns)
            snap_report("no periodic snapshots",
                        "TALLY_SNAPSHOT_INTERVAL is not a positive number of seconds");
    }
    if (!interval_ns && !snap_signal) {
        errno = saved_errno;
        return;
    }
    /* The timer: the interval's ticks and the retries of snapshots that could not be exact. */
    tick_sig = free_rt_signal();
    if (tick_sig && install(tick_sig) == 0) {
        struct sigevent sev;
        memset(&sev, 0, sizeof sev);
        sev.sigev_notify = SIGEV_SIGNAL;
        sev.sigev_signo = tick_sig;
        have_timer = timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0;
    }
    if (!have_timer && interval_ns)
        snap_report("no periodic snapshots", "no timer could be made");
    arm(1);
    errno = saved_errno;
}

void snapshots_forked(void) {
    have_timer = 0; /* POSIX timers are not inherited: the child snapshots on the signal only */
    __atomic_clear(&taking, __ATOMIC_RELEASE);
}
