/*
 * merge.c -- the merge pattern: a `%m` in TALLY_PROFILE (docs/design/processes.md, "exec and the merge
 * pattern"). The runtime adds its counts to the profile of the same build already at the path,
 * as clang's `%m` does, so processes writing one file never lose a run.
 *
 * The process's profile is first written whole to a temporary file next to the path
 * (open_target). Then, under an exclusive flock of the file the path names:
 * - nothing there: the temporary file is linked to the path (link never replaces anything);
 *   someone else was faster (EEXIST): start again;
 * - a regular file: opened with O_NOFOLLOW|O_NONBLOCK (a symbolic link is refused, a FIFO never
 *   blocks), fstat'ed (anything but a regular file is refused), locked; then lstat(path) must
 *   still name the locked inode, else the file was replaced meanwhile by the process that held
 *   the lock (a lock on a replaced inode excludes nobody): unlock and start again. Holding the
 *   lock on the inode the path names, the runtime reads it, checks it (bounds-checked parser,
 *   hashes and checksums), adds the counts and renames a new temporary file over the path
 *   before it unlocks. Every change of the path is such a rename under the lock of the inode it
 *   replaces (or a link where there was nothing), so no two merges interleave and none is lost.
 * A file of another build, or one that is corrupt, unreadable or of another container version,
 * is left untouched: one line on stderr, and this run's profile is kept under
 * "<path>.refused.<pid>" (link: never replacing anything), so the run is not lost.
 *
 * Merging follows `tally merge` (tally_report::Sum): the same build id (%m names the file
 * after it); profiles that list their modules in ascending hash (write.c sorts them; older
 * runtimes did not) make the union of their modules, equal hashes added, refused when a source file
 * has two module hashes that neither holds together (same_build); others need the same module
 * (hash, metadata length, counters) at each position; counters are
 * added (modulo 2^64: see exec.c for counters below 0), path entries with equal (function,
 * kind, path) summed, sorted, zero sums dropped; pid 0; the program path kept when both name
 * the same one, else empty; a version-5 file (one run's profile put at the path) merges too,
 * without its run record: the sum is version 4. After a merged write the process's counters
 * are zeroed, so a later write (tally_write_profile, a failed exec, exit) adds only what came
 * after.
 *
 * No malloc: files are read into anonymous mappings.
 */
#include "rt.h"

#include <sys/file.h>

/* A profile bigger than this is refused (the reader's bound too). */
#define MERGE_MAX ((uint64_t)4 << 30)
/* A path entry: u32 function, u32 kind, u64 path, u64 count. */
#define PATH_ENTRY_BYTES 24u

static char tmp2[PATH_CAP + 64];
static char fallback[PATH_CAP + 64];
static char reason[PATH_CAP + 256];
static char line[3 * PATH_CAP];

int merge_open_target(const char *path, char *tmp, size_t tmpcap, int *err, const char **why) {
    struct stat st;
    *err = 0;
    *why = 0;
    tmp[0] = 0;
    if (lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode)) {
            *why = "it is a symbolic link (a merged profile is never read or replaced through "
                   "one)";
            return OPEN_REFUSED;
        }
        if (S_ISDIR(st.st_mode)) {
            *err = EISDIR;
            return -2;
        }
        if (!S_ISREG(st.st_mode)) {
            *why = "it is not a regular file (a merged profile replaces only regular files)";
            return OPEN_REFUSED;
        }
    }
    return open_target(path, tmp, tmpcap, err, why);
}

/* ---- reading ------------------------------------------------------------------------------ */

struct buf {
    unsigned char *p;
    uint64_t len;
    size_t map;
};

static void buf_free(struct buf *b) {
    if (b->map)
        (void)munmap(b->p, b->map);
    b->p = 0;
    b->map = 0;
    b->len = 0;
}

