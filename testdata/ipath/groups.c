/* Modes ipath and ipath-piecewise: functions linked by direct calls (two groups: a1 -> a2 and
 * b1 -> b2, both called directly by main) next to *isolated* functions, which make and receive
 * no direct call (called through pointers, by qsort, or exported and not inlined), so that
 * they are always roots and get path mode's code: loops (restarts, and piecewise the root exit
 * after one), a setjmp re-entry, a longjmp out of a summary call and an exit at the end. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static int a2(int x) { return x % 3 ? x * 2 : x + 1; }

__attribute__((noinline)) static int a1(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += a2(i);
    return s;
}

__attribute__((noinline)) static int b2(int x) {
    int r = 0;
    while (x > 0) {
        r += x & 1;
        x >>= 1;
    }
    return r;
}

__attribute__((noinline)) static int b1(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        if (i % 4)
            s += b2(i);
    return s;
}

__attribute__((noinline)) int iso_loop(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        if (i & 1)
            s += i;
        else
            s -= 1;
    }
    return s;
}

static int iso_static(int x) { return x > 10 ? x - 10 : x * 3; }
static int (*volatile indirect)(int) = iso_static;

static int cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static jmp_buf env;

__attribute__((noinline)) void fail(int k) {
    if (k % 5 == 4)
        longjmp(env, k);
}

__attribute__((noinline)) int iso_jump(int n) {
    volatile int jumps = 0;
    volatile int i = 0;
    if (setjmp(env))
        jumps++;
    for (; i < n; i++) {
        if (i % 2)
            fail(i++);
    }
    return jumps;
}

__attribute__((noinline)) void iso_end(int n) {
    for (int i = 0; i < n; i++)
        if (i == 7) {
            fflush(stdout);
            exit(3);
        }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 40;
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i * 37) % 64;
    qsort(v, 64, sizeof v[0], cmp);
    long t = a1(n) + b1(n) + iso_loop(n) + iso_jump(n);
    for (int i = 0; i < n; i++)
        t += indirect(i);
    printf("%ld %d\n", t, v[5]);
    iso_end(n);
    return 0;
}
