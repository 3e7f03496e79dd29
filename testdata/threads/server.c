/* A long-running process for the snapshot tests (crates/cli/tests/e2e/long_running.rs).
 *
 *   server PHASES [SLEEP_MS]
 *
 * Three workers take jobs from a queue. Phase p (1..PHASES) posts 4p jobs and waits until they
 * are done and every worker is parked in pthread_cond_wait again: then no thread is in
 * instrumented code (each worker is inside the libc call, main holds the lock), and main calls
 * nested(p), whose innermost call raises SIGWINCH (ignored by default; TALLY_SNAPSHOT_SIGNAL=WINCH
 * takes a snapshot there, with p + 1 frames of nested and main waiting at their calls). A
 * worker may still be on its way into the kernel's wait then, and the snapshot is taken a
 * moment later: with AWAIT_PARTS set, await_part() waits, in nested(0), for the part's file
 * (TALLY_PROFILE with .sN before .tally). So the snapshot points are
 * deterministic, and so are the counts: phase p runs job() 4p times and nested() p + 1 times. With SLEEP_MS, main sleeps that long after each phase (for
 * TALLY_SNAPSHOT_INTERVAL). Prints the sum of the jobs' results. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 3

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER, idle_cv = PTHREAD_COND_INITIALIZER;
static int jobs, parked, quit;
static long total;

__attribute__((noinline)) static long job(int n) {
    long s = 0;
    for (int i = 0; i < n; i++)
        s += (i % 3 == 0) ? i : -1;
    return s;
}

static void *worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!jobs && !quit) {
            parked++;
            pthread_cond_signal(&idle_cv);
            pthread_cond_wait(&work_cv, &mu);
            parked--;
        }
        if (!jobs)
            break;
        int n = jobs--;
        pthread_mutex_unlock(&mu);
        long r = job(n * 100);
        pthread_mutex_lock(&mu);
        total += r;
    }
    pthread_mutex_unlock(&mu);
    return 0;
}

/* With AWAIT_PARTS set: waits (10 s at most) until snapshot `n`'s file exists. */
__attribute__((noinline)) static void await_part(int n) {
    const char *profile = getenv("TALLY_PROFILE");
    if (!getenv("AWAIT_PARTS") || !profile || strlen(profile) < 6 ||
        strlen(profile) > 4000)
        return;
    char path[4100];
    snprintf(path, sizeof path, "%.*s.s%d.tally", (int)(strlen(profile) - 6), profile, n);
    for (int i = 0; i < 10000 && access(path, F_OK) != 0; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, 0);
    }
}

static int part;
static int nested(int depth);
static int (*volatile recurse)(int) = nested; /* a real recursion: no loop made of it */

__attribute__((noinline)) static int nested(int depth) {
    if (depth == 0) {
        raise(SIGWINCH);
        await_part(++part);
        return 1;
    }
    return recurse(depth - 1) + 1;
}

int main(int argc, char **argv) {
    int phases = argc > 1 ? atoi(argv[1]) : 3;
    int sleep_ms = argc > 2 ? atoi(argv[2]) : 0;
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&t[i], 0, worker, 0);
    int calls = 0;
    for (int p = 1; p <= phases; p++) {
        pthread_mutex_lock(&mu);
        jobs += 4 * p;
        pthread_cond_broadcast(&work_cv);
        while (jobs || parked < WORKERS)
            pthread_cond_wait(&idle_cv, &mu);
        calls += nested(p); /* the lock held: the workers stay parked */
        pthread_mutex_unlock(&mu);
        if (sleep_ms) {
            struct timespec ts = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0) /* a snapshot's signal may interrupt it */
                ;
        }
    }
    pthread_mutex_lock(&mu);
    quit = 1;
    pthread_cond_broadcast(&work_cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], 0);
    printf("%ld %d\n", total, calls);
    return 0;
}
