/* Room track/: the tracker: lifetimes, iterations (marked or detected), the mapped ranges.
 * May include: allocator/, util/, capture/ and track/.
 *
 * The tracker: watches every allocation's lifetime across iterations.
 *
 * Fed by the allocator's observer (ca_tracker_attach), it keeps per live
 * allocation its size, requested size, stream, thread, birth iteration, birth
 * time and call site; per call site, how many of its allocations are live at
 * each iteration boundary (what the leak diagnosis reads); the event stream
 * (a ring of the latest events, for the trace and the snapshot); the mapped
 * ranges (the segments); and the out-of-memory failures.
 *
 * Iteration boundaries, in order of trust: explicit (cudalloc_step()), NVTX
 * ranges (the preload sees the range push), and detection of the repeating
 * allocation pattern of a training loop when neither ever arrives. Once a
 * more trusted source has marked a boundary, less trusted ones are ignored.
 *
 * Thread safety: the observer may run on several threads at once (one per
 * stream, under that stream's pool lock); the tracker has its own lock, taken
 * for a few tens of nanoseconds per event, and never calls the allocator.
 * Stacks are captured before that lock is taken.
 *
 * Use from the preload:
 *   t = ca_tracker_new(&opts);          once per device allocator
 *   ca_tracker_attach(t, a);            before the first allocation
 *   ... ca_tracker_step(t, CA_ITER_EXPLICIT) from cudalloc_step(),
 *       ca_tracker_step(t, CA_ITER_NVTX) on the configured NVTX range push,
 *       ca_oom_diagnose(t, &oom) after ca_malloc returned CA_ERR_OOM ...
 *   ca_report_write(t, a, prefix, &ropts)   (reports/write/report.h)
 *   ca_tracker_detach(t, a); ca_tracker_destroy(t);
 */
#ifndef CA_TRACKER_H
#define CA_TRACKER_H
#include <stddef.h>
#include <stdint.h>

#include "allocator/allocator.h"
#include "reports/track/clock.h"
#include "reports/capture/stacks.h"

typedef enum {
    CA_ITER_NONE = 0,      /* no boundary seen (yet) */
    CA_ITER_DETECTED = 1,  /* found in the allocation pattern */
    CA_ITER_NVTX = 2,      /* NVTX range (name configured in the preload) */
    CA_ITER_EXPLICIT = 3,  /* cudalloc_step() */
} ca_iter_source;
const char *ca_iter_source_name(ca_iter_source s); /* "none", "detected", "nvtx", "explicit" */

typedef enum {
    CA_SITES_STACK = 0, /* a site is a native call stack (online) */
    CA_SITES_SIZE = 1,  /* a site is a requested size (offline: traces have no stacks) */
} ca_site_mode;

typedef struct ca_tracker_options {
    unsigned max_frames;   /* frames kept per call stack (default 32) */
    int capture_stacks;    /* 0: no unwinding; sites are then requested sizes */
    size_t trace_events;   /* events kept in the ring (default 1<<20, 32 bytes each; 0: none) */
    unsigned warmup;       /* iterations whose growth is never a leak (default 1) */
    int detect;            /* detect iterations when nothing marks them (default 1) */
    size_t detect_events;  /* give detection up after this many events (default 1<<18) */
    int device;            /* CUDA device ordinal, for the snapshot */
    int time_is_index;     /* offline: ticks are event numbers, not time */
    ca_stacks *stacks;     /* shared stack table (several devices); NULL: own */
} ca_tracker_options;

void ca_tracker_options_default(ca_tracker_options *o);

typedef struct ca_tracker ca_tracker;

ca_tracker *ca_tracker_new(const ca_tracker_options *o);
void ca_tracker_destroy(ca_tracker *t);

/* Installs ca_tracker_observe as a's observer (detach: removes it). */
void ca_tracker_attach(ca_tracker *t, ca_allocator *a);
void ca_tracker_detach(ca_tracker *t, ca_allocator *a);

/* The observer (ctx is the tracker): captures the call stack of allocations
 * and OOMs, then records the event. */
void ca_tracker_observe(void *tracker, const ca_trace_event *ev);

/* Records an event with a given site and, for tests and offline replay, a
 * thread id (0: the calling thread) and ticks (0: now). */
void ca_tracker_record(ca_tracker *t, const ca_trace_event *ev, uint32_t site, uint64_t thread,
                       uint64_t ticks);

