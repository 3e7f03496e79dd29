/*
 * exec_fail.c - execs that fail (no such file) from frames deep inside loops, then more work and
 * a normal exit.
 *
 * Each failing exec (execv, execl, execvp, execle) must return -1 with errno ENOENT, as without
 * tally (exit status 4 otherwise); the frames it was called from are still live, so the profile
 * written at exit must count only what really ran (the charges made for the exec taken back).
 * Expected: status 0, deterministic stdout.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static long acc;
static int fails;

__attribute__((noinline)) static long work(int n) {
  long s = 0;
  for (int i = 0; i < n; i++)
    s += (i & 1) ? i : 2;
  return s;
}

__attribute__((noinline)) static void try_exec(int k) {
  static const char *missing = "/nonexistent-tally-dir/no-such-program";
  char *argv[] = {(char *)missing, "x", NULL};
  int r = -2;
  errno = 0;
  switch (k % 4) {
  case 0: r = execv(missing, argv); break;
  case 1: r = execl(missing, missing, "x", "y", (char *)NULL); break;
  case 2: r = execvp("tally-no-such-program-in-path", argv); break;
  case 3: r = execle(missing, missing, (char *)NULL, environ); break;
  }
  if (r != -1 || errno != ENOENT) {
    printf("exec %d returned %d errno %d\n", k, r, errno);
    exit(4);
  }
  fails++;
}

__attribute__((noinline)) static void deep(int level, int n) {
  for (int i = 0; i < n; i++) {
    acc += work(i + level);
    if (level == 0 && (i == 1 || i == n - 1))
      try_exec(i + n);
    if (level > 0 && i % 2 == 0)
      deep(level - 1, n);
  }
}

int main(void) {
  deep(3, 4);
  acc += work(33);
  printf("fails=%d acc=%ld\n", fails, acc);
  return 0;
}
