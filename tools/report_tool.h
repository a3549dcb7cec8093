/* cudalloc-report's parts: one per kind of input (a CSV trace, a PyTorch
 * snapshot, several ranks' JSON reports), sharing the options and the
 * writing of the reports. */
#ifndef CA_REPORT_TOOL_H
#define CA_REPORT_TOOL_H
#include <stddef.h>
#include <stdint.h>

#include "allocator/allocator.h"
#include "reports/write/report.h"
#include "reports/track/tracker.h"

typedef struct report_args {
    const char *out[5];  /* --txt, --json, --html, --pickle, --folded; NULL: not asked */
    size_t capacity;     /* --capacity; 0: none */
    int expandable;      /* --mode */
    unsigned warmup;     /* --warmup */
    int device;          /* --device; -1: every device the input has */
    const struct ca_suppressions *suppressions; /* --suppressions; NULL: none */
    const char *suppressions_name;
} report_args;

/* The report options every input's reports start from: the defaults and
 * the suppressions asked for. */
void report_options(const report_args *args, ca_report_options *o);

/* Writes the reports asked for (the text to stdout when none is). 0, or 1
 * when a file could not be written (said on stderr). */
int report_write(ca_tracker *t, ca_allocator *a, const report_args *args, const ca_report_options *ropt);
int report_any_output(const report_args *args);

/* A whole file into memory (NUL-terminated). 0, or -1 with "PATH: why" in err. */
int report_read_file(const char *path, char **buf, size_t *len, char *err, size_t errlen);

/* What the file holds, by content: 'p' a snapshot, 'j' a JSON report, 'c' a
 * CSV trace (or what its reader names as neither). */
int report_sniff(const char *path);

/* --fail-over: a percentage of the before side (percent >= 0), else bytes. */
typedef struct report_threshold {
    double percent;
    uint64_t bytes;
} report_threshold;

/* Exit statuses: 0 done, 1 a report could not be written, 2 bad input;
 * report_diff: 3 when the peak grew past the threshold (t NULL: none). */
int report_diff(const char *before, const char *after, const report_args *args, const report_threshold *t);
int report_trace(const char *path, const report_args *args);
int report_snapshot(const char *path, const report_args *args);
int report_ranks(char *const *paths, int n);

#endif
