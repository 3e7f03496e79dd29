/*
 * continuous.c -- continuous mode (docs/design/processes.md, "Continuous mode"): with TALLY_CONTINUOUS=1 or
 * "%c" in TALLY_PROFILE, the counters of every module live in the profile file while the program
 * runs, so that a process killed by SIGKILL leaves its counts.
 *
 * At the first registration of a module the process lays out the profile file (opened as
 * open_target opens any profile: a new O_EXCL temporary next to the target, never through a
 * symbolic link, renamed over it at once) as an unfinished container: header with the flag
 * TALLY_PROFILE_CONTINUOUS, the program record, then, at each registration, one module record
 * whose counters start at a page-aligned file offset (a padding record before the module record
 * makes up the difference). The module's counters are copied into the file and the file's pages
 * are mapped, MAP_SHARED, over the module's counter pages (instrumented modules align their
 * counter array to TALLY_COUNTER_ALIGN and pad it to a multiple of it: TALLY_MODULE_PAGED), so
 * every increment is an increment of the file's page cache. The module count in the header is
 * written last: a kill in the middle of a registration leaves bytes after the last counted record,
 * which readers ignore. A normal exit writes the ordinary, finished profile (write.c) to the same
 * path, replacing the file atomically.
 *
 * Every copy of the runtime (one per image) maps its own modules; the file's state is shared
 * through the process registry (struct tally_registry.cont). A module of a dlclosed object loses
 * its mapping with its object: its record keeps the counts it had, and the module registering
 * again (dlopen after dlclose) takes that record back (its counters already hold the saved counts,
 * process.c adopt_dead_locked). A fork child copies its counters to private memory (a
 * pthread_atfork child handler per copy) and continues as in ordinary mode: it never writes into
 * its parent's file. Hashed path tables (path mode) stay in private memory: an unfinished profile
 * has no hashed path counts.
 */
#include "rt.h"

static int continuous_wanted(void) {
    if (env.continuous.set && env.continuous.v[0] && strcmp(env.continuous.v, "0") != 0)
        return 1;
    if (!env.profile.set)
        return 0;
    for (const char *s = env.profile.v; *s; s++) {
        if (s[0] == '%' && s[1] == '%')
            s++;
        else if (s[0] == '%' && s[1] == 'c')
            return 1;
    }
    return 0;
}

static void cont_report(const char *path, const char *reason) {
    char line[PATH_CAP + 256];
    report_line(line, sizeof line, "continuous mode off for", path, reason);
}

