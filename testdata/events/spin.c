/*
 * spin.c - a few hundred million events of branchy loops and calls, for TALLY_STOP_AT limits
 * far beyond the runtime's early arming (TALLY_EV_SLACK, 2^24 events): the stop must still come
 * at the first checked point whose exact count reaches N. Prints a checksum; exit status 0.
 */
#include <stdint.h>
#include <stdio.h>

static uint64_t state = 88172645463325252ull;

__attribute__((noinline)) static uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

__attribute__((noinline)) static uint64_t mix(uint64_t x, int k) {
    for (int i = 0; i < k; i++) {
        if (x & 1)
            x = x * 3 + 1;
        else
            x >>= 1;
        if ((x & 7) == 5)
            x ^= next();
    }
    return x;
}

int main(void) {
    uint64_t sum = 0;
    for (int round = 0; round < 400000; round++) {
        uint64_t v = next();
        switch (v % 5) {
        case 0: sum += mix(v, 10); break;
        case 1: sum ^= mix(v, 3); break;
        case 2: sum += v >> 3; break;
        default: sum = sum * 31 + mix(v ^ sum, 7); break;
        }
    }
    printf("checksum %016llx\n", (unsigned long long)sum);
    return 0;
}
