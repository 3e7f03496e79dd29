/*
 * xz / liblzma workload: .xz streams at presets 0 (hc3 match finder), 3 and 6 (bt4), an x86
 * BCJ + delta + LZMA2 filter chain, a raw LZMA1 (.lzma) stream, and streaming decompression
 * through small buffers; CRC32/CRC64/SHA-256 integrity checks. liblzma from lzma-sys (see BUILD).
 *
 *     ./xz-bench [SIZE]     corpus of SIZE x 64 KiB (default in BUILD)
 *
 * Prints one line per step and "size N checksum: XXXXXXXX" last; exit 1 on a round-trip error.
 */
#include "bench.h"
#include "lzma.h"

static int failures;

/* run an initialized stream over in[0..n), feeding inchunk, draining outchunk at a time */
static size_t pump(lzma_stream *s, const uint8_t *in, size_t n, size_t inchunk, size_t outchunk,
                   uint8_t *out, size_t cap) {
  size_t pos = 0, used = 0;
  lzma_ret rc;
  for (;;) {
    size_t room = cap - used < outchunk ? cap - used : outchunk;
    lzma_action act;
    if (s->avail_in == 0 && pos < n) {
      size_t take = n - pos < inchunk ? n - pos : inchunk;
      s->next_in = in + pos;
      s->avail_in = take;
      pos += take;
    }
    act = pos == n ? LZMA_FINISH : LZMA_RUN;
    s->next_out = out + used;
    s->avail_out = room;
    rc = lzma_code(s, act);
    used += room - s->avail_out;
    if (rc == LZMA_STREAM_END) break;
    if (rc != LZMA_OK || (used == cap && room == 0)) { failures++; break; }
  }
  lzma_end(s);
  return used;
}

static size_t decode_xz(const uint8_t *z, size_t zn, uint8_t *out, size_t cap) {
  lzma_stream s = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&s, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) { failures++; return 0; }
  return pump(&s, z, zn, 1 << 12, 1 << 13, out, cap);
}

int main(int argc, char **argv) {
  static const struct { const char *name; uint32_t preset; lzma_check check; size_t inchunk; } cfg[] = {
      {"xz preset 0, crc32", 0, LZMA_CHECK_CRC32, 1 << 16},
      {"xz preset 3, crc64", 3, LZMA_CHECK_CRC64, 1 << 14},
      {"xz preset 6, sha256", 6, LZMA_CHECK_SHA256, 1 << 16},
  };
  long size = bench_size(argc, argv, 12);
  size_t n = (size_t)size * 65536, cap = lzma_stream_buffer_bound(n), i;
  uint8_t *data = bench_xmalloc(n), *z = bench_xmalloc(cap), *back = bench_xmalloc(n);
  bench_gen_corpus(0x787a6c7a6dull, data, n);
  bench_step("crc64", lzma_crc64(data, n, 0), lzma_crc32(data, n, 0));
  for (i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
    lzma_stream s = LZMA_STREAM_INIT;
    size_t zn = 0, bn;
    if (lzma_easy_encoder(&s, cfg[i].preset, cfg[i].check) != LZMA_OK) failures++;
    else zn = pump(&s, data, n, cfg[i].inchunk, 1 << 14, z, cap);
    bn = decode_xz(z, zn, back, n);
    if (bn != n || memcmp(back, data, n) != 0) failures++;
    bench_hash_bytes(z, zn);
    bench_step(cfg[i].name, n, zn);
  }
  /* filter chain: x86 BCJ + delta + LZMA2 (one-shot buffer API) on the first quarter */
  {
    lzma_options_lzma lz;
    lzma_options_delta dl = {LZMA_DELTA_TYPE_BYTE, 2};
    lzma_filter f[4];
    size_t m = n / 4, zpos = 0, inpos = 0, outpos = 0;
    uint64_t limit = UINT64_MAX;
    lzma_lzma_preset(&lz, 2);
    lz.mf = LZMA_MF_BT2;
    f[0].id = LZMA_FILTER_X86; f[0].options = NULL;
    f[1].id = LZMA_FILTER_DELTA; f[1].options = &dl;
    f[2].id = LZMA_FILTER_LZMA2; f[2].options = &lz;
    f[3].id = LZMA_VLI_UNKNOWN; f[3].options = NULL;
    if (lzma_stream_buffer_encode(f, LZMA_CHECK_CRC64, NULL, data, m, z, &zpos, cap) != LZMA_OK) failures++;
    if (lzma_stream_buffer_decode(&limit, 0, NULL, z, &inpos, zpos, back, &outpos, n) != LZMA_OK ||
        outpos != m || memcmp(back, data, m))
      failures++;
    bench_hash_bytes(z, zpos);
    bench_step("x86+delta+lzma2 filters", m, zpos);
  }
  /* legacy .lzma (LZMA1, hc4 match finder) streamed both ways */
  {
    lzma_options_lzma lz;
    lzma_stream s = LZMA_STREAM_INIT, d = LZMA_STREAM_INIT;
    size_t zn = 0, bn = 0, m = n / 2;
    lzma_lzma_preset(&lz, 4);
    lz.mf = LZMA_MF_HC4;
    lz.dict_size = 1 << 20;
    if (lzma_alone_encoder(&s, &lz) != LZMA_OK) failures++;
    else zn = pump(&s, data + n / 4, m, 1 << 15, 1 << 12, z, cap);
    if (lzma_alone_decoder(&d, UINT64_MAX) != LZMA_OK) failures++;
    else bn = pump(&d, z, zn, 1 << 10, 1 << 11, back, n);
    if (bn != m || memcmp(back, data + n / 4, m)) failures++;
    bench_hash_bytes(z, zn);
    bench_step("lzma-alone hc4", m, zn);
  }
  free(data); free(z); free(back);
  return bench_finish(size, failures);
}
