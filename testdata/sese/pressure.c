/* Where `--tally-sese=on` puts an affine counter (crates/graph/src/sese/cost.rs,
 * `CostModel::allows`): both loops below are innermost and call-free (their counters are
 * promoted to registers) and end at a sentinel (no trip count on entry). `find` keeps three
 * values live: its counter stays an increment the back end folds into `i`, so `on` refuses
 * the variable. `mix` keeps about twenty (twelve accumulators, eight keys, the index): one
 * promoted counter less is one register less, so `on` uses the variable. `all` uses both. */
#include <stdio.h>

__attribute__((noinline)) static long find(const int *a) {
    long i = 0;
    while (a[i] >= 0)
        i++;
    return i;
}

__attribute__((noinline)) static long mix(const int *a, const long *k) {
    long s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0, s8 = 0, s9 = 0,
         s10 = 0, s11 = 0;
    long i = 0;
    while (a[i] >= 0) {
        long v = a[i];
        s0 += v ^ k[0];
        s1 += v * k[1];
        s2 ^= v + k[2];
        s3 += (v << 3) ^ k[3];
        s4 -= v ^ k[4];
        s5 += (v >> 1) * k[5];
        s6 ^= (v * 7) + k[6];
        s7 += v - k[7];
        s8 += s0 ^ v;
        s9 ^= s1 + v;
        s10 += s2 * 3;
        s11 ^= s3 - v;
        i++;
    }
    return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8 + s9 + s10 + s11 + i;
}

int main(int argc, char **argv) {
    static int a[1000];
    long k[8];
    (void)argv;
    for (int j = 0; j < 8; j++)
        k[j] = (j + argc) * 2654435761L;
    long total = 0;
    for (int round = 0; round < 40; round++) {
        int n = (round * 37) % 900 + round % 3;
        for (int j = 0; j < n; j++)
            a[j] = (j * 7 + round) % 1000;
        a[n] = -1;
        total += find(a) + mix(a, k);
    }
    printf("%ld\n", total);
    return 0;
}