/* Reads the whole regular file `fd` into a new mapping. Returns 0 or an errno. */
static int read_whole(int fd, struct buf *b) {
    struct stat st;
    b->p = 0;
    b->len = 0;
    b->map = 0;
    if (fstat(fd, &st) != 0)
        return errno;
    if (st.st_size < 0 || (uint64_t)st.st_size > MERGE_MAX || (uint64_t)st.st_size >= SIZE_MAX)
        return EFBIG;
    uint64_t len = (uint64_t)st.st_size;
    if (len == 0)
        return 0;
    void *mem = mmap(0, (size_t)len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return ENOMEM;
    b->p = mem;
    b->map = (size_t)len;
    uint64_t got = 0;
    while (got < len) {
        ssize_t k = pread(fd, b->p + got, (size_t)(len - got), (off_t)got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO; /* shorter than fstat said */
            buf_free(b);
            return e;
        }
        got += (uint64_t)k;
    }
    b->len = len;
    return 0;
}

/* A bounds-checked cursor: every read past the end sets `bad` and yields zeros. */
struct cur {
    const unsigned char *p;
    uint64_t len, pos;
    int bad;
};

static const unsigned char *take(struct cur *c, uint64_t n) {
    if (c->bad || n > c->len - c->pos) {
        c->bad = 1;
        return 0;
    }
    const unsigned char *s = c->p + c->pos;
    c->pos += n;
    return s;
}

static uint64_t le(const unsigned char *s, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)s[i] << (8 * i);
    return v;
}

static uint64_t get64(struct cur *c) {
    const unsigned char *s = take(c, 8);
    return s ? le(s, 8) : 0;
}

static uint32_t get32(struct cur *c) {
    const unsigned char *s = take(c, 4);
    return s ? (uint32_t)le(s, 4) : 0;
}

static uint64_t fnv(uint64_t h, const unsigned char *s, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ s[i]) * TALLY_FNV_PRIME;
    return h;
}

struct prof {
    uint64_t count;
    const unsigned char *path, *id;
    uint64_t path_len;
    uint32_t id_kind, id_len;
    uint32_t flags;  /* TALLY_PROFILE_RACED, TALLY_PROFILE_SIGNALED and its signal, or 0 */
    struct cur mods; /* at the first module record */
    int sorted;      /* module hashes ascending (newer runtimes write them so) */
};

struct mod {
    uint64_t hash, meta_len, num_counters, num_paths;
    const unsigned char *meta, *counters, *paths;
};

/* One module record at c. Returns 0 when it is well formed: magic, lengths inside the file,
 * metadata hash, checksum, path entry kinds. */
static int parse_module(struct cur *c, struct mod *m) {
    if (get64(c) != TALLY_MODULE_MAGIC)
        return -1;
    m->hash = get64(c);
    m->meta_len = get64(c);
    m->num_counters = get64(c);
    m->num_paths = get64(c);
    if (c->bad || m->meta_len > MERGE_MAX || m->num_counters > MERGE_MAX / 8 ||
        m->num_paths > MERGE_MAX / PATH_ENTRY_BYTES)
        return -1;
    m->meta = take(c, m->meta_len);
    (void)take(c, (8 - (m->meta_len & 7)) & 7);
    m->counters = take(c, m->num_counters * 8);
    m->paths = take(c, m->num_paths * PATH_ENTRY_BYTES);
    uint64_t sum = get64(c);
    if (c->bad || fnv(TALLY_FNV_OFFSET, m->meta, m->meta_len) != m->hash)
        return -1;
    uint64_t h = fnv(TALLY_FNV_OFFSET, m->counters, m->num_counters * 8);
    if (fnv(h, m->paths, m->num_paths * PATH_ENTRY_BYTES) != sum)
        return -1;
    for (uint64_t i = 0; i < m->num_paths; i++) {
        uint32_t kind = (uint32_t)le(m->paths + i * PATH_ENTRY_BYTES + 4, 4);
        if (kind != TALLY_PATH_ENTRY_COUNT && kind != TALLY_PATH_ENTRY_LOST)
            return -1;
    }
    return 0;
}

