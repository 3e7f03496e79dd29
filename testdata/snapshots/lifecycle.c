/* A process that takes snapshots (TALLY_SNAPSHOT_SIGNAL=WINCH) across the events of its life
 * that change what it counts (crates/cli/tests/e2e/long_running.rs, "lifecycle"):
 *
 *   lifecycle dl PLUGIN   dlopen, dlclose and dlopen again of a tally-built PLUGIN between
 *                         snapshots: plugin_work runs 1, 2, then 3 + 4 times in the first three
 *                         parts, and 0 times in the last
 *   lifecycle fork        snapshot 1, then a fork: the child works (work() 7 times), takes a
 *                         snapshot, works again (3 times) and exits; the parent waits for it,
 *                         works (2 times), takes snapshot 2 and exits
 *   lifecycle exec        work() 4 times, snapshot 1, work() 6 times, then exec /bin/true: the
 *                         exec writes the last part
 *   lifecycle _exit       the same, ending with _exit(0)
 *   lifecycle fork-exec   work() once, snapshot 1, then a fork: the child works (5 times) and
 *                         execs /bin/true (its part starts at the parent's snapshot 1); the
 *                         parent waits for it, works (2 times) and exits
 *
 * Built with a tally-built library linked in (plugin.c), the library's copy of the runtime is
 * the one that takes the snapshots, and the exec and _exit, called here, write through this
 * image's copy.
 *
 * Every snapshot is a raise(SIGWINCH) by the only thread, so the snapshot points and every
 * part's counts are deterministic. Prints what the work added up to. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long total;

/* Adds to total (not a pure function: no call of it is folded into another). */
__attribute__((noinline)) static void work(int n) {
    long s = 0;
    for (int i = 0; i < n; i++)
        s += (i % 3 == 0) ? i : -1;
    total += s;
}

__attribute__((noinline)) static void snapshot(void) {
    raise(SIGWINCH); /* ignored by default: a snapshot with TALLY_SNAPSHOT_SIGNAL=WINCH */
}

static void works(int times) {
    for (int t = 0; t < times; t++)
        work(10 + t);
}

typedef long (*plugin_fn)(int);

static void *load(const char *path, plugin_fn *f) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "lifecycle: %s\n", dlerror());
        exit(2);
    }
    *f = (plugin_fn)dlsym(h, "plugin_work");
    if (!*f) {
        fprintf(stderr, "lifecycle: no plugin_work in %s\n", path);
        exit(2);
    }
    return h;
}

static void plugin_calls(plugin_fn f, int times) {
    for (int t = 0; t < times; t++)
        total += f(20 + t);
}

static int dl(const char *path) {
    plugin_fn f;
    void *h = load(path, &f);
    plugin_calls(f, 1);
    snapshot(); /* part 1: the plugin loaded */
    plugin_calls(f, 2);
    dlclose(h);
    snapshot(); /* part 2: the plugin's counts since part 1, saved at its dlclose */
    h = load(path, &f);
    plugin_calls(f, 3);
    dlclose(h);
    h = load(path, &f); /* takes back the counts saved at the dlclose */
    plugin_calls(f, 4);
    snapshot(); /* part 3 */
    dlclose(h);
    printf("%ld\n", total);
    return 0; /* the last part: nothing ran in the plugin */
}

/* fork, and fork-exec when `exec`. */
static int forks(int exec) {
    works(1);
    snapshot();
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0 && exec) {
        works(5);
        printf("child %ld\n", total);
        fflush(stdout);
        execl("/bin/true", "true", (char *)0);
        _exit(4);
    }
    if (pid == 0) {
        works(7);
        snapshot();
        works(3);
        printf("child %ld\n", total);
        exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        return 3;
    works(2);
    if (!exec)
        snapshot();
    printf("parent %ld\n", total);
    return 0;
}

static int execs(void) {
    works(4);
    snapshot();
    works(6);
    printf("%ld\n", total);
    fflush(stdout);
    execl("/bin/true", "true", (char *)0);
    return 4;
}

static int exits(void) {
    works(4);
    snapshot();
    works(6);
    printf("%ld\n", total);
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "dl"))
        return dl(argv[2]);
    if (argc == 2 && !strcmp(argv[1], "fork"))
        return forks(0);
    if (argc == 2 && !strcmp(argv[1], "exec"))
        return execs();
    if (argc == 2 && !strcmp(argv[1], "_exit"))
        return exits();
    if (argc == 2 && !strcmp(argv[1], "fork-exec"))
        return forks(1);
    fprintf(stderr, "usage: lifecycle dl PLUGIN | fork | exec | _exit | fork-exec\n");
    return 2;
}
