/* The tracker's mapped ranges (the segments): few, a handful per pool, kept
 * by address; the view reports draw segment maps and measure fragmentation
 * from. Lock held. */
#include "reports/track/tracker_internal.h"

#include <string.h>

void ca_track_ranges_map(ca_tracker *t, uintptr_t addr, uint64_t size, uint16_t stream) {
    size_t i = 0;
    while (i < t->n_ranges && t->ranges[i].addr < addr) i++;
    ca_range *prev = i ? &t->ranges[i - 1] : NULL, *next = i < t->n_ranges ? &t->ranges[i] : NULL;
    int join_prev = prev && prev->addr + prev->size == addr && prev->stream == stream;
    int join_next = next && addr + size == next->addr && next->stream == stream;
    if (join_prev && join_next) {
        prev->size += size + next->size;
        memmove(next, next + 1, (t->n_ranges - i - 1) * sizeof *next);
        t->n_ranges--;
    } else if (join_prev) {
        prev->size += size;
    } else if (join_next) {
        next->addr = addr;
        next->size += size;
    } else if (!GROW(t->ranges, t->cap_ranges, t->n_ranges + 1)) {
        memmove(&t->ranges[i + 1], &t->ranges[i], (t->n_ranges - i) * sizeof *t->ranges);
        t->ranges[i] = (ca_range){addr, size, stream};
        t->n_ranges++;
    }
}

void ca_track_ranges_unmap(ca_tracker *t, uintptr_t addr, uint64_t size) {
    for (size_t i = 0; i < t->n_ranges; i++) {
        ca_range *r = &t->ranges[i];
        if (addr < r->addr || addr + size > r->addr + r->size) continue;
        uintptr_t end = r->addr + r->size;
        if (addr == r->addr && size == r->size) {
            memmove(r, r + 1, (t->n_ranges - i - 1) * sizeof *r);
            t->n_ranges--;
        } else if (addr == r->addr) {
            r->addr += size;
            r->size -= size;
        } else if (addr + size == end) {
            r->size -= size;
        } else if (!GROW(t->ranges, t->cap_ranges, t->n_ranges + 1)) {
            r = &t->ranges[i];
            memmove(r + 2, r + 1, (t->n_ranges - i - 1) * sizeof *r);
            r[1] = (ca_range){addr + size, end - addr - size, r->stream};
            r->size = addr - r->addr;
            t->n_ranges++;
        }
        return;
    }
}
