/* The verdict: the first line of the text, verdict.code and .text in JSON,
 * the head of the HTML page; and what held the peak, which a run with no
 * iterations to compare is explained by. */
#include <stdlib.h>
#include <string.h>

#include "reports/diagnose/oom.h"
#include "reports/track/loops.h"
#include "reports/write/report_internal.h"

const char *ca_report_verdict_code(ca_verdict v) {
    switch (v) {
    case CA_VERDICT_LEAK: return "leak";
    case CA_VERDICT_OOM: return "oom";
    case CA_VERDICT_NO_ITERATIONS: return "no_iterations";
    case CA_VERDICT_FEW_ITERATIONS: return "too_few_iterations";
    case CA_VERDICT_SINGLE_PASS: return "single_pass";
    case CA_VERDICT_DOES_NOT_FIT: return "does_not_fit";
    case CA_VERDICT_NO_TRACE: return "no_trace";
    default: return "healthy";
    }
}

const char *ca_report_source_text(const ca_report_ctx *c) {
    if (c->snap.source == CA_ITER_EXPLICIT && c->opt.marks_name) return c->opt.marks_name;
    return ca_iter_source_name(c->snap.source);
}

static int by_holder_bytes(const void *x, const void *y) {
    const ca_report_holder *a = x, *b = y;
    if (a->bytes != b->bytes) return a->bytes < b->bytes ? 1 : -1;
    return strcmp(a->label, b->label);
}

void ca_report_peak_holders(ca_report_ctx *c) {
    c->n_holders = c->n_peak_labels = 0;
    c->others_bytes = c->others_count = 0;
    if (!c->have_peak || !c->peak.n_sites) return;
    ca_report_holder *all = calloc(c->peak.n_sites, sizeof *all);
    if (!all) return;
    size_t n = 0;
    for (size_t i = 0; i < c->peak.n_sites; i++) {
        const ca_peak_site *p = &c->peak.sites[i];
        if (i >= CA_REPORT_PEAK_SITES) {
            c->others_bytes += p->bytes, c->others_count += p->count;
            continue;
        }
        char label[sizeof all->label];
        ca_report_site_label(c, p->site, label, sizeof label);
        size_t k = 0;
        while (k < n && strcmp(all[k].label, label)) k++;
        if (k == n) memcpy(all[n++].label, label, sizeof label);
        all[k].bytes += p->bytes;
        all[k].count += p->count;
        all[k].sites++;
    }
    qsort(all, n, sizeof *all, by_holder_bytes);
    c->n_holders = n < CA_REPORT_HOLDERS ? n : CA_REPORT_HOLDERS;
    memcpy(c->holders, all, c->n_holders * sizeof *all);
    for (size_t k = c->n_holders; k < n; k++) c->others_bytes += all[k].bytes, c->others_count += all[k].count;
    free(c->peak_labels);
    c->peak_labels = all, c->n_peak_labels = n;
}

void ca_report_blocks_text(const ca_report_ctx *c, char *buf, size_t n) {
    const ca_blocks *k = &c->blocks;
    char b[32];
    const char *what = k->pass ? ca_pass_name((ca_pass_kind)k->pass)
                       : k->shape == CA_LOOP_CLIMBS ? "one pass, each keeping most of what it allocates (a forward "
                                                      "pass's layers)"
                       : k->shape == CA_LOOP_FALLS  ? "one pass, each freeing more than it allocates (a backward "
                                                      "pass's layers)"
                                                    : "one step, each a small share of its peak (an inner loop, as an "
                                                      "optimizer's over its parameters)";
    snprintf(buf, n, "%u blocks of %u allocations repeat inside %s", k->count, k->allocations, what);
    if (k->rise > 0) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "; each keeps %s more", ca_report_bytes((double)k->rise, b, sizeof b));
    }
}

/* Why a run has fewer than two whole iterations, for the verdict. */
static void single_pass_reason(const ca_report_ctx *c, char *buf, size_t n) {
    const ca_track_snap *s = &c->snap;
    *buf = 0;
    if (s->iteration)
        snprintf(buf, n, "%u boundar%s from %s%s", s->iteration, s->iteration == 1 ? "y" : "ies", ca_report_source_text(c),
                 c->have_blocks ? "; " : "");
    else if (!c->have_blocks)
        snprintf(buf, n, "no step annotation or mark, and no repeating loop");
    if (c->have_blocks) {
        size_t len = strlen(buf);
        ca_report_blocks_text(c, buf + len, n - len);
    }
}

/* "a (1.2 GiB), b (300 MiB) and 3 more (12 MiB)" */
static void holders_text(const ca_report_ctx *c, char *buf, size_t n, size_t most) {
    char b[32];
    size_t shown = c->n_holders < most ? c->n_holders : most;
    uint64_t rest = c->others_bytes;
    size_t rest_n = c->n_holders - shown;
    for (size_t i = shown; i < c->n_holders; i++) rest += c->holders[i].bytes;
    *buf = 0;
    for (size_t i = 0; i < shown; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s (%s)", i ? ", " : "", c->holders[i].label,
                 ca_report_bytes((double)c->holders[i].bytes, b, sizeof b));
    }
    if (rest && shown) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, " and %s more elsewhere", ca_report_bytes((double)rest, b, sizeof b));
    }
    (void)rest_n;
}

