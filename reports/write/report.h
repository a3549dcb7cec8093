/* Room write/: formats (UTF-8, numbers, pickle, JSON, SVG, safe files) and the reports in them.
 * May include: allocator/, util/, capture/, track/, diagnose/ and write/.
 *
 * The reports people and programs read, from a tracker (and, when there is
 * one, its allocator). See REPORT.md for what each file holds.
 *
 *   ca_report_write(t, a, "run1", NULL) writes run1.txt, run1.json,
 *   run1.pickle, run1.html, run1.csv and run1.folded. The prefix is a template: %p is the
 *   pid, %r the rank (RANK, else LOCAL_RANK), %% a '%'. Each file is written
 *   to a temporary name (mode 0600, O_NOFOLLOW) and renamed into place;
 *   when a file cannot be written, one warning goes to stderr (once per
 *   tracker) and the others are still attempted.
 *
 * Not for signal handlers: it allocates, takes locks and may start addr2line.
 * Call it from normal context (the preload's SIGUSR1 handler only sets a flag). */
#ifndef CA_REPORT_H
#define CA_REPORT_H
#include <stdint.h>
#include <stdio.h>

#include "allocator/allocator.h"
#include "reports/track/tracker.h"

enum {
    CA_REPORT_TXT = 1,
    CA_REPORT_JSON = 2,
    CA_REPORT_PICKLE = 4,
    CA_REPORT_HTML = 8,
    CA_REPORT_CSV = 16,
    CA_REPORT_FOLDED = 32, /* the memory live at the peak by stack, for flame graphs */
    CA_REPORT_ALL = 63,
};

/* Offline: the run replayed through cudalloc's allocator (cudalloc-report on
 * a snapshot of another allocator): would it fit, and in how much. */
typedef struct ca_report_replay {
    int expandable;             /* the allocator replayed: 1 expandable segments, 0 classic */
    uint64_t allocations;       /* allocations replayed */
    uint64_t peak_requested;    /* the most bytes the program asked for at once */
    uint64_t peak_reserved;     /* the most cudalloc reserved, on a device without limit */
    uint64_t min_capacity;      /* the smallest device (to 1 MiB) on which no allocation fails */
    uint64_t capacity;          /* the device size asked about (--capacity); 0: none */
    uint64_t ooms_at_capacity;  /* allocations that fail on it */
    uint64_t failed_requests;   /* requests that failed when recorded, replayed (made and freed at once) */
} ca_report_replay;

typedef struct ca_report_options {
    unsigned formats;         /* CA_REPORT_* bits (default CA_REPORT_ALL) */
    int csv_iterations;       /* 1: `iteration` rows in the CSV (default); 0: plain RMM */
    int symbolize;            /* 1: addr2line for file and line (default); 0: dladdr only */
    int symbolize_timeout_ms; /* all addr2line runs of one report (default 10000) */
    /* For the snapshot's allocator_settings: */
    const char *alloc_conf;   /* cudalloc's settings in force, CUDALLOC_CONF syntax, defaults
                                 included (its "cudalloc" dict); NULL: none (offline) */
    const char *user_conf;    /* PYTORCH_CUDA_ALLOC_CONF there: the user's own setting
                                 (CUDALLOC_CONF as set; offline, the snapshot's); NULL: "" */
    int expandable;           /* 1 expandable, 0 classic, -1 unknown (default) */
    const char *title;        /* e.g. the program's name; NULL: "cudalloc report" */
    const char *source_name;  /* offline: the trace file the report comes from */
    const char *marks_name;   /* offline: what the explicit marks are ("ProfilerStep annotations"); NULL: cudalloc_step() */
    int device_unknown;       /* offline without a capacity: no device figures, no projection */
    uint64_t device_total;    /* offline without an allocator: the device's size (free = size - reserved) */
    const ca_report_replay *replay; /* offline: a replay under cudalloc to report; NULL: none */
    int no_trace;             /* offline: a snapshot of segments with no trace (taken without
                                 _record_memory_history()): what is live, from its blocks, and nothing over time */
    /* What would fit, computed by the caller (offline: from the run as
     * recorded, not from a replay on a device too small); NULL: from the
     * tracker. Copied: the caller keeps ownership. */
    const struct ca_fix_report *fixes;
    int rank;                 /* the process's rank (RANK, else LOCAL_RANK); -1 unknown (default) */
    /* Device memory allocated past cudalloc (CUPTI, filled by the preload):
     * shown as its own line in the fragmentation and OOM sections. */
    int external_known;       /* 1: the two figures below are measured */
    uint64_t external_alloc_bytes, external_pool_bytes;
    const char *external_note; /* else why not (e.g. "CUPTI is not loaded"); NULL: say nothing */
    /* Call sites whose memory is known (reports/diagnose/suppress.h): not
     * reported as leaks or live memory, their bytes counted; NULL: none. */
    const struct ca_suppressions *suppressions;
    const char *suppressions_name; /* the file, for the reports' line about them */
} ca_report_options;

void ca_report_options_default(ca_report_options *o);

/* Writes the files; a may be NULL. 0 when every file was written, else -1. */
int ca_report_write(ca_tracker *t, ca_allocator *a, const char *prefix, const ca_report_options *o);

/* Writes one format (a single CA_REPORT_* bit) to exactly `path` ("-": stdout).
 * 0, or -1 with a one-line message in err. */
int ca_report_write_file(ca_tracker *t, ca_allocator *a, unsigned format, const char *path,
                         const ca_report_options *o, char *err, size_t errlen);

/* Several devices' reports as one run (a snapshot of several devices): a
 * table across the devices with each verdict first, then each device's
 * report, those that ran out of memory first. t[i] with o[i] (its title
 * names the device); format CA_REPORT_TXT or CA_REPORT_HTML (one page);
 * path "-" is stdout. 0, or -1 with a one-line message in err. */
int ca_report_write_devices(ca_tracker *const *t, const ca_report_options *o, size_t n, unsigned format,
                            const char *path, char *err, size_t errlen);

/* The exit summary: at most 15 lines, each starting with "cudalloc: ", and
 * for a program with no loop what it still holds (5 call sites, 4 frames each). */
/* o: NULL for the defaults (its suppressions are what the summary uses). */
void ca_report_summary(ca_tracker *t, ca_allocator *a, const ca_report_options *o, FILE *f);

#endif
