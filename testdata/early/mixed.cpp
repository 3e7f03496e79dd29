/*
 * mixed.cpp - exit() while C++ exception-capable frames are on the stack;
 * static destructors and atexit handlers run instrumented code afterwards.
 *
 * Exercises: exit(5) called from inside a catch block (an exception object
 * is live), 6 frames below main, from a loop; the frames in between have
 * try blocks, RAII locals with destructors (which must NOT run on exit),
 * std::string/std::vector locals, and loops mid-iteration. After exit():
 * an atexit handler, a function-local static's destructor and two global
 * objects' destructors run in reverse order of registration, with loops
 * and branches of their own; they check that the stack objects were never
 * destroyed.
 *
 * Expected: stdout deterministic, exit status 5.
 * (If a self-check fails, a destructor calls _exit(97) instead.)
 */
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

static int g_live_locals;    // RAII stack objects constructed and not destroyed
static int g_exit_attempts;  // how many errors were handled before exit()

struct Local {
  int id;
  explicit Local(int i) : id(i) { ++g_live_locals; }
  Local(const Local &) = delete;
  Local &operator=(const Local &) = delete;
  ~Local() { --g_live_locals; }
};

/* A global object whose destructor does real work after exit(). */
struct Journal {
  const char *name;
  std::vector<std::string> lines;
  explicit Journal(const char *n) : name(n) {}
  void add(const std::string &s) { lines.push_back(s); }
  ~Journal() {
    size_t chars = 0;
    int long_lines = 0;
    for (const std::string &l : lines) {
      chars += l.size();
      if (l.size() > 12) long_lines++;
    }
    std::printf("~Journal(%s): %zu lines, %zu chars, %d long\n", name, lines.size(), chars,
                long_lines);
    for (size_t i = 0; i < lines.size() && i < 3; i++)
      std::printf("  %s[%zu] = %s\n", name, i, lines[i].c_str());
  }
};

static Journal g_first("first");    // constructed first: destroyed last
static Journal g_second("second");

struct Checker {
  int expected_live;
  Checker() : expected_live(-1) {}
  ~Checker() {
    int i, digits = 0;
    for (i = g_live_locals; i > 0; i /= 10) digits++;
    std::printf("~Checker: live stack objects %d (%d digits), errors handled %d\n",
                g_live_locals, digits, g_exit_attempts);
    if (g_live_locals != expected_live || g_live_locals != 4 || g_exit_attempts != 5) {
      std::printf("SELF-CHECK FAILED\n");
      std::fflush(stdout);
      _exit(97);
    }
  }
};

static Checker &checker() {
  static Checker c;  // function-local static: destructor registered on first call
  return c;
}

static void at_exit_handler() {
  long s = 0;
  for (int i = 0; i < 10; i++) s += (i % 3 == 0) ? i : -1;
  std::printf("atexit handler: %ld\n", s);
}

/* ---- the deep part ------------------------------------------------- */

static int compute(int round, int i) {
  int acc = 0;
  for (int k = 0; k < 4; k++) {
    acc += k * i;
    if (round >= 1 && i == 2 && k == 1)
      throw std::runtime_error("compute failed in round " + std::to_string(round));
  }
  return acc;
}

static void handle(const std::runtime_error &e, int round) {
  g_exit_attempts++;
  g_second.add(std::string("handled: ") + e.what());
  if (round == 3) {
    Local in_handler(99);          // also never destroyed
    checker().expected_live = g_live_locals;
    std::printf("exit(5) from a catch block, live locals %d\n", g_live_locals);
    std::exit(5);
  }
}

static int level4(int round) {
  Local guard(4);
  int s = 0;
  for (int i = 0; i < 5; i++) {
    try {
      s += compute(round, i);
    } catch (const std::runtime_error &e) {
      handle(e, round);             // exit() happens in here, inside the catch
      s -= 100;
    }
  }
  return s;
}

static int level3(int round) {
  std::string tag = "round-" + std::to_string(round);
  Local guard(3);
  int s = 0;
  for (int j = 0; j < 2; j++) {
    s += level4(round);
    if (j == 0) g_first.add(tag);
  }
  return s;
}

static int level2(int round) {
  try {
    return level3(round) + 1;
  } catch (const std::logic_error &) {  // never matches
    return -1;
  }
}

static int level1() {
  std::vector<int> results;
  Local guard(1);
  for (int round = 0; round < 6; round++) {
    results.push_back(level2(round));
    std::printf("round %d -> %d\n", round, results.back());
  }
  return static_cast<int>(results.size());
}

int main() {
  checker();                         // construct the local static now
  std::atexit(at_exit_handler);      // registered after it: runs before it
  try {
    level1();
  } catch (...) {
    std::printf("main: not reached\n");
  }
  std::printf("main: not reached either\n");
  return 0;
}
