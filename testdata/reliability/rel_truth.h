/* Ground truth for the reliability programs: hand-placed counters (one per source line that
 * says `T();`) in a MAP_SHARED mapping of the file named by $REL_TRUTH, so they survive every
 * way a process can end, SIGKILL included, and are shared with fork children.
 *
 * Layout (unsigned long words): [0] magic, [1 + role] pid of each role, [8 + n] ready flag n,
 * then counters at TRUTH_HDR + ((role * TRUTH_FILES + file) * TRUTH_LINES + line).
 * role 0 = the process before any fork, 1 = the parent after fork, 2 = the fork child. */
#ifndef REL_TRUTH_H
#define REL_TRUTH_H
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define TRUTH_HDR 64
#define TRUTH_FILES 2
#define TRUTH_LINES 512
#define TRUTH_ROLES 3
#define TRUTH_WORDS (TRUTH_HDR + TRUTH_ROLES * TRUTH_FILES * TRUTH_LINES)
#define TRUTH_MAGIC 0x7472757468UL

static volatile unsigned long *truth_base;
static int truth_role_now;

static inline void truth_hit(int file, int line) {
  if (truth_base)
    __atomic_fetch_add(&truth_base[TRUTH_HDR + (truth_role_now * TRUTH_FILES + file) * TRUTH_LINES + line],
                       1, __ATOMIC_RELAXED);
}

static inline volatile unsigned long *truth_counters(void) { return truth_base; }

static inline void truth_use(volatile unsigned long *base) { truth_base = base; }

static inline void truth_role(int role) {
  truth_role_now = role;
  truth_base[1 + role] = (unsigned long)getpid();
}

static inline void truth_ready(int n) { __atomic_store_n(&truth_base[8 + n], 1, __ATOMIC_SEQ_CST); }

static inline void truth_open(void) {
  const char *path = getenv("REL_TRUTH");
  if (!path) {
    fprintf(stderr, "REL_TRUTH is not set\n");
    exit(126);
  }
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate(fd, TRUTH_WORDS * sizeof(unsigned long)) != 0) {
    perror(path);
    exit(126);
  }
  void *m = mmap(NULL, TRUTH_WORDS * sizeof(unsigned long), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    perror("mmap");
    exit(126);
  }
  close(fd);
  truth_base = m;
  truth_base[0] = TRUTH_MAGIC;
  truth_role(0);
}
#endif
