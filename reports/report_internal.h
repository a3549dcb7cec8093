/* What the report writers share: everything a report says, computed once. */
#ifndef CA_REPORT_INTERNAL_H
#define CA_REPORT_INTERNAL_H
#include <stdio.h>

#include "allocator/stats.h"
#include "reports/fragmentation.h"
#include "reports/leaks.h"
#include "reports/report.h"
#include "reports/symbolize.h"

typedef enum {
    CA_VERDICT_HEALTHY,
    CA_VERDICT_LEAK,
    CA_VERDICT_OOM,
    CA_VERDICT_NO_ITERATIONS,
    CA_VERDICT_FEW_ITERATIONS,
} ca_verdict;

typedef struct ca_report_ctx {
    ca_report_options opt;
    ca_track_snap snap;
    int have_stats;
    ca_stats stats;
    ca_frag frag;
    ca_leak *leaks;
    size_t n_leaks;
    int have_headroom;
    uint64_t headroom;           /* device free + cached: room for growth */
    double leak_rate;            /* all leaks together, bytes per iteration */
    int64_t leak_oom_iteration;  /* all leaks together; -1 unknown */
    ca_symtab *sym;
    ca_verdict verdict;
    char verdict_line[512];      /* the first line of the text report */
} ca_report_ctx;

/* full: symbolize every site (the snapshot needs them all), not only the
 * ones the text shows. 0, or -1 out of memory. */
int ca_report_ctx_init(ca_report_ctx *c, ca_tracker *t, ca_allocator *a, const ca_report_options *o,
                       int full);
void ca_report_ctx_free(ca_report_ctx *c);

/* The frames of a site, innermost first, cudalloc's own leading frames
 * dropped; NULL entries never. Returns how many (<= max). */
size_t ca_report_frames(const ca_report_ctx *c, uint32_t site, const ca_frame **out, size_t max);
/* "function (file:line)" of the first frame, or "allocations of 4.00 MiB"
 * (sites by size), or "unknown call site". */
void ca_report_site_label(const ca_report_ctx *c, uint32_t site, char *buf, size_t n);
/* Seconds (or event numbers, offline) since the tracker started. */
double ca_report_time(const ca_report_ctx *c, uint64_t ticks);

int ca_report_txt(const ca_report_ctx *c, FILE *f);
int ca_report_json(const ca_report_ctx *c, FILE *f);
int ca_report_pickle(const ca_report_ctx *c, FILE *f);
int ca_report_html(const ca_report_ctx *c, FILE *f);
int ca_report_csv(const ca_report_ctx *c, FILE *f);

/* "1.50 GiB" */
const char *ca_report_bytes(double bytes, char *buf, size_t n);

#endif
