/*
 * shapes.c - control-flow shapes that stress edge instrumentation.
 *
 *  - a computed-goto interpreter (indirectbr): every handler is reached from the dispatch
 *    and some also by a plain goto or fall-through, so indirectbr edges lead into blocks with
 *    several predecessors (edges that cannot be split);
 *  - two dispatch sites sharing targets (two indirectbr blocks);
 *  - switches whose cases share a target (parallel edges);
 *  - an irreducible loop (a goto into the middle of a loop);
 *  - loops with break/continue, nested loops, early returns.
 * Deterministic output; exit status 0.
 */
#include <stdio.h>

enum { OP_PUSH, OP_ADD, OP_SUB, OP_DUP, OP_JNZ, OP_SWAP, OP_HALT, OP_NOP };

static long run(const int *code, int steps_limit) {
    static void *table[] = {&&push, &&add, &&sub, &&dup, &&jnz, &&swap, &&halt, &&nop};
    long stack[64];
    int sp = 0, pc = 0, steps = 0;
    long acc = 0;
#define NEXT()                                   \
    do {                                         \
        if (++steps > steps_limit) goto halt;    \
        goto *table[code[pc++]];                 \
    } while (0)
    NEXT();
push:
    stack[sp++] = code[pc++];
    NEXT();
add:
    sp--;
    stack[sp - 1] += stack[sp];
    if (stack[sp - 1] > 1000) goto sub; /* a second way into `sub` */
    NEXT();
sub:
    sp--;
    stack[sp - 1] -= stack[sp];
    goto *table[code[pc] == OP_NOP ? OP_NOP : code[pc++]]; /* second dispatch site */
dup:
    stack[sp] = stack[sp - 1];
    sp++;
    /* fall through into nop */
nop:
    if (code[pc] == OP_NOP) pc++;
    NEXT();
jnz:
    if (stack[--sp] != 0) pc = code[pc]; else pc++;
    NEXT();
swap: {
    long t = stack[sp - 1];
    stack[sp - 1] = stack[sp - 2];
    stack[sp - 2] = t;
    NEXT();
}
halt:
    acc = sp > 0 ? stack[sp - 1] : -1;
    return acc * 1000 + steps;
#undef NEXT
}

static int classify(int x) {
    switch (x % 11) {
    case 0: case 3: case 7: return 1;   /* three cases, one target */
    case 1: case 2: return 2;
    case 4: x += 5; /* fall through */
    case 5: return x & 3;
    case 8: case 9: case 10: break;
    default: return -1;
    }
    return 0;
}

static int irreducible(int n) {
    int i = 0, s = 0;
    if (n & 1) goto middle;
    while (i < n) {
        s += i;
    middle:
        s ^= i * 3;
        i++;
        if (s > 5000) break;
        if (i % 7 == 0) continue;
        s += 2;
    }
    return s;
}

static int nested(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++) {
            if ((i + j) % 5 == 0) continue;
            if (j > 12) break;
            s += classify(i * j);
        }
        if (s > 100000) return s;
    }
    return s;
}

int main(void) {
    /* countdown loop: push 30; L: push 1; sub; dup; jnz L; halt */
    static const int prog1[] = {OP_PUSH, 30, OP_PUSH, 1, OP_SUB, OP_DUP, OP_JNZ, 2, OP_HALT};
    /* adds that overflow 1000 and jump into sub; swaps; nops */
    static const int prog2[] = {OP_PUSH, 900, OP_PUSH, 200, OP_PUSH, 50, OP_ADD, OP_NOP,
                                OP_PUSH, 7, OP_SWAP, OP_ADD, OP_PUSH, 3, OP_SUB, OP_NOP,
                                OP_DUP, OP_NOP, OP_HALT};
    long total = 0;
    for (int k = 0; k < 20; k++) {
        total += run(prog1, 200 + k);
        total += run(prog2, 50);
        total += run(prog1, 5 + k); /* cut short by the step limit */
    }
    for (int x = -20; x < 200; x++) total += classify(x);
    for (int n = 0; n < 40; n++) total += irreducible(n) + nested(n);
    printf("total %ld\n", total);
    return 0;
}
