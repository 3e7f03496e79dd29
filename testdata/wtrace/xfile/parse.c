int visit(int n, int depth);
int twice(int x);
int parse_expr(const char *s, int *pos, int depth) {
    int v = 0;
    while (s[*pos]) {
        char c = s[*pos];
        (*pos)++;
        if (c == '(')
            v += parse_expr(s, pos, depth);
        else if (c == ')')
            return v;
        else if (c >= '0' && c <= '9')
            v += twice(c - '0') + (depth > 0 ? visit(c - '0', depth - 1) : 0);
    }
    return v;
}
