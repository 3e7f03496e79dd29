/*
 * exec_self.c - work, then an exec from four frames deep, each frame in the middle of a loop.
 *
 * Usage: exec_self HOW CHILD_PROFILE, HOW one of execv, execl, execvp, execle, execlp, execve,
 * execvpe, fexecve, execveat. The program sets TALLY_PROFILE to CHILD_PROFILE (the runtime read
 * its own value at startup) and execs itself with the argument "child" from deep(0)
 * (main -> deep(3) -> deep(2) -> deep(1) -> deep(0));
 * the child image does other work, prints its arguments and exits 0. The profile written at
 * the exec must hold exactly the work done before it, the abandoned frames charged as exit()
 * would charge them. An exec that returns is an error (exit status 3).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static const char *self, *how, *child_profile;
static long acc;

__attribute__((noinline)) static long work(int n) {
  long s = 0;
  for (int i = 0; i < n; i++)
    s += (i % 3 == 0) ? i : 1;
  return s;
}

__attribute__((noinline)) static void do_exec(void) {
  char *argv[] = {(char *)self, "child", "a", NULL};
  printf("exec by %s after acc=%ld\n", how, acc);
  fflush(stdout);
  setenv("TALLY_PROFILE", child_profile, 1);
  if (strcmp(how, "execv") == 0)
    execv(self, argv);
  else if (strcmp(how, "execl") == 0)
    execl(self, self, "child", "a", "b", "c", (char *)NULL);
  else if (strcmp(how, "execvp") == 0)
    execvp(self, argv);
  else if (strcmp(how, "execle") == 0)
    execle(self, self, "child", (char *)NULL, environ);
  else if (strcmp(how, "execlp") == 0)
    execlp(self, self, "child", (char *)NULL);
  else if (strcmp(how, "execve") == 0)
    execve(self, argv, environ);
  else if (strcmp(how, "execvpe") == 0)
    execvpe(self, argv, environ);
  else if (strcmp(how, "fexecve") == 0) {
    int fd = open(self, O_RDONLY);
    if (fd >= 0)
      fexecve(fd, argv, environ);
  } else if (strcmp(how, "execveat") == 0)
    execveat(AT_FDCWD, self, argv, environ, 0);
  perror("exec");
  exit(3);
}

__attribute__((noinline)) static long deep(int level, int n) {
  long s = 0;
  for (int i = 0; i < n; i++) {
    acc += work(i + level);
    if (level == 0 && i == n - 2)
      do_exec();
    if (level > 0 && i == n / 2)
      s += deep(level - 1, n);
  }
  return s;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) {
    long s = work(50 + argc);
    printf("child argc=%d last=%s s=%ld\n", argc, argv[argc - 1], s);
    return 0;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: exec_self HOW CHILD_PROFILE\n");
    return 2;
  }
  self = argv[0];
  how = argv[1];
  child_profile = argv[2];
  for (int r = 0; r < 3; r++)
    acc += work(10 * r);
  deep(3, 6);
  return 1;
}
