/*
 * write.c -- writing the profile container (docs/design/profile.md, "Profile container"): where it goes,
 * how it is opened safely, the records of live and dlclosed modules.
 */
#include "rt.h"

/* ------------------------------------------------------------------------------------------ */
/* Writing the profile                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* Static state of the writer; used only under reg_lock (or after failing to take it). */
static struct {
    int fd;
    int err; /* errno of the first failure, 0 if none */
    uint64_t total;
    int summing;  /* the bytes written feed `sum` (a module's counters and path entries) */
    uint64_t sum; /* FNV-1a 64 of them */
    size_t n;
    unsigned char buf[16384];
    char path[PATH_CAP];
    char tmp[PATH_CAP + 64];
    char line[PATH_CAP + 256];
    /* TALLY_META=shared: the records of live modules name their metadata files
     * (meta_file), which go in the profile's directory, out.path's first dir_len bytes. */
    int shared;
    size_t dir_len;
    char meta_path[PATH_CAP + 32];
    char meta_tmp[PATH_CAP + 96];
    unsigned char *mem; /* when set, the bytes go here (mem_cap bytes) instead of to fd */
    uint64_t mem_len, mem_cap;
} out;

int write_all(int fd, const void *p, size_t n) {
    const unsigned char *s = p;
    while (n) {
        ssize_t r = write(fd, s, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return errno ? errno : EIO;
        }
        if (r == 0)
            return EIO;
        s += r;
        n -= (size_t)r;
    }
    return 0;
}

static void out_flush(void) {
    if (!out.err && out.n) {
        if (out.mem) {
            if (out.n > out.mem_cap - out.mem_len) {
                out.err = EOVERFLOW;
            } else {
                memcpy(out.mem + out.mem_len, out.buf, out.n);
                out.mem_len += out.n;
            }
        } else {
            out.err = write_all(out.fd, out.buf, out.n);
        }
    }
    out.n = 0;
}

/* FNV-1a 64 of k bytes at d, continuing from h. A zero byte leaves `h ^ 0 = h`, so the zero bytes
 * at the top of a little-endian word only multiply by the prime: eight zero bytes are one
 * multiplication by TALLY_FNV_PRIME^8, and a small counter (its low bytes set, the rest zero)
 * is its significant bytes and one multiplication. Same value as the byte loop; the profile of
 * a short run is mostly zero and small counters, whose byte-by-byte sum was the largest part
 * of writing it (SQLite under callgrind: 2.0M instructions, docs/log/sese.md). */
static uint64_t fnv_bytes(uint64_t h, const unsigned char *d, size_t k) {
    /* fnv_pow[j] = TALLY_FNV_PRIME^j mod 2^64 */
    static const uint64_t fnv_pow[9] = {
        0x1ull,
        0x100000001b3ull,
        0x366000002e329ull,
        0x8a97b0004e7feabull,
        0x9ffaac085635bc91ull,
        0xcaee32a7d4f6a63ull,
        0xdc966432edf1c639ull,
        0xc5527b8a51d3d2dbull,
        0x1efac7090aef4a21ull,
    };
    size_t i = 0;
    if (!TALLY_BIG_ENDIAN) {
        for (; i + 8 <= k; i += 8) {
            uint64_t w;
            memcpy(&w, d + i, 8); /* byte j of the word is d[i + j] (little-endian) */
            unsigned sig = w ? 8 - (unsigned)__builtin_clzll(w) / 8 : 0;
            for (unsigned j = 0; j < sig; j++)
                h = (h ^ ((w >> (8 * j)) & 0xff)) * TALLY_FNV_PRIME;
            h *= fnv_pow[8 - sig];
        }
    }
    for (; i < k; i++)
        h = (h ^ d[i]) * TALLY_FNV_PRIME;
    return h;
}

/* Appends len bytes at p. Everything summed goes through the buffer, and the checksum is taken
 * over the buffer's copy: counters other threads keep incrementing while the profile is
 * written must not differ between what is summed and what is written. Bytes not summed (a
 * module's description, constant) that fill the buffer at least once go to the file
 * directly, without the copy. */
void out_bytes(const void *p, uint64_t len) {
    const unsigned char *s = p;
    if (out.err)
        return;
    out.total += len;
    if (!out.summing && !out.mem && len >= sizeof out.buf) {
        out_flush();
        if (!out.err && len > SIZE_MAX)
            out.err = EOVERFLOW;
        if (!out.err)
            out.err = write_all(out.fd, s, (size_t)len);
        return;
    }
    while (len) {
        if (out.n == sizeof out.buf) {
            out_flush();
            if (out.err)
                return;
        }
        size_t k = sizeof out.buf - out.n;
        if (k > len)
            k = (size_t)len;
        unsigned char *d = out.buf + out.n;
        memcpy(d, s, k);
        if (out.summing)
            out.sum = fnv_bytes(out.sum, d, k);
        out.n += k;
        s += k;
        len -= k;
    }
}

void out_u32(uint32_t v) {
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    out_bytes(b, 4);
}

void out_u64(uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    out_bytes(b, 8);
}

/* The writer as merge.c uses it too: start writing to fd; a checksummed part; the trailer. */
void out_begin(int fd) {
    out.fd = fd;
    out.err = 0;
    out.total = 0;
    out.n = 0;
    out.summing = 0;
    out.mem = 0;
}

void out_checksum_begin(void) {
    out.summing = 1;
    out.sum = TALLY_FNV_OFFSET;
}

void out_checksum_end(void) {
    out.summing = 0;
    out_u64(out.sum);
}

/* Writes the trailer and flushes; returns the first error (0 if none). */
int out_end(void) {
    out_u64(TALLY_TRAILER_MAGIC);
    out_u64(out.total + 8);
    out_flush();
    return out.err;
}

