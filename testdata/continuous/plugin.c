/* The library dl_main.c dlopens. */
__attribute__((noinline)) static int step(int i) { return i % 4 == 0 ? i / 4 : 1; }

int plugin_work(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += step(i);
    return s;
}
