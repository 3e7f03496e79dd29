/*
 * queries.c - tally_events() asked at many points: in loops, deep in recursion, inside qsort
 * comparators (libc calling back into instrumented code), through function pointers, right
 * after setjmp returns from a longjmp, and in an atexit handler after exit() from a nested
 * callee. Every answer is folded into a checksum; the program prints some answers and the
 * checksum. Built in events mode and in events-naive mode (the oracle), the output must be the
 * same. Built plainly, a weak fallback answers 0. Exit status 0 (or 3 when run with an
 * argument: exit() from a nested callee).
 */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

uint64_t tally_events(void);
__attribute__((weak)) uint64_t tally_events(void) { return 0; }

static uint64_t sum = 1469598103934665603ull;
static unsigned long queries;

static void fold(uint64_t v) {
    sum = (sum ^ v) * 1099511628211ull;
    queries++;
}

static int depth(int n) {
    fold(tally_events());
    if (n == 0)
        return 1;
    int r = depth(n - 1) + (n & 1 ? 1 : 2);
    fold(tally_events());
    return r;
}

static int cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if ((x ^ y) & 4)
        fold(tally_events());
    return (x > y) - (x < y);
}

static int twice(int x) { fold(tally_events()); return 2 * x; }
static int thrice(int x) { return 3 * x; }

static jmp_buf jb;
static void jumper(int k) {
    fold(tally_events());
    if (k > 0)
        longjmp(jb, k);
}

static void at_exit(void) {
    fold(tally_events());
    printf("exit checksum %016llx after %lu queries\n", (unsigned long long)sum, queries);
}

static void leave(int n) {
    if (n == 0) {
        fold(tally_events());
        exit(3);
    }
    leave(n - 1);
}

int main(int argc, char **argv) {
    (void)argv;
    fold(tally_events());
    int a[200];
    for (int i = 0; i < 200; i++) {
        a[i] = (i * 7919) % 211;
        if (i % 17 == 0)
            fold(tally_events());
    }
    qsort(a, 200, sizeof a[0], cmp);
    int (*fns[2])(int) = {twice, thrice};
    int t = 0;
    for (int i = 0; i < 50; i++)
        t += fns[i & 1](a[i]);
    t += depth(25);
    volatile int rounds = 0;
    int r = setjmp(jb);
    fold(tally_events());
    if (rounds < 4) {
        rounds++;
        jumper(r + 1);
    }
    printf("t=%d first=%llu checksum %016llx after %lu queries\n", t,
           (unsigned long long)tally_events(), (unsigned long long)sum, queries);
    if (argc > 1) {
        atexit(at_exit);
        leave(10);
    }
    return 0;
}