/* "; still live at the end: 3.00 MiB, the most (2.00 MiB in 1 allocation) by
 * make_table (prog.c:12); by call site below." and "." when nothing is. */
static void live_most(const ca_report_ctx *c, char *buf, size_t n) {
    char b1[32], b2[32], label[512];
    if (!c->n_live_sites) {
        snprintf(buf, n, ".");
        return;
    }
    const ca_site_stat *st = c->live_sites[0];
    ca_report_site_label(c, st->site, label, sizeof label);
    snprintf(buf, n, "; still live at the end: %s, the most (%s in %llu allocation%s) by %s; every call site below.",
             ca_report_bytes((double)c->snap.allocated - (double)c->suppressed.bytes, b1, sizeof b1),
             ca_report_bytes((double)st->live_bytes, b2, sizeof b2), (unsigned long long)st->live_count,
             st->live_count == 1 ? "" : "s", label);
}

static void base_verdict(ca_report_ctx *c) {
    const ca_track_snap *s = &c->snap;
    char b1[32], b2[32], b3[32];
    uint32_t whole = s->iteration ? s->iteration - 1 : 0;
    if (c->opt.no_trace && !s->n_ooms) {
        c->verdict = CA_VERDICT_NO_TRACE;
        char most[600] = "";
        if (c->n_live_sites) {
            char label[512];
            ca_report_site_label(c, c->live_sites[0]->site, label, sizeof label);
            snprintf(most, sizeof most, "; held most by %s: %s in %llu allocations", label,
                     ca_report_bytes((double)c->live_sites[0]->live_bytes, b3, sizeof b3),
                     (unsigned long long)c->live_sites[0]->live_count);
        }
        snprintf(c->verdict_line, sizeof c->verdict_line,
                 "NO TRACE: the snapshot holds its segments but no trace (it was taken without "
                 "torch.cuda.memory._record_memory_history()), so nothing over time can be judged, leaks "
                 "included. Live now %s in %zu allocations, reserved %s%s.",
                 ca_report_bytes((double)s->allocated, b1, sizeof b1), s->n_live,
                 ca_report_bytes((double)s->reserved, b2, sizeof b2), most);
    } else if (s->n_ooms) {
        const ca_oom_record *r = &s->ooms[s->n_ooms - 1];
        c->verdict = CA_VERDICT_OOM;
        snprintf(c->verdict_line, sizeof c->verdict_line,
                 "OUT OF MEMORY (%llu failed allocation%s), the last at iteration %u asking %s: %s.",
                 (unsigned long long)s->n_ooms_total, s->n_ooms_total == 1 ? "" : "s", r->iteration,
                 ca_report_bytes((double)r->requested, b1, sizeof b1),
                 r->have_info ? ca_oom_verdict_text(r->verdict) : "no allocator figures were given");
    } else if (c->n_leak_findings) {
        c->verdict = CA_VERDICT_LEAK;
        const ca_finding *f = &c->findings[0];
        char title[768], more[128] = "", when[96] = "";
        ca_report_finding_title(c, 0, title, sizeof title);
        if (c->n_leak_findings > 1)
            snprintf(more, sizeof more, " (%zu more finding%s: +%s every iteration in all)", c->n_leak_findings - 1,
                     c->n_leak_findings == 2 ? "" : "s", ca_report_bytes(c->leak_rate, b3, sizeof b3));
        if (c->leak_oom_iteration >= 0)
            snprintf(when, sizeof when, "; at this rate the device runs out at iteration %lld",
                     (long long)c->leak_oom_iteration);
        uint64_t held = s->n_bounds ? s->bounds[s->n_bounds - 1].allocated : s->allocated;
        snprintf(c->verdict_line, sizeof c->verdict_line, "LEAK: %s: +%s every iteration%s; held at the last boundary %s%s.",
                 title, ca_report_bytes(f->bytes_per_iteration, b1, sizeof b1), more,
                 ca_report_bytes((double)held, b2, sizeof b2), when);
    } else if (c->small_program) {
        c->verdict = CA_VERDICT_NO_ITERATIONS;
        int len = snprintf(c->verdict_line, sizeof c->verdict_line,
                           "NO ITERATIONS: a short program: %llu allocation%s (%llu freed, %zu live), peak allocated %s, "
                           "peak reserved %s; no loop, so no leak to judge",
                           (unsigned long long)s->n_allocs, s->n_allocs == 1 ? "" : "s", (unsigned long long)s->n_frees,
                           s->n_live, ca_report_bytes((double)s->peak_allocated, b1, sizeof b1),
                           ca_report_bytes((double)s->peak_reserved, b2, sizeof b2));
        if (len > 0 && (size_t)len < sizeof c->verdict_line)
            live_most(c, c->verdict_line + len, sizeof c->verdict_line - (size_t)len);
    } else if (s->time_is_index && whole < 2) {
        /* Offline (a snapshot, a trace): one step, a forward pass dumped... */
        char why[384], who[600];
        c->verdict = CA_VERDICT_SINGLE_PASS;
        single_pass_reason(c, why, sizeof why);
        holders_text(c, who, sizeof who, 3);
        snprintf(c->verdict_line, sizeof c->verdict_line,
                 "SINGLE PASS: fewer than two whole iterations in the trace (%s): no leak can be judged. Peak "
                 "allocated %s%s%s.",
                 why, ca_report_bytes((double)(c->have_peak ? c->peak.allocated : s->peak_allocated), b1, sizeof b1),
                 *who ? ", held by " : "", who);
    } else if (!s->iteration) {
        c->verdict = CA_VERDICT_NO_ITERATIONS;
        snprintf(c->verdict_line, sizeof c->verdict_line,
                 "NO ITERATIONS: no boundary was marked (cudalloc_step(), NVTX) or detected in %llu "
                 "allocations, so leaks cannot be told from a healthy loop's memory.",
                 (unsigned long long)s->n_allocs);
    } else if (s->iteration < s->warmup + CA_LEAK_MIN_GROWTHS) {
        c->verdict = CA_VERDICT_FEW_ITERATIONS;
        snprintf(c->verdict_line, sizeof c->verdict_line,
                 "TOO FEW ITERATIONS: %u (%s); a leak shows after warm-up (%u) plus %d iterations. "
                 "No leak so far.",
                 s->iteration, ca_report_source_text(c), s->warmup, CA_LEAK_MIN_GROWTHS);
    } else {
        c->verdict = CA_VERDICT_HEALTHY;
        snprintf(c->verdict_line, sizeof c->verdict_line,
                 "HEALTHY: no leak over %u iterations (%s); peak allocated %s, peak reserved %s, "
                 "fragmentation %.0f%% of %s cached.",
                 s->iteration, ca_report_source_text(c), ca_report_bytes((double)s->peak_allocated, b1, sizeof b1),
                 ca_report_bytes((double)s->peak_reserved, b2, sizeof b2), c->frag.fragmentation * 100,
                 ca_report_bytes((double)c->frag.cached_free, b3, sizeof b3));
    }
    if (c->verdict != CA_VERDICT_LEAK && c->n_findings > c->n_leak_findings) {
        /* Notes: said, never the verdict. */
        double slow = 0, handed = 0;
        for (size_t i = c->n_leak_findings; i < c->n_findings; i++)
            *(c->findings[i].handoff ? &handed : &slow) += c->findings[i].bytes_per_iteration;
        size_t len = strlen(c->verdict_line);
        if (slow > 0)
            len += (size_t)snprintf(c->verdict_line + len, sizeof c->verdict_line - len,
                                    " Note: slow growth of +%s per iteration, negligible (under %.1f%% of the working "
                                    "set per iteration; see the report).",
                                    ca_report_bytes(slow, b1, sizeof b1), 100.0 / CA_NOTE_WORKING_SETS);
        if (handed > 0 && len < sizeof c->verdict_line)
            snprintf(c->verdict_line + len, sizeof c->verdict_line - len,
                     " Note: +%s per iteration handed between call sites (some hold more at each boundary, others "
                     "as much less; the memory kept across boundaries is flat): not a leak.",
                     ca_report_bytes(handed, b1, sizeof b1));
    }
}

