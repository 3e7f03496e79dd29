/*
 * vfork_exec.c - vfork + exec in the child, run from inside loops of the parent.
 *
 * Usage: vfork_exec ok|fail. "ok": the child execs /bin/true (no tally profile). "fail": the
 * child's exec fails (no such file) and it leaves with _exit(127). The child runs on the
 * parent's memory: the exec and _exit wrappers must charge nothing and write nothing there, so
 * the parent's profile, written at its exit, is exact and the only one. Expected: status 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long acc;

__attribute__((noinline)) static long work(int n) {
  long s = 0;
  for (int i = 0; i < n; i++)
    s += (i % 5 == 0) ? 3 : i;
  return s;
}

__attribute__((noinline)) static int spawn(int fail) {
  char *argv[] = {fail ? "/nonexistent-tally-dir/x" : "/bin/true", NULL};
  pid_t pid = vfork();
  if (pid == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
    return -1;
  return WEXITSTATUS(st);
}

int main(int argc, char **argv) {
  int fail = argc > 1 && strcmp(argv[1], "fail") == 0;
  for (int r = 0; r < 3; r++) {
    acc += work(7 * r);
    for (int i = 0; i < 2; i++) {
      int s = spawn(fail);
      if (s != (fail ? 127 : 0)) {
        printf("child status %d\n", s);
        return 5;
      }
      acc += work(i + r);
    }
  }
  printf("acc=%ld\n", acc);
  return 0;
}
