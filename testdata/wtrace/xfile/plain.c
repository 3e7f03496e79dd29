/* Compiled without tally: a callee that calls back into traced code. */
int apply_plain(int (*f)(int), int x) {
    int s = 0;
    for (int i = 0; i < 2; i++)
        s += f(x + i);
    return s;
}
