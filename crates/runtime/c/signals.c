/*
 * signals.c -- crash-exact profiles: the profile is written, with the active frames charged as at
 * exit, when a signal whose default action ends the process arrives while the program leaves it
 * at SIG_DFL; then the signal is re-raised with SIG_DFL, so the exit status and core dump are the
 * plain program's. Also the `signal`/`sigaction` wrappers (tally_format::abi::REDIRECTS) that
 * keep this invisible to the program. docs/design/processes.md, "Fatal signals and threads at exit".
 *
 * Scheme. The owner of the registry (only it) keeps, per fatal signal, the action the program
 * asked for (its "view"). The kernel's action is the program's own whenever that is not SIG_DFL
 * (no interposition: the program's handler, flags and mask are installed as given), and the
 * runtime's handler while the program's view is SIG_DFL. One exception: a handler installed
 * with SA_RESETHAND is installed as the runtime's handler with the program's mask and flags
 * (minus SA_RESETHAND), which turns the program's view back to SIG_DFL and calls the program's
 * handler: so a fatal signal after the one-shot handler still writes the profile. Signals the
 * program ignores or handles at the first registration are never touched. The wrappers report
 * the program's view (`sigaction(sig, 0, &old)` gives SIG_DFL, with the flags and mask it was
 * set with, when the program never set anything).
 *
 * Everything the handler does is async-signal-safe: the registry lock is taken `bounded`, the
 * profile is written with open/write/rename from static and mmap'd buffers, no stdio, no malloc.
 */
#include "rt.h"

/* Signals whose default action ends the process (signal(7): "Term" and "Core"), which a
 * handler can catch. Real-time signals (also "Term") are left alone: programs use them as
 * messages, and the runtime uses one to stop threads at exit (threads.c). */
static const int fatal_signals[] = {
    SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGTRAP,   SIGABRT, SIGBUS,  SIGFPE,
    SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM,   SIGTERM, SIGXCPU, SIGXFSZ,
    SIGVTALRM, SIGPROF, SIGIO, SIGSYS,
#ifdef SIGSTKFLT
    SIGSTKFLT,
#endif
#ifdef SIGPWR
    SIGPWR,
#endif
#ifdef SIGEMT
    SIGEMT,
#endif
};

#define NSIGS 65

static char managed[NSIGS];          /* a fatal signal, set up by signals_init */
static char ours[NSIGS];             /* the kernel's action is on_signal */
static char traced[NSIGS];           /* the kernel's action is on_traced (witness traces) */
static struct sigaction view[NSIGS]; /* the program's action, while ours[] or traced[] */
static char sig_lock;
static int initialized;

static void on_signal(int sig, siginfo_t *info, void *uc);

/* Installs on_signal for `sig`: with `like` (the program's one-shot handler) its mask and
 * flags, else every signal blocked while it runs. */
