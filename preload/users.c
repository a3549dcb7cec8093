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

typedef struct slot {
    _Alignas(64) _Atomic uint64_t using; /* bit i: this thread is inside device i's allocator */
    atomic_bool taken;      /* by a live thread; a dead one's is taken by the next new one */
    struct slot *next;
} slot; /* a cache line each: no two threads write one */

static _Atomic(slot *) slots; /* never freed: the holder walks them without a lock */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
/* A thread's slot until it has one of its own: every device in use, so that
 * the first use takes the slow path (which makes the slot). Never written. */
static slot outside = {.using = ~(uint64_t)0};

/* The calling thread's side, in one place (one TLS look-up on the hot path). */
typedef struct user {
    slot *slot;
    uint64_t slow;    /* devices whose next ca_device_done is not the plain one: nested, held or locked */
    uint64_t holding; /* devices this thread holds (ca_device_hold) */
    uint64_t locked;  /* devices it uses through their hold_lock (no slot could be had) */
    uint16_t depth[CA_MAX_DEVICES]; /* uses inside a use (or a hold) */
} user;
static __thread __attribute__((tls_model("initial-exec"))) user me = {.slot = &outside};

/* Set once, before any thread leaves `outside` (join): users skip their fence. */
static bool asymmetric;
static pthread_once_t asymmetric_once = PTHREAD_ONCE_INIT;

static int membarrier(int cmd) { return (int)syscall(SYS_membarrier, cmd, 0, 0); }

/* A full fence on every thread of the process. Registered once; should the
 * expedited command fail all the same, the global one needs no registration. */
static void fence_every_thread(void) {
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
        return;
    membarrier(MEMBARRIER_CMD_GLOBAL);
}

static void decide_fence(void) {
    asymmetric = ca_conf.membarrier && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

bool ca_users_asymmetric(void) {
    pthread_once(&asymmetric_once, decide_fence);
    return asymmetric;
}

static void thread_exit(void *s) {
    slot *mine = s;
    atomic_store_explicit(&mine->using, 0, memory_order_release);
    atomic_store_explicit(&mine->taken, false, memory_order_release);
    me.slot = &outside; /* a later destructor that allocates takes one again */
}

static void make_exit_key(void) { pthread_key_create(&exit_key, thread_exit); }

static slot *join(void) {
    pthread_once(&exit_key_once, make_exit_key);
    pthread_once(&asymmetric_once, decide_fence);
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

/* d's next done is the plain one again once nothing but the slot's bit is left. */
static void settle(int o, uint64_t bit) {
    if (!me.depth[o] && !((me.holding | me.locked) & bit)) me.slow &= ~bit;
}

/* Out of the hot path: a use inside a use or a hold, the first use by a
 * thread, a device held by another. Fences in full whatever the mode. */
__attribute__((noinline, cold)) static void use_slowly(ca_device *d, uint64_t bit) {
    slot *s = me.slot;
    if ((s != &outside && atomic_load_explicit(&s->using, memory_order_relaxed) & bit) ||
        (me.holding | me.locked) & bit) {
        me.depth[d->ordinal]++;
        me.slow |= bit;
        return;
    }
    if (s == &outside && !(s = join())) { /* no memory for a slot: take turns with the holder instead */
        pthread_mutex_lock(&d->hold_lock);
        me.locked |= bit;
        me.slow |= bit;
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
    slot *s = me.slot;
    uint64_t bit = (uint64_t)1 << d->ordinal;
    uint64_t was = atomic_load_explicit(&s->using, memory_order_relaxed);
    if (__builtin_expect(!(was & bit), 1)) {
        if (__builtin_expect(asymmetric, 1)) {
            atomic_store_explicit(&s->using, was | bit, memory_order_relaxed);
            __asm__ volatile("" ::: "memory"); /* the holder's membarrier is the fence */
        } else {
            atomic_store(&s->using, was | bit);
        }
        if (__builtin_expect(!atomic_load_explicit(&d->held, memory_order_acquire), 1)) return;
        atomic_store_explicit(&s->using, was, memory_order_release);
    }
    use_slowly(d, bit);
}

__attribute__((noinline, cold)) static void done_slowly(ca_device *d, uint64_t bit) {
    int o = d->ordinal;
    if (me.depth[o]) {
        me.depth[o]--;
    } else if (me.locked & bit) {
        me.locked &= ~bit;
        pthread_mutex_unlock(&d->hold_lock);
    } else { /* a use begun before this thread held d */
        slot *s = me.slot;
        atomic_store_explicit(&s->using, atomic_load_explicit(&s->using, memory_order_relaxed) & ~bit, memory_order_release);
    }
    settle(o, bit);
}

void ca_device_done(ca_device *d) {
    uint64_t bit = (uint64_t)1 << d->ordinal;
    if (__builtin_expect(me.slow & bit, 0)) {
        done_slowly(d, bit);
        return;
    }
    slot *s = me.slot;
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
    me.slow |= bit;
    atomic_store(&d->held, true);
    if (ca_users_asymmetric()) /* the users' fence: each has seen `held`, or its use shows */
        fence_every_thread();
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
        settle(d->ordinal, bit);
        atomic_store(&d->held, false);
    }
    pthread_mutex_unlock(&d->hold_lock);
}

/* In a fork child only the forking thread is left, using no allocator. */
void ca_users_after_fork(void) {
    for (slot *s = atomic_load(&slots); s; s = s->next)
        if (s != me.slot) atomic_store(&s->using, 0), atomic_store(&s->taken, false);
}
