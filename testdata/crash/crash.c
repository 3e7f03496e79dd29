/* Ways a process ends on a signal (crates/cli/tests/crash.rs): the first argument picks one.
 * Every scenario runs some counted work first (a loop, nested calls) so that the profile has
 * counts to compare, and prints what the program sees of its signal dispositions, which must be
 * the same in the plain and the tally builds. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int sink;
static sigjmp_buf jump;

/* Some counted work: a loop with a branch. */
static int work(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        if (i % 3 == 0)
            s += i;
        else
            s -= 1;
    }
    return s;
}

/* How the program sees a signal's disposition. */
static void show(const char *what, int sig) {
    struct sigaction old;
    memset(&old, 0, sizeof old);
    if (sigaction(sig, NULL, &old) != 0) {
        printf("%s: sigaction failed\n", what);
        return;
    }
    const char *h = old.sa_handler == SIG_DFL ? "SIG_DFL"
                    : old.sa_handler == SIG_IGN ? "SIG_IGN"
                                                : "handler";
    int masked = 0;
    for (int s = 1; s < 65; s++)
        masked += sigismember(&old.sa_mask, s) == 1;
    printf("%s: %s flags=%#lx mask=%d\n", what, h, (unsigned long)old.sa_flags, masked);
    fflush(stdout);
}

/* The deepest frame: ends the process the way `how` says. */
static int die(const char *how, int depth) {
    if (depth > 0)
        return die(how, depth - 1) + work(depth);
    if (!strcmp(how, "abort")) {
        abort();
    } else if (!strcmp(how, "raise")) {
        raise(SIGSEGV);
    } else if (!strcmp(how, "kill")) {
        kill(getpid(), SIGTERM);
    } else if (!strcmp(how, "usr1")) {
        raise(SIGUSR1);
    } else if (!strcmp(how, "quick")) {
        quick_exit(3);
    } else if (!strcmp(how, "null")) {
        volatile int *p = NULL;
        sink = *p; /* a fault between calls */
    } else if (!strcmp(how, "fpe")) {
        volatile int zero = 0;
        sink = 7 / zero; /* a fault between calls */
    } else if (!strcmp(how, "pause")) {
        printf("ready\n");
        fflush(stdout);
        for (;;)
            pause();
    } else if (!strcmp(how, "read")) {
        char c;
        printf("ready\n");
        fflush(stdout);
        while (read(0, &c, 1) != 0) {
        }
    }
    return 0;
}

static void chained(int sig) {
    printf("handler %d ", sig == SIGUSR1);
    work(10);
    show("in handler", sig);
    signal(sig, SIG_DFL);
    raise(sig); /* delivered, with SIG_DFL, when this handler returns */
}

static void oneshot(int sig, siginfo_t *info, void *uc) {
    (void)uc;
    printf("oneshot %d %d\n", sig == SIGSEGV, info->si_signo == SIGSEGV);
    fflush(stdout);
}

static void jumper(int sig) {
    siglongjmp(jump, sig);
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "";
    printf("work %d\n", work(100));
    show("SIGSEGV at start", SIGSEGV);
    show("SIGUSR2 at start", SIGUSR2);
    if (!strcmp(how, "chain")) {
        struct sigaction a;
        memset(&a, 0, sizeof a);
        a.sa_handler = chained;
        a.sa_flags = SA_RESTART;
        sigemptyset(&a.sa_mask);
        sigaction(SIGUSR1, &a, NULL);
        show("SIGUSR1 set", SIGUSR1);
        fflush(stdout);
        raise(SIGUSR1);
        printf("not reached\n");
    } else if (!strcmp(how, "resethand")) {
        struct sigaction a;
        memset(&a, 0, sizeof a);
        a.sa_sigaction = oneshot;
        a.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
        sigaction(SIGSEGV, &a, NULL);
        show("SIGSEGV set", SIGSEGV);
        raise(SIGSEGV); /* the one-shot handler */
        show("SIGSEGV after", SIGSEGV);
        die("raise", 3); /* SIG_DFL again: the end */
    } else if (!strcmp(how, "longjmp")) {
        signal(SIGFPE, jumper);
        show("SIGFPE set", SIGFPE);
        int got = sigsetjmp(jump, 1);
        if (got == 0) {
            die("fpe", 2);
            printf("not reached\n");
        }
        printf("jumped %d\n", got == SIGFPE);
        signal(SIGFPE, SIG_DFL);
        show("SIGFPE reset", SIGFPE);
        printf("work %d\n", work(50));
        return 0;
    } else if (!strcmp(how, "vfork")) {
        /* A vfork child sets a handler before it ends: its own disposition, the parent's view
         * (SIG_DFL) unchanged; then the parent dies of the signal. */
        pid_t pid = vfork();
        if (pid == 0) {
            signal(SIGUSR1, jumper);
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        printf("child %d\n", WIFEXITED(st) && WEXITSTATUS(st) == 0);
        show("SIGUSR1 after vfork", SIGUSR1);
        die("usr1", 2);
    } else if (!strcmp(how, "ignore")) {
        /* Runs with SIGUSR2 ignored by the parent (inherited): left alone. */
        raise(SIGUSR2);
        signal(SIGUSR2, SIG_IGN);
        raise(SIGUSR2);
        printf("ignored\n");
        return 5;
    } else {
        die(how, 4);
    }
    printf("end\n");
    return 0;
}
