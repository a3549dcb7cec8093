/* cudalloc-report --diff BEFORE AFTER: two runs side by side, so a memory
 * regression between two commits is one command. Each side is a JSON report
 * (the preload's PREFIX.json), or a trace or snapshot diagnosed first as
 * cudalloc-report would (its JSON report, in a temporary file). Shown: the
 * peak, what is reserved and live at the end, fragmentation, the leak rate,
 * the verdicts; then each call site's memory at the peak (the label that
 * names it, as the reports do), what grew first, largest first, then what
 * shrank. With --fail-over, the exit status says whether the peak (allocated
 * or reserved) grew past the threshold: a percentage of the before side, or
 * a size. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reports/read/json_read.h"
#include "reports/write/fmt.h"
#include "tools/report_tool.h"
#include "util/quote.h"

#define SITES_SHOWN 15

/* A side's report, read back. */
typedef struct side {
    const char *path;
    ca_doc *doc;
    const ca_val *root;
} side;

static const char *bytes(double v, char *b, size_t n) {
    ca_fmt_bytes(b, n, fabs(v));
    return b;
}

/* The JSON report of a trace or a snapshot, written by the usual path to a
 * temporary file and read back. 0, or the status of the failure (said). */
static int json_of(const char *path, const report_args *args, char **buf, size_t *len) {
    char tmp[] = "/tmp/cudalloc-diff-XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "cudalloc-report: cannot make a temporary file for %s's report: %s\n", path, strerror(errno));
        return 1;
    }
    close(fd);
    report_args one = *args;
    memset(one.out, 0, sizeof one.out);
    one.out[1] = tmp;
    int rc = report_sniff(path) == 'p' ? report_snapshot(path, &one) : report_trace(path, &one);
    char err[1024];
    if (!rc && report_read_file(tmp, buf, len, err, sizeof err) != 0) {
        fprintf(stderr, "cudalloc-report: %s\n", err);
        rc = 1;
    }
    unlink(tmp);
    return rc;
}

static int load(side *s, const char *path, const report_args *args) {
    char err[512], *buf = NULL;
    size_t len;
    s->path = path;
    int rc = report_sniff(path) == 'j' ? (report_read_file(path, &buf, &len, err, sizeof err) ? 2 : 0)
                                       : json_of(path, args, &buf, &len);
    if (rc) {
        if (report_sniff(path) == 'j') fprintf(stderr, "%s\n", err);
        return rc;
    }
    s->doc = ca_json_parse(buf, len, err, sizeof err);
    free(buf);
    if (!s->doc) {
        fprintf(stderr, "%s: not JSON: %s\n", path, err);
        return 2;
    }
    s->root = ca_doc_root(s->doc);
    const char *gen = ca_val_str(ca_val_get(s->root, "generator"));
    if (!gen || strncmp(gen, "cudalloc", 8) || !ca_val_get(s->root, "summary")) {
        fprintf(stderr, "%s: not a cudalloc JSON report (no \"generator\": \"cudalloc ...\" and \"summary\")\n", path);
        return 2;
    }
    return 0;
}

/* A number along a path of keys; NAN when absent or null. */
static double num(const side *s, const char *k1, const char *k2) {
    const ca_val *v = ca_val_get(s->root, k1);
    if (k2) v = ca_val_get(v, k2);
    double d;
    return ca_val_num(v, &d) ? d : NAN;
}

static const char *verdict(const side *s) {
    const char *v = ca_val_str(ca_val_get(ca_val_get(s->root, "verdict"), "code"));
    return v ? v : "?";
}

/* "+1.50 MiB (+12.3%)", "-512 B (-0.1%)", "+2.00 MiB (new)", "same" */
static void change(double before, double after, char *buf, size_t n) {
    char b[32];
    double d = after - before;
    if (isnan(d)) snprintf(buf, n, "-");
    else if (d == 0) snprintf(buf, n, "same");
    else if (before > 0) snprintf(buf, n, "%c%s (%+.1f%%)", d > 0 ? '+' : '-', bytes(d, b, sizeof b), 100 * d / before);
    else snprintf(buf, n, "%c%s (new)", d > 0 ? '+' : '-', bytes(d, b, sizeof b));
}

static void row_bytes(const char *name, double before, double after) {
    char b1[32], b2[32], ch[64];
    change(before, after, ch, sizeof ch);
    printf("%-26s %12s %12s   %s\n", name, isnan(before) ? "-" : bytes(before, b1, sizeof b1),
           isnan(after) ? "-" : bytes(after, b2, sizeof b2), ch);
}

/* One call site's memory at the peak on both sides. */
typedef struct site_row {
    const char *label;
    double before, after;
} site_row;