/* An iteration boundary from `src` (CA_ITER_EXPLICIT or CA_ITER_NVTX; others
 * are ignored). */
void ca_tracker_step(ca_tracker *t, ca_iter_source src);

/* Everything recorded so far is the state the run started from (offline:
 * what a snapshot's trace found mapped and allocated when it began), not
 * part of the loop: iteration detection looks only at later events. */
void ca_tracker_set_baseline(ca_tracker *t);

/* Blocks repeated inside one pass: the identical layers of a forward or
 * backward pass, an optimizer's loop over its parameters; what iteration
 * detection finds repeating but refuses as a training loop's iterations
 * (reports/track/loops.h), in the events recorded since the baseline. For
 * reports of a run with no iterations, and for predictions that need the
 * number of layers (activation checkpointing). */
typedef struct ca_blocks {
    uint32_t count;           /* blocks found: each marked once (at its start or end) */
    uint32_t allocations;     /* allocations per block */
    int shape;                /* why they are not iterations: ca_loop_shape (track/loops.h) */
    uint64_t swing;           /* median peak of a block above the level it starts at */
    int64_t rise;             /* median change of the level over a block (> 0: kept, as
                                 activations saved for backward) */
    int pass;                 /* ca_pass_kind they run inside (capture/frame_kind.h); 0: none seen */
    uintptr_t pass_ip;        /* the frame of that call */
} ca_blocks;

/* 1 and *out when such blocks repeat (3 or more), else 0. Costs a period
 * search over the ring (tens of milliseconds for a million events). */
int ca_tracker_blocks(ca_tracker *t, ca_blocks *out);

/* The site id of a synthetic stack (tests) or, in CA_SITES_SIZE mode, of a
 * requested size. */
uint32_t ca_tracker_site(ca_tracker *t, const uintptr_t *ips, unsigned n);
uint32_t ca_tracker_size_site(ca_tracker *t, uint64_t requested);

ca_stacks *ca_tracker_stacks(ca_tracker *t);
ca_site_mode ca_tracker_site_mode(const ca_tracker *t);

/* In a fork child (pthread_atfork's child handler): the locks start free
 * again, whatever thread held them in the parent. The state is kept. */
void ca_tracker_fork_child(ca_tracker *t);

/* 1 the first time it is called on t, then 0: one warning per tracker. */
int ca_tracker_warn_once(ca_tracker *t);

/* Bytes the tracker holds now (tables, ring, per-site state) and the number of
 * live allocations, for the memory figure per allocation. */
size_t ca_tracker_memory(ca_tracker *t, size_t *live_allocations);

/* ---- the state reports read: a copy taken under the lock ---- */

/* What the leak diagnosis keeps per call site. Boundaries are numbered by the
 * iteration that ends there. */
typedef struct ca_site_stat {
    uint32_t site;
    uint64_t live_count, live_bytes;  /* now */
    uint64_t allocs;                  /* ever */
    uint64_t prev_count, prev_bytes;  /* at the last boundary this site changed by */
    uint64_t max_count, max_bytes;    /* highest at any boundary */
    /* count growth: boundaries after warm-up where the live count reached a
     * new high, in a run with no decrease */
    uint32_t growths, first_growth, last_growth, max_gap;
    uint64_t base_count, base_bytes;  /* at the boundary before the first growth */
    /* byte growth at a constant count (a buffer reallocated larger each time) */
    uint32_t byte_streak, byte_first, byte_last;
    uint64_t byte_base;
    int seen_boundary;                /* prev_* hold a boundary's figures */
} ca_site_stat;

/* Updates a site's history with its live figures at the boundary that ends
 * iteration `iter` (iterations.c): the growths above, which the leak rule
 * (reports/diagnose/leaks.h) judges. */
void ca_site_boundary(ca_site_stat *st, uint64_t count, uint64_t bytes, uint32_t iter, unsigned warmup);

typedef enum {
    CA_EVK_ALLOC, CA_EVK_FREE, CA_EVK_MAP, CA_EVK_UNMAP, CA_EVK_OOM,
} ca_evk;

/* One event of the ring: 32 bytes. Blocks and mappings are below
 * CA_MAX_BYTES (2^47), so their sizes fit 48 bits; a failed request may be
 * any size (SIZE_MAX - 1000), so an OOM keeps it whole in addr. */
