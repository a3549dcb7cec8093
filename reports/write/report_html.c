/* PREFIX.html: one self-contained page (inline SVG from reports/write/svg.h, one
 * small inline script, no network): the verdict; the leaks as findings, each
 * shown once with its advice and its call sites folded beneath; memory event
 * by event (out-of-memory failures marked; hover shows the time, allocated,
 * reserved and the call stack of the nearest drawn event) and per iteration;
 * the segment map, fragmentation and the OOM verdicts. The drawings are in
 * report_html_plots.c. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "reports/diagnose/oom.h"
#include "reports/write/fixes_out.h"
#include "reports/write/report_internal.h"
#include "reports/write/svg.h"

#define MAX_FRAMES_SHOWN 12

static void td_bytes(FILE *f, double v) {
    char b[32];
    fprintf(f, "<td class=\"num\">%s</td>", ca_report_bytes(v, b, sizeof b));
}

static void row_bytes(FILE *f, const char *name, double v) {
    fputs("<tr><th>", f);
    ca_html_text(f, name);
    fputs("</th>", f);
    td_bytes(f, v);
    fputs("</tr>\n", f);
}

void ca_report_frame_text(const ca_frame *fr, char *buf, size_t n) {
    if (fr->line) snprintf(buf, n, "%s at %s:%u", fr->function, fr->file, fr->line);
    else snprintf(buf, n, "%s in %s", fr->function, fr->module);
}

static void frames_pre(const ca_report_ctx *c, FILE *f, uint32_t site) {
    char label[512];
    if (c->snap.site_mode == CA_SITES_SIZE) {
        ca_report_site_label(c, site, label, sizeof label);
        ca_html_escape(f, label);
        return;
    }
    const ca_frame *fr[MAX_FRAMES_SHOWN];
    size_t n = ca_report_frames(c, site, fr, MAX_FRAMES_SHOWN);
    ca_report_site_label(c, site, label, sizeof label);
    fputs("<details><summary>", f);
    ca_html_escape(f, label);
    fputs("</summary><pre>", f);
    for (size_t i = 0; i < n; i++) {
        char line[1024];
        int k = snprintf(line, sizeof line, "#%zu ", i);
        ca_report_frame_text(fr[i], line + k, sizeof line - (size_t)k - 1);
        strcat(line, "\n");
        ca_html_escape(f, line);
    }
    fputs("</pre></details>", f);
}

/* ---- findings ----
 *
 * A finding is one reason memory piles up (reports/diagnose/leaks.h): the call sites
 * one retained graph (or one kept list) grows through, shown once with one
 * advice text, its sites folded beneath. */

/* When the device runs out: after an OOM, when it did; else the projection
 * of this finding alone and, with several, of all leaks together (the
 * verdict line's figure). */
static void finding_when(const ca_report_ctx *c, FILE *f, const ca_finding *g) {
    const ca_oom_record *oom = ca_report_ran_out(c);
    if (oom) {
        fprintf(f, "<strong>The device ran out of memory at iteration %u.</strong>", oom->iteration);
        return;
    }
    if (g->note && g->iterations_to_fill >= 0) {
        fprintf(f, "It would fill the device in %.0f iterations.", g->iterations_to_fill);
        return;
    }
    if (g->projected_oom_iteration < 0) {
        fputs("When the device runs out: unknown (no device figures).", f);
        return;
    }
    fprintf(f, "At this rate the device runs out at iteration %" PRId64, g->projected_oom_iteration);
    if (c->n_leak_findings > 1 && c->leak_oom_iteration >= 0)
        fprintf(f, " (this finding alone; all leaks together: iteration %" PRId64 ")", c->leak_oom_iteration);
    fputs(".", f);
}

