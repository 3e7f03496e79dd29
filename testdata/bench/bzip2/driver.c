/*
 * bzip2 workload: BWT compression (block sizes 100k, 400k and 900k, a low work factor that
 * forces the fallback sort on repetitive data) and decompression, fast and `small` modes,
 * streamed through small buffers. libbz2 from bzip2-sys (see BUILD; BZ_NO_STDIO).
 *
 *     ./bzip2-bench [SIZE]     corpus of SIZE x 64 KiB (default in BUILD)
 *
 * Prints one line per step and "size N checksum: XXXXXXXX" last; exit 1 on a round-trip error.
 */
#include "bench.h"
#include "bzlib.h"

static int failures;

/* bzip2 with BZ_NO_STDIO calls this on an internal error */
void bz_internal_error(int errcode) {
  fprintf(stderr, "bzip2 internal error %d\n", errcode);
  exit(3);
}

static size_t squeeze(const char *in, size_t n, int block100k, int work, size_t chunk,
                      char *out, size_t cap) {
  bz_stream s;
  size_t pos = 0;
  int rc;
  memset(&s, 0, sizeof s);
  if (BZ2_bzCompressInit(&s, block100k, 0, work) != BZ_OK) { failures++; return 0; }
  s.next_out = out;
  s.avail_out = (unsigned)cap;
  do {
    size_t take = n - pos < chunk ? n - pos : chunk;
    s.next_in = (char *)in + pos;
    s.avail_in = (unsigned)take;
    pos += take;
    rc = BZ2_bzCompress(&s, pos == n ? BZ_FINISH : BZ_RUN);
  } while (rc == BZ_RUN_OK || (rc == BZ_FINISH_OK && s.avail_out > 0));
  if (rc != BZ_STREAM_END) failures++;
  BZ2_bzCompressEnd(&s);
  return cap - s.avail_out;
}

static size_t unsqueeze(const char *in, size_t n, int small, size_t chunk, char *out, size_t cap) {
  bz_stream s;
  size_t used = 0;
  int rc;
  memset(&s, 0, sizeof s);
  if (BZ2_bzDecompressInit(&s, 0, small) != BZ_OK) { failures++; return 0; }
  s.next_in = (char *)in;
  s.avail_in = (unsigned)n;
  do {
    size_t room = cap - used < chunk ? cap - used : chunk;
    s.next_out = out + used;
    s.avail_out = (unsigned)room;
    rc = BZ2_bzDecompress(&s);
    used += room - s.avail_out;
  } while (rc == BZ_OK && used < cap);
  if (rc != BZ_STREAM_END) failures++;
  BZ2_bzDecompressEnd(&s);
  return used;
}

int main(int argc, char **argv) {
  static const struct { const char *name; int block100k, work, small; size_t chunk; } cfg[] = {
      {"block 900k", 9, 0, 0, 1 << 16},
      {"block 100k, small decoder", 1, 0, 1, 4096},
      {"block 400k, work factor 1", 4, 1, 0, 1 << 14},
  };
  long size = bench_size(argc, argv, 32);
  size_t n = (size_t)size * 65536, cap = n + n / 50 + 4096, i;
  char *data = bench_xmalloc(n), *z = bench_xmalloc(cap), *back = bench_xmalloc(n);
  bench_gen_corpus(0x627a697032ull, (unsigned char *)data, n);
  /* a highly repetitive stretch: the main sort gives up on it and the fallback sort runs */
  {
    size_t k, len = n / 8;
    for (k = 0; k < len; k++) data[n / 2 + k] = "abcabcabdabcabcabe"[k % 18];
  }
  for (i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
    size_t zn = squeeze(data, n, cfg[i].block100k, cfg[i].work, cfg[i].chunk, z, cap);
    size_t bn = unsqueeze(z, zn, cfg[i].small, cfg[i].chunk, back, n);
    if (bn != n || memcmp(back, data, n) != 0) failures++;
    bench_hash_bytes(z, zn);
    bench_step(cfg[i].name, n, zn);
  }
  /* one-shot buffer API on small pieces */
  {
    size_t off, total = 0, count = 0;
    static char small[40000], b2[32768];
    for (off = 0; off + sizeof b2 <= n; off += 8 * sizeof b2) {
      unsigned zl = sizeof small, bl = sizeof b2;
      if (BZ2_bzBuffToBuffCompress(small, &zl, data + off, sizeof b2, 1, 0, 30) != BZ_OK) failures++;
      if (BZ2_bzBuffToBuffDecompress(b2, &bl, small, zl, 0, 0) != BZ_OK || bl != sizeof b2 ||
          memcmp(b2, data + off, sizeof b2))
        failures++;
      total += zl;
      count++;
    }
    bench_step("buff-to-buff 32 KiB pieces", count, total);
  }
  free(data);
  free(z);
  free(back);
  return bench_finish(size, failures);
}
