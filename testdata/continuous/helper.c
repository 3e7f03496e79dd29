/* Second translation unit of work.c. */
static int odd(int i) { return i % 3 == 1; }

int helper_sum(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        if (odd(i))
            s += i;
        else
            s -= 1;
    return s;
}
