/*
 * bench.h - shared helpers of tally's benchmark workload drivers (testdata/bench/<program>/).
 *
 * Deterministic input only: a fixed-seed PRNG (splitmix64 seeding xoshiro256**), generated
 * text, log records and binary data, an FNV-1a checksum of everything a driver wants to
 * vouch for, and the SIZE argument. No time, no addresses, no environment reach the output.
 *
 * Header-only (static functions) so that each driver is one translation unit of its own and
 * gets the same instrumentation as the library it drives.
 *
 * Drivers must give the same output with every compiler: never draw two PRNG values in the
 * arguments of one call (their evaluation order is unspecified, and gcc and clang differ).
 */
#ifndef TALLY_BENCH_H
#define TALLY_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- PRNG ------------------------------------------------------------------------------ */

typedef struct { uint64_t s[4]; } bench_rng;

static uint64_t bench_splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void bench_seed(bench_rng *r, uint64_t seed) {
  int i;
  for (i = 0; i < 4; i++) r->s[i] = bench_splitmix64(&seed);
}

static uint64_t bench_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t bench_next(bench_rng *r) { /* xoshiro256** */
  uint64_t *s = r->s;
  uint64_t result = bench_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
  s[2] ^= t; s[3] = bench_rotl(s[3], 45);
  return result;
}

