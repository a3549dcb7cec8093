/* Which threads are inside which device's allocator, so that a reset (or a
 * context's end) replaces the allocator only once no other thread is in it,
 * and holds the others off until it is done (issue 30: another thread used
 * the destroyed allocator).
 *
 * Each thread publishes the devices it is using in a slot of its own: the
 * hot path writes only its own cache line (one store and one load, no shared
 * line written). The holder raises the device's `held` flag, then waits for
 * every other slot to drop the device; a user that finds the flag up steps
 * back and waits on the holder's mutex. One of the two must see the other
 * (Dekker's handshake): each side stores, then loads, with a full fence in
 * between. The user's fence is on every allocator call, the holder's on a
 * reset: so, where the kernel has it, the holder pays for both with
 * membarrier(2), which runs a full fence on every thread of the process, and
 * the user's is only the compiler's (an asymmetric fence; issue 29). Without
 * membarrier (or with membarrier:false) each use fences itself. */
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload/preload.h"

typedef ca_user_slot slot;

static _Atomic(slot *) slots; /* never freed: the holder walks them without a lock */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
/* A thread's slot until it has one of its own: every device in use, so that
 * the first use takes the slow path (which makes the slot). Never written. */
static slot outside = {.using = ~(uint64_t)0};

__thread __attribute__((tls_model("initial-exec"))) ca_user ca_user_me = {.slot = &outside};

/* Set at the library's start (ca_users_init), before any thread uses a
 * device: users skip their fence. */
bool ca_users_light;

static int membarrier(int cmd) { return (int)syscall(SYS_membarrier, cmd, 0, 0); }

/* A full fence on every thread of the process. Registered once; should the
 * expedited command fail all the same, the global one needs no registration. */
static void fence_every_thread(void) {
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
        return;
    membarrier(MEMBARRIER_CMD_GLOBAL);
}

/* Registered while the process is young (nearly always one thread then: the
 * kernel's cheap case), not on a thread's first use, where it would stall
 * threads starting up. */
void ca_users_init(void) {
    ca_users_light = ca_conf.membarrier && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

bool ca_users_asymmetric(void) { return ca_users_light; }

static void thread_exit(void *s) {
    slot *mine = s;
    atomic_store_explicit(&mine->using, 0, memory_order_release);
    atomic_store_explicit(&mine->taken, false, memory_order_release);
    ca_user_me.slot = &outside; /* a later destructor that allocates takes one again */
}

static void make_exit_key(void) { pthread_key_create(&exit_key, thread_exit); }

static slot *join(void) {
    pthread_once(&exit_key_once, make_exit_key);
    slot *s;
    for (s = atomic_load_explicit(&slots, memory_order_acquire); s; s = s->next) {
        bool free_one = false;
        if (atomic_compare_exchange_strong(&s->taken, &free_one, true)) break;
    }
    if (!s) {
        if (!(s = aligned_alloc(_Alignof(slot), sizeof *s))) return NULL;
        atomic_init(&s->using, 0);
        atomic_init(&s->taken, true);
        s->next = atomic_load_explicit(&slots, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&slots, &s->next, s, memory_order_release, memory_order_relaxed)) {}
    }
    pthread_setspecific(exit_key, s);
    return ca_user_me.slot = s;
}

/* d's next done is the plain one again once nothing but the slot's bit is left. */
static void settle(int o, uint64_t bit) {
    if (!ca_user_me.depth[o] && !((ca_user_me.holding | ca_user_me.locked) & bit)) ca_user_me.slow &= ~bit;
}

/* Out of the hot path: a use inside a use or a hold, the first use by a
 * thread, a device held by another. Fences in full whatever the mode. */
void ca_device_use_slowly(ca_device *d, uint64_t bit) {
    slot *s = ca_user_me.slot;
    if ((s != &outside && atomic_load_explicit(&s->using, memory_order_relaxed) & bit) ||
        (ca_user_me.holding | ca_user_me.locked) & bit) {
        ca_user_me.depth[d->ordinal]++;
        ca_user_me.slow |= bit;
        return;
    }
    if (s == &outside && !(s = join())) { /* no memory for a slot: take turns with the holder instead */
        pthread_mutex_lock(&d->hold_lock);
        ca_user_me.locked |= bit;
        ca_user_me.slow |= bit;
        return;
    }
    for (;;) {
        uint64_t was = atomic_load_explicit(&s->using, memory_order_relaxed);
        atomic_store(&s->using, was | bit);
        if (!atomic_load(&d->held)) return;
        atomic_store_explicit(&s->using, was, memory_order_release);
        pthread_mutex_lock(&d->hold_lock); /* until the holder is done */
        pthread_mutex_unlock(&d->hold_lock);
    }
}

void ca_device_done_slowly(ca_device *d, uint64_t bit) {
    int o = d->ordinal;
    if (ca_user_me.depth[o]) {
        ca_user_me.depth[o]--;
    } else if (ca_user_me.locked & bit) {
        ca_user_me.locked &= ~bit;
        pthread_mutex_unlock(&d->hold_lock);
    } else { /* a use begun before this thread held d */
        slot *s = ca_user_me.slot;
        atomic_store_explicit(&s->using, atomic_load_explicit(&s->using, memory_order_relaxed) & ~bit, memory_order_release);
    }
    settle(o, bit);
}

void ca_device_hold(ca_device *d) {
    uint64_t bit = d->bit;
    pthread_mutex_lock(&d->hold_lock); /* recursive: cudaDeviceReset holds it around cuDevicePrimaryCtxReset */
    if (ca_user_me.holding & bit) {
        d->hold_depth++;
        return;
    }
    ca_user_me.holding |= bit;
    ca_user_me.slow |= bit;
    atomic_store(&d->held, true);
    if (ca_users_asymmetric()) /* the users' fence: each has seen `held`, or its use shows */
        fence_every_thread();
    for (slot *s = atomic_load(&slots); s; s = s->next)
        for (int spins = 0; s != ca_user_me.slot && atomic_load(&s->using) & bit; spins++) {
            if (spins < 100) { sched_yield(); continue; }
            nanosleep(&(struct timespec){0, 100000}, NULL); /* a user waiting on the device's work */
        }
}

void ca_device_unhold(ca_device *d) {
    uint64_t bit = d->bit;
    if (d->hold_depth) {
        d->hold_depth--;
    } else {
        ca_user_me.holding &= ~bit;
        settle(d->ordinal, bit);
        atomic_store(&d->held, false);
    }
    pthread_mutex_unlock(&d->hold_lock);
}

/* In a fork child only the forking thread is left, using no allocator; the
 * child's address space is registered anew (alone, it may change the mode). */
void ca_users_after_fork(void) {
    for (slot *s = atomic_load(&slots); s; s = s->next)
        if (s != ca_user_me.slot) atomic_store(&s->using, 0), atomic_store(&s->taken, false);
    if (ca_users_light) ca_users_init();
}