/* Writes n bytes at offset `at`; returns 0 or an errno. */
static int put_at(int fd, uint64_t at, const void *p, uint64_t n) {
    const unsigned char *s = p;
    while (n) {
        ssize_t w = pwrite(fd, s, n > (1u << 30) ? (1u << 30) : (size_t)n, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 && errno ? errno : EIO;
        s += w;
        at += (uint64_t)w;
        n -= (uint64_t)w;
    }
    return 0;
}

static int put_u64_at(int fd, uint64_t at, uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    return put_at(fd, at, b, 8);
}

static int put_zeros(int fd, uint64_t at, uint64_t n) {
    static const unsigned char zeros[4096];
    while (n) {
        uint64_t k = n < sizeof zeros ? n : sizeof zeros;
        int err = put_at(fd, at, zeros, k);
        if (err)
            return err;
        at += k;
        n -= k;
    }
    return 0;
}

/* The header (no modules yet) and the program record; returns 0 or an errno. */
static int write_head(struct tally_cont *c) {
    unsigned char h[32];
    uint64_t words[4] = {TALLY_PROFILE_MAGIC,
                         (uint64_t)TALLY_PROFILE_VERSION |
                             ((uint64_t)TALLY_PROFILE_CONTINUOUS << 32),
                         0, (uint64_t)getpid()};
    for (int w = 0; w < 4; w++)
        for (int i = 0; i < 8; i++)
            h[8 * w + i] = (unsigned char)(words[w] >> (8 * i));
    int err = put_at(c->fd, 0, h, sizeof h);
    /* Program record: an unfinished profile names the executable's GNU build id, or none (the
     * module-hash id depends on modules still to come). */
    uint32_t len = prog.id_len;
    uint64_t at = sizeof h;
    unsigned char p[16];
    uint64_t pl = prog.path_len;
    uint32_t kind = len ? TALLY_BUILD_ID_GNU : TALLY_BUILD_ID_NONE;
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(pl >> (8 * i));
    for (int i = 0; i < 4; i++) {
        p[8 + i] = (unsigned char)(kind >> (8 * i));
        p[12 + i] = (unsigned char)(len >> (8 * i));
    }
    if (!err)
        err = put_at(c->fd, at, p, sizeof p);
    at += sizeof p;
    if (!err)
        err = put_at(c->fd, at, prog.path, pl);
    at += pl;
    if (!err)
        err = put_at(c->fd, at, prog.id, len);
    at += len;
    uint64_t pad = (8 - (at & 7)) & 7;
    if (!err)
        err = put_zeros(c->fd, at, pad);
    c->end = c->size = at + pad;
    return err;
}

/* Creates the file and lays out its head. Returns 1 when continuous mode is on. */
static int cont_open(struct tally_cont *c) {
    char raw[PATH_CAP];
    int merge = 0;
    int err = build_path_for(raw, sizeof raw, &env.profile, ".tally", "m", &merge);
    if (err == 1)
        return 0; /* TALLY_PROFILE=off */
    if (merge) { /* the merge pattern adds finished profiles; a mapped file is not one */
        cont_report(env.profile.set && env.profile.v[0] ? env.profile.v : raw,
                    env.profile.set && env.profile.v[0]
                        ? "continuous mode does not combine with %m (merging)"
                        : "continuous mode does not combine with the merged default of "
                          "--tally-profile-dir (set TALLY_PROFILE)");
        return 0;
    }
    /* An absolute path: the finished profile replaces this very file even after a chdir. */
    size_t n = 0;
    if (!err && raw[0] != '/' && getcwd(c->path, sizeof c->path)) {
        n = strlen(c->path);
        n = put_str(c->path, n, sizeof c->path, "/");
    }
    n = put_str(c->path, n, sizeof c->path, raw);
    if (!err && n + 1 >= sizeof c->path)
        err = ENAMETOOLONG;
    if (err) {
        cont_report(raw, strerror(err));
        return 0;
    }
    if (!secure_target_ok()) {
        cont_report(c->path, secure_refusal);
        return 0;
    }
    char tmp[PATH_CAP + 64];
    const char *why;
    int fd = open_target(c->path, tmp, sizeof tmp, &err, &why);
    if (fd == OPEN_REFUSED) {
        cont_report(c->path, why);
        return 0;
    }
    if (fd < 0) {
        cont_report(c->path, strerror(err));
        return 0;
    }
    if (!tmp[0]) { /* a FIFO or a character device, written in place at exit */
        (void)close(fd);
        cont_report(c->path, "it is not a regular file (the profile is written at exit)");
        return 0;
    }
    /* open_target's descriptor is write-only; a shared writable mapping needs O_RDWR. The
     * temporary was just created with O_EXCL: reopen it without following links and check it
     * is the same file. */
    struct stat a, b;
    int rw = open(tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (rw < 0 || fstat(fd, &a) != 0 || fstat(rw, &b) != 0 || a.st_dev != b.st_dev ||
        a.st_ino != b.st_ino || !S_ISREG(b.st_mode)) {
        err = rw < 0 ? errno : EAGAIN;
        if (rw >= 0)
            (void)close(rw);
        (void)close(fd);
        (void)unlink(tmp);
        cont_report(c->path, strerror(err));
        return 0;
    }
    (void)close(fd);
    c->fd = rw;
    err = write_head(c);
    if (!err && rename(tmp, c->path) != 0)
        err = errno;
    if (err) {
        (void)unlink(tmp);
        (void)close(rw);
        c->fd = -1;
        cont_report(c->path, strerror(err));
        return 0;
    }
    return 1;
}

static uint64_t map_len(const struct tally_module *m) {
    uint64_t n = m->num_counters ? m->num_counters : 1;
    return (n * 8 + TALLY_COUNTER_ALIGN - 1) / TALLY_COUNTER_ALIGN * TALLY_COUNTER_ALIGN;
}

/* Room for one more record in c->recs. */
static int grow_recs(struct tally_cont *c) {
    if (c->count < c->cap)
        return 1;
    uint64_t cap = c->cap ? c->cap * 2 : 64;
    size_t bytes = (size_t)cap * sizeof(struct cont_rec);
    void *mem = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return 0;
    if (c->recs) {
        memcpy(mem, c->recs, (size_t)c->count * sizeof(struct cont_rec));
        (void)munmap(c->recs, (size_t)c->cap * sizeof(struct cont_rec));
    }
    c->recs = mem;
    c->cap = cap;
    return 1;
}

/* Lays out a new record for m; returns the file offset of its counters, 0 on failure. */
static uint64_t new_record(struct tally_cont *c, const struct tally_module *m, uint64_t ps,
                           int *err) {
    uint64_t meta = m->meta_len + ((8 - (m->meta_len & 7)) & 7);
    uint64_t head = 40 + meta;
    uint64_t off = (c->end + 16 + head + ps - 1) / ps * ps;
    uint64_t pad = off - head - c->end;
    uint64_t end = off + m->num_counters * 8 + 8;
    uint64_t size = off + map_len(m);
    if (size < end)
        size = end;
    int fd = c->fd;
    uint64_t at = c->end;
    /* Grow first: the mapping must never reach past the end of the file (SIGBUS). */
    if (size > c->size && ftruncate(fd, (off_t)size) != 0) {
        *err = errno;
        return 0;
    }
    if (size > c->size)
        c->size = size;
    *err = put_u64_at(fd, at, TALLY_PAD_MAGIC);
    if (!*err)
        *err = put_u64_at(fd, at + 8, pad);
    if (!*err)
        *err = put_zeros(fd, at + 16, pad - 16);
    at += pad;
    uint64_t h[5] = {TALLY_MODULE_MAGIC, m->hash, m->meta_len, m->num_counters, 0};
    for (int i = 0; i < 5 && !*err; i++)
        *err = put_u64_at(fd, at + 8 * (uint64_t)i, h[i]);
    if (!*err)
        *err = put_at(fd, at + 40, m->meta, m->meta_len);
    if (!*err)
        *err = put_zeros(fd, at + 40 + m->meta_len, meta - m->meta_len);
    /* The checksum after the counters is not kept (readers ignore it in unfinished files). */
    if (!*err)
        *err = put_u64_at(fd, end - 8, 0);
    return *err ? 0 : off;
}

static int fork_handler_set;
static void cont_fork_prepare(void);
static void cont_fork_parent(void);
static void cont_fork_child(void);

/* Called by __tally_register with the registry's lock held, after m joined this copy's list. */
void cont_register(struct tally_registry *r, struct tally_module *m) {
    if (!continuous_wanted() || TALLY_BIG_ENDIAN)
        return;
    struct tally_cont *c = r->cont;
    if (!c) {
        void *mem = mmap(0, sizeof *c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
            return;
        c = mem;
        c->fd = -1;
        c->pid = getpid();
        r->cont = c;
        if (!cont_open(c))
            c->off = 1;
    }
    if (c->off || c->pid != getpid())
        return;
    if (!(m->flags & TALLY_MODULE_PAGED) || !m->counters ||
        ((uintptr_t)m->counters & (TALLY_COUNTER_ALIGN - 1)) ||
        m->num_counters > (UINT64_MAX - TALLY_COUNTER_ALIGN) / 8 || m->meta_len > UINT64_MAX / 4) {
        cont_report(c->path, "a module was built without page-aligned counters (rebuild it)");
        c->off = 1;
        return;
    }
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0 || ps > (long)TALLY_COUNTER_ALIGN || TALLY_COUNTER_ALIGN % (uint64_t)ps) {
        cont_report(c->path, "the page size is larger than the counter alignment");
        c->off = 1;
        return;
    }
    uint64_t len = map_len(m);
    struct cont_rec *rec = 0;
    for (uint64_t i = 0; i < c->count; i++) {
        struct cont_rec *x = &c->recs[i];
        if (!x->m && !x->paths && !m->num_path_tables && x->hash == m->hash &&
            x->num_counters == m->num_counters) {
            rec = x; /* the record of this module before its object was dlclosed */
            break;
        }
    }
    int err = 0;
    uint64_t off = rec ? rec->off : 0;
    if (!rec && (!grow_recs(c) || !(off = new_record(c, m, (uint64_t)ps, &err)))) {
        cont_report(c->path, strerror(err ? err : ENOMEM));
        c->off = 1;
        return;
    }
    void *map = mmap(0, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, (off_t)off);
    if (map == MAP_FAILED) {
        cont_report(c->path, strerror(errno));
        c->off = 1;
        return;
    }
    /* The counts so far (zero, or saved at a dlclose), then the file's pages replace the
     * module's, in one step. */
    memcpy(map, m->counters, (size_t)m->num_counters * 8);
    void *to = mremap(map, (size_t)len, (size_t)len, MREMAP_MAYMOVE | MREMAP_FIXED,
                      (void *)m->counters);
    if (to == MAP_FAILED) {
        err = errno;
        (void)munmap(map, (size_t)len);
        cont_report(c->path, strerror(err));
        c->off = 1;
        return;
    }
    if (!rec) {
        rec = &c->recs[c->count];
        rec->hash = m->hash;
        rec->num_counters = m->num_counters;
        rec->off = off;
        rec->paths = m->num_path_tables != 0;
        c->end = off + m->num_counters * 8 + 8;
        c->count++;
        (void)put_u64_at(c->fd, 16, c->count); /* last: the record is complete */
    }
    rec->m = m;
    if (!fork_handler_set) {
        fork_handler_set = 1;
        (void)pthread_atfork(cont_fork_prepare, cont_fork_parent, cont_fork_child);
    }
}

/* Called by __tally_unregister with the registry's lock held: m's object is going away, and its
 * mapping with it. The record keeps m's counts. */
void cont_unregister(struct tally_registry *r, const struct tally_module *m) {
    struct tally_cont *c = r->cont;
    for (uint64_t i = 0; c && i < c->count; i++)
        if (c->recs[i].m == m)
            c->recs[i].m = 0;
}

/* Where the finished profile goes: the continuous file's path when this process has one (1),
 * else dst is left alone (0). */
int cont_final_path(char *dst, size_t cap) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    struct tally_cont *c = r ? r->cont : 0;
    if (!c || c->off || c->fd < 0 || c->pid != getpid() || strlen(c->path) >= cap)
        return 0;
    memcpy(dst, c->path, strlen(c->path) + 1);
    return 1;
}

/* Fork: the child must not count into its parent's file, and must start from the counts as
 * they were at the fork (the parent goes on incrementing the shared pages as soon as fork
 * returns in it). The prepare handler (in the forking thread, just before the fork) copies this
 * copy's mapped counter pages into private anonymous memory, which the child inherits; the
 * child's handler moves that copy over its counters (mremap: one step), the parent's frees it.
 * Increments other threads of the parent make between the copy and the fork are not in the
 * child's counts (a fork of a multi-threaded program). The child goes on in ordinary mode. */
static int mapped_here(const struct tally_cont *c, const struct tally_module *m,
                       struct cont_rec **rec) {
    for (uint64_t i = 0; i < c->count; i++)
        if (c->recs[i].m == m) {
            *rec = &c->recs[i];
            return 1;
        }
    return 0;
}

static struct tally_cont *cont_of_process(void) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    return r ? r->cont : 0;
}

