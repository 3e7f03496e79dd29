/* The plugin testdata/snapshots/lifecycle.c dlopens and dlcloses between snapshots. */
__attribute__((noinline)) static long step(long s, int i) {
    return (i & 1) ? s + i : s - 1;
}

long plugin_work(int n) {
    long s = 0;
    for (int i = 0; i < n; i++)
        s = step(s, i);
    return s;
}
