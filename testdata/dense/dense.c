/* Control-flow graphs that are small (at most 60 blocks at -O2) but dense: the shapes that
 * made `tally html` slow. `steps` is a chain of optional calls whose paths
 * double with every test; `machine` a byte-driven state machine (a switch in a loop with
 * gotos between its cases), like a protocol parser. Used by crates/cli/tests/html.rs and
 * timed in docs/html-layout.md. */
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned sink;
__attribute__((noinline)) static void hit(unsigned k) { sink += k; }
__attribute__((noinline)) static void miss(unsigned k) { sink ^= k; }

#define S(i) if (x & (1u << (i))) hit(i);

/* 26 optional steps in a row, like a server's per-iteration housekeeping: 2^26 paths
 * through 53 blocks. */
__attribute__((noinline)) static void steps(unsigned x) {
    S(0) S(1) S(2) S(3) S(4) S(5) S(6) S(7) S(8) S(9) S(10) S(11) S(12)
    S(13) S(14) S(15) S(16) S(17) S(18) S(19) S(20) S(21) S(22) S(23) S(24) S(25)
}

/* A request parser: states in a switch inside a loop, with gotos across them. */
__attribute__((noinline)) static int machine(const unsigned char *p, int n) {
    int state = 0, args = 0, len = 0, bad = 0, i = 0;
    while (i < n) {
        unsigned char c = p[i++];
        switch (state) {
        case 0:
            if (c == '*') { state = 1; args = 0; break; }
            if (c == '\r') goto newline;
            if (c == ' ') break;
            goto inline_cmd;
        case 1:
            if (c >= '0' && c <= '9') { args = args * 10 + (c - '0'); break; }
            if (c == '\r') { state = 2; break; }
            goto error;
        case 2:
            if (c != '\n') goto error;
            state = args ? 3 : 0;
            break;
        case 3:
            if (c == '$') { state = 4; len = 0; break; }
            goto error;
        case 4:
            if (c >= '0' && c <= '9') { len = len * 10 + (c - '0'); break; }
            if (c == '\r') { state = 5; break; }
            goto error;
        case 5:
            if (c != '\n') goto error;
            state = len ? 6 : 7;
            break;
        case 6:
            if (--len == 0) state = 7;
            hit(c);
            break;
        case 7:
            if (c == '\r') { state = 8; break; }
            goto error;
        case 8:
            if (c != '\n') goto error;
            state = --args ? 3 : 0;
            if (!args) hit(100);
            break;
        case 9:
        inline_cmd:
            state = 9;
            if (c == '\r') goto newline;
            if (c == '"') { state = 10; break; }
            miss(c);
            break;
        case 10:
            if (c == '"') { state = 9; break; }
            if (c == '\\') { state = 11; break; }
            break;
        case 11:
            state = 10;
            miss(c);
            break;
        default:
        newline:
            if (i < n && p[i] == '\n') i++;
            state = 0;
            hit(200);
            break;
        error:
            bad++;
            state = 0;
            miss(300);
            break;
        }
    }
    return bad * 1000 + state;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 2000;
    static const char req[] =
        "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n"
        "PING \"a\\\"b\"\r\n*1\r\n$4\r\nPING\r\n*x\r\n  \r\n*0\r\n";
    int r = 0;
    for (int k = 0; k < rounds; k++) {
        steps((unsigned)k * 2654435761u);
        r += machine((const unsigned char *)req, (int)sizeof req - 1);
    }
    printf("%d %u\n", r, sink);
    return 0;
}
