/*
 * exit_nested.c - exit() from deep inside loops, plus atexit handlers.
 *
 * Exercises: exit(3) called from a function 6 frames below main
 * (main -> run -> outer -> middle -> inner -> leaf -> maybe_exit), each
 * frame being in the middle of a loop iteration with branches (round 3
 * of run's loop, 3rd leaf() call of that round, leaf's iteration 2, after
 * three complete rounds); two atexit handlers (registered in
 * order A, B; run B then A) that run loops and branches of their own after
 * exit() was called, and check the state the early-terminated frames left
 * behind.
 *
 * Expected: stdout deterministic, exit status 3.
 * (If a self-check fails the handler calls _exit(99) instead.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int g_calls[7];        /* how many times each level was entered */
static long g_acc;            /* accumulated work, checked at exit */
static int g_round;           /* round in progress when exit() happened */
static int g_exit_iteration;  /* leaf iteration that called exit() */
static int g_leaf_in_round;   /* leaf() calls so far in the current round */

static void maybe_exit(int round, int i, long v) {
  g_calls[6]++;
  /* exit in round 3, in the 3rd leaf() call of that round, iteration 2 */
  if (round == 3 && g_leaf_in_round == 3 && i == 2) {
    g_round = round;
    g_exit_iteration = i;
    printf("exit(3) from depth 6: round=%d i=%d v=%ld acc=%ld\n", round, i, v, g_acc);
    exit(3);
  }
}

static long leaf(int round, int n) {
  long s = 0;
  int i;
  g_calls[5]++;
  g_leaf_in_round++;
  for (i = 0; i < n; i++) {
    if (i % 3 == 0)
      s += i * 2;
    else
      s -= 1;
    maybe_exit(round, i, s + n);
    s += 1;
  }
  return s;
}

static long inner(int round, int n) {
  long s = 0;
  int k = 0;
  g_calls[4]++;
  while (k < n) {
    switch (k % 4) {
    case 0: s += leaf(round, k + 3); break;
    case 1: s += 3; break;
    case 2: s += leaf(round, 4); break;
    default: s ^= 5; break;
    }
    k++;
  }
  return s;
}

static long middle(int round, int n) {
  long s = 0;
  int j;
  g_calls[3]++;
  for (j = 1; j <= n; j++) {
    if (j & 1)
      s += inner(round, j);
    else
      s += j;
  }
  return s;
}

static long outer(int round) {
  long s = 0;
  int t;
  g_calls[2]++;
  for (t = 0; t < 3; t++) {
    s += middle(round, 2 + t);
    if (s > 1000000) break;
  }
  return s;
}

static void run(void) {
  int round;
  g_calls[1]++;
  for (round = 0; round < 10; round++) {
    long r;
    g_leaf_in_round = 0;
    r = outer(round);
    g_acc += r;
    printf("round %d -> %ld\n", round, r);
  }
  printf("not reached\n");
}

/* registered first, runs last */
static void handler_a(void) {
  int i, total = 0;
  for (i = 1; i <= 6; i++) {
    total += g_calls[i];
    printf("  level %d entered %d times\n", i, g_calls[i]);
  }
  printf("handler A: total entries %d\n", total);
  /* self-check: the entries each level must have seen when exit() hit */
  static const int want[7] = {0, 1, 4, 11, 18, 24, 78};
  for (i = 1; i <= 6; i++)
    if (g_calls[i] != want[i]) g_round = -1;
  if (g_round != 3 || g_exit_iteration != 2 || g_acc != 111) {
    printf("handler A: SELF-CHECK FAILED\n");
    fflush(stdout);
    _exit(99);
  }
  printf("handler A: ok\n");
}

/* registered second, runs first */
static void handler_b(void) {
  long x = g_acc;
  int steps = 0;
  while (x != 1 && steps < 1000) { /* Collatz walk: a loop after exit() */
    x = (x % 2 == 0) ? x / 2 : 3 * x + 1;
    steps++;
  }
  printf("handler B: acc=%ld collatz steps=%d\n", g_acc, steps);
}

int main(void) {
  if (atexit(handler_a) != 0 || atexit(handler_b) != 0) {
    printf("atexit failed\n");
    return 1;
  }
  printf("start\n");
  run();
  printf("main: not reached\n");
  return 0;
}