/* Home slots of table `t` that may hold a count: all of them once the runtime has claimed
 * one, else only slot 0 (path 0's home, the one path instrumented code can count in a slot the
 * runtime never gave out). Keeps the profile writer off the home tables of functions that
 * never ran. */
static uint64_t home_scan(const struct tally_path_table *t) {
    return !t->home ? 0 : t->home_claims ? TALLY_PATH_HOME_SLOTS : 1;
}

/* An upper bound of the path entries a module writes (out_path_entries pads up to it): per
 * table, its home slots in use, the overflow slots in use, and one loss entry. Cheaper than
 * counting the non-zero entries, which would walk every table twice. */
static uint64_t path_entries(const struct tally_module *m) {
    uint64_t n = 0;
    for (uint64_t i = 0; m->path_tables && i < m->num_path_tables; i++) {
        const struct tally_path_table *t = &m->path_tables[i];
        uint64_t home = t->home_claims + 1;
        n += (home < TALLY_PATH_HOME_SLOTS ? home : TALLY_PATH_HOME_SLOTS) + t->used + 1;
    }
    return n;
}

static void out_path_entries(const struct tally_module *m, uint64_t limit) {
    uint64_t n = 0;
    for (uint64_t i = 0; m->path_tables && i < m->num_path_tables; i++) {
        const struct tally_path_table *t = &m->path_tables[i];
        for (int pass = 0; pass < 2; pass++) {
            /* Overflow keys are path + 1 (0: empty), home keys the path (count 0: free). */
            const uint64_t *w = pass ? t->home : t->slots;
            uint64_t cap = pass ? home_scan(t) : t->capacity;
            for (uint64_t j = 0; j < cap && n < limit; j++) {
                uint64_t k = w[2 * j], v = w[2 * j + 1];
                if ((pass || k != 0) && v != 0) {
                    out_u32(t->function);
                    out_u32(TALLY_PATH_ENTRY_COUNT);
                    out_u64(pass ? k : k - 1);
                    out_u64(v);
                    n++;
                }
            }
        }
        if (t->lost && n < limit) {
            out_u32(t->function);
            out_u32(TALLY_PATH_ENTRY_LOST);
            out_u64(0);
            out_u64(t->lost);
            n++;
        }
    }
    for (; n < limit; n++) { /* fewer than the bound: pad with empty losses */
        out_u32(0);
        out_u32(TALLY_PATH_ENTRY_LOST);
        out_u64(0);
        out_u64(0);
    }
}

/* A module record's header: magic, hash, metadata length, counter and path entry counts. */
static void out_module_head(uint64_t magic, const struct tally_module *m, uint64_t entries) {
    out_u64(magic);
    out_u64(m->hash);
    out_u64(m->meta_len);
    out_u64(m->num_counters);
    out_u64(entries);
}

static void out_module(const struct tally_module *m) {
    static const unsigned char zeros[8];
    uint64_t entries = path_entries(m);
    out_module_head(TALLY_MODULE_MAGIC, m, entries);
    out_bytes(m->meta, m->meta_len);
    out_bytes(zeros, (8 - (m->meta_len & 7)) & 7);
    if (m->num_counters > UINT64_MAX / 8) {
        out.err = EOVERFLOW;
        return;
    }
    out_checksum_begin();
    if (!TALLY_BIG_ENDIAN) {
        out_bytes(m->counters, m->num_counters * 8);
    } else {
        for (uint64_t i = 0; i < m->num_counters && !out.err; i++)
            out_u64(m->counters[i]);
    }
    out_path_entries(m, entries);
    out_checksum_end();
}

/* Appends `pattern` to dst at n with %p (the pid) and %% expanded, %m (when `sig` is given:
 * then *merge is set) to `sig`, %c (continuous mode) to nothing. Returns the new length, or
 * cap when it did not fit. */
static size_t expand(char *dst, size_t n, size_t cap, const char *pattern, const char *sig,
                     int *merge) {
    for (const char *s = pattern; *s; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            n = put_u64(dst, n, cap, (uint64_t)getpid());
            s++;
        } else if (s[0] == '%' && s[1] == 'm' && sig) {
            n = put_str(dst, n, cap, sig);
            *merge = 1;
            s++;
        } else if (s[0] == '%' && s[1] == 'c') { /* continuous mode: expands to nothing */
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            n = put_str(dst, n, cap, "%");
            s++;
        } else {
            char c[2] = {*s, 0};
            n = put_str(dst, n, cap, c);
        }
        if (n + 1 >= cap)
            return cap;
    }
    return n;
}

/* Whether the existing directory entry `path` may be used as a directory of the baked-in
 * profile path: a directory, or a symbolic link to one that the process's user or root owns
 * (as the kernel's protected_symlinks has it: a link someone else planted is not followed). */
static int dir_usable(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno;
    if (S_ISLNK(st.st_mode)) {
        if (st.st_uid != geteuid() && st.st_uid != 0)
            return ELOOP;
        if (stat(path, &st) != 0)
            return errno;
    }
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

/* mkdir -p of the directories of `path` (everything before its last '/'), each made with mode
 * 0755 & ~umask, as clang's runtime (lprofDirMode) and gcc's libgcov make them; an existing
 * component must pass dir_usable. Returns 0 or an errno. Async-signal-safe (mkdir, lstat,
 * stat). */
static int make_dirs(char *path) {
    char *last = strrchr(path, '/');
    if (!last || last == path)
        return 0;
    for (char *p = path + 1; p <= last; p++) {
        if (*p != '/')
            continue;
        if (p[-1] == '/') /* "a//b" */
            continue;
        *p = 0;
        int err = 0;
        if (mkdir(path, 0755) != 0)
            err = errno == EEXIST ? dir_usable(path) : errno;
        *p = '/';
        if (err)
            return err;
    }
    return 0;
}

/* The base name of the executable (" (deleted)" dropped), else the short invocation name. */
static size_t put_base(char *dst, size_t n, size_t cap) {
    char exe[PATH_CAP];
    const char *base = 0;
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        static const char deleted[] = " (deleted)";
        size_t dl = sizeof deleted - 1;
        if ((size_t)len > dl && strcmp(exe + len - dl, deleted) == 0)
            exe[len - dl] = 0;
        const char *slash = strrchr(exe, '/');
        base = slash ? slash + 1 : exe;
    }
    if (!base || !*base)
        base = program_invocation_short_name;
    if (!base || !*base)
        base = "program";
    return put_str(dst, n, cap, base);
}

