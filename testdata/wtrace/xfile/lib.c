int level(int x);
__attribute__((noinline)) int lib_twice(int x) { return x % 4 == 0 ? 2 * x : x - 3; }
__attribute__((noinline)) int level(int x) { return x + 100; } /* interposed by the executable's level */
int lib_run(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += i % 3 ? level(i) : lib_twice(i);
    return s;
}
