/*
 * throws.cpp - exceptions for witness tracing: throws through several traced
 * frames (with and without destructors: cleanup landing pads that `resume`), catches at
 * different depths, a rethrow (`throw;`) through frames, a catch(...) in a loop, a throw
 * from a destructor's caller during cleanup-free frames, and a function that catches and
 * returns normally to its caller. Deterministic; prints a checksum; exit status 0.
 */
#include <cstdio>
#include <stdexcept>
#include <string>

static long g_sum;

struct Guard {
  int id;
  explicit Guard(int i) : id(i) { g_sum += i; }
  ~Guard() {
    for (int k = 0; k < id % 3; k++)
      g_sum ^= (long)k << (id % 7);
  }
};

struct Oops {
  int depth;
};

__attribute__((noinline)) static int leaf(int n) {
  if (n % 5 == 3)
    throw Oops{n};
  if (n % 11 == 7)
    throw std::runtime_error("eleven");
  return n * 2 + 1;
}

__attribute__((noinline)) static int plain(int n, int depth) {
  int s = 0;
  for (int i = 0; i < depth; i++)
    s += i & n;
  if (depth == 0)
    return s + leaf(n);
  return s + plain(n + 1, depth - 1);
}

__attribute__((noinline)) static int guarded(int n, int depth) {
  Guard g(n + depth);
  if (depth == 0)
    return leaf(n);
  std::string tag = "g";
  tag += char('a' + depth);
  return guarded(n * 3 + 1, depth - 1) + (int)tag.size();
}

__attribute__((noinline)) static int catches_oops(int n) {
  try {
    return plain(n, n % 4);
  } catch (const Oops &o) {
    g_sum += o.depth;
    return -1;
  }
}

__attribute__((noinline)) static int rethrows(int n) {
  Guard g(n);
  try {
    return guarded(n, 2 + n % 3);
  } catch (const Oops &o) {
    g_sum += 100 + o.depth;
    if (o.depth % 2)
      throw;
    return -2;
  }
}

__attribute__((noinline)) static int translate(int n) {
  try {
    return rethrows(n);
  } catch (const std::exception &e) {
    g_sum += (long)std::string(e.what()).size();
    throw Oops{-n};
  }
}

int main(int argc, char **argv) {
  (void)argv;
  long total = 0;
  for (int i = 0; i < 60 + argc; i++) {
    try {
      total += catches_oops(i);
      total += translate(i);
    } catch (...) {
      total += 1000;
    }
  }
  int caught = 0;
  try {
    for (int i = 1;; i++)
      total += guarded(i, 4);
  } catch (const Oops &o) {
    caught = o.depth;
  } catch (const std::exception &) {
    caught = -1;
  }
  std::printf("%ld %ld %d\n", total, g_sum, caught);
  return 0;
}
