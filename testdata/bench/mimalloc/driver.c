/*
 * Pointer-chasing workload on the mimalloc allocator: linked data structures built, walked,
 * rewired and torn down, every node allocated and freed through mimalloc (first-class heaps,
 * small, medium and large size classes, realloc, aligned allocation, heap destruction).
 * mimalloc from libmimalloc-sys (see BUILD); nothing overrides the system malloc.
 *
 *     ./mimalloc-bench [SIZE]     SIZE x 4096 elements per phase (default in BUILD)
 *
 * Phases: an unbalanced binary search tree (insert, search, delete, in-order walk), a singly
 * linked list merge-sorted and spliced, a chained hash table of strings with growth and
 * deletion, a random graph walked breadth first through adjacency lists, and a churn phase
 * (objects of random sizes freed in random order). Prints one line per phase and
 * "size N checksum: XXXXXXXX" last; exit 1 on an inconsistency.
 */
#include "bench.h"
#include "mimalloc.h"

static int failures;

/* ---- binary search tree ---------------------------------------------------------------- */
typedef struct tnode { uint64_t key; struct tnode *l, *r; uint32_t pad[4]; } tnode;

static tnode *t_insert(mi_heap_t *h, tnode *t, uint64_t key, int *added) {
  tnode **p = &t;
  while (*p) {
    if (key == (*p)->key) return t;
    p = key < (*p)->key ? &(*p)->l : &(*p)->r;
  }
  *p = mi_heap_malloc_small(h, sizeof(tnode));
  (*p)->key = key; (*p)->l = (*p)->r = NULL;
  *added = 1;
  return t;
}

static int t_find(const tnode *t, uint64_t key) {
  while (t && t->key != key) t = key < t->key ? t->l : t->r;
  return t != NULL;
}

static tnode *t_delete(tnode *t, uint64_t key, int *gone) {
  tnode **p = &t, *n;
  while (*p && (*p)->key != key) p = key < (*p)->key ? &(*p)->l : &(*p)->r;
  if (!*p) return t;
  n = *p;
  if (!n->l) *p = n->r;
  else if (!n->r) *p = n->l;
  else { /* splice in the successor */
    tnode **s = &n->r, *m;
    while ((*s)->l) s = &(*s)->l;
    m = *s; *s = m->r;
    m->l = n->l; m->r = n->r; *p = m;
  }
  mi_free(n);
  *gone = 1;
  return t;
}

static uint64_t t_walk(const tnode *t, uint64_t *count, uint64_t prev, int *sorted) {
  /* iterative in-order walk with an explicit (mimalloc-grown) stack */
  size_t cap = 64, sp = 0;
  const tnode **st = mi_malloc(cap * sizeof *st);
  uint64_t acc = 0;
  while (t || sp) {
    while (t) {
      if (sp == cap) { cap *= 2; st = mi_realloc(st, cap * sizeof *st); }
      st[sp++] = t; t = t->l;
    }
    t = st[--sp];
    if (*count && t->key <= prev) *sorted = 0;
    prev = t->key;
    acc = acc * 31 + t->key;
    ++*count;
    t = t->r;
  }
  mi_free(st);
  return acc;
}

static void phase_tree(bench_rng *r, size_t n) {
  mi_heap_t *h = mi_heap_new();
  tnode *t = NULL;
  size_t i, added = 0, found = 0, gone = 0;
  uint64_t count = 0, acc;
  int sorted = 1;
  for (i = 0; i < n; i++) { int a = 0; t = t_insert(h, t, bench_next(r) % (4 * n), &a); added += a; }
  for (i = 0; i < 2 * n; i++) found += t_find(t, bench_next(r) % (4 * n));
  for (i = 0; i < n; i++) { int g = 0; t = t_delete(t, bench_next(r) % (4 * n), &g); gone += g; }
  for (i = 0; i < n / 2; i++) { int a = 0; t = t_insert(h, t, bench_next(r) % (4 * n), &a); added += a; }
  acc = t_walk(t, &count, 0, &sorted);
  if (!sorted || count != added - gone) failures++;
  mi_heap_destroy(h); /* frees every remaining node at once */
  bench_step("tree", count, acc ^ found);
}

/* ---- linked list merge sort ---------------------------------------------------------------- */
typedef struct lnode { struct lnode *next; uint32_t key; char payload[1]; } lnode;

