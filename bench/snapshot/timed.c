/* The cost of one snapshot (bench/snapshot_cost.py): SQLite's driver (testdata/sqlite/driver.c,
 * compiled with -Dmain=driver_main) runs ROUNDS times; after each round the program raises
 * SIGWINCH, which with TALLY_SNAPSHOT_SIGNAL=WINCH takes a snapshot in the signal's handler
 * before raise returns (the only thread sent itself the signal), and is ignored otherwise.
 * Prints one line per raise: wall and CPU nanoseconds that raise took. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int driver_main(int argc, char **argv);

static long long ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    char *args[] = {"driver", argc > 2 ? argv[2] : "1", 0};
    if (!freopen("/dev/null", "w", stdout))
        return 1;
    for (int r = 0; r < rounds; r++) {
        if (driver_main(2, args))
            return 1;
        long long w = ns(CLOCK_MONOTONIC), c = ns(CLOCK_PROCESS_CPUTIME_ID);
        raise(SIGWINCH);
        c = ns(CLOCK_PROCESS_CPUTIME_ID) - c;
        w = ns(CLOCK_MONOTONIC) - w;
        fprintf(stderr, "raise %lld %lld\n", w, c);
    }
    return 0;
}
