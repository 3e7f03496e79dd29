/* Continuous-mode test program (crates/cli/tests/continuous.rs): a deterministic amount of work
 * in several functions and two translation units (helper.c), then, by argument:
 *   (none)  a normal exit;
 *   block   a line "ready" on stdout and a wait that never ends (pause in wait_forever);
 *   spin    a line "ready" and a call-free loop that never ends (spin_forever: its counters may
 *           live in registers); each SIGUSR1 then prints one line, "spinning" once the loop
 *           is entered (else "not yet");
 *   fork    a fork child runs child_work and exits normally; then as "block".
 * The test kills the waiting process with SIGKILL. The functions active at the kill are main,
 * finale and wait_forever (spin_forever, and on_usr1 if the kill lands in it): every other function has the counts of a normal exit
 * without argument. */
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int helper_sum(int n);    /* helper.c */
int helper_mix(int seed); /* helper.c */

static int collatz(unsigned n) {
    int steps = 0;
    while (n != 1) {
        n = (n & 1) ? 3 * n + 1 : n / 2;
        steps++;
    }
    return steps;
}

__attribute__((noinline)) static long stage(int k) {
    long t = 0;
    for (int i = 1; i < 300 * k; i++)
        t += collatz((unsigned)i);
    return t;
}

__attribute__((noinline)) static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__attribute__((noinline)) static int classify(int c) {
    switch (c % 7) {
    case 0:
        return 3;
    case 1:
    case 2:
        return c / 2;
    case 5:
        return -c;
    default:
        return 1;
    }
}

__attribute__((noinline)) static void child_work(void) {
    long t = 0;
    for (int i = 0; i < 50; i++)
        t += classify(i) + fib(10);
    printf("child %ld\n", t);
}

__attribute__((noinline)) static void wait_forever(void) {
    for (;;)
        pause();
}

volatile unsigned spin_sink;
static volatile sig_atomic_t in_loop;

/* SIGUSR1: one line, "spinning" once spin_forever is in its loop, else "not yet". */
static void on_usr1(int sig) {
    (void)sig;
    if (in_loop)
        (void)!write(1, "spinning\n", 9);
    else
        (void)!write(1, "not yet\n", 8);
}

__attribute__((noinline)) static void spin_forever(unsigned n) {
    in_loop = 1;
    for (;;) {
        n = n * 1103515245u + 12345u;
        if (n & 1)
            spin_sink = n;
    }
}

__attribute__((noinline)) static void finale(const char *how, long t) {
    if (strcmp(how, "fork") == 0) {
        fflush(stdout);
        pid_t c = fork();
        if (c == 0) {
            child_work();
            fflush(stdout);
            return; /* the child exits normally from main */
        }
        int st;
        while (c > 0 && waitpid(c, &st, 0) < 0)
            ;
    }
    printf("ready %ld\n", t);
    fflush(stdout);
    if (strcmp(how, "spin") == 0)
        spin_forever((unsigned)t);
    wait_forever();
}

int main(int argc, char **argv) {
    signal(SIGUSR1, on_usr1);
    long t = helper_sum(1000) + helper_mix(12345);
    for (int k = 1; k <= 4; k++)
        t += stage(k);
    for (int c = 0; c < 40; c++)
        t += classify(c);
    t += fib(15);
    printf("%ld\n", t);
    if (argc > 1)
        finale(argv[1], t);
    return 0;
}
