/* What the report writers share: everything a report says, computed once. */
#ifndef CA_REPORT_INTERNAL_H
#define CA_REPORT_INTERNAL_H
#include <stdio.h>

#include "allocator/stats.h"
#include "reports/diagnose/fixes.h"
#include "reports/diagnose/fragmentation.h"
#include "reports/diagnose/leaks.h"
#include "reports/diagnose/peak.h"
#include "reports/write/fixes_text.h"
#include "reports/write/report.h"
#include "reports/capture/symbolize.h"

typedef enum {
    CA_VERDICT_HEALTHY,
    CA_VERDICT_LEAK,
    CA_VERDICT_OOM,
    CA_VERDICT_NO_ITERATIONS,
    CA_VERDICT_FEW_ITERATIONS,
    CA_VERDICT_SINGLE_PASS,  /* offline: fewer than two whole iterations; what held the peak */
    CA_VERDICT_DOES_NOT_FIT, /* offline: the replay does not fit the --capacity given */
    CA_VERDICT_NO_TRACE,     /* a snapshot of segments with no trace: what is live, by call site */
} ca_verdict;

/* What held the peak, by the frame that names each call site (its label). */
#define CA_REPORT_HOLDERS 6
#define CA_REPORT_PEAK_SITES 256 /* sites symbolized for it, most bytes first; the rest count as elsewhere */
typedef struct ca_report_holder {
    char label[512];
    uint64_t bytes, count;
    uint32_t sites;
} ca_report_holder;
/* What is live now, by call site: the sites holding the most, shown when
 * there is nothing over time to judge (a snapshot without a trace). */
#define CA_LIVE_SITES_SHOWN 10

