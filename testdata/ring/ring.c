/* The flight recorder's test program (crates/cli/tests/wring.rs): a long run of calls,
 * branches, calls through pointers and callbacks (qsort), optionally in worker threads, that
 * ends as argv[1] says: "exit" (normally), "segv" (a store through a null pointer, three
 * activations deep), "abort", or "dump" (tally_dump_trace() halfway, the file copied to
 * TALLY_TRACE.snap, then a normal exit). argv[2]: iterations; argv[3]: worker threads;
 * argv[4]: before the end, recurse that deep and run a few iterations there.
 * Built with `-I` the directory where the test put `tally header`'s output. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally.h" /* `tally header`: tally_dump_trace() */

static int cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int collatz(unsigned n) {
    int s = 0;
    while (n != 1) {
        n = (n & 1) ? 3 * n + 1 : n / 2;
        s++;
    }
    return s;
}

static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static int twice(int x) { return 2 * x; }
static int square(int x) { return x * x % 1000; }
static int minus(int x) { return -x; }
static int (*const ops[])(int) = {twice, square, minus};

static unsigned rnd(unsigned *seed) {
    *seed = *seed * 1103515245u + 12345u;
    return (*seed >> 16) & 0x7fff;
}

static long work(int i, unsigned *seed) {
    long acc = 0;
    int v[12];
    for (int k = 0; k < 12; k++)
        v[k] = (int)(rnd(seed) % 100);
    qsort(v, 12, sizeof v[0], cmp);
    for (int k = 0; k < 12; k++) {
        if (v[k] & 1)
            acc += collatz((unsigned)v[k] + 1);
        else
            acc -= fib(v[k] % 12);
    }
    acc += ops[i % 3](i);
    return acc;
}

static volatile int *nowhere;
static volatile int sink;

__attribute__((noinline)) static void crash_here(int how) {
    if (how == 1)
        *nowhere = 1;
    else if (how == 2)
        abort();
    sink++;
}

__attribute__((noinline)) static void deep(int d, int how) {
    if (d == 0)
        crash_here(how);
    else
        deep(d - 1, how);
    sink++;
}

__attribute__((noinline)) static void snapshot(void) {
    tally_dump_trace();
    const char *path = getenv("TALLY_TRACE");
    if (!path)
        return;
    char snap[4096];
    snprintf(snap, sizeof snap, "%s.snap", path);
    FILE *in = fopen(path, "rb"), *out = fopen(snap, "wb");
    char buf[4096];
    size_t n;
    while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
}

static int iterations;

__attribute__((noinline)) static long dive(int d, unsigned *seed) {
    long total = 0;
    if (d == 0)
        for (int i = 0; i < 5; i++)
            total += work(i, seed);
    else
        total = dive(d - 1, seed);
    sink++;
    return total;
}

static void *worker(void *arg) {
    unsigned seed = (unsigned)(size_t)arg;
    long total = 0;
    for (int i = 0; i < iterations; i++)
        total += work(i, &seed);
    return (void *)(size_t)(total & 0xffff);
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "exit";
    iterations = argc > 2 ? atoi(argv[2]) : 1000;
    int threads = argc > 3 ? atoi(argv[3]) : 0;
    int depth = argc > 4 ? atoi(argv[4]) : 0;
    pthread_t t[8];
    long total = 0;
    for (int i = 0; i < threads && i < 8; i++)
        pthread_create(&t[i], 0, worker, (void *)(size_t)(i + 7));
    for (int i = 0; i < threads && i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        total += (long)(size_t)r;
    }
    unsigned seed = 1;
    for (int i = 0; i < iterations; i++) {
        total += work(i, &seed);
        if (i == iterations / 2 && strcmp(how, "dump") == 0)
            snapshot();
    }
    if (depth > 0)
        total += dive(depth, &seed);
    printf("%ld\n", total);
    fflush(stdout);
    if (strcmp(how, "segv") == 0)
        deep(3, 1);
    else if (strcmp(how, "abort") == 0)
        deep(3, 2);
    return 0;
}
