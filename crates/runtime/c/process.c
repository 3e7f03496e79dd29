/*
 * process.c -- this copy's module list and the one registry of the process that every copy of the
 * runtime (one per linked image) joins; module registration, dlclose, counter reset.
 */
#include "rt.h"

struct tally_module *reg_head;
struct tally_module *reg_tail;
char reg_lock;

/* ------------------------------------------------------------------------------------------ */
/* Module registry                                                                            */
/* ------------------------------------------------------------------------------------------ */




/* ------------------------------------------------------------------------------------------ */
/* Process: one registry for every copy of the runtime                                        */
/* ------------------------------------------------------------------------------------------ */

/*
 * Every linked image (the executable, each shared object) carries its own copy of this file,
 * with hidden symbols. The copies of one process find one another without exporting anything:
 * each image has a `.note.tally` ELF note (PT_NOTE) whose descriptor is the link-time constant
 * offset from the note to that copy's `struct tally_instance`; dl_iterate_phdr lists the loaded
 * images, so a copy joining the process scans their notes. The first copy to register a module
 * finds no other copy with a registry and creates one: a `struct tally_registry` in an anonymous
 * mapping that is never unmapped (so it outlives any dlclose). Every later copy finds it through
 * the copies already loaded and joins it. The copy that created it (the owner) writes the one
 * profile of the process at exit; if it lives in a shared object it pins its object with
 * RTLD_NODELETE, so the writer and its atexit handler stay until exit. Joins happen in module
 * constructors, which the dynamic loader runs one object at a time.
 *
 * A module of an object being dlclosed is copied (its whole profile record, written into
 * registry-owned memory by its own copy of the runtime) before its object goes away, and the
 * owner writes these records with the live modules at exit.
 */




HIDDEN struct tally_instance tally__self = {
    TALLY_INSTANCE_MAGIC, TALLY_ABI_VERSION, sizeof(struct tally_instance), 0, 0, &reg_head,
    settle_self, reset_self, write_self, cut_self, exec_charge_self, owner_sigaction,
    &wtrace_ops, snap_charge_self, 0, {0}, {0}};

/* The note: name "tally", type TALLY_NOTE_TYPE, descriptor an 8-byte offset from the
 * descriptor to tally__self (resolved by the static linker: no dynamic relocation). */
__asm__(".pushsection .note.tally,\"a\",@note\n"
        ".balign 4\n"
        ".long 6\n"
        ".long 8\n"
        ".long " "0x7461" "\n"
        ".asciz \"tally\"\n"
        ".balign 4\n"
        "1: .quad tally__self - 1b\n"
        ".balign 4\n"
        ".popsection\n");

/* This copy is on its registry's live list (under the registry's lock). */
static int in_live;

/* Fallback registry when no memory can be mapped (then this copy stays on its own). */
static struct tally_registry local_registry = {.magic = TALLY_REGISTRY_MAGIC};

/* Appends this copy to the registry's live list. Caller holds r->lock. */
static void enter_live_locked(struct tally_registry *r) {
    struct tally_instance **pp = &r->live;
    while (*pp)
        pp = &(*pp)->next;
    tally__self.next = 0;
    *pp = &tally__self;
    in_live = 1;
}

struct join_scan {
    struct tally_registry *found; /* another copy's registry */
    const char *self_name;        /* this copy's object ("" for the executable) */
    int self_seen;
};

struct join_note {
    struct join_scan *js;
    const char *name; /* the object's name */
};

static int join_note(const struct note *n, void *arg) {
    struct join_note *jn = arg;
    struct join_scan *js = jn->js;
    if (n->type != TALLY_NOTE_TYPE || n->namesz != 6 || memcmp(n->name, "tally", 6) != 0 ||
        n->descsz != 8)
        return 0;
    int64_t off;
    memcpy(&off, n->desc, 8);
    struct tally_instance *in = (struct tally_instance *)(uintptr_t)((intptr_t)n->desc + off);
    if (in == &tally__self) {
        js->self_name = jn->name;
        js->self_seen = 1;
    } else if (((uintptr_t)in & 7) == 0 && in->magic == TALLY_INSTANCE_MAGIC &&
               in->abi == TALLY_ABI_VERSION && in->size == sizeof(struct tally_instance) &&
               !js->found) {
        struct tally_registry *r = __atomic_load_n(&in->registry, __ATOMIC_ACQUIRE);
        if (r && r->magic == TALLY_REGISTRY_MAGIC)
            js->found = r;
    }
    return 0;
}

