/*
 * underscore_exit.c - _exit() and _Exit() deep inside loops, and a fork child that _exits.
 *
 * Exercises: a fork child that runs a loop and leaves with _Exit(0) (the parent waits for it
 * and checks its status); then the parent calls _exit(6) from a function 4 frames below main
 * (main -> run -> outer -> inner -> stop), each frame in the middle of a loop iteration, after
 * an atexit handler was registered (which _exit must not run). stdout is flushed before each
 * _exit, as a program that uses _exit must do.
 *
 * Expected: stdout deterministic, exit status 6. The profile written at _exit charges the
 * abandoned frames as exit() would.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static long g_acc;

static void never(void) {
  printf("atexit handler ran after _exit\n");
}

__attribute__((noinline)) static void stop(int round, int i) {
  if (round == 2 && i == 3) {
    printf("_exit(6) at round=%d i=%d acc=%ld\n", round, i, g_acc);
    fflush(stdout);
    _exit(6);
  }
}

__attribute__((noinline)) static void inner(int round, int n) {
  for (int i = 0; i < n; i++) {
    if (i % 2)
      g_acc += i;
    else
      g_acc -= 1;
    stop(round, i);
  }
}

__attribute__((noinline)) static void outer(int round) {
  for (int k = 0; k < 3; k++) {
    if (k == 1)
      g_acc *= 2;
    inner(round, 5 + k);
  }
}

static void run(void) {
  for (int round = 0; round < 4; round++)
    outer(round);
}

__attribute__((noinline)) static int child_work(void) {
  long s = 0;
  for (int i = 0; i < 10; i++)
    s += i % 3 ? i : -i;
  return (int)s;
}

int main(void) {
  atexit(never);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int s = child_work();
    _Exit(s == 9 ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
    printf("child failed\n");
    return 1;
  }
  printf("child ok\n");
  run();
  printf("not reached\n");
  return 1;
}
