/* The peak: when the memory allocated was highest, and what held it.
 *
 * A run with no iterations to compare (one training step, a forward pass
 * dumped once) cannot show a leak, but its peak can be explained: the
 * allocations live at that moment, per call site. They are found from the
 * tracker's views: those live now, less the ones made after the peak, plus
 * the ones the events after the peak free. The peak is the highest point of
 * the events kept (the whole run unless the ring wrapped). */
#ifndef CA_PEAK_H
#define CA_PEAK_H
#include <stddef.h>
#include <stdint.h>

#include "reports/track/tracker.h"

typedef struct ca_peak_site {
    uint32_t site;
    uint64_t bytes, count;
} ca_peak_site;

typedef struct ca_peak {
    uint64_t allocated;      /* bytes allocated at the peak */
    uint64_t seq;            /* the event that reached it (numbered from 0 over the run) */
    uint32_t iteration;      /* the iteration it came in */
    uint64_t count;          /* allocations live then */
    ca_peak_site *sites;     /* what was live then, per call site, most bytes first */
    size_t n_sites;
} ca_peak;

/* 0, or -1 when memory ran out (*out empty). */
int ca_peak_find(const ca_track_snap *s, ca_peak *out);
void ca_peak_free(ca_peak *p);

#endif
