/*
 * counted.c - counted call-free loops, which events mode versions (a copy without decrements
 * that subtracts the events of its activation at its exits, from an induction variable or a
 * trip count): up and down counters, steps of 3 and -5, pointer walks, several exits (a
 * search left by `break`, a `return` from the middle), narrow and wide variables, an inner
 * loop of a nest, a loop whose trip count is not known on entry, zero-trip entries, and
 * values of the loop used after it, a loop exiting into the next one's header.
 * tally_events() is asked between the loops; its answers are printed and folded into a
 * checksum. Then frames holding such loops are left through
 * longjmp (from a callee after the loop) and, with an argument, through exit() from a
 * callee after a loop. Built in events and events-naive mode (the oracle), the output must be
 * the same. Exit status 0, or 4 with an argument.
 */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

uint64_t tally_events(void);
__attribute__((weak)) uint64_t tally_events(void) { return 0; }

static uint64_t sum = 1469598103934665603ull;
static int a[4096];
static short s16[300];
static jmp_buf jb;

static void fold(uint64_t v) { sum = (sum ^ v) * 1099511628211ull; }

__attribute__((noinline)) static long up(int n) {
    long t = 0;
    for (int i = 0; i < n; i++)
        t += a[i] * 7 + (i ^ 3);
    return t;
}

__attribute__((noinline)) static long down(int n) {
    long t = 0;
    for (int i = n; i > 0; i -= 5)
        t = t * 3 + a[i];
    return t;
}

__attribute__((noinline)) static long step3(unsigned n) {
    unsigned long t = 1;
    for (unsigned i = 1; i < n; i += 3)
        t ^= t << 5 ^ (unsigned long)a[i];
    return (long)t;
}

__attribute__((noinline)) static int find(int key, int n) {
    int i;
    for (i = 0; i < n; i++)
        if (a[i] == key)
            break;
    return i;
}

__attribute__((noinline)) static int find_ret(int key, int n) {
    for (int i = 0; i < n; i++) {
        if (a[i] == key)
            return i * 2 + 1;
        if (a[i] < 0)
            return -i;
    }
    return -1;
}

__attribute__((noinline)) static long ptrs(const int *p, const int *end) {
    long t = 0;
    while (p != end)
        t += *p++ >> 1;
    return t;
}

__attribute__((noinline)) static int narrow(unsigned char n) {
    int t = 0;
    for (unsigned char c = 0; c < n; c++)
        t += s16[c] ^ c;
    return t;
}

__attribute__((noinline)) static long wide(long long n) {
    long t = 0;
    for (long long i = 0; i < n; i++)
        t += (long)(i * i) & 0xff;
    return t;
}

__attribute__((noinline)) static long nest(int n, int m) {
    long t = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < m; j++)
            t += a[i * m + j] - j;
        fold(tally_events());
    }
    return t;
}

/* Inner loops of a nest (docs/log/sese.md, "Tenth round"): one that sweeps a range from a fixed
   start on every entry (versioned) and one that resumes where the previous entry stopped
   (`while (end < off) b[++end] = ...`, refused by the nesting rule). */
__attribute__((noinline)) static long nest_sweep(int n, int m) {
    long t = 0;
    for (int i = 0; i < n; i++) {
        long u = i;
        for (int j = 0; j < m; j++)
            u = u * 31 + a[(i * m + j) & 4095];
        t ^= u;
    }
    return t;
}

__attribute__((noinline)) static long nest_resume(int n) {
    int end = 0;
    long t = 0;
    for (int i = 0; i < n; i++) {
        int off = (a[i & 4095] & 7) + i;
        while (end < off)
            a[++end & 4095] ^= 1;
        t += end;
    }
    return t;
}

/* A fixed-range inner loop on a path the weights say is cold (zlib's window copy in
   inflate_fast): refused (`Cold`), though nest_sweep's rule alone would keep it. */
__attribute__((noinline)) static long nest_cold(int n, int m) {
    long t = 0;
    for (int i = 0; i < n; i++) {
        long u = a[i & 4095];
        if (__builtin_expect(u == 3, 0))
            for (int j = 0; j < m; j++)
                u = u * 31 + a[(i * m + j) & 4095];
        t ^= u;
    }
    return t;
}

/* A loop whose trip count is not known on entry: an affine counter. */
__attribute__((noinline)) static int collatz(unsigned long x) {
    int steps = 0;
    while (x > 1) {
        x = (x & 1) ? x * 3 + 1 : x / 2;
        steps++;
    }
    return steps;
}

/* The first loop exits straight into the second's header, which takes its values: both are
 * versioned, and the first's copy enters the second through the second's version block. */
__attribute__((noinline)) static long chained(int n, int m) {
    long t = 0;
    int i = 0;
#pragma clang loop vectorize(disable) unroll(disable)
    do {
        t = t * 3 + a[i];
        i++;
    } while (i < n);
#pragma clang loop vectorize(disable) unroll(disable)
    do {
        if (a[i] == 7)
            break;
        t -= a[i] >> 2;
        i++;
    } while (i < m);
    return t;
}

__attribute__((noinline)) static void jump(int v) { longjmp(jb, v); }

__attribute__((noinline)) static long loop_then_jump(int n) {
    long t = up(n) + down(n);
    for (int i = 0; i < n; i++)
        t += a[i] & 5;
    if (n > 100)
        jump(2);
    return t;
}

__attribute__((noinline)) static void loop_then_exit(int n) {
    long t = 0;
    for (int i = 0; i < n; i++)
        t += a[i] | 1;
    fold(tally_events());
    printf("exit checksum %016llx after %ld\n", (unsigned long long)sum, t);
    exit(4);
}

int main(int argc, char **argv) {
    for (int i = 0; i < 4096; i++)
        a[i] = (int)((i * 2654435761u) >> 7) % 1000;
    for (int i = 0; i < 300; i++)
        s16[i] = (short)(i * 31);
    fold(tally_events());
    for (int r = 0; r < 40; r++) {
        int n = (r * 97) % 4000;
        fold((uint64_t)up(n));
        fold(tally_events());
        fold((uint64_t)down(n));
        fold((uint64_t)step3((unsigned)n));
        fold(tally_events());
        fold((uint64_t)find(a[(r * 13) % 4096], 4096));
        fold((uint64_t)find_ret(a[(r * 31) % 500] + (r & 1), 600));
        fold(tally_events());
        fold((uint64_t)ptrs(a + r, a + r + n / 2));
        fold((uint64_t)narrow((unsigned char)(r * 7)));
        fold((uint64_t)wide(r * 11));
        fold(tally_events());
        fold((uint64_t)nest(r % 7, r % 13));
        fold((uint64_t)nest_sweep(r % 5, 20 + r));
        fold((uint64_t)nest_resume(50 + r));
        fold((uint64_t)nest_cold(40 + r, 10 + r));
        fold((uint64_t)collatz(27 + r));
        fold((uint64_t)chained(1 + r * 50, 100 + r * 90));
        fold(tally_events());
    }
    printf("after loops %llu events, checksum %016llx\n", (unsigned long long)tally_events(),
           (unsigned long long)sum);
    volatile int rounds = 0;
    if (setjmp(jb) == 0) {
        fold(tally_events());
        fold((uint64_t)loop_then_jump(50));
        fold((uint64_t)loop_then_jump(3000));
    }
    fold(tally_events());
    rounds++;
    printf("after longjmp checksum %016llx\n", (unsigned long long)sum);
    if (argc > 1)
        loop_then_exit(2000);
    fold(tally_events());
    printf("done checksum %016llx\n", (unsigned long long)sum);
    return 0;
}
