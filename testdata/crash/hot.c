/*
 * hot.c - a fault inside a hot loop without calls. `hot` sums a table and,
 * halfway, divides by zero (argument "fpe") or stores through NULL ("segv"); with "exit" it
 * finishes and the program exits normally. The function active at the fault stopped between
 * calls, so its counts are not exact: the profile must say it was written at a fatal signal.
 */
#include <stdio.h>
#include <string.h>

static volatile int zero;
static int *volatile nowhere;
static unsigned table[4096];

__attribute__((noinline)) static unsigned hot(int how) {
    unsigned s = 0;
    for (unsigned i = 0; i < 4096 * 64; i++) {
        unsigned v = table[i % 4096];
        if (v & 1)
            s += v;
        else
            s ^= v;
        if (i == 4096 * 32) {
            if (how == 1)
                s /= (unsigned)zero;
            else if (how == 2)
                *nowhere = (int)s;
        }
    }
    return s;
}

int main(int argc, char **argv) {
    int how = 0;
    if (argc > 1 && strcmp(argv[1], "fpe") == 0)
        how = 1;
    if (argc > 1 && strcmp(argv[1], "segv") == 0)
        how = 2;
    for (unsigned i = 0; i < 4096; i++)
        table[i] = i * 2654435761u;
    printf("sum %u\n", hot(how));
    return 0;
}