static void cont_fork_prepare(void) {
    struct tally_cont *c = cont_of_process();
    if (!c || c->off)
        return;
    int saved_errno = errno;
    struct cont_rec *rec;
    for (struct tally_module *m = reg_head; m; m = m->next) {
        if (!mapped_here(c, m, &rec))
            continue;
        size_t len = (size_t)map_len(m);
        void *t = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        rec->fork_copy = t == MAP_FAILED ? 0 : t;
        if (rec->fork_copy)
            memcpy(t, m->counters, len);
    }
    errno = saved_errno;
}

static void cont_fork_parent(void) {
    struct tally_cont *c = cont_of_process();
    if (!c)
        return;
    struct cont_rec *rec;
    for (struct tally_module *m = reg_head; m; m = m->next) {
        if (mapped_here(c, m, &rec) && rec->fork_copy) {
            (void)munmap(rec->fork_copy, (size_t)map_len(m));
            rec->fork_copy = 0;
        }
    }
}

static void cont_fork_child(void) {
    struct tally_cont *c = cont_of_process();
    if (!c)
        return;
    int saved_errno = errno;
    struct cont_rec *rec;
    for (struct tally_module *m = reg_head; m; m = m->next) {
        if (!mapped_here(c, m, &rec))
            continue;
        size_t len = (size_t)map_len(m);
        void *t = rec->fork_copy;
        rec->fork_copy = 0;
        if (!t) { /* no memory at the prepare: copy now (the parent may have counted since) */
            t = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (t == MAP_FAILED)
                continue;
            memcpy(t, m->counters, len);
        }
        if (mremap(t, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)m->counters) == MAP_FAILED)
            (void)munmap(t, len);
        rec->m = 0; /* no longer mapped from the file */
    }
    c->off = 1;
    if (c->fd >= 0) {
        (void)close(c->fd);
        c->fd = -1;
    }
    errno = saved_errno;
}
