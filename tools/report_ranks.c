/* cudalloc-report on several ranks' JSON reports (the preload's
 * PREFIX.json, one per rank with report:PREFIX_%r): one table of every
 * rank's peaks, leak rate and verdict, and the rank that runs out of memory
 * first, by the earliest iteration: an out-of-memory failure that happened,
 * else the leak's projection. Ranks of one job step together, so their
 * iteration numbers compare. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/write/fmt.h"
#include "reports/read/json_read.h"
#include "tools/report_tool.h"

typedef struct rank_row {
    const char *path;
    int64_t rank;              /* -1: not known */
    int rank_from_name;
    const char *verdict;
    int64_t iterations;
    int64_t peak_allocated, peak_reserved;
    double leak_rate;          /* bytes per iteration */
    int64_t death;             /* iteration of the first OOM, or the projected one; -1 none */
    int died;                  /* 1: an OOM happened; 0: projected */
    char verdict_buf[32];
} rank_row;

/* The number at the end of the file's name ("run_3.json" -> 3); -1 if none. */
static int64_t rank_from_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *end = strrchr(base, '.');
    if (!end) end = base + strlen(base);
    const char *p = end;
    while (p > base && isdigit((unsigned char)p[-1])) p--;
    if (p == end || end - p > 9) return -1;
    return strtoll(p, NULL, 10);
}

static int bad_report(const char *path, const char *what) {
    fprintf(stderr, "%s: %s\n", path, what);
    return 2;
}

/* An int field along a path of keys; 0 if present (null counts as absent). */
static int int_at(const ca_val *v, const char *k1, const char *k2, int64_t *out) {
    v = ca_val_get(v, k1);
    if (k2) v = ca_val_get(v, k2);
    return ca_val_int(v, out) ? 0 : -1;
}

static int read_row(const char *path, rank_row *row) {
    char err[512], msg[640], *buf;
    size_t len;
    if (report_read_file(path, &buf, &len, err, sizeof err) != 0) return bad_report(path, err + strlen(path) + 2);
    ca_doc *doc = ca_json_parse(buf, len, err, sizeof err);
    free(buf);
    if (!doc) {
        snprintf(msg, sizeof msg, "not JSON: %s", err);
        return bad_report(path, msg);
    }
    const ca_val *r = ca_doc_root(doc);
    int64_t version;
    int rc = 0;
    const char *gen = ca_val_str(ca_val_get(r, "generator"));
    const ca_val *leaks = ca_val_get(r, "leak_bytes_per_iteration");
    memset(row, 0, sizeof *row);
    row->path = path;
    /* "cudalloc VERSION (git COMMIT)"; before the version was there, "cudalloc" */
    if (!gen || (strcmp(gen, "cudalloc") && strncmp(gen, "cudalloc ", 9))) {
        rc = bad_report(path, "not a cudalloc JSON report (no \"generator\": \"cudalloc ...\")");
    } else if (int_at(r, "version", NULL, &version) || version != 1) {
        rc = bad_report(path, "JSON report of another version: this cudalloc-report reads version 1");
    } else if (int_at(r, "summary", "peak_allocated_bytes", &row->peak_allocated) ||
               int_at(r, "summary", "peak_reserved_bytes", &row->peak_reserved) ||
               int_at(r, "iterations", "count", &row->iterations) || !ca_val_num(leaks, &row->leak_rate) ||
               !ca_val_str(ca_val_get(ca_val_get(r, "verdict"), "code"))) {
        rc = bad_report(path, "a cudalloc JSON report without summary.peak_allocated_bytes, "
                              "summary.peak_reserved_bytes, iterations.count, leak_bytes_per_iteration or "
                              "verdict.code");
    } else {
        snprintf(row->verdict_buf, sizeof row->verdict_buf, "%s", ca_val_str(ca_val_get(ca_val_get(r, "verdict"), "code")));
        row->verdict = row->verdict_buf;
        if (int_at(r, "rank", NULL, &row->rank)) {
            row->rank = rank_from_name(path);
            row->rank_from_name = row->rank >= 0;
        }
        int64_t ooms = 0, first = -1, projected = -1;
        int_at(r, "ooms_total", NULL, &ooms);
        const ca_val *o0 = ca_val_item(ca_val_get(r, "ooms"), 0);
        if (ooms > 0 && ca_val_int(ca_val_get(o0, "iteration"), &first)) {
            row->death = first;
            row->died = 1;
        } else if (!int_at(r, "leak_projected_oom_iteration", NULL, &projected)) {
            row->death = projected;
        } else {
            row->death = -1;
        }
    }
    ca_doc_free(doc);
    return rc;
}