typedef struct ca_ev {
    uint64_t addr;     /* OOM: the bytes asked */
    uint64_t packed;   /* bytes (48 bits: requested, or mapped for MAP/UNMAP;
                          OOM: index of its record in ooms), block bytes past
                          the requested size rounded up to 512 (12 bits, in
                          512 B units; MAP/UNMAP: CA_EV_WHOLE_BIT), kind (4 bits) */
    uint64_t ticks;
    uint32_t site;     /* ALLOC/FREE: the allocation's site; OOM: the failing call's;
                          MAP/UNMAP: the call that made it (0 offline) */
    uint32_t who;      /* index in whos[]: its thread and stream (ca_ev_thread, ca_ev_stream) */
} ca_ev;

static inline ca_evk ca_ev_kind(const ca_ev *e) { return (ca_evk)(e->packed >> 60); }
/* Bytes: requested (ALLOC/FREE/OOM) or mapped (MAP/UNMAP). */
static inline uint64_t ca_ev_bytes(const ca_ev *e) {
    return ca_ev_kind(e) == CA_EVK_OOM ? e->addr : e->packed & ((UINT64_C(1) << 48) - 1);
}
/* OOM: the index of its record in ooms (>= n_ooms when it was not kept). */
static inline uint64_t ca_ev_oom_record(const ca_ev *e) { return e->packed & ((UINT64_C(1) << 48) - 1); }
/* MAP/UNMAP of a whole segment (ca_range_kind.whole): PyTorch's
 * segment_alloc and segment_free rather than segment_map and segment_unmap. */
#define CA_EV_WHOLE_BIT (UINT64_C(1) << 48)
static inline int ca_ev_whole(const ca_ev *e) {
    ca_evk k = ca_ev_kind(e);
    return (k == CA_EVK_MAP || k == CA_EVK_UNMAP) && (e->packed & CA_EV_WHOLE_BIT);
}
/* The block's size for ALLOC/FREE: the request rounded up to 512 bytes,
 * plus what a classic segment's block kept beyond that. */
static inline uint64_t ca_ev_block(const ca_ev *e) {
    uint64_t b = ca_ev_bytes(e);
    return ((b + CA_ROUND - 1) & ~(uint64_t)(CA_ROUND - 1)) + ((e->packed >> 48) & 0xfff) * CA_ROUND;
}

typedef struct ca_boundary {
    uint32_t iteration;       /* the iteration that ends here */
    uint64_t seq;             /* events before it */
    uint64_t ticks;
    uint64_t allocated, reserved;         /* at the boundary */
    uint64_t peak_allocated, peak_reserved; /* during the iteration */
    uint64_t live_count;
} ca_boundary;

typedef struct ca_live_view {
    uintptr_t addr;
    uint64_t size, requested;
    uint64_t birth_ticks;
    uint32_t site, birth_iteration;
    uint32_t thread, stream;
} ca_live_view;

/* What made a mapped range, as far as its allocator says (the snapshot's
 * segments do; cudalloc's classic segments are whole, in their pool, not
 * expandable; its expandable granules leave the defaults, { 0, 0, -1, (0, 0) }). */
typedef struct ca_range_kind {
    uint8_t whole;       /* 1: a segment of its own (PyTorch's classic segments, one cudaMalloc
                            each): made and released whole, never joined to its neighbours */
    uint8_t pool;        /* 0 not said, 1 small (blocks up to 1 MiB), 2 large */
    int8_t expandable;   /* 1, 0, or -1 not said */
    int64_t pool_id[2];  /* PyTorch's segment_pool_id: (0, 0) is its default pool */
} ca_range_kind;

typedef struct ca_range {
    uintptr_t addr;
    uint64_t size;
    uint64_t stream;     /* the tracker's index in streams[] (the snapshot reader's ranges: the
                            stream itself); ranges join only within one */
    ca_range_kind kind;
} ca_range;

/* ca_tracker_record for a CA_EV_SEGMENT_MAP or CA_EV_SEGMENT_UNMAP whose
 * range's kind is known (offline: a snapshot's segments; ca_tracker_record
 * gives ranges ca_range_kind_default()'s, reports/track/ranges.h); site: the
 * call that mapped or unmapped, CA_SITE_NONE when not known. */
void ca_tracker_record_range(ca_tracker *t, const ca_trace_event *ev, const ca_range_kind *kind, uint32_t site,
                             uint64_t ticks);

