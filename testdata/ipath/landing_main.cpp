// landing_main.cpp: see landing_set.cpp. `thrower` throws for x % 3 == 1; main catches what
// `entry` lets through and goes on calling it. Exit status 0.
#include <cstdio>
#include <stdexcept>

int entry(int x);

void thrower(int x) {
    if (x % 3 == 1)
        throw std::runtime_error("x % 3 == 1");
}

int main() {
    long total = 0;
    int caught = 0;
    for (int x = 0; x < 90; x++) {
        try {
            total += entry(x);
        } catch (const std::exception &) {
            caught++;
        }
    }
    std::printf("%ld %d\n", total, caught);
    return 0;
}
