/* Signal handlers that interrupt traced code between two records (witness tracing,
 * docs/design/trace.md "Signal handlers in witness traces"): a loop writes into pages that are
 * read-only until the SIGSEGV handler, which runs traced code, makes them writable; the store
 * then runs again. The faults come at the same stores in every run and build, so the trace
 * and trace-naive runs take the same path.
 *
 *   signals          every handler returns
 *   signals nested   the handler also writes to a read-only page of its own: a second SIGSEGV
 *                    inside the first handler (SA_NODEFER)
 *   signals jump     every fifth handler leaves by siglongjmp to main
 *   signals alarm    a SIGALRM timer (ITIMER_REAL, 200 us) interrupts a long computation at
 *                    arbitrary points 300 times; the handler counts its calls in traced code
 *   signals storm [N]  the same every 20 us, 3000 (or N) times, over a computation writing a
 *                    larger trace (so that handlers also interrupt the runtime writing a chunk)
 *   signals tail     as with no mode, then 90 short calls, the last 30 on read-only pages
 *                    again with five faults among them (a flight recorder's tail holds
 *                    handlers)
 *   signals tail-nested, signals tail-abort   the same with nested faults; the same, the
 *                    last handler of the short round calling abort()
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#define NPAGES 48
static char *pages, *own;
static long psz;
static volatile sig_atomic_t faults, own_faults;
static volatile unsigned hsum;
static int nested, jump, die;
static sigjmp_buf back;

static unsigned hwork(unsigned x, int n) {
    for (int i = 0; i < n; i++) {
        if (x & 1)
            x = x * 3 + 1;
        else
            x >>= 1;
        if (x < 4)
            x += 97;
    }
    return x;
}

static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)uc;
    char *a = (char *)si->si_addr;
    if (a >= own && a < own + psz) { /* the nested fault */
        own_faults++;
        hsum += hwork((unsigned)own_faults, 9);
        mprotect(own, (size_t)psz, PROT_READ | PROT_WRITE);
        return;
    }
    long k = (a - pages) / psz;
    if (k < 0 || k >= NPAGES)
        abort();
    faults++;
    hsum += hwork((unsigned)k + (unsigned)faults, 20 + (int)(k % 7));
    if (nested && faults % 3 == 0) {
        mprotect(own, (size_t)psz, PROT_READ);
        own[faults % psz] += 1; /* faults again, inside this handler */
    }
    mprotect(pages + k * psz, (size_t)psz, PROT_READ | PROT_WRITE);
    if (die && faults == die)
        abort();
    if (jump && faults % 5 == 0)
        siglongjmp(back, 1);
}

__attribute__((noinline)) static unsigned work(unsigned s, int n) {
    for (int i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        if (s & 0x100)
            s ^= s >> 3;
        else if (s & 0x200)
            s += 7;
        if ((s & 0x7000) == 0x7000)
            pages[(s >> 4) % (NPAGES * psz)] += (char)s; /* a fault on a read-only page */
    }
    return s;
}

/* A fault on page k % NPAGES in the middle of a loop (the tail modes: five, on five pages). */
__attribute__((noinline)) static unsigned touch(unsigned s, int k) {
    for (int i = 0; i < 4; i++) {
        s = s * 69069u + 1u;
        if (s & 0x40)
            s ^= s >> 5;
        if (i == 2)
            pages[(size_t)(k % NPAGES) * (size_t)psz + (s & 63)] += (char)s;
    }
    return s;
}

static volatile sig_atomic_t ticks;
static volatile unsigned tsum;
static void on_alarm(int sig) {
    (void)sig;
    ticks++;
    tsum += hwork((unsigned)ticks, 5);
}

__attribute__((noinline)) static unsigned crunch(unsigned s, long n) {
    for (long i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        if (s & 0x10)
            s ^= s >> 7;
        if ((s & 0xff) == 0x42)
            s += (unsigned)i;
    }
    return s;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    int storm = !strcmp(mode, "storm");
    if (!strcmp(mode, "alarm") || storm) {
        signal(SIGALRM, on_alarm);
        struct itimerval it = {{0, storm ? 20 : 200}, {0, storm ? 20 : 200}};
        setitimer(ITIMER_REAL, &it, 0);
        unsigned s = 1;
        long calls = 0;
        long want = storm ? (argc > 2 ? atol(argv[2]) : 3000) : 300;
        while (ticks < want) {
            s = crunch(s, storm ? 200000 : 2000);
            calls++;
        }
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, 0);
        /* (the counts differ from run to run: the test compares them with the trace's) */
        fprintf(stderr, "calls %ld ticks %d\n", calls, (int)ticks);
        printf("ticks %d %u\n", ticks >= want, s & 1);
        return 0;
    }
    nested = !strcmp(mode, "nested") || !strcmp(mode, "tail-nested");
    int tail = !strncmp(mode, "tail", 4);
    jump = !strcmp(mode, "jump");
    psz = sysconf(_SC_PAGESIZE);
    pages = mmap(0, (size_t)psz * NPAGES, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    own = mmap(0, (size_t)psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED || own == MAP_FAILED)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | (nested ? SA_NODEFER : 0);
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, 0) != 0)
        return 3;
    struct sigaction check;
    if (sigaction(SIGSEGV, 0, &check) != 0 || check.sa_sigaction != on_segv)
        return 4; /* the program sees its own handler */
    unsigned s = 1;
    volatile int round = 0;
    if (sigsetjmp(back, 1))
        round++;
    for (; round < 4; round++) {
        mprotect(pages, (size_t)psz * NPAGES, PROT_READ);
        s = work(s + (unsigned)round, 3000);
    }
    if (tail) {
        if (!strcmp(mode, "tail-abort"))
            die = faults + 5;
        for (int k = 0; k < 90; k++) { /* (each entry a flight recorder's synchronization point) */
            if (k == 60)
                mprotect(pages, (size_t)psz * NPAGES, PROT_READ);
            s = work(s, 10);
            if (k >= 60 && k % 6 == 0)
                s = touch(s, k);
        }
    }
    printf("%u %d %d %u\n", s, faults, own_faults, hsum);
    return 0;
}
