/* cuts.c -- context cuts (docs/log/ipaths.md, "Context cuts"): `drive` has more than 2^16 paths
 * of its own (17 independent branches, each with a call) and calls the static looping `scan`
 * directly: the ipath modes make that call a summary edge, so that scan's loop counts its
 * paths in scan's own array rather than in the hash table under drive's context. `small`
 * (few paths) calls the static looping `walk` directly, and that call stays direct: its
 * paths cross it. `drive` also calls the static `rare`, whose loop is behind a branch LLVM
 * deems unlikely: the default rule (`--tally-ipath-cuts=hot`) keeps that call direct, since
 * rare's estimated restarts per call are far below the threshold, and `all` cuts it. Under
 * the measured weights of a run (`--tally-weights`), scan's loop runs 4 times per call,
 * below the threshold too: nothing is cut. Prints a checksum. */
#include <stdio.h>

volatile int sink;
int scale = 1; /* not constant to the compiler: rare's loop stays */

__attribute__((noinline)) void ext(int i) { sink += i; }

static __attribute__((noinline)) int scan(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += (i ^ n) + sink;
    return s;
}

static __attribute__((noinline)) int walk(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += i * 3 + sink;
    return s;
}

static __attribute__((noinline)) int rare(int n) {
    int s = n;
    if (__builtin_expect(n > 1000, 0))
        for (int i = 0; i < n; i++)
            s += i + sink;
    return s;
}

static __attribute__((noinline)) int small(int x) {
    if (x & 1)
        return walk(x % 7);
    return walk(x % 5) + 1;
}

#define B(i)                                                                                 \
    if (x & (1u << i))                                                                       \
        ext(i);

__attribute__((noinline)) int drive(unsigned x) {
    int r = scan((int)(x % 9)) + rare((int)(x % 13) * scale);
    B(0) B(1) B(2) B(3) B(4) B(5) B(6) B(7) B(8) B(9) B(10) B(11) B(12) B(13) B(14) B(15) B(16)
    return r + 1;
}

int main(void) {
    int t = 0;
    for (unsigned x = 0; x < 300; x++) {
        t += drive((x * 2654435761u) >> 9);
        t += small((int)x);
    }
    printf("%d\n", t);
    return 0;
}
