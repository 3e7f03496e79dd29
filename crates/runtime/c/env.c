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
    }
    env.read = 1;
}
