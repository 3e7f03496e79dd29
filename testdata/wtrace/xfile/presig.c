/* Compiled without tally (wtrace.rs, handlers_installed_before_tracing_are_wrapped): main
 * installs a SIGSEGV handler with the real `sigaction` before any traced function runs; the
 * handler calls traced code (hwork, presig_work.c), and so does the loop it interrupts (work,
 * whose stores fault on read-only pages). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
char *pages;
long psz;
unsigned work(unsigned s, int n);
unsigned hwork(unsigned x, int n);
static volatile unsigned hsum;
static volatile int faults;
static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)uc;
    long k = ((char *)si->si_addr - pages) / psz;
    faults++;
    hsum += hwork((unsigned)k, 12);
    mprotect(pages + k * psz, (size_t)psz, PROT_READ | PROT_WRITE);
}
int main(void) {
    psz = sysconf(_SC_PAGESIZE);
    pages = mmap(0, (size_t)psz * 32, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (pages == MAP_FAILED || sigaction(SIGSEGV, &sa, 0) != 0)
        return 2;
    unsigned s = 1;
    for (int round = 0; round < 3; round++) {
        mprotect(pages, (size_t)psz * 32, PROT_READ);
        s = work(s + (unsigned)round, 2000);
    }
    printf("%u %d %u\n", s, faults, hsum);
    return 0;
}
