/* Several devices' reports read as one run (a snapshot of several devices):
 * a table across the devices first, with each one's verdict, then each
 * device's report, the devices that ran out of memory first (then by
 * ordinal). The text goes one report after another; the HTML is one page. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "reports/write/fileout.h"
#include "reports/write/report_internal.h"
#include "reports/write/svg.h"

/* Out of memory first, then leaks, then by ordinal. */
static int rank_of(const ca_report_ctx *c) {
    return c->snap.n_ooms ? 0 : c->verdict == CA_VERDICT_DOES_NOT_FIT ? 1 : c->verdict == CA_VERDICT_LEAK ? 2 : 3;
}

static int by_urgency(const void *a, const void *b) {
    const ca_report_ctx *x = *(const ca_report_ctx *const *)a, *y = *(const ca_report_ctx *const *)b;
    if (rank_of(x) != rank_of(y)) return rank_of(x) - rank_of(y);
    return x->snap.device - y->snap.device;
}

/* "OUT OF MEMORY on device 1 (of 3 devices). Each device's report follows,
 * ..." (c in the order shown: those that ran out first). */
static void headline(ca_report_ctx *const *c, size_t n, char *buf, size_t len) {
    size_t oom = 0, k = 0;
    while (oom < n && c[oom]->snap.n_ooms) oom++;
    if (!oom) k = (size_t)snprintf(buf, len, "no allocation failed on any of the %zu devices", n);
    else k = (size_t)snprintf(buf, len, "OUT OF MEMORY on device%s", oom > 1 ? "s" : "");
    for (size_t i = 0; i < oom && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s %d", i ? "," : "", c[i]->snap.device);
    if (oom && k < len) k += (size_t)snprintf(buf + k, len - k, " (of %zu devices)", n);
    if (k < len)
        snprintf(buf + k, len - k, ". Each device's report follows, %s.",
                 oom ? "the devices that ran out of memory first" : "leaks first, then by device");
}

static void table_txt(ca_report_ctx *const *c, size_t n, FILE *f) {
    char b1[32], b2[32], line[512];
    headline(c, n, line, sizeof line);
    fprintf(f, "DEVICES: %s\n\n%-7s %-19s %15s %15s %5s\n", line, "device", "verdict", "peak allocated", "peak reserved",
            "OOMs");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%-7d %-19s %15s %15s %5" PRIu64 "\n", c[i]->snap.device, ca_report_verdict_code(c[i]->verdict),
                ca_report_bytes((double)c[i]->snap.peak_allocated, b1, sizeof b1),
                ca_report_bytes((double)c[i]->snap.peak_reserved, b2, sizeof b2), c[i]->snap.n_ooms_total);
    fputc('\n', f);
    for (size_t i = 0; i < n; i++) fprintf(f, "device %d: %s\n", c[i]->snap.device, c[i]->verdict_line);
}

static int write_txt(ca_report_ctx *const *c, size_t n, const char *source, FILE *f) {
    table_txt(c, n, f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "\n=== device %d%s%s\n\n", c[i]->snap.device, source ? " of " : "", source ? source : "");
        if (ca_report_txt(c[i], f) != 0) return -1;
    }
    return ferror(f) ? -1 : 0;
}

static int write_html(ca_report_ctx *const *c, size_t n, const char *source, FILE *f) {
    char b1[32], b2[32], line[512];
    ca_html_begin(f, "cudalloc report: several devices");
    fputs("<h1>cudalloc report: several devices</h1>\n", f);
    if (source) {
        fputs("<p>Snapshot: ", f);
        ca_html_escape(f, source);
        fputs("</p>\n", f);
    }
    headline(c, n, line, sizeof line);
    fprintf(f, "<p class=\"verdict %s\"><strong>Verdict:</strong> ", ca_report_verdict_class(c[0]));
    ca_html_text(f, line);
    fputs("</p>\n<table>\n<tr><th>device</th><th>verdict</th><th>peak allocated</th><th>peak reserved</th>"
          "<th>failed allocations (out of memory)</th></tr>\n",
          f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "<tr><td><a href=\"#report%s\">device %d</a></td><td>", c[i]->id_suffix, c[i]->snap.device);
        ca_html_text(f, c[i]->verdict_line);
        fprintf(f, "</td><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"num\">%" PRIu64 "</td></tr>\n",
                ca_report_bytes((double)c[i]->snap.peak_allocated, b1, sizeof b1),
                ca_report_bytes((double)c[i]->snap.peak_reserved, b2, sizeof b2), c[i]->snap.n_ooms_total);
    }
    fputs("</table>\n", f);
    for (size_t i = 0; i < n; i++) {
        fputs("<hr>\n", f);
        ca_report_html_body(c[i], f);
    }
    ca_report_html_units(f);
    ca_html_end(f);
    return ferror(f) ? -1 : 0;
}

int ca_report_write_devices(ca_tracker *const *t, const ca_report_options *o, size_t n, unsigned format,
                            const char *path, char *err, size_t errlen) {
    ca_report_ctx *ctx = calloc(n ? n : 1, sizeof *ctx);
    ca_report_ctx **order = calloc(n ? n : 1, sizeof *order);
    size_t made = 0;
    int rc = -1;
    if (!ctx || !order || (format != CA_REPORT_TXT && format != CA_REPORT_HTML)) {
        snprintf(err, errlen, ctx && order ? "several devices: a text or HTML report only" : "out of memory");
        goto out;
    }
    for (; made < n; made++) {
        if (ca_report_ctx_init(&ctx[made], t[made], NULL, &o[made], format == CA_REPORT_HTML) != 0) {
            snprintf(err, errlen, "out of memory preparing the report");
            goto out;
        }
        snprintf(ctx[made].id_suffix, sizeof ctx[made].id_suffix, "-dev%d", ctx[made].snap.device);
        order[made] = &ctx[made];
    }
    qsort(order, n, sizeof *order, by_urgency);
    const char *source = n ? o[0].source_name : NULL;
    FILE *f = stdout;
    ca_out *out = NULL;
    if (strcmp(path, "-") && !(out = ca_out_open(path, err, errlen))) goto out;
    if (out) f = ca_out_file(out);
    rc = format == CA_REPORT_TXT ? write_txt(order, n, source, f) : write_html(order, n, source, f);
    if (out && rc) {
        snprintf(err, errlen, "%s: writing failed", path);
        ca_out_abort(out);
    } else if (out) {
        rc = ca_out_commit(out, err, errlen);
    } else if (fflush(stdout) != 0 || rc) {
        snprintf(err, errlen, "cannot write the report to stdout");
        rc = -1;
    }
out:
    for (size_t i = 0; i < made; i++) ca_report_ctx_free(&ctx[i]);
    free(ctx);
    free(order);
    return rc;
}