static int join_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct join_note jn = {data, info->dlpi_name ? info->dlpi_name : ""};
    (void)each_note(info, join_note, &jn);
    return 0;
}

/* Weak: a static executable has no dynamic loader to ask (and is always its own owner). */
extern void *dlopen(const char *, int) __attribute__((weak));


/* The owner's pthread_atfork prepare handler: a process that went multi-threaded before a fork
 * passes that on to the child, whose libc may count itself single-threaded again. */
static void fork_prepare(void) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (r && !__libc_single_threaded)
        __atomic_store_n(&r->threaded, 1, __ATOMIC_RELAXED);
}

/* The owner's pthread_atfork child handler: the registry now belongs to the child, and the
 * trace (trace mode) stays the parent's. */
static void fork_child(void) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (r)
        r->pid = getpid();
    trace_forked();
    snapshots_forked();
}

/* Joins (or creates) the process registry. Called under reg_lock at this copy's first
 * registration. Returns the registry, never NULL. */
struct tally_registry *join_registry(void) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (r)
        return r;
    struct join_scan js = {0, "", 0};
    (void)dl_iterate_phdr(join_cb, &js);
    int owner = 0;
    r = js.found;
    if (!r) {
        void *mem = mmap(0, sizeof *r, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        r = mem == MAP_FAILED ? &local_registry : mem;
        r->magic = TALLY_REGISTRY_MAGIC;
        r->owner = &tally__self;
        r->pid = getpid();
        r->start_ns = prog.start_ns; /* read_env's, just before */
        owner = 1;
    }
    /* This image's code, for snapshots (threads.c): found here, before the registry's lock,
     * since dl_iterate_phdr takes the loader's. */
    tally__self.text_n = image_ranges((uintptr_t)&join_registry, tally__self.text_lo,
                                      tally__self.text_hi, 8);
    spin_lock(&r->lock, 0);
    enter_live_locked(r);
    spin_unlock(&r->lock);
    __atomic_store_n(&tally__self.registry, r, __ATOMIC_RELEASE);
    if (owner) {
        /* The owner's object must stay until exit: its code writes the profile. */
        if (js.self_seen && js.self_name[0] && dlopen)
            (void)dlopen(js.self_name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
        (void)on_exit(exit_status_handler, 0);
        (void)at_quick_exit(exit_handler);
        snapshots_init();
        signals_init();
        (void)pthread_atfork(fork_prepare, 0, fork_child);
    }
    return r;
}

struct tally_registry *ensure_registry(void) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (r)
        return r;
    spin_lock(&reg_lock, 0);
    if (!env.read)
        read_env();
    r = join_registry();
    spin_unlock(&reg_lock);
    return r;
}

struct image_find {
    uintptr_t addr, *lo, *hi;
    int max, n;
};

static int image_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct image_find *f = data;
    int mine = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && f->addr >= lo && f->addr - lo < ph->p_memsz)
            mine = 1;
    }
    if (!mine)
        return 0;
    for (int i = 0; i < info->dlpi_phnum && f->n < f->max; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            f->lo[f->n] = info->dlpi_addr + ph->p_vaddr;
            f->hi[f->n] = f->lo[f->n] + ph->p_memsz;
            f->n++;
        }
    }
    return 1;
}

int image_ranges(uintptr_t addr, uintptr_t *lo, uintptr_t *hi, int max) {
    struct image_find f = {addr, lo, hi, max, 0};
    int saved_errno = errno;
    (void)dl_iterate_phdr(image_cb, &f);
    errno = saved_errno;
    return f.n;
}

