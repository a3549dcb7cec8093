/* Statistics bookkeeping, PyTorch's way: current, peak, and the running totals
 * of what was added and taken away. */
#include "stats.h"

static void reset(ca_stat *s) {
    for (int i = 0; i < CA_POOL_KINDS; i++) s[i].peak = s[i].current;
}

void ca_stats_reset_peaks(ca_stats *s) {
    reset(s->allocation);
    reset(s->segment);
    reset(s->active);
    reset(s->allocated_bytes);
    reset(s->reserved_bytes);
    reset(s->active_bytes);
    reset(s->requested_bytes);
}
