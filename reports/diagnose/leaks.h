/* Room diagnose/: leaks, fragmentation, OOM verdicts and what would fit, judged on the tracker's views.
 * May include: allocator/, util/, capture/, track/ and diagnose/.
 *
 * Leak diagnosis: which call sites pile up allocations across iterations.
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
 * The tracker counts the growths at each boundary (ca_site_boundary,
 * reports/track/iterations.c); ca_site_leak below judges them.
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

#include "reports/track/tracker.h"

#define CA_LEAK_MIN_GROWTHS 3
#define CA_LEAK_MIN_BYTE_STREAK 8

/* Leak figures for one site (leaks.c fills them). */
typedef struct ca_leak {
    uint32_t site;
    int growing_buffer;            /* constant count, growing bytes */
    double bytes_per_iteration, count_per_iteration;
    uint32_t first_iteration;      /* birth iteration of its oldest live allocation */
    uint32_t growth_since;         /* first iteration of the growth */
    uint64_t live_bytes, live_count;
    uint64_t leaked_bytes;         /* live bytes above the level before the growth */
    int64_t projected_oom_iteration; /* -1: unknown (no device figures) */
    uint64_t typical_size;         /* mean bytes per leaked allocation */
} ca_leak;

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

/* ---- findings: one per cause, not one per call site ----
 *
 * Sites that grow together are one finding. Two leaking sites (count kind)
 * are joined when their growth started within one iteration of each other
 * and, with stacks, when they share a frame under which most of what is
 * allocated is kept: for frame F, the allocations the leaking sites through F
 * keep per iteration are at least CA_FINDING_RETENTION of all allocations
 * made through F per iteration (every site's allocations / iterations). The
 * call of a forward pass whose graph is kept passes that test (PyTorch's
 * evaluation without no_grad keeps 24 of its 36 allocations, the demo's all
 * but a few); the frames of the training loop, through which every healthy
 * allocation passes too, do not, so two unrelated leaks in one loop stay
 * apart. Offline (sites are requested sizes, no stacks) growth together is
 * the only test. A buffer re-made larger is always a finding of its own.
 *
 * A finding's root is the deepest frame its sites share: walking the
 * heaviest site's stack from the outermost frame inward, the last frame of
 * the first run of frames that sites holding at least CA_FINDING_ROOT_SHARE
 * of the finding's bytes per iteration all pass through (stacks truncated
 * at different depths still meet in that run; helpers shared again deeper,
 * such as one allocation function, come after the paths parted and do not
 * count). Stragglers under 1% (a batch loaded next to the forward pass) do
 * not pull the root outward.
 *
 * A leak is memory the program keeps more of at every boundary. When the
 * memory kept across boundaries (every site's) grew, over a finding's
 * growth, by less than half of what its sites piled up, other sites let go
 * of about as much: a hand-off (a buffer made by one line and kept by the
 * next), a note, never the LEAK verdict. A buffer re-made larger is judged
 * by its own bytes.
 *
 * No false alarms: a finding whose growth is negligible is a note, never
 * the LEAK verdict. Negligible means both
 *   - it would take at least CA_NOTE_WORKING_SETS iterations to add one
 *     working set (under 0.1% of it per iteration), and
 *   - when the device is known, at least CA_NOTE_DEVICE_ITERATIONS
 *     iterations to fill the room left on the device.
 * The working set is the largest peak allocated of an iteration after
 * warm-up, less what had piled up since the first of them (so a leak does
 * not dilute itself by growing). Measured (reports/REPORT.md): bounded
 * per-shape caches grow by 0.005-0.03% of the working set per iteration;
 * the smallest real leaks in the tests by 1% (1 MiB on 100 MiB) and more. */
#define CA_FINDING_RETENTION 0.5
#define CA_FINDING_ROOT_SHARE 0.99
#define CA_NOTE_WORKING_SETS 1000.0
#define CA_NOTE_DEVICE_ITERATIONS_INT 100000
#define CA_NOTE_DEVICE_ITERATIONS ((double)CA_NOTE_DEVICE_ITERATIONS_INT)
#define CA_STR_(x) #x
#define CA_STR(x) CA_STR_(x)

typedef enum {
    CA_FINDING_SITE,     /* one call site (or size) keeps allocations */
    CA_FINDING_TOGETHER, /* several sites growing together */
    CA_FINDING_BUFFER,   /* one buffer re-made larger every iteration */
} ca_finding_kind;

typedef struct ca_finding {
    ca_finding_kind kind;
    int note;                      /* 1: negligible growth or a hand-off, a note; 0: a leak */
    int handoff;                   /* a note because the memory kept across boundaries is flat */
    int retained_graph;            /* several sites, activation-like: a forward pass kept */
    size_t first, n_sites;         /* its sites: leaks[first .. first + n_sites), most bytes first */
    int has_root;                  /* stacks only: root_ip is the deepest shared frame */
    uintptr_t root_ip;
    double bytes_per_iteration, count_per_iteration; /* its sites together */
    uint32_t growth_since, first_iteration;          /* the earliest of its sites' */
    uint64_t live_bytes, live_count, leaked_bytes;   /* its sites together */
    int64_t projected_oom_iteration; /* at its rate alone; -1 unknown */
    double iterations_to_fill;     /* room on the device / rate; -1 unknown */
    double working_set_share;      /* rate / working set: growth per iteration */
    const char *advice;            /* what to do (static text) */
} ca_finding;

/* The working set for the rule above (bytes; the peak allocated when no
 * iteration after warm-up has ended). */
uint64_t ca_leak_working_set(const ca_track_snap *s);

/* Groups the leaking sites of ca_leaks_find into findings: leaks (n of
 * them) is reordered so that each finding's sites are contiguous, leaks'
 * sites first, then notes'; findings come in that order too, most bytes per
 * iteration first. have_headroom/headroom as for ca_leaks_find. *out is
 * malloc'd (NULL when n is 0); returns the number of findings. The number
 * of sites belonging to leaks (not notes) is in *n_leak_sites. */
size_t ca_findings_find(const ca_track_snap *s, ca_leak *leaks, size_t n, int have_headroom, uint64_t headroom,
                        ca_finding **out, size_t *n_leak_sites);

/* What to do about the leaks found, matched to what was measured: small
 * allocations kept one by one (a metric or loss kept as a tensor), many sites
 * growing together by activation-sized amounts (a forward pass run with
 * autograd on whose result is kept: evaluation without no_grad), or a buffer
 * re-made larger each time. A paragraph of plain text (static storage).
 * Per site; a finding carries its own (ca_finding.advice). */
const char *ca_leak_advice(const ca_leak *leaks, size_t n, size_t which);

#endif