static void member_table(const ca_report_ctx *c, FILE *f, const ca_finding *g) {
    int alone = !ca_report_ran_out(c) && c->have_headroom && !g->note;
    fputs("<table>\n<tr><th>#</th><th>per iteration</th><th>allocations per iteration</th><th>growing since "
          "iteration</th><th>live now</th>",
          f);
    if (alone) fputs("<th>device runs out at iteration if only this site leaked</th>", f);
    fputs("<th>call site</th></tr>\n", f);
    for (size_t m = 0; m < g->n_sites; m++) {
        const ca_leak *l = &c->leaks[g->first + m];
        fprintf(f, "<tr><td>%zu</td>", m + 1);
        td_bytes(f, l->bytes_per_iteration);
        fprintf(f, "<td class=\"num\">%.2f</td><td class=\"num\">%u</td>", l->count_per_iteration, l->growth_since);
        td_bytes(f, (double)l->live_bytes);
        if (alone) {
            if (l->projected_oom_iteration >= 0) fprintf(f, "<td class=\"num\">%" PRId64 "</td>", l->projected_oom_iteration);
            else fputs("<td>unknown</td>", f);
        }
        fputs("<td>", f);
        frames_pre(c, f, l->site);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void finding_box(const ca_report_ctx *c, FILE *f, size_t i) {
    const ca_finding *g = &c->findings[i];
    char b1[32], b2[32], b3[32], title[1024];
    ca_report_finding_title(c, i, title, sizeof title);
    fprintf(f, "<div class=\"finding%s\">\n<h3>", g->note ? " note" : "");
    if (g->note) fprintf(f, "Note %zu, %s: ", i - c->n_leak_findings + 1, g->handoff ? "hand-off" : "slow growth");
    else fprintf(f, "Finding %zu: ", i + 1);
    ca_html_text(f, title);
    fprintf(f, ": +%s every iteration</h3>\n<p>", ca_report_bytes(g->bytes_per_iteration, b1, sizeof b1));
    fprintf(f, "%.1f allocations per iteration, growing since iteration %u; live now %s in %" PRIu64
               " allocations (%s above the level before the growth); %.*f%% of the working set per iteration. ",
            g->count_per_iteration, g->growth_since, ca_report_bytes((double)g->live_bytes, b2, sizeof b2),
            g->live_count, ca_report_bytes((double)g->leaked_bytes, b3, sizeof b3),
            ca_report_share_digits(g->working_set_share), g->working_set_share * 100);
    finding_when(c, f, g);
    fputs("</p>\n<p class=\"advice\"><strong>What to do:</strong> ", f);
    ca_html_text(f, g->advice);
    fputs("</p>\n", f);
    if (g->n_sites > 1) {
        fprintf(f, "<details><summary>The %zu call sites, most bytes per iteration first</summary>\n", g->n_sites);
        member_table(c, f, g);
        fputs("</details>\n", f);
    } else {
        fputs("<div>Allocated at: ", f);
        frames_pre(c, f, c->leaks[g->first].site);
        fputs("</div>\n", f);
    }
    fputs("</div>\n", f);
}

/* The peak and what held it, by the frame that names each call site. */
static void peak_section(const ca_report_ctx *c, FILE *f) {
    char b1[32];
    if (!c->have_peak) return;
    fprintf(f, "<h2>At the peak</h2>\n<p>%s allocated in %" PRIu64 " allocations at event %" PRIu64 " (iteration %u).</p>\n",
            ca_report_bytes((double)c->peak.allocated, b1, sizeof b1), c->peak.count, c->peak.seq, c->peak.iteration);
    fputs("<table>\n<tr><th>held</th><th>allocations</th><th>call sites</th><th>where</th></tr>\n", f);
    for (size_t i = 0; i < c->n_holders; i++) {
        fputs("<tr>", f);
        td_bytes(f, (double)c->holders[i].bytes);
        fprintf(f, "<td class=\"num\">%" PRIu64 "</td><td class=\"num\">%u</td><td>", c->holders[i].count,
                c->holders[i].sites);
        ca_html_escape(f, c->holders[i].label);
        fputs("</td></tr>\n", f);
    }
    if (c->others_count) {
        fputs("<tr>", f);
        td_bytes(f, (double)c->others_bytes);
        fprintf(f, "<td class=\"num\">%" PRIu64 "</td><td></td><td>elsewhere</td></tr>\n", c->others_count);
    }
    fputs("</table>\n", f);
}

/* Offline: the run replayed through cudalloc's allocator; with a capacity,
 * whether it fits. */
static void replay_section(const ca_report_ctx *c, FILE *f) {
    const ca_report_replay *r = c->opt.replay;
    char b1[32];
    if (!r) return;
    fprintf(f, "<h2>Replay under cudalloc</h2>\n<p>The run's %" PRIu64 " allocations and their frees, in order, "
               "through cudalloc's allocator (%s segments).</p>\n<table>\n",
            r->allocations, r->expandable ? "expandable" : "classic");
    row_bytes(f, "peak requested", (double)r->peak_requested);
    row_bytes(f, "peak reserved under cudalloc", (double)r->peak_reserved);
    row_bytes(f, "peak reserved by the recorded allocator", (double)c->snap.peak_reserved);
    row_bytes(f, "smallest device it fits on", (double)r->min_capacity);
    if (r->capacity) {
        row_bytes(f, "device asked about (--capacity)", (double)r->capacity);
        fprintf(f, "<tr><th>allocations that fail on it</th><td class=\"num\">%" PRIu64 "</td></tr>\n",
                r->ooms_at_capacity);
        if (c->does_not_fit) row_bytes(f, "missing", (double)c->missing);
    }
    fputs("</table>\n", f);
    if (r->capacity)
        fprintf(f, "<p class=\"verdict %s\">%s</p>\n", c->does_not_fit ? "bad" : r->failed_requests ? "" : "good",
                c->does_not_fit             ? "Does not fit."
                : r->failed_requests ? "The run would get through, the requests that failed when recorded included."
                                     : "Fits: no allocation fails.");
    (void)b1;
}

/* What the suppressions left out, when there are some. */
static void suppressed_html(const ca_report_ctx *c, FILE *f) {
    char text[1024];
    ca_report_suppressed_text(c, text, sizeof text);
    if (!*text) return;
    fputs("<p>", f);
    text[0] = 'S';
    ca_html_text(f, text);
    fputs(".</p>\n", f);
}

/* What is live now, by call site, most bytes first, with the stacks: for a
 * snapshot without a trace, and what a program still held at its end. */
static void live_section(const ca_report_ctx *c, FILE *f, int folded) {
    char b1[32];
    if (!c->snap.n_live && !c->suppressed.count) return;
    /* after a loop, the iterations said what grows: folded, one line */
    fputs(folded ? "<details><summary><h2 style=\"display:inline\">Live now, by call site</h2></summary>\n"
                 : "<h2>Live now, by call site</h2>\n",
          f);
    fprintf(f, "<p>%s in %zu allocations; the call sites holding the most, largest first (a program's end: what it "
               "never freed).</p>\n",
            ca_report_bytes((double)c->snap.allocated - (double)c->suppressed.bytes, b1, sizeof b1),
            c->snap.n_live - (size_t)c->suppressed.count);
    fputs("<table>\n<tr><th>live</th><th>allocations</th><th>call site</th></tr>\n", f);
    for (size_t i = 0; i < c->n_live_sites; i++) {
        const ca_site_stat *st = c->live_sites[i];
        fputs("<tr>", f);
        td_bytes(f, (double)st->live_bytes);
        fprintf(f, "<td class=\"num\">%" PRIu64 "</td><td>", st->live_count);
        frames_pre(c, f, st->site);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
    suppressed_html(c, f);
    if (folded) fputs("</details>\n", f);
}

static void leak_section(const ca_report_ctx *c, FILE *f) {
    const ca_track_snap *s = &c->snap;
    fputs("<h2>Leaks</h2>\n", f);
    if (c->opt.no_trace) {
        fputs("<p>No trace: leaks show over time, and the snapshot holds its segments only. ", f);
        ca_html_text(f, CA_HOW_TO_RECORD);
        fputs("</p>\n", f);
        return;
    }
    if (c->base_verdict == CA_VERDICT_SINGLE_PASS)
        fputs("<p>Not judged: fewer than two whole iterations.</p>\n", f);
    else if (!c->n_leak_findings)
        fputs(s->iteration ? "<p>No call site piles up allocations across iterations.</p>\n"
                           : "<p>No iteration boundaries: leaks cannot be judged.</p>\n",
              f);
    for (size_t i = 0; i < c->n_findings; i++) finding_box(c, f, i);
}

const char *ca_report_verdict_class(const ca_report_ctx *c) {
    return c->verdict == CA_VERDICT_OOM || c->verdict == CA_VERDICT_LEAK || c->verdict == CA_VERDICT_DOES_NOT_FIT ? "bad"
           : c->verdict == CA_VERDICT_HEALTHY                                                                 ? "good"
                                                                                                              : "";
}

void ca_report_html_units(FILE *f) {
    fputs("<p class=\"note\">Sizes are binary: 1 KiB = 1024 bytes, 1 MiB = 1024 KiB, 1 GiB = 1024 MiB. An "
          "abbreviation shows what it stands for when hovered.</p>\n",
          f);
}

int ca_report_html(const ca_report_ctx *c, FILE *f) {
    ca_html_begin(f, c->opt.title ? c->opt.title : "cudalloc report");
    ca_report_html_body(c, f);
    ca_report_html_units(f);
    ca_html_end(f);
    return ferror(f) ? -1 : 0;
}

void ca_report_html_body(const ca_report_ctx *c, FILE *f) {
    const ca_track_snap *s = &c->snap;
    char b1[32];
    const char *title = c->opt.title ? c->opt.title : "cudalloc report";
    fprintf(f, "<h1 id=\"report%s\">", c->id_suffix);
    ca_html_escape(f, title);
    fprintf(f, "</h1>\n<p class=\"verdict %s\"><strong>Verdict:</strong> ", ca_report_verdict_class(c));
    ca_html_text(f, c->verdict_line);
    fputs("</p>\n", f);
    if (c->opt.source_name) {
        fputs("<p>Trace: ", f);
        ca_html_escape(f, c->opt.source_name);
        fputs("</p>\n", f);
    }

    fputs("<h2>Summary</h2>\n<table>\n", f);
    fprintf(f, "<tr><th>iterations</th><td class=\"num\">%u</td></tr>\n<tr><th>iteration source</th><td>%s</td></tr>\n",
            s->iteration, ca_report_source_text(c));
    if (c->have_blocks) {
        char text[512];
        ca_report_blocks_text(c, text, sizeof text);
        fputs("<tr><th>repeated blocks (not iterations)</th><td>", f);
        ca_html_text(f, text);
        fputs("</td></tr>\n", f);
    }
    row_bytes(f, "allocated now", (double)s->allocated);
    row_bytes(f, "reserved now", (double)s->reserved);
    row_bytes(f, "peak allocated", (double)s->peak_allocated);
    row_bytes(f, "peak reserved", (double)s->peak_reserved);
    fprintf(f, "<tr><th>allocations / frees</th><td class=\"num\">%" PRIu64 " / %" PRIu64 "</td></tr>\n", s->n_allocs,
            s->n_frees);
    if (c->frag.have_device) {
        row_bytes(f, "device free", (double)c->frag.device_free);
        row_bytes(f, "device total", (double)c->frag.device_total);
    }
    fputs("</table>\n", f);

    leak_section(c, f);
    /* what is live answers a run with nothing over time to judge (no loop, a
     * snapshot without a trace); after a loop it comes last */
    int live_first = c->base_verdict == CA_VERDICT_NO_ITERATIONS || c->base_verdict == CA_VERDICT_NO_TRACE;
    if (live_first) live_section(c, f, 0);
    /* what held the peak answers a run whose iterations say nothing (a single
     * pass, no loop, an OOM); a leak's page has its findings, a healthy one
     * its breakdown under "what would fit" */
    if (c->base_verdict != CA_VERDICT_LEAK && c->base_verdict != CA_VERDICT_HEALTHY) peak_section(c, f);

    fputs("<h2>Memory</h2>\n", f);
    ca_report_html_time(c, f);
    ca_report_html_iterations(c, f);

    const ca_frag *fr = &c->frag;
    fputs("<h2>Fragmentation</h2>\n", f);
    ca_report_html_segments(c, f);
    fputs("<table>\n", f);
    row_bytes(f, "reserved", (double)fr->reserved);
    row_bytes(f, "allocated", (double)fr->allocated);
    row_bytes(f, "cached free", (double)fr->cached_free);
    row_bytes(f, "largest free block", (double)fr->largest_free);
    row_bytes(f, "largest allocation possible now", (double)fr->largest_allocation_now);
    if (c->opt.external_known) {
        row_bytes(f, "outside cudalloc: allocations (CUPTI)", (double)c->opt.external_alloc_bytes);
        row_bytes(f, "outside cudalloc: memory pools (CUPTI)", (double)c->opt.external_pool_bytes);
    }
    fprintf(f, "<tr><th>fragmentation</th><td class=\"num\">%.1f%%</td></tr>\n</table>\n", fr->fragmentation * 100);
    if (!c->opt.external_known && c->opt.external_note) {
        fputs("<p>Memory allocated past cudalloc: not measured (", f);
        ca_html_text(f, c->opt.external_note);
        fputs(").</p>\n", f);
    }
    fputs("<table>\n<tr><th>free blocks of at least</th><th>count</th><th>bytes</th></tr>\n", f);
    for (int b = 0; b < CA_FRAG_BINS; b++) {
        fprintf(f, "<tr><td>%s</td><td class=\"num\">%" PRIu64 "</td>",
                ca_report_bytes((double)ca_frag_bin_min(b), b1, sizeof b1), fr->hist_count[b]);
        td_bytes(f, (double)fr->hist_bytes[b]);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);

    replay_section(c, f);
    ca_fixes_html(f, &c->fixes, (const char *const *)c->fix_frames, c->id_suffix);

    fputs("<h2>Out of memory</h2>\n", f);
    if (!s->n_ooms) fputs("<p>No allocation failed.</p>\n", f);
    for (size_t i = 0; i < s->n_ooms; i++) {
        const ca_oom_record *r = &s->ooms[i];
        fprintf(f, "<h3>Out of memory %zu at iteration %u: %s requested</h3>\n", i + 1, r->iteration,
                ca_report_bytes((double)r->requested, b1, sizeof b1));
        if (r->have_info) {
            fputs("<p><strong>", f);
            ca_html_text(f, ca_oom_verdict_name(r->verdict));
            fputs("</strong>: ", f);
            ca_html_text(f, ca_oom_verdict_text(r->verdict));
            fputs(".</p>\n<table>\n", f);
            if (!r->info.device_total) {
                fputs("<tr><th>device</th><td>size and free memory not recorded (--capacity gives the size)</td></tr>\n", f);
            } else {
                row_bytes(f, "device free", (double)r->info.device_free);
                row_bytes(f, r->info.device_total_inferred ? "device total (inferred: reserved + free; not recorded)"
                                                           : "device total",
                          (double)r->info.device_total);
            }
            row_bytes(f, "allocated", (double)r->info.allocated);
            row_bytes(f, "reserved", (double)r->info.reserved);
            row_bytes(f, "cached", (double)r->info.free_cached);
            row_bytes(f, "largest free block", (double)r->info.largest_free);
            row_bytes(f, "held by leaks", (double)r->leaked_bytes);
            fputs("</table>\n<ul>\n", f);
            char lines[CA_REPORT_ADVICE_MAX][CA_FIX_LINE];
            size_t n = ca_report_oom_advice(c, r, lines, CA_REPORT_ADVICE_MAX);
            for (size_t k = 0; k < n; k++) {
                fputs("<li>", f);
                ca_html_text(f, lines[k]);
                fputs("</li>\n", f);
            }
            fputs("</ul>\n", f);
        }
        fputs("<div>Failed call: ", f);
        frames_pre(c, f, r->site);
        fputs("</div>\n", f);
        if (r->n_top) fputs("<table>\n<tr><th>live at the failure</th><th>allocations</th><th>call site</th></tr>\n", f);
        for (uint32_t k = 0; k < r->n_top; k++) {
            fputs("<tr>", f);
            td_bytes(f, (double)r->top_bytes[k]);
            fprintf(f, "<td class=\"num\">%" PRIu64 "</td><td>", r->top_count[k]);
            frames_pre(c, f, r->top_site[k]);
            fputs("</td></tr>\n", f);
        }
        if (r->n_top) fputs("</table>\n", f);
    }
    if (!live_first) live_section(c, f, 1);
}