/* Parses and checks a whole profile. Returns 0, or a reason. */
static const char *parse(const struct buf *b, struct prof *p) {
    struct cur c = {b->p, b->len, 0, 0};
    if (get64(&c) != TALLY_PROFILE_MAGIC)
        return "it is not a tally profile";
    /* Version 4, what this merge writes, or 5: one run's profile (its run record is skipped,
     * the sum is version 4; a TALLYREF record is not a module record here). */
    uint32_t version = get32(&c);
    if (version != TALLY_PROFILE_VERSION && version != TALLY_PROFILE_VERSION_RUN)
        return "it is a profile of another container version";
    p->flags = get32(&c);
    if (p->flags & ~(uint32_t)(TALLY_PROFILE_RACED | TALLY_PROFILE_SIGNALED |
                               TALLY_PROFILE_SIGNAL_MASK))
        return "it is a profile of another container version";
    p->count = get64(&c);
    (void)get64(&c); /* pid */
    p->path_len = get64(&c);
    p->id_kind = get32(&c);
    p->id_len = get32(&c);
    if (c.bad || p->path_len > TALLY_PROGRAM_PATH_MAX || p->id_len > TALLY_BUILD_ID_MAX)
        return "it is corrupt or truncated (program record)";
    p->path = take(&c, p->path_len);
    p->id = take(&c, p->id_len);
    (void)take(&c, (8 - ((p->path_len + p->id_len) & 7)) & 7);
    if (c.bad)
        return "it is corrupt or truncated (program record)";
    if (version == TALLY_PROFILE_VERSION_RUN) {
        (void)take(&c, 24); /* start_ns, end_ns, status_kind, status */
        uint64_t host = get32(&c), labels = get32(&c);
        if (c.bad || host > TALLY_RUN_HOST_MAX || labels > TALLY_RUN_LABELS_MAX)
            return "it is corrupt or truncated (run record)";
        (void)take(&c, host + labels + ((8 - ((host + labels) & 7)) & 7));
        if (c.bad)
            return "it is corrupt or truncated (run record)";
    }
    p->mods = c;
    p->sorted = 1;
    uint64_t prev = 0;
    for (uint64_t i = 0; i < p->count; i++) {
        struct mod m;
        if (parse_module(&c, &m) != 0)
            return "it is corrupt or truncated (a module record)";
        if (i && m.hash < prev)
            p->sorted = 0;
        prev = m.hash;
    }
    uint64_t at = c.pos;
    if (get64(&c) != TALLY_TRAILER_MAGIC || get64(&c) != at + 16 || c.bad || c.pos != b->len)
        return "it is corrupt or truncated (trailer)";
    return 0;
}

/* ---- merging ------------------------------------------------------------------------------ */

struct entry {
    uint32_t function, kind;
    uint64_t path, count;
};

static int entry_less(const struct entry *a, const struct entry *b) {
    if (a->function != b->function)
        return a->function < b->function;
    if (a->kind != b->kind)
        return a->kind < b->kind;
    return a->path < b->path;
}

static void load_entries(struct entry *e, const unsigned char *s, uint64_t n) {
    for (uint64_t i = 0; i < n; i++, s += PATH_ENTRY_BYTES) {
        e[i].function = (uint32_t)le(s, 4);
        e[i].kind = (uint32_t)le(s + 4, 4);
        e[i].path = le(s + 8, 8);
        e[i].count = le(s + 16, 8);
    }
}

/* Sorts n entries (Shell sort, gaps shrinking by 2.25x) and sums equal keys in place, dropping
 * zero sums. Returns the number left. */
static uint64_t sum_entries(struct entry *e, uint64_t n) {
    uint64_t gap = 1;
    while (gap < n / 2)
        gap = gap * 9 / 4 + 1;
    for (;; gap = gap * 4 / 9 ? gap * 4 / 9 : 1) {
        for (uint64_t i = gap; i < n; i++) {
            struct entry v = e[i];
            uint64_t k = i;
            for (; k >= gap && entry_less(&v, &e[k - gap]); k -= gap)
                e[k] = e[k - gap];
            e[k] = v;
        }
        if (gap == 1)
            break;
    }
    uint64_t out = 0;
    for (uint64_t i = 0; i < n;) {
        struct entry s = e[i++];
        while (i < n && !entry_less(&s, &e[i]) && !entry_less(&e[i], &s))
            s.count += e[i++].count;
        if (s.count)
            e[out++] = s;
    }
    return out;
}

/* The modules of a profile one at a time, in file order. */
struct walk {
    struct cur c;
    uint64_t left;
    struct mod m;
    int have;
};

static void walk_begin(struct walk *w, const struct prof *p) {
    w->c = p->mods;
    w->left = p->count;
    w->have = 0;
    if (w->left && parse_module(&w->c, &w->m) == 0) {
        w->left--;
        w->have = 1;
    }
}

static void walk_next(struct walk *w) {
    w->have = 0;
    if (w->left && parse_module(&w->c, &w->m) == 0) {
        w->left--;
        w->have = 1;
    }
}

