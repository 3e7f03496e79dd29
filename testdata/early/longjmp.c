/*
 * longjmp.c - setjmp/longjmp and sigsetjmp/siglongjmp early exits.
 *
 * Exercises:
 *  1. setjmp() inside a loop in one function (driver), with longjmp()
 *     from 4 frames deeper (work -> scan -> probe -> fail), the
 *     intermediate frames being mid-iteration in loops; several longjmps
 *     over the run (some rounds return normally, some jump).
 *  2. nested jmp_bufs: guarded() calls setjmp on its own buffer, a callee
 *     longjmps back to it (caught locally), and later guarded() itself,
 *     still holding its own live jmp_buf, longjmps to the outer buffer.
 *  3. a function that calls setjmp and then simply returns (no jump).
 *  4. sigsetjmp/siglongjmp from 3 frames deeper, with signal mask saved.
 *  5. siglongjmp out of a signal handler (SIGUSR1 raised 3 frames deep),
 *     abandoning the handler frame and raise() itself.
 *  6. _setjmp/_longjmp (the BSD variants Lua uses with LUA_USE_LINUX).
 * Self-checking: every counter is compared with its known value.
 *
 * Expected: stdout deterministic, exit status 0 (1 if a check fails).
 */
#define _DEFAULT_SOURCE 1
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static jmp_buf g_top;
static sigjmp_buf g_sig;
static int g_failures;

static void check(const char *what, long got, long want) {
  printf("%-34s %ld%s\n", what, got, got == want ? "" : "  <-- MISMATCH");
  if (got != want) g_failures++;
}

/* ---------------- 1. setjmp in a loop, longjmp from 4 frames down ---- */

static long g_work_done;

static void fail(int code) {
  int i;
  long s = 0;
  for (i = 0; i < code; i++) s += i; /* a loop in the frame that jumps */
  g_work_done += s;
  longjmp(g_top, code);
}

static long probe(int round, int x) {
  long s = 0;
  int i;
  for (i = 0; i < 5; i++) {
    if (i == 3 && x == round && round % 3 != 0) fail(round + 1); /* jump out mid-loop */
    s += (i & 1) ? x : -i;
  }
  return s;
}

static long scan(int round) {
  long s = 0;
  int x;
  for (x = 0; x < 8; x++) {
    if (x % 2 == 0)
      s += probe(round, x);
    else
      s += probe(round, x) * 2;
  }
  return s;
}

static long work(int round) {
  long s = 0;
  int rep = 0;
  while (rep < 3) {
    s += scan(round);
    rep++;
  }
  g_work_done += s;
  return s;
}

static void driver(void) {
  int round;
  volatile int jumps = 0, normal = 0;
  volatile long codes = 0;
  for (round = 0; round < 10; round++) {
    int rc = setjmp(g_top); /* setjmp in a loop */
    if (rc == 0) {
      long r = work(round);
      normal++;
      printf("round %d normal %ld\n", round, r);
    } else {
      jumps++;
      codes += rc;
      printf("round %d longjmp code %d\n", round, rc);
    }
  }
  check("driver: jumps", jumps, 5);
  check("driver: normal rounds", normal, 5);
  check("driver: sum of codes", codes, 2 + 3 + 5 + 6 + 8);
  check("driver: work done", g_work_done, 5 * 48 + (1 + 3 + 10 + 15 + 28));
}

/* ---------------- 2. nested jmp_bufs -------------------------------- */

static int g_inner_hits;

static void inner_fail(jmp_buf *env, int depth) {
  int i;
  for (i = 0; i < 4; i++) {
    if (depth == 0 && i == 2) longjmp(*env, 10 + i);
  }
  if (depth > 0) inner_fail(env, depth - 1);
}

static int guarded(int n) {
  jmp_buf inner;
  volatile int caught = 0;
  int i;
  if (setjmp(inner) == 0)
    inner_fail(&inner, n); /* jumps back to 'inner' */
  else
    caught++;
  g_inner_hits += caught;
  for (i = 0; i < 6; i++) {
    if (i == n) longjmp(g_top, 100 + n); /* leave guarded() itself */
  }
  return caught;
}