static lnode *l_merge(lnode *a, lnode *b) {
  lnode head, *t = &head;
  while (a && b) {
    if (a->key <= b->key) { t->next = a; a = a->next; } else { t->next = b; b = b->next; }
    t = t->next;
  }
  t->next = a ? a : b;
  return head.next;
}

static lnode *l_sort(lnode *l) { /* bottom-up would need an array; recursive split instead */
  lnode *slow, *fast, *b;
  if (!l || !l->next) return l;
  slow = l; fast = l->next;
  while (fast && fast->next) { slow = slow->next; fast = fast->next->next; }
  b = slow->next; slow->next = NULL;
  return l_merge(l_sort(l), l_sort(b));
}

static void phase_list(bench_rng *r, size_t n) {
  lnode *l = NULL, *p, **pp;
  size_t i, count = 0, removed = 0;
  uint64_t acc = 0;
  uint32_t prev = 0;
  int sorted = 1;
  for (i = 0; i < n; i++) {
    size_t extra = bench_skewed(r, 200);
    lnode *x = mi_malloc(sizeof(lnode) + extra);
    x->key = (uint32_t)bench_next(r);
    memset(x->payload, (int)(x->key & 0xff), extra + 1);
    x->next = l; l = x;
  }
  l = l_sort(l);
  for (pp = &l; *pp;) { /* unlink every element whose key has bit 3 set */
    if ((*pp)->key & 8) { lnode *d = *pp; *pp = d->next; mi_free(d); removed++; }
    else pp = &(*pp)->next;
  }
  for (p = l; p; p = p->next) {
    if (count && p->key < prev) sorted = 0;
    prev = p->key; acc = acc * 1000003u + p->key + (unsigned char)p->payload[0]; count++;
  }
  while (l) { p = l->next; mi_free(l); l = p; }
  if (!sorted || count + removed != n) failures++;
  bench_step("list", count, acc);
}

/* ---- chained hash table of strings ---------------------------------------------------------- */
typedef struct hentry { struct hentry *next; uint32_t hash, value; char key[]; } hentry;
typedef struct { hentry **slot; size_t mask, used; } htab;

static uint32_t h_str(const char *s) {
  uint32_t h = 2166136261u;
  while (*s) { h ^= (unsigned char)*s++; h *= 16777619u; }
  return h;
}

static void h_grow(htab *t) {
  size_t i, nm = t->mask * 2 + 1;
  hentry **ns = mi_calloc(nm + 1, sizeof *ns);
  for (i = 0; i <= t->mask; i++) {
    hentry *e = t->slot[i], *nx;
    for (; e; e = nx) { nx = e->next; e->next = ns[e->hash & nm]; ns[e->hash & nm] = e; }
  }
  mi_free(t->slot);
  t->slot = ns; t->mask = nm;
}

static hentry **h_find(htab *t, const char *k, uint32_t h) {
  hentry **p = &t->slot[h & t->mask];
  while (*p && ((*p)->hash != h || strcmp((*p)->key, k) != 0)) p = &(*p)->next;
  return p;
}

static void phase_hash(bench_rng *r, size_t n) {
  htab t;
  char key[64];
  size_t i, hits = 0, dels = 0;
  uint64_t acc = 0;
  bench_make_vocab();
  t.mask = 15; t.used = 0; t.slot = mi_calloc(16, sizeof *t.slot);
  for (i = 0; i < 3 * n; i++) {
    const char *w1 = bench_vocab[bench_skewed(r, BENCH_WORDS)];
    const char *w2 = bench_vocab[bench_below(r, BENCH_WORDS)];
    unsigned tag = bench_below(r, 64);
    int len = snprintf(key, sizeof key, "%s-%s-%u", w1, w2, tag);
    uint32_t h = h_str(key);
    hentry **p = h_find(&t, key, h);
    switch (bench_below(r, 4)) {
      case 0: case 1: /* insert or bump */
        if (*p) { (*p)->value++; hits++; }
        else {
          hentry *e = mi_malloc(sizeof(hentry) + (size_t)len + 1);
          e->hash = h; e->value = 1; e->next = NULL; memcpy(e->key, key, (size_t)len + 1);
          *p = e;
          if (++t.used > 2 * t.mask) h_grow(&t);
        }
        break;
      case 2: /* lookup */
        if (*p) { hits++; acc += (*p)->value; }
        break;
      default: /* delete */
        if (*p) { hentry *d = *p; *p = d->next; mi_free(d); t.used--; dels++; }
    }
  }
  for (i = 0; i <= t.mask; i++) {
    hentry *e = t.slot[i], *nx;
    for (; e; e = nx) { nx = e->next; acc = acc * 31 + e->value + e->hash; mi_free(e); }
  }
  mi_free(t.slot);
  bench_step("hash table", t.used, acc ^ (hits << 32) ^ dels);
}

