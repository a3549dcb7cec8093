/* Iteration boundaries. The most trusted source seen wins: an explicit
 * cudalloc_step() beats an NVTX range, which beats detection. Each source is
 * counted on its own, so a program that marks its steps both ways (as the demo
 * trainer does) is not counted twice. */
#include <stdatomic.h>

#define CUDALLOC_IMPLEMENTATION
#include "include/cudalloc.h"
#include "preload/preload.h"

static _Atomic long counts[CA_ITER_EXPLICIT + 1];
static _Atomic int best_source = CA_ITER_NONE;

static void step_tracker(ca_device *d, void *source) {
    if (d->tracker) ca_tracker_step(d->tracker, *(ca_iter_source *)source);
}

void ca_iteration_mark(ca_iter_source source) {
    ca_devices_foreach(step_tracker, &source);
    atomic_fetch_add(&counts[source], 1);
    int best = atomic_load(&best_source);
    while ((int)source > best && !atomic_compare_exchange_weak(&best_source, &best, (int)source)) {
    }
    /* a boundary the trackers took (a less trusted source's is ignored) */
    if ((int)source >= best) ca_live_mark();
}

long ca_iterations(ca_iter_source *source) {
    int best = atomic_load(&best_source);
    if (source) *source = (ca_iter_source)best;
    return atomic_load(&counts[best]);
}

CA_EXPORT int cudalloc_step(void) {
    ca_iteration_mark(CA_ITER_EXPLICIT);
    return 0;
}

CA_EXPORT long cudalloc_iteration(void) { return ca_iterations(NULL); }