/* Steps through the union of two sorted module lists: *x and *y are set to the next module
 * of a and of b with the smallest hash (both when the hashes are equal: the k-th record of a
 * hash in a pairs with the k-th in b), the other NULL. Returns 0 at the end. */
static int join_next(struct walk *wa, struct walk *wb, const struct mod **x,
                     const struct mod **y) {
    *x = 0;
    *y = 0;
    if (!wa->have && !wb->have)
        return 0;
    if (wa->have && (!wb->have || wa->m.hash <= wb->m.hash))
        *x = &wa->m;
    if (wb->have && (!wa->have || wb->m.hash <= wa->m.hash))
        *y = &wb->m;
    return 1;
}

static void join_advance(struct walk *wa, struct walk *wb, const struct mod *x,
                         const struct mod *y) {
    if (x)
        walk_next(wa);
    if (y)
        walk_next(wb);
}

/* The source path at the start of a module's metadata ("TALLYMD\0", u32 version, then the
 * postcard string: a LEB128 length and the bytes). Returns 0 when it cannot be read. */
static int mod_source(const struct mod *m, const unsigned char **s, uint64_t *n) {
    uint64_t at = 12, len = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (at >= m->meta_len)
            return 0;
        unsigned char b = m->meta[at++];
        len |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (len > m->meta_len - at)
                return 0;
            *s = m->meta + at;
            *n = len;
            return 1;
        }
    }
    return 0;
}

static int holds_hash(const struct prof *p, uint64_t h) {
    struct walk w;
    for (walk_begin(&w, p); w.have; walk_next(&w))
        if (w.m.hash == h)
            return 1;
    return 0;
}

/* Checks that `a` (on disk) and `b` (this run) can be added: the same build id, and either
 * the same modules at each position or, when both list them in ascending hash, modules that
 * may form a union as `tally merge` forms it (tally_report::Sum): equal hashes with equal
 * lengths, and no source file with two module hashes that neither profile holds together (a
 * rebuild, not one file built into two images). */
static const char *same_build(const struct prof *a, const struct prof *b) {
    if (a->id_kind != b->id_kind || a->id_len != b->id_len ||
        memcmp(a->id, b->id, a->id_len) != 0)
        return "it is a profile of another build (build id differs)";
    struct walk wa, wb;
    const struct mod *x, *y;
    if (!a->sorted || !b->sorted) {
        if (a->count != b->count)
            return "it is a profile of another build (module count differs)";
        walk_begin(&wa, a);
        walk_begin(&wb, b);
        for (; wa.have && wb.have; walk_next(&wa), walk_next(&wb))
            if (wa.m.hash != wb.m.hash || wa.m.meta_len != wb.m.meta_len ||
                wa.m.num_counters != wb.m.num_counters)
                return "it is a profile of another build (a module differs)";
        return 0;
    }
    walk_begin(&wa, a);
    walk_begin(&wb, b);
    for (; join_next(&wa, &wb, &x, &y); join_advance(&wa, &wb, x, y))
        if (x && y && (x->meta_len != y->meta_len || x->num_counters != y->num_counters))
            return "it is a profile of another build (a module differs)";
    for (walk_begin(&wa, a); wa.have; walk_next(&wa)) {
        const unsigned char *sx;
        uint64_t nx;
        if (!mod_source(&wa.m, &sx, &nx))
            continue;
        for (walk_begin(&wb, b); wb.have; walk_next(&wb)) {
            const unsigned char *sy;
            uint64_t ny;
            if (wa.m.hash == wb.m.hash || !mod_source(&wb.m, &sy, &ny) || nx != ny ||
                memcmp(sx, sy, nx) != 0)
                continue;
            if (!holds_hash(a, wb.m.hash) && !holds_hash(b, wa.m.hash))
                return "it is a profile of another build (a module differs: its source file "
                       "was built another way)";
        }
    }
    return 0;
}

/* Writes one module record: x plus y (either may be NULL; equal hashes, lengths checked).
 * Returns 0 or an errno. */
