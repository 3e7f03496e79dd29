__attribute__((weak)) int hook(int x) { return x - 1; }
int use_weak(int x) {
    int s = 0;
    for (int i = 0; i < 3; i++)
        s += hook(x + i);
    return s;
}
