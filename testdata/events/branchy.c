/*
 * branchy.c - call-free loops whose body is not one cycle, which events mode versions with
 * register counts (modes/events/fast.rs: the copy adds the plan's chord increments to a
 * register and subtracts the total at its exits): if/else and switch inside, several back
 * edges (`continue`), several exits, loops without an induction variable (a list walk, a
 * search on data), the inner loop of a nest with branches, loops exiting into the next
 * one's header, and values of the loop used after it. tally_events() is asked between the
 * loops; its answers are printed and folded into a checksum. With an argument, a frame holding
 * such a loop is left through exit() from a callee after it. Built in events and
 * events-naive mode (the oracle), the output must be the same. Exit status 0, or 4 with an
 * argument.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

uint64_t tally_events(void);
__attribute__((weak)) uint64_t tally_events(void) { return 0; }

static uint64_t sum = 1469598103934665603ull;
static int a[4096];
static int b[4096];
static int next[4096];

static void fold(uint64_t v) { sum = (sum ^ v) * 1099511628211ull; }

__attribute__((noinline)) static long ifelse(int n) {
    long t = 0;
    for (int i = 0; i < n; i++) {
        if (a[i] & 1) {
            b[i] = a[i] * 3;
            t += b[i];
        } else {
            b[i] = a[i] >> 1;
            t ^= (long)b[i] << 3;
        }
    }
    return t;
}

__attribute__((noinline)) static long cases(int n) {
    long t = 0;
    for (int i = 0; i < n; i++) {
        switch (a[i] % 5) {
        case 0:
            b[i] += 1;
            break;
        case 1:
            t += a[i];
            b[i] = (int)t;
            break;
        case 2:
        case 3:
            t ^= a[i] * 7;
            b[i] -= 3;
            break;
        default:
            b[i] = a[i] - b[i];
        }
    }
    return t;
}

__attribute__((noinline)) static long skips(int n) {
    long t = 0;
    int i = 0;
    while (i < n) {
        int v = a[i++];
        if (v < 300) {
            b[i] = v;
            continue;
        }
        if (v > 900)
            break;
        t += v;
        b[i] = (int)t;
    }
    return t + i;
}

__attribute__((noinline)) static int search2(int key, int other, int n) {
    for (int i = 0; i < n; i++) {
        if (a[i] == key) {
            b[0] = i;
            return i;
        }
        if (a[i] == other) {
            b[1] = i;
            return -i;
        }
        if (a[i] > 990)
            b[2]++;
    }
    return n;
}

__attribute__((noinline)) static long walk(int start) {
    long t = 0;
    int p = start;
    while (p >= 0) {
        if (a[p] & 4)
            t += a[p];
        else
            b[p] ^= 1;
        p = next[p];
    }
    return t;
}

__attribute__((noinline)) static long nest(int n, int m) {
    long t = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < m; j++) {
            if (a[i * m + j] > 500)
                b[j] += a[i * m + j];
            else
                t -= j;
        }
        fold(tally_events());
    }
    return t;
}

__attribute__((noinline)) static long chained(int n, int m) {
    long t = 0;
    int i = 0;
#pragma clang loop vectorize(disable) unroll(disable)
    do {
        if (a[i] & 8)
            b[i] = (int)t;
        t = t * 3 + a[i];
        i++;
    } while (i < n);
#pragma clang loop vectorize(disable) unroll(disable)
    do {
        if (a[i] == 7)
            break;
        if (a[i] & 2)
            b[i] = 1;
        t -= a[i] >> 2;
        i++;
    } while (i < m);
    return t;
}

__attribute__((noinline)) static void loop_then_exit(int n) {
    long t = 0;
    for (int i = 0; i < n; i++) {
        if (a[i] & 16)
            b[i] = i;
        else
            t += a[i] | 1;
    }
    fold(tally_events());
    printf("exit checksum %016llx after %ld\n", (unsigned long long)sum, t);
    exit(4);
}

int main(int argc, char **argv) {
    for (int i = 0; i < 4096; i++) {
        a[i] = (int)((i * 2654435761u) >> 7) % 1000;
        next[i] = i >= 7 ? i - 7 : -1;
    }
    fold(tally_events());
    for (int r = 0; r < 40; r++) {
        int n = (r * 97) % 4000;
        fold((uint64_t)ifelse(n));
        fold(tally_events());
        fold((uint64_t)cases(n));
        fold(tally_events());
        fold((uint64_t)skips(n));
        fold((uint64_t)search2(a[(r * 13) % 4096], a[(r * 29) % 4096], 4096));
        fold(tally_events());
        fold((uint64_t)walk(n));
        fold((uint64_t)nest(r % 7, r % 13 + 4));
        fold(tally_events());
        fold((uint64_t)chained(1 + r * 50, 100 + r * 90));
        fold(tally_events());
    }
    printf("after loops %llu events, checksum %016llx\n", (unsigned long long)tally_events(),
           (unsigned long long)sum);
    if (argc > 1)
        loop_then_exit(2000);
    fold(tally_events());
    printf("done checksum %016llx\n", (unsigned long long)sum);
    return 0;
}
