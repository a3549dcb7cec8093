/* Finding the iterations of a training loop in its allocations alone.
 *
 * A training loop makes the same allocations, from the same call sites, in
 * the same order, every iteration (shapes may vary; the code path does not).
 * So the sequence of call sites is periodic: find the period P (allocations
 * per iteration) where s[k] == s[k-P] for nearly every k in the last two
 * periods, preferring the smallest P that matches as well as the best (a
 * multiple of P matches as well; a stretch of identical layers matches
 * worse). The boundary goes where an iteration's memory is lowest: at the
 * position in the period where the allocated bytes are at their minimum most
 * often. It is found again later by an anchor: the shortest run of call
 * sites just before that position that occurs once per period, else the
 * shortest run starting there (a loop of identical layers may end in more
 * identical allocations than an anchor can span).
 *
 * Identical layers repeat inside one iteration as well; guards keep them
 * from being taken for the loop: the score looks at the last half of the
 * window (so the loop's period wins once the window holds a few
 * iterations), a period whose boundary level climbs and then falls (a
 * forward pass, then a backward) is refused, and the caller's judge
 * (ca_period_find_if; the tracker's is reports/track/loops.h) refuses what is
 * not a training loop, the next candidate being tried then. The tracker
 * tries only on windows of 8192 events and more, and once more when a
 * report is written. */
#ifndef CA_PERIOD_H
#define CA_PERIOD_H
#include <stddef.h>
#include <stdint.h>

#define CA_PERIOD_MAX_ANCHOR 16
#define CA_PERIOD_MIN_SCORE 0.9

typedef struct ca_period {
    uint32_t period;     /* allocations per iteration */
    double score;        /* fraction of the recent window that repeats */
    unsigned k;          /* anchor length */
    int starts;          /* 0: the anchor ends an iteration; 1: it starts one */
    uint32_t anchor[CA_PERIOD_MAX_ANCHOR];
} ca_period;

/* syms[i]: the symbol (call site) of allocation i; level[i]: bytes allocated
 * just before it. Needs at least three periods. 1 and *out when found. */
int ca_period_find(const uint32_t *syms, const uint64_t *level, size_t n, ca_period *out);

/* The same, each candidate that repeats well enough put to `accept` with its
 * boundaries at[0..nb) (positions in syms, as ca_period_boundaries gives
 * them): the first it takes (1) is the answer. Candidates come in order:
 * those that match as well as the best one, smallest period first, then the
 * others, best first; so when a stretch of identical layers matches best and
 * is refused, the loop around it is tried next. */
typedef int ca_period_accept_fn(void *ctx, const ca_period *p, const size_t *at, size_t nb);
int ca_period_find_if(const uint32_t *syms, const uint64_t *level, size_t n, ca_period_accept_fn *accept, void *ctx,
                      ca_period *out);

/* Positions x in syms[0..n) where an iteration starts (the anchor ends at
 * x - 1), in order; writes up to max of them, returns how many there are. */
size_t ca_period_boundaries(const ca_period *p, const uint32_t *syms, size_t n, size_t *out, size_t max);

/* Online: feed each allocation's symbol before recording it. Returns
 * CA_PERIOD_ENDS_AFTER when an iteration ends with this allocation (the next
 * one starts a new iteration), CA_PERIOD_STARTED when one started k-1
 * allocations ago (exactly at this one for k = 1), else 0. */
enum { CA_PERIOD_ENDS_AFTER = 1, CA_PERIOD_STARTED = 2 };
typedef struct ca_period_matcher {
    ca_period p;
    uint32_t last[CA_PERIOD_MAX_ANCHOR]; /* ring of the latest symbols */
    unsigned pos, filled;
    int counting;    /* no anchor: an iteration every p.period allocations */
    uint32_t since;  /* allocations since the last start (counting) */
} ca_period_matcher;

void ca_period_matcher_init(ca_period_matcher *m, const ca_period *p);
/* Counting instead of matching, for symbols only known afterwards (how long
 * each allocation lived): `since` allocations of the current iteration so far. */
void ca_period_matcher_init_counting(ca_period_matcher *m, const ca_period *p, uint32_t since);
int ca_period_matcher_push(ca_period_matcher *m, uint32_t sym);

#endif
