/*
 * workers.c - four threads at once running the same branchy code (a loop, a switch, a
 * function with 2^12 acyclic paths whose path counts are hashed, recursion), joined before
 * main returns. Every count is a sum over the threads, whatever their interleaving, so builds
 * with --tally-atomic must agree exactly with the edges-naive --tally-atomic oracle.
 * Deterministic output; exit status 0.
 */
#include <pthread.h>
#include <stdio.h>

static unsigned mix(unsigned x) {
    unsigned s = 0;
#define BIT(k) if (x & (1u << k)) s += k * 3 + 1; else s ^= k * 5;
    BIT(0) BIT(1) BIT(2) BIT(3) BIT(4) BIT(5) BIT(6) BIT(7) BIT(8) BIT(9) BIT(10) BIT(11)
#undef BIT
    return s;
}

__attribute__((noinline)) static unsigned walk(unsigned n) {
    return n < 2 ? n : walk(n - 1) + (n & 1 ? walk(n - 2) : 1);
}

static void *work(void *arg) {
    unsigned seed = (unsigned)(unsigned long)arg, sum = 0;
    for (int i = 0; i < 20000; i++) {
        seed = seed * 1103515245u + 12345u;
        switch ((seed >> 9) % 4) {
        case 0: sum += mix(seed >> 5); break;
        case 1: sum ^= seed; break;
        case 2: sum += walk(seed % 12); break;
        default: sum = sum * 33 + mix((seed >> 3) & 0x3f); break;
        }
    }
    return (void *)(unsigned long)sum;
}

int main(void) {
    pthread_t t[4];
    for (unsigned long i = 0; i < 4; i++)
        pthread_create(&t[i], 0, work, (void *)(i * 7919 + 1));
    unsigned long total = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        total += (unsigned long)r;
    }
    printf("total %lu\n", total);
    return 0;
}