/* Leaves the live list (this copy's object is going away). Caller holds r->lock. */
static void leave_registry_locked(struct tally_registry *r) {
    for (struct tally_instance **pp = &r->live; *pp; pp = &(*pp)->next) {
        if (*pp == &tally__self) {
            *pp = tally__self.next;
            break;
        }
    }
    tally__self.next = 0;
    in_live = 0;
}


/* True when `p` points at a counter of a registered module (8-aligned, inside its array). */
int is_counter(const uint64_t *p) {
    uintptr_t a = (uintptr_t)p;
    if (!p || (a & 7) != 0)
        return 0;
    for (const struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); m;
         m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE)) {
        uintptr_t lo = (uintptr_t)m->counters;
        if (lo && a >= lo && m->num_counters <= (UINTPTR_MAX - lo) / 8 &&
            a < lo + m->num_counters * 8)
            return 1;
    }
    return 0;
}




static void adopt_dead_locked(struct tally_registry *r, struct tally_module *m);

void __tally_register(struct tally_module *m) {
    int saved_errno = errno;
    if (!m) {
        static const char msg[] = "tally: ignoring a null module descriptor\n";
        write_stderr(msg, sizeof msg - 1);
        errno = saved_errno;
        return;
    }
    if (m->abi_version != TALLY_ABI_VERSION) {
        char line[160];
        size_t n = put_str(line, 0, sizeof line, "tally: ignoring a module descriptor with ABI version ");
        n = put_u64(line, n, sizeof line, m->abi_version);
        n = put_str(line, n, sizeof line, " (this runtime implements version ");
        n = put_u64(line, n, sizeof line, TALLY_ABI_VERSION);
        n = put_str(line, n, sizeof line, ")\n");
        write_stderr(line, n);
        errno = saved_errno;
        return;
    }
    tls_soft_init();
    struct tally_registry *r = ensure_registry();
    spin_lock(&r->lock, 0);
    for (struct tally_module *p = reg_head; p; p = p->next) {
        if (p == m) { /* registered twice: keep the first */
            spin_unlock(&r->lock);
            errno = saved_errno;
            return;
        }
    }
    __atomic_store_n(&m->next, (struct tally_module *)0, __ATOMIC_RELAXED);
    if (reg_tail)
        __atomic_store_n(&reg_tail->next, m, __ATOMIC_RELEASE);
    else
        __atomic_store_n(&reg_head, m, __ATOMIC_RELEASE);
    reg_tail = m;
    /* Counts that threads may race on: plain increments (events mode's counter 0 is the
     * exiting thread's total, stored once). */
    if (!(m->flags & TALLY_MODULE_ATOMIC) &&
        (m->num_counters > ((m->flags & TALLY_MODULE_EVENTS) ? 1u : 0u) || m->num_path_tables))
        r->nonatomic = 1;
    adopt_dead_locked(r, m);
    cont_register(r, m);
    if (!in_live) /* left earlier (all modules dlclosed): live again */
        enter_live_locked(r);
    spin_unlock(&r->lock);
    if ((m->flags & TALLY_MODULE_EVENTS) && !__atomic_exchange_n(&stop_checked, 1, __ATOMIC_ACQ_REL))
        read_stop_at();
    errno = saved_errno;
}


/* A module registering again after its object was dlclosed (dlopen, dlclose, dlopen): the counts
 * saved at the dlclose go back into its counters, so the profile has one record per module.
 * Records with hashed paths (path mode) stay separate records. Caller holds r->lock. */
