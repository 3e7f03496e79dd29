/*
 * calls.c - THREADS threads (argument, default 4; 0: main alone, no thread is ever created)
 * call one small function PER times each, and print how many calls were made in all. Built
 * with -pthread, tally's counters are atomic and the report must give exactly that many calls
 * of `tick`; built without, a run with threads must be flagged.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define PER 2000000L

static volatile unsigned sink;
static pthread_barrier_t start; /* the threads call at once */
static int threads;

__attribute__((noinline)) static void tick(unsigned x) {
    if (x & 1)
        sink += x;
}

static void *work(void *arg) {
    if (threads > 1)
        pthread_barrier_wait(&start);
    for (long i = 0; i < PER; i++)
        tick((unsigned)i);
    return arg;
}

int main(int argc, char **argv) {
    threads = argc > 1 ? atoi(argv[1]) : 4;
    pthread_t t[16];
    if (threads < 0 || threads > 16)
        return 2;
    if (threads > 1)
        pthread_barrier_init(&start, 0, (unsigned)threads);
    if (threads == 0)
        work(0);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], 0, work, 0) != 0)
            return 3;
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], 0);
    printf("calls %ld\n", PER * (threads ? threads : 1));
    return 0;
}
