/* Continuous mode with a dlopened library (crates/cli/tests/continuous.rs): loads plugin.so
 * (its path is argv[1]), calls it, closes it, loads and calls it again; then, with a second
 * argument, prints "ready" and waits forever (killed by the test), else exits normally. The
 * functions active at the kill are main and wait_forever. */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) static void wait_forever(void) {
    for (;;)
        pause();
}

__attribute__((noinline)) static int call(const char *lib, int n) {
    void *h = dlopen(lib, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return -1;
    }
    int (*work)(int) = (int (*)(int))dlsym(h, "plugin_work");
    int r = work ? work(n) : -1;
    dlclose(h);
    return r;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    int r = call(argv[1], 100) + call(argv[1], 37);
    printf("%d\n", r);
    if (argc > 2) {
        printf("ready\n");
        fflush(stdout);
        wait_forever();
    }
    return 0;
}
