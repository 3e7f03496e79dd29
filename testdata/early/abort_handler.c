/*
 * abort_handler.c - abort() several frames deep, caught by a SIGABRT
 * handler that prints and calls exit(7).
 *
 * Exercises: a SIGABRT handler (installed with sigaction) running loops
 * and branches, then calling exit(7) from inside the signal handler;
 * abort() called 5 frames below main (main -> process -> batch ->
 * validate -> check_item -> abort), every frame being mid-loop; work done
 * before the abort is reported by the handler, and an atexit handler runs
 * after the signal handler's exit(). Output printed before abort() is
 * flushed by exit() (stdout is a pipe/file in tests, so fully buffered).
 *
 * Expected: stdout deterministic, exit status 7.
 * (If the handler's self-check fails it calls _exit(98) instead.)
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_items_checked;
static int g_batches;
static long g_sum;
static int g_bad_index = -1;

static void on_abort(int sig) {
  int i, digits = 0;
  long v = g_sum;
  (void)sig;
  /* some real work inside the handler: count the digits of g_sum */
  do {
    digits++;
    v /= 10;
  } while (v != 0);
  printf("SIGABRT handler: batches=%d items=%d sum=%ld (%d digits) bad=%d\n",
         g_batches, g_items_checked, g_sum, digits, g_bad_index);
  for (i = 0; i < 3; i++) printf("  handler line %d%s\n", i, i == 2 ? " (last)" : "");
  if (g_batches != 4 || g_items_checked != 62 || g_bad_index != 13) {
    printf("SELF-CHECK FAILED\n");
    fflush(stdout);
    _exit(98);
  }
  exit(7); /* not async-signal-safe in general; fine for a synchronous abort() */
}

static void at_exit_report(void) {
  int i;
  long s = 0;
  for (i = 1; i <= g_batches; i++) s += (long)i * i;
  printf("atexit: sum of squares of batch numbers %ld\n", s);
}

static int check_item(int batch, int idx, int value) {
  int k, bits = 0;
  g_items_checked++;
  for (k = value; k != 0; k &= k - 1) bits++; /* popcount loop */
  if (value < 0) {
    g_bad_index = idx;
    printf("check_item: batch %d item %d value %d is negative -> abort()\n", batch, idx, value);
    abort();
  }
  return bits;
}

static int validate(int batch, const int *items, int n) {
  int i, total = 0;
  for (i = 0; i < n; i++) {
    if (items[i] % 5 == 0)
      total += 2 * check_item(batch, i, items[i]);
    else
      total += check_item(batch, i, items[i]);
  }
  return total;
}

static long batch(int b) {
  int items[20];
  int i, n = 15 + b;
  for (i = 0; i < n; i++) {
    items[i] = (b * 37 + i * 11) % 101;
    if (b == 3 && i == 13) items[i] = -1; /* the bad item */
  }
  return validate(b, items, n);
}

static void process(void) {
  int b;
  for (b = 0; b < 6; b++) {
    long r;
    g_batches++;
    r = batch(b);
    g_sum += r;
    printf("batch %d ok: %ld\n", b, r);
  }
  printf("process: not reached\n");
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_abort;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGABRT, &sa, NULL) != 0) {
    perror("sigaction");
    return 1;
  }
  atexit(at_exit_report);
  printf("start\n");
  process();
  printf("main: not reached\n");
  return 0;
}
