/*
 * manypaths.c - a function with 2^12 acyclic paths (more than tally keeps in an array, so its
 * path counts go to the runtime's hash table), called on varied inputs (more distinct paths than
 * home slots) and then on a few inputs many times; and a setjmp whose
 * result goes straight into a call, so the block after setjmp starts with a call that may end
 * the frame (the runtime must charge the block the frame was left from, not this one).
 * Deterministic output; exit status 0.
 */
#include <setjmp.h>
#include <stdio.h>

static unsigned mix(unsigned x) {
    unsigned s = 0;
#define BIT(k) if (x & (1u << k)) s += k * 3 + 1; else s ^= k;
    BIT(0) BIT(1) BIT(2) BIT(3) BIT(4) BIT(5) BIT(6) BIT(7) BIT(8) BIT(9) BIT(10) BIT(11)
#undef BIT
    return s;
}

static jmp_buf jb;
static int depth_hits;

__attribute__((noinline)) static void deep(int n) {
    if (n == 0)
        longjmp(jb, 5);
    deep(n - 1);
}

/* May end its caller's frame (it can reach longjmp), so the call to it is a site. */
__attribute__((noinline)) static void note(int r) {
    if (r > 2) depth_hits++;
    if (r == 99) deep(0);
}

__attribute__((noinline)) static int jumper(int rounds) {
    volatile int count = 0;
    note(setjmp(jb)); /* the call right after setjmp's (second) return */
    if (count < rounds) {
        count++;
        deep(count);
    }
    return count;
}

int main(void) {
    unsigned long total = 0;
    unsigned x = 12345;
    for (int i = 0; i < 3000; i++) {
        x = x * 1103515245u + 12345u;
        total += mix(x >> 7);
    }
    /* Then 96 of the paths again and again: hot paths whose home slot (1024 of them) a cold
     * path took first are counted in the runtime's overflow table until they win the slot. */
    for (int r = 0; r < 200; r++)
        for (unsigned k = 0; k < 96; k++)
            total += mix(k * 2654435761u >> 7);
    total += (unsigned long)jumper(7) * 1000 + depth_hits;
    printf("total %lu\n", total);
    return 0;
}
