/* Repeated blocks within one pass (see blocks.h). */
#include "reports/diagnose/blocks.h"

int ca_blocks_find(const uint32_t *keys, size_t n, size_t min_count, ca_blocks *out) {
    if (n > CA_BLOCKS_MAX_KEYS) n = CA_BLOCKS_MAX_KEYS;
    if (min_count < 2) min_count = 2;
    ca_blocks best = {0};
    size_t best_cover = 0;
    for (size_t p = 1; p * min_count <= n; p++) {
        if ((n / p) * p <= best_cover) continue; /* cannot cover more */
        /* run: how many i in a row had keys[i] == keys[i + p]; a run of r
         * such i is a stretch of r + p keys with period p. */
        size_t run = 0;
        for (size_t i = 0; i + p <= n; i++) {
            if (i + p < n && keys[i] == keys[i + p]) {
                run++;
                continue;
            }
            size_t len = run + p, count = len / p, cover = count * p;
            if (count >= min_count && cover > best_cover) {
                best_cover = cover;
                best = (ca_blocks){.start = i - run, .period = p, .count = count, .slack = len - cover};
            }
            run = 0;
        }
    }
    if (!best_cover) return 0;
    *out = best;
    return 1;
}