static int by_growth(const void *a, const void *b) {
    const site_row *x = a, *y = b;
    double dx = x->after - x->before, dy = y->after - y->before;
    if (dx != dy) return dx < dy ? 1 : -1;
    return strcmp(x->label, y->label);
}

/* The peak's sites of both sides by label (peak.sites), with what the
 * labels do not cover as "elsewhere". *out malloc'ed; -1 out of memory. */
static long site_rows(const side *s0, const side *s1, site_row **out) {
    const ca_val *l0 = ca_val_get(ca_val_get(s0->root, "peak"), "sites");
    const ca_val *l1 = ca_val_get(ca_val_get(s1->root, "peak"), "sites");
    size_t n0 = ca_val_len(l0), n1 = ca_val_len(l1), n = 0;
    site_row *r = calloc(n0 + n1 + 1, sizeof *r);
    if (!r) return -1;
    double covered[2] = {0, 0};
    for (int side_i = 0; side_i < 2; side_i++) {
        const ca_val *l = side_i ? l1 : l0;
        for (size_t i = 0; i < (side_i ? n1 : n0); i++) {
            const ca_val *e = ca_val_item(l, i);
            const char *label = ca_val_str(ca_val_get(e, "site"));
            double b;
            if (!label || !ca_val_num(ca_val_get(e, "bytes"), &b)) continue;
            covered[side_i] += b;
            size_t k = 0;
            while (k < n && strcmp(r[k].label, label)) k++;
            if (k == n) r[n++].label = label;
            *(side_i ? &r[k].after : &r[k].before) += b;
        }
    }
    double p0 = num(s0, "peak", "allocated_bytes"), p1 = num(s1, "peak", "allocated_bytes");
    double e0 = isnan(p0) ? 0 : p0 - covered[0], e1 = isnan(p1) ? 0 : p1 - covered[1];
    if (e0 > 0 || e1 > 0) r[n++] = (site_row){"(elsewhere: call sites not named)", e0 > 0 ? e0 : 0, e1 > 0 ? e1 : 0};
    qsort(r, n, sizeof *r, by_growth);
    *out = r;
    return (long)n;
}

static void site_line(const site_row *r) {
    char b1[32], b2[32], ch[64], label[CA_QUOTE_BUF(200)];
    change(r->before, r->after, ch, sizeof ch);
    ca_quote(r->label, strlen(r->label), 200, label, sizeof label);
    printf("  %-22s %10s -> %-10s %s\n", ch, bytes(r->before, b1, sizeof b1), bytes(r->after, b2, sizeof b2), label);
}

/* A leak finding's key across runs: its root frame, else its title. */
static const char *finding_key(const ca_val *f) {
    const char *k = ca_val_str(ca_val_get(f, "root"));
    return k ? k : ca_val_str(ca_val_get(f, "title"));
}

/* The rate of side s's leak finding with this key; 0 when it has none. */
static double leak_rate(const side *s, const char *key) {
    const ca_val *l = ca_val_get(s->root, "findings");
    double r = 0, b;
    for (size_t i = 0; i < ca_val_len(l); i++) {
        const ca_val *f = ca_val_item(l, i);
        const char *sev = ca_val_str(ca_val_get(f, "severity")), *k = finding_key(f);
        if (sev && !strcmp(sev, "leak") && k && !strcmp(k, key) && ca_val_num(ca_val_get(f, "bytes_per_iteration"), &b))
            r += b;
    }
    return r;
}

/* The leaks of both sides, finding by finding (matched by root), to f
 * (NULL: not written); the after side's new or faster one most grown, for
 * the first line. */
static void leaks(const side *s, FILE *f, const char **worst, double *worst_growth) {
    *worst = NULL, *worst_growth = 0;
    int any = 0;
    for (int k = 1; k >= 0; k--) {
        const ca_val *l = ca_val_get(s[k].root, "findings");
        for (size_t i = 0; i < ca_val_len(l); i++) {
            const ca_val *fd = ca_val_item(l, i);
            const char *sev = ca_val_str(ca_val_get(fd, "severity")), *key = finding_key(fd);
            const char *title = ca_val_str(ca_val_get(fd, "title"));
            if (!sev || strcmp(sev, "leak") || !key || !title || (k == 0 && leak_rate(&s[1], key) > 0)) continue;
            double r0 = leak_rate(&s[0], key), r1 = leak_rate(&s[1], key);
            char b0[32], b1[32], t[CA_QUOTE_BUF(240)];
            ca_quote(title, strlen(title), 240, t, sizeof t);
            if (f && !any++) fprintf(f, "\nLeaks, finding by finding (bytes per iteration)\n");
            if (f)
                fprintf(f, "  %-10s -> %-10s %s%s\n", bytes(r0, b0, sizeof b0), bytes(r1, b1, sizeof b1), t,
                        !r0 ? " (new)" : !r1 ? " (gone)" : "");
            if (r1 - r0 > *worst_growth) *worst = title, *worst_growth = r1 - r0;
        }
    }
}

