/*
 * zstd workload: streaming compression at levels 1, 3, 7 and 16 (fast, double-fast, lazy and
 * optimal-parse match finders), a small-window level with checksums, streaming decompression
 * through small buffers, and a trained dictionary used on many small records (ZDICT
 * fastcover + CDict/DDict). libzstd from zstd-sys (see BUILD).
 *
 *     ./zstd-bench [SIZE]     corpus of SIZE x 64 KiB (default in BUILD)
 *
 * Prints one line per step and "size N checksum: XXXXXXXX" last; exit 1 on a round-trip error.
 */
#include "bench.h"
#define ZSTD_STATIC_LINKING_ONLY
#include "zstd.h"
#define ZDICT_STATIC_LINKING_ONLY
#include "zdict.h"

static int failures;

static size_t squeeze(const void *in, size_t n, int level, int wlog, int check, size_t inchunk,
                      size_t outchunk, unsigned char *out, size_t cap) {
  ZSTD_CCtx *c = ZSTD_createCCtx();
  size_t pos = 0, used = 0, rem;
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, check);
  if (wlog) ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, wlog);
  do {
    size_t take = n - pos < inchunk ? n - pos : inchunk;
    ZSTD_inBuffer ib = {(const char *)in + pos, take, 0};
    ZSTD_EndDirective mode = pos + take == n ? ZSTD_e_end : ZSTD_e_continue;
    pos += take;
    do {
      size_t room = cap - used < outchunk ? cap - used : outchunk;
      ZSTD_outBuffer ob = {out + used, room, 0};
      rem = ZSTD_compressStream2(c, &ob, &ib, mode);
      if (ZSTD_isError(rem)) { failures++; ZSTD_freeCCtx(c); return used; }
      used += ob.pos;
    } while (mode == ZSTD_e_end ? rem != 0 : ib.pos < ib.size);
  } while (pos < n);
  ZSTD_freeCCtx(c);
  return used;
}

static size_t unsqueeze(const void *in, size_t n, size_t inchunk, size_t outchunk,
                        unsigned char *out, size_t cap) {
  ZSTD_DCtx *d = ZSTD_createDCtx();
  size_t pos = 0, used = 0, rc = 1;
  while (pos < n) {
    size_t take = n - pos < inchunk ? n - pos : inchunk;
    ZSTD_inBuffer ib = {(const char *)in + pos, take, 0};
    while (ib.pos < ib.size || rc == 0) {
      size_t room = cap - used < outchunk ? cap - used : outchunk;
      ZSTD_outBuffer ob = {out + used, room, 0};
      rc = ZSTD_decompressStream(d, &ob, &ib);
      if (ZSTD_isError(rc)) { failures++; ZSTD_freeDCtx(d); return used; }
      used += ob.pos;
      if (ob.pos < ob.size) break; /* needs more input */
    }
    pos += take;
  }
  ZSTD_freeDCtx(d);
  return used;
}

int main(int argc, char **argv) {
  static const struct { const char *name; int level, wlog, check; size_t inchunk, outchunk; } cfg[] = {
      {"level 1", 1, 0, 0, 1 << 17, 1 << 17},
      {"level 3, checksum", 3, 0, 1, 1 << 14, 1 << 12},
      {"level 7", 7, 0, 0, 1 << 17, 1 << 16},
      {"level 5, window 2^12", 5, 12, 1, 1 << 16, 1 << 14},
      {"level -5", -5, 0, 0, 1 << 16, 1 << 14},
  };
  long size = bench_size(argc, argv, 128);
  size_t n = (size_t)size * 65536, cap = ZSTD_compressBound(n), i;
  unsigned char *data = bench_xmalloc(n), *z = bench_xmalloc(cap), *back = bench_xmalloc(n);
  bench_gen_corpus(0x7a737464ull, data, n);
  for (i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
    size_t zn = squeeze(data, n, cfg[i].level, cfg[i].wlog, cfg[i].check, cfg[i].inchunk,
                        cfg[i].outchunk, z, cap);
    size_t bn = unsqueeze(z, zn, 1 << 13, 1 << 12, back, n);
    if (bn != n || memcmp(back, data, n) != 0) failures++;
    bench_hash_bytes(z, zn);
    bench_step(cfg[i].name, n, zn);
  }
  /* optimal parsing (btultra) on a slice: slow per byte */
  {
    size_t m = n / 8;
    size_t zn = ZSTD_compress(z, cap, data, m, 16);
    size_t bn = ZSTD_decompress(back, n, z, zn);
    if (ZSTD_isError(zn) || bn != m || memcmp(back, data, m)) failures++;
    bench_hash_bytes(z, ZSTD_isError(zn) ? 0 : zn);
    bench_step("level 16, one shot", m, zn);
  }
  /* dictionary: train on log records, then compress many small records with it */
  {
    enum { REC = 512, NSAMP = 2000 };
    size_t m = (size_t)size * 2048, nrec = m / 16, k, total = 0, dsize;
    unsigned char *recs = bench_xmalloc(REC * (NSAMP + nrec / 64 + 1));
    size_t *sizes = bench_xmalloc(sizeof(size_t) * NSAMP);
    unsigned char dict[16384], rz[2 * REC], rb[REC];
    bench_rng r;
    ZDICT_fastCover_params_t fp;
    ZSTD_CDict *cd;
    ZSTD_DDict *dd;
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_DCtx *d = ZSTD_createDCtx();
    bench_seed(&r, 42);
    for (k = 0; k < NSAMP; k++) {
      sizes[k] = 64 + bench_below(&r, REC - 64);
      bench_gen_records(&r, recs + k * REC, REC);
    }
    /* samples must be contiguous */
    {
      size_t off = 0;
      for (k = 0; k < NSAMP; k++) { memmove(recs + off, recs + k * REC, sizes[k]); off += sizes[k]; }
    }
    memset(&fp, 0, sizeof fp);
    fp.k = 200; fp.d = 8; fp.steps = 4; fp.f = 18; fp.accel = 1;
    fp.zParams.compressionLevel = 3;
    dsize = ZDICT_optimizeTrainFromBuffer_fastCover(dict, sizeof dict, recs, sizes, NSAMP, &fp);
    if (ZDICT_isError(dsize)) { failures++; dsize = 0; }
    bench_hash_bytes(dict, dsize);
    bench_step("dictionary trained", NSAMP, dsize);
    cd = ZSTD_createCDict(dict, dsize, 3);
    dd = ZSTD_createDDict(dict, dsize);
    for (k = 0; k < nrec; k++) {
      size_t len = 64 + bench_below(&r, REC - 64), zl, bl;
      bench_gen_records(&r, recs, len);
      zl = ZSTD_compress_usingCDict(c, rz, sizeof rz, recs, len, cd);
      bl = ZSTD_decompress_usingDDict(d, rb, sizeof rb, rz, ZSTD_isError(zl) ? 0 : zl, dd);
      if (ZSTD_isError(zl) || bl != len || memcmp(rb, recs, len)) failures++;
      else total += zl;
    }
    bench_step("records with dictionary", nrec, total);
    ZSTD_freeCDict(cd); ZSTD_freeDDict(dd); ZSTD_freeCCtx(c); ZSTD_freeDCtx(d);
    free(recs); free(sizes);
  }
  free(data); free(z); free(back);
  return bench_finish(size, failures);
}
