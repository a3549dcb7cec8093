/* Tick conversion; see clock.h. */
#include "reports/track/clock.h"

#include <time.h>

static uint64_t read_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ca_clock_ref_now(ca_clock_ref *r) {
    r->mono_ns = read_ns(CLOCK_MONOTONIC);
    r->ticks = ca_ticks();
    r->real_ns = read_ns(CLOCK_REALTIME);
}

void ca_clock_conv_init(ca_clock_conv *c, const ca_clock_ref *start, const ca_clock_ref *end) {
    c->base = *start;
    c->ns_per_tick = 1.0;
    if (!CA_TICKS_ARE_TSC) return;
    /* Below a millisecond apart, the rate would be noise: assume 1 GHz. */
    if (end && end->ticks > start->ticks && end->mono_ns > start->mono_ns + 1000000)
        c->ns_per_tick = (double)(end->mono_ns - start->mono_ns) / (double)(end->ticks - start->ticks);
}

int64_t ca_clock_since_start_ns(const ca_clock_conv *c, uint64_t ticks) {
    double d = ((double)ticks - (double)c->base.ticks) * c->ns_per_tick;
    return (int64_t)d;
}

int64_t ca_clock_epoch_us(const ca_clock_conv *c, uint64_t ticks) {
    return ((int64_t)c->base.real_ns + ca_clock_since_start_ns(c, ticks)) / 1000;
}