/* Did a figure grow past the threshold? */
static int over(const report_threshold *t, double before, double after) {
    if (isnan(before) || isnan(after) || after <= before) return 0;
    if (t->percent >= 0) return before <= 0 || 100 * (after - before) / before > t->percent;
    return after - before > (double)t->bytes;
}

int report_diff(const char *before, const char *after, const report_args *args, const report_threshold *t) {
    side s[2] = {{0}};
    int rc = load(&s[0], before, args);
    if (!rc) rc = load(&s[1], after, args);
    site_row *rows = NULL;
    long n = rc ? 0 : site_rows(&s[0], &s[1], &rows);
    if (!rc && n < 0) {
        fprintf(stderr, "cudalloc-report: out of memory\n");
        rc = 1;
    }
    if (rc) {
        ca_doc_free(s[0].doc), ca_doc_free(s[1].doc);
        return rc;
    }
    double pa0 = num(&s[0], "summary", "peak_allocated_bytes"), pa1 = num(&s[1], "summary", "peak_allocated_bytes");
    double pr0 = num(&s[0], "summary", "peak_reserved_bytes"), pr1 = num(&s[1], "summary", "peak_reserved_bytes");
    int fail_a = t && over(t, pa0, pa1), fail_r = t && over(t, pr0, pr1);
    char ch[64], b[32];
    /* the leaks are listed after the table; the first line names the worst */
    const char *worst;
    double worst_growth;
    leaks(s, NULL, &worst, &worst_growth);
    /* the first line says it all, as a report's verdict does */
    change(pa0, pa1, ch, sizeof ch);
    printf("%s: peak allocated %s", fail_a || fail_r ? "GREW" : t ? "WITHIN" : "DIFF", ch);
    change(pr0, pr1, ch, sizeof ch);
    printf(", peak reserved %s", ch);
    if (worst) printf("; leaks +%s per iteration more: %s", bytes(worst_growth, b, sizeof b), worst);
    if (n && rows[0].after > rows[0].before) {
        change(rows[0].before, rows[0].after, ch, sizeof ch);
        printf("; grew most at the peak: %s %s", rows[0].label, ch);
    }
    if (t) {
        if (t->percent >= 0) printf("; threshold %g%%", t->percent);
        else printf("; threshold %s", bytes((double)t->bytes, b, sizeof b));
    }
    printf(".\n\n%-26s %12s %12s   %s\n", "", "before", "after", "change");
    row_bytes("peak allocated", pa0, pa1);
    row_bytes("peak reserved", pr0, pr1);
    row_bytes("allocated at the end", num(&s[0], "summary", "allocated_bytes"), num(&s[1], "summary", "allocated_bytes"));
    row_bytes("reserved at the end", num(&s[0], "summary", "reserved_bytes"), num(&s[1], "summary", "reserved_bytes"));
    row_bytes("leak per iteration", num(&s[0], "leak_bytes_per_iteration", NULL), num(&s[1], "leak_bytes_per_iteration", NULL));
    double f0 = num(&s[0], "fragmentation", "fragmentation") * 100, f1 = num(&s[1], "fragmentation", "fragmentation") * 100;
    printf("%-26s %11.1f%% %11.1f%%   %+.1f points\n", "fragmentation", f0, f1, f1 - f0);
    printf("%-26s %12.0f %12.0f\n", "iterations", num(&s[0], "iterations", "count"), num(&s[1], "iterations", "count"));
    printf("%-26s %12s %12s\n", "verdict", verdict(&s[0]), verdict(&s[1]));

    printf("\nAt the peak, by call site: grew, largest first\n");
    int shown = 0;
    for (long i = 0; i < n && shown < SITES_SHOWN; i++)
        if (rows[i].after > rows[i].before) site_line(&rows[i]), shown++;
    if (!shown) printf("  none grew\n");
    printf("shrank, largest first\n");
    shown = 0;
    for (long i = n; i-- > 0 && shown < SITES_SHOWN;)
        if (rows[i].after < rows[i].before) site_line(&rows[i]), shown++;
    if (!shown) printf("  none shrank\n");
    leaks(s, stdout, &worst, &worst_growth);
    printf("\nbefore: %s\nafter:  %s\n", before, after);
    if (fail_a || fail_r)
        printf("the peak %s grew past the threshold: exit status 3\n",
               fail_a && fail_r ? "allocated and reserved" : fail_a ? "allocated" : "reserved");
    free(rows);
    ca_doc_free(s[0].doc), ca_doc_free(s[1].doc);
    return fail_a || fail_r ? 3 : 0;
}