static void adopt_dead_locked(struct tally_registry *r, struct tally_module *m) {
    if (m->num_path_tables || !m->counters)
        return;
    for (struct dead_module **pp = &r->dead, *prev = 0; *pp; prev = *pp, pp = &(*pp)->next) {
        struct dead_module *d = *pp;
        const unsigned char *b = (const unsigned char *)(d + 1);
        uint64_t h[5];
        memcpy(h, b, sizeof h); /* magic, hash, meta_len, num_counters, num_path_entries */
        uint64_t meta = h[2] + ((8 - (h[2] & 7)) & 7);
        if (TALLY_BIG_ENDIAN || h[1] != m->hash || h[2] != m->meta_len ||
            h[3] != m->num_counters || h[4] != 0 || d->len != 40 + meta + h[3] * 8 + 8)
            continue;
        for (uint64_t i = 0; i < h[3]; i++) {
            uint64_t c;
            memcpy(&c, b + 40 + meta + 8 * i, 8);
            m->counters[i] += c;
        }
        *pp = d->next;
        if (r->dead_tail == d)
            r->dead_tail = prev;
        r->dead_count--;
        (void)munmap(d, d->map_len);
        return;
    }
}

/* The module destructor. After the profile is written it changes nothing. Otherwise the
 * module's object is being dlclosed, or the process is exiting and the owner's exit handler
 * has not run yet (an owner in a shared object loaded at startup registered its atexit handler
 * before the dynamic loader's, so it runs inside _dl_fini, after the destructors of the objects
 * that depend on it): at the first destructor of this copy, the calling thread's frame records
 * in this image are charged (as exit charges them; a thread that dlcloses an object has none
 * in it); then the module's profile record is copied into registry-owned memory, which the
 * owner writes, and the module leaves this copy's list; a copy left without modules leaves the
 * live list (its code is about to be unmapped). */
static int settled;

void __tally_unregister(struct tally_module *m) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (!m || !r)
        return;
    int saved_errno = errno;
    spin_lock(&r->lock, 0);
    if (r->exit_done) {
        spin_unlock(&r->lock);
        errno = saved_errno;
        return;
    }
    struct tally_module *prev = 0;
    if (!settled) {
        settled = 1;
        settle_self((uintptr_t)__builtin_frame_address(0), 1);
    }
    for (struct tally_module *p = reg_head; p; prev = p, p = p->next) {
        if (p != m)
            continue;
        cont_unregister(r, m);
        struct dead_module *d = snapshot_module(m);
        if (d) {
            if (r->dead_tail)
                r->dead_tail->next = d;
            else
                r->dead = d;
            r->dead_tail = d;
            r->dead_count++;
        }
        struct tally_module *next = p->next;
        if (prev)
            __atomic_store_n(&prev->next, next, __ATOMIC_RELEASE);
        else
            __atomic_store_n(&reg_head, next, __ATOMIC_RELEASE);
        if (reg_tail == p)
            reg_tail = prev;
        break;
    }
    if (!reg_head && r->owner != &tally__self) {
        leave_registry_locked(r);
        trace_leave();
    }
    spin_unlock(&r->lock);
    errno = saved_errno;
}

/* Zeroes every counter of the process: each live copy's, and drops the records of modules
 * already dlclosed (they would hold only zeros). */
void tally_reset_counters(void) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (!r) {
        reset_self();
        return;
    }
    spin_lock(&r->lock, 0);
    reset_locked(r);
    spin_unlock(&r->lock);
}

void reset_locked(struct tally_registry *r) {
    for (struct tally_instance *in = r->live; in; in = in->next)
        in->reset();
    for (struct dead_module *d = r->dead, *n; d; d = n) {
        n = d->next;
        (void)munmap(d, d->map_len);
    }
    r->dead = r->dead_tail = 0;
    r->dead_count = 0;
}

void reset_self(void) {
    for (const struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); m;
         m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE)) {
        if (m->counters && m->num_counters && m->num_counters <= SIZE_MAX / sizeof(uint64_t))
            memset(m->counters, 0, (size_t)m->num_counters * sizeof(uint64_t));
        for (uint64_t i = 0; m->path_tables && i < m->num_path_tables; i++) {
            struct tally_path_table *t = &m->path_tables[i];
            table_lock(t);
            for (uint64_t j = 0; j < t->capacity; j++)
                t->slots[2 * j + 1] = 0;
            for (uint64_t j = 0; t->home && j < TALLY_PATH_HOME_SLOTS; j++)
                t->home[2 * j + 1] = 0;
            t->lost = 0;
            table_unlock(t);
        }
    }
}
