/* Loops whose body is a single path (path mode counts their iterations at the loop's exits,
 * tally_graph::paths::cycles), left in every way: run 0, 1 and many times, left from the
 * middle of the body, followed at once by exit() or longjmp, in a function with too many
 * paths for an array (hashed) and in small ones. Built at -O2 the loop bodies are
 * straight-line code (selects). Exits with status 3 (exit() after a loop) or 0. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static volatile int sink;
static jmp_buf env;

__attribute__((noinline)) static long sum(const int *a, int n) {
    long s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] > 3 ? a[i] : -a[i];
    return s;
}

/* Left from the middle: the first negative element stops the scan. */
__attribute__((noinline)) static int scan(const int *a, int n) {
    int i = 0;
    while (i < n) {
        if (a[i] < 0)
            break;
        sink = a[i];
        i++;
    }
    return i;
}

/* More than 1024 paths (eleven independent branches, volatile stores that cannot become
 * selects): counted in a hash table. */
__attribute__((noinline)) static long wide(const int *a, int n, unsigned bits) {
    long s = 0;
    if (bits & 1) sink = 1;
    if (bits & 2) sink = 2;
    if (bits & 4) sink = 3;
    if (bits & 8) sink = 4;
    if (bits & 16) sink = 5;
    for (int i = 0; i < n; i++)
        s += a[i] * 3 + (a[i] & 1);
    if (bits & 32) sink = 6;
    if (bits & 64) sink = 7;
    if (bits & 128) sink = 8;
    if (bits & 256) sink = 9;
    if (bits & 512) sink = 10;
    if (bits & 1024) sink = 11;
    for (int i = n; i > 0; i -= 2)
        s ^= i;
    return s;
}

/* A loop followed at once by a call that ends the frame. */
__attribute__((noinline)) static void count_then_leave(const int *a, int n, int how) {
    long s = 0;
    for (int i = 0; i < n; i++)
        s += a[i] ^ i;
    sink = (int)s;
    if (how == 1)
        longjmp(env, 1);
    if (how == 2) {
        printf("exit after %d iterations\n", n);
        fflush(stdout);
        exit(3);
    }
}

int main(int argc, char **argv) {
    int a[64];
    for (int i = 0; i < 64; i++)
        a[i] = (i * 7) % 13 - (i == 40 ? 20 : 0);
    long t = 0;
    for (int n = 0; n < 12; n++) {
        t += sum(a, n);
        t += sum(a + n, 64 - n);
        t += scan(a, n * 5);
        t += wide(a, n, (unsigned)(n * 397));
        t += wide(a, 2 * n, (unsigned)(n * 91));
    }
    for (unsigned k = 0; k < 300; k++)
        t += wide(a, (int)(k % 7), k * 2654435761u >> 21);
    if (!setjmp(env))
        count_then_leave(a, 17, 1);
    printf("total %ld\n", t);
    count_then_leave(a, argc > 1 ? 0 : 29, 2);
    return 0;
}