static int write_module(const struct mod *x, const struct mod *y) {
    static const unsigned char zeros[8];
    const struct mod *m = y ? y : x;
    uint64_t nx = x ? x->num_paths : 0, ny = y ? y->num_paths : 0;
    uint64_t n = nx + ny;
    struct entry *e = 0;
    size_t map = 0;
    if (n) {
        if (n > SIZE_MAX / sizeof *e)
            return ENOMEM;
        map = (size_t)n * sizeof *e;
        void *mem = mmap(0, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
            return ENOMEM;
        e = mem;
        if (x)
            load_entries(e, x->paths, nx);
        if (y)
            load_entries(e + nx, y->paths, ny);
        n = sum_entries(e, n);
    }
    out_u64(TALLY_MODULE_MAGIC);
    out_u64(m->hash);
    out_u64(m->meta_len);
    out_u64(m->num_counters);
    out_u64(n);
    out_bytes(m->meta, m->meta_len);
    out_bytes(zeros, (8 - (m->meta_len & 7)) & 7);
    out_checksum_begin();
    for (uint64_t k = 0; k < m->num_counters; k++) {
        uint64_t v = x ? le(x->counters + 8 * k, 8) : 0;
        out_u64(v + (y ? le(y->counters + 8 * k, 8) : 0)); /* modulo 2^64 */
    }
    for (uint64_t k = 0; k < n; k++) {
        out_u32(e[k].function);
        out_u32(e[k].kind);
        out_u64(e[k].path);
        out_u64(e[k].count);
    }
    out_checksum_end();
    if (map)
        (void)munmap(e, map);
    return 0;
}

/* Writes the sum of a and b (checked by parse and same_build) to fd: the same modules at each
 * position added, or, both sorted, the union in ascending hash. Returns 0 or an errno. */
static int write_sum(int fd, const struct prof *a, const struct prof *b) {
    static const unsigned char zeros[8];
    int join = a->sorted && b->sorted;
    struct walk wa, wb;
    const struct mod *x, *y;
    uint64_t count = 0;
    if (join) {
        walk_begin(&wa, a);
        walk_begin(&wb, b);
        for (; join_next(&wa, &wb, &x, &y); join_advance(&wa, &wb, x, y))
            count++;
    } else {
        count = a->count;
    }
    out_begin(fd);
    out_u64(TALLY_PROFILE_MAGIC);
    out_u32(TALLY_PROFILE_VERSION);
    /* As tally merge: the flags are kept, the first signal with them. */
    uint32_t flags = (a->flags | b->flags) & ~(uint32_t)TALLY_PROFILE_SIGNAL_MASK;
    flags |= ((a->flags & TALLY_PROFILE_SIGNALED) ? a->flags : b->flags) & TALLY_PROFILE_SIGNAL_MASK;
    out_u32(TALLY_PROFILE_FLAGS | flags);
    out_u64(count);
    out_u64(0); /* pid: merged */
    int same_path = a->path_len == b->path_len && memcmp(a->path, b->path, a->path_len) == 0;
    uint64_t path_len = same_path ? b->path_len : 0;
    out_u64(path_len);
    out_u32(b->id_kind);
    out_u32(b->id_len);
    out_bytes(b->path, path_len);
    out_bytes(b->id, b->id_len);
    out_bytes(zeros, (8 - ((path_len + b->id_len) & 7)) & 7);
    walk_begin(&wa, a);
    walk_begin(&wb, b);
    if (join) {
        for (; join_next(&wa, &wb, &x, &y); join_advance(&wa, &wb, x, y)) {
            int err = write_module(x, y);
            if (err)
                return err;
        }
    } else {
        for (; wa.have && wb.have; walk_next(&wa), walk_next(&wb)) {
            int err = write_module(&wa.m, &wb.m);
            if (err)
                return err;
        }
    }
    return out_end();
}

/* ---- committing --------------------------------------------------------------------------- */

/* One line: why `path` was not merged, and where this run's profile went instead. */
static void refuse(const char *path, const char *tmp, const char *why) {
    size_t n = put_str(fallback, 0, sizeof fallback, path);
    n = put_str(fallback, n, sizeof fallback, ".refused.");
    n = put_u64(fallback, n, sizeof fallback, (uint64_t)getpid());
    size_t k = put_str(reason, 0, sizeof reason, why);
    if (n + 1 < sizeof fallback && link(tmp, fallback) == 0) {
        k = put_str(reason, k, sizeof reason, "; this run's profile is in ");
        k = put_str(reason, k, sizeof reason, fallback);
    } else {
        k = put_str(reason, k, sizeof reason, "; this run's profile is lost (cannot link ");
        k = put_str(reason, k, sizeof reason, fallback);
        k = put_str(reason, k, sizeof reason, ": ");
        k = put_str(reason, k, sizeof reason, strerror(n + 1 < sizeof fallback ? errno : ENAMETOOLONG));
        k = put_str(reason, k, sizeof reason, ")");
    }
    (void)k;
    report_line(line, sizeof line, "not merging profile", path, reason);
}

static char errbuf[256];

static const char *errno_reason(int err) {
    size_t k = put_str(errbuf, 0, sizeof errbuf, "cannot merge: ");
    (void)put_str(errbuf, k, sizeof errbuf, strerror(err));
    return errbuf;
}

/* With the lock on the inode the path names held through fd: merge (or refuse). Returns 0
 * when the path now holds the sum, else a reason. */
static const char *merge_locked(const char *path, const char *tmp, int fd, const struct buf *nb,
                                const struct prof *np) {
    struct buf ob;
    int err = read_whole(fd, &ob);
    if (err)
        return errno_reason(err);
    if (ob.len == 0) { /* left empty by someone: no counts to keep */
        if (rename(tmp, path) != 0)
            return errno_reason(errno);
        return 0;
    }
    struct prof op;
    const char *why = parse(&ob, &op);
    if (!why)
        why = same_build(&op, np);
    if (why) {
        buf_free(&ob);
        return why;
    }
    const char *w;
    int out_fd = open_target(path, tmp2, sizeof tmp2, &err, &w);
    if (out_fd < 0) {
        buf_free(&ob);
        return w ? w : errno_reason(err);
    }
    err = write_sum(out_fd, &op, np);
    if (close(out_fd) != 0 && !err && errno != EINTR)
        err = errno;
    if (!err && rename(tmp2, path) != 0)
        err = errno;
    if (err)
        (void)unlink(tmp2);
    buf_free(&ob);
    (void)nb;
    if (err)
        return errno_reason(err);
    (void)unlink(tmp);
    return 0;
}

void merge_commit(const char *path, const char *tmp) {
    struct buf nb = {0, 0, 0};
    struct prof np;
    const char *why = 0;
    int fd = open(tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    int err = fd < 0 ? errno : read_whole(fd, &nb);
    if (fd >= 0)
        (void)close(fd);
    if (err)
        why = errno_reason(err);
    else if (parse(&nb, &np))
        why = "cannot merge: this run's profile does not read back";
    int merged = 0;
    for (int attempt = 0; !why && !merged; attempt++) {
        if (attempt == 10000) {
            why = "cannot merge: the file keeps changing";
            break;
        }
        if (link(tmp, path) == 0) { /* nothing there: this run's profile is the file */
            (void)unlink(tmp);
            merged = 1;
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno != EEXIST) {
            /* No hard links here: an empty file stands for "no profile yet". */
            int e = errno;
            int c = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                         0666);
            if (c >= 0)
                (void)close(c);
            else if (errno != EEXIST) {
                why = errno_reason(e);
                break;
            }
        }
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
            if (errno == ENOENT || errno == EINTR)
                continue;
            why = errno == ELOOP ? "it is a symbolic link (a merged profile is never read or "
                                   "replaced through one)"
                                 : errno_reason(errno);
            break;
        }
        struct stat fs, ls;
        if (fstat(fd, &fs) != 0 || !S_ISREG(fs.st_mode)) {
            (void)close(fd);
            why = "it is not a regular file (a merged profile replaces only regular files)";
            break;
        }
        int rc;
        while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR)
            ;
        if (rc != 0) {
            why = errno_reason(errno);
            (void)close(fd);
            break;
        }
        if (lstat(path, &ls) != 0 || ls.st_dev != fs.st_dev || ls.st_ino != fs.st_ino) {
            (void)close(fd); /* replaced while we waited: lock the new one */
            continue;
        }
        why = merge_locked(path, tmp, fd, &nb, &np);
        merged = !why;
        (void)close(fd); /* unlocks */
    }
    if (why) {
        refuse(path, tmp, why);
        (void)unlink(tmp);
    } else {
        struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
        if (r)
            reset_locked(r);
        else
            reset_self();
    }
    buf_free(&nb);
}
