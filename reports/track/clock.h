/* Cheap timestamps for the tracker's hot path: the time-stamp counter where
 * there is one (about 10 ns, against 20 for clock_gettime here), converted to
 * nanoseconds only when a report is written. */
#ifndef CA_CLOCK_H
#define CA_CLOCK_H
#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t ca_ticks(void) { return __rdtsc(); }
#define CA_TICKS_ARE_TSC 1
#else
#include <time.h>
static inline uint64_t ca_ticks(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#define CA_TICKS_ARE_TSC 0
#endif

/* A pair of readings (ticks, CLOCK_MONOTONIC ns, CLOCK_REALTIME ns) taken
 * together: two of them give the rate and the epoch offset. */
typedef struct ca_clock_ref {
    uint64_t ticks;
    uint64_t mono_ns;
    uint64_t real_ns;
} ca_clock_ref;

void ca_clock_ref_now(ca_clock_ref *r);

/* Converts ticks to nanoseconds using two references (the rate between them;
 * a fixed 1 ns per tick when they are too close to measure, or when ticks are
 * already nanoseconds). */
typedef struct ca_clock_conv {
    ca_clock_ref base;
    double ns_per_tick;
} ca_clock_conv;

void ca_clock_conv_init(ca_clock_conv *c, const ca_clock_ref *start, const ca_clock_ref *end);
/* Nanoseconds since `start` (may be negative for ticks before it). */
int64_t ca_clock_since_start_ns(const ca_clock_conv *c, uint64_t ticks);
/* Microseconds since the Unix epoch, as PyTorch's snapshots write time_us. */
int64_t ca_clock_epoch_us(const ca_clock_conv *c, uint64_t ticks);

#endif
