/*
 * ring_throws.cpp - the flight recorder (TALLY_TRACE_RING) across C++ exceptions: ROUNDS
 * rounds of throws through traced frames with destructors (cleanup pads that resume), catches
 * and rethrows, then `segv` faults three frames deep right after an exception landed there,
 * or `exit` returns normally. Usage: prog ROUNDS segv|exit
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>

static volatile long sink;
static int *volatile nowhere;

struct G {
  int v;
  explicit G(int x) : v(x) {}
  ~G() { sink += v; }
};

struct E {
  int n;
};

__attribute__((noinline)) static int thrower(int n, int d) {
  G g(n);
  if (d == 0) {
    if (n % 3 == 0)
      throw E{n};
    return n;
  }
  return thrower(n + 1, d - 1) + 1;
}

__attribute__((noinline)) static int middle(int n) {
  int s = 0;
  for (int i = 0; i < n % 4; i++)
    s += i;
  try {
    s += thrower(n, n % 5);
  } catch (E &e) {
    s -= e.n;
    if (e.n % 7 == 0)
      throw;
  }
  return s;
}

__attribute__((noinline)) static void crash_here(int how) {
  if (how == 1)
    *nowhere = 1;
  else if (how == 2)
    abort();
  sink++;
}

__attribute__((noinline)) static int deep(int n) {
  if (n == 0) {
    int s = 0;
    try {
      s = thrower(1, 2);
    } catch (E &e) {
      s = e.n;
    }
    crash_here(s - 2);
    return s;
  }
  return deep(n - 1) + 1;
}

int main(int argc, char **argv) {
  if (argc < 3)
    return 2;
  int rounds = atoi(argv[1]);
  long t = 0;
  for (int i = 0; i < rounds; i++) {
    try {
      t += middle(i);
    } catch (...) {
      t++;
    }
  }
  std::printf("%ld\n", t);
  std::fflush(stdout);
  if (!std::strcmp(argv[2], "segv"))
    t += deep(3);
  return (int)(t & 0);
}
