/* SESE counters (Frenot & Pereira 2024, `--tally-sese=on`) next to frames that end early:
 * counted loops before an exit() in the same function (the early exit is derived from the tree
 * or counted through a frame record, next to the free chords), loops that call something that
 * may longjmp or exit (refused: the frame may end inside), a longjmp out of a function after its
 * counted loops, and steps that need the exact division's shift and inverse (3, -5, 8, 12) in
 * 8-, 16-, 32- and 64-bit variables and a pointer walk. Every count must equal edges-naive's. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf env;
static volatile int sink;
static int data[4096];

__attribute__((noinline)) static int step3(int n) {
    int s = 0;
    for (int i = 0; i < n; i += 3)
        s += data[i];
    return s;
}

__attribute__((noinline)) static int down5(short from) {
    int s = 0;
    for (short k = from; k > 0; k -= 5)
        s ^= k;
    return s;
}

__attribute__((noinline)) static long by8(long n) {
    long s = 0;
    for (long i = 0; i < n; i += 8)
        s += data[i & 4095] * i;
    return s;
}

__attribute__((noinline)) static int bytes(unsigned char n) {
    int s = 0;
    for (unsigned char c = 0; c < n; c += 12)
        s += c;
    return s;
}

__attribute__((noinline)) static int walk(int *p, int *end) {
    int s = 0;
    for (; p < end; p += 3)
        s += *p;
    return s;
}

/* A counted loop, then maybe longjmp: the loop's value is added at its exit, before the jump. */
__attribute__((noinline)) static int then_jump(int n, int jump) {
    int s = 0;
    for (int i = 0; i < n; i += 3)
        s += data[i] + i;
    if (jump)
        longjmp(env, s | 1);
    return s;
}

/* A loop that calls something that may longjmp: the frame may end inside (refused). */
__attribute__((noinline)) static int jump_inside(int n, int at) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        s += data[i];
        if (i == at)
            then_jump(i, 1);
    }
    return s;
}

/* Counted loops, then exit() from the same function when asked. */
__attribute__((noinline)) static void then_exit(int n, int code) {
    int s = 0;
    for (int i = 0; i < n; i += 3)
        s += data[i];
    for (int i = n; i > 0; i -= 5)
        s ^= i;
    sink = s;
    if (code >= 0) {
        printf("exit %d after %d\n", code, s);
        exit(code);
    }
}

/* A loop that may call exit() (refused). */
__attribute__((noinline)) static int exit_inside(int n, int at) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        s += data[i];
        if (i == at)
            then_exit(i, 0);
    }
    return s;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    for (int i = 0; i < 4096; i++)
        data[i] = (i * 7919) % 101;
    long t = 0;
    for (int r = 0; r < rounds; r++) {
        t += step3(r * 37 % 300);
        t += down5((short)(r * 53 % 500));
        t += by8(r * 101 % 2000);
        t += bytes((unsigned char)(r * 29 % 250));
        t += walk(data, data + r * 13 % 400);
        if (setjmp(env) == 0)
            t += then_jump(r * 17 % 200, r % 3 == 0);
        else
            t += 1;
        if (setjmp(env) == 0)
            t += jump_inside(100, r % 4 == 0 ? r : 1000);
        else
            t += 2;
        then_exit(r * 11 % 90, -1);
    }
    printf("total %ld\n", t);
    exit_inside(300, 150); /* leaves through exit(0) inside a loop */
    return 1;
}
