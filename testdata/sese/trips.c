/* Trip-count counters (ScalarEvolution's backedge-taken count, `--tally-sese=trips`): loops
 * whose count is known on entry (an up-counter to n, a down-counter, a step of 4 (a division
 * by a power of two), two exit conditions and two exits
 * (a minimum), a pointer range, an inner loop with an
 * invariant bound inside an outer one, an 8-bit counter), loops whose count is not (an inner
 * bound that depends on the outer variable, a search), a counted loop before exit() and before
 * a longjmp in the same function, and a loop that calls something that may exit or longjmp
 * (refused: the frame may end inside). Each runs zero, one and many times. Every count must
 * equal edges-naive's. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf env;
static volatile int sink;
static int data[4096];

__attribute__((noinline)) static long upto(int n) {
    long s = 0;
    for (int i = 0; i < n; i++)
        s += data[i] ^ (s >> 3);
    return s;
}

__attribute__((noinline)) static long down(long n) {
    long s = 0;
    for (long i = n; i > 0; i--)
        s = s * 3 + data[i & 4095];
    return s;
}

__attribute__((noinline)) static long by4(unsigned lo, unsigned hi) {
    long s = 0;
    for (unsigned i = lo; i < hi; i += 4)
        s += data[i & 4095] * (long)i;
    return s;
}

__attribute__((noinline)) static long both(int n, int m) {
    long s = 0;
    for (int i = 0; i < n && i < m; i++)
        s += data[i] - (s & 7);
    return s;
}

/* Two exits, both counted: ScalarEvolution's count is their minimum. */
__attribute__((noinline)) static long two_exits(int n, int m) {
    long s = 0;
    for (int i = 0; i < n; i++) {
        s += data[i] * (s | 3);
        if (i == m)
            break;
        s ^= data[i + 1];
    }
    return s;
}

__attribute__((noinline)) static long range(const int *p, const int *end) {
    long s = 0;
    for (; p != end; p++)
        s = (s << 1) ^ *p;
    return s;
}

__attribute__((noinline)) static long grid(int rows, int cols) {
    long s = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            s += data[(r * cols + c) & 4095] ^ r;
    return s;
}

__attribute__((noinline)) static long triangle(int n) {
    long s = 0;
    for (int r = 0; r < n; r++)
        for (int c = 0; c < r; c++)
            s += data[(r + c) & 4095] & c;
    return s;
}

__attribute__((noinline)) static int bytes(unsigned char n) {
    int s = 0;
    for (unsigned char c = 0; c != n; c++)
        s += data[c] + c;
    return s;
}

__attribute__((noinline)) static int find(int x, int n) {
    for (int i = 0; i < n; i++)
        if (data[i] == x)
            return i;
    return -1;
}

/* A counted loop, then maybe longjmp: the count is added at the loop's exit, before the jump. */
__attribute__((noinline)) static long then_jump(int n, int jump) {
    long s = 0;
    for (int i = 0; i < n; i++)
        s += data[i] * (s | 1);
    if (jump)
        longjmp(env, (int)(s | 1));
    return s;
}

/* A loop that calls something that may longjmp: the frame may end inside (refused). */
__attribute__((noinline)) static long jump_inside(int n, int at) {
    long s = 0;
    for (int i = 0; i < n; i++) {
        s += data[i];
        if (i == at)
            then_jump(i, 1);
    }
    return s;
}

/* Counted loops, then exit() from the same function when asked. */
__attribute__((noinline)) static void then_exit(int n, int code) {
    long s = 0;
    for (int i = 0; i < n; i++)
        s += data[i] * (s & 5);
    for (int i = n; i > 0; i -= 2)
        s ^= i;
    sink = (int)s;
    if (code >= 0) {
        printf("exit %d after %ld\n", code, s);
        exit(code);
    }
}

/* A loop that may call exit() (refused). */
__attribute__((noinline)) static long exit_inside(int n, int at) {
    long s = 0;
    for (int i = 0; i < n; i++) {
        s += data[i];
        if (i == at)
            then_exit(i, 0);
    }
    return s;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 24;
    for (int i = 0; i < 4096; i++)
        data[i] = (i * 7919) % 101;
    long t = 0;
    for (int r = 0; r < rounds; r++) {
        int n = r % 3 == 0 ? 0 : r % 3 == 1 ? 1 : r * 37 % 300;
        t += upto(n);
        t += down(n * 2);
        t += by4((unsigned)r, (unsigned)(r + n));
        t += both(n, r * 5);
        t += two_exits(n, r % 2 ? n + 5 : r * 7 % 50);
        t += range(data + r, data + r + n);
        t += grid(r % 4, n % 17);
        t += triangle(r % 9);
        t += bytes((unsigned char)(n * 3));
        t += find(r, n);
        if (setjmp(env) == 0)
            t += then_jump(n, r % 4 == 1);
        else
            t += 1;
        if (setjmp(env) == 0)
            t += jump_inside(50, r % 5 == 0 ? r : 1000);
        else
            t += 2;
        then_exit(n % 90, -1);
    }
    printf("total %ld\n", t);
    exit_inside(300, 150); /* leaves through exit(0) inside a loop */
    return 1;
}