/* Builds an output path into dst: the saved value of a TALLY_* variable with %p and %%
 * expanded (and %m, when `sig` is given: then *merge is set if one was, see merge.c; %c,
 * continuous mode, expands to nothing); when it is unset or empty, the baked-in directory of
 * `tally cc --tally-profile-dir=DIR` (env.profile_dir, expanded the same way, its missing
 * directories created) with "<basename of the executable>.%m<suffix>" in it when `sig` is
 * given (*merge set: the runs of one build add up, as clang's default_%m.profraw and gcov's
 * .gcda do), "<basename><suffix>" otherwise (traces, which cannot be merged); without it,
 * "<basename of the executable><suffix>" in the current directory. In an AT_SECURE process
 * neither the variable nor the directory was saved. Returns 0 (ok), 1 (var=off) or an errno. */
int build_path_for(char *dst, size_t cap, const struct env_value *ev, const char *suffix,
                   const char *sig, int *merge) {
    size_t n = 0;
    dst[0] = 0;
    if (ev->set && ev->too_long)
        return ENAMETOOLONG;
    if (ev->set && ev->v[0]) {
        if (strcmp(ev->v, "off") == 0)
            return 1;
        return expand(dst, 0, cap, ev->v, sig, merge) >= cap ? ENAMETOOLONG : 0;
    }
    if (env.profile_dir.set) {
        n = expand(dst, 0, cap, env.profile_dir.v, sig, merge);
        if (n < cap && (n == 0 || dst[n - 1] != '/'))
            n = put_str(dst, n, cap, "/");
        n = put_base(dst, n, cap);
        if (sig) {
            n = put_str(dst, n, cap, ".");
            n = put_str(dst, n, cap, sig);
            *merge = 1;
        }
        n = put_str(dst, n, cap, suffix);
        if (n + 1 >= cap)
            return ENAMETOOLONG;
        return make_dirs(dst);
    }
    n = put_base(dst, n, cap);
    n = put_str(dst, n, cap, suffix);
    if (n + 1 >= cap)
        return ENAMETOOLONG;
    return 0;
}

/* Builds the profile path into out.path, %m expanded to `sig`. Returns 0 (ok), 1
 * (TALLY_PROFILE=off) or an errno. */
static int build_path(const char *sig, int *merge) {
    return build_path_for(out.path, sizeof out.path, &env.profile, ".tally", sig, merge);
}

/* "tally: <what> <path>: <reason>\n" on stderr, built in `line`. */
void report_line(char *line, size_t cap, const char *what, const char *path,
                        const char *reason) {
    size_t n = put_str(line, 0, cap, "tally: ");
    n = put_str(line, n, cap, what);
    n = put_str(line, n, cap, " ");
    n = put_str(line, n, cap, path);
    n = put_str(line, n, cap, ": ");
    n = put_str(line, n, cap, reason);
    if (n + 2 > cap)
        n = cap - 2;
    line[n++] = '\n';
    write_stderr(line, n);
}

/* The process that printed the profile writers' line (0: none yet). A write that failed
 * leaves the counters as they were, so the next write (after a failed exec, at exit) tries
 * again with every count; a process whose writes keep failing -- a child that changed its uid
 * and cannot write where its parent could, trying exec after exec as a shell or Python's
 * subprocess does, then _exit -- says so once. A fork child has its own line. */
static pid_t reported;

void profile_report(char *line, size_t cap, const char *what, const char *path,
                    const char *reason) {
    pid_t pid = getpid();
    if (__atomic_exchange_n(&reported, pid, __ATOMIC_RELAXED) == pid)
        return;
    report_line(line, cap, what, path, reason);
}

static void report_failure(const char *path, int err) {
    profile_report(out.line, sizeof out.line, "cannot write profile", path, strerror(err));
}

/* 64 unpredictable bits for temporary names: getrandom, else /dev/urandom, else (neither
 * available) a mix of clocks, pid and a counter -- guessable, but O_EXCL still refuses a
 * name someone planted. */
static uint64_t random64(void) {
    static uint64_t calls;
    uint64_t r = 0;
#ifdef SYS_getrandom
    if (syscall(SYS_getrandom, &r, sizeof r, 1 /* GRND_NONBLOCK */) == (long)sizeof r)
        return r;
#endif
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    if (fd >= 0) {
        ssize_t k = read(fd, &r, sizeof r);
        (void)close(fd);
        if (k == (ssize_t)sizeof r)
            return r;
    }
    struct timespec a = {0, 0}, b = {0, 0};
    (void)clock_gettime(CLOCK_REALTIME, &a);
    (void)clock_gettime(CLOCK_MONOTONIC, &b);
    r = ((uint64_t)a.tv_nsec << 32) ^ (uint64_t)a.tv_sec ^ ((uint64_t)b.tv_nsec << 17) ^
        ((uint64_t)getpid() << 40) ^ (uintptr_t)&calls ^ __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    return r * TALLY_FNV_PRIME;
}


