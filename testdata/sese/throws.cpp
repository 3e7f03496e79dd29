// SESE counters (Frenot & Pereira 2024) next to C++ exceptions: a counted loop before a throw in
// the same function (its value is added at the loop exit, before the throw), and a loop whose
// callee may throw (the frame may end inside: refused). Every count must equal edges-naive's.
#include <cstdio>
#include <stdexcept>

static int data[2048];

__attribute__((noinline)) static int then_throw(int n, bool raise) {
    int s = 0;
    for (int i = 0; i < n; i += 3)
        s += data[i];
    for (int i = n; i > 0; i -= 7)
        s ^= i;
    if (raise)
        throw std::runtime_error("after the loops");
    return s;
}

__attribute__((noinline)) static int throw_inside(int n, int at) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        s += data[i];
        if (i == at)
            s += then_throw(i, true);
    }
    return s;
}

int main() {
    for (int i = 0; i < 2048; i++)
        data[i] = (i * 31) % 17;
    long t = 0;
    for (int r = 0; r < 30; r++) {
        try {
            t += then_throw(r * 23 % 600, r % 4 == 1);
        } catch (const std::exception &) {
            t += 1;
        }
        try {
            t += throw_inside(200, r % 3 == 0 ? r * 5 : 1000);
        } catch (const std::exception &) {
            t += 2;
        }
    }
    std::printf("total %ld\n", t);
    return 0;
}
