/*
 * Regular-expression workload on PCRE2's interpreter (pcre2_match, no JIT): a dozen patterns
 * with backreferences, conditionals, lookaround, lazy/possessive/atomic quantifiers, caseless
 * and Unicode-property matching, run over every line of generated prose and log records;
 * plus global substitution and the DFA matcher. PCRE2 from pcre2-sys (see BUILD).
 *
 *     ./pcre2-bench [SIZE]     SIZE x 16 KiB of subject text (default in BUILD)
 *
 * Prints one line per pattern and "size N checksum: XXXXXXXX" last; exit 1 on an error.
 */
#include "bench.h"
#define PCRE2_CODE_UNIT_WIDTH 8
#include "pcre2.h"

static int failures;

static const char *const patterns[] = {
    "\\b(\\w+)\\s+\\1\\b",                                   /* doubled word (backreference) */
    "(?i)\\b(?:b|d|k)\\w*?(?:a|o)[rstn]\\b",                /* caseless, lazy */
    "^\\d+ (ERROR|WARN) \\[(\\w+)\\].*status=(5\\d\\d)",     /* anchored record filter */
    "[A-Z][a-z]+(?:[ ,]+[a-z]+){3,8}\\.",                    /* a sentence of 4-9 words */
    "(\\w)(\\w)?(\\w)?\\w?(?(3)\\3)(?(2)\\2)\\1",              /* palindromes (conditionals) */
    "req=(?=[0-9a-f]*[a-f]{3})([0-9a-f]{8})",                /* lookahead */
    "(?<=user=)\\d{2,}+(?=\\s)",                             /* lookbehind, possessive */
    "(?>\\w+)\\s*(?:=|;)",                                   /* atomic group */
    "\\p{Lu}\\p{Ll}+(?:\\s+\\p{Ll}+){0,3}?\\s*[.,;]",        /* Unicode properties */
    "(?:[aeiou][^aeiou\\s]){3,}",                            /* repeated alternation */
    "(a|e|i|o|u)[^\\n]{0,40}?\\1[^\\n]{0,40}?\\1",          /* backtracking with bounds */
    "(?:latency_ms|bytes)=(\\d+)\\b(?:(?!status).)*$",       /* tempered greedy token */
};

int main(int argc, char **argv) {
  long size = bench_size(argc, argv, 120);
  size_t n = (size_t)size * 16384, np = sizeof patterns / sizeof patterns[0], i;
  unsigned char *text = bench_xmalloc(n + 1);
  pcre2_code *code[sizeof patterns / sizeof patterns[0]];
  pcre2_match_data *md = pcre2_match_data_create(32, NULL);
  bench_rng r;
  bench_seed(&r, 0x70637265ull);
  /* alternate prose and records in 2-8 KiB pieces */
  {
    size_t o = 0;
    while (o < n) {
      size_t k = 2048 + bench_below(&r, 6144);
      if (k > n - o) k = n - o;
      o += (bench_below(&r, 2) ? bench_gen_text : bench_gen_records)(&r, text + o, k);
    }
    text[n] = 0;
  }
  for (i = 0; i < np; i++) {
    int err;
    PCRE2_SIZE off;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | (i == 2 || i == 11 ? PCRE2_MULTILINE : 0);
    code[i] = pcre2_compile((PCRE2_SPTR)patterns[i], PCRE2_ZERO_TERMINATED, opts, &err, &off, NULL);
    if (!code[i]) { fprintf(stderr, "pattern %zu: error %d at %zu\n", i, err, (size_t)off); return 1; }
  }
  /* every pattern over every line: all matches */
  for (i = 0; i < np; i++) {
    uint64_t matches = 0, acc = 0;
    size_t line = 0;
    char name[32];
    while (line < n) {
      const unsigned char *nl = memchr(text + line, '\n', n - line);
      size_t end = nl ? (size_t)(nl - text) : n, start = line;
      while (start <= end) {
        int rc = pcre2_match(code[i], text + line, end - line, start - line, 0, md, NULL);
        PCRE2_SIZE *ov;
        int g;
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) { failures++; break; }
        ov = pcre2_get_ovector_pointer(md);
        matches++;
        for (g = 0; g < rc; g++) acc = acc * 31 + (ov[2 * g] == PCRE2_UNSET ? 7 : ov[2 * g + 1] - ov[2 * g]);
        start = line + (ov[1] > ov[0] ? ov[1] : ov[0] + 1);
      }
      line = end + 1;
    }
    snprintf(name, sizeof name, "pattern %zu", i);
    bench_step(name, matches, acc);
  }
  /* global substitution on the whole text */
  {
    pcre2_code *c;
    int err;
    PCRE2_SIZE off, outlen = 2 * n + 1024;
    PCRE2_UCHAR *out = bench_xmalloc(outlen);
    c = pcre2_compile((PCRE2_SPTR) "\\b(\\w+?)(ing|ed|es)\\b", PCRE2_ZERO_TERMINATED, 0, &err, &off, NULL);
    if (!c) failures++;
    else {
      int rc = pcre2_substitute(c, text, n, 0, PCRE2_SUBSTITUTE_GLOBAL | PCRE2_SUBSTITUTE_EXTENDED,
                                md, NULL, (PCRE2_SPTR) "${1:+<$1>:-}${2:+[$2]:-}", PCRE2_ZERO_TERMINATED,
                                out, &outlen);
      if (rc < 0) failures++;
      else bench_hash_bytes(out, outlen);
      bench_step("substitute", rc < 0 ? 0 : (uint64_t)rc, outlen);
      pcre2_code_free(c);
    }
    free(out);
  }
  /* DFA matcher: every leftmost match of an alternation of words */
  {
    pcre2_code *c;
    int err, ws[1000];
    PCRE2_SIZE off, start = 0;
    uint64_t matches = 0, acc = 0;
    char pat[512];
    int k, len = 0;
    bench_make_vocab();
    for (k = 0; k < 24; k++) len += snprintf(pat + len, sizeof pat - (size_t)len, "%s%s", k ? "|" : "\\b(?:", bench_vocab[k * 7]);
    snprintf(pat + len, sizeof pat - (size_t)len, ")\\w*");
    c = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_CASELESS, &err, &off, NULL);
    if (!c) failures++;
    else {
      while (start < n) {
        int rc = pcre2_dfa_match(c, text, n, start, 0, md, NULL, ws, sizeof ws / sizeof ws[0]);
        PCRE2_SIZE *ov;
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) { failures++; break; }
        ov = pcre2_get_ovector_pointer(md);
        matches++;
        acc = acc * 31 + (ov[1] - ov[0]) + (uint64_t)rc;
        start = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
      }
      pcre2_code_free(c);
    }
    bench_step("dfa alternation", matches, acc);
  }
  for (i = 0; i < np; i++) pcre2_code_free(code[i]);
  pcre2_match_data_free(md);
  free(text);
  return bench_finish(size, failures);
}
