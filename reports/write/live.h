/* The live figures: what a running program's allocator and tracker say now,
 * judged as the exit summary judges them (the same leak rule, the same
 * findings), cheap enough for every iteration boundary: the tracker's state
 * without its event ring, no period search, no addr2line unless asked.
 *
 * Written two ways for readers outside the process: the status file that
 * `cudalloc status` and `cudalloc top` read (a line per figure, "key value",
 * devices and findings in order), and Prometheus' text exposition format for
 * node_exporter's textfile collector. */
#ifndef CA_LIVE_H
#define CA_LIVE_H
#include <stdint.h>
#include <stdio.h>

#include "allocator/allocator.h"
#include "reports/track/tracker.h"

#define CA_LIVE_FINDINGS 8 /* leak findings kept, most bytes per iteration first */
#define CA_LIVE_TITLE 640

typedef struct ca_live_finding {
    uint32_t site;             /* its heaviest call site: the same finding from one boundary to the next */
    uintptr_t root_ip;         /* its root frame (0: none) */
    double bytes_per_iteration;
    uint32_t growth_since;     /* first iteration of the growth */
    uint64_t leaked_bytes;     /* live bytes above the level before the growth */
    uint32_t n_sites;
    int64_t oom_iteration;     /* the first iteration that will not fit at this rate; -1 unknown */
    char title[CA_LIVE_TITLE]; /* what grows, from where (ca_live_judge with titles); "" otherwise */
} ca_live_finding;

typedef struct ca_live_figures {
    int device;
    uint32_t iteration;          /* iterations ended */
    ca_iter_source source;
    double seconds;              /* since the tracker started */
    double seconds_per_iteration; /* over the last 8 iterations; 0: unknown */
    uint64_t reserved, allocated, peak_allocated, peak_reserved;
    uint64_t cached_free, largest_free;
    double fragmentation;        /* 1 - largest free / cached free */
    int have_device;
    uint64_t device_total, device_free;
    double growth_per_iteration; /* allocated at the last boundary less at the one before, over the last 8 */
    uint64_t allocations, ooms;
    uint32_t n_findings;         /* leak findings (notes are not leaks); findings[] holds the first ones */
    ca_live_finding findings[CA_LIVE_FINDINGS];
} ca_live_figures;

/* Judges the tracker's state now against the allocator a (NULL: none).
 * titles: name the findings (symbolizes their sites: addr2line, tens of
 * ms); 0 leaves titles empty. 0, or -1 out of memory. */
int ca_live_judge(ca_tracker *t, ca_allocator *a, int titles, ca_live_figures *out);

/* The status file (status format 1): header lines, then per device a
 * "device N" line and its figures, each finding a "finding" line:
 *   finding BYTES_PER_ITERATION GROWTH_SINCE OOM_ITERATION OOM_UNIX_TIME N_SITES TITLE
 * (OOM_* -1 when unknown; the title may hold spaces: the rest of the line).
 * `titles` are the titles known for the findings (figures' own when NULL). */
typedef struct ca_live_process {
    long pid;
    unsigned long long start_ticks; /* /proc/PID/stat's starttime: tells a reused PID apart */
    int rank;                       /* -1: none */
    double unix_time;               /* when written */
    const char *program;
} ca_live_process;
void ca_live_write_status(FILE *f, const ca_live_process *p, const ca_live_figures *figs, size_t n);

/* When finding f runs the device out, in Unix seconds, from figures taken
 * at unix_time; -1 unknown. */
double ca_live_oom_time(const ca_live_figures *g, const ca_live_finding *f, double unix_time);

/* A finding as one JSON object (cudalloc.on_leak's dict): event ("leak",
 * "near", "stopped"), device, iteration, bytes_per_iteration, growth_since,
 * leaked_bytes, n_sites, oom_iteration and oom_time (null when unknown),
 * title. malloc'd; NULL out of memory. */
char *ca_live_finding_json(const char *event, const ca_live_figures *g, const ca_live_finding *f, double unix_time);

/* Prometheus' text exposition format (version 0.0.4): one family per
 * figure (cudalloc_reserved_bytes, ...) with # HELP and # TYPE, a sample
 * per device labelled {device="N",rank="R"} (rank "" when there is none). */
void ca_live_write_metrics(FILE *f, const ca_live_process *p, const ca_live_figures *figs, size_t n);

#endif
