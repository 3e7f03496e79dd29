/* early.c -- interprocedural paths cut short (Melski & Reps 1998 §9.2): `exit` deep in a chain of
 * static functions called directly, `longjmp` across such a chain back to main, and a
 * `longjmp` back into a static function that called setjmp itself while it waits in a direct
 * call. `maybe_jump` has external linkage, so calls of it are summary edges; it is abandoned
 * in `longjmp` and `exit`, and with it the chain of its callers: `mid` in a call followed by a
 * direct call in the same block (the path ends at that call, the surrogate edge c -> GExit)
 * and in a call ending its block (the block's early-exit edge).
 * Prints its progress and exits with status 3 (from `maybe_jump`). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf top, inner;
volatile int sink;

__attribute__((noinline)) void maybe_jump(int x) {
    if (x % 7 == 3)
        longjmp(top, x);
    if (x == 40) {
        printf("exit at %d\n", x);
        exit(3);
    }
    sink += x;
}

static __attribute__((noinline)) int leaf(int x) {
    int s = 0;
    for (int i = 0; i < x % 5; i++)
        s += i * x;
    return s;
}

static __attribute__((noinline)) int mid(int x) {
    int r = leaf(x);
    if (x & 1) {
        maybe_jump(x);
        r += leaf(x + 1);
    } else {
        r += leaf(x + 2);
        maybe_jump(x);
    }
    return r + 1;
}

static __attribute__((noinline)) int outer(int x) {
    int r = 0;
    for (int i = 0; i < 3; i++)
        r += mid(x + i) * 2;
    return r + 1;
}

static __attribute__((noinline)) int deep_chain(int x) {
    if (x % 5 == 0)
        longjmp(inner, 1);
    return leaf(x) + 1;
}

/* Calls setjmp itself; reached by a direct call from main's loop. */
static __attribute__((noinline)) int guarded(int x) {
    if (setjmp(inner))
        return -1;
    int r = deep_chain(x) + leaf(x);
    return r + 1;
}

int main(void) {
    volatile int x = 0;
    volatile int total = 0;
    int jumped = setjmp(top);
    if (jumped)
        printf("jumped %d\n", jumped);
    while (x < 60) {
        x = x + 1;
        total = total + guarded(x);
        total = total + outer(x);
    }
    printf("%d\n", total);
    return 0;
}