static int install_ours(int sig, const struct sigaction *like) {
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = on_signal;
    if (like) {
        a.sa_mask = like->sa_mask;
        a.sa_flags = (like->sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
    } else {
        sigfillset(&a.sa_mask);
        a.sa_flags = SA_SIGINFO | SA_RESTART;
    }
    return sigaction(sig, &a, 0);
}

static int is_ours(const struct sigaction *k) {
    return (k->sa_flags & SA_SIGINFO) && k->sa_sigaction == on_signal;
}

/* ---- Handlers in witness traces (docs/design/trace.md, "Signal handlers in witness traces") ----
 *
 * While the process traces (wtrace_signal_streams), a handler the program installs is installed
 * as on_traced with the program's mask and flags (plus SA_SIGINFO); on_traced calls it through
 * wtrace_signal, which runs it on a stream of its own, and which needs to know whether the
 * signal interrupted code of this image (the traced code and the runtime), told by the
 * interrupted instruction's address against this image's executable segments. The program's
 * view is its own action, as for the fatal signals. */

static void on_traced(int sig, siginfo_t *info, void *uc);

static int is_traced(const struct sigaction *k) {
    return (k->sa_flags & SA_SIGINFO) && k->sa_sigaction == on_traced;
}

/* This image's executable segments (found once, before the first handler is wrapped). */
static uintptr_t image_lo[8], image_hi[8];
static int image_n = -1;

static void find_image_once(void) {
    if (__atomic_load_n(&image_n, __ATOMIC_ACQUIRE) >= 0)
        return;
    int n = image_ranges((uintptr_t)&on_traced, image_lo, image_hi, 8);
    __atomic_store_n(&image_n, n, __ATOMIC_RELEASE);
}

/* Whether `pc` is in this image or in another whose traced code hands its trace calls to this
 * copy (also when that is not known). */
static int inside_image(uintptr_t pc) {
    int n = __atomic_load_n(&image_n, __ATOMIC_ACQUIRE);
    if (n <= 0 || !pc)
        return 1;
    for (int i = 0; i < n; i++)
        if (pc >= image_lo[i] && pc < image_hi[i])
            return 1;
    return wtrace_inside(pc);
}

/* Calls the program's handler `v`: through wtrace_signal while the process traces. */
static void program_handler(const struct sigaction *v, int sig, siginfo_t *info, void *uc) {
    if (own_process() && wtrace_signal_streams()) {
        uintptr_t pc = interrupted_pc(uc);
        wtrace_signal(v, sig, info, uc, pc, inside_image(pc));
    } else if (v->sa_flags & SA_SIGINFO)
        v->sa_sigaction(sig, info, uc);
    else
        v->sa_handler(sig);
}

static int install_traced(int sig, const struct sigaction *act) {
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = on_traced;
    a.sa_mask = act->sa_mask;
    a.sa_flags = act->sa_flags | SA_SIGINFO;
    return sigaction(sig, &a, 0);
}

/* At the owner's first registration: every fatal signal the program leaves at SIG_DFL gets the
 * runtime's handler. */
void signals_init(void) {
    int saved_errno = errno;
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        int sig = fatal_signals[i];
        struct sigaction k;
        if (sig <= 0 || sig >= NSIGS || sigaction(sig, 0, &k) != 0)
            continue;
        if (sig == snap_signal) /* TALLY_SNAPSHOT_SIGNAL: snapshot.c's */
            continue;
        managed[sig] = 1;
        if (k.sa_handler != SIG_DFL) /* SIG_IGN or a handler (sa_sigaction shares the field) */
            continue;
        view[sig] = k;
        if (install_ours(sig, 0) == 0)
            __atomic_store_n(&ours[sig], 1, __ATOMIC_RELEASE);
    }
    find_image_once(); /* (here, where the loader's lock may be taken: not in a handler) */
    __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
    errno = saved_errno;
}

/* The process makes its first witness stream (wtrace/stream.c): every handler installed before -- by
 * code tally did not build, whose `sigaction` is not redirected, or before any traced function
 * ran -- is wrapped now, as the wrapper would have wrapped it (the program's view is that
 * handler; a fatal signal's one-shot handler goes through on_signal). Async-signal-safe (the
 * image's segments were found by signals_init): the first stream may be made in a handler. */
void signals_trace_started(void) {
    if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE) || !own_process())
        return;
    int saved_errno = errno;
    sigset_t all, prev;
    sigfillset(&all);
    (void)pthread_sigmask(SIG_SETMASK, &all, &prev);
    int locked = spin_lock(&sig_lock, 1);
    for (int sig = 1; sig < NSIGS; sig++) {
        struct sigaction k;
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, 0, &k) != 0 ||
            k.sa_handler == SIG_DFL || k.sa_handler == SIG_IGN || is_ours(&k) ||
            is_traced(&k) || is_stop_handler(&k))
            continue;
        int oneshot = managed[sig] && (k.sa_flags & SA_RESETHAND);
        if ((oneshot ? install_ours(sig, &k) : install_traced(sig, &k)) != 0)
            continue;
        view[sig] = k;
        __atomic_store_n(&ours[sig], oneshot, __ATOMIC_RELEASE);
        __atomic_store_n(&traced[sig], !oneshot, __ATOMIC_RELEASE);
    }
    if (locked)
        spin_unlock(&sig_lock);
    (void)pthread_sigmask(SIG_SETMASK, &prev, 0);
    errno = saved_errno;
}

/* The process ends on a fatal signal: this thread's frames in every image are charged as exit
 * charges them (all of them: the handler may run on an alternate stack), the other threads' too
 * (threads.c), and the profile is written, once. */
