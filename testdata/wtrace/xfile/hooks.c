int twice(int x);
int hook(int x) { return x & 1 ? twice(x) : x / 2; }
