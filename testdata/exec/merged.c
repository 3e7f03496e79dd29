/*
 * merged.c - a run whose counts are the same every time, with a function of 2^12 acyclic paths
 * (hashed path counters in path mode), for the merge pattern: N runs writing one TALLY_PROFILE
 * with %m must give exactly N times one run. Usage: merged [ROUNDS] (default 300).
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static unsigned many_paths(unsigned x) {
  unsigned s = 0;
  if (x & 1) s += 1; else s ^= 3;
  if (x & 2) s += 2; else s ^= 5;
  if (x & 4) s += 4; else s ^= 7;
  if (x & 8) s += 8; else s ^= 11;
  if (x & 16) s += 16; else s ^= 13;
  if (x & 32) s += 32; else s ^= 17;
  if (x & 64) s += 64; else s ^= 19;
  if (x & 128) s += 128; else s ^= 23;
  if (x & 256) s += 256; else s ^= 29;
  if (x & 512) s += 512; else s ^= 31;
  if (x & 1024) s += 1024; else s ^= 37;
  if (x & 2048) s += 2048; else s ^= 41;
  return s;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 300;
  unsigned long acc = 0;
  for (int i = 0; i < rounds; i++)
    acc += many_paths((unsigned)i * 2654435761u >> 7);
  printf("%lu\n", acc);
  return 0;
}