static void crash_settle(int sig) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (!r || !own_process() || __atomic_exchange_n(&r->exit_done, 1, __ATOMIC_ACQ_REL))
        return;
    /* The profile says it was written here, and for which signal: a function active at a fault
     * or at an asynchronous signal (in this thread or a stopped one) may have stopped between
     * calls, where its counts are not exact (TALLY_PROFILE_SIGNALED). */
    __atomic_store_n(&r->fatal_signal, sig, __ATOMIC_RELAXED);
    stop_threads();
    settle_and_write(0, 1);
    release_threads();
}

/* A handler's copy of the program's view of `sig`, read under the table's lock taken bounded
 * (the handler may have interrupted its holder); returns whether the lock is held. */
static int view_locked(int sig, struct sigaction *v) {
    int locked = spin_lock(&sig_lock, 1);
    *v = view[sig];
    return locked;
}

static void on_signal(int sig, siginfo_t *info, void *uc) {
    int saved_errno = errno;
    if (sig <= 0 || sig >= NSIGS)
        return;
    /* In the child of a vfork the table is the parent's memory: read it, never change it. */
    int own = own_process();
    struct sigaction v;
    int locked = view_locked(sig, &v);
    if (v.sa_handler != SIG_DFL && !own) {
        if (locked)
            spin_unlock(&sig_lock);
        errno = saved_errno;
        if (v.sa_flags & SA_SIGINFO)
            v.sa_sigaction(sig, info, uc);
        else
            v.sa_handler(sig);
        return;
    }
    if (v.sa_handler != SIG_DFL) {
        /* The program's one-shot handler (SA_RESETHAND): its view is SIG_DFL from now on, as
         * the kernel would have made it (the kernel resets the handler only, flags and mask
         * stay as they were). */
        view[sig].sa_handler = SIG_DFL;
        (void)install_ours(sig, 0);
        if (locked)
            spin_unlock(&sig_lock);
        errno = saved_errno;
        program_handler(&v, sig, info, uc);
        return;
    }
    if (locked)
        spin_unlock(&sig_lock);
    crash_settle(sig);
    /* Now as the plain program: SIG_DFL, and the signal again. It is blocked while this handler
     * runs, so it is delivered -- and ends the process as SIG_DFL does, core dump included --
     * when the handler returns, before the interrupted code runs again. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    (void)sigaction(sig, &dfl, 0);
    if (own)
        __atomic_store_n(&ours[sig], 0, __ATOMIC_RELEASE);
    (void)syscall(SYS_tgkill, (long)getpid(), (long)syscall(SYS_gettid), (long)sig);
    errno = saved_errno;
}

/* The program's action `act` becomes its view of `sig`, as the kernel would report it:
 * without SIGKILL and SIGSTOP in the mask, with the flags libc adds (SA_RESTORER). */
static void set_view(int sig, const struct sigaction *act) {
    struct sigaction k;
    view[sig] = *act;
    sigdelset(&view[sig].sa_mask, SIGKILL);
    sigdelset(&view[sig].sa_mask, SIGSTOP);
    if (sigaction(sig, 0, &k) == 0)
        view[sig].sa_flags |= k.sa_flags & ~(act->sa_flags | SA_SIGINFO | SA_RESTART);
}

/* The kernel's action while the program's handler is wrapped (traced[]). */
static void on_traced(int sig, siginfo_t *info, void *uc) {
    int saved_errno = errno;
    if (sig <= 0 || sig >= NSIGS)
        return;
    struct sigaction v;
    int locked = view_locked(sig, &v);
    if ((v.sa_flags & SA_RESETHAND) && own_process()) {
        /* A one-shot handler: the kernel reset the action to SIG_DFL before this ran; so
         * does the view. (A fatal signal's one-shot handler goes through on_signal.) */
        view[sig].sa_handler = SIG_DFL;
        __atomic_store_n(&traced[sig], 0, __ATOMIC_RELEASE);
    }
    if (locked)
        spin_unlock(&sig_lock);
    errno = saved_errno;
    if (v.sa_handler == SIG_DFL || v.sa_handler == SIG_IGN)
        return; /* (changed since the signal came: the program's action is no longer a handler) */
    program_handler(&v, sig, info, uc);
}

/* The owner's part of the `sigaction` wrapper: the program's view in and out, the kernel's
 * action as described at the top. Signals are blocked while the table changes, so a handler
 * calling sigaction on the same thread cannot deadlock. */
int owner_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    /* A vfork child (resetting dispositions before an exec) must not change the parent's
     * table: it gets the real call. */
    if (sig <= 0 || sig >= NSIGS || !__atomic_load_n(&initialized, __ATOMIC_ACQUIRE) ||
        !own_process())
        return sigaction(sig, act, old);
    /* A handler to wrap: the process traces (not SIGKILL or SIGSTOP, which take none). */
    int wrap = act && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN &&
               sig != SIGKILL && sig != SIGSTOP && wtrace_signal_streams();
    if (!managed[sig] && !wrap && !__atomic_load_n(&traced[sig], __ATOMIC_ACQUIRE))
        return sigaction(sig, act, old);
    if (wrap)
        find_image_once(); /* (before signals are blocked: it takes the loader's lock) */
    sigset_t all, prev;
    sigfillset(&all);
    (void)pthread_sigmask(SIG_SETMASK, &all, &prev);
    spin_lock(&sig_lock, 0);
    int rc = 0;
    struct sigaction k;
    if ((ours[sig] || traced[sig]) &&
        (sigaction(sig, 0, &k) != 0 || !(ours[sig] ? is_ours(&k) : is_traced(&k))))
        ours[sig] = traced[sig] = 0; /* changed behind the wrappers' back (code tally did not build) */
    struct sigaction was = view[sig];
    int was_ours = ours[sig] || traced[sig];
    if (act) {
        /* The kernel takes handler value 0 as SIG_DFL and 1 as SIG_IGN, with or without
         * SA_SIGINFO (sa_sigaction shares the field). */
        int dfl = act->sa_handler == SIG_DFL;
        int oneshot = !dfl && act->sa_handler != SIG_IGN && (act->sa_flags & SA_RESETHAND);
        if (managed[sig] && (dfl || oneshot)) {
            rc = was_ours ? 0 : sigaction(sig, 0, &was);
            if (rc == 0)
                rc = install_ours(sig, oneshot ? act : 0);
            if (rc == 0) {
                set_view(sig, act);
                __atomic_store_n(&traced[sig], 0, __ATOMIC_RELEASE);
                __atomic_store_n(&ours[sig], 1, __ATOMIC_RELEASE);
            }
        } else if (wrap) {
            rc = was_ours ? 0 : sigaction(sig, 0, &was);
            if (rc == 0)
                rc = install_traced(sig, act);
            if (rc == 0) {
                set_view(sig, act);
                __atomic_store_n(&ours[sig], 0, __ATOMIC_RELEASE);
                __atomic_store_n(&traced[sig], 1, __ATOMIC_RELEASE);
            }
        } else {
            rc = sigaction(sig, act, was_ours ? 0 : &was);
            if (rc == 0) {
                __atomic_store_n(&ours[sig], 0, __ATOMIC_RELEASE);
                __atomic_store_n(&traced[sig], 0, __ATOMIC_RELEASE);
            }
        }
    } else if (!was_ours) {
        rc = sigaction(sig, 0, &was);
    }
    int err = errno;
    spin_unlock(&sig_lock);
    (void)pthread_sigmask(SIG_SETMASK, &prev, 0);
    if (rc == 0 && old)
        *old = was;
    errno = err;
    return rc;
}

/* `sigaction` (REDIRECTS): through the owner of the registry, whichever image calls it. */
int __tally_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (r && r->owner && r->owner != &tally__self)
        return r->owner->sigaction(sig, act, old);
    return owner_sigaction(sig, act, old);
}

/* `signal` (REDIRECTS): glibc's BSD semantics (the signal blocked while its handler runs,
 * SA_RESTART), through the sigaction wrapper. */
__sighandler_t __tally_signal(int sig, __sighandler_t handler) {
    if (handler == SIG_ERR || sig <= 0 || sig >= NSIGS) {
        errno = EINVAL;
        return SIG_ERR;
    }
    struct sigaction a, old;
    memset(&a, 0, sizeof a);
    a.sa_handler = handler;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, sig);
    a.sa_flags = SA_RESTART;
    if (__tally_sigaction(sig, &a, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}
