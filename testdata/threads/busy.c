/* A snapshot that has to wait (crates/cli/tests/e2e/long_running.rs).
 *
 *   busy [SPIN_MS]
 *
 * A worker computes for SPIN_MS milliseconds (1500 by default) without waiting in a system
 * call, while main, having raised SIGWINCH (TALLY_SNAPSHOT_SIGNAL=WINCH asks for a snapshot
 * there), waits in pthread_join, then sleeps 500 ms. No snapshot can be exact while the
 * worker runs: the runtime tries again until the worker is gone (its part is taken in the
 * sleep), and says in one stderr line once a second of tries failed. Prints "done". */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long spin_ms = 1500;
static volatile unsigned sink;

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

__attribute__((noinline)) static unsigned step(unsigned x) {
    for (int i = 0; i < 1000; i++)
        x = x & 1 ? 3 * x + 1 : x / 2 + 7;
    return x;
}

static void *worker(void *arg) {
    (void)arg;
    unsigned x = 27;
    for (long end = now_ms() + spin_ms; now_ms() < end;)
        x = step(x);
    sink = x;
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1)
        spin_ms = atol(argv[1]);
    pthread_t t;
    pthread_create(&t, 0, worker, 0);
    raise(SIGWINCH);
    pthread_join(t, 0);
    /* Waits 500 ms, for the next try to find the process waiting. */
    struct timespec ts = {0, 500000000L};
    while (nanosleep(&ts, &ts) != 0) /* the try's signal interrupts it */
        ;
    puts("done");
    return 0;
}
