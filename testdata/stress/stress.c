/*
 * stress.c - one run of the stress test (crates/cli/tests/stress.rs): deterministic work in a
 * dlopened library and in nested loops, then the process ends the way CASE says, from inside
 * the loops.
 *
 * usage: stress LIB CASE [N]
 *   return   work, return from main          exit    exit(0) from inside the loops
 *   _exit    _exit(0) from inside the loops   exec N  execv itself with N-1 from inside (N=0: return)
 *   fork     a child works and exits from inside its loops; the parent waits and returns
 *   dlclose  work, dlclose the library, more work, return
 *   term     raise(SIGTERM) from inside the loops (no handler: dies by the signal)
 *   abort    abort() from inside the loops
 *   block    work, print "ready", then wait in pause() until killed
 * Exit status 0 except for term/abort (killed by the signal) and errors (1).
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef long (*step_fn)(long);

static const char *g_self, *g_lib, *g_case;
static int g_n;
static step_fn g_step;
static void *g_handle;

static void end_here(int round, int i) {
  if (round != 2 || i != 3)
    return;
  if (!strcmp(g_case, "exit"))
    exit(0);
  if (!strcmp(g_case, "_exit"))
    _exit(0);
  if (!strcmp(g_case, "term"))
    raise(SIGTERM);
  if (!strcmp(g_case, "abort"))
    abort();
  if (!strcmp(g_case, "exec") && g_n > 0) {
    char n[16];
    snprintf(n, sizeof n, "%d", g_n - 1);
    char *argv[] = {(char *)g_self, (char *)g_lib, (char *)"exec", n, NULL};
    execv(g_self, argv);
    _exit(1);
  }
}

__attribute__((noinline)) static long inner(int round, int n) {
  long s = 0;
  for (int i = 0; i < n; i++) {
    s += g_step ? g_step(i + round) : i;
    if (i % 3 == 1)
      s ^= round;
    end_here(round, i);
  }
  return s;
}

__attribute__((noinline)) static long work(int rounds) {
  long s = 0;
  for (int r = 0; r < rounds; r++)
    s += inner(r, 5 + r % 2);
  return s;
}

int main(int argc, char **argv) {
  if (argc < 3)
    return 1;
  g_self = argv[0];
  g_lib = argv[1];
  g_case = argv[2];
  g_n = argc > 3 ? atoi(argv[3]) : 0;
  g_handle = dlopen(g_lib, RTLD_NOW);
  if (!g_handle)
    return 1;
  g_step = (step_fn)dlsym(g_handle, "lib_step");
  if (!strcmp(g_case, "fork")) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      g_case = "exit";
      work(4);
      _exit(1);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
      return 1;
    g_case = "return";
  }
  long s = work(4);
  if (!strcmp(g_case, "dlclose")) {
    dlclose(g_handle);
    g_step = 0;
    s += work(2);
  }
  if (!strcmp(g_case, "block")) {
    printf("ready\n");
    fflush(stdout);
    for (;;)
      pause();
  }
  return s == 0x7fffffff; /* never true: keeps s live */
}
