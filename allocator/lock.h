/* A small spin-then-yield lock: critical sections in the allocator are tens of
 * nanoseconds, where a futex-based mutex costs more than the work it guards. */
#ifndef CA_LOCK_H
#define CA_LOCK_H

#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>

#if defined(__x86_64__) || defined(__i386__)
#define ca_cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define ca_cpu_relax() __asm__ __volatile__("yield")
#else
#define ca_cpu_relax() ((void)0)
#endif

typedef struct { atomic_int held; } ca_lock;
#define CA_LOCK_INIT {0}

static inline void ca_lock_init(ca_lock *l) { atomic_init(&l->held, 0); }

static inline void ca_lock_acquire(ca_lock *l) {
    for (;;) {
        if (!atomic_exchange_explicit(&l->held, 1, memory_order_acquire)) return;
        for (int spin = 0; atomic_load_explicit(&l->held, memory_order_relaxed); spin++) {
            if (spin < 64) ca_cpu_relax();
            else { sched_yield(); spin = 0; }
        }
    }
}

/* One attempt: true with the lock taken, false when another holds it. */
static inline bool ca_lock_try(ca_lock *l) { return !atomic_exchange_explicit(&l->held, 1, memory_order_acquire); }

static inline void ca_lock_release(ca_lock *l) {
    atomic_store_explicit(&l->held, 0, memory_order_release);
}

#endif
