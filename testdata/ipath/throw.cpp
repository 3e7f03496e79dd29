// throw.cpp -- interprocedural paths cut short by C++ exceptions (Melski & Reps 1998 §9.2.2): an
// exception thrown by `maybe_throw` (external linkage: calls of it are summary edges) through a
// chain of static functions called directly (`mid`, `outer`: abandoned), through `cleanup`
// (a destructor in a landing pad, then `resume`), caught in main's loop; and one caught by
// `catcher`, a static function whose invoke of `mid` is a summary edge. Exit status 0.
#include <cstdio>
#include <stdexcept>

volatile int sink;

// Its loop restarts the piecewise path before it throws: `open` is 0 when the exception lands.
__attribute__((noinline)) void maybe_throw(int x) {
    for (int i = 0; i < x % 3; i++)
        sink = sink + i;
    if (x % 4 == 1)
        throw std::runtime_error("odd");
    sink = sink + x;
}

static __attribute__((noinline)) int leaf(int x) {
    int s = 0;
    for (int i = 0; i < x % 5; i++)
        s += i * x;
    return s;
}

static __attribute__((noinline)) int mid(int x) {
    int r = leaf(x);
    maybe_throw(x);
    r += leaf(x + 1);
    return r + 1;
}

static __attribute__((noinline)) int outer(int x) {
    int r = 0;
    for (int i = 0; i < 3; i++)
        r += mid(x + i) * 2;
    return r + 1;
}

struct Guard {
    ~Guard() { sink = sink + 1; }
};

static __attribute__((noinline)) int cleanup(int x) {
    Guard g;
    int r = outer(x);
    return r + 1;
}

static __attribute__((noinline)) int catcher(int x) {
    try {
        return mid(x * 3) + 1;
    } catch (const std::exception &) {
        return leaf(x) - 1;
    }
}

int main() {
    int total = 0, caught = 0;
    for (int x = 0; x < 40; x++) {
        try {
            total += cleanup(x);
        } catch (const std::exception &) {
            caught++;
        }
        total += catcher(x);
    }
    std::printf("%d %d\n", total, caught);
    return 0;
}
