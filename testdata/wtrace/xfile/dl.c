#include <signal.h>
int lib_twice(int x);
int dl_work(int (*f)(int), int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        s += (i & 1) ? f(i) : lib_twice(i) * 3;
        if (n == 10 && i == 4)
            raise(SIGUSR1);
    }
    return s;
}
