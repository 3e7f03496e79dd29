/*
 * recursion.c - deep recursion, then exit() from the deepest level.
 *
 * Exercises: naive recursive fib (many calls, both branches), the
 * Ackermann function (deep, irregular recursion), mutual recursion
 * (is_even/is_odd), and finally descend(): a recursion 20000 frames deep
 * where every frame runs a loop with branches and is mid-iteration when
 * the deepest frame calls exit(4). An atexit handler checks how many
 * frames were entered and how many were still active when exit() ran.
 *
 * Expected: stdout deterministic, exit status 4.
 * (If the handler's self-check fails it calls _exit(96) instead.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define DEPTH 20000

static long g_fib_calls;
static long g_ack_calls;
static int g_active;   /* descend() frames entered and not yet returned */
static int g_entered;
static long g_path_sum;

static long fib(int n) {
  g_fib_calls++;
  if (n < 2) return n;
  return fib(n - 1) + fib(n - 2);
}

static long ack(long m, long n) {
  g_ack_calls++;
  if (m == 0) return n + 1;
  if (n == 0) return ack(m - 1, 1);
  return ack(m - 1, ack(m, n - 1));
}

static int is_odd(unsigned n);
static int is_even(unsigned n) { return n == 0 ? 1 : is_odd(n - 1); }
static int is_odd(unsigned n) { return n == 0 ? 0 : is_even(n - 1); }

static void descend(int depth, long path) {
  int i;
  g_active++;
  g_entered++;
  for (i = 0; i < 3; i++) {
    if (i == 1) {
      if (depth == DEPTH) {
        g_path_sum = path;
        printf("deepest frame %d reached, calling exit(4)\n", depth);
        exit(4);
      }
      /* recurse from the middle of the loop */
      descend(depth + 1, path + (depth % 7 == 0 ? depth : 1));
    } else if (depth % 1000 == 0 && i == 0) {
      path ^= depth;
    }
  }
  g_active--; /* never reached: the deepest frame exits */
}

static void report(void) {
  long want_path = 0;
  int d;
  /* recompute the path sum the frames accumulated on the way down */
  for (d = 1; d < DEPTH; d++) {
    if (d % 1000 == 0) want_path ^= d;
    want_path += (d % 7 == 0) ? d : 1;
  }
  if (DEPTH % 1000 == 0) want_path ^= DEPTH; /* the deepest frame's i == 0 step */
  printf("atexit: entered %d, active %d, path %ld\n", g_entered, g_active, g_path_sum);
  if (g_entered != DEPTH || g_active != DEPTH || g_path_sum != want_path) {
    printf("SELF-CHECK FAILED (want path %ld)\n", want_path);
    fflush(stdout);
    _exit(96);
  }
  printf("atexit: ok\n");
}

int main(void) {
  int i, evens = 0;
  atexit(report);
  printf("fib(22) = %ld in %ld calls\n", fib(22), g_fib_calls);
  printf("ack(2, 200) = %ld in %ld calls\n", ack(2, 200), g_ack_calls);
  g_ack_calls = 0;
  printf("ack(3, 5) = %ld in %ld calls\n", ack(3, 5), g_ack_calls);
  for (i = 0; i < 300; i += 7) evens += is_even((unsigned)i);
  printf("evens among 0,7,..,294: %d\n", evens);
  descend(1, 0);
  printf("main: not reached\n");
  return 0;
}
