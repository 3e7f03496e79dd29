/*
 * wordfreq.c - count word frequencies and print the most common words.
 *
 *     wordfreq [FILE] [N]
 *
 * Reads FILE (or a short built-in text when no FILE is given), splits it
 * into words (letters and apostrophes, case-folded), counts them in a
 * hash table, sorts by count (then alphabetically) and prints the top N
 * (default 10). A small, readable demo program for tally.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WORD 64

static const char builtin_text[] =
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox "
    "runs on. A fox is quick and a dog is lazy, or so the story goes.";

/* ---- hash table: separate chaining, grows when it gets full ---- */

struct entry {
  char *word;
  long count;
  struct entry *next;
};

struct table {
  struct entry **buckets;
  size_t nbuckets;
  size_t nwords; /* distinct words */
};

static unsigned long hash_word(const char *s) {
  unsigned long h = 2166136261UL; /* FNV-1a */
  while (*s) {
    h ^= (unsigned char)*s++;
    h *= 16777619UL;
  }
  return h;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (p == NULL) {
    fprintf(stderr, "wordfreq: out of memory\n");
    exit(1);
  }
  return p;
}

static void table_init(struct table *t, size_t nbuckets) {
  t->buckets = xmalloc(nbuckets * sizeof *t->buckets);
  memset(t->buckets, 0, nbuckets * sizeof *t->buckets);
  t->nbuckets = nbuckets;
  t->nwords = 0;
}

static void table_grow(struct table *t) {
  struct table bigger;
  size_t i;
  table_init(&bigger, t->nbuckets * 2);
  for (i = 0; i < t->nbuckets; i++) {
    struct entry *e = t->buckets[i];
    while (e != NULL) {
      struct entry *next = e->next;
      size_t b = hash_word(e->word) % bigger.nbuckets;
      e->next = bigger.buckets[b];
      bigger.buckets[b] = e;
      e = next;
    }
  }
  bigger.nwords = t->nwords;
  free(t->buckets);
  *t = bigger;
}

static void table_add(struct table *t, const char *word) {
  size_t b = hash_word(word) % t->nbuckets;
  struct entry *e;
  for (e = t->buckets[b]; e != NULL; e = e->next) {
    if (strcmp(e->word, word) == 0) {
      e->count++;
      return;
    }
  }
  e = xmalloc(sizeof *e);
  e->word = xmalloc(strlen(word) + 1);
  strcpy(e->word, word);
  e->count = 1;
  e->next = t->buckets[b];
  t->buckets[b] = e;
  t->nwords++;
  if (t->nwords > t->nbuckets * 3 / 4) table_grow(t);
}

static void table_free(struct table *t) {
  size_t i;
  for (i = 0; i < t->nbuckets; i++) {
    struct entry *e = t->buckets[i];
    while (e != NULL) {
      struct entry *next = e->next;
      free(e->word);
      free(e);
      e = next;
    }
  }
  free(t->buckets);
}

/* ---- reading words ---- */

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  char *buf;
  size_t cap = 4096, len = 0, n;
  if (f == NULL) return NULL;
  buf = xmalloc(cap);
  while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (len + 1 == cap) {
      char *bigger = xmalloc(cap * 2);
      memcpy(bigger, buf, len);
      free(buf);
      buf = bigger;
      cap *= 2;
    }
  }
  fclose(f);
  buf[len] = '\0';
  return buf;
}

static int is_word_char(int c) { return isalpha(c) || c == '\''; }

/* Split text into lower-case words and add each to the table. */
static long count_words(struct table *t, const char *text) {
  char word[MAX_WORD];
  size_t len = 0;
  long total = 0;
  const char *p;
  for (p = text;; p++) {
    int c = (unsigned char)*p;
    if (c != '\0' && is_word_char(c)) {
      if (len < MAX_WORD - 1) word[len++] = (char)tolower(c);
      continue;
    }
    /* end of a word: strip apostrophes at either end */
    while (len > 0 && word[len - 1] == '\'') len--;
    if (len > 0) {
      size_t start = 0;
      word[len] = '\0';
      while (word[start] == '\'') start++;
      if (word[start] != '\0') {
        table_add(t, word + start);
        total++;
      }
    }
    len = 0;
    if (c == '\0') break;
  }
  return total;
}

/* ---- sorting and output ---- */

static int by_count_then_word(const void *a, const void *b) {
  const struct entry *x = *(const struct entry *const *)a;
  const struct entry *y = *(const struct entry *const *)b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  return strcmp(x->word, y->word);
}

int main(int argc, char **argv) {
  struct table t;
  struct entry **all;
  char *text = NULL;
  const char *source = "built-in text";
  long total, shown;
  size_t i, k = 0;
  int top = 10;

  if (argc > 1) {
    text = read_file(argv[1]);
    if (text == NULL) {
      fprintf(stderr, "wordfreq: cannot read %s\n", argv[1]);
      return 1;
    }
    source = argv[1];
  }
  if (argc > 2) top = atoi(argv[2]);
  if (top <= 0) top = 10;

  table_init(&t, 16);
  total = count_words(&t, text ? text : builtin_text);

  /* collect all entries into an array and sort it */
  all = xmalloc((t.nwords ? t.nwords : 1) * sizeof *all);
  for (i = 0; i < t.nbuckets; i++) {
    struct entry *e;
    for (e = t.buckets[i]; e != NULL; e = e->next) all[k++] = e;
  }
  qsort(all, k, sizeof *all, by_count_then_word);

  printf("%ld words, %zu distinct (%s)\n", total, t.nwords, source);
  shown = 0;
  for (i = 0; i < k && i < (size_t)top; i++) {
    printf("%4zu. %-14s %5ld  ", i + 1, all[i]->word, all[i]->count);
    /* a little bar chart, scaled to the most frequent word */
    {
      long bar = all[i]->count * 30 / all[0]->count, j;
      for (j = 0; j < bar; j++) putchar('#');
    }
    putchar('\n');
    shown += all[i]->count;
  }
  if (total > 0)
    printf("top %d words cover %ld%% of the text\n", top, shown * 100 / total);

  free(all);
  table_free(&t);
  free(text);
  return 0;
}
