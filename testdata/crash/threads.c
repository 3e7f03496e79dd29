/* Threads still running when the process ends (crates/cli/tests/exit_threads.rs). The first
 * argument picks how the other threads are busy when the process ends and how it ends:
 *   cond        workers blocked in pthread_cond_wait, main calls exit
 *   pipe        workers blocked in read() on a pipe, main calls exit
 *   cond-abort  workers blocked in pthread_cond_wait, main calls abort
 *   join        main blocked in pthread_join, a worker calls exit (once the others sleep)
 *   busy        a worker spinning in a loop without calls, main calls exit
 *   masked      as cond, but worker 2 blocks every signal: the runtime cannot stop it
 * Before the end, main waits until every worker sleeps in its blocking call (its state in
 * /proc/self/task is S), so each of their frames is at a call. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WORKERS 3

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static int fds[2];
static pid_t tids[WORKERS];
static volatile int started;
static volatile int stop_spinning;
static const char *how;

static int work(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += (i & 1) ? i : -1;
    return s;
}

/* Blocks forever in a library call. */
static void block(int depth) {
    if (depth > 0) {
        block(depth - 1);
        return;
    }
    if (!strcmp(how, "pipe")) {
        char c;
        while (read(fds[0], &c, 1) != 0) {
        }
    } else {
        pthread_mutex_lock(&mu);
        for (;;)
            pthread_cond_wait(&never, &mu);
    }
}

__attribute__((noinline)) static void spin(void) {
    unsigned long n = 0;
    while (!stop_spinning)
        n += (n & 3) + 1;
}

__attribute__((noinline)) static int sleeping(pid_t tid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'S';
}

/* Waiting loops: how often they go round depends on timing, so the tests leave these three
 * functions out of the comparison (everything else runs the same number of times). */
__attribute__((noinline)) static void await_started(int n) {
    while (__atomic_load_n(&started, __ATOMIC_ACQUIRE) < n)
        sched_yield();
}

__attribute__((noinline)) static void await_sleep(pid_t tid) {
    while (!sleeping(tid))
        sched_yield();
}

static void end(int depth) {
    if (depth > 0) {
        end(depth - 1);
        return;
    }
    printf("%s ends\n", getpid() == (pid_t)syscall(SYS_gettid) ? "main" : "worker");
    fflush(stdout);
    if (!strcmp(how, "cond-abort"))
        abort();
    exit(0);
}

static void *worker(void *arg) {
    int i = (int)(long)arg;
    work(100 + i);
    tids[i] = (pid_t)syscall(SYS_gettid);
    if (!strcmp(how, "join") && i == 0) {
        /* main is blocked in pthread_join, the other workers in pthread_cond_wait */
        await_started(WORKERS - 1);
        for (int j = 1; j < WORKERS; j++)
            await_sleep(tids[j]);
        await_sleep(getpid());
        end(1);
    }
    if (!strcmp(how, "busy") && i == 0) {
        __atomic_add_fetch(&started, 1, __ATOMIC_RELEASE);
        spin();
        return 0;
    }
    if (!strcmp(how, "masked") && i == 2) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, 0);
    }
    __atomic_add_fetch(&started, 1, __ATOMIC_RELEASE);
    block(i);
    return 0;
}

int main(int argc, char **argv) {
    how = argc > 1 ? argv[1] : "cond";
    if (pipe(fds) != 0)
        return 2;
    printf("work %d\n", work(50));
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        pthread_create(&t[i], 0, worker, (void *)i);
    if (!strcmp(how, "join")) {
        pthread_join(t[0], 0); /* never returns: worker 0 calls exit */
        return 1;
    }
    await_started(WORKERS);
    for (int i = 0; i < WORKERS; i++)
        if (strcmp(how, "busy") || i != 0)
            await_sleep(tids[i]);
    end(2);
    return 1;
}
