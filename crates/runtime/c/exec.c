/*
 * exec.c -- the exec family (tally_format::abi::REDIRECTS): the profile is written before the
 * image is replaced, as gcc's libgcov does in __gcov_execl and friends.
 *
 * Before the real call, in the process that owns the registry (not in a vfork child, which runs
 * on its parent's memory): every frame record of this thread in every image is charged as exit()
 * charges it (the exec abandons those frames), the copies are settled (trace, events totals)
 * and the profile is written; the counts in it are exact up to the exec. With the merge pattern
 * (%m, merge.c) the counters are zeroed once merged into the file.
 *
 * If the exec fails and returns, the process goes on and its frames are still live: the charge
 * is taken back (the same walk, one less at each site, __tally_top untouched), so the profile
 * written at exit is exact. After a merged write the taken-back charges leave those counters
 * below 0 (wrapping): the file already holds the charges, and the merge at exit adds the
 * counters modulo 2^64, which cancels them. errno is the exec's.
 */
#include "rt.h"

#include <limits.h>
#include <stdarg.h>

/* This copy's part (struct tally_instance's exec_charge): the calling thread's records in this
 * image above `above`, charged (dir 1) or taken back (dir -1). */
void exec_charge_self(uintptr_t above, int dir) {
    struct walker w = {0, 0, 0};
    walk(__tally_top, above, 0, &w, dir);
}

/* Charges and writes before an exec; returns whether exec_failed must take the charge back. */
static int exec_prepare(uintptr_t above) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (!r || !own_process() || __atomic_load_n(&r->exit_done, __ATOMIC_ACQUIRE))
        return 0;
    int saved_errno = errno;
    int locked = spin_lock(&r->lock, 1);
    for (struct tally_instance *in = r->live; in; in = in->next)
        in->exec_charge(above, 1);
    for (struct tally_instance *in = r->live; in; in = in->next)
        in->settle(above, 0);
    write_profile_locked();
    if (locked)
        spin_unlock(&r->lock);
    errno = saved_errno;
    return 1;
}

static void exec_failed(uintptr_t above) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    int saved_errno = errno;
    int locked = spin_lock(&r->lock, 1);
    for (struct tally_instance *in = r->live; in; in = in->next)
        in->exec_charge(above, -1);
    if (locked)
        spin_unlock(&r->lock);
    errno = saved_errno;
}

#define AROUND(call)                                                                           \
    do {                                                                                       \
        uintptr_t above = (uintptr_t)__builtin_frame_address(0);                               \
        int charged = exec_prepare(above);                                                     \
        int ret = call;                                                                        \
        if (charged)                                                                           \
            exec_failed(above);                                                                \
        return ret;                                                                            \
    } while (0)

int __tally_execv(const char *path, char *const argv[]) {
    AROUND(execv(path, argv));
}

int __tally_execve(const char *path, char *const argv[], char *const envp[]) {
    AROUND(execve(path, argv, envp));
}

int __tally_execvp(const char *file, char *const argv[]) {
    AROUND(execvp(file, argv));
}

int __tally_execvpe(const char *file, char *const argv[], char *const envp[]) {
    AROUND(execvpe(file, argv, envp));
}

int __tally_fexecve(int fd, char *const argv[], char *const envp[]) {
    AROUND(fexecve(fd, argv, envp));
}

int __tally_execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                     int flags) {
    AROUND(execveat(dirfd, path, argv, envp, flags));
}

/* The variadic ones rebuild argv as glibc's execl does (posix/execl.c): count the arguments up
 * to the terminating NULL (E2BIG past INT_MAX), copy them with the NULL into an array on the
 * stack, and take envp after the NULL for execle. */
#define COUNT_ARGS(ap, arg, argc)                                                              \
    do {                                                                                       \
        va_start(ap, arg);                                                                     \
        for (argc = 1; va_arg(ap, const char *); argc++) {                                     \
            if (argc == INT_MAX) {                                                             \
                va_end(ap);                                                                    \
                errno = E2BIG;                                                                 \
                return -1;                                                                     \
            }                                                                                  \
        }                                                                                      \
        va_end(ap);                                                                            \
    } while (0)

#define COPY_ARGS(ap, arg, argc, argv)                                                         \
    do {                                                                                       \
        va_start(ap, arg);                                                                     \
        argv[0] = (char *)arg;                                                                 \
        for (ptrdiff_t i = 1; i <= argc; i++)                                                  \
            argv[i] = va_arg(ap, char *);                                                      \
    } while (0)

int __tally_execl(const char *path, const char *arg, ...) {
    ptrdiff_t argc;
    va_list ap;
    COUNT_ARGS(ap, arg, argc);
    char *argv[argc + 1];
    COPY_ARGS(ap, arg, argc, argv);
    va_end(ap);
    return __tally_execv(path, argv);
}

int __tally_execlp(const char *file, const char *arg, ...) {
    ptrdiff_t argc;
    va_list ap;
    COUNT_ARGS(ap, arg, argc);
    char *argv[argc + 1];
    COPY_ARGS(ap, arg, argc, argv);
    va_end(ap);
    return __tally_execvp(file, argv);
}

int __tally_execle(const char *path, const char *arg, ...) {
    ptrdiff_t argc;
    va_list ap;
    COUNT_ARGS(ap, arg, argc);
    char *argv[argc + 1];
    COPY_ARGS(ap, arg, argc, argv);
    char **envp = va_arg(ap, char **);
    va_end(ap);
    return __tally_execve(path, argv, envp);
}
