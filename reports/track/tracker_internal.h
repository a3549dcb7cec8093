/* What the tracker's files share (track/ only: no other room includes it):
 * the tracker's state, and the steps one file takes for another. Everything
 * in struct ca_tracker below the lock is touched only with it held. */
#ifndef CA_TRACKER_INTERNAL_H
#define CA_TRACKER_INTERNAL_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/lock.h"
#include "reports/track/idtab.h"
#include "reports/track/period.h"
#include "reports/track/ranges.h"
#include "reports/track/tracker.h"

#include "reports/track/livetab.h"

enum { DETECT_OFF, DETECT_TRYING, DETECT_FOUND, DETECT_GAVE_UP };
/* Detection waits for a window of this many events (then doubles it): a
 * smaller one may hold only part of the first iteration. Reports try once
 * more on whatever there is. */
#define DETECT_FIRST_TRY 8192

struct ca_tracker {
    ca_tracker_options opt;
    ca_stacks *stacks;
    int own_stacks;
    uint64_t serial;
    ca_clock_ref start;
    ca_lock lock;

    ca_livetab live;
    uint64_t allocated, requested, reserved, peak_allocated, peak_reserved;
    uint64_t iter_peak_allocated, iter_peak_reserved;
    uint64_t n_allocs, n_frees, n_unknown_frees;

    ca_site_stat *sites; /* by site id */
    uint8_t *dirty;
    uint32_t cap_sites, max_site;
    uint32_t *dirty_list;
    size_t n_dirty, cap_dirty;

    ca_ev *ring;
    size_t ring_cap;
    size_t ring_at; /* seq % ring_cap, kept without a division per event */
    uint64_t seq;

    ca_idtab threads, streams; /* OS thread ids, stream handles */
    uint64_t last_stream;
    uint32_t last_stream_idx;
    ca_idtab whos;             /* (thread, stream) pairs: one index in each event */
    uint64_t last_who_key;
    uint32_t last_who;

    uint32_t iteration;
    ca_iter_source source;
    uint64_t marks[4];
    ca_boundary *bounds;
    size_t n_bounds, cap_bounds;

    int detect_state, pending;
    uint64_t next_try;
    uint64_t detect_from; /* the first event detection looks at (ca_tracker_set_baseline) */
    ca_period period;
    ca_period_matcher matcher;

    ca_range_set ranges;

    ca_oom_record *ooms;
    size_t n_ooms;
    uint64_t n_ooms_total;
    _Atomic int warned;
};

/* Grows *arr (elements of `size` bytes) to hold `need`; 0 on success. */
int ca_track_grow(void **arr, size_t *cap, size_t need, size_t size);
#define GROW(arr, cap, need) ca_track_grow((void **)&(arr), &(cap), (need), sizeof *(arr))

/* iterations.c: the iteration in progress ends now (before event number
 * t->seq); and one try at finding the loop in the ring (detect_state
 * DETECT_TRYING), which marks the boundaries found. */
void ca_track_boundary(ca_tracker *t, uint64_t ticks);
void ca_track_try_detect(ca_tracker *t);

#endif