#define CA_OOM_TOP 5
/* BEYOND is a kind of NOT_THERE (same name, "not_there"): the request is
 * larger than the whole device, or the cap, could ever hold. */
typedef enum { CA_OOM_NOT_THERE, CA_OOM_FRAGMENTED, CA_OOM_LEAK, CA_OOM_BEYOND } ca_oom_verdict;

typedef struct ca_oom_record {
    uint64_t seq, ticks;
    uint32_t site, iteration;
    uint32_t thread, stream;
    uint64_t requested;
    int have_info;
    ca_oom_info info;
    ca_oom_verdict verdict;
    uint64_t leaked_bytes;          /* by the leaking sites, at the time */
    uint32_t n_leaks;
    uint32_t n_top;
    uint32_t top_site[CA_OOM_TOP];  /* live call sites, most bytes first */
    uint64_t top_bytes[CA_OOM_TOP], top_count[CA_OOM_TOP];
} ca_oom_record;

#define CA_MAX_OOM_RECORDS 64

/* Judges an OOM record with the tracker's lock held, from the call sites as
 * they stand (sites[i] is site i's): reports/diagnose/oom.h's ca_oom_assess. */
typedef void ca_oom_judge_fn(ca_oom_record *r, const ca_site_stat *sites, size_t n_sites, uint32_t iteration);

/* The allocator's account of a failed allocation (ca_malloc's ca_oom_info),
 * given after ca_malloc returned CA_ERR_OOM: completes the OOM record (made
 * by the observer, or here when it did not see the failure) and has `judge`
 * (NULL: none) judge it. Callers use ca_oom_diagnose (diagnose/oom.h). */
void ca_tracker_oom(ca_tracker *t, const ca_oom_info *info, ca_oom_judge_fn *judge);

typedef struct ca_track_snap {
    ca_site_mode site_mode;
    int device, time_is_index;
    ca_clock_conv clock;
    ca_stacks *stacks;

    uint32_t iteration;            /* current iteration (= boundaries so far) */
    ca_iter_source source;
    uint64_t marks[4];             /* boundaries offered by each source */
    int detect_state;              /* 0 not tried/off, 1 trying, 2 found, 3 gave up */
    uint32_t detect_period;        /* allocations per detected iteration */

    uint64_t allocated, requested, reserved; /* now, as the tracker counted */
    uint64_t peak_allocated, peak_reserved;
    uint64_t n_allocs, n_frees, n_unknown_frees;

    ca_live_view *live;  size_t n_live;   /* by address */
    ca_site_stat *sites; size_t n_sites;  /* every site with an allocation */
    ca_ev *events;       size_t n_events; /* the ring, oldest first */
    uint64_t first_seq;                   /* seq of events[0] */
    uint64_t seq;                         /* events ever */
    ca_boundary *bounds; size_t n_bounds;
    ca_range *ranges;    size_t n_ranges; /* mapped, by address */
    ca_oom_record *ooms; size_t n_ooms;
    uint64_t n_ooms_total;
    uint64_t *threads;   size_t n_threads; /* OS thread ids */
    uint64_t *streams;   size_t n_streams;
    uint64_t *whos;      size_t n_whos;    /* events' (thread index << 32 | stream index) */
    unsigned warmup;
} ca_track_snap;

/* An event's OS thread id and stream handle (0 where the tracker had no room). */
static inline uint64_t ca_ev_thread(const ca_track_snap *s, const ca_ev *e) {
    uint32_t i = e->who < s->n_whos ? (uint32_t)(s->whos[e->who] >> 32) : UINT32_MAX;
    return i < s->n_threads ? s->threads[i] : 0;
}
static inline uint64_t ca_ev_stream(const ca_track_snap *s, const ca_ev *e) {
    uint32_t i = e->who < s->n_whos ? (uint32_t)s->whos[e->who] : UINT32_MAX;
    return i < s->n_streams ? s->streams[i] : 0;
}

/* 0, or -1 when memory ran out (snap left empty). */
int ca_tracker_snapshot(ca_tracker *t, ca_track_snap *out);
/* The same without the event ring (n_events 0, first_seq = seq) and without
 * forcing a detection attempt: what the live figures need at an iteration
 * boundary, without copying up to 32 MiB of events under the lock. */
int ca_tracker_snapshot_light(ca_tracker *t, ca_track_snap *out);
void ca_track_snap_free(ca_track_snap *s);

#endif