typedef struct ca_report_ctx {
    ca_report_options opt;
    ca_track_snap snap;
    int have_stats;
    ca_stats stats;
    ca_frag frag;
    /* Growing sites, grouped into findings (reports/diagnose/leaks.h): leaks[0 ..
     * n_leaks) are the sites of the leak findings, leaks[n_leaks ..
     * n_growing) those of the notes (slow growth, not a leak). Each finding
     * names its sites as the range leaks[first .. first + n_sites). */
    ca_leak *leaks;
    size_t n_leaks, n_growing;
    /* One per cause, to show once each: findings[0 .. n_leak_findings) are
     * leaks (most bytes per iteration first), the rest up to n_findings are
     * notes. findings[i].advice is what to do; ca_report_finding_title()
     * says what it is, ca_report_finding_root() where. */
    ca_finding *findings;
    size_t n_findings, n_leak_findings;
    uint64_t working_set;        /* what the note rule compares growth with */
    int have_headroom;
    uint64_t headroom;           /* device free + cached: room for growth */
    double leak_rate;            /* all leaks together (not notes), bytes per iteration */
    int64_t leak_oom_iteration;  /* all leaks together; -1 unknown */
    /* Allocations that look like a caching allocator's segments (few, all
     * multiples of 2 MiB, almost none freed): cudalloc sees the cache, not
     * the tensors. The warning text, or "" when not seen. */
    char caching_warning[384];
    /* A program with a handful of allocations and no loop: nothing to judge,
     * one line says so. */
    int small_program;
    const ca_site_stat *live_sites[CA_LIVE_SITES_SHOWN]; /* most live bytes first */
    size_t n_live_sites;
    /* What the suppressions took out (live when the report was made). */
    struct {
        uint64_t bytes, count;
        size_t sites;
    } suppressed;
    ca_symtab *sym;
    /* The peak and what held it (reports/diagnose/peak.h), by label, most
     * bytes first: holders[0 .. n_holders), the rest summed in others. */
    int have_peak;
    ca_peak peak;
    ca_report_holder holders[CA_REPORT_HOLDERS];
    size_t n_holders;
    /* every label, most bytes first (holders are its head; for --diff) */
    ca_report_holder *peak_labels;
    size_t n_peak_labels;
    uint64_t others_bytes, others_count;
    /* Blocks repeated inside one pass (ca_tracker_blocks), looked for when
     * there are fewer than two whole iterations. */
    int have_blocks;
    ca_blocks blocks;
    /* Offline with --capacity: the replay under cudalloc does not fit; the
     * bytes missing (its smallest device less the capacity). */
    int does_not_fit;
    uint64_t missing;
    ca_verdict base_verdict;      /* what the verdict would be without the capacity */
    /* What would fit (reports/diagnose/fixes.h): the peak broken down, each
     * fix's peak; fix_frames[g] names its group g (a phase frame), or NULL. */
    ca_fix_report fixes;
    char **fix_frames;
    ca_verdict verdict;
    char verdict_line[1024];      /* the first line of the text report */
    char id_suffix[16];           /* the HTML ids' ("" alone; one page of several devices: "-dev1") */
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
/* What finding i is, for a heading or the verdict: "a forward pass run
 * under evaluate (train.c:99) is kept alive (20 call sites)", "allocations
 * from op_matmul (ops.c:101) are kept", "7 allocation sizes grow together
 * (a retained graph?)". */
void ca_report_finding_title(const ca_report_ctx *c, size_t i, char *buf, size_t n);
/* Its root frame as "function (file:line)"; "" when it has none (one site:
 * the site's label says where; no stacks). */
void ca_report_finding_root(const ca_report_ctx *c, size_t i, char *buf, size_t n);
/* The failure a report written now is about: the latest OOM, when it came in
 * the iteration under way or the one that just ended (then no format projects
 * an OOM: it happened), unless it asked for more than the device could ever
 * hold. A program that went on well past an OOM can run out
 * again, and its projections mean something again. NULL when there is none. */
const ca_oom_record *ca_report_ran_out(const ca_report_ctx *c);
/* Digits after the point for a share of the working set in percent: enough
 * to tell a note's 0.0031% from zero, few for a leak's 35.9%. */
static inline int ca_report_share_digits(double share) { return share >= 0.01 ? 1 : 4; }
/* The segments a format shows when it shows at most `max`: all of them, or
 * else the `max` holding the most cached free memory; in address order.
 * *out is malloc'ed (free it); returns how many, 0 also when memory ran out. */
size_t ca_report_segments_shown(const ca_report_ctx *c, size_t max, const ca_frag_segment ***out);
/* How to record a trace, for a snapshot taken without one. */
#define CA_HOW_TO_RECORD                                                                                          \
    "Record one: call torch.cuda.memory._record_memory_history(max_entries=100000) before the steps to look at, " \
    "then torch.cuda.memory._dump_snapshot('snapshot.pickle')."
/* What to do about OOM r, as lines: for "the memory is not there", the
 * fixes predicted to make this run fit (else why none can be), then the
 * general advice; for the other verdicts their advice. Returns how many. */
#define CA_REPORT_ADVICE_MAX (CA_FIX_ADVICE_MAX + 8)
size_t ca_report_oom_advice(const ca_report_ctx *c, const ca_oom_record *r, char (*lines)[CA_FIX_LINE], size_t max);
/* Seconds (or event numbers, offline) since the tracker started. */
double ca_report_time(const ca_report_ctx *c, uint64_t ticks);

/* "Suppressed (FILE): 4.00 MiB in 2 allocations from 1 call site, not
 * reported as leaks or live memory." or "" without suppressions. */
void ca_report_suppressed_text(const ca_report_ctx *c, char *buf, size_t n);
/* The exit summary's list of what is live by call site, with their frames
 * (a program with no loop: what it never freed). */
void ca_report_live_summary(const ca_report_ctx *c, FILE *f, size_t sites, size_t frames);

int ca_report_txt(const ca_report_ctx *c, FILE *f);
int ca_report_json(const ca_report_ctx *c, FILE *f);
int ca_report_pickle(const ca_report_ctx *c, FILE *f);
int ca_report_html(const ca_report_ctx *c, FILE *f);
/* The page's body (without <html>, <head>): one device's report, also in a
 * page of several (report_devices.c). */
void ca_report_html_body(const ca_report_ctx *c, FILE *f);
/* The line under a page that says what its units are. */
void ca_report_html_units(FILE *f);
/* "bad", "good" or "": the verdict's colour on the page. */
const char *ca_report_verdict_class(const ca_report_ctx *c);
/* PREFIX.html's drawings (report_html_plots.c): memory event by event, with
 * hover; memory per iteration; the segment map. */
void ca_report_html_time(const ca_report_ctx *c, FILE *f);
void ca_report_html_iterations(const ca_report_ctx *c, FILE *f);
void ca_report_html_segments(const ca_report_ctx *c, FILE *f);
/* "op_matmul at ops.c:101" / "fn in module", as the text report prints it. */
void ca_report_frame_text(const ca_frame *fr, char *buf, size_t n);
int ca_report_csv(const ca_report_ctx *c, FILE *f);
int ca_report_folded(const ca_report_ctx *c, FILE *f);

/* The verdict and its line (report_verdict.c), once everything else is
 * computed; the peak's holders by label (symbols resolved). */
void ca_report_decide_verdict(ca_report_ctx *c);
void ca_report_peak_holders(ca_report_ctx *c);
/* "ProfilerStep annotations", "cudalloc_step()", ...: what marked the
 * iterations, for the text ("detected", "none" too). */
const char *ca_report_source_text(const ca_report_ctx *c);
/* "48 blocks of 86 allocations repeat inside a module's forward; each keeps
 * 236 MiB more" (have_blocks). */
void ca_report_blocks_text(const ca_report_ctx *c, char *buf, size_t n);
/* The verdict's code in JSON: "leak", "single_pass", ... */
const char *ca_report_verdict_code(ca_verdict v);

/* "1.50 GiB" */
const char *ca_report_bytes(double bytes, char *buf, size_t n);

#endif
