/*
 * finish.c -- how the process's profile gets written: settling every copy's frames and totals, the
 * exit handler, tally_write_profile.
 */
#include "rt.h"

/* Writes the process's profile now: through the owner of the registry, whichever image
 * calls it. */
void tally_write_profile(void) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (r && r->owner && r->owner != &tally__self)
        r->owner->write();
    else
        write_self();
}

/* This copy's part of settling the process: the calling thread's frame records in this image
 * (with `charge`: every one still listed belongs to a frame that exit() abandons, all above
 * `above`), the trace, and the exact events total into counter 0 of this copy's events
 * modules. */
void settle_self(uintptr_t above, int charge) {
    struct tally_frame **top = charge ? top_slot_soft() : 0; /* maybe in a signal handler */
    if (top) {
        struct walker w = {0, 0, 0};
        walk(*top, above, 0, &w, 1);
        *top = 0; /* charged once */
    }
    trace_finish();
    for (struct tally_module *m = __atomic_load_n(&reg_head, __ATOMIC_ACQUIRE); m;
         m = __atomic_load_n(&m->next, __ATOMIC_ACQUIRE))
        if ((m->flags & TALLY_MODULE_EVENTS) && m->counters && m->num_counters)
            m->counters[0] = events_total_soft();
}

/* Settles every live copy (without charging frames) and writes the profile. */
void settle_and_write(uintptr_t above, int charge) {
    int saved_errno = errno;
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    int locked = r ? spin_lock(&r->lock, 1) : 0;
    if (r) {
        for (struct tally_instance *in = r->live; in; in = in->next)
            in->settle(above, charge);
    } else {
        settle_self(above, charge);
    }
    write_profile_locked();
    if (locked)
        spin_unlock(&r->lock);
    errno = saved_errno;
}

void write_self(void) {
    settle_and_write((uintptr_t)__builtin_frame_address(0), 0);
}


/* The owner's atexit handler: every frame record still on this thread's list in any image
 * belongs to a frame that exit() abandons (all of them lie above this function's frame); the
 * profile is written once. The other threads' frames are charged too (threads.c). Also the
 * owner's at_quick_exit handler. */
void exit_handler(void) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    if (!r || !own_process() || __atomic_exchange_n(&r->exit_done, 1, __ATOMIC_ACQ_REL))
        return;
    stop_threads();
    settle_and_write((uintptr_t)__builtin_frame_address(0), 1);
    release_threads();
}

/* The owner's exit handler (on_exit: the status for the run record), then exit_handler. */
void exit_status_handler(int status, void *arg) {
    (void)arg;
    if (own_process()) /* not a vfork child: its memory is its parent's */
        run_exit_status(status);
    exit_handler();
}

int own_process(void) {
    struct tally_registry *r = __atomic_load_n(&tally__self.registry, __ATOMIC_ACQUIRE);
    return !r || r->pid == 0 || r->pid == getpid();
}

/* `_exit` and `_Exit` (tally_format::abi::REDIRECTS): the process ends as at exit() for the
 * profile -- every frame record still listed belongs to an abandoned frame, charged once, and
 * the profile is written -- but, as the program asked, without its atexit handlers or stdio
 * flushing. In the child of a vfork (the usual `vfork(); exec...(); _exit(127);`) nothing is
 * written: the child runs on its parent's memory, whose profile the parent writes. */
void __tally__exit(int status) {
    if (own_process()) /* not a vfork child: its memory is its parent's */
        run_exit_status(status);
    exit_handler();
    _exit(status);
}

void __tally__Exit(int status) {
    if (own_process()) /* not a vfork child: its memory is its parent's */
        run_exit_status(status);
    exit_handler();
    _Exit(status);
}
