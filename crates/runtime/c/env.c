/*
 * env.c -- the environment (TALLY_*) and the program (path, build id), read once at the first
 * registration, before main; nothing else reads environ.
 */
#include "rt.h"

struct tally_env env;
struct tally_prog prog;

/* ------------------------------------------------------------------------------------------ */
/* The environment, read once                                                                 */
/* ------------------------------------------------------------------------------------------ */

static void env_copy(struct env_value *d, const char *name) {
    const char *s = getenv(name);
    if (!s)
        return;
    d->set = 1;
    size_t n = strlen(s);
    if (n >= sizeof d->v) {
        d->too_long = 1;
        return;
    }
    memcpy(d->v, s, n + 1);
}

static int build_id_note(const struct note *n, void *arg) {
    (void)arg;
    if (n->type == NT_GNU_BUILD_ID && n->namesz == 4 && memcmp(n->name, "GNU", 4) == 0 &&
        n->descsz > 0 && n->descsz <= TALLY_BUILD_ID_MAX) {
        memcpy(prog.id, n->desc, n->descsz);
        prog.id_len = n->descsz;
        return 1;
    }
    return 0;
}

static int build_id_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    (void)each_note(info, build_id_note, 0);
    return 1; /* the first object is the main executable: stop there */
}

static void read_program(void) {
    ssize_t n = readlink("/proc/self/exe", prog.path, sizeof prog.path);
    prog.path_len = n > 0 && (size_t)n < sizeof prog.path ? (uint64_t)n : 0;
    prog.id_len = 0;
    (void)dl_iterate_phdr(build_id_cb, 0);
    struct timespec ts = {0, 0};
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    prog.start_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    struct utsname u;
    prog.host_len = 0;
    if (uname(&u) == 0) {
        size_t len = strnlen(u.nodename, sizeof u.nodename);
        if (len <= sizeof prog.host) {
            memcpy(prog.host, u.nodename, len);
            prog.host_len = (uint32_t)len;
        }
    }
}

/* The baked-in profile directory (abi::NOTE_PROFILE_DIR): a descriptor that is a
 * NUL-terminated string fitting in PATH_CAP; the first such note wins. */
static int profile_dir_note(const struct note *n, void *arg) {
    (void)arg;
    if (n->type != TALLY_NOTE_PROFILE_DIR || n->namesz != 6 || memcmp(n->name, "tally", 6) != 0 ||
        n->descsz < 2 || n->descsz > PATH_CAP)
        return 0;
    const char *d = (const char *)n->desc;
    size_t len = strnlen(d, n->descsz);
    if (len == 0 || len == n->descsz) /* empty, or no NUL inside the descriptor */
        return 0;
    memcpy(env.profile_dir.v, d, len + 1);
    env.profile_dir.set = 1;
    return 1;
}

static int profile_dir_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    return each_note(info, profile_dir_note, 0); /* objects in load order, the executable first */
}

/* Called once, under reg_lock. */
void read_env(void) {
    read_program();
    env.secure = getauxval(AT_SECURE) != 0;
    if (!env.secure) {
        env_copy(&env.profile, "TALLY_PROFILE");
        env_copy(&env.trace, "TALLY_TRACE");
        env_copy(&env.stop_at, "TALLY_STOP_AT");
        env_copy(&env.continuous, "TALLY_CONTINUOUS");
        env_copy(&env.trace_ring, "TALLY_TRACE_RING");
        env_copy(&env.trace_compress, "TALLY_TRACE_COMPRESS");
        env_copy(&env.meta, "TALLY_META");
        env_copy(&env.labels, "TALLY_LABELS");
        env_copy(&env.snap_interval, "TALLY_SNAPSHOT_INTERVAL");
        env_copy(&env.snap_signal, "TALLY_SNAPSHOT_SIGNAL");
        /* Like the environment, ignored in an AT_SECURE process: it writes only the default
         * file of its current directory (secure_target_ok). */
        (void)dl_iterate_phdr(profile_dir_cb, 0);
    }
    env.read = 1;
}
