/*
 * paths.c -- hashed path counters of path mode (Ball & Larus 1996, sec. 3.4: paths too many for an
 * array are counted in a hash table).
 */
#include "rt.h"

/* ------------------------------------------------------------------------------------------ */
/* Hashed path counters (path mode)                                                           */
/* ------------------------------------------------------------------------------------------ */

int is_path_table(const struct tally_path_table *t) {
    uintptr_t a = (uintptr_t)t;
    if (!t || (a & 7) != 0)
        return 0;
    for (const struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); m;
         m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE)) {
        uintptr_t lo = (uintptr_t)m->path_tables;
        uintptr_t sz = sizeof(struct tally_path_table);
        if (lo && a >= lo && m->num_path_tables <= (UINTPTR_MAX - lo) / sz &&
            a < lo + m->num_path_tables * sz && (a - lo) % sz == 0)
            return 1;
    }
    return 0;
}

void table_lock(struct tally_path_table *t) {
    while (__atomic_exchange_n(&t->lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}

void table_unlock(struct tally_path_table *t) {
    __atomic_store_n(&t->lock, 0, __ATOMIC_RELEASE);
}

static uint64_t slot_of(uint64_t path, uint64_t capacity) {
    return (path * TALLY_PATH_HASH_MUL) >> 32 & (capacity - 1);
}

/* The count word of `path` in `slots` (capacity a power of two), inserting it if `insert`. */
static uint64_t *find_slot(uint64_t *slots, uint64_t capacity, uint64_t path, int insert,
                           uint64_t *used) {
    for (uint64_t i = slot_of(path, capacity), n = 0; n < capacity; n++, i = (i + 1) & (capacity - 1)) {
        uint64_t k = slots[2 * i];
        if (k == path + 1)
            return &slots[2 * i + 1];
        if (k == 0) {
            if (!insert)
                return 0;
            slots[2 * i] = path + 1;
            (*used)++;
            return &slots[2 * i + 1];
        }
    }
    return 0;
}

/* Doubles the table (at least 256 slots). The memory comes from mmap, never from the
 * program's malloc, so that counting paths cannot change the program's heap layout (and with it
 * the behaviour of code that looks at addresses). Old arrays are never unmapped: a stale cached
 * pointer into one stays valid memory. Returns 0 when out of memory. */
static int grow(struct tally_path_table *t) {
    uint64_t cap = t->capacity ? t->capacity * 2 : 256;
    if (cap > (UINT64_MAX / 16) || cap * 16 > SIZE_MAX)
        return 0;
    void *mem = mmap(0, (size_t)cap * 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return 0;
    uint64_t *slots = mem;
    uint64_t used = 0;
    for (uint64_t i = 0; i < t->capacity; i++) {
        uint64_t k = t->slots[2 * i];
        if (k) {
            uint64_t *c = find_slot(slots, cap, k - 1, 1, &used);
            if (c)
                *c = t->slots[2 * i + 1];
        }
    }
    /* Counting holds the lock; a profile written meanwhile by another thread reads the table
     * without it, so the new slots are published before the capacity that indexes them. */
    __atomic_store_n(&t->slots, slots, __ATOMIC_RELEASE);
    __atomic_store_n(&t->capacity, cap, __ATOMIC_RELEASE);
    t->used = used;
    t->last_count = 0;
    return 1;
}

/* The count word of `path` in the overflow table, inserted if missing (growing the table);
 * NULL when memory ran out. Takes the last-path cache first. */
static uint64_t *overflow_count(struct tally_path_table *t, uint64_t path) {
    if (t->last_count && t->last_path == path)
        return t->last_count;
    if ((t->used + 1) * 4 > t->capacity * 3 && !grow(t))
        return t->capacity ? find_slot(t->slots, t->capacity, path, 0, &t->used) : 0;
    uint64_t *c = find_slot(t->slots, t->capacity, path, 1, &t->used);
    if (c) {
        t->last_path = path;
        t->last_count = c;
    }
    return c;
}

static uint64_t home_slot(uint64_t path) {
    return (path * TALLY_PATH_HASH_MUL) >> (64 - TALLY_PATH_HOME_BITS);
}

void count_path(struct tally_path_table *t, uint64_t path) {
    table_lock(t);
    uint64_t *home = t->home ? &t->home[2 * home_slot(path)] : 0;
    if (home && (home[1] == 0 || home[0] == path)) {
        if (home[1] == 0) { /* a free home slot (count 0) is claimed */
            home[0] = path;
            t->home_claims++;
        }
        home[1]++;
        table_unlock(t);
        return;
    }
    uint64_t *c = overflow_count(t, path);
    if (!c) {
        t->lost++;
        table_unlock(t);
        return;
    }
    (*c)++;
    /* The home slot goes to the path that runs more: once this path has counted clearly more
     * in the overflow table than the occupant at home, the occupant's home count moves to its
     * overflow entry and this path takes the slot with a count of 0 (its earlier counts stay
     * in the overflow table, so every total is unchanged). */
    if (home && *c > 2 * home[1] + 16) {
        uint64_t *o = overflow_count(t, home[0]);
        if (o) {
            *o += home[1];
            home[0] = path;
            home[1] = 0;
        }
    }
    table_unlock(t);
}

/* One count of `path` taken back: from its home slot or overflow entry or the losses, where
 * count_path put it (other threads may have moved a home count to the overflow table since:
 * the path's total is what matters); when none holds a count (the counters were zeroed after
 * a merged write) the overflow entry goes below 0, wrapping, which a later merge adds. */
void uncount_path(struct tally_path_table *t, uint64_t path) {
    table_lock(t);
    uint64_t *home = t->home ? &t->home[2 * home_slot(path)] : 0;
    uint64_t *c = t->capacity ? find_slot(t->slots, t->capacity, path, 0, &t->used) : 0;
    if (home && home[0] == path && home[1] > 0)
        home[1]--;
    else if (c && *c > 0)
        (*c)--;
    else if (t->lost > 0)
        t->lost--;
    else if ((c = overflow_count(t, path)) != 0)
        (*c)--;
    else
        t->lost--;
    table_unlock(t);
}

void __tally_path_count(struct tally_path_table *t, uint64_t path) {
    int saved_errno = errno;
    if (t)
        count_path(t, path);
    errno = saved_errno;
}
