/* Repeated blocks within one pass: the layers of a forward pass.
 *
 * A model built of L identical blocks (transformer layers, residual blocks)
 * makes the same allocations, in the same order, once per block: its forward
 * pass is a prefix, L copies of one stretch of keys (call sites, or requested
 * sizes when there are no stacks), and a suffix. ca_blocks_find finds the
 * longest such stretch: the period p and the start where keys[i] == keys[i+p]
 * holds for the longest run, counted in whole periods.
 *
 * The run may begin up to `slack` keys before the first block really starts
 * (the last allocation of a block can look like the one just before the
 * first: with sizes, the embedding's output has the residual stream's size)
 * and end past the last block (the final norm looks like a block's first
 * norm). Any start in [start, start + slack] is a rotation of the same
 * blocks; the caller picks one with what else it knows (fixes.c: the block
 * keeps its input and ends with an output of the input's size).
 *
 * The iteration detector (period.h) needs the converse signal: a pattern that
 * repeats inside one pass is layers, not iterations. */
#ifndef CA_BLOCKS_H
#define CA_BLOCKS_H
#include <stddef.h>
#include <stdint.h>

/* The most keys looked at: O(n^2 / 2) comparisons at worst (0.1 s at 16384). */
#define CA_BLOCKS_MAX_KEYS 16384

typedef struct ca_blocks {
    size_t start;   /* index of the first key of the first block (earliest rotation) */
    size_t period;  /* keys per block */
    size_t count;   /* blocks */
    size_t slack;   /* the run goes on this many keys past count * period */
} ca_blocks;

/* Looks at the first min(n, CA_BLOCKS_MAX_KEYS) keys. 1 and *out when a
 * stretch repeats at least min_count times (2 at least), else 0. Most keys
 * covered (count * period) wins; at a tie, the shorter period (more blocks),
 * then the earlier start. */
int ca_blocks_find(const uint32_t *keys, size_t n, size_t min_count, ca_blocks *out);

#endif
