/*
 * zlib workload: deflate + inflate of a generated corpus at several levels and strategies,
 * streamed through small buffers, plus crc32/adler32. zlib from libz-sys (see BUILD).
 *
 *     ./zlib-bench [SIZE]     corpus of SIZE x 64 KiB per round (default in BUILD)
 *
 * Prints one line per step and "size N checksum: XXXXXXXX" last; exit 1 on a round-trip error.
 */
#include "bench.h"
#include "zlib.h"

static int failures;

/* Compress in with deflate(level, strategy, windowBits), feeding `inchunk` bytes and draining
 * `outchunk` at a time; returns the compressed size, writes to *out (caller frees). */
static size_t squeeze(const unsigned char *in, size_t n, int level, int strategy, int wbits,
                      size_t inchunk, size_t outchunk, unsigned char **out) {
  z_stream s;
  size_t cap = deflateBound(NULL, (uLong)n) + 1024, used = 0, pos = 0;
  unsigned char *buf = bench_xmalloc(cap);
  int rc;
  memset(&s, 0, sizeof s);
  if (deflateInit2(&s, level, Z_DEFLATED, wbits, 8, strategy) != Z_OK) { failures++; *out = buf; return 0; }
  do {
    size_t take = n - pos < inchunk ? n - pos : inchunk;
    int flush = pos + take == n ? Z_FINISH : Z_NO_FLUSH;
    s.next_in = (unsigned char *)in + pos;
    s.avail_in = (uInt)take;
    pos += take;
    do {
      size_t room = cap - used < outchunk ? cap - used : outchunk;
      s.next_out = buf + used;
      s.avail_out = (uInt)room;
      rc = deflate(&s, flush);
      used += room - s.avail_out;
    } while (s.avail_out == 0 && used < cap);
  } while (rc != Z_STREAM_END && rc >= 0);
  if (rc != Z_STREAM_END) failures++;
  deflateEnd(&s);
  *out = buf;
  return used;
}

static size_t unsqueeze(const unsigned char *in, size_t n, int wbits, size_t outchunk,
                        unsigned char *out, size_t cap) {
  z_stream s;
  size_t used = 0;
  int rc;
  memset(&s, 0, sizeof s);
  if (inflateInit2(&s, wbits) != Z_OK) { failures++; return 0; }
  s.next_in = (unsigned char *)in;
  s.avail_in = (uInt)n;
  do {
    size_t room = cap - used < outchunk ? cap - used : outchunk;
    s.next_out = out + used;
    s.avail_out = (uInt)room;
    rc = inflate(&s, Z_NO_FLUSH);
    used += room - s.avail_out;
  } while (rc == Z_OK && used < cap);
  if (rc != Z_STREAM_END) failures++;
  inflateEnd(&s);
  return used;
}

int main(int argc, char **argv) {
  static const struct { const char *name; int level, strategy, wbits; size_t inchunk, outchunk; } cfg[] = {
      {"deflate level 1", 1, Z_DEFAULT_STRATEGY, 15, 1 << 16, 1 << 14},
      {"deflate level 6", 6, Z_DEFAULT_STRATEGY, 15, 1 << 14, 1 << 12},
      {"deflate level 9", 9, Z_DEFAULT_STRATEGY, 15, 1 << 16, 1 << 16},
      {"gzip level 4 filtered", 4, Z_FILTERED, 31, 4096, 4096},
      {"raw level 6 window 2^10", 6, Z_DEFAULT_STRATEGY, -10, 1 << 16, 1 << 13},
      {"huffman only", 6, Z_HUFFMAN_ONLY, 15, 1 << 16, 1 << 14},
      {"rle", 6, Z_RLE, 15, 1 << 16, 1 << 14},
  };
  long size = bench_size(argc, argv, 64);
  size_t n = (size_t)size * 65536, i;
  unsigned char *data = bench_xmalloc(n), *back = bench_xmalloc(n);
  bench_gen_corpus(0x7a6c6962ull, data, n);
  bench_step("crc32", crc32(0L, data, (uInt)n), adler32(1L, data, (uInt)n));
  for (i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
    unsigned char *z;
    size_t zn = squeeze(data, n, cfg[i].level, cfg[i].strategy, cfg[i].wbits, cfg[i].inchunk,
                        cfg[i].outchunk, &z);
    size_t bn = unsqueeze(z, zn, cfg[i].wbits, 1 << 12, back, n);
    if (bn != n || memcmp(back, data, n) != 0) failures++;
    bench_hash_bytes(z, zn);
    bench_step(cfg[i].name, n, zn);
    free(z);
  }
  /* one-shot API: many small buffers (per-call setup cost dominates) */
  {
    uLong total = 0;
    size_t off;
    unsigned char small[8192];
    for (off = 0; off + 2048 <= n; off += 2048 * 16) {
      uLongf zl = sizeof small, bl = 2048;
      unsigned char b2[2048];
      if (compress2(small, &zl, data + off, 2048, (int)(off / 2048 % 9) + 1) != Z_OK) failures++;
      if (uncompress(b2, &bl, small, zl) != Z_OK || bl != 2048 || memcmp(b2, data + off, 2048)) failures++;
      total += zl;
    }
    bench_step("compress2 2 KiB pieces", n / (2048 * 16), total);
  }
  free(data);
  free(back);
  return bench_finish(size, failures);
}
