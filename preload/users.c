/* Which threads are inside which device's allocator, so that a reset (or a
 * context's end) replaces the allocator only once no other thread is in it,
 * and holds the others off until it is done (issue 30: another thread used
 * the destroyed allocator).
 *
 * Each thread publishes the devices it is using in a slot of its own: the
 * hot path writes only its own cache line (one store and one load, no shared
 * line written). The holder raises the device's `held` flag, then waits for
 * every other slot to drop the device; a user that finds the flag up steps
 * back and waits on the holder's mutex. Both sides store, then load, each
 * sequentially consistent (Dekker's handshake): one of them sees the other. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "preload/preload.h"

typedef struct slot {
    _Alignas(64) _Atomic uint64_t using; /* bit i: this thread is inside device i's allocator */
    atomic_bool taken;      /* by a live thread; a dead one's is taken by the next new one */
    struct slot *next;
} slot; /* a cache line each: no two threads write one */

static _Atomic(slot *) slots; /* never freed: the holder walks them without a lock */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

/* The calling thread's side, in one place (one TLS look-up on the hot path). */
typedef struct user {
    slot *slot;
    uint64_t holding; /* devices this thread holds (ca_device_hold) */
    uint64_t locked;  /* devices it uses through their hold_lock (no slot could be had) */
    uint16_t depth[CA_MAX_DEVICES]; /* nested uses */
} user;
static __thread __attribute__((tls_model("initial-exec"))) user me;

static void thread_exit(void *s) {
    slot *mine = s;
    atomic_store_explicit(&mine->using, 0, memory_order_release);
    atomic_store_explicit(&mine->taken, false, memory_order_release);
    me.slot = NULL; /* a later destructor that allocates takes one again */
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
    return me.slot = s;
}

/* Out of the hot path: the first use by a thread, a device held by another. */
__attribute__((noinline, cold)) static void use_slowly(ca_device *d, uint64_t bit) {
    slot *s = me.slot ? me.slot : join();
    if (!s) { /* no memory for a slot: take turns with the holder instead */
        pthread_mutex_lock(&d->hold_lock);
        me.locked |= bit;
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

void ca_device_use(ca_device *d) {
    user *u = &me;
    int o = d->ordinal;
    uint64_t bit = (uint64_t)1 << o;
    if (u->depth[o]++ || u->holding & bit) return;
    slot *s = u->slot;
    if (s) {
        uint64_t was = atomic_load_explicit(&s->using, memory_order_relaxed);
        atomic_store(&s->using, was | bit);
        if (!atomic_load(&d->held)) return;
        atomic_store_explicit(&s->using, was, memory_order_release);
    }
    use_slowly(d, bit);
}

void ca_device_done(ca_device *d) {
    user *u = &me;
    int o = d->ordinal;
    uint64_t bit = (uint64_t)1 << o;
    if (--u->depth[o] || u->holding & bit) return;
    if (__builtin_expect(u->locked & bit, 0)) {
        u->locked &= ~bit;
        pthread_mutex_unlock(&d->hold_lock);
        return;
    }
    slot *s = u->slot;
    atomic_store_explicit(&s->using, atomic_load_explicit(&s->using, memory_order_relaxed) & ~bit, memory_order_release);
}

void ca_device_hold(ca_device *d) {
    uint64_t bit = (uint64_t)1 << d->ordinal;
    pthread_mutex_lock(&d->hold_lock); /* recursive: cudaDeviceReset holds it around cuDevicePrimaryCtxReset */
    if (me.holding & bit) {
        d->hold_depth++;
        return;
    }
    me.holding |= bit;
    atomic_store(&d->held, true);
    for (slot *s = atomic_load(&slots); s; s = s->next)
        for (int spins = 0; s != me.slot && atomic_load(&s->using) & bit; spins++) {
            if (spins < 100) { sched_yield(); continue; }
            nanosleep(&(struct timespec){0, 100000}, NULL); /* a user waiting on the device's work */
        }
}

void ca_device_unhold(ca_device *d) {
    uint64_t bit = (uint64_t)1 << d->ordinal;
    if (d->hold_depth) {
        d->hold_depth--;
    } else {
        me.holding &= ~bit;
        atomic_store(&d->held, false);
    }
    pthread_mutex_unlock(&d->hold_lock);
}

/* In a fork child only the forking thread is left, using no allocator. */
void ca_users_after_fork(void) {
    for (slot *s = atomic_load(&slots); s; s = s->next)
        if (s != me.slot) atomic_store(&s->using, 0), atomic_store(&s->taken, false);
}