/* Opens where the runtime writes the file `path` (a profile or a trace), never writing through
 * a symbolic link and never replacing anything but a regular file or a symbolic link:
 * - `path` missing, a regular file, or a symbolic link to a regular file or to nothing: a new
 *   file is created next to it, "<path>.tmp.<pid>.<16 hex digits from random64>", with
 *   O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC and mode 0666 & ~umask (another name on EEXIST); the
 *   caller renames it to `path` (which replaces a symbolic link itself, never its target);
 *   `tmp` receives its name;
 * - `path` a FIFO or a character device (e.g. /dev/null), not through a symbolic link: opened
 *   in place with O_WRONLY|O_NOFOLLOW|O_NONBLOCK, checked (fstat) to be the node lstat saw,
 *   then made blocking; a FIFO without a reader fails (ENXIO) instead of hanging; `tmp` is "";
 * - a directory: EISDIR;
 * - anything else (a block device, a socket, a symbolic link to a directory, a FIFO or a
 *   device, e.g. /dev/stdout): refused, *why says why.
 * Returns a descriptor, OPEN_REFUSED with *why set, or -2 with *err set to an errno. */
int open_target(const char *path, char *tmp, size_t tmpcap, int *err, const char **why) {
    struct stat st;
    tmp[0] = 0;
    *err = 0;
    *why = 0;
    if (lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode)) {
            struct stat t;
            if (stat(path, &t) == 0 && !S_ISREG(t.st_mode)) {
                *why = "it is a symbolic link to something that is not a regular file "
                       "(only regular files are replaced, FIFOs and character devices written "
                       "in place when named directly)";
                return OPEN_REFUSED;
            }
        } else if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
            int fd;
            do {
                fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
            } while (fd < 0 && errno == EINTR);
            if (fd < 0 && errno == ENXIO && S_ISFIFO(st.st_mode)) {
                *why = "it is a FIFO that no process is reading";
                return OPEN_REFUSED;
            }
            if (fd < 0) {
                *err = errno;
                return -2;
            }
            struct stat f;
            if (fstat(fd, &f) != 0 || f.st_dev != st.st_dev || f.st_ino != st.st_ino ||
                (f.st_mode & S_IFMT) != (st.st_mode & S_IFMT)) {
                (void)close(fd);
                *err = EAGAIN;
                return -2;
            }
            int fl = fcntl(fd, F_GETFL);
            if (fl != -1)
                (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
            return fd;
        } else if (S_ISDIR(st.st_mode)) {
            *err = EISDIR;
            return -2;
        } else if (!S_ISREG(st.st_mode)) {
            *why = "it is not a regular file, a FIFO or a character device";
            return OPEN_REFUSED;
        }
    } else if (errno != ENOENT) {
        *err = errno;
        return -2;
    }
    for (int attempt = 0; attempt < 100; attempt++) {
        static const char hex[] = "0123456789abcdef";
        uint64_t r = random64();
        char h[17];
        for (int i = 0; i < 16; i++)
            h[i] = hex[(r >> (4 * i)) & 15];
        h[16] = 0;
        size_t n = put_str(tmp, 0, tmpcap, path);
        n = put_str(tmp, n, tmpcap, ".tmp.");
        n = put_u64(tmp, n, tmpcap, (uint64_t)getpid());
        n = put_str(tmp, n, tmpcap, ".");
        n = put_str(tmp, n, tmpcap, h);
        if (n + 1 >= tmpcap) {
            tmp[0] = 0;
            *err = ENAMETOOLONG;
            return -2;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0666);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST && errno != EINTR) {
            *err = errno;
            tmp[0] = 0;
            return -2;
        }
    }
    tmp[0] = 0;
    *err = EEXIST;
    return -2;
}

/* An AT_SECURE process writes only the default file, in its current directory, and only when
 * the real user owns that directory (so the file lands where that user could put one anyway,
 * and nowhere the privileged identity alone may write). Returns 1 when writing is allowed. */
