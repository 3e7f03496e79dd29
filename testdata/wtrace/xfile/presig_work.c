/* Built with tally: the loop and the handler's work of presig.c. */
extern char *pages;
extern long psz;
unsigned hwork(unsigned x, int n) {
    for (int i = 0; i < n; i++)
        x = x & 1 ? x * 3 + 1 : x >> 1;
    return x;
}
unsigned work(unsigned s, int n) {
    for (int i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        if (s & 0x100)
            s ^= s >> 3;
        if ((s & 0x3000) == 0x3000)
            pages[(s >> 4) % (32 * psz)] += (char)s; /* a fault on a read-only page */
    }
    return s;
}