void ca_report_decide_verdict(ca_report_ctx *c) {
    base_verdict(c);
    c->base_verdict = c->verdict;
    const ca_report_replay *r = c->opt.replay;
    if (!r || !r->capacity || !r->ooms_at_capacity) return;
    c->missing = r->min_capacity > r->capacity ? r->min_capacity - r->capacity : 0;
    if (c->verdict == CA_VERDICT_OOM) return; /* it ran out: that verdict stands */
    /* The replay does not fit the device asked about: said first. */
    char b1[32], b2[32], b3[32], rest[sizeof c->verdict_line];
    c->does_not_fit = 1;
    c->verdict = CA_VERDICT_DOES_NOT_FIT;
    memcpy(rest, c->verdict_line, sizeof rest);
    snprintf(c->verdict_line, sizeof c->verdict_line,
             "DOES NOT FIT in %s: replayed through cudalloc's allocator, %llu allocation%s fail; the run needs %s "
             "(%s missing). Besides: %s",
             ca_report_bytes((double)r->capacity, b1, sizeof b1), (unsigned long long)r->ooms_at_capacity,
             r->ooms_at_capacity == 1 ? "" : "s", ca_report_bytes((double)r->min_capacity, b2, sizeof b2),
             ca_report_bytes((double)c->missing, b3, sizeof b3), rest);
}
