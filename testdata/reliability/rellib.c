/* The library of the `dlclose` case: rel.c dlopens it, calls rel_lib_work from inside its
 * loops, and dlcloses it before the process ends. Its `T();` lines count into the same
 * ground-truth mapping (file index 1). */
#include "rel_truth.h"

#define T() truth_hit(1, __LINE__)

static volatile long lib_acc;

static void lib_inner(int k, int n) {
  for (int m = 0; m < n; m++) {
    lib_acc += k * m; T();
    if (m % 2 == 0) {
      lib_acc ^= m; T();
    }
  }
}

void rel_lib_work(volatile unsigned long *truth, int k, int n) {
  truth_use(truth);
  for (int r = 0; r <= k; r++) {
    lib_acc += r; T();
    lib_inner(r, n);
  }
}