static void nested(void) {
  volatile int outer_hits = 0, returns = 0;
  int n;
  for (n = 3; n <= 8; n++) { /* n >= 6: guarded() returns normally */
    int rc = setjmp(g_top);
    if (rc == 0) {
      returns += guarded(n);
    } else {
      outer_hits++;
      printf("nested: outer longjmp %d\n", rc);
    }
  }
  check("nested: inner catches", g_inner_hits, 6);
  check("nested: outer catches", outer_hits, 3);
  check("nested: normal returns", returns, 3);
}

/* ---------------- 3. setjmp, then return normally ------------------- */

static long setjmp_returns(int n) {
  jmp_buf b;
  long s = 0;
  int i;
  if (setjmp(b) != 0) return -1; /* never taken */
  for (i = 0; i < n; i++) s += i % 3 == 0 ? i : 1;
  return s;
}

/* ---------------- 4. sigsetjmp / siglongjmp ------------------------- */

static void sig_leaf(int k) {
  int i;
  for (i = 0; i < 10; i++)
    if (i == k) siglongjmp(g_sig, k + 1);
}

static void sig_mid(int k) {
  int j;
  for (j = 0; j < 2; j++) {
    if (k % 2 == 0 || j == 1) sig_leaf(k);
  }
}

static void sig_top(int k) { sig_mid(k); }

/* ---------------- 5. siglongjmp out of a signal handler ------------- */

static volatile sig_atomic_t g_handler_entries;

static void on_usr1(int sig) {
  int i;
  (void)sig;
  g_handler_entries++;
  for (i = 0; i < 3; i++) {
    if (i == 1) siglongjmp(g_sig, 50);
  }
}

static void raise_deep(int d) {
  int i;
  for (i = 0; i < 2; i++) {
    if (d == 0 && i == 1) raise(SIGUSR1);
    else if (d > 0 && i == 0) raise_deep(d - 1);
  }
}

static void signals(void) {
  volatile int hits = 0, sum = 0;
  int k;
  struct sigaction sa;
  sigset_t cur;

  for (k = 0; k < 6; k++) {
    int rc = sigsetjmp(g_sig, 1);
    if (rc == 0) {
      sig_top(k);
    } else {
      hits++;
      sum += rc;
    }
  }
  check("sigsetjmp: hits", hits, 6);
  check("sigsetjmp: sum", sum, 21);

  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  hits = 0;
  for (k = 0; k < 3; k++) {
    if (sigsetjmp(g_sig, 1) == 0) {
      raise_deep(k + 2);
      printf("not reached\n");
    } else {
      hits++;
    }
  }
  /* sigsetjmp(..., 1) restored the mask, so SIGUSR1 is not blocked now */
  sigprocmask(SIG_BLOCK, NULL, &cur);
  check("handler: siglongjmp hits", hits, 3);
  check("handler: entries", g_handler_entries, 3);
  check("handler: SIGUSR1 unblocked", sigismember(&cur, SIGUSR1), 0);
}

/* ---------------- 6. _setjmp / _longjmp ----------------------------- */

static jmp_buf g_bsd;

static void bsd_leaf(int n) {
  int i;
  for (i = n; i > 0; i--)
    if (i == 2) _longjmp(g_bsd, n);
}

static void bsd(void) {
  volatile int total = 0;
  int n;
  for (n = 1; n <= 5; n++) {
    int rc = _setjmp(g_bsd);
    if (rc == 0)
      bsd_leaf(n); /* n == 1 returns normally */
    else
      total += rc;
  }
  check("_longjmp: total", total, 2 + 3 + 4 + 5);
}

int main(void) {
  driver();
  nested();
  check("setjmp_returns(10)", setjmp_returns(10), 24);
  check("setjmp_returns(1)", setjmp_returns(1), 0);
  signals();
  bsd();
  printf("%s (%d failures)\n", g_failures ? "FAIL" : "PASS", g_failures);
  return g_failures ? 1 : 0;
}