/* uniform in [0, n), n > 0 (multiply-shift; the tiny bias is irrelevant here) */
static uint32_t bench_below(bench_rng *r, uint32_t n) {
  return (uint32_t)(((bench_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* skewed towards 0: roughly Zipf-like index in [0, n) */
static uint32_t bench_skewed(bench_rng *r, uint32_t n) {
  uint64_t a = bench_below(r, n), b = bench_below(r, n);
  return (uint32_t)(a * b / n);
}

/* ---- checksum (FNV-1a, 32 bit) ------------------------------------------------------------ */

static uint32_t bench_hash = 2166136261u;

static void bench_hash_bytes(const void *p, size_t n) {
  const unsigned char *s = (const unsigned char *)p;
  uint32_t h = bench_hash;
  size_t i;
  for (i = 0; i < n; i++) { h ^= s[i]; h *= 16777619u; }
  bench_hash = h;
}

static void bench_hash_u64(uint64_t v) {
  unsigned char b[8];
  int i;
  for (i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
  bench_hash_bytes(b, 8);
}

/* one line per step: "<name> <a> <b> <hash>"; the values are folded into the checksum too */
static void bench_step(const char *name, uint64_t a, uint64_t b) {
  bench_hash_bytes(name, strlen(name));
  bench_hash_u64(a);
  bench_hash_u64(b);
  printf("%-28s %12llu %12llu  %08x\n", name, (unsigned long long)a, (unsigned long long)b,
         (unsigned)bench_hash);
}

static int bench_finish(long size, int failures) {
  printf("size %ld checksum: %08x\n", size, (unsigned)bench_hash);
  if (failures) fprintf(stderr, "%d unexpected results\n", failures);
  fflush(stdout);
  return failures ? 1 : 0;
}

static long bench_size(int argc, char **argv, long dflt) {
  long n = dflt;
  if (argc > 1) {
    char *end;
    n = strtol(argv[1], &end, 10);
    if (*end || n < 1) {
      fprintf(stderr, "usage: %s [SIZE]   (SIZE >= 1, default %ld)\n", argv[0], dflt);
      exit(2);
    }
  }
  return n;
}

static void *bench_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) { fprintf(stderr, "out of memory (%zu bytes)\n", n); exit(1); }
  return p;
}

/* ---- generated data ------------------------------------------------------------------------ */

enum { BENCH_WORDS = 2048 };
static char bench_vocab[BENCH_WORDS][16];
static int bench_vocab_ready;

static void bench_make_vocab(void) {
  static const char cons[] = "bcdfghjklmnprstvwz", vow[] = "aeiouy";
  bench_rng r;
  int i, j;
  if (bench_vocab_ready) return;
  bench_seed(&r, 0x766f636162ull);
  for (i = 0; i < BENCH_WORDS; i++) {
    int syl = 1 + (int)bench_skewed(&r, 5), k = 0;
    for (j = 0; j < syl && k < 13; j++) {
      bench_vocab[i][k++] = cons[bench_below(&r, sizeof cons - 1)];
      bench_vocab[i][k++] = vow[bench_below(&r, sizeof vow - 1)];
      if (bench_below(&r, 3) == 0) bench_vocab[i][k++] = cons[bench_below(&r, sizeof cons - 1)];
    }
    bench_vocab[i][k] = 0;
  }
  bench_vocab_ready = 1;
}

/* English-like prose: Zipf-distributed words, punctuation, capitals, line breaks. */
static size_t bench_gen_text(bench_rng *r, unsigned char *out, size_t n) {
  size_t o = 0, col = 0;
  int cap = 1;
  bench_make_vocab();
  while (o < n) {
    const char *w = bench_vocab[bench_skewed(r, BENCH_WORDS)];
    size_t len = strlen(w), i;
    for (i = 0; i < len && o < n; i++, col++)
      out[o++] = (unsigned char)(i == 0 && cap ? w[i] - 32 : w[i]);
    cap = 0;
    if (o >= n) break;
    switch (bench_below(r, 16)) {
      case 0: out[o++] = '.'; cap = 1; break;
      case 1: out[o++] = ','; break;
      case 2: if (bench_below(r, 4) == 0) { out[o++] = ';'; } break;
      default: break;
    }
    if (o >= n) break;
    if (col > 64 + bench_below(r, 12)) { out[o++] = '\n'; col = 0; }
    else { out[o++] = ' '; col++; }
  }
  return o;
}

/* Log-like records: timestamps, levels, ids, hex, key=value pairs (very repetitive). */
static size_t bench_gen_records(bench_rng *r, unsigned char *out, size_t n) {
  static const char *lvl[] = {"INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"};
  static const char *key[] = {"user", "session", "bytes", "path", "status", "latency_ms"};
  char line[256];
  size_t o = 0;
  uint64_t ts = 1700000000000ull;
  bench_make_vocab();
  while (o < n) {
    int len, k;
    const char *level, *who;
    unsigned long long req;
    ts += bench_below(r, 5000);
    /* one PRNG call per statement: argument evaluation order differs between compilers */
    level = lvl[bench_below(r, 6)];
    who = bench_vocab[bench_skewed(r, 64)];
    req = (unsigned long long)(bench_next(r) & 0xffffffffull);
    len = snprintf(line, sizeof line, "%llu %s [%s] req=%08llx", (unsigned long long)ts, level,
                   who, req);
    for (k = 0; k < 6 && len < 200; k++)
      if (bench_below(r, 3))
        len += snprintf(line + len, sizeof line - (size_t)len, " %s=%u", key[k],
                        bench_skewed(r, k == 4 ? 600 : 100000));
    line[len++] = '\n';
    if ((size_t)len > n - o) len = (int)(n - o);
    memcpy(out + o, line, (size_t)len);
    o += (size_t)len;
  }
  return o;
}

/* Binary: slowly varying 16-bit samples, small structs, and a stretch of pure noise. */
static size_t bench_gen_binary(bench_rng *r, unsigned char *out, size_t n) {
  size_t o = 0;
  int32_t v = 0;
  while (o < n) {
    uint32_t kind = bench_below(r, 8), cnt = 64 + bench_below(r, 4096), i;
    for (i = 0; i < cnt && o < n; i++) {
      if (kind < 4) { /* samples */
        v += (int32_t)bench_below(r, 65) - 32;
        out[o++] = (unsigned char)v;
        if (o < n) out[o++] = (unsigned char)(v >> 8);
      } else if (kind < 7) { /* struct-like: tag, small counter, padding */
        out[o++] = (unsigned char)(i % 7 == 0 ? 0xA5 : (i & 3) ? 0 : i >> 2);
      } else { /* noise */
        out[o++] = (unsigned char)bench_next(r);
      }
    }
  }
  return o;
}

/* A mixed corpus: text, records and binary in chunks of a few KiB to a few hundred KiB. */
static size_t bench_gen_corpus(uint64_t seed, unsigned char *out, size_t n) {
  bench_rng r;
  size_t o = 0;
  bench_seed(&r, seed);
  while (o < n) {
    size_t chunk = 4096 + bench_below(&r, 256 * 1024);
    uint32_t kind = bench_below(&r, 10);
    if (chunk > n - o) chunk = n - o;
    if (kind < 5) o += bench_gen_text(&r, out + o, chunk);
    else if (kind < 8) o += bench_gen_records(&r, out + o, chunk);
    else o += bench_gen_binary(&r, out + o, chunk);
  }
  return o;
}

#endif /* TALLY_BENCH_H */
