#include <stdio.h>
int lib_run(int n);
int lib_twice(int x);
int level(int x) { return x & 1 ? lib_twice(x) : -x; }
int main(void) {
    long t = 0;
    for (int i = 0; i < 400; i++)
        t += lib_run(i % 13);
    printf("%ld\n", t);
    return 0;
}
