/* Interprocedural paths (modes ipath, ipath-piecewise): static functions calling each other
 * directly (non-recursive call sites: call and return edges), recursion (summary edges, roots),
 * calls through pointers, callbacks from libc (qsort: roots entered from outside), loops in
 * callers and callees (back edges cut paths with their context), and a function that may end
 * early (exit) that stays outside the set. The printed result checks the builds agree. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static int leaf(int x) { return (x & 1) ? 3 * x + 1 : x / 2; }

__attribute__((noinline)) static int mid(int x) {
    int s = 0;
    for (int i = 0; i < x % 5; i++)
        s += leaf(x + i);
    if (s > 20)
        s -= leaf(s);
    return s;
}

__attribute__((noinline)) static int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }

__attribute__((noinline)) static int even(int n);
__attribute__((noinline)) static int odd(int n) { return n == 0 ? 0 : even(n - 1); }
__attribute__((noinline)) static int even(int n) { return n == 0 ? 1 : odd(n - 1); }

__attribute__((noinline)) static int twice(int (*f)(int), int x) { return f(f(x)); }

__attribute__((noinline)) static int cb(int x) { return x > 10 ? mid(x) : leaf(x); }

static int cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (leaf(x) > leaf(y)) - (leaf(x) < leaf(y));
}

__attribute__((noinline)) static int check(int v) {
    if (v < 0)
        exit(3); /* never: keeps this function outside the set */
    return mid(v);
}

__attribute__((noinline)) static int outer(int n) {
    int t = 0;
    for (int i = 0; i < n; i++) {
        t += mid(i);
        if (i % 7 == 0)
            t += fact(i % 6);
        t += twice(i % 2 ? cb : leaf, i);
        t += even(i % 9);
    }
    return t;
}

int main(int argc, char **argv) {
    (void)argv;
    int a[16];
    for (int i = 0; i < 16; i++)
        a[i] = (i * 7 + argc) % 13;
    qsort(a, 16, sizeof a[0], cmp);
    long t = outer(30 + argc) + check(argc + 4);
    for (int i = 0; i < 16; i++)
        t += a[i] * i;
    printf("%ld\n", t);
    return 0;
}
