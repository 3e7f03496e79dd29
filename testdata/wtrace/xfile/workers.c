/* Four threads whose traced code is in two images (wtrace.rs, one_trace_for_every_image):
 * each calls liblib.so (lib.c), whose call of `level` runs this executable's. */
#include <pthread.h>
#include <stdio.h>
int lib_run(int n);
int lib_twice(int x);
int level(int x) { return x & 1 ? lib_twice(x) : -x; }
static void *work(void *arg) {
    long s = (long)arg;
    for (int i = 0; i < 3000; i++)
        s += lib_run(i % 9) + (i & 7 ? 1 : level(i));
    return (void *)s;
}
int main(void) {
    pthread_t t[4];
    long s = 0;
    for (long k = 0; k < 4; k++)
        pthread_create(&t[k], 0, work, (void *)k);
    for (int k = 0; k < 4; k++) {
        void *r;
        pthread_join(t[k], &r);
        s += (long)r;
    }
    printf("%ld\n", s);
    return 0;
}
