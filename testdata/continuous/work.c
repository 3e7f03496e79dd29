/* Continuous-mode test program (crates/cli/tests/continuous.rs): a deterministic amount of
 * work in several functions, then, with the argument "block" ("spin"), a line "ready" on stdout and
 * a wait (a call-free loop) that never ends: the test kills it with SIGKILL. Without an
 * argument, a normal exit. The functions active at the kill are main, stage and wait_forever
 * (spin_forever). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int helper_sum(int n); /* helper.c */

static int collatz(unsigned n) {
    int steps = 0;
    while (n != 1) {
        n = (n & 1) ? 3 * n + 1 : n / 2;
        steps++;
    }
    return steps;
}

__attribute__((noinline)) static void wait_forever(void) {
    for (;;)
        pause();
}

/* A call-free loop that never ends: its counters may live in registers (promoted). */
volatile unsigned spin_sink;
__attribute__((noinline)) static void spin_forever(unsigned n) {
    for (;;) {
        n = n * 1103515245u + 12345u;
        if (n & 1)
            spin_sink = n;
    }
}

__attribute__((noinline)) static long stage(int k, int block) {
    long t = 0;
    for (int i = 1; i < 300 * k; i++)
        t += collatz((unsigned)i);
    if (k == 3 && block) {
        printf("ready %ld\n", t);
        fflush(stdout);
        if (block == 2)
            spin_forever((unsigned)t);
        wait_forever();
    }
    return t;
}

int main(int argc, char **argv) {
    int block = argc < 2 ? 0 : strcmp(argv[1], "block") == 0 ? 1 : strcmp(argv[1], "spin") == 0 ? 2 : 0;
    long t = helper_sum(1000);
    for (int k = 1; k <= 4; k++)
        t += stage(k, block);
    printf("%ld\n", t);
    return 0;
}
