/* The test program of scripts/reliability.sh: deterministic work in nested loops and calls,
 * then the process ends the way argv[1] says, from a few frames deep inside loops
 * (level1 -> level2 -> level3 -> finish), so profilers that derive counts from a spanning
 * tree have counts of unfinished loop iterations to get right.
 *
 * Ground truth: every line that contains `T();` counts its own executions in a MAP_SHARED
 * mapping of the file $REL_TRUTH (rel_truth.h), which survives any end of the process,
 * SIGKILL included. The harness compares each tool's count of those lines with it.
 *
 * Usage: rel CASE [LIBRARY] [EXEC_TARGET]   (see `cases` in measure.py) */
#define _GNU_SOURCE
#include "rel_truth.h"
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRUTH_FILE 0
#define T() truth_hit(TRUTH_FILE, __LINE__)

static const char *kase = "return";
static const char *lib_path, *exec_target;
static volatile long acc;
static void (*lib_work)(volatile unsigned long *, int, int);
static void *lib_handle;

/* Loop bounds read from a volatile, so that no compiler unrolls the loops: each `T();` line
 * then stays one basic block whose count is that line's count, at -O2 too. */
static volatile int one = 1;
#define N(x) ((x) * one)

static int is(const char *c) { return strcmp(kase, c) == 0; }

static void on_abrt(int sig) {
  (void)sig;
  exit(4);
}

/* ---- threads: one worker blocked in pthread_cond_wait, one spinning, at exit ---- */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static volatile int stop_spinning;
static pthread_barrier_t started; /* main and both workers: the workers have reached their end */

static void wait_forever(void) {
  pthread_mutex_lock(&mu);
  pthread_barrier_wait(&started);
  for (;;)
    pthread_cond_wait(&cv, &mu);
}

static void spin_forever(void) {
  pthread_barrier_wait(&started);
  while (!stop_spinning)
    acc++;
}

static void worker_step(int who, int i) {
  for (int k = 0; k < N(4); k++) {
    acc += who * k; T();
    if (i == 2 && k == 1) {
      if (who == 1)
        wait_forever();
      else
        spin_forever();
    }
  }
}

static void *worker(void *arg) {
  int who = (int)(long)arg;
  for (int i = 0; i < N(3); i++) {
    acc += i; T();
    worker_step(who, i);
  }
  return NULL;
}

/* ---- fork: the child works on and exits from deep; the parent waits and goes on ---- */
static void after_fork(void) {
  for (int k = 0; k < N(7); k++) {
    acc += k * 5; T();
  }
}

/* ---- the end of the process, called once, from level3 ---- */
static void finish(void) {
  T();
  if (is("exit")) exit(3);
  if (is("_exit")) _exit(3);
  if (is("quick_exit")) quick_exit(3);
  if (is("abort") || is("abort-handler")) abort();
  if (is("segv")) {
    volatile int *volatile null = NULL;
    *null = 1;
  }
  if (is("fpe")) {
    volatile int zero = 0;
    acc = acc / zero;
  }
  if (is("term-blocked")) {
    truth_ready(0);
    for (;;)
      pause();
  }
  if (is("term-computing")) kill(getpid(), SIGTERM);
  if (is("kill") || is("kill-continuous")) kill(getpid(), SIGKILL);
  if (is("exec")) {
    execl(exec_target, exec_target, (char *)NULL);
    perror("execl");
    exit(127);
  }
  if (is("fork")) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      exit(127);
    }
    if (pid == 0) {
      truth_role(2);
      after_fork();
      exit(0);
    }
    truth_role(1);
    int st;
    waitpid(pid, &st, 0);
    after_fork();
  }
  if (is("dlclose")) {
    for (int k = 0; k < N(3); k++) {
      lib_work(truth_counters(), k, 4); T();
    }
    if (dlclose(lib_handle) != 0) {
      fprintf(stderr, "dlclose: %s\n", dlerror());
      exit(127);
    }
  }
  if (is("threads")) exit(0);
}

static void level3(int i, int j) {
  for (int k = 0; k < N(5); k++) {
    acc += i * j + k; T();
    if (k % 3 == 0) {
      acc ^= k; T();
    }
    if (i == 3 && j == 2 && k == 3)
      finish();
  }
}

static void level2(int i) {
  for (int j = 0; j < N(4); j++) {
    if (j % 2) {
      acc += j; T();
    } else {
      acc -= j; T();
    }
    level3(i, j);
  }
}

static void level1(void) {
  for (int i = 0; i < N(6); i++) {
    acc += i; T();
    level2(i);
  }
}

int main(int argc, char **argv) {
  if (argc > 1) kase = argv[1];
  if (argc > 2) lib_path = argv[2];
  if (argc > 3) exec_target = argv[3];
  truth_open();
  if (is("abort-handler")) signal(SIGABRT, on_abrt);
  if (is("dlclose")) {
    lib_handle = dlopen(lib_path, RTLD_NOW);
    if (!lib_handle) {
      fprintf(stderr, "dlopen: %s\n", dlerror());
      return 127;
    }
    *(void **)&lib_work = dlsym(lib_handle, "rel_lib_work");
    if (!lib_work) {
      fprintf(stderr, "dlsym: %s\n", dlerror());
      return 127;
    }
  }
  if (is("threads")) {
    pthread_t a, b;
    pthread_barrier_init(&started, NULL, 3);
    pthread_create(&a, NULL, worker, (void *)1L);
    pthread_create(&b, NULL, worker, (void *)2L);
    pthread_barrier_wait(&started);
  }
  for (int r = 0; r < N(2); r++) {
    acc += r; T();
  }
  level1();
  acc += 1; T();
  return 0;
}
