// landing_set.cpp (with landing_main.cpp) -- Melski & Reps 1998 §9.2.2: an exception abandons
// frames of this file's set and lands in another file. `entry` (external: a root) calls the static
// `inner` directly twice per call, which calls the static `leaf` directly and `thrower` (in the
// other file: a summary edge) in between; `thrower` throws for one x in three, unwinding
// `inner` and `entry` (no landing pads here) into main's catch in landing_main.cpp, which then
// calls `entry` again: this set's per-thread state must be right after a landing it never saw.
volatile int sink;

void thrower(int x);

static __attribute__((noinline)) int leaf(int x) {
    int s = 0;
    for (int i = 0; i < x % 4; i++)
        s += i * x;
    return s;
}

static __attribute__((noinline)) int inner(int x) {
    int r = leaf(x);
    thrower(x);
    if (x % 2)
        r += leaf(x + 1);
    return r;
}

__attribute__((noinline)) int entry(int x) {
    int r = 0;
    for (int i = 0; i < 2; i++)
        r += inner(x + i);
    sink = sink + r;
    return r;
}