static int by_rank(const void *a, const void *b) {
    const rank_row *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < 0 ? 1 : y->rank < 0 ? -1 : (x->rank > y->rank) - (x->rank < y->rank);
    return strcmp(x->path, y->path);
}

static const char *bytes(double v, char *b, size_t n) {
    ca_fmt_bytes(b, n, v < 0 ? 0 : v);
    return b;
}

int report_ranks(char *const *paths, int n) {
    rank_row *rows = calloc((size_t)n, sizeof *rows);
    if (!rows) return bad_report("cudalloc-report", "out of memory");
    for (int i = 0; i < n; i++) {
        int rc = read_row(paths[i], &rows[i]);
        if (rc) {
            free(rows);
            return rc;
        }
    }
    qsort(rows, (size_t)n, sizeof *rows, by_rank);
    for (int i = 1; i < n; i++)
        if (rows[i].rank >= 0 && rows[i].rank == rows[i - 1].rank) {
            fprintf(stderr, "%s: rank %" PRId64 " again (also %s): give each rank's report once\n", rows[i].path,
                    rows[i].rank, rows[i - 1].path);
            free(rows);
            return 2;
        }
    printf("%-5s %10s %15s %15s %15s  %-19s %-26s %s\n", "rank", "iterations", "peak allocated", "peak reserved",
           "leak/iteration", "verdict", "out of memory", "report");
    const rank_row *first = NULL;
    for (int i = 0; i < n; i++) {
        const rank_row *r = &rows[i];
        char rank[24], b1[32], b2[32], b3[32], oom[48];
        if (r->rank >= 0) snprintf(rank, sizeof rank, "%" PRId64, r->rank);
        else snprintf(rank, sizeof rank, "?");
        if (r->death < 0) snprintf(oom, sizeof oom, "-");
        else snprintf(oom, sizeof oom, "iteration %" PRId64 " (%s)", r->death, r->died ? "happened" : "projected");
        printf("%-5s %10" PRId64 " %15s %15s %15s  %-19s %-26s %s\n", rank, r->iterations,
               bytes((double)r->peak_allocated, b1, sizeof b1), bytes((double)r->peak_reserved, b2, sizeof b2),
               bytes(r->leak_rate, b3, sizeof b3), r->verdict, oom, r->path);
        if (r->death >= 0 && (!first || r->death < first->death || (r->death == first->death && r->died > first->died)))
            first = r;
    }
    int from_name = 0;
    for (int i = 0; i < n; i++) from_name |= rows[i].rank_from_name;
    if (from_name) printf("(ranks not in a report are read from the number ending its file name)\n");
    char b[32], who[64];
    if (first && first->rank >= 0) snprintf(who, sizeof who, "rank %" PRId64, first->rank);
    else if (first) snprintf(who, sizeof who, "the rank of %s", first->path);
    if (!first)
        printf("no rank ran out of memory, and none is projected to (no leak, or no device figures to project "
               "against)\n");
    else if (first->died)
        printf("%s runs out of memory first: it failed at iteration %" PRId64 "\n", who, first->death);
    else
        printf("%s runs out of memory first: projected at iteration %" PRId64 ", leaking %s per iteration\n", who,
               first->death, bytes(first->leak_rate, b, sizeof b));
    free(rows);
    return 0;
}
