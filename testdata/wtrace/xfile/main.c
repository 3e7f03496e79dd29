#include <stdio.h>
int parse_expr(const char *s, int *pos, int depth);
int apply_plain(int (*f)(int), int x);
int use_weak(int x);
static int sq(int x) { return x * x % 1009; }
int twice(int x) { return x % 3 == 0 ? 2 * x : x + 1; }
int visit(int n, int depth) {
    int s = 0;
    for (int i = 0; i < n % 5; i++)
        s += twice(i + depth);
    if (depth > 0)
        s += parse_expr("(1+(2+3))+4", &(int){0}, depth - 1);
    return s;
}
int main(int argc, char **argv) {
    (void)argv;
    long t = 0;
    for (int i = 0; i < 300 + argc; i++) {
        t += visit(i, i % 4);
        t += apply_plain(i % 2 ? sq : twice, i);
        t += use_weak(i);
    }
    printf("%ld\n", t);
    return 0;
}
