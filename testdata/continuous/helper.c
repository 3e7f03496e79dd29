/* Second translation unit of work.c. */
static int odd(int i) { return i % 3 == 1; }

int helper_sum(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        if (odd(i))
            s += i;
        else
            s -= 1;
    return s;
}

int helper_mix(int seed) {
    unsigned x = (unsigned)seed;
    int r = 0;
    for (int i = 0; i < 64; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        if (x % 5 == 0)
            r++;
    }
    return r;
}