int secure_target_ok(void) {
    if (!env.secure)
        return 1;
    struct stat st;
    return stat(".", &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid();
}

const char secure_refusal[] =
    "setuid/setgid process: the current directory is not owned by the real user";

/* The module records of the process in list order: every live copy's modules (copies in
 * joining order), then those of dlclosed objects. (Written in ascending hash, see
 * write_profile_locked.) */
struct rec {
    const struct tally_module *m;  /* a live module, or */
    const struct dead_module *d;   /* the saved record of a dlclosed one */
};

struct rec_it {
    const struct tally_instance *in;
    const struct tally_module *m;
    const struct dead_module *d;
};

static void rec_begin(struct rec_it *it, const struct tally_instance *live,
                      const struct dead_module *dead) {
    it->in = live;
    it->m = live ? __atomic_load_n(live->modules, __ATOMIC_ACQUIRE) : 0;
    it->d = dead;
}

static int rec_next(struct rec_it *it, struct rec *r) {
    while (it->in) {
        if (it->m) {
            r->m = it->m;
            r->d = 0;
            it->m = __atomic_load_n(&it->m->next, __ATOMIC_ACQUIRE);
            return 1;
        }
        it->in = it->in->next;
        it->m = it->in ? __atomic_load_n(it->in->modules, __ATOMIC_ACQUIRE) : 0;
    }
    if (it->d) {
        r->m = 0;
        r->d = it->d;
        it->d = it->d->next;
        return 1;
    }
    return 0;
}

/* A record's header words: magic, hash, meta_len, num_counters, num_path_entries (for a live
 * module with path tables, 1: such records are never merged). */
static void rec_head(struct rec r, uint64_t h[5]) {
    if (r.m) {
        h[0] = TALLY_MODULE_MAGIC;
        h[1] = r.m->hash;
        h[2] = r.m->meta_len;
        h[3] = r.m->num_counters;
        h[4] = r.m->num_path_tables ? 1 : 0;
    } else {
        memcpy(h, r.d + 1, 5 * sizeof(uint64_t));
    }
}

static uint64_t rec_counter(struct rec r, uint64_t i) {
    if (r.m)
        return __atomic_load_n(&r.m->counters[i], __ATOMIC_RELAXED);
    uint64_t h[5], c;
    rec_head(r, h);
    memcpy(&c, (const unsigned char *)(r.d + 1) + 40 + h[2] + ((8 - (h[2] & 7)) & 7) + 8 * i, 8);
    return c;
}

/* Two records of one module (one object file linked into two images, one library loaded
 * under two names, or dlclosed while a copy stays open) are written as one, counters added,
 * when neither has hashed path entries; the reader lists a module once per record. */
static int twins(struct rec a, struct rec b) {
    uint64_t x[5], y[5];
    rec_head(a, x);
    rec_head(b, y);
    if (x[0] != TALLY_MODULE_MAGIC || y[0] != TALLY_MODULE_MAGIC || x[4] || y[4] ||
        TALLY_BIG_ENDIAN)
        return 0;
    if (a.m && !a.m->counters)
        return 0;
    if (b.m && !b.m->counters)
        return 0;
    return x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

static int has_twin_before(const struct tally_instance *live, const struct dead_module *dead,
                           struct rec r, uint64_t j) {
    struct rec_it it;
    struct rec o;
    rec_begin(&it, live, dead);
    for (uint64_t k = 0; k < j && rec_next(&it, &o); k++)
        if (twins(o, r))
            return 1;
    return 0;
}

/* `it` is positioned just after r. */
static int has_twin_after(const struct rec_it *after, struct rec r) {
    struct rec_it it = *after;
    struct rec o;
    while (rec_next(&it, &o))
        if (twins(o, r))
            return 1;
    return 0;
}

/* Writes r with the counters of every later twin added. */
static void out_twins(const struct rec_it *after, struct rec r) {
    static const unsigned char zeros[8];
    uint64_t h[5];
    rec_head(r, h);
    out_u64(TALLY_MODULE_MAGIC);
    out_u64(h[1]);
    out_u64(h[2]);
    out_u64(h[3]);
    out_u64(0);
    out_bytes(r.m ? (const void *)r.m->meta : (const void *)((const unsigned char *)(r.d + 1) + 40),
              h[2]);
    out_bytes(zeros, (8 - (h[2] & 7)) & 7);
    out_checksum_begin();
    for (uint64_t i = 0; i < h[3] && !out.err; i++) {
        uint64_t v = rec_counter(r, i);
        struct rec_it it = *after;
        struct rec o;
        while (rec_next(&it, &o))
            if (twins(o, r))
                v += rec_counter(o, i);
        out_u64(v);
    }
    out_checksum_end();
}

/* A record's metadata: in the live module, or after the header of a dlclosed one's record. */
static const void *rec_meta(struct rec r) {
    return r.m ? (const void *)r.m->meta : (const void *)((const unsigned char *)(r.d + 1) + 40);
}

/* Makes sure the metadata of record `r` is in "<profile's directory>/<hash, 16 hex
 * digits>.tallymeta" (TALLY_META=shared; its layout in tally.h), for a TALLYREF record to
 * name. A file of that name that is a regular file (not a symbolic link) of the effective user
 * or root, of the right size, is taken as it is (the reader checks its hash); a missing one is
 * written through a new temporary file (open_target) renamed into place, so concurrent
 * processes of one build each write a whole file and the last rename wins. Returns 1 when the
 * record may name the file, 0 when it must hold the metadata itself: the name is taken by
 * anything else, or the file could not be written. Async-signal-safe (lstat, open, write,
 * rename). */
static int meta_file(struct rec r) {
    static const char hex[] = "0123456789abcdef";
    static const char suffix[] = ".tallymeta";
    uint64_t h[5];
    rec_head(r, h);
    char name[16 + sizeof suffix];
    for (int i = 0; i < 16; i++)
        name[i] = hex[(h[1] >> (60 - 4 * i)) & 15];
    memcpy(name + 16, suffix, sizeof suffix);
    if (out.dir_len >= sizeof out.meta_path || h[2] > SIZE_MAX / 2)
        return 0;
    memcpy(out.meta_path, out.path, out.dir_len);
    size_t n = put_str(out.meta_path, out.dir_len, sizeof out.meta_path, name);
    if (n + 1 >= sizeof out.meta_path)
        return 0;
    out.meta_path[n] = 0;
    uint64_t want = TALLY_META_FILE_HEADER_LEN + h[2];
    struct stat st;
    if (lstat(out.meta_path, &st) == 0)
        return S_ISREG(st.st_mode) && (st.st_uid == geteuid() || st.st_uid == 0) &&
               (uint64_t)st.st_size == want;
    if (errno != ENOENT)
        return 0;
    int err;
    const char *why;
    int fd = open_target(out.meta_path, out.meta_tmp, sizeof out.meta_tmp, &err, &why);
    if (fd < 0)
        return 0;
    if (!out.meta_tmp[0]) { /* it appeared as a FIFO or a device meanwhile */
        (void)close(fd);
        return 0;
    }
    unsigned char head[TALLY_META_FILE_HEADER_LEN];
    uint64_t words[4] = {TALLY_META_FILE_MAGIC, TALLY_META_FILE_VERSION, h[1], h[2]};
    for (int w = 0; w < 4; w++)
        for (int b = 0; b < 8; b++)
            head[8 * w + b] = (unsigned char)(words[w] >> (8 * b));
    err = write_all(fd, head, sizeof head);
    if (!err)
        err = write_all(fd, rec_meta(r), (size_t)h[2]);
    if (close(fd) != 0 && !err && errno != EINTR)
        err = errno;
    if (!err && rename(out.meta_tmp, out.meta_path) != 0)
        err = errno;
    if (err)
        (void)unlink(out.meta_tmp);
    return !err;
}

/* The TALLYREF record of `r` (TALLY_META=shared, tally.h): out_module's record without the
 * metadata, which meta_file put next to the profile, and with the counters sparse: per group
 * of TALLY_SPARSE_GROUP, a mask of the non-zero ones, then those. Each counter is loaded once,
 * so the mask and the values written agree while other threads keep counting. Most counters
 * of a run are zero (SQLite's tests: 78%), so this is a fraction of the dense array. A
 * dlclosed module's record (and every module's at an exit whose destructors ran first) is
 * rewritten from its saved copy, its path entries as saved. */
static void out_module_ref(struct rec r) {
    uint64_t h[5];
    rec_head(r, h);
    uint64_t entries = r.m ? path_entries(r.m) : h[4];
    /* A saved record's counters, after its header and padded metadata (little-endian). */
    const unsigned char *saved =
        r.m ? 0 : (const unsigned char *)(r.d + 1) + 40 + h[2] + ((8 - (h[2] & 7)) & 7);
    out_u64(TALLY_REF_MAGIC);
    out_u64(h[1]);
    out_u64(h[2]);
    out_u64(h[3]);
    out_u64(entries);
    out_checksum_begin();
    for (uint64_t g = 0; g < h[3] && !out.err; g += TALLY_SPARSE_GROUP) {
        /* The group as written: its mask, then its non-zero counters; one out_bytes. */
        uint64_t w[1 + TALLY_SPARSE_GROUP], mask = 0, k = h[3] - g, n = 1;
        if (k > TALLY_SPARSE_GROUP)
            k = TALLY_SPARSE_GROUP;
        for (uint64_t i = 0; i < k; i++) {
            uint64_t v;
            if (saved)
                memcpy(&v, saved + 8 * (g + i), 8);
            else
                v = __atomic_load_n(&r.m->counters[g + i], __ATOMIC_RELAXED);
            if (v) {
                mask |= 1ull << i;
                w[n++] = v;
            }
        }
        w[0] = mask;
        if (!TALLY_BIG_ENDIAN) {
            out_bytes(w, n * 8);
        } else {
            for (uint64_t i = 0; i < n; i++)
                out_u64(w[i]);
        }
    }
    if (r.m)
        out_path_entries(r.m, entries);
    else
        out_bytes(saved + 8 * h[3], entries * 24);
    out_checksum_end();
}

/* The profile record of `m` (as out_module writes it) in a new mapping, or NULL when out of
 * memory. The caller holds the registry lock (which also guards `out`). */
struct dead_module *snapshot_module(const struct tally_module *m) {
    uint64_t entries = path_entries(m);
    if (m->meta_len > UINT64_MAX / 2 || m->num_counters > UINT64_MAX / 32 ||
        entries > UINT64_MAX / 64)
        return 0;
    uint64_t len = 40 + m->meta_len + ((8 - (m->meta_len & 7)) & 7) + m->num_counters * 8 +
                   entries * 24 + 8;
    uint64_t map = sizeof(struct dead_module) + len;
    if (len > UINT64_MAX / 4 || map > SIZE_MAX)
        return 0;
    void *mem = mmap(0, (size_t)map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return 0;
    struct dead_module *d = mem;
    d->next = 0;
    d->len = len;
    d->map_len = (size_t)map;
    out.fd = -1;
    out.err = 0;
    out.total = 0;
    out.n = 0;
    out.summing = 0;
    out.mem = (unsigned char *)(d + 1);
    out.mem_len = 0;
    out.mem_cap = len;
    out_module(m);
    out_flush();
    out.mem = 0;
    if (out.err || out.mem_len != len) {
        (void)munmap(mem, (size_t)map);
        return 0;
    }
    return d;
}

/* The module-hash build id: FNV-1a 64 of the sorted hashes of the `count` records written
 * (twins once), each as 8 little-endian bytes. Returns 0 when no memory can be mapped. */
static int modules_build_id(const struct tally_instance *live, const struct dead_module *dead,
                            uint64_t count, uint64_t *id) {
    uint64_t *h = 0;
    size_t bytes = 0;
    if (count) {
        if (count > SIZE_MAX / 8)
            return 0;
        bytes = (size_t)count * 8;
        void *mem = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
            return 0;
        h = mem;
    }
    uint64_t n = 0;
    struct rec_it it;
    struct rec rc;
    rec_begin(&it, live, dead);
    for (uint64_t j = 0; n < count && rec_next(&it, &rc); j++) {
        if (has_twin_before(live, dead, rc, j))
            continue;
        uint64_t w[5];
        rec_head(rc, w);
        h[n++] = w[1];
    }
    /* Shell sort, gaps shrinking by 2.25x down to 1. */
    uint64_t gap = 1;
    while (gap < n / 2)
        gap = gap * 9 / 4 + 1;
    for (;; gap = gap * 4 / 9 ? gap * 4 / 9 : 1) {
        for (uint64_t i = gap; i < n; i++) {
            uint64_t v = h[i], k = i;
            for (; k >= gap && h[k - gap] > v; k -= gap)
                h[k] = h[k - gap];
            h[k] = v;
        }
        if (gap == 1)
            break;
    }
    uint64_t x = TALLY_FNV_OFFSET;
    for (uint64_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++)
            x = (x ^ ((h[i] >> (8 * b)) & 0xff)) * TALLY_FNV_PRIME;
    if (h)
        (void)munmap(h, bytes);
    *id = x;
    return 1;
}

/* The build id of the program record: its kind, length and bytes (*idp: prog.id or `id`). */
static void program_id(const struct tally_instance *live, const struct dead_module *dead,
                       uint64_t count, uint32_t *kind, uint32_t *len, unsigned char id[8],
                       const unsigned char **idp) {
    uint64_t m;
    *kind = TALLY_BUILD_ID_NONE;
    *len = 0;
    *idp = prog.id;
    if (prog.id_len) {
        *kind = TALLY_BUILD_ID_GNU;
        *len = prog.id_len;
    } else if (modules_build_id(live, dead, count, &m)) {
        *kind = TALLY_BUILD_ID_MODULES;
        *len = 8;
        for (int b = 0; b < 8; b++)
            id[b] = (unsigned char)(m >> (8 * b));
        *idp = id;
    }
}

/* What %m expands to: 16 hex digits of FNV-1a 64 of the build id's kind (4 bytes, little
 * endian) and bytes -- the GNU build-id note of the executable, else the hash of its module
 * hashes -- so different builds get different names. */
static void program_signature(const struct tally_instance *live, const struct dead_module *dead,
                              uint64_t count, char sig[17]) {
    static const char hex[] = "0123456789abcdef";
    uint32_t kind, len;
    unsigned char id[8];
    const unsigned char *idp;
    program_id(live, dead, count, &kind, &len, id, &idp);
    uint64_t h = TALLY_FNV_OFFSET;
    for (int b = 0; b < 4; b++)
        h = (h ^ ((kind >> (8 * b)) & 0xff)) * TALLY_FNV_PRIME;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ idp[i]) * TALLY_FNV_PRIME;
    for (int i = 0; i < 16; i++)
        sig[i] = hex[(h >> (60 - 4 * i)) & 15];
    sig[16] = 0;
}

/* The program record: path, build id, padding (see tally.h). */
static void out_program(const struct tally_instance *live, const struct dead_module *dead,
                        uint64_t count) {
    static const unsigned char zeros[8];
    uint32_t kind, len;
    unsigned char id[8];
    const unsigned char *idp;
    program_id(live, dead, count, &kind, &len, id, &idp);
    out_u64(prog.path_len);
    out_u32(kind);
    out_u32(len);
    out_bytes(prog.path, prog.path_len);
    out_bytes(idp, len);
    out_bytes(zeros, (8 - ((prog.path_len + len) & 7)) & 7);
}

/* How the process is ending, for the run record: unknown (a signal, an exec, an explicit
 * tally_write_profile()) until exit or _exit says (run_exit_status). */
static uint32_t run_status_kind = TALLY_RUN_STATUS_UNKNOWN;
static int run_status;

void run_exit_status(int status) {
    run_status = status;
    run_status_kind = TALLY_RUN_STATUS_EXITED;
}

/* The snapshots of the process `r` (none without a registry). */
static const struct tally_parts *parts_of(const struct tally_registry *r) {
    static const struct tally_parts none;
    return r ? &r->parts : &none;
}

/* The run record (version 5, tally.h): start and end time, exit status, host, TALLY_LABELS. */
static void out_run(const struct tally_registry *r) {
    static const unsigned char zeros[8];
    struct timespec ts = {0, 0};
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t labels = 0;
    if (env.labels.set && !env.labels.too_long)
        labels = strnlen(env.labels.v, sizeof env.labels.v);
    if (labels > TALLY_RUN_LABELS_MAX)
        labels = 0;
    uint64_t host = prog.host_len <= TALLY_RUN_HOST_MAX ? prog.host_len : 0;
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    const struct tally_parts *s = parts_of(r);
    uint64_t part = __atomic_load_n(&s->writing, __ATOMIC_ACQUIRE);
    /* After a snapshot, a part starts at the last one (snapshot.c). */
    out_u64(s->from_ns ? s->from_ns : r && r->start_ns ? r->start_ns : prog.start_ns);
    out_u64(part ? s->now_ns : now);
    if (part) {
        out_u32(TALLY_RUN_STATUS_SNAPSHOT);
        out_u32((uint32_t)part);
    } else {
        out_u32(run_status_kind);
        out_u32(run_status_kind == TALLY_RUN_STATUS_EXITED ? (uint32_t)run_status : 0);
    }
    out_u32((uint32_t)host);
    out_u32((uint32_t)labels);
    out_bytes(prog.host, host);
    out_bytes(env.labels.v, labels);
    out_bytes(zeros, (8 - ((host + labels) & 7)) & 7);
}

/* The header flags of the profile written now: TALLY_PROFILE_RACED when code built without
 * atomic increments ran in a process that went multi-threaded (glibc sets
 * __libc_single_threaded to 0 when any thread is created, by anyone, and never back: the
 * fork child's case is kept by fork_prepare), TALLY_PROFILE_SIGNALED and the signal when the
 * fatal-signal handler writes it. */
static uint32_t profile_flags(const struct tally_registry *r) {
    uint32_t flags = TALLY_PROFILE_FLAGS;
    if (!r)
        return flags;
    if (__atomic_load_n(&r->nonatomic, __ATOMIC_RELAXED) &&
        (!__libc_single_threaded || __atomic_load_n(&r->threaded, __ATOMIC_RELAXED)))
        flags |= TALLY_PROFILE_RACED;
    int sig = __atomic_load_n(&r->fatal_signal, __ATOMIC_RELAXED);
    if (sig > 0 && (uint32_t)sig <= (TALLY_PROFILE_SIGNAL_MASK >> TALLY_PROFILE_SIGNAL_SHIFT))
        flags |= TALLY_PROFILE_SIGNALED | ((uint32_t)sig << TALLY_PROFILE_SIGNAL_SHIFT);
    if (r->parts.seq || __atomic_load_n(&r->parts.writing, __ATOMIC_ACQUIRE))
        flags |= TALLY_PROFILE_DELTA; /* a part of a process that takes snapshots */
    return flags;
}

/* A snapshot's path (snapshot.c): ".s<N>" before the profile path's ".tally", or after it
 * when it has none. Returns 0 or ENAMETOOLONG. */
static int snapshot_path(uint64_t part) {
    static const char ext[] = ".tally";
    char tail[sizeof ext];
    size_t n = strnlen(out.path, sizeof out.path), e = sizeof ext - 1;
    int has_ext = n > e && strcmp(out.path + n - e, ext) == 0;
    if (has_ext)
        n -= e;
    tail[0] = 0;
    if (has_ext)
        memcpy(tail, ext, sizeof ext);
    out.path[n] = 0;
    n = put_str(out.path, n, sizeof out.path, ".s");
    n = put_u64(out.path, n, sizeof out.path, part);
    n = put_str(out.path, n, sizeof out.path, tail);
    return n + 1 >= sizeof out.path ? ENAMETOOLONG : 0;
}

/* Writes the profile of the process: the modules of every live copy of the runtime and those
 * of objects dlclosed earlier, in ascending module hash. The caller holds the registry lock (or could not get it) and
 * preserves errno. Returns 0 when it was written; else it was reported (EXDEV: a snapshot of
 * a merged profile, which cannot be). */
int write_profile_locked(void) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    struct tally_instance self_only = tally__self;
    self_only.next = 0;
    struct tally_instance *live = r ? r->live : &self_only;
    const struct dead_module *dead = r ? r->dead : 0;
    uint64_t count = 0;
    struct rec_it it;
    struct rec rc;
    rec_begin(&it, live, dead);
    for (uint64_t j = 0; rec_next(&it, &rc); j++)
        if (!has_twin_before(live, dead, rc, j))
            count++;
    char sig[17];
    int merge = 0;
    program_signature(live, dead, count, sig);
    int err = build_path(sig, &merge);
    if (err == 1)
        return 1;
    uint64_t part = __atomic_load_n(&parts_of(r)->writing, __ATOMIC_ACQUIRE);
    if (!err && part && merge) {
        profile_report(out.line, sizeof out.line, "no snapshots of", out.path,
                       "a merged profile (%m) holds no parts; name one per process (%p)");
        return EXDEV;
    }
    if (!err && part)
        err = snapshot_path(part);
    if (!err && !merge && !part) /* continuous mode: replace the very file the counters were mapped from */
        (void)cont_final_path(out.path, sizeof out.path);
    if (err) {
        report_failure(out.path, err);
        return err;
    }
    if (!secure_target_ok()) {
        profile_report(out.line, sizeof out.line, "not writing profile", out.path, secure_refusal);
        return EPERM;
    }
    const char *why;
    int fd = merge ? merge_open_target(out.path, out.tmp, sizeof out.tmp, &err, &why)
                   : open_target(out.path, out.tmp, sizeof out.tmp, &err, &why);
    if (fd == OPEN_REFUSED) {
        profile_report(out.line, sizeof out.line, "not writing profile", out.path, why);
        return EPERM;
    }
    if (fd < 0) {
        report_failure(out.path, err);
        return err ? err : EIO;
    }
    /* TALLY_META=shared: only for a new file of its own (not merged, not a FIFO or device). */
    out.shared = !merge && out.tmp[0] && env.meta.set && strcmp(env.meta.v, "shared") == 0;
    if (out.shared) {
        const char *slash = strrchr(out.path, '/');
        out.dir_len = slash ? (size_t)(slash - out.path) + 1 : 0;
    }
    out_begin(fd);

    out_u64(TALLY_PROFILE_MAGIC);
    /* One run's profile is version 5 (the run record, TALLYREF records); what the %m merge
     * reads is the version 4 it writes (merge.c). */
    out_u32(merge ? TALLY_PROFILE_VERSION : TALLY_PROFILE_VERSION_RUN);
    out_u32(profile_flags(r));
    out_u64(count);
    out_u64((uint64_t)getpid());
    out_program(live, dead, count);
    if (!merge)
        out_run(r);
    /* Records in ascending module hash (list order among equal hashes), whatever the order the
     * images registered or were closed in, which depends on how the process ends (atexit
     * order at exit(), load order at _exit or a signal): profiles of one program list their
     * modules alike. Selected by scanning, without allocating (this runs in signal handlers). */
    uint64_t written = 0, last_hash = 0, last_j = 0;
    int have_last = 0;
    while (written < count) {
        struct rec best = {0, 0};
        struct rec_it best_after = {0, 0, 0};
        uint64_t best_hash = 0, best_j = 0;
        int found = 0;
        rec_begin(&it, live, dead);
        for (uint64_t j = 0; rec_next(&it, &rc); j++) {
            uint64_t w[5];
            rec_head(rc, w);
            if (have_last && (w[1] < last_hash || (w[1] == last_hash && j <= last_j)))
                continue;
            if (!found || w[1] < best_hash) {
                found = 1;
                best = rc;
                best_after = it;
                best_hash = w[1];
                best_j = j;
            }
        }
        if (!found)
            break;
        have_last = 1;
        last_hash = best_hash;
        last_j = best_j;
        if (has_twin_before(live, dead, best, best_j))
            continue;
        if (has_twin_after(&best_after, best))
            out_twins(&best_after, best);
        else if (out.shared && meta_file(best))
            out_module_ref(best);
        else if (best.m)
            out_module(best.m);
        else
            out_bytes(best.d + 1, best.d->len);
        written++;
    }
    if (written != count && !out.err)
        out.err = EAGAIN; /* the list changed under us (only without the lock) */
    err = out_end();
    if (close(fd) != 0 && !err && errno != EINTR)
        err = errno;
    if (merge && out.tmp[0] && !err) {
        merge_commit(out.path, out.tmp); /* reports its own failures */
        return 0;
    }
    if (out.tmp[0]) {
        if (!err && rename(out.tmp, out.path) != 0)
            err = errno;
        if (err)
            (void)unlink(out.tmp);
    }
    if (err)
        report_failure(out.path, err);
    return err;
}
