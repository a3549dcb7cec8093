/* Leak diagnosis: which call sites pile up allocations across iterations.
 *
 * A healthy loop keeps memory too: weights (made before the first boundary),
 * optimizer state made lazily at the first step (one jump), gradient buffers
 * (made in the first backward, kept), caches that grow during warm-up and
 * stop, and tensors replaced every iteration (their count stays put while
 * their size follows the batch shape). None of these sets a new high of live
 * allocations at iteration boundaries over and over. A leak does: each
 * iteration leaves allocations behind that nothing frees.
 *
 * The rule, per site, over the live count at each boundary after warm-up:
 *   - a growth is a boundary where the count is above every earlier boundary;
 *   - a decrease ends the run of growths;
 *   - a leak is a run of at least CA_LEAK_MIN_GROWTHS growths whose latest is
 *     recent (no more than max(2, 2 x the largest gap between growths)
 *     iterations ago), so a steady leak is flagged at the third iteration
 *     after warm-up and a cache that stopped growing is let go.
 * A buffer re-made larger every iteration (count constant, bytes growing)
 * counts when its bytes set a new high at CA_LEAK_MIN_BYTE_STREAK boundaries
 * in a row: a tensor whose size follows random batch shapes does that with
 * odds below 1 in 40000 (for iid sizes, 1/9!).
 *
 * Rates are measured from the boundary before the first growth to the last
 * boundary. The projected out-of-memory iteration is the first iteration
 * whose working set no longer fits: the room left for growth is the device's
 * free memory plus what the allocator caches, less what an iteration
 * allocates above its starting level at its peak (the largest of the last
 * iterations'); the leak eats it at its rate. */
#ifndef CA_LEAKS_H
#define CA_LEAKS_H
#include <stddef.h>
#include <stdint.h>

#include "reports/tracker.h"

#define CA_LEAK_MIN_GROWTHS 3
#define CA_LEAK_MIN_BYTE_STREAK 8

/* Updates a site's boundary history with its live figures at the boundary
 * that ends iteration `iter`. */
void ca_site_boundary(ca_site_stat *st, uint64_t count, uint64_t bytes, uint32_t iter, unsigned warmup);

/* Is the site leaking as of the boundary ending iteration `last`? 1 with the
 * rates, live figures and growth start in *out (first_iteration and the
 * projection are left for the caller). */
int ca_site_leak(const ca_site_stat *st, uint32_t last, ca_leak *out);

/* Every leaking site of a snapshot, most bytes per iteration first, with the
 * birth iteration of each one's oldest live allocation and the projected
 * iteration at which `headroom` bytes run out (-1 when have_headroom is 0).
 * *out is malloc'd (NULL when there is none); returns the count. */
size_t ca_leaks_find(const ca_track_snap *s, int have_headroom, uint64_t headroom, ca_leak **out);

/* The first iteration after `last` that will not fit: with `headroom` bytes
 * of room left once an iteration's working set is accounted for, growing by
 * `rate` bytes an iteration: last + 2 + floor(headroom / rate). -1 when the
 * rate is not positive. */
int64_t ca_leak_projection(uint32_t last, uint64_t headroom, double rate);

/* Room for growth: free + cached bytes less the largest working set (peak
 * allocated minus the level at the start) of the last eight iterations. */
uint64_t ca_leak_headroom(const ca_track_snap *s, uint64_t free_and_cached);

/* What to do about the leaks found, matched to what was measured: small
 * allocations kept one by one (a metric or loss kept as a tensor), many sites
 * growing together by activation-sized amounts (a forward pass run with
 * autograd on whose result is kept: evaluation without no_grad), or a buffer
 * re-made larger each time. A paragraph of plain text (static storage). */
const char *ca_leak_advice(const ca_leak *leaks, size_t n, size_t which);

#endif
