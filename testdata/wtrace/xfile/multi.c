/* One process, three images with traced code (wtrace.rs, one_trace_for_every_image): this
 * executable, liblib.so (linked: lib.c) and libdl.so (dlopen'ed and dlclose'd: dl.c). Calls
 * cross the images both ways: directly (lib_run, lib_twice; the library's call of `level`
 * runs this executable's, which interposes it) and through pointers (dl_work calls back). A
 * SIGUSR1 that libdl.so raises runs a handler of this executable that calls into liblib.so. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
int lib_run(int n);
int lib_twice(int x);
int level(int x) { return x & 1 ? lib_twice(x) : -x; }
static int back(int x) { return x % 5 ? x + 1 : level(x) + lib_run(x % 4); }
static volatile long handled;
static void on_usr1(int sig) { handled += lib_twice(sig) + level(sig); }
int main(void) {
    long t = 0;
    signal(SIGUSR1, on_usr1);
    for (int round = 0; round < 2; round++) {
        void *h = dlopen("./libdl.so", RTLD_NOW | RTLD_LOCAL);
        int (*dl_work)(int (*)(int), int) = h ? (int (*)(int (*)(int), int))dlsym(h, "dl_work") : 0;
        if (!dl_work) {
            printf("%s\n", dlerror());
            return 1;
        }
        for (int i = 0; i < 300; i++)
            t += lib_run(i % 13) + dl_work(back, i % 11);
        dlclose(h);
    }
    printf("%ld %ld\n", t, (long)handled);
    return 0;
}