/* ---- graph: adjacency lists, breadth-first search ------------------------------------------- */
typedef struct edge { struct edge *next; struct vertex *to; } edge;
typedef struct vertex { edge *adj; struct vertex *qnext; int32_t dist; uint32_t id; } vertex;

static void phase_graph(bench_rng *r, size_t n) {
  mi_heap_t *h = mi_heap_new();
  vertex **v = mi_heap_mallocn(h, n, sizeof *v);
  size_t i, e, reached = 0, rounds;
  uint64_t acc = 0;
  for (i = 0; i < n; i++) {
    v[i] = mi_heap_malloc_aligned(h, sizeof(vertex), 32);
    v[i]->adj = NULL; v[i]->id = (uint32_t)i;
  }
  for (e = 0; e < 3 * n; e++) {
    size_t a = bench_below(r, (uint32_t)n), b = (a + 1 + bench_skewed(r, (uint32_t)n - 1)) % n;
    edge *x = mi_heap_malloc_small(h, sizeof(edge));
    x->to = v[b]; x->next = v[a]->adj; v[a]->adj = x;
  }
  for (rounds = 0; rounds < 8; rounds++) {
    vertex *head = v[bench_below(r, (uint32_t)n)], *tail;
    for (i = 0; i < n; i++) v[i]->dist = -1;
    head->dist = 0; head->qnext = NULL; tail = head;
    while (head) {
      edge *x;
      for (x = head->adj; x; x = x->next)
        if (x->to->dist < 0) { x->to->dist = head->dist + 1; x->to->qnext = NULL; tail->qnext = x->to; tail = x->to; }
      acc += (uint64_t)head->dist * head->id;
      reached++;
      head = head->qnext;
    }
  }
  mi_heap_delete(h); /* blocks move to the default heap ... */
  mi_collect(0);
  bench_step("graph bfs", reached, acc);
  /* ... so they are still valid: free them one by one */
  for (i = 0; i < n; i++) {
    edge *x = v[i]->adj, *nx;
    for (; x; x = nx) { nx = x->next; mi_free(x); }
    mi_free(v[i]);
  }
  mi_free(v);
}

/* ---- churn: random sizes, random free order --------------------------------------------------- */
static void phase_churn(bench_rng *r, size_t n) {
  size_t slots = 4096, i, live = 0, bytes = 0;
  unsigned char **p = mi_calloc(slots, sizeof *p);
  size_t *sz = mi_calloc(slots, sizeof *sz);
  uint64_t acc = 0;
  for (i = 0; i < 8 * n; i++) {
    size_t k = bench_below(r, (uint32_t)slots);
    if (p[k]) {
      acc += p[k][0] + p[k][sz[k] - 1];
      if (bench_below(r, 4) == 0) { /* grow in place or move */
        sz[k] += bench_skewed(r, 512) + 1;
        p[k] = mi_realloc(p[k], sz[k]);
        p[k][sz[k] - 1] = (unsigned char)k;
      } else { mi_free(p[k]); p[k] = NULL; live--; }
    } else {
      uint32_t c = bench_below(r, 1000);
      sz[k] = c < 900 ? 8 + bench_skewed(r, 256) : c < 995 ? 1024 + bench_below(r, 30000) : 100000 + bench_below(r, 400000);
      p[k] = mi_malloc(sz[k]);
      p[k][0] = (unsigned char)i; p[k][sz[k] - 1] = (unsigned char)k;
      live++; bytes += sz[k];
    }
  }
  for (i = 0; i < slots; i++) mi_free(p[i]);
  mi_free(p); mi_free(sz);
  bench_step("churn", live, acc ^ bytes);
}

int main(int argc, char **argv) {
  long size = bench_size(argc, argv, 32);
  size_t n = (size_t)size * 4096;
  bench_rng r;
  bench_seed(&r, 0x6d696d616c6c6f63ull);
  phase_tree(&r, n);
  phase_list(&r, n);
  phase_hash(&r, n);
  phase_graph(&r, n);
  phase_churn(&r, n);
  return bench_finish(size, failures);
}
